//! `FLEET.md`: how to deploy a fleet, rendered from `fleet.json` alone ([`FleetManifest`]) with
//! the runbook's renderer. Every value that reaches a command is quoted here, by
//! [`sh_quote`], whatever grammar checked it before.

use super::{fleet_registry, RunbookError};
use crate::assembly::fleet::{Amount, FleetManifest, PermissionModel, Target};
use crate::assembly::plan::sh_quote;
use serde::Serialize;

/// The most members whose commands `FLEET.md` spells out; the rest follow `fleet.json`.
pub const FLEET_RUNBOOK_MEMBERS: usize = 20;

/// Everything the fleet template shows, as plain values (commands already quoted).
#[derive(Clone, Debug, Serialize)]
pub struct FleetData {
    /// The fleet's name.
    pub name: String,
    /// How many members it has.
    pub member_count: usize,
    /// How many StackSets deploy them.
    pub stack_set_count: usize,
    /// The first members, for the table.
    pub members: Vec<FleetMemberRow>,
    /// How many more `fleet.json` lists; 0 when all are shown.
    pub more_members: usize,
    /// Stages each member deploys on its own, and why.
    pub per_member_stages: Vec<PerMemberRow>,
    /// Self-managed permissions, if so.
    pub self_managed: Vec<SelfManagedData>,
    /// Service-managed permissions, if so.
    pub service_managed: Vec<ServiceManagedData>,
    /// The upload prefix, as a shell word.
    pub prefix: String,
    /// The command deploying the StackSets template, when it was written.
    pub stack_sets_template: Vec<CommandData>,
    /// ` --call-as DELEGATED_ADMIN` or empty.
    pub call_as: String,
    /// The StackSets in deployment order.
    pub stack_sets: Vec<StackSetData>,
}

/// A row of the members' table.
#[derive(Clone, Debug, Serialize)]
pub struct FleetMemberRow {
    /// The member's name.
    pub name: String,
    /// Its stack's name.
    pub stack: String,
    /// Its region.
    pub region: String,
    /// Its account or organizational unit.
    pub target: String,
    /// Its assembly's directory (shared with the members whose description is its).
    pub assembly: String,
}

/// A stage deployed per member.
#[derive(Clone, Debug, Serialize)]
pub struct PerMemberRow {
    /// The stage.
    pub stage: String,
    /// Why its templates differ.
    pub reason: String,
}

/// Self-managed permissions.
#[derive(Clone, Debug, Serialize)]
pub struct SelfManagedData {
    /// The roles the fleet names instead of AWS's defaults, for people; empty when none.
    pub own_roles: String,
}

/// Service-managed permissions.
#[derive(Clone, Debug, Serialize)]
pub struct ServiceManagedData {
    /// Whether the fleet is deployed from a delegated administrator account.
    pub delegated_admin: bool,
}

/// One command.
#[derive(Clone, Debug, Serialize)]
pub struct CommandData {
    /// The command line(s).
    pub command: String,
}

/// One StackSet and its instances' commands.
#[derive(Clone, Debug, Serialize)]
pub struct StackSetData {
    /// Its name.
    pub name: String,
    /// Its stage.
    pub stage: String,
    /// The command creating it.
    pub create: String,
    /// The commands creating its first members' instances, each with its comment line.
    pub instances: Vec<String>,
    /// How many more instances `fleet.json` lists; 0 when all are shown.
    pub more_instances: usize,
}

/// Renders `FLEET.md` from a fleet's manifest.
pub fn render_fleet(manifest: &FleetManifest) -> Result<String, RunbookError> {
    fleet_registry()?
        .render("fleet", &fleet_data(manifest))
        .map_err(|e| RunbookError(e.to_string()))
}

/// The fleet template's data for `m`.
pub fn fleet_data(m: &FleetManifest) -> FleetData {
    let call_as = match &m.permission_model {
        PermissionModel::ServiceManaged {
            delegated_admin: true,
        } => " --call-as DELEGATED_ADMIN",
        _ => "",
    };
    let (self_managed, service_managed, roles) = match &m.permission_model {
        PermissionModel::SelfManaged {
            administration_role_arn,
            execution_role_name,
        } => {
            let own_roles = if administration_role_arn.is_some() || execution_role_name.is_some() {
                format!(
                    "{}{}",
                    administration_role_arn.as_deref().map_or_else(
                        || "the default administration role".to_owned(),
                        |a| { format!("`{a}`") }
                    ),
                    execution_role_name
                        .as_deref()
                        .map(|n| format!(", execution role `{n}`"))
                        .unwrap_or_default()
                )
            } else {
                String::new()
            };
            let roles = format!(
                "{}{}",
                administration_role_arn
                    .as_deref()
                    .map(|a| format!(" --administration-role-arn {}", sh_quote(a)))
                    .unwrap_or_default(),
                execution_role_name
                    .as_deref()
                    .map(|n| format!(" --execution-role-name {}", sh_quote(n)))
                    .unwrap_or_default()
            );
            (vec![SelfManagedData { own_roles }], Vec::new(), roles)
        }
        PermissionModel::ServiceManaged { delegated_admin } => (
            Vec::new(),
            vec![ServiceManagedData {
                delegated_admin: *delegated_admin,
            }],
            " --auto-deployment Enabled=true,RetainStacksOnAccountRemoval=false".to_owned(),
        ),
    };
    let preferences = sh_quote(&operation_preferences_cli(m));
    let stack_sets = m
        .stack_sets
        .iter()
        .map(|set| {
            let file = set.template.rsplit('/').next().unwrap_or_default();
            // Inside the URL's double quotes only when no character is special there.
            let file = if sh_quote(file) == file {
                file.to_owned()
            } else {
                format!("\"{}\"", sh_quote(file))
            };
            let name = sh_quote(&set.name);
            // The StackSet's own parameter values (the first member's; each instance
            // overrides them): CloudFormation requires one for a parameter without a default.
            let parameters = if set.parameters.is_empty() {
                String::new()
            } else {
                let pairs: Vec<String> = set
                    .parameters
                    .iter()
                    .map(|p| sh_quote(&format!("ParameterKey={},ParameterValue={}", p.name, p.value)))
                    .collect();
                format!(" \\\n  --parameters {}", pairs.join(" "))
            };
            let create = format!(
                "aws cloudformation create-stack-set --stack-set-name {name} --permission-model {}{roles}{call_as} \\\n  \
                 --template-url \"https://${{BUCKET}}.s3.amazonaws.com/${{PREFIX}}{file}\"{parameters}{}",
                m.permission_model.api_name(),
                if set.capabilities.is_empty() {
                    String::new()
                } else {
                    let capabilities: Vec<String> =
                        set.capabilities.iter().map(|c| sh_quote(c)).collect();
                    format!(" \\\n  --capabilities {}", capabilities.join(" "))
                }
            );
            let instances = set
                .instances
                .iter()
                .take(FLEET_RUNBOOK_MEMBERS)
                .map(|instance| {
                    let targets = match &instance.target {
                        Target::Account(id) => format!("--accounts {}", sh_quote(id)),
                        Target::OrganizationalUnit(id) => format!(
                            "--deployment-targets {}",
                            sh_quote(&format!("OrganizationalUnitIds={id}"))
                        ),
                    };
                    let overrides = if instance.parameter_overrides.is_empty() {
                        String::new()
                    } else {
                        let pairs: Vec<String> = instance
                            .parameter_overrides
                            .iter()
                            .map(|(k, v)| sh_quote(&format!("ParameterKey={k},ParameterValue={v}")))
                            .collect();
                        format!(" \\\n  --parameter-overrides {}", pairs.join(" "))
                    };
                    format!(
                        "# {}\nOP=$(aws cloudformation create-stack-instances --stack-set-name {name}{call_as} {targets} --regions {}{overrides} \\\n  \
                         --operation-preferences {preferences} --query OperationId --output text) && wait_op {name} \"$OP\"",
                        comment(&instance.member),
                        sh_quote(&instance.region),
                    )
                })
                .collect();
            StackSetData {
                name: set.name.clone(),
                stage: set.stage.clone(),
                create,
                instances,
                more_instances: set.instances.len().saturating_sub(FLEET_RUNBOOK_MEMBERS),
            }
        })
        .collect();
    FleetData {
        name: m.name.clone(),
        member_count: m.members.len(),
        stack_set_count: m.stack_sets.len(),
        members: m
            .members
            .iter()
            .take(FLEET_RUNBOOK_MEMBERS)
            .map(|member| FleetMemberRow {
                name: member.name.clone(),
                stack: member.stack.clone(),
                region: member.region.clone(),
                target: member.target.id().to_owned(),
                assembly: member.assembly.clone(),
            })
            .collect(),
        more_members: m.members.len().saturating_sub(FLEET_RUNBOOK_MEMBERS),
        per_member_stages: m
            .per_member_stages
            .iter()
            .map(|s| PerMemberRow {
                stage: s.stage.clone(),
                reason: super::prose(&s.reason),
            })
            .collect(),
        self_managed,
        service_managed,
        prefix: sh_quote(&format!("{}/", m.name)),
        stack_sets_template: m
            .stack_sets_template
            .iter()
            .map(|template| CommandData {
                command: format!(
                    "aws cloudformation deploy --stack-name {} --template-file {} \\\n  \
                     --s3-bucket \"$BUCKET\" --s3-prefix \"${{PREFIX}}stacksets\" --parameter-overrides \
                     TemplateBucket=\"$BUCKET\" TemplatePrefix=\"$PREFIX\"",
                    sh_quote(&format!("{}-stacksets", m.name)),
                    sh_quote(template)
                ),
            })
            .collect(),
        call_as: call_as.to_owned(),
        stack_sets,
    }
}

/// `text` as a shell comment: one line, whatever it holds.
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `--operation-preferences` in the CLI's shorthand (`RegionConcurrencyType=SEQUENTIAL,...`),
/// in the API's key order.
fn operation_preferences_cli(m: &FleetManifest) -> String {
    let p = &m.preferences;
    let amount = |a: Amount, count: &str, percentage: &str| match a {
        Amount::Count(n) => format!("{count}={n}"),
        Amount::Percentage(n) => format!("{percentage}={n}"),
    };
    let mut parts = vec![
        format!("RegionConcurrencyType={}", p.region_concurrency.api_name()),
        amount(
            p.max_concurrent,
            "MaxConcurrentCount",
            "MaxConcurrentPercentage",
        ),
        amount(
            p.failure_tolerance,
            "FailureToleranceCount",
            "FailureTolerancePercentage",
        ),
    ];
    if !p.region_order.is_empty() {
        parts.push(format!("RegionOrder={}", p.region_order.join(",")));
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assembly::fleet::{
        FleetMemberManifest, OperationPreferences, RegionConcurrency, StackInstanceManifest,
        StackSetManifest, StackSetParameter,
    };
    use crate::assembly::plan::shell_probe::ShellProbe;
    use std::collections::BTreeMap;

    fn fleet(value: &str, permission_model: PermissionModel) -> FleetManifest {
        let target = Target::Account(value.to_owned());
        FleetManifest {
            version: FleetManifest::VERSION,
            generator: "test".into(),
            name: value.into(),
            permission_model,
            preferences: OperationPreferences {
                region_concurrency: RegionConcurrency::Parallel,
                max_concurrent: Amount::Percentage(50),
                failure_tolerance: Amount::Count(1),
                region_order: vec![value.into()],
            },
            members: vec![FleetMemberManifest {
                name: value.into(),
                stack: value.into(),
                region: value.into(),
                target: target.clone(),
                model: None,
                values: BTreeMap::new(),
                assembly: "assemblies/x".into(),
                terraform: vec![format!("members/{value}/s/terraform/01-a")],
            }],
            stack_sets: vec![StackSetManifest {
                name: value.into(),
                stage: value.into(),
                template: format!("stacksets/{value}"),
                deploy_from_s3: false,
                capabilities: vec![value.into()],
                parameters: vec![StackSetParameter {
                    name: "P".into(),
                    description: value.into(),
                    value: value.into(),
                }],
                outputs: Vec::new(),
                instances: vec![StackInstanceManifest {
                    member: value.into(),
                    region: value.into(),
                    target,
                    parameter_overrides: BTreeMap::from([("P".to_owned(), value.to_owned())]),
                }],
            }],
            per_member_stages: Vec::new(),
            stack_sets_template: Some(value.into()),
            runbook: Some("FLEET.md".into()),
        }
    }

    /// The `sh` blocks of `text`, user placeholders (`<bucket>`) filled in.
    fn scripts(text: &str) -> Vec<String> {
        text.split("```sh\n")
            .skip(1)
            .filter_map(|block| block.split_once("\n```").map(|(script, _)| script))
            .map(|script| {
                let mut out = String::new();
                let mut rest = script;
                while let Some(at) = rest.find('<') {
                    out.push_str(&rest[..at]);
                    let tail = &rest[at + 1..];
                    match tail.find('>') {
                        Some(end)
                            if tail[..end]
                                .chars()
                                .all(|c| c.is_ascii_lowercase() || " -".contains(c)) =>
                        {
                            out.push('x');
                            rest = &tail[end + 1..];
                        }
                        _ => {
                            out.push('<');
                            rest = tail;
                        }
                    }
                }
                out.push_str(rest);
                out
            })
            .collect()
    }

    #[cfg(unix)]
    #[test]
    fn hostile_values_in_a_fleet_never_run_as_commands() {
        let probe = ShellProbe::new("fleet", &["aws", "hyperforge", "sleep"], "echo SUCCEEDED");
        let mut ran = 0;
        for value in &probe.hostile {
            for model in [
                PermissionModel::SelfManaged {
                    administration_role_arn: Some(value.clone()),
                    execution_role_name: Some(value.clone()),
                },
                PermissionModel::ServiceManaged {
                    delegated_admin: true,
                },
            ] {
                let text = render_fleet(&fleet(value, model)).unwrap();
                for script in scripts(&text) {
                    probe.run(&script, &[]);
                    ran += 1;
                    assert!(!probe.ran(), "a value ran as a command:\n{script}");
                }
            }
        }
        assert!(ran >= probe.hostile.len() * 2 * 4, "{ran} scripts ran");
        probe.assert_catches_an_unquoted_value();
    }
}
