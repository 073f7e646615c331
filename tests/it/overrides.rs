//! Escape hatches in every format: CloudFormation property overrides checked against the
//! registry schemas, Terraform attribute overrides checked against the provider schemas, and
//! Kubernetes object patches (RFC 7386 merge patches, RFC 6902 JSON patches), on the EKS
//! reference stack.

use crate::common::tf_schema::Schema;
use hyperforge::app::{ObjectPatch, Stack};
use hyperforge::{App, Code, Format, Formats, SynthOptions};
use serde_json::{json, Value};

const STACK: &str = "kimi-k3-eks";

fn app(edit: impl FnOnce(&mut Stack)) -> App {
    let mut stack = crate::reference::kimi_k3_eks_stack(STACK);
    edit(&mut stack);
    App::new().tag("managed-by", "hyperforge").stack(stack)
}

fn errors(app: &App) -> hyperforge::Diagnostics {
    app.synth().expect_err("synthesis fails")
}

fn json_file(assembly: &hyperforge::Assembly, path: &str) -> Value {
    let bytes = assembly
        .files()
        .get(path)
        .unwrap_or_else(|| panic!("no {path}"));
    serde_json::from_slice(bytes).unwrap()
}

fn nodes_template(assembly: &hyperforge::Assembly) -> Value {
    json_file(assembly, &format!("{STACK}/02-nodes.template.json"))
}

/// The Terraform resource `ty.name` in whichever root module declares it.
fn tf_resource(assembly: &hyperforge::Assembly, ty: &str, name: &str) -> Value {
    for (path, bytes) in assembly.files() {
        if path.ends_with("main.tf.json") {
            let doc: Value = serde_json::from_slice(bytes).unwrap();
            if let Some(r) = doc.pointer(&format!("/resource/{ty}/{name}")) {
                return r.clone();
            }
        }
    }
    panic!("no Terraform resource {ty}.{name}")
}

/// `ds` holds the misspelt-property error of an override of the GPU node group.
fn assert_misspelt_on_the_node_group(ds: &hyperforge::Diagnostics) {
    assert!(
        ds.contains(
            Code::OverrideUnknownProperty,
            &format!("{STACK}/GpuNodes/NodeGroup")
        ),
        "{ds}"
    );
}

fn message(ds: &hyperforge::Diagnostics, code: Code) -> String {
    ds.with_code(code)
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_misspelt_property_is_an_error_with_a_suggestion() {
    let ds = errors(&app(|s| {
        s.override_property("GpuNodes/NodeGroup", "UpdateConfg.MaxUnavailable", json!(1));
    }));
    assert_misspelt_on_the_node_group(&ds);
    assert!(
        message(&ds, Code::OverrideUnknownProperty).contains("did you mean `UpdateConfig`?"),
        "{ds}"
    );
}

#[test]
fn unknown_keys_inside_a_value_are_errors_at_any_depth() {
    let ds = errors(&app(|s| {
        s.override_property(
            "GpuNodes/LaunchTemplate",
            "LaunchTemplateData.MetadataOptions",
            json!({"HttpTokens": "required", "HttpPutResponseHopLimt": 2}),
        );
    }));
    let m = message(&ds, Code::OverrideUnknownProperty);
    assert!(m.contains("HttpPutResponseHopLimt"), "{ds}");
    assert!(
        m.contains("did you mean `HttpPutResponseHopLimit`?"),
        "{ds}"
    );
}

#[test]
fn a_value_of_the_wrong_type_names_the_expected_type() {
    let ds = errors(&app(|s| {
        s.override_property("GpuNodes/NodeGroup", "ScalingConfig.MaxSize", json!("two"));
        s.override_property("Network/Vpc", "EnableDnsHostnames", json!([true]));
    }));
    let m = message(&ds, Code::OverrideWrongType);
    assert!(
        m.contains("`ScalingConfig.MaxSize` takes an integer, not a string"),
        "{m}"
    );
    assert!(
        m.contains("`EnableDnsHostnames` takes a boolean, not a list"),
        "{m}"
    );
    // Numeric strings and intrinsic functions are what CloudFormation accepts.
    let ok = app(|s| {
        s.override_property("GpuNodes/NodeGroup", "DiskSize", json!("200"));
        s.override_property(
            "GpuNodes/NodeGroup",
            "Labels.team",
            json!({"Ref": "AWS::Region"}),
        );
    });
    let assembly = ok.synth().unwrap_or_else(|d| panic!("{d}"));
    let t = nodes_template(&assembly);
    assert_eq!(
        t["Resources"]["GpuNodesNodeGroup"]["Properties"]["DiskSize"],
        json!("200")
    );
}

#[test]
fn a_dash_appends_to_a_list() {
    let before = nodes_template(&app(|_| {}).synth().unwrap());
    let tags = |t: &Value| {
        t["Resources"]["GpuNodesLaunchTemplate"]["Properties"]["LaunchTemplateData"]
            ["TagSpecifications"][0]["Tags"]
            .as_array()
            .unwrap()
            .clone()
    };
    let assembly = app(|s| {
        s.override_property(
            "GpuNodes/LaunchTemplate",
            "LaunchTemplateData.TagSpecifications.0.Tags.-",
            json!({"Key": "team", "Value": "inference"}),
        );
        s.override_terraform(
            "GpuNodes/LaunchTemplate",
            "tag_specifications.0.tags.team",
            json!("inference"),
        );
    })
    .synth()
    .unwrap_or_else(|d| panic!("{d}"));
    let (old, new) = (tags(&before), tags(&nodes_template(&assembly)));
    assert_eq!(new.len(), old.len() + 1);
    assert_eq!(new[..old.len()], old[..]);
    assert_eq!(
        new.last(),
        Some(&json!({"Key": "team", "Value": "inference"}))
    );
    // Past the end without `-` is still an error, which says how to append.
    let ds = errors(&app(|s| {
        s.override_property(
            "GpuNodes/LaunchTemplate",
            "LaunchTemplateData.TagSpecifications.0.Tags.99",
            json!({"Key": "team", "Value": "inference"}),
        );
    }));
    assert!(
        message(&ds, Code::UnknownOverrideTarget).contains("append with `-`"),
        "{ds}"
    );
}

#[test]
fn overriding_a_validated_property_warns() {
    let assembly = app(|s| {
        s.override_property("GpuNodes/NodeGroup", "CapacityType", json!("ON_DEMAND"));
        s.override_terraform("GpuNodes/NodeGroup", "capacity_type", json!("ON_DEMAND"));
    })
    .synth()
    .unwrap_or_else(|d| panic!("{d}"));
    let w = assembly.warnings();
    let at = format!("{STACK}/GpuNodes/NodeGroup");
    let validated: Vec<_> = w.with_code(Code::OverrideOfValidatedProperty).collect();
    assert_eq!(validated.len(), 2, "one per format: {w}");
    assert!(validated.iter().all(|d| d.path == at), "{w}");
    assert!(!w.contains(Code::OverrideCloudFormationOnly, &at), "{w}");
    assert_eq!(
        nodes_template(&assembly)["Resources"]["GpuNodesNodeGroup"]["Properties"]["CapacityType"],
        json!("ON_DEMAND")
    );
    // Denied warnings stop synthesis.
    let denied = app(|s| {
        s.override_property("GpuNodes/NodeGroup", "CapacityType", json!("ON_DEMAND"));
    })
    .synth_with(&SynthOptions {
        deny_warnings: true,
        ..SynthOptions::default()
    });
    assert!(denied.is_err());
}

#[test]
fn a_cloudformation_only_override_warns_when_terraform_is_written() {
    let edit = |s: &mut Stack| {
        s.override_property("Network/Vpc", "EnableDnsHostnames", json!(true));
    };
    let assembly = app(edit).synth().unwrap_or_else(|d| panic!("{d}"));
    let w = assembly.warnings();
    assert!(
        w.contains(
            Code::OverrideCloudFormationOnly,
            &format!("{STACK}/Network/Vpc")
        ),
        "{w}"
    );
    assert!(
        message(w, Code::OverrideCloudFormationOnly).contains("override_terraform"),
        "{w}"
    );
    // Only CloudFormation written: nothing differs.
    let options = SynthOptions {
        formats: Formats::none().with(Format::CloudFormation),
        ..SynthOptions::default()
    };
    let assembly = app(edit).synth_with(&options).unwrap();
    assert_eq!(
        assembly
            .warnings()
            .with_code(Code::OverrideCloudFormationOnly)
            .count(),
        0
    );
    // With its twin: nothing differs either.
    let assembly = app(|s| {
        edit(s);
        s.override_terraform("Network/Vpc", "enable_dns_hostnames", json!(true));
    })
    .synth()
    .unwrap();
    assert_eq!(
        assembly
            .warnings()
            .with_code(Code::OverrideCloudFormationOnly)
            .count(),
        0
    );
}

#[test]
fn a_terraform_override_reaches_the_module_and_passes_the_provider_schema() {
    let assembly = app(|s| {
        s.override_terraform("GpuNodes/NodeGroup", "labels.team", json!("inference"));
        s.override_terraform(
            "GpuNodes/NodeGroup",
            "update_config",
            json!({"max_unavailable": 1}),
        );
        s.override_terraform_type(
            "Weights/Bucket",
            "aws_s3_bucket_versioning",
            "versioning_configuration.status",
            json!("Suspended"),
        );
        s.remove_terraform("Network/Vpc", "enable_dns_hostnames");
    })
    .synth()
    .unwrap_or_else(|d| panic!("{d}"));
    let group = tf_resource(&assembly, "aws_eks_node_group", "gpu_nodes_node_group");
    assert_eq!(group["labels"]["team"], json!("inference"));
    assert_eq!(group["labels"]["nvidia.com/gpu.present"], json!("true"));
    assert_eq!(group["update_config"], json!({"max_unavailable": 1}));
    let versioning = tf_resource(
        &assembly,
        "aws_s3_bucket_versioning",
        "weights_bucket_versioning",
    );
    assert_eq!(
        versioning["versioning_configuration"]["status"],
        json!("Suspended"),
        "{versioning}"
    );
    assert!(tf_resource(&assembly, "aws_vpc", "network_vpc")
        .get("enable_dns_hostnames")
        .is_none());
    let schema = Schema::committed();
    for (path, bytes) in assembly.files() {
        if path.ends_with(".tf.json") {
            let findings = schema.check(&serde_json::from_slice(bytes).unwrap());
            assert!(findings.is_empty(), "{path}:\n{}", findings.join("\n"));
        }
    }
}

#[test]
fn terraform_overrides_are_checked() {
    let ds = errors(&app(|s| {
        s.override_terraform("GpuNodes/NodeGroup", "capacity_typ", json!("ON_DEMAND"));
        s.override_terraform(
            "GpuNodes/NodeGroup",
            "scaling_config.max_size",
            json!("two"),
        );
        s.override_terraform("GpuNodes/NodeGrop", "labels.team", json!("x"));
        s.override_terraform("Weights/Bucket", "force_destroy", json!(true));
        s.override_terraform_type(
            "Weights/Bucket",
            "aws_s3_bucket_acl",
            "acl",
            json!("private"),
        );
    }));
    let at = format!("{STACK}/GpuNodes/NodeGroup");
    assert!(ds.contains(Code::OverrideUnknownProperty, &at), "{ds}");
    assert!(message(&ds, Code::OverrideUnknownProperty).contains("did you mean `capacity_type`?"));
    assert!(
        message(&ds, Code::OverrideWrongType).contains("takes a number, not a string"),
        "{ds}"
    );
    let m = message(&ds, Code::UnknownTerraformOverrideTarget);
    assert!(m.contains("did you mean `GpuNodes/NodeGroup`?"), "{m}");
    assert!(m.contains("lowers to several Terraform resources"), "{m}");
    assert!(
        m.contains("`aws_s3_bucket_versioning.weights_bucket_versioning`"),
        "{m}"
    );
    assert!(m.contains("override_terraform_type"), "{m}");
    assert!(
        m.contains("no Terraform resource of type `aws_s3_bucket_acl`"),
        "{m}"
    );
    assert_eq!(
        ds.with_code(Code::UnknownTerraformOverrideTarget).count(),
        3,
        "{ds}"
    );
}

fn deployment(assembly: &hyperforge::Assembly) -> Value {
    let path = crate::common::stage_file(assembly, STACK, "workload", "yaml");
    let text = std::str::from_utf8(&assembly.files()[&path])
        .unwrap()
        .to_owned();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v = Value::deserialize(doc).unwrap();
        if v["kind"] == "Deployment" {
            return v;
        }
    }
    panic!("no Deployment in {path}")
}

use serde::Deserialize;

fn patched_app() -> App {
    app(|s| {
        s.patch_object(
            "KimiK3/Deployment",
            ObjectPatch::Merge(json!({
                "metadata": {"labels": {"team": "inference"}},
                "spec": {"template": {"spec": {"priorityClassName": "system-cluster-critical"}}}
            })),
        );
        s.patch_object(
            "KimiK3/Deployment",
            ObjectPatch::Json(json!([
                {"op": "test", "path": "/kind", "value": "Deployment"},
                {"op": "add", "path": "/spec/template/spec/tolerations/-",
                 "value": {"key": "team", "operator": "Exists", "effect": "NoSchedule"}},
                {"op": "replace", "path": "/spec/progressDeadlineSeconds", "value": 3000},
                {"op": "add", "path": "/spec/minReadySeconds", "value": 30}
            ])),
        );
    })
}

#[test]
fn patches_reach_the_yaml() {
    let before = deployment(&app(|_| {}).synth().unwrap());
    let assembly = patched_app().synth().unwrap_or_else(|d| panic!("{d}"));
    let after = deployment(&assembly);
    assert_eq!(after["metadata"]["labels"]["team"], json!("inference"));
    assert_eq!(
        after["metadata"]["labels"]["app.kubernetes.io/name"],
        before["metadata"]["labels"]["app.kubernetes.io/name"]
    );
    assert_eq!(
        after["spec"]["template"]["spec"]["priorityClassName"],
        json!("system-cluster-critical")
    );
    let tolerations = after["spec"]["template"]["spec"]["tolerations"]
        .as_array()
        .unwrap();
    let old = before["spec"]["template"]["spec"]["tolerations"]
        .as_array()
        .unwrap();
    assert_eq!(tolerations.len(), old.len() + 1);
    assert_eq!(after["spec"]["minReadySeconds"], json!(30));
    assert_eq!(after["spec"]["progressDeadlineSeconds"], json!(3000));
    // Acknowledgement annotations are still written.
    assert!(after["metadata"]["annotations"]["checkov.io/skip1"].is_string());
}

#[test]
fn a_patched_object_passes_kubernetes_validate_strict() {
    let dir = crate::common::written(&patched_app());
    let files: Vec<_> = crate::common::artifacts_with_format(dir.path(), "kubernetes")
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with("workload.yaml"))
        .collect();
    assert_eq!(files.len(), 1);
    if let Err(findings) = crate::external_validators::kubernetes_validate(&files) {
        panic!("{findings}");
    }
}

#[test]
fn a_patched_assembly_is_up_to_date_when_synthesized_again() {
    // What `hyperforge synth --check` compares: the written tree and a new synthesis.
    let dir = crate::common::written(&patched_app());
    let again = patched_app().synth().unwrap();
    for (path, bytes) in again.files() {
        assert_eq!(
            &std::fs::read(dir.path().join(path)).unwrap(),
            bytes,
            "{path}"
        );
    }
}

#[test]
fn patch_errors_are_reported_with_every_other_error() {
    let ds = errors(&app(|s| {
        s.patch_object(
            "KimiK3/Deploymnet",
            ObjectPatch::Merge(json!({"metadata": {}})),
        );
        s.patch_object(
            "KimiK3/Deployment",
            ObjectPatch::Json(json!([
                {"op": "add", "path": "/metadata/labels/a", "value": "b"},
                {"op": "remove", "path": "/spec/nothing"}
            ])),
        );
        s.patch_object(
            "KimiK3/Service",
            ObjectPatch::Merge(json!({"metadata": {"name": "other", "namespace": null}})),
        );
        s.patch_object(
            "KimiK3/Deployment",
            ObjectPatch::Json(json!([{"op": "replace", "path": "/kind", "value": "StatefulSet"}])),
        );
        s.patch_object(
            "KimiK3/Deployment",
            ObjectPatch::Merge(json!(["not", "an", "object"])),
        );
        s.override_property("GpuNodes/NodeGroup", "UpdateConfg", json!({}));
    }));
    let m = message(&ds, Code::UnknownPatchTarget);
    assert!(m.contains("did you mean `KimiK3/Deployment`?"), "{m}");
    let m = message(&ds, Code::PatchFailed);
    assert!(m.contains("operation 1"), "{m}");
    assert!(m.contains("\"op\":\"remove\""), "{m}");
    assert!(m.contains("`/spec/nothing` does not exist"), "{m}");
    assert!(
        m.contains("merge patch of an object must be a JSON object"),
        "{m}"
    );
    let m = message(&ds, Code::PatchChangesIdentity);
    assert!(m.contains("`metadata.name`, `metadata.namespace`"), "{m}");
    assert!(m.contains("`kind`"), "{m}");
    assert!(ds.contains(
        Code::PatchChangesIdentity,
        &format!("{STACK}/KimiK3/Service")
    ));
    // The CloudFormation override's error is reported in the same run.
    assert_misspelt_on_the_node_group(&ds);
}

#[test]
fn a_patched_job_deadline_is_the_one_waited_for() {
    let assembly = app(|s| {
        s.patch_object(
            "StageKimiK3/Job",
            ObjectPatch::Json(json!([
                {"op": "replace", "path": "/spec/activeDeadlineSeconds", "value": 7200}
            ])),
        );
        s.remove_terraform_type(
            "Weights/Bucket",
            "aws_s3_bucket_versioning",
            "expected_bucket_owner",
        );
    })
    .synth()
    .unwrap_or_else(|d| panic!("{d}"));
    let manifest = json_file(&assembly, "manifest.json");
    let stages = manifest
        .pointer("/stacks/0/stages")
        .unwrap()
        .as_array()
        .unwrap();
    let jobs: Vec<&Value> = stages
        .iter()
        .filter_map(|s| s.get("steps"))
        .flat_map(|j| j.as_array().unwrap())
        .filter(|s| s["step"] == "wait-job")
        .collect();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0]["timeout_seconds"], json!(7200 + 600));
}

/// An override's or a patch's diagnostic points at the line that gave it, not at the
/// construct it names (which the reference stack adds elsewhere).
#[test]
fn override_and_patch_diagnostics_point_at_their_own_lines() {
    let (mut property_line, mut terraform_line, mut patch_line) = (0, 0, 0);
    let ds = errors(&app(|s| {
        property_line = line!() + 1;
        s.override_property("GpuNodes/NodeGroup", "UpdateConfg.MaxUnavailable", json!(1));
        terraform_line = line!() + 1;
        s.override_terraform("GpuNodes/NodeGroup", "scaling_confg.max_size", json!(1));
        patch_line = line!() + 1;
        s.patch_object("Nowhere/Deployment", ObjectPatch::Merge(json!({})));
    }));
    let at = |code: Code| {
        ds.with_code(code)
            .next()
            .and_then(|d| d.location.clone())
            .unwrap_or_else(|| panic!("{code} without a location:\n{ds}"))
    };
    let here = file!();
    assert_eq!(
        at(Code::OverrideUnknownProperty)
            .rsplit_once(':')
            .map(|(l, _)| l.to_owned()),
        Some(format!("{here}:{property_line}")),
        "{ds}"
    );
    assert!(
        ds.with_code(Code::OverrideUnknownProperty)
            .chain(ds.with_code(Code::UnknownTerraformOverrideTarget))
            .any(|d| d
                .location
                .as_deref()
                .is_some_and(|l| l.starts_with(&format!("{here}:{terraform_line}:")))),
        "{ds}"
    );
    assert!(
        at(Code::UnknownPatchTarget).starts_with(&format!("{here}:{patch_line}:")),
        "{ds}"
    );
}

/// Override and patch mistakes come with the other errors, not after they are fixed; an
/// override of a construct that has errors of its own is not judged (its resources were not
/// built).
#[test]
fn override_and_patch_mistakes_come_with_the_other_errors() {
    let ds = errors(&app(|s| {
        let foundation = s.stage_of("Network").expect("the foundation stage");
        s.add(
            foundation,
            hyperforge::constructs::EksCluster::new("Other", "not a cluster name!"),
        );
        s.override_property("GpuNodes/NodeGroup", "UpdateConfg.MaxUnavailable", json!(1));
        s.override_property("Other/Cluster", "Nme", json!("x"));
        s.patch_object("KimiK3/Deploymnet", ObjectPatch::Merge(json!({})));
    }));
    assert!(
        ds.iter().any(|d| d.path == format!("{STACK}/Other")
            && d.severity == hyperforge::diagnostics::Severity::Error),
        "{ds}"
    );
    assert_misspelt_on_the_node_group(&ds);
    assert!(
        ds.with_code(Code::UnknownPatchTarget).next().is_some(),
        "{ds}"
    );
    assert!(
        !ds.iter()
            .any(|d| d.path.starts_with(&format!("{STACK}/Other/"))),
        "an override of a construct with errors was judged:\n{ds}"
    );
    assert!(
        ds.with_code(Code::OverrideUnknownProperty)
            .all(|d| d.location.is_some()),
        "{ds}"
    );
}
