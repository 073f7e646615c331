//! Whether each capacity claim's instance type is offered where the stack deploys (`HF0304`):
//! by SageMaker HyperPod for `ml.` instance groups, by EC2 for node groups and Karpenter
//! pools. The catalog records EC2 regions only for some types; where it records none, the
//! EC2 offer is not checked.

use crate::catalog;
use crate::constructs::{CapacityClaim, Launcher};
use crate::diagnostics::{Code, Diagnostics};

/// Checks `claim` against the offer in `region`.
pub fn claim(region: &str, claim: &CapacityClaim, ds: &mut Diagnostics) {
    // An unknown instance type is reported by the construct's own checks.
    let Some(it) = catalog::instance(&claim.instance_type) else {
        return;
    };
    match claim.launcher {
        Launcher::HyperPod if !it.hyperpod_offered_in(region) => ds.report_field(
            Code::InstanceTypeNotInRegion,
            &claim.path,
            "instance_type",
            format!("{} is not offered for HyperPod in {region}", it.ml_name()),
            if it.hyperpod_regions.is_empty() {
                "the catalog lists no HyperPod region for this type".to_owned()
            } else {
                format!("HyperPod offers it in: {}", it.hyperpod_regions.join(", "))
            },
        ),
        Launcher::Ec2 if !it.ec2_regions.is_empty() && !it.ec2_regions.contains(&region) => ds
            .report(
                Code::InstanceTypeNotInRegion,
                &claim.path,
                format!("{} is not offered by EC2 in {region}", it.name),
                format!("EC2 offers it in: {}", it.ec2_regions.join(", ")),
            ),
        Launcher::HyperPod | Launcher::Ec2 => {}
    }
}
