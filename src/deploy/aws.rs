//! The AWS side: SDK clients from the default chain (region, profile, endpoint, retries), thin
//! calls that convert SDK responses into this module's own structs, and SDK errors into
//! [`DeployError`] messages.

use super::changeset::{
    ChangeAction, ChangeSetSummary, PropertyChange, Replacement, ResourceChange,
};
use super::error::DeployError;
use super::events::StackEvent;
use super::params::ParameterValue;
use aws_config::retry::RetryConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_cloudformation as cfn;
use aws_sdk_cloudformation::config::http::HttpResponse;
use aws_sdk_cloudformation::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_cloudformation::types::{Capability, ChangeSetType, OnFailure, Parameter};
use std::collections::BTreeMap;

/// How to reach AWS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AwsSettings {
    /// The region; `None`: the stack's region from the manifest.
    pub region: Option<String>,
    /// A named profile of the shared config files.
    pub profile: Option<String>,
    /// Another endpoint (an emulator); `None`: `HYPERFORGE_AWS_ENDPOINT_URL` if set.
    pub endpoint_url: Option<String>,
    /// Attempts per API call, retries included (standard retry mode). 0 means the SDK's
    /// default (3).
    pub max_attempts: u32,
    /// Fixed access key and secret instead of the default credential chain (emulators).
    pub static_credentials: Option<(String, String)>,
}

/// The environment variable naming an endpoint to use instead of AWS's.
pub const ENDPOINT_ENV: &str = "HYPERFORGE_AWS_ENDPOINT_URL";

impl AwsSettings {
    /// The environment that gives the AWS CLI (the plan's step scripts, the tunnel) these
    /// settings: the profile, the endpoint, fixed credentials. Empty with the defaults, so the
    /// CLI uses its own chain as the SDK does.
    pub fn cli_environment(&self) -> Vec<(&'static str, String)> {
        let mut env = Vec::new();
        if let Some(profile) = &self.profile {
            env.push(("AWS_PROFILE", profile.clone()));
        }
        if let Some(endpoint) = self.effective_endpoint() {
            env.push(("AWS_ENDPOINT_URL", endpoint));
        }
        if let Some((key, secret)) = &self.static_credentials {
            env.push(("AWS_ACCESS_KEY_ID", key.clone()));
            env.push(("AWS_SECRET_ACCESS_KEY", secret.clone()));
        }
        env
    }

    /// The endpoint to use: the setting, else `HYPERFORGE_AWS_ENDPOINT_URL`.
    pub fn effective_endpoint(&self) -> Option<String> {
        self.endpoint_url.clone().or_else(|| {
            std::env::var(ENDPOINT_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty())
        })
    }
}

/// The clients a deploy uses, for one region.
#[derive(Clone, Debug)]
pub struct Clients {
    pub(crate) cfn: cfn::Client,
    pub(crate) s3: aws_sdk_s3::Client,
    /// The region the clients talk to.
    pub region: String,
}

impl Clients {
    /// Clients from the SDK's default chain, adjusted by `settings`; `default_region` when
    /// the settings name none.
    pub async fn connect(settings: &AwsSettings, default_region: &str) -> Clients {
        let region = settings
            .region
            .clone()
            .unwrap_or_else(|| default_region.to_owned());
        let attempts = if settings.max_attempts == 0 {
            3
        } else {
            settings.max_attempts
        };
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(region.clone()))
            .retry_config(RetryConfig::standard().with_max_attempts(attempts));
        if let Some(profile) = &settings.profile {
            loader = loader.profile_name(profile);
        }
        let endpoint = settings.effective_endpoint();
        if let Some(url) = &endpoint {
            loader = loader.endpoint_url(url);
        }
        if let Some((key, secret)) = &settings.static_credentials {
            loader = loader.credentials_provider(cfn::config::Credentials::new(
                key,
                secret,
                None,
                None,
                "hyperforge-static",
            ));
        }
        let conf = loader.load().await;
        let s3_conf = aws_sdk_s3::config::Builder::from(&conf)
            // Emulators answer on one host: address buckets in the path, not the host name.
            .force_path_style(endpoint.is_some())
            .build();
        Clients {
            cfn: cfn::Client::new(&conf),
            s3: aws_sdk_s3::Client::from_conf(s3_conf),
            region,
        }
    }
}

/// Turns an SDK error into a message with the service's code and text. HTTP 5xx without a
/// parseable body (what moto answers for templates it cannot process) says so.
pub(crate) fn aws_error<E>(
    operation: &'static str,
    target: &str,
    err: SdkError<E, HttpResponse>,
) -> DeployError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let status = err.raw_response().map(|r| r.status().as_u16());
    let message = match (err.code(), err.message()) {
        (Some(code), Some(msg)) => format!("{code}: {msg}"),
        (None, Some(msg)) => msg.to_owned(),
        (Some(code), None) => code.to_owned(),
        (None, None) => match status {
            Some(s) if s >= 500 => format!(
                "the service answered HTTP {s} without an error message (an internal error; an emulator answers so for a template it cannot process)"
            ),
            _ => DisplayErrorContext(&err).to_string(),
        },
    };
    DeployError::Aws {
        operation,
        target: target.to_owned(),
        message,
    }
}

fn is_missing_stack<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    err.code() == Some("ValidationError")
        && err.message().is_some_and(|m| m.contains("does not exist"))
}

/// A deployed stack, as far as the deploy needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackInfo {
    /// Its status (`CREATE_COMPLETE`).
    pub status: String,
    /// Its status reason.
    pub reason: Option<String>,
    /// The names of its parameters.
    pub parameters: Vec<String>,
    /// Its outputs.
    pub outputs: BTreeMap<String, String>,
}

/// How the template reaches CloudFormation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateSource {
    /// Inline.
    Body(String),
    /// Uploaded to S3.
    Url(String),
}

impl Clients {
    /// The stack, or `None` when it does not exist.
    pub async fn describe_stack(&self, name: &str) -> Result<Option<StackInfo>, DeployError> {
        let out = match self.cfn.describe_stacks().stack_name(name).send().await {
            Ok(out) => out,
            Err(e) if is_missing_stack(&e) => return Ok(None),
            Err(e) => return Err(aws_error("DescribeStacks", name, e)),
        };
        let Some(stack) = out.stacks().first() else {
            return Ok(None);
        };
        let status = stack
            .stack_status()
            .map(|s| s.as_str().to_owned())
            .unwrap_or_default();
        Ok(Some(StackInfo {
            status,
            reason: stack.stack_status_reason().map(str::to_owned),
            parameters: stack
                .parameters()
                .iter()
                .filter_map(|p| p.parameter_key().map(str::to_owned))
                .collect(),
            outputs: stack
                .outputs()
                .iter()
                .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
                .collect(),
        }))
    }

    /// The stack's most recent events, newest first (one page: up to 100).
    pub async fn recent_events(&self, name: &str) -> Result<Vec<StackEvent>, DeployError> {
        let out = match self
            .cfn
            .describe_stack_events()
            .stack_name(name)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if is_missing_stack(&e) => return Ok(Vec::new()),
            Err(e) => return Err(aws_error("DescribeStackEvents", name, e)),
        };
        Ok(out
            .stack_events()
            .iter()
            .map(|e| StackEvent {
                id: e.event_id().unwrap_or_default().to_owned(),
                timestamp: e
                    .timestamp()
                    .and_then(|t| t.fmt(aws_smithy_types_format()).ok())
                    .unwrap_or_default(),
                logical_id: e.logical_resource_id().unwrap_or_default().to_owned(),
                resource_type: e.resource_type().unwrap_or_default().to_owned(),
                status: e
                    .resource_status()
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_default(),
                reason: e.resource_status_reason().map(str::to_owned),
            })
            .collect())
    }

    /// Creates a change set; returns its id.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_change_set(
        &self,
        stack_name: &str,
        change_set_name: &str,
        create: bool,
        template: &TemplateSource,
        parameters: &[(String, ParameterValue)],
        capabilities: &[String],
        description: &str,
    ) -> Result<String, DeployError> {
        let mut req = self
            .cfn
            .create_change_set()
            .stack_name(stack_name)
            .change_set_name(change_set_name)
            .description(description)
            .change_set_type(if create {
                ChangeSetType::Create
            } else {
                ChangeSetType::Update
            })
            .set_capabilities(Some(capabilities_of(capabilities)))
            .set_parameters(Some(parameters_of(parameters)));
        req = match template {
            TemplateSource::Body(b) => req.template_body(b),
            TemplateSource::Url(u) => req.template_url(u),
        };
        let out = req
            .send()
            .await
            .map_err(|e| aws_error("CreateChangeSet", stack_name, e))?;
        Ok(out.id().unwrap_or(change_set_name).to_owned())
    }

    /// Creates a stack directly (new stacks: nothing to compare with, so no change set).
    pub async fn create_stack(
        &self,
        stack_name: &str,
        template: &TemplateSource,
        parameters: &[(String, ParameterValue)],
        capabilities: &[String],
    ) -> Result<(), DeployError> {
        let mut req = self
            .cfn
            .create_stack()
            .stack_name(stack_name)
            .on_failure(OnFailure::Rollback)
            .set_capabilities(Some(capabilities_of(capabilities)))
            .set_parameters(Some(parameters_of(parameters)));
        req = match template {
            TemplateSource::Body(b) => req.template_body(b),
            TemplateSource::Url(u) => req.template_url(u),
        };
        req.send()
            .await
            .map_err(|e| aws_error("CreateStack", stack_name, e))?;
        Ok(())
    }

    /// Describes a change set (every page of changes).
    pub async fn describe_change_set(
        &self,
        stack_name: &str,
        change_set: &str,
    ) -> Result<ChangeSetSummary, DeployError> {
        let mut summary: Option<ChangeSetSummary> = None;
        let mut token: Option<String> = None;
        loop {
            let out = self
                .cfn
                .describe_change_set()
                .stack_name(stack_name)
                .change_set_name(change_set)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| aws_error("DescribeChangeSet", stack_name, e))?;
            let changes = out.changes().iter().filter_map(|c| {
                let rc = c.resource_change()?;
                Some(ResourceChange {
                    action: ChangeAction::parse(rc.action().map(|a| a.as_str()).unwrap_or("")),
                    logical_id: rc.logical_resource_id().unwrap_or_default().to_owned(),
                    resource_type: rc.resource_type().unwrap_or_default().to_owned(),
                    physical_id: rc
                        .physical_resource_id()
                        .filter(|p| !p.is_empty())
                        .map(str::to_owned),
                    replacement: rc
                        .replacement()
                        .and_then(|r| Replacement::parse(r.as_str())),
                    scope: rc.scope().iter().map(|s| s.as_str().to_owned()).collect(),
                    properties: rc
                        .details()
                        .iter()
                        .filter_map(|d| {
                            let t = d.target()?;
                            Some(PropertyChange {
                                name: t.name().or(t.attribute().map(|a| a.as_str()))?.to_owned(),
                                requires_recreation: t
                                    .requires_recreation()
                                    .map(|r| r.as_str().to_owned()),
                            })
                        })
                        .fold(Vec::<PropertyChange>::new(), |mut acc, p| {
                            if !acc.contains(&p) {
                                acc.push(p);
                            }
                            acc
                        }),
                })
            });
            match &mut summary {
                Some(s) => s.changes.extend(changes),
                None => {
                    summary = Some(ChangeSetSummary {
                        stack_name: stack_name.to_owned(),
                        change_set_name: out.change_set_name().unwrap_or(change_set).to_owned(),
                        status: out
                            .status()
                            .map(|s| s.as_str().to_owned())
                            .unwrap_or_default(),
                        status_reason: out.status_reason().map(str::to_owned),
                        execution_status: out.execution_status().map(|s| s.as_str().to_owned()),
                        changes: changes.collect(),
                    })
                }
            }
            match out.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                _ => break,
            }
        }
        summary.ok_or_else(|| DeployError::ChangeSetFailed {
            stack_name: stack_name.to_owned(),
            reason: "DescribeChangeSet returned nothing".into(),
        })
    }

    /// Executes a change set.
    pub async fn execute_change_set(&self, stack_name: &str, id: &str) -> Result<(), DeployError> {
        self.cfn
            .execute_change_set()
            .stack_name(stack_name)
            .change_set_name(id)
            .send()
            .await
            .map_err(|e| aws_error("ExecuteChangeSet", stack_name, e))?;
        Ok(())
    }

    /// Deletes a change set.
    pub async fn delete_change_set(&self, stack_name: &str, id: &str) -> Result<(), DeployError> {
        self.cfn
            .delete_change_set()
            .stack_name(stack_name)
            .change_set_name(id)
            .send()
            .await
            .map_err(|e| aws_error("DeleteChangeSet", stack_name, e))?;
        Ok(())
    }

    /// The ids of the stack's change sets.
    pub async fn list_change_sets(&self, stack_name: &str) -> Result<Vec<String>, DeployError> {
        let out = self
            .cfn
            .list_change_sets()
            .stack_name(stack_name)
            .send()
            .await
            .map_err(|e| aws_error("ListChangeSets", stack_name, e))?;
        Ok(out
            .summaries()
            .iter()
            .filter_map(|s| s.change_set_id().or(s.change_set_name()).map(str::to_owned))
            .collect())
    }

    /// Starts deleting a stack.
    pub async fn delete_stack(&self, stack_name: &str) -> Result<(), DeployError> {
        self.cfn
            .delete_stack()
            .stack_name(stack_name)
            .send()
            .await
            .map_err(|e| aws_error("DeleteStack", stack_name, e))?;
        Ok(())
    }

    /// Puts an object.
    pub async fn put_object(
        &self,
        bucket: &str,
        key: &str,
        body: Vec<u8>,
    ) -> Result<(), DeployError> {
        self.s3
            .put_object()
            .bucket(bucket)
            .key(key)
            .body(body.into())
            .send()
            .await
            .map_err(|e| aws_error("PutObject", &format!("s3://{bucket}/{key}"), e))?;
        Ok(())
    }

    /// Stops the bucket's server access logging (so that emptying it delivers no log records
    /// to a log bucket emptied after it).
    pub async fn stop_access_logging(&self, bucket: &str) -> Result<(), DeployError> {
        self.s3
            .put_bucket_logging()
            .bucket(bucket)
            .bucket_logging_status(aws_sdk_s3::types::BucketLoggingStatus::builder().build())
            .send()
            .await
            .map_err(|e| aws_error("PutBucketLogging", &format!("s3://{bucket}"), e))?;
        Ok(())
    }

    /// Deletes every version (and delete marker) of the objects under `prefix`; returns how
    /// many were deleted.
    pub async fn delete_prefix(&self, bucket: &str, prefix: &str) -> Result<usize, DeployError> {
        let target = format!("s3://{bucket}/{prefix}");
        let mut deleted = 0;
        let mut key_marker: Option<String> = None;
        let mut version_marker: Option<String> = None;
        loop {
            let out = self
                .s3
                .list_object_versions()
                .bucket(bucket)
                .prefix(prefix)
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await
                .map_err(|e| aws_error("ListObjectVersions", &target, e))?;
            let mut ids = Vec::new();
            let versions = out
                .versions()
                .iter()
                .filter_map(|v| Some((v.key()?, v.version_id())));
            let markers = out
                .delete_markers()
                .iter()
                .filter_map(|m| Some((m.key()?, m.version_id())));
            for (key, version) in versions.chain(markers) {
                let id = aws_sdk_s3::types::ObjectIdentifier::builder()
                    .key(key)
                    .set_version_id(version.map(str::to_owned))
                    .build()
                    .map_err(|e| DeployError::Aws {
                        operation: "DeleteObjects",
                        target: target.clone(),
                        message: e.to_string(),
                    })?;
                ids.push(id);
            }
            for chunk in ids.chunks(1000) {
                let delete = aws_sdk_s3::types::Delete::builder()
                    .set_objects(Some(chunk.to_vec()))
                    .quiet(true)
                    .build()
                    .map_err(|e| DeployError::Aws {
                        operation: "DeleteObjects",
                        target: target.clone(),
                        message: e.to_string(),
                    })?;
                self.s3
                    .delete_objects()
                    .bucket(bucket)
                    .delete(delete)
                    .send()
                    .await
                    .map_err(|e| aws_error("DeleteObjects", &target, e))?;
                deleted += chunk.len();
            }
            if out.is_truncated() == Some(true) {
                key_marker = out.next_key_marker().map(str::to_owned);
                version_marker = out.next_version_id_marker().map(str::to_owned);
                if key_marker.is_none() {
                    break;
                }
            } else {
                break;
            }
        }
        Ok(deleted)
    }
}

fn capabilities_of(capabilities: &[String]) -> Vec<Capability> {
    capabilities
        .iter()
        .map(|c| Capability::from(c.as_str()))
        .collect()
}

fn parameters_of(parameters: &[(String, ParameterValue)]) -> Vec<Parameter> {
    parameters
        .iter()
        .map(|(k, v)| match v {
            ParameterValue::Value(v) => Parameter::builder()
                .parameter_key(k)
                .parameter_value(v)
                .build(),
            ParameterValue::UsePrevious => Parameter::builder()
                .parameter_key(k)
                .use_previous_value(true)
                .build(),
        })
        .collect()
}

fn aws_smithy_types_format() -> aws_sdk_cloudformation::primitives::DateTimeFormat {
    aws_sdk_cloudformation::primitives::DateTimeFormat::DateTime
}

/// A StackSet as deployed, as far as the fleet deploy needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackSetInfo {
    /// `ACTIVE` (or `DELETED`).
    pub status: String,
    /// The template it holds now.
    pub template_body: String,
    /// `SELF_MANAGED` or `SERVICE_MANAGED`.
    pub permission_model: String,
}

/// A stack instance, as `ListStackInstances` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeployedInstance {
    /// Its account.
    pub account: String,
    /// Its region.
    pub region: String,
    /// The organizational unit it was deployed for (service-managed permissions).
    pub organizational_unit: Option<String>,
    /// The instance's stack (its outputs stand for the member's `<member>-<stage>` stack).
    pub stack_id: Option<String>,
    /// `CURRENT`, `OUTDATED` or `INOPERABLE`.
    pub status: String,
    /// Why, when not current.
    pub status_reason: Option<String>,
}

/// One account and region's result in a StackSet operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationResult {
    /// The account.
    pub account: String,
    /// The region.
    pub region: String,
    /// `PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED` or `CANCELLED`.
    pub status: String,
    /// Why (CloudFormation's reason for a failure).
    pub reason: Option<String>,
}

/// Who the StackSet calls act as and how operations roll out: the arguments every mutating
/// StackSet call shares.
#[derive(Clone, Debug)]
pub struct StackSetCall {
    /// `CallAs` (`SELF`, `DELEGATED_ADMIN`).
    pub call_as: String,
    /// The operation preferences.
    pub preferences: crate::assembly::fleet::OperationPreferences,
}

impl StackSetCall {
    fn call_as(&self) -> cfn::types::CallAs {
        cfn::types::CallAs::from(self.call_as.as_str())
    }

    fn preferences(&self) -> cfn::types::StackSetOperationPreferences {
        use crate::assembly::fleet::Amount;
        let p = &self.preferences;
        let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
        let mut b = cfn::types::StackSetOperationPreferences::builder().region_concurrency_type(
            cfn::types::RegionConcurrencyType::from(p.region_concurrency.api_name()),
        );
        b = match p.max_concurrent {
            Amount::Count(n) => b.max_concurrent_count(count(n)),
            Amount::Percentage(n) => b.max_concurrent_percentage(count(n)),
        };
        b = match p.failure_tolerance {
            Amount::Count(n) => b.failure_tolerance_count(count(n)),
            Amount::Percentage(n) => b.failure_tolerance_percentage(count(n)),
        };
        b.set_region_order((!p.region_order.is_empty()).then(|| p.region_order.clone()))
            .build()
    }
}

/// The accounts or organizational units of one StackSet instance call.
fn deployment_targets(
    targets: &[crate::assembly::fleet::Target],
) -> (Option<Vec<String>>, Option<cfn::types::DeploymentTargets>) {
    use crate::assembly::fleet::Target;
    let accounts: Vec<String> = targets
        .iter()
        .filter_map(|t| match t {
            Target::Account(id) => Some(id.clone()),
            Target::OrganizationalUnit(_) => None,
        })
        .collect();
    let units: Vec<String> = targets
        .iter()
        .filter_map(|t| match t {
            Target::OrganizationalUnit(id) => Some(id.clone()),
            Target::Account(_) => None,
        })
        .collect();
    let units = (!units.is_empty()).then(|| {
        cfn::types::DeploymentTargets::builder()
            .set_organizational_unit_ids(Some(units))
            .build()
    });
    ((!accounts.is_empty()).then_some(accounts), units)
}

fn overrides_of(overrides: &BTreeMap<String, String>) -> Vec<Parameter> {
    overrides
        .iter()
        .map(|(k, v)| {
            Parameter::builder()
                .parameter_key(k)
                .parameter_value(v)
                .build()
        })
        .collect()
}

/// What a `CreateStackSet` sets besides the template.
#[derive(Clone, Debug)]
pub struct NewStackSet<'a> {
    /// The StackSet's name.
    pub name: &'a str,
    /// Its description.
    pub description: &'a str,
    /// The permission model.
    pub permission_model: &'a crate::assembly::fleet::PermissionModel,
    /// The capabilities to acknowledge.
    pub capabilities: &'a [String],
    /// The StackSet's own parameter values (each instance overrides them).
    pub parameters: &'a [crate::assembly::fleet::StackSetParameter],
}

/// `parameters` as the API's StackSet-level `Parameters`.
fn stack_set_parameters(
    parameters: &[crate::assembly::fleet::StackSetParameter],
) -> Option<Vec<cfn::types::Parameter>> {
    (!parameters.is_empty()).then(|| {
        parameters
            .iter()
            .map(|p| {
                cfn::types::Parameter::builder()
                    .parameter_key(&p.name)
                    .parameter_value(&p.value)
                    .build()
            })
            .collect()
    })
}

impl Clients {
    /// The StackSet, or `None` when there is none (or it was deleted).
    pub async fn describe_stack_set(
        &self,
        name: &str,
        call_as: &str,
    ) -> Result<Option<StackSetInfo>, DeployError> {
        let out = match self
            .cfn
            .describe_stack_set()
            .stack_set_name(name)
            .call_as(cfn::types::CallAs::from(call_as))
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) if e.code() == Some("StackSetNotFoundException") => return Ok(None),
            Err(e) => return Err(aws_error("DescribeStackSet", name, e)),
        };
        let Some(set) = out.stack_set() else {
            return Ok(None);
        };
        let status = set
            .status()
            .map(|s| s.as_str().to_owned())
            .unwrap_or_default();
        if status == "DELETED" {
            return Ok(None);
        }
        Ok(Some(StackSetInfo {
            status,
            template_body: set.template_body().unwrap_or_default().to_owned(),
            permission_model: set
                .permission_model()
                .map(|p| p.as_str().to_owned())
                .unwrap_or_default(),
        }))
    }

    /// Creates a StackSet (no instances yet).
    pub async fn create_stack_set(
        &self,
        set: &NewStackSet<'_>,
        template: &TemplateSource,
        call: &StackSetCall,
    ) -> Result<(), DeployError> {
        use crate::assembly::fleet::PermissionModel;
        let mut req = self
            .cfn
            .create_stack_set()
            .stack_set_name(set.name)
            .description(set.description)
            .permission_model(cfn::types::PermissionModels::from(
                set.permission_model.api_name(),
            ))
            .set_capabilities(Some(capabilities_of(set.capabilities)))
            .set_parameters(stack_set_parameters(set.parameters))
            .call_as(call.call_as());
        req = match set.permission_model {
            PermissionModel::SelfManaged {
                administration_role_arn,
                execution_role_name,
            } => req
                .set_administration_role_arn(administration_role_arn.clone())
                .set_execution_role_name(execution_role_name.clone()),
            PermissionModel::ServiceManaged { .. } => req.auto_deployment(
                cfn::types::AutoDeployment::builder()
                    .enabled(true)
                    .retain_stacks_on_account_removal(false)
                    .build(),
            ),
        };
        req = match template {
            TemplateSource::Body(b) => req.template_body(b),
            TemplateSource::Url(u) => req.template_url(u),
        };
        req.send()
            .await
            .map_err(|e| aws_error("CreateStackSet", set.name, e))?;
        Ok(())
    }

    /// Updates a StackSet's template (and so every instance); returns the operation id.
    pub async fn update_stack_set(
        &self,
        set: &NewStackSet<'_>,
        template: &TemplateSource,
        call: &StackSetCall,
        operation_id: &str,
    ) -> Result<String, DeployError> {
        use crate::assembly::fleet::PermissionModel;
        let mut req = self
            .cfn
            .update_stack_set()
            .stack_set_name(set.name)
            .description(set.description)
            .set_capabilities(Some(capabilities_of(set.capabilities)))
            .set_parameters(stack_set_parameters(set.parameters))
            .operation_preferences(call.preferences())
            .operation_id(operation_id)
            .call_as(call.call_as());
        if let PermissionModel::SelfManaged {
            administration_role_arn,
            execution_role_name,
        } = set.permission_model
        {
            req = req
                .set_administration_role_arn(administration_role_arn.clone())
                .set_execution_role_name(execution_role_name.clone());
        }
        req = match template {
            TemplateSource::Body(b) => req.template_body(b),
            TemplateSource::Url(u) => req.template_url(u),
        };
        let out = req
            .send()
            .await
            .map_err(|e| aws_error("UpdateStackSet", set.name, e))?;
        Ok(out.operation_id().unwrap_or(operation_id).to_owned())
    }

    /// Every stack instance of the StackSet (every page).
    pub async fn list_stack_instances(
        &self,
        name: &str,
        call_as: &str,
    ) -> Result<Vec<DeployedInstance>, DeployError> {
        let summaries = self
            .cfn
            .list_stack_instances()
            .stack_set_name(name)
            .call_as(cfn::types::CallAs::from(call_as))
            .into_paginator()
            .items()
            .send()
            .collect::<Vec<_>>()
            .await;
        summaries
            .into_iter()
            .map(|s| {
                let s = s.map_err(|e| aws_error("ListStackInstances", name, e))?;
                Ok(DeployedInstance {
                    account: s.account().unwrap_or_default().to_owned(),
                    region: s.region().unwrap_or_default().to_owned(),
                    organizational_unit: s.organizational_unit_id().map(str::to_owned),
                    stack_id: s.stack_id().map(str::to_owned),
                    status: s
                        .status()
                        .map(|s| s.as_str().to_owned())
                        .unwrap_or_default(),
                    status_reason: s.status_reason().map(str::to_owned),
                })
            })
            .collect()
    }

    /// The `ParameterOverrides` of one stack instance.
    pub async fn instance_overrides(
        &self,
        name: &str,
        account: &str,
        region: &str,
        call_as: &str,
    ) -> Result<BTreeMap<String, String>, DeployError> {
        let out = self
            .cfn
            .describe_stack_instance()
            .stack_set_name(name)
            .stack_instance_account(account)
            .stack_instance_region(region)
            .call_as(cfn::types::CallAs::from(call_as))
            .send()
            .await
            .map_err(|e| {
                aws_error(
                    "DescribeStackInstance",
                    &format!("{name} {account} {region}"),
                    e,
                )
            })?;
        Ok(out
            .stack_instance()
            .map(|i| {
                i.parameter_overrides()
                    .iter()
                    .filter_map(|p| {
                        Some((
                            p.parameter_key()?.to_owned(),
                            p.parameter_value()?.to_owned(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Creates (`update` false) or updates stack instances for `targets` in `regions`, all with
    /// `overrides`; returns the operation id.
    #[allow(clippy::too_many_arguments)]
    pub async fn stack_instances(
        &self,
        name: &str,
        update: bool,
        targets: &[crate::assembly::fleet::Target],
        regions: &[String],
        overrides: &BTreeMap<String, String>,
        call: &StackSetCall,
        operation_id: &str,
    ) -> Result<String, DeployError> {
        let (accounts, units) = deployment_targets(targets);
        let overrides = Some(overrides_of(overrides));
        let regions = Some(regions.to_vec());
        let out = if update {
            self.cfn
                .update_stack_instances()
                .stack_set_name(name)
                .set_accounts(accounts)
                .set_deployment_targets(units)
                .set_regions(regions)
                .set_parameter_overrides(overrides)
                .operation_preferences(call.preferences())
                .operation_id(operation_id)
                .call_as(call.call_as())
                .send()
                .await
                .map(|o| o.operation_id().map(str::to_owned))
                .map_err(|e| aws_error("UpdateStackInstances", name, e))?
        } else {
            self.cfn
                .create_stack_instances()
                .stack_set_name(name)
                .set_accounts(accounts)
                .set_deployment_targets(units)
                .set_regions(regions)
                .set_parameter_overrides(overrides)
                .operation_preferences(call.preferences())
                .operation_id(operation_id)
                .call_as(call.call_as())
                .send()
                .await
                .map(|o| o.operation_id().map(str::to_owned))
                .map_err(|e| aws_error("CreateStackInstances", name, e))?
        };
        Ok(out.unwrap_or_else(|| operation_id.to_owned()))
    }

    /// The status of a StackSet operation (`RUNNING`, `SUCCEEDED`, `FAILED`, ...) and its
    /// reason.
    pub async fn stack_set_operation(
        &self,
        name: &str,
        operation_id: &str,
        call_as: &str,
    ) -> Result<(String, Option<String>), DeployError> {
        let out = self
            .cfn
            .describe_stack_set_operation()
            .stack_set_name(name)
            .operation_id(operation_id)
            .call_as(cfn::types::CallAs::from(call_as))
            .send()
            .await
            .map_err(|e| aws_error("DescribeStackSetOperation", name, e))?;
        let op = out.stack_set_operation();
        Ok((
            op.and_then(|o| o.status())
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
            op.and_then(|o| o.status_reason()).map(str::to_owned),
        ))
    }

    /// The ids of the StackSet's operations still running (or queued, or stopping).
    pub async fn running_operations(
        &self,
        name: &str,
        call_as: &str,
    ) -> Result<Vec<String>, DeployError> {
        let summaries = self
            .cfn
            .list_stack_set_operations()
            .stack_set_name(name)
            .call_as(cfn::types::CallAs::from(call_as))
            .into_paginator()
            .items()
            .send()
            .collect::<Vec<_>>()
            .await;
        let mut running = Vec::new();
        for s in summaries {
            let s = s.map_err(|e| aws_error("ListStackSetOperations", name, e))?;
            if matches!(
                s.status().map(|s| s.as_str()),
                Some("RUNNING" | "QUEUED" | "STOPPING")
            ) {
                running.extend(s.operation_id().map(str::to_owned));
            }
        }
        Ok(running)
    }

    /// Each account and region's result of an operation (every page).
    pub async fn operation_results(
        &self,
        name: &str,
        operation_id: &str,
        call_as: &str,
    ) -> Result<Vec<OperationResult>, DeployError> {
        let summaries = self
            .cfn
            .list_stack_set_operation_results()
            .stack_set_name(name)
            .operation_id(operation_id)
            .call_as(cfn::types::CallAs::from(call_as))
            .into_paginator()
            .items()
            .send()
            .collect::<Vec<_>>()
            .await;
        summaries
            .into_iter()
            .map(|s| {
                let s = s.map_err(|e| aws_error("ListStackSetOperationResults", name, e))?;
                Ok(OperationResult {
                    account: s.account().unwrap_or_default().to_owned(),
                    region: s.region().unwrap_or_default().to_owned(),
                    status: s
                        .status()
                        .map(|s| s.as_str().to_owned())
                        .unwrap_or_default(),
                    reason: s.status_reason().map(str::to_owned),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AWS CLI a step runs gets the deploy's profile, endpoint and fixed credentials, so
    /// `--profile` reaches the same account for the scripts as for the SDK calls.
    #[test]
    fn the_cli_gets_the_deploys_settings() {
        let settings = AwsSettings {
            profile: Some("prod".into()),
            endpoint_url: Some("http://127.0.0.1:5000".into()),
            static_credentials: Some(("AKID".into(), "SECRET".into())),
            ..AwsSettings::default()
        };
        assert_eq!(
            settings.cli_environment(),
            [
                ("AWS_PROFILE", "prod".to_owned()),
                ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000".to_owned()),
                ("AWS_ACCESS_KEY_ID", "AKID".to_owned()),
                ("AWS_SECRET_ACCESS_KEY", "SECRET".to_owned()),
            ]
        );
        let defaults = AwsSettings {
            endpoint_url: None,
            ..AwsSettings::default()
        };
        assert!(defaults
            .cli_environment()
            .iter()
            .all(|(k, _)| *k != "AWS_PROFILE" && !k.starts_with("AWS_ACCESS")));
    }
}
