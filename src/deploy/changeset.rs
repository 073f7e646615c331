//! Change sets as the deploy shows them: own structs converted from `DescribeChangeSet`, the
//! "no changes" test, and the rendering (Add / Modify / Remove, replacements flagged loudly).

use std::fmt::Write as _;

/// What a change does to a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeAction {
    /// A new resource.
    Add,
    /// A changed resource (in place, or replaced: see [`Replacement`]).
    Modify,
    /// A deleted resource.
    Remove,
    /// An imported resource.
    Import,
    /// A change CloudFormation can only decide while executing.
    Dynamic,
    /// Anything newer.
    Other(String),
}

impl ChangeAction {
    /// From CloudFormation's action string.
    pub fn parse(action: &str) -> ChangeAction {
        match action {
            "Add" => ChangeAction::Add,
            "Modify" => ChangeAction::Modify,
            "Remove" => ChangeAction::Remove,
            "Import" => ChangeAction::Import,
            "Dynamic" => ChangeAction::Dynamic,
            other => ChangeAction::Other(other.to_owned()),
        }
    }

    fn label(&self) -> &str {
        match self {
            ChangeAction::Add => "Add",
            ChangeAction::Modify => "Modify",
            ChangeAction::Remove => "Remove",
            ChangeAction::Import => "Import",
            ChangeAction::Dynamic => "Dynamic",
            ChangeAction::Other(s) => s,
        }
    }

    fn sign(&self) -> char {
        match self {
            ChangeAction::Add | ChangeAction::Import => '+',
            ChangeAction::Modify | ChangeAction::Dynamic | ChangeAction::Other(_) => '~',
            ChangeAction::Remove => '-',
        }
    }
}

/// Whether a modification replaces the resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replacement {
    /// A new physical resource is created and the old one deleted.
    True,
    /// Depends on values known only during the update.
    Conditional,
    /// Updated in place.
    False,
}

impl Replacement {
    /// From CloudFormation's replacement string.
    pub fn parse(s: &str) -> Option<Replacement> {
        match s {
            "True" => Some(Replacement::True),
            "Conditional" => Some(Replacement::Conditional),
            "False" => Some(Replacement::False),
            _ => None,
        }
    }
}

/// One resource change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceChange {
    /// Add, Modify, Remove...
    pub action: ChangeAction,
    /// The logical id.
    pub logical_id: String,
    /// The resource type.
    pub resource_type: String,
    /// The physical id, for existing resources.
    pub physical_id: Option<String>,
    /// For Modify: whether the resource is replaced.
    pub replacement: Option<Replacement>,
    /// What changes (`Properties`, `Tags`, `Metadata`).
    pub scope: Vec<String>,
    /// Changed property names, with whether each forces replacement.
    pub properties: Vec<PropertyChange>,
}

/// A changed property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyChange {
    /// The property name (`Tags`, `CidrBlock`).
    pub name: String,
    /// `Always`, `Conditionally` or `Never`, when CloudFormation says.
    pub requires_recreation: Option<String>,
}

/// A described change set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeSetSummary {
    /// The CloudFormation stack.
    pub stack_name: String,
    /// The change set's name.
    pub change_set_name: String,
    /// `CREATE_COMPLETE`, `FAILED`...
    pub status: String,
    /// Why it failed, if it did.
    pub status_reason: Option<String>,
    /// `AVAILABLE`, `UNAVAILABLE`...
    pub execution_status: Option<String>,
    /// The changes, in CloudFormation's order.
    pub changes: Vec<ResourceChange>,
}

impl ChangeSetSummary {
    /// Whether this is CloudFormation's "nothing to change" failure.
    pub fn is_no_changes(&self) -> bool {
        self.status == "FAILED" && is_no_changes_reason(self.status_reason.as_deref())
    }

    /// How many changes replace a resource (or may).
    pub fn replacements(&self) -> usize {
        self.changes
            .iter()
            .filter(|c| {
                matches!(
                    c.replacement,
                    Some(Replacement::True | Replacement::Conditional)
                )
            })
            .count()
    }

    /// Changes of one action.
    pub fn count(&self, action: &ChangeAction) -> usize {
        self.changes.iter().filter(|c| &c.action == action).count()
    }
}

/// The changes of a stack that does not exist yet: every resource of its template added.
pub fn creation_summary(stack_name: &str, resources: &[(String, String)]) -> ChangeSetSummary {
    ChangeSetSummary {
        stack_name: stack_name.to_owned(),
        change_set_name: String::new(),
        status: "CREATE_COMPLETE".into(),
        status_reason: None,
        execution_status: None,
        changes: resources
            .iter()
            .map(|(id, ty)| ResourceChange {
                action: ChangeAction::Add,
                logical_id: id.clone(),
                resource_type: ty.clone(),
                physical_id: None,
                replacement: None,
                scope: Vec::new(),
                properties: Vec::new(),
            })
            .collect(),
    }
}

/// Whether a failed change set's status reason means "the template and parameters are already
/// deployed" (CloudFormation's two phrasings).
pub fn is_no_changes_reason(reason: Option<&str>) -> bool {
    reason.is_some_and(|r| {
        r.contains("didn't contain changes") || r.contains("No updates are to be performed")
    })
}

/// The change set as the user reads it before confirming.
pub fn render(summary: &ChangeSetSummary) -> String {
    let mut out = String::new();
    let _ = write!(out, "Changes to `{}`", summary.stack_name);
    if summary.change_set_name.is_empty() {
        out.push_str(" (a new stack):\n");
    } else {
        let _ = writeln!(out, " (change set {}):", summary.change_set_name);
    }
    if summary.changes.is_empty() {
        out.push_str("  (no resource changes)\n");
    }
    let type_width = summary
        .changes
        .iter()
        .map(|c| c.resource_type.len())
        .max()
        .unwrap_or(0);
    let id_width = summary
        .changes
        .iter()
        .map(|c| c.logical_id.len())
        .max()
        .unwrap_or(0);
    for c in &summary.changes {
        let mut line = format!(
            "  {} {:<7} {:<tw$}  {:<iw$}",
            c.action.sign(),
            c.action.label(),
            c.resource_type,
            c.logical_id,
            tw = type_width,
            iw = id_width,
        );
        let mut notes = Vec::new();
        if !c.properties.is_empty() {
            let names: Vec<String> = c
                .properties
                .iter()
                .map(|p| match p.requires_recreation.as_deref() {
                    Some("Always") => format!("{} (forces replacement)", p.name),
                    Some("Conditionally") => format!("{} (may force replacement)", p.name),
                    _ => p.name.clone(),
                })
                .collect();
            notes.push(names.join(", "));
        } else if !c.scope.is_empty() && c.action == ChangeAction::Modify {
            notes.push(c.scope.join(", "));
        }
        if !notes.is_empty() {
            let _ = write!(line, "  [{}]", notes.join("; "));
        }
        match c.replacement {
            Some(Replacement::True) => {
                let old = c.physical_id.as_deref().unwrap_or("the existing resource");
                let _ = write!(
                    line,
                    "  <== REPLACES {old}: a new resource is created and the old one DELETED"
                );
            }
            Some(Replacement::Conditional) => {
                let _ = write!(
                    line,
                    "  <== MAY REPLACE (conditional): the old resource may be DELETED"
                );
            }
            _ => {}
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let replaced = summary.replacements();
    let _ = write!(
        out,
        "{} to add, {} to modify, {} to remove",
        summary.count(&ChangeAction::Add) + summary.count(&ChangeAction::Import),
        summary.count(&ChangeAction::Modify) + summary.count(&ChangeAction::Dynamic),
        summary.count(&ChangeAction::Remove),
    );
    if replaced > 0 {
        let _ = write!(
            out,
            "; WARNING: {replaced} change(s) REPLACE (or may replace) existing resources"
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(action: &str, id: &str, ty: &str) -> ResourceChange {
        ResourceChange {
            action: ChangeAction::parse(action),
            logical_id: id.into(),
            resource_type: ty.into(),
            physical_id: None,
            replacement: None,
            scope: vec![],
            properties: vec![],
        }
    }

    fn summary(changes: Vec<ResourceChange>) -> ChangeSetSummary {
        ChangeSetSummary {
            stack_name: "demo-foundation".into(),
            change_set_name: "hyperforge-1".into(),
            status: "CREATE_COMPLETE".into(),
            status_reason: None,
            execution_status: Some("AVAILABLE".into()),
            changes,
        }
    }

    #[test]
    fn renders_add_modify_remove_and_flags_replacement() {
        let mut tags = change("Modify", "NetworkVpc", "AWS::EC2::VPC");
        tags.physical_id = Some("vpc-0abc".into());
        tags.replacement = Some(Replacement::False);
        tags.scope = vec!["Tags".into()];
        let mut cidr = change("Modify", "NetworkPrivateSubnet1", "AWS::EC2::Subnet");
        cidr.physical_id = Some("subnet-0123".into());
        cidr.replacement = Some(Replacement::True);
        cidr.scope = vec!["Properties".into()];
        cidr.properties = vec![PropertyChange {
            name: "CidrBlock".into(),
            requires_recreation: Some("Always".into()),
        }];
        let text = render(&summary(vec![
            change("Add", "LifecycleBucket", "AWS::S3::Bucket"),
            tags,
            cidr,
            change("Remove", "NetworkNatEip2", "AWS::EC2::EIP"),
        ]));
        let expected = "\
Changes to `demo-foundation` (change set hyperforge-1):
  + Add     AWS::S3::Bucket   LifecycleBucket
  ~ Modify  AWS::EC2::VPC     NetworkVpc             [Tags]
  ~ Modify  AWS::EC2::Subnet  NetworkPrivateSubnet1  [CidrBlock (forces replacement)]  <== REPLACES subnet-0123: a new resource is created and the old one DELETED
  - Remove  AWS::EC2::EIP     NetworkNatEip2
1 to add, 2 to modify, 1 to remove; WARNING: 1 change(s) REPLACE (or may replace) existing resources
";
        assert_eq!(text, expected);
    }

    #[test]
    fn new_stack_lists_every_resource_as_added() {
        let s = creation_summary(
            "demo-foundation",
            &[("NetworkVpc".into(), "AWS::EC2::VPC".into())],
        );
        assert_eq!(
            render(&s),
            "Changes to `demo-foundation` (a new stack):\n  + Add     AWS::EC2::VPC  NetworkVpc\n1 to add, 0 to modify, 0 to remove\n"
        );
    }

    #[test]
    fn conditional_replacement_is_flagged() {
        let mut c = change("Modify", "Sg", "AWS::EC2::SecurityGroup");
        c.replacement = Some(Replacement::Conditional);
        let text = render(&summary(vec![c]));
        assert!(text.contains("MAY REPLACE"), "{text}");
        assert!(text.contains("WARNING: 1 change(s)"), "{text}");
    }

    #[test]
    fn no_changes_is_recognized_in_both_phrasings() {
        let mut s = summary(vec![]);
        s.status = "FAILED".into();
        s.status_reason = Some("The submitted information didn't contain changes. Submit different information to create a change set.".into());
        assert!(s.is_no_changes());
        s.status_reason = Some("No updates are to be performed.".into());
        assert!(s.is_no_changes());
        s.status_reason =
            Some("Template format error: Unresolved resource dependencies [Foo]".into());
        assert!(!s.is_no_changes());
        s.status = "CREATE_COMPLETE".into();
        s.status_reason = Some("No updates are to be performed.".into());
        assert!(!s.is_no_changes());
    }
}
