//! The owner's answers to pending actions: approve (optionally with edited arguments),
//! deny, or — when nobody answers — expiry. Each answer is recorded on the action and told
//! to the trajectory as a `system` event, so the brain sees what happened at its next step:
//! the result of an approved action, the reason of a denial, or that a request expired
//! (which is not a denial). Approving runs the action once: the first answer wins (a
//! compare-and-swap on the record), and the run itself goes through the ledger.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use steward_events::{Event, Payload, Sender, Source, ToolCallRequest, ToolStatus, Trust};
use steward_tools::confirm::{PendingAction, PendingError, PendingState, PendingStore};
use steward_tools::files::FileAccess;
use steward_tools::policy::{Decision, Mode};
use steward_tools::{ExecutionContext, ToolPipeline};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::store::Inbox;

#[derive(Debug)]
pub struct Confirmations {
    pub pending: PendingStore,
    pub pipeline: ToolPipeline,
    pub files: Arc<FileAccess>,
    pub inbox: Arc<Inbox>,
    /// Where the outcome of each request is queued for the owner.
    pub outbox: crate::owner::outbox::Outbox,
}

/// The longest the expiry waits before it looks at the requests again: a request made
/// meanwhile, or a clock set forward, is caught by then.
const EXPIRY_RECHECK: Duration = Duration::from_secs(5);
/// The shortest: a request due but not expired (the store failed) is not retried in a loop.
const EXPIRY_FLOOR: Duration = Duration::from_millis(100);

/// What an answer came to, for the client.
#[derive(Debug)]
pub enum Answer {
    /// The action ran (now, or at an earlier approval): its result.
    Ran(PendingAction),
    /// Recorded as denied.
    Denied(PendingAction),
    /// Nothing done: why (already answered, expired, edited args refused…).
    Refused(String),
    /// No pending action has that id.
    Unknown(String),
}

#[derive(Debug, thiserror::Error)]
pub enum ConfirmError {
    #[error(transparent)]
    Pending(#[from] PendingError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl Confirmations {
    pub fn list(&self) -> Result<Vec<PendingAction>, PendingError> {
        self.pending.list()
    }

    pub async fn approve(
        &self,
        id: &str,
        edited_args: Option<Value>,
    ) -> Result<Answer, ConfirmError> {
        let id = &match self.resolve(id)? {
            Ok(id) => id,
            Err(unknown) => return Ok(unknown),
        };
        let action = match self.pending.get(id) {
            Ok(action) => action,
            Err(PendingError::NotFound(_)) => {
                return Ok(Answer::Unknown(format!("no pending action {id}")));
            }
            Err(e) => return Err(e.into()),
        };
        match action.state {
            PendingState::Completed | PendingState::Failed => return Ok(Answer::Ran(action)),
            PendingState::Pending if action.expires_at <= chrono::Utc::now() => {
                return Ok(Answer::Refused(format!(
                    "action {id} expired at {}",
                    action
                        .expires_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )));
            }
            PendingState::Pending => {}
            other => {
                return Ok(Answer::Refused(
                    format!("action {id} is {other:?}, not pending").to_lowercase(),
                ));
            }
        }
        let call = ToolCallRequest {
            call_id: format!("approved_{}", action.id),
            tool: action.tool.clone(),
            args: edited_args.clone().unwrap_or_else(|| action.args.clone()),
            origin: action.origin_event,
        };
        let ctx = self.context(&action);
        if edited_args.is_some() {
            // Edited arguments are checked again: validation, then policy (a deny stands).
            match self.pipeline.decide(&call, &ctx) {
                Err(invalid) => return Ok(Answer::Refused(invalid.content_text())),
                Ok(Decision::Deny { reason, policy_id }) => {
                    return Ok(Answer::Refused(format!(
                        "the edited call is denied by policy `{policy_id}`: {reason}"
                    )));
                }
                Ok(_) => {}
            }
        }
        let claimed = self.pending.transition(id, PendingState::Pending, |a| {
            a.state = PendingState::Approved;
            if let Some(args) = &edited_args {
                a.args = args.clone();
            }
        })?;
        let action = match claimed {
            Ok(action) => action,
            Err(current)
                if matches!(
                    current.state,
                    PendingState::Completed | PendingState::Failed
                ) =>
            {
                return Ok(Answer::Ran(current));
            }
            Err(current) => {
                return Ok(Answer::Refused(
                    format!("action {id} was answered meanwhile: {:?}", current.state)
                        .to_lowercase(),
                ));
            }
        };
        // The approval is on disk before the action can leave the machine: after a crash it
        // is found `approved` and becomes `unknown`, never `pending` again.
        self.pending.sync().await?;
        info!(pending_id = %id, tool = %action.tool, "approved by the owner; running it");
        let outcome = self.pipeline.execute_approved(&call, &ctx).await;
        let finished = self.pending.transition(id, PendingState::Approved, |a| {
            a.state = if outcome.status == ToolStatus::Ok {
                PendingState::Completed
            } else {
                PendingState::Failed
            };
            a.result = Some(outcome.clone());
        })?;
        let action = finished.unwrap_or_else(|current| current);
        self.tell(
            &action,
            format!(
                "The owner approved action {} (`{}`); it ran: {}",
                action.id,
                action.tool,
                outcome.content_text()
            ),
        )
        .await?;
        Ok(Answer::Ran(action))
    }

    pub async fn deny(&self, id: &str, reason: Option<String>) -> Result<Answer, ConfirmError> {
        let id = &match self.resolve(id)? {
            Ok(id) => id,
            Err(unknown) => return Ok(unknown),
        };
        let reason = reason.unwrap_or_else(|| "no reason given".to_owned());
        let answered = match self.pending.transition(id, PendingState::Pending, |a| {
            a.state = PendingState::Denied;
            a.state_reason = Some(reason.clone());
        }) {
            Ok(answered) => answered,
            Err(PendingError::NotFound(_)) => {
                return Ok(Answer::Unknown(format!("no pending action {id}")));
            }
            Err(e) => return Err(e.into()),
        };
        match answered {
            Ok(action) => {
                self.tell(
                    &action,
                    format!(
                        "The owner denied action {} (`{}`): {reason}",
                        action.id, action.tool
                    ),
                )
                .await?;
                Ok(Answer::Denied(action))
            }
            Err(current) => Ok(Answer::Refused(
                format!("action {id} is {:?}, not pending", current.state).to_lowercase(),
            )),
        }
    }

    /// Expires unanswered requests until shutdown; each expiry is told to the trajectory.
    /// It sleeps until the next pending request is due, and at most [`EXPIRY_RECHECK`] (a
    /// request made meanwhile may be due sooner): polled every half second, an idle daemon
    /// with no request at all woke twice a second to read every request it kept. A request
    /// expires when it is due, or up to [`EXPIRY_RECHECK`] later when it was made during the
    /// wait and is due before the wait ends. Not woken by the store's change feed: a sled
    /// subscriber that is not read fast enough blocks the writers, this loop's own included.
    pub async fn run_expiry(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            let next_due = self.expire_due().await;
            let wait = next_due.map_or(EXPIRY_RECHECK, |due| {
                (due - chrono::Utc::now())
                    .to_std()
                    .unwrap_or(Duration::ZERO)
            });
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(wait.clamp(EXPIRY_FLOOR, EXPIRY_RECHECK)) => {}
            }
        }
    }

    /// Expires the requests that are due now; when the next pending one is due.
    async fn expire_due(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        match self.pending.expire_due(chrono::Utc::now()) {
            Ok(expiry) => {
                for action in expiry.expired {
                    info!(pending_id = %action.id, tool = %action.tool, "request for confirmation expired");
                    let text = format!(
                        "Action {} (`{}`) expired without an answer; it was not run (this is not a denial).",
                        action.id, action.tool
                    );
                    if let Err(e) = self.tell(&action, text).await {
                        warn!(pending_id = %action.id, error = %e, "could not record the expiry in the trajectory");
                    }
                }
                expiry.next_due
            }
            Err(e) => {
                warn!(error = %e, "could not check pending actions for expiry");
                None
            }
        }
    }

    /// The full id a (prefix of an) id names, or the answer that it names none.
    fn resolve(&self, id: &str) -> Result<Result<String, Answer>, ConfirmError> {
        match self.pending.resolve(id) {
            Ok(full) => Ok(Ok(full)),
            Err(PendingError::NotFound(_)) => {
                Ok(Err(Answer::Unknown(format!("no pending action {id}"))))
            }
            Err(e @ PendingError::Ambiguous(_)) => Ok(Err(Answer::Unknown(e.to_string()))),
            Err(e) => Err(e.into()),
        }
    }

    fn context(&self, action: &PendingAction) -> ExecutionContext {
        ExecutionContext {
            files: self.files.clone(),
            trajectory: action.trajectory.clone(),
            origin_event: action.origin_event,
            call_id: String::new(),
            mode: Mode::Normal,
            step_trust: Trust::Owner,
            idempotency_key: None,
            owner: Arc::new(self.outbox.clone()),
            cancel: CancellationToken::new(),
            only_tools: None,
        }
    }

    /// Puts what happened to an action into the trajectory, as a `system` event, and
    /// queues it for the owner.
    async fn tell(&self, action: &PendingAction, text: String) -> Result<(), ConfirmError> {
        let message = crate::owner::outbox::NewMessage {
            text: text.clone(),
            origin: action.origin_event,
            pending_id: Some(action.id.clone()),
            delivered_to: None,
        };
        self.outbox
            .queue(crate::owner::outbox::MessageKind::Outcome, message)
            .await?;
        let mut event = Event::new(
            Source::System,
            "system:confirmations",
            Sender {
                identity: "steward".into(),
                authenticated_by: "daemon".into(),
            },
            Trust::Owner,
            Payload::Notice { text },
        );
        event.thread = Some(format!("pending:{}", action.id));
        event.dedupe_key = Some(format!("pending:{}:{:?}", action.id, action.state));
        self.inbox.submit(event).await?;
        Ok(())
    }
}
