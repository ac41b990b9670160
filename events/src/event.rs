//! The [`Event`]: the one shape every channel's input takes before anything reasons about it,
//! and the terminal [`EventState`] each event must reach.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::id::EventId;
use crate::trajectory::TrajectoryId;
use crate::urgency::Urgency;

/// Which kind of actor produced the event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Timer,
    Watch,
    Email,
    Webhook,
    User,
    System,
    /// The summary of a side lane, coming back to the main trajectory.
    Lane,
    /// A chat platform (Matrix; Telegram later): `channel` says which one and where.
    Chat,
}

impl Source {
    pub const ALL: [Source; 8] = [
        Source::Timer,
        Source::Watch,
        Source::Email,
        Source::Webhook,
        Source::User,
        Source::System,
        Source::Lane,
        Source::Chat,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Timer => "timer",
            Source::Watch => "watch",
            Source::Email => "email",
            Source::Webhook => "webhook",
            Source::User => "user",
            Source::System => "system",
            Source::Lane => "lane",
            Source::Chat => "chat",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// How far the content of an event may be trusted; decides taint and policy downstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    Owner,
    Trusted,
    Untrusted,
}

impl Trust {
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Owner => "owner",
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Trust::Owner, Trust::Trusted, Trust::Untrusted]
            .into_iter()
            .find(|t| t.as_str() == text)
    }
}

/// Who sent the event and how that was established.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// e.g. `uid:1000`, an email address, a webhook route name.
    pub identity: String,
    /// e.g. `unix-socket-peer`, `dkim+dmarc`, `hmac-sha256`.
    pub authenticated_by: String,
}

/// The typed content of an event. Channels added later bring their own variants.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Payload {
    /// A message typed by a person (socket, chat).
    Message { text: String },
    /// What a side lane concluded about the event it ran for. `requested`: the main
    /// conversation asked for it (a sub-agent's result), so it starts a step of its own.
    LaneResult {
        origin: EventId,
        summary: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        requested: bool,
    },
    /// A sub-agent's task, run in a side lane (see [`SubAgentTask`]).
    SubAgent(Box<SubAgentTask>),
    /// Something the daemon itself reports.
    Notice { text: String },
    /// A tool call asked for directly (`steward tools call`): run through the pipeline
    /// before the brain sees the step. `text` is how it reads in the trajectory.
    ToolCall {
        tool: String,
        args: serde_json::Value,
        text: String,
    },
    /// A verified webhook delivery: the route's rendered text and the raw body.
    Webhook {
        route: String,
        text: String,
        body: String,
    },
    /// What a file watch saw in one debounce window: a burst becomes one event.
    FileChanges {
        watch: String,
        changes: Vec<FileChange>,
        /// Changes beyond those listed (a burst is capped).
        omitted: usize,
        text: String,
    },
    /// A message from the mailbox: what a reply needs (addresses, ids, subject), the
    /// attachments saved, and `text` as the brain reads it.
    Email(Box<EmailMessage>),
    /// A message in a chat room (Matrix): where it was, what it answers, and its text.
    Chat(Box<ChatMessage>),
    /// An occurrence of a scheduled job: its text for the brain, or a tool call run
    /// through the pipeline without the model (`action`).
    Scheduled {
        job: String,
        /// The instant the occurrence was due (not when it ran).
        scheduled: DateTime<Utc>,
        /// Run by hand (`cron_trigger`), not by the schedule.
        manual: bool,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        action: Option<ScheduledAction>,
    },
}

/// A chat message as an event carries it: enough to answer it in place (the room, the
/// message, the thread it belongs to) and its text as the brain reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// The platform's room or chat id (`!room:server`).
    pub room: String,
    /// The platform's id of the message (`$event`), also the event's dedupe key.
    pub message_id: String,
    /// The thread the message is in (its root's id), when it is in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_root: Option<String>,
    /// The message it replies to, when it is a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    pub text: String,
}

/// An email as an event carries it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmailMessage {
    /// Without angle brackets; `sha256-…` when the message had none.
    pub message_id: String,
    pub from: String,
    pub to: Vec<String>,
    pub subject: String,
    /// The References a reply carries (this thread's ids, this message's last).
    pub reply_references: Vec<String>,
    /// How the sender was authenticated (`dkim (d=…)`, `dmarc (mx…)`), or why not.
    pub authentication: String,
    pub attachments: Vec<SavedAttachment>,
    pub text: String,
}

/// An attachment written to the attachments directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedAttachment {
    pub name: String,
    pub content_type: String,
    pub bytes: u64,
    /// Where it was saved; `None` when it was not (over the size limit, or the disk failed).
    pub path: Option<String>,
}

/// One changed path (relative to the watched directory) and how: `create`, `modify`,
/// `remove` or `rename`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub kind: String,
}

/// The tool call a scheduled job makes instead of asking the brain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduledAction {
    pub tool: String,
    pub args: serde_json::Value,
}

impl Payload {
    /// The tool call this payload asks for by name, run without the model: a job's
    /// `action` or a `steward tools call`.
    pub fn direct_call(&self) -> Option<(&str, &serde_json::Value)> {
        match self {
            Payload::ToolCall { tool, args, .. }
            | Payload::Scheduled {
                action: Some(ScheduledAction { tool, args }),
                ..
            } => Some((tool, args)),
            _ => None,
        }
    }

    /// The text the brain reads for this payload.
    pub fn text(&self) -> &str {
        match self {
            Payload::Message { text }
            | Payload::Notice { text }
            | Payload::ToolCall { text, .. }
            | Payload::FileChanges { text, .. }
            | Payload::Webhook { text, .. }
            | Payload::Scheduled { text, .. } => text,
            Payload::Email(email) => &email.text,
            Payload::Chat(chat) => &chat.text,
            Payload::LaneResult { summary, .. } => summary,
            Payload::SubAgent(task) => &task.task,
        }
    }
}

/// What a sub-agent is asked to do and with what (set by `agent_spawn`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubAgentTask {
    pub task: String,
    /// The only tools it may see and call.
    pub tools: Vec<String>,
    pub max_model_calls: u32,
    pub timeout_secs: u64,
}

impl Payload {
    /// The tools a sub-agent is limited to; `None` for every other event.
    pub fn sub_agent(&self) -> Option<&SubAgentTask> {
        match self {
            Payload::SubAgent(task) => Some(task),
            _ => None,
        }
    }
}

/// One input, normalised. Created by a channel actor, made durable by the inbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: EventId,
    pub source: Source,
    /// e.g. `user:socket`, `email:inbox`, `cron:morning-brief`, `lane:<event id>`.
    pub channel: String,
    pub received_at: DateTime<Utc>,
    pub occurred_at: DateTime<Utc>,
    pub sender: Sender,
    pub trust: Trust,
    /// Correlation: email thread, chat conversation, job id.
    pub thread: Option<String>,
    /// Same key within the retention window → recorded as a duplicate, not processed.
    pub dedupe_key: Option<String>,
    /// What the sender asked for, if anything; only the owner's request is honoured.
    pub requested_urgency: Option<Urgency>,
    /// What the channel's config says for this input (a cron job's, a watch's, a webhook
    /// route's `urgency`): the default when no `[[urgency.rules]]` entry matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_urgency: Option<Urgency>,
    /// The urgency the classifier decided.
    pub urgency: Urgency,
    pub payload: Payload,
}

impl Event {
    /// A new event received now, with urgency set to the source's default until classified.
    pub fn new(
        source: Source,
        channel: impl Into<String>,
        sender: Sender,
        trust: Trust,
        payload: Payload,
    ) -> Self {
        let now = Utc::now();
        Self {
            id: EventId::generate(),
            source,
            channel: channel.into(),
            received_at: now,
            occurred_at: now,
            sender,
            trust,
            thread: None,
            dedupe_key: None,
            requested_urgency: None,
            channel_urgency: None,
            urgency: Urgency::default_for(source),
            payload,
        }
    }
}

/// Where an event is in its life. Every accepted event ends in exactly one terminal state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EventState {
    /// Durable in the inbox, not yet merged.
    Pending,
    /// Part of a trajectory at `seq`.
    Merged { trajectory: TrajectoryId, seq: u64 },
    /// Same dedupe key as an earlier event; not processed.
    Duplicate { of: EventId },
    /// Refused, with the reason (the sender is told where the channel allows).
    Rejected { reason: String },
    /// Could not be processed, with the error.
    Dead { error: String },
    /// A scheduled occurrence that did not run (the daemon was down and the job's missed-run
    /// policy or lateness bound said so): recorded so that no occurrence vanishes silently.
    Missed { reason: String },
    /// Taken care of by the channel itself, without the brain (an owner's answer by email to
    /// a request for confirmation), with what came of it.
    Handled { outcome: String },
}

/// Which state, without its details: what listings filter on (`steward events --state`,
/// `GET /v1/events?state=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StateKind {
    Pending,
    Merged,
    Duplicate,
    Rejected,
    Dead,
    Missed,
    Handled,
}

impl StateKind {
    const ALL: [StateKind; 7] = [
        StateKind::Pending,
        StateKind::Merged,
        StateKind::Duplicate,
        StateKind::Rejected,
        StateKind::Dead,
        StateKind::Missed,
        StateKind::Handled,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StateKind::Pending => "pending",
            StateKind::Merged => "merged",
            StateKind::Duplicate => "duplicate",
            StateKind::Rejected => "rejected",
            StateKind::Dead => "dead",
            StateKind::Missed => "missed",
            StateKind::Handled => "handled",
        }
    }

    /// A state by its name, or why not.
    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| {
                format!(
                    "{name:?} is not an event state: expected one of {}",
                    EventState::NAMES.join(", ")
                )
            })
    }
}

impl EventState {
    pub fn kind(&self) -> StateKind {
        match self {
            EventState::Pending => StateKind::Pending,
            EventState::Merged { .. } => StateKind::Merged,
            EventState::Duplicate { .. } => StateKind::Duplicate,
            EventState::Rejected { .. } => StateKind::Rejected,
            EventState::Dead { .. } => StateKind::Dead,
            EventState::Missed { .. } => StateKind::Missed,
            EventState::Handled { .. } => StateKind::Handled,
        }
    }

    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    pub fn is_terminal(&self) -> bool {
        !matches!(self, EventState::Pending)
    }

    pub const NAMES: [&'static str; 7] = [
        "pending",
        "merged",
        "duplicate",
        "rejected",
        "dead",
        "missed",
        "handled",
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_and_kinds_agree() {
        let names: Vec<&str> = StateKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, EventState::NAMES);
        for name in EventState::NAMES {
            assert_eq!(StateKind::parse(name).map(StateKind::name), Ok(name));
        }
        let error = StateKind::parse("done").unwrap_err();
        assert!(error.contains("expected one of pending, merged"), "{error}");
    }
}
