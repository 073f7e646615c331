//! CloudFormation spellings shared by the resource lowerings: managed policy ARNs, `Name`
//! tags, and the secure bucket with its TLS-only policy.

use super::expr::{Expr, Val};
use super::l1::*;
use super::template::StackTemplates;
use crate::app::StageId;
use crate::app::{kind, Ref};
use crate::resources::{AccessLogs, Bucket};

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

pub(super) fn bucket(cx: Cx, stage: StageId, path: &str, spec: &Bucket) {
    let bucket_ref: Ref<kind::Bucket> = Ref::new(cx.stack.name(), path);
    let logging = match &spec.access_logs {
        AccessLogs::To { bucket, prefix } => Some(s3_bucket::LoggingConfiguration {
            destination_bucket_name: Some(e(cx.attr(stage, bucket))),
            log_file_prefix: Some(s(prefix.clone())),
            ..Default::default()
        }),
        AccessLogs::Off(_) | AccessLogs::Receives { .. } => None,
    };
    let lifecycle = spec
        .lifecycle
        .as_ref()
        .map(|l| s3_bucket::LifecycleConfiguration {
            rules: vec![s3_bucket::Rule {
                id: Some(s("hyperforge")),
                status: s("Enabled"),
                abort_incomplete_multipart_upload: Some(
                    s3_bucket::AbortIncompleteMultipartUpload {
                        days_after_initiation: Val::Lit(i64::from(
                            l.abort_incomplete_multipart_days,
                        )),
                    },
                ),
                noncurrent_version_expiration: l.noncurrent_version_days.map(|days| {
                    s3_bucket::NoncurrentVersionExpiration {
                        noncurrent_days: Val::Lit(i64::from(days)),
                        ..Default::default()
                    }
                }),
                expiration_in_days: l.expire_days.map(|d| Val::Lit(i64::from(d))),
                ..Default::default()
            }],
            ..Default::default()
        });
    let encryption = if spec.s3_managed_encryption() {
        s3_bucket::ServerSideEncryptionRule {
            server_side_encryption_by_default: Some(s3_bucket::ServerSideEncryptionByDefault {
                sse_algorithm: s("AES256"),
                kms_master_key_id: None,
            }),
            ..Default::default()
        }
    } else {
        s3_bucket::ServerSideEncryptionRule {
            bucket_key_enabled: Some(true.into()),
            server_side_encryption_by_default: Some(s3_bucket::ServerSideEncryptionByDefault {
                sse_algorithm: s("aws:kms"),
                kms_master_key_id: None,
            }),
            ..Default::default()
        }
    };
    let b = s3_bucket::Bucket {
        bucket_name: spec.name.as_ref().map(|name| match cx.text(stage, name) {
            Expr::Str(lit) => s(lit),
            expr => e(expr),
        }),
        bucket_encryption: Some(s3_bucket::BucketEncryption {
            server_side_encryption_configuration: vec![encryption],
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
        logging_configuration: logging,
        lifecycle_configuration: lifecycle,
        ..Default::default()
    };
    cx.add(stage, path, &b);
    let doc = cx.policy(stage, &spec.policy(bucket_ref.arn()));
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
