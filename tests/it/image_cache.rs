//! The ECR pull-through cache: the rule in both backends with its credential as a deploy-time
//! input, every rule a passing and a failing case, the stack file giving the same bytes, and
//! the artifacts passing cfn-lint, checkov and the provider schemas.

use crate::external_validators;
use hyperforge::constructs::{EcrPullThroughCache, Network};
use hyperforge::stackfile::load_str;
use hyperforge::{App, Code, Stack};
use serde_json::{json, Value};

const CREDENTIAL: &str =
    "arn:aws:secretsmanager:us-west-2:111122223333:secret:ecr-pullthroughcache/docker-hub";

fn app_with(cache: EcrPullThroughCache) -> App {
    let mut stack = Stack::new("images", "us-west-2").tag("workload", "image-cache");
    let foundation = stack.cloudformation_stage("foundation");
    // Beside the network whose NAT gateway the nodes would otherwise pull through (and which
    // gives checkov something to check: it has no checks for the rule itself).
    stack.add(foundation, Network::new("Network"));
    stack.add(foundation, cache);
    App::new().tag("managed-by", "hyperforge").stack(stack)
}

/// The cache beside a cluster whose system nodes pull through it (so the validators see the
/// grant too).
fn app() -> App {
    use hyperforge::constructs::{EksCluster, ManagedNodeGroup};
    let mut stack = Stack::new("images", "us-west-2").tag("workload", "image-cache");
    let s = stack.cloudformation_stage("foundation");
    let net = stack.add(s, Network::new("Network"));
    let eks = stack.add(
        s,
        EksCluster::new("Eks", "images")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc),
    );
    let nodes = stack.add(
        s,
        ManagedNodeGroup::system("System", &eks.cluster, &net.private_subnets),
    );
    stack.add(
        s,
        EcrPullThroughCache::docker_hub("ImageCache", CREDENTIAL).pulled_by(&nodes.role),
    );
    App::new().tag("managed-by", "hyperforge").stack(stack)
}

fn json_file(assembly: &hyperforge::Assembly, suffix: &str) -> Value {
    let (_, bytes) = assembly
        .files()
        .iter()
        .find(|(p, _)| p.ends_with(suffix))
        .unwrap_or_else(|| panic!("no {suffix}"));
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn both_backends_have_the_rule_with_the_credential_as_an_input() {
    let assembly = app().synth().unwrap_or_else(|d| panic!("{d}"));
    let t = json_file(&assembly, ".template.json");
    let rule = &t["Resources"]["ImageCacheRule"];
    assert_eq!(rule["Type"], "AWS::ECR::PullThroughCacheRule");
    let p = &rule["Properties"];
    assert_eq!(p["EcrRepositoryPrefix"], "docker-hub");
    assert_eq!(p["UpstreamRegistryUrl"], "registry-1.docker.io");
    assert_eq!(
        p["CredentialArn"],
        json!({"Ref": "ImageCacheRuleCredentialArn"})
    );
    assert_eq!(
        t["Parameters"]["ImageCacheRuleCredentialArn"]["Default"],
        CREDENTIAL
    );

    let m = json_file(&assembly, "main.tf.json");
    let rule = &m["resource"]["aws_ecr_pull_through_cache_rule"]["image_cache_rule"];
    assert_eq!(rule["ecr_repository_prefix"], "docker-hub");
    assert_eq!(rule["upstream_registry_url"], "registry-1.docker.io");
    assert_eq!(
        rule["credential_arn"],
        "${var.image_cache_rule_credential_arn}"
    );
    assert_eq!(
        m["variable"]["image_cache_rule_credential_arn"]["default"],
        CREDENTIAL
    );
    // The description never holds a credential, only the secret's ARN.
    for (path, bytes) in assembly.files() {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.contains("accessToken\":\""), "{path}");
    }
}

#[test]
fn every_rule_has_a_passing_and_a_failing_case() {
    let codes = |cache: EcrPullThroughCache| -> Vec<Code> {
        match app_with(cache).synth() {
            Ok(_) => Vec::new(),
            Err(ds) => ds.iter().map(|d| d.code).collect(),
        }
    };
    assert!(codes(EcrPullThroughCache::docker_hub("C", CREDENTIAL)).is_empty());
    assert!(codes(EcrPullThroughCache::new(
        "C",
        "ecr-public",
        "public.ecr.aws"
    ))
    .is_empty());
    for bad in [
        // Docker Hub without credentials.
        EcrPullThroughCache::new("C", "docker-hub", "registry-1.docker.io"),
        // Not an ecr-pullthroughcache/ secret.
        EcrPullThroughCache::docker_hub(
            "C",
            "arn:aws:secretsmanager:us-west-2:111122223333:secret:docker",
        ),
        // A secret in another region.
        EcrPullThroughCache::docker_hub(
            "C",
            "arn:aws:secretsmanager:us-east-1:111122223333:secret:ecr-pullthroughcache/x",
        ),
        EcrPullThroughCache::new("C", "Docker_Hub", "public.ecr.aws"),
        EcrPullThroughCache::new("C", "ecr-public", "https://public.ecr.aws"),
    ] {
        assert_eq!(
            codes(bad.clone()),
            [Code::InvalidPullThroughCache],
            "{bad:?}"
        );
    }
}

const STACK_FILE: &str = "\
stack: images
region: us-west-2
app_tags:
  managed-by: hyperforge
tags:
  workload: image-cache
stages:
  - name: foundation
    kind: cloudformation
    constructs:
      - network: Network
      - eks_cluster: Eks
        name: images
        subnets: Network.private_subnets
        vpc: Network
      - managed_node_group: System
        preset: system
        cluster: Eks
        subnets: Network.private_subnets
      - ecr_pull_through_cache: ImageCache
        repository_prefix: docker-hub
        upstream_registry_url: registry-1.docker.io
        credential_arn: arn:aws:secretsmanager:us-west-2:111122223333:secret:ecr-pullthroughcache/docker-hub
        pulled_by: [System]
";

#[test]
fn the_stack_file_gives_the_same_bytes() {
    let from_file = load_str("stacks/images.yaml", STACK_FILE).unwrap_or_else(|d| panic!("{d}"));
    let a = from_file.synth().unwrap_or_else(|d| panic!("{d}"));
    let b = app().synth().unwrap_or_else(|d| panic!("{d}"));
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

/// The nodes that pull through the cache may import and create its repositories, scoped to
/// the prefix, in both backends; the stack file names the node group the same way.
#[test]
fn pulling_nodes_are_granted_the_import_on_the_prefix_only() {
    let assembly = app().synth().unwrap_or_else(|d| panic!("{d}"));
    let t = json_file(&assembly, ".template.json");
    let p = &t["Resources"]["ImageCachePullPolicy1"];
    assert_eq!(p["Type"], "AWS::IAM::Policy");
    assert_eq!(p["Properties"]["Roles"], json!([{"Ref": "SystemNodeRole"}]));
    let st = &p["Properties"]["PolicyDocument"]["Statement"][0];
    assert_eq!(
        st["Action"],
        json!(["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"])
    );
    assert_eq!(
        st["Resource"],
        json!({"Fn::Sub": "arn:${AWS::Partition}:ecr:${AWS::Region}:${AWS::AccountId}:repository/docker-hub/*"})
    );
    let m = json_file(&assembly, "main.tf.json");
    let p = &m["resource"]["aws_iam_role_policy"]["image_cache_pull_policy1"];
    assert_eq!(p["role"], "${aws_iam_role.system_node_role.name}");
    let local = &m["locals"]["image_cache_pull_policy1"]["Statement"][0];
    assert_eq!(
        local["Resource"],
        "arn:${data.aws_partition.current.partition}:ecr:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:repository/docker-hub/*"
    );

    let file = STACK_FILE.to_owned();
    let from_file = load_str("stacks/images.yaml", &file)
        .unwrap_or_else(|d| panic!("{d}"))
        .synth()
        .unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(
        json_file(&from_file, ".template.json")["Resources"]["ImageCachePullPolicy1"],
        t["Resources"]["ImageCachePullPolicy1"]
    );
    let wrong = file.replace("pulled_by: [System]", "pulled_by: [Network]");
    let ds = load_str("stacks/images.yaml", &wrong).unwrap_err();
    assert!(
        ds.iter()
            .any(|d| d.code == Code::StackFileWrongReferenceKind),
        "{ds}"
    );
}
