//! The path from an operator's machine to the private Kubernetes API: every reference stack
//! with a private endpoint has an admin host that reaches TCP 443 of the cluster security
//! group and admits nothing, in CloudFormation and in Terraform; every Terraform phase that
//! talks to the Kubernetes API comes after the phase creating that host and never mixes with
//! AWS-API stages; a Helm stage waits for its workloads in every path alike.

use crate::common::synth_reference_apps;
use crate::common::tf_schema::read_json;
use hyperforge::app::Stack;
use hyperforge::constructs::*;
use hyperforge::diagnostics::Code;
use serde_json::Value;

fn resources_of<'a>(t: &'a Value, ty: &str) -> Vec<(&'a String, &'a Value)> {
    t["Resources"]
        .as_object()
        .map(|m| m.iter().filter(|(_, r)| r["Type"] == ty).collect())
        .unwrap_or_default()
}

#[test]
fn every_private_endpoint_has_an_admin_host_reaching_443_and_admitting_nothing() {
    let mut checked = 0;
    let mut tf_checked = 0;
    for app in synth_reference_apps() {
        for path in app.artifacts_with_format("cloudformation") {
            let t = read_json(&path);
            for (_, cluster) in resources_of(&t, "AWS::EKS::Cluster") {
                let vpc = &cluster["Properties"]["ResourcesVpcConfig"];
                assert_ne!(vpc["EndpointPublicAccess"], true, "{}", path.display());
                let instances = resources_of(&t, "AWS::EC2::Instance");
                assert_eq!(instances.len(), 1, "{}: one admin host", path.display());
                let (_, host) = instances[0];
                let p = &host["Properties"];
                assert_eq!(p["MetadataOptions"]["HttpTokens"], "required");
                assert!(p.get("NetworkInterfaces").is_none() && p.get("KeyName").is_none());
                let group = p["SecurityGroupIds"][0]["Fn::GetAtt"][0].as_str().unwrap();
                let sg = &t["Resources"][group]["Properties"];
                assert!(sg.get("SecurityGroupIngress").is_none(), "no inbound rule");
                for egress in sg["SecurityGroupEgress"].as_array().unwrap() {
                    assert_eq!(
                        (egress["FromPort"].as_i64(), egress["ToPort"].as_i64()),
                        (Some(443), Some(443))
                    );
                }
                let ingress = resources_of(&t, "AWS::EC2::SecurityGroupIngress")
                    .into_iter()
                    .find(|(_, r)| {
                        r["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0] == group
                    })
                    .expect("the cluster security group admits the admin host");
                let rule = &ingress.1["Properties"];
                assert_eq!(rule["GroupId"]["Fn::GetAtt"][1], "ClusterSecurityGroupId");
                assert_eq!(
                    (rule["FromPort"].as_i64(), rule["ToPort"].as_i64()),
                    (Some(443), Some(443))
                );
                checked += 1;
            }
        }
        for path in app.artifacts_with_format("terraform") {
            let m = read_json(&path);
            if let Some(hosts) = m["resource"]["aws_instance"].as_object() {
                for host in hosts.values() {
                    assert_eq!(host["associate_public_ip_address"], false);
                    assert_eq!(host["metadata_options"]["http_tokens"], "required");
                    tf_checked += 1;
                }
            }
        }
    }
    assert!(checked >= 3, "{checked}");
    assert_eq!(tf_checked, checked, "one Terraform admin host per cluster");
}

#[test]
fn kubernetes_api_phases_follow_the_admin_host_and_never_mix_with_aws_stages() {
    let mut helm_phases = 0;
    for app in synth_reference_apps() {
        let mut phases: Vec<(String, Value)> = app
            .artifacts_with_format("terraform")
            .into_iter()
            .filter(|p| p.ends_with("main.tf.json"))
            .map(|p| {
                let dir = p
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                (dir, read_json(&p))
            })
            .collect();
        phases.sort_by(|a, b| a.0.cmp(&b.0));
        let mut host_seen = false;
        for (dir, m) in &phases {
            let types: Vec<&String> = m["resource"].as_object().unwrap().keys().collect();
            let helm = types.iter().any(|t| *t == "helm_release");
            if helm {
                assert!(host_seen, "{dir}: Helm before any admin host");
                assert!(
                    types.iter().all(|t| *t == "helm_release"),
                    "{dir} mixes: {types:?}"
                );
                assert_eq!(
                    m["provider"]["helm"]["kubernetes"]["config_path"],
                    "${pathexpand(var.kubeconfig)}",
                    "{dir}: the Helm provider reads the kubeconfig the tunnel step writes"
                );
                helm_phases += 1;
            }
            host_seen |= types.iter().any(|t| *t == "aws_instance");
        }
    }
    assert!(helm_phases >= 3, "{helm_phases} Helm phases checked");
}

#[test]
fn a_helm_stage_waits_alike_on_every_path() {
    let mut releases = 0;
    for app in synth_reference_apps() {
        let manifest = read_json(&app.root().join("manifest.json"));
        for stack in manifest["stacks"].as_array().unwrap() {
            let runbook = std::fs::read_to_string(
                app.root()
                    .join(format!("{}/RUNBOOK.md", stack["name"].as_str().unwrap())),
            )
            .unwrap();
            for stage in stack["stages"].as_array().unwrap() {
                if stage["kind"] != "helm" {
                    continue;
                }
                let release = stage["release"].as_str().unwrap();
                let wait = stage["wait"].as_bool().unwrap();
                let command = runbook
                    .split("helm upgrade --install ")
                    .find(|c| c.starts_with(&format!("{release} ")))
                    .and_then(|c| c.split("```").next())
                    .unwrap();
                assert_eq!(command.contains("--wait"), wait, "{release}: runbook");
                let mut in_terraform = 0;
                for path in app.artifacts_with_format("terraform") {
                    let m = read_json(&path);
                    // The Terraform resource is named after the stage.
                    let stage_name = stage["name"].as_str().unwrap().replace('-', "_");
                    if let Some(r) = m["resource"]["helm_release"].get(&stage_name) {
                        assert_eq!(r["wait"].as_bool(), Some(wait), "{release}: Terraform");
                        in_terraform += 1;
                    }
                }
                assert_eq!(in_terraform, 1, "{release}: one Terraform release");
                releases += 1;
            }
        }
    }
    assert!(releases >= 6, "{releases} Helm stages checked");
}

#[test]
fn the_hyperpod_dependencies_chart_does_not_wait_for_nodes_it_cannot_have() {
    let r = hyperforge::app::stage::HelmRelease::hyperpod_dependencies();
    assert!(!r.wait);
}

#[test]
fn an_admin_host_needs_the_vpc_and_opting_out_of_it_warns() {
    // The VPC is derived from the cluster's subnets when it is not given.
    let with = |vpc: bool| {
        let mut stack = Stack::new("admin", "us-west-2");
        let s = stack.cloudformation_stage("foundation");
        let net = stack.add(s, Network::new("Network"));
        let cluster = EksCluster::new("Eks", "admin").subnets(&net.private_subnets);
        stack.add(s, if vpc { cluster.vpc(&net.vpc) } else { cluster });
        hyperforge::App::new().stack(stack).synth().unwrap()
    };
    let (derived, given) = (with(false), with(true));
    assert_eq!(derived.files(), given.files());
    assert!(derived
        .text("admin/01-foundation.template.json")
        .unwrap()
        .contains("AdminHost"));
    // Subnets of two networks name no single VPC.
    let mut stack = Stack::new("admin", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    let one = stack.add(s, Network::new("One"));
    let two = stack.add(s, Network::new("Two").cidr("10.200.0.0/16"));
    stack.add(
        s,
        EksCluster::new("Eks", "admin").subnets([&one.private_subnets[0], &two.private_subnets[1]]),
    );
    let ds = hyperforge::App::new().stack(stack).synth().unwrap_err();
    assert!(
        ds.iter().any(|d| d.code == Code::AdminHostWithoutVpc),
        "{ds}"
    );

    let mut stack = Stack::new("admin", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    let net = stack.add(s, Network::new("Network"));
    stack.add(
        s,
        EksCluster::new("Eks", "admin")
            .subnets(&net.private_subnets)
            .without_admin_host(),
    );
    let assembly = hyperforge::App::new().stack(stack).synth().unwrap();
    assert!(assembly
        .warnings()
        .iter()
        .any(|d| d.code == Code::PrivateApiWithoutAdminPath));
    let manifest: Value = serde_json::from_str(assembly.text("manifest.json").unwrap()).unwrap();
    assert!(manifest["stacks"][0].get("admin_host").is_none());

    let mut stack = Stack::new("admin", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    let net = stack.add(s, Network::new("Network"));
    stack.add(
        s,
        EksCluster::new("Eks", "admin")
            .subnets(&net.private_subnets)
            .vpc(&net.vpc)
            .admin_host("t3 micro; rm -rf"),
    );
    let ds = hyperforge::App::new().stack(stack).synth().unwrap_err();
    assert!(
        ds.iter()
            .any(|d| d.code == Code::InvalidAdminHostInstanceType),
        "{ds}"
    );

    // The host's group and the host itself must be in one network.
    let mut stack = Stack::new("admin", "us-west-2");
    let s = stack.cloudformation_stage("foundation");
    let net = stack.add(s, Network::new("Network"));
    let other = stack.add(s, Network::new("Other").cidr("10.1.0.0/16"));
    stack.add(
        s,
        EksCluster::new("Eks", "admin")
            .subnets(&net.private_subnets)
            .vpc(&other.vpc),
    );
    let ds = hyperforge::App::new().stack(stack).synth().unwrap_err();
    assert!(
        ds.iter().any(|d| d.code == Code::AdminHostVpcMismatch),
        "{ds}"
    );
}
