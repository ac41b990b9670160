//! The brain used when no model is configured. It still gives the owner a working daemon:
//! slash commands run through the same tool pipeline as a model's calls would, and plain
//! text gets a short answer saying what is missing instead of silence.
//!
//! Commands: `/help`, `/status`, `/tool NAME {json-args}` (arguments default to `{}`).
//! A scheduled job's text is a reminder: it is said to the owner as it was written
//! (`Reminder (tea): make tea`), so a job set without a model still reaches its owner; a
//! job with an `action` says nothing more than its call's outcome.
//! Plain text sent together (a burst merged into one step) gets one such answer, replying
//! to all of it: the same sentence a hundred times over told the owner nothing more.
//! Events from side lanes and the daemon's own notices get no answer: nobody waits on
//! them. Nor does anything the owner did not send (a webhook delivery, a file change, mail
//! from someone else): "no model is configured" told to the owner for each of them was
//! noise (thousands of messages under a burst of webhooks), and text from outside is never
//! read as a command.

use std::sync::Arc;

use serde_json::Value;
use steward_events::{Event, EventId, Source, ToolCallRequest, ToolOutcome, ToolStatus, Trust};

use super::{AssistantMessage, Brain, BrainFuture, BrainInput, BrainTurn, new_call_id};
use crate::status::StatusBoard;

const NO_MODEL_REPLY: &str = "No model is configured ([model] provider = \"none\"), so I can only run commands. Send /help to see them.";

const HELP: &str = "Commands:\n  /help                 this text\n  /status               what the daemon is doing\n  /tool NAME {json}     run a tool, e.g. /tool echo {\"text\":\"hi\"} or /tool sleep {\"secs\":5}\nConfigure [model] in the config file to talk to an LLM.";

#[derive(Debug)]
pub struct NoneBrain {
    status: Arc<StatusBoard>,
}

impl NoneBrain {
    pub fn new(status: Arc<StatusBoard>) -> Self {
        Self { status }
    }

    /// Answers one event; plain text is only noted in `plain` (answered once per turn).
    fn answer(&self, event: &Event, turn: &mut BrainTurn, plain: &mut Vec<EventId>) {
        if matches!(event.source, Source::Lane | Source::System)
            || event.payload.direct_call().is_some()
        {
            // Summaries and notices: nobody waits for an answer. Direct tool calls (a
            // job's action too) were run before this turn, and their outcome told.
            return;
        }
        let text = event.payload.text().trim();
        let reply = |text: String| AssistantMessage {
            text,
            reply_to: vec![event.id],
            canned: true,
        };
        if event.source == Source::Timer {
            let job = event
                .channel
                .strip_prefix("cron:")
                .unwrap_or(&event.channel);
            turn.messages
                .push(reply(format!("Reminder ({job}): {text}")));
            return;
        }
        if event.trust != Trust::Owner {
            return;
        }
        let command = text.split_whitespace().next().unwrap_or("");
        match command {
            "/help" => turn.messages.push(reply(HELP.to_owned())),
            "/status" => turn.messages.push(reply(self.status.summary())),
            "/tool" => match parse_tool_command(text) {
                Ok((tool, args)) => turn.tool_calls.push(ToolCallRequest {
                    call_id: new_call_id(),
                    tool,
                    args,
                    origin: Some(event.id),
                }),
                Err(problem) => turn.messages.push(reply(problem)),
            },
            c if c.starts_with('/') => turn.messages.push(reply(format!(
                "Unknown command {c}. Send /help to see the commands."
            ))),
            _ => plain.push(event.id),
        }
    }
}

impl Brain for NoneBrain {
    fn name(&self) -> &'static str {
        "none"
    }

    fn history_items(&self) -> usize {
        0
    }

    fn respond<'a>(&'a self, input: BrainInput<'a>) -> BrainFuture<'a> {
        Box::pin(async move {
            let mut turn = BrainTurn {
                messages: input
                    .last_round
                    .iter()
                    .map(|(call, outcome)| AssistantMessage {
                        text: describe_outcome(&call.tool, outcome),
                        reply_to: call.origin.into_iter().collect(),
                        canned: true,
                    })
                    .collect(),
                tool_calls: Vec::new(),
                usage: None,
            };
            if input.round == 0 {
                let mut plain = Vec::new();
                for event in input.events {
                    self.answer(event, &mut turn, &mut plain);
                }
                if !plain.is_empty() {
                    turn.messages.push(AssistantMessage {
                        text: NO_MODEL_REPLY.to_owned(),
                        reply_to: plain,
                        canned: true,
                    });
                }
            }
            Ok(turn)
        })
    }
}

/// `/tool NAME {json}` → (NAME, args). The arguments are passed on exactly as written.
fn parse_tool_command(text: &str) -> Result<(String, Value), String> {
    let rest = text.strip_prefix("/tool").unwrap_or(text).trim_start();
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if name.is_empty() {
        return Err("Usage: /tool NAME {json-args}".to_owned());
    }
    let args = args.trim();
    let args = if args.is_empty() {
        Value::Object(Default::default())
    } else {
        serde_json::from_str(args)
            .map_err(|e| format!("The arguments for `{name}` are not valid JSON: {e}"))?
    };
    Ok((name.to_owned(), args))
}

fn describe_outcome(tool: &str, outcome: &ToolOutcome) -> String {
    let text = describe_status(tool, outcome);
    match &outcome.hint {
        Some(hint) => format!("{text}\n(hint: {hint})"),
        None => text,
    }
}

fn describe_status(tool: &str, outcome: &ToolOutcome) -> String {
    let content = outcome.content_text();
    match outcome.status {
        ToolStatus::Ok => format!("{tool}: {content}"),
        ToolStatus::Error => format!("{tool} failed: {content}"),
        ToolStatus::Cancelled => format!("{tool} was cancelled: {content}"),
        ToolStatus::Pending => format!("{tool} needs your confirmation: {content}"),
        ToolStatus::Denied => format!("{tool} was denied: {content}"),
        ToolStatus::Blocked => format!("{tool} was blocked: {content}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use steward_events::{Payload, Sender, TrajectoryId};

    fn owner_says(text: &str) -> Event {
        Event::new(
            Source::User,
            "user:socket",
            Sender {
                identity: "owner".into(),
                authenticated_by: "socket".into(),
            },
            Trust::Owner,
            Payload::Message { text: text.into() },
        )
    }

    #[tokio::test]
    async fn a_burst_of_plain_text_gets_one_answer_and_each_command_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&dir.path().join("db")).unwrap();
        let inbox = Arc::new(
            crate::store::Inbox::open(store, 16, std::time::Duration::from_secs(60)).unwrap(),
        );
        let brain = NoneBrain::new(Arc::new(StatusBoard::new(dir.path().to_owned(), inbox)));
        let events = [
            owner_says("hello"),
            owner_says("/help"),
            owner_says("are you there?"),
            owner_says("/nope"),
        ];
        let turn = brain
            .respond(BrainInput {
                trajectory: &TrajectoryId::main(),
                step: 1,
                events: &events,
                history: &[],
                last_round: &[],
                round: 0,
                tools: &Arc::default(),
                skills: "",
                zone: crate::zone::Zone::UTC,
                on_text: None,
            })
            .await
            .unwrap();
        let answers: Vec<(&str, Vec<EventId>)> = turn
            .messages
            .iter()
            .map(|m| (m.text.as_str(), m.reply_to.clone()))
            .collect();
        assert_eq!(answers.len(), 3, "{answers:?}");
        assert_eq!(answers[0], (HELP, vec![events[1].id]));
        assert!(
            answers[1].0.starts_with("Unknown command /nope"),
            "{answers:?}"
        );
        assert_eq!(
            answers[2],
            (NO_MODEL_REPLY, vec![events[0].id, events[2].id]),
            "the plain text is answered once, replying to both messages"
        );
    }

    #[test]
    fn tool_commands_parse_or_explain() {
        type Expected = Result<(&'static str, Value), &'static str>;
        let table: &[(&str, Expected)] = &[
            (
                "/tool echo {\"text\":\"hi\"}",
                Ok(("echo", json!({"text": "hi"}))),
            ),
            (
                "/tool sleep   {\"secs\": 1}",
                Ok(("sleep", json!({"secs": 1}))),
            ),
            ("/tool status", Ok(("status", json!({})))),
            ("/tool", Err("Usage")),
            ("/tool echo {text}", Err("not valid JSON")),
        ];
        for (text, expected) in table {
            match (parse_tool_command(text), expected) {
                (Ok((name, args)), Ok((n, a))) => {
                    assert_eq!((name.as_str(), &args), (*n, a), "{text}");
                }
                (Err(message), Err(hint)) => assert!(message.contains(hint), "{text}: {message}"),
                (got, _) => panic!("{text}: unexpected {got:?}"),
            }
        }
    }
}
