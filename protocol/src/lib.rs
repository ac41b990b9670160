//! The control socket's wire protocol: line-delimited JSON. A leaf crate: it knows the
//! vocabulary (`steward-events`) and nothing of the daemon, so the CLI, the daemon and any
//! other client share one definition of every line.
//!
//! The protocol: The client writes one
//! [`Request`] line; the daemon answers with [`Response`] lines. A finite answer ends with
//! `{"type":"end"}`; `--follow` and `wait` answers stream until done or the client leaves.
//! In a `chat` session every further client line is a [`ChatLine`].
//!
//! Versions: the client adds `"client_version"` to its request line; a daemon of another
//! version answers first with [`Response::VersionMismatch`], which the CLI prints as a
//! warning (the usual cause: the binary was upgraded and the daemon not restarted). The
//! daemon's version is also in `steward status`.
// Everything here reads outside input (the control socket): no slicing that can panic; where an
// index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

/// This build's version, as exchanged on the socket.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The request line's version field.
pub const CLIENT_VERSION_FIELD: &str = "client_version";

use std::path::PathBuf;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use steward_events::{EventId, Source, StepEnd, TokenUsage, TrajectoryItem, Urgency};

pub mod client;
mod rows;

pub use rows::{JobRow, MessageKind, MissedPolicy, NewJob, Origin, OwnerMessage, WatchRow};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Send {
        text: String,
        #[serde(default)]
        urgency: Option<Urgency>,
        /// Stream the replies to this event until its step ends.
        #[serde(default)]
        wait: bool,
    },
    /// A chat session: owner messages are shown as they are queued, after the ones no
    /// channel delivered yet — or, resuming, every one after `after`.
    Chat {
        #[serde(default)]
        after: Option<u64>,
    },
    /// The owner outbox, as `Message` lines; with `follow`, then every new message and
    /// every new delivery (the message again, as it now stands) until the client leaves.
    Outbox {
        #[serde(default)]
        limit: Option<usize>,
        #[serde(default)]
        follow: bool,
    },
    Status,
    Events {
        #[serde(default)]
        limit: Option<usize>,
        #[serde(default)]
        state: Option<String>,
        #[serde(default)]
        follow: bool,
    },
    Trajectory {
        #[serde(default)]
        limit: Option<usize>,
        #[serde(default)]
        follow: bool,
    },
    Tools,
    /// The file watches, as `Watch` lines.
    Watches,
    /// Replaces the HTTP API token; answered with `Token`.
    RotateToken,
    /// Scheduled jobs: list, add, remove, pause, resume, trigger.
    Cron {
        command: CronCommand,
    },
    /// The tools `tool_search` would return for this query (enabled tools, main trajectory),
    /// as `Tool` lines, best first.
    SearchTools {
        query: String,
        #[serde(default)]
        max_results: Option<usize>,
    },
    /// Runs one tool call through the full pipeline, in the main trajectory, as the owner.
    CallTool {
        tool: String,
        #[serde(default)]
        args: Option<Value>,
    },
    /// Requests for confirmation, all states, oldest first.
    Pending,
    Confirm {
        id: String,
        /// Edited arguments (checked again before running).
        #[serde(default)]
        args: Option<Value>,
    },
    Deny {
        id: String,
        #[serde(default)]
        reason: Option<String>,
    },
    /// `steward telegram …`.
    Telegram {
        command: TelegramCommand,
    },
    /// `steward web login`: answered with `LoginLink`.
    WebLogin,
    /// `steward web logout --all`: answered with `LoggedOut`.
    WebLogoutAll,
    /// `steward usage`: answered with `Usage` rows, then `End`.
    Usage {
        by: UsageBy,
        /// The first day counted (the owner's zone); `None`: everything kept.
        #[serde(default)]
        since: Option<NaiveDate>,
    },
    /// `steward budget status`: answered with `Budget`.
    Budget,
}

/// How `steward usage` groups model calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageBy {
    #[default]
    Day,
    /// The job, watch or webhook route (`cron:NAME`…); everything else together.
    Job,
    Channel,
    Model,
}

/// Model calls counted under one key (`steward usage --json`: exactly these fields).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageRow {
    pub key: String,
    pub model_calls: u64,
    pub tokens_in: u64,
    pub tokens_cached: u64,
    pub tokens_out: u64,
    /// In the unit of the configured prices (0 where none are set).
    pub cost: f64,
}

/// One task of a task list: its text and `pending`, `in_progress` or `done`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoRow {
    pub text: String,
    pub status: String,
}

/// The daily caps and today's spending (`steward budget status --json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetReport {
    pub day: String,
    pub tokens_today: u64,
    pub cost_today: f64,
    pub daily_tokens: Option<u64>,
    pub daily_cost: Option<f64>,
    /// Why model work waits, when it does.
    pub waiting: Option<String>,
}

/// `steward telegram …`; answered with a `PairingCode` or `TelegramOwner` lines, then `End`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum TelegramCommand {
    /// A one-time code the owner sends to the bot as `/start CODE`.
    Pair,
    Owners,
    /// Removes a paired owner (owners in the config stay until the config changes).
    Unpair {
        user_id: i64,
    },
}

/// One owner of the Telegram bot, as `steward telegram owners --json` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TelegramOwnerRow {
    pub user_id: i64,
    /// `config` (telegram.owners) or `paired`.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_at: Option<DateTime<Utc>>,
}

/// One message typed in a chat session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatLine {
    pub text: String,
    #[serde(default)]
    pub urgency: Option<Urgency>,
}

/// `steward cron …`; answered with `Job` lines (or `Accepted` for a trigger), then `End`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum CronCommand {
    List,
    Add { job: NewJob },
    Remove { name: String },
    Pause { name: String },
    Resume { name: String },
    Trigger { name: String },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    /// The client's and the daemon's versions differ (sent before the answer).
    VersionMismatch {
        daemon_version: String,
        client_version: String,
    },
    /// The event is durable in the inbox.
    Accepted {
        event_id: EventId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duplicate_of: Option<EventId>,
    },
    /// The event was refused (and recorded as `rejected`).
    Rejected {
        event_id: Option<EventId>,
        reason: String,
    },
    Reply {
        text: String,
        reply_to: Vec<EventId>,
    },
    /// A message of the owner outbox (an answer to an event, a notice, a confirmation
    /// request and its outcome, a problem), to every session that listens.
    Message {
        message: OwnerMessage,
    },
    /// The step (or lane) that handled these events has ended.
    StepEnded {
        events: Vec<EventId>,
        outcome: StepEnd,
    },
    Status {
        status: StatusReport,
    },
    Event {
        event: EventRow,
    },
    Item {
        item: TrajectoryItem,
    },
    Tool {
        tool: Value,
    },
    Job {
        job: JobRow,
    },
    Watch {
        watch: WatchRow,
    },
    Token {
        token: String,
    },
    /// The outcome of a `call_tool` request.
    ToolResult {
        event_id: EventId,
        outcome: steward_events::ToolOutcome,
    },
    /// A pending action (see `PendingRow`).
    Action {
        action: PendingRow,
    },
    /// A pairing code for the Telegram bot and when it stops working.
    PairingCode {
        code: String,
        expires_at: DateTime<Utc>,
    },
    TelegramOwner {
        owner: TelegramOwnerRow,
    },
    /// A one-time login link's token for the web page (`/login?token=…`).
    LoginLink {
        token: String,
        expires_at: DateTime<Utc>,
    },
    /// How many web sessions were ended.
    LoggedOut {
        sessions: usize,
    },
    Usage {
        row: UsageRow,
    },
    Budget {
        budget: BudgetReport,
    },
    End,
    Error {
        message: String,
    },
}

/// Whether the model answers (`brain_state` in `steward status --json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BrainState {
    Ok,
    /// The last model call failed; events wait and the step runs again later.
    Degraded,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// The daemon's version.
    #[serde(default)]
    pub version: String,
    pub pid: u32,
    pub uptime_secs: u64,
    pub data_dir: PathBuf,
    pub brain: String,
    /// How shell commands are confined: `landlock`, `none` (the owner's choice) or
    /// `unavailable: …`.
    #[serde(default)]
    pub shell_sandbox: String,
    /// `ok`, or `degraded` while the model is unreachable.
    pub brain_state: BrainState,
    pub brain_last_error: Option<String>,
    pub channels: Vec<ChannelStatus>,
    pub inbox_pending: u64,
    pub step: StepStatus,
    pub lanes_running: usize,
    pub events_total: u64,
    /// Tokens (input, cached input, output) of the last model call and since start.
    pub tokens_last_call: TokenUsage,
    /// Every model call of the last finished main step, and that step's number (0: none).
    pub tokens_last_step: TokenUsage,
    pub tokens_last_step_number: u64,
    pub tokens_total: TokenUsage,
    /// Today's model calls (the owner's zone), from the usage ledger.
    #[serde(default)]
    pub usage_today: UsageRow,
    /// The main conversation's task list (`todo_write`), in order.
    #[serde(default)]
    pub todo: Vec<TodoRow>,
    /// Why the config file was refused at the last SIGHUP (the running config stays).
    #[serde(default)]
    pub config_error: Option<String>,
    /// Config sections changed on disk that take effect only at the next start.
    #[serde(default)]
    pub restart_needed: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelStatus {
    pub name: String,
    /// What the channel says of itself (`idle`, `backoff: … (retry in 4s)`).
    pub state: String,
    /// `starting`, `ready`, `waiting`, `backoff` or `stopped`.
    #[serde(default)]
    pub health: String,
    /// When the next attempt is, for a channel in backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum StepStatus {
    Idle,
    Running {
        step: u64,
        started_at: DateTime<Utc>,
    },
}

/// One line of `steward events`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    pub id: EventId,
    pub source: Source,
    pub channel: String,
    pub urgency: Urgency,
    pub state: String,
    pub received_at: DateTime<Utc>,
    /// When it happened; for a scheduled job, the instant the occurrence was due.
    pub occurred_at: DateTime<Utc>,
    /// `main` or `lane:<id>` once merged.
    pub trajectory: Option<String>,
    pub trajectory_seq: Option<u64>,
    /// Why it is `duplicate` (of which event), `rejected` or `dead`.
    pub detail: Option<String>,
    pub text: String,
    /// Who sent it, as authenticated (`me@example.com`, `webhook:github`, `uid:1000`).
    #[serde(default)]
    pub sender: String,
    /// `owner`, `trusted` or `untrusted`.
    #[serde(default = "untrusted")]
    pub trust: steward_events::Trust,
}

fn untrusted() -> steward_events::Trust {
    steward_events::Trust::Untrusted
}

/// One line of `steward pending`, and the answer to `confirm`/`deny`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingRow {
    pub id: String,
    pub tool: String,
    pub args: Value,
    pub preview: String,
    pub reason: String,
    pub origin_event: Option<EventId>,
    pub requested_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// pending | approved | denied | expired | completed | failed | unknown
    pub state: String,
    /// Why it was denied or failed.
    pub state_reason: Option<String>,
    pub result: Option<steward_events::ToolOutcome>,
}
