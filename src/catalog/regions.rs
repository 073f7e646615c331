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

/// The availability zone ids of each region hyperforge knows, as the AWS Regions and
/// Availability Zones guide lists them ("AWS Availability Zones",
/// docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html, Local
/// and Wavelength Zones left out); GovCloud's from the API Gateway VPC links (V2) and MemoryDB
/// subnet group pages, which the guide does not cover. `euw2-az4`, in one edition of the guide
/// only, is left out. A zone id is the same zone in every account, unlike a zone name.
const ZONE_IDS: &[(&str, &[&str])] = &[
    ("af-south-1", &["afs1-az1", "afs1-az2", "afs1-az3"]),
    ("ap-east-1", &["ape1-az1", "ape1-az2", "ape1-az3"]),
    (
        "ap-northeast-1",
        &["apne1-az1", "apne1-az2", "apne1-az3", "apne1-az4"],
    ),
    (
        "ap-northeast-2",
        &["apne2-az1", "apne2-az2", "apne2-az3", "apne2-az4"],
    ),
    ("ap-northeast-3", &["apne3-az1", "apne3-az2", "apne3-az3"]),
    ("ap-south-1", &["aps1-az1", "aps1-az2", "aps1-az3"]),
    ("ap-south-2", &["aps2-az1", "aps2-az2", "aps2-az3"]),
    ("ap-southeast-1", &["apse1-az1", "apse1-az2", "apse1-az3"]),
    ("ap-southeast-2", &["apse2-az1", "apse2-az2", "apse2-az3"]),
    ("ap-southeast-3", &["apse3-az1", "apse3-az2", "apse3-az3"]),
    ("ap-southeast-4", &["apse4-az1", "apse4-az2", "apse4-az3"]),
    ("ca-central-1", &["cac1-az1", "cac1-az2", "cac1-az4"]),
    ("eu-central-1", &["euc1-az1", "euc1-az2", "euc1-az3"]),
    ("eu-central-2", &["euc2-az1", "euc2-az2", "euc2-az3"]),
    ("eu-north-1", &["eun1-az1", "eun1-az2", "eun1-az3"]),
    ("eu-south-1", &["eus1-az1", "eus1-az2", "eus1-az3"]),
    ("eu-south-2", &["eus2-az1", "eus2-az2", "eus2-az3"]),
    ("eu-west-1", &["euw1-az1", "euw1-az2", "euw1-az3"]),
    ("eu-west-2", &["euw2-az1", "euw2-az2", "euw2-az3"]),
    ("eu-west-3", &["euw3-az1", "euw3-az2", "euw3-az3"]),
    ("il-central-1", &["ilc1-az1", "ilc1-az2", "ilc1-az3"]),
    ("me-central-1", &["mec1-az1", "mec1-az2", "mec1-az3"]),
    ("me-south-1", &["mes1-az1", "mes1-az2", "mes1-az3"]),
    ("sa-east-1", &["sae1-az1", "sae1-az2", "sae1-az3"]),
    (
        "us-east-1",
        &[
            "use1-az1", "use1-az2", "use1-az3", "use1-az4", "use1-az5", "use1-az6",
        ],
    ),
    ("us-east-2", &["use2-az1", "use2-az2", "use2-az3"]),
    ("us-gov-east-1", &["usge1-az1", "usge1-az2", "usge1-az3"]),
    ("us-gov-west-1", &["usgw1-az1", "usgw1-az2", "usgw1-az3"]),
    ("us-west-1", &["usw1-az1", "usw1-az2", "usw1-az3"]),
    (
        "us-west-2",
        &["usw2-az1", "usw2-az2", "usw2-az3", "usw2-az4"],
    ),
];

/// Zones a subnet spread over the region should not default to: where EKS cannot place a
/// cluster's subnets (Amazon EKS User Guide, "VPC and subnet requirements", cluster subnets:
/// `use1-az3`, `usw1-az2`, `cac1-az3`; the guide says newer accounts reach two zones of
/// us-west-1), and `apne1-az3`, where EC2 no longer creates subnets ("Subnets can currently only
/// be created in the following availability zones: apne1-az1, apne1-az2, apne1-az4", its
/// CreateSubnet error).
const NOT_SPREAD_ZONE_IDS: &[&str] = &["use1-az3", "usw1-az2", "cac1-az3", "apne1-az3"];

/// The zone ids of `region` (empty for a region hyperforge does not know).
pub fn zone_ids(region: &str) -> &'static [&'static str] {
    ZONE_IDS
        .iter()
        .find(|(r, _)| *r == region)
        .map_or(&[], |(_, ids)| ids)
}

/// The zones a network spreads its public and private subnets over, in order: the region's
/// zones where every account can create subnets for an EKS cluster.
pub fn spread_zone_ids(region: &str) -> Vec<&'static str> {
    zone_ids(region)
        .iter()
        .copied()
        .filter(|z| !NOT_SPREAD_ZONE_IDS.contains(z))
        .collect()
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
    fn every_known_region_spreads_over_two_zones_of_its_own() {
        for region in KNOWN_REGIONS {
            let spread = spread_zone_ids(region);
            assert!(spread.len() >= 2, "{region}: {spread:?}");
            for id in zone_ids(region) {
                let az = AzId::parse(id).unwrap_or_else(|| panic!("{id}"));
                assert!(az.is_in_region(region), "{id} in {region}");
            }
        }
        assert_eq!(ZONE_IDS.len(), KNOWN_REGIONS.len());
        assert_eq!(spread_zone_ids("us-west-1"), ["usw1-az1", "usw1-az3"]);
        assert_eq!(spread_zone_ids("nowhere"), Vec::<&str>::new());
    }

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
