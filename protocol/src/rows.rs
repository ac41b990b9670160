//! The rows the socket carries about scheduled jobs and watches: what `steward cron list`
//! and `steward watch list` show (`--json` prints them as they are), and what `cron add`
//! sends. The daemon checks a [`NewJob`] and a requested [`WatchRow`] before it uses them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use steward_events::{EventId, ScheduledAction, Urgency};

/// Where a job comes from: the config file, or made while running (the CLI, a tool).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Config,
    Runtime,
}

/// `missed` of a job: what happens to occurrences that fell while the daemon was down.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissedPolicy {
    /// None runs; each is recorded as missed.
    Skip,
    /// The latest one within the lateness bound runs; the others are recorded as missed.
    #[default]
    Once,
    /// Each one within the lateness bound runs, oldest first; older ones are missed.
    All,
}

impl MissedPolicy {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "skip" => Some(MissedPolicy::Skip),
            "once" => Some(MissedPolicy::Once),
            "all" => Some(MissedPolicy::All),
            _ => None,
        }
    }
}

/// A new job, as the CLI or a tool describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewJob {
    pub name: String,
    pub schedule: String,
    #[serde(default)]
    pub tz: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub action: Option<ScheduledAction>,
    #[serde(default)]
    pub urgency: Option<Urgency>,
    #[serde(default)]
    pub missed: Option<MissedPolicy>,
    #[serde(default)]
    pub max_lateness_secs: Option<u64>,
}

/// A job as `steward cron list --json` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    pub name: String,
    pub schedule: String,
    pub tz: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<ScheduledAction>,
    pub urgency: Urgency,
    pub missed: MissedPolicy,
    pub origin: Origin,
    pub enabled: bool,
    pub paused: bool,
    pub next_run: Option<DateTime<Utc>>,
    pub last_outcome: Option<String>,
}

/// A watch as `steward watch list --json` shows it (and as a runtime watch is stored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchRow {
    pub name: String,
    pub path: PathBuf,
    #[serde(default = "yes")]
    pub recursive: bool,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub events: Vec<String>,
    #[serde(default)]
    pub debounce_ms: Option<u64>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub urgency: Option<Urgency>,
    /// `config` or `runtime` (filled in by the daemon).
    #[serde(default)]
    pub origin: String,
    /// What `steward status` says of it (filled in by the daemon).
    #[serde(default)]
    pub state: String,
}

fn yes() -> bool {
    true
}

/// What an owner message is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// The answer to an event (a job, a watch, a webhook, mail, or the owner's own request).
    Answer,
    /// `notify_owner`.
    Notice,
    /// A new request for the owner's confirmation.
    Confirmation,
    /// What became of a confirmation request (ran, denied, expired).
    Outcome,
    /// Something the owner should know about the daemon (the model is unavailable, a step
    /// failed).
    Problem,
}

impl MessageKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answer => "answer",
            Self::Notice => "notice",
            Self::Confirmation => "confirmation",
            Self::Outcome => "outcome",
            Self::Problem => "problem",
        }
    }

    /// The class the owner routes it by (`[owner.deliver]`).
    pub fn class(self) -> steward_events::DeliveryClass {
        use steward_events::DeliveryClass;
        match self {
            Self::Answer => DeliveryClass::Answers,
            Self::Notice | Self::Problem => DeliveryClass::Notices,
            Self::Confirmation | Self::Outcome => DeliveryClass::Confirmations,
        }
    }
}

/// One message of the owner outbox, as `steward outbox --json` and a chat show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OwnerMessage {
    /// Grows with every message, across restarts.
    pub id: u64,
    pub at: DateTime<Utc>,
    pub kind: MessageKind,
    pub text: String,
    /// The event it answers or came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<EventId>,
    /// The pending action it asks about or reports on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_id: Option<String>,
    /// Channel (`socket`, `http`, `email`) → when it was delivered there.
    #[serde(default)]
    pub delivered: BTreeMap<String, DateTime<Utc>>,
}

impl OwnerMessage {
    /// Some channel handed it to the owner.
    pub fn is_delivered(&self) -> bool {
        !self.delivered.is_empty()
    }
}
