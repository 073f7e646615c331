//! AWS regions and availability zone ids.

/// Commercial and GovCloud regions hyperforge knows (the regions named in the instance catalog
/// plus the other commercial regions).
pub const KNOWN_REGIONS: &[&str] = &[
    "af-south-1",
    "ap-east-1",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-south-1",
    "ap-south-2",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ca-central-1",
    "eu-central-1",
    "eu-central-2",
    "eu-north-1",
    "eu-south-1",
    "eu-south-2",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "il-central-1",
    "me-central-1",
    "me-south-1",
    "sa-east-1",
    "us-east-1",
    "us-east-2",
    "us-gov-east-1",
    "us-gov-west-1",
    "us-west-1",
    "us-west-2",
];

/// Whether `region` is a region hyperforge knows.
pub fn is_known_region(region: &str) -> bool {
    KNOWN_REGIONS.contains(&region)
}

/// The prefix availability zone ids use for a region (`us-west-2` -> `usw2`):
/// the area's letters, the first letter of each direction word (two for a compound direction:
/// `ap-northeast-2` -> `apne2`), and the number.
pub fn zone_id_prefix(region: &str) -> Option<String> {
    let parts: Vec<&str> = region.split('-').collect();
    let (number, words) = parts.split_last()?;
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) || words.is_empty() {
        return None;
    }
    let mut prefix = String::new();
    for (i, word) in words.iter().enumerate() {
        // The area keeps its letters (`us`, `eu`, `ap`, `sa`, `ca`, `me`, `af`, `il`), except
        // GovCloud (`us-gov-west-1` -> `usgw1`); directions contribute their first letter.
        // Compound directions keep two letters (`ap-northeast-2` -> `apne2`,
        // `ap-southeast-1` -> `apse1`), as AWS spells them.
        match (i, *word) {
            (0, _) => prefix.push_str(word),
            (_, "northeast" | "northwest" | "southeast" | "southwest") => {
                prefix.push_str(&word[..1]);
                prefix.push_str(&word[5..6]);
            }
            _ => prefix.push(word.chars().next()?),
        }
    }
    prefix.push_str(number);
    Some(prefix)
}

/// An availability zone id such as `usw2-az2`: same zone in every account, unlike `us-west-2a`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AzId(String);

impl AzId {
    /// Parses `usw2-az2`; `None` if it does not have the shape `<prefix>-az<N>`.
    pub fn parse(text: &str) -> Option<AzId> {
        let (prefix, zone) = text.split_once("-az")?;
        let prefix_ok = prefix.len() >= 3
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && prefix.chars().last().is_some_and(|c| c.is_ascii_digit());
        let zone_ok =
            !zone.is_empty() && zone.len() <= 2 && zone.chars().all(|c| c.is_ascii_digit());
        (prefix_ok && zone_ok).then(|| AzId(text.to_owned()))
    }

    /// The region prefix (`usw2`).
    pub fn region_prefix(&self) -> &str {
        self.0.split_once("-az").map_or("", |(p, _)| p)
    }

    /// Whether the zone belongs to `region`.
    pub fn is_in_region(&self, region: &str) -> bool {
        zone_id_prefix(region).as_deref() == Some(self.region_prefix())
    }

    /// The id as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for AzId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_id_prefixes() {
        assert_eq!(zone_id_prefix("us-west-2").as_deref(), Some("usw2"));
        assert_eq!(zone_id_prefix("us-east-1").as_deref(), Some("use1"));
        assert_eq!(zone_id_prefix("ap-southeast-3").as_deref(), Some("apse3"));
        assert_eq!(zone_id_prefix("ap-northeast-2").as_deref(), Some("apne2"));
        assert_eq!(zone_id_prefix("ap-south-2").as_deref(), Some("aps2"));
        assert_eq!(zone_id_prefix("eu-central-1").as_deref(), Some("euc1"));
        assert_eq!(zone_id_prefix("us-gov-west-1").as_deref(), Some("usgw1"));
        assert_eq!(zone_id_prefix("nowhere"), None);
    }

    #[test]
    fn az_ids_parse_and_know_their_region() {
        let az = AzId::parse("usw2-az2").unwrap();
        assert!(az.is_in_region("us-west-2"));
        assert!(!az.is_in_region("us-east-1"));
        assert!(AzId::parse("us-west-2a").is_none());
        assert!(AzId::parse("usw2-az").is_none());
        assert!(AzId::parse("").is_none());
    }
}
