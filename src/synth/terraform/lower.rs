//! Lowering of each construct (and of the upload and Helm stages) to Terraform resources,
//! mirroring `synth/cloudformation/lower.rs` construct by construct. Where Terraform models a
//! part of a CloudFormation resource as a resource of its own (a bucket's encryption, a role's
//! inline policy, a security group's inline egress rule), that resource is named after its
//! owner (`lifecycle_bucket_encryption`).

use super::module::{escape_template, hcl_string_body, snake, Addr, RootModule, Variable};
use crate::app::{kind, logical_id, Ref, StageId};
use crate::constructs::hyperpod::Capacity;
use crate::constructs::iam::load_balancer_controller_policy;
use crate::constructs::iam::{
    deny_insecure_transport, irsa_trust_statement, service_trust, PolicyDocument, PrincipalKind,
    Statement,
};
use crate::constructs::inference_operator::OPERATOR_NAMESPACE;
use crate::constructs::network::NatGateways;
use crate::constructs::text::{Pseudo, Text};
use crate::constructs::{
    ChartSource, ConstructRef, EksCluster, EndpointAccess, HelmRelease, HyperPodCluster,
    InferenceOperator, Network, Upload,
};
use serde_json::{json, Map, Value};

type Cx<'a, 'b> = &'a mut RootModule<'b>;

/// Lowers one construct placed in a CloudFormation stage.
pub(crate) fn lower(cx: Cx, stage: StageId, id: &str, construct: ConstructRef<'_>) {
    match construct {
        // Expanded into the resource layer (`crate::resources`) and lowered from there.
        ConstructRef::SecurityGroup(_)
        | ConstructRef::Lifecycle(_)
        | ConstructRef::LoadBalancerController(_)
        | ConstructRef::FsxLustre(_) => {}
        ConstructRef::Network(c) => network(cx, id, c),
        ConstructRef::Eks(c) => eks(cx, id, c),
        ConstructRef::HyperPod(c) => hyperpod(cx, stage, id, c),
        ConstructRef::InferenceOperator(c) => inference_operator(cx, id, c),
        ConstructRef::NodeGroup(c) => node_group(cx, stage, id, c),
        ConstructRef::Karpenter(c) => karpenter(cx, stage, id, c),
        // Workloads and node pools are Kubernetes objects, applied with kubectl after
        // `terraform apply`.
        ConstructRef::InferenceEndpoint(_)
        | ConstructRef::VllmDeployment(_)
        | ConstructRef::KarpenterNodePool(_) => {}
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

fn network(cx: Cx, id: &str, n: &Network) {
    let Some(plan) = n.plan() else { return };
    let p = |child: &str| format!("{id}/{child}");
    let stack_name = cx.stack.name().to_owned();
    let vpc = cx.add(
        "aws_vpc",
        &p("Vpc"),
        json!({
            "cidr_block": plan.vpc_cidr.to_string(),
            "enable_dns_hostnames": true,
            "enable_dns_support": true,
            "tags": name_tag(format!("{stack_name}-vpc")),
        }),
    );
    // Terraform can adopt the VPC's default security group (CloudFormation cannot): with no
    // rules given, it removes the default group's allow-within-group rules, so nothing that
    // lands in it by mistake can talk.
    cx.add(
        "aws_default_security_group",
        &p("DefaultSecurityGroup"),
        json!({"vpc_id": vpc.interp("id"), "tags": name_tag(format!("{stack_name}-default-no-traffic"))}),
    );
    // CloudFormation's VPCGatewayAttachment is the gateway's `vpc_id` here.
    let igw = cx.add(
        "aws_internet_gateway",
        &p("InternetGateway"),
        json!({"vpc_id": vpc.interp("id"), "tags": name_tag(format!("{stack_name}-igw"))}),
    );
    let public_rt = cx.add(
        "aws_route_table",
        &p("PublicRouteTable"),
        json!({"vpc_id": vpc.interp("id"), "tags": name_tag(format!("{stack_name}-public"))}),
    );
    cx.add(
        "aws_route",
        &p("PublicDefaultRoute"),
        json!({
            "route_table_id": public_rt.interp("id"),
            "destination_cidr_block": "0.0.0.0/0",
            "gateway_id": igw.interp("id"),
        }),
    );
    cx.data_source("aws_availability_zones", json!({"state": "available"}));
    let az = |i: u32| format!("${{data.aws_availability_zones.current.names[{i}]}}");
    let mut nats = Vec::new();
    for sp in &plan.public_subnets {
        let subnet = cx.add(
            "aws_subnet",
            &p(&sp.id),
            json!({
                "vpc_id": vpc.interp("id"),
                "cidr_block": sp.cidr.to_string(),
                "availability_zone": az(sp.az_index),
                "map_public_ip_on_launch": false,
                "tags": {
                    "Name": format!("{stack_name}-public-{}", sp.az_index + 1),
                    "kubernetes.io/role/elb": "1",
                },
            }),
        );
        cx.add(
            "aws_route_table_association",
            &p(&format!("{}RouteTableAssociation", sp.id)),
            json!({"route_table_id": public_rt.interp("id"), "subnet_id": subnet.interp("id")}),
        );
        let wants_nat = match plan.nat_gateways {
            NatGateways::One => sp.az_index == 0,
            NatGateways::PerAz => true,
        };
        if wants_nat {
            let n = sp.az_index + 1;
            let eip = cx.add(
                "aws_eip",
                &p(&format!("NatEip{n}")),
                json!({"domain": "vpc", "tags": name_tag(format!("{stack_name}-nat-{n}"))}),
            );
            cx.depends_on(&eip, &[igw.address()]);
            let nat = cx.add(
                "aws_nat_gateway",
                &p(&format!("NatGateway{n}")),
                json!({
                    "allocation_id": eip.interp("id"),
                    "subnet_id": subnet.interp("id"),
                    "tags": name_tag(format!("{stack_name}-nat-{n}")),
                }),
            );
            cx.depends_on(&nat, &[igw.address()]);
            nats.push(nat);
        }
    }
    let nat_for = |az_index: u32| -> Option<Addr> {
        let i = (az_index as usize).min(nats.len().saturating_sub(1));
        nats.get(i).cloned()
    };
    let mut private_route_tables = Vec::new();
    let mut private_route = |cx: Cx, name: &str, tag: String, subnet: &Addr, nat: Option<Addr>| {
        let rt = cx.add(
            "aws_route_table",
            &p(&format!("{name}RouteTable")),
            json!({"vpc_id": vpc.interp("id"), "tags": name_tag(tag)}),
        );
        cx.add(
            "aws_route",
            &p(&format!("{name}DefaultRoute")),
            json!({
                "route_table_id": rt.interp("id"),
                "destination_cidr_block": "0.0.0.0/0",
                "nat_gateway_id": nat.map(|n| n.interp("id")),
            }),
        );
        cx.add(
            "aws_route_table_association",
            &p(&format!("{name}RouteTableAssociation")),
            json!({"route_table_id": rt.interp("id"), "subnet_id": subnet.interp("id")}),
        );
        private_route_tables.push(rt);
    };
    for sp in &plan.private_subnets {
        let name = format!("{stack_name}-private-{}", sp.az_index + 1);
        let subnet = cx.add(
            "aws_subnet",
            &p(&sp.id),
            json!({
                "vpc_id": vpc.interp("id"),
                "cidr_block": sp.cidr.to_string(),
                "availability_zone": az(sp.az_index),
                "map_public_ip_on_launch": false,
                "tags": {"Name": name, "kubernetes.io/role/internal-elb": "1"},
            }),
        );
        private_route(cx, &sp.id, name, &subnet, nat_for(sp.az_index));
    }
    for (child, block, az_id) in &plan.zonal {
        let short = child.trim_end_matches("Subnet");
        let cidr = cx.add(
            "aws_vpc_ipv4_cidr_block_association",
            &p(&format!("{short}CidrBlock")),
            json!({"vpc_id": vpc.interp("id"), "cidr_block": block.to_string()}),
        );
        let var = snake(&format!("{}AzId", logical_id(&p(child))));
        let az_var = cx.variable(
            &var,
            Variable {
                description: crate::constructs::network::zone_input_description(child).to_owned(),
                default: Some(az_id.to_string()),
                pattern: Some(crate::constructs::network::AZ_ID_PATTERN.to_owned()),
                error_message: "Must be an Availability Zone id such as usw2-az2.".to_owned(),
            },
        );
        let name = format!("{stack_name}-{}", short.to_ascii_lowercase());
        let subnet = cx.add(
            "aws_subnet",
            &p(child),
            json!({
                "vpc_id": vpc.interp("id"),
                "cidr_block": block.to_string(),
                "availability_zone_id": az_var,
                "map_public_ip_on_launch": false,
                "tags": {
                    "Name": name,
                    "kubernetes.io/role/internal-elb": "1",
                    "hyperforge:subnet": short.to_ascii_lowercase(),
                },
            }),
        );
        cx.depends_on(&subnet, &[cidr.address()]);
        private_route(cx, child, name, &subnet, nat_for(0));
    }
    let service = cx.text(
        &Text::lit("com.amazonaws.")
            .push_pseudo(Pseudo::Region)
            .push_lit(".s3"),
    );
    cx.add(
        "aws_vpc_endpoint",
        &p("S3Endpoint"),
        json!({
            "vpc_id": vpc.interp("id"),
            "service_name": service,
            "vpc_endpoint_type": "Gateway",
            "route_table_ids": private_route_tables.iter().map(|rt| rt.interp("id")).collect::<Vec<_>>(),
        }),
    );
    flow_logs(cx, id, &vpc, plan.flow_log_retention_days);
}

fn kms_key(cx: Cx, path: &str, description: String, extra: Option<Statement>) -> Addr {
    let local = format!("{}_policy", snake(&logical_id(path)));
    let policy = cx.policy(&local, &crate::constructs::iam::account_key_policy(extra));
    cx.add(
        "aws_kms_key",
        path,
        json!({"description": description, "enable_key_rotation": true, "policy": policy}),
    )
}

fn flow_logs(cx: Cx, id: &str, vpc: &Addr, retention_days: u32) {
    let p = |child: &str| format!("{id}/{child}");
    let group_name = format!("/hyperforge/{}/vpc-flow-logs", cx.stack.name());
    let log_group_arn = Text::arn(
        "logs",
        true,
        true,
        Text::lit(format!("log-group:{group_name}")),
    );
    let logs_service = Text::lit("logs.")
        .push_pseudo(Pseudo::Region)
        .push_lit(".amazonaws.com");
    let key = kms_key(
        cx,
        &p("FlowLogKey"),
        format!("Encrypts the VPC flow logs of {}", cx.stack.name()),
        Some(
            Statement::allow([
                "kms:Encrypt*",
                "kms:Decrypt*",
                "kms:ReEncrypt*",
                "kms:GenerateDataKey*",
                "kms:Describe*",
            ])
            .sid("CloudWatchLogsUse")
            .principal(PrincipalKind::Service, logs_service)
            .resource("*")
            .condition(
                "ArnLike",
                "kms:EncryptionContext:aws:logs:arn",
                vec![log_group_arn.clone()],
            ),
        ),
    );
    let group = cx.add(
        "aws_cloudwatch_log_group",
        &p("FlowLogGroup"),
        json!({
            "name": escape_template(&group_name),
            "kms_key_id": key.interp("arn"),
            "retention_in_days": retention_days,
        }),
    );
    let (role, role_policies) = role(
        cx,
        RoleSpec {
            path: p("FlowLogRole"),
            description: "Lets VPC Flow Logs write to its log group".to_owned(),
            trust: service_trust("vpc-flow-logs.amazonaws.com"),
            managed: &[],
            inline: vec![(
                "write-flow-logs",
                PolicyDocument::new().statement(
                    Statement::allow([
                        "logs:CreateLogStream",
                        "logs:PutLogEvents",
                        "logs:DescribeLogStreams",
                    ])
                    .resource(log_group_arn.clone())
                    .resource(log_group_arn.push_lit(":*")),
                ),
            )],
            name: None,
        },
    );
    let flow_log = cx.add(
        "aws_flow_log",
        &p("FlowLog"),
        json!({
            "vpc_id": vpc.interp("id"),
            "traffic_type": "ALL",
            "log_destination_type": "cloud-watch-logs",
            "log_destination": group.interp("arn"),
            "iam_role_arn": role.interp("arn"),
        }),
    );
    // Delivery starts at once; the role must already hold its policy.
    cx.depends_on(&flow_log, &role_policies);
}

const EKS_LOG_TYPES: &[&str] = &[
    "api",
    "audit",
    "authenticator",
    "controllerManager",
    "scheduler",
];

/// EKS add-ons whose pods are a Deployment: they stay DEGRADED, and `aws_eks_addon` waits for
/// ACTIVE, until some node runs them, so they wait for the HyperPod cluster's nodes.
const ADDONS_NEEDING_NODES: &[&str] = &["coredns"];

fn eks(cx: Cx, id: &str, c: &EksCluster) {
    let p = |child: &str| format!("{id}/{child}");
    let (role, role_policies) = role(
        cx,
        RoleSpec {
            path: p("ClusterRole"),
            description: format!("EKS control plane role of {}", c.name()),
            trust: service_trust("eks.amazonaws.com"),
            managed: &["AmazonEKSClusterPolicy"],
            inline: Vec::new(),
            name: None,
        },
    );
    let key = kms_key(
        cx,
        &p("SecretsKey"),
        format!(
            "Envelope encryption of Kubernetes secrets in EKS cluster {}",
            c.name()
        ),
        None,
    );
    let subnets: Vec<Value> = c.subnet_refs().iter().map(|r| cx.attr(&r.id())).collect();
    let groups: Vec<Value> = c
        .security_group_refs()
        .iter()
        .map(|r| cx.attr(&r.id()))
        .collect();
    let mut vpc_config = Map::new();
    vpc_config.insert("subnet_ids".into(), json!(subnets));
    if !groups.is_empty() {
        vpc_config.insert("security_group_ids".into(), json!(groups));
    }
    vpc_config.insert("endpoint_private_access".into(), json!(true));
    match c.endpoint() {
        EndpointAccess::Private => {
            vpc_config.insert("endpoint_public_access".into(), json!(false));
        }
        EndpointAccess::PublicAndPrivate { public_cidrs } => {
            vpc_config.insert("endpoint_public_access".into(), json!(true));
            vpc_config.insert("public_access_cidrs".into(), json!(public_cidrs));
        }
    }
    let cluster = cx.add(
        "aws_eks_cluster",
        &p("Cluster"),
        json!({
            "name": c.name(),
            "version": c.kubernetes_version(),
            "role_arn": role.interp("arn"),
            "vpc_config": vpc_config,
            "access_config": {
                "authentication_mode": "API_AND_CONFIG_MAP",
                "bootstrap_cluster_creator_admin_permissions": true,
            },
            "enabled_cluster_log_types": EKS_LOG_TYPES,
            "encryption_config": {
                "provider": {"key_arn": key.interp("arn")},
                "resources": ["secrets"],
            },
        }),
    );
    // The control plane needs its policy while it is created and deleted.
    cx.depends_on(&cluster, &role_policies);
    cx.add(
        "aws_iam_openid_connect_provider",
        &p("OidcProvider"),
        json!({
            "url": cluster.interp("identity[0].oidc[0].issuer"),
            "client_id_list": ["sts.amazonaws.com"],
        }),
    );
    for addon in c.addons() {
        let mut body = Map::new();
        body.insert("cluster_name".into(), json!(cluster.interp("name")));
        body.insert("addon_name".into(), json!(addon.name));
        if let Some(v) = &addon.version {
            body.insert("addon_version".into(), json!(v));
        }
        body.insert("resolve_conflicts_on_create".into(), json!("OVERWRITE"));
        body.insert("resolve_conflicts_on_update".into(), json!("OVERWRITE"));
        cx.add(
            "aws_eks_addon",
            &p(&format!("{}Addon", crate::app::pascal_id(&addon.name))),
            Value::Object(body),
        );
    }
    for (i, entry) in c.access_entries().iter().enumerate() {
        let path = p(&format!("AccessEntry{}", i + 1));
        let e = cx.add(
            "aws_eks_access_entry",
            &path,
            json!({"cluster_name": cluster.interp("name"), "principal_arn": escape_template(&entry.principal_arn)}),
        );
        let policy_arn = cx.text(&Text::lit("arn:").push_pseudo(Pseudo::Partition).push_lit(
            format!(
                ":eks::aws:cluster-access-policy/{}",
                entry.policy.policy_name()
            ),
        ));
        cx.add_named(
            "aws_eks_access_policy_association",
            format!("{}_policy", e.name),
            &path,
            json!({
                "cluster_name": cluster.interp("name"),
                "principal_arn": e.interp("principal_arn"),
                "policy_arn": policy_arn,
                "access_scope": {"type": "cluster"},
            }),
        );
    }
    cx.output(
        &snake(&format!("{}Name", logical_id(&p("Cluster")))),
        "EKS cluster name (aws eks update-kubeconfig --name)",
        json!(cluster.interp("name")),
    );
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

fn hyperpod(cx: Cx, stage: StageId, id: &str, h: &HyperPodCluster) {
    let p = |child: &str| format!("{id}/{child}");
    let lifecycle_bucket = &h.lifecycle().bucket;
    let policy = h.execution_role_policy();
    let (role, role_policies) = role(
        cx,
        RoleSpec {
            path: p("ExecutionRole"),
            description: format!("Instance role of HyperPod cluster {}", h.name()),
            trust: service_trust("sagemaker.amazonaws.com"),
            managed: &[
                "AmazonSageMakerClusterInstanceRolePolicy",
                "AmazonEKS_CNI_Policy",
            ],
            inline: vec![("hyperpod-nodes", policy)],
            name: None,
        },
    );
    let source_uri = cx.text(
        &Text::lit("s3://")
            .push_ref(lifecycle_bucket.name())
            .push_lit(format!("/{}", h.lifecycle().prefix)),
    );
    let mut groups = Vec::new();
    for g in h.groups() {
        let mut group = Map::new();
        group.insert("instance_group_name".into(), json!(g.name()));
        group.insert("instance_type".into(), json!(g.ml_instance_type()));
        group.insert("instance_count".into(), json!(g.instance_count()));
        group.insert("threads_per_core".into(), json!(g.threads()));
        group.insert("execution_role".into(), json!(role.interp("arn")));
        group.insert(
            "instance_storage_configs".into(),
            json!([{"ebs_volume_config": {"volume_size_in_gb": g.volume_gb()}}]),
        );
        group.insert(
            "life_cycle_config".into(),
            json!({"on_create": escape_template(&h.lifecycle().on_create), "source_s3_uri": source_uri}),
        );
        if !g.health_checks().is_empty() {
            group.insert(
                "on_start_deep_health_checks".into(),
                json!(g
                    .health_checks()
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()),
            );
        }
        if let Capacity::TrainingPlan(plan) = g.capacity_source() {
            let name = snake(&format!(
                "{}{}TrainingPlanArn",
                logical_id(id),
                crate::app::pascal_id(g.name())
            ));
            let var = cx.variable(
                &name,
                Variable {
                    description: format!(
                        "ARN of the training plan feeding instance group {}",
                        g.name()
                    ),
                    default: Some(plan.arn.clone()),
                    pattern: Some(
                        crate::constructs::hyperpod::TRAINING_PLAN_ARN_PATTERN.to_owned(),
                    ),
                    error_message: "Must be a SageMaker training plan ARN.".to_owned(),
                },
            );
            group.insert("training_plan_arn".into(), var);
        }
        if !g.labels().is_empty() || !g.taints().is_empty() {
            let mut k8s = Map::new();
            if !g.labels().is_empty() {
                let labels: Map<String, Value> = g
                    .labels()
                    .iter()
                    .map(|(k, v)| (escape_template(k), json!(escape_template(v))))
                    .collect();
                k8s.insert("labels".into(), Value::Object(labels));
            }
            if !g.taints().is_empty() {
                let taints: Vec<Value> = g
                    .taints()
                    .iter()
                    .map(|t| {
                        let mut m = Map::new();
                        m.insert("key".into(), json!(escape_template(&t.key)));
                        if !t.value.is_empty() {
                            m.insert("value".into(), json!(escape_template(&t.value)));
                        }
                        m.insert("effect".into(), json!(t.effect.as_str()));
                        Value::Object(m)
                    })
                    .collect();
                k8s.insert("taints".into(), json!(taints));
            }
            group.insert("kubernetes_config".into(), Value::Object(k8s));
        }
        groups.push(Value::Object(group));
    }
    let subnets: Vec<Value> = h.subnet_refs().iter().map(|r| cx.attr(&r.id())).collect();
    let sgs: Vec<Value> = h
        .security_group_refs()
        .iter()
        .map(|r| cx.attr(&r.id()))
        .collect();
    // awscc has no provider-level default tags.
    let tags: Vec<Value> = cx
        .tags()
        .iter()
        .map(|(k, v)| json!({"key": escape_template(k), "value": escape_template(v)}))
        .collect();
    let cluster = cx.add(
        "awscc_sagemaker_cluster",
        &p("Cluster"),
        json!({
            "cluster_name": h.name(),
            "orchestrator": {"eks": {"cluster_arn": cx.attr(&h.eks().arn())}},
            "vpc_config": {"security_group_ids": sgs, "subnets": subnets},
            "node_recovery": h.recovery().as_str(),
            "instance_groups": groups,
            "tags": tags,
        }),
    );
    // CreateCluster needs the uploaded lifecycle scripts and the Helm chart (the earlier
    // stages), and a role that already holds its policies.
    let mut waits = cx.earlier_stages(stage);
    waits.extend(role_policies);
    cx.depends_on(&cluster, &waits);
    let eks_id = h
        .eks()
        .path()
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    for addon in ADDONS_NEEDING_NODES {
        let addon = Addr {
            ty: "aws_eks_addon",
            name: snake(&logical_id(&format!(
                "{eks_id}/{}Addon",
                crate::app::pascal_id(addon)
            ))),
        };
        cx.depends_on(&addon, &[cluster.address()]);
    }
    cx.output(
        &snake(&format!("{}Arn", logical_id(&p("Cluster")))),
        "HyperPod cluster ARN",
        json!(cluster.interp("cluster_arn")),
    );
}

/// A role assumed by a Kubernetes service account through the cluster's OIDC provider.
struct IrsaRole<'a> {
    path: String,
    subject: &'a str,
    description: &'a str,
    managed: &'a [&'a str],
    inline: Option<(&'a str, PolicyDocument)>,
    role_name: Option<String>,
}

fn irsa_role(cx: Cx, op: &InferenceOperator, r: IrsaRole) -> Addr {
    let mut trust = PolicyDocument::new().statement(irsa_trust_statement(
        op.eks().oidc_provider.arn(),
        op.eks().cluster.oidc_issuer_url(),
        r.subject,
    ));
    if r.role_name.is_some() {
        trust = trust.statement(
            Statement::allow(["sts:AssumeRole"])
                .principal(PrincipalKind::Service, "sagemaker.amazonaws.com"),
        );
    }
    role(
        cx,
        RoleSpec {
            path: r.path,
            description: r.description.to_owned(),
            trust,
            managed: r.managed,
            inline: r.inline.into_iter().collect(),
            name: r.role_name,
        },
    )
    .0
}

fn inference_operator(cx: Cx, id: &str, op: &InferenceOperator) {
    let p = |child: &str| format!("{id}/{child}");
    let tls_path = p("TlsBucket");
    let tls_bucket = bucket(cx, &tls_path);
    let tls: Ref<kind::Bucket> = Ref::new(cx.stack.name(), tls_path.as_str());
    let ns = OPERATOR_NAMESPACE;
    let region = cx.stack.region().to_owned();
    let exec = irsa_role(
        cx,
        op,
        IrsaRole {
            path: p("ExecutionRole"),
            subject: &format!("system:serviceaccount:{ns}:hyperpod-inference-controller-manager"),
            description: "Execution role of the HyperPod inference operator",
            managed: &["AmazonSageMakerHyperPodInferenceAccess"],
            inline: Some((
                "tls-certificates",
                crate::constructs::inference_operator::tls_certificates_policy(&tls),
            )),
            role_name: Some(op.execution_role_name(&region)),
        },
    );
    let keda = irsa_role(
        cx,
        op,
        IrsaRole {
            path: p("KedaRole"),
            subject: &format!("system:serviceaccount:{ns}:keda-operator"),
            description: "Lets KEDA read the metrics that scale inference endpoints",
            managed: &[],
            inline: Some((
                "read-metrics",
                crate::constructs::inference_operator::keda_metrics_policy(),
            )),
            role_name: None,
        },
    );
    let gated = irsa_role(
        cx,
        op,
        IrsaRole {
            path: p("GatedModelRole"),
            subject: "system:serviceaccount:*:hyperpod-inference-service-account*",
            description: "Lets endpoint pods download gated JumpStart models",
            managed: &["AmazonSageMakerHyperPodGatedModelAccess"],
            inline: None,
            role_name: None,
        },
    );
    let alb = irsa_role(
        cx,
        op,
        IrsaRole {
            path: p("LoadBalancerControllerRole"),
            subject: &format!("system:serviceaccount:{ns}:aws-load-balancer-controller"),
            description: "AWS Load Balancer Controller of the inference operator",
            managed: &[],
            inline: Some((
                "load-balancer-controller",
                load_balancer_controller_policy(),
            )),
            role_name: None,
        },
    );
    let s3_policy = op.model_buckets_policy().map(|doc| ("read-models", doc));
    let s3csi = irsa_role(
        cx,
        op,
        IrsaRole {
            path: p("S3CsiDriverRole"),
            subject: "system:serviceaccount:kube-system:s3-csi-driver-sa",
            description:
                "Mountpoint for Amazon S3 CSI driver: mounts model buckets into endpoint pods",
            managed: &[],
            inline: s3_policy,
            role_name: None,
        },
    );
    let cluster_name = cx.attr(&op.eks().cluster.name());
    // The add-ons' pods need the HyperPod cluster's nodes (see ADDONS_NEEDING_NODES).
    let hyperpod = Addr {
        ty: "awscc_sagemaker_cluster",
        name: snake(&logical_id(op.hyperpod().cluster.path())),
    };
    let addon = |name: &str| {
        let mut m = Map::new();
        m.insert("cluster_name".into(), cluster_name.clone());
        m.insert("addon_name".into(), json!(name));
        m.insert("resolve_conflicts_on_create".into(), json!("OVERWRITE"));
        m.insert("resolve_conflicts_on_update".into(), json!("OVERWRITE"));
        m
    };
    let cert_manager = cx.add(
        "aws_eks_addon",
        &p("CertManagerAddon"),
        Value::Object(addon("cert-manager")),
    );
    let metrics = cx.add(
        "aws_eks_addon",
        &p("MetricsServerAddon"),
        Value::Object(addon("metrics-server")),
    );
    let mut s3csi_body = addon("aws-mountpoint-s3-csi-driver");
    s3csi_body.insert(
        "service_account_role_arn".into(),
        json!(s3csi.interp("arn")),
    );
    let s3csi_addon = cx.add(
        "aws_eks_addon",
        &p("S3CsiDriverAddon"),
        Value::Object(s3csi_body),
    );
    for a in [&cert_manager, &metrics, &s3csi_addon] {
        cx.depends_on(a, &[hyperpod.address()]);
    }
    // The add-on's configuration: an object of references, encoded when applied.
    let config_local = format!("{}_configuration", snake(&logical_id(&p("Addon"))));
    let config = json!({
        "executionRoleArn": exec.interp("arn"),
        "tlsCertificateS3Bucket": tls_bucket.interp("bucket"),
        "hyperpodClusterArn": cx.attr(&op.hyperpod().cluster.arn()),
        "jumpstartGatedModelDownloadRoleArn": gated.interp("arn"),
        "alb": {"enabled": true, "serviceAccount": {"create": true, "roleArn": alb.interp("arn")}},
        "keda": {"enabled": true, "auth": {"aws": {"irsa": {"enabled": true, "roleArn": keda.interp("arn")}}}},
    });
    let config = cx.local(&config_local, config);
    let mut main = addon("amazon-sagemaker-hyperpod-inference");
    main.insert("configuration_values".into(), config);
    let main = cx.add("aws_eks_addon", &p("Addon"), Value::Object(main));
    cx.depends_on(
        &main,
        &[
            cert_manager.address(),
            metrics.address(),
            s3csi_addon.address(),
        ],
    );
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

/// A role that EKS Pod Identity hands to one service account.
struct PodIdentityRole<'a> {
    path: String,
    description: &'a str,
    cluster: &'a Ref<kind::EksCluster>,
    namespace: &'a str,
    service_account: &'a str,
    policy: (&'a str, PolicyDocument),
}

/// The role and its Pod Identity association.
fn pod_identity_role(cx: Cx, stage: StageId, spec: PodIdentityRole) -> Addr {
    let PodIdentityRole {
        path,
        description,
        cluster,
        namespace,
        service_account,
        policy,
    } = spec;
    let (role, policies) = role(
        cx,
        RoleSpec {
            path: path.clone(),
            description: description.to_owned(),
            trust: PolicyDocument::new().statement(
                Statement::allow(["sts:AssumeRole", "sts:TagSession"])
                    .principal(PrincipalKind::Service, "pods.eks.amazonaws.com"),
            ),
            managed: &[],
            inline: vec![policy],
            name: None,
        },
    );
    let parent = path
        .rsplit_once('/')
        .map_or(path.as_str(), |(p, _)| p)
        .to_owned();
    let association = cx.add(
        "aws_eks_pod_identity_association",
        &format!("{parent}/PodIdentityAssociation"),
        json!({
            "cluster_name": cx.attr(&cluster.name()),
            "namespace": namespace,
            "service_account": service_account,
            "role_arn": role.interp("arn"),
        }),
    );
    cx.depends_on(&association, &policies);
    cx.record_stage(stage, &association);
    role
}

fn karpenter(cx: Cx, stage: StageId, id: &str, k: &crate::constructs::Karpenter) {
    let p = |child: &str| format!("{id}/{child}");
    let (node_role, _) = role(
        cx,
        RoleSpec {
            path: p("NodeRole"),
            description: "Nodes launched by Karpenter".to_owned(),
            trust: service_trust("ec2.amazonaws.com"),
            managed: &[
                "AmazonEKSWorkerNodePolicy",
                "AmazonEC2ContainerRegistryReadOnly",
                "AmazonEKS_CNI_Policy",
                "AmazonSSMManagedInstanceCore",
            ],
            inline: Vec::new(),
            name: Some(k.node_role_name()),
        },
    );
    let entry = cx.add(
        "aws_eks_access_entry",
        &p("NodeAccessEntry"),
        json!({
            "cluster_name": cx.attr(&k.cluster().name()),
            "principal_arn": node_role.interp("arn"),
            "type": "EC2_LINUX",
        }),
    );
    cx.record_stage(stage, &entry);
    let handle = crate::constructs::Construct::handle(k, cx.stack.name());
    let policy = crate::constructs::karpenter::controller_policy(
        &handle.cluster_name,
        k.cluster().arn(),
        handle.node_role.arn(),
    );
    pod_identity_role(
        cx,
        stage,
        PodIdentityRole {
            path: p("ControllerRole"),
            description: "Karpenter controller (EKS Pod Identity)",
            cluster: k.cluster(),
            namespace: crate::constructs::karpenter::KARPENTER_NAMESPACE,
            service_account: crate::constructs::karpenter::KARPENTER_SERVICE_ACCOUNT,
            policy: ("karpenter-controller", policy),
        },
    );
}
