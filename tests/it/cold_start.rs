//! Cold-start arithmetic against hand calculations: Kimi K3 (1,453.7 GiB) on p6-b300.48xlarge
//! and on the small p5.4xlarge, from every weight source; the one-off staging copy from the Hub
//! into S3; and S3 storage per month in us-west-2. Each expectation is written out with the
//! published (or assumed) numbers themselves, so a changed constant shows here.
//!
//! Kimi K3 does not fit one p5.4xlarge's GPU; the small type is here for its network (100 Gb/s,
//! the same as S3's per-instance ceiling) and its instance store, which holds the checkpoint.

use hyperforge::catalog::loading::{cold_start, staging_secs, storage_usd_per_month};
use hyperforge::catalog::loading::{StoreKind, WeightSource, WARMUP_SECS};
use hyperforge::catalog::{instance, model};

const GIB: f64 = 1_073_741_824.0;

/// Kimi K3's checkpoint, GiB (1,560,936,091,448 bytes).
const K3_GIB: f64 = 1_453.7;

fn k3_bytes() -> u64 {
    model("moonshotai/Kimi-K3")
        .expect("Kimi K3 is in the catalog")
        .weight_bytes()
}

/// Within 1 % of the hand calculation (whole seconds, so at least 1 s of slack).
fn close(actual: u64, expected: f64, what: &str) {
    let tolerance = (expected.abs() * 0.01).max(1.0);
    assert!(
        (actual as f64 - expected).abs() <= tolerance,
        "{what}: {actual} s, expected about {expected:.1} s"
    );
}

/// Hand calculation of one cold start: transfer, load, warm-up, in seconds.
struct Hand {
    transfer: f64,
    load: f64,
}

fn check(instance_name: &str, source: WeightSource, hand: Hand) {
    let instance = instance(instance_name).expect("catalog instance");
    let c = cold_start(k3_bytes(), &source, instance);
    let what = format!("{} on {instance_name}", source.label());
    close(c.transfer_secs, hand.transfer, &format!("{what}: transfer"));
    close(c.load_secs, hand.load, &format!("{what}: load"));
    assert_eq!(c.warmup_secs, 900, "{what}: warm-up");
    close(
        c.total_secs,
        hand.transfer + hand.load + 900.0,
        &format!("{what}: total"),
    );
    assert_eq!(
        c.total_secs,
        c.transfer_secs + c.load_secs + c.warmup_secs,
        "{what}"
    );
}

#[test]
fn the_checkpoint_is_the_published_size() {
    let gib = k3_bytes() as f64 / GIB;
    assert!((gib - K3_GIB).abs() < 0.1, "Kimi K3 is {gib} GiB");
    assert_eq!(WARMUP_SECS, 900);
}

#[test]
fn kimi_k3_on_p6_b300_from_every_source() {
    let p6 = "p6-b300.48xlarge"; // 6,400 Gb/s = 800e9 B/s: never the limit here
                                 // Hub 500 MB/s < NAT 100 Gb/s (12.5e9 B/s) < instance; then local NVMe at 2 GB/s.
    check(
        p6,
        WeightSource::HubViaNat,
        Hand {
            transfer: K3_GIB * GIB / 500e6,
            load: K3_GIB * GIB / 2e9,
        },
    );
    // S3 at 100 Gb/s per instance, straight into GPU memory.
    check(
        p6,
        WeightSource::S3Streamed,
        Hand {
            transfer: 0.0,
            load: K3_GIB * GIB / 12.5e9,
        },
    );
    check(
        p6,
        WeightSource::S3Prefetched,
        Hand {
            transfer: K3_GIB * GIB / 12.5e9,
            load: K3_GIB * GIB / 2e9,
        },
    );
    // 2,400 GiB at 1,000 MB/s/TiB: 2,400 / 1,024 TiB x 1,000e6 B/s.
    check(
        p6,
        WeightSource::FsxLustre {
            storage_gib: 2400,
            throughput_mb_per_sec_per_tib: 1000,
        },
        Hand {
            transfer: K3_GIB * GIB / (2400.0 / 1024.0 * 1000e6),
            load: K3_GIB * GIB / 2e9,
        },
    );
    // 4,800 GiB at 125 MB/s/TiB.
    check(
        p6,
        WeightSource::FsxLustre {
            storage_gib: 4800,
            throughput_mb_per_sec_per_tib: 125,
        },
        Hand {
            transfer: K3_GIB * GIB / (4800.0 / 1024.0 * 125e6),
            load: K3_GIB * GIB / 2e9,
        },
    );
    check(
        p6,
        WeightSource::LocalNvme,
        Hand {
            transfer: 0.0,
            load: K3_GIB * GIB / 2e9,
        },
    );
}

#[test]
fn kimi_k3_on_a_small_instance_from_every_source() {
    let small = "p5.4xlarge"; // 100 Gb/s = 12.5e9 B/s
    assert_eq!(instance(small).unwrap().network_gbps, 100);
    check(
        small,
        WeightSource::HubViaNat,
        Hand {
            transfer: K3_GIB * GIB / 500e6,
            load: K3_GIB * GIB / 2e9,
        },
    );
    check(
        small,
        WeightSource::S3Streamed,
        Hand {
            transfer: 0.0,
            load: K3_GIB * GIB / 12.5e9,
        },
    );
    check(
        small,
        WeightSource::S3Prefetched,
        Hand {
            transfer: K3_GIB * GIB / 12.5e9,
            load: K3_GIB * GIB / 2e9,
        },
    );
    // 24,000 GiB at 1,000 MB/s/TiB would give 23.4e9 B/s: the instance's 12.5e9 B/s binds.
    check(
        small,
        WeightSource::FsxLustre {
            storage_gib: 24_000,
            throughput_mb_per_sec_per_tib: 1000,
        },
        Hand {
            transfer: K3_GIB * GIB / 12.5e9,
            load: K3_GIB * GIB / 2e9,
        },
    );
    // 2,400 GiB at 250 MB/s/TiB: the file system binds (585.9 MB/s).
    check(
        small,
        WeightSource::FsxLustre {
            storage_gib: 2400,
            throughput_mb_per_sec_per_tib: 250,
        },
        Hand {
            transfer: K3_GIB * GIB / (2400.0 / 1024.0 * 250e6),
            load: K3_GIB * GIB / 2e9,
        },
    );
    check(
        small,
        WeightSource::LocalNvme,
        Hand {
            transfer: 0.0,
            load: K3_GIB * GIB / 2e9,
        },
    );
}

#[test]
fn staging_the_checkpoint_from_the_hub_into_s3() {
    // min(Hub 500 MB/s, NAT 12.5e9 B/s, stager network): the Hub, whatever the stager.
    let expected = K3_GIB * GIB / 500e6;
    close(staging_secs(k3_bytes(), None), expected, "no stager type");
    for name in ["p6-b300.48xlarge", "p5.4xlarge", "g6e.12xlarge"] {
        close(
            staging_secs(k3_bytes(), instance(name)),
            expected,
            &format!("staged on {name}"),
        );
    }
}

#[test]
fn s3_storage_per_month_in_us_west_2() {
    // $0.023 per GB-month, S3's GB being 2^30 bytes: 1,453.7 x 0.023 = $33.44.
    let usd = storage_usd_per_month(k3_bytes(), StoreKind::S3Standard, "us-west-2")
        .expect("S3 is priced in us-west-2");
    let expected = K3_GIB * 0.023;
    assert!(
        (usd - expected).abs() <= expected * 0.01,
        "{usd} against {expected}"
    );
    assert_eq!(
        storage_usd_per_month(k3_bytes(), StoreKind::S3Standard, "ap-south-2"),
        None
    );
}
