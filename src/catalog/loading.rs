//! How fast model weights reach the GPUs, and what storing them costs: the published (or
//! assumed) rates of every place weights can come from at pod start, the cold start they give
//! on an instance type ([`cold_start`]), the one-off copy of a checkpoint from the Hugging Face
//! Hub into S3 ([`staging_secs`]), and the monthly price of keeping it ([`storage_usd_per_month`]).
//! Pure arithmetic over catalog data: no I/O, nothing read at run time.
//!
//! Units: rates are bytes per second (`f64`); "Gb/s" and "MB/s" in the sources are decimal
//! (10^9 bits, 10^6 bytes). Times are whole seconds, rounded up. A rate that is zero, negative
//! or NaN means the step never finishes: its time is `u64::MAX`, and every sum saturates there.

use super::instances::InstanceType;

/// S3 throughput to one EC2 instance, gigabits per second. Source:
/// <https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance.html>:
/// applications that parallelize their requests "achieve single-instance transfer rates that
/// maximize the network interface use for their Amazon EC2 instance, which can be up to
/// 100 Gb/s on a single instance". The performance guidelines
/// (`optimizing-performance-guidelines.html`, "Horizontal Scaling of Storage Connections") say
/// how: many parallel connections from the one instance.
pub const S3_GBPS_PER_INSTANCE: u32 = 100;

/// [`S3_GBPS_PER_INSTANCE`] in bytes per second (12.5 GB/s).
pub const S3_BYTES_PER_SEC_PER_INSTANCE: f64 = S3_GBPS_PER_INSTANCE as f64 * 1e9 / 8.0;

/// A NAT gateway's bandwidth before it scales, gigabits per second. Source:
/// <https://docs.aws.amazon.com/vpc/latest/userguide/nat-gateway-basics.html>: "A NAT gateway
/// supports 5 Gbps of bandwidth and automatically scales up to 100 Gbps."
pub const NAT_GATEWAY_BASE_GBPS: u32 = 5;

/// The most a NAT gateway carries, gigabits per second (same source as
/// [`NAT_GATEWAY_BASE_GBPS`]: "automatically scales up to 100 Gbps"). The arithmetic uses this
/// ceiling: one large download is a long, steady flow, the case the scaling is for.
pub const NAT_GATEWAY_MAX_GBPS: u32 = 100;

/// [`NAT_GATEWAY_MAX_GBPS`] in bytes per second (12.5 GB/s).
pub const NAT_GATEWAY_MAX_BYTES_PER_SEC: f64 = NAT_GATEWAY_MAX_GBPS as f64 * 1e9 / 8.0;

/// Download rate from the Hugging Face Hub to one client, bytes per second (500 MB/s).
/// **An assumption**: the Hub publishes no per-client rate (what one client sees depends on
/// its parallelism, `hf_transfer`/`hf_xet`, and the path out of the VPC). 500 MB/s is the conservative figure
/// the vLLM construct's `StorageThroughput` default has always used for one node.
pub const HUB_BYTES_PER_SEC: f64 = 500e6;

/// Reading weights from the node's local NVMe into GPU memory, bytes per second (2 GB/s).
/// **An assumption**: AWS publishes no sequential-read figure for the instance store of the
/// p6 or p5 families (only its size: 30,400 GB, 8 x 3.8 TB, on p6-b300, p5 and p5en), and
/// the load rate is set as much by safetensors deserialization and host-to-device copies as
/// by the disks. 2 GB/s is the conservative figure of the vLLM construct's `StorageThroughput`
/// default; the project's domain notes size a RAID0 of the instance store at 10 GB/s (derived,
/// not published).
pub const LOCAL_NVME_BYTES_PER_SEC: f64 = 2e9;

/// Warm-up after the weights are in GPU memory, seconds (15 minutes): `torch.compile`, CUDA
/// graph capture, the first profiling run. **An assumption**, the vLLM construct's default; it
/// depends on the model, the engine version and its caches, and is not published.
pub const WARMUP_SECS: u64 = 900;

/// The per-unit storage throughputs an FSx for Lustre `PERSISTENT_2` SSD file system may have,
/// MB/s per TiB of storage. Source:
/// <https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-throughput-capacity.html>:
/// "For Persistent_2 SSD-based deployment types, valid values are 125, 250, 500, and 1000
/// MB/s/TiB." The file system's throughput is storage capacity (TiB) x this figure
/// (`PerUnitStorageThroughput` in the FSx API reference: "File system throughput capacity is
/// equal to Storage capacity (TiB) * PerUnitStorageThroughput (MB/s/TiB)").
pub const FSX_LUSTRE_PERSISTENT_2_MB_PER_SEC_PER_TIB: [u32; 4] = [125, 250, 500, 1000];

/// S3 Standard storage, USD per GB-month, first 50 TB per month, in us-east-1: $0.023.
/// Source: <https://aws.amazon.com/s3/pricing/>, S3 Standard row "First 50 TB / Month |
/// $0.023 per GB". The page renders its cells from the Price List, so the figure was confirmed
/// through copies of that table ("S3 Standard costs $0.023/GB/month ... All prices are for US
/// East (N. Virginia) as of March 2026", cloudburn.io's S3 pricing guide).
pub const S3_STANDARD_USD_PER_GB_MONTH_US_EAST_1: f64 = 0.023;

/// S3 Standard storage, USD per GB-month, first 50 TB per month, in us-west-2: $0.023, as on
/// <https://aws.amazon.com/s3/pricing/> for US West (Oregon), the same as us-east-1. **Not
/// confirmed from a copy naming the region**: the copies of the table found state $0.023 with
/// no region, or for N. Virginia.
pub const S3_STANDARD_USD_PER_GB_MONTH_US_WEST_2: f64 = 0.023;

/// The bytes of one billed "GB" of S3 storage: 2^30. Source: the storage example of the S3
/// FAQ (<https://aws.amazon.com/s3/faqs/>, billing): "Assume you store 100GB (107,374,182,400
/// bytes) of data in Amazon S3 Standard" and "42,259,901,212,262,400 Byte-Hours /
/// 1,073,741,824 bytes" per GB. S3 bills binary gigabytes, not decimal ones.
pub const S3_BILLED_BYTES_PER_GB: u64 = 1 << 30;

/// The regions whose S3 Standard price the catalog holds.
pub const STORAGE_PRICED_REGIONS: &[&str] = &["us-east-1", "us-west-2"];

/// FSx for Lustre `PERSISTENT_2` SSD storage prices, USD per GB-month, by region and per-unit
/// throughput (MB/s/TiB). **Empty**: the FSx pricing page
/// (<https://aws.amazon.com/fsx/lustre/pricing/>) renders its prices from the Price List and
/// no copy of them could be confirmed for us-east-1 or us-west-2 (third-party estimates give
/// about $0.145 at 125 MB/s/TiB, not good enough to bill from). Add rows as
/// `(region, throughput, price)` once read from the Price List.
const FSX_LUSTRE_PERSISTENT_2_USD_PER_GB_MONTH: &[(&str, u32, f64)] = &[];

const BYTES_PER_TIB: f64 = 1_099_511_627_776.0;
const BYTES_PER_GIB: f64 = 1_073_741_824.0;

/// Where a server's weights come from at pod start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightSource {
    /// The pod downloads from the Hugging Face Hub through the VPC's NAT gateway, then loads
    /// from local disk.
    HubViaNat,
    /// vLLM's Run:ai model streamer reads `s3://` straight into GPU memory: one pass, no
    /// separate load step.
    S3Streamed,
    /// The HyperPod inference operator copies the S3 prefix to the node's local volume first,
    /// then vLLM loads from local disk.
    S3Prefetched,
    /// Read from an FSx for Lustre file system: copy, then load, like
    /// [`WeightSource::S3Prefetched`].
    FsxLustre {
        /// The file system's storage capacity, GiB.
        storage_gib: u32,
        /// Its per-unit storage throughput, MB/s per TiB
        /// ([`FSX_LUSTRE_PERSISTENT_2_MB_PER_SEC_PER_TIB`]).
        throughput_mb_per_sec_per_tib: u32,
    },
    /// Already on the node's local NVMe: load only.
    LocalNvme,
}

impl WeightSource {
    /// A label for people (`Hugging Face Hub via NAT`).
    pub fn label(&self) -> &'static str {
        match self {
            WeightSource::HubViaNat => "Hugging Face Hub via NAT",
            WeightSource::S3Streamed => "S3, streamed into GPU memory",
            WeightSource::S3Prefetched => "S3, copied to local disk, then loaded",
            WeightSource::FsxLustre { .. } => "FSx for Lustre, copied to local disk, then loaded",
            WeightSource::LocalNvme => "local NVMe, loaded",
        }
    }

    /// Whether the weights cross the network before the load step (false for a source that
    /// is the load, or already local).
    pub fn has_transfer_step(&self) -> bool {
        match self {
            WeightSource::HubViaNat
            | WeightSource::S3Prefetched
            | WeightSource::FsxLustre { .. } => true,
            WeightSource::S3Streamed | WeightSource::LocalNvme => false,
        }
    }
}

/// Time from node ready to endpoint ready, without a safety factor: `total = transfer + load
/// + warmup` (saturating). Not counted: scheduling, the image pull.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ColdStart {
    /// Seconds moving the weights onto the node (0 for a source without a transfer step).
    pub transfer_secs: u64,
    /// Seconds reading them into GPU memory.
    pub load_secs: u64,
    /// Seconds of warm-up ([`WARMUP_SECS`]).
    pub warmup_secs: u64,
    /// The sum, saturating at `u64::MAX`.
    pub total_secs: u64,
    /// The transfer rate used, bytes per second (0.0 when the source has no transfer step;
    /// see [`WeightSource::has_transfer_step`]).
    pub transfer_bytes_per_sec: f64,
    /// The load rate used, bytes per second.
    pub load_bytes_per_sec: f64,
}

/// An instance type's network bandwidth, bytes per second (`network_gbps` / 8). It is the
/// type's aggregate figure, which on the P families counts EFA; the IP traffic of S3 and the
/// Hub may see less, but for every catalog type the S3 and NAT caps bind first.
pub fn network_bytes_per_sec(instance: &InstanceType) -> f64 {
    f64::from(instance.network_gbps) * 1e9 / 8.0
}

/// Baseline network bandwidth of the general-purpose node types hyperforge runs its helpers
/// on (the system preset's `m7i.xlarge` and its neighbours), megabits per second: what an
/// "up to" instance sustains once its burst credits are spent (EC2 User Guide, "Amazon EC2
/// instance network bandwidth"). Source: aws/karpenter-provider-aws v1.14.1,
/// `pkg/providers/instancetype/zz_generated.bandwidth.go` (generated from the EC2
/// documentation's baseline column).
pub const HELPER_NODE_BASELINE_MBPS: &[(&str, u32)] = &[
    ("m7i.large", 781),
    ("m7i.xlarge", 1562),
    ("m7i.2xlarge", 3125),
    ("m7i.4xlarge", 6250),
];

/// The sustained network bandwidth of instance type `name`, bytes per second: a GPU type's
/// from the catalog, a helper type's baseline ([`HELPER_NODE_BASELINE_MBPS`]); `None` for a
/// type neither knows.
pub fn sustained_network_bytes_per_sec(name: &str) -> Option<f64> {
    if let Some(instance) = super::instance(name) {
        return Some(network_bytes_per_sec(instance));
    }
    HELPER_NODE_BASELINE_MBPS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, mbps)| f64::from(*mbps) * 1e6 / 8.0)
}

/// An FSx for Lustre file system's throughput, bytes per second: storage (TiB) x per-unit
/// throughput (MB/s/TiB). 0 GiB or 0 MB/s/TiB give 0 (a transfer that never ends).
pub fn fsx_lustre_bytes_per_sec(storage_gib: u32, throughput_mb_per_sec_per_tib: u32) -> f64 {
    f64::from(storage_gib) / 1024.0 * f64::from(throughput_mb_per_sec_per_tib) * 1e6
}

/// Seconds to move `bytes` at `rate` bytes per second, rounded up. No bytes take no time; a
/// rate that is zero, negative or NaN never finishes (`u64::MAX`); float-to-integer casts
/// saturate, so no input overflows.
pub fn transfer_secs(bytes: u64, rate: f64) -> u64 {
    if bytes == 0 {
        return 0;
    }
    if rate.is_nan() || rate <= 0.0 {
        return u64::MAX;
    }
    (bytes as f64 / rate).ceil() as u64
}

/// The cold start of `weight_bytes` of weights from `source` on a node of type `instance`.
/// The instance's network caps every network transfer:
///
/// | source | transfer rate | load rate |
/// |---|---|---|
/// | `HubViaNat` | min(Hub, NAT gateway maximum, instance) | local NVMe |
/// | `S3Streamed` | none | min(S3 per instance, instance) |
/// | `S3Prefetched` | min(S3 per instance, instance) | local NVMe |
/// | `FsxLustre` | min(file system, instance) | local NVMe |
/// | `LocalNvme` | none | local NVMe |
pub fn cold_start(weight_bytes: u64, source: &WeightSource, instance: &InstanceType) -> ColdStart {
    let network = network_bytes_per_sec(instance);
    let (transfer_rate, load_rate) = match *source {
        WeightSource::HubViaNat => (
            HUB_BYTES_PER_SEC
                .min(NAT_GATEWAY_MAX_BYTES_PER_SEC)
                .min(network),
            LOCAL_NVME_BYTES_PER_SEC,
        ),
        WeightSource::S3Streamed => (0.0, S3_BYTES_PER_SEC_PER_INSTANCE.min(network)),
        WeightSource::S3Prefetched => (
            S3_BYTES_PER_SEC_PER_INSTANCE.min(network),
            LOCAL_NVME_BYTES_PER_SEC,
        ),
        WeightSource::FsxLustre {
            storage_gib,
            throughput_mb_per_sec_per_tib,
        } => (
            fsx_lustre_bytes_per_sec(storage_gib, throughput_mb_per_sec_per_tib).min(network),
            LOCAL_NVME_BYTES_PER_SEC,
        ),
        WeightSource::LocalNvme => (0.0, LOCAL_NVME_BYTES_PER_SEC),
    };
    let transfer = if source.has_transfer_step() {
        transfer_secs(weight_bytes, transfer_rate)
    } else {
        0
    };
    let load = transfer_secs(weight_bytes, load_rate);
    ColdStart {
        transfer_secs: transfer,
        load_secs: load,
        warmup_secs: WARMUP_SECS,
        total_secs: transfer.saturating_add(load).saturating_add(WARMUP_SECS),
        transfer_bytes_per_sec: transfer_rate,
        load_bytes_per_sec: load_rate,
    }
}

/// The rate of a one-off copy of a checkpoint from the Hugging Face Hub into S3 by a job on a
/// node of type `stager`, bytes per second: min(Hub, NAT gateway maximum, stager network);
/// with no known type, only the Hub and NAT limits.
pub fn staging_bytes_per_sec(stager: Option<&InstanceType>) -> f64 {
    let rate = HUB_BYTES_PER_SEC.min(NAT_GATEWAY_MAX_BYTES_PER_SEC);
    match stager {
        Some(instance) => rate.min(network_bytes_per_sec(instance)),
        None => rate,
    }
}

/// Seconds to copy `weight_bytes` once from the Hub into S3 on a node that sustains
/// `stager_bytes_per_sec` (`None`: not known), rounded up: the slowest of the Hub, the NAT
/// gateway and the node's network.
pub fn staging_secs_on(weight_bytes: u64, stager_bytes_per_sec: Option<f64>) -> u64 {
    let rate = HUB_BYTES_PER_SEC.min(NAT_GATEWAY_MAX_BYTES_PER_SEC);
    transfer_secs(
        weight_bytes,
        stager_bytes_per_sec.map_or(rate, |node| rate.min(node)),
    )
}

/// Seconds to copy `weight_bytes` once from the Hub into S3 ([`staging_bytes_per_sec`]),
/// rounded up. The upload to S3 runs concurrently with the download (multipart, part by part)
/// and is faster ([`S3_BYTES_PER_SEC_PER_INSTANCE`] against [`HUB_BYTES_PER_SEC`]), so the
/// download sets the time.
pub fn staging_secs(weight_bytes: u64, stager: Option<&InstanceType>) -> u64 {
    transfer_secs(weight_bytes, staging_bytes_per_sec(stager))
}

/// Where weights are kept between cold starts, for [`storage_usd_per_month`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// S3 Standard: billed by the bytes stored.
    S3Standard,
    /// An FSx for Lustre `PERSISTENT_2` SSD file system: billed by its provisioned capacity,
    /// whatever it holds.
    FsxLustre {
        /// Provisioned storage, GiB.
        storage_gib: u32,
        /// Per-unit storage throughput, MB/s per TiB (the price depends on it).
        throughput_mb_per_sec_per_tib: u32,
    },
}

/// The S3 Standard price in `region`, USD per GB-month (first 50 TB tier); `None` outside
/// [`STORAGE_PRICED_REGIONS`].
pub fn s3_standard_usd_per_gb_month(region: &str) -> Option<f64> {
    match region {
        "us-east-1" => Some(S3_STANDARD_USD_PER_GB_MONTH_US_EAST_1),
        "us-west-2" => Some(S3_STANDARD_USD_PER_GB_MONTH_US_WEST_2),
        _ => None,
    }
}

/// The FSx for Lustre `PERSISTENT_2` SSD price in `region` at a per-unit throughput, USD per
/// GB-month; `None` for every region today (no price confirmed, see the table's comment).
pub fn fsx_lustre_usd_per_gb_month(
    region: &str,
    throughput_mb_per_sec_per_tib: u32,
) -> Option<f64> {
    FSX_LUSTRE_PERSISTENT_2_USD_PER_GB_MONTH
        .iter()
        .find(|(r, t, _)| *r == region && *t == throughput_mb_per_sec_per_tib)
        .map(|(_, _, price)| *price)
}

/// What keeping `weight_bytes` in `store` costs per month in `region`, USD; `None` where the
/// catalog holds no price (like [`InstanceType::on_demand_usd_per_hour`]).
///
/// - S3 Standard bills the bytes stored in GB-months of [`S3_BILLED_BYTES_PER_GB`] (2^30
///   bytes: binary, as the S3 FAQ's example computes them), at the first-50-TB price: for a
///   region's storage beyond 50 TB the next tiers are cheaper, so this is an upper bound.
///   Requests and transfer are not included (transfer from S3 to EC2 in the same region is
///   free).
/// - FSx for Lustre bills its provisioned capacity, not the bytes stored (`weight_bytes` is
///   ignored): `storage_gib` GB-months at the price for its throughput.
pub fn storage_usd_per_month(weight_bytes: u64, store: StoreKind, region: &str) -> Option<f64> {
    match store {
        StoreKind::S3Standard => {
            let price = s3_standard_usd_per_gb_month(region)?;
            Some(weight_bytes as f64 / S3_BILLED_BYTES_PER_GB as f64 * price)
        }
        StoreKind::FsxLustre {
            storage_gib,
            throughput_mb_per_sec_per_tib,
        } => {
            let price = fsx_lustre_usd_per_gb_month(region, throughput_mb_per_sec_per_tib)?;
            Some(fsx_provisioned_usd(storage_gib, price))
        }
    }
}

/// Provisioned FSx capacity at a GB-month price: the capacity in GiB counts as GB-months, as
/// the FSx console and API state capacity in GiB.
fn fsx_provisioned_usd(storage_gib: u32, usd_per_gb_month: f64) -> f64 {
    f64::from(storage_gib) * usd_per_gb_month
}

/// The weights' size in TiB, for messages.
pub fn tib(bytes: u64) -> f64 {
    bytes as f64 / BYTES_PER_TIB
}

/// The weights' size in GiB, for messages.
pub fn gib(bytes: u64) -> f64 {
    bytes as f64 / BYTES_PER_GIB
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{instance, model};

    fn k3_bytes() -> u64 {
        model("moonshotai/Kimi-K3").unwrap().weight_bytes()
    }

    fn p6() -> &'static InstanceType {
        instance("p6-b300.48xlarge").unwrap()
    }

    fn fsx_2400_at_1000() -> WeightSource {
        WeightSource::FsxLustre {
            storage_gib: 2400,
            throughput_mb_per_sec_per_tib: 1000,
        }
    }

    #[test]
    fn kimi_k3_on_p6_b300_from_each_source() {
        let bytes = k3_bytes();
        assert_eq!(bytes, 1_560_936_091_448);
        let at = |source: WeightSource| cold_start(bytes, &source, p6());

        // Hub: 500 MB/s (NAT 12.5 GB/s and the instance's 800 GB/s do not bind).
        let hub = at(WeightSource::HubViaNat);
        assert_eq!(hub.transfer_bytes_per_sec, 500e6);
        assert_eq!(hub.transfer_secs, 3122);
        assert_eq!(hub.load_secs, 781);
        assert_eq!(hub.warmup_secs, 900);
        assert_eq!(hub.total_secs, 3122 + 781 + 900);

        // Streamed from S3: the load itself at 12.5 GB/s.
        let streamed = at(WeightSource::S3Streamed);
        assert_eq!(streamed.transfer_secs, 0);
        assert_eq!(streamed.transfer_bytes_per_sec, 0.0);
        assert_eq!(streamed.load_bytes_per_sec, 12.5e9);
        assert_eq!(streamed.load_secs, 125);
        assert_eq!(streamed.total_secs, 125 + 900);

        let prefetched = at(WeightSource::S3Prefetched);
        assert_eq!(prefetched.transfer_secs, 125);
        assert_eq!(prefetched.load_secs, 781);
        assert_eq!(prefetched.total_secs, 125 + 781 + 900);

        // 2400 GiB at 1000 MB/s/TiB: 2.34375 GB/s.
        let fsx = at(fsx_2400_at_1000());
        assert_eq!(fsx.transfer_bytes_per_sec, 2.34375e9);
        assert_eq!(fsx.transfer_secs, 666);
        assert_eq!(fsx.total_secs, 666 + 781 + 900);

        let local = at(WeightSource::LocalNvme);
        assert_eq!(local.transfer_secs, 0);
        assert_eq!(local.load_secs, 781);
        assert_eq!(local.total_secs, 781 + 900);

        // The order a reader expects.
        assert!(streamed.total_secs < local.total_secs);
        assert!(local.total_secs < prefetched.total_secs);
        assert!(prefetched.total_secs < fsx.total_secs);
        assert!(fsx.total_secs < hub.total_secs);
    }

    #[test]
    fn the_instance_network_caps_transfers() {
        let mut slow = p6().clone();
        slow.network_gbps = 8; // 1 GB/s
        let bytes = 10_000_000_000;
        let s3 = cold_start(bytes, &WeightSource::S3Streamed, &slow);
        assert_eq!(s3.load_bytes_per_sec, 1e9);
        assert_eq!(s3.load_secs, 10);
        let hub = cold_start(bytes, &WeightSource::HubViaNat, &slow);
        assert_eq!(hub.transfer_bytes_per_sec, 500e6);
        let big_fsx = WeightSource::FsxLustre {
            storage_gib: 24_000,
            throughput_mb_per_sec_per_tib: 1000,
        };
        assert_eq!(
            cold_start(bytes, &big_fsx, &slow).transfer_bytes_per_sec,
            1e9
        );
        // The local NVMe load does not cross the network.
        let local = cold_start(bytes, &WeightSource::LocalNvme, &slow);
        assert_eq!(local.load_bytes_per_sec, LOCAL_NVME_BYTES_PER_SEC);
    }

    #[test]
    fn hostile_inputs_saturate_and_never_panic() {
        let sources = [
            WeightSource::HubViaNat,
            WeightSource::S3Streamed,
            WeightSource::S3Prefetched,
            fsx_2400_at_1000(),
            WeightSource::LocalNvme,
            WeightSource::FsxLustre {
                storage_gib: u32::MAX,
                throughput_mb_per_sec_per_tib: u32::MAX,
            },
        ];
        for source in sources {
            let c = cold_start(u64::MAX, &source, p6());
            assert!(c.load_secs > 0, "{source:?}");
            assert!(c.total_secs >= c.load_secs, "{source:?}");
            let empty = cold_start(0, &source, p6());
            assert_eq!(empty.total_secs, WARMUP_SECS, "{source:?}");
        }

        // A file system of 0 GiB or 0 MB/s/TiB never delivers: unbounded time, saturated sum.
        for (storage_gib, throughput_mb_per_sec_per_tib) in [(0, 1000), (2400, 0), (0, 0)] {
            let source = WeightSource::FsxLustre {
                storage_gib,
                throughput_mb_per_sec_per_tib,
            };
            let c = cold_start(k3_bytes(), &source, p6());
            assert_eq!(c.transfer_secs, u64::MAX);
            assert_eq!(c.total_secs, u64::MAX);
        }

        // An instance with no network: every network step is unbounded, the local load is not.
        let mut isolated = p6().clone();
        isolated.network_gbps = 0;
        assert_eq!(
            cold_start(k3_bytes(), &WeightSource::S3Streamed, &isolated).total_secs,
            u64::MAX
        );
        assert_eq!(
            cold_start(k3_bytes(), &WeightSource::HubViaNat, &isolated).transfer_secs,
            u64::MAX
        );
        assert_eq!(
            cold_start(k3_bytes(), &WeightSource::LocalNvme, &isolated).total_secs,
            781 + 900
        );
        assert_eq!(staging_secs(k3_bytes(), Some(&isolated)), u64::MAX);

        assert_eq!(transfer_secs(1, f64::NAN), u64::MAX);
        assert_eq!(transfer_secs(1, -1.0), u64::MAX);
        assert_eq!(transfer_secs(u64::MAX, f64::MIN_POSITIVE), u64::MAX);
        assert_eq!(transfer_secs(u64::MAX, f64::INFINITY), 0);
        assert_eq!(
            staging_secs(u64::MAX, None),
            (u64::MAX as f64 / 500e6).ceil() as u64
        );
        assert!(
            storage_usd_per_month(u64::MAX, StoreKind::S3Standard, "us-west-2")
                .unwrap()
                .is_finite()
        );
    }

    /// The system preset's node sustains 1.562 Gb/s, less than the Hub's 500 MB/s: Kimi K3's
    /// 1.42 TiB then take about 2.2 hours, not 53 minutes.
    #[test]
    fn staging_on_a_helper_node_is_limited_by_its_baseline() {
        assert_eq!(
            sustained_network_bytes_per_sec("m7i.xlarge"),
            Some(195.25e6)
        );
        assert_eq!(sustained_network_bytes_per_sec("x9.none"), None);
        let secs = staging_secs_on(k3_bytes(), sustained_network_bytes_per_sec("m7i.xlarge"));
        assert_eq!(secs, 7_995);
        assert_eq!(
            staging_secs_on(k3_bytes(), None),
            staging_secs(k3_bytes(), None)
        );
        assert_eq!(
            staging_secs_on(
                k3_bytes(),
                sustained_network_bytes_per_sec("p6-b300.48xlarge")
            ),
            3122
        );
    }

    #[test]
    fn staging_is_limited_by_the_hub() {
        assert_eq!(staging_secs(k3_bytes(), None), 3122);
        assert_eq!(staging_secs(k3_bytes(), Some(p6())), 3122);
        let small = instance("p5.4xlarge").unwrap();
        assert_eq!(staging_bytes_per_sec(Some(small)), 500e6);
        let mut tiny = small.clone();
        tiny.network_gbps = 1; // 125 MB/s
        assert_eq!(staging_bytes_per_sec(Some(&tiny)), 125e6);
    }

    #[test]
    fn s3_storage_is_priced_in_us_east_1_and_us_west_2_only() {
        let gb = k3_bytes() as f64 / 1_073_741_824.0;
        for region in ["us-east-1", "us-west-2"] {
            let usd = storage_usd_per_month(k3_bytes(), StoreKind::S3Standard, region).unwrap();
            assert!((usd - gb * 0.023).abs() < 1e-9, "{region}: {usd}");
            assert!((usd - 33.44).abs() < 0.01, "{region}: {usd}");
        }
        for region in ["eu-west-1", "us-east-2", "", "us-west-2 "] {
            assert_eq!(
                storage_usd_per_month(k3_bytes(), StoreKind::S3Standard, region),
                None,
                "{region}"
            );
        }
        for region in STORAGE_PRICED_REGIONS {
            assert!(s3_standard_usd_per_gb_month(region).is_some());
        }
    }

    #[test]
    fn fsx_storage_is_not_priced_anywhere_yet() {
        for region in ["us-east-1", "us-west-2", "eu-west-1"] {
            for throughput in FSX_LUSTRE_PERSISTENT_2_MB_PER_SEC_PER_TIB {
                let store = StoreKind::FsxLustre {
                    storage_gib: 2400,
                    throughput_mb_per_sec_per_tib: throughput,
                };
                assert_eq!(storage_usd_per_month(k3_bytes(), store, region), None);
            }
        }
        // Priced by provisioned capacity once a price is known, whatever the bytes stored.
        assert!((fsx_provisioned_usd(2400, 0.5) - 1200.0).abs() < 1e-9);
        assert!(fsx_provisioned_usd(u32::MAX, f64::MAX).is_infinite());
    }

    #[test]
    fn labels_and_rates() {
        assert_eq!(WeightSource::HubViaNat.label(), "Hugging Face Hub via NAT");
        assert_eq!(
            WeightSource::S3Streamed.label(),
            "S3, streamed into GPU memory"
        );
        assert_eq!(S3_BYTES_PER_SEC_PER_INSTANCE, 12.5e9);
        assert_eq!(NAT_GATEWAY_MAX_BYTES_PER_SEC, 12.5e9);
        assert_eq!(network_bytes_per_sec(p6()), 800e9);
        assert!((gib(k3_bytes()) - 1_453.74).abs() < 0.01);
        assert!((tib(k3_bytes()) - 1.4197).abs() < 0.001);
    }
}
