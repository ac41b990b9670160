//! `steward send` and `steward chat`: the owner talking to the assistant.

use super::output::out;
use std::collections::HashSet;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use steward_events::{EventId, Urgency};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{Context, EX_TEMPFAIL};
use steward_events::StepEnd;
use steward_protocol::client::{Client, ClientError};
use steward_protocol::{ChatLine, Request, Response};

#[derive(Debug, Args)]
pub struct SendArgs {
    /// How the message interrupts work in flight
    #[arg(long, value_parser = parse_urgency)]
    urgency: Option<Urgency>,
    /// Print the assistant's replies to this message instead of its id
    #[arg(long)]
    wait: bool,
    /// With --wait: give up after this many seconds (exit 75)
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
    /// The message
    text: String,
}

fn parse_urgency(text: &str) -> Result<Urgency, String> {
    Urgency::parse(text).ok_or_else(|| "expected cancel, queue or parallel".to_owned())
}

pub async fn send(ctx: &Context, args: SendArgs) -> Result<ExitCode, ClientError> {
    let mut client = Client::connect(&ctx.socket_path()).await?;
    client
        .request(&Request::Send {
            text: args.text,
            urgency: args.urgency,
            wait: args.wait,
        })
        .await?;
    let deadline = tokio::time::sleep(Duration::from_secs(args.timeout));
    tokio::pin!(deadline);
    let mut step_failed = false;
    loop {
        let response = tokio::select! {
            response = client.next() => response?,
            () = &mut deadline, if args.wait => {
                eprintln!("steward: no end of the step after {}s; the message is stored and will be handled", args.timeout);
                return Ok(ExitCode::from(EX_TEMPFAIL));
            }
        };
        match response {
            None | Some(Response::End) if step_failed => return Ok(ExitCode::FAILURE),
            None | Some(Response::End) => return Ok(ExitCode::SUCCESS),
            Some(Response::Accepted {
                event_id,
                duplicate_of,
            }) => {
                if let Some(of) = duplicate_of {
                    eprintln!("steward: recorded as a duplicate of {of}");
                }
                if !args.wait {
                    out!("{event_id}");
                }
            }
            Some(Response::Rejected { reason, .. }) => {
                eprintln!("steward: rejected: {reason}");
                return Ok(ExitCode::FAILURE);
            }
            Some(Response::Reply { text, .. }) => out!("{text}"),
            Some(Response::Message { message }) => eprintln!("steward: {}", message.text),
            Some(Response::Action { action }) => {
                out!("action {} ({}): {}", action.id, action.tool, action.state)
            }
            Some(Response::StepEnded { outcome, .. }) => {
                report_step_end(&outcome);
                step_failed = matches!(outcome, StepEnd::Failed { .. });
            }
            Some(Response::Error { message }) => {
                eprintln!("steward: {message}");
                return Ok(ExitCode::FAILURE);
            }
            Some(_) => {}
        }
    }
}

fn report_step_end(outcome: &StepEnd) {
    match outcome {
        StepEnd::Completed => {}
        StepEnd::Cancelled { reason } => eprintln!("steward: step {reason}"),
        StepEnd::Failed { error } => eprintln!("steward: step failed: {error}"),
        StepEnd::Deferred { error } => {
            eprintln!("steward: the model is unavailable ({error}); it will be retried")
        }
    }
}

/// Sends each stdin line; prints replies and every owner message as they come. At the end
/// of input (or `/quit`), waits for the steps of the messages sent to end, then exits. When
/// the daemon goes away (a restart), it says so, keeps what is typed meanwhile, reconnects
/// every second and resumes after the last owner message it showed.
pub async fn chat(ctx: &Context) -> Result<ExitCode, ClientError> {
    use std::io::IsTerminal;
    let socket = ctx.socket_path();
    let mut client = Client::connect(&socket).await?;
    if std::io::stdin().is_terminal() {
        eprintln!(
            "steward chat — brain {}; /help lists the commands, /quit or Ctrl-D leaves",
            brain_name(&socket).await
        );
    }
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut chat = ChatState {
        input_open: true,
        ..ChatState::default()
    };
    loop {
        match chat.session(&mut client, &mut stdin).await {
            Ok(true) => return Ok(ExitCode::SUCCESS),
            Ok(false) | Err(ClientError::Io(_)) => {}
            Err(e) => return Err(e),
        }
        if chat.done() {
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!("(the daemon went away; reconnecting — what you type is kept)");
        client = chat.reconnect(&socket, &mut stdin).await?;
        eprintln!("(reconnected)");
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

type Stdin = tokio::io::Lines<BufReader<tokio::io::Stdin>>;

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
        stdin: &mut Stdin,
    ) -> Result<bool, ClientError> {
        client
            .request(&Request::Chat {
                after: self.last_seen,
            })
            .await?;
        while let Some(text) = self.unsent.pop_front() {
            client
                .write_line(&ChatLine {
                    text,
                    urgency: None,
                })
                .await?;
            self.unacknowledged += 1;
        }
        // The daemon first shows what waited for the owner, then says `end`.
        let mut caught_up = false;
        loop {
            if caught_up && self.done() {
                return Ok(true);
            }
            tokio::select! {
                line = stdin.next_line(), if self.input_open => match line? {
                    Some(text) if text.trim().is_empty() => {}
                    Some(text) if text.trim() == "/quit" => self.input_open = false,
                    Some(text) => {
                        client.write_line(&ChatLine { text, urgency: None }).await?;
                        self.unacknowledged += 1;
                    }
                    None => self.input_open = false,
                },
                response = client.next() => match response? {
                    None => return Ok(false),
                    Some(Response::End) => caught_up = true,
                    Some(response) => self.show(response),
                },
            }
        }
    }

    fn show(&mut self, response: Response) {
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
                eprintln!("(rejected: {reason})");
            }
            Response::Reply { text, .. } => out!("{text}"),
            Response::Message { message } => {
                self.last_seen = Some(message.id);
                out!("{}", owner_line(&message));
            }
            Response::Action { action } => {
                self.unacknowledged = self.unacknowledged.saturating_sub(1);
                out!("action {} ({}): {}", action.id, action.tool, action.state);
            }
            Response::StepEnded { events, outcome } => {
                report_step_end(&outcome);
                for id in events {
                    self.outstanding.remove(&id);
                }
            }
            Response::Error { message } => {
                self.unacknowledged = self.unacknowledged.saturating_sub(1);
                eprintln!("(error: {message})");
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
        stdin: &mut Stdin,
    ) -> Result<Client, ClientError> {
        self.unacknowledged = 0;
        self.outstanding.clear();
        loop {
            tokio::select! {
                line = stdin.next_line(), if self.input_open => match line? {
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
