//! The user channel: a Unix control socket (mode 0600) speaking the line protocol of
//! [`crate::protocol`]. Whoever connects is the owner: the socket is only reachable by the
//! daemon's own user, and each peer's uid is checked against the data dir's owner anyway.
//!
//! Messages are validated by the rule every front door shares ([`super::owner_message`]):
//! empty or oversized text is recorded as a `rejected` event and the client is told why. Everything else is classified (urgency rules) and submitted; the
//! client gets `accepted` only once the event is durable.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use steward_events::{Event, EventId, Payload, Sender, Source, StateKind, Trust, Urgency};
use steward_tools::ToolRegistry;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::confirmations::{Answer, Confirmations};
use crate::protocol::{ChatLine, CronCommand, EventRow, PendingRow, Request, Response};
use crate::replies::{Announcement, ReplyHub};
use crate::status::StatusBoard;
use crate::store::Trajectory;

use super::Submitter;

/// Longest message accepted from the socket.
use super::owner_message::MAX_MESSAGE_BYTES;

#[derive(Debug)]
pub struct UserChannel {
    pub socket_path: PathBuf,
    pub owner_uid: u32,
    pub submitter: Submitter,
    pub trajectory: Arc<Trajectory>,
    pub tools: Arc<ToolRegistry>,
    pub replies: ReplyHub,
    pub status: Arc<StatusBoard>,
    pub confirmations: Arc<Confirmations>,
    pub scheduler: crate::channels::timer::control::Scheduler,
    pub watches: crate::channels::watch::set::WatchSet,
    pub api_token: crate::channels::http::api::ApiToken,
}

/// Binds the socket (replacing a stale one: the caller holds the data dir lock, so no live
/// daemon owns it) and restricts it to the owner.
pub fn bind(path: &std::path::Path) -> std::io::Result<UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

impl UserChannel {
    pub async fn run(self, listener: UnixListener, shutdown: CancellationToken) {
        let this = Arc::new(self);
        let sessions = TaskTracker::new();
        this.status
            .set_channel("user", super::ChannelHealth::ready("listening"));
        info!(channel = "user", socket = %this.socket_path.display(), "control socket listening");
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let this = this.clone();
                        let shutdown = shutdown.clone();
                        sessions.spawn(async move { this.session(stream, shutdown).await });
                    }
                    Err(e) => warn!(channel = "user", error = %e, "accept failed"),
                },
            }
        }
        this.status
            .set_channel("user", super::ChannelHealth::Stopped);
        sessions.close();
        sessions.wait().await;
        let _ = std::fs::remove_file(&this.socket_path);
    }

    async fn session(&self, stream: UnixStream, shutdown: CancellationToken) {
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == self.owner_uid => {}
            Ok(cred) => {
                warn!(
                    channel = "user",
                    uid = cred.uid(),
                    "refused a control connection from another user"
                );
                return;
            }
            Err(e) => {
                warn!(channel = "user", error = %e, "cannot read peer credentials; refusing");
                return;
            }
        }
        let (reader, writer) = stream.into_split();
        let mut session = Session {
            reader: BufReader::new(reader),
            pending: Vec::new(),
            writer,
        };
        let first = tokio::select! {
            () = shutdown.cancelled() => return,
            line = session.next_line() => line,
        };
        let request = match first {
            // Parsed once: the version field, then the request itself.
            Ok(Some(line)) => match serde_json::from_str::<serde_json::Value>(&line) {
                Ok(value) => {
                    let client = value
                        .get(crate::protocol::CLIENT_VERSION_FIELD)
                        .and_then(|v| v.as_str())
                        .map(str::to_owned);
                    if let Err(e) = session.check_version(client).await {
                        debug!(channel = "user", error = %e, "control connection ended");
                        return;
                    }
                    serde_json::from_value::<Request>(value)
                }
                Err(e) => Err(e),
            },
            Ok(None) => return,
            Err(e) => {
                session.refuse(e).await;
                return;
            }
        };
        let result = match request {
            Ok(request) => self.serve(request, &mut session, &shutdown).await,
            Err(e) => {
                session
                    .write(&Response::Error {
                        message: format!("bad request: {e}"),
                    })
                    .await
            }
        };
        if let Err(e) = result {
            debug!(channel = "user", error = %e, "control connection ended");
        }
    }

    async fn serve(
        &self,
        request: Request,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<()> {
        match request {
            Request::Send {
                text,
                urgency,
                wait,
            } => {
                let mut announcements = wait.then(|| self.replies.subscribe());
                let accepted = self.accept_text(text, urgency, s, shutdown).await?;
                if let (Some(rx), Some(id)) = (announcements.as_mut(), accepted) {
                    let mine = HashSet::from([id]);
                    loop {
                        let announcement = tokio::select! {
                            () = shutdown.cancelled() => break,
                            a = rx.recv() => a,
                        };
                        if forward(announcement, &mine, s).await?.is_some() {
                            break;
                        }
                    }
                }
                s.write(&Response::End).await
            }
            Request::Chat => self.chat(s, shutdown).await,
            Request::Status => {
                s.write(&Response::Status {
                    status: self.status.report(),
                })
                .await?;
                s.write(&Response::End).await
            }
            Request::Events {
                limit,
                state,
                follow,
            } => self.events(limit, state, follow, s, shutdown).await,
            Request::Trajectory { limit, follow } => {
                self.trajectory(limit, follow, s, shutdown).await
            }
            Request::CallTool { tool, args } => self.call_tool(tool, args, s, shutdown).await,
            Request::Pending => {
                match self.confirmations.list() {
                    Ok(actions) => {
                        for action in &actions {
                            s.write(&Response::Action {
                                action: PendingRow::from(action),
                            })
                            .await?;
                        }
                    }
                    Err(e) => {
                        s.write(&Response::Error {
                            message: e.to_string(),
                        })
                        .await?
                    }
                }
                s.write(&Response::End).await
            }
            Request::Confirm { id, args } => {
                let answer = self.confirmations.approve(&id, args).await;
                self.write_answer(answer, s).await
            }
            Request::Deny { id, reason } => {
                let answer = self.confirmations.deny(&id, reason).await;
                self.write_answer(answer, s).await
            }
            Request::Tools => {
                for contract in self.tools.contracts() {
                    let mut tool = serde_json::to_value(&contract).unwrap_or_default();
                    if let Some(fields) = tool.as_object_mut() {
                        fields.insert(
                            "disabled".into(),
                            self.tools.is_disabled(&contract.name).into(),
                        );
                    }
                    s.write(&Response::Tool { tool }).await?;
                }
                s.write(&Response::End).await
            }
            Request::Cron { command } => self.cron(command, s).await,
            Request::RotateToken => match self.api_token.rotate() {
                Ok(token) => {
                    s.write(&Response::Token { token }).await?;
                    s.write(&Response::End).await
                }
                Err(e) => {
                    s.write(&Response::Error {
                        message: format!("cannot write the new token: {e}"),
                    })
                    .await
                }
            },
            Request::Watches => {
                for watch in self.watches.list() {
                    s.write(&Response::Watch { watch }).await?;
                }
                s.write(&Response::End).await
            }
            Request::SearchTools { query, max_results } => {
                match steward_tools::search::parse_query(&query) {
                    Ok(query) => {
                        let max = max_results.unwrap_or(5).clamp(1, 100);
                        for spec in self.tools.search(&query, max, false) {
                            let tool = serde_json::to_value(&spec).unwrap_or_default();
                            s.write(&Response::Tool { tool }).await?;
                        }
                        s.write(&Response::End).await
                    }
                    Err(e) => {
                        s.write(&Response::Error {
                            message: e.to_string(),
                        })
                        .await
                    }
                }
            }
        }
    }

    async fn cron(&self, command: CronCommand, s: &mut Session) -> std::io::Result<()> {
        let scheduler = &self.scheduler;
        let rows = match command {
            CronCommand::List => scheduler.list(),
            CronCommand::Add { job } => scheduler.add(job).map(|row| vec![row]),
            CronCommand::Remove { name } => scheduler.remove(&name).map(|()| Vec::new()),
            CronCommand::Pause { name } => scheduler.set_paused(&name, true).map(|row| vec![row]),
            CronCommand::Resume { name } => scheduler.set_paused(&name, false).map(|row| vec![row]),
            CronCommand::Trigger { name } => match scheduler.trigger(&name).await {
                Ok(event_id) => {
                    s.write(&Response::Accepted {
                        event_id,
                        duplicate_of: None,
                    })
                    .await?;
                    Ok(Vec::new())
                }
                Err(e) => Err(e),
            },
        };
        match rows {
            Ok(rows) => {
                for job in rows {
                    s.write(&Response::Job { job }).await?;
                }
                s.write(&Response::End).await
            }
            Err(e) => {
                s.write(&Response::Error {
                    message: e.to_string(),
                })
                .await
            }
        }
    }

    async fn write_answer(
        &self,
        answer: Result<Answer, crate::confirmations::ConfirmError>,
        s: &mut Session,
    ) -> std::io::Result<()> {
        self.write_answer_inline(answer, s).await?;
        s.write(&Response::End).await
    }

    async fn write_answer_inline(
        &self,
        answer: Result<Answer, crate::confirmations::ConfirmError>,
        s: &mut Session,
    ) -> std::io::Result<()> {
        let response = match answer {
            Ok(Answer::Ran(action) | Answer::Denied(action)) => Response::Action {
                action: PendingRow::from(&action),
            },
            Ok(Answer::Refused(message)) => Response::Error { message },
            Err(e) => Response::Error {
                message: e.to_string(),
            },
        };
        s.write(&response).await
    }

    /// Validates, classifies and submits one message; tells the client the outcome.
    /// Returns the event id when the message was accepted for processing.
    async fn accept_text(
        &self,
        text: String,
        urgency: Option<Urgency>,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<Option<EventId>> {
        // Answers to pending actions on the channel that was asked: `/confirm ID`,
        // `/deny ID [reason]`. They act at once; the answer reaches the trajectory as the
        // confirmation's own system event.
        let mut words = text.split_whitespace();
        match (words.next(), words.next()) {
            (Some("/confirm"), Some(id)) => {
                let answer = self.confirmations.approve(id, None).await;
                self.write_answer_inline(answer, s).await?;
                return Ok(None);
            }
            (Some("/deny"), Some(id)) => {
                let reason = words.collect::<Vec<_>>().join(" ");
                let answer = self
                    .confirmations
                    .deny(id, (!reason.is_empty()).then_some(reason))
                    .await;
                self.write_answer_inline(answer, s).await?;
                return Ok(None);
            }
            _ => {}
        }
        let event = self.owner_event(Payload::Message { text }, urgency);
        self.accept(event, s, shutdown).await
    }

    fn owner_event(&self, payload: Payload, urgency: Option<Urgency>) -> Event {
        let mut event = Event::new(
            Source::User,
            "user:socket",
            Sender {
                identity: format!("uid:{}", self.owner_uid),
                authenticated_by: "unix-socket-peer".into(),
            },
            Trust::Owner,
            payload,
        );
        event.requested_urgency = urgency;
        event
    }

    /// Runs `tool` as the owner: the call becomes an event, the dispatcher runs it through
    /// the pipeline at its next step, and the outcome comes back here.
    async fn call_tool(
        &self,
        tool: String,
        args: Option<Value>,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<()> {
        let args = args.unwrap_or_else(|| Value::Object(Default::default()));
        let text = format!("/tool {tool} {args}");
        let mut announcements = self.replies.subscribe();
        let event = self.owner_event(Payload::ToolCall { tool, args, text }, None);
        let Some(id) = self.accept(event, s, shutdown).await? else {
            return s.write(&Response::End).await;
        };
        loop {
            let announcement = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                a = announcements.recv() => a,
            };
            match announcement {
                Ok(Announcement::ToolResult { origin, outcome }) if origin == id => {
                    s.write(&Response::ToolResult {
                        event_id: id,
                        outcome,
                    })
                    .await?;
                    break;
                }
                Ok(Announcement::StepEnded { events, outcome }) if events.contains(&id) => {
                    s.write(&Response::Error {
                        message: format!("the step ended before the call ran: {outcome:?}"),
                    })
                    .await?;
                    break;
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            }
        }
        s.write(&Response::End).await
    }

    /// Validates and submits an event from the socket; tells the client the outcome.
    async fn accept(
        &self,
        event: Event,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<Option<EventId>> {
        if let Some(reason) = super::owner_message::refusal(event.payload.text()) {
            let event_id = match self.submitter.reject(event, reason.clone()).await {
                Ok(submitted) => Some(submitted.id),
                Err(e) => {
                    warn!(channel = "user", error = %e, "could not record a rejected message");
                    None
                }
            };
            s.write(&Response::Rejected { event_id, reason }).await?;
            return Ok(None);
        }
        // A full inbox makes the client wait (backpressure); shutdown ends the wait, and the
        // client, never told "accepted", knows the message was not taken.
        let submitted = tokio::select! {
            submitted = self.submitter.submit(event) => submitted,
            () = shutdown.cancelled() => {
                s.write(&Response::Error { message: "the daemon is shutting down; the message was not stored".into() }).await?;
                return Ok(None);
            }
        };
        match submitted {
            Ok(submitted) => {
                s.write(&Response::Accepted {
                    event_id: submitted.id,
                    duplicate_of: submitted.duplicate_of,
                })
                .await?;
                Ok(submitted.duplicate_of.is_none().then_some(submitted.id))
            }
            Err(e) => {
                warn!(channel = "user", error = %e, "could not store a message");
                s.write(&Response::Error {
                    message: format!("the daemon could not store the message: {e}"),
                })
                .await?;
                Ok(None)
            }
        }
    }

    async fn chat(&self, s: &mut Session, shutdown: &CancellationToken) -> std::io::Result<()> {
        let mut announcements = self.replies.subscribe();
        let mut mine = HashSet::new();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                line = s.next_line() => {
                    let line = match line {
                        Ok(Some(line)) => line,
                        Ok(None) => return Ok(()),
                        Err(e) => {
                            s.refuse(e).await;
                            return Ok(());
                        }
                    };
                    if line.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<ChatLine>(&line) {
                        Ok(chat) => {
                            if let Some(id) = self.accept_text(chat.text, chat.urgency, s, shutdown).await? {
                                mine.insert(id);
                            }
                        }
                        Err(e) => s.write(&Response::Error { message: format!("bad chat line: {e}") }).await?,
                    }
                }
                announcement = announcements.recv() => {
                    if let Some(ended) = forward(announcement, &mine, s).await? {
                        for id in ended {
                            mine.remove(&id);
                        }
                    }
                }
            }
        }
    }

    async fn events(
        &self,
        limit: Option<usize>,
        state: Option<String>,
        follow: bool,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<()> {
        let state = match state.as_deref().map(StateKind::parse).transpose() {
            Ok(state) => state,
            Err(message) => return s.write(&Response::Error { message }).await,
        };
        let mut changes = follow.then(|| self.submitter.inbox().subscribe());
        let records = match self.submitter.inbox().list(limit, state) {
            Ok(records) => records,
            Err(e) => {
                return s
                    .write(&Response::Error {
                        message: e.to_string(),
                    })
                    .await;
            }
        };
        let mut shown = 0;
        for record in &records {
            s.write(&Response::Event {
                event: EventRow::from(record),
            })
            .await?;
            shown = shown.max(record.arrival);
        }
        let Some(changes) = changes.as_mut() else {
            return s.write(&Response::End).await;
        };
        loop {
            let change = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                change = changes.recv() => change,
            };
            match change {
                Ok(change) => {
                    let record = change.0;
                    // Skip what the listing above already showed in its final state.
                    let already_shown = record.arrival <= shown && !record.state.is_terminal();
                    if !already_shown && state.is_none_or(|st| record.state.kind() == st) {
                        s.write(&Response::Event {
                            event: EventRow::from(&record),
                        })
                        .await?;
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    s.write(&Response::Error {
                        message: format!("fell behind: {n} event changes not shown"),
                    })
                    .await?;
                }
                Err(RecvError::Closed) => return Ok(()),
            }
        }
    }

    async fn trajectory(
        &self,
        limit: Option<usize>,
        follow: bool,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<()> {
        let mut appended = self.trajectory.watch();
        let mut last = 0;
        let items = match self.trajectory.list(limit) {
            Ok(items) => items,
            Err(e) => {
                return s
                    .write(&Response::Error {
                        message: e.to_string(),
                    })
                    .await;
            }
        };
        for item in items {
            last = item.seq;
            s.write(&Response::Item { item }).await?;
        }
        if !follow {
            return s.write(&Response::End).await;
        }
        if last == 0 {
            last = *appended.borrow_and_update();
        }
        loop {
            let items = self.trajectory.after(last).map_err(std::io::Error::other)?;
            for item in items {
                last = item.seq;
                s.write(&Response::Item { item }).await?;
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                changed = appended.changed() => if changed.is_err() { return Ok(()) },
            }
        }
    }
}

/// Writes an announcement if it concerns `mine`. Returns the events whose step ended.
async fn forward(
    announcement: Result<Announcement, RecvError>,
    mine: &HashSet<EventId>,
    s: &mut Session,
) -> std::io::Result<Option<Vec<EventId>>> {
    match announcement {
        Ok(Announcement::Reply { text, reply_to })
            if reply_to.iter().any(|id| mine.contains(id)) =>
        {
            s.write(&Response::Reply { text, reply_to }).await?;
        }
        Ok(Announcement::StepEnded { events, outcome })
            if events.iter().any(|id| mine.contains(id)) =>
        {
            s.write(&Response::StepEnded {
                events: events.clone(),
                outcome,
            })
            .await?;
            return Ok(Some(events));
        }
        Ok(Announcement::Notice { text, origin }) => {
            s.write(&Response::Notice { text, origin }).await?;
        }
        Ok(_) => {}
        Err(RecvError::Lagged(n)) => {
            s.write(&Response::Error {
                message: format!("fell behind: {n} replies not shown (see `steward trajectory`)"),
            })
            .await?;
        }
        Err(RecvError::Closed) => return Ok(Some(Vec::new())),
    }
    Ok(None)
}

/// Longest request line: a maximal message, JSON-escaped, fits with room to spare.
const MAX_LINE_BYTES: usize = 4 * MAX_MESSAGE_BYTES;

struct Session {
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    /// Bytes read but not yet returned as a line; kept across calls so that reading is
    /// cancellation-safe inside `select!`.
    pending: Vec<u8>,
    writer: OwnedWriteHalf,
}

impl Session {
    /// Warns a client of another version before answering it (see `protocol`'s docs). A
    /// client that names no version is older than the exchange; it gets no extra line it
    /// could not read.
    async fn check_version(&mut self, client: Option<String>) -> std::io::Result<()> {
        match client {
            Some(client) if client != crate::protocol::VERSION => {
                warn!(channel = "user", client_version = %client, daemon_version = crate::protocol::VERSION, "a client of another version connected");
                self.write(&Response::VersionMismatch {
                    daemon_version: crate::protocol::VERSION.to_owned(),
                    client_version: client,
                })
                .await
            }
            _ => Ok(()),
        }
    }

    /// The next line (without its newline); `None` at the end of input. Lines over
    /// [`MAX_LINE_BYTES`] or not UTF-8 are `InvalidData` errors.
    async fn next_line(&mut self) -> std::io::Result<Option<String>> {
        loop {
            let newline = self.pending.iter().position(|b| *b == b'\n');
            if newline.is_none() && self.pending.len() > MAX_LINE_BYTES {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("request line over {MAX_LINE_BYTES} bytes"),
                ));
            }
            let end = match newline {
                Some(at) => Some(at),
                None => {
                    // `fill_buf` is cancellation-safe; nothing below awaits.
                    let available = self.reader.fill_buf().await?;
                    if available.is_empty() {
                        (!self.pending.is_empty()).then_some(self.pending.len())
                    } else {
                        let n = available.len();
                        self.pending.extend_from_slice(available);
                        self.reader.consume(n);
                        continue;
                    }
                }
            };
            let Some(end) = end else { return Ok(None) };
            let mut line: Vec<u8> = self.pending.drain(..end.min(self.pending.len())).collect();
            if self.pending.first() == Some(&b'\n') {
                self.pending.remove(0);
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return String::from_utf8(line).map(Some).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, "request line is not UTF-8")
            });
        }
    }

    /// Tells the client why its input was refused, then the connection ends.
    async fn refuse(&mut self, error: std::io::Error) {
        debug!(channel = "user", error = %error, "control connection refused input");
        if error.kind() == std::io::ErrorKind::InvalidData {
            let _ = self
                .write(&Response::Error {
                    message: format!("bad request: {error}"),
                })
                .await;
        }
    }

    async fn write(&mut self, response: &Response) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(response).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line).await
    }
}
