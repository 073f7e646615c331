//! An ECR pull-through cache: images of an upstream registry (Docker Hub by default) are pulled
//! through the account's private ECR registry, which keeps a copy. Nodes then pull the ~20 GB
//! vLLM image from ECR in the region instead of through the NAT gateway from Docker Hub, whose
//! anonymous pulls are rate-limited; pinned by digest, the image is the same either way.
//!
//! Docker Hub upstreams need credentials: a Secrets Manager secret whose name starts with
//! `ecr-pullthroughcache/`, holding `username` and `accessToken`, in the stack's region. Its ARN
//! is a deploy-time input (a template parameter or Terraform variable, defaulting to the ARN
//! given here), so the description never holds the credential itself.
//!
//! The first pull of an image creates its repository under the prefix: the principal pulling
//! (the nodes' role) needs `ecr:BatchImportUpstreamImage`, and `ecr:CreateRepository` until the
//! repository exists, on `repository/<prefix>/*` (Amazon ECR User Guide, "IAM permissions
//! required to sync an upstream registry"), beyond the read-only registry policy every node
//! role has. [`EcrPullThroughCache::pulled_by`] grants both to a node role, scoped to the
//! cache's prefix in the stack's account and region.

use super::{Construct, Context};
use crate::app::logical_id;
use crate::app::text::{Pseudo, Text};
use crate::app::{kind, AttrRef, Ref};
use crate::diagnostics::{Code, Diagnostics};
use crate::resources::iam::{PolicyDocument, Statement};
use crate::resources::{EcrPullThroughCacheRule, RolePolicy, Scope, StackInput};

/// The Docker Hub registry, as ECR names the upstream.
pub const DOCKER_HUB: &str = "registry-1.docker.io";

/// The repository prefix of a Docker Hub cache by default.
pub const DOCKER_HUB_PREFIX: &str = "docker-hub";

/// The pattern a credential secret's ARN matches (the CloudFormation schema's, in RE2).
pub const CREDENTIAL_ARN_PATTERN: &str =
    "^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:ecr-pullthroughcache/[A-Za-z0-9/_+=.@-]+$";

/// The cache builder.
#[derive(Clone, Debug)]
pub struct EcrPullThroughCache {
    id: String,
    repository_prefix: String,
    upstream_registry_url: String,
    credential_arn: Option<String>,
    pulled_by: Vec<Ref<kind::Role>>,
}

/// Handle to the cache.
#[derive(Clone, Debug)]
pub struct EcrPullThroughCacheHandle {
    /// The repository namespace of the cached images (`docker-hub`).
    pub repository_prefix: String,
}

impl EcrPullThroughCache {
    /// A cache of `upstream_registry_url` under `repository_prefix` (2-30 lowercase letters,
    /// digits, `.`, `_`, `-` and `/`).
    pub fn new(
        id: impl Into<String>,
        repository_prefix: impl Into<String>,
        upstream_registry_url: impl Into<String>,
    ) -> Self {
        EcrPullThroughCache {
            id: id.into(),
            repository_prefix: repository_prefix.into(),
            upstream_registry_url: upstream_registry_url.into(),
            credential_arn: None,
            pulled_by: Vec::new(),
        }
    }

    /// Lets the nodes with `role` pull through the cache (the first pull of an image imports
    /// it and creates its repository). Pass `node_group.role` or `karpenter.node_role`.
    pub fn pulled_by(mut self, role: &Ref<kind::Role>) -> Self {
        self.pulled_by.push(role.clone());
        self
    }

    /// A cache of Docker Hub under `docker-hub/`, authenticating with the secret `credential_arn`.
    pub fn docker_hub(id: impl Into<String>, credential_arn: impl Into<String>) -> Self {
        EcrPullThroughCache::new(id, DOCKER_HUB_PREFIX, DOCKER_HUB).credential_arn(credential_arn)
    }

    /// The Secrets Manager secret with the upstream credentials (the input's default).
    pub fn credential_arn(mut self, arn: impl Into<String>) -> Self {
        self.credential_arn = Some(arn.into());
        self
    }

    /// The repository prefix.
    pub fn prefix(&self) -> &str {
        &self.repository_prefix
    }

    /// The upstream registry.
    pub fn upstream(&self) -> &str {
        &self.upstream_registry_url
    }

    /// The image to give a server for `upstream_image` (`vllm/vllm-openai:kimi-k3`) pulled
    /// through this cache in account `account_id` and `region`. Docker Hub's official images
    /// (`ubuntu`) live under `library/`.
    pub fn image(&self, account_id: &str, region: &str, upstream_image: &str) -> String {
        let image = upstream_image
            .strip_prefix("docker.io/")
            .unwrap_or(upstream_image);
        let official = self.upstream_registry_url == DOCKER_HUB
            && !image
                .split(['@', ':'])
                .next()
                .unwrap_or(image)
                .contains('/');
        let library = if official { "library/" } else { "" };
        format!(
            "{account_id}.dkr.ecr.{region}.amazonaws.com/{}/{library}{image}",
            self.repository_prefix.trim_end_matches('/')
        )
    }

    fn validate(&self, region: &str, path: &str, ds: &mut Diagnostics) {
        if !is_repository_prefix(&self.repository_prefix) {
            ds.report_field(
                Code::InvalidPullThroughCache,
                path,
                "repository_prefix",
                format!(
                    "`{}` is not an ECR repository prefix",
                    self.repository_prefix
                ),
                "use 2-30 lowercase letters and digits separated by `.`, `_`, `-` or `/` (`docker-hub`)",
            );
        }
        if !is_host_name(&self.upstream_registry_url) {
            ds.report_field(
                Code::InvalidPullThroughCache,
                path,
                "upstream_registry_url",
                format!(
                    "`{}` is not a registry host name",
                    self.upstream_registry_url
                ),
                format!("give the registry's host without a scheme, e.g. `{DOCKER_HUB}`"),
            );
        }
        match &self.credential_arn {
            None if self.upstream_registry_url == DOCKER_HUB => ds.report_field(
                Code::InvalidPullThroughCache,
                path,
                "credential_arn",
                "a Docker Hub pull-through cache needs credentials",
                "store a Docker Hub user name and access token in a Secrets Manager secret named `ecr-pullthroughcache/<name>` and pass its ARN",
            ),
            None => {}
            Some(arn) => {
                let arn_region = arn.split(':').nth(3).unwrap_or_default();
                if !is_credential_arn(arn) {
                    ds.report_field(
                        Code::InvalidPullThroughCache,
                        path,
                        "credential_arn",
                        format!("`{arn}` is not the ARN of an `ecr-pullthroughcache/` secret"),
                        "ECR reads upstream credentials only from Secrets Manager secrets whose names start with `ecr-pullthroughcache/`",
                    );
                } else if arn_region != region {
                    ds.report_field(
                        Code::InvalidPullThroughCache,
                        path,
                        "credential_arn",
                        format!(
                            "the credential secret is in {arn_region}, the cache in {region}"
                        ),
                        "create the secret in the stack's region",
                    );
                }
            }
        }
    }
}

/// An ECR repository prefix: 2-30 lowercase alphanumeric components joined by `.`, `_`, `-`
/// or `/`. ECR's `ROOT` (the upstream path as the repository name) is not offered: the image
/// names and the pull grant this construct writes assume a prefix segment.
fn is_repository_prefix(prefix: &str) -> bool {
    let body = prefix.strip_suffix('/').unwrap_or(prefix);
    (2..=30).contains(&prefix.len())
        && body.split('/').all(|part| {
            !part.is_empty()
                && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
        })
}

/// A DNS host name (`registry-1.docker.io`): dot-separated labels of 1-63 letters, digits and
/// inner hyphens, 253 characters at most; no scheme, port or path (ECR takes the host alone).
fn is_host_name(host: &str) -> bool {
    (1..=253).contains(&host.len())
        && host.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// The ARN of a Secrets Manager secret ECR may read upstream credentials from.
fn is_credential_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(7, ':').collect();
    let [arn_, partition, service, region, account, kind, name] = parts[..] else {
        return false;
    };
    crate::app::arn::Arn::parse(arn).is_some()
        && arn_ == "arn"
        && crate::app::arn::PARTITIONS.contains(&partition)
        && service == "secretsmanager"
        && !region.is_empty()
        && account.len() == 12
        && account.chars().all(|c| c.is_ascii_digit())
        && kind == "secret"
        && name.strip_prefix("ecr-pullthroughcache/").is_some_and(|n| {
            !n.is_empty()
                && n.len() <= 512
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/_+=.@-".contains(c))
        })
}

impl Construct for EcrPullThroughCache {
    type Handle = EcrPullThroughCacheHandle;
    const KIND: &'static str = "ecr_pull_through_cache";

    fn id(&self) -> &str {
        &self.id
    }

    fn handle(&self, _stack: &str) -> EcrPullThroughCacheHandle {
        EcrPullThroughCacheHandle {
            repository_prefix: self.repository_prefix.clone(),
        }
    }

    fn validate(&self, cx: &Context<'_>, ds: &mut Diagnostics) {
        EcrPullThroughCache::validate(self, cx.stack.region(), cx.path, ds);
    }

    /// The rule, its credential an input with the given ARN as default.
    fn expand(&self, scope: &mut Scope<'_>) {
        let credential = self.credential_arn.as_ref().map(|arn| StackInput {
            name: format!("{}CredentialArn", logical_id(&scope.path("Rule"))),
            description: "ARN of the Secrets Manager secret (named ecr-pullthroughcache/...) holding the upstream registry's user name and access token.".to_owned(),
            default: Some(arn.clone()),
            pattern: Some(CREDENTIAL_ARN_PATTERN.to_owned()),
            expected: "the ARN of a Secrets Manager secret named ecr-pullthroughcache/<name>"
                .to_owned(),
        });
        scope.add(
            "Rule",
            EcrPullThroughCacheRule {
                repository_prefix: self.repository_prefix.clone(),
                upstream_registry_url: self.upstream_registry_url.clone(),
                credential,
            },
        );
        let repositories = Text::lit("arn:")
            .push_pseudo(Pseudo::Partition)
            .push_lit(":ecr:")
            .push_pseudo(Pseudo::Region)
            .push_lit(":")
            .push_pseudo(Pseudo::AccountId)
            .push_lit(format!(
                ":repository/{}/*",
                self.repository_prefix.trim_end_matches('/')
            ));
        for (i, role) in self.pulled_by.iter().enumerate() {
            scope.add(
                &format!("PullPolicy{}", i + 1),
                RolePolicy {
                    name: format!("pull-through-{}", self.repository_prefix.replace('/', "-")),
                    role: role.name(),
                    document: PolicyDocument::new().statement(
                        Statement::allow(["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"])
                            .sid("PullThroughCache")
                            .resource(repositories.clone())
                            .wildcards_because(
                                "The cache creates a repository on the first pull of each \
                                 upstream image, named after that image; the statement names \
                                 only the cache's own prefix in the stack's account and region.",
                            ),
                    ),
                },
            );
        }
    }

    fn references(&self) -> Vec<AttrRef> {
        self.pulled_by.iter().map(|r| r.name()).collect()
    }
}

// --- Stack-file form -------------------------------------------------------------------------

stack_file_shape! {
    pub mod fields = <EcrPullThroughCache as Construct>::KIND, "An ECR pull-through cache of an upstream registry (Docker Hub: `repository_prefix: docker-hub`, `upstream_registry_url: registry-1.docker.io` and a `credential_arn`)." {
        ID: req "ecr_pull_through_cache", Ty::Str, "The construct id.";
        REPOSITORY_PREFIX: req "repository_prefix", Ty::Str, "The repository namespace of the cached images (`docker-hub`).";
        UPSTREAM_REGISTRY_URL: req "upstream_registry_url", Ty::Str, "The upstream registry's host (`registry-1.docker.io`).";
        CREDENTIAL_ARN: opt "credential_arn", Ty::Str, "The Secrets Manager secret (`ecr-pullthroughcache/...`) with the upstream credentials; the default of a deploy-time input.";
        PULLED_BY: opt "pulled_by", Ty::Refs(Want::NodeRole), "Node groups or Karpenter whose nodes pull through the cache (granted the import).";
    }
}

impl super::stack_file::StackFileConstruct for EcrPullThroughCache {
    const SHAPE: &'static super::stack_file::Shape = &fields::SHAPE;

    fn build(id: &str, r: &mut dyn super::stack_file::FieldReader) -> Option<Self> {
        let prefix = r.text(&fields::REPOSITORY_PREFIX);
        let url = r.text(&fields::UPSTREAM_REGISTRY_URL);
        let roles = r.node_roles(&fields::PULLED_BY);
        let mut c = EcrPullThroughCache::new(id, prefix?, url?);
        for role in roles.ok()?.unwrap_or_default() {
            c = c.pulled_by(&role);
        }
        if let Some(arn) = r.text(&fields::CREDENTIAL_ARN) {
            c = c.credential_arn(arn);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_through_the_cache() {
        let c = EcrPullThroughCache::docker_hub(
            "Cache",
            "arn:aws:secretsmanager:us-west-2:111122223333:secret:ecr-pullthroughcache/docker-hub",
        );
        assert_eq!(
            c.image("111122223333", "us-west-2", "vllm/vllm-openai:kimi-k3"),
            "111122223333.dkr.ecr.us-west-2.amazonaws.com/docker-hub/vllm/vllm-openai:kimi-k3"
        );
        assert_eq!(
            c.image("111122223333", "us-west-2", "docker.io/ubuntu:24.04"),
            "111122223333.dkr.ecr.us-west-2.amazonaws.com/docker-hub/library/ubuntu:24.04"
        );
    }

    #[test]
    fn prefixes_and_credentials() {
        for ok in ["docker-hub", "a/b_c", "k8s", "quay.io"] {
            assert!(is_repository_prefix(ok), "{ok}");
        }
        for bad in ["", "a", "Docker", "-x", "a//b", "ROOT", &"x".repeat(31)] {
            assert!(!is_repository_prefix(bad), "{bad}");
        }
        for ok in [
            "registry-1.docker.io",
            "public.ecr.aws",
            "ghcr.io",
            "localhost",
        ] {
            assert!(is_host_name(ok), "{ok}");
        }
        for bad in [
            "",
            "registry-1.docker.io/../x",
            "public.ecr.aws:99999",
            "https://quay.io",
            "-a.io",
            "a..io",
            &"a".repeat(64),
        ] {
            assert!(!is_host_name(bad), "{bad}");
        }
        assert!(is_credential_arn(
            "arn:aws:secretsmanager:us-west-2:111122223333:secret:ecr-pullthroughcache/docker-hub-AbCdEf"
        ));
        for bad in [
            "arn:aws:secretsmanager:us-west-2:111122223333:secret:docker-hub",
            "arn:aws:ssm:us-west-2:111122223333:secret:ecr-pullthroughcache/x",
            "ecr-pullthroughcache/x",
        ] {
            assert!(!is_credential_arn(bad), "{bad}");
        }
    }
}
