//! The drain of a HyperPod instance group at its training plan's drain time: a CronJob that
//! cordons the group's nodes and evicts their pods through the Eviction API (as `kubectl
//! drain` does), so every server finishes its requests within its termination grace before
//! SageMaker begins terminating the plan's instances. HyperPod drains nothing itself when
//! it terminates or scales down instances ("HyperPod randomly chooses instances for
//! termination", SageMaker AI Developer Guide, "Scale down a SageMaker HyperPod cluster"),
//! so without it the end of a plan cuts every request in flight. On EKS managed node groups
//! the scheduled scale-down drains (EKS cordons and evicts); this is HyperPod's twin.
//!
//! Derived, never asked for: a served model on HyperPod whose instance group is on a training
//! plan with a window gets it (see `InferenceEndpoint::expand`), and the group gets the label
//! the drain selects its nodes by ([`INSTANCE_GROUP_LABEL`], see `HyperPodCluster::expand`).

use super::vllm::InferenceEndpoint;
use super::{window_schedule, Construct, Launcher, Placements};
use crate::app::Stack;
use crate::catalog::capacity::{BlockSchedule, Reservation};
use crate::catalog::time::{format_utc, kubernetes_cron};
use crate::constructs::weights::{STAGER_IMAGE, STAGER_IMAGE_DIGEST};
use crate::resources::kubernetes::{locked_down_container, pod_template, restricted_pod};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Affinity, ConfigMap, ConfigMapVolumeSource, Container, EnvVar, EnvVarSource, Namespace,
    NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectFieldSelector,
    PodSpec, ResourceRequirements, ServiceAccount, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// The namespace the drain CronJobs run in.
pub const DRAIN_NAMESPACE: &str = "capacity-drain";

/// The label the drain selects a group's nodes by, valued with the group's name: set on each
/// drained group's `KubernetesConfig` labels, which HyperPod applies to every node it launches
/// in the group and keeps through replacements ("The cluster works to reconcile the actual
/// state with the declared state", SageMaker API Reference, `ClusterNodeDetails`). A label
/// hyperforge sets itself, rather than one HyperPod is seen to set without documenting it.
pub const INSTANCE_GROUP_LABEL: &str = "hyperforge.io/instance-group";

/// The drain program, run by the CronJob's container (`python3 /drain/drain_instance_group.py`).
pub const DRAIN_SCRIPT: &str = include_str!("assets/drain_instance_group.py");

/// Minutes before the drain time the CronJob fires: the pod is scheduled and its image pulled
/// by then, and the program waits for the drain time itself.
pub const START_LEAD_MINUTES: i64 = 5;

/// The image the drain runs: the stager's pinned Python image (its program needs only the
/// standard library).
pub fn image() -> String {
    format!("{STAGER_IMAGE}@{STAGER_IMAGE_DIGEST}")
}

/// The longest CronJob name: its Jobs append 11 characters to it and stay DNS labels.
const MAX_CRON_JOB_NAME: usize = 52;

/// The name of the drain objects of instance group `group` (HyperPod allows upper-case
/// letters and 63 characters; Kubernetes names do not): `drain-<group>` in lower case, with
/// a short stable hash of the group's own name when lowering or shortening changed it, so two
/// groups never share one.
pub fn object_name(group: &str) -> String {
    // Anything but a lower-case letter, a digit or `-` becomes `-` (HyperPod's own names have
    // only letters, digits and `-`; this keeps any input a Kubernetes name).
    let lowered: String = group
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let plain = format!("drain-{lowered}");
    if plain.len() <= MAX_CRON_JOB_NAME && lowered == group && !group.ends_with('-') {
        return plain;
    }
    // FNV-1a, 32 bits: stable across builds and platforms.
    let hash = group.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    // ASCII by construction, so any byte is a character boundary.
    let kept = plain[..plain.len().min(MAX_CRON_JOB_NAME - 9)].trim_end_matches('-');
    format!("{kept}-{hash:08x}")
}

/// One instance group drained at its training plan's drain time.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupDrain {
    /// The id of the endpoint whose stage holds the drain: the stack's first HyperPod endpoint
    /// on the group's instance type.
    pub endpoint: String,
    /// The instance group's name.
    pub group: String,
    /// The group's display path (its capacity claim's).
    pub path: String,
    /// Its plan's schedule.
    pub schedule: BlockSchedule,
}

impl GroupDrain {
    /// The CronJob that drains it, `namespace/name`.
    pub fn cron_job(&self) -> String {
        format!("{DRAIN_NAMESPACE}/{}", object_name(&self.group))
    }
}

/// The drains `stack` holds: one for each HyperPod instance group on a training plan whose
/// window is given, when a HyperPod endpoint serves on its instance type (nothing serves on
/// it otherwise, and no Kubernetes stage would hold the drain), in the stack's order.
pub fn drains(stack: &Stack) -> Vec<GroupDrain> {
    let placements = Placements::new(stack);
    let endpoints: Vec<&InferenceEndpoint> = placements
        .all()
        .filter_map(|p| p.construct.downcast::<InferenceEndpoint>())
        .collect();
    let mut out = Vec::new();
    for claim in placements.all().flat_map(|p| p.facts().capacity) {
        if claim.launcher != Launcher::HyperPod {
            continue;
        }
        let Some((Reservation::TrainingPlan, (start, end), drain_by)) = claim.source.window()
        else {
            continue;
        };
        let Some(endpoint) = endpoints
            .iter()
            .find(|e| e.instance_type() == claim.service_instance_type)
        else {
            continue;
        };
        out.push(GroupDrain {
            endpoint: endpoint.id().to_owned(),
            group: claim
                .path
                .rsplit('/')
                .next()
                .unwrap_or(&claim.path)
                .to_owned(),
            schedule: window_schedule(Reservation::TrainingPlan, start, end, drain_by, None),
            path: claim.path,
        });
    }
    out
}

/// The objects draining one instance group, in apply order.
#[derive(Clone, Debug, PartialEq)]
pub struct DrainObjects {
    /// The drains' namespace.
    pub namespace: Namespace,
    /// The program's service account.
    pub account: ServiceAccount,
    /// What it may do across the cluster: nodes list, patch (cordon); pods list; evictions
    /// create.
    pub cluster_role: ClusterRole,
    /// Its binding to the service account.
    pub cluster_binding: ClusterRoleBinding,
    /// What it may do in its namespace: suspend its own CronJob once it has run.
    pub role: Role,
    /// Its binding to the service account.
    pub binding: RoleBinding,
    /// The program.
    pub config: ConfigMap,
    /// The CronJob.
    pub cron_job: CronJob,
}

/// The objects draining instance group `group` of stack `part_of` on `schedule`.
pub fn objects(part_of: &str, group: &str, schedule: &BlockSchedule) -> DrainObjects {
    let name = object_name(group);
    let cluster_name = format!("{DRAIN_NAMESPACE}:{name}");
    let labels = BTreeMap::from([
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "hyperforge".to_owned(),
        ),
        (
            "app.kubernetes.io/component".to_owned(),
            "capacity-drain".to_owned(),
        ),
        ("app.kubernetes.io/part-of".to_owned(), part_of.to_owned()),
    ]);
    let meta = |name: &str, namespaced: bool| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespaced.then(|| DRAIN_NAMESPACE.to_owned()),
        labels: Some(labels.clone()),
        ..Default::default()
    };
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let rule = |resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..Default::default()
    };
    let cluster_role = ClusterRole {
        metadata: meta(&cluster_name, false),
        rules: Some(vec![
            rule(&["nodes"], &["list", "patch"]),
            rule(&["pods"], &["list"]),
            rule(&["pods/eviction"], &["create"]),
        ]),
        ..Default::default()
    };
    // The service account, bound to a role of `kind` named `role`.
    let bound_to = |kind: &str, role: &str| {
        (
            RoleRef {
                api_group: "rbac.authorization.k8s.io".to_owned(),
                kind: kind.to_owned(),
                name: role.to_owned(),
            },
            Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: name.clone(),
                namespace: Some(DRAIN_NAMESPACE.to_owned()),
                api_group: None,
            }]),
        )
    };
    let (role_ref, subjects) = bound_to("ClusterRole", &cluster_name);
    let cluster_binding = ClusterRoleBinding {
        metadata: meta(&cluster_name, false),
        role_ref,
        subjects,
    };
    // Once it has run, the program suspends its CronJob: nothing fires after the drain (the
    // CronJob's schedule has no year). Applying the stage again (after an extension) resumes it.
    let role = Role {
        metadata: meta(&name, true),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["batch".to_owned()]),
            resources: Some(strings(&["cronjobs"])),
            resource_names: Some(vec![name.clone()]),
            verbs: strings(&["patch"]),
            ..Default::default()
        }]),
    };
    let (role_ref, subjects) = bound_to("Role", &name);
    let binding = RoleBinding {
        metadata: meta(&name, true),
        role_ref,
        subjects,
    };
    let config = ConfigMap {
        metadata: meta(&name, true),
        data: Some(BTreeMap::from([(
            "drain_instance_group.py".to_owned(),
            DRAIN_SCRIPT.to_owned(),
        )])),
        ..Default::default()
    };
    let env = |key: &str, value: String| EnvVar {
        name: key.to_owned(),
        value: Some(value),
        value_from: None,
    };
    let field = |key: &str, path: &str| EnvVar {
        name: key.to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                api_version: None,
            }),
            ..Default::default()
        }),
    };
    let q = |s: &str| Quantity(s.to_owned());
    let container = Container {
        name: "drain".to_owned(),
        image: Some(image()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(strings(&["python3", "/drain/drain_instance_group.py"])),
        env: Some(vec![
            env("INSTANCE_GROUP", group.to_owned()),
            env("DRAIN_AT", format_utc(schedule.drain_by)),
            env("TERMINATE_AT", format_utc(schedule.terminations_from)),
            env("CRON_JOB", name.clone()),
            field("POD_NAME", "metadata.name"),
            field("POD_NAMESPACE", "metadata.namespace"),
            env("PYTHONUNBUFFERED", "1".to_owned()),
        ]),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_owned(), q("50m")),
                ("memory".to_owned(), q("64Mi")),
            ])),
            limits: Some(BTreeMap::from([("memory".to_owned(), q("128Mi"))])),
            claims: None,
        }),
        security_context: Some(locked_down_container()),
        volume_mounts: Some(vec![VolumeMount {
            name: "drain".to_owned(),
            mount_path: "/drain".to_owned(),
            read_only: Some(true),
            ..Default::default()
        }]),
        ..Default::default()
    };
    // Never on the group it drains: it would evict itself.
    let elsewhere = Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: INSTANCE_GROUP_LABEL.to_owned(),
                        operator: "NotIn".to_owned(),
                        values: Some(vec![group.to_owned()]),
                    }]),
                    match_fields: None,
                }],
            }),
            preferred_during_scheduling_ignored_during_execution: None,
        }),
        ..Default::default()
    };
    let pod = PodSpec {
        service_account_name: Some(name.clone()),
        // The program calls the Kubernetes API (cordon, evict) with this token.
        automount_service_account_token: Some(true),
        restart_policy: Some("Never".to_owned()),
        affinity: Some(elsewhere),
        security_context: Some(restricted_pod()),
        containers: vec![container],
        volumes: Some(vec![Volume {
            name: "drain".to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let fires_at = schedule.drain_by - START_LEAD_MINUTES;
    // Until SageMaker's terminations, plus the wait before the drain time.
    let runs_for = (schedule.terminations_from - fires_at).max(1) * 60 + 300;
    let cron_job = CronJob {
        metadata: meta(&name, true),
        spec: Some(CronJobSpec {
            schedule: kubernetes_cron(fires_at),
            time_zone: Some("Etc/UTC".to_owned()),
            concurrency_policy: Some("Forbid".to_owned()),
            // Explicit, so that applying the stage again resumes a CronJob its run suspended.
            suspend: Some(false),
            // A start missed by more than the lead is late for the drain.
            starting_deadline_seconds: Some(START_LEAD_MINUTES * 60),
            successful_jobs_history_limit: Some(1),
            failed_jobs_history_limit: Some(1),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                spec: Some(JobSpec {
                    backoff_limit: Some(2),
                    active_deadline_seconds: Some(runs_for),
                    template: pod_template(&labels, pod),
                    ..Default::default()
                }),
            },
        }),
        ..Default::default()
    };
    let namespace = Namespace {
        metadata: meta(DRAIN_NAMESPACE, false),
        ..Default::default()
    };
    let account = ServiceAccount {
        metadata: meta(&name, true),
        ..Default::default()
    };
    DrainObjects {
        namespace,
        account,
        cluster_role,
        cluster_binding,
        role,
        binding,
        config,
        cron_job,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kubernetes_names_whatever_the_group_is_called() {
        assert_eq!(object_name("gpu"), "drain-gpu");
        let upper = object_name("Gpu");
        assert_ne!(upper, object_name("gpu"));
        assert!(upper.starts_with("drain-gpu-"));
        let long = "a".repeat(63);
        let long_name = object_name(&long);
        assert!(long_name.len() <= MAX_CRON_JOB_NAME);
        assert_ne!(long_name, object_name(&"a".repeat(62)));
        // Whatever the input (a description that failed validation, a library caller): a
        // name, never a panic on a character boundary.
        let odd = format!("{}ü\u{0}/x", "g".repeat(36));
        assert_ne!(object_name(&odd), object_name(&"g".repeat(36)));
        for g in [
            "ü",
            &odd,
            "gpu",
            "Gpu",
            &long,
            "a-b-c-d-e-f-g-h-i-j-k-l-m-n-o-p-q-r-s-t-u-v-w-x-y-z",
        ] {
            let n = object_name(g);
            assert!(n.len() <= MAX_CRON_JOB_NAME, "{n}");
            assert!(n
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
            assert!(!n.ends_with('-'), "{n}");
        }
    }
}
