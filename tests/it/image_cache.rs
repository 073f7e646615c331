//! The ECR pull-through cache: the rule in both backends with its credential as a deploy-time
//! input, every rule a passing and a failing case, the stack file giving the same bytes, and
//! the artifacts passing cfn-lint, checkov and the provider schemas.

use crate::common::artifacts_with_format;
use crate::common::tf_schema::{read_json, Schema};
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

fn app() -> App {
    app_with(EcrPullThroughCache::docker_hub("ImageCache", CREDENTIAL))
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
      - ecr_pull_through_cache: ImageCache
        repository_prefix: docker-hub
        upstream_registry_url: registry-1.docker.io
        credential_arn: arn:aws:secretsmanager:us-west-2:111122223333:secret:ecr-pullthroughcache/docker-hub
";

#[test]
fn the_stack_file_gives_the_same_bytes() {
    let from_file = load_str("stacks/images.yaml", STACK_FILE).unwrap_or_else(|d| panic!("{d}"));
    let a = from_file.synth().unwrap_or_else(|d| panic!("{d}"));
    let b = app().synth().unwrap_or_else(|d| panic!("{d}"));
    assert_eq!(a.files(), b.files());
}

fn synthesized() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    app()
        .synth()
        .unwrap_or_else(|d| panic!("{d}"))
        .write_to(dir.path())
        .expect("write");
    dir
}

#[test]
fn terraform_matches_the_provider_schemas() {
    let dir = synthesized();
    let schema = Schema::committed();
    let files = artifacts_with_format(dir.path(), "terraform");
    assert!(!files.is_empty());
    for path in files {
        let findings = schema.check(&read_json(&path));
        assert!(
            findings.is_empty(),
            "{}:\n{}",
            path.display(),
            findings.join("\n")
        );
    }
}

#[test]
fn cloudformation_passes_cfn_lint() {
    let dir = synthesized();
    let templates = artifacts_with_format(dir.path(), "cloudformation");
    assert!(!templates.is_empty());
    if let Err(findings) = external_validators::cfn_lint(&templates) {
        panic!("{findings}");
    }
}

#[test]
fn cloudformation_passes_checkov() {
    let dir = synthesized();
    let templates = artifacts_with_format(dir.path(), "cloudformation");
    match external_validators::checkov_cloudformation(&templates) {
        Ok(report) => eprintln!("{report}"),
        Err(findings) => panic!("{findings}"),
    }
}

#[test]
fn terraform_passes_checkov() {
    let dir = synthesized();
    let files = artifacts_with_format(dir.path(), "terraform");
    let skips = external_validators::terraform_skips();
    let used = std::cell::RefCell::new(vec![false; skips.len()]);
    match external_validators::checkov_terraform(&files, &skips, &used) {
        Ok(report) => eprintln!("{report}"),
        Err(findings) => panic!("{findings}"),
    }
}
