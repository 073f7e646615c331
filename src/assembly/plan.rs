//! The operational steps of a stage: everything beyond "apply this artifact" that a deployment
//! must do (create a Secret, wait for a Job, scale a Capacity Block's node group once the block
//! is active, empty a versioned bucket before its stack is deleted). Synthesis writes them into
//! `manifest.json`, each stage's in order; the runbook (both paths), `FLEET.md` and
//! `hyperforge deploy` all carry out these same steps.
//!
//! Each step renders itself once, here, as a POSIX shell script ([`Step::script`]) and a
//! sentence for people ([`Step::summary`]). A value only a deployment knows (a bucket's name)
//! is a [`StageOutput`] the script reads from a shell variable ([`Step::reads`]); each path
//! binds that variable in its own way (CloudFormation `describe-stacks`, `terraform output`,
//! the outputs `hyperforge deploy` has read). Every value written into a script is quoted by
//! [`sh_quote`]; no template line interpolates one.

use super::manifest::StageOutput;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// When a step runs, relative to its stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum When {
    /// Before the stage's artifact is applied.
    BeforeApply,
    /// After the stage's artifact is applied (and, for CloudFormation, its stack is complete).
    AfterApply,
    /// Before what the stage created is deleted.
    BeforeDelete,
}

pub use crate::resources::plan::{is_variable_name, SecretSource};

/// One operational step, in the order its stage lists it. The set is closed: every path that
/// carries out a plan matches it exhaustively, so a new kind is a compile error wherever it is
/// not yet carried out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum Step {
    /// Before the stage: the Hugging Face model revision exists (a placeholder or a mistyped
    /// commit fails here, before any download starts).
    VerifyModelRevision {
        /// The model id (`moonshotai/Kimi-K3`).
        model_id: String,
        /// The full commit SHA.
        revision: String,
    },
    /// Before the stage: the image digest resolves in its registry (`docker buildx
    /// imagetools inspect`).
    VerifyImage {
        /// The image reference pinned by digest (`repo:tag@sha256:…`).
        image: String,
    },
    /// Before the stage: a Secret the stage's objects read and no artifact creates.
    Secret(SecretStep),
    /// After the stage: wait for a Job to complete (stop when it fails).
    WaitJob {
        /// The Job's name.
        name: String,
        /// Its namespace.
        namespace: String,
        /// How long to wait, seconds: the Job's own deadline and ten minutes for scheduling
        /// and pulling its image.
        timeout_seconds: u64,
    },
    /// After the stage: wait until the Capacity Block that the node group's launch template
    /// names is `active`, then scale the group (created at size 0: EKS launches into a block
    /// only while it is active). The reservation is read from the deployed launch template,
    /// so the step is the same on every path.
    ScaleCapacityBlockNodeGroup {
        /// The EKS cluster.
        cluster: String,
        /// The node group.
        node_group: String,
        /// Minimum size.
        min: i64,
        /// Desired size.
        desired: i64,
        /// Maximum size.
        max: i64,
        /// When an EventBridge Scheduler schedule of the stage scales the group up (the
        /// block's start, UTC to the minute: `2026-12-10T04:55Z`): a block still to come is
        /// left to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scheduled_at: Option<String>,
    },
    /// After the stage: subscribe an address to the notification topic (when `ALERT_EMAIL` is
    /// set; the address confirms by email).
    SubscribeTopic {
        /// The output holding the topic's ARN.
        topic: StageOutput,
    },
    /// Before the stage's stack is deleted: stop the bucket's access logging, then delete every
    /// object version and delete marker (CloudFormation deletes only empty buckets).
    EmptyVersionedBucket {
        /// The output holding the bucket's name.
        bucket: StageOutput,
        /// What it holds, for people.
        holds: String,
    },
}

/// A Secret a stage's objects read and no artifact creates. A missing one is created from its
/// source; with [`SecretSource::Operator`] a missing required one stops the deployment, naming
/// it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SecretStep {
    /// The Secret's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// The data keys read from it (the first is the one a source fills).
    pub keys: Vec<String>,
    /// Whether a reader cannot start without it.
    pub required: bool,
    /// The objects reading it (`Deployment/kimi-k3`).
    pub used_by: Vec<String>,
    /// Where its value comes from.
    pub source: SecretSource,
}

impl SecretStep {
    /// The key a source fills.
    fn key(&self) -> &str {
        self.keys.first().map(String::as_str).unwrap_or("value")
    }

    /// The Secret, its keys and its readers, for messages.
    fn what(&self) -> String {
        format!(
            "Secret {} (key {}) in namespace {}, read by {}",
            self.name,
            self.keys.join(", "),
            self.namespace,
            self.used_by.join(", ")
        )
    }

    fn summary(&self) -> String {
        let (name, namespace, key) = (&self.name, &self.namespace, self.key());
        let readers = self.used_by.join(", ");
        let need = if self.required {
            "they do not start without it"
        } else {
            "it is optional, and read when present"
        };
        let head = format!(
            "Secret `{name}` (key `{key}`) in namespace `{namespace}` is read by {readers}; {need}."
        );
        match &self.source {
            SecretSource::Operator => format!(
                "{head} Create it before this stage; the check below stops when a required one is missing."
            ),
            SecretSource::Environment { variable } => format!(
                "{head} It is created (or updated) from `{variable}` in your environment, without printing it{}.",
                if self.required { "; export it first" } else { ", when set" }
            ),
            SecretSource::Generated { bytes } => format!(
                "{head} A missing one is created with {bytes} random bytes (hex); an existing one is kept, so running this again changes nothing. The value never enters the assembly."
            ),
        }
    }

    fn script(&self) -> String {
        let key = sh_quote(self.key());
        let (n, ns) = (sh_quote(&self.name), sh_quote(&self.namespace));
        let what = self.what();
        let namespace_line = format!(
            "kubectl create namespace {ns} --dry-run=client -o yaml | kubectl apply -f - >/dev/null"
        );
        match &self.source {
            SecretSource::Operator if self.required => format!(
                "kubectl get secret {n} -n {ns} -o name >/dev/null 2>&1 \\\n  || {{ echo {} >&2; exit 1; }}",
                sh_quote(&format!("{what}, does not exist: create it first"))
            ),
            SecretSource::Operator => format!(
                "kubectl get secret {n} -n {ns} -o name >/dev/null 2>&1 \\\n  || echo {} >&2",
                sh_quote(&format!("note: {what}, does not exist; it is optional"))
            ),
            SecretSource::Environment { variable } if !is_variable_name(variable) => format!(
                "echo {} >&2\nexit 1",
                sh_quote(&format!("the source of {what} is not a variable name"))
            ),
            SecretSource::Environment { variable } => {
                let create = format!(
                    "{namespace_line}\nkubectl create secret generic {n} -n {ns} \\\n  --from-literal={key}=\"${variable}\" --dry-run=client -o yaml | kubectl apply -f -"
                );
                if self.required {
                    format!(
                        "if [ -z \"${{{variable}:-}}\" ]; then\n  echo {} >&2\n  exit 1\nfi\n{create}",
                        sh_quote(&format!("export {variable} first: {what}")),
                    )
                } else {
                    format!(
                        "if [ -n \"${{{variable}:-}}\" ]; then\n{}\nelse\n  echo {} >&2\nfi",
                        indent(&create),
                        sh_quote(&format!(
                            "note: {variable} is not set; {what} is optional and left as it is"
                        ))
                    )
                }
            }
            SecretSource::Generated { bytes } => format!(
                "{namespace_line}\nkubectl get secret {n} -n {ns} -o name >/dev/null 2>&1 \\\n  || kubectl create secret generic {n} -n {ns} \\\n    --from-literal={key}=\"$(od -An -N{bytes} -tx1 /dev/urandom | tr -d ' \\n')\""
            ),
        }
    }
}

/// A value only a deployment knows: the shell variable a step's script reads it from, and the
/// stage output it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepRead<'a> {
    /// The shell variable (`WEIGHTS_BUCKET_NAME`).
    pub variable: String,
    /// The output.
    pub output: &'a StageOutput,
}

/// Quotes `value` as one shell word: unchanged when it holds only characters no shell treats
/// specially, else in single quotes (a `'` inside closed, escaped and reopened).
pub fn sh_quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,%".contains(c));
    if plain {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

/// `UPPER_SNAKE` of a `PascalCase` output name, the shell variable holding it.
pub fn variable_of(output: &str) -> String {
    crate::app::snake_case(output).to_ascii_uppercase()
}

impl Step {
    /// The step's kind as the manifest spells it (`wait-job`).
    pub fn kind(&self) -> &'static str {
        match self {
            Step::VerifyModelRevision { .. } => "verify-model-revision",
            Step::VerifyImage { .. } => "verify-image",
            Step::Secret(_) => "secret",
            Step::WaitJob { .. } => "wait-job",
            Step::ScaleCapacityBlockNodeGroup { .. } => "scale-capacity-block-node-group",
            Step::SubscribeTopic { .. } => "subscribe-topic",
            Step::EmptyVersionedBucket { .. } => "empty-versioned-bucket",
        }
    }

    /// What the step acts on, unique among the steps of a stack of its kind.
    pub fn subject(&self) -> String {
        match self {
            Step::VerifyModelRevision { model_id, revision } => format!("{model_id}@{revision}"),
            Step::VerifyImage { image } => image.clone(),
            Step::Secret(SecretStep {
                name, namespace, ..
            })
            | Step::WaitJob {
                name, namespace, ..
            } => format!("{namespace}/{name}"),
            Step::ScaleCapacityBlockNodeGroup { node_group, .. } => node_group.clone(),
            Step::SubscribeTopic { topic } => topic.output.clone(),
            Step::EmptyVersionedBucket { bucket, .. } => bucket.output.clone(),
        }
    }

    /// The first line of the step's script: a comment naming it, which tests and readers use
    /// to find every step a rendered path carries out.
    pub fn marker(&self) -> String {
        // A comment line: a control character (a newline) in a value cannot end it.
        let subject: String = self
            .subject()
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        format!("# step: {} {subject}", self.kind())
    }

    /// When the step runs.
    pub fn when(&self) -> When {
        match self {
            Step::VerifyModelRevision { .. } | Step::VerifyImage { .. } | Step::Secret(_) => {
                When::BeforeApply
            }
            Step::WaitJob { .. }
            | Step::ScaleCapacityBlockNodeGroup { .. }
            | Step::SubscribeTopic { .. } => When::AfterApply,
            Step::EmptyVersionedBucket { .. } => When::BeforeDelete,
        }
    }

    /// Whether the step talks to the cluster's Kubernetes API (through the admin tunnel where
    /// the endpoint is private).
    pub fn uses_kubernetes_api(&self) -> bool {
        match self {
            Step::Secret(_) | Step::WaitJob { .. } => true,
            Step::VerifyModelRevision { .. }
            | Step::VerifyImage { .. }
            | Step::ScaleCapacityBlockNodeGroup { .. }
            | Step::SubscribeTopic { .. }
            | Step::EmptyVersionedBucket { .. } => false,
        }
    }

    /// The tools the script runs besides a POSIX shell.
    pub fn tools(&self) -> &'static [&'static str] {
        match self {
            Step::VerifyModelRevision { .. } => &["curl"],
            Step::VerifyImage { .. } => &["docker"],
            Step::Secret(_) | Step::WaitJob { .. } => &["kubectl"],
            Step::ScaleCapacityBlockNodeGroup { .. }
            | Step::SubscribeTopic { .. }
            | Step::EmptyVersionedBucket { .. } => &["aws"],
        }
    }

    /// The deploy-time values the script reads, each from its shell variable.
    pub fn reads(&self) -> Vec<StepRead<'_>> {
        match self {
            Step::SubscribeTopic { topic: output }
            | Step::EmptyVersionedBucket { bucket: output, .. } => vec![StepRead {
                variable: variable_of(&output.output),
                output,
            }],
            Step::VerifyModelRevision { .. }
            | Step::VerifyImage { .. }
            | Step::Secret(_)
            | Step::WaitJob { .. }
            | Step::ScaleCapacityBlockNodeGroup { .. } => Vec::new(),
        }
    }

    /// One or two sentences for people: what the step does and why.
    pub fn summary(&self) -> String {
        match self {
            Step::VerifyModelRevision { model_id, revision } => format!(
                "Check that commit `{revision}` of `{model_id}` exists on the Hugging Face Hub (a placeholder or a mistyped commit fails here, before anything downloads), and print the repository's current commit to compare; to use another commit, review it, set it in the description and synthesize again."
            ),
            Step::VerifyImage { image } => format!(
                "Check that image `{image}` resolves in its registry (needs `docker` with `buildx`); to run another image, test it, set its digest in the description and synthesize again."
            ),
            Step::Secret(secret) => secret.summary(),
            Step::WaitJob {
                name,
                namespace,
                timeout_seconds,
            } => format!(
                "Wait for Job `{name}` in namespace `{namespace}` to complete (at most {timeout_seconds} s); on failure it prints the Job's last log lines. Follow it with `kubectl logs -f job/{name} -n {namespace}`."
            ),
            Step::ScaleCapacityBlockNodeGroup {
                node_group,
                desired,
                scheduled_at: None,
                ..
            } => format!(
                "Node group `{node_group}` is created at size 0: EKS launches into a Capacity Block only while the block is `active`. Read the block from the group's launch template, wait until it is active, then scale the group to {desired}. Any other final state (`expired`, `cancelled`, `failed`) stops here: buy another block and deploy this stage with its id."
            ),
            Step::ScaleCapacityBlockNodeGroup {
                node_group,
                desired,
                scheduled_at: Some(at),
                ..
            } => format!(
                "Node group `{node_group}` is created at size 0: EKS launches into a Capacity Block only while the block is `active`. The stage's schedule scales it to {desired} when the block opens, at {at}, and to zero at its drain time. Read the block from the group's launch template: if it is active already, scale the group now; if it is still to come, the schedule does it and nothing waits. Any other final state (`expired`, `cancelled`, `failed`) stops here: buy another block and deploy this stage with its id."
            ),
            Step::SubscribeTopic { .. } => "Alarms and capacity warnings go to an SNS topic encrypted with its own key. Set `ALERT_EMAIL` to subscribe an address to it (the address confirms by email; other protocols work the same way with `aws sns subscribe`).".to_owned(),
            Step::EmptyVersionedBucket { holds, .. } => format!(
                "The bucket holding {holds} is versioned: stop its access logging, then delete every object version and delete marker (CloudFormation deletes only empty buckets)."
            ),
        }
    }

    /// The POSIX shell script carrying the step out in `region`: its marker first, then the
    /// commands, run in a subshell so that pasted into a terminal a failure does not close it.
    /// It reads each [`Step::reads`] value from its variable.
    pub fn script(&self, region: &str) -> String {
        let r = sh_quote(region);
        let body = match self {
            Step::VerifyModelRevision { model_id, revision } => {
                let url = format!("https://huggingface.co/api/models/{model_id}/revision");
                format!(
                    r#"curl -sf -o /dev/null {found} \
  || {{ echo {missing} >&2; exit 1; }}
echo {found_note}
curl -s {main} | python3 -c 'import json, sys; print(json.load(sys.stdin)["sha"])'"#,
                    found = sh_quote(&format!("{url}/{revision}")),
                    main = sh_quote(&format!("{url}/main")),
                    missing = sh_quote(&format!(
                        "commit {revision} of {model_id} is not on the Hub"
                    )),
                    found_note = sh_quote(&format!(
                        "commit {revision} found; the repository's main is now:"
                    )),
                )
            }
            Step::VerifyImage { image } => format!(
                "docker buildx imagetools inspect {} >/dev/null && echo \"image found\"",
                sh_quote(image)
            ),
            Step::Secret(secret) => secret.script(),
            Step::WaitJob {
                name,
                namespace,
                timeout_seconds: t,
            } => format!(
                r#"job={job} ns={ns} deadline=$(( $(date +%s) + {t} ))
until [ "$(kubectl get job "$job" -n "$ns" -o jsonpath='{{.status.succeeded}}')" = 1 ]; do
  if [ "$(kubectl get job "$job" -n "$ns" -o jsonpath='{{.status.conditions[?(@.type=="Failed")].status}}')" = True ]; then
    kubectl logs "job/$job" -n "$ns" --tail=40
    echo "job $job failed" >&2
    exit 1
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "job $job did not finish within {t} s" >&2
    exit 1
  fi
  sleep 30
done
echo "job $job completed""#,
                job = sh_quote(name),
                ns = sh_quote(namespace),
            ),
            Step::ScaleCapacityBlockNodeGroup {
                cluster,
                node_group,
                min,
                desired,
                max,
                scheduled_at,
            } => format!(
                r#"cluster={cluster} group={group}
template=$(aws eks describe-nodegroup --region {r} --cluster-name "$cluster" --nodegroup-name "$group" \
  --query 'nodegroup.launchTemplate.[id, version]' --output text) || exit 1
template_id=${{template%%[[:space:]]*}} version=${{template##*[[:space:]]}}
reservation=$(aws ec2 describe-launch-template-versions --region {r} --launch-template-id "$template_id" \
  --versions "$version" --output text \
  --query 'LaunchTemplateVersions[0].LaunchTemplateData.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId') || exit 1
case "$reservation" in
  cr-*) ;;
  *) echo "node group $group names no capacity reservation in its launch template" >&2; exit 1 ;;
esac
state() {{
  aws ec2 describe-capacity-reservations --region {r} --capacity-reservation-ids "$reservation" \
    --query 'CapacityReservations[0].State' --output text
}}
current=$(state) || exit 1
{wait}
if [ "$current" != active ]; then
  echo "Capacity Block $reservation is $current: it cannot run node group $group" >&2
  exit 1
fi
aws eks update-nodegroup-config --region {r} --cluster-name "$cluster" --nodegroup-name "$group" \
  --scaling-config minSize={min},maxSize={max},desiredSize={desired} >/dev/null || exit 1
aws eks wait nodegroup-active --region {r} --cluster-name "$cluster" --nodegroup-name "$group" || exit 1
echo "node group $group scaled to {desired} on Capacity Block $reservation""#,
                cluster = sh_quote(cluster),
                group = sh_quote(node_group),
                // A block still to come is waited for, or, when the stage schedules the
                // scale-up at its start, left to the schedule.
                wait = match scheduled_at {
                    None => r#"while [ "$current" = payment-pending ] || [ "$current" = scheduled ] || [ "$current" = pending ] \
  || [ "$current" = assessing ] || [ "$current" = delayed ]; do
  echo "Capacity Block $reservation is $current; checking again in 5 minutes"
  sleep 300
  current=$(state) || exit 1
done"#
                        .to_owned(),
                    Some(at) => format!(
                        r#"case "$current" in
  payment-pending|scheduled|pending|assessing|delayed)
    at={at}
    echo "Capacity Block $reservation is $current: the stage's schedule scales node group $group to {desired} at $at"
    exit 0 ;;
esac"#,
                        at = sh_quote(at),
                    ),
                },
            ),
            Step::SubscribeTopic { topic } => {
                let var = variable_of(&topic.output);
                format!(
                    r#"if [ -n "${{ALERT_EMAIL:-}}" ]; then
  aws sns subscribe --region {r} --topic-arn "${var}" --protocol email \
    --notification-endpoint "$ALERT_EMAIL"
else
  echo "note: ALERT_EMAIL is not set; subscribe to ${var} later" >&2
fi"#
                )
            }
            Step::EmptyVersionedBucket { bucket, .. } => {
                let var = variable_of(&bucket.output);
                format!(
                    r#"bucket="${var}"
aws s3api put-bucket-logging --region {r} --bucket "$bucket" --bucket-logging-status '{{}}' || exit 1
for kind in Versions DeleteMarkers; do
  while :; do
    objects=$(aws s3api list-object-versions --region {r} --bucket "$bucket" --max-items 500 \
      --query "${{kind}}[].{{Key: Key, VersionId: VersionId}}" --output json) || exit 1
    case "$objects" in "[]" | null | "") break ;; esac
    aws s3api delete-objects --region {r} --bucket "$bucket" \
      --delete "{{\"Objects\": $objects, \"Quiet\": true}}" >/dev/null || exit 1
  done
done
echo "bucket $bucket is empty""#
                )
            }
        };
        format!("{}\n(\n{}\n)", self.marker(), indent(&body))
    }
}

/// `text` with every non-empty line indented by two spaces.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("  {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A shell sandbox for the tests that no value runs as a command (`ShellProbe`).
#[cfg(all(test, unix))]
pub(crate) mod shell_probe {
    /// A shell sandbox for the property that no value runs as a command: fake tools on a private
    /// `PATH`, values that would create a file if a shell ran them, and the check that none did.
    pub(crate) struct ShellProbe {
        dir: std::path::PathBuf,
        path: String,
        pwned: std::path::PathBuf,
        /// `$(…)`, backticks, closing single and double quotes, a newline: each creates the
        /// probe's file when a shell runs it unquoted.
        pub hostile: [String; 5],
    }

    impl ShellProbe {
        /// A probe named `name` whose `tools` each print `answer`'s output (a shell snippet).
        pub fn new(name: &str, tools: &[&str], answer: &str) -> ShellProbe {
            use std::os::unix::fs::PermissionsExt;
            let dir =
                std::env::temp_dir().join(format!("hyperforge-{name}-{}", std::process::id()));
            let bin = dir.join("bin");
            std::fs::create_dir_all(&bin).unwrap();
            for tool in tools {
                let path = bin.join(tool);
                std::fs::write(&path, format!("#!/bin/sh\n{answer}\n")).unwrap();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            let pwned = dir.join("pwned");
            let p = pwned.display();
            let hostile = [
                format!("x$(touch {p})"),
                format!("x`touch {p}`"),
                format!("x'; touch {p}; '"),
                format!("x\"; touch {p}; \""),
                format!("x\ntouch {p}\n"),
            ];
            ShellProbe {
                path: format!("{}:/usr/bin:/bin", bin.display()),
                dir,
                pwned,
                hostile,
            }
        }

        /// Runs `script` with `sh -c` on the fake tools, with `env` set and `HF_TOKEN` unset.
        pub fn run(&self, script: &str, env: &[(&str, &str)]) -> std::process::ExitStatus {
            std::process::Command::new("sh")
                .arg("-c")
                .arg(script)
                .env("PATH", &self.path)
                .env_remove("HF_TOKEN")
                .envs(env.iter().copied())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
        }

        /// Whether a hostile value ran.
        pub fn ran(&self) -> bool {
            self.pwned.exists()
        }

        /// The check itself: an unquoted value does run.
        pub fn assert_catches_an_unquoted_value(&self) {
            self.run(&format!("echo {}", self.hostile[0]), &[]);
            assert!(self.ran(), "the probe does not see an unquoted value run");
        }
    }

    impl Drop for ShellProbe {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_leaves_plain_words_and_closes_quotes() {
        assert_eq!(sh_quote("kimi-k3"), "kimi-k3");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote(""), "''");
    }

    #[test]
    fn variables_of_outputs() {
        assert_eq!(variable_of("WeightsBucketName"), "WEIGHTS_BUCKET_NAME");
        assert_eq!(variable_of("AlarmsTopicArn"), "ALARMS_TOPIC_ARN");
        assert_eq!(variable_of("TLSBucket"), "TLS_BUCKET");
        assert!(is_variable_name("HF_TOKEN") && is_variable_name("hf_token"));
        assert!(!is_variable_name("HF-TOKEN"));
        assert!(!is_variable_name("1X") && !is_variable_name("X;Y") && !is_variable_name(""));
    }

    /// Every kind of step, each value in it `value`.
    fn every_step(value: &str) -> Vec<Step> {
        let output = StageOutput {
            stage: Some("foundation".into()),
            output: "SomeOutput".into(),
        };
        let secret = |source| {
            Step::Secret(SecretStep {
                name: value.into(),
                namespace: value.into(),
                keys: vec![value.into()],
                required: true,
                used_by: vec![value.into()],
                source,
            })
        };
        vec![
            Step::VerifyModelRevision {
                model_id: value.into(),
                revision: value.into(),
            },
            Step::VerifyImage {
                image: value.into(),
            },
            secret(SecretSource::Operator),
            secret(SecretSource::Environment {
                variable: "HF_TOKEN".into(),
            }),
            secret(SecretSource::Environment {
                variable: value.into(),
            }),
            secret(SecretSource::Generated { bytes: 4 }),
            Step::WaitJob {
                name: value.into(),
                namespace: value.into(),
                timeout_seconds: 0,
            },
            Step::ScaleCapacityBlockNodeGroup {
                cluster: value.into(),
                node_group: value.into(),
                min: 0,
                desired: 1,
                max: 1,
                scheduled_at: None,
            },
            Step::ScaleCapacityBlockNodeGroup {
                cluster: value.into(),
                node_group: value.into(),
                min: 0,
                desired: 1,
                max: 1,
                scheduled_at: Some(value.into()),
            },
            Step::SubscribeTopic {
                topic: output.clone(),
            },
            Step::EmptyVersionedBucket {
                bucket: output,
                holds: value.into(),
            },
        ]
    }

    /// A value is never a command: every step's script, run by `sh` with every tool it calls
    /// answering `active`, with hostile text in every value (and in the values it reads, set
    /// as the deployment paths set them), creates no file; its marker stays one comment line.
    #[cfg(unix)]
    #[test]
    fn hostile_values_never_run_as_commands() {
        // Every answer `active`, but an empty listing (so that emptying a bucket ends).
        let answer = "case \"$*\" in *list-object-versions*) echo '[]' ;; *) echo active ;; esac";
        let probe = super::shell_probe::ShellProbe::new(
            "steps",
            &["aws", "kubectl", "curl", "docker", "python3", "sleep"],
            answer,
        );
        let mut ran = 0;
        for value in &probe.hostile {
            for step in every_step(value) {
                let script = step.script("us-west-2");
                assert_eq!(script.lines().next(), Some(step.marker().as_str()));
                assert!(!step.marker().contains('\n'));
                let bindings: String = step
                    .reads()
                    .iter()
                    .map(|r| format!("{}={}\n", r.variable, sh_quote(value)))
                    .collect();
                let status = probe.run(&format!("{bindings}{script}"), &[("ALERT_EMAIL", value)]);
                assert!(status.code().is_some(), "{script}");
                ran += 1;
                assert!(!probe.ran(), "a value ran as a command:\n{script}");
            }
        }
        assert_eq!(ran, probe.hostile.len() * every_step("x").len());
        probe.assert_catches_an_unquoted_value();
    }
}
