//! Every generated Terraform root module against the provider argument schemas committed in
//! `tests/data/terraform/` (hashicorp/aws 6.66.0, hashicorp/awscc 1.106.0, hashicorp/helm
//! 3.1.1): no unknown argument or block, no missing required one, no wrong type. A broken
//! document proves the checker catches each kind of mistake.

use crate::common::synth_reference_apps;
use crate::common::tf_schema::{read_json, Schema};
use serde_json::json;

#[test]
fn checker_catches_each_kind_of_mistake() {
    let schema = Schema::committed();
    let broken = json!({
        "resource": {
            "aws_vpc": {
                "ok": {"cidr_block": "10.0.0.0/16", "depends_on": ["aws_x.y"], "tags": {"Name": "x"}},
                "typo": {"cidr_blok": "10.0.0.0/16"},
                "wrong_type": {"enable_dns_support": "yes"}
            },
            "aws_eks_cluster": {
                "missing": {
                    "role_arn": "${aws_iam_role.r.arn}",
                    "vpc_config": {"subnet_ids": ["${aws_subnet.a.id}"]}
                },
                "bad_block": {
                    "name": "x",
                    "role_arn": "${aws_iam_role.r.arn}",
                    "vpc_config": {"subnet_ids": ["s"], "endpoint_privat_access": true},
                    "access_config": "API",
                    "compute": {"enabled": true}
                }
            },
            "aws_subnet": {
                "interpolated": {"vpc_id": "${aws_vpc.ok.id}", "map_public_ip_on_launch": "${var.public}"}
            },
            "aws_nonexistent": {"x": {}}
        },
        "data": {"aws_partition": {"current": {}}}
    });
    let findings = schema.check(&broken);
    let expected = [
        "resource.aws_vpc.typo: unknown argument `cidr_blok`",
        "resource.aws_vpc.wrong_type.enable_dns_support: expected bool, got \"yes\"",
        "resource.aws_eks_cluster.missing: missing required argument `name`",
        "resource.aws_eks_cluster.bad_block.vpc_config: unknown argument `endpoint_privat_access`",
        "resource.aws_eks_cluster.bad_block.access_config: a block, given as the scalar \"API\"",
        "resource.aws_eks_cluster.bad_block: unknown block `compute`",
        "resource.aws_nonexistent: unknown resource type",
    ];
    for e in expected {
        assert!(
            findings.iter().any(|f| f == e),
            "not reported: {e}\nfindings:\n{}",
            findings.join("\n")
        );
    }
    assert_eq!(
        findings.len(),
        expected.len(),
        "unexpected findings:\n{}",
        findings.join("\n")
    );
}

#[test]
fn generated_root_modules_match_provider_schemas() {
    let schema = Schema::committed();
    let mut checked = 0;
    let mut failures = Vec::new();
    for app in synth_reference_apps() {
        for path in app.artifacts_with_format("terraform") {
            assert!(
                path.to_string_lossy().ends_with(".tf.json"),
                "{}",
                path.display()
            );
            checked += 1;
            let findings = schema.check(&read_json(&path));
            if !findings.is_empty() {
                failures.push(format!("== {}\n{}", path.display(), findings.join("\n")));
            }
        }
    }
    assert!(checked > 0, "no reference app has a terraform artifact");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_capacity_block_purchase_matches_the_provider_schema() {
    use hyperforge::app::Stack;
    use hyperforge::constructs::*;
    let mut stack = Stack::new("buy", "us-west-2");
    let f = stack.cloudformation_stage("foundation");
    let net = stack.add(f, Network::new("Network").gpu_subnet("usw2-az2"));
    let eks = stack.add(
        f,
        EksCluster::new("Eks", "buy")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc),
    );
    stack.add(
        f,
        ManagedNodeGroup::gpu(
            "Gpu",
            &eks.cluster,
            "p6-b300.48xlarge",
            net.gpu_subnet.iter(),
        )
        .capacity(NodeCapacity::buy_capacity_block(
            CapacityBlockPurchase::new("cb-0123456789abcdef0").non_refundable(),
            "usw2-az2",
            1,
        )),
    );
    let assembly = hyperforge::App::new()
        .stack(stack)
        .synth()
        .unwrap_or_else(|d| panic!("{d}"));
    let doc: serde_json::Value = serde_json::from_str(
        assembly
            .text("buy/terraform/01-foundation/main.tf.json")
            .expect("module"),
    )
    .expect("JSON");
    assert!(doc["resource"]["aws_ec2_capacity_block_reservation"].is_object());
    let findings = Schema::committed().check(&doc);
    assert!(findings.is_empty(), "{findings:#?}");
}
