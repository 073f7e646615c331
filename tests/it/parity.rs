//! CloudFormation and Terraform describe the same deployment. For each reference stack, facts
//! are read back from the synthesized files (parsed JSON, not the builders' inputs) and
//! compared: resource kinds, counts and names (through a type table, with bucket
//! sub-resources, security group rules, role policies and access policies normalised), CIDRs,
//! EKS settings and add-ons, HyperPod instance groups and capacity, parameters and variables
//! (defaults and patterns), and outputs.

use crate::common::tf_schema::read_json;
use crate::common::{artifacts, synth_reference_apps};
use hyperforge::synth::terraform::snake;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// CloudFormation types and the Terraform type of the same resource (same name, snake_case).
const SAME_RESOURCE: &[(&str, &str)] = &[
    ("AWS::EC2::VPC", "aws_vpc"),
    ("AWS::EC2::Subnet", "aws_subnet"),
    ("AWS::EC2::InternetGateway", "aws_internet_gateway"),
    ("AWS::EC2::RouteTable", "aws_route_table"),
    ("AWS::EC2::Route", "aws_route"),
    (
        "AWS::EC2::SubnetRouteTableAssociation",
        "aws_route_table_association",
    ),
    ("AWS::EC2::EIP", "aws_eip"),
    ("AWS::EC2::NatGateway", "aws_nat_gateway"),
    (
        "AWS::EC2::VPCCidrBlock",
        "aws_vpc_ipv4_cidr_block_association",
    ),
    ("AWS::EC2::VPCEndpoint", "aws_vpc_endpoint"),
    ("AWS::EC2::FlowLog", "aws_flow_log"),
    ("AWS::EC2::SecurityGroup", "aws_security_group"),
    (
        "AWS::EC2::SecurityGroupIngress",
        "aws_vpc_security_group_ingress_rule",
    ),
    ("AWS::Logs::LogGroup", "aws_cloudwatch_log_group"),
    ("AWS::KMS::Key", "aws_kms_key"),
    ("AWS::IAM::Role", "aws_iam_role"),
    ("AWS::IAM::OIDCProvider", "aws_iam_openid_connect_provider"),
    ("AWS::EKS::Cluster", "aws_eks_cluster"),
    ("AWS::EKS::Addon", "aws_eks_addon"),
    ("AWS::EKS::AccessEntry", "aws_eks_access_entry"),
    ("AWS::S3::Bucket", "aws_s3_bucket"),
    ("AWS::S3::BucketPolicy", "aws_s3_bucket_policy"),
    ("AWS::SageMaker::Cluster", "awscc_sagemaker_cluster"),
    ("AWS::EC2::LaunchTemplate", "aws_launch_template"),
    ("AWS::EKS::Nodegroup", "aws_eks_node_group"),
    ("AWS::IAM::InstanceProfile", "aws_iam_instance_profile"),
    ("AWS::EC2::Instance", "aws_instance"),
    (
        "AWS::EKS::PodIdentityAssociation",
        "aws_eks_pod_identity_association",
    ),
    ("AWS::SNS::Topic", "aws_sns_topic"),
    ("AWS::SNS::TopicPolicy", "aws_sns_topic_policy"),
    ("AWS::CloudWatch::Alarm", "aws_cloudwatch_metric_alarm"),
    ("AWS::CloudWatch::Dashboard", "aws_cloudwatch_dashboard"),
    ("AWS::Events::Rule", "aws_cloudwatch_event_rule"),
    ("AWS::APS::Workspace", "aws_prometheus_workspace"),
    (
        "AWS::APS::RuleGroupsNamespace",
        "aws_prometheus_rule_group_namespace",
    ),
    ("AWS::APS::Scraper", "aws_prometheus_scraper"),
    ("AWS::Scheduler::Schedule", "aws_scheduler_schedule"),
];

/// CloudFormation types with no Terraform resource of their own, and where their content is.
const CFN_ONLY: &[(&str, &str)] = &[
    (
        "AWS::EC2::VPCGatewayAttachment",
        "the internet gateway's vpc_id",
    ),
    (
        "AWS::EC2::SecurityGroupEgress",
        "egress rules, with the group's inline ones (security_group_rules_correspond)",
    ),
];

/// Terraform types that are parts of a CloudFormation resource (compared below), or that
/// come from the stages CloudFormation leaves to other tools.
const TF_ONLY: &[(&str, &str)] = &[
    (
        "aws_vpc_security_group_ingress_rule",
        "security group rules",
    ),
    ("aws_vpc_security_group_egress_rule", "security group rules"),
    (
        "aws_s3_bucket_server_side_encryption_configuration",
        "bucket BucketEncryption",
    ),
    (
        "aws_s3_bucket_public_access_block",
        "bucket PublicAccessBlockConfiguration",
    ),
    ("aws_s3_bucket_versioning", "bucket VersioningConfiguration"),
    ("aws_s3_bucket_logging", "bucket LoggingConfiguration"),
    (
        "aws_s3_bucket_lifecycle_configuration",
        "bucket LifecycleConfiguration",
    ),
    (
        "aws_s3_bucket_ownership_controls",
        "bucket OwnershipControls",
    ),
    ("aws_iam_role_policy", "role Policies"),
    ("aws_cloudwatch_event_target", "event rule Targets"),
    (
        "aws_prometheus_alert_manager_definition",
        "workspace AlertManagerDefinition",
    ),
    ("aws_iam_role_policy_attachment", "role ManagedPolicyArns"),
    (
        "aws_eks_access_policy_association",
        "access entry AccessPolicies",
    ),
    (
        "aws_default_security_group",
        "Terraform adopts the VPC's default group with no rules",
    ),
    ("aws_s3_object", "the s3-upload stage"),
    ("helm_release", "the helm stage"),
];

struct Stack {
    name: String,
    /// Logical id -> resource, over every CloudFormation template of the stack.
    cfn: Map<String, Value>,
    /// Parameter name -> parameter.
    parameters: Map<String, Value>,
    /// User outputs (not the automatic `Export*` ones).
    outputs: BTreeSet<String>,
    /// CloudFormation exports (`Export<LogicalId><Attr>`), without the prefix.
    exports: BTreeSet<String>,
    /// Type -> name -> body, over every Terraform file of the stack.
    tf: BTreeMap<String, Map<String, Value>>,
    variables: Map<String, Value>,
    tf_outputs: BTreeSet<String>,
}

fn stacks() -> Vec<Stack> {
    let mut out = Vec::new();
    for app in synth_reference_apps() {
        let mut by_stack: BTreeMap<String, Stack> = BTreeMap::new();
        for a in artifacts(app.root()) {
            let stack = by_stack.entry(a.stack.clone()).or_insert_with(|| Stack {
                name: a.stack.clone(),
                cfn: Map::new(),
                parameters: Map::new(),
                outputs: BTreeSet::new(),
                exports: BTreeSet::new(),
                tf: BTreeMap::new(),
                variables: Map::new(),
                tf_outputs: BTreeSet::new(),
            });
            match a.format.as_str() {
                "cloudformation" => {
                    let t = read_json(&a.path);
                    let obj = |k: &str| t.get(k).and_then(Value::as_object).cloned();
                    stack.cfn.extend(obj("Resources").unwrap_or_default());
                    stack
                        .parameters
                        .extend(obj("Parameters").unwrap_or_default());
                    for k in obj("Outputs").unwrap_or_default().keys() {
                        match k.strip_prefix("Export") {
                            Some(exported) => {
                                stack.exports.insert(exported.to_owned());
                            }
                            None => {
                                stack.outputs.insert(k.clone());
                            }
                        }
                    }
                }
                "terraform" => {
                    let t = read_json(&a.path);
                    let obj = |k: &str| t.get(k).and_then(Value::as_object).cloned();
                    for (ty, named) in obj("resource").unwrap_or_default() {
                        let named = named.as_object().cloned().unwrap_or_default();
                        stack.tf.entry(ty).or_default().extend(named);
                    }
                    stack.variables.extend(obj("variable").unwrap_or_default());
                    stack
                        .tf_outputs
                        .extend(obj("output").unwrap_or_default().keys().cloned());
                }
                _ => {}
            }
        }
        out.extend(by_stack.into_values().filter(|s| !s.cfn.is_empty()));
    }
    assert!(
        !out.is_empty(),
        "no reference stack has CloudFormation output"
    );
    for s in &out {
        assert!(
            !s.tf.is_empty(),
            "stack {} has CloudFormation but no Terraform",
            s.name
        );
    }
    out
}

impl Stack {
    fn cfn_of(&self, ty: &str) -> Vec<(&String, &Value)> {
        self.cfn
            .iter()
            .filter(|(_, r)| r["Type"].as_str() == Some(ty))
            .collect()
    }

    fn tf_of(&self, ty: &str) -> Vec<(&String, &Value)> {
        self.tf
            .get(ty)
            .map(|m| m.iter().collect())
            .unwrap_or_default()
    }

    /// A Terraform reference's resource name: `${aws_s3_bucket.lifecycle_bucket.id}` ->
    /// `lifecycle_bucket`.
    fn tf_target(v: &Value) -> String {
        v.as_str()
            .and_then(|s| s.strip_prefix("${"))
            .and_then(|s| s.split('.').nth(1))
            .unwrap_or_default()
            .to_string()
    }

    /// The value of a CloudFormation property that is a literal or a `Ref` to a parameter
    /// (its default).
    fn cfn_value(&self, v: &Value) -> Value {
        match v.get("Ref").and_then(Value::as_str) {
            Some(p) => self.parameters[p]["Default"].clone(),
            None => v.clone(),
        }
    }

    /// The value of a Terraform argument that is a literal or `${var.x}` (its default).
    fn tf_value(&self, v: &Value) -> Value {
        match v
            .as_str()
            .and_then(|s| s.strip_prefix("${var."))
            .and_then(|s| s.strip_suffix('}'))
        {
            Some(var) => self.variables[var]["default"].clone(),
            None => v.clone(),
        }
    }
}

#[test]
fn resource_kinds_counts_and_names_correspond() {
    for s in stacks() {
        let mapped: BTreeSet<&str> = SAME_RESOURCE.iter().map(|(c, _)| *c).collect();
        let cfn_only: BTreeSet<&str> = CFN_ONLY.iter().map(|(c, _)| *c).collect();
        for (id, r) in &s.cfn {
            let ty = r["Type"].as_str().unwrap_or_default();
            assert!(
                mapped.contains(ty) || cfn_only.contains(ty),
                "{}: {id} has type {ty}, which the parity table does not know",
                s.name
            );
        }
        let tf_mapped: BTreeSet<&str> = SAME_RESOURCE.iter().map(|(_, t)| *t).collect();
        let tf_only: BTreeSet<&str> = TF_ONLY.iter().map(|(t, _)| *t).collect();
        for ty in s.tf.keys() {
            assert!(
                tf_mapped.contains(ty.as_str()) || tf_only.contains(ty.as_str()),
                "{}: Terraform type {ty} is not in the parity table",
                s.name
            );
        }
        for (cfn_ty, tf_ty) in SAME_RESOURCE {
            let cfn: BTreeSet<String> = s.cfn_of(cfn_ty).iter().map(|(id, _)| snake(id)).collect();
            let tf: BTreeSet<String> = s.tf_of(tf_ty).iter().map(|(n, _)| (*n).clone()).collect();
            assert_eq!(cfn, tf, "{}: {cfn_ty} vs {tf_ty}", s.name);
        }
        // The gateway attachment is the gateway's vpc_id.
        assert_eq!(
            s.cfn_of("AWS::EC2::VPCGatewayAttachment").len(),
            s.tf_of("aws_internet_gateway")
                .iter()
                .filter(|(_, g)| g.get("vpc_id").is_some())
                .count(),
            "{}: gateway attachments",
            s.name
        );
    }
}

#[test]
fn security_group_rules_correspond() {
    for s in stacks() {
        // (group, direction, protocol, from, to, peer) from both formats.
        let mut cfn = BTreeSet::new();
        let port = |v: Option<&Value>| v.and_then(Value::as_i64).unwrap_or(-1);
        for (id, g) in s.cfn_of("AWS::EC2::SecurityGroup") {
            for (key, dir) in [
                ("SecurityGroupIngress", "in"),
                ("SecurityGroupEgress", "out"),
            ] {
                for rule in g["Properties"][key].as_array().into_iter().flatten() {
                    let peer = rule["CidrIp"].as_str().unwrap_or("group").to_string();
                    cfn.insert((
                        snake(id),
                        dir,
                        rule["IpProtocol"].as_str().unwrap_or_default().to_string(),
                        port(rule.get("FromPort")),
                        port(rule.get("ToPort")),
                        peer,
                    ));
                }
            }
        }
        for (ty, dir, group_key, peer_key) in [
            ("AWS::EC2::SecurityGroupIngress", "in", "GroupId", "CidrIp"),
            ("AWS::EC2::SecurityGroupEgress", "out", "GroupId", "CidrIp"),
        ] {
            for (_, r) in s.cfn_of(ty) {
                let p = &r["Properties"];
                let group = p[group_key]["Fn::GetAtt"][0]
                    .as_str()
                    .map(snake)
                    .unwrap_or_default();
                cfn.insert((
                    group,
                    dir,
                    p["IpProtocol"].as_str().unwrap_or_default().to_string(),
                    port(p.get("FromPort")),
                    port(p.get("ToPort")),
                    p[peer_key].as_str().unwrap_or("group").to_string(),
                ));
            }
        }
        let mut tf = BTreeSet::new();
        for (ty, dir) in [
            ("aws_vpc_security_group_ingress_rule", "in"),
            ("aws_vpc_security_group_egress_rule", "out"),
        ] {
            for (_, r) in s.tf_of(ty) {
                tf.insert((
                    Stack::tf_target(&r["security_group_id"]),
                    dir,
                    r["ip_protocol"].as_str().unwrap_or_default().to_string(),
                    port(r.get("from_port")),
                    port(r.get("to_port")),
                    r["cidr_ipv4"].as_str().unwrap_or("group").to_string(),
                ));
            }
        }
        assert!(!cfn.is_empty(), "{}: no security group rule", s.name);
        assert_eq!(cfn, tf, "{}: security group rules", s.name);
    }
}

#[test]
fn bucket_settings_role_policies_and_access_policies_correspond() {
    for s in stacks() {
        for (id, b) in s.cfn_of("AWS::S3::Bucket") {
            let name = snake(id);
            let p = &b["Properties"];
            let part = |ty: &str| -> Option<Value> {
                s.tf_of(ty)
                    .into_iter()
                    .find(|(_, r)| Stack::tf_target(&r["bucket"]) == name)
                    .map(|(_, r)| r.clone())
            };
            let sse = part("aws_s3_bucket_server_side_encryption_configuration")
                .unwrap_or_else(|| panic!("{name}: no encryption"));
            let cfn_rule = &p["BucketEncryption"]["ServerSideEncryptionConfiguration"][0];
            assert_eq!(
                cfn_rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"],
                sse["rule"][0]["apply_server_side_encryption_by_default"]["sse_algorithm"]
            );
            assert_eq!(
                cfn_rule["BucketKeyEnabled"],
                sse["rule"][0]["bucket_key_enabled"]
            );
            let block = part("aws_s3_bucket_public_access_block")
                .unwrap_or_else(|| panic!("{name}: no public access block"));
            for (c, t) in [
                ("BlockPublicAcls", "block_public_acls"),
                ("BlockPublicPolicy", "block_public_policy"),
                ("IgnorePublicAcls", "ignore_public_acls"),
                ("RestrictPublicBuckets", "restrict_public_buckets"),
            ] {
                assert_eq!(
                    p["PublicAccessBlockConfiguration"][c], block[t],
                    "{name}: {c}"
                );
            }
            let versioning =
                part("aws_s3_bucket_versioning").unwrap_or_else(|| panic!("{name}: no versioning"));
            assert_eq!(
                p["VersioningConfiguration"]["Status"],
                versioning["versioning_configuration"]["status"]
            );
            let ownership = part("aws_s3_bucket_ownership_controls")
                .unwrap_or_else(|| panic!("{name}: no ownership controls"));
            assert_eq!(
                p["OwnershipControls"]["Rules"][0]["ObjectOwnership"],
                ownership["rule"]["object_ownership"]
            );
            assert!(part("aws_s3_bucket_policy").is_some(), "{name}: no policy");
        }
        for (id, role) in s.cfn_of("AWS::IAM::Role") {
            let name = snake(id);
            let p = &role["Properties"];
            let count = |v: &Value| v.as_array().map_or(0, Vec::len);
            let of_role = |ty: &str| {
                s.tf_of(ty)
                    .into_iter()
                    .filter(|(_, r)| Stack::tf_target(&r["role"]) == name)
                    .count()
            };
            assert_eq!(
                count(&p["Policies"]),
                of_role("aws_iam_role_policy"),
                "{name}: inline policies"
            );
            assert_eq!(
                count(&p["ManagedPolicyArns"]),
                of_role("aws_iam_role_policy_attachment"),
                "{name}: managed policies"
            );
            let tf_role = &s.tf["aws_iam_role"][&name];
            assert_eq!(
                p["RoleName"],
                tf_role.get("name").cloned().unwrap_or(Value::Null)
            );
        }
        let cfn_policies: usize = s
            .cfn_of("AWS::EKS::AccessEntry")
            .iter()
            .map(|(_, e)| {
                e["Properties"]["AccessPolicies"]
                    .as_array()
                    .map_or(0, Vec::len)
            })
            .sum();
        assert_eq!(
            cfn_policies,
            s.tf_of("aws_eks_access_policy_association").len()
        );
    }
}

#[test]
fn network_eks_and_hyperpod_settings_correspond() {
    for s in stacks() {
        // CIDRs of the VPC, its extra block and every subnet, by name.
        let cidrs = |pairs: Vec<(String, Value)>| -> BTreeMap<String, Value> {
            pairs.into_iter().collect()
        };
        let cfn = cidrs(
            [
                "AWS::EC2::VPC",
                "AWS::EC2::VPCCidrBlock",
                "AWS::EC2::Subnet",
            ]
            .iter()
            .flat_map(|t| s.cfn_of(t))
            .map(|(id, r)| (snake(id), r["Properties"]["CidrBlock"].clone()))
            .collect(),
        );
        let tf = cidrs(
            [
                "aws_vpc",
                "aws_vpc_ipv4_cidr_block_association",
                "aws_subnet",
            ]
            .iter()
            .flat_map(|t| s.tf_of(t))
            .map(|(n, r)| (n.clone(), r["cidr_block"].clone()))
            .collect(),
        );
        assert!(cfn.values().all(Value::is_string), "{cfn:?}");
        assert_eq!(cfn, tf, "{}: CIDRs", s.name);

        // Zone id of the HyperPod subnet (a parameter / a variable, same default).
        for (id, subnet) in s.cfn_of("AWS::EC2::Subnet") {
            if let Some(az) = subnet["Properties"].get("AvailabilityZoneId") {
                let tf_az = &s.tf["aws_subnet"][&snake(id)]["availability_zone_id"];
                assert_eq!(s.cfn_value(az), s.tf_value(tf_az), "{id}: zone id");
            }
        }

        // EKS.
        for (id, c) in s.cfn_of("AWS::EKS::Cluster") {
            let p = &c["Properties"];
            let t = &s.tf["aws_eks_cluster"][&snake(id)];
            assert_eq!(p["Name"], t["name"]);
            assert_eq!(p["Version"], t["version"]);
            assert_eq!(
                p["AccessConfig"]["AuthenticationMode"],
                t["access_config"]["authentication_mode"]
            );
            assert_eq!(
                p["AccessConfig"]["BootstrapClusterCreatorAdminPermissions"],
                t["access_config"]["bootstrap_cluster_creator_admin_permissions"]
            );
            for (c_key, t_key) in [
                ("EndpointPrivateAccess", "endpoint_private_access"),
                ("EndpointPublicAccess", "endpoint_public_access"),
            ] {
                assert_eq!(p["ResourcesVpcConfig"][c_key], t["vpc_config"][t_key]);
            }
            let log_types: Vec<Value> = p["Logging"]["ClusterLogging"]["EnabledTypes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| t["Type"].clone())
                .collect();
            assert_eq!(Value::Array(log_types), t["enabled_cluster_log_types"]);
        }
        let addons = |names: Vec<Value>| -> BTreeSet<String> {
            names
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        };
        assert_eq!(
            addons(
                s.cfn_of("AWS::EKS::Addon")
                    .iter()
                    .map(|(_, a)| a["Properties"]["AddonName"].clone())
                    .collect()
            ),
            addons(
                s.tf_of("aws_eks_addon")
                    .iter()
                    .map(|(_, a)| a["addon_name"].clone())
                    .collect()
            ),
            "{}: add-ons",
            s.name
        );

        // HyperPod instance groups: type, count, threads, volume, capacity.
        for (id, c) in s.cfn_of("AWS::SageMaker::Cluster") {
            let p = &c["Properties"];
            let t = &s.tf["awscc_sagemaker_cluster"][&snake(id)];
            assert_eq!(p["ClusterName"], t["cluster_name"]);
            assert_eq!(p["NodeRecovery"], t["node_recovery"]);
            let cfn_groups: Vec<Value> = p["InstanceGroups"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|g| {
                    serde_json::json!([
                        g["InstanceGroupName"],
                        g["InstanceType"],
                        g["InstanceCount"],
                        g["ThreadsPerCore"],
                        g["InstanceStorageConfigs"][0]["EbsVolumeConfig"]["VolumeSizeInGB"],
                        g["LifeCycleConfig"]["OnCreate"],
                        g["OnStartDeepHealthChecks"],
                        g.get("TrainingPlanArn").map(|v| s.cfn_value(v)),
                    ])
                })
                .collect();
            let tf_groups: Vec<Value> = t["instance_groups"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|g| {
                    serde_json::json!([
                        g["instance_group_name"],
                        g["instance_type"],
                        g["instance_count"],
                        g["threads_per_core"],
                        g["instance_storage_configs"][0]["ebs_volume_config"]["volume_size_in_gb"],
                        g["life_cycle_config"]["on_create"],
                        g["on_start_deep_health_checks"],
                        g.get("training_plan_arn").map(|v| s.tf_value(v)),
                    ])
                })
                .collect();
            assert!(!cfn_groups.is_empty());
            assert_eq!(cfn_groups, tf_groups, "{}: instance groups", s.name);
        }
    }
}

/// The RE2 pattern in a `${can(regex("<pattern>", var.x))}` validation condition.
fn validation_pattern(condition: &str) -> String {
    let inner = condition
        .strip_prefix("${can(regex(\"")
        .and_then(|s| s.rsplit_once("\", var."))
        .map(|(p, _)| p)
        .unwrap_or_else(|| panic!("unexpected condition {condition}"));
    inner.replace("\\\\", "\\").replace("\\\"", "\"")
}

#[test]
fn parameters_variables_and_outputs_correspond() {
    for s in stacks() {
        for (name, p) in &s.parameters {
            let var = s
                .variables
                .get(&snake(name))
                .unwrap_or_else(|| panic!("{}: no variable for parameter {name}", s.name));
            assert_eq!(p["Default"], var["default"], "{name}: default");
            let condition = var["validation"][0]["condition"]
                .as_str()
                .unwrap_or_default();
            assert_eq!(
                p["AllowedPattern"].as_str().map(str::to_string),
                Some(validation_pattern(condition)),
                "{name}: pattern"
            );
        }
        // Every CloudFormation output is a Terraform output of the same name; Terraform's
        // other outputs are what later phases read, which CloudFormation exports.
        let outputs: BTreeSet<String> = s.outputs.iter().map(|o| snake(o)).collect();
        let exports: BTreeSet<String> = s.exports.iter().map(|o| snake(o)).collect();
        let missing: Vec<&String> = outputs.difference(&s.tf_outputs).collect();
        assert!(
            missing.is_empty(),
            "{}: outputs missing in Terraform: {missing:?}",
            s.name
        );
        let unmatched: Vec<&String> = s
            .tf_outputs
            .difference(&outputs)
            .filter(|o| !exports.contains(*o))
            .collect();
        assert!(
            unmatched.is_empty(),
            "{}: Terraform outputs CloudFormation neither outputs nor exports: {unmatched:?}",
            s.name
        );
    }
}

#[test]
fn node_groups_and_their_capacity_correspond() {
    let mut compared = 0;
    for s in stacks() {
        for (id, ng) in s.cfn_of("AWS::EKS::Nodegroup") {
            let name = snake(id);
            let tf = &s.tf["aws_eks_node_group"][&name];
            let p = &ng["Properties"];
            let lt_id = p["LaunchTemplate"]["Id"]["Ref"]
                .as_str()
                .unwrap_or_default();
            let lt = &s.cfn[lt_id]["Properties"]["LaunchTemplateData"];
            let tf_lt =
                &s.tf["aws_launch_template"][&Stack::tf_target(&tf["launch_template"]["id"])];
            assert_eq!(
                lt["InstanceType"], tf_lt["instance_type"],
                "{}: {id} instance type",
                s.name
            );
            assert_eq!(
                p["CapacityType"], tf["capacity_type"],
                "{}: {id} capacity type",
                s.name
            );
            assert_eq!(p["AmiType"], tf["ami_type"], "{}: {id} AMI", s.name);
            for (cfn_key, tf_key) in [
                ("MinSize", "min_size"),
                ("DesiredSize", "desired_size"),
                ("MaxSize", "max_size"),
            ] {
                assert_eq!(
                    p["ScalingConfig"][cfn_key], tf["scaling_config"][tf_key],
                    "{}: {id} {cfn_key}",
                    s.name
                );
            }
            assert_eq!(
                p["Subnets"].as_array().map(Vec::len),
                tf["subnet_ids"].as_array().map(Vec::len),
                "{}: {id} subnets",
                s.name
            );
            assert_eq!(
                lt["InstanceMarketOptions"]["MarketType"],
                tf_lt["instance_market_options"]["market_type"],
                "{}: {id} market type",
                s.name
            );
            let cfn_reservation = lt["CapacityReservationSpecification"]
                ["CapacityReservationTarget"]["CapacityReservationId"]
                .clone();
            if !cfn_reservation.is_null() {
                let tf_reservation = &tf_lt["capacity_reservation_specification"]
                    ["capacity_reservation_target"]["capacity_reservation_id"];
                assert_eq!(
                    s.cfn_value(&cfn_reservation),
                    s.tf_value(tf_reservation),
                    "{}: {id} capacity reservation",
                    s.name
                );
            }
            compared += 1;
        }
    }
    assert!(compared >= 3, "only {compared} node groups compared");
}

/// Every `Ref`/`Fn::GetAtt` target in a CloudFormation value.
fn cfn_references(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(id)) = m.get("Ref") {
                out.insert(id.clone());
            }
            if let Some(Value::Array(a)) = m.get("Fn::GetAtt") {
                if let Some(Value::String(id)) = a.first() {
                    out.insert(id.clone());
                }
            }
            m.values().for_each(|x| cfn_references(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| cfn_references(x, out)),
        _ => {}
    }
}

/// The order both formats create resources in is the resource layer's: every CloudFormation
/// `DependsOn` is a Terraform `depends_on`, and every Terraform `depends_on` on a resource
/// CloudFormation also has is kept there too: by `DependsOn` or a reference in the same
/// template, or by an earlier stage's stack. In particular the add-ons whose pods need the
/// HyperPod nodes (CoreDNS and the inference operator's dependencies) wait for the HyperPod
/// cluster in both.
#[test]
fn creation_order_corresponds() {
    for app in synth_reference_apps() {
        let mut cfn: BTreeMap<String, (String, String, Value)> = BTreeMap::new(); // snake -> (template, id, resource)
        let mut tf: BTreeMap<String, Value> = BTreeMap::new(); // name -> body
        let mut files: Vec<_> = artifacts(app.root()).into_iter().collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        for a in &files {
            if !["cloudformation", "terraform"].contains(&a.format.as_str()) {
                continue;
            }
            let t = read_json(&a.path);
            match a.format.as_str() {
                "cloudformation" => {
                    let template = a.path.display().to_string();
                    for (id, r) in t["Resources"].as_object().cloned().unwrap_or_default() {
                        cfn.insert(snake(&id), (template.clone(), id, r));
                    }
                }
                "terraform" => {
                    for named in t["resource"]
                        .as_object()
                        .cloned()
                        .unwrap_or_default()
                        .values()
                    {
                        for (name, body) in named.as_object().cloned().unwrap_or_default() {
                            tf.insert(name, body);
                        }
                    }
                }
                _ => {}
            }
        }
        let mut hyperpod_waiters = BTreeSet::new();
        for (name, (template, id, r)) in &cfn {
            let depends: Vec<String> = match &r["DependsOn"] {
                Value::String(d) => vec![d.clone()],
                Value::Array(a) => a
                    .iter()
                    .filter_map(|d| d.as_str().map(str::to_owned))
                    .collect(),
                _ => Vec::new(),
            };
            let tf_depends: BTreeSet<String> = tf
                .get(name)
                .and_then(|b| b["depends_on"].as_array())
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str()?.split('.').nth(1).map(str::to_owned))
                .collect();
            for d in &depends {
                if !tf.contains_key(&snake(d)) {
                    continue; // a CloudFormation-only resource (the gateway attachment)
                }
                assert!(
                    tf_depends.contains(&snake(d)),
                    "{template}: {id} DependsOn {d}, but Terraform's {name} does not depend on it ({tf_depends:?})"
                );
                if cfn[&snake(d)].2["Type"] == "AWS::SageMaker::Cluster" {
                    hyperpod_waiters.insert(
                        r["Properties"]["AddonName"]
                            .as_str()
                            .unwrap_or(id)
                            .to_owned(),
                    );
                }
            }
            // What the resource waits for in its template, directly or through others.
            let direct = |r: &Value| {
                let mut out = BTreeSet::new();
                cfn_references(&r["Properties"], &mut out);
                match &r["DependsOn"] {
                    Value::String(d) => {
                        out.insert(d.clone());
                    }
                    Value::Array(a) => {
                        out.extend(a.iter().filter_map(|d| d.as_str().map(str::to_owned)))
                    }
                    _ => {}
                }
                out
            };
            let mut refs = BTreeSet::new();
            let mut todo: Vec<String> = direct(r).into_iter().collect();
            while let Some(next) = todo.pop() {
                if refs.insert(next.clone()) {
                    if let Some((t, _, nr)) = cfn.get(&snake(&next)) {
                        if t == template {
                            todo.extend(direct(nr));
                        }
                    }
                }
            }
            for target in &tf_depends {
                let Some((target_template, target_id, _)) = cfn.get(target) else {
                    continue; // a Terraform-only resource (policies, uploads, Helm releases)
                };
                if target_template == template {
                    assert!(
                        refs.contains(target_id),
                        "{template}: Terraform's {name} waits for {target}, CloudFormation's {id} does not"
                    );
                } else {
                    assert!(
                        target_template < template,
                        "Terraform's {name} waits for {target}, which CloudFormation creates in a later stack ({target_template})"
                    );
                }
            }
        }
        if cfn
            .values()
            .any(|(_, _, r)| r["Type"] == "AWS::SageMaker::Cluster")
        {
            let expected: BTreeSet<String> = [
                "coredns",
                "cert-manager",
                "metrics-server",
                "aws-mountpoint-s3-csi-driver",
                "aws-fsx-csi-driver",
            ]
            .map(str::to_owned)
            .into();
            assert_eq!(hyperpod_waiters, expected);
        }
    }
}
