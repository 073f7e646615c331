//! The deploy path against moto (a CloudFormation/EC2/S3/IAM emulator), started by
//! `tests/tools/test-all.sh`, which exports `HYPERFORGE_MOTO_ENDPOINT`. Without it these tests
//! fail (they are never skipped). Run them alone with:
//!
//! ```sh
//! .venv-validators/bin/moto_server -H 127.0.0.1 -p 5055 &
//! HYPERFORGE_MOTO_ENDPOINT=http://127.0.0.1:5055 \
//!     cargo test --features deploy --test deploy_moto -- --test-threads=1
//! ```
//!
//! The tests share one server: each holds a lock and resets moto's state first.
//!
//! What the deployed stage holds, and why. moto creates the VPC, subnets, route tables,
//! internet and NAT gateways, EIP, S3 gateway endpoint, flow log, KMS key, log group, IAM role,
//! security group, ingress rules and S3 bucket for real. It silently skips
//! `AWS::EC2::SecurityGroupEgress`, `AWS::S3::BucketPolicy` and `AWS::EC2::VPCCidrBlock` (no
//! CloudFormation model in moto 5.2), and skips EKS and SageMaker types; an Output with
//! `Fn::GetAtt` on a skipped type makes CreateStack answer HTTP 500. So the stage tested here
//! is the project's `Network` (without the HyperPod subnet, whose secondary CIDR block moto
//! would skip and then reject the subnet), a `ClusterSecurityGroup` and a `LifecycleScripts`
//! bucket, plus the `s3-upload` stage of the lifecycle script: every output resolves. moto's
//! other gaps: it emits only stack-level events (per-resource progress and rollback sequences
//! are unit-tested on recorded sequences in `src/deploy/events.rs`), never rolls back (a failing
//! resource is an API error of the call itself), does not enforce capabilities, and answers
//! HTTP 500 for `Fn::Cidr`, for a KMS key with `Tags` (the test removes the flow-log key's
//! tags with `Stack::remove_property`) and for any update of an S3 bucket without an explicit
//! `BucketName` (so the update tested changes the flow-log retention, not a tag every resource
//! carries). moto also has no delete handlers for route tables, routes, NAT gateways, VPC
//! endpoints or flow logs, so deleting a `Network` stack fails in moto with a
//! DependencyViolation; destroy is tested on a stage holding only the lifecycle bucket.
//! `Fn::Cidr` is used below as the "invalid template" case, with retries limited to
//! one attempt so the error surfaces at once).
//!
//! Fleets (`deploy --fleet`): moto 5.2 keeps StackSets and creates a real stack for each
//! self-managed instance (in the instance's account and region; the tests target moto's own
//! account so they can see them), but completes every operation at once as `SUCCEEDED`: the
//! waiting, the streamed per-instance statuses of a running operation and a failed operation
//! are not exercised here. It ignores `OperationPreferences` (region order, concurrency,
//! failure tolerance) and `CallAs`, has no service-managed automatic deployment, updates only
//! the recorded overrides on `UpdateStackInstances` (not the stacks), gives instances a
//! `StackId` that names no stack, and cannot create the reference fleet's instances (no
//! `AWS::EKS::Cluster` model: `CreateStackInstances` answers HTTP 500), so for the reference
//! fleet only the StackSets and their uploaded templates are checked.

#![cfg(feature = "deploy")]

#[path = "../examples/reference/mod.rs"]
mod reference;

use hyperforge::app::Stack;
use hyperforge::constructs::{
    ClusterSecurityGroup, EcrPullThroughCache, LifecycleScripts, Network,
};
use hyperforge::deploy::fleet::Change;
use hyperforge::deploy::{
    self, Answers, AssemblyDir, AwsSettings, Console, DeployError, DeployOptions,
    FleetDeployOptions, FleetDir, StageOutcome,
};
use hyperforge::fleet::{Fleet, FleetMember, FleetOptions, FleetRegion};
use hyperforge::App;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const STACK: &str = "deploy-test";
const REGION: &str = "us-east-1";
const FOUNDATION: &str = "deploy-test-foundation";

static SERVER: Mutex<()> = Mutex::new(());

fn endpoint() -> String {
    match std::env::var("HYPERFORGE_MOTO_ENDPOINT") {
        Ok(v) if !v.trim().is_empty() => v.trim().trim_end_matches('/').to_owned(),
        _ => panic!(
            "HYPERFORGE_MOTO_ENDPOINT is not set. These tests need a moto server: run \
             tests/tools/test-all.sh (it starts one), or start `.venv-validators/bin/moto_server \
             -H 127.0.0.1 -p 5055` and export HYPERFORGE_MOTO_ENDPOINT=http://127.0.0.1:5055"
        ),
    }
}

/// Takes the server for one test and wipes its state.
fn exclusive() -> MutexGuard<'static, ()> {
    let guard = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let url = endpoint();
    let host = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("HYPERFORGE_MOTO_ENDPOINT must be http://host:port, is {url}"));
    let mut conn = std::net::TcpStream::connect(host)
        .unwrap_or_else(|e| panic!("cannot reach moto at {url}: {e}"));
    write!(
        conn,
        "POST /moto-api/reset HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .expect("send reset");
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("read reset answer");
    assert!(
        answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"),
        "moto reset failed: {answer}"
    );
    guard
}

fn options() -> DeployOptions {
    DeployOptions {
        aws: AwsSettings {
            endpoint_url: Some(endpoint()),
            static_credentials: Some(("testing".into(), "testing".into())),
            max_attempts: 1,
            ..AwsSettings::default()
        },
        yes: true,
        poll_interval: Duration::from_millis(50),
        timeout: Duration::from_secs(60),
        ..DeployOptions::default()
    }
}

/// The tested stack, built with the project's own builders. `revision` 2 keeps flow logs
/// longer (a property change of the log group, updated in place).
fn test_stack(revision: u32) -> App {
    let retention = if revision == 1 { 365 } else { 400 };
    let mut stack = Stack::new(STACK, REGION).tag("workload", "deploy-test");
    let foundation = stack.cloudformation_stage("foundation");
    let network = stack.add(
        foundation,
        Network::new("Network").flow_log_retention_days(retention),
    );
    stack.add(
        foundation,
        ClusterSecurityGroup::new("ClusterSecurityGroup", &network.vpc),
    );
    let scripts = stack.add(foundation, LifecycleScripts::new("Lifecycle"));
    stack.upload_stage("lifecycle-scripts", scripts.upload());
    // moto 5.2 cannot create an `AWS::KMS::Key` with `Tags` from CloudFormation (it reads
    // KMS-API `TagKey`/`TagValue` and answers HTTP 500); the escape hatch drops them here.
    stack.remove_property("Network/FlowLogKey", "Tags");
    App::new().stack(stack)
}

fn write(app: &App) -> (tempfile::TempDir, AssemblyDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("hyperforge.out");
    let assembly = app.synth().unwrap_or_else(|e| panic!("{e}"));
    assembly.write_to(&out).expect("write assembly");
    let loaded = AssemblyDir::load(&out).unwrap_or_else(|e| panic!("{e}"));
    (dir, loaded)
}

fn rt() -> tokio::runtime::Runtime {
    deploy::runtime().expect("runtime")
}

struct Sdk {
    cfn: aws_sdk_cloudformation::Client,
    s3: aws_sdk_s3::Client,
}

fn sdk(rt: &tokio::runtime::Runtime) -> Sdk {
    let conf = rt.block_on(
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(REGION))
            .endpoint_url(endpoint())
            .credentials_provider(aws_sdk_cloudformation::config::Credentials::new(
                "testing", "testing", None, None, "test",
            ))
            .load(),
    );
    let s3 = aws_sdk_s3::config::Builder::from(&conf)
        .force_path_style(true)
        .build();
    Sdk {
        cfn: aws_sdk_cloudformation::Client::new(&conf),
        s3: aws_sdk_s3::Client::from_conf(s3),
    }
}

impl Sdk {
    fn stack_status(&self, rt: &tokio::runtime::Runtime, name: &str) -> Option<String> {
        rt.block_on(self.cfn.describe_stacks().stack_name(name).send())
            .ok()
            .and_then(|o| {
                o.stacks()
                    .first()
                    .and_then(|s| s.stack_status().map(|s| s.as_str().to_owned()))
            })
    }

    fn object(&self, rt: &tokio::runtime::Runtime, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let out = rt
            .block_on(self.s3.get_object().bucket(bucket).key(key).send())
            .ok()?;
        rt.block_on(out.body.collect()).ok().map(|b| b.to_vec())
    }
}

fn outcome<'a>(report: &'a deploy::Report, stage: &str) -> &'a StageOutcome {
    report
        .outcome(stage)
        .unwrap_or_else(|| panic!("no outcome for {stage}: {report:#?}"))
}

#[test]
fn create_upload_no_changes_diff_declined_and_update() {
    let _server = exclusive();
    let rt = rt();
    let sdk = sdk(&rt);
    let (_dir, assembly) = write(&test_stack(1));
    let opts = options();

    // Create.
    let (console, out) = Console::capture();
    let report = rt
        .block_on(deploy::deploy(
            &assembly,
            STACK,
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    let StageOutcome::Deployed {
        status,
        outputs,
        changes,
        ..
    } = outcome(&report, "foundation")
    else {
        panic!("{report:#?}")
    };
    assert_eq!(status, "CREATE_COMPLETE");
    assert!(
        changes.count(&deploy::changeset::ChangeAction::Add) > 20,
        "{changes:#?}"
    );
    assert!(changes
        .changes
        .iter()
        .any(|c| c.resource_type == "AWS::EC2::FlowLog"));
    let bucket = outputs
        .get("LifecycleBucketName")
        .unwrap_or_else(|| panic!("outputs: {outputs:?}"))
        .clone();
    let text = out.text();
    assert!(
        text.contains("does not exist yet: it will be created"),
        "{text}"
    );
    assert!(text.contains("+ Add"), "{text}");
    assert!(text.contains("CREATE_COMPLETE"), "{text}");
    assert!(text.contains("LifecycleBucketName = "), "{text}");

    // The upload stage put the lifecycle script under the prefix.
    let StageOutcome::Uploaded { bucket: b, keys } = outcome(&report, "lifecycle-scripts") else {
        panic!("{report:#?}")
    };
    assert_eq!(b, &bucket);
    assert_eq!(keys, &["lifecycle/on_create.sh"]);
    let script = sdk
        .object(&rt, &bucket, "lifecycle/on_create.sh")
        .expect("the lifecycle script is in the bucket");
    let local = assembly
        .root()
        .join("deploy-test/02-lifecycle-scripts/on_create.sh");
    assert_eq!(script, std::fs::read(local).expect("local script"));
    // The network's resources were really created (each has a physical id).
    let resources = rt
        .block_on(
            sdk.cfn
                .describe_stack_resources()
                .stack_name(FOUNDATION)
                .send(),
        )
        .expect("stack resources");
    for ty in [
        "AWS::EC2::VPC",
        "AWS::EC2::Subnet",
        "AWS::EC2::NatGateway",
        "AWS::EC2::EIP",
        "AWS::EC2::VPCEndpoint",
        "AWS::EC2::FlowLog",
        "AWS::Logs::LogGroup",
        "AWS::KMS::Key",
        "AWS::IAM::Role",
        "AWS::EC2::SecurityGroup",
        "AWS::S3::Bucket",
    ] {
        assert!(
            resources
                .stack_resources()
                .iter()
                .any(|r| r.resource_type() == Some(ty)
                    && r.physical_resource_id().is_some_and(|p| !p.is_empty())),
            "no {ty} in {resources:#?}"
        );
    }

    // Same assembly again: no changes, the empty change set deleted.
    let (console, out) = Console::capture();
    let report = rt
        .block_on(deploy::deploy(
            &assembly,
            STACK,
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    assert!(matches!(
        outcome(&report, "foundation"),
        StageOutcome::NoChanges { .. }
    ));
    assert!(out.text().contains("no changes"), "{}", out.text());
    let pending = rt
        .block_on(sdk.cfn.list_change_sets().stack_name(FOUNDATION).send())
        .expect("list change sets");
    assert!(pending.summaries().is_empty(), "{pending:?}");

    // Longer flow-log retention: diff shows Modify and leaves nothing behind.
    let (_dir2, changed) = write(&test_stack(2));
    let (console, out) = Console::capture();
    let report = rt
        .block_on(deploy::diff(
            &changed,
            STACK,
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    let StageOutcome::Diff { changes } = outcome(&report, "foundation") else {
        panic!("{report:#?}")
    };
    assert!(changes
        .changes
        .iter()
        .any(|c| c.logical_id == "NetworkFlowLogGroup"
            && c.action == deploy::changeset::ChangeAction::Modify));
    assert!(out.text().contains("~ Modify"), "{}", out.text());
    let pending = rt
        .block_on(sdk.cfn.list_change_sets().stack_name(FOUNDATION).send())
        .expect("list change sets");
    assert!(pending.summaries().is_empty(), "diff leaves no change set");
    assert!(matches!(
        outcome(&report, "lifecycle-scripts"),
        StageOutcome::Planned(_)
    ));

    // Declining the update changes nothing and stops the run.
    let mut ask = options();
    ask.yes = false;
    let (console, out) = Console::capture();
    let mut answers = Answers::new([false]);
    let report = rt
        .block_on(deploy::deploy(
            &changed,
            STACK,
            &ask,
            &console,
            &mut answers,
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    assert_eq!(outcome(&report, "foundation"), &StageOutcome::Declined);
    assert!(report.outcome("lifecycle-scripts").is_none());
    assert_eq!(
        answers.asked,
        ["Update `deploy-test-foundation` with these changes?"]
    );
    assert_eq!(
        sdk.stack_status(&rt, FOUNDATION).as_deref(),
        Some("CREATE_COMPLETE")
    );

    // Accepting it updates through the change set.
    let mut answers = Answers::new([true]);
    let (console, out) = Console::capture();
    let report = rt
        .block_on(deploy::deploy(
            &changed,
            STACK,
            &ask,
            &console,
            &mut answers,
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    let StageOutcome::Deployed {
        status, changes, ..
    } = outcome(&report, "foundation")
    else {
        panic!("{report:#?}")
    };
    assert_eq!(status, "UPDATE_COMPLETE");
    assert!(changes.count(&deploy::changeset::ChangeAction::Modify) > 0);
    assert_eq!(
        sdk.stack_status(&rt, FOUNDATION).as_deref(),
        Some("UPDATE_COMPLETE")
    );
}

/// A stack whose only CloudFormation resources are the lifecycle bucket (and its policy, which
/// moto skips): moto cannot delete a `Network` (see the file docs).
fn bucket_only_stack() -> App {
    let mut stack = Stack::new(STACK, REGION);
    let foundation = stack.cloudformation_stage("foundation");
    let scripts = stack.add(foundation, LifecycleScripts::new("Lifecycle"));
    stack.upload_stage("lifecycle-scripts", scripts.upload());
    App::new().stack(stack)
}

#[test]
fn destroy_empties_the_uploads_then_deletes_the_stack() {
    let _server = exclusive();
    let rt = rt();
    let sdk = sdk(&rt);
    let (_dir, assembly) = write(&bucket_only_stack());
    let opts = options();
    let (console, out) = Console::capture();
    rt.block_on(deploy::deploy(
        &assembly,
        STACK,
        &opts,
        &console,
        &mut Answers::default(),
    ))
    .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    assert_eq!(
        sdk.stack_status(&rt, FOUNDATION).as_deref(),
        Some("CREATE_COMPLETE")
    );

    // Declined: nothing deleted.
    let mut ask = options();
    ask.yes = false;
    let (console, _out) = Console::capture();
    let mut answers = Answers::new([false]);
    let report = rt
        .block_on(deploy::destroy(
            &assembly,
            STACK,
            &ask,
            &console,
            &mut answers,
        ))
        .expect("declined destroy");
    assert_eq!(answers.asked, ["Destroy `deploy-test`?"]);
    assert!(report
        .stages
        .iter()
        .all(|s| s.outcome == StageOutcome::Declined));
    assert_eq!(
        sdk.stack_status(&rt, FOUNDATION).as_deref(),
        Some("CREATE_COMPLETE")
    );

    // Confirmed: the uploaded objects first (the bucket must be empty), then the stack.
    let mut answers = Answers::new([true]);
    let (console, out) = Console::capture();
    let report = rt
        .block_on(deploy::destroy(
            &assembly,
            STACK,
            &ask,
            &console,
            &mut answers,
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    assert_eq!(report.stages[0].stage, "lifecycle-scripts", "reverse order");
    assert!(matches!(
        &report.stages[0].outcome,
        StageOutcome::ObjectsDeleted { count, .. } if *count >= 1
    ));
    assert!(matches!(
        outcome(&report, "foundation"),
        StageOutcome::Deleted { .. }
    ));
    assert_eq!(sdk.stack_status(&rt, FOUNDATION), None);
    let text = out.text();
    assert!(
        text.contains("Capacity Blocks") && text.contains("training plans"),
        "{text}"
    );
    // The foundation stage's step before its deletion: the versioned bucket emptied (its
    // logging stopped, every version deleted) through the SDK, then the stack deleted.
    let emptied = text
        .find("# step: empty-versioned-bucket LifecycleBucketName: emptying s3://")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(emptied < text.rfind("deleted").unwrap_or(0), "{text}");

    // Again: nothing left to do.
    let (console, _out) = Console::capture();
    let report = rt
        .block_on(deploy::destroy(
            &assembly,
            STACK,
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .expect("second destroy");
    assert_eq!(outcome(&report, "foundation"), &StageOutcome::Absent);
    assert_eq!(outcome(&report, "lifecycle-scripts"), &StageOutcome::Absent);
}

#[test]
fn diff_of_a_missing_stack_lists_the_resources_it_would_create() {
    let _server = exclusive();
    let rt = rt();
    let (_dir, assembly) = write(&test_stack(1));
    let (console, out) = Console::capture();
    let report = rt
        .block_on(deploy::diff(
            &assembly,
            STACK,
            &options(),
            &console,
            &mut Answers::default(),
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    let StageOutcome::WouldCreate { resources, .. } = outcome(&report, "foundation") else {
        panic!("{report:#?}")
    };
    assert!(resources
        .iter()
        .any(|(id, ty)| id == "NetworkVpc" && ty == "AWS::EC2::VPC"));
    assert!(out.text().contains("would be created"), "{}", out.text());
    assert_eq!(
        sdk(&rt).stack_status(&rt, FOUNDATION),
        None,
        "diff creates nothing"
    );
}

#[test]
fn interrupted_create_in_review_in_progress_converges() {
    let _server = exclusive();
    let rt = rt();
    let sdk = sdk(&rt);
    let (_dir, assembly) = write(&test_stack(1));
    let template = std::fs::read_to_string(
        assembly
            .root()
            .join("deploy-test/01-foundation.template.json"),
    )
    .expect("template");
    // A deploy that created its CREATE change set and stopped before executing it.
    rt.block_on(
        sdk.cfn
            .create_change_set()
            .stack_name(FOUNDATION)
            .change_set_name("interrupted")
            .change_set_type(aws_sdk_cloudformation::types::ChangeSetType::Create)
            .template_body(template)
            .send(),
    )
    .expect("create change set");
    assert_eq!(
        sdk.stack_status(&rt, FOUNDATION).as_deref(),
        Some("REVIEW_IN_PROGRESS")
    );

    let (console, out) = Console::capture();
    let report = rt
        .block_on(deploy::deploy(
            &assembly,
            STACK,
            &options(),
            &console,
            &mut Answers::default(),
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    assert!(
        matches!(outcome(&report, "foundation"), StageOutcome::Deployed { status, .. } if status == "CREATE_COMPLETE"),
        "{report:#?}"
    );
    assert!(
        out.text()
            .contains("REVIEW_IN_PROGRESS: a create change set was made but never executed"),
        "{}",
        out.text()
    );
}

#[test]
fn large_template_goes_through_the_template_bucket() {
    let _server = exclusive();
    let rt = rt();
    let sdk = sdk(&rt);
    let (_dir, assembly) = write(&test_stack(1));
    let template_path = assembly
        .root()
        .join("deploy-test/01-foundation.template.json");
    let template = std::fs::read(&template_path).expect("template");

    // Over the (lowered) inline limit and no bucket: a clear error before any call.
    let mut opts = options();
    opts.inline_template_limit = 1_000;
    let (console, _out) = Console::capture();
    let err = rt
        .block_on(deploy::deploy(
            &assembly,
            STACK,
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .expect_err("too large without a bucket");
    assert!(matches!(err, DeployError::TemplateTooLarge { .. }), "{err}");
    assert!(err.to_string().contains("--template-bucket"), "{err}");

    rt.block_on(sdk.s3.create_bucket().bucket("templates").send())
        .expect("create template bucket");
    opts.template_bucket = Some("templates".into());
    let (console, out) = Console::capture();
    let report = rt
        .block_on(deploy::deploy(
            &assembly,
            STACK,
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    assert!(matches!(
        outcome(&report, "foundation"),
        StageOutcome::Deployed { .. }
    ));
    let key = deploy::template_key(STACK, "foundation", &template);
    assert!(key.starts_with("hyperforge/deploy-test/foundation/"));
    assert_eq!(sdk.object(&rt, "templates", &key), Some(template));
    assert!(
        out.text().contains(&format!("s3://templates/{key}")),
        "{}",
        out.text()
    );
}

/// A hand-written one-stage assembly around `template`.
fn synthetic_assembly(dir: &Path, template: &serde_json::Value) -> AssemblyDir {
    let manifest = serde_json::json!({
        "version": 4,
        "generator": "hand-written",
        "stacks": [{
            "name": "synthetic",
            "region": REGION,
            "eks_cluster": null,
            "stages": [{
                "name": "main",
                "kind": "cloudformation",
                "stack_name": "synthetic-main",
                "capabilities": ["CAPABILITY_IAM"],
                "parameters": template.get("Parameters").and_then(|p| p.as_object()).map(|p| {
                    p.iter().map(|(k, v)| serde_json::json!({"name": k, "default": v.get("Default")})).collect::<Vec<_>>()
                }).unwrap_or_default(),
                "outputs": [],
                "artifacts": [{"format": "cloudformation", "path": "synthetic/01-main.template.json"}]
            }]
        }]
    });
    std::fs::create_dir_all(dir.join("synthetic")).expect("mkdir");
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).expect("manifest");
    std::fs::write(
        dir.join("synthetic/01-main.template.json"),
        serde_json::to_string_pretty(template).expect("json"),
    )
    .expect("template");
    AssemblyDir::load(dir).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn invalid_template_and_parameters_are_clear_errors_not_retry_loops() {
    let _server = exclusive();
    let rt = rt();
    let dir = tempfile::tempdir().expect("tempdir");
    // moto cannot evaluate Fn::Cidr and answers HTTP 500 with an HTML body.
    let assembly = synthetic_assembly(
        dir.path(),
        &serde_json::json!({
            "Parameters": {"Size": {"Type": "String"}},
            "Resources": {
                "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
                "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {
                    "VpcId": {"Ref": "Vpc"},
                    "CidrBlock": {"Fn::Select": [0, {"Fn::Cidr": ["10.0.0.0/16", 4, 8]}]}
                }}
            }
        }),
    );

    // A parameter without default and no value: said before any call.
    let (console, _out) = Console::capture();
    let err = rt
        .block_on(deploy::deploy(
            &assembly,
            "synthetic",
            &options(),
            &console,
            &mut Answers::default(),
        ))
        .expect_err("missing parameter");
    assert!(
        matches!(err, DeployError::MissingParameter { ref name, .. } if name == "Size"),
        "{err}"
    );
    assert!(err.to_string().contains("parameters file"), "{err}");

    // A parameter no template declares (a typo).
    let mut opts = options();
    opts.parameters.insert("Sise".into(), "1".into());
    let err = rt
        .block_on(deploy::deploy(
            &assembly,
            "synthetic",
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .expect_err("unknown parameter");
    assert!(matches!(err, DeployError::UnknownParameter { .. }), "{err}");

    // The template the service cannot process: one error, quickly.
    let mut opts = options();
    opts.parameters.insert("Size".into(), "1".into());
    let started = Instant::now();
    let err = rt
        .block_on(deploy::deploy(
            &assembly,
            "synthetic",
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .expect_err("moto rejects Fn::Cidr");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let text = err.to_string();
    assert!(matches!(err, DeployError::Aws { .. }), "{text}");
    assert!(text.contains("synthetic-main"), "{text}");
    assert!(
        text.contains("HTTP 500") || text.contains("failed"),
        "{text}"
    );
}

#[test]
fn unknown_stack_and_stage_are_reported() {
    let _server = exclusive();
    let rt = rt();
    let (_dir, assembly) = write(&test_stack(1));
    let (console, _out) = Console::capture();
    let err = rt
        .block_on(deploy::deploy(
            &assembly,
            "nope",
            &options(),
            &console,
            &mut Answers::default(),
        ))
        .expect_err("unknown stack");
    assert!(err.to_string().contains("it has: deploy-test"), "{err}");
    let mut opts = options();
    opts.from_stage = Some("nope".into());
    let err = rt
        .block_on(deploy::deploy(
            &assembly,
            STACK,
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .expect_err("unknown stage");
    assert!(
        err.to_string().contains("foundation, lifecycle-scripts"),
        "{err}"
    );
}

/// The same path through the `hyperforge` binary: `deploy`, `diff --deployed` and `destroy` on
/// the assembly in `--out`.
#[test]
fn the_cli_deploys_diffs_and_destroys_the_assembly_in_out() {
    let _server = exclusive();
    let (dir, _assembly) = write(&bucket_only_stack());
    let out = dir.path().join("hyperforge.out");
    let run = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_hyperforge"))
            .arg("--out")
            .arg(&out)
            .args(args)
            .args(["--endpoint-url", &endpoint(), "--region", REGION])
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run hyperforge");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.code(), text)
    };
    let (code, text) = run(&["deploy", STACK, "--yes"]);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run(&["diff", "--deployed", STACK]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("no differences"), "{text}");
    let (code, text) = run(&["destroy", STACK, "--yes"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("refund"), "{text}");
    // An unknown stack is an input error (exit code 2) that names the valid stacks.
    let (code, text) = run(&["deploy", "no-such-stack", "--yes"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains(STACK), "{text}");
}

// ---- fleets: StackSets and stack instances -------------------------------------------------

/// moto's default account: the instance stacks moto creates for it are visible to the tests'
/// credentials.
const FLEET_ACCOUNT: &str = "123456789012";
const FLEET_SET: &str = "lc-fleet-foundation";

/// A fleet of [`bucket_only_stack`]'s shape in two regions, with a Docker Hub pull-through
/// cache whose credential is a declared input: each member's secret (in its region, named
/// after its region's `team` value) is its instance's override. From `revision` 3 the stack
/// has a fixed `tier` tag (a template change). Revision 2 changes us-west-2's team.
fn test_fleet(revision: u32) -> Fleet {
    Fleet::new("lc-fleet", move |m: &FleetMember| {
        let mut stack = Stack::new(m.stack(), m.region());
        if revision >= 3 {
            stack = stack.tag("tier", "gold");
        }
        let foundation = stack.cloudformation_stage("foundation");
        let scripts = stack.add(foundation, LifecycleScripts::new("Lifecycle"));
        stack.add(
            foundation,
            EcrPullThroughCache::docker_hub(
                "Cache",
                format!(
                    "arn:aws:secretsmanager:{}:{FLEET_ACCOUNT}:secret:ecr-pullthroughcache/{}",
                    m.region(),
                    m.value("team").unwrap_or_default()
                ),
            ),
        );
        stack.upload_stage("lifecycle-scripts", scripts.upload());
        stack
    })
    .account(FLEET_ACCOUNT)
    .region(FleetRegion::new("us-east-1").value("team", "blue"))
    .region(
        FleetRegion::new("us-west-2").value("team", if revision == 1 { "green" } else { "red" }),
    )
}

/// The override the members' secrets bind to.
const CREDENTIAL: &str = "CacheRuleCredentialArn";

/// The credential ARN of `team`'s secret in `region`.
fn credential(region: &str, team: &str) -> String {
    format!("arn:aws:secretsmanager:{region}:{FLEET_ACCOUNT}:secret:ecr-pullthroughcache/{team}")
}

fn write_fleet(fleet: &Fleet) -> (tempfile::TempDir, FleetDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("fleet.out");
    fleet
        .write_to(&out, &FleetOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let loaded = FleetDir::load(&out).unwrap_or_else(|e| panic!("{e}"));
    (dir, loaded)
}

fn sdk_in(rt: &tokio::runtime::Runtime, region: &str) -> aws_sdk_cloudformation::Client {
    let conf = rt.block_on(
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(region.to_owned()))
            .endpoint_url(endpoint())
            .credentials_provider(aws_sdk_cloudformation::config::Credentials::new(
                "testing", "testing", None, None, "test",
            ))
            .load(),
    );
    aws_sdk_cloudformation::Client::new(&conf)
}

/// `ParameterOverrides` of the instance in `region`, as the service describes it.
fn overrides_in(
    rt: &tokio::runtime::Runtime,
    cfn: &aws_sdk_cloudformation::Client,
    region: &str,
) -> BTreeMap<String, String> {
    let out = rt
        .block_on(
            cfn.describe_stack_instance()
                .stack_set_name(FLEET_SET)
                .stack_instance_account(FLEET_ACCOUNT)
                .stack_instance_region(region)
                .send(),
        )
        .unwrap_or_else(|e| panic!("DescribeStackInstance {region}: {e:?}"));
    out.stack_instance()
        .expect("instance")
        .parameter_overrides()
        .iter()
        .map(|p| {
            (
                p.parameter_key().unwrap_or_default().to_owned(),
                p.parameter_value().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn deploy_fleet(
    rt: &tokio::runtime::Runtime,
    fleet: &FleetDir,
    fleet_options: &FleetDeployOptions,
) -> (deploy::FleetReport, String) {
    let mut opts = options();
    opts.aws.region = Some(REGION.into());
    let (console, out) = Console::capture();
    let report = rt
        .block_on(deploy::deploy_fleet(
            fleet,
            &opts,
            fleet_options,
            &console,
            &mut Answers::default(),
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    (report, out.text())
}

fn changes(report: &deploy::FleetReport) -> Vec<(String, Change)> {
    report
        .stack_set(FLEET_SET)
        .unwrap_or_else(|| panic!("{report:#?}"))
        .instances
        .iter()
        .map(|i| (i.member.clone(), i.change))
        .collect()
}

#[test]
fn fleet_stack_sets_and_instances_are_created_then_converge() {
    let _server = exclusive();
    let rt = rt();
    let cfn = sdk_in(&rt, REGION);
    let (_dir, fleet) = write_fleet(&test_fleet(1));
    let m = fleet.manifest();
    assert_eq!(m.stack_sets.len(), 1, "{:#?}", m.stack_sets);
    let set = &m.stack_sets[0];
    assert_eq!(set.name, FLEET_SET);
    let wanted: BTreeMap<&str, &BTreeMap<String, String>> = set
        .instances
        .iter()
        .map(|i| (i.region.as_str(), &i.parameter_overrides))
        .collect();
    assert_eq!(
        wanted["us-west-2"].get(CREDENTIAL),
        Some(&credential("us-west-2", "green"))
    );
    let defaults = FleetDeployOptions::default();

    // A dry run changes nothing.
    let (report, text) = deploy_fleet(
        &rt,
        &fleet,
        &FleetDeployOptions {
            dry_run: true,
            ..Default::default()
        },
    );
    assert_eq!(
        report.stack_set(FLEET_SET).map(|s| s.stack_set),
        Some(Change::Create)
    );
    assert!(text.contains("would be created"), "{text}");
    assert!(rt
        .block_on(cfn.describe_stack_set().stack_set_name(FLEET_SET).send())
        .is_err());

    // Declined: nothing is created and the deploy stops there.
    let mut ask = options();
    ask.yes = false;
    ask.aws.region = Some(REGION.into());
    let (console, out) = Console::capture();
    let mut answers = Answers::new([false]);
    let report = rt
        .block_on(deploy::deploy_fleet(
            &fleet,
            &ask,
            &defaults,
            &console,
            &mut answers,
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    assert!(report.declined, "{report:#?}");
    assert!(report.remaining.is_empty());
    assert_eq!(
        answers.asked,
        ["Apply these changes to StackSet `lc-fleet-foundation`?"]
    );
    assert!(rt
        .block_on(cfn.describe_stack_set().stack_set_name(FLEET_SET).send())
        .is_err());

    // Create: the StackSet, then one instance per member with its overrides.
    let (report, text) = deploy_fleet(&rt, &fleet, &defaults);
    let set_report = report.stack_set(FLEET_SET).expect("report");
    assert_eq!(set_report.stack_set, Change::Create);
    assert!(set_report.applied);
    assert_eq!(
        set_report.operations.len(),
        2,
        "one call per member: {set_report:#?}"
    );
    assert_eq!(
        changes(&report),
        [
            ("lc-fleet-us-east-1".to_owned(), Change::Create),
            ("lc-fleet-us-west-2".to_owned(), Change::Create)
        ]
    );
    for region in ["us-east-1", "us-west-2"] {
        assert_eq!(&overrides_in(&rt, &cfn, region), wanted[region], "{region}");
        // moto creates each self-managed instance's stack for real, in its region.
        let stacks = rt
            .block_on(sdk_in(&rt, region).describe_stacks().send())
            .expect("describe stacks");
        assert!(
            stacks
                .stacks()
                .iter()
                .any(|s| s.stack_status().map(|s| s.as_str()) == Some("CREATE_COMPLETE")),
            "{region}: {stacks:?}"
        );
    }
    let deployed = rt
        .block_on(cfn.describe_stack_set().stack_set_name(FLEET_SET).send())
        .expect("describe stack set");
    let deployed = deployed.stack_set().expect("stack set");
    assert_eq!(
        deployed.permission_model().map(|p| p.as_str()),
        Some("SELF_MANAGED")
    );
    let template = std::fs::read(fleet.root().join(&set.template)).expect("template");
    assert!(deploy::fleet::same_template(
        deployed.template_body().unwrap_or_default(),
        &template
    ));
    assert!(text.contains("instance will be created"), "{text}");
    assert!(
        text.contains("lc-fleet-us-west-2 (account 123456789012, us-west-2): SUCCEEDED"),
        "{text}"
    );
    // What remains: each member's upload stage, with the instance stack to read outputs from.
    assert_eq!(report.remaining.len(), 2);
    for r in &report.remaining {
        assert_eq!(
            r.stages,
            [("lifecycle-scripts".to_owned(), "s3-upload".to_owned())]
        );
        assert!(
            matches!(r.instance_stacks.as_slice(), [(stage, name, id)]
                if stage == "foundation" && name == "lc-fleet-foundation" && id.starts_with("arn:aws:cloudformation:")),
            "{r:#?}"
        );
    }
    assert!(text.contains("lifecycle-scripts (s3-upload)"), "{text}");
    assert!(
        text.contains("RUNBOOK.md from stage `lifecycle-scripts`"),
        "{text}"
    );

    // The same fleet again: nothing to do, no operation.
    let (report, text) = deploy_fleet(&rt, &fleet, &defaults);
    let set_report = report.stack_set(FLEET_SET).expect("report");
    assert_eq!(set_report.stack_set, Change::Unchanged);
    assert!(set_report.operations.is_empty(), "{set_report:#?}");
    assert!(changes(&report)
        .iter()
        .all(|(_, c)| *c == Change::Unchanged));
    assert!(text.contains("`lc-fleet-foundation`: no changes"), "{text}");

    // us-west-2's team changes: that instance's overrides are updated, nothing else.
    let (_dir2, changed) = write_fleet(&test_fleet(2));
    let (report, text) = deploy_fleet(
        &rt,
        &changed,
        &FleetDeployOptions {
            dry_run: true,
            ..Default::default()
        },
    );
    assert_eq!(
        changes(&report),
        [
            ("lc-fleet-us-east-1".to_owned(), Change::Unchanged),
            ("lc-fleet-us-west-2".to_owned(), Change::Update)
        ]
    );
    assert!(
        text.contains(&format!(
            "{CREDENTIAL}: {} -> {}",
            credential("us-west-2", "green"),
            credential("us-west-2", "red")
        )),
        "{text}"
    );
    assert_eq!(
        overrides_in(&rt, &cfn, "us-west-2").get(CREDENTIAL),
        Some(&credential("us-west-2", "green"))
    );
    let (report, _) = deploy_fleet(&rt, &changed, &defaults);
    let set_report = report.stack_set(FLEET_SET).expect("report");
    assert_eq!(
        set_report.stack_set,
        Change::Unchanged,
        "the template is the same"
    );
    assert_eq!(set_report.operations.len(), 1, "{set_report:#?}");
    assert_eq!(
        overrides_in(&rt, &cfn, "us-west-2").get(CREDENTIAL),
        Some(&credential("us-west-2", "red"))
    );
    assert_eq!(
        overrides_in(&rt, &cfn, "us-east-1").get(CREDENTIAL),
        Some(&credential("us-east-1", "blue"))
    );

    // A new fixed tag changes the template: the StackSet is updated, the instances are not.
    let (_dir3, retagged) = write_fleet(&test_fleet(3));
    let (report, text) = deploy_fleet(&rt, &retagged, &defaults);
    let set_report = report.stack_set(FLEET_SET).expect("report");
    assert_eq!(set_report.stack_set, Change::Update);
    assert_eq!(set_report.operations.len(), 1, "{set_report:#?}");
    assert!(changes(&report)
        .iter()
        .all(|(_, c)| *c == Change::Unchanged));
    assert!(text.contains("its template differs"), "{text}");
    let deployed = rt
        .block_on(cfn.describe_stack_set().stack_set_name(FLEET_SET).send())
        .expect("describe stack set");
    let new_template = std::fs::read(retagged.root().join(&set.template)).expect("template");
    assert!(deploy::fleet::same_template(
        deployed
            .stack_set()
            .and_then(|s| s.template_body())
            .unwrap_or_default(),
        &new_template
    ));
    let (report, _) = deploy_fleet(&rt, &retagged, &defaults);
    assert!(report
        .stack_set(FLEET_SET)
        .is_some_and(|s| s.operations.is_empty()));
}

/// The reference fleet through the binary: moto cannot create its instances' stacks (it has no
/// CloudFormation model of `AWS::EKS::Cluster` and answers HTTP 500 for the outputs reading its
/// attributes), so each StackSet is created and its first instance call fails clearly.
#[test]
fn the_cli_creates_the_reference_fleets_stack_sets() {
    let _server = exclusive();
    let rt = rt();
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().join("fleet.out");
    reference::kimi_k3_eks_fleet()
        .write_to(&out, &FleetOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let manifest = FleetDir::load(&out).unwrap_or_else(|e| panic!("{e}"));
    let region = &manifest.manifest().members[0].region;
    let run = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_hyperforge"))
            .arg("--out")
            .arg(&out)
            .args(args)
            .args(["--endpoint-url", &endpoint()])
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run hyperforge");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.code(), text)
    };
    let (code, text) = run(&["deploy", "--fleet", "--dry-run"]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        text.matches("instance would be created").count(),
        9,
        "{text}"
    );
    // The foundation template is over the inline limit: a bucket is needed.
    let (code, text) = run(&["deploy", "--fleet", "--yes"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--template-bucket"), "{text}");
    let (code, text) = run(&["deploy", "--fleet", "--stack-set", "nope"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("kimi-k3-eks-fleet-foundation, kimi-k3-eks-fleet-nodes"),
        "{text}"
    );
    let (code, text) = run(&["destroy", "--fleet"]);
    assert_eq!(code, Some(2), "{text}");

    let s3 = sdk(&rt).s3;
    rt.block_on(
        s3.create_bucket()
            .bucket("fleet-templates")
            .create_bucket_configuration(
                aws_sdk_s3::types::CreateBucketConfiguration::builder()
                    .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(
                        region.as_str(),
                    ))
                    .build(),
            )
            .send(),
    )
    .expect("create template bucket");
    let cfn = sdk_in(&rt, region);
    for set in &manifest.manifest().stack_sets {
        let (code, text) = run(&[
            "deploy",
            "--fleet",
            "--yes",
            "--template-bucket",
            "fleet-templates",
            "--template-prefix",
            "kimi/",
            "--stack-set",
            &set.name,
        ]);
        assert_eq!(code, Some(1), "{text}");
        assert!(
            text.contains(&format!("CreateStackInstances for `{}` failed", set.name)),
            "{text}"
        );
        let deployed = rt
            .block_on(cfn.describe_stack_set().stack_set_name(&set.name).send())
            .unwrap_or_else(|e| panic!("{}: {e:?}", set.name));
        let template = std::fs::read(out.join(&set.template)).expect("template");
        assert!(deploy::fleet::same_template(
            deployed
                .stack_set()
                .and_then(|s| s.template_body())
                .unwrap_or_default(),
            &template
        ));
        let file = set.template.rsplit('/').next().unwrap_or_default();
        assert_eq!(
            sdk(&rt).object(&rt, "fleet-templates", &format!("kimi/{file}")),
            Some(template)
        );
    }
}

/// A fleet member's stack: a foundation stage (a StackSet's) and a Kubernetes stage of its
/// own.
fn member_stack(m: &FleetMember) -> Stack {
    let mut stack = Stack::new(m.stack(), m.region());
    let foundation = stack.cloudformation_stage("foundation");
    stack.add(foundation, LifecycleScripts::new("Lifecycle"));
    let apps = stack.kubernetes_stage("apps");
    stack.add(
        apps,
        hyperforge::constructs::KubernetesManifest::new(
            "Settings",
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"member": m.name().to_owned()}
            }),
        ),
    );
    stack
}

/// A fleet member's own stages after its StackSets: the StackSet stage is skipped (no stack of
/// the member's name is created), its instance stack is found in the StackSets' region, and
/// the member's next stage runs (here a Kubernetes stage, printed: no cluster in moto). Before
/// the StackSets exist, the member deploy is refused with what to do first.
#[test]
fn a_fleet_member_deploys_its_own_stages_after_its_stack_sets() {
    let _server = exclusive();
    let rt = rt();
    let fleet = Fleet::new("mb-fleet", member_stack)
        .account(FLEET_ACCOUNT)
        .region(FleetRegion::new("us-east-1"))
        .region(FleetRegion::new("us-west-2"));
    let (_dir, dir) = write_fleet(&fleet);
    assert_eq!(dir.manifest().stack_sets.len(), 1);
    let member = "mb-fleet-us-west-2";
    let mut opts = options();
    opts.aws.region = Some(REGION.into());

    // Before the StackSets: refused, saying what to do first.
    let (console, out) = Console::capture();
    let err = rt
        .block_on(deploy::deploy_fleet_member(
            &dir,
            member,
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .expect_err("no stack set yet");
    assert!(
        err.to_string().contains("mb-fleet-foundation"),
        "{err}\n{}",
        out.text()
    );

    let (report, _) = deploy_fleet(&rt, &dir, &FleetDeployOptions::default());
    assert!(report.stack_sets.iter().all(|s| s.applied), "{report:#?}");
    let (console, out) = Console::capture();
    let member_report = rt
        .block_on(deploy::deploy_fleet_member(
            &dir,
            member,
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    let text = out.text();
    assert!(text.contains("deployed by its StackSet"), "{text}");
    assert!(text.contains("kubectl"), "{text}");
    let outcomes: Vec<String> = member_report
        .stages
        .iter()
        .map(|s| format!("{} {:?}", s.stage, s.outcome))
        .collect();
    assert!(
        outcomes[0].starts_with("foundation Skipped"),
        "{outcomes:?}"
    );
    // Nothing was created under the stack's own stage name in the member's region: the
    // stage is the StackSet's instance.
    let cfn = sdk_in(&rt, "us-west-2");
    assert!(rt
        .block_on(
            cfn.describe_stacks()
                .stack_name("mb-fleet-foundation")
                .send()
        )
        .is_err());
    // An unknown member is named with the ones there are.
    let (console, _) = Console::capture();
    let err = rt
        .block_on(deploy::deploy_fleet_member(
            &dir,
            "nobody",
            &opts,
            &console,
            &mut Answers::default(),
        ))
        .expect_err("unknown member");
    assert!(err.to_string().contains("mb-fleet-us-east-1"), "{err}");
}

/// Fake `aws` and `kubectl` on PATH for the steps `--run-external` carries out: each call is
/// appended to `$HYPERFORGE_CALLS` as one line (the program and its arguments; what
/// `kubectl apply -f -` reads follows it), and the calls the EKS, EC2 and Kubernetes APIs
/// would answer get the answers of an active Capacity Block whose node group's launch template
/// targets it, and of a cluster without the Secret yet.
fn fake_tools(dir: &Path) {
    let aws = r#"#!/bin/sh
printf 'aws %s\n' "$*" >> "$HYPERFORGE_CALLS"
case "$1 $2" in
  "eks describe-nodegroup") printf 'lt-0123456789abcdef0\t3\n' ;;
  "ec2 describe-launch-template-versions") echo cr-0fedcba9876543210 ;;
  "ec2 describe-capacity-reservations") echo active ;;
  "eks update-nodegroup-config") echo '{}' ;;
  "eks wait") ;;
  *) echo "unexpected aws call: $*" >&2; exit 2 ;;
esac
"#;
    let kubectl = r#"#!/bin/sh
printf 'kubectl %s\n' "$*" >> "$HYPERFORGE_CALLS"
case "$*" in
  "apply -f -") sed 's/^/  | /' >> "$HYPERFORGE_CALLS" ;;
  "apply -f "*) ;;
  "create namespace "*"--dry-run=client -o yaml") printf 'apiVersion: v1\nkind: Namespace\n' ;;
  "get secret "*) exit 1 ;;
  "create secret generic "*) ;;
  *) echo "unexpected kubectl call: $*" >&2; exit 2 ;;
esac
"#;
    for (name, script) in [("aws", aws), ("kubectl", kubectl)] {
        let path = dir.join(name);
        std::fs::write(&path, script).expect("fake tool");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .expect("executable");
        }
    }
}

/// Runs `f` with [`fake_tools`] first on PATH (in `dir/bin`), and returns what it returned
/// with the calls the tools recorded. One test at a time holds the server lock, so changing
/// the process's environment is safe; it is restored before returning.
fn with_fake_tools<T>(dir: &Path, f: impl FnOnce() -> T) -> (T, String) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin directory");
    fake_tools(&bin);
    let calls = dir.join("calls.log");
    let original = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin];
    paths.extend(std::env::split_paths(&original));
    std::env::set_var("PATH", std::env::join_paths(paths).expect("PATH"));
    std::env::set_var("HYPERFORGE_CALLS", &calls);
    let out = f();
    std::env::set_var("PATH", &original);
    std::env::remove_var("HYPERFORGE_CALLS");
    (out, std::fs::read_to_string(&calls).unwrap_or_default())
}

/// `hyperforge deploy --run-external` carries out the plan's steps as the runbook does: after
/// the nodes stage, the Capacity Block's wait-and-scale (the EKS and EC2 calls, recorded by a
/// fake `aws`); before the workload stage, its Secret (created once, from 32 random bytes);
/// then the workload's objects applied with the deploy-time input given and the earlier
/// stage's output in place of their placeholders, the file itself untouched.
#[test]
fn deploy_runs_the_plans_steps_and_fills_the_kubernetes_values() {
    use hyperforge::assembly::manifest::{
        Artifact, ArtifactFormat, InputManifest, Manifest, Parameter, PlaceholderValue,
        SecretSource, SecretStep, StackManifest, StageManifest, StageOutput, Step, ValueSource,
    };
    let _server = exclusive();
    let rt = rt();
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path().join("out");
    std::fs::create_dir_all(root.join("plan")).unwrap();
    let template = serde_json::json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {"PoolCapacityReservationId": {"Type": "String", "Default": "cr-0123456789abcdef0"}},
        "Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {
            "Tags": [{"Key": "reservation", "Value": {"Ref": "PoolCapacityReservationId"}}]
        }}},
        "Outputs": {"BucketName": {"Value": {"Ref": "Bucket"}}}
    });
    std::fs::write(
        root.join("plan/01-nodes.template.json"),
        serde_json::to_string_pretty(&template).unwrap(),
    )
    .unwrap();
    let objects = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: serving\ndata:\n  reservation: cr-0123456789abcdef0\n  bucket: hyperforge-output-BucketName\n";
    std::fs::write(root.join("plan/02-workload.yaml"), objects).unwrap();
    let manifest = Manifest {
        version: Manifest::VERSION,
        generator: "hand-written".into(),
        stacks: vec![StackManifest {
            name: "plan".into(),
            region: REGION.into(),
            eks_cluster: Some("plan".into()),
            admin_host: None,
            inputs: vec![InputManifest {
                name: "PoolCapacityReservationId".into(),
                variable: "POOL_CAPACITY_RESERVATION_ID".into(),
                description: "The block.".into(),
                default: Some("cr-0123456789abcdef0".into()),
                pattern: None,
                expected: "a reservation id".into(),
                stages: vec!["nodes".into(), "workload".into()],
            }],
            inventory: Default::default(),
            stages: vec![
                StageManifest::CloudFormation {
                    name: "nodes".into(),
                    stack_name: "plan-nodes".into(),
                    capabilities: Vec::new(),
                    parameters: vec![Parameter {
                        name: "PoolCapacityReservationId".into(),
                        default: Some("cr-0123456789abcdef0".into()),
                    }],
                    outputs: vec!["BucketName".into()],
                    deploy_from_s3: false,
                    steps: vec![Step::ScaleCapacityBlockNodeGroup {
                        cluster: "plan".into(),
                        node_group: "plan-gpu".into(),
                        min: 0,
                        desired: 1,
                        max: 1,
                        scheduled_at: None,
                    }],
                    artifacts: vec![Artifact::new(
                        ArtifactFormat::CloudFormation,
                        "plan/01-nodes.template.json",
                    )],
                },
                StageManifest::Kubernetes {
                    name: "workload".into(),
                    values: vec![
                        PlaceholderValue {
                            placeholder: "cr-0123456789abcdef0".into(),
                            from: ValueSource::Input("PoolCapacityReservationId".into()),
                        },
                        PlaceholderValue {
                            placeholder: "hyperforge-output-BucketName".into(),
                            from: ValueSource::Output(StageOutput {
                                stage: Some("nodes".into()),
                                output: "BucketName".into(),
                            }),
                        },
                    ],
                    steps: vec![Step::Secret(SecretStep {
                        name: "api-key".into(),
                        namespace: "serving".into(),
                        keys: vec!["api-key".into()],
                        required: true,
                        used_by: vec!["Deployment/server".into()],
                        source: SecretSource::Generated { bytes: 32 },
                    })],
                    artifacts: vec![Artifact::new(
                        ArtifactFormat::Kubernetes,
                        "plan/02-workload.yaml",
                    )],
                },
            ],
            terraform: None,
            runbook: None,
            acknowledged: Vec::new(),
        }],
    };
    std::fs::write(root.join("manifest.json"), manifest.to_json()).unwrap();
    let assembly = AssemblyDir::load(&root).unwrap_or_else(|e| panic!("{e}"));

    let mut opts = options();
    opts.run_external = true;
    opts.parameters = BTreeMap::from([(
        "PoolCapacityReservationId".to_owned(),
        "cr-0fedcba9876543210".to_owned(),
    )]);
    let (console, out) = Console::capture();
    let (result, log) = with_fake_tools(dir.path(), || {
        rt.block_on(deploy::deploy(
            &assembly,
            "plan",
            &opts,
            &console,
            &mut Answers::default(),
        ))
    });
    let report = result.unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    assert!(matches!(
        outcome(&report, "nodes"),
        StageOutcome::Deployed { .. }
    ));
    let lines: Vec<&str> = log.lines().collect();
    let position = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no call `{prefix}` in\n{log}"))
    };
    // The scale step: the group's launch template names the block; it is active; scale to 1.
    let describe = position("aws eks describe-nodegroup --region us-east-1 --cluster-name plan --nodegroup-name plan-gpu --query nodegroup.launchTemplate.[id, version] --output text");
    let versions = position("aws ec2 describe-launch-template-versions --region us-east-1 --launch-template-id lt-0123456789abcdef0 --versions 3 ");
    let state = position("aws ec2 describe-capacity-reservations --region us-east-1 --capacity-reservation-ids cr-0fedcba9876543210 ");
    let scale = position("aws eks update-nodegroup-config --region us-east-1 --cluster-name plan --nodegroup-name plan-gpu --scaling-config minSize=0,maxSize=1,desiredSize=1");
    let wait = position("aws eks wait nodegroup-active --region us-east-1 --cluster-name plan --nodegroup-name plan-gpu");
    assert!(
        describe < versions && versions < state && state < scale && scale < wait,
        "{log}"
    );
    // The Secret step: its namespace, then the Secret, made from 64 hex digits.
    let get = position("kubectl get secret api-key -n serving -o name");
    let create =
        position("kubectl create secret generic api-key -n serving --from-literal=api-key=");
    let key = lines[create].rsplit('=').next().unwrap();
    assert!(
        key.len() == 64 && key.chars().all(|c| c.is_ascii_hexdigit()),
        "{key}"
    );
    assert!(wait < get && get < create, "{log}");
    // The workload: the given input and the stack's output in place of the placeholders.
    let last_apply = lines
        .iter()
        .rposition(|l| *l == "kubectl apply -f -")
        .expect("the workload is applied");
    assert!(create < last_apply, "{log}");
    let applied = lines[last_apply + 1..].join("\n");
    assert!(
        applied.contains("  |   reservation: cr-0fedcba9876543210"),
        "{log}"
    );
    assert!(!applied.contains("hyperforge-output-BucketName"), "{log}");
    // CloudFormation names the bucket after the stack and logical id.
    assert!(applied.contains("  |   bucket: plan-nodes-bucket"), "{log}");
    assert_eq!(
        std::fs::read_to_string(root.join("plan/02-workload.yaml")).unwrap(),
        objects,
        "the file in the assembly is left as it is"
    );
    assert!(
        out.text().contains("with its values filled"),
        "{}",
        out.text()
    );
}

/// Path conformance for a fleet member: `deploy --fleet --member --run-external` carries out
/// the steps of a stage its StackSet deployed (here the Capacity Block's wait-and-scale after
/// the member's stage, recorded by the fake `aws`), in order, before its own stages.
#[test]
fn a_fleet_member_carries_out_its_stack_set_stages_steps() {
    use hyperforge::assembly::manifest::{Manifest, Step};
    let _server = exclusive();
    let rt = rt();
    let fleet = Fleet::new("st-fleet", member_stack)
        .account(FLEET_ACCOUNT)
        .region(FleetRegion::new("us-west-2"));
    let (dir, fleet_dir) = write_fleet(&fleet);
    let member = "st-fleet-us-west-2";
    // The member's StackSet stage carries a step to run after it (a node group of a Capacity
    // Block deployed there would): the manifest is the plan every path reads.
    let entry = fleet_dir
        .manifest()
        .members
        .iter()
        .find(|m| m.name == member)
        .unwrap()
        .assembly
        .clone();
    let path = dir
        .path()
        .join("fleet.out")
        .join(entry)
        .join("manifest.json");
    let mut manifest: Manifest =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest.stacks[0].stages[0]
        .steps_mut()
        .push(Step::ScaleCapacityBlockNodeGroup {
            cluster: "st".into(),
            node_group: "st-gpu".into(),
            min: 0,
            desired: 1,
            max: 1,
            scheduled_at: None,
        });
    std::fs::write(&path, manifest.to_json()).unwrap();

    let (report, _) = deploy_fleet(&rt, &fleet_dir, &FleetDeployOptions::default());
    assert!(report.stack_sets.iter().all(|s| s.applied), "{report:#?}");

    let mut opts = options();
    // Where the StackSets are administered; the member's own region is its stack's.
    opts.aws.region = Some(REGION.into());
    opts.run_external = true;
    let (console, out) = Console::capture();
    let (result, log) = with_fake_tools(dir.path(), || {
        rt.block_on(deploy::deploy_fleet_member(
            &fleet_dir,
            member,
            &opts,
            &console,
            &mut Answers::default(),
        ))
    });
    let member_report = result.unwrap_or_else(|e| panic!("{e}\n{}", out.text()));
    assert!(
        format!("{:?}", member_report.stages[0].outcome).starts_with("Skipped"),
        "{member_report:?}"
    );
    let lines: Vec<&str> = log.lines().collect();
    let position = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no call `{prefix}` in\n{log}"))
    };
    let describe = position(
        "aws eks describe-nodegroup --region us-west-2 --cluster-name st --nodegroup-name st-gpu",
    );
    let scale = position("aws eks update-nodegroup-config --region us-west-2 --cluster-name st --nodegroup-name st-gpu --scaling-config minSize=0,maxSize=1,desiredSize=1");
    let apply = position("kubectl apply -f ");
    assert!(describe < scale && scale < apply, "{log}");
}
