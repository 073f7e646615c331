//! The upload and Helm stages as Terraform resources, and spellings several resource kinds
//! share (managed policy ARNs, `Name` tags, the secure bucket with its four companion
//! resources and TLS-only policy). Where Terraform models a part of a resource as a resource of its own (a
//! bucket's encryption, a role's inline policy), that resource is named after its owner
//! (`lifecycle_bucket_encryption`).

use super::module::{escape_template, hcl_string_body, snake, Addr, RootModule, Variable};
use crate::app::stage::{ChartSource, HelmRelease, Upload};
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, logical_id, Ref, StageId};
use crate::resources::{AccessLogs, Bucket};
use serde_json::{json, Map, Value};

type Cx<'a, 'b> = &'a mut RootModule<'b>;

pub(super) fn name_tag(value: String) -> Value {
    json!({ "Name": value })
}

/// `arn:<partition>:iam::aws:policy/<name>`.
pub(super) fn managed_policy(cx: Cx, name: &str) -> Value {
    cx.text(
        &Text::lit("arn:")
            .push_pseudo(Pseudo::Partition)
            .push_lit(format!(":iam::aws:policy/{name}")),
    )
}

/// The secure bucket (`resources::Bucket`): KMS-encrypted, versioned, owner-enforced,
/// public access blocked, TLS-only policy.
pub(super) fn bucket(cx: Cx, path: &str, spec: &Bucket) -> Addr {
    let mut body = Map::new();
    if let Some(name) = &spec.name {
        let name = cx.text(name);
        body.insert("bucket".into(), name);
    }
    if spec.deleted_with_objects.is_some() {
        body.insert("force_destroy".into(), json!(true));
    }
    let b = cx.add("aws_s3_bucket", path, Value::Object(body));
    let base = b.name.clone();
    let encryption = if spec.s3_managed_encryption() {
        json!({"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}})
    } else {
        json!({
            "apply_server_side_encryption_by_default": {"sse_algorithm": "aws:kms"},
            "bucket_key_enabled": true,
        })
    };
    cx.add_named(
        "aws_s3_bucket_server_side_encryption_configuration",
        format!("{base}_encryption"),
        path,
        json!({"bucket": b.interp("id"), "rule": [encryption]}),
    );
    let block = cx.add_named(
        "aws_s3_bucket_public_access_block",
        format!("{base}_public_access_block"),
        path,
        json!({
            "bucket": b.interp("id"),
            "block_public_acls": true,
            "block_public_policy": true,
            "ignore_public_acls": true,
            "restrict_public_buckets": true,
        }),
    );
    let versioning = cx.add_named(
        "aws_s3_bucket_versioning",
        format!("{base}_versioning"),
        path,
        json!({"bucket": b.interp("id"), "versioning_configuration": {"status": "Enabled"}}),
    );
    cx.add_named(
        "aws_s3_bucket_ownership_controls",
        format!("{base}_ownership_controls"),
        path,
        json!({"bucket": b.interp("id"), "rule": {"object_ownership": "BucketOwnerEnforced"}}),
    );
    if let AccessLogs::To { bucket, prefix } = &spec.access_logs {
        let target = cx.expr(bucket);
        cx.add_named(
            "aws_s3_bucket_logging",
            format!("{base}_logging"),
            path,
            json!({
                "bucket": b.interp("id"),
                "target_bucket": format!("${{{target}}}"),
                "target_prefix": escape_template(prefix),
            }),
        );
    }
    if let Some(l) = &spec.lifecycle {
        let mut rule = Map::new();
        rule.insert("id".into(), json!("hyperforge"));
        rule.insert("status".into(), json!("Enabled"));
        rule.insert("filter".into(), json!([{}]));
        rule.insert(
            "abort_incomplete_multipart_upload".into(),
            json!([{"days_after_initiation": l.abort_incomplete_multipart_days}]),
        );
        if let Some(days) = l.noncurrent_version_days {
            rule.insert(
                "noncurrent_version_expiration".into(),
                json!([{"noncurrent_days": days}]),
            );
        }
        if let Some(days) = l.expire_days {
            rule.insert("expiration".into(), json!([{"days": days}]));
        }
        let lc = cx.add_named(
            "aws_s3_bucket_lifecycle_configuration",
            format!("{base}_lifecycle"),
            path,
            json!({"bucket": b.interp("id"), "rule": [Value::Object(rule)]}),
        );
        // Rules on noncurrent versions need versioning on first (the provider's advice).
        cx.depends_on(&lc, &[versioning.address()]);
    }
    let bucket_ref: Ref<kind::Bucket> = Ref::new(cx.stack.name(), path);
    let doc = spec.policy(bucket_ref.arn());
    let policy_path = format!("{path}Policy");
    let policy = cx.policy(&snake(&logical_id(&policy_path)), &doc);
    let p = cx.add(
        "aws_s3_bucket_policy",
        &policy_path,
        json!({"bucket": b.interp("id"), "policy": policy}),
    );
    // S3 rejects a policy while the public access block is being changed.
    cx.depends_on(&p, &[block.address()]);
    b
}

/// The upload stage: one `aws_s3_object` per file, read from the stage's artifact next to the
/// root module, so the scripts exist once in the assembly.
pub(crate) fn upload(cx: Cx, stage: StageId, dir: &str, u: &Upload) {
    let bucket_name = cx.expr(&u.bucket.name());
    let bucket_base = snake(&logical_id(u.bucket.path()));
    for file in &u.files {
        let rel = format!("../../{dir}/{}", file.name);
        let source = format!("${{path.module}}/{}", escape_template(&rel));
        let hash = format!(
            "${{filemd5(\"${{path.module}}/{}\")}}",
            hcl_string_body(&rel)
        );
        let object = cx.add_named(
            "aws_s3_object",
            format!("{bucket_base}_{}", snake(&file.name)),
            &format!("{}/{}", u.bucket.path(), file.name),
            json!({
                "bucket": format!("${{{bucket_name}}}"),
                "key": escape_template(&format!("{}{}", u.prefix, file.name)),
                "source": source,
                "source_hash": hash,
            }),
        );
        // Objects are written once the bucket encrypts by default.
        cx.depends_on(
            &object,
            &[format!(
                "aws_s3_bucket_server_side_encryption_configuration.{bucket_base}_encryption"
            )],
        );
        cx.record_stage(stage, &object);
    }
}

/// The Helm stage: a `helm_release`. A chart from a repository is pinned by version; a chart in
/// a git repository (which the Helm provider cannot clone) is a local path given as a variable.
pub(crate) fn helm(cx: Cx, stage: StageId, name: &str, values_file: &str, r: &HelmRelease) {
    let mut body = Map::new();
    body.insert("name".into(), json!(r.release));
    body.insert("namespace".into(), json!(r.namespace));
    if crate::assembly::manifest::helm_creates_namespace(&r.namespace) {
        body.insert("create_namespace".into(), json!(true));
    }
    match &r.chart {
        ChartSource::Repository {
            repo,
            chart,
            version,
        } => {
            body.insert("repository".into(), json!(repo));
            body.insert("chart".into(), json!(chart));
            body.insert("version".into(), json!(version));
        }
        ChartSource::Git { url, commit, path } => {
            let var = cx.variable(
                &format!("{}_chart_path", snake(&r.release)),
                Variable {
                    description: format!(
                        "Local path of the {} chart: a checkout of {url} at commit {commit}, directory {path} (git clone, git checkout {commit}).",
                        r.release
                    ),
                    default: None,
                    pattern: None,
                    error_message: String::new(),
                },
            );
            body.insert("chart".into(), var);
            body.insert("dependency_update".into(), json!(true));
        }
    }
    body.insert(
        "values".into(),
        json!([format!(
            "${{file(\"${{path.module}}/../../{}\")}}",
            hcl_string_body(values_file)
        )]),
    );
    if !r.set_from_outputs.is_empty() {
        let sets: Vec<Value> = r
            .set_from_outputs
            .iter()
            .map(|(key, attr)| json!({"name": key, "value": cx.attr(attr)}))
            .collect();
        body.insert("set".into(), Value::Array(sets));
    }
    // The same choice as `helm --wait` on the command line (false when the chart's pods run
    // on nodes a later stage creates).
    body.insert("wait".into(), json!(r.wait));
    let release = cx.add_named("helm_release", snake(name), name, Value::Object(body));
    let mut after = cx.earlier_stages(stage);
    if let Some(cluster) = cx.eks_cluster() {
        after.push(cluster.address());
    }
    after.sort();
    after.dedup();
    cx.depends_on(&release, &after);
    cx.record_stage(stage, &release);
}
