//! Lowering of each construct to CloudFormation L1 resources.

use super::expr::{Expr, Val};
use super::l1::*;
use super::template::{Parameter, StackTemplates};
use crate::app::{kind, Ref};
use crate::app::{logical_id, StageId};
use crate::constructs::iam::{deny_insecure_transport, service_trust, PolicyDocument};
use crate::constructs::nodes::{ManagedNodeGroup, NodeCapacity};
use crate::constructs::ConstructRef;

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
