//! Lowers what a stack runs into its manifest inventory ([`Inventory`]): the one place the
//! constructs' facts are read for the people operating the stack. Everything after synthesis
//! (the runbook, `hyperforge list`) reads the inventory instead.

use crate::app::Stack;
use crate::assembly::inventory::{
    AlertEntry, CapacityEndEntry, CapacityEntry, CapacitySourceEntry, EndpointEntry, InStage,
    Inventory, LaunchedBy, ReachedThrough, SecretKeyEntry, StagingEntry, Timeline,
};
use crate::constructs::vllm::objects::shm_gib;
use crate::constructs::{
    CapacityClaim, CapacitySource, Exposure, Launcher, ModelStoreHandle, Placements, SecretKeyRef,
    ServedModel,
};

/// The inventory of `stack`.
pub fn lower_inventory(stack: &Stack) -> Inventory {
    let placements = Placements::new(stack);
    let stage_name = |id| stack.stage(id).map(|s| s.name.clone()).unwrap_or_default();
    // Each construct's facts, once: the staging estimate depends on the nodes a Job runs on,
    // a reservation's timeline on the cold start of the model served on its instance type.
    let all: Vec<_> = placements.all().map(|p| (p.facts(), p)).collect();
    let claims: Vec<CapacityClaim> = all
        .iter()
        .flat_map(|(facts, _)| facts.capacity.iter().cloned())
        .collect();
    let cold_starts: Vec<(String, Option<u64>)> = all
        .iter()
        .flat_map(|(facts, _)| &facts.served_models)
        .map(|s| (s.instance_type.to_owned(), s.cold_start_secs()))
        .collect();
    let mut inventory = Inventory {
        description: stack.description_text().map(str::to_owned),
        ..Inventory::default()
    };
    for (facts, placed) in all {
        let stage = stage_name(placed.node.stage);
        if let Some(eks) = facts.eks_cluster {
            if eks.imported {
                use crate::assembly::inventory::{AddOn, ImportedCluster};
                use crate::constructs::ClusterAddOn;
                inventory.imported_cluster = Some(ImportedCluster {
                    name: eks.name.clone(),
                    runs: eks
                        .runs
                        .iter()
                        .map(|a| match a {
                            ClusterAddOn::PodIdentityAgent => AddOn::PodIdentityAgent,
                            ClusterAddOn::LoadBalancerController => AddOn::LoadBalancerController,
                            ClusterAddOn::NvidiaDevicePlugin => AddOn::NvidiaDevicePlugin,
                        })
                        .collect(),
                });
            }
            inventory.kubernetes_version = Some(eks.kubernetes_version);
        }
        if let Some(name) = facts.hyperpod_cluster {
            inventory.hyperpod_cluster = Some(InStage {
                name,
                stage: stage.clone(),
            });
        }
        for claim in facts.capacity {
            inventory.capacity.push(capacity(
                stack,
                &placed.node.id,
                &stage,
                claim,
                &cold_starts,
            ));
        }
        for served in &facts.served_models {
            inventory.endpoints.push(endpoint(served, &stage));
        }
        for st in facts.weight_stagings {
            let estimate = st.weight_bytes.and_then(|b| {
                crate::constructs::weights::staging_estimate(b, &st.node_selector, &claims)
            });
            inventory.stagings.push(StagingEntry {
                stage: stage.clone(),
                prefix: ModelStoreHandle::prefix(&st.model_id, &st.revision),
                model_id: st.model_id,
                revision: st.revision,
                bucket: st
                    .bucket
                    .as_literal()
                    .unwrap_or_else(|| st.bucket.resolved(stack.region(), "<account-id>")),
                bucket_output: st
                    .bucket
                    .as_literal()
                    .is_none()
                    .then(|| st.bucket_output.output_key()),
                job: st.job,
                namespace: st.namespace,
                image: st.image,
                weight_bytes: st.weight_bytes,
                estimate_secs: estimate.as_ref().map(|(secs, _)| *secs),
                limited_by: estimate.map(|(_, limit)| limit),
                hf_token: st.hf_token.as_ref().map(secret_key),
            });
        }
        for end in facts.capacity_ends {
            inventory.capacity_ends.push(CapacityEndEntry {
                stage: stage.clone(),
                reservation_input: end.reservation_id.as_deref().map(|id| {
                    crate::constructs::nodes::reservation_input(stack, id, &placed.node.id).name
                }),
                reservation_id: end.reservation_id,
                training_plan_input: end.training_plan_arn.as_deref().map(|arn| {
                    crate::constructs::hyperpod::training_plan_input(stack, arn, &placed.node.id)
                        .name
                }),
                training_plan_arn: end.training_plan_arn,
                end_time: end.end_time,
                lead_hours: end.lead_hours,
            });
        }
        inventory
            .node_pools
            .extend(facts.node_pools.into_iter().map(|name| InStage {
                name,
                stage: stage.clone(),
            }));
        inventory
            .dashboards
            .extend(facts.dashboards.into_iter().map(|name| InStage {
                name,
                stage: stage.clone(),
            }));
        inventory
            .alerts
            .extend(facts.alerts.into_iter().map(|a| AlertEntry {
                name: a.name,
                severity: a.severity,
                expression: a.expression,
                for_duration: a.for_duration,
                summary: a.summary,
                action: a.action,
            }));
    }
    inventory
}

fn secret_key(key: &SecretKeyRef) -> SecretKeyEntry {
    SecretKeyEntry {
        name: key.name.clone(),
        key: key.key.clone(),
    }
}

/// The entry of `claim`, made by construct `owner` in `stage`: a reservation that is a stack
/// input names it.
fn capacity(
    stack: &Stack,
    owner: &str,
    stage: &str,
    claim: CapacityClaim,
    cold_starts: &[(String, Option<u64>)],
) -> CapacityEntry {
    let ec2_type = claim
        .instance_type
        .strip_prefix("ml.")
        .unwrap_or(&claim.instance_type)
        .to_owned();
    let schedule = crate::constructs::reservation_schedule(&claim, cold_starts);
    let source = match claim.source {
        CapacitySource::OnDemand => CapacitySourceEntry::OnDemand,
        CapacitySource::CapacityReservation {
            reservation,
            availability_zone_id,
            reserved_instance_count,
        } => CapacitySourceEntry::CapacityReservation {
            input: crate::constructs::nodes::reservation_input(stack, &reservation, owner).name,
            reservation,
            zone_id: availability_zone_id,
            reserved_count: reserved_instance_count,
        },
        CapacitySource::CapacityBlock {
            reservation,
            availability_zone_id,
            reserved_instance_count,
            // In the schedule; the fee is priced by `hyperforge cost`.
            window: _,
            drain_by: _,
            upfront_fee_usd: _,
        } => CapacitySourceEntry::CapacityBlock {
            timeline: schedule.map(timeline),
            // A Karpenter pool selecting blocks by tag has no id to set.
            input: reservation.starts_with("cr-").then(|| {
                crate::constructs::nodes::reservation_input(stack, &reservation, owner).name
            }),
            reservation,
            zone_id: availability_zone_id,
            reserved_count: reserved_instance_count,
        },
        CapacitySource::TrainingPlan {
            arn,
            availability_zone_id,
            reserved_instance_count,
            // In the schedule; the fee is priced by `hyperforge cost`.
            window: _,
            drain_by: _,
            upfront_fee_usd: _,
        } => CapacitySourceEntry::TrainingPlan {
            timeline: schedule.map(timeline).map(|mut t| {
                t.drain_job = crate::constructs::drain::drains(stack)
                    .iter()
                    .find(|d| d.path == claim.path)
                    .map(crate::constructs::drain::GroupDrain::cron_job);
                t
            }),
            input: (claim.launcher == Launcher::HyperPod)
                .then(|| crate::constructs::hyperpod::training_plan_input(stack, &arn, owner).name),
            arn,
            zone_id: availability_zone_id,
            reserved_count: reserved_instance_count,
        },
    };
    CapacityEntry {
        path: claim.path,
        stage: stage.to_owned(),
        // The EC2 name, whoever launches it.
        instance_type: ec2_type,
        service_instance_type: claim.service_instance_type,
        launched_by: match claim.launcher {
            Launcher::Ec2 => LaunchedBy::Ec2,
            Launcher::HyperPod => LaunchedBy::HyperPod,
        },
        pool: claim.provisioned_on_demand,
        count: claim.count,
        max_count: claim.max_count,
        source,
    }
}

/// A Capacity Block's schedule as the manifest records it.
pub fn timeline(s: crate::catalog::capacity::BlockSchedule) -> Timeline {
    use crate::catalog::time::format_utc;
    Timeline {
        start: format_utc(s.start),
        serving_from: s.serving_from.map(format_utc),
        drain_by: format_utc(s.drain_by),
        drain_job: None,
        scale_down_at: format_utc(s.scale_down_at),
        terminations_from: format_utc(s.terminations_from),
        end: format_utc(s.end),
        days: s.days,
        cold_start_minutes: s.serving_from.map(|at| at - s.start),
        idle_minutes: s.idle_minutes,
    }
}

fn endpoint(served: &ServedModel<'_>, stage: &str) -> EndpointEntry {
    let server = served.server;
    let operator = served.hyperpod;
    let image = server.image_reference();
    EndpointEntry {
        name: served.object_name.to_owned(),
        namespace: served.namespace.to_owned(),
        stage: stage.to_owned(),
        model_id: server.model_id().to_owned(),
        served_model_name: server.served_name().to_owned(),
        revision: server.model_revision().map(str::to_owned),
        remote_code: server.runs_remote_code(),
        image_as_given: (image != server.image()).then(|| server.image().to_owned()),
        image,
        image_digest: server.pinned_digest().map(str::to_owned),
        engine_release: server.engine_release(),
        hf_token: server.hf_token().map(secret_key),
        api_key: server.api_key().map(secret_key),
        gpus: served.gpus,
        nodes_per_replica: served.shape.nodes_per_replica.max(1),
        fabric_check_floor_mb_per_s: (served.shape.nodes_per_replica > 1)
            .then(|| crate::catalog::instance(served.instance_type))
            .flatten()
            .map(|i| (i.all_reduce_floor_gbs() * 1000.0).round() as u64),
        shm_gib: shm_gib(served.gpus),
        port: u16::try_from(crate::constructs::vllm::VLLM_PORT).unwrap_or(u16::MAX),
        operator,
        reached_through: match served.exposure {
            Exposure::InternalLoadBalancer => ReachedThrough::InternalLoadBalancer,
            Exposure::InternetFacingLoadBalancer => ReachedThrough::InternetFacingLoadBalancer,
            Exposure::ClusterIp => ReachedThrough::ClusterIp,
        },
        startup_secs: server
            .startup_budget(served.instance_type, operator)
            .map(|b| b.total_secs)
            .unwrap_or(3600),
        cold_start_secs: served.cold_start_secs(),
        rollout_deadline_secs: server.rollout_deadline_secs(served.instance_type, operator),
        staged: server.staged_weights().is_some(),
        weights_source: server.weight_source(operator).label().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::time::parse_utc_minutes;

    /// A block opening at 04:55 and ending a week later at 11:30, serving a model with a
    /// 95-minute cold start and a 60-second termination grace: every time to the minute.
    #[test]
    fn a_blocks_timeline_is_exact_to_the_minute() {
        use crate::catalog::capacity::{block_schedule, minutes_from_secs};
        let start = parse_utc_minutes("2026-12-10T04:55:00Z").unwrap();
        let end = parse_utc_minutes("2026-12-17T11:30:00Z").unwrap();
        let grace = minutes_from_secs(crate::constructs::vllm::objects::TERMINATION_GRACE_SECS);
        let t = timeline(block_schedule(
            start,
            end,
            Some(minutes_from_secs(95 * 60)),
            grace,
        ));
        assert_eq!(t.start, "2026-12-10T04:55Z");
        assert_eq!(t.serving_from.as_deref(), Some("2026-12-10T06:30Z"));
        assert_eq!(t.scale_down_at, "2026-12-17T10:50Z");
        // The server's 60-second grace before EKS's scale-down.
        assert_eq!(t.drain_by, "2026-12-17T10:49Z");
        assert_eq!(t.terminations_from, "2026-12-17T11:00Z");
        assert_eq!(t.end, "2026-12-17T11:30Z");
        assert_eq!(t.days, 7);
        assert_eq!(t.cold_start_minutes, Some(95));
        assert_eq!(t.idle_minutes, Some(95 + 41));
        // A cold start of part of a minute counts as the whole minute; none known, none shown.
        assert_eq!(minutes_from_secs(61), 2);
        let unknown = timeline(block_schedule(start, end, None, grace));
        assert_eq!((unknown.serving_from, unknown.idle_minutes), (None, None));
    }
}
