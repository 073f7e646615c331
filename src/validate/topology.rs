//! How a stack's pieces fit together around its workloads (`HF0370`-`HF0375`): mistakes that
//! deploy without complaint and show only at runtime, after reserved capacity is paid for.
//!
//! - [`workload`]: a served model needs capacity of its instance type and launcher in its stack
//!   (`HF0370`: EC2 node groups and Karpenter pools for a `VllmDeployment`, HyperPod instance
//!   groups for an `InferenceEndpoint`), its `replicas` must fit what that capacity can ever
//!   provide (`HF0371`, with the arithmetic of [`super::autoscaling`]), and GPU pods on EKS nodes
//!   need the NVIDIA device plugin in an earlier Helm stage (`HF0373`).
//! - [`reservations`]: node groups consuming a Capacity Block of N instances whose desired sizes
//!   sum below N leave part of the paid block idle (`HF0372`).
//! - [`load_balancer_controller`]: the AWS Load Balancer Controller release needs the
//!   `LoadBalancerController` role of its cluster in the same or an earlier stage (`HF0374`),
//!   and its values must name the stack's cluster and region (`HF0375`).
//!
//! The workload rules apply when the stack creates the cluster the workload runs on
//! ([`Clusters`]). An instance type the catalog does not know is reported once, by its construct (`HF0303`);
//! these rules then say nothing about it, since its GPU count is unknown.

use super::autoscaling::ever;
use crate::app::{Stack, StageId, StageKind};
use crate::catalog::{self, InstanceType};
use crate::constructs::{
    CapacityClaim, CapacitySource, ClusterAddOn, Exposure, Launcher, LoadBalancerController,
    Placements, ServedModel,
};
use crate::diagnostics::{Code, Diagnostic, Diagnostics};
use std::collections::BTreeMap;

/// The EC2 name of an instance type given either way (`ml.p5.48xlarge` -> `p5.48xlarge`).
fn ec2_name(t: &str) -> &str {
    t.strip_prefix("ml.").unwrap_or(t)
}

/// What provides capacity to a launcher, for messages.
fn providers(hyperpod: bool) -> &'static str {
    if hyperpod {
        "HyperPod instance group"
    } else {
        "node group or Karpenter node pool"
    }
}

/// Which clusters a stack describes. A workload is checked against its stack's capacity and
/// Helm stages only when the stack creates the cluster it runs on (an EKS cluster for a
/// Deployment, a HyperPod cluster for an endpoint): a stack deploying onto a cluster described
/// elsewhere cannot know that cluster's nodes or add-ons.
#[derive(Clone, Debug, Default)]
pub struct Clusters {
    /// The stack creates an EKS cluster.
    pub eks: bool,
    /// The stack creates a HyperPod cluster.
    pub hyperpod: bool,
    /// The stack deploys onto an imported EKS cluster: its name and what it is stated to run.
    pub imported_eks: Option<(String, Vec<ClusterAddOn>)>,
}

impl Clusters {
    /// The clusters the constructs of `placements` create.
    pub fn of(placements: &Placements<'_>) -> Clusters {
        let mut clusters = Clusters::default();
        for placed in placements.all() {
            let facts = placed.facts();
            // An imported cluster may have nodes and add-ons the description does not show.
            clusters.eks |= facts.eks_cluster.as_ref().is_some_and(|c| !c.imported);
            if let Some(c) = facts.eks_cluster.as_ref().filter(|c| c.imported) {
                clusters.imported_eks = Some((c.name.clone(), c.runs.clone()));
            }
            clusters.hyperpod |= facts.hyperpod_cluster.is_some();
        }
        clusters
    }
}

/// Checks a served model (at `path`, in `stage`) against the capacity claims of its stack and
/// the Helm stages before it, when the stack creates the cluster it runs on.
pub fn workload(
    stack: &Stack,
    clusters: &Clusters,
    served: &ServedModel<'_>,
    path: &str,
    stage: StageId,
    claims: &[CapacityClaim],
    ds: &mut Diagnostics,
) {
    let described = if served.hyperpod {
        clusters.hyperpod
    } else {
        clusters.eks
    };
    if !described {
        if let (false, Some((name, runs))) = (served.hyperpod, &clusters.imported_eks) {
            imported_prerequisites(stack, name, runs, served, path, stage, ds);
        }
        return;
    }
    let served_type = ec2_name(served.instance_type);
    let Some(instance) = catalog::instance(served_type) else {
        return; // HF0303, from the construct
    };
    let same_launcher = |c: &&CapacityClaim| (c.launcher == Launcher::HyperPod) == served.hyperpod;
    let matching: Vec<&CapacityClaim> = claims
        .iter()
        .filter(same_launcher)
        .filter(|c| ec2_name(&c.instance_type) == served_type)
        .collect();
    if matching.is_empty() {
        no_capacity(served, path, instance, claims, ds);
    } else {
        replicas(served, path, instance, &matching, ds);
    }
    if !served.hyperpod && instance.gpu_count > 0 {
        device_plugin(stack, served, path, stage, None, ds);
    }
}

/// `HF0370`: no claim of the workload's type and launcher.
fn no_capacity(
    served: &ServedModel<'_>,
    path: &str,
    instance: &InstanceType,
    claims: &[CapacityClaim],
    ds: &mut Diagnostics,
) {
    let shown = if served.hyperpod {
        instance.ml_name()
    } else {
        instance.name.to_owned()
    };
    let mut provided: Vec<String> = claims
        .iter()
        .filter(|c| (c.launcher == Launcher::HyperPod) == served.hyperpod)
        .map(|c| format!("{} ({})", c.service_instance_type, c.path))
        .collect();
    provided.sort();
    provided.dedup();
    let kind = providers(served.hyperpod);
    let help = if provided.is_empty() {
        format!("add a {kind} of {shown} to the stack")
    } else {
        format!(
            "set `instance_type` to a type the stack provides ({}), or add a {kind} of {shown}",
            provided.join(", ")
        )
    };
    let mut diagnostic = Diagnostic::new(
        Code::WorkloadWithoutCapacity,
        path,
        format!(
            "`{}` runs on {shown}, but no {kind} of this stack provides {shown}: its pods would stay Pending",
            served.object_name
        ),
        help,
    )
    .at_field("instance_type");
    let other: Vec<&str> = claims
        .iter()
        .filter(|c| (c.launcher == Launcher::HyperPod) != served.hyperpod)
        .filter(|c| ec2_name(&c.instance_type) == instance.name)
        .map(|c| c.path.as_str())
        .collect();
    if !other.is_empty() {
        diagnostic = diagnostic.note(if served.hyperpod {
            format!(
                "{} provides {} as EKS nodes, which an InferenceEndpoint does not run on; a VllmDeployment does",
                other.join(", "),
                instance.name
            )
        } else {
            format!(
                "{} provides {} as HyperPod nodes, which a VllmDeployment does not run on; an InferenceEndpoint does",
                other.join(", "),
                instance.ml_name()
            )
        });
    }
    ds.push(diagnostic);
}

/// `HF0371`: `replicas` x GPUs per replica above what the matching claims can ever provide.
fn replicas(
    served: &ServedModel<'_>,
    path: &str,
    instance: &InstanceType,
    matching: &[&CapacityClaim],
    ds: &mut Diagnostics,
) {
    // An autoscaled Deployment states no replicas (its bound is HF0360); an endpoint's replicas
    // are the count the operator starts with.
    if served.autoscaling.is_some() && !served.hyperpod {
        return;
    }
    if served.gpus == 0 || served.replicas < 1 {
        return; // reported by the construct
    }
    let per_node = i64::from(instance.gpu_count / served.gpus);
    if per_node == 0 {
        return; // a pod larger than a node: HF0406
    }
    // A replica over several nodes takes that many whole nodes (one pod of all their GPUs on
    // each); a single-node replica shares its node with the others that fit.
    let nodes_per_replica = i64::from(served.shape.nodes_per_replica.max(1));
    let gpus = i64::from(served.gpus).saturating_mul(nodes_per_replica);
    let node_gpus = i64::from(instance.gpu_count);
    let ever_nodes: i64 = matching.iter().map(|c| ever(c)).sum();
    let ever_replicas = if nodes_per_replica > 1 {
        ever_nodes / nodes_per_replica
    } else {
        ever_nodes.saturating_mul(per_node)
    };
    let asked = served.replicas;
    if asked <= ever_replicas {
        return;
    }
    let grow = if served.hyperpod {
        "raise the instance groups' counts"
    } else {
        "raise the groups' maximum sizes"
    };
    let help = if ever_replicas > 0 {
        format!("set `replicas` to {ever_replicas} or less, or reserve more instances and {grow}")
    } else {
        format!("reserve instances for it and {grow}")
    };
    ds.push(
        Diagnostic::new(
            Code::ReplicasAboveCapacity,
            path,
            format!(
                "`{}` asks for {asked} replicas of {gpus} GPUs, {} GPUs; the capacity serving it can ever provide {} GPUs ({ever_nodes} {} nodes of {node_gpus} GPUs), room for {ever_replicas} replicas",
                served.object_name,
                asked.saturating_mul(gpus),
                ever_nodes.saturating_mul(node_gpus),
                instance.name,
            ),
            help,
        )
        .at_field("replicas")
        .note(format!(
            "capacity: {}",
            matching
                .iter()
                .map(|c| c.path.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    );
}

/// What a workload on an imported EKS cluster (`name`, stated to run `runs`) relies on the
/// cluster for: the NVIDIA device plugin for GPU pods (`HF0373`) and the AWS Load Balancer
/// Controller for a load balancer (`HF0383`), each installed by the stack or stated.
fn imported_prerequisites(
    stack: &Stack,
    name: &str,
    runs: &[ClusterAddOn],
    served: &ServedModel<'_>,
    path: &str,
    stage: StageId,
    ds: &mut Diagnostics,
) {
    let gpus = catalog::instance(ec2_name(served.instance_type)).is_some_and(|i| i.gpu_count > 0);
    if gpus {
        device_plugin(stack, served, path, stage, Some((name, runs)), ds);
    }
    let load_balancer = matches!(
        served.exposure,
        Exposure::InternalLoadBalancer | Exposure::InternetFacingLoadBalancer
    );
    let installed = stack
        .stages()
        .iter()
        .any(|s| matches!(&s.kind, StageKind::Helm(r) if r.is_aws_load_balancer_controller()));
    let controller = ClusterAddOn::LoadBalancerController;
    if load_balancer && !installed && !runs.contains(&controller) {
        ds.report(
            Code::ImportedClusterPrerequisite,
            path,
            format!(
                "`{}` is reached through a load balancer, which {} of the imported cluster `{name}` makes; the description neither installs it nor states that the cluster runs it",
                served.object_name,
                controller.describe()
            ),
            format!(
                "check that it runs (`kubectl -n kube-system get deployment aws-load-balancer-controller`) and state it: `{}`; or install it with the stack (`LoadBalancerController` and its Helm stage)",
                controller.stated()
            ),
        );
    }
}

/// `HF0373`: a GPU workload on EKS nodes with no NVIDIA device plugin release before its stage
/// (on an imported cluster, `imported`: its name and what it is stated to run, unless it is
/// stated to run the plugin).
fn device_plugin(
    stack: &Stack,
    served: &ServedModel<'_>,
    path: &str,
    stage: StageId,
    imported: Option<(&str, &[ClusterAddOn])>,
    ds: &mut Diagnostics,
) {
    if imported.is_some_and(|(_, runs)| runs.contains(&ClusterAddOn::NvidiaDevicePlugin)) {
        return;
    }
    let stages = stack.stages();
    let before = &stages[..stage.index().min(stages.len())];
    let installed = before
        .iter()
        .any(|s| matches!(&s.kind, StageKind::Helm(r) if r.advertises_nvidia_gpus()));
    if installed {
        return;
    }
    let later = stages
        .iter()
        .skip(stage.index())
        .find(|s| matches!(&s.kind, StageKind::Helm(r) if r.advertises_nvidia_gpus()));
    let message = match later {
        Some(s) => format!(
            "`{}` requests {} GPUs per pod, but the NVIDIA device plugin is installed only later (Helm stage `{}`): until then no node advertises nvidia.com/gpu and its pods stay Pending",
            served.object_name, served.gpus, s.name
        ),
        None => format!(
            "`{}` requests {} GPUs per pod, but no Helm stage installs the NVIDIA device plugin: no node advertises nvidia.com/gpu and its pods stay Pending",
            served.object_name, served.gpus
        ),
    };
    let help = "add `stack.helm_stage(\"nvidia-device-plugin\", HelmRelease::nvidia_device_plugin())` (stack files: `kind: helm`, `preset: nvidia-device-plugin`) before the workload's stage";
    let help = match imported {
        Some((name, _)) => format!(
            "{help}; or, when the imported cluster `{name}` runs it already (`kubectl get nodes -o custom-columns=NAME:.metadata.name,GPUS:.status.allocatable.nvidia\\.com/gpu`), state it: `{}`",
            ClusterAddOn::NvidiaDevicePlugin.stated()
        ),
        None => help.to_owned(),
    };
    ds.report(Code::GpuWorkloadWithoutDevicePlugin, path, message, help);
}

/// `HF0372`: node groups consuming a Capacity Block (or an On-Demand Capacity Reservation) of a
/// known size whose desired sizes sum below it. Claims naming the same reservation are summed; a block bought by the stack (no id
/// yet) is its group's alone.
pub fn reservations(stack: &Stack, claims: &[CapacityClaim], ds: &mut Diagnostics) {
    let mut blocks: BTreeMap<String, Vec<(&CapacityClaim, i64)>> = BTreeMap::new();
    for claim in claims {
        // Karpenter pools state no size of their block; they launch into whatever it holds.
        if claim.provisioned_on_demand {
            continue;
        }
        match &claim.source {
            CapacitySource::CapacityBlock {
                reservation,
                reserved_instance_count: Some(reserved),
                ..
            } => {
                let key = if reservation.is_empty() {
                    format!("the Capacity Block {} buys", claim.path)
                } else {
                    format!("Capacity Block `{reservation}`")
                };
                blocks.entry(key).or_default().push((claim, *reserved));
            }
            // Billed at the on-demand rate for what it holds, used or not.
            CapacitySource::CapacityReservation {
                reservation,
                reserved_instance_count: Some(reserved),
                ..
            } => {
                blocks
                    .entry(format!("On-Demand Capacity Reservation `{reservation}`"))
                    .or_default()
                    .push((claim, *reserved));
            }
            _ => {}
        }
    }
    for (block, group) in blocks {
        let Some(&(first, _)) = group.first() else {
            continue;
        };
        let reserved = group.iter().map(|(_, r)| *r).max().unwrap_or(0);
        let desired: i64 = group.iter().map(|(c, _)| c.count.max(0)).sum();
        let max: i64 = group.iter().map(|(c, _)| c.max_count.max(0)).sum();
        if reserved <= 0 || desired >= reserved {
            continue;
        }
        let idle = reserved - desired;
        let paths = group
            .iter()
            .map(|(c, _)| c.path.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let region = stack.region();
        let cost = match catalog::instance(&first.instance_type)
            .and_then(|i| i.on_demand_usd_per_hour(region))
        {
            Some(price) => format!(
                ", about ${:.2}/h at the catalog's on-demand price in {region}",
                price * idle as f64
            ),
            None => format!(
                " (the catalog holds no price for {} in {region})",
                first.instance_type
            ),
        };
        let reach = if max < reserved {
            format!("desired {desired}, at most {max}")
        } else {
            format!("desired {desired}")
        };
        ds.push(
            Diagnostic::new(
                Code::CapacityBlockPartlyIdle,
                &first.path,
                format!(
                    "{block} reserves {reserved} {} instances, but the node groups consuming it run {reach}: {idle} paid instances stay idle{cost}",
                    first.instance_type
                ),
                format!(
                    "raise the desired size (and the maximum) to {reserved} nodes, summed over the groups on the reservation"
                ),
            )
            .at_field("scaling")
            .note(format!("node groups on the reservation: {paths}")),
        );
    }
}

/// `HF0374`, `HF0375`: every AWS Load Balancer Controller release names a cluster and region of
/// this stack, and the cluster's `LoadBalancerController` role is created no later than it.
pub fn load_balancer_controller(stack: &Stack, placements: &Placements<'_>, ds: &mut Diagnostics) {
    // EKS clusters of the stack: (cluster resource path, name).
    let mut clusters: Vec<(String, String)> = Vec::new();
    // LoadBalancerController constructs: (cluster resource path, stage).
    let mut roles: Vec<(String, StageId)> = Vec::new();
    for placed in placements.all() {
        if let Some(facts) = placed.facts().eks_cluster {
            clusters.push((facts.resource_path, facts.name));
        }
        if let Some(c) = placed.construct.downcast::<LoadBalancerController>() {
            roles.push((c.cluster().path().to_owned(), placed.node.stage));
        }
    }
    for (index, stage) in stack.stages().iter().enumerate() {
        let StageKind::Helm(release) = &stage.kind else {
            continue;
        };
        if !release.is_aws_load_balancer_controller() {
            continue;
        }
        let path = stack.display_path(&stage.name);
        let values = &release.values;
        let named = values["clusterName"].as_str().unwrap_or_default();
        let region = values["region"].as_str();
        let own_names = clusters
            .iter()
            .map(|(_, n)| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let cluster = clusters.iter().find(|(_, name)| name == named);
        if cluster.is_none() {
            ds.report_field(
                Code::LoadBalancerControllerWrongCluster,
                &path,
                "cluster",
                if own_names.is_empty() {
                    format!("the load balancer controller's values name cluster `{named}`; this stack creates no EKS cluster")
                } else {
                    format!("the load balancer controller's values name cluster `{named}`; this stack's EKS cluster is {own_names}")
                },
                "build the release from the stack's own cluster: `HelmRelease::aws_load_balancer_controller(&eks.name, ...)` (stack files: `cluster: <EksCluster id>`)",
            );
        }
        if let Some(region) = region.filter(|r| *r != stack.region()) {
            ds.report_field(
                Code::LoadBalancerControllerWrongCluster,
                &path,
                "region",
                format!(
                    "the load balancer controller's values name region `{region}`; the stack deploys to `{}`",
                    stack.region()
                ),
                format!("pass the stack's region, `{}`", stack.region()),
            );
        }
        let Some((cluster_path, name)) = cluster else {
            continue;
        };
        let earliest = roles
            .iter()
            .filter(|(p, _)| p == cluster_path)
            .map(|(_, s)| *s)
            .min();
        match earliest {
            Some(s) if s.index() <= index => {}
            Some(s) => ds.report(
                Code::LoadBalancerControllerWithoutRole,
                &path,
                format!(
                    "the load balancer controller for cluster `{name}` is installed before its IAM role: the `LoadBalancerController` is in stage `{}`, after this one",
                    stack.stages().get(s.index()).map_or("?", |st| st.name.as_str())
                ),
                "move the `LoadBalancerController` to a CloudFormation stage before this Helm stage",
            ),
            None => ds.report(
                Code::LoadBalancerControllerWithoutRole,
                &path,
                format!(
                    "the load balancer controller for cluster `{name}` has no IAM role: no `LoadBalancerController` of this stack is bound to that cluster"
                ),
                "add `LoadBalancerController::new(\"LoadBalancerController\", &eks.cluster)` (stack files: `load_balancer_controller`) to a CloudFormation stage before this Helm stage",
            ),
        }
    }
}
