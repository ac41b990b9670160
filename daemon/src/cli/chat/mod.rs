//! `steward chat`: the owner's conversation with the assistant — lines in, every answer and
//! owner message out as it arrives, through daemon restarts (see [`terminal`] for the line
//! editor).

mod terminal;

use std::collections::HashSet;
use std::process::ExitCode;
use std::time::Duration;

use steward_events::EventId;
use steward_protocol::client::{Client, ClientError};
use steward_protocol::{ChatLine, Request, Response};

use super::Context;
use super::send::step_note;
use terminal::Terminal;

/// Sends each stdin line; prints replies and every owner message as they come. At the end
/// of input (or `/quit`), waits for the steps of the messages sent to end, then exits. When
/// the daemon goes away (a restart), it says so, keeps what is typed meanwhile, reconnects
/// every second and resumes after the last owner message it showed.
pub async fn chat(ctx: &Context) -> Result<ExitCode, ClientError> {
    let socket = ctx.socket_path();
    let mut client = Client::connect(&socket).await?;
    let mut terminal = Terminal::open(&ctx.data_dir);
    if terminal.is_interactive() {
        let profile = format!("{:?}", ctx.config.tools.profile).to_lowercase();
        eprintln!(
            "steward chat — brain {}, tools profile {profile}. /help lists the commands; /quit or Ctrl-D leaves.",
            brain_name(&socket).await
        );
    }
    let mut chat = ChatState {
        input_open: true,
        ..ChatState::default()
    };
    loop {
        match chat.session(&mut client, &mut terminal).await {
            Ok(true) => return Ok(ExitCode::SUCCESS),
            Ok(false) | Err(ClientError::Io(_)) => {}
            Err(e) => return Err(e),
        }
        if chat.done() {
            return Ok(ExitCode::SUCCESS);
        }
        terminal.note("(the daemon went away; reconnecting — what you type is kept)");
        client = chat.reconnect(&socket, &mut terminal).await?;
        terminal.note("(reconnected)");
    }
}

/// The brain the daemon runs, for the banner.
async fn brain_name(socket: &std::path::Path) -> String {
    match Client::call(socket, &Request::Status).await {
        Ok(responses) => responses
            .into_iter()
            .find_map(|r| match r {
                Response::Status { status } => Some(status.brain),
                _ => None,
            })
            .unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// What a chat remembers across reconnects.
#[derive(Default)]
struct ChatState {
    input_open: bool,
    outstanding: HashSet<EventId>,
    unacknowledged: usize,
    /// The last owner message shown: a reconnect resumes after it.
    last_seen: Option<u64>,
    /// Lines typed while the daemon was away.
    unsent: std::collections::VecDeque<String>,
}

impl ChatState {
    /// Nothing left to send or wait for.
    fn done(&self) -> bool {
        !self.input_open
            && self.outstanding.is_empty()
            && self.unacknowledged == 0
            && self.unsent.is_empty()
    }

    /// One connection's chat: `Ok(true)` when the chat is over, `Ok(false)` when the
    /// daemon went away.
    async fn session(
        &mut self,
        client: &mut Client,
        terminal: &mut Terminal,
    ) -> Result<bool, ClientError> {
        client
            .request(&Request::Chat {
                after: self.last_seen,
            })
            .await?;
        while let Some(text) = self.unsent.pop_front() {
            self.send(client, text).await?;
        }
        // The daemon first shows what waited for the owner, then says `end`.
        let mut caught_up = false;
        loop {
            if caught_up && self.done() {
                return Ok(true);
            }
            tokio::select! {
                line = terminal.next_line(), if self.input_open => match line? {
                    Some(text) if text.trim().is_empty() => {}
                    Some(text) if text.trim() == "/quit" => self.input_open = false,
                    Some(text) => self.send(client, text).await?,
                    None => self.input_open = false,
                },
                response = client.next() => match response? {
                    None => return Ok(false),
                    Some(Response::End) => caught_up = true,
                    Some(response) => self.show(response, terminal),
                },
            }
        }
    }

    /// Sends a typed line; a line the connection did not take (the daemon just died) is
    /// kept, first in line for the next connection.
    async fn send(&mut self, client: &mut Client, text: String) -> Result<(), ClientError> {
        let line = ChatLine {
            text,
            urgency: None,
        };
        match client.write_line(&line).await {
            Ok(()) => {
                self.unacknowledged += 1;
                Ok(())
            }
            Err(e) => {
                self.unsent.push_front(line.text);
                Err(e)
            }
        }
    }

    fn show(&mut self, response: Response, terminal: &mut Terminal) {
        match response {
            Response::Accepted {
                event_id,
                duplicate_of,
            } => {
                self.unacknowledged = self.unacknowledged.saturating_sub(1);
                if duplicate_of.is_none() {
                    self.outstanding.insert(event_id);
                }
            }
            Response::Rejected { reason, .. } => {
                self.unacknowledged = self.unacknowledged.saturating_sub(1);
                terminal.note(&format!("(rejected: {reason})"));
            }
            Response::Reply { text, .. } => terminal.show(&text),
            Response::Message { message } => {
                self.last_seen = Some(message.id);
                terminal.show(&owner_line(&message));
            }
            Response::Action { action } => {
                self.unacknowledged = self.unacknowledged.saturating_sub(1);
                terminal.show(&format!(
                    "action {} ({}): {}",
                    action.id, action.tool, action.state
                ));
            }
            Response::StepEnded { events, outcome } => {
                if let Some(note) = step_note(&outcome) {
                    terminal.note(&note);
                }
                for id in events {
                    self.outstanding.remove(&id);
                }
            }
            Response::Error { message } => {
                self.unacknowledged = self.unacknowledged.saturating_sub(1);
                terminal.note(&format!("(error: {message})"));
            }
            _ => {}
        }
    }

    /// Connects again (every second), keeping the lines typed meanwhile. A line sent but
    /// not acknowledged before the daemon went away may or may not have been stored
    /// (`steward events` tells); the steps this session waited on end unseen by it (their
    /// announcements went with the connection), so it stops waiting for them.
    async fn reconnect(
        &mut self,
        socket: &std::path::Path,
        terminal: &mut Terminal,
    ) -> Result<Client, ClientError> {
        self.unacknowledged = 0;
        self.outstanding.clear();
        loop {
            tokio::select! {
                line = terminal.next_line(), if self.input_open => match line? {
                    Some(text) if text.trim().is_empty() => {}
                    Some(text) if text.trim() == "/quit" => self.input_open = false,
                    Some(text) => self.unsent.push_back(text),
                    None => self.input_open = false,
                },
                () = tokio::time::sleep(Duration::from_secs(1)) => {
                    if let Ok(client) = Client::connect(socket).await {
                        return Ok(client);
                    }
                }
            }
        }
    }
}

/// An owner message as a chat shows it: an answer as it is, anything else marked with
/// what it is (`(notice) …`, `(confirmation) …`).
fn owner_line(message: &steward_protocol::OwnerMessage) -> String {
    match message.kind {
        steward_protocol::MessageKind::Answer => message.text.clone(),
        kind => format!("({}) {}", kind.as_str(), message.text),
    }
}
