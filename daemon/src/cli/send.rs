//! `steward send`: one message from the owner, and with `--wait` what became of it.

use super::output::out;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use steward_events::Urgency;

use super::{Context, EX_TEMPFAIL};
use steward_events::StepEnd;
use steward_protocol::client::{Client, ClientError};
use steward_protocol::{Request, Response};

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
    if let Some(note) = step_note(outcome) {
        eprintln!("{note}");
    }
}

/// What the end of a step means to the owner (nothing when it completed).
pub(super) fn step_note(outcome: &StepEnd) -> Option<String> {
    match outcome {
        StepEnd::Completed => None,
        StepEnd::Cancelled { reason } => Some(format!("steward: step {reason}")),
        StepEnd::Failed { error } => Some(format!("steward: step failed: {error}")),
        StepEnd::Deferred { error } => Some(format!(
            "steward: the model is unavailable ({error}); it will be retried"
        )),
        StepEnd::OverBudget { reason } => Some(format!(
            "steward: model work waits: {reason}; it runs when the budget allows"
        )),
    }
}
