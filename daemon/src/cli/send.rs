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

/// Sends each stdin line; prints replies as they come. At the end of input, waits for the
/// steps of the messages sent to end, then exits.
pub async fn chat(ctx: &Context) -> Result<ExitCode, ClientError> {
    let mut client = Client::connect(&ctx.socket_path()).await?;
    client.request(&Request::Chat { after: None }).await?;
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut input_open = true;
    let mut outstanding: HashSet<EventId> = HashSet::new();
    let mut unacknowledged = 0usize;
    // The daemon first shows what waited for the owner, then says `end`.
    let mut caught_up = false;
    loop {
        if caught_up && !input_open && outstanding.is_empty() && unacknowledged == 0 {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::select! {
            line = stdin.next_line(), if input_open => match line? {
                Some(text) if text.trim().is_empty() => {}
                Some(text) => {
                    client.write_line(&ChatLine { text, urgency: None }).await?;
                    unacknowledged += 1;
                }
                None => input_open = false,
            },
            response = client.next() => match response? {
                None => return Ok(ExitCode::SUCCESS),
                Some(Response::Accepted { event_id, duplicate_of }) => {
                    unacknowledged = unacknowledged.saturating_sub(1);
                    if duplicate_of.is_none() {
                        outstanding.insert(event_id);
                    }
                }
                Some(Response::Rejected { reason, .. }) => {
                    unacknowledged = unacknowledged.saturating_sub(1);
                    eprintln!("(rejected: {reason})");
                }
                Some(Response::Reply { text, .. }) => out!("{text}"),
                Some(Response::Message { message }) => out!("{}", owner_line(&message)),
                Some(Response::End) => caught_up = true,
                Some(Response::Action { action }) => {
                    unacknowledged = unacknowledged.saturating_sub(1);
                    out!("action {} ({}): {}", action.id, action.tool, action.state);
                }
                Some(Response::StepEnded { events, outcome }) => {
                    report_step_end(&outcome);
                    for id in events {
                        outstanding.remove(&id);
                    }
                }
                Some(Response::Error { message }) => {
                    unacknowledged = unacknowledged.saturating_sub(1);
                    eprintln!("(error: {message})");
                }
                Some(_) => {}
            },
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
