//! Amazon Resource Names: the one strict grammar for every ARN a description or fleet gives.
//! An ARN reaches templates, Terraform variables, generated scripts and command lines, so each
//! part is checked, not only its prefix: a known partition, a service and region of their
//! shapes, a 12-digit account, and a resource of the characters ARNs use (no spaces, quotes,
//! `$`, backticks, `;` or control characters). Services narrow the resource further
//! ([`is_training_plan_arn`], [`is_iam_role_arn`]).

/// The AWS partitions (`arn:<partition>:...`).
pub const PARTITIONS: &[&str] = &[
    "aws",
    "aws-cn",
    "aws-us-gov",
    "aws-iso",
    "aws-iso-b",
    "aws-iso-e",
    "aws-iso-f",
    "aws-eusc",
];

/// The longest ARN any service takes (IAM's and SageMaker's `arnType`: 2,048 characters).
pub const MAX_ARN_LEN: usize = 2048;

/// An ARN, split into its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arn<'a> {
    /// `aws`, `aws-cn`, ...
    pub partition: &'a str,
    /// `sagemaker`, `iam`, ...
    pub service: &'a str,
    /// The region, or empty for a global service.
    pub region: &'a str,
    /// The 12-digit account, empty, or `aws` (AWS managed resources).
    pub account: &'a str,
    /// The rest (`training-plan/<name>`, `role/<path><name>`).
    pub resource: &'a str,
}

impl<'a> Arn<'a> {
    /// Parses `text`; `None` unless every part has its shape.
    pub fn parse(text: &'a str) -> Option<Arn<'a>> {
        if text.len() > MAX_ARN_LEN {
            return None;
        }
        let mut parts = text.splitn(6, ':');
        let (arn, partition, service, region, account, resource) = (
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
        );
        let lower = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        let region_ok = region.is_empty() || is_region_shaped(region);
        let account_ok = account.is_empty()
            || account == "aws"
            || (account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit()));
        let resource_ok = !resource.is_empty()
            && !resource.split('/').any(|p| p == "..")
            && resource
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@/:-".contains(&b));
        (arn == "arn"
            && PARTITIONS.contains(&partition)
            && !service.is_empty()
            && lower(service)
            && region_ok
            && account_ok
            && resource_ok)
            .then_some(Arn {
                partition,
                service,
                region,
                account,
                resource,
            })
    }
}

/// Whether `region` has a region's shape (`us-west-2`, `us-gov-east-1`, `eu-isoe-west-1`).
fn is_region_shaped(region: &str) -> bool {
    let parts: Vec<&str> = region.split('-').collect();
    parts.len() >= 3
        && parts[0].len() == 2
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
        && !parts[parts.len() - 1].is_empty()
}

/// Whether `name` is a SageMaker training plan name: 1 to 64 letters, digits and hyphens,
/// starting and ending with a letter or digit (`TrainingPlanName`,
/// `^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}`, SageMaker API model 2017-07-24).
pub fn is_training_plan_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Whether `arn` is a training plan's: `arn:<partition>:sagemaker:<region>:<account>:
/// training-plan/<name>`, 50 to 2,048 characters (`TrainingPlanArn`).
pub fn is_training_plan_arn(arn: &str) -> bool {
    (50..=MAX_ARN_LEN).contains(&arn.len())
        && Arn::parse(arn).is_some_and(|a| {
            a.service == "sagemaker"
                && !a.region.is_empty()
                && a.account.len() == 12
                && a.resource
                    .strip_prefix("training-plan/")
                    .is_some_and(is_training_plan_name)
        })
}

/// Whether `arn` is an IAM role's (`kind` `role`) or user's (`user`): `arn:<partition>:iam::
/// <account>:<kind>/<path><name>`, the name 1 to 64 of `\w+=,.@-` (IAM's `roleNameType`,
/// `userNameType`).
pub fn is_iam_arn_of(arn: &str, kind: &str) -> bool {
    Arn::parse(arn).is_some_and(|a| {
        a.service == "iam"
            && a.region.is_empty()
            && a.account.len() == 12
            && a.resource
                .strip_prefix(kind)
                .and_then(|r| r.strip_prefix('/'))
                .is_some_and(|path_and_name| {
                    let name = path_and_name.rsplit('/').next().unwrap_or_default();
                    (1..=64).contains(&name.len())
                        && name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
                        && path_and_name.len() <= 512 + 64
                })
    })
}

/// Whether `arn` is an IAM role's.
pub fn is_iam_role_arn(arn: &str) -> bool {
    is_iam_arn_of(arn, "role")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_is_checked() {
        let plan = "arn:aws:sagemaker:us-west-2:111122223333:training-plan/kimi-k3-p6-b300";
        assert!(is_training_plan_arn(plan));
        assert!(is_training_plan_arn(
            "arn:aws-us-gov:sagemaker:us-gov-west-1:111122223333:training-plan/p"
        ));
        for bad in [
            format!("{plan}$(touch x)"),
            format!("{plan}`id`"),
            format!("{plan}\nid"),
            format!("{plan}'; id; '"),
            format!("{plan} x"),
            plan.replace("aws:", "awsx:"),
            plan.replace("sagemaker", "SageMaker"),
            plan.replace("us-west-2", "us west 2"),
            plan.replace("111122223333", "11112222333"),
            plan.replace("kimi-k3-p6-b300", "-kimi"),
            plan.replace("kimi-k3-p6-b300", &"k".repeat(65)),
            plan.replace("training-plan/", "training-plan/../"),
        ] {
            assert!(!is_training_plan_arn(&bad), "{bad:?}");
        }
        assert!(is_iam_role_arn("arn:aws:iam::111122223333:role/admin"));
        assert!(is_iam_role_arn(
            "arn:aws:iam::111122223333:role/service-role/AWSCloudFormationStackSetAdministrationRole"
        ));
        for bad in [
            "arn:aws:iam::111122223333:role/x$(id)",
            "arn:aws:iam::111122223333:user/admin",
            "arn:aws:iam:us-west-2:111122223333:role/admin",
            "arn:aws:iam::111122223333:role/",
            "arn:aws:iam::111122223333:role/a b",
        ] {
            assert!(!is_iam_role_arn(bad), "{bad:?}");
        }
        assert!(Arn::parse(&format!("arn:aws:s3:::{}", "b".repeat(MAX_ARN_LEN))).is_none());
    }
}
