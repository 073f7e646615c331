//! Reservations as dated objects: a Capacity Block's window is checked against EC2's rules
//! (it ends at 11:30 UTC, lasts 1 to 14 days or whole weeks up to 182) and drives the timeline
//! the manifest, the runbook and `hyperforge list` show.

use crate::reference::CAPACITY_BLOCK_RESERVATION_ID;
use hyperforge::assembly::inventory::CapacitySourceEntry;
use hyperforge::constructs::*;
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

/// The text of the reference stack file `name` (`stacks/<name>`).
fn reference_stack_file(name: &str) -> String {
    std::fs::read_to_string(format!("{}/stacks/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The timeline of the first Capacity Block of `assembly`'s first stack.
fn block_timeline(
    assembly: &hyperforge::assembly::Assembly,
) -> Option<hyperforge::assembly::inventory::Timeline> {
    reservation_timeline(assembly, false)
}

/// The timeline of the first Capacity Block (or, `plan`, training plan) of `assembly`'s first
/// stack.
fn reservation_timeline(
    assembly: &hyperforge::assembly::Assembly,
    plan: bool,
) -> Option<hyperforge::assembly::inventory::Timeline> {
    assembly.manifest().stacks[0]
        .inventory
        .capacity
        .iter()
        .find_map(|c| match &c.source {
            CapacitySourceEntry::CapacityBlock { timeline, .. } if !plan => timeline.clone(),
            CapacitySourceEntry::TrainingPlan { timeline, .. } if plan => timeline.clone(),
            _ => None,
        })
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
    let timeline = block_timeline(&assembly).expect("a timeline");
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
        "| 2026-12-17T10:49Z | drain by: stop sending requests; the stage's schedule scales the node group to zero |"
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
    let text = reference_stack_file("kimi-k3-eks.yaml");
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
        ["end time `2026-12-24T11:30:00Z` is not the end of the reservation's window, `2026-12-17T11:30:00Z`"]
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
    let app = crate::reference::kimi_k3_eks_karpenter();
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

/// The window's times are EventBridge Scheduler schedules of the nodes stage, in both formats
/// and exact to the minute: scale up when the block opens, to zero at the drain time, nothing
/// after EC2's termination lead; the plan's scaling step leaves a block still to come to them.
#[test]
fn the_window_is_scheduled_to_the_minute_in_both_formats() {
    use hyperforge::catalog::capacity::{block_schedule, EC2_TERMINATION_LEAD_MINUTES};
    use hyperforge::catalog::time::{format_utc, parse_utc_minutes};
    let (start, end) = ("2026-12-10T04:55:00Z", "2026-12-17T11:30:00Z");
    // A 95-minute cold start serves from 06:30; the drain time is the server's termination grace.
    let minutes = |t: &str| parse_utc_minutes(t).unwrap();
    let schedule = block_schedule(minutes(start), minutes(end), Some(95), 1);
    assert_eq!(
        format_utc(schedule.serving_from.unwrap()),
        "2026-12-10T06:30Z"
    );
    assert_eq!(format_utc(schedule.drain_by), "2026-12-17T10:49Z");
    assert_eq!(format_utc(schedule.terminations_from), "2026-12-17T11:00Z");
    assert_eq!(
        schedule.end - schedule.terminations_from,
        EC2_TERMINATION_LEAD_MINUTES
    );

    let assembly = app(start, end).synth().unwrap_or_else(|e| panic!("{e}"));
    // The group's own sizes (one node serves the one replica; the block's second instance
    // is the fixture's idle capacity), then zero.
    let expected = [
        // Sorted as text: the scale-to-zero's, then the scale-up's.
        ("cron(49 10 17 12 ? 2026)", (0, 0, 1)),
        ("cron(55 4 10 12 ? 2026)", (0, 1, 1)),
    ];
    let sizes = |input: &str| {
        let input: serde_json::Value = serde_json::from_str(input).unwrap();
        assert_eq!(input["ClusterName"], "window");
        let s = &input["ScalingConfig"];
        (
            s["MinSize"].as_i64().unwrap(),
            s["DesiredSize"].as_i64().unwrap(),
            s["MaxSize"].as_i64().unwrap(),
        )
    };

    let cfn: serde_json::Value =
        serde_json::from_str(assembly.text("window/02-nodes.template.json").unwrap()).unwrap();
    let mut schedules: Vec<(String, (i64, i64, i64))> = cfn["Resources"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| r["Type"] == "AWS::Scheduler::Schedule")
        .map(|r| {
            let p = &r["Properties"];
            assert_eq!(p["ScheduleExpressionTimezone"], "UTC");
            assert_eq!(p["FlexibleTimeWindow"]["Mode"], "OFF");
            assert_eq!(
                p["Target"]["Arn"]["Fn::Sub"],
                "arn:${AWS::Partition}:scheduler:::aws-sdk:eks:updateNodegroupConfig"
            );
            // The cluster's name is the foundation stage's export.
            let input = &p["Target"]["Input"]["Fn::Sub"];
            assert_eq!(
                input[1]["EksClusterName"]["Fn::ImportValue"],
                "window-foundation:EksCluster:Name"
            );
            let input = input[0]
                .as_str()
                .unwrap()
                .replace("${EksClusterName}", "window");
            (
                p["ScheduleExpression"].as_str().unwrap().to_owned(),
                sizes(&input),
            )
        })
        .collect();
    schedules.sort();
    assert_eq!(schedules, expected.map(|(e, s)| (e.to_owned(), s)));

    let tf: serde_json::Value = serde_json::from_str(
        assembly
            .text("window/terraform/01-foundation/main.tf.json")
            .unwrap(),
    )
    .unwrap();
    let mut schedules: Vec<(String, (i64, i64, i64))> = tf["resource"]["aws_scheduler_schedule"]
        .as_object()
        .expect("the schedules in Terraform")
        .values()
        .map(|r| {
            assert_eq!(r["schedule_expression_timezone"], "UTC");
            let input = r["target"]["input"]
                .as_str()
                .unwrap()
                .replace("${aws_eks_cluster.eks_cluster.name}", "window");
            (
                r["schedule_expression"].as_str().unwrap().to_owned(),
                sizes(&input),
            )
        })
        .collect();
    schedules.sort();
    assert_eq!(schedules, expected.map(|(e, s)| (e.to_owned(), s)));

    // Nothing is scheduled at or after EC2 begins terminating the block's instances.
    // Each expression matches one minute of one year.
    let last = schedules
        .iter()
        .map(|(cron, _)| {
            let f: Vec<i64> = cron["cron(".len()..cron.len() - 1]
                .split(' ')
                .filter(|f| *f != "?")
                .map(|f| f.parse().unwrap())
                .collect();
            minutes(&format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:00Z",
                f[4], f[3], f[2], f[1], f[0]
            ))
        })
        .max()
        .unwrap();
    assert!(last < minutes(end) - EC2_TERMINATION_LEAD_MINUTES);

    // The plan's step knows the schedule: a block still to come is left to it.
    let steps = assembly.manifest().stacks[0]
        .stage("nodes")
        .unwrap()
        .steps()
        .to_vec();
    let hyperforge::assembly::manifest::Step::ScaleCapacityBlockNodeGroup { scheduled_at, .. } =
        &steps[0]
    else {
        panic!("{steps:?}")
    };
    assert_eq!(scheduled_at.as_deref(), Some("2026-12-10T04:55Z"));
    let script = steps[0].script("us-west-2");
    assert!(
        script.contains("payment-pending|scheduled|pending|assessing|delayed)"),
        "a block still to come is left to the schedule: {script}"
    );
    assert!(
        !script.contains("sleep 300"),
        "nothing waits for it: {script}"
    );
    assert!(
        script.contains("aws eks update-nodegroup-config"),
        "an active block is scaled now"
    );
}

/// A drain time of the user's own moves the scale-to-zero schedule and the timeline earlier;
/// one later than the servers' grace before EKS's scale-down (40 minutes before the end), or
/// not after the start, is refused at the field and at its stack-file line.
#[test]
fn a_drain_later_than_the_termination_lead_is_refused() {
    let (start, end) = ("2026-12-10T04:55:00Z", "2026-12-17T11:30:00Z");
    let drained = |at: &str| {
        let block = CapacityBlock::held(CAPACITY_BLOCK_RESERVATION_ID, "usw2-az2", 2)
            .within(ReservationWindow::new(start, end).drained_by(at));
        App::new().stack(crate::fixtures::capacity_block_serving_stack(
            "window",
            block.into(),
            |d, _| d,
        ))
    };
    let codes = |at: &str| -> Vec<(Code, Option<String>)> {
        drained(at)
            .validate()
            .iter()
            .filter(|d| d.code.severity() == hyperforge::diagnostics::Severity::Error)
            .map(|d| (d.code, d.field.clone()))
            .collect()
    };
    let field = Some("capacity_block.window.drain_by".to_owned());
    // The latest drain is the default's: the server's minute before EKS's 10:50.
    assert_eq!(codes("2026-12-17T10:49:00Z"), []);
    assert_eq!(
        codes("2026-12-17T10:50:00Z"),
        [(Code::DrainAfterScaleDown, field.clone())]
    );
    assert_eq!(
        codes("2026-12-17T11:15:00Z"),
        [(Code::DrainAfterScaleDown, field.clone())]
    );
    assert_eq!(
        codes("2026-12-10T04:55:00Z"),
        [(Code::DrainAfterScaleDown, field.clone())]
    );
    assert_eq!(
        codes("the last morning"),
        [(Code::InvalidReservationWindow, field.clone())]
    );

    // An earlier drain is the scale-to-zero schedule's time and the timeline's.
    let assembly = drained("2026-12-17T06:00:00Z")
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
    let cfn: serde_json::Value =
        serde_json::from_str(assembly.text("window/02-nodes.template.json").unwrap()).unwrap();
    let mut at: Vec<&str> = cfn["Resources"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| r["Type"] == "AWS::Scheduler::Schedule")
        .map(|r| r["Properties"]["ScheduleExpression"].as_str().unwrap())
        .collect();
    at.sort();
    assert_eq!(at, ["cron(0 6 17 12 ? 2026)", "cron(55 4 10 12 ? 2026)"]);
    let timeline = block_timeline(&assembly).unwrap();
    assert_eq!(timeline.drain_by, "2026-12-17T06:00Z");
    // Retried until EKS's scale-down, within the day Scheduler keeps an event.
    let ages: Vec<i64> = cfn["Resources"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| r["Type"] == "AWS::Scheduler::Schedule")
        .map(|r| {
            r["Properties"]["Target"]["RetryPolicy"]["MaximumEventAgeInSeconds"]
                .as_f64()
                .unwrap() as i64
        })
        .collect();
    assert!(ages.contains(&((4 * 60 + 50) * 60)), "{ages:?}");
    let early = drained("2026-12-15T06:00:00Z")
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
    let cfn: serde_json::Value =
        serde_json::from_str(early.text("window/02-nodes.template.json").unwrap()).unwrap();
    let tf: serde_json::Value = serde_json::from_str(
        early
            .text("window/terraform/01-foundation/main.tf.json")
            .unwrap(),
    )
    .unwrap();
    let cfn_ages = cfn["Resources"]
        .as_object()
        .unwrap()
        .values()
        .filter(|r| r["Type"] == "AWS::Scheduler::Schedule")
        .map(|r| {
            r["Properties"]["Target"]["RetryPolicy"]["MaximumEventAgeInSeconds"]
                .as_f64()
                .unwrap()
        });
    let tf_ages = tf["resource"]["aws_scheduler_schedule"]
        .as_object()
        .unwrap()
        .values()
        .map(|r| {
            r["target"]["retry_policy"]["maximum_event_age_in_seconds"]
                .as_f64()
                .unwrap()
        });
    for age in cfn_ages.chain(tf_ages) {
        assert!((60.0..=86_400.0).contains(&age), "{age}");
    }
    assert_eq!(timeline.scale_down_at, "2026-12-17T10:50Z");

    // In a stack file, at the line of the value.
    let text = reference_stack_file("kimi-k3-eks.yaml");
    let late = text.replace(
        "end: \"2027-01-15T11:30:00Z\"",
        "end: \"2027-01-15T11:30:00Z\"\n            drain_by: \"2027-01-15T11:00:00Z\"",
    );
    let diagnostics = hyperforge::stackfile::load_str("kimi-k3-eks.yaml", &late)
        .map(|app| app.validate())
        .unwrap_or_else(|ds| ds);
    let line = late.lines().position(|l| l.contains("drain_by")).unwrap() + 1;
    let drain = diagnostics
        .iter()
        .find(|d| d.code == Code::DrainAfterScaleDown)
        .unwrap_or_else(|| panic!("{diagnostics:?}"));
    assert!(
        drain.path.starts_with(&format!("kimi-k3-eks.yaml:{line}:")),
        "{}",
        drain.path
    );
    assert_eq!(
        drain.help,
        "drain between the start and 2027-01-15T10:49Z, or leave `drain_by` out to drain as late as that"
    );
}

/// The reference's window is watched: the alert rules hold one on the block being open and
/// paid for while no server reports, from "serving from" plus the slack to the drain, and the
/// runbook lists it with the other alerts.
#[test]
fn an_open_block_that_serves_nothing_is_alerted_on() {
    use hyperforge::catalog::time::parse_utc_minutes;
    use hyperforge::constructs::monitoring::{CAPACITY_BLOCK_NOT_SERVING, SERVING_SLACK_MINUTES};
    for (app, name) in [
        (crate::reference::kimi_k3_eks(), "kimi-k3-eks"),
        (
            crate::reference::kimi_k3_eks_karpenter(),
            "kimi-k3-eks-karpenter",
        ),
    ] {
        let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
        let timeline = block_timeline(&assembly).unwrap();
        let seconds = |t: &str| parse_utc_minutes(&t.replace('Z', ":00Z")).unwrap() * 60;
        let from = seconds(timeline.serving_from.as_deref().unwrap()) + SERVING_SLACK_MINUTES * 60;
        let until = seconds(&timeline.drain_by);
        let expected = format!(
            r#"expr: absent(vllm:num_requests_running{{job="vllm"}}) and on() (vector(time()) > {from} < {until})"#
        );
        let operations = assembly
            .files()
            .iter()
            .find(|(path, _)| {
                path.starts_with(&format!("{name}/")) && path.ends_with("-operations.template.json")
            })
            .map(|(_, bytes)| String::from_utf8(bytes.clone()).unwrap())
            .unwrap_or_else(|| panic!("{name}: no operations template"));
        let t: serde_json::Value = serde_json::from_str(&operations).unwrap();
        let rules = t["Resources"]["MetricsRules"]["Properties"]["Data"]
            .as_str()
            .unwrap();
        assert!(
            rules.contains(&format!(
                "- alert: {CAPACITY_BLOCK_NOT_SERVING}\n    {expected}"
            )),
            "{name}: {rules}"
        );
        // Every GPU node comes from the block: the exporter's silence is alerted on only
        // while the block's nodes serve, never before it opens.
        assert!(
            rules.contains(&format!(
                r#"expr: (up{{job="dcgm"}} == 0 or absent(up{{job="dcgm"}})) and on() (vector(time()) > {from} < {until})"#
            )),
            "{name}: {rules}"
        );
        let runbook = assembly.text(&format!("{name}/RUNBOOK.md")).unwrap();
        assert!(
            runbook.contains(&format!(
                "**{CAPACITY_BLOCK_NOT_SERVING}** (critical, after 5m)"
            )),
            "{name}"
        );
    }
    // A block without a window: its GPU nodes may run at any time, so the exporter's
    // silence is always alerted on.
    let text = reference_stack_file("kimi-k3-eks.yaml");
    let window = "          window:                   # StartDate and EndDate (placeholders: replace with your block's)\n            start: \"2027-01-08T04:55:00Z\"\n            end: \"2027-01-15T11:30:00Z\"\n";
    let ending = "        reservation_id: cr-0123456789abcdef0\n        # Ends";
    assert!(text.contains(window) && text.contains(ending));
    let text = text.replace(window, "").replace(
        ending,
        "        reservation_id: cr-0123456789abcdef0\n        end_time: \"2027-01-15T11:30:00Z\"\n        # Ends",
    );
    let assembly = hyperforge::stackfile::load_str("kimi-k3-eks.yaml", &text)
        .unwrap_or_else(|e| panic!("{e}"))
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(block_timeline(&assembly).is_none());
    let operations = assembly
        .text("kimi-k3-eks/05-operations.template.json")
        .unwrap();
    assert!(
        operations.contains(r#"expr: up{job=\"dcgm\"} == 0 or absent(up{job=\"dcgm\"})\n"#),
        "{operations}"
    );
}

/// A HyperPod stack whose p6-b300 group is fed by the fixture training plan with `capacity`
/// applied to it (a window, a fee).
fn plan_app(capacity: impl Fn(Capacity) -> Capacity) -> App {
    let mut stack = hyperforge::app::Stack::new("plan", "us-west-2");
    crate::fixtures::add_hyperpod_stages(
        &mut stack,
        Network::new("Network").hyperpod_subnet("usw2-az2"),
        "plan",
        InstanceGroup::new("gpu", "ml.p6-b300.48xlarge").capacity(capacity(
            Capacity::training_plan(crate::fixtures::TRAINING_PLAN, "usw2-az2"),
        )),
    );
    App::new().stack(stack)
}

/// A training plan's window is checked against SageMaker's rules, not EC2's: any end time,
/// 1 to 182 whole days, and a drain before SageMaker's terminations 30 minutes before the end.
#[test]
fn a_training_plans_window_is_checked_against_sagemakers_rules() {
    let codes = |start: &str, end: &str, drain: Option<&str>| -> Vec<(Code, Option<String>)> {
        plan_app(|c| {
            let window = ReservationWindow::new(start, end);
            c.within(match drain {
                Some(at) => window.drained_by(at),
                None => window,
            })
        })
        .validate()
        .iter()
        .filter(|d| d.code.severity() == hyperforge::diagnostics::Severity::Error)
        .map(|d| (d.code, d.field.clone()))
        .collect()
    };
    // Not 11:30, 15 days: both fine for a plan (a Capacity Block allows neither).
    assert_eq!(
        codes("2026-12-10T12:00:00Z", "2026-12-25T12:00:00Z", None),
        []
    );
    assert_eq!(
        codes("2026-12-10T12:00:00Z", "2027-06-12T12:00:00Z", None),
        [(
            Code::TrainingPlanDuration,
            Some("training_plan.window".into())
        )]
    );
    assert_eq!(
        codes("2026-12-10 12:00", "2026-12-17T12:00:00Z", None),
        [(
            Code::InvalidReservationWindow,
            Some("training_plan.window.start".into())
        )]
    );
    // The latest drain is 31 minutes before the end: SageMaker's 30 and the servers' grace.
    let end = "2026-12-17T12:00:00Z";
    assert_eq!(
        codes("2026-12-10T12:00:00Z", end, Some("2026-12-17T11:29:00Z")),
        []
    );
    let late = plan_app(|c| {
        c.within(
            ReservationWindow::new("2026-12-10T12:00:00Z", end).drained_by("2026-12-17T11:30:00Z"),
        )
    })
    .validate();
    let d = late
        .iter()
        .find(|d| d.code == Code::DrainAfterScaleDown)
        .unwrap_or_else(|| panic!("{late:?}"));
    assert_eq!(d.field.as_deref(), Some("training_plan.window.drain_by"));
    assert!(
        d.message.contains("SageMaker begins terminating the plan's instances at 2026-12-17T11:30Z (30 minutes before the end)"),
        "{}",
        d.message
    );
    // A fee is a price.
    let fee = plan_app(|c| c.during("2026-12-10T12:00:00Z", end).upfront_fee_usd(-5.0)).validate();
    assert!(fee.iter().any(|d| d.code == Code::InvalidUpfrontFee
        && d.field.as_deref() == Some("training_plan.upfront_fee_usd")));
}

/// The plan's window drives the timeline (manifest, runbook, `list`), the warning before its
/// end, the not-serving alert and `hyperforge cost`, on the HyperPod reference.
#[test]
fn a_training_plans_window_drives_the_hyperpod_references_timeline() {
    use crate::reference::{TRAINING_PLAN_END, TRAINING_PLAN_START};
    let app = crate::reference::kimi_k3_hyperpod();
    let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
    let stack = &assembly.manifest().stacks[0];
    let timeline = reservation_timeline(&assembly, true).expect("the plan's timeline");
    let minutes = |t: &str| hyperforge::catalog::time::parse_utc_minutes(t).unwrap();
    let at = hyperforge::catalog::time::format_utc;
    let (start, end) = (minutes(TRAINING_PLAN_START), minutes(TRAINING_PLAN_END));
    assert_eq!(timeline.start, at(start));
    assert_eq!(timeline.terminations_from, at(end - 30));
    assert_eq!(timeline.drain_by, at(end - 31));
    let cold = timeline
        .cold_start_minutes
        .expect("an estimated cold start");
    assert_eq!(timeline.serving_from, Some(at(start + cold)));
    assert_eq!(timeline.idle_minutes, Some(cold + 31));
    assert_eq!(timeline.days, 7);

    let runbook = assembly.text("kimi-k3-hyperpod/RUNBOOK.md").unwrap();
    for line in [
        format!(
            "| {} | the plan turns Active: SageMaker provisions the instance group's instances |",
            at(start)
        ),
        format!("| {} | drain by: the CronJob `capacity-drain/drain-p6-b300` cordons the instance group's nodes and evicts their pods, as kubectl drain does (HyperPod drains nothing itself) |", at(end - 31)),
        "aws sagemaker extend-training-plan --region us-west-2".to_owned(),
    ] {
        assert!(runbook.contains(&line), "{line}");
    }
    // The warning reads the window's end: the end is written once.
    let end_entry = &stack.inventory.capacity_ends[0];
    assert_eq!(end_entry.end_time, TRAINING_PLAN_END);
    // The alert on an active plan that serves nothing.
    let operations = assembly
        .text("kimi-k3-hyperpod/05-operations.template.json")
        .unwrap();
    assert!(operations.contains(&format!(
        "alert: {}",
        hyperforge::constructs::monitoring::TRAINING_PLAN_NOT_SERVING
    )));
    // `hyperforge cost`: the window, unpriced without a fee, priced with one.
    let report = hyperforge::cost::estimate(&app).to_string();
    assert!(
        report.contains("unpriced: a training plan's price is set at purchase"),
        "{report}"
    );
    let priced = plan_app(|c| {
        c.during(TRAINING_PLAN_START, TRAINING_PLAN_END)
            .upfront_fee_usd(70_000.0)
    });
    let report = hyperforge::cost::estimate(&priced).to_string();
    assert!(
        report.contains("training plan arn:aws:sagemaker"),
        "{report}"
    );
    assert!(report.contains("$70000.00 paid up front"), "{report}");
}

/// In a stack file, a plan's window is read and checked at its line.
#[test]
fn stack_file_training_plan_windows_are_checked_at_their_lines() {
    let text = reference_stack_file("kimi-k3-hyperpod.yaml");
    let wrong = text.replace(
        "end: \"2027-01-15T11:30:00Z\"",
        "end: \"2027-09-15T11:30:00Z\"",
    );
    assert_ne!(wrong, text);
    let diagnostics = hyperforge::stackfile::load_str("kimi-k3-hyperpod.yaml", &wrong)
        .map(|app| app.validate())
        .unwrap_or_else(|ds| ds);
    let located = diagnostics
        .iter()
        .find(|d| d.code == Code::TrainingPlanDuration)
        .map(|d| d.path.clone())
        .unwrap_or_else(|| panic!("{diagnostics:?}"));
    // The window object, at its first field.
    let line = wrong
        .lines()
        .position(|l| l.contains("start: \"2027-01-08T11:30:00Z\""))
        .unwrap()
        + 1;
    assert!(
        located.starts_with(&format!("kimi-k3-hyperpod.yaml:{line}:")),
        "{located}"
    );
}

/// The EKS fixture stack on an On-Demand Capacity Reservation of `instances` instances in
/// `zone`.
fn odcr_stack(zone: &str, instances: u32) -> hyperforge::app::Stack {
    crate::fixtures::capacity_block_serving_stack(
        "odcr",
        OnDemandCapacityReservation::held(CAPACITY_BLOCK_RESERVATION_ID, zone, instances).into(),
        |d, _| d,
    )
}

/// An On-Demand Capacity Reservation is on-demand capacity targeted by the launch template
/// (no `capacity-block` market), sized at once (no step waits for it), one declared input in
/// both formats, and the runbook says how to create it and that it is billed until cancelled.
#[test]
fn an_on_demand_capacity_reservation_is_targeted_on_demand_capacity() {
    let assembly = App::new()
        .stack(odcr_stack("usw2-az2", 1))
        .synth()
        .unwrap_or_else(|e| panic!("{e}"));
    let nodes: serde_json::Value =
        serde_json::from_str(assembly.text("odcr/02-nodes.template.json").unwrap()).unwrap();
    let lt = &nodes["Resources"]["GpuLaunchTemplate"]["Properties"]["LaunchTemplateData"];
    assert_eq!(
        lt["CapacityReservationSpecification"]["CapacityReservationTarget"]
            ["CapacityReservationId"],
        serde_json::json!({"Ref": "GpuCapacityReservationId"})
    );
    assert!(lt.get("InstanceMarketOptions").is_none(), "{lt}");
    let group = &nodes["Resources"]["GpuNodeGroup"]["Properties"];
    assert_eq!(group["CapacityType"], "ON_DEMAND");
    assert_eq!(group["ScalingConfig"]["DesiredSize"], 1);
    assert_eq!(
        nodes["Parameters"]["GpuCapacityReservationId"]["Default"],
        CAPACITY_BLOCK_RESERVATION_ID
    );
    let tf: serde_json::Value = serde_json::from_str(
        assembly
            .text("odcr/terraform/01-foundation/main.tf.json")
            .unwrap(),
    )
    .unwrap();
    let lt = &tf["resource"]["aws_launch_template"]["gpu_launch_template"];
    assert_eq!(
        lt["capacity_reservation_specification"]["capacity_reservation_target"]
            ["capacity_reservation_id"],
        "${var.gpu_capacity_reservation_id}"
    );
    assert!(lt.get("instance_market_options").is_none(), "{lt}");
    let stack = &assembly.manifest().stacks[0];
    assert!(stack.inventory.capacity.iter().any(|c| matches!(
        &c.source,
        CapacitySourceEntry::CapacityReservation { input, reserved_count: Some(1), .. }
            if input == "GpuCapacityReservationId"
    )));
    // Nothing waits for it: it is active when the stack is deployed.
    let steps: Vec<_> = stack
        .stages
        .iter()
        .flat_map(|s| s.steps().iter())
        .map(|s| format!("{s:?}"))
        .collect();
    assert!(
        !steps.iter().any(|s| s.contains("ScaleCapacityBlock")),
        "{steps:?}"
    );
    let runbook = assembly.text("odcr/RUNBOOK.md").unwrap();
    for line in [
        "aws ec2 create-capacity-reservation --region us-west-2",
        "--availability-zone-id usw2-az2 --instance-count 1",
        "--instance-match-criteria targeted --end-date-type unlimited",
        "aws ec2 cancel-capacity-reservation --region us-west-2",
    ] {
        assert!(runbook.contains(line), "{line}");
    }
    // Billed for what it holds, used or not: two held, one running, two priced.
    let report = hyperforge::cost::estimate(&App::new().stack(odcr_stack("usw2-az2", 2)));
    let line = report.stacks[0]
        .lines
        .iter()
        .find(|l| l.path == "odcr/Gpu")
        .unwrap();
    assert_eq!(line.count, 2);
}

/// Its id, zone and size are checked at their fields.
#[test]
fn an_on_demand_capacity_reservations_mistakes_are_refused_at_the_field() {
    let codes = |stack: hyperforge::app::Stack| -> Vec<(Code, Option<String>)> {
        App::new()
            .stack(stack)
            .validate()
            .iter()
            .filter(|d| d.code.severity() == hyperforge::diagnostics::Severity::Error)
            .map(|d| (d.code, d.field.clone()))
            .collect()
    };
    assert_eq!(codes(odcr_stack("usw2-az2", 1)), []);
    // Two held, one running: the idle one is billed too.
    let idle = App::new().stack(odcr_stack("usw2-az2", 2)).validate();
    let d = idle
        .iter()
        .find(|d| d.code == Code::CapacityBlockPartlyIdle)
        .unwrap_or_else(|| panic!("{idle:?}"));
    assert!(
        d.message.starts_with(&format!(
            "On-Demand Capacity Reservation `{CAPACITY_BLOCK_RESERVATION_ID}` reserves 2"
        )),
        "{}",
        d.message
    );
    assert_eq!(
        codes(odcr_stack("usw2-az1", 1)),
        [(Code::CapacityBlockSubnetZone, Some("subnets".into()))]
    );
    assert!(codes(odcr_stack("usw2-az2", 0)).contains(&(
        Code::InvalidReservedInstanceCount,
        Some("capacity_reservation.instance_count".into())
    )));
    let bad_id = crate::fixtures::capacity_block_serving_stack(
        "odcr",
        OnDemandCapacityReservation::held("cr-xyz", "usw2-az2", 1).into(),
        |d, _| d,
    );
    assert_eq!(
        codes(bad_id),
        [(
            Code::MalformedCapacityReservationId,
            Some("capacity_reservation.reservation_id".into())
        )]
    );
}

/// In a stack file, a node group takes `capacity_reservation` instead of `capacity_block`, not
/// both.
#[test]
fn stack_file_capacity_reservations_load_and_exclude_capacity_blocks() {
    let text = reference_stack_file("kimi-k3-eks.yaml");
    let both = text.replace(
        "        capacity_block:\n",
        "        capacity_reservation: {reservation_id: cr-0123456789abcdef0, az_id: usw2-az2, instance_count: 1}\n        capacity_block:\n",
    );
    assert_ne!(both, text);
    let ds = match hyperforge::stackfile::load_str("kimi-k3-eks.yaml", &both) {
        Ok(app) => app.validate(),
        Err(ds) => ds,
    };
    let line = both
        .lines()
        .position(|l| l.contains("capacity_reservation:"))
        .unwrap()
        + 1;
    assert!(
        ds.iter().any(|d| d.code == Code::StackFileInvalidValue
            && d.path.starts_with(&format!("kimi-k3-eks.yaml:{line}:"))),
        "{ds:?}"
    );
}

/// The reservation's artifacts pass cfn-lint, checkov and cdk-nag, the provider schemas and
/// checkov's Terraform checks.
#[test]
fn an_on_demand_capacity_reservation_passes_the_validators() {
    let dir = tempfile::tempdir().unwrap();
    App::new()
        .stack(odcr_stack("usw2-az2", 1))
        .synth()
        .unwrap_or_else(|e| panic!("{e}"))
        .write_to(dir.path())
        .unwrap();
    crate::external_validators::assert_cloudformation_passes(dir.path());
    crate::external_validators::assert_terraform_passes(dir.path());
}
