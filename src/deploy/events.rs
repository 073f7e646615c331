//! Stack events to progress lines: which events are new since the last poll (CloudFormation
//! returns them newest first), one line per resource status change, and the failing resources
//! with their reasons, root causes first.

use std::collections::HashSet;

/// One stack event, converted from `DescribeStackEvents`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackEvent {
    /// The event id (unique per stack).
    pub id: String,
    /// When, as RFC 3339 (`2026-11-30T13:18:19Z`).
    pub timestamp: String,
    /// The logical id (the stack name for stack-level events).
    pub logical_id: String,
    /// The resource type (`AWS::CloudFormation::Stack` for stack-level events).
    pub resource_type: String,
    /// The new status (`CREATE_IN_PROGRESS`).
    pub status: String,
    /// CloudFormation's reason, if any.
    pub reason: Option<String>,
}

impl StackEvent {
    /// Whether this event is about the stack itself rather than one of its resources.
    pub fn is_stack_level(&self) -> bool {
        self.resource_type == "AWS::CloudFormation::Stack"
    }

    /// Whether this event reports a failure.
    pub fn is_failure(&self) -> bool {
        self.status.ends_with("_FAILED")
    }
}

/// One printed line for an event: time, status, type, logical id, reason.
pub fn progress_line(event: &StackEvent) -> String {
    let time = event
        .timestamp
        .split_once('T')
        .map(|(_, t)| t.trim_end_matches('Z'))
        .map(|t| t.split('.').next().unwrap_or(t))
        .unwrap_or(&event.timestamp);
    let mut line = format!(
        "  {time}  {:<36} {:<40} {}",
        event.status, event.resource_type, event.logical_id
    );
    if let Some(reason) = event.reason.as_deref().filter(|r| !r.is_empty()) {
        if event.is_failure() || !event.status.ends_with("_COMPLETE") {
            line.push_str(&format!("  ({reason})"));
        }
    }
    line
}

/// Follows one stack operation's events across polls.
#[derive(Clone, Debug, Default)]
pub struct EventTracker {
    seen: HashSet<String>,
    failures: Vec<StackEvent>,
    last_stack_reason: Option<String>,
}

impl EventTracker {
    /// A tracker that ignores `existing` (the events from before the operation started,
    /// newest first as CloudFormation returns them).
    pub fn new(existing: &[StackEvent]) -> EventTracker {
        EventTracker {
            seen: existing.iter().map(|e| e.id.clone()).collect(),
            ..EventTracker::default()
        }
    }

    /// Takes one poll's events (newest first) and returns the new ones, oldest first.
    pub fn absorb(&mut self, newest_first: &[StackEvent]) -> Vec<StackEvent> {
        let mut fresh: Vec<StackEvent> = newest_first
            .iter()
            .filter(|e| !self.seen.contains(&e.id))
            .cloned()
            .collect();
        fresh.reverse();
        for e in &fresh {
            self.seen.insert(e.id.clone());
            if e.is_stack_level() {
                if let Some(r) = e.reason.as_deref().filter(|r| !r.is_empty()) {
                    if r != "User Initiated" {
                        self.last_stack_reason = Some(r.to_owned());
                    }
                }
            } else if e.is_failure() {
                self.failures.push(e.clone());
            }
        }
        fresh
    }

    /// The new events of a poll as progress lines, oldest first.
    pub fn lines(&mut self, newest_first: &[StackEvent]) -> Vec<String> {
        self.absorb(newest_first)
            .iter()
            .map(progress_line)
            .collect()
    }

    /// The failed resources as `LogicalId (Type): reason`, root causes first: failures that
    /// are only the consequence of another ("Resource creation cancelled") come last. When no
    /// resource event explains the failure, the stack-level reason stands in.
    pub fn failures(&self) -> Vec<String> {
        let consequence = |e: &StackEvent| {
            e.reason
                .as_deref()
                .is_some_and(|r| r.contains("cancelled") || r.contains("canceled"))
        };
        let describe = |e: &StackEvent| {
            format!(
                "{} ({}): {}",
                e.logical_id,
                e.resource_type,
                e.reason.as_deref().unwrap_or("no reason given")
            )
        };
        let mut out: Vec<String> = self
            .failures
            .iter()
            .filter(|e| !consequence(e))
            .map(describe)
            .collect();
        out.extend(
            self.failures
                .iter()
                .filter(|e| consequence(e))
                .map(describe),
        );
        if out.is_empty() {
            if let Some(r) = &self.last_stack_reason {
                out.push(r.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: u32, time: &str, logical: &str, ty: &str, status: &str, reason: &str) -> StackEvent {
        StackEvent {
            id: format!("e{id}"),
            timestamp: format!("2026-11-30T{time}.123Z"),
            logical_id: logical.into(),
            resource_type: ty.into(),
            status: status.into(),
            reason: (!reason.is_empty()).then(|| reason.to_owned()),
        }
    }

    const STACK: &str = "AWS::CloudFormation::Stack";

    /// A failed create as real CloudFormation reports it (oldest first): the NAT gateway's EIP
    /// hits the address limit, the subnet is cancelled, the stack rolls back.
    fn failed_create() -> Vec<StackEvent> {
        vec![
            ev(1, "10:00:00", "demo-foundation", STACK, "CREATE_IN_PROGRESS", "User Initiated"),
            ev(2, "10:00:03", "NetworkVpc", "AWS::EC2::VPC", "CREATE_IN_PROGRESS", ""),
            ev(3, "10:00:04", "NetworkVpc", "AWS::EC2::VPC", "CREATE_IN_PROGRESS", "Resource creation Initiated"),
            ev(4, "10:00:15", "NetworkVpc", "AWS::EC2::VPC", "CREATE_COMPLETE", ""),
            ev(5, "10:00:16", "NetworkNatEip1", "AWS::EC2::EIP", "CREATE_IN_PROGRESS", ""),
            ev(6, "10:00:16", "NetworkPublicSubnet1", "AWS::EC2::Subnet", "CREATE_IN_PROGRESS", ""),
            ev(7, "10:00:17", "NetworkNatEip1", "AWS::EC2::EIP", "CREATE_FAILED",
               "The maximum number of addresses has been reached. (Service: Ec2, Status Code: 400)"),
            ev(8, "10:00:17", "NetworkPublicSubnet1", "AWS::EC2::Subnet", "CREATE_FAILED", "Resource creation cancelled"),
            ev(9, "10:00:18", "demo-foundation", STACK, "ROLLBACK_IN_PROGRESS",
               "The following resource(s) failed to create: [NetworkNatEip1, NetworkPublicSubnet1]. Rollback requested by user."),
            ev(10, "10:00:20", "NetworkPublicSubnet1", "AWS::EC2::Subnet", "DELETE_COMPLETE", ""),
            ev(11, "10:00:31", "NetworkVpc", "AWS::EC2::VPC", "DELETE_COMPLETE", ""),
            ev(12, "10:00:32", "demo-foundation", STACK, "ROLLBACK_COMPLETE", ""),
        ]
    }

    fn newest_first(events: &[StackEvent]) -> Vec<StackEvent> {
        events.iter().rev().cloned().collect()
    }

    #[test]
    fn new_events_come_out_once_oldest_first_across_polls() {
        let all = failed_create();
        let before = newest_first(&all[..0]);
        let mut t = EventTracker::new(&before);
        let first = t.absorb(&newest_first(&all[..4]));
        assert_eq!(
            first.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            ["e1", "e2", "e3", "e4"]
        );
        assert!(t.absorb(&newest_first(&all[..4])).is_empty(), "no repeats");
        let rest = t.absorb(&newest_first(&all));
        assert_eq!(rest.len(), 8);
        assert_eq!(rest[0].id, "e5");
        assert_eq!(rest[7].status, "ROLLBACK_COMPLETE");
    }

    #[test]
    fn events_before_the_operation_are_not_shown() {
        let old = vec![ev(1, "09:00:00", "demo", STACK, "CREATE_COMPLETE", "")];
        let mut t = EventTracker::new(&old);
        let mut poll = vec![ev(
            2,
            "10:00:00",
            "demo",
            STACK,
            "UPDATE_IN_PROGRESS",
            "User Initiated",
        )];
        poll.extend(old.clone());
        let lines = t.lines(&poll);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("UPDATE_IN_PROGRESS"));
    }

    #[test]
    fn rollback_sequence_lines_and_root_cause_first() {
        let mut t = EventTracker::new(&[]);
        let lines = t.lines(&newest_first(&failed_create()));
        assert_eq!(lines.len(), 12);
        assert_eq!(
            lines[3],
            format!(
                "  10:00:15  {:<36} {:<40} NetworkVpc",
                "CREATE_COMPLETE", "AWS::EC2::VPC"
            )
        );
        assert!(
            lines[6].contains("CREATE_FAILED") && lines[6].contains("maximum number of addresses")
        );
        assert!(lines[11].contains("ROLLBACK_COMPLETE"));
        assert_eq!(
            t.failures(),
            [
                "NetworkNatEip1 (AWS::EC2::EIP): The maximum number of addresses has been reached. (Service: Ec2, Status Code: 400)",
                "NetworkPublicSubnet1 (AWS::EC2::Subnet): Resource creation cancelled",
            ]
        );
    }

    #[test]
    fn update_rollback_sequence() {
        let seq = vec![
            ev(
                1,
                "11:00:00",
                "demo",
                STACK,
                "UPDATE_IN_PROGRESS",
                "User Initiated",
            ),
            ev(
                2,
                "11:00:05",
                "ClusterSecurityGroupGroup",
                "AWS::EC2::SecurityGroup",
                "UPDATE_IN_PROGRESS",
                "",
            ),
            ev(
                3,
                "11:00:06",
                "ClusterSecurityGroupGroup",
                "AWS::EC2::SecurityGroup",
                "UPDATE_FAILED",
                "Resource handler returned message: \"The security group 'sg-1' does not exist\"",
            ),
            ev(
                4,
                "11:00:07",
                "demo",
                STACK,
                "UPDATE_ROLLBACK_IN_PROGRESS",
                "The following resource(s) failed to update: [ClusterSecurityGroupGroup].",
            ),
            ev(
                5,
                "11:00:20",
                "ClusterSecurityGroupGroup",
                "AWS::EC2::SecurityGroup",
                "UPDATE_COMPLETE",
                "",
            ),
            ev(
                6,
                "11:00:21",
                "demo",
                STACK,
                "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
                "",
            ),
            ev(7, "11:00:22", "demo", STACK, "UPDATE_ROLLBACK_COMPLETE", ""),
        ];
        let mut t = EventTracker::new(&[]);
        let lines = t.lines(&newest_first(&seq));
        assert_eq!(lines.len(), 7);
        assert!(lines[3].contains("(The following resource(s) failed to update"));
        assert_eq!(t.failures().len(), 1);
        assert!(t.failures()[0]
            .starts_with("ClusterSecurityGroupGroup (AWS::EC2::SecurityGroup): Resource handler"));
    }

    #[test]
    fn stack_level_reason_stands_in_when_no_resource_failed() {
        // moto, and some real failures, emit only stack-level events.
        let seq = vec![
            ev(
                1,
                "12:00:00",
                "demo",
                STACK,
                "CREATE_IN_PROGRESS",
                "User Initiated",
            ),
            ev(
                2,
                "12:00:01",
                "demo",
                STACK,
                "ROLLBACK_IN_PROGRESS",
                "Requires capabilities : [CAPABILITY_IAM]",
            ),
            ev(3, "12:00:02", "demo", STACK, "ROLLBACK_COMPLETE", ""),
        ];
        let mut t = EventTracker::new(&[]);
        t.absorb(&newest_first(&seq));
        assert_eq!(t.failures(), ["Requires capabilities : [CAPABILITY_IAM]"]);
    }
}
