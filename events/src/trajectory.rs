//! The trajectory: the append-only conversation the brain sees. Items are numbered by `seq`
//! within their trajectory (the main one, or a side lane's).

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{Sender, Source, Trust};
use crate::id::EventId;
use crate::tool_call::ToolStatus;
use crate::urgency::Urgency;

/// `main`, or `lane:<event id>` for the side lane that ran a PARALLEL event.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TrajectoryId(String);

impl TrajectoryId {
    pub fn main() -> Self {
        Self("main".into())
    }

    pub fn lane(origin: EventId) -> Self {
        Self(format!("lane:{origin}"))
    }

    pub fn is_main(&self) -> bool {
        self.0 == "main"
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TrajectoryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryItem {
    pub seq: u64,
    pub at: DateTime<Utc>,
    /// The step this item belongs to (events carry the step they were merged for).
    pub step: u64,
    #[serde(flatten)]
    pub kind: ItemKind,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ItemKind {
    Event {
        event_id: EventId,
        source: Source,
        channel: String,
        sender: Sender,
        trust: Trust,
        urgency: Urgency,
        text: String,
        /// When it happened, where that is not when it arrived (a scheduled occurrence's
        /// due time).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        occurred_at: Option<chrono::DateTime<chrono::Utc>>,
    },
    Assistant {
        text: String,
        /// The events this message answers; replies are routed back to their senders.
        reply_to: Vec<EventId>,
        /// Written by the daemon, not a model (the `none` brain's answers, "I stopped after
        /// N model calls"): a model configured later is never shown it as its own words.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        canned: bool,
    },
    ToolCall {
        call_id: String,
        tool: String,
        args: Value,
    },
    ToolResult {
        call_id: String,
        tool: String,
        status: ToolStatus,
        result: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hint: Option<String>,
        /// The result is someone else's words (see `ToolOutcome::untrusted`): the model is
        /// told so, and the step that read it is tainted.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        untrusted: bool,
    },
    StepStarted {
        events: Vec<EventId>,
    },
    StepCompleted,
    StepCancelled {
        /// The CANCEL event that stopped the step; `None` when a restart interrupted it.
        by: Option<EventId>,
        reason: String,
        /// The step was put off, not given up: it runs again for the same events (when the
        /// model answers again, when the budget allows) — after a restart too.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        runs_again: bool,
    },
    /// A model-made summary of the items up to `covers_through` (a seq), which the brain
    /// sees instead of them once the conversation outgrew the context budget. The items
    /// themselves stay on disk.
    Summary {
        text: String,
        covers_through: u64,
    },
}

impl ItemKind {
    pub fn name(&self) -> &'static str {
        match self {
            ItemKind::Event { .. } => "event",
            ItemKind::Assistant { .. } => "assistant",
            ItemKind::ToolCall { .. } => "tool_call",
            ItemKind::ToolResult { .. } => "tool_result",
            ItemKind::StepStarted { .. } => "step_started",
            ItemKind::StepCompleted => "step_completed",
            ItemKind::StepCancelled { .. } => "step_cancelled",
            ItemKind::Summary { .. } => "summary",
        }
    }
}
