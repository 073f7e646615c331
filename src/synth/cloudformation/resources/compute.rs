//! CloudFormation lowering of the compute kinds: `AWS::SageMaker::Cluster`,
//! `AWS::EC2::LaunchTemplate`, `AWS::EKS::Nodegroup`, `AWS::IAM::InstanceProfile` and
//! `AWS::EC2::Instance`; inputs are template parameters.

use super::network::parameter;
use super::{e, s, Cx};
use crate::app::logical_id;
use crate::resources::{
    CapacityBlockPurchase, HyperPodCluster, Instance, InstanceProfile, LaunchTemplate, NodeGroup,
    ReservedMarket, Resource,
};
use crate::synth::cloudformation::expr::{Expr, Val};
use crate::synth::cloudformation::l1::*;

pub(super) fn hyperpod_cluster(cx: Cx, r: &Resource, c: &HyperPodCluster) {
    let mut groups = Vec::new();
    for g in &c.instance_groups {
        let training_plan_arn = g
            .training_plan
            .as_ref()
            .map(|input| e(parameter(cx, r.stage, input)));
        let kubernetes_config = (!g.labels.is_empty() || !g.taints.is_empty()).then(|| {
            sagemaker_cluster::ClusterKubernetesConfig {
                labels: (!g.labels.is_empty())
                    .then(|| g.labels.iter().map(|(k, v)| (k.clone(), s(v))).collect()),
                taints: (!g.taints.is_empty()).then(|| {
                    g.taints
                        .iter()
                        .map(|t| sagemaker_cluster::ClusterKubernetesTaint {
                            key: s(&t.key),
                            value: t.value.as_ref().map(s),
                            effect: s(&t.effect),
                        })
                        .collect()
                }),
            }
        });
        let execution_role = cx.attr(r.stage, &g.execution_role);
        let source_uri = cx.text(r.stage, &g.lifecycle.source_s3_uri);
        groups.push(sagemaker_cluster::ClusterInstanceGroup {
            execution_role: e(execution_role),
            instance_count: g.count.into(),
            instance_group_name: s(&g.name),
            instance_type: Some(s(&g.instance_type)),
            threads_per_core: Some(g.threads_per_core.into()),
            instance_storage_configs: Some(vec![sagemaker_cluster::ClusterInstanceStorageConfig {
                ebs_volume_config: Some(sagemaker_cluster::ClusterEbsVolumeConfig {
                    volume_size_in_gb: Some(g.ebs_volume_gb.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            life_cycle_config: Some(sagemaker_cluster::ClusterLifeCycleConfig {
                on_create: Some(s(&g.lifecycle.on_create)),
                source_s3_uri: Some(e(source_uri)),
                on_init_complete: None,
            }),
            on_start_deep_health_checks: (!g.deep_health_checks.is_empty())
                .then(|| g.deep_health_checks.iter().map(s).collect()),
            training_plan_arn,
            kubernetes_config,
            ..Default::default()
        });
    }
    let eks_arn = cx.attr(r.stage, &c.eks_cluster);
    let subnets = c.subnets.iter().map(|a| e(cx.attr(r.stage, a))).collect();
    let security_groups = c
        .security_groups
        .iter()
        .map(|a| e(cx.attr(r.stage, a)))
        .collect();
    cx.add(
        r.stage,
        &r.path,
        &sagemaker_cluster::Cluster {
            cluster_name: Some(s(&c.name)),
            orchestrator: Some(sagemaker_cluster::Orchestrator {
                eks: Some(sagemaker_cluster::ClusterOrchestratorEksConfig {
                    cluster_arn: e(eks_arn),
                }),
                slurm: None,
            }),
            vpc_config: Some(sagemaker_cluster::VpcConfig {
                security_group_ids: security_groups,
                subnets,
            }),
            node_recovery: Some(s(&c.node_recovery)),
            instance_groups: Some(groups),
            ..Default::default()
        },
    );
}

/// CloudFormation cannot buy a Capacity Block: the launch template's reservation parameter
/// stands for the block.
pub(super) fn capacity_block_purchase(_cx: Cx, _r: &Resource, _p: &CapacityBlockPurchase) {}

pub(super) fn launch_template(cx: Cx, r: &Resource, t: &LaunchTemplate) {
    let (market, reservation) = match &t.reservation {
        None => (None, None),
        Some(target) => {
            let id = parameter(cx, r.stage, &target.reservation);
            (
                match target.market {
                    ReservedMarket::CapacityBlock => {
                        Some(ec2_launch_template::InstanceMarketOptions {
                            market_type: Some(s("capacity-block")),
                            spot_options: None,
                        })
                    }
                    ReservedMarket::OnDemand => None,
                },
                Some(ec2_launch_template::CapacityReservationSpecification {
                    capacity_reservation_preference: None,
                    capacity_reservation_target: Some(
                        ec2_launch_template::CapacityReservationTarget {
                            capacity_reservation_id: Some(e(id)),
                            capacity_reservation_resource_group_arn: None,
                        },
                    ),
                }),
            )
        }
    };
    let mut network_interfaces = Vec::new();
    for i in &t.network_interfaces {
        let groups = i
            .security_groups
            .iter()
            .map(|a| e(cx.attr(r.stage, a)))
            .collect();
        network_interfaces.push(ec2_launch_template::NetworkInterface {
            network_card_index: Some(i.network_card_index.into()),
            device_index: Some(i.device_index.into()),
            interface_type: Some(s(&i.interface_type)),
            groups: Some(groups),
            delete_on_termination: Some(i.delete_on_termination.into()),
            ..Default::default()
        });
    }
    let groups: Vec<Val<String>> = t
        .security_groups
        .iter()
        .map(|a| e(cx.attr(r.stage, a)))
        .collect();
    let tags = t.tags_with(cx.tags);
    let tag_spec = |resource: &String| ec2_launch_template::TagSpecification {
        resource_type: Some(s(resource)),
        tags: Some(
            tags.iter()
                .map(|(k, v)| ec2_launch_template::Tag {
                    key: s(k),
                    value: s(v),
                })
                .collect(),
        ),
    };
    let m = &t.metadata;
    let v = &t.root_volume;
    cx.add(
        r.stage,
        &r.path,
        &ec2_launch_template::LaunchTemplate {
            launch_template_data: ec2_launch_template::LaunchTemplateData {
                instance_type: Some(s(&t.instance_type)),
                instance_market_options: market,
                capacity_reservation_specification: reservation,
                metadata_options: Some(ec2_launch_template::MetadataOptions {
                    http_tokens: Some(s(if m.tokens_required {
                        "required"
                    } else {
                        "optional"
                    })),
                    http_put_response_hop_limit: Some(m.hop_limit.into()),
                    http_endpoint: Some(s(if m.endpoint_enabled {
                        "enabled"
                    } else {
                        "disabled"
                    })),
                    ..Default::default()
                }),
                block_device_mappings: Some(vec![ec2_launch_template::BlockDeviceMapping {
                    device_name: Some(s(&v.device_name)),
                    ebs: Some(ec2_launch_template::Ebs {
                        volume_size: Some(v.size_gb.into()),
                        volume_type: Some(s(&v.volume_type)),
                        encrypted: Some(v.encrypted.into()),
                        delete_on_termination: Some(v.delete_on_termination.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                security_group_ids: (!groups.is_empty()).then_some(groups),
                network_interfaces: (!network_interfaces.is_empty()).then_some(network_interfaces),
                user_data: t
                    .user_data
                    .as_ref()
                    .map(|text| e(Expr::Base64(Box::new(Expr::str(text))))),
                tag_specifications: Some(t.tagged.iter().map(tag_spec).collect()),
                ..Default::default()
            },
            // The template itself, which has no `Tags` property.
            tag_specifications: Some(vec![ec2_launch_template::LaunchTemplateTagSpecification {
                resource_type: Some(s("launch-template")),
                tags: tag_spec(&"launch-template".to_owned()).tags,
            }]),
            ..Default::default()
        },
    );
}

pub(super) fn node_group(cx: Cx, r: &Resource, g: &NodeGroup) {
    let cluster_name = cx.attr(r.stage, &g.cluster);
    let node_role = cx.attr(r.stage, &g.node_role);
    let subnets = g.subnets.iter().map(|a| e(cx.attr(r.stage, a))).collect();
    let template = logical_id(&g.launch_template);
    cx.add(
        r.stage,
        &r.path,
        &eks_nodegroup::Nodegroup {
            nodegroup_name: g.name.as_ref().map(s),
            cluster_name: e(cluster_name),
            node_role: e(node_role),
            subnets,
            ami_type: Some(s(&g.ami_type)),
            capacity_type: Some(s(&g.capacity_type)),
            launch_template: Some(eks_nodegroup::LaunchTemplateSpecification {
                id: Some(e(Expr::reference(&template))),
                version: Some(e(Expr::get_att(&template, "LatestVersionNumber"))),
                name: None,
            }),
            scaling_config: Some(eks_nodegroup::ScalingConfig {
                min_size: Some(g.min_size.into()),
                desired_size: Some(g.desired_size.into()),
                max_size: Some(g.max_size.into()),
            }),
            labels: (!g.labels.is_empty())
                .then(|| g.labels.iter().map(|(k, v)| (k.clone(), s(v))).collect()),
            taints: (!g.taints.is_empty()).then(|| {
                g.taints
                    .iter()
                    .map(|t| eks_nodegroup::Taint {
                        key: Some(s(&t.key)),
                        value: t.value.as_ref().map(s),
                        effect: Some(s(&t.effect)),
                    })
                    .collect()
            }),
            ..Default::default()
        },
    );
}

pub(super) fn instance_profile(cx: Cx, r: &Resource, p: &InstanceProfile) {
    let role = cx.attr(r.stage, &p.role);
    cx.add(
        r.stage,
        &r.path,
        &iam_instance_profile::InstanceProfile {
            roles: vec![e(role)],
            ..Default::default()
        },
    );
}

/// The AMI is a `{{resolve:ssm:...}}` dynamic reference to the public parameter, read when the
/// stack is created or updated.
pub(super) fn instance(cx: Cx, r: &Resource, i: &Instance) {
    let subnet = cx.attr(r.stage, &i.subnet);
    let profile = cx.attr(r.stage, &i.instance_profile);
    let groups = i
        .security_groups
        .iter()
        .map(|a| e(cx.attr(r.stage, a)))
        .collect();
    let m = &i.metadata;
    let v = &i.root_volume;
    cx.add(
        r.stage,
        &r.path,
        &ec2_instance::Instance {
            image_id: Some(s(format!("{{{{resolve:ssm:{}}}}}", i.image_parameter))),
            instance_type: Some(s(&i.instance_type)),
            subnet_id: Some(e(subnet)),
            security_group_ids: Some(groups),
            iam_instance_profile: Some(e(profile)),
            monitoring: Some(true.into()),
            ebs_optimized: Some(true.into()),
            metadata_options: Some(ec2_instance::MetadataOptions {
                http_endpoint: Some(s(if m.endpoint_enabled {
                    "enabled"
                } else {
                    "disabled"
                })),
                http_tokens: Some(s(if m.tokens_required {
                    "required"
                } else {
                    "optional"
                })),
                http_put_response_hop_limit: Some(m.hop_limit.into()),
                ..Default::default()
            }),
            block_device_mappings: Some(vec![ec2_instance::BlockDeviceMapping {
                device_name: s(&v.device_name),
                ebs: Some(ec2_instance::Ebs {
                    volume_size: Some(v.size_gb.into()),
                    volume_type: Some(s(&v.volume_type)),
                    encrypted: Some(v.encrypted.into()),
                    delete_on_termination: Some(v.delete_on_termination.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            tags: Some(vec![ec2_instance::Tag {
                key: s("Name"),
                value: s(&i.name_tag),
            }]),
            // The instance's tags (the stack's are merged in with every resource's) go to its
            // volumes when they are created.
            propagate_tags_to_volume_on_creation: Some(true.into()),
            ..Default::default()
        },
    );
}
