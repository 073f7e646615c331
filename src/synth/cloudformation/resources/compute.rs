//! CloudFormation lowering of the compute kinds: `AWS::SageMaker::Cluster`; inputs are
//! template parameters.

use super::network::parameter;
use super::{e, meta, s, Cx};
use crate::resources::{HyperPodCluster, Resource};
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
    meta(cx, r);
}
