//! Tool calls and their outcomes as they appear in the trajectory. The tool layer executes
//! them; this crate only names them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::EventId;

/// A request to run one tool, from the model, a rule, a slash command or the CLI.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    pub call_id: String,
    pub tool: String,
    pub args: Value,
    /// The event whose handling asked for this call.
    pub origin: Option<EventId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Ok,
    /// The caller can act on it (unknown tool, invalid arguments, the tool's own failure).
    Error,
    /// The step's cancel token fired before the tool finished.
    Cancelled,
    /// Waiting for the owner's confirmation; the content names the pending action.
    Pending,
    /// Refused by policy (mode, lane, taint, a configured rule); the content says why.
    Denied,
    /// Refused by a safety check (e.g. a catastrophic shell command): never run, never asked.
    Blocked,
}

/// What a tool call produced, as the caller sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolOutcome {
    pub status: ToolStatus,
    pub content: Value,
    /// What to try next (why a command failed, how to fix the call). Kept outside the
    /// result budget: a truncated result still carries its hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The content came from outside (a fetched page, someone's email, an MCP server): it
    /// taints the step. Set by the pipeline from the tool's contract once the tool ran, never
    /// by the tool itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untrusted: bool,
}

impl ToolOutcome {
    pub fn ok(content: Value) -> Self {
        Self {
            status: ToolStatus::Ok,
            content,
            hint: None,
            untrusted: false,
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Error,
            content: Value::String(message.into()),
            hint: None,
            untrusted: false,
        }
    }

    pub fn denied(reason: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Denied,
            content: Value::String(reason.into()),
            hint: None,
            untrusted: false,
        }
    }

    pub fn blocked(reason: impl Into<String>) -> Self {
        Self {
            status: ToolStatus::Blocked,
            content: Value::String(reason.into()),
            hint: None,
            untrusted: false,
        }
    }

    pub fn cancelled(content: Value) -> Self {
        Self {
            status: ToolStatus::Cancelled,
            content,
            hint: None,
            untrusted: false,
        }
    }

    /// The content as text: a string as it is, anything else as JSON.
    pub fn content_text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}
