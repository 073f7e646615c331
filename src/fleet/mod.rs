//! Fleets: one stack description expanded over a matrix of regions, deployment targets
//! (accounts or organizational units) and models into named member stacks, each validated and
//! synthesized as a stack alone is, and the CloudFormation stages that are the same for every
//! member turned into StackSets.
//!
//! [`Fleet`] holds the matrix and a function from a [`FleetMember`] to the member's
//! description. A description is a function of what it reads of the member (the accessors
//! record it), so members that agree on that share one description: synthesis
//! ([`Fleet::write_to`], [`Fleet::synth`]) describes and synthesizes each such group once, on
//! every core, writes its assembly once (`assemblies/<first member>/`) as soon as it is done,
//! and gives each member only what is its own: its `fleet.json` entry and its Terraform root
//! modules (`members/<member>/`, module `terraform`), which call the group's modules with the
//! member's values and keep the member's state. Work and memory grow with what differs, not
//! with the member count. Every member of one model is the same stack
//! ([`FleetMember::stack`]) in its own account and region, so its templates differ only in
//! its declared inputs' defaults: for each CloudFormation stage, [`stackset`] binds those by
//! name, and when all members' bound templates agree (checked, never assumed) the stage is one
//! StackSet template (`stacksets/`), and `fleet.json` lists each member's stack instance with
//! its inputs' values as overrides.

pub mod stackset;
mod terraform;
mod write;

use crate::app::{is_valid_stack_name, App, Stack};
use crate::assembly::fleet::{
    Amount, FleetManifest, FleetMemberManifest, OperationPreferences, PerMemberStage,
    PermissionModel, RegionConcurrency, StackInstanceManifest, StackSetManifest, StackSetParameter,
    Target,
};
use crate::assembly::manifest::StageManifest;
use crate::catalog::regions::{is_known_region, AzId};
use crate::diagnostics::{Code, Diagnostic, Diagnostics};
use crate::synth::{SynthOptions, SynthTimings};
use serde_json::Value;
use stackset::{bind, first_difference};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub use write::FleetWriteError;

/// The most regions a fleet lists.
pub const MAX_REGIONS: usize = 64;
/// The most deployment targets a fleet lists.
pub const MAX_TARGETS: usize = 10_000;
/// The most models a fleet varies.
pub const MAX_MODELS: usize = 32;
/// The most members a fleet expands into.
pub const MAX_MEMBERS: usize = 10_000;
/// The most failed members whose diagnostics are shown; the rest are counted.
const SHOWN_FAILED_MEMBERS: usize = 20;
/// The most different templates of one stage kept to compare and report.
const KEPT_FORMS: usize = 4;

type Describe = dyn Fn(&FleetMember) -> Result<App, Diagnostics> + Send + Sync;

/// One stack description over a matrix of regions, targets and models.
#[derive(Clone)]
pub struct Fleet {
    name: String,
    describe: Arc<Describe>,
    regions: Vec<FleetRegion>,
    targets: Vec<Target>,
    models: Vec<String>,
    permission_model: PermissionModel,
    preferences: OperationPreferences,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("name", &self.name)
            .field("regions", &self.regions)
            .field("targets", &self.targets)
            .field("models", &self.models)
            .field("permission_model", &self.permission_model)
            .field("preferences", &self.preferences)
            .finish_non_exhaustive()
    }
}

/// One region of a fleet, with the capacity its members use there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetRegion {
    region: String,
    capacity: Option<MemberCapacity>,
    targets: Vec<Target>,
    values: BTreeMap<String, String>,
}

/// The reserved capacity a member's GPU nodes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberCapacity {
    /// An EC2 Capacity Block (or capacity reservation): its id and zone id.
    CapacityBlock {
        /// `cr-...`.
        reservation_id: String,
        /// The reservation's zone id (`usw2-az2`).
        zone_id: String,
    },
    /// A SageMaker training plan: its ARN and zone id.
    TrainingPlan {
        /// `arn:aws:sagemaker:<region>:<account>:training-plan/<name>`.
        arn: String,
        /// The plan's zone id.
        zone_id: String,
    },
}

impl FleetRegion {
    /// A region (`us-west-2`).
    pub fn new(region: impl Into<String>) -> Self {
        FleetRegion {
            region: region.into(),
            capacity: None,
            targets: Vec::new(),
            values: BTreeMap::new(),
        }
    }

    /// The members here use this Capacity Block.
    pub fn capacity_block(
        mut self,
        reservation_id: impl Into<String>,
        zone_id: impl Into<String>,
    ) -> Self {
        self.capacity = Some(MemberCapacity::CapacityBlock {
            reservation_id: reservation_id.into(),
            zone_id: zone_id.into(),
        });
        self
    }

    /// The members here use this training plan.
    pub fn training_plan(mut self, arn: impl Into<String>, zone_id: impl Into<String>) -> Self {
        self.capacity = Some(MemberCapacity::TrainingPlan {
            arn: arn.into(),
            zone_id: zone_id.into(),
        });
        self
    }

    /// Deploy this region to these targets instead of the fleet's (a Capacity Block belongs
    /// to one account).
    pub fn targets(mut self, targets: impl IntoIterator<Item = Target>) -> Self {
        self.targets = targets.into_iter().collect();
        self
    }

    /// A value of the members here, read by the description as `FleetMember::value(key)`.
    pub fn value(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.values.insert(key.into(), value.into());
        self
    }

    /// The region code.
    pub fn region(&self) -> &str {
        &self.region
    }
}

/// One member of a fleet: what its description is built from.
///
/// Its description may read only what it needs, through these accessors: each records what
/// was read, and a member that agrees with an already described one on everything that one's
/// description read has the same description (a description is a function of what it reads),
/// so the fleet synthesizes it once for both ([`Fleet::synth_into`]).
#[derive(Debug)]
pub struct FleetMember {
    pub(crate) name: String,
    pub(crate) stack: String,
    pub(crate) index: usize,
    pub(crate) region: String,
    pub(crate) target: Target,
    pub(crate) model: Option<String>,
    pub(crate) capacity: Option<MemberCapacity>,
    pub(crate) values: BTreeMap<String, String>,
    reads: Mutex<BTreeSet<&'static str>>,
    value_reads: Mutex<BTreeSet<String>>,
}

impl Clone for FleetMember {
    /// The same member, with nothing read yet.
    fn clone(&self) -> Self {
        FleetMember {
            name: self.name.clone(),
            stack: self.stack.clone(),
            index: self.index,
            region: self.region.clone(),
            target: self.target.clone(),
            model: self.model.clone(),
            capacity: self.capacity.clone(),
            values: self.values.clone(),
            reads: Mutex::default(),
            value_reads: Mutex::default(),
        }
    }
}

impl PartialEq for FleetMember {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.name,
            &self.stack,
            self.index,
            &self.region,
            &self.target,
            &self.model,
            &self.capacity,
            &self.values,
        ) == (
            &other.name,
            &other.stack,
            other.index,
            &other.region,
            &other.target,
            &other.model,
            &other.capacity,
            &other.values,
        )
    }
}

impl Eq for FleetMember {}

impl FleetMember {
    fn read(&self, what: &'static str) {
        self.reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(what);
    }

    /// The member's name: the fleet's, its region and (with several targets or models) its
    /// target and model. It names the member's assembly and stack instance, never a resource
    /// (a description that reads it is one per member).
    pub fn name(&self) -> &str {
        self.read("member");
        &self.name
    }

    /// The name of the member's stack: the fleet's, and the model's when the fleet varies
    /// models. Every member of one model has the same stack name, so its templates are the
    /// same: the account and region a member is deployed to tell members apart, as they do
    /// for every stack instance of a StackSet.
    pub fn stack(&self) -> &str {
        self.read("stack");
        &self.stack
    }

    /// Its place in the fleet's order.
    pub fn index(&self) -> usize {
        self.read("index");
        self.index
    }

    /// Its region.
    pub fn region(&self) -> &str {
        self.read("region");
        &self.region
    }

    /// Its deployment target.
    pub fn target(&self) -> &Target {
        self.read("target");
        &self.target
    }

    /// The model it serves, when the fleet varies models.
    pub fn model(&self) -> Option<&str> {
        self.read("model");
        self.model.as_deref()
    }

    /// Its capacity, when its region has one.
    pub fn capacity(&self) -> Option<&MemberCapacity> {
        self.read("capacity");
        self.capacity.as_ref()
    }

    /// A value by name: `member`, `stack`, `region`, `account` or `organizational_unit`,
    /// `model`, `capacity_id`, `zone_id`, or one its region declared.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.value_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_owned());
        self.values.get(key).map(String::as_str)
    }

    /// Every value by name (a description that reads them all is one per member).
    pub fn values(&self) -> &BTreeMap<String, String> {
        self.read("values");
        &self.values
    }

    /// The account id, when the target is an account.
    pub fn account(&self) -> Option<&str> {
        self.read("target");
        match &self.target {
            Target::Account(id) => Some(id),
            Target::OrganizationalUnit(_) => None,
        }
    }

    /// What a description read of this member so far: the facts its description is a
    /// function of, by name.
    pub(crate) fn reads(&self) -> Vec<String> {
        let reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        let values = self.value_reads.lock().unwrap_or_else(|e| e.into_inner());
        reads
            .iter()
            .map(|r| format!("@{r}"))
            .chain(values.iter().cloned())
            .collect()
    }

    /// This member's fact `read` (one of [`FleetMember::reads`]), comparable with another's.
    pub(crate) fn fact(&self, read: &str) -> Option<String> {
        match read {
            "@member" => Some(self.name.clone()),
            "@stack" => Some(self.stack.clone()),
            "@index" => Some(self.index.to_string()),
            "@region" => Some(self.region.clone()),
            "@target" => Some(format!("{:?}", self.target)),
            "@model" => self.model.clone(),
            "@capacity" => Some(format!("{:?}", self.capacity)),
            "@values" => Some(format!("{:?}", self.values)),
            key => self.values.get(key).cloned(),
        }
    }
}

/// The values every member has (those that apply to it), besides those its region declares.
pub const MEMBER_VALUES: &[&str] = &[
    "member",
    "stack",
    "region",
    "account",
    "organizational_unit",
    "model",
    "capacity_id",
    "zone_id",
];

impl Fleet {
    /// A fleet named `name` (it names the StackSets) whose members are described by
    /// `describe`: given a member, the member's stack, named `member.stack` in `member.region`.
    pub fn new(
        name: impl Into<String>,
        describe: impl Fn(&FleetMember) -> Stack + Send + Sync + 'static,
    ) -> Self {
        Fleet::from_apps(name, move |m| Ok(App::new().stack(describe(m))))
    }

    /// A fleet whose members are described by a function giving an app of one stack (its app
    /// tags included), or the diagnostics of why it cannot (a stack file's, say).
    pub fn from_apps(
        name: impl Into<String>,
        describe: impl Fn(&FleetMember) -> Result<App, Diagnostics> + Send + Sync + 'static,
    ) -> Self {
        Fleet {
            name: name.into(),
            describe: Arc::new(describe),
            regions: Vec::new(),
            targets: Vec::new(),
            models: Vec::new(),
            permission_model: PermissionModel::SelfManaged {
                administration_role_arn: None,
                execution_role_name: None,
            },
            preferences: OperationPreferences {
                region_concurrency: RegionConcurrency::Sequential,
                max_concurrent: Amount::Count(1),
                failure_tolerance: Amount::Count(0),
                region_order: Vec::new(),
            },
        }
    }

    /// Adds a region.
    pub fn region(mut self, region: FleetRegion) -> Self {
        self.regions.push(region);
        self
    }

    /// Adds an account as a target (self-managed permissions).
    pub fn account(mut self, id: impl Into<String>) -> Self {
        self.targets.push(Target::Account(id.into()));
        self
    }

    /// Adds an organizational unit as a target (service-managed permissions).
    pub fn organizational_unit(mut self, id: impl Into<String>) -> Self {
        self.targets.push(Target::OrganizationalUnit(id.into()));
        self
    }

    /// Adds a model: members multiply by models, each told its model.
    pub fn model(mut self, id: impl Into<String>) -> Self {
        self.models.push(id.into());
        self
    }

    /// Sets the StackSets' permission model (self-managed by default).
    pub fn permission_model(mut self, model: PermissionModel) -> Self {
        self.permission_model = model;
        self
    }

    /// Sets how operations roll out (by default one region after another, one account at a
    /// time, stopping at the first failure).
    pub fn preferences(mut self, preferences: OperationPreferences) -> Self {
        self.preferences = preferences;
        self
    }

    /// The fleet's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of members, or `None` when the matrix is over [`MAX_MEMBERS`] (or overflows).
    pub fn member_count(&self) -> Option<usize> {
        let models = self.models.len().max(1);
        let mut total = 0usize;
        for region in &self.regions {
            let targets = if region.targets.is_empty() {
                self.targets.len()
            } else {
                region.targets.len()
            };
            total = total.checked_add(targets.checked_mul(models)?)?;
        }
        (total <= MAX_MEMBERS).then_some(total)
    }

    /// Every diagnostic of the fleet itself (its name, matrix and preferences), before any
    /// member is built.
    pub fn validate_matrix(&self) -> Diagnostics {
        let mut ds = Diagnostics::new();
        let at = format!("fleet/{}", self.name);
        // The region entry being checked: its diagnostics name it (`regions[i]`), so that a
        // fleet file points at that entry, not at another region's equal value.
        let in_region: std::cell::Cell<Option<usize>> = std::cell::Cell::new(None);
        let mut bad = |code: Code, message: String, help: &str| {
            let d = Diagnostic::new(code, at.clone(), message, help);
            ds.push(match in_region.get() {
                Some(i) => d.at_field(&format!("regions[{i}]")),
                None => d,
            });
        };
        if !is_valid_stack_name(&self.name) {
            bad(
                Code::InvalidFleet,
                format!("`{}` is not a valid fleet name", self.name),
                "a letter, then letters, digits and hyphens, at most 100 characters",
            );
        }
        if self.regions.len() > MAX_REGIONS
            || self.targets.len() > MAX_TARGETS
            || self.models.len() > MAX_MODELS
            || self.regions.iter().any(|r| r.targets.len() > MAX_TARGETS)
        {
            bad(
                Code::FleetTooLarge,
                format!(
                    "the fleet lists {} regions, {} targets and {} models; at most {MAX_REGIONS}, {MAX_TARGETS} and {MAX_MODELS}",
                    self.regions.len(),
                    self.targets.len(),
                    self.models.len()
                ),
                "split the fleet, or target organizational units instead of accounts",
            );
            return ds;
        }
        match self.member_count() {
            None => bad(
                Code::FleetTooLarge,
                format!("the fleet expands into more than {MAX_MEMBERS} members"),
                "split the fleet, or target organizational units instead of accounts",
            ),
            Some(0) => bad(
                Code::InvalidFleet,
                "the fleet has no members".to_owned(),
                "add at least one region and one target (an account or an organizational unit)",
            ),
            Some(_) => {}
        }
        let mut seen = BTreeSet::new();
        for (i, region) in self.regions.iter().enumerate() {
            in_region.set(Some(i));
            if !is_known_region(&region.region) {
                bad(
                    Code::InvalidFleet,
                    format!("`{}` is not an AWS region hyperforge knows", region.region),
                    "use a region code such as `us-west-2`",
                );
            }
            if !seen.insert(region.region.as_str()) {
                bad(
                    Code::InvalidFleet,
                    format!("region `{}` is listed twice", region.region),
                    "list each region once; give a region its own targets with `targets`",
                );
            }
            if let Some(capacity) = &region.capacity {
                let (id, zone) = match capacity {
                    MemberCapacity::CapacityBlock {
                        reservation_id,
                        zone_id,
                    } => (reservation_id, zone_id),
                    MemberCapacity::TrainingPlan { arn, zone_id } => (arn, zone_id),
                };
                let id_ok = match capacity {
                    MemberCapacity::CapacityBlock { .. } => {
                        crate::constructs::nodes::is_reservation_id(id)
                    }
                    MemberCapacity::TrainingPlan { .. } => is_training_plan_arn(id, &region.region),
                };
                if !id_ok {
                    bad(
                        Code::InvalidFleetMember,
                        format!("`{id}` (region {}) is not a valid capacity id", region.region),
                        "a Capacity Block id is `cr-` and 8 or 17 hexadecimal digits; a training plan ARN is `arn:aws:sagemaker:<region>:<account>:training-plan/<name>` in the member's region",
                    );
                }
                match AzId::parse(zone) {
                    Some(z) if z.is_in_region(&region.region) => {}
                    _ => bad(
                        Code::InvalidFleetMember,
                        format!("zone id `{zone}` is not a zone of {}", region.region),
                        "use the capacity's zone id (aws ec2 describe-capacity-reservations), such as `usw2-az2` in us-west-2",
                    ),
                }
            }
            for key in region.values.keys() {
                let ok = !key.is_empty()
                    && key.len() <= 64
                    && key
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    && !MEMBER_VALUES.contains(&key.as_str());
                if !ok {
                    bad(
                        Code::InvalidFleetMember,
                        format!("`{key}` cannot name a member value"),
                        "lower-case letters, digits and underscores, at most 64, and not one of member, stack, region, account, organizational_unit, model, capacity_id, zone_id",
                    );
                }
            }
            for (key, value) in &region.values {
                // Values become template parameter values, CLI arguments in FLEET.md and
                // `ParameterOverrides`: no spaces, commas, quotes or shell characters.
                let ok = !value.is_empty()
                    && value.len() <= 256
                    && value
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._:/@+=-".contains(c));
                if !ok {
                    bad(
                        Code::InvalidFleetMember,
                        format!("value `{key}` of region {} is not a plain value", region.region),
                        "1 to 256 letters, digits and `._:/@+=-` (it becomes a parameter value and a command-line argument)",
                    );
                }
            }
        }
        in_region.set(None);
        let all_targets = self
            .targets
            .iter()
            .chain(self.regions.iter().flat_map(|r| &r.targets));
        let (mut accounts, mut units) = (0, 0);
        for target in all_targets {
            match target {
                Target::Account(id) => {
                    accounts += 1;
                    if !(id.len() == 12 && id.chars().all(|c| c.is_ascii_digit())) {
                        bad(
                            Code::InvalidFleet,
                            format!("`{id}` is not an AWS account id"),
                            "an account id is 12 digits",
                        );
                    }
                }
                Target::OrganizationalUnit(id) => {
                    units += 1;
                    if !is_organizational_unit_id(id) {
                        bad(
                            Code::InvalidFleet,
                            format!("`{id}` is not an organizational unit id"),
                            "an organizational unit id is `ou-` then 4 to 32 and 8 to 32 lower-case letters or digits (`ou-ab12-cd34ef56`), or a root id `r-ab12`",
                        );
                    }
                }
            }
        }
        match (&self.permission_model, accounts, units) {
            (PermissionModel::SelfManaged { .. }, _, 1..) => bad(
                Code::InvalidFleet,
                "a self-managed fleet targets organizational units".to_owned(),
                "target accounts, or use service-managed permissions (AWS Organizations) for organizational units",
            ),
            (PermissionModel::ServiceManaged { .. }, 1.., _) => bad(
                Code::InvalidFleet,
                "a service-managed fleet targets accounts".to_owned(),
                "target organizational units, or use self-managed permissions for accounts",
            ),
            _ => {}
        }
        if let PermissionModel::SelfManaged {
            administration_role_arn,
            execution_role_name,
        } = &self.permission_model
        {
            if administration_role_arn
                .as_deref()
                .is_some_and(|a| !crate::app::arn::is_iam_role_arn(a))
            {
                bad(
                    Code::InvalidFleet,
                    "the administration role is not an IAM role ARN".to_owned(),
                    "give `arn:<partition>:iam::<12-digit account>:role/<path/><name>`, the name 1 to 64 letters, digits and `_+=,.@-`",
                );
            }
            if execution_role_name.as_deref().is_some_and(|n| {
                n.is_empty()
                    || n.len() > 64
                    || !n
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c))
            }) {
                bad(
                    Code::InvalidFleet,
                    "the execution role name is not an IAM role name".to_owned(),
                    "1 to 64 letters, digits and `+=,.@_-`",
                );
            }
        }
        for model in &self.models {
            let ok = !model.is_empty()
                && model.len() <= 40
                && model
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            if !ok {
                bad(
                    Code::InvalidFleetMember,
                    format!("model `{model}` cannot be part of a member's name"),
                    "name models by their catalog id: lower-case letters, digits and hyphens, at most 40",
                );
            }
        }
        let p = &self.preferences;
        for (what, amount) in [
            ("maximum concurrency", p.max_concurrent),
            ("failure tolerance", p.failure_tolerance),
        ] {
            if let Amount::Percentage(n) = amount {
                if n > 100 {
                    bad(
                        Code::InvalidFleet,
                        format!("the {what} is {n} percent"),
                        "a percentage is 0 to 100",
                    );
                }
            }
        }
        if matches!(p.max_concurrent, Amount::Count(0) | Amount::Percentage(0)) {
            bad(
                Code::InvalidFleet,
                "the maximum concurrency is zero: no account would ever be deployed".to_owned(),
                "deploy at least one account at a time",
            );
        }
        // StackSets' default concurrency mode (strict failure tolerance) refuses more accounts
        // at once than one more than may fail.
        if let (Amount::Count(max), Amount::Count(tolerance)) =
            (p.max_concurrent, p.failure_tolerance)
        {
            if u64::from(max) > u64::from(tolerance) + 1 {
                bad(
                    Code::InvalidFleet,
                    format!(
                        "the maximum concurrency is {max} accounts with a failure tolerance of {tolerance}; CloudFormation allows at most one more than the tolerance"
                    ),
                    "lower the maximum concurrency, raise the failure tolerance, or give percentages",
                );
            }
        }
        let mut ordered = BTreeSet::new();
        for region in &p.region_order {
            if !self.regions.iter().any(|r| &r.region == region) || !ordered.insert(region) {
                bad(
                    Code::InvalidFleet,
                    format!("the region order names `{region}`, which the fleet lists not at all or twice"),
                    "order only the fleet's regions, each once",
                );
            }
        }
        // Member names: unique and valid stack names, checked here, before any member is
        // built, so that a cause shared by many members is said once.
        if ds.has_errors() || self.member_count().is_none() {
            return ds;
        }
        let lists = std::iter::once((&self.targets, None))
            .chain(self.regions.iter().map(|r| (&r.targets, Some(&r.region))));
        let mut repeated = false;
        for (targets, region) in lists {
            let mut seen = BTreeSet::new();
            for target in targets {
                if !seen.insert(target) {
                    repeated = true;
                    ds.push(Diagnostic::new(
                        Code::InvalidFleetMember,
                        at.clone(),
                        format!(
                            "target `{}` is listed twice{}",
                            target.id(),
                            region.map(|r| format!(" for region {r}")).unwrap_or_default()
                        ),
                        "list each account or organizational unit once: its two members would share one name, one output directory and one StackSet instance",
                    ));
                }
            }
        }
        let mut seen = BTreeSet::new();
        for model in &self.models {
            if !seen.insert(model) {
                repeated = true;
                ds.push(Diagnostic::new(
                    Code::InvalidFleetMember,
                    at.clone(),
                    format!("model `{model}` is listed twice"),
                    "list each model once: its two members would share one name",
                ));
            }
        }
        let members = self.members();
        let mut names = BTreeSet::new();
        if !repeated {
            if let Some(twice) = members.iter().find(|m| !names.insert(m.name.as_str())) {
                ds.push(Diagnostic::new(
                    Code::InvalidFleetMember,
                    at.clone(),
                    format!("two members would both be named `{}`", twice.name),
                    "give each region, target and model of the fleet once",
                ));
            }
        }
        let invalid: Vec<&FleetMember> = members
            .iter()
            .filter(|m| !is_valid_stack_name(&m.name))
            .collect();
        if let Some(first) = invalid.first() {
            ds.push(Diagnostic::new(
                Code::InvalidFleetMember,
                at.clone(),
                format!(
                    "the fleet name `{}` makes {} member name(s) invalid stack names, such as `{}` ({} characters)",
                    self.name,
                    invalid.len(),
                    first.name,
                    first.name.len()
                ),
                "a member's name is the fleet's name, its region and (with several targets or models) its target and model, joined by hyphens: at most 100 characters; shorten the fleet name",
            ));
        }
        ds
    }

    /// The members, in order: regions as listed, then targets, then models. Empty when the
    /// matrix is over its bounds ([`Fleet::validate_matrix`] says so).
    pub fn members(&self) -> Vec<FleetMember> {
        if self.member_count().is_none() {
            return Vec::new();
        }
        let several_targets = self.regions.iter().any(|r| self.targets_of(r).len() > 1);
        let models: Vec<Option<&String>> = if self.models.is_empty() {
            vec![None]
        } else {
            self.models.iter().map(Some).collect()
        };
        let mut out = Vec::new();
        for region in &self.regions {
            for target in self.targets_of(region) {
                for model in &models {
                    let mut stack = self.name.clone();
                    if self.models.len() > 1 {
                        if let Some(m) = model {
                            stack.push('-');
                            stack.push_str(m);
                        }
                    }
                    let mut name = format!("{}-{}", self.name, region.region);
                    if several_targets {
                        name.push('-');
                        name.push_str(target.id());
                    }
                    if self.models.len() > 1 {
                        if let Some(m) = model {
                            name.push('-');
                            name.push_str(m);
                        }
                    }
                    let mut values = region.values.clone();
                    values.insert("member".into(), name.clone());
                    values.insert("stack".into(), stack.clone());
                    values.insert("region".into(), region.region.clone());
                    match target {
                        Target::Account(id) => values.insert("account".into(), id.clone()),
                        Target::OrganizationalUnit(id) => {
                            values.insert("organizational_unit".into(), id.clone())
                        }
                    };
                    if let Some(m) = model {
                        values.insert("model".into(), (*m).clone());
                    }
                    match &region.capacity {
                        Some(MemberCapacity::CapacityBlock {
                            reservation_id,
                            zone_id,
                        }) => {
                            values.insert("capacity_id".into(), reservation_id.clone());
                            values.insert("zone_id".into(), zone_id.clone());
                        }
                        Some(MemberCapacity::TrainingPlan { arn, zone_id }) => {
                            values.insert("capacity_id".into(), arn.clone());
                            values.insert("zone_id".into(), zone_id.clone());
                        }
                        None => {}
                    }
                    out.push(FleetMember {
                        name,
                        stack,
                        index: out.len(),
                        region: region.region.clone(),
                        target: target.clone(),
                        model: model.cloned(),
                        capacity: region.capacity.clone(),
                        values,
                        reads: Mutex::default(),
                        value_reads: Mutex::default(),
                    });
                }
            }
        }
        out
    }

    fn targets_of<'a>(&'a self, region: &'a FleetRegion) -> &'a [Target] {
        if region.targets.is_empty() {
            &self.targets
        } else {
            &region.targets
        }
    }

    /// Builds one member's description and checks that it describes that member.
    pub fn describe(&self, member: &FleetMember) -> Result<App, Diagnostics> {
        let app = (self.describe)(member).map_err(|ds| for_member(ds, &member.name))?;
        self.check_described(&app, member)?;
        Ok(app)
    }

    /// That `app` describes `member`: one stack, named `member.stack` in `member.region`.
    fn check_described(&self, app: &App, member: &FleetMember) -> Result<(), Diagnostics> {
        match app.stacks() {
            // Named after the member, as fleets named them before: still that member's own
            // stack, its names the member's (so its stages are deployed per member, HF1105).
            [stack]
                if (stack.name() == member.stack || stack.name() == member.name)
                    && stack.region() == member.region =>
            {
                Ok(())
            }
            stacks => {
                let mut ds = Diagnostics::new();
                ds.push(Diagnostic::new(
                    Code::FleetMemberMismatch,
                    member.name.clone(),
                    format!(
                        "member `{}` ({}) was described as {}",
                        member.name,
                        member.region,
                        match stacks {
                            [] => "no stack".to_owned(),
                            [s] => format!("stack `{}` in {}", s.name(), s.region()),
                            _ => format!("{} stacks", stacks.len()),
                        }
                    ),
                    "describe exactly one stack per member, named `member.stack` in `member.region`",
                ));
                Err(ds)
            }
        }
    }
}

/// `found` (one member's) with the member named in each message: every member's stack has
/// the same name, so the path alone does not say which member it is.
fn for_member(found: Diagnostics, member: &str) -> Diagnostics {
    let mut out = Diagnostics::new();
    for mut d in found {
        if !d.message.contains(member) {
            d.message = format!("[member {member}] {}", d.message);
        }
        out.push(d);
    }
    out
}

fn is_training_plan_arn(arn: &str, region: &str) -> bool {
    crate::app::arn::is_training_plan_arn(arn)
        && crate::app::arn::Arn::parse(arn).is_some_and(|a| a.region == region)
}

fn is_organizational_unit_id(id: &str) -> bool {
    let lower = |s: &str, min: usize, max: usize| {
        (min..=max).contains(&s.len())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    };
    if let Some(rest) = id.strip_prefix("ou-") {
        return rest
            .split_once('-')
            .is_some_and(|(a, b)| lower(a, 4, 32) && lower(b, 8, 32));
    }
    id.strip_prefix("r-").is_some_and(|r| lower(r, 4, 32))
}

/// How a fleet is synthesized.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FleetOptions {
    /// Every member's synthesis options.
    pub synth: SynthOptions,
    /// Worker threads; 0 for one per core. (Members' small files are written by four per
    /// worker: writing them waits on the file system more than on a core.)
    pub threads: usize,
}

/// Where fleet synthesis puts files as they are done.
pub trait FleetSink: Sync {
    /// Stores one file at `path` (relative to the fleet's output root, checked to stay inside
    /// it before this is called).
    fn file(&self, path: &str, bytes: &[u8]) -> Result<(), String>;
}

/// What a fleet's synthesis gives besides its files.
#[derive(Clone, Debug)]
pub struct FleetOutput {
    /// `fleet.json`.
    pub manifest: FleetManifest,
    /// Warnings and notes of all members and of the fleet.
    pub warnings: Diagnostics,
    /// Time spent in each phase, summed over the distinct assemblies synthesized (all
    /// threads; `stacks` counts them).
    pub timings: SynthTimings,
    /// The number of files written.
    pub files: usize,
    /// The bytes written.
    pub bytes: u64,
}

/// What a finished member leaves for the fleet's manifest.
struct MemberDone {
    manifest: FleetMemberManifest,
    /// Per CloudFormation stage index: the member's parameter values.
    overrides: BTreeMap<usize, BTreeMap<String, String>>,
}

/// One CloudFormation stage's templates across members.
#[derive(Default)]
struct StageForms {
    name: String,
    /// Distinct bound templates: bytes, the lowest member index giving them.
    forms: Vec<(Vec<u8>, usize)>,
    /// More distinct templates than kept.
    overflow: bool,
    capabilities: Vec<String>,
    outputs: Vec<String>,
    /// Members whose stage at this place has another name.
    conflict: Option<String>,
    /// Members that had it.
    count: usize,
}

/// A member's facts, in the order of a description's reads.
type Facts = Vec<Option<String>>;

/// A Terraform root module: its path inside a member's directory and its text.
type RootModule = (String, Vec<u8>);

/// Members whose description is one: they agree on everything it read of the first of them,
/// so it is described and synthesized once, for that first member.
struct Share {
    /// The first member's index.
    first: usize,
    /// Every member's index, in order.
    members: Vec<usize>,
    /// Its description, or why there is none (the member not yet named in the diagnostics).
    described: Result<App, Diagnostics>,
}

/// What a share's synthesis leaves for its members.
struct ShareDone {
    /// Its assembly's directory (`assemblies/<first member>`).
    assembly: String,
    /// The stack's name in it.
    stack: String,
    /// Per CloudFormation stage index: the parameter values.
    overrides: BTreeMap<usize, BTreeMap<String, String>>,
    /// Each member's Terraform root modules.
    roots: Vec<RootModule>,
}

#[derive(Default)]
struct Shared {
    /// Per share: what its synthesis gave, or its diagnostics.
    results: Vec<Option<Result<ShareDone, Diagnostics>>>,
    stages: BTreeMap<usize, StageForms>,
    /// Warnings and notes by code, path and message with the member's name taken out: the
    /// lowest member index reporting one, its diagnostic, how many others report it.
    warnings: BTreeMap<(Code, String, String), (usize, Diagnostic, usize)>,
    timings: SynthTimings,
    files: usize,
    bytes: u64,
    sink_error: Option<String>,
    references: BTreeMap<usize, StageReference>,
    /// The reference's bound template of each stage.
    reference_forms: BTreeMap<usize, Vec<u8>>,
}

impl Fleet {
    /// The members grouped by description, in order of their first members: each member's
    /// description is built only when no earlier one read the same of it.
    fn share(&self, members: &[FleetMember]) -> Vec<Share> {
        let mut shares: Vec<Share> = Vec::new();
        // Per set of reads (usually one): the facts read, and the share they describe.
        let mut known: Vec<(Vec<String>, HashMap<Facts, usize>)> = Vec::new();
        for (i, member) in members.iter().enumerate() {
            let found = known.iter().find_map(|(reads, by_facts)| {
                let facts: Facts = reads.iter().map(|r| member.fact(r)).collect();
                by_facts.get(&facts).copied()
            });
            let k = match found {
                Some(k) => k,
                None => {
                    // A fresh copy records only this description's reads.
                    let probe = member.clone();
                    let described = (self.describe)(&probe);
                    let reads = probe.reads();
                    let facts = reads.iter().map(|r| member.fact(r)).collect();
                    let at = match known.iter().position(|(r, _)| *r == reads) {
                        Some(at) => at,
                        None => {
                            known.push((reads, HashMap::new()));
                            known.len() - 1
                        }
                    };
                    known[at].1.insert(facts, shares.len());
                    shares.push(Share {
                        first: i,
                        members: Vec::new(),
                        described,
                    });
                    shares.len() - 1
                }
            };
            shares[k].members.push(i);
        }
        shares
    }

    /// Synthesizes every member into `sink` and returns the fleet's manifest (also given to
    /// `sink` as `fleet.json`, last). On any error, returns every diagnostic (those of the
    /// first failed members, the rest counted).
    ///
    /// Members whose descriptions are one ([`FleetMember`] says when) share one synthesis:
    /// its assembly is written once, to `assemblies/<its first member>/`, and each member
    /// gets its Terraform root modules (`members/<member>/`, each calling the shared module
    /// with the member's values and keeping the member's own state) and its `fleet.json`
    /// entry. Work and bytes grow with what differs between members, not with their number.
    pub fn synth_into(
        &self,
        options: &FleetOptions,
        sink: &dyn FleetSink,
    ) -> Result<FleetOutput, Diagnostics> {
        let ds = self.validate_matrix();
        if ds.has_errors() {
            return Err(ds);
        }
        let members = self.members();
        let shares = self.share(&members);
        let threads = match options.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
        .max(1);
        let shared = Mutex::new(Shared {
            results: (0..shares.len()).map(|_| None).collect(),
            ..Shared::default()
        });
        // The first share alone: its templates are the references the others are compared
        // with, whichever thread finishes first.
        let mut references = BTreeMap::new();
        let next = AtomicUsize::new(0);
        let run = |k: usize, references: Option<&BTreeMap<usize, StageReference>>| {
            let share = &shares[k];
            let result = self.synth_share(share, &members, references, options, sink);
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            match result {
                Ok(done) => s.absorb(k, share, &members[share.first].name, done),
                Err(MemberError::Diagnostics(ds)) => s.results[k] = Some(Err(ds)),
                Err(MemberError::Sink(e)) => {
                    s.sink_error.get_or_insert(e);
                }
            }
            if s.sink_error.is_some() {
                next.store(shares.len(), Ordering::Relaxed);
            }
        };
        if !shares.is_empty() {
            next.store(1, Ordering::Relaxed);
            run(0, None);
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            references = std::mem::take(&mut s.references);
        }
        std::thread::scope(|scope| {
            for _ in 0..threads.min(shares.len().max(1)) {
                scope.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= shares.len() {
                        break;
                    }
                    run(k, Some(&references));
                });
            }
        });
        let mut s = shared.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = s.sink_error.take() {
            return Err(self.sink_failed(e));
        }
        // Each member: its share's result, checked to describe it.
        let mut of_member = vec![0usize; members.len()];
        for (k, share) in shares.iter().enumerate() {
            for &i in &share.members {
                of_member[i] = k;
            }
        }
        let (mut failed, mut failed_count) = (Diagnostics::new(), 0usize);
        let mut done = Vec::with_capacity(members.len());
        for (i, member) in members.iter().enumerate() {
            let k = of_member[i];
            let outcome = match (&shares[k].described, &s.results[k]) {
                (Err(ds), _) => Err(for_member(ds.clone(), &member.name)),
                (Ok(app), result) => {
                    self.check_described(app, member)
                        .and_then(|()| match result {
                            Some(Ok(result)) => Ok(result),
                            Some(Err(ds)) if !ds.is_empty() => {
                                Err(for_member(ds.clone(), &member.name))
                            }
                            _ => Err(self.not_synthesized(member, &members[shares[k].first])),
                        })
                }
            };
            match outcome {
                Ok(result) => done.push(MemberDone {
                    manifest: FleetMemberManifest {
                        name: member.name.clone(),
                        stack: result.stack.clone(),
                        region: member.region.clone(),
                        target: member.target.clone(),
                        model: member.model.clone(),
                        values: member.values.clone(),
                        assembly: result.assembly.clone(),
                        terraform: result
                            .roots
                            .iter()
                            .filter_map(|(path, _)| path.rsplit_once('/'))
                            .map(|(dir, _)| format!("members/{}/{dir}", member.name))
                            .collect(),
                    },
                    overrides: result.overrides.clone(),
                }),
                Err(ds) => {
                    failed_count += 1;
                    if failed_count <= SHOWN_FAILED_MEMBERS {
                        failed.extend(ds);
                    }
                }
            }
        }
        if failed_count > 0 {
            let shown = failed_count.min(SHOWN_FAILED_MEMBERS);
            if failed_count > shown {
                failed.push(Diagnostic::new(
                    Code::FleetTooManyProblems,
                    format!("fleet/{}", self.name),
                    format!(
                        "{failed_count} members failed; the diagnostics of the first {shown} are shown"
                    ),
                    "fix these first: one mistake in the shared description usually fails every member",
                ));
            }
            return Err(failed);
        }
        let (files, bytes) = self.write_roots(&shares, &s, &members, threads, sink)?;
        s.files += files;
        s.bytes += bytes;
        // What is left is the manifest's: every member succeeded, so `done` is in their order.
        drop(shares);
        drop(members);
        s.results = Vec::new();
        // A warning every member reports alike is shown once, for the first of them.
        let mut warnings = Diagnostics::new();
        let mut folded: Vec<_> = std::mem::take(&mut s.warnings).into_values().collect();
        folded.sort_by_key(|(index, _, _)| *index);
        for (_, mut d, others) in folded {
            if others > 0 {
                d = d.note(format!(
                    "{others} other member{} report{} the same",
                    if others == 1 { "" } else { "s" },
                    if others == 1 { "s" } else { "" }
                ));
            }
            warnings.push(d);
        }
        let manifest = self.manifest(&mut s, done, &mut warnings, sink)?;
        let text = manifest.to_json();
        sink.file("fleet.json", text.as_bytes())
            .map_err(|e| self.sink_failed(e))?;
        s.files += 1;
        s.bytes += text.len() as u64;
        Ok(FleetOutput {
            manifest,
            warnings,
            timings: s.timings,
            files: s.files,
            bytes: s.bytes,
        })
    }

    /// Every member's Terraform root modules, on every thread: the files and bytes written.
    fn write_roots(
        &self,
        shares: &[Share],
        s: &Shared,
        members: &[FleetMember],
        threads: usize,
        sink: &dyn FleetSink,
    ) -> Result<(usize, u64), Diagnostics> {
        let work: Vec<(&str, &[RootModule])> = shares
            .iter()
            .zip(&s.results)
            .filter_map(|(share, r)| match r {
                Some(Ok(done)) if !done.roots.is_empty() => Some((share, done)),
                _ => None,
            })
            .flat_map(|(share, done)| {
                share
                    .members
                    .iter()
                    .map(move |&i| (members[i].name.as_str(), done.roots.as_slice()))
            })
            .collect();
        let files = work.iter().map(|(_, roots)| roots.len()).sum();
        let bytes = work
            .iter()
            .flat_map(|(_, roots)| roots.iter())
            .map(|(_, text)| text.len() as u64)
            .sum();
        if work.is_empty() {
            return Ok((0, 0));
        }
        let error = Mutex::new(None);
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            // Writing small files waits on the file system more than on a core.
            for _ in 0..(threads * 4).min(work.len()) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((member, roots)) = work.get(i) else {
                        break;
                    };
                    for (path, bytes) in *roots {
                        if let Err(e) = sink.file(&format!("members/{member}/{path}"), bytes) {
                            error
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get_or_insert(e);
                            next.store(work.len(), Ordering::Relaxed);
                            return;
                        }
                    }
                });
            }
        });
        match error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(self.sink_failed(e)),
            None => Ok((files, bytes)),
        }
    }

    /// A member whose description's first member was refused, so it was not synthesized.
    fn not_synthesized(&self, member: &FleetMember, first: &FleetMember) -> Diagnostics {
        let mut ds = Diagnostics::new();
        ds.push(Diagnostic::new(
            Code::FleetMemberMismatch,
            member.name.clone(),
            format!(
                "member `{}` was not synthesized: its description is member `{}`'s, which does not describe that member",
                member.name, first.name
            ),
            "describe exactly one stack per member, named `member.stack` in `member.region`",
        ));
        ds
    }

    fn sink_failed(&self, e: String) -> Diagnostics {
        let mut ds = Diagnostics::new();
        ds.push(Diagnostic::new(
            Code::RenderFailed,
            format!("fleet/{}", self.name),
            format!("could not write the fleet's output: {e}"),
            "check the output directory: its disk, its permissions",
        ));
        ds
    }

    /// Synthesizes a share's description once, for its first member, into
    /// `assemblies/<first member>/`.
    fn synth_share(
        &self,
        share: &Share,
        members: &[FleetMember],
        references: Option<&BTreeMap<usize, StageReference>>,
        options: &FleetOptions,
        sink: &dyn FleetSink,
    ) -> Result<ShareResult, MemberError> {
        let first = &members[share.first];
        let app = share
            .described
            .as_ref()
            .map_err(|ds| MemberError::Diagnostics(ds.clone()))?;
        // A description of another stack is refused for each member, not synthesized.
        if self.check_described(app, first).is_err() {
            return Err(MemberError::Diagnostics(Diagnostics::new()));
        }
        let (assembly, timings) = crate::synth::synthesize_timed(app, &options.synth)
            .map_err(MemberError::Diagnostics)?;
        let base = format!("assemblies/{}", first.name);
        let mut overrides = BTreeMap::new();
        let mut forms = Vec::new();
        let mut new_references = BTreeMap::new();
        let stack = assembly.manifest().stacks.first();
        let stages = stack.map(|s| s.stages.as_slice()).unwrap_or_default();
        let inputs = stack.map(|s| s.inputs.as_slice()).unwrap_or_default();
        for (index, stage) in stages.iter().enumerate() {
            let StageManifest::CloudFormation {
                artifacts,
                capabilities,
                outputs,
                ..
            } = stage
            else {
                continue;
            };
            // Only a written template can be compared (`--format` may leave it out).
            let Some(text) = artifacts.first().and_then(|a| assembly.file(&a.path)) else {
                continue;
            };
            // The stage's declared inputs with the member's values: bound by name.
            let bound: BTreeMap<String, String> = inputs
                .iter()
                .filter(|i| i.stages.iter().any(|s| s == stage.name()))
                .filter_map(|i| Some((i.name.clone(), i.default.clone()?)))
                .collect();
            // Most templates are the first share's with their own values as the inputs'
            // defaults: a comparison of the text, without parsing.
            let reference = references
                .and_then(|r| r.get(&index))
                .filter(|r| r.name == stage.name());
            if reference.is_some_and(|r| r.is_instance(text, &bound)) {
                overrides.insert(index, bound);
                forms.push(StageForm {
                    index,
                    name: stage.name().to_owned(),
                    bytes: None,
                    capabilities: capabilities.clone(),
                    outputs: outputs.clone(),
                });
                continue;
            }
            let Ok(template) = serde_json::from_slice::<Value>(text) else {
                continue;
            };
            let g = bind(&template, &bound);
            let mut bytes = serde_json::to_vec_pretty(&g.template).unwrap_or_default();
            bytes.push(b'\n');
            // A reference only where every value it is cut at is a parameter's default: the
            // text alone cannot say where a value stands.
            let defaults_only = g.overrides == bound
                && bound.iter().all(|(name, value)| {
                    template["Parameters"][name]["Default"].as_str() == Some(value.as_str())
                });
            if references.is_none() && defaults_only && only_as_defaults(text, &bound) {
                new_references.insert(
                    index,
                    StageReference::new(stage.name(), text, &bound, &bytes),
                );
            }
            overrides.insert(index, g.overrides);
            forms.push(StageForm {
                index,
                name: stage.name().to_owned(),
                bytes: Some(bytes),
                capabilities: capabilities.clone(),
                outputs: outputs.clone(),
            });
        }
        let (mut files, mut bytes) = (0usize, 0u64);
        for (path, content) in assembly.files() {
            sink.file(&format!("{base}/{path}"), content)
                .map_err(MemberError::Sink)?;
            files += 1;
            bytes += content.len() as u64;
        }
        let roots = terraform::member_roots(&assembly, &base);
        Ok(ShareResult {
            done: ShareDone {
                assembly: base,
                stack: app
                    .stacks()
                    .first()
                    .map_or_else(|| first.stack.clone(), |s| s.name().to_owned()),
                overrides,
                roots,
            },
            warnings: assembly.warnings().clone(),
            timings,
            files,
            bytes,
            forms,
            references: new_references,
        })
    }
}

/// One CloudFormation stage of one share, its inputs bound.
struct StageForm {
    index: usize,
    name: String,
    /// The bound template; `None` when it is the reference's (the first share's).
    bytes: Option<Vec<u8>>,
    capabilities: Vec<String>,
    outputs: Vec<String>,
}

/// A synthesized share.
struct ShareResult {
    done: ShareDone,
    warnings: Diagnostics,
    timings: SynthTimings,
    files: usize,
    bytes: u64,
    forms: Vec<StageForm>,
    /// The first share's templates, as references for the others.
    references: BTreeMap<usize, StageReference>,
}

enum MemberError {
    Diagnostics(Diagnostics),
    Sink(String),
}

impl Shared {
    /// Takes in a synthesized share: its stages' templates compared with the other shares',
    /// counted once for each of its members.
    fn absorb(&mut self, k: usize, share: &Share, member: &str, result: ShareResult) {
        let count = share.members.len();
        let index = share.first;
        self.timings.add(&result.timings);
        for (stage, reference) in &result.references {
            self.reference_forms.insert(*stage, reference.form.clone());
        }
        self.references.extend(result.references);
        self.files += result.files;
        self.bytes += result.bytes;
        for d in result.warnings {
            let key = (
                d.code,
                d.path.replace(member, "<member>"),
                d.message.replace(member, "<member>"),
            );
            match self.warnings.get_mut(&key) {
                Some((first, kept, others)) => {
                    *others += count;
                    if index < *first {
                        *first = index;
                        *kept = d;
                    }
                }
                None => {
                    self.warnings.insert(key, (index, d, count - 1));
                }
            }
        }
        for form in result.forms {
            let stage = self.stages.entry(form.index).or_default();
            stage.count += count;
            if stage.name.is_empty() {
                stage.name = form.name.clone();
                stage.capabilities = form.capabilities;
                stage.outputs = form.outputs;
            } else if stage.name != form.name {
                stage.conflict.get_or_insert(format!(
                    "the stage at this place is `{}` in one member and `{}` in member `{member}`",
                    stage.name, form.name
                ));
            }
            let bytes = match form.bytes {
                Some(bytes) => bytes,
                None => self
                    .reference_forms
                    .get(&form.index)
                    .cloned()
                    .unwrap_or_default(),
            };
            let kept = stage.forms.len();
            match stage.forms.iter_mut().find(|(b, _)| *b == bytes) {
                Some((_, lowest)) => *lowest = (*lowest).min(index),
                None if kept < KEPT_FORMS => stage.forms.push((bytes, index)),
                None => stage.overflow = true,
            }
        }
        self.results[k] = Some(Ok(result.done));
    }
}

/// CloudFormation's limit on a template's size (from S3).
const TEMPLATE_LIMIT: usize = 1_000_000;

/// The StackSets template's own parameter: where the StackSet templates were uploaded.
const TEMPLATE_BUCKET_PARAMETER: &str = "TemplateBucket";
/// The key prefix of the uploaded StackSet templates.
const TEMPLATE_PREFIX_PARAMETER: &str = "TemplatePrefix";

impl Fleet {
    /// `fleet.json` from the finished members; writes the StackSet templates, the StackSets
    /// template and the runbook to `sink`.
    fn manifest(
        &self,
        s: &mut Shared,
        mut done: Vec<MemberDone>,
        warnings: &mut Diagnostics,
        sink: &dyn FleetSink,
    ) -> Result<FleetManifest, Diagnostics> {
        let mut stack_sets = Vec::new();
        let mut per_member_stages = Vec::new();
        let stages = std::mem::take(&mut s.stages);
        for (index, stage) in stages {
            let mut forms = stage.forms;
            forms.sort_by_key(|(_, lowest)| *lowest);
            let reason = if let Some(conflict) = stage.conflict {
                Some(conflict)
            } else if stage.count < done.len() {
                Some(format!("{} of {} members have it", stage.count, done.len()))
            } else if stage.overflow {
                Some(format!("its templates take more than {KEPT_FORMS} forms"))
            } else if forms.len() > 1 {
                let (a, b) = (&forms[0], &forms[1]);
                let parse =
                    |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).unwrap_or_default();
                Some(format!(
                    "members `{}` and `{}` differ: {}",
                    done[a.1].manifest.name,
                    done[b.1].manifest.name,
                    first_difference(&parse(&a.0), &parse(&b.0))
                ))
            } else {
                None
            };
            if let Some(reason) = reason {
                warnings.push(Diagnostic::new(
                    Code::FleetStageNotUniform,
                    format!("fleet/{}/{}", self.name, stage.name),
                    format!("stage `{}` is deployed per member: {reason}", stage.name),
                    "make the members' templates differ only by their declared inputs (capacity id, zones): name resources from `member.stack`, never a member's own values",
                ));
                per_member_stages.push(PerMemberStage {
                    stage: stage.name,
                    reason,
                });
                continue;
            }
            let Some((bytes, _)) = forms.into_iter().next() else {
                continue;
            };
            let template: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let path = format!("stacksets/{:02}-{}.template.json", index + 1, stage.name);
            let instances: Vec<StackInstanceManifest> = done
                .iter_mut()
                .map(|d| StackInstanceManifest {
                    member: d.manifest.name.clone(),
                    region: d.manifest.region.clone(),
                    target: d.manifest.target.clone(),
                    parameter_overrides: d.overrides.remove(&index).unwrap_or_default(),
                })
                .collect();
            let varying: BTreeSet<&String> = instances
                .iter()
                .flat_map(|i| i.parameter_overrides.keys())
                .collect();
            let parameters = template
                .get("Parameters")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter(|(name, _)| varying.contains(name))
                .map(|(name, p)| StackSetParameter {
                    name: name.clone(),
                    description: p
                        .get("Description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    value: instances
                        .first()
                        .and_then(|i| i.parameter_overrides.get(name))
                        .cloned()
                        .unwrap_or_default(),
                })
                .collect();
            sink.file(&path, &bytes).map_err(|e| self.sink_failed(e))?;
            s.files += 1;
            s.bytes += bytes.len() as u64;
            stack_sets.push(StackSetManifest {
                name: format!("{}-{}", self.name, stage.name),
                stage: stage.name,
                template: path,
                deploy_from_s3: bytes.len() > 51_200,
                capabilities: stage.capabilities,
                parameters,
                outputs: stage.outputs,
                instances,
            });
        }
        let mut manifest = FleetManifest {
            version: FleetManifest::VERSION,
            generator: concat!("hyperforge ", env!("CARGO_PKG_VERSION")).to_owned(),
            name: self.name.clone(),
            permission_model: self.permission_model.clone(),
            preferences: self.preferences.clone(),
            members: done.into_iter().map(|d| d.manifest).collect(),
            stack_sets,
            per_member_stages,
            stack_sets_template: None,
            runbook: None,
        };
        if !manifest.stack_sets.is_empty() {
            // Every instance group takes well over 120 bytes: a fleet whose groups alone
            // exceed CloudFormation's limit is not rendered at all (it would only be dropped).
            let groups: usize = manifest.stack_sets.iter().map(|s| s.instances.len()).sum();
            let at_least = groups.saturating_mul(120);
            let text = (at_least <= TEMPLATE_LIMIT).then(|| {
                let mut text =
                    serde_json::to_vec_pretty(&stack_sets_template(&manifest)).unwrap_or_default();
                text.push(b'\n');
                text
            });
            let path = format!("stacksets/{}.stacksets.template.json", self.name);
            match text {
                Some(text) if text.len() <= TEMPLATE_LIMIT => {
                    sink.file(&path, &text).map_err(|e| self.sink_failed(e))?;
                    s.files += 1;
                    s.bytes += text.len() as u64;
                    manifest.stack_sets_template = Some(path);
                }
                text => warnings.push(Diagnostic::new(
                    Code::FleetStackSetsTemplateOmitted,
                    format!("fleet/{}", self.name),
                    format!(
                        "the StackSets template would be {} bytes, over CloudFormation's 1,000,000; it is not written",
                        text.map_or_else(|| format!("at least {at_least}"), |t| t.len().to_string())
                    ),
                    "deploy the fleet with `hyperforge deploy --fleet`, which creates the StackSets and their instances through the API",
                )),
            }
        }
        #[cfg(feature = "runbook")]
        {
            let runbook = crate::runbook::render_fleet(&manifest).map_err(|e| {
                let mut ds = Diagnostics::new();
                ds.push(Diagnostic::new(
                    Code::RenderFailed,
                    format!("fleet/{}", self.name),
                    e.to_string(),
                    "this is a bug in hyperforge; please report it with the fleet description",
                ));
                ds
            })?;
            sink.file("FLEET.md", runbook.as_bytes())
                .map_err(|e| self.sink_failed(e))?;
            s.files += 1;
            s.bytes += runbook.len() as u64;
            manifest.runbook = Some("FLEET.md".to_owned());
        }
        Ok(manifest)
    }
}

/// The `OperationPreferences` object of the API and of `AWS::CloudFormation::StackSet`.
pub fn operation_preferences(p: &OperationPreferences) -> Value {
    let mut out = serde_json::Map::new();
    out.insert(
        "RegionConcurrencyType".into(),
        p.region_concurrency.api_name().into(),
    );
    match p.max_concurrent {
        Amount::Count(n) => out.insert("MaxConcurrentCount".into(), n.into()),
        Amount::Percentage(n) => out.insert("MaxConcurrentPercentage".into(), n.into()),
    };
    match p.failure_tolerance {
        Amount::Count(n) => out.insert("FailureToleranceCount".into(), n.into()),
        Amount::Percentage(n) => out.insert("FailureTolerancePercentage".into(), n.into()),
    };
    if !p.region_order.is_empty() {
        out.insert("RegionOrder".into(), p.region_order.clone().into());
    }
    Value::Object(out)
}

/// The template of `AWS::CloudFormation::StackSet` resources: one per StackSet, in order, each
/// with one instance group per member (its region, target and parameter values).
fn stack_sets_template(manifest: &FleetManifest) -> Value {
    let mut resources = serde_json::Map::new();
    let mut previous: Option<String> = None;
    for set in &manifest.stack_sets {
        let logical = crate::app::pascal_id(&set.stage);
        let groups: Vec<Value> = set
            .instances
            .iter()
            .map(|i| {
                let targets = match &i.target {
                    Target::Account(id) => serde_json::json!({ "Accounts": [id] }),
                    Target::OrganizationalUnit(id) => {
                        serde_json::json!({ "OrganizationalUnitIds": [id] })
                    }
                };
                let mut group = serde_json::json!({
                    "DeploymentTargets": targets,
                    "Regions": [i.region],
                });
                if !i.parameter_overrides.is_empty() {
                    group["ParameterOverrides"] = i
                        .parameter_overrides
                        .iter()
                        .map(|(k, v)| serde_json::json!({"ParameterKey": k, "ParameterValue": v}))
                        .collect();
                }
                group
            })
            .collect();
        let file = set.template.rsplit('/').next().unwrap_or_default();
        let mut properties = serde_json::json!({
            "StackSetName": set.name,
            "Description": format!("Fleet {}: stage {} of every member (generated by hyperforge).", manifest.name, set.stage),
            "PermissionModel": manifest.permission_model.api_name(),
            "TemplateURL": {"Fn::Sub": format!("https://${{{TEMPLATE_BUCKET_PARAMETER}}}.s3.${{AWS::Region}}.${{AWS::URLSuffix}}/${{{TEMPLATE_PREFIX_PARAMETER}}}{file}")},
            "OperationPreferences": operation_preferences(&manifest.preferences),
            "StackInstancesGroup": groups,
        });
        if !set.parameters.is_empty() {
            properties["Parameters"] = set
                .parameters
                .iter()
                .map(|p| serde_json::json!({"ParameterKey": p.name, "ParameterValue": p.value}))
                .collect();
        }
        if !set.capabilities.is_empty() {
            properties["Capabilities"] = set.capabilities.clone().into();
        }
        match &manifest.permission_model {
            PermissionModel::SelfManaged {
                administration_role_arn,
                execution_role_name,
            } => {
                if let Some(arn) = administration_role_arn {
                    properties["AdministrationRoleARN"] = arn.clone().into();
                }
                if let Some(name) = execution_role_name {
                    properties["ExecutionRoleName"] = name.clone().into();
                }
            }
            PermissionModel::ServiceManaged { .. } => {
                properties["CallAs"] = manifest.permission_model.call_as().into();
                properties["AutoDeployment"] =
                    serde_json::json!({"Enabled": true, "RetainStacksOnAccountRemoval": false});
            }
        }
        let mut resource = serde_json::json!({
            "Type": "AWS::CloudFormation::StackSet",
            "Properties": properties,
        });
        if let Some(p) = &previous {
            // A later stage imports the earlier one's exports in each member.
            resource["DependsOn"] = p.clone().into();
        }
        resources.insert(logical.clone(), resource);
        previous = Some(logical);
    }
    serde_json::json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": format!("Fleet {}: its StackSets, one instance per member (generated by hyperforge).", manifest.name),
        "Parameters": {
            TEMPLATE_BUCKET_PARAMETER: {
                "Type": "String",
                "Description": "The bucket the StackSet templates (stacksets/*.template.json) were uploaded to, in this stack's region.",
                "AllowedPattern": "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
            },
            TEMPLATE_PREFIX_PARAMETER: {
                "Type": "String",
                "Description": "The key prefix they were uploaded under, ending in / (or empty).",
                "Default": "",
                "AllowedPattern": "^([A-Za-z0-9!_.*'()-]+/)*$"
            }
        },
        "Resources": resources,
    })
}

/// Whether each bound input's value occurs in `text` only as parameter defaults (as often as
/// inputs hold it): only then is another member's text with its own values in those places
/// its own template with the same inputs bound. A value also written elsewhere is not an
/// input's there, so members are then compared parsed, their inputs bound.
fn only_as_defaults(text: &[u8], bound: &BTreeMap<String, String>) -> bool {
    bound.values().all(|value| {
        let holders = bound.values().filter(|v| *v == value).count();
        let needle = value.as_bytes();
        !needle.is_empty() && text.windows(needle.len()).filter(|w| *w == needle).count() == holders
    })
}

/// The first member's template of a stage, cut at its inputs' values (each only a
/// parameter's default there): the others' templates are compared with it, each with its own
/// values in those places.
struct StageReference {
    name: String,
    text: Vec<u8>,
    segments: Vec<Segment>,
    /// The input of each value segment, in the order the segments number them.
    inputs: Vec<String>,
    /// The bound template.
    form: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Segment {
    /// Bytes of the reference's text.
    Literal(usize, usize),
    /// The value of input `n`.
    Value(usize),
}

/// `text` cut at `values` (longest first where they overlap).
fn segments(text: &[u8], values: &[&str]) -> Vec<Segment> {
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < text.len() {
        let hit = values
            .iter()
            .position(|v| text[i..].starts_with(v.as_bytes()));
        match hit {
            Some(n) => {
                if start < i {
                    out.push(Segment::Literal(start, i));
                }
                out.push(Segment::Value(n));
                i += values[n].len();
                start = i;
            }
            None => i += 1,
        }
    }
    if start < text.len() {
        out.push(Segment::Literal(start, text.len()));
    }
    out
}

impl StageReference {
    fn new(
        name: &str,
        text: &[u8],
        bound: &BTreeMap<String, String>,
        form: &[u8],
    ) -> StageReference {
        let mut sorted: Vec<(&String, &String)> =
            bound.iter().filter(|(_, v)| !v.is_empty()).collect();
        sorted.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
        let values: Vec<&str> = sorted.iter().map(|(_, v)| v.as_str()).collect();
        StageReference {
            name: name.to_owned(),
            text: text.to_vec(),
            segments: segments(text, &values),
            inputs: sorted.iter().map(|(k, _)| (*k).clone()).collect(),
            form: form.to_vec(),
        }
    }

    /// Whether `text` is this reference's text with `bound`'s values (the same inputs) in
    /// its values' places: its bound template is then this one's.
    fn is_instance(&self, text: &[u8], bound: &BTreeMap<String, String>) -> bool {
        if bound.len() != self.inputs.len() || bound.values().any(String::is_empty) {
            return false;
        }
        let Some(values) = self
            .inputs
            .iter()
            .map(|k| bound.get(k).map(String::as_str))
            .collect::<Option<Vec<&str>>>()
        else {
            return false;
        };
        let mut at = 0;
        for segment in &self.segments {
            let want = match *segment {
                Segment::Literal(a, b) => &self.text[a..b],
                Segment::Value(n) => values[n].as_bytes(),
            };
            if !text.get(at..).is_some_and(|t| t.starts_with(want)) {
                return false;
            }
            at += want.len();
        }
        at == text.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_comparison_is_used_only_when_inputs_values_are_only_defaults() {
        let bound = BTreeMap::from([
            ("A".to_owned(), "usw2-az1".to_owned()),
            ("B".to_owned(), "usw2-az1".to_owned()),
            ("C".to_owned(), "cr-1".to_owned()),
        ]);
        let text = br#"{"A": {"Default": "usw2-az1"}, "B": {"Default": "usw2-az1"}, "C": {"Default": "cr-1"}}"#;
        assert!(only_as_defaults(text, &bound));
        let elsewhere = br#"{"A": {"Default": "usw2-az1"}, "B": {"Default": "usw2-az1"}, "C": {"Default": "cr-1"}, "Tag": "cr-1"}"#;
        assert!(!only_as_defaults(elsewhere, &bound));
        assert!(only_as_defaults(b"{}", &BTreeMap::new()));
    }
}
