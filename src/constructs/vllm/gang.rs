//! Gang admission of a multi-node replica: Kueue admits each LeaderWorkerSet group as one
//! workload, all of its pods or none (decision 0050). The deployment's own ResourceFlavor (the
//! nodes its pods select), ClusterQueue (a quota of exactly the groups the deployment may run:
//! its replicas, or its autoscaling maximum, times the pods of a group times what each pod
//! requests) and LocalQueue (in its namespace), and the queue label its LeaderWorkerSet
//! carries. A group Kueue cannot admit whole stays gated and holds no node, so two partial
//! groups never wait on each other's GPUs.

use crate::resources::kubernetes::crd::cluster_queue::{
    ClusterQueue, ClusterQueueNamespaceSelector, ClusterQueueResourceGroups,
    ClusterQueueResourceGroupsFlavors, ClusterQueueResourceGroupsFlavorsResources,
    ClusterQueueSpec,
};
use crate::resources::kubernetes::crd::local_queue::{LocalQueue, LocalQueueSpec};
use crate::resources::kubernetes::crd::resource_flavor::{ResourceFlavor, ResourceFlavorSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// The label naming a workload's LocalQueue (Kueue's `constants.QueueLabel`), on the
/// LeaderWorkerSet itself: Kueue's webhook copies it into both pod templates.
pub const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";

/// The longest LeaderWorkerSet name Kueue admits: its pods' `kueue.x-k8s.io/pod-group-name`
/// label is the name and a group suffix, within a label value's 63 characters (Kueue's
/// LeaderWorkerSet guide, "Long LeaderWorkerSet names", v0.19.2).
pub const GANG_NAME_MAX: usize = 39;

/// Kueue's objects for one multi-node deployment, in apply order.
#[derive(Clone, Debug, PartialEq)]
pub struct GangObjects {
    /// The nodes the group's pods run on (cluster-scoped).
    pub flavor: ResourceFlavor,
    /// The quota of the deployment's groups (cluster-scoped).
    pub cluster_queue: ClusterQueue,
    /// The queue the LeaderWorkerSet names, in its namespace.
    pub local_queue: LocalQueue,
}

/// The objects admitting the groups of deployment `name` in `namespace`: `groups` at most,
/// each of `pods` pods of spec `pod` (leader and workers request the same).
pub fn gang_objects(
    name: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    pod: &PodSpec,
    pods: u32,
    groups: u32,
) -> GangObjects {
    // Cluster-scoped: the namespace keeps two namespaces' deployments of one name apart.
    let cluster_name = crate::app::fit_name(&format!("{namespace}-{name}"), 63);
    let meta = |name: &str, namespace: Option<&str>| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(labels.clone()),
        ..Default::default()
    };
    let per_group = u128::from(pods) * u128::from(groups);
    let requests = pod_requests(pod);
    let resources: Vec<ClusterQueueResourceGroupsFlavorsResources> = requests
        .iter()
        .map(
            |(resource, milli)| ClusterQueueResourceGroupsFlavorsResources {
                name: resource.clone(),
                nominal_quota: IntOrString::String(format_quantity(
                    resource,
                    milli.saturating_mul(per_group),
                )),
                ..Default::default()
            },
        )
        .collect();
    GangObjects {
        flavor: ResourceFlavor {
            metadata: meta(&cluster_name, None),
            spec: ResourceFlavorSpec {
                node_labels: pod.node_selector.clone(),
                ..Default::default()
            },
        },
        cluster_queue: ClusterQueue {
            metadata: meta(&cluster_name, None),
            spec: ClusterQueueSpec {
                namespace_selector: Some(ClusterQueueNamespaceSelector {
                    match_labels: Some(BTreeMap::from([(
                        "kubernetes.io/metadata.name".to_owned(),
                        namespace.to_owned(),
                    )])),
                    ..Default::default()
                }),
                resource_groups: Some(vec![ClusterQueueResourceGroups {
                    covered_resources: requests.keys().cloned().collect(),
                    flavors: vec![ClusterQueueResourceGroupsFlavors {
                        name: cluster_name.clone(),
                        resources,
                    }],
                }]),
                ..Default::default()
            },
        },
        local_queue: LocalQueue {
            metadata: meta(name, Some(namespace)),
            spec: LocalQueueSpec {
                cluster_queue: Some(cluster_name),
                ..Default::default()
            },
        },
    }
}

/// What a pod of `pod` requests, by resource, in thousandths, as the scheduler and Kueue
/// count it: the sum of its containers', or its largest init container's where that is
/// more. A container's limit stands for a request it leaves out (the API server defaults one
/// to the other). Every resource requested is covered: Kueue refuses a workload requesting
/// one its ClusterQueue does not name.
pub fn pod_requests(pod: &PodSpec) -> BTreeMap<String, u128> {
    fn each(c: &Container) -> BTreeMap<String, u128> {
        let Some(r) = &c.resources else {
            return BTreeMap::new();
        };
        let mut out = BTreeMap::new();
        for map in [&r.limits, &r.requests].into_iter().flatten() {
            for (name, q) in map {
                if let Some(milli) = milli(&q.0) {
                    out.insert(name.clone(), milli);
                }
            }
        }
        out
    }
    let mut total: BTreeMap<String, u128> = BTreeMap::new();
    for c in &pod.containers {
        for (name, milli) in each(c) {
            *total.entry(name).or_default() += milli;
        }
    }
    for c in pod.init_containers.iter().flatten() {
        for (name, milli) in each(c) {
            let t = total.entry(name).or_default();
            *t = (*t).max(milli);
        }
    }
    total.retain(|_, milli| *milli > 0);
    total
}

/// A quantity (`500m`, `8`, `1088Gi`, `1.5G`, `2e3`) in thousandths of its unit; `None` for
/// text that is not one or a negative value.
pub fn milli(q: &str) -> Option<u128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    // The number in units of 10^-9: every suffix below is exact on it.
    let mut nanos: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse::<u128>().ok()?.checked_mul(1_000_000_000)?
    };
    if fraction.len() > 9 || !fraction.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if !fraction.is_empty() {
        let digits: u128 = fraction.parse().ok()?;
        nanos = nanos.checked_add(digits * 10u128.pow(9 - fraction.len() as u32))?;
    }
    let scaled = match suffix {
        "" => nanos,
        "m" => nanos / 1000,
        "k" => nanos.checked_mul(1000)?,
        "M" => nanos.checked_mul(1_000_000)?,
        "G" => nanos.checked_mul(1_000_000_000)?,
        "T" => nanos.checked_mul(1_000_000_000_000)?,
        "P" => nanos.checked_mul(1_000_000_000_000_000)?,
        "Ki" => nanos.checked_mul(1 << 10)?,
        "Mi" => nanos.checked_mul(1 << 20)?,
        "Gi" => nanos.checked_mul(1 << 30)?,
        "Ti" => nanos.checked_mul(1 << 40)?,
        "Pi" => nanos.checked_mul(1 << 50)?,
        e if e.starts_with(['e', 'E']) => {
            let exp: u32 = e[1..].parse().ok().filter(|x| *x <= 18)?;
            nanos.checked_mul(10u128.pow(exp))?
        }
        _ => return None,
    };
    // Thousandths: the finest a Kubernetes quantity keeps.
    Some(scaled / 1_000_000)
}

/// `milli` thousandths of `resource` as Kubernetes writes a quantity: CPU in cores or
/// millicores, anything else with the largest binary suffix that keeps it whole.
pub fn format_quantity(resource: &str, milli: u128) -> String {
    if !milli.is_multiple_of(1000) {
        return format!("{milli}m");
    }
    let units = milli / 1000;
    if resource == "cpu" || units == 0 {
        return units.to_string();
    }
    for (suffix, size) in [
        ("Ti", 1u128 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if units.is_multiple_of(size) {
            return format!("{}{suffix}", units / size);
        }
    }
    units.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn quantities_read_and_write_exactly() {
        for (q, want) in [
            ("500m", 500),
            ("8", 8000),
            ("0.5", 500),
            ("1.5G", 1_500_000_000_000),
            ("1088Gi", 1088u128 * (1 << 30) * 1000),
            ("5120Mi", 5120u128 * (1 << 20) * 1000),
            ("2e3", 2_000_000),
        ] {
            assert_eq!(milli(q), Some(want), "{q}");
        }
        for bad in ["", "Gi", "-1", "1.2.3", "1X", "1e99", "abc"] {
            assert_eq!(milli(bad), None, "{bad}");
        }
        assert_eq!(format_quantity("cpu", 320_000), "320");
        assert_eq!(format_quantity("cpu", 1500), "1500m");
        assert_eq!(
            format_quantity("memory", 2176u128 * (1 << 30) * 1000),
            "2176Gi"
        );
        assert_eq!(format_quantity("nvidia.com/gpu", 16_000), "16");
        assert_eq!(format_quantity("memory", 1_000_000), "1000");
    }

    #[test]
    fn a_pod_requests_its_containers_sum_or_its_largest_init_container() {
        let container = |name: &str, cpu: &str, memory: &str, limits_only: bool| {
            let map = BTreeMap::from([
                ("cpu".to_owned(), Quantity(cpu.to_owned())),
                ("memory".to_owned(), Quantity(memory.to_owned())),
            ]);
            Container {
                name: name.to_owned(),
                resources: Some(ResourceRequirements {
                    requests: (!limits_only).then(|| map.clone()),
                    limits: Some(map),
                    ..Default::default()
                }),
                ..Default::default()
            }
        };
        let pod = PodSpec {
            containers: vec![
                container("a", "2", "1Gi", false),
                container("b", "500m", "1Gi", true),
            ],
            init_containers: Some(vec![container("init", "4", "256Mi", false)]),
            ..Default::default()
        };
        let r = pod_requests(&pod);
        assert_eq!(
            r["cpu"], 4000,
            "the init container's 4 cores over the sum's 2.5"
        );
        assert_eq!(r["memory"], 2u128 * (1 << 30) * 1000, "the sum's 2Gi");
        let g = gang_objects("kimi-k3", "serving", &BTreeMap::new(), &pod, 2, 3);
        let quota = &g.cluster_queue.spec.resource_groups.as_ref().unwrap()[0];
        assert_eq!(quota.covered_resources, ["cpu", "memory"]);
        let q: Vec<(&str, &IntOrString)> = quota.flavors[0]
            .resources
            .iter()
            .map(|r| (r.name.as_str(), &r.nominal_quota))
            .collect();
        assert_eq!(
            q,
            [
                ("cpu", &IntOrString::String("24".to_owned())),
                ("memory", &IntOrString::String("12Gi".to_owned()))
            ]
        );
        assert_eq!(
            g.local_queue.spec.cluster_queue.as_deref(),
            Some("serving-kimi-k3")
        );
        assert_eq!(g.flavor.metadata.name.as_deref(), Some("serving-kimi-k3"));
    }
}
