//! Reservations as dated objects: a Capacity Block's window is checked against EC2's rules
//! (it ends at 11:30 UTC, lasts 1 to 14 days or whole weeks up to 182) and drives the timeline
//! the manifest, the runbook and `hyperforge list` show.

use hyperforge::assembly::inventory::CapacitySourceEntry;
use hyperforge::constructs::*;
use hyperforge::reference::CAPACITY_BLOCK_RESERVATION_ID;
use hyperforge::{App, Code};

fn app(start: &str, end: &str) -> App {
    let block =
        CapacityBlock::held(CAPACITY_BLOCK_RESERVATION_ID, "usw2-az2", 2).during(start, end);
    App::new().stack(crate::fixtures::capacity_block_serving_stack(
        "window",
        block.into(),
        |d, _| d,
    ))
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
    let plain = crate::fixtures::capacity_block_serving_stack(
        "plain",
        NodeCapacity::capacity_block_of(CAPACITY_BLOCK_RESERVATION_ID, "usw2-az2", 1),
        |d, _| d,
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

/// The warning before a block ends takes the end from the block's window: the end is written
/// once. Without a window it needs its own, and one that contradicts the window is refused.
#[test]
fn the_end_warning_reads_the_windows_end() {
    let with_warning =
        |block: CapacityBlock, warning: fn(&AlarmTopicHandle) -> CapacityEndWarning| {
            let mut stack =
                crate::fixtures::capacity_block_serving_stack("ending", block.into(), |d, _| d);
            let ops = stack.cloudformation_stage("operations");
            let topic = stack.add(ops, AlarmTopic::new("Alarms"));
            stack.add(ops, warning(&topic));
            App::new().stack(stack)
        };
    let block = || {
        CapacityBlock::held(CAPACITY_BLOCK_RESERVATION_ID, "usw2-az2", 1)
            .during("2026-12-10T04:55:00Z", "2026-12-17T11:30:00Z")
    };
    let derived = with_warning(block(), |t| {
        CapacityEndWarning::for_capacity_block("End", t, CAPACITY_BLOCK_RESERVATION_ID)
    });
    let assembly = derived.synth().unwrap_or_else(|e| panic!("{e}"));
    let ends = &assembly.manifest().stacks[0].inventory.capacity_ends;
    assert_eq!(ends[0].end_time, "2026-12-17T11:30:00Z");

    let errors = |app: App| -> Vec<String> {
        app.validate()
            .iter()
            .filter(|d| d.code == Code::InvalidCapacityEndTime)
            .map(|d| d.message.clone())
            .collect()
    };
    let no_window = with_warning(
        CapacityBlock::held(CAPACITY_BLOCK_RESERVATION_ID, "usw2-az2", 1),
        |t| CapacityEndWarning::for_capacity_block("End", t, CAPACITY_BLOCK_RESERVATION_ID),
    );
    assert_eq!(
        errors(no_window),
        ["no end time: none is given, and no node group gives the block's window"]
    );
    let contradicting = with_warning(block(), |t| {
        CapacityEndWarning::capacity_block(
            "End",
            t,
            CAPACITY_BLOCK_RESERVATION_ID,
            "2026-12-24T11:30:00Z",
        )
    });
    assert_eq!(
        errors(contradicting),
        ["end time `2026-12-24T11:30:00Z` is not the end of the block's window, `2026-12-17T11:30:00Z`"]
    );
    // A window's end that is not a time is the window's mistake, said once, at the window.
    let bad_window = with_warning(
        CapacityBlock::held(CAPACITY_BLOCK_RESERVATION_ID, "usw2-az2", 1)
            .during("2026-12-10T04:55:00Z", "next tuesday"),
        |t| CapacityEndWarning::for_capacity_block("End", t, CAPACITY_BLOCK_RESERVATION_ID),
    );
    let codes: Vec<Code> = bad_window
        .validate()
        .iter()
        .filter(|d| d.code.severity() == hyperforge::diagnostics::Severity::Error)
        .map(|d| d.code)
        .collect();
    assert_eq!(codes, [Code::InvalidReservationWindow]);
    let agreeing = with_warning(block(), |t| {
        CapacityEndWarning::capacity_block(
            "End",
            t,
            CAPACITY_BLOCK_RESERVATION_ID,
            "2026-12-17T11:30:00.000Z",
        )
    });
    assert!(errors(agreeing).is_empty());
}

/// A Karpenter pool on a Capacity Block carries its window too: the same checks at its own
/// fields, the same timeline, and Karpenter's drain in the runbook.
#[test]
fn a_karpenter_pools_window_is_checked_and_drives_its_timeline() {
    let app = hyperforge::reference::kimi_k3_eks_karpenter();
    let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
    let runbook = assembly.text("kimi-k3-eks-karpenter/RUNBOOK.md").unwrap();
    assert!(runbook.contains(
        "| 2027-01-15T10:50Z | Karpenter drains the block's nodes (40 minutes before the end) |"
    ));
    assert!(runbook.contains("| 2027-01-15T10:49Z | drain by: stop sending requests |"));

    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/stacks/kimi-k3-eks-karpenter.yaml"
    ))
    .unwrap();
    let wrong = text.replace(
        "end: \"2027-01-15T11:30:00Z\"",
        "end: \"2027-01-15T11:00:00Z\"",
    );
    let diagnostics = hyperforge::stackfile::load_str("kimi-k3-eks-karpenter.yaml", &wrong)
        .map(|app| app.validate())
        .unwrap_or_else(|ds| ds);
    let line = wrong.lines().position(|l| l.contains("11:00:00Z")).unwrap() + 1;
    let end = diagnostics
        .iter()
        .find(|d| d.code == Code::CapacityBlockEndTime)
        .unwrap_or_else(|| panic!("{diagnostics:?}"));
    assert!(
        end.path
            .starts_with(&format!("kimi-k3-eks-karpenter.yaml:{line}:")),
        "{}",
        end.path
    );
}
