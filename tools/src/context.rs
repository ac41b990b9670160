//! What a tool receives besides its arguments. Everything a tool may touch comes through
//! here — no globals — so tests can run tools in isolation and lanes can narrow it.

use std::sync::Arc;

use steward_events::{EventId, TrajectoryId, Trust};
use tokio_util::sync::CancellationToken;

use crate::files::FileAccess;
use crate::policy::Mode;

/// What queueing a message for the owner comes to: its id in the owner outbox, or why it
/// could not be stored.
pub type OwnerFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<u64, String>> + Send + 'a>>;

/// Where messages for the owner go: the daemon's durable owner outbox, which delivers them
/// on every owner channel.
pub trait OwnerChannel: Send + Sync + std::fmt::Debug {
    /// Queues `text` durably; its id in the outbox.
    fn notify<'a>(&'a self, text: &'a str, origin: Option<EventId>) -> OwnerFuture<'a>;
}

#[derive(Clone, Debug)]
pub struct ExecutionContext {
    /// The roots file tools are confined to (the first is the workspace), and what was read.
    pub files: Arc<FileAccess>,
    /// The trajectory the call belongs to (`main` or a lane).
    pub trajectory: TrajectoryId,
    /// The event whose handling asked for the call.
    pub origin_event: Option<EventId>,
    /// The id of this call within its step.
    pub call_id: String,
    /// Plan mode runs only read-only tools.
    pub mode: Mode,
    /// The least trusted content in the step so far (taint).
    pub step_trust: Trust,
    /// The ledger key of this call, for tools that pass it on (`Idempotency-Key`).
    pub idempotency_key: Option<String>,
    /// Delivers `notify_owner` messages to the owner's channels.
    pub owner: Arc<dyn OwnerChannel>,
    /// Fires when the step is cancelled. Read-only tools are aborted when it fires; tools with
    /// side effects watch it themselves and finish what they began.
    pub cancel: CancellationToken,
    /// A sub-agent's tools: any other call is refused (`None`: no such limit).
    pub only_tools: Option<Arc<[String]>>,
}

impl ExecutionContext {
    pub fn for_call(&self, call_id: &str, origin_event: Option<EventId>) -> Self {
        Self {
            call_id: call_id.to_owned(),
            origin_event: origin_event.or(self.origin_event),
            ..self.clone()
        }
    }
}
