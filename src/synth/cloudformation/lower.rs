//! Lowering of each construct to CloudFormation L1 resources.

use super::expr::{Expr, Val};
use super::l1::*;
use super::template::{Parameter, StackTemplates};
use crate::app::{kind, Ref};
use crate::app::{logical_id, AttrRef, StageId};
use crate::constructs::hyperpod::Capacity;
use crate::constructs::iam::{
    deny_insecure_transport, irsa_trust_statement, service_trust, PolicyDocument, PrincipalKind,
    Statement,
};
use crate::constructs::inference_operator::OPERATOR_NAMESPACE;
use crate::constructs::network::NatGateways;
use crate::constructs::nodes::{ManagedNodeGroup, NodeCapacity};
use crate::constructs::text::{Pseudo, Text};
use crate::constructs::{
    ConstructRef, EksCluster, EndpointAccess, HyperPodCluster, InferenceOperator, Network,
};

type Cx<'a, 'b> = &'a mut StackTemplates<'b>;

fn s(v: impl Into<String>) -> Val<String> {
    Val::Lit(v.into())
}

fn e<T>(expr: Expr) -> Val<T> {
    Val::Expr(expr)
}

pub(super) fn managed_policy(name: &str) -> Val<String> {
    e(Expr::sub(format!(
        "arn:${{AWS::Partition}}:iam::aws:policy/{name}"
    )))
}

/// Lowers one construct placed in `stage`.
pub(crate) fn lower(cx: Cx, stage: StageId, id: &str, construct: ConstructRef<'_>) {
    match construct {
        // Expanded into the resource layer (`crate::resources`) and lowered from there.
        ConstructRef::SecurityGroup(_)
        | ConstructRef::Lifecycle(_)
        | ConstructRef::LoadBalancerController(_)
        | ConstructRef::FsxLustre(_) => {}
        ConstructRef::Network(c) => network(cx, stage, id, c),
        ConstructRef::Eks(c) => eks(cx, stage, id, c),
        ConstructRef::HyperPod(c) => hyperpod(cx, stage, id, c),
        ConstructRef::InferenceOperator(c) => inference_operator(cx, stage, id, c),
        ConstructRef::NodeGroup(c) => node_group(cx, stage, id, c),
        ConstructRef::Karpenter(c) => karpenter(cx, stage, id, c),
        // Node pools are Kubernetes objects.
        ConstructRef::KarpenterNodePool(_) => {}
        // Workloads are Kubernetes objects; nothing to emit in CloudFormation.
        ConstructRef::InferenceEndpoint(_) | ConstructRef::VllmDeployment(_) => {}
    }
}

pub(super) fn name_tag<T: From<(Val<String>, Val<String>)>>(value: impl Into<String>) -> Vec<T> {
    vec![T::from((s("Name"), Val::Lit(value.into())))]
}

macro_rules! tag_from {
    ($($module:ident),*) => {
        $( impl From<(Val<String>, Val<String>)> for $module::Tag {
            fn from((key, value): (Val<String>, Val<String>)) -> Self { $module::Tag { key, value } }
        } )*
    };
}
tag_from!(
    ec2_vpc,
    ec2_subnet,
    ec2_internet_gateway,
    ec2_eip,
    ec2_nat_gateway,
    ec2_route_table,
    ec2_security_group
);

pub(super) fn bucket(cx: Cx, stage: StageId, path: &str, purpose: &'static str) {
    let b = s3_bucket::Bucket {
        bucket_encryption: Some(s3_bucket::BucketEncryption {
            server_side_encryption_configuration: vec![s3_bucket::ServerSideEncryptionRule {
                bucket_key_enabled: Some(true.into()),
                server_side_encryption_by_default: Some(s3_bucket::ServerSideEncryptionByDefault {
                    sse_algorithm: s("aws:kms"),
                    kms_master_key_id: None,
                }),
                ..Default::default()
            }],
        }),
        public_access_block_configuration: Some(s3_bucket::PublicAccessBlockConfiguration {
            block_public_acls: Some(true.into()),
            block_public_policy: Some(true.into()),
            ignore_public_acls: Some(true.into()),
            restrict_public_buckets: Some(true.into()),
        }),
        versioning_configuration: Some(s3_bucket::VersioningConfiguration {
            status: s("Enabled"),
        }),
        ownership_controls: Some(s3_bucket::OwnershipControls {
            rules: vec![s3_bucket::OwnershipControlsRule {
                object_ownership: Some(s("BucketOwnerEnforced")),
            }],
        }),
        ..Default::default()
    };
    cx.add(stage, path, &b);
    cx.suppress(stage, "CKV_AWS_18", purpose);
    let bucket_ref: Ref<kind::Bucket> = Ref::new(cx.stack.name(), path);
    let policy = PolicyDocument::new().statement(deny_insecure_transport(bucket_ref.arn()));
    let doc = cx.policy(stage, &policy);
    let bucket_name = cx.attr(stage, &bucket_ref.name());
    cx.add(
        stage,
        &format!("{path}Policy"),
        &s3_bucket_policy::BucketPolicy {
            bucket: e(bucket_name),
            policy_document: doc,
        },
    );
}

fn network(cx: Cx, stage: StageId, id: &str, n: &Network) {
    let Some(plan) = n.plan() else { return };
    let p = |child: &str| format!("{id}/{child}");
    let vpc_id = logical_id(&p("Vpc"));
    let stack_name = cx.stack.name().to_owned();
    cx.add(
        stage,
        &p("Vpc"),
        &ec2_vpc::Vpc {
            cidr_block: Some(s(plan.vpc_cidr.to_string())),
            enable_dns_hostnames: Some(true.into()),
            enable_dns_support: Some(true.into()),
            tags: Some(name_tag(format!("{stack_name}-vpc"))),
            ..Default::default()
        },
    );
    let igw = cx.add(
        stage,
        &p("InternetGateway"),
        &ec2_internet_gateway::InternetGateway {
            tags: Some(name_tag(format!("{stack_name}-igw"))),
        },
    );
    let attachment = cx.add(
        stage,
        &p("InternetGatewayAttachment"),
        &ec2_vpc_gateway_attachment::VpcGatewayAttachment {
            internet_gateway_id: Some(e(Expr::reference(&igw))),
            vpc_id: e(Expr::reference(&vpc_id)),
            vpn_gateway_id: None,
        },
    );
    let public_rt = cx.add(
        stage,
        &p("PublicRouteTable"),
        &ec2_route_table::RouteTable {
            vpc_id: e(Expr::reference(&vpc_id)),
            tags: Some(name_tag(format!("{stack_name}-public"))),
        },
    );
    cx.add(
        stage,
        &p("PublicDefaultRoute"),
        &ec2_route::Route {
            route_table_id: e(Expr::reference(&public_rt)),
            destination_cidr_block: Some(s("0.0.0.0/0")),
            gateway_id: Some(e(Expr::reference(&igw))),
            ..Default::default()
        },
    );
    cx.depends_on(stage, &[&attachment]);
    let az = |i: u32| Expr::Select(i, Box::new(Expr::GetAzs(String::new())));
    let mut nat_ids = Vec::new();
    for sp in &plan.public_subnets {
        let subnet = cx.add(
            stage,
            &p(&sp.id),
            &ec2_subnet::Subnet {
                vpc_id: e(Expr::reference(&vpc_id)),
                cidr_block: Some(s(sp.cidr.to_string())),
                availability_zone: Some(e(az(sp.az_index))),
                map_public_ip_on_launch: Some(false.into()),
                tags: Some(
                    vec![
                        ("Name", format!("{stack_name}-public-{}", sp.az_index + 1)),
                        ("kubernetes.io/role/elb", "1".to_owned()),
                    ]
                    .into_iter()
                    .map(|(k, v)| ec2_subnet::Tag {
                        key: s(k),
                        value: s(v),
                    })
                    .collect(),
                ),
                ..Default::default()
            },
        );
        cx.add(
            stage,
            &p(&format!("{}RouteTableAssociation", sp.id)),
            &ec2_subnet_route_table_association::SubnetRouteTableAssociation {
                route_table_id: e(Expr::reference(&public_rt)),
                subnet_id: e(Expr::reference(&subnet)),
            },
        );
        let wants_nat = match plan.nat_gateways {
            NatGateways::One => sp.az_index == 0,
            NatGateways::PerAz => true,
        };
        if wants_nat {
            let n = sp.az_index + 1;
            let eip = cx.add(
                stage,
                &p(&format!("NatEip{n}")),
                &ec2_eip::Eip {
                    domain: Some(s("vpc")),
                    tags: Some(name_tag(format!("{stack_name}-nat-{n}"))),
                    ..Default::default()
                },
            );
            cx.depends_on(stage, &[&attachment]);
            let nat = cx.add(
                stage,
                &p(&format!("NatGateway{n}")),
                &ec2_nat_gateway::NatGateway {
                    allocation_id: Some(e(Expr::get_att(&eip, "AllocationId"))),
                    subnet_id: Some(e(Expr::reference(&subnet))),
                    tags: Some(name_tag(format!("{stack_name}-nat-{n}"))),
                    ..Default::default()
                },
            );
            nat_ids.push(nat);
        }
    }
    let nat_for = |az_index: u32| -> String {
        let i = (az_index as usize).min(nat_ids.len().saturating_sub(1));
        nat_ids.get(i).cloned().unwrap_or_default()
    };
    let mut private_route_tables = Vec::new();
    let mut private_route = |cx: Cx, name: String, tag: String, subnet: &str, nat: String| {
        let rt = cx.add(
            stage,
            &p(&format!("{name}RouteTable")),
            &ec2_route_table::RouteTable {
                vpc_id: e(Expr::reference(&vpc_id)),
                tags: Some(name_tag(tag)),
            },
        );
        cx.add(
            stage,
            &p(&format!("{name}DefaultRoute")),
            &ec2_route::Route {
                route_table_id: e(Expr::reference(&rt)),
                destination_cidr_block: Some(s("0.0.0.0/0")),
                nat_gateway_id: Some(e(Expr::reference(&nat))),
                ..Default::default()
            },
        );
        cx.add(
            stage,
            &p(&format!("{name}RouteTableAssociation")),
            &ec2_subnet_route_table_association::SubnetRouteTableAssociation {
                route_table_id: e(Expr::reference(&rt)),
                subnet_id: e(Expr::reference(subnet)),
            },
        );
        private_route_tables.push(rt);
    };
    for sp in &plan.private_subnets {
        let subnet = cx.add(
            stage,
            &p(&sp.id),
            &ec2_subnet::Subnet {
                vpc_id: e(Expr::reference(&vpc_id)),
                cidr_block: Some(s(sp.cidr.to_string())),
                availability_zone: Some(e(az(sp.az_index))),
                map_public_ip_on_launch: Some(false.into()),
                tags: Some(private_subnet_tags(format!(
                    "{stack_name}-private-{}",
                    sp.az_index + 1
                ))),
                ..Default::default()
            },
        );
        private_route(
            cx,
            sp.id.clone(),
            format!("{stack_name}-private-{}", sp.az_index + 1),
            &subnet,
            nat_for(sp.az_index),
        );
    }
    for (child, block, az_id) in &plan.zonal {
        let short = child.trim_end_matches("Subnet");
        let cidr = cx.add(
            stage,
            &p(&format!("{short}CidrBlock")),
            &ec2_vpc_cidr_block::VpcCidrBlock {
                cidr_block: Some(s(block.to_string())),
                vpc_id: e(Expr::reference(&vpc_id)),
                ..Default::default()
            },
        );
        let param = format!("{}AzId", logical_id(&p(child)));
        let az_param = cx.parameter(
            stage,
            &param,
            Parameter {
                description: crate::constructs::network::zone_input_description(child).to_owned(),
                default: Some(az_id.to_string()),
                allowed_pattern: Some(crate::constructs::network::AZ_ID_PATTERN.to_owned()),
                constraint: Some("an Availability Zone id such as usw2-az2".to_owned()),
            },
        );
        let name = format!("{stack_name}-{}", short.to_ascii_lowercase());
        let subnet = cx.add(
            stage,
            &p(child),
            &ec2_subnet::Subnet {
                vpc_id: e(Expr::reference(&vpc_id)),
                cidr_block: Some(s(block.to_string())),
                availability_zone_id: Some(e(az_param)),
                map_public_ip_on_launch: Some(false.into()),
                tags: Some({
                    let mut tags = private_subnet_tags(name.clone());
                    tags.push(ec2_subnet::Tag {
                        key: s("hyperforge:subnet"),
                        value: s(short.to_ascii_lowercase()),
                    });
                    tags
                }),
                ..Default::default()
            },
        );
        cx.depends_on(stage, &[&cidr]);
        private_route(cx, (*child).to_owned(), name, &subnet, nat_for(0));
    }
    cx.add(
        stage,
        &p("S3Endpoint"),
        &ec2_vpc_endpoint::VpcEndpoint {
            vpc_id: e(Expr::reference(&vpc_id)),
            service_name: Some(e(Expr::sub("com.amazonaws.${AWS::Region}.s3"))),
            vpc_endpoint_type: Some(s("Gateway")),
            route_table_ids: Some(
                private_route_tables
                    .iter()
                    .map(|rt| e(Expr::reference(rt)))
                    .collect(),
            ),
            ..Default::default()
        },
    );
    flow_logs(cx, stage, id, &vpc_id, plan.flow_log_retention_days);
}

fn private_subnet_tags(name: String) -> Vec<ec2_subnet::Tag> {
    vec![
        ec2_subnet::Tag {
            key: s("Name"),
            value: s(name),
        },
        ec2_subnet::Tag {
            key: s("kubernetes.io/role/internal-elb"),
            value: s("1"),
        },
    ]
}

fn kms_key(
    cx: Cx,
    stage: StageId,
    path: &str,
    description: String,
    extra: Option<Statement>,
) -> String {
    let policy = cx.policy(stage, &crate::constructs::iam::account_key_policy(extra));
    cx.add(
        stage,
        path,
        &kms_key::Key {
            description: Some(s(description)),
            enable_key_rotation: Some(true.into()),
            key_policy: Some(policy),
            ..Default::default()
        },
    )
}

fn flow_logs(cx: Cx, stage: StageId, id: &str, vpc_id: &str, retention_days: u32) {
    let p = |child: &str| format!("{id}/{child}");
    let log_group_arn = Text::arn(
        "logs",
        true,
        true,
        Text::lit(format!(
            "log-group:/hyperforge/{}/vpc-flow-logs",
            cx.stack.name()
        )),
    );
    let logs_service = Text::lit("logs.")
        .push_pseudo(Pseudo::Region)
        .push_lit(".amazonaws.com");
    let key = kms_key(
        cx,
        stage,
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
        stage,
        &p("FlowLogGroup"),
        &logs_log_group::LogGroup {
            log_group_name: Some(s(format!("/hyperforge/{}/vpc-flow-logs", cx.stack.name()))),
            kms_key_id: Some(e(Expr::get_att(&key, "Arn"))),
            retention_in_days: Some(i64::from(retention_days).into()),
            ..Default::default()
        },
    );
    let role_policy = PolicyDocument::new().statement(
        Statement::allow([
            "logs:CreateLogStream",
            "logs:PutLogEvents",
            "logs:DescribeLogStreams",
        ])
        .resource(log_group_arn.clone())
        .resource(log_group_arn.push_lit(":*")),
    );
    let trust = cx.policy(stage, &service_trust("vpc-flow-logs.amazonaws.com"));
    let role_doc = cx.policy(stage, &role_policy);
    let role = cx.add(
        stage,
        &p("FlowLogRole"),
        &iam_role::Role {
            assume_role_policy_document: trust,
            description: Some(s("Lets VPC Flow Logs write to its log group")),
            policies: Some(vec![iam_role::Policy {
                policy_name: s("write-flow-logs"),
                policy_document: role_doc,
            }]),
            ..Default::default()
        },
    );
    cx.add(
        stage,
        &p("FlowLog"),
        &ec2_flow_log::FlowLog {
            resource_id: e(Expr::reference(vpc_id)),
            resource_type: s("VPC"),
            traffic_type: Some(s("ALL")),
            log_destination_type: Some(s("cloud-watch-logs")),
            log_group_name: Some(e(Expr::reference(&group))),
            deliver_logs_permission_arn: Some(e(Expr::get_att(&role, "Arn"))),
            ..Default::default()
        },
    );
}

const EKS_LOG_TYPES: &[&str] = &[
    "api",
    "audit",
    "authenticator",
    "controllerManager",
    "scheduler",
];

fn eks(cx: Cx, stage: StageId, id: &str, c: &EksCluster) {
    let p = |child: &str| format!("{id}/{child}");
    let trust = cx.policy(stage, &service_trust("eks.amazonaws.com"));
    let role = cx.add(
        stage,
        &p("ClusterRole"),
        &iam_role::Role {
            assume_role_policy_document: trust,
            description: Some(s(format!("EKS control plane role of {}", c.name()))),
            managed_policy_arns: Some(vec![managed_policy("AmazonEKSClusterPolicy")]),
            ..Default::default()
        },
    );
    let key = kms_key(
        cx,
        stage,
        &p("SecretsKey"),
        format!(
            "Envelope encryption of Kubernetes secrets in EKS cluster {}",
            c.name()
        ),
        None,
    );
    let subnets = c
        .subnet_refs()
        .iter()
        .map(|r| e(cx.attr(stage, &r.id())))
        .collect();
    let groups: Vec<Val<String>> = c
        .security_group_refs()
        .iter()
        .map(|r| e(cx.attr(stage, &r.id())))
        .collect();
    let (public, cidrs) = match c.endpoint() {
        EndpointAccess::Private => (false, None),
        EndpointAccess::PublicAndPrivate { public_cidrs } => {
            (true, Some(public_cidrs.iter().map(s).collect()))
        }
    };
    let cluster = cx.add(
        stage,
        &p("Cluster"),
        &eks_cluster::Cluster {
            name: Some(s(c.name())),
            version: Some(s(c.kubernetes_version())),
            role_arn: e(Expr::get_att(&role, "Arn")),
            resources_vpc_config: eks_cluster::ResourcesVpcConfig {
                subnet_ids: subnets,
                security_group_ids: (!groups.is_empty()).then_some(groups),
                endpoint_private_access: Some(true.into()),
                endpoint_public_access: Some(public.into()),
                public_access_cidrs: cidrs,
                ..Default::default()
            },
            access_config: Some(eks_cluster::AccessConfig {
                authentication_mode: Some(s("API_AND_CONFIG_MAP")),
                bootstrap_cluster_creator_admin_permissions: Some(true.into()),
            }),
            logging: Some(eks_cluster::Logging {
                cluster_logging: Some(eks_cluster::ClusterLogging {
                    enabled_types: Some(
                        EKS_LOG_TYPES
                            .iter()
                            .map(|t| eks_cluster::LoggingTypeConfig {
                                r#type: Some(s(*t)),
                            })
                            .collect(),
                    ),
                }),
            }),
            encryption_config: Some(vec![eks_cluster::EncryptionConfig {
                provider: Some(eks_cluster::Provider {
                    key_arn: Some(e(Expr::get_att(&key, "Arn"))),
                }),
                resources: Some(vec![s("secrets")]),
            }]),
            ..Default::default()
        },
    );
    cx.add(
        stage,
        &p("OidcProvider"),
        &iam_oidc_provider::OidcProvider {
            url: Some(e(Expr::get_att(&cluster, "OpenIdConnectIssuerUrl"))),
            client_id_list: Some(vec![s("sts.amazonaws.com")]),
            ..Default::default()
        },
    );
    for addon in c.addons() {
        cx.add(
            stage,
            &p(&format!("{}Addon", crate::app::pascal_id(&addon.name))),
            &eks_addon::Addon {
                addon_name: s(&addon.name),
                addon_version: addon.version.as_ref().map(s),
                cluster_name: e(Expr::reference(&cluster)),
                resolve_conflicts: Some(s("OVERWRITE")),
                ..Default::default()
            },
        );
    }
    for (i, entry) in c.access_entries().iter().enumerate() {
        cx.add(
            stage,
            &p(&format!("AccessEntry{}", i + 1)),
            &eks_access_entry::AccessEntry {
                cluster_name: e(Expr::reference(&cluster)),
                principal_arn: s(&entry.principal_arn),
                access_policies: Some(vec![eks_access_entry::AccessPolicy {
                    policy_arn: e(Expr::sub(format!(
                        "arn:${{AWS::Partition}}:eks::aws:cluster-access-policy/{}",
                        entry.policy.policy_name()
                    ))),
                    access_scope: eks_access_entry::AccessScope {
                        r#type: s("cluster"),
                        namespaces: None,
                    },
                }]),
                ..Default::default()
            },
        );
    }
    cx.output(
        stage,
        &format!("{}Name", logical_id(&p("Cluster"))),
        "EKS cluster name (aws eks update-kubeconfig --name)",
        Expr::reference(&cluster),
    );
}

fn hyperpod(cx: Cx, stage: StageId, id: &str, h: &HyperPodCluster) {
    let p = |child: &str| format!("{id}/{child}");
    let lifecycle_bucket = &h.lifecycle().bucket;
    let policy = h.execution_role_policy();
    let trust = cx.policy(stage, &service_trust("sagemaker.amazonaws.com"));
    let inline = cx.policy(stage, &policy);
    let role = cx.add(
        stage,
        &p("ExecutionRole"),
        &iam_role::Role {
            assume_role_policy_document: trust,
            description: Some(s(format!("Instance role of HyperPod cluster {}", h.name()))),
            managed_policy_arns: Some(vec![
                managed_policy("AmazonSageMakerClusterInstanceRolePolicy"),
                managed_policy("AmazonEKS_CNI_Policy"),
            ]),
            policies: Some(vec![iam_role::Policy {
                policy_name: s("hyperpod-nodes"),
                policy_document: inline,
            }]),
            ..Default::default()
        },
    );
    let source_uri = cx.text(
        stage,
        &Text::lit("s3://")
            .push_ref(lifecycle_bucket.name())
            .push_lit(format!("/{}", h.lifecycle().prefix)),
    );
    let mut groups = Vec::new();
    for g in h.groups() {
        let training_plan_arn = match g.capacity_source() {
            Capacity::OnDemand => None,
            Capacity::TrainingPlan(plan) => {
                let name = format!(
                    "{}{}TrainingPlanArn",
                    logical_id(id),
                    crate::app::pascal_id(g.name())
                );
                Some(e(cx.parameter(
                    stage,
                    &name,
                    Parameter {
                        description: format!(
                            "ARN of the training plan feeding instance group {}",
                            g.name()
                        ),
                        default: Some(plan.arn.clone()),
                        allowed_pattern: Some(
                            crate::constructs::hyperpod::TRAINING_PLAN_ARN_PATTERN.to_owned(),
                        ),
                        constraint: Some("a SageMaker training plan ARN".to_owned()),
                    },
                )))
            }
        };
        let kubernetes_config = (!g.labels().is_empty() || !g.taints().is_empty()).then(|| {
            sagemaker_cluster::ClusterKubernetesConfig {
                labels: (!g.labels().is_empty())
                    .then(|| g.labels().iter().map(|(k, v)| (k.clone(), s(v))).collect()),
                taints: (!g.taints().is_empty()).then(|| {
                    g.taints()
                        .iter()
                        .map(|t| sagemaker_cluster::ClusterKubernetesTaint {
                            key: s(&t.key),
                            value: (!t.value.is_empty()).then(|| s(&t.value)),
                            effect: s(t.effect.as_str()),
                        })
                        .collect()
                }),
            }
        });
        groups.push(sagemaker_cluster::ClusterInstanceGroup {
            execution_role: e(Expr::get_att(&role, "Arn")),
            instance_count: g.instance_count().into(),
            instance_group_name: s(g.name()),
            instance_type: Some(s(g.ml_instance_type())),
            threads_per_core: Some(g.threads().into()),
            instance_storage_configs: Some(vec![sagemaker_cluster::ClusterInstanceStorageConfig {
                ebs_volume_config: Some(sagemaker_cluster::ClusterEbsVolumeConfig {
                    volume_size_in_gb: Some(g.volume_gb().into()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            life_cycle_config: Some(sagemaker_cluster::ClusterLifeCycleConfig {
                on_create: Some(s(&h.lifecycle().on_create)),
                source_s3_uri: Some(e(source_uri.clone())),
                on_init_complete: None,
            }),
            on_start_deep_health_checks: (!g.health_checks().is_empty())
                .then(|| g.health_checks().iter().map(|c| s(c.as_str())).collect()),
            training_plan_arn,
            kubernetes_config,
            ..Default::default()
        });
    }
    let eks_arn = cx.attr(stage, &h.eks().arn());
    let subnets = h
        .subnet_refs()
        .iter()
        .map(|r| e(cx.attr(stage, &r.id())))
        .collect();
    let groups_sg = h
        .security_group_refs()
        .iter()
        .map(|r| e(cx.attr(stage, &r.id())))
        .collect();
    let cluster = cx.add(
        stage,
        &p("Cluster"),
        &sagemaker_cluster::Cluster {
            cluster_name: Some(s(h.name())),
            orchestrator: Some(sagemaker_cluster::Orchestrator {
                eks: Some(sagemaker_cluster::ClusterOrchestratorEksConfig {
                    cluster_arn: e(eks_arn),
                }),
                slurm: None,
            }),
            vpc_config: Some(sagemaker_cluster::VpcConfig {
                security_group_ids: groups_sg,
                subnets,
            }),
            node_recovery: Some(s(h.recovery().as_str())),
            instance_groups: Some(groups),
            ..Default::default()
        },
    );
    cx.output(
        stage,
        &format!("{}Arn", logical_id(&p("Cluster"))),
        "HyperPod cluster ARN",
        Expr::get_att(&cluster, "ClusterArn"),
    );
}

/// A role assumed by a Kubernetes service account through the cluster's OIDC provider.
struct IrsaRole<'a> {
    path: String,
    subject: &'a str,
    description: &'a str,
    managed: &'a [&'a str],
    inline: Option<(&'a str, PolicyDocument)>,
    /// A fixed name; such roles are also trusted by SageMaker (the operator's execution role).
    role_name: Option<String>,
}

fn irsa_role(cx: Cx, stage: StageId, op: &InferenceOperator, role: IrsaRole) -> String {
    let mut trust = PolicyDocument::new().statement(irsa_trust_statement(
        op.eks().oidc_provider.arn(),
        op.eks().cluster.oidc_issuer_url(),
        role.subject,
    ));
    if role.role_name.is_some() {
        trust = trust.statement(
            Statement::allow(["sts:AssumeRole"])
                .principal(PrincipalKind::Service, "sagemaker.amazonaws.com"),
        );
    }
    let trust_doc = cx.policy(stage, &trust);
    let policies = role.inline.map(|(name, doc)| {
        let doc = cx.policy(stage, &doc);
        vec![iam_role::Policy {
            policy_name: s(name),
            policy_document: doc,
        }]
    });
    cx.add(
        stage,
        &role.path,
        &iam_role::Role {
            assume_role_policy_document: trust_doc,
            description: Some(s(role.description)),
            managed_policy_arns: (!role.managed.is_empty())
                .then(|| role.managed.iter().map(|m| managed_policy(m)).collect()),
            policies,
            role_name: role.role_name.map(s),
            ..Default::default()
        },
    )
}

fn inference_operator(cx: Cx, stage: StageId, id: &str, op: &InferenceOperator) {
    let p = |child: &str| format!("{id}/{child}");
    let tls_path = p("TlsBucket");
    bucket(
        cx,
        stage,
        &tls_path,
        "Receives the TLS certificates the inference operator generates; the operator is its only writer",
    );
    let tls: Ref<kind::Bucket> = Ref::new(cx.stack.name(), tls_path.as_str());
    let ns = OPERATOR_NAMESPACE;
    let region = cx.stack.region().to_owned();
    let exec = irsa_role(
        cx,
        stage,
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
        stage,
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
        stage,
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
        stage,
        op,
        IrsaRole {
            path: p("LoadBalancerControllerRole"),
            subject: &format!("system:serviceaccount:{ns}:aws-load-balancer-controller"),
            description: "AWS Load Balancer Controller of the inference operator",
            managed: &[],
            inline: Some((
                "load-balancer-controller",
                crate::constructs::iam::load_balancer_controller_policy(),
            )),
            role_name: None,
        },
    );
    cx.suppress(stage, "CKV_AWS_111", "the load balancer controller creates load balancers and security groups whose ARNs exist only after it runs; changes to existing ones are conditioned on its elbv2.k8s.aws/cluster tag");
    let s3_policy = op.model_buckets_policy().map(|doc| ("read-models", doc));
    let s3csi = irsa_role(
        cx,
        stage,
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
    let cluster_name = cx.attr(stage, &op.eks().cluster.name());
    let addon = |name: &str| eks_addon::Addon {
        addon_name: s(name),
        cluster_name: e(cluster_name.clone()),
        resolve_conflicts: Some(s("OVERWRITE")),
        ..Default::default()
    };
    let cert_manager = cx.add(stage, &p("CertManagerAddon"), &addon("cert-manager"));
    let metrics = cx.add(stage, &p("MetricsServerAddon"), &addon("metrics-server"));
    let s3csi_addon = cx.add(
        stage,
        &p("S3CsiDriverAddon"),
        &eks_addon::Addon {
            service_account_role_arn: Some(e(Expr::get_att(&s3csi, "Arn"))),
            ..addon("aws-mountpoint-s3-csi-driver")
        },
    );
    let role_ref = |logical: &str| -> AttrRef {
        let r: Ref<kind::Role> = Ref::new(cx.stack.name(), format!("{id}/{logical}"));
        r.arn()
    };
    let config = Text::lit("{\"executionRoleArn\":\"")
        .push_ref(role_ref("ExecutionRole"))
        .push_lit("\",\"tlsCertificateS3Bucket\":\"")
        .push_ref(tls.name())
        .push_lit("\",\"hyperpodClusterArn\":\"")
        .push_ref(op.hyperpod().cluster.arn())
        .push_lit("\",\"jumpstartGatedModelDownloadRoleArn\":\"")
        .push_ref(role_ref("GatedModelRole"))
        .push_lit("\",\"alb\":{\"enabled\":true,\"serviceAccount\":{\"create\":true,\"roleArn\":\"")
        .push_ref(role_ref("LoadBalancerControllerRole"))
        .push_lit("\"}},\"keda\":{\"enabled\":true,\"auth\":{\"aws\":{\"irsa\":{\"enabled\":true,\"roleArn\":\"")
        .push_ref(role_ref("KedaRole"))
        .push_lit("\"}}}}}");
    let _ = (exec, keda, gated, alb);
    let config = cx.text(stage, &config);
    cx.add(
        stage,
        &p("Addon"),
        &eks_addon::Addon {
            configuration_values: Some(e(config)),
            ..addon("amazon-sagemaker-hyperpod-inference")
        },
    );
    cx.depends_on(stage, &[&cert_manager, &metrics, &s3csi_addon]);
}

fn node_group(cx: Cx, stage: StageId, id: &str, g: &ManagedNodeGroup) {
    let p = |child: &str| format!("{id}/{child}");
    let trust = cx.policy(stage, &service_trust("ec2.amazonaws.com"));
    let role = cx.add(
        stage,
        &p("NodeRole"),
        &iam_role::Role {
            assume_role_policy_document: trust,
            description: Some(s(format!("Nodes of EKS node group {id}"))),
            managed_policy_arns: Some(vec![
                managed_policy("AmazonEKSWorkerNodePolicy"),
                managed_policy("AmazonEC2ContainerRegistryReadOnly"),
                managed_policy("AmazonEKS_CNI_Policy"),
                managed_policy("AmazonSSMManagedInstanceCore"),
            ]),
            ..Default::default()
        },
    );
    let cluster_name = cx.attr(stage, &g.cluster().name());
    let mut groups: Vec<Val<String>> = g
        .security_group_refs()
        .iter()
        .map(|r| e(cx.attr(stage, &r.id())))
        .collect();
    if !groups.is_empty() {
        // Security groups set in a launch template replace the ones EKS would attach, so the
        // cluster's own group (control plane and other nodes) is added explicitly.
        groups.push(e(cx.attr(stage, &g.cluster().cluster_security_group_id())));
    }
    let efa_layout = g.efa_layout();
    let with_interfaces = g.efa_enabled() && efa_layout.len() > 1;
    let (market, reservation) = match g.capacity_source() {
        NodeCapacity::OnDemand => (None, None),
        NodeCapacity::CapacityBlock(block) => {
            let param = cx.parameter(
                stage,
                &format!("{}CapacityReservationId", logical_id(id)),
                Parameter {
                    description: format!("Capacity Block reservation feeding node group {id} (aws ec2 describe-capacity-reservations)"),
                    // A block bought by the Terraform module has no id before it is bought.
                    default: (!block.reservation_id.is_empty()).then(|| block.reservation_id.clone()),
                    allowed_pattern: Some(crate::constructs::nodes::RESERVATION_ID_PATTERN.to_owned()),
                    constraint: Some("a capacity reservation id such as cr-0123456789abcdef0".to_owned()),
                },
            );
            (
                Some(ec2_launch_template::InstanceMarketOptions {
                    market_type: Some(s("capacity-block")),
                    spot_options: None,
                }),
                Some(ec2_launch_template::CapacityReservationSpecification {
                    capacity_reservation_preference: None,
                    capacity_reservation_target: Some(
                        ec2_launch_template::CapacityReservationTarget {
                            capacity_reservation_id: Some(e(param)),
                            capacity_reservation_resource_group_arn: None,
                        },
                    ),
                }),
            )
        }
    };
    let network_interfaces = with_interfaces.then(|| {
        efa_layout
            .iter()
            .map(
                |(card, device, kind)| ec2_launch_template::NetworkInterface {
                    network_card_index: Some((*card).into()),
                    device_index: Some((*device).into()),
                    interface_type: Some(s(*kind)),
                    groups: Some(groups.clone()),
                    delete_on_termination: Some(true.into()),
                    ..Default::default()
                },
            )
            .collect()
    });
    if with_interfaces {
        groups.clear();
    }
    let stack_name = cx.stack.name().to_owned();
    let tag_spec = |resource: &str| ec2_launch_template::TagSpecification {
        resource_type: Some(s(resource)),
        tags: Some(vec![
            ec2_launch_template::Tag {
                key: s("Name"),
                value: s(format!("{stack_name}-{}", id.to_ascii_lowercase())),
            },
            ec2_launch_template::Tag {
                key: s("hyperforge:stack"),
                value: s(&stack_name),
            },
        ]),
    };
    let template = cx.add(
        stage,
        &p("LaunchTemplate"),
        &ec2_launch_template::LaunchTemplate {
            launch_template_data: ec2_launch_template::LaunchTemplateData {
                instance_type: Some(s(g.instance_type())),
                instance_market_options: market,
                capacity_reservation_specification: reservation,
                metadata_options: Some(ec2_launch_template::MetadataOptions {
                    http_tokens: Some(s("required")),
                    http_put_response_hop_limit: Some(1.into()),
                    http_endpoint: Some(s("enabled")),
                    ..Default::default()
                }),
                block_device_mappings: Some(vec![ec2_launch_template::BlockDeviceMapping {
                    device_name: Some(s("/dev/xvda")),
                    ebs: Some(ec2_launch_template::Ebs {
                        volume_size: Some(g.root_volume().into()),
                        volume_type: Some(s("gp3")),
                        encrypted: Some(true.into()),
                        delete_on_termination: Some(true.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                security_group_ids: (!groups.is_empty()).then_some(groups),
                network_interfaces,
                user_data: g.local_nvme_raid0().then(|| {
                    e(Expr::Base64(Box::new(Expr::str(
                        crate::constructs::nodes::RAID0_NODE_CONFIG,
                    ))))
                }),
                tag_specifications: Some(vec![tag_spec("instance"), tag_spec("volume")]),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let (min, desired, max) = g.sizes();
    let subnets = g
        .subnet_refs()
        .iter()
        .map(|r| e(cx.attr(stage, &r.id())))
        .collect();
    cx.add(
        stage,
        &p("NodeGroup"),
        &eks_nodegroup::Nodegroup {
            cluster_name: e(cluster_name),
            node_role: e(Expr::get_att(&role, "Arn")),
            subnets,
            ami_type: Some(s(g.ami().as_str())),
            capacity_type: Some(s(match g.capacity_source() {
                NodeCapacity::OnDemand => "ON_DEMAND",
                NodeCapacity::CapacityBlock(_) => "CAPACITY_BLOCK",
            })),
            launch_template: Some(eks_nodegroup::LaunchTemplateSpecification {
                id: Some(e(Expr::reference(&template))),
                version: Some(e(Expr::get_att(&template, "LatestVersionNumber"))),
                name: None,
            }),
            scaling_config: Some(eks_nodegroup::ScalingConfig {
                min_size: Some(min.into()),
                desired_size: Some(desired.into()),
                max_size: Some(max.into()),
            }),
            labels: (!g.labels().is_empty())
                .then(|| g.labels().iter().map(|(k, v)| (k.clone(), s(v))).collect()),
            taints: (!g.taints().is_empty()).then(|| {
                g.taints()
                    .iter()
                    .map(|t| eks_nodegroup::Taint {
                        key: Some(s(&t.key)),
                        value: Some(s(&t.value)),
                        effect: Some(s("NO_SCHEDULE")),
                    })
                    .collect()
            }),
            ..Default::default()
        },
    );
}

fn karpenter(cx: Cx, stage: StageId, id: &str, k: &crate::constructs::Karpenter) {
    let p = |child: &str| format!("{id}/{child}");
    let node_trust = cx.policy(stage, &service_trust("ec2.amazonaws.com"));
    let node_role = cx.add(
        stage,
        &p("NodeRole"),
        &iam_role::Role {
            assume_role_policy_document: node_trust,
            description: Some(s("Nodes launched by Karpenter")),
            role_name: Some(s(k.node_role_name())),
            managed_policy_arns: Some(vec![
                managed_policy("AmazonEKSWorkerNodePolicy"),
                managed_policy("AmazonEC2ContainerRegistryReadOnly"),
                managed_policy("AmazonEKS_CNI_Policy"),
                managed_policy("AmazonSSMManagedInstanceCore"),
            ]),
            ..Default::default()
        },
    );
    let cluster_name = cx.attr(stage, &k.cluster().name());
    cx.add(
        stage,
        &p("NodeAccessEntry"),
        &eks_access_entry::AccessEntry {
            cluster_name: e(cluster_name.clone()),
            principal_arn: e(Expr::get_att(&node_role, "Arn")),
            r#type: Some(s("EC2_LINUX")),
            ..Default::default()
        },
    );
    let handle = crate::constructs::Construct::handle(k, cx.stack.name());
    let trust = cx.policy(
        stage,
        &PolicyDocument::new().statement(
            Statement::allow(["sts:AssumeRole", "sts:TagSession"])
                .principal(PrincipalKind::Service, "pods.eks.amazonaws.com"),
        ),
    );
    let policy = crate::constructs::karpenter::controller_policy(
        &handle.cluster_name,
        k.cluster().arn(),
        handle.node_role.arn(),
    );
    let policy = cx.policy(stage, &policy);
    let role = cx.add(
        stage,
        &p("ControllerRole"),
        &iam_role::Role {
            assume_role_policy_document: trust,
            description: Some(s("Karpenter controller (EKS Pod Identity)")),
            policies: Some(vec![iam_role::Policy {
                policy_name: s("karpenter-controller"),
                policy_document: policy,
            }]),
            ..Default::default()
        },
    );
    cx.add(
        stage,
        &p("PodIdentityAssociation"),
        &eks_pod_identity_association::PodIdentityAssociation {
            cluster_name: e(cluster_name),
            namespace: s(crate::constructs::karpenter::KARPENTER_NAMESPACE),
            service_account: s(crate::constructs::karpenter::KARPENTER_SERVICE_ACCOUNT),
            role_arn: e(Expr::get_att(&role, "Arn")),
            ..Default::default()
        },
    );
}
