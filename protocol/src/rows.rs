//! The rows the socket carries about scheduled jobs and watches: what `steward cron list`
//! and `steward watch list` show (`--json` prints them as they are), and what `cron add`
//! sends. The daemon checks a [`NewJob`] and a requested [`WatchRow`] before it uses them.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use steward_events::{ScheduledAction, Urgency};

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
