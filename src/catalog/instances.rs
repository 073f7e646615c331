//! GPU instance types: accelerators, memory, network layout, where they are offered and what
//! they cost on demand.
//!
//! Sources: GPU memory per GPU in MiB, vCPUs, memory, local NVMe, EFA maximum and network cards
//! as the EC2 `DescribeInstanceTypes` API reports them (republished by Karpenter's generated
//! instance-type reference and the VPC CNI's limits table, mid-2026). HyperPod (`ml.`) regions:
//! cfn-lint's pricing-derived `AWS::SageMaker::Cluster` instance-type enum (2026-08-11). EC2
//! regions for the p6 family: cfn-lint's EC2 instance-type data (2026-10-20). On-demand prices:
//! the AWS Price List for us-east-1 as generated 2026-07-20.

/// One instance type.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceType {
    /// The EC2 name (`p6-b300.48xlarge`).
    pub name: &'static str,
    /// The accelerator (`NVIDIA B300`).
    pub accelerator: &'static str,
    /// GPUs per instance.
    pub gpu_count: u32,
    /// Memory per GPU in MiB, as the EC2 API reports it.
    pub gpu_memory_mib: u64,
    /// vCPUs.
    pub vcpus: u32,
    /// System memory in MiB.
    pub memory_mib: u64,
    /// Local NVMe instance storage in GB (decimal).
    pub local_nvme_gb: u64,
    /// Baseline network bandwidth in Gbps.
    pub network_gbps: u32,
    /// Maximum EFA interfaces (`EfaInfo.MaximumEfaInterfaces`).
    pub efa_max: u32,
    /// Network cards.
    pub network_cards: u32,
    /// Whether GPUs are joined by NVLink (tensor parallelism inside the node is cheap).
    pub nvlink: bool,
    /// Regions where the HyperPod `ml.` variant is offered.
    pub hyperpod_regions: &'static [&'static str],
    /// Regions where EC2 offers the type, when known (empty: not recorded).
    pub ec2_regions: &'static [&'static str],
    /// Published on-demand price in us-east-1, USD per hour (`None`: not published there).
    pub on_demand_usd_per_hour_us_east_1: Option<f64>,
}

/// The regions whose on-demand prices the catalog holds (the AWS Price List was read for
/// us-east-1 only). Prices differ between regions, so no other region is priced from them.
pub const PRICED_REGIONS: &[&str] = &["us-east-1"];

impl InstanceType {
    /// The published EC2 on-demand price in `region`, USD per hour; `None` when the catalog
    /// holds no price there (every region outside [`PRICED_REGIONS`]).
    pub fn on_demand_usd_per_hour(&self, region: &str) -> Option<f64> {
        match region {
            "us-east-1" => self.on_demand_usd_per_hour_us_east_1,
            _ => None,
        }
    }

    /// The SageMaker HyperPod name (`ml.p6-b300.48xlarge`).
    pub fn ml_name(&self) -> String {
        format!("ml.{}", self.name)
    }

    /// Whether HyperPod offers the `ml.` variant in `region`.
    pub fn hyperpod_offered_in(&self, region: &str) -> bool {
        self.hyperpod_regions.contains(&region)
    }

    /// Total GPU memory in MiB.
    pub fn total_gpu_memory_mib(&self) -> u64 {
        self.gpu_memory_mib * u64::from(self.gpu_count)
    }

    /// The NCCL all-reduce bus bandwidth, GB/s, under which a group of these instances is not
    /// using its EFA network: a tenth of the instance's network bandwidth in bytes
    /// (`network_gbps` / 8 / 10; 40 GB/s on p5, p5en and p6-b200, 80 on p6-b300); 0 without
    /// EFA.
    ///
    /// Why a tenth: an all-reduce across nodes moves every byte over the network, so its bus
    /// bandwidth (NCCL tests' measure, which does not depend on the rank count) is bounded by
    /// the per-instance network bandwidth, and on a healthy EFA fabric comes within a small
    /// factor of it. NCCL's socket transport over the instance's single ENA primary interface,
    /// what NCCL falls back to, stays far below a tenth of the aggregate (one of 8 to 32
    /// network cards, through the kernel's TCP stack). The floor is meant to separate "EFA" from
    /// "not EFA" with margin for message size and topology, not to grade a fabric.
    pub fn all_reduce_floor_gbs(&self) -> f64 {
        if self.efa_max == 0 {
            return 0.0;
        }
        f64::from(self.network_gbps) / 8.0 / 10.0
    }
}

const P6_EC2_REGIONS: &[&str] = &[
    "ap-northeast-2",
    "ap-south-2",
    "ap-southeast-3",
    "eu-west-2",
    "sa-east-1",
    "us-east-1",
    "us-gov-east-1",
    "us-west-2",
];

const P5_48_HYPERPOD: &[&str] = &[
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ca-central-1",
    "eu-central-1",
    "eu-north-1",
    "eu-west-1",
    "eu-west-2",
    "sa-east-1",
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
];

const P4D_HYPERPOD: &[&str] = &[
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-south-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ca-central-1",
    "eu-central-1",
    "eu-north-1",
    "eu-west-1",
    "eu-west-2",
    "us-east-1",
    "us-east-2",
    "us-west-2",
];

static INSTANCES: &[InstanceType] = &[
    InstanceType {
        name: "p6-b300.48xlarge",
        accelerator: "NVIDIA B300",
        gpu_count: 8,
        gpu_memory_mib: 275_040,
        vcpus: 192,
        memory_mib: 4_194_304,
        local_nvme_gb: 30_400,
        network_gbps: 6_400,
        efa_max: 16,
        network_cards: 17,
        nvlink: true,
        hyperpod_regions: &["us-east-1", "us-west-2"],
        ec2_regions: P6_EC2_REGIONS,
        on_demand_usd_per_hour_us_east_1: Some(142.416),
    },
    InstanceType {
        name: "p6-b200.48xlarge",
        accelerator: "NVIDIA B200",
        gpu_count: 8,
        gpu_memory_mib: 183_359,
        vcpus: 192,
        memory_mib: 2_097_152,
        local_nvme_gb: 30_400,
        network_gbps: 3_200,
        efa_max: 8,
        network_cards: 8,
        nvlink: true,
        hyperpod_regions: &["us-west-2"],
        ec2_regions: &[],
        on_demand_usd_per_hour_us_east_1: Some(113.9328),
    },
    InstanceType {
        name: "p5en.48xlarge",
        accelerator: "NVIDIA H200",
        gpu_count: 8,
        gpu_memory_mib: 144_384,
        vcpus: 192,
        memory_mib: 2_097_152,
        local_nvme_gb: 30_400,
        network_gbps: 3_200,
        efa_max: 16,
        network_cards: 16,
        nvlink: true,
        hyperpod_regions: &[
            "ap-northeast-1",
            "ap-south-1",
            "eu-north-1",
            "eu-south-2",
            "us-east-2",
            "us-west-2",
        ],
        ec2_regions: &[],
        on_demand_usd_per_hour_us_east_1: Some(63.296),
    },
    InstanceType {
        name: "p5e.48xlarge",
        accelerator: "NVIDIA H200",
        gpu_count: 8,
        gpu_memory_mib: 144_384,
        vcpus: 192,
        memory_mib: 2_097_152,
        local_nvme_gb: 30_400,
        network_gbps: 3_200,
        efa_max: 32,
        network_cards: 32,
        nvlink: true,
        hyperpod_regions: &[],
        ec2_regions: &[],
        on_demand_usd_per_hour_us_east_1: None,
    },
    InstanceType {
        name: "p5.48xlarge",
        accelerator: "NVIDIA H100",
        gpu_count: 8,
        gpu_memory_mib: 81_920,
        vcpus: 192,
        memory_mib: 2_097_152,
        local_nvme_gb: 30_400,
        network_gbps: 3_200,
        efa_max: 32,
        network_cards: 32,
        nvlink: true,
        hyperpod_regions: P5_48_HYPERPOD,
        ec2_regions: &[],
        on_demand_usd_per_hour_us_east_1: Some(55.04),
    },
    InstanceType {
        name: "p5.4xlarge",
        accelerator: "NVIDIA H100",
        gpu_count: 1,
        gpu_memory_mib: 81_920,
        vcpus: 16,
        memory_mib: 262_144,
        local_nvme_gb: 3_800,
        network_gbps: 100,
        efa_max: 1,
        network_cards: 1,
        nvlink: false,
        hyperpod_regions: &[
            "ap-northeast-1",
            "ap-south-1",
            "ap-southeast-2",
            "ap-southeast-3",
            "eu-west-2",
            "sa-east-1",
            "us-east-1",
            "us-east-2",
            "us-west-2",
        ],
        ec2_regions: &[],
        on_demand_usd_per_hour_us_east_1: Some(6.88),
    },
    InstanceType {
        name: "p4de.24xlarge",
        accelerator: "NVIDIA A100 80GB",
        gpu_count: 8,
        gpu_memory_mib: 81_920,
        vcpus: 96,
        memory_mib: 1_179_648,
        local_nvme_gb: 8_000,
        network_gbps: 400,
        efa_max: 4,
        network_cards: 4,
        nvlink: true,
        hyperpod_regions: &[
            "ap-northeast-1",
            "ap-south-1",
            "ap-southeast-1",
            "ap-southeast-2",
            "eu-central-1",
            "eu-north-1",
            "eu-west-1",
            "sa-east-1",
            "us-east-1",
            "us-east-2",
            "us-west-2",
        ],
        ec2_regions: &[],
        on_demand_usd_per_hour_us_east_1: Some(27.44705),
    },
    InstanceType {
        name: "p4d.24xlarge",
        accelerator: "NVIDIA A100 40GB",
        gpu_count: 8,
        gpu_memory_mib: 40_960,
        vcpus: 96,
        memory_mib: 1_179_648,
        local_nvme_gb: 8_000,
        network_gbps: 400,
        efa_max: 4,
        network_cards: 4,
        nvlink: true,
        hyperpod_regions: P4D_HYPERPOD,
        ec2_regions: &[],
        on_demand_usd_per_hour_us_east_1: Some(21.957642),
    },
    InstanceType {
        name: "g6e.48xlarge",
        accelerator: "NVIDIA L40S",
        gpu_count: 8,
        gpu_memory_mib: 45_776,
        vcpus: 192,
        memory_mib: 1_572_864,
        local_nvme_gb: 7_600,
        network_gbps: 400,
        efa_max: 4,
        network_cards: 4,
        nvlink: false,
        hyperpod_regions: &[
            "ap-northeast-1",
            "ap-northeast-2",
            "eu-north-1",
            "eu-south-2",
            "us-east-1",
            "us-east-2",
            "us-west-2",
        ],
        ec2_regions: &[],
        on_demand_usd_per_hour_us_east_1: Some(30.13118),
    },
    InstanceType {
        name: "g6e.12xlarge",
        accelerator: "NVIDIA L40S",
        gpu_count: 4,
        gpu_memory_mib: 45_776,
        vcpus: 48,
        memory_mib: 393_216,
        local_nvme_gb: 3_800,
        network_gbps: 100,
        efa_max: 1,
        network_cards: 1,
        nvlink: false,
        hyperpod_regions: &[],
        ec2_regions: &[],
        on_demand_usd_per_hour_us_east_1: Some(10.49264),
    },
    InstanceType {
        name: "g7e.48xlarge",
        accelerator: "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        gpu_count: 8,
        gpu_memory_mib: 98_304,
        vcpus: 192,
        memory_mib: 2_097_152,
        local_nvme_gb: 15_200,
        network_gbps: 1_600,
        efa_max: 4,
        network_cards: 4,
        nvlink: false,
        hyperpod_regions: &[
            "ap-northeast-1",
            "ap-northeast-2",
            "us-east-1",
            "us-east-2",
            "us-west-2",
        ],
        ec2_regions: &[],
        on_demand_usd_per_hour_us_east_1: Some(33.14432),
    },
];

/// The most GPUs an instance type of the catalog has (a unit test keeps it true): the bound of
/// every GPU count a description states (tensor and decode context parallel sizes, GPUs per
/// replica).
pub const MAX_GPUS_PER_INSTANCE: u32 = 8;

/// Every instance type in the catalog.
pub fn instances() -> &'static [InstanceType] {
    INSTANCES
}

/// Looks up an instance type by its EC2 name (`p6-b300.48xlarge`) or HyperPod name
/// (`ml.p6-b300.48xlarge`).
pub fn instance(name: &str) -> Option<&'static InstanceType> {
    let name = name.strip_prefix("ml.").unwrap_or(name);
    INSTANCES.iter().find(|i| i.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p6_b300_facts() {
        let i = instance("ml.p6-b300.48xlarge").unwrap();
        assert_eq!(i.gpu_count, 8);
        assert_eq!(i.total_gpu_memory_mib(), 2_200_320);
        assert!(i.hyperpod_offered_in("us-west-2"));
        assert!(!i.hyperpod_offered_in("us-east-2"));
        assert_eq!(i.ml_name(), "ml.p6-b300.48xlarge");
    }

    #[test]
    fn catalog_covers_the_required_families() {
        for name in [
            "p6-b300.48xlarge",
            "p6-b200.48xlarge",
            "p5en.48xlarge",
            "p5e.48xlarge",
            "p5.48xlarge",
            "p4d.24xlarge",
            "g6e.48xlarge",
            "g7e.48xlarge",
        ] {
            assert!(instance(name).is_some(), "{name}");
        }
        let mut names: Vec<_> = instances().iter().map(|i| i.name).collect();
        names.dedup();
        assert_eq!(names.len(), instances().len());
    }

    #[test]
    fn max_gpus_per_instance_is_the_catalogs_largest() {
        let most = instances().iter().map(|i| i.gpu_count).max();
        assert_eq!(most, Some(MAX_GPUS_PER_INSTANCE));
    }
}
