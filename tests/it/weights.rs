//! Weights staged once into a model store and served from it: the staging Job's command line
//! and security, the Pod Identity scope (the model's prefix in the store's bucket, in both
//! backends), the HyperPod model source, the EKS server's load arguments, revisions as keys,
//! and the rules that keep a server from reading a copy nobody staged.

use crate::common::repo_root;
use crate::common::stage_file;
use crate::reference;
use hyperforge::constructs::weights::{STAGER_REQUIREMENTS, STAGER_SCRIPT};
use hyperforge::{Assembly, Code};
use serde::Deserialize;
use serde_json::{json, Value};

const REVISION: &str = "0123456789abcdef0123456789abcdef01234567";
const EKS_BUCKET: &str = "kimi-k3-eks-weights-111122223333-us-west-2";

/// The Kubernetes objects of stage `stage` of stack `stack` in `assembly`.
fn stage_objects(assembly: &Assembly, stack: &str, stage: &str) -> Vec<Value> {
    objects(assembly, &stage_file(assembly, stack, stage, "yaml"))
}

/// The Kubernetes objects of `path` in `assembly`.
fn objects(assembly: &Assembly, path: &str) -> Vec<Value> {
    let text = assembly.text(path).unwrap_or_else(|| panic!("no {path}"));
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn json_file(assembly: &Assembly, path: &str) -> Value {
    serde_json::from_str(assembly.text(path).unwrap_or_else(|| panic!("no {path}"))).unwrap()
}

/// The reference stack file `name` with `edit` applied, loaded and synthesized.
fn synth_edited(name: &str, edit: impl Fn(String) -> String) -> Result<Assembly, String> {
    let text = std::fs::read_to_string(repo_root().join(format!("stacks/{name}.yaml"))).unwrap();
    let edited = edit(text.clone());
    assert_ne!(text, edited, "the edit changed nothing");
    let app = hyperforge::stackfile::load_str(&format!("{name}.yaml"), &edited)
        .map_err(|d| d.to_string())?;
    app.synth().map_err(|d| d.to_string())
}

#[test]
fn the_staging_job_copies_one_revision_with_a_pinned_locked_down_image() {
    let assembly = reference::kimi_k3_eks().synth().unwrap();
    let objects = stage_objects(&assembly, "kimi-k3-eks", "weights");
    let kinds: Vec<&str> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["Namespace", "ServiceAccount", "ConfigMap", "Job"]);
    let job = of_kind(&objects, "Job");
    assert_eq!(job["metadata"]["name"], "stage-kimi-k3-0123456789ab");
    assert_eq!(job["metadata"]["namespace"], "model-weights");
    let pod = &job["spec"]["template"]["spec"];
    let stage = &pod["containers"][0];
    assert_eq!(
        stage["command"],
        json!([
            "python3",
            "/stager/stage_weights.py",
            "--repo",
            "moonshotai/Kimi-K3",
            "--revision",
            REVISION,
            "--bucket",
            EKS_BUCKET,
            "--prefix",
            format!("moonshotai/Kimi-K3/{REVISION}/"),
            "--region",
            "us-west-2",
            "--workers",
            "8"
        ])
    );
    // The image is pinned by digest, the same in the init container that installs boto3 from
    // hashed wheels only.
    let image = stage["image"].as_str().unwrap();
    assert!(image.contains("@sha256:"), "{image}");
    let install = &pod["initContainers"][0];
    assert_eq!(install["image"], image);
    let command: Vec<&str> = install["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(command.contains(&"--require-hashes") && command.contains(&"--no-deps"));
    // Non-root, read-only root filesystem, no privilege, on a system node, with the stager's
    // service account (bound by Pod Identity) and no Kubernetes API token.
    for c in [stage, install] {
        let sc = &c["securityContext"];
        assert_eq!(sc["runAsNonRoot"], true);
        assert_eq!(sc["readOnlyRootFilesystem"], true);
        assert_eq!(sc["allowPrivilegeEscalation"], false);
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    }
    assert_eq!(pod["nodeSelector"]["hyperforge.io/node-role"], "system");
    assert_eq!(pod["serviceAccountName"], "weights-stager");
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["restartPolicy"], "Never");
    // Three times the estimate on the system node it runs on, an m7i.xlarge sustaining
    // 1,562 Mb/s (slower than the Hub's 500 MB/s): 1,560,936,091,448 B / 195.25 MB/s = 7,995 s.
    assert_eq!(job["spec"]["activeDeadlineSeconds"], 3 * 7995);
    // The program and its pinned requirements travel in the ConfigMap, byte for byte.
    let config = of_kind(&objects, "ConfigMap");
    assert_eq!(config["data"]["stage_weights.py"], STAGER_SCRIPT);
    assert_eq!(config["data"]["requirements.txt"], STAGER_REQUIREMENTS);
    // Each requirement (continued over lines with `\`) pins a version and carries a hash.
    let joined = STAGER_REQUIREMENTS
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let requirements: Vec<&str> = joined.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(requirements.len() >= 7, "{requirements:?}");
    for r in requirements {
        assert!(
            r.contains("==") && r.contains("--hash=sha256:"),
            "unpinned: {r}"
        );
    }
    // The manifest tells the runbook and deploy to wait for it.
    let manifest = json_file(&assembly, "manifest.json");
    let weights = manifest["stacks"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "weights")
        .unwrap();
    let waits: Vec<&Value> = weights["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["step"] == "wait-job")
        .collect();
    assert_eq!(
        waits,
        [
            &json!({"step": "wait-job", "name": "stage-kimi-k3-0123456789ab", "namespace": "model-weights", "timeout_seconds": 3 * 7995 + 600})
        ]
    );
}

/// The inline policy of role `role` in the CloudFormation template `template`.
fn cfn_policy(template: &Value, role: &str) -> Value {
    template["Resources"][role]["Properties"]["Policies"][0]["PolicyDocument"].clone()
}

/// Every `Resource` of a policy's Allow statements, as strings.
fn allowed(policy: &Value) -> Vec<(Vec<String>, String)> {
    let as_list = |v: &Value| match v {
        Value::Array(a) => a.clone(),
        other => vec![other.clone()],
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("Fn::Sub")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    };
    let mut out = Vec::new();
    for st in as_list(&policy["Statement"]) {
        assert_eq!(st["Effect"], "Allow");
        let actions: Vec<String> = as_list(&st["Action"])
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        for r in as_list(&st["Resource"]) {
            out.push((actions.clone(), text(&r)));
        }
    }
    out
}

#[test]
fn pod_identity_roles_reach_only_the_models_prefix_in_both_backends() {
    let assembly = reference::kimi_k3_eks().synth().unwrap();
    let template = json_file(&assembly, "kimi-k3-eks/01-foundation.template.json");
    let tf = json_file(
        &assembly,
        "kimi-k3-eks/terraform/01-foundation/main.tf.json",
    );
    for (role, local, write) in [
        (
            "WeightsStagerRole",
            "weights_stager_role_model_weights",
            true,
        ),
        (
            "WeightsReader1Role",
            "weights_reader1_role_model_weights",
            false,
        ),
    ] {
        let cfn = cfn_policy(&template, role);
        let tf_policy = tf["locals"][local].clone();
        assert!(tf_policy.is_object(), "no Terraform document {local}");
        for (backend, policy, partition) in [
            ("CloudFormation", &cfn, "${AWS::Partition}"),
            (
                "Terraform",
                &tf_policy,
                "${data.aws_partition.current.partition}",
            ),
        ] {
            let bucket = format!("arn:{partition}:s3:::{EKS_BUCKET}");
            let objects = format!("{bucket}/moonshotai/Kimi-K3/*");
            let mut writes = vec![
                "s3:GetObject".to_owned(),
                "s3:PutObject".to_owned(),
                "s3:AbortMultipartUpload".to_owned(),
                "s3:ListMultipartUploadParts".to_owned(),
            ];
            if !write {
                writes.truncate(1);
            }
            assert_eq!(
                allowed(policy),
                [
                    (vec!["s3:ListBucket".to_owned()], bucket),
                    (writes, objects)
                ],
                "{backend} {role}"
            );
            // Listing only under the model, and only a bucket of this account.
            let list = &policy["Statement"][0]["Condition"];
            assert_eq!(
                list["StringLike"]["s3:prefix"], "moonshotai/Kimi-K3/*",
                "{backend}"
            );
            for st in policy["Statement"].as_array().unwrap() {
                assert!(
                    st["Condition"]["StringEquals"]["s3:ResourceAccount"].is_string()
                        || st["Condition"]["StringEquals"]["s3:ResourceAccount"].is_object(),
                    "{backend} {role}: no account condition"
                );
            }
        }
    }
    // Bound to the stager's and the server's service accounts.
    for (association, namespace, account) in [
        (
            "WeightsStagerPodIdentityAssociation",
            "model-weights",
            "weights-stager",
        ),
        ("WeightsReader1PodIdentityAssociation", "kimi-k3", "kimi-k3"),
    ] {
        let p = &template["Resources"][association]["Properties"];
        assert_eq!(p["Namespace"], namespace);
        assert_eq!(p["ServiceAccount"], account);
    }
}

#[test]
fn the_model_bucket_is_named_versioned_logged_and_cleans_up_unfinished_uploads() {
    let assembly = reference::kimi_k3_eks().synth().unwrap();
    let template = json_file(&assembly, "kimi-k3-eks/01-foundation.template.json");
    let bucket = &template["Resources"]["WeightsBucket"]["Properties"];
    assert_eq!(bucket["BucketName"], EKS_BUCKET);
    assert_eq!(bucket["VersioningConfiguration"]["Status"], "Enabled");
    assert_eq!(
        bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
            ["ServerSideEncryptionByDefault"]["SSEAlgorithm"],
        "aws:kms"
    );
    assert_eq!(
        bucket["LoggingConfiguration"]["DestinationBucketName"],
        json!({"Ref": "WeightsLogBucket"})
    );
    let rule = &bucket["LifecycleConfiguration"]["Rules"][0];
    assert_eq!(
        rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"],
        3
    );
    assert_eq!(rule["NoncurrentVersionExpiration"]["NoncurrentDays"], 30);
    // S3 delivers access logs only to an SSE-S3 bucket, and only for this bucket.
    let logs = &template["Resources"]["WeightsLogBucket"]["Properties"];
    assert_eq!(
        logs["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
            ["ServerSideEncryptionByDefault"]["SSEAlgorithm"],
        "AES256"
    );
    let policy = &template["Resources"]["WeightsLogBucketPolicy"]["Properties"]["PolicyDocument"];
    let delivery = &policy["Statement"][1];
    assert_eq!(delivery["Principal"]["Service"], "logging.s3.amazonaws.com");
    assert_eq!(
        delivery["Condition"]["ArnLike"]["aws:SourceArn"],
        json!({"Fn::GetAtt": ["WeightsBucket", "Arn"]})
    );
    // Terraform writes the same bucket.
    let tf = json_file(
        &assembly,
        "kimi-k3-eks/terraform/01-foundation/main.tf.json",
    );
    let r = &tf["resource"];
    assert_eq!(r["aws_s3_bucket"]["weights_bucket"]["bucket"], EKS_BUCKET);
    assert!(r["aws_s3_bucket_logging"]["weights_bucket_logging"].is_object());
    assert!(r["aws_s3_bucket_lifecycle_configuration"]["weights_bucket_lifecycle"].is_object());
}

#[test]
fn the_hyperpod_endpoint_reads_the_staged_copy_from_s3() {
    let assembly = reference::kimi_k3_hyperpod().synth().unwrap();
    let objects = stage_objects(&assembly, "kimi-k3-hyperpod", "inference");
    let iec = of_kind(&objects, "InferenceEndpointConfig");
    assert_eq!(
        iec["spec"]["modelSourceConfig"],
        json!({
            "modelLocation": format!("moonshotai/Kimi-K3/{REVISION}"),
            "modelSourceType": "s3",
            "prefetchEnabled": true,
            "s3Storage": {
                "bucketName": "kimi-k3-hyperpod-weights-111122223333-us-west-2",
                "region": "us-west-2"
            }
        })
    );
    // The operator fetches it (125 s at 12.5 GB/s), the server loads it from the volume
    // (781 s at 2 GB/s) and warms up (900 s): 1,806 s x 1.5 = 2,709 s, in whole minutes.
    assert_eq!(iec["spec"]["maxDeployTimeInSeconds"], 2760);
}

#[test]
fn the_eks_server_streams_the_staged_copy_into_gpu_memory() {
    let assembly = reference::kimi_k3_eks().synth().unwrap();
    let objects = stage_objects(&assembly, "kimi-k3-eks", "workload");
    let container = &of_kind(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let after = |flag: &str| {
        args.iter()
            .position(|a| *a == flag)
            .map(|i| args[i + 1])
            .unwrap_or_else(|| panic!("no {flag}"))
    };
    assert_eq!(
        after("--model"),
        format!("s3://{EKS_BUCKET}/moonshotai/Kimi-K3/{REVISION}/")
    );
    assert_eq!(after("--load-format"), "runai_streamer");
    assert_eq!(
        after("--model-loader-extra-config"),
        r#"{"distributed":true}"#
    );
    assert_eq!(args.iter().filter(|a| **a == "--load-format").count(), 1);
    assert!(!args.contains(&"--revision"), "the prefix is the revision");
    assert!(container["env"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "AWS_REGION" && e["value"] == "us-west-2"));
    // No weights on the node: room for configuration, code and caches only.
    assert_eq!(
        container["resources"]["requests"]["ephemeral-storage"],
        "100Gi"
    );
    // Startup: 125 s streaming at 12.5 GB/s and 900 s of warm-up, x 1.5, whole minutes.
    let probe = &container["startupProbe"];
    assert_eq!(
        probe["periodSeconds"].as_u64().unwrap() * probe["failureThreshold"].as_u64().unwrap(),
        1560
    );
}

#[test]
fn a_new_revision_is_a_new_job_prefix_and_rollout() {
    let other = "fedcba9876543210fedcba9876543210fedcba98";
    let before = reference::kimi_k3_eks().synth().unwrap();
    let after = synth_edited("kimi-k3-eks", |t| t.replace(REVISION, other)).unwrap();
    let job = |a: &Assembly| {
        of_kind(&stage_objects(a, "kimi-k3-eks", "weights"), "Job")["metadata"]["name"].clone()
    };
    assert_eq!(job(&before), "stage-kimi-k3-0123456789ab");
    assert_eq!(job(&after), "stage-kimi-k3-fedcba987654");
    let template = |a: &Assembly| {
        of_kind(&stage_objects(a, "kimi-k3-eks", "workload"), "Deployment")["spec"]["template"]
            .clone()
    };
    let (old, new) = (template(&before), template(&after));
    assert_ne!(
        old, new,
        "the pod template changes, so the Deployment rolls"
    );
    assert!(new
        .to_string()
        .contains(&format!("moonshotai/Kimi-K3/{other}/")));
    assert!(!new.to_string().contains(REVISION));
}

#[test]
fn a_server_reads_only_what_an_earlier_stage_staged() {
    // A revision the Job does not stage.
    let err = synth_edited("kimi-k3-eks", |t| {
        t.replacen(
            &format!("        revision: \"{REVISION}\"\n"),
            "        revision: \"fedcba9876543210fedcba9876543210fedcba98\"\n",
            1,
        )
    })
    .unwrap_err();
    assert!(err.contains("error[HF0511]"), "{err}");
    // No staging Job at all.
    let err = synth_edited("kimi-k3-hyperpod", |t| {
        let start = t.find("  - name: weights\n").unwrap();
        let end = t.find("  - name: inference\n").unwrap();
        format!("{}{}", &t[..start], &t[end..])
    })
    .unwrap_err();
    assert!(err.contains("error[HF0511]"), "{err}");
    // A server without a pinned revision.
    let err = synth_edited("kimi-k3-hyperpod", |t| {
        t.replacen(&format!("          revision: \"{REVISION}\"\n"), "", 1)
    })
    .unwrap_err();
    assert!(err.contains("error[HF0424]"), "{err}");
    // A loader that cannot read s3:// on EKS.
    let err = synth_edited("kimi-k3-eks", |t| {
        t.replace(
            "          prefix_caching: true\n",
            "          prefix_caching: true\n          load_format: fastsafetensors\n",
        )
    })
    .unwrap_err();
    assert!(err.contains("error[HF0425]"), "{err}");
}

#[test]
fn malformed_stores_and_jobs_are_refused_at_their_fields() {
    let err = synth_edited("kimi-k3-eks", |t| {
        t.replace(
            &format!("bucket_name: {EKS_BUCKET}"),
            "bucket_name: Kimi_K3..weights",
        )
        .replace(
            "        revision: \"0123456789abcdef0123456789abcdef01234567\"\n        hf_token_secret:",
            "        revision: main\n        hf_token_secret:",
        )
    })
    .unwrap_err();
    for code in ["HF0422", "HF0414"] {
        assert!(err.contains(&format!("error[{code}]")), "{code}: {err}");
    }
    // The Hub token's Secret key is checked as every Secret reference is.
    let err = synth_edited("kimi-k3-eks", |t| {
        t.replacen("          key: token\n", "          key: \"to/ken\"\n", 1)
    })
    .unwrap_err();
    assert!(
        err.contains("error[HF") && err.contains("`to/ken` is not a valid Secret name and key"),
        "{err}"
    );
    // The loader refuses a count outside its range before any builder runs.
    let err = synth_edited("kimi-k3-eks", |t| {
        t.replace(
            "        store: Weights\n",
            "        store: Weights\n        workers: 0\n",
        )
    })
    .unwrap_err();
    assert!(err.contains("error[HF0711]"), "{err}");
    let err = synth_edited("kimi-k3-eks", |t| {
        t.replace(
            "        store: Weights\n",
            "        store: Weights\n        image: python:3.12-slim\n",
        )
    })
    .unwrap_err();
    assert!(err.contains("error[HF0423]"), "{err}");
}

#[test]
fn the_references_serve_staged_copies_with_warnings_denied() {
    for app in reference::all().into_iter().chain(reference::variants()) {
        let options = hyperforge::SynthOptions {
            deny_warnings: true,
            ..Default::default()
        };
        let assembly = app.synth_with(&options).unwrap_or_else(|d| panic!("{d}"));
        assert!(!assembly
            .warnings()
            .iter()
            .any(|d| d.code == Code::WeightsDownloadedPerPod));
    }
}

/// A store without `bucket_name` is named by the deployment: `<stack>-weights-<account
/// id>-<region>` in both backends (the template the same in every account and region), and
/// every Kubernetes object that names the bucket carries its stage output's placeholder, listed
/// in the manifest and read by the runbook before the stage is applied.
#[test]
fn a_store_without_a_bucket_name_is_named_by_the_account_and_region_deployed_to() {
    use hyperforge::assembly::manifest::{StageManifest, ValueSource};
    let assembly = synth_edited("kimi-k3-eks", |t| {
        t.replace(&format!("        bucket_name: {EKS_BUCKET}\n"), "")
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let foundation = json_file(
        &assembly,
        &stage_file(&assembly, "kimi-k3-eks", "foundation", "template.json"),
    );
    assert_eq!(
        foundation["Resources"]["WeightsBucket"]["Properties"]["BucketName"],
        json!({"Fn::Sub": "kimi-k3-eks-weights-${AWS::AccountId}-${AWS::Region}"})
    );
    let text = serde_json::to_string(&foundation).unwrap();
    assert!(!text.contains("111122223333") && !text.contains("us-west-2"));
    let tf = json_file(
        &assembly,
        "kimi-k3-eks/terraform/01-foundation/main.tf.json",
    );
    assert_eq!(
        tf["resource"]["aws_s3_bucket"]["weights_bucket"]["bucket"],
        "kimi-k3-eks-weights-${data.aws_caller_identity.current.account_id}-${data.aws_region.current.region}"
    );
    // The staging Job and the server name the bucket by the placeholder of its output.
    let placeholder = "hyperforge-output-WeightsBucketName";
    let job = of_kind(&stage_objects(&assembly, "kimi-k3-eks", "weights"), "Job").clone();
    assert!(job.to_string().contains(placeholder), "{job}");
    let workload = stage_objects(&assembly, "kimi-k3-eks", "workload");
    let deployment = of_kind(&workload, "Deployment");
    assert!(
        deployment.to_string().contains(&format!(
            "s3://{placeholder}/moonshotai/Kimi-K3/{REVISION}/"
        )),
        "{deployment}"
    );
    let manifest = &assembly.manifest().stacks[0];
    for stage in ["weights", "workload"] {
        let Some(StageManifest::Kubernetes { values, .. }) = manifest.stage(stage) else {
            panic!("no Kubernetes stage {stage}");
        };
        let value = values
            .iter()
            .find(|v| v.placeholder == placeholder)
            .unwrap_or_else(|| panic!("{stage}: {values:?}"));
        match &value.from {
            ValueSource::Output(o) => {
                assert_eq!(
                    (o.stage.as_deref(), o.output.as_str()),
                    (Some("foundation"), "WeightsBucketName")
                )
            }
            other => panic!("{stage}: {other:?}"),
        }
    }
    // People read the name's form; the runbook reads the name from the output first.
    let staging = &manifest.inventory.stagings[0];
    assert_eq!(staging.bucket, "kimi-k3-eks-weights-<account-id>-us-west-2");
    assert_eq!(staging.bucket_output.as_deref(), Some("WeightsBucketName"));
    let runbook = assembly.text("kimi-k3-eks/RUNBOOK.md").unwrap();
    assert!(
        runbook.contains("WEIGHTS_BUCKET_NAME=$(aws cloudformation describe-stacks"),
        "the runbook reads the bucket's name from its output"
    );
    assert!(
        runbook.contains(&format!(
            "aws s3 cp s3://$WEIGHTS_BUCKET_NAME/moonshotai/Kimi-K3/{REVISION}.manifest.json -"
        )),
        "the staged file list reads the variable"
    );
    assert!(
        runbook.contains("(`WEIGHTS_BUCKET_NAME` is the bucket's name, which the deployment chose"),
        "the runbook says where the variable comes from"
    );
    // A named bucket is as it was: no placeholder, no output read for it.
    let named = reference::kimi_k3_eks().synth().unwrap();
    let manifest = &named.manifest().stacks[0];
    assert_eq!(manifest.inventory.stagings[0].bucket, EKS_BUCKET);
    assert!(manifest.inventory.stagings[0].bucket_output.is_none());
    assert!(!named
        .text(&stage_file(&named, "kimi-k3-eks", "weights", "yaml"))
        .unwrap()
        .contains(placeholder));
}
