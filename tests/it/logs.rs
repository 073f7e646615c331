//! Container logs: `LogShipping` (the KMS key, the two log groups, Fluent Bit's Pod Identity
//! role) and the `aws-for-fluent-bit` Helm preset, in both backends: the role reaches only the
//! two groups, the key lets CloudWatch Logs use it for those groups only, the retention and
//! its rule, the Helm values; the stack file giving the same bytes; the artifacts passing
//! cfn-lint, checkov and the provider schemas.

use crate::external_validators;
use hyperforge::constructs::logs::{log_group_names, SYSTEM_NAMESPACES};
use hyperforge::constructs::{EksCluster, HelmRelease, LogShipping, Network};
use hyperforge::stackfile::load_str;
use hyperforge::{App, Code, Stack};
use serde_json::{json, Value};

const CLUSTER: &str = "serving";
const REGION: &str = "us-west-2";

fn app_with(retention: Option<u32>) -> App {
    let mut stack = Stack::new("logs", REGION).tag("workload", "logs");
    let s = stack.cloudformation_stage("foundation");
    let net = stack.add(s, Network::new("Network"));
    let eks = stack.add(
        s,
        EksCluster::new("Eks", CLUSTER)
            .subnets(&net.private_subnets)
            .vpc(&net.vpc),
    );
    let l = stack.cloudformation_stage("logs");
    let mut logs = LogShipping::new("Logs", &eks);
    if let Some(days) = retention {
        logs = logs.retention_days(days);
    }
    stack.add(l, logs);
    stack.helm_stage(
        "fluent-bit",
        HelmRelease::aws_for_fluent_bit(&eks.name, REGION),
    );
    App::new().tag("managed-by", "hyperforge").stack(stack)
}

/// The test stack: an EKS cluster, its log shipping at the default retention, Fluent Bit.
pub(crate) fn app() -> App {
    app_with(None)
}

const STACK_FILE: &str = "\
stack: logs
region: us-west-2
app_tags:
  managed-by: hyperforge
tags:
  workload: logs
stages:
  - name: foundation
    kind: cloudformation
    constructs:
      - network: Network
      - eks_cluster: Eks
        name: serving
        subnets: Network.private_subnets
        vpc: Network.vpc
  - name: logs
    kind: cloudformation
    constructs:
      - log_shipping: Logs
        cluster: Eks
  - name: fluent-bit
    kind: helm
    preset: aws-for-fluent-bit
    cluster: Eks
";

fn file<'a>(assembly: &'a hyperforge::Assembly, suffix: &str) -> &'a [u8] {
    let (_, bytes) = assembly
        .files()
        .iter()
        .find(|(p, _)| p.ends_with(suffix))
        .unwrap_or_else(|| panic!("no {suffix}"));
    bytes
}

fn json_file(assembly: &hyperforge::Assembly, suffix: &str) -> Value {
    serde_json::from_slice(file(assembly, suffix)).expect("JSON")
}

fn synth(app: App) -> hyperforge::Assembly {
    app.synth().unwrap_or_else(|d| panic!("{d}"))
}

/// The ARN of log group `name` as CloudFormation spells it.
fn cfn_group_arn(name: &str) -> Value {
    json!({"Fn::Sub": format!("arn:${{AWS::Partition}}:logs:${{AWS::Region}}:${{AWS::AccountId}}:log-group:{name}")})
}

#[test]
fn cloudformation_key_groups_and_role() {
    let assembly = synth(app());
    let t = json_file(&assembly, "02-logs.template.json");
    let r = &t["Resources"];
    let names = log_group_names(CLUSTER);
    assert_eq!(names.workloads, "/hyperforge/serving/workloads");
    assert_eq!(names.system, "/hyperforge/serving/system");

    // The key: rotation on; CloudWatch Logs of this region may use it for the two groups only.
    let key = &r["LogsKey"]["Properties"];
    assert_eq!(key["EnableKeyRotation"], true);
    let statements = key["KeyPolicy"]["Statement"].as_array().unwrap();
    let logs = statements
        .iter()
        .find(|s| s["Sid"] == "CloudWatchLogsUse")
        .expect("a statement for CloudWatch Logs");
    assert_eq!(
        logs["Principal"],
        json!({"Service": {"Fn::Sub": "logs.${AWS::Region}.amazonaws.com"}})
    );
    assert_eq!(
        logs["Condition"],
        json!({"ArnLike": {"kms:EncryptionContext:aws:logs:arn": [
            cfn_group_arn(&names.workloads),
            cfn_group_arn(&names.system)
        ]}})
    );
    // Nobody else but the account's administrators.
    assert_eq!(statements.len(), 2, "{statements:?}");

    // The groups: encrypted with the key, kept 90 days by default.
    for (id, name) in [
        ("LogsWorkloadsLogGroup", &names.workloads),
        ("LogsSystemLogGroup", &names.system),
    ] {
        let g = &r[id]["Properties"];
        assert_eq!(g["LogGroupName"], name.as_str());
        assert_eq!(g["RetentionInDays"], 90);
        assert_eq!(g["KmsKeyId"], json!({"Fn::GetAtt": ["LogsKey", "Arn"]}));
    }

    // The role: writes to the two groups and their streams, nothing else; no group creation.
    let role = &r["LogsFluentBitRole"]["Properties"];
    assert!(role.get("ManagedPolicyArns").is_none());
    assert_eq!(
        role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"],
        json!({"Service": "pods.eks.amazonaws.com"})
    );
    let policies = role["Policies"].as_array().unwrap();
    assert_eq!(policies.len(), 1);
    let statements = policies[0]["PolicyDocument"]["Statement"]
        .as_array()
        .unwrap();
    assert_eq!(statements.len(), 1);
    let s = &statements[0];
    assert_eq!(s["Effect"], "Allow");
    assert_eq!(
        s["Action"],
        json!([
            "logs:CreateLogStream",
            "logs:PutLogEvents",
            "logs:DescribeLogStreams"
        ])
    );
    assert_eq!(
        s["Resource"],
        json!([
            cfn_group_arn(&names.workloads),
            cfn_group_arn(&format!("{}:*", names.workloads)),
            cfn_group_arn(&names.system),
            cfn_group_arn(&format!("{}:*", names.system)),
        ])
    );
    assert!(s.get("Condition").is_none());

    let association = &r["LogsPodIdentityAssociation"]["Properties"];
    assert_eq!(association["Namespace"], "kube-system");
    assert_eq!(association["ServiceAccount"], "aws-for-fluent-bit");
    assert_eq!(
        association["RoleArn"],
        json!({"Fn::GetAtt": ["LogsFluentBitRole", "Arn"]})
    );
    assert_eq!(
        association["ClusterName"],
        json!({"Fn::ImportValue": "logs-foundation:EksCluster:Name"})
    );
}

#[test]
fn terraform_key_groups_and_role() {
    let assembly = synth(app());
    let m = json_file(&assembly, "terraform/01-foundation/main.tf.json");
    let res = &m["resource"];
    let names = log_group_names(CLUSTER);
    let arn = |name: &str| {
        format!(
            "arn:${{data.aws_partition.current.partition}}:logs:${{data.aws_region.current.region}}:${{data.aws_caller_identity.current.account_id}}:log-group:{name}"
        )
    };
    for (id, name) in [
        ("logs_workloads_log_group", &names.workloads),
        ("logs_system_log_group", &names.system),
    ] {
        let g = &res["aws_cloudwatch_log_group"][id];
        assert_eq!(g["name"], name.as_str(), "{g}");
        assert_eq!(g["retention_in_days"], 90);
        assert_eq!(g["kms_key_id"], "${aws_kms_key.logs_key.arn}");
        assert!(
            g["//"]
                .as_str()
                .is_some_and(|c| c.starts_with("checkov:skip=CKV_AWS_338: ")),
            "{g}"
        );
    }
    assert_eq!(res["aws_kms_key"]["logs_key"]["enable_key_rotation"], true);

    let local = res["aws_kms_key"]["logs_key"]["policy"]
        .as_str()
        .and_then(|p| p.strip_prefix("${jsonencode(local."))
        .and_then(|p| p.strip_suffix(")}"))
        .expect("a key policy local");
    let key_policy = m["locals"][local]["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["Sid"] == "CloudWatchLogsUse")
        .expect("the key policy's CloudWatch Logs statement")
        .clone();
    assert_eq!(
        key_policy["Principal"],
        json!({"Service": "logs.${data.aws_region.current.region}.amazonaws.com"})
    );
    assert_eq!(
        key_policy["Condition"],
        json!({"ArnLike": {"kms:EncryptionContext:aws:logs:arn": [arn(&names.workloads), arn(&names.system)]}})
    );

    let policies: Vec<&Value> = res["aws_iam_role_policy"]
        .as_object()
        .unwrap()
        .values()
        .filter(|p| p["role"] == "${aws_iam_role.logs_fluent_bit_role.name}")
        .collect();
    assert_eq!(policies.len(), 1);
    let local = policies[0]["policy"]
        .as_str()
        .and_then(|p| p.strip_prefix("${jsonencode(local."))
        .and_then(|p| p.strip_suffix(")}"))
        .expect("a policy local");
    let statements = m["locals"][local]["Statement"].as_array().unwrap();
    assert_eq!(statements.len(), 1);
    assert_eq!(
        statements[0]["Action"],
        json!([
            "logs:CreateLogStream",
            "logs:PutLogEvents",
            "logs:DescribeLogStreams"
        ])
    );
    assert_eq!(
        statements[0]["Resource"],
        json!([
            arn(&names.workloads),
            arn(&format!("{}:*", names.workloads)),
            arn(&names.system),
            arn(&format!("{}:*", names.system)),
        ])
    );
    assert!(res
        .get("aws_iam_role_policy_attachment")
        .and_then(|a| a.as_object())
        .is_none_or(|a| a
            .values()
            .all(|p| p["role"] != "${aws_iam_role.logs_fluent_bit_role.name}")));

    let association = &res["aws_eks_pod_identity_association"]["logs_pod_identity_association"];
    assert_eq!(association["namespace"], "kube-system");
    assert_eq!(association["service_account"], "aws-for-fluent-bit");
    assert_eq!(
        association["role_arn"],
        "${aws_iam_role.logs_fluent_bit_role.arn}"
    );
}

#[test]
fn helm_values_name_the_groups_and_run_on_every_node() {
    let assembly = synth(app());
    let values: serde_yaml::Value =
        serde_yaml::from_slice(file(&assembly, "03-fluent-bit.values.yaml")).expect("YAML");
    let names = log_group_names(CLUSTER);
    let out = &values["cloudWatchLogs"];
    assert_eq!(out["enabled"], true);
    assert_eq!(out["region"], REGION);
    assert_eq!(out["match"], "kube.*");
    assert_eq!(out["logGroupName"], names.workloads.as_str());
    assert_eq!(out["autoCreateGroup"], false);
    assert_eq!(values["serviceAccount"]["name"], "aws-for-fluent-bit");

    // The system namespaces are retagged (no copy kept) and written to the system group by
    // the second output, which creates no group either.
    let filters = values["additionalFilters"].as_str().unwrap();
    assert!(filters.contains("Name          rewrite_tag"), "{filters}");
    assert!(
        filters.contains(&format!(
            "$kubernetes['namespace_name'] ^({})$ system.$TAG false",
            SYSTEM_NAMESPACES.join("|")
        )),
        "{filters}"
    );
    let outputs = values["additionalOutputs"].as_str().unwrap();
    for line in [
        "Name               cloudwatch_logs".to_owned(),
        "Match              system.*".to_owned(),
        format!("region             {REGION}"),
        format!("log_group_name     {}", names.system),
        "auto_create_group  false".to_owned(),
    ] {
        assert!(outputs.contains(&line), "{line} not in {outputs}");
    }

    // Every node: the GPU nodes' taint explicitly, and any other (HyperPod's own taints).
    let tolerations = values["tolerations"].as_sequence().unwrap();
    let gpu: serde_yaml::Value =
        serde_yaml::from_str("{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}")
            .unwrap();
    assert!(tolerations.contains(&gpu), "{tolerations:?}");
    let any: serde_yaml::Value = serde_yaml::from_str("{operator: Exists}").unwrap();
    assert!(tolerations.contains(&any), "{tolerations:?}");
    assert!(values.get("nodeSelector").is_none());

    // Terraform installs the same values file, from the pinned chart.
    let m = json_file(&assembly, "terraform/03-fluent-bit/main.tf.json");
    let release = &m["resource"]["helm_release"]["fluent_bit"];
    assert_eq!(release["chart"], "aws-for-fluent-bit");
    assert_eq!(release["version"], "0.2.0");
    assert_eq!(release["repository"], "https://aws.github.io/eks-charts");
    assert_eq!(release["namespace"], "kube-system");
    assert!(release["values"][0]
        .as_str()
        .unwrap()
        .contains("03-fluent-bit.values.yaml"));
}

#[test]
fn retention_is_a_cloudwatch_logs_period() {
    let codes = |days: u32| match app_with(Some(days)).synth() {
        Ok(_) => Vec::new(),
        Err(ds) => ds.iter().map(|d| d.code).collect(),
    };
    for days in [1, 90, 180, 3653] {
        assert!(codes(days).is_empty(), "{days}");
    }
    for days in [0, 2, 91, 4000] {
        assert_eq!(codes(days), [Code::InvalidLogRetention], "{days}");
    }
    let t = json_file(&synth(app_with(Some(365))), "02-logs.template.json");
    let group = &t["Resources"]["LogsSystemLogGroup"];
    assert_eq!(group["Properties"]["RetentionInDays"], 365);
    // A year or more needs no acknowledgement of checkov's one-year check.
    assert!(group["Metadata"].get("checkov").is_none(), "{group}");
    let t = json_file(&synth(app()), "02-logs.template.json");
    let skip = &t["Resources"]["LogsSystemLogGroup"]["Metadata"]["checkov"]["skip"];
    assert_eq!(skip[0]["id"], "CKV_AWS_338", "{skip}");
    assert!(
        skip[0]["comment"].as_str().unwrap().contains("90 days"),
        "{skip}"
    );

    // In a stack file: a value in the declared range but not a period is the builder's
    // diagnostic at the field; one out of the range the loader's.
    let file = STACK_FILE.replace(
        "        cluster: Eks\n  - name: fluent-bit",
        "        cluster: Eks\n        retention_days: 91\n  - name: fluent-bit",
    );
    assert_ne!(file, STACK_FILE);
    let ds = load_str("stacks/logs.yaml", &file).expect_err("91 days is not a period");
    let codes: Vec<Code> = ds.iter().map(|d| d.code).collect();
    assert_eq!(codes, [Code::InvalidLogRetention], "{ds}");
    assert!(ds.to_string().contains("stacks/logs.yaml:21:"), "{ds}");
}

#[test]
fn the_stack_file_gives_the_same_bytes() {
    let from_file = load_str("stacks/logs.yaml", STACK_FILE).unwrap_or_else(|d| panic!("{d}"));
    let a = synth(from_file);
    let b = synth(app());
    assert!(
        a.files() == b.files(),
        "the stack file and the builders differ"
    );
}

fn synthesized() -> tempfile::TempDir {
    crate::common::written(&app())
}

#[test]
fn terraform_matches_the_provider_schemas_and_passes_checkov() {
    external_validators::assert_terraform_passes(synthesized().path());
}

#[test]
fn cloudformation_passes_cfn_lint_and_checkov() {
    external_validators::assert_cloudformation_passes(synthesized().path());
}

/// One log shipping per cluster (`HF0350`), and Fluent Bit after it (`HF0351`); Fluent Bit for
/// another cluster, or none at all, is no concern of the rule.
#[test]
fn log_shipping_is_unique_per_cluster_and_before_fluent_bit() {
    let codes = |build: &dyn Fn(&mut Stack)| {
        let mut stack = Stack::new("logs", REGION);
        build(&mut stack);
        match App::new().stack(stack).synth() {
            Ok(_) => Vec::new(),
            Err(ds) => ds.iter().map(|d| d.code).collect::<Vec<_>>(),
        }
    };
    let foundation = |stack: &mut Stack| {
        let s = stack.cloudformation_stage("foundation");
        let net = stack.add(s, Network::new("Network"));
        stack.add(
            s,
            EksCluster::new("Eks", CLUSTER)
                .subnets(&net.private_subnets)
                .vpc(&net.vpc),
        )
    };
    assert!(codes(&|stack| {
        let eks = foundation(stack);
        let l = stack.cloudformation_stage("logs");
        stack.add(l, LogShipping::new("Logs", &eks));
    })
    .is_empty());
    assert_eq!(
        codes(&|stack| {
            let eks = foundation(stack);
            let l = stack.cloudformation_stage("logs");
            stack.add(l, LogShipping::new("Logs", &eks));
            stack.add(l, LogShipping::new("MoreLogs", &eks));
            stack.helm_stage(
                "fluent-bit",
                HelmRelease::aws_for_fluent_bit(CLUSTER, REGION),
            );
        }),
        [Code::DuplicateLogShipping]
    );
    assert_eq!(
        codes(&|stack| {
            let eks = foundation(stack);
            stack.helm_stage(
                "fluent-bit",
                HelmRelease::aws_for_fluent_bit(CLUSTER, REGION),
            );
            let l = stack.cloudformation_stage("logs");
            stack.add(l, LogShipping::new("Logs", &eks));
        }),
        [Code::FluentBitBeforeLogGroups]
    );
    assert!(codes(&|stack| {
        let eks = foundation(stack);
        stack.helm_stage(
            "fluent-bit",
            HelmRelease::aws_for_fluent_bit("other", REGION),
        );
        let l = stack.cloudformation_stage("logs");
        stack.add(l, LogShipping::new("Logs", &eks));
    })
    .is_empty());
}

/// The vendored Guard rule packs (the groups' retention and key, the key's rotation and
/// principals, the role's policy) find nothing.
#[test]
fn the_vendored_policy_packs_find_nothing() {
    let report = synth(app()).check_policies(&hyperforge::policy::PolicyPack::all_builtin());
    assert!(
        report.stacks.iter().map(|s| s.templates).sum::<usize>() > 0,
        "no template checked"
    );
    let findings: Vec<String> = report.diagnostics.iter().map(|d| d.to_string()).collect();
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}
