//! The user channel: a Unix control socket (mode 0600) speaking the line protocol of
//! [`steward_protocol`]. Whoever connects is the owner: the socket is only reachable by the
//! daemon's own user, and each peer's uid is checked against the data dir's owner anyway.
//!
//! A thin transport over the owner API ([`crate::owner`]): each request line maps to one of
//! its calls, its answer to response lines. Messages follow the rule every front door
//! shares: empty or oversized text is recorded as a `rejected` event and the client is told
//! why; everything else is classified (urgency rules) and submitted, and the client gets
//! `accepted` only once the event is durable.

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use steward_events::{EventId, Urgency};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::channels::ChannelHealth;
use crate::channels::context::ChannelContext;
use crate::owner::outbox::Outbox;
use crate::owner::{CronDone, FrontDoor, MAX_MESSAGE_BYTES, OwnerApi, OwnerError, Sent};
use crate::replies::Announcement;
use steward_protocol::{
    ChatLine, EventRow, MessageKind, OwnerMessage, Request, Response, TelegramCommand,
};

/// The socket's name in the outbox's delivery records.
const SOCKET: &str = "socket";

/// The bound control socket and who may use it.
#[derive(Debug)]
pub struct Socket {
    pub listener: UnixListener,
    pub path: PathBuf,
    /// The data dir's owner: the only uid served.
    pub owner_uid: u32,
    pub owner: OwnerApi,
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

/// Serves the socket until the channel is stopped; each connection is a session task of
/// the channel.
pub async fn run(socket: Socket, cx: ChannelContext) {
    let Socket {
        listener,
        path,
        owner_uid,
        owner,
    } = socket;
    let this = Arc::new(UserChannel {
        owner_uid,
        owner,
        shutdown: cx.shutdown().clone(),
    });
    cx.set_health(ChannelHealth::ready("listening"));
    info!(channel = "user", socket = %path.display(), "control socket listening");
    loop {
        tokio::select! {
            () = cx.shutdown().cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let this = this.clone();
                    cx.spawn(async move { this.session(stream).await });
                }
                Err(e) => warn!(channel = "user", error = %e, "accept failed"),
            },
        }
    }
    cx.set_health(ChannelHealth::Stopped);
    let _ = std::fs::remove_file(&path);
}

#[derive(Debug)]
struct UserChannel {
    owner_uid: u32,
    owner: OwnerApi,
    shutdown: CancellationToken,
}

impl UserChannel {
    fn door(&self) -> FrontDoor {
        FrontDoor::Socket {
            uid: self.owner_uid,
        }
    }

    async fn session(&self, stream: UnixStream) {
        let shutdown = self.shutdown.clone();
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
                        .get(steward_protocol::CLIENT_VERSION_FIELD)
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
        let owner = &self.owner;
        match request {
            Request::Send {
                text,
                urgency,
                wait,
            } => self.send(text, urgency, wait, s, shutdown).await,
            Request::Chat { after } => self.chat(after, s, shutdown).await,
            Request::Outbox { limit, follow } => self.outbox(limit, follow, s, shutdown).await,
            Request::Status => {
                s.write(&Response::Status {
                    status: owner.status(),
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
                let rows = owner.pending();
                s.write_all(rows, |action| Response::Action { action })
                    .await
            }
            Request::Confirm { id, args } => {
                let answer = owner.confirm(&id, args).await;
                s.write_all(answer.map(|a| vec![a]), |action| Response::Action {
                    action,
                })
                .await
            }
            Request::Deny { id, reason } => {
                let answer = owner.deny(&id, reason).await;
                s.write_all(answer.map(|a| vec![a]), |action| Response::Action {
                    action,
                })
                .await
            }
            Request::Tools => {
                s.write_all(Ok(owner.tools()), |tool| Response::Tool { tool })
                    .await
            }
            Request::Cron { command } => match owner.cron(command).await {
                Ok(CronDone::Jobs(jobs)) => {
                    s.write_all(Ok(jobs), |job| Response::Job { job }).await
                }
                Ok(CronDone::Triggered(event_id)) => {
                    s.write(&Response::Accepted {
                        event_id,
                        duplicate_of: None,
                    })
                    .await?;
                    s.write(&Response::End).await
                }
                Err(e) => s.error(e).await,
            },
            Request::RotateToken => match owner.rotate_token() {
                Ok(token) => {
                    s.write(&Response::Token { token }).await?;
                    s.write(&Response::End).await
                }
                Err(e) => s.error(e).await,
            },
            Request::Watches => {
                s.write_all(Ok(owner.watches()), |watch| Response::Watch { watch })
                    .await
            }
            Request::SearchTools { query, max_results } => {
                let found = owner.search_tools(&query, max_results);
                s.write_all(found, |tool| Response::Tool { tool }).await
            }
            Request::Usage { by, since } => {
                let rows = (owner.shared.usage.rows(by, since))
                    .map_err(|e| crate::owner::OwnerError::Unavailable(e.to_string()));
                s.write_all(rows, |row| Response::Usage { row }).await
            }
            Request::Budget => {
                s.write(&Response::Budget {
                    budget: owner.shared.usage.report(),
                })
                .await?;
                s.write(&Response::End).await
            }
            Request::WebLogin => match owner.web_login().await {
                Ok((token, expires_at)) => {
                    s.write(&Response::LoginLink { token, expires_at }).await?;
                    s.write(&Response::End).await
                }
                Err(e) => s.error(e).await,
            },
            Request::WebLogoutAll => match owner.web_logout_all().await {
                Ok(sessions) => {
                    s.write(&Response::LoggedOut { sessions }).await?;
                    s.write(&Response::End).await
                }
                Err(e) => s.error(e).await,
            },
            Request::Telegram { command } => {
                let owners = match command {
                    TelegramCommand::Pair => match owner.telegram_pair().await {
                        Ok((code, expires_at)) => {
                            s.write(&Response::PairingCode { code, expires_at }).await?;
                            return s.write(&Response::End).await;
                        }
                        Err(e) => return s.error(e).await,
                    },
                    TelegramCommand::Owners => owner.telegram_owners(),
                    TelegramCommand::Unpair { user_id } => owner.telegram_unpair(user_id).await,
                };
                s.write_all(owners, |owner| Response::TelegramOwner { owner })
                    .await
            }
        }
    }

    /// `send`: takes the message; with `wait`, streams the replies to it until its step
    /// ends, and any problem the owner should hear of meanwhile (the model is unavailable).
    async fn send(
        &self,
        text: String,
        urgency: Option<Urgency>,
        wait: bool,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<()> {
        let mut announcements = wait.then(|| self.owner.replies().subscribe());
        let mut problems = self.owner.outbox().subscribe();
        let accepted = self.accept_text(text, urgency, s, shutdown).await?;
        if let (Some(rx), Some(id)) = (announcements.as_mut(), accepted) {
            let mine = HashSet::from([id]);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    a = rx.recv() => if forward(a, &mine, s).await?.is_some() {
                        break;
                    },
                    Ok(message) = problems.recv() => {
                        if message.kind == MessageKind::Problem {
                            let message = Arc::unwrap_or_clone(message);
                            s.write(&Response::Message { message }).await?;
                        }
                    }
                }
            }
        }
        s.write(&Response::End).await
    }

    /// Takes one message and tells the client the outcome; the event id when it became a
    /// new event to wait for.
    async fn accept_text(
        &self,
        text: String,
        urgency: Option<Urgency>,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<Option<EventId>> {
        let sent = self.owner.send(self.door(), text, urgency, shutdown).await;
        s.sent(sent).await
    }

    /// Runs `tool` as the owner and waits for its outcome (see [`OwnerApi::call_tool`]).
    async fn call_tool(
        &self,
        tool: String,
        args: Option<Value>,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<()> {
        let mut announcements = self.owner.replies().subscribe();
        let sent = self
            .owner
            .call_tool(self.door(), tool, args, shutdown)
            .await;
        let Some(id) = s.sent(sent).await? else {
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

    /// A chat session: the owner's lines in, replies to them and every owner message routed
    /// to the socket out (first those no channel delivered yet, or, when resuming, those
    /// after `after` that no chat showed — an answer the asking chat showed as its reply is
    /// not repeated).
    async fn chat(
        &self,
        after: Option<u64>,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<()> {
        let mut announcements = self.owner.replies().subscribe();
        let outbox = self.owner.outbox();
        let mut queued = outbox.subscribe();
        let backlog = match after {
            Some(id) => outbox
                .after(id)
                .map(|after| after.into_iter().filter(|m| shows(outbox, m)).collect()),
            None => outbox.undelivered(SOCKET),
        };
        let mut shown = after.unwrap_or(0);
        match backlog {
            Ok(messages) => {
                for message in messages {
                    shown = self.show(message, s).await?;
                }
            }
            Err(e) => s.error(OwnerError::Unavailable(e.to_string())).await?,
        }
        // Caught up: what follows is live.
        s.write(&Response::End).await?;
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
                    // Owner messages queued before this announcement (a notice from the step
                    // that is ending) are shown first: the two broadcasts keep no order
                    // between them, and a chat may leave at its step's end.
                    while let Ok(message) = queued.try_recv() {
                        if message.id > shown && shows(outbox, &message) {
                            shown = self.show(Arc::unwrap_or_clone(message), s).await?;
                        }
                    }
                    if let Some(ended) = forward(announcement, &mine, s).await? {
                        for id in ended {
                            mine.remove(&id);
                        }
                    }
                }
                message = queued.recv() => match message {
                    // An answer already delivered here is the asking session's reply.
                    Ok(message) if message.id > shown && shows(outbox, &message) => {
                        shown = self.show(Arc::unwrap_or_clone(message), s).await?;
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => match outbox.after(shown) {
                        Ok(missed) => {
                            for message in missed {
                                if shows(outbox, &message) {
                                    shown = self.show(message, s).await?;
                                }
                            }
                        }
                        Err(e) => s.error(OwnerError::Unavailable(e.to_string())).await?,
                    },
                    Err(RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    /// `steward outbox [--follow]`: a view of the outbox — it shows delivery states and
    /// changes none (following is not a delivery to the owner).
    async fn outbox(
        &self,
        limit: Option<usize>,
        follow: bool,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<()> {
        let outbox = self.owner.outbox();
        let mut changes = follow.then(|| outbox.changes());
        let listed = match self.owner.outbox_list(limit) {
            Ok(listed) => listed,
            Err(e) => return s.error(e).await,
        };
        let mut newest = listed.last().map_or(0, |m| m.id);
        for message in listed {
            s.write(&Response::Message { message }).await?;
        }
        let Some(changes) = changes.as_mut() else {
            return s.write(&Response::End).await;
        };
        loop {
            let change = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                change = changes.recv() => change,
            };
            let messages = match change {
                Ok(message) => vec![Arc::unwrap_or_clone(message)],
                // Fell behind: what is newer than the newest shown is in the outbox.
                Err(RecvError::Lagged(_)) => outbox.after(newest).unwrap_or_default(),
                Err(RecvError::Closed) => return Ok(()),
            };
            for message in messages {
                newest = newest.max(message.id);
                s.write(&Response::Message { message }).await?;
            }
        }
    }

    /// Shows an owner message and records it delivered on the socket; its id.
    async fn show(&self, message: OwnerMessage, s: &mut Session) -> std::io::Result<u64> {
        let id = message.id;
        s.write(&Response::Message { message }).await?;
        if let Err(e) = self.owner.outbox().delivered(id, SOCKET).await {
            warn!(channel = "user", error = %e, message_id = id, "could not record a delivery");
        }
        Ok(id)
    }

    async fn events(
        &self,
        limit: Option<usize>,
        state: Option<String>,
        follow: bool,
        s: &mut Session,
        shutdown: &CancellationToken,
    ) -> std::io::Result<()> {
        let mut changes = follow.then(|| self.owner.inbox().subscribe());
        let listing = match self.owner.events(limit, state.as_deref()) {
            Ok(listing) => listing,
            Err(e) => return s.error(e).await,
        };
        for event in listing.rows {
            s.write(&Response::Event { event }).await?;
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
                    let already_shown =
                        record.arrival <= listing.newest && !record.state.is_terminal();
                    if !already_shown && listing.state.is_none_or(|st| record.state.kind() == st) {
                        s.write(&Response::Event {
                            event: EventRow::from(&*record),
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
        let mut appended = self.owner.trajectory.watch();
        let mut last = 0;
        let items = match self.owner.trajectory(limit) {
            Ok(items) => items,
            Err(e) => return s.error(e).await,
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
            let items = self
                .owner
                .trajectory
                .after(last)
                .map_err(std::io::Error::other)?;
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
            Some(client) if client != steward_protocol::VERSION => {
                warn!(channel = "user", client_version = %client, daemon_version = steward_protocol::VERSION, "a client of another version connected");
                self.write(&Response::VersionMismatch {
                    daemon_version: steward_protocol::VERSION.to_owned(),
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

    /// Writes a listing line by line, then `end`; or the error.
    async fn write_all<T>(
        &mut self,
        rows: Result<Vec<T>, OwnerError>,
        line: impl Fn(T) -> Response,
    ) -> std::io::Result<()> {
        match rows {
            Ok(rows) => {
                for row in rows {
                    self.write(&line(row)).await?;
                }
                self.write(&Response::End).await
            }
            Err(e) => self.error(e).await,
        }
    }

    async fn error(&mut self, error: OwnerError) -> std::io::Result<()> {
        self.write(&Response::Error {
            message: error.to_string(),
        })
        .await
    }

    /// Tells the client what became of a message; the event to wait for, if any.
    async fn sent(&mut self, sent: Result<Sent, OwnerError>) -> std::io::Result<Option<EventId>> {
        let new_event = sent.as_ref().ok().and_then(Sent::new_event);
        match sent {
            Ok(Sent::Accepted {
                event_id,
                duplicate_of,
            }) => {
                self.write(&Response::Accepted {
                    event_id,
                    duplicate_of,
                })
                .await?
            }
            Ok(Sent::Rejected { event_id, reason }) => {
                self.write(&Response::Rejected { event_id, reason }).await?
            }
            Ok(Sent::Answered(action)) => self.write(&Response::Action { action: *action }).await?,
            Ok(Sent::Said(text)) => {
                self.write(&Response::Reply {
                    text,
                    reply_to: Vec::new(),
                })
                .await?
            }
            Err(e) => self.error(e).await?,
        }
        Ok(new_event)
    }

    async fn write(&mut self, response: &Response) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(response).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.writer.write_all(&line).await
    }
}

/// Whether a chat pushes this message: the owner routes its kind to the socket, and it is
/// not an answer already shown here as the reply of the session that asked.
fn shows(outbox: &Outbox, message: &OwnerMessage) -> bool {
    !message.delivered.contains_key(SOCKET) && outbox.routes(SOCKET, message)
}
