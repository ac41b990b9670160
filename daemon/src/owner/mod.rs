//! The owner API: everything the owner can ask of the daemon — send a message or a tool
//! call, read the status, the events, the trajectory, the pending actions, answer them, and
//! manage scheduled jobs and watches — as one service with typed answers and typed errors.
//! The control socket ([`crate::channels::user`]) and HTTP `/v1`
//! ([`crate::channels::http::api`]) are transports over it: the same validation (the
//! message rule of [`message`]), the same wording, the same rows as `--json`.
//!
//! Decided here:
//! - A message `/confirm ID` or `/deny ID [reason]` answers a pending action at once, on
//!   every front door (it is how a chat answers a confirmation request).
//! - Errors carry their kind ([`OwnerError`]), which each transport maps to its own form:
//!   an `error` line on the socket, a status code over HTTP (400, 404, 409, 503).
//! - Streaming (`--follow`, `wait`, SSE) stays in the transports: they read the same inbox
//!   changes, trajectory appends and reply hub the service exposes.

pub mod commands;
pub mod message;
pub mod notices;
pub mod outbox;
pub mod push;
mod rows;
pub mod token;
pub mod web_sessions;

use std::sync::Arc;

use serde_json::Value;
use steward_events::{Event, EventId, Payload, Sender, Source, StateKind, Trust, Urgency};
use steward_tools::ToolRegistry;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::channels::context::Shared;
use crate::channels::timer::control::Scheduler;
use crate::channels::watch::set::WatchSet;
use crate::confirmations::Answer;
use crate::replies::ReplyHub;
use crate::store::{Inbox, Trajectory};
use steward_protocol::JobRow;
use steward_protocol::WatchRow;
use steward_protocol::{CronCommand, EventRow, PendingRow, StatusReport, TelegramOwnerRow};
use token::ApiToken;

pub use message::{MAX_MESSAGE_BYTES, refusal};
pub use rows::pending_row;

/// The owner API service (see the module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct OwnerApi {
    pub shared: Shared,
    pub trajectory: Arc<Trajectory>,
    pub tools: Arc<ToolRegistry>,
    pub scheduler: Scheduler,
    pub watches: WatchSet,
    pub token: ApiToken,
    /// The Telegram channel's state: its paired owners (`steward telegram pair|owners`).
    pub telegram: crate::channels::telegram::state::TelegramState,
    /// The web page's login links and sessions (`steward web login|logout`).
    pub web: web_sessions::WebSessions,
}

/// Which front door a request came through: who the event says sent it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontDoor {
    /// The control socket; the peer's uid was checked against the data dir's owner.
    Socket { uid: u32 },
    /// `/v1`, with the API token.
    Http,
}

/// What became of a message.
#[derive(Debug)]
pub enum Sent {
    /// Durable in the inbox (or a duplicate of an earlier event).
    Accepted {
        event_id: EventId,
        duplicate_of: Option<EventId>,
    },
    /// Refused by the message rule; recorded as a `rejected` event when the store allowed.
    Rejected {
        event_id: Option<EventId>,
        reason: String,
    },
    /// It was `/confirm ID` or `/deny ID …`: the action as answered.
    Answered(Box<PendingRow>),
    /// It was one of the daemon's own commands (`/help`, `/status`, `/pending`,
    /// `/outbox`): its answer.
    Said(String),
}

impl Sent {
    /// The event to wait for, when the message became a new one.
    pub fn new_event(&self) -> Option<EventId> {
        match self {
            Self::Accepted {
                event_id,
                duplicate_of: None,
            } => Some(*event_id),
            _ => None,
        }
    }
}

/// A listing of events, and what following it needs.
#[derive(Debug)]
pub struct EventListing {
    pub rows: Vec<EventRow>,
    /// The state filter, parsed.
    pub state: Option<StateKind>,
    /// The newest arrival number listed (0 when none).
    pub newest: u64,
}

/// What a cron command came to: the jobs it shows, or the event a trigger made.
#[derive(Debug)]
pub enum CronDone {
    Jobs(Vec<JobRow>),
    Triggered(EventId),
}

#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    /// The request itself is wrong (a bad filter, query or argument).
    #[error("{0}")]
    Invalid(String),
    /// What it names does not exist (a pending action, a job).
    #[error("{0}")]
    NotFound(String),
    /// It cannot be done in the current state (already answered, expired, a config job).
    #[error("{0}")]
    Conflict(String),
    /// The daemon cannot do it now (storage, shutting down).
    #[error("{0}")]
    Unavailable(String),
}

impl OwnerApi {
    pub fn inbox(&self) -> &Arc<Inbox> {
        self.shared.submitter.inbox()
    }

    pub fn replies(&self) -> &ReplyHub {
        &self.shared.replies
    }

    pub fn outbox(&self) -> &outbox::Outbox {
        &self.shared.outbox
    }

    /// The newest `limit` owner messages with their delivery states.
    pub fn outbox_list(
        &self,
        limit: Option<usize>,
    ) -> Result<Vec<steward_protocol::OwnerMessage>, OwnerError> {
        self.shared.outbox.list(limit).map_err(unavailable)
    }

    pub fn status(&self) -> StatusReport {
        let mut report = self.shared.status.report();
        report.usage_today = self.shared.usage.today_row();
        report.todo = self
            .shared
            .todos
            .get("main")
            .unwrap_or_default()
            .into_iter()
            .map(|item| steward_protocol::TodoRow {
                text: item.text,
                status: match item.status {
                    steward_tools::builtin::TodoStatus::Pending => "pending",
                    steward_tools::builtin::TodoStatus::InProgress => "in_progress",
                    steward_tools::builtin::TodoStatus::Done => "done",
                }
                .to_owned(),
            })
            .collect();
        report
    }

    /// Takes a message from the owner (see the module docs for `/confirm` and `/deny`).
    /// A full inbox makes the caller wait (backpressure); `shutdown` ends the wait with
    /// nothing stored.
    pub async fn send(
        &self,
        door: FrontDoor,
        text: String,
        urgency: Option<Urgency>,
        shutdown: &CancellationToken,
    ) -> Result<Sent, OwnerError> {
        if let Some(command) = commands::parse(&text) {
            return self.run_command(command).await;
        }
        self.submit(
            owner_event(door, Payload::Message { text }, urgency),
            shutdown,
        )
        .await
    }

    /// Takes a message a chat channel built (its sender already admitted): an owner's
    /// command is answered at once, as on the socket; anything else is stored.
    pub async fn take(
        &self,
        event: Event,
        shutdown: &CancellationToken,
    ) -> Result<Sent, OwnerError> {
        if event.trust == Trust::Owner
            && let Some(command) = commands::parse(event.payload.text())
        {
            return self.run_command(command).await;
        }
        self.submit(event, shutdown).await
    }

    /// Answers one of the daemon's own commands (no model call).
    async fn run_command(&self, command: commands::Command<'_>) -> Result<Sent, OwnerError> {
        use commands::Command;
        Ok(match command {
            Command::Confirm(id) => Sent::Answered(Box::new(self.confirm(id, None).await?)),
            Command::Deny(id, reason) => Sent::Answered(Box::new(self.deny(id, reason).await?)),
            Command::Help => Sent::Said(commands::HELP.to_owned()),
            Command::Status => Sent::Said(self.shared.status.summary()),
            Command::Pending => Sent::Said(self.pending_text()?),
            Command::Outbox => {
                let lines: Vec<String> = self
                    .outbox_list(Some(10))?
                    .iter()
                    .map(|m| {
                        format!(
                            "#{} {} {}: {}",
                            m.id,
                            m.at.format("%Y-%m-%d %H:%M"),
                            m.kind.as_str(),
                            m.text
                        )
                    })
                    .collect();
                Sent::Said(if lines.is_empty() {
                    "No messages for you yet.".to_owned()
                } else {
                    lines.join("\n")
                })
            }
        })
    }

    /// The actions waiting for the owner, one line each with its short id.
    fn pending_text(&self) -> Result<String, OwnerError> {
        let actions = self.shared.confirmations.list().map_err(unavailable)?;
        let ids: Vec<&str> = actions.iter().map(|a| a.id.as_str()).collect();
        let lines: Vec<String> = actions
            .iter()
            .filter(|a| a.state == steward_tools::confirm::PendingState::Pending)
            .map(|a| {
                let short = notices::short_id(&a.id, &ids);
                format!(
                    "{short} {}: {} (/confirm {short} · /deny {short})",
                    a.tool, a.preview
                )
            })
            .collect();
        Ok(if lines.is_empty() {
            "Nothing waits for your confirmation.".to_owned()
        } else {
            lines.join("\n")
        })
    }

    /// Runs `tool` as the owner: the call becomes an event that the dispatcher runs through
    /// the pipeline at its next step (its outcome is announced on the reply hub).
    pub async fn call_tool(
        &self,
        door: FrontDoor,
        tool: String,
        args: Option<Value>,
        shutdown: &CancellationToken,
    ) -> Result<Sent, OwnerError> {
        let args = args.unwrap_or_else(|| Value::Object(Default::default()));
        let text = format!("/tool {tool} {args}");
        let event = owner_event(door, Payload::ToolCall { tool, args, text }, None);
        self.submit(event, shutdown).await
    }

    async fn submit(&self, event: Event, shutdown: &CancellationToken) -> Result<Sent, OwnerError> {
        let submitter = &self.shared.submitter;
        if let Some(reason) = refusal(event.payload.text()) {
            let event_id = match submitter.reject(event, reason.clone()).await {
                Ok(submitted) => Some(submitted.id),
                Err(e) => {
                    warn!(error = %e, "could not record a rejected message");
                    None
                }
            };
            return Ok(Sent::Rejected { event_id, reason });
        }
        let submitted = tokio::select! {
            submitted = submitter.submit(event) => submitted,
            () = shutdown.cancelled() => return Err(OwnerError::Unavailable(
                "the daemon is shutting down; the message was not stored".into(),
            )),
        };
        match submitted {
            Ok(submitted) => Ok(Sent::Accepted {
                event_id: submitted.id,
                duplicate_of: submitted.duplicate_of,
            }),
            Err(e) => {
                warn!(error = %e, "could not store a message");
                Err(OwnerError::Unavailable(format!(
                    "the daemon could not store the message: {e}"
                )))
            }
        }
    }

    /// The newest `limit` events (all when `None`), in `state` when given (by its name).
    /// To follow changes after it, subscribe to [`Self::inbox`] first.
    pub fn events(
        &self,
        limit: Option<usize>,
        state: Option<&str>,
    ) -> Result<EventListing, OwnerError> {
        let state = parse_state(state)?;
        let records = self.inbox().list(limit, state).map_err(unavailable)?;
        Ok(EventListing {
            rows: records.iter().map(EventRow::from).collect(),
            state,
            newest: records.iter().map(|r| r.arrival).max().unwrap_or(0),
        })
    }

    /// The newest `limit` items of the main trajectory.
    pub fn trajectory(
        &self,
        limit: Option<usize>,
    ) -> Result<Vec<steward_events::TrajectoryItem>, OwnerError> {
        self.trajectory.list(limit).map_err(unavailable)
    }

    /// Up to `limit` items of the main trajectory before seq `before` (the newest when
    /// `None`), oldest first.
    pub fn trajectory_page(
        &self,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<steward_events::TrajectoryItem>, OwnerError> {
        self.trajectory.page(before, limit).map_err(unavailable)
    }

    /// Event `id` and, once it is in the main trajectory, the items of the step that took it
    /// from the event on: its tool calls, their results, the answer.
    pub fn event_path(
        &self,
        id: &str,
    ) -> Result<(EventRow, Vec<steward_events::TrajectoryItem>), OwnerError> {
        let parsed: EventId = id
            .parse()
            .map_err(|_| OwnerError::Invalid(format!("{id:?} is not an event id")))?;
        let record = self
            .inbox()
            .get(parsed)
            .map_err(unavailable)?
            .ok_or_else(|| OwnerError::NotFound(format!("no event {id}")))?;
        let row = EventRow::from(&record);
        let items = match (&row.trajectory, row.trajectory_seq) {
            (Some(trajectory), Some(seq)) if trajectory == "main" => {
                let items = self.trajectory.from_seq(seq, 500).map_err(unavailable)?;
                let step = items.first().map(|i| i.step);
                items
                    .into_iter()
                    .take_while(|i| Some(i.step) == step)
                    .collect()
            }
            _ => Vec::new(),
        };
        Ok((row, items))
    }

    pub fn pending(&self) -> Result<Vec<PendingRow>, OwnerError> {
        let actions = self.shared.confirmations.list().map_err(unavailable)?;
        Ok(actions.iter().map(pending_row).collect())
    }

    /// `steward web login`: a one-time login link's token (the CLI makes the URL).
    pub async fn web_login(&self) -> Result<(String, chrono::DateTime<chrono::Utc>), OwnerError> {
        if !self.web.served() {
            return Err(OwnerError::Conflict(
                "the web page is not served: it needs [http] (and http.web = true, in a binary built with the `web` feature)".into(),
            ));
        }
        self.web
            .new_link(chrono::Utc::now())
            .await
            .map_err(unavailable)
    }

    /// `steward web logout --all`: how many sessions ended.
    pub async fn web_logout_all(&self) -> Result<usize, OwnerError> {
        self.web.end_all().await.map_err(unavailable)
    }

    /// `steward telegram pair`: a one-time code for `/start CODE`.
    pub async fn telegram_pair(
        &self,
    ) -> Result<(String, chrono::DateTime<chrono::Utc>), OwnerError> {
        if self.telegram.configured().is_none() {
            return Err(OwnerError::Conflict(
                "no [telegram] section runs: there is no bot to pair with".into(),
            ));
        }
        self.telegram
            .new_pairing_code(chrono::Utc::now())
            .await
            .map_err(unavailable)
    }

    /// `steward telegram owners`: those in the config, then those paired.
    pub fn telegram_owners(&self) -> Result<Vec<TelegramOwnerRow>, OwnerError> {
        let mut rows: Vec<TelegramOwnerRow> = self
            .telegram
            .configured()
            .unwrap_or_default()
            .into_iter()
            .map(|user_id| TelegramOwnerRow {
                user_id,
                source: "config".into(),
                username: None,
                paired_at: None,
            })
            .collect();
        for paired in self.telegram.paired_owners().map_err(unavailable)? {
            rows.push(TelegramOwnerRow {
                user_id: paired.user_id,
                source: "paired".into(),
                username: paired.username,
                paired_at: Some(paired.paired_at),
            });
        }
        Ok(rows)
    }

    /// `steward telegram unpair ID`: the owners left.
    pub async fn telegram_unpair(&self, user_id: i64) -> Result<Vec<TelegramOwnerRow>, OwnerError> {
        if !self
            .telegram
            .remove_owner(user_id)
            .await
            .map_err(unavailable)?
        {
            return Err(OwnerError::NotFound(format!(
                "no paired Telegram owner has the id {user_id}"
            )));
        }
        self.telegram_owners()
    }

    /// Approves a pending action (with edited arguments, re-validated), which runs it once.
    pub async fn confirm(&self, id: &str, args: Option<Value>) -> Result<PendingRow, OwnerError> {
        answered(self.shared.confirmations.approve(id, args).await)
    }

    pub async fn deny(&self, id: &str, reason: Option<String>) -> Result<PendingRow, OwnerError> {
        answered(self.shared.confirmations.deny(id, reason).await)
    }

    pub async fn cron(&self, command: CronCommand) -> Result<CronDone, OwnerError> {
        let scheduler = &self.scheduler;
        let rows = match command {
            CronCommand::List => scheduler.list().await,
            CronCommand::Add { job } => scheduler.add(job).await.map(|row| vec![row]),
            CronCommand::Remove { name } => scheduler.remove(&name).await.map(|()| Vec::new()),
            CronCommand::Pause { name } => {
                scheduler.set_paused(&name, true).await.map(|row| vec![row])
            }
            CronCommand::Resume { name } => scheduler
                .set_paused(&name, false)
                .await
                .map(|row| vec![row]),
            CronCommand::Trigger { name } => {
                return scheduler
                    .trigger(&name)
                    .await
                    .map(CronDone::Triggered)
                    .map_err(scheduler_error);
            }
        };
        rows.map(CronDone::Jobs).map_err(scheduler_error)
    }

    pub fn watches(&self) -> Vec<WatchRow> {
        self.watches.list()
    }

    /// Every tool's contract as JSON, with whether the selection disabled it.
    pub fn tools(&self) -> Vec<Value> {
        self.tools
            .contracts()
            .into_iter()
            .map(|contract| {
                let mut tool = serde_json::to_value(&contract).unwrap_or_default();
                if let Some(fields) = tool.as_object_mut() {
                    fields.insert(
                        "disabled".into(),
                        self.tools.is_disabled(&contract.name).into(),
                    );
                }
                tool
            })
            .collect()
    }

    /// The tools `tool_search` would find for `query` (at most `max_results`, 5 by default).
    pub fn search_tools(
        &self,
        query: &str,
        max_results: Option<usize>,
    ) -> Result<Vec<Value>, OwnerError> {
        let query = steward_tools::search::parse_query(query)
            .map_err(|e| OwnerError::Invalid(e.to_string()))?;
        let max = max_results.unwrap_or(5).clamp(1, 100);
        Ok(self
            .tools
            .search(&query, max, false)
            .into_iter()
            .map(|spec| serde_json::to_value(&spec).unwrap_or_default())
            .collect())
    }

    /// Replaces the HTTP API token; the old one stops working at once.
    pub fn rotate_token(&self) -> Result<String, OwnerError> {
        self.token
            .rotate()
            .map_err(|e| OwnerError::Unavailable(format!("cannot write the new token: {e}")))
    }
}

/// An event from the owner through `door`.
fn owner_event(door: FrontDoor, payload: Payload, urgency: Option<Urgency>) -> Event {
    let (channel, sender) = match door {
        FrontDoor::Socket { uid } => (
            "user:socket",
            Sender {
                identity: format!("uid:{uid}"),
                authenticated_by: "unix-socket-peer".into(),
            },
        ),
        FrontDoor::Http => (
            "user:http",
            Sender {
                identity: "owner".into(),
                authenticated_by: "api-token".into(),
            },
        ),
    };
    let mut event = Event::new(Source::User, channel, sender, Trust::Owner, payload);
    event.requested_urgency = urgency;
    event
}

fn parse_state(state: Option<&str>) -> Result<Option<StateKind>, OwnerError> {
    state
        .map(StateKind::parse)
        .transpose()
        .map_err(OwnerError::Invalid)
}

fn unavailable(error: impl std::fmt::Display) -> OwnerError {
    OwnerError::Unavailable(error.to_string())
}

fn answered(
    answer: Result<Answer, crate::confirmations::ConfirmError>,
) -> Result<PendingRow, OwnerError> {
    match answer {
        Ok(Answer::Ran(action) | Answer::Denied(action)) => Ok(pending_row(&action)),
        Ok(Answer::Refused(message)) => Err(OwnerError::Conflict(message)),
        Ok(Answer::Unknown(message)) => Err(OwnerError::NotFound(message)),
        Err(e) => Err(OwnerError::NotFound(e.to_string())),
    }
}

fn scheduler_error(error: crate::channels::timer::control::SchedulerError) -> OwnerError {
    use crate::channels::timer::control::SchedulerError as E;
    match error {
        E::Unknown(_) => OwnerError::NotFound(error.to_string()),
        E::Exists(_) | E::FromConfig(_) => OwnerError::Conflict(error.to_string()),
        E::Invalid(_) => OwnerError::Invalid(error.to_string()),
        E::Store(_) | E::NotSettled(_) => OwnerError::Unavailable(error.to_string()),
    }
}
