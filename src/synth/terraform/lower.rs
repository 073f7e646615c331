//! Lowering of each construct (and of the upload and Helm stages) to Terraform resources,
//! mirroring `synth/cloudformation/lower.rs` construct by construct. Where Terraform models a
//! part of a CloudFormation resource as a resource of its own (a bucket's encryption, a role's
//! inline policy, a security group's inline egress rule), that resource is named after its
//! owner (`lifecycle_bucket_encryption`).

use super::module::{escape_template, hcl_string_body, snake, Addr, RootModule, Variable};
use crate::app::{kind, logical_id, Ref, StageId};
use crate::constructs::iam::{deny_insecure_transport, service_trust, PolicyDocument};
use crate::constructs::text::{Pseudo, Text};
use crate::constructs::{ChartSource, ConstructRef, EksCluster, HelmRelease, Upload};
use serde_json::{json, Map, Value};

type Cx<'a, 'b> = &'a mut RootModule<'b>;

/// Lowers one construct placed in a CloudFormation stage.
pub(crate) fn lower(cx: Cx, stage: StageId, id: &str, construct: ConstructRef<'_>) {
    match construct {
        // Expanded into the resource layer (`crate::resources`) and lowered from there.
        ConstructRef::SecurityGroup(_)
        | ConstructRef::Lifecycle(_)
        | ConstructRef::LoadBalancerController(_)
        | ConstructRef::Network(_)
        | ConstructRef::KarpenterNodePool(_)
        | ConstructRef::VllmDeployment(_)
        | ConstructRef::InferenceEndpoint(_)
        | ConstructRef::Eks(_)
        | ConstructRef::InferenceOperator(_)
        | ConstructRef::Karpenter(_)
        | ConstructRef::HyperPod(_) => {}
        ConstructRef::NodeGroup(c) => node_group(cx, stage, id, c),
    }
}

pub(super) fn name_tag(value: String) -> Value {
    json!({ "Name": value })
}

/// `arn:<partition>:iam::aws:policy/<name>`.
pub(super) fn managed_policy(cx: Cx, name: &str) -> Value {
    cx.text(
        &Text::lit("arn:")
            .push_pseudo(Pseudo::Partition)
            .push_lit(format!(":iam::aws:policy/{name}")),
    )
}

/// An IAM role and its policies: `aws_iam_role` with the trust policy, one
/// `aws_iam_role_policy` per inline policy and one `aws_iam_role_policy_attachment` per
/// managed policy (the role's own `inline_policy`/`managed_policy_arns` arguments are
/// deprecated in hashicorp/aws 6).
struct RoleSpec<'a> {
    path: String,
    description: String,
    trust: PolicyDocument,
    managed: &'a [&'a str],
    inline: Vec<(&'a str, PolicyDocument)>,
    name: Option<String>,
}

/// Returns the role and the addresses of its policies (for `depends_on`).
fn role(cx: Cx, spec: RoleSpec) -> (Addr, Vec<String>) {
    let base = snake(&logical_id(&spec.path));
    let trust = cx.policy(&format!("{base}_trust"), &spec.trust);
    let mut body = Map::new();
    if let Some(name) = &spec.name {
        body.insert("name".into(), json!(name));
    }
    body.insert("description".into(), json!(spec.description));
    body.insert("assume_role_policy".into(), trust);
    let role = cx.add("aws_iam_role", &spec.path, Value::Object(body));
    let mut policies = Vec::new();
    for (name, doc) in &spec.inline {
        let local = format!("{base}_{}", snake(name));
        let policy = cx.policy(&local, doc);
        let p = cx.add_named(
            "aws_iam_role_policy",
            local,
            &spec.path,
            json!({"name": name, "role": role.interp("name"), "policy": policy}),
        );
        policies.push(p.address());
    }
    for m in spec.managed {
        let arn = managed_policy(cx, m);
        let a = cx.add_named(
            "aws_iam_role_policy_attachment",
            format!("{base}_{}", snake(m)),
            &spec.path,
            json!({"role": role.interp("name"), "policy_arn": arn}),
        );
        policies.push(a.address());
    }
    (role, policies)
}

/// A bucket as CloudFormation's `bucket` builds it: KMS-encrypted, versioned, owner-enforced,
/// public access blocked, TLS-only policy.
pub(super) fn bucket(cx: Cx, path: &str) -> Addr {
    let b = cx.add("aws_s3_bucket", path, json!({}));
    let base = b.name.clone();
    cx.add_named(
        "aws_s3_bucket_server_side_encryption_configuration",
        format!("{base}_encryption"),
        path,
        json!({
            "bucket": b.interp("id"),
            "rule": [{
                "apply_server_side_encryption_by_default": {"sse_algorithm": "aws:kms"},
                "bucket_key_enabled": true,
            }],
        }),
    );
    let block = cx.add_named(
        "aws_s3_bucket_public_access_block",
        format!("{base}_public_access_block"),
        path,
        json!({
            "bucket": b.interp("id"),
            "block_public_acls": true,
            "block_public_policy": true,
            "ignore_public_acls": true,
            "restrict_public_buckets": true,
        }),
    );
    cx.add_named(
        "aws_s3_bucket_versioning",
        format!("{base}_versioning"),
        path,
        json!({"bucket": b.interp("id"), "versioning_configuration": {"status": "Enabled"}}),
    );
    cx.add_named(
        "aws_s3_bucket_ownership_controls",
        format!("{base}_ownership_controls"),
        path,
        json!({"bucket": b.interp("id"), "rule": {"object_ownership": "BucketOwnerEnforced"}}),
    );
    let bucket_ref: Ref<kind::Bucket> = Ref::new(cx.stack.name(), path);
    let doc = PolicyDocument::new().statement(deny_insecure_transport(bucket_ref.arn()));
    let policy_path = format!("{path}Policy");
    let policy = cx.policy(&snake(&logical_id(&policy_path)), &doc);
    let p = cx.add(
        "aws_s3_bucket_policy",
        &policy_path,
        json!({"bucket": b.interp("id"), "policy": policy}),
    );
    // S3 rejects a policy while the public access block is being changed.
    cx.depends_on(&p, &[block.address()]);
    b
}

/// The upload stage: one `aws_s3_object` per file, read from the stage's artifact next to the
/// root module, so the scripts exist once in the assembly.
pub(crate) fn upload(cx: Cx, stage: StageId, dir: &str, u: &Upload) {
    let bucket_name = cx.expr(&u.bucket.name());
    let bucket_base = snake(&logical_id(u.bucket.path()));
    for file in &u.files {
        let rel = format!("../{dir}/{}", file.name);
        let source = format!("${{path.module}}/{}", escape_template(&rel));
        let hash = format!(
            "${{filemd5(\"${{path.module}}/{}\")}}",
            hcl_string_body(&rel)
        );
        let object = cx.add_named(
            "aws_s3_object",
            format!("{bucket_base}_{}", snake(&file.name)),
            &format!("{}/{}", u.bucket.path(), file.name),
            json!({
                "bucket": format!("${{{bucket_name}}}"),
                "key": escape_template(&format!("{}{}", u.prefix, file.name)),
                "source": source,
                "source_hash": hash,
            }),
        );
        // Objects are written once the bucket encrypts by default.
        cx.depends_on(
            &object,
            &[format!(
                "aws_s3_bucket_server_side_encryption_configuration.{bucket_base}_encryption"
            )],
        );
        cx.record_stage(stage, &object);
    }
}

/// The Helm stage: a `helm_release`. A chart from a repository is pinned by version; a chart in
/// a git repository (which the Helm provider cannot clone) is a local path given as a variable.
pub(crate) fn helm(cx: Cx, stage: StageId, name: &str, values_file: &str, r: &HelmRelease) {
    let mut body = Map::new();
    body.insert("name".into(), json!(r.release));
    body.insert("namespace".into(), json!(r.namespace));
    match &r.chart {
        ChartSource::Repository {
            repo,
            chart,
            version,
        } => {
            body.insert("repository".into(), json!(repo));
            body.insert("chart".into(), json!(chart));
            body.insert("version".into(), json!(version));
        }
        ChartSource::Git { url, commit, path } => {
            let var = cx.variable(
                &format!("{}_chart_path", snake(&r.release)),
                Variable {
                    description: format!(
                        "Local path of the {} chart: a checkout of {url} at commit {commit}, directory {path} (git clone, git checkout {commit}).",
                        r.release
                    ),
                    default: None,
                    pattern: None,
                    error_message: String::new(),
                },
            );
            body.insert("chart".into(), var);
            body.insert("dependency_update".into(), json!(true));
        }
    }
    body.insert(
        "values".into(),
        json!([format!(
            "${{file(\"${{path.module}}/../{}\")}}",
            hcl_string_body(values_file)
        )]),
    );
    for (_, attr) in &r.set_from_outputs {
        // The same output CloudFormation gives the value (`network_vpc_id`).
        let key = snake(&format!("{}{}", logical_id(&attr.path), attr.attr.as_str()));
        let value = cx.attr(attr);
        cx.output(
            &key,
            &format!("{} of {}, for a later stage", attr.attr.as_str(), attr.path),
            value,
        );
    }
    if !r.set_from_outputs.is_empty() {
        let sets: Vec<Value> = r
            .set_from_outputs
            .iter()
            .map(|(key, attr)| json!({"name": key, "value": cx.attr(attr)}))
            .collect();
        body.insert("set".into(), Value::Array(sets));
    }
    // The chart's pods may run on nodes created later (HyperPod's): installing must not wait.
    body.insert("wait".into(), json!(false));
    let release = cx.add_named("helm_release", snake(name), name, Value::Object(body));
    let mut after = cx.earlier_stages(stage);
    if let Some(cluster) = eks_cluster_of(cx) {
        after.push(cluster.address());
    }
    after.sort();
    after.dedup();
    cx.depends_on(&release, &after);
    cx.record_stage(stage, &release);
}

/// The stack's EKS cluster (the first `EksCluster` construct), for the Helm provider.
pub(crate) fn eks_cluster_of(cx: &RootModule) -> Option<Addr> {
    cx.stack.nodes().iter().find_map(|n| {
        n.construct.as_any().downcast_ref::<EksCluster>()?;
        Some(Addr {
            ty: "aws_eks_cluster",
            name: snake(&logical_id(&format!("{}/Cluster", n.id))),
        })
    })
}

fn node_group(cx: Cx, stage: StageId, id: &str, g: &crate::constructs::ManagedNodeGroup) {
    use crate::constructs::NodeCapacity;
    let p = |child: &str| format!("{id}/{child}");
    let (role, role_policies) = role(
        cx,
        RoleSpec {
            path: p("NodeRole"),
            description: format!("Nodes of EKS node group {id}"),
            trust: service_trust("ec2.amazonaws.com"),
            managed: &[
                "AmazonEKSWorkerNodePolicy",
                "AmazonEC2ContainerRegistryReadOnly",
                "AmazonEKS_CNI_Policy",
                "AmazonSSMManagedInstanceCore",
            ],
            inline: Vec::new(),
            name: None,
        },
    );
    let mut groups: Vec<Value> = g
        .security_group_refs()
        .iter()
        .map(|r| cx.attr(&r.id()))
        .collect();
    if !groups.is_empty() {
        groups.push(cx.attr(&g.cluster().cluster_security_group_id()));
    }
    let layout = g.efa_layout();
    let with_interfaces = g.efa_enabled() && layout.len() > 1;
    let stack_name = cx.stack.name().to_owned();
    let tags = json!({"Name": format!("{stack_name}-{}", id.to_ascii_lowercase()), "hyperforge:stack": stack_name});
    let mut data = Map::new();
    data.insert("instance_type".into(), json!(g.instance_type()));
    data.insert(
        "metadata_options".into(),
        json!({"http_endpoint": "enabled", "http_tokens": "required", "http_put_response_hop_limit": 1}),
    );
    data.insert(
        "block_device_mappings".into(),
        json!([{
            "device_name": "/dev/xvda",
            "ebs": {"volume_size": g.root_volume(), "volume_type": "gp3", "encrypted": "true", "delete_on_termination": "true"},
        }]),
    );
    if let NodeCapacity::CapacityBlock(block) = g.capacity_source() {
        let reservation = match &block.purchase {
            // Bought here: charged in full at purchase, never refunded; `terraform destroy`
            // only removes it from state (validation demands the explicit acknowledgement).
            Some(purchase) => {
                let r = cx.add(
                    "aws_ec2_capacity_block_reservation",
                    &p("CapacityBlock"),
                    json!({
                        "capacity_block_offering_id": escape_template(&purchase.offering_id),
                        "instance_platform": "Linux/UNIX",
                        "tags": {"Name": format!("{stack_name}-{}", id.to_ascii_lowercase())},
                    }),
                );
                json!(r.interp("id"))
            }
            None => cx.variable(
            &snake(&format!("{}CapacityReservationId", logical_id(id))),
            Variable {
                description: format!("Capacity Block reservation feeding node group {id} (aws ec2 describe-capacity-reservations)."),
                default: Some(block.reservation_id.clone()),
                pattern: Some(crate::constructs::nodes::RESERVATION_ID_PATTERN.to_owned()),
                error_message: "Must be a capacity reservation id such as cr-0123456789abcdef0.".to_owned(),
            },
            ),
        };
        data.insert(
            "instance_market_options".into(),
            json!({"market_type": "capacity-block"}),
        );
        data.insert(
            "capacity_reservation_specification".into(),
            json!({"capacity_reservation_target": {"capacity_reservation_id": reservation}}),
        );
    }
    if with_interfaces {
        let interfaces: Vec<Value> = layout
            .iter()
            .map(|(card, device, kind)| {
                json!({
                    "network_card_index": card,
                    "device_index": device,
                    "interface_type": kind,
                    "security_groups": groups,
                    "delete_on_termination": "true",
                })
            })
            .collect();
        data.insert("network_interfaces".into(), Value::Array(interfaces));
    } else if !groups.is_empty() {
        data.insert("vpc_security_group_ids".into(), json!(groups));
    }
    if g.local_nvme_raid0() {
        data.insert(
            "user_data".into(),
            json!(format!(
                "${{base64encode({})}}",
                super::module::hcl_string(crate::constructs::nodes::RAID0_NODE_CONFIG)
            )),
        );
    }
    data.insert(
        "tag_specifications".into(),
        json!([{"resource_type": "instance", "tags": tags}, {"resource_type": "volume", "tags": tags}]),
    );
    let template = cx.add(
        "aws_launch_template",
        &p("LaunchTemplate"),
        Value::Object(data),
    );
    let (min, desired, max) = g.sizes();
    let subnets: Vec<Value> = g.subnet_refs().iter().map(|r| cx.attr(&r.id())).collect();
    let mut body = Map::new();
    body.insert("cluster_name".into(), cx.attr(&g.cluster().name()));
    body.insert("node_role_arn".into(), json!(role.interp("arn")));
    body.insert("subnet_ids".into(), json!(subnets));
    body.insert("ami_type".into(), json!(g.ami().as_str()));
    body.insert(
        "capacity_type".into(),
        json!(match g.capacity_source() {
            NodeCapacity::OnDemand => "ON_DEMAND",
            NodeCapacity::CapacityBlock(_) => "CAPACITY_BLOCK",
        }),
    );
    body.insert(
        "launch_template".into(),
        json!({"id": template.interp("id"), "version": template.interp("latest_version")}),
    );
    body.insert(
        "scaling_config".into(),
        json!({"min_size": min, "desired_size": desired, "max_size": max}),
    );
    if !g.labels().is_empty() {
        body.insert("labels".into(), json!(g.labels()));
    }
    if !g.taints().is_empty() {
        let taints: Vec<Value> = g
            .taints()
            .iter()
            .map(|t| json!({"key": t.key, "value": t.value, "effect": "NO_SCHEDULE"}))
            .collect();
        body.insert("taint".into(), Value::Array(taints));
    }
    let group = cx.add("aws_eks_node_group", &p("NodeGroup"), Value::Object(body));
    // Nodes need their policies to join; the group must be deleted before them.
    cx.depends_on(&group, &role_policies);
    cx.record_stage(stage, &group);
}
