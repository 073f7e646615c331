//! `fleet.json` as types: what fleet synthesis writes at the root of a fleet's output and what
//! `hyperforge deploy --fleet` reads. A fleet's output holds one assembly per distinct member
//! description (`assemblies/<first member>/`, each with its own `manifest.json`), each
//! member's Terraform root modules (`members/<member>/`) and, for every CloudFormation stage
//! that renders the same for all members once their declared inputs are bound, one StackSet
//! template (`stacksets/`) with the parameter values of each member's stack instance.
//!
//! Paths are relative to the fleet's output root and use `/`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `fleet.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FleetManifest {
    /// The format's version; this is version 1.
    pub version: u32,
    /// What wrote the manifest (`hyperforge 0.1.0`).
    pub generator: String,
    /// The fleet's name; it prefixes the StackSet names.
    pub name: String,
    /// Who StackSets act as, and where stack instances go.
    pub permission_model: PermissionModel,
    /// How StackSet operations roll out across regions and accounts.
    pub preferences: OperationPreferences,
    /// The members, in the fleet's order.
    pub members: Vec<FleetMemberManifest>,
    /// The StackSets, in deployment order (their stages' order).
    pub stack_sets: Vec<StackSetManifest>,
    /// The CloudFormation stages that render differently across members even with the
    /// members' values as parameters: each member deploys them as its own stacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_member_stages: Vec<PerMemberStage>,
    /// The template of `AWS::CloudFormation::StackSet` resources, one per StackSet (for a
    /// deployment through CloudFormation itself); absent when it would exceed CloudFormation's
    /// template limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_sets_template: Option<String>,
    /// The fleet's runbook (`FLEET.md`), when it was written (the `runbook` feature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runbook: Option<String>,
}

/// StackSets' permission model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PermissionModel {
    /// `SELF_MANAGED`: the administrator account's role assumes an execution role in each
    /// target account; targets are account ids.
    SelfManaged {
        /// The administration role's ARN; absent for the account's
        /// `AWSCloudFormationStackSetAdministrationRole`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        administration_role_arn: Option<String>,
        /// The execution role's name in each target account; absent for
        /// `AWSCloudFormationStackSetExecutionRole`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        execution_role_name: Option<String>,
    },
    /// `SERVICE_MANAGED`: AWS Organizations' trusted access; targets are organizational units.
    ServiceManaged {
        /// Whether the caller is a delegated administrator (`--call-as DELEGATED_ADMIN`)
        /// rather than the management account.
        delegated_admin: bool,
    },
}

impl PermissionModel {
    /// The API's spelling (`SELF_MANAGED`, `SERVICE_MANAGED`).
    pub fn api_name(&self) -> &'static str {
        match self {
            PermissionModel::SelfManaged { .. } => "SELF_MANAGED",
            PermissionModel::ServiceManaged { .. } => "SERVICE_MANAGED",
        }
    }

    /// `CallAs` (`SELF`, or `DELEGATED_ADMIN` for a delegated administrator).
    pub fn call_as(&self) -> &'static str {
        match self {
            PermissionModel::ServiceManaged {
                delegated_admin: true,
            } => "DELEGATED_ADMIN",
            _ => "SELF",
        }
    }
}

/// StackSet operation preferences (`OperationPreferences`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OperationPreferences {
    /// Whether regions are deployed one at a time or in parallel.
    pub region_concurrency: RegionConcurrency,
    /// How many accounts one region's operation reaches at once.
    pub max_concurrent: Amount,
    /// How many accounts may fail in one region before the operation stops there.
    pub failure_tolerance: Amount,
    /// The regions first, in this order (the others follow in the fleet's order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub region_order: Vec<String>,
}

/// `RegionConcurrencyType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RegionConcurrency {
    /// `SEQUENTIAL`.
    Sequential,
    /// `PARALLEL`.
    Parallel,
}

impl RegionConcurrency {
    /// The API's spelling.
    pub fn api_name(self) -> &'static str {
        match self {
            RegionConcurrency::Sequential => "SEQUENTIAL",
            RegionConcurrency::Parallel => "PARALLEL",
        }
    }
}

/// A count of accounts or a percentage of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Amount {
    /// A number of accounts.
    Count(u32),
    /// A percentage of the accounts (0-100).
    Percentage(u32),
}

/// One member of a fleet: a stack of its own, in one region, for one deployment target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FleetMemberManifest {
    /// The member's name (unique in the fleet).
    pub name: String,
    /// The name of its stack in its assembly: the same for every member of one model (the
    /// members are one stack in different accounts and regions).
    pub stack: String,
    /// Its region.
    pub region: String,
    /// Where its stack instances go.
    pub target: Target,
    /// The model it serves, when the fleet varies models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its own values by variable name (`member`, `stack`, `region`, `account`,
    /// `capacity_id`, `zone_id`, ...), as the fleet gave them.
    pub values: BTreeMap<String, String>,
    /// The directory of its assembly (`assemblies/<member>`, named after the first member
    /// whose description is this member's: the same assembly, byte for byte), with its
    /// `manifest.json`.
    pub assembly: String,
    /// Its own Terraform root modules (`members/<member>/<stack>/terraform/<phase>`), each
    /// calling its assembly's module of that phase with its values and keeping its state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terraform: Vec<String>,
}

/// A StackSet deployment target.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// An AWS account id (self-managed permissions).
    Account(String),
    /// An organizational unit id (service-managed permissions).
    OrganizationalUnit(String),
}

impl Target {
    /// The id.
    pub fn id(&self) -> &str {
        match self {
            Target::Account(id) | Target::OrganizationalUnit(id) => id,
        }
    }
}

/// One StackSet: a CloudFormation stage every member deploys from one template.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StackSetManifest {
    /// The StackSet's name (`<fleet>-<stage>`).
    pub name: String,
    /// The stage it deploys, as each member's manifest names it.
    pub stage: String,
    /// The template (`stacksets/<NN>-<stage>.template.json`).
    pub template: String,
    /// Whether the template is over the 51,200-byte inline limit (deployed from S3).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deploy_from_s3: bool,
    /// The capabilities to acknowledge.
    pub capabilities: Vec<String>,
    /// The template's parameters that take each member's values.
    pub parameters: Vec<StackSetParameter>,
    /// The template's output names.
    pub outputs: Vec<String>,
    /// One stack instance per member, in the fleet's order.
    pub instances: Vec<StackInstanceManifest>,
}

/// A parameter of a StackSet template that varies across members.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StackSetParameter {
    /// The parameter's name.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// The StackSet's own value: the first member's. CloudFormation refuses a StackSet whose
    /// parameter without a default has no value (`Parameters: [X] must have values`); every
    /// member's instance overrides it with its own.
    pub value: String,
}

/// A member's stack instance of one StackSet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StackInstanceManifest {
    /// The member.
    pub member: String,
    /// Its region.
    pub region: String,
    /// Its target.
    pub target: Target,
    /// The member's value of each parameter (`ParameterOverrides`).
    pub parameter_overrides: BTreeMap<String, String>,
}

/// A CloudFormation stage deployed per member rather than by a StackSet, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PerMemberStage {
    /// The stage.
    pub stage: String,
    /// Why its members' templates are not one template: the first difference found.
    pub reason: String,
}

impl FleetManifest {
    /// The format version this crate writes and reads.
    pub const VERSION: u32 = 1;

    /// The text of `fleet.json`: pretty JSON with a final newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Parses the text of a `fleet.json`. The version is not checked.
    pub fn from_json(text: &str) -> Result<FleetManifest, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The JSON Schema (draft 2020-12) of `fleet.json`, as committed in
    /// `docs/fleet.schema.json`.
    pub fn json_schema() -> serde_json::Value {
        use serde_json::Value;
        let mut schema = serde_json::Map::new();
        schema.insert(
            "$schema".to_owned(),
            Value::from("https://json-schema.org/draft/2020-12/schema"),
        );
        schema.insert(
            "$id".to_owned(),
            Value::from("https://hyperforge.dev/fleet.schema.json"),
        );
        schema.insert("title".to_owned(), Value::from("hyperforge fleet.json"));
        if let Value::Object(generated) = schemars::schema_for!(FleetManifest).to_value() {
            for (key, value) in generated {
                schema.entry(key).or_insert(value);
            }
        }
        Value::Object(schema)
    }

    /// A member by name.
    pub fn member(&self, name: &str) -> Option<&FleetMemberManifest> {
        self.members.iter().find(|m| m.name == name)
    }
}
