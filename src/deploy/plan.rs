//! Decisions from a stack's status: what a deploy or destroy does next, and what a final status
//! means for the user. Pure functions of status strings, tested without AWS.

/// How a CloudFormation stack status reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusKind {
    /// `REVIEW_IN_PROGRESS`: a create change set exists that was never executed.
    Review,
    /// Any other `*_IN_PROGRESS`: an operation is running.
    InProgress,
    /// `CREATE_COMPLETE`, `UPDATE_COMPLETE`, `IMPORT_COMPLETE`.
    Succeeded,
    /// `ROLLBACK_COMPLETE`: the create failed and was rolled back.
    CreateRolledBack,
    /// `UPDATE_ROLLBACK_COMPLETE`, `IMPORT_ROLLBACK_COMPLETE`: the stack is back at its previous
    /// template.
    UpdateRolledBack,
    /// `DELETE_COMPLETE`.
    Deleted,
    /// Any `*_FAILED`.
    Failed,
}

/// Classifies a status string.
pub fn status_kind(status: &str) -> StatusKind {
    match status {
        "REVIEW_IN_PROGRESS" => StatusKind::Review,
        s if s.ends_with("_IN_PROGRESS") => StatusKind::InProgress,
        "CREATE_COMPLETE" | "UPDATE_COMPLETE" | "IMPORT_COMPLETE" => StatusKind::Succeeded,
        "ROLLBACK_COMPLETE" => StatusKind::CreateRolledBack,
        "UPDATE_ROLLBACK_COMPLETE" | "IMPORT_ROLLBACK_COMPLETE" => StatusKind::UpdateRolledBack,
        "DELETE_COMPLETE" => StatusKind::Deleted,
        _ => StatusKind::Failed,
    }
}

/// What a final (not in-progress) status means, in a sentence.
pub fn explain_status(stack_name: &str, status: &str) -> String {
    match status {
        "CREATE_COMPLETE" => "the stack was created".into(),
        "UPDATE_COMPLETE" => "the stack was updated".into(),
        "ROLLBACK_COMPLETE" => "the create failed and was rolled back; the stack holds no resources and must be deleted before it can be created again (the next deploy offers to do it)".into(),
        "ROLLBACK_FAILED" => format!("the create failed and so did its rollback; delete the stack (`aws cloudformation delete-stack --stack-name {stack_name}`, retaining resources that cannot be deleted) before deploying again"),
        "UPDATE_ROLLBACK_COMPLETE" => "the update failed and was rolled back; the stack is back at its previous template".into(),
        "UPDATE_ROLLBACK_FAILED" => format!("the update failed and so did its rollback; run `aws cloudformation continue-update-rollback --stack-name {stack_name}` (with --resources-to-skip for resources that cannot roll back), then deploy again"),
        "CREATE_FAILED" => "the create failed and was not rolled back".into(),
        "UPDATE_FAILED" => "the update failed and was not rolled back".into(),
        "DELETE_FAILED" => "the delete failed: some resources could not be deleted; fix what the events name and destroy again".into(),
        "IMPORT_ROLLBACK_COMPLETE" => "the import failed and was rolled back".into(),
        other => format!("the stack is in {other}"),
    }
}

/// The next step of a deploy, given the stack's current status (`None`: no such stack).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeployStep {
    /// No stack: create it through a CREATE change set.
    Create,
    /// A stable stack: update it through an UPDATE change set.
    Update,
    /// An operation is running: wait for it, then decide again.
    Wait,
    /// `REVIEW_IN_PROGRESS`: delete the pending change sets and the empty stack, then create.
    DiscardReview,
    /// A failed create (`ROLLBACK_COMPLETE`, `CREATE_FAILED`): CloudFormation cannot update it;
    /// delete it (after confirmation) and create it again.
    DeleteFailedCreate,
    /// The user must act first; the text says what to do.
    Refuse(String),
}

/// Decides the next deploy step. `stack_name` is used in advice.
pub fn deploy_step(stack_name: &str, status: Option<&str>) -> DeployStep {
    let Some(status) = status else {
        return DeployStep::Create;
    };
    match status_kind(status) {
        StatusKind::Review => DeployStep::DiscardReview,
        StatusKind::InProgress => DeployStep::Wait,
        StatusKind::Deleted => DeployStep::Create,
        StatusKind::Succeeded | StatusKind::UpdateRolledBack => DeployStep::Update,
        StatusKind::CreateRolledBack => DeployStep::DeleteFailedCreate,
        StatusKind::Failed => match status {
            "CREATE_FAILED" => DeployStep::DeleteFailedCreate,
            // With rollback disabled, a failed update can be updated again.
            "UPDATE_FAILED" => DeployStep::Update,
            other => DeployStep::Refuse(explain_status(stack_name, other)),
        },
    }
}

/// The next step of a destroy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DestroyStep {
    /// No stack (or already deleted).
    Absent,
    /// An operation is running: wait for it first.
    Wait,
    /// Delete it.
    Delete,
}

/// Decides the next destroy step.
pub fn destroy_step(status: Option<&str>) -> DestroyStep {
    match status.map(status_kind) {
        None | Some(StatusKind::Deleted) => DestroyStep::Absent,
        Some(StatusKind::InProgress) => DestroyStep::Wait,
        Some(_) => DestroyStep::Delete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deploy_decisions() {
        let s = "demo-foundation";
        assert_eq!(deploy_step(s, None), DeployStep::Create);
        assert_eq!(deploy_step(s, Some("CREATE_COMPLETE")), DeployStep::Update);
        assert_eq!(
            deploy_step(s, Some("UPDATE_ROLLBACK_COMPLETE")),
            DeployStep::Update
        );
        assert_eq!(deploy_step(s, Some("UPDATE_FAILED")), DeployStep::Update);
        for busy in [
            "CREATE_IN_PROGRESS",
            "UPDATE_IN_PROGRESS",
            "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
            "UPDATE_ROLLBACK_IN_PROGRESS",
            "ROLLBACK_IN_PROGRESS",
            "DELETE_IN_PROGRESS",
        ] {
            assert_eq!(deploy_step(s, Some(busy)), DeployStep::Wait, "{busy}");
        }
        assert_eq!(
            deploy_step(s, Some("REVIEW_IN_PROGRESS")),
            DeployStep::DiscardReview
        );
        assert_eq!(
            deploy_step(s, Some("ROLLBACK_COMPLETE")),
            DeployStep::DeleteFailedCreate
        );
        assert_eq!(
            deploy_step(s, Some("CREATE_FAILED")),
            DeployStep::DeleteFailedCreate
        );
        assert_eq!(deploy_step(s, Some("DELETE_COMPLETE")), DeployStep::Create);
        let DeployStep::Refuse(advice) = deploy_step(s, Some("UPDATE_ROLLBACK_FAILED")) else {
            panic!("UPDATE_ROLLBACK_FAILED must be refused")
        };
        assert!(advice.contains("continue-update-rollback --stack-name demo-foundation"));
        assert!(matches!(
            deploy_step(s, Some("ROLLBACK_FAILED")),
            DeployStep::Refuse(_)
        ));
        assert!(matches!(
            deploy_step(s, Some("DELETE_FAILED")),
            DeployStep::Refuse(_)
        ));
    }

    #[test]
    fn destroy_decisions() {
        assert_eq!(destroy_step(None), DestroyStep::Absent);
        assert_eq!(destroy_step(Some("DELETE_COMPLETE")), DestroyStep::Absent);
        assert_eq!(destroy_step(Some("UPDATE_IN_PROGRESS")), DestroyStep::Wait);
        assert_eq!(destroy_step(Some("ROLLBACK_COMPLETE")), DestroyStep::Delete);
        assert_eq!(
            destroy_step(Some("REVIEW_IN_PROGRESS")),
            DestroyStep::Delete
        );
        assert_eq!(destroy_step(Some("DELETE_FAILED")), DestroyStep::Delete);
    }

    #[test]
    fn rollback_states_are_explained_plainly() {
        assert!(explain_status("x", "UPDATE_ROLLBACK_COMPLETE")
            .starts_with("the update failed and was rolled back"));
        assert!(explain_status("x", "ROLLBACK_COMPLETE").contains("must be deleted"));
        assert_eq!(
            status_kind("UPDATE_ROLLBACK_COMPLETE"),
            StatusKind::UpdateRolledBack
        );
        assert_eq!(
            status_kind("ROLLBACK_COMPLETE"),
            StatusKind::CreateRolledBack
        );
        assert_eq!(status_kind("UPDATE_ROLLBACK_FAILED"), StatusKind::Failed);
    }
}
