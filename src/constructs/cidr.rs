//! IPv4 CIDR blocks and the arithmetic of carving subnets out of them.

use std::fmt;
use std::str::FromStr;

/// An IPv4 CIDR block with its host bits zero (`10.192.0.0/16`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ipv4Cidr {
    network: u32,
    prefix: u8,
}

/// Why a CIDR block did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CidrError {
    /// Not `a.b.c.d/n`.
    Syntax,
    /// Prefix length above 32.
    Prefix,
    /// Bits set below the prefix (`10.0.0.1/16`); carries the corrected block.
    HostBits(Ipv4Cidr),
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CidrError::Syntax => f.write_str("expected an IPv4 block like 10.192.0.0/16"),
            CidrError::Prefix => f.write_str("the prefix length must be 0 to 32"),
            CidrError::HostBits(fixed) => write!(f, "host bits are set; did you mean {fixed}?"),
        }
    }
}

impl Ipv4Cidr {
    /// The block's prefix length.
    pub fn prefix(self) -> u8 {
        self.prefix
    }

    /// Number of addresses in the block.
    pub fn size(self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    /// The `index`-th block of prefix `new_prefix` inside this one, if it fits.
    pub fn subnet(self, new_prefix: u8, index: u32) -> Option<Ipv4Cidr> {
        if new_prefix < self.prefix || new_prefix > 32 {
            return None;
        }
        let count = 1u64 << (new_prefix - self.prefix);
        if u64::from(index) >= count {
            return None;
        }
        let step = 1u64 << (32 - u32::from(new_prefix));
        let network = u64::from(self.network) + u64::from(index) * step;
        Some(Ipv4Cidr {
            network: u32::try_from(network).ok()?,
            prefix: new_prefix,
        })
    }

    /// Whether the two blocks share any address.
    pub fn overlaps(self, other: Ipv4Cidr) -> bool {
        let shorter = self.prefix.min(other.prefix);
        let mask = mask(shorter);
        self.network & mask == other.network & mask
    }
}

fn mask(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    }
}

impl FromStr for Ipv4Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = s.split_once('/').ok_or(CidrError::Syntax)?;
        let addr: std::net::Ipv4Addr = addr.parse().map_err(|_| CidrError::Syntax)?;
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_digit()) || prefix.len() > 2 {
            return Err(CidrError::Syntax);
        }
        let prefix: u8 = prefix.parse().map_err(|_| CidrError::Syntax)?;
        if prefix > 32 {
            return Err(CidrError::Prefix);
        }
        let bits = u32::from(addr);
        let network = bits & mask(prefix);
        if network != bits {
            return Err(CidrError::HostBits(Ipv4Cidr { network, prefix }));
        }
        Ok(Ipv4Cidr { network, prefix })
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            std::net::Ipv4Addr::from(self.network),
            self.prefix
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Ipv4Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_and_rejects() {
        assert_eq!(c("10.192.0.0/16").to_string(), "10.192.0.0/16");
        assert_eq!("10.0.0.0/33".parse::<Ipv4Cidr>(), Err(CidrError::Prefix));
        assert_eq!("10.0.0/16".parse::<Ipv4Cidr>(), Err(CidrError::Syntax));
        assert_eq!("10.0.0.0".parse::<Ipv4Cidr>(), Err(CidrError::Syntax));
        assert_eq!(
            "10.0.0.1/16".parse::<Ipv4Cidr>(),
            Err(CidrError::HostBits(c("10.0.0.0/16")))
        );
    }

    #[test]
    fn carves_subnets() {
        let vpc = c("10.192.0.0/16");
        assert_eq!(vpc.subnet(24, 0), Some(c("10.192.0.0/24")));
        assert_eq!(vpc.subnet(24, 129), Some(c("10.192.129.0/24")));
        assert_eq!(vpc.subnet(24, 256), None);
        assert_eq!(vpc.subnet(8, 0), None);
        assert_eq!(vpc.size(), 65_536);
    }

    #[test]
    fn overlap() {
        assert!(c("10.0.0.0/8").overlaps(c("10.1.0.0/16")));
        assert!(!c("10.192.0.0/16").overlaps(c("10.1.0.0/16")));
    }
}
