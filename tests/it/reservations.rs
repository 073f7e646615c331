//! Reservations as dated objects: a Capacity Block's window is checked against EC2's rules
//! (it ends at 11:30 UTC, lasts 1 to 14 days or whole weeks up to 182) and drives the timeline
//! the manifest, the runbook and `hyperforge list` show.

use hyperforge::app::Stack;
use hyperforge::assembly::inventory::CapacitySourceEntry;
use hyperforge::constructs::*;
use hyperforge::reference::{kimi_k3_server, CAPACITY_BLOCK_RESERVATION_ID};
use hyperforge::{App, Code};

fn app(start: &str, end: &str) -> App {
    let mut stack = Stack::new("window", "us-west-2");
    let f = stack.cloudformation_stage("foundation");
    let net = stack.add(f, Network::new("Network").gpu_subnet("usw2-az2"));
    let eks = stack.add(
        f,
        EksCluster::new("Eks", "window")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc),
    );
    let nodes = stack.cloudformation_stage("nodes");
    stack.add(
        nodes,
        ManagedNodeGroup::gpu(
            "Gpu",
            &eks.cluster,
            "p6-b300.48xlarge",
            net.gpu_subnet.iter(),
        )
        .capacity(
            CapacityBlock::held(CAPACITY_BLOCK_RESERVATION_ID, "usw2-az2", 2).during(start, end),
        )
        .scaling(0, 1, 2),
    );
    stack.helm_stage("nvidia-device-plugin", HelmRelease::nvidia_device_plugin());
    let w = stack.kubernetes_stage("workload");
    stack.add(
        w,
        VllmDeployment::new("KimiK3", kimi_k3_server(), "p6-b300.48xlarge"),
    );
    App::new().stack(stack)
}

#[test]
fn a_windows_mistakes_are_refused_with_their_codes_at_the_field() {
    let codes = |start: &str, end: &str| -> Vec<(Code, Option<String>)> {
        app(start, end)
            .validate()
            .iter()
            .filter(|d| d.code.severity() == hyperforge::diagnostics::Severity::Error)
            .map(|d| (d.code, d.field.clone()))
            .collect()
    };
    assert_eq!(codes("2026-12-10T04:55:00Z", "2026-12-17T11:30:00Z"), []);
    assert_eq!(
        codes("2026-12-10T04:55:00Z", "2026-12-17T12:30:00Z"),
        [(
            Code::CapacityBlockEndTime,
            Some("capacity_block.window.end".into())
        )]
    );
    assert_eq!(
        codes("2026-12-10T11:30:00Z", "2026-12-30T11:30:00Z"),
        [(
            Code::CapacityBlockDuration,
            Some("capacity_block.window".into())
        )]
    );
    assert_eq!(
        codes("2026-12-17T11:30:00Z", "2026-12-10T11:30:00Z"),
        [(
            Code::InvalidReservationWindow,
            Some("capacity_block.window".into())
        )]
    );
    assert_eq!(
        codes("2026-12-10 04:55", "2026-12-17T11:30:00+01:00"),
        [
            (
                Code::InvalidReservationWindow,
                Some("capacity_block.window.start".into())
            ),
            (
                Code::InvalidReservationWindow,
                Some("capacity_block.window.end".into())
            ),
        ]
    );
    // Three weeks is a duration EC2 sells; 183 days is not.
    assert_eq!(codes("2026-12-10T11:30:00Z", "2026-12-31T11:30:00Z"), []);
    assert_eq!(
        codes("2026-12-10T11:30:00Z", "2027-06-11T11:30:00Z")[0].0,
        Code::CapacityBlockDuration
    );
}

#[test]
fn the_window_drives_the_timeline_the_manifest_the_runbook_and_list_show() {
    let assembly = app("2026-12-10T04:55:00Z", "2026-12-17T11:30:00Z")
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
    let stack = &assembly.manifest().stacks[0];
    let timeline = stack
        .inventory
        .capacity
        .iter()
        .find_map(|c| match &c.source {
            CapacitySourceEntry::CapacityBlock { timeline, .. } => timeline.clone(),
            _ => None,
        })
        .expect("a timeline");
    assert_eq!(timeline.start, "2026-12-10T04:55Z");
    assert_eq!(timeline.end, "2026-12-17T11:30Z");
    assert_eq!(timeline.drain_by, "2026-12-17T10:49Z");
    let cold = timeline
        .cold_start_minutes
        .expect("the catalog estimates Kimi K3's cold start");
    let serving = timeline.serving_from.clone().unwrap();
    assert_eq!(
        serving,
        hyperforge::catalog::time::format_utc(
            hyperforge::catalog::time::parse_utc_minutes("2026-12-10T04:55:00Z").unwrap() + cold
        )
    );
    let runbook = assembly.text("window/RUNBOOK.md").unwrap();
    for line in [
        "| 2026-12-10T04:55Z | the block opens".to_owned(),
        format!("| {serving} | the endpoint serves, after a cold start of about {cold} minutes |"),
        "| 2026-12-17T10:49Z | drain by: stop sending requests and scale the node group to zero |"
            .to_owned(),
        "| 2026-12-17T11:30Z | the block ends (a 7-day block) |".to_owned(),
    ] {
        assert!(runbook.contains(&line), "{line}");
    }
    // No window, no timeline.
    let mut plain = Stack::new("plain", "us-west-2");
    let f = plain.cloudformation_stage("foundation");
    let net = plain.add(f, Network::new("Network").gpu_subnet("usw2-az2"));
    let eks = plain.add(
        f,
        EksCluster::new("Eks", "plain")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc),
    );
    let nodes = plain.cloudformation_stage("nodes");
    plain.add(
        nodes,
        ManagedNodeGroup::gpu(
            "Gpu",
            &eks.cluster,
            "p6-b300.48xlarge",
            net.gpu_subnet.iter(),
        )
        .capacity(NodeCapacity::capacity_block_of(
            CAPACITY_BLOCK_RESERVATION_ID,
            "usw2-az2",
            1,
        )),
    );
    let assembly = App::new().stack(plain).synth().unwrap();
    let runbook = assembly.text("plain/RUNBOOK.md").unwrap();
    assert!(!runbook.contains("The block's timeline"));
}

/// In a stack file, a window's mistakes point at the value that made them, and the upfront fee
/// is range-checked by the loader.
#[test]
fn stack_file_windows_are_checked_at_their_lines() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/stacks/kimi-k3-eks.yaml"
    ))
    .unwrap();
    let app = hyperforge::stackfile::load_str("kimi-k3-eks.yaml", &text)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!app.validate().has_errors());

    let wrong = text.replace(
        "end: \"2027-01-15T11:30:00Z\"",
        "end: \"2027-01-15T12:00:00Z\"\n          upfront_fee_usd: -1",
    );
    let line_of = |needle: &str| wrong.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let diagnostics = match hyperforge::stackfile::load_str("kimi-k3-eks.yaml", &wrong) {
        Ok(app) => app.validate(),
        Err(ds) => ds,
    };
    let at = |code: Code| {
        diagnostics
            .iter()
            .find(|d| d.code == code)
            .map(|d| d.path.clone())
            .unwrap_or_else(|| panic!("no {code:?} in {diagnostics:?}"))
    };
    assert!(
        at(Code::StackFileOutOfRange)
            .starts_with(&format!("kimi-k3-eks.yaml:{}:", line_of("upfront_fee_usd"))),
        "{diagnostics:?}"
    );
    // The loader reports the range and passes nothing on; the window is checked by the builder.
    let wrong = text.replace(
        "end: \"2027-01-15T11:30:00Z\"",
        "end: \"2027-01-15T12:00:00Z\"",
    );
    let diagnostics = hyperforge::stackfile::load_str("kimi-k3-eks.yaml", &wrong)
        .map(|app| app.validate())
        .unwrap_or_else(|ds| ds);
    let located = diagnostics
        .iter()
        .find(|d| d.code == Code::CapacityBlockEndTime)
        .map(|d| d.path.clone())
        .unwrap_or_else(|| panic!("{diagnostics:?}"));
    let line = wrong.lines().position(|l| l.contains("12:00:00Z")).unwrap() + 1;
    assert!(
        located.starts_with(&format!("kimi-k3-eks.yaml:{line}:")),
        "{located}"
    );
}
