//! The email channel against real servers: Dovecot (IMAP IDLE, LMTP, submission with
//! STARTTLS and AUTH) and OpenSMTPD on 127.0.0.1, started by `tests/mail/stack.sh`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward_daemon::protocol::EventRow;

use crate::mail::{self, PASSWORD, PASSWORD_ENV};
use crate::scripted_model::{ScriptedModel, sse};
use crate::support::{TestDaemon, stdout};

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let object = json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    format!("data: {object}\n\ndata: [DONE]\n\n")
}

fn says(text: &str) -> String {
    sse(&[
        chunk(json!({"role": "assistant", "content": text}), None),
        chunk(json!({}), Some("stop")),
    ]
    .concat()
    .replace("data: [DONE]\n\ndata:", "data:"))
}

fn calls(tool: &str, args: Value) -> String {
    sse(&chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}),
        Some("tool_calls"),
    ))
}

fn model_config(port: u16) -> String {
    format!(
        "[model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"scripted\"\ntimeout_secs = 10\n"
    )
}

fn start(config: &str) -> TestDaemon {
    mail::stack();
    TestDaemon::start_with_env(config, &[(PASSWORD_ENV, PASSWORD)])
}

fn email_events(events: &[EventRow]) -> Vec<&EventRow> {
    events.iter().filter(|e| e.channel.starts_with("email:")).collect()
}

async fn wait_for_email_events(daemon: &TestDaemon, n: usize) -> Vec<EventRow> {
    let events = daemon
        .wait_for_events(&format!("{n} email events"), |events| {
            email_events(events).len() >= n
        })
        .await;
    events.into_iter().filter(|e| e.channel.starts_with("email:")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_mail_wakes_the_actor_and_the_answer_comes_back_in_the_thread() {
    let model = ScriptedModel::start(vec![says("Lunch is at noon, in the garden.")], 64);
    let (assistant, owner) = (mail::address("steward"), mail::address("owner"));
    let daemon = start(&(model_config(model.port) + &mail::config(&assistant, &owner, "")));
    daemon
        .wait_for_status("the email channel idle", |s| {
            s.channels.iter().any(|c| c.name == "email" && c.state == "idle")
        })
        .await;

    let raw = mail::message(&owner, &assistant, "Lunch?", "When is lunch today?", "", true);
    let sent_at = Instant::now();
    mail::deliver(&owner, &assistant, raw.as_bytes()).await;
    let events = wait_for_email_events(&daemon, 1).await;
    eprintln!("SMTP accepted -> event: {:?}", sent_at.elapsed());
    let event = &events[0];
    assert_eq!(event.trust, steward_events::Trust::Owner, "{event:?}");
    assert!(event.text.contains("When is lunch today?"), "{}", event.text);

    let replies = mail::wait_for_messages(&owner, "INBOX", "the answer", |m| !m.is_empty()).await;
    assert_eq!(replies.len(), 1);
    let reply = &replies[0];
    let original_id = mail::message_id_of(&raw);
    assert_eq!(mail::header(reply, "Subject").as_deref(), Some("Re: Lunch?"));
    assert_eq!(mail::header(reply, "In-Reply-To"), Some(format!("<{original_id}>")));
    assert!(mail::header(reply, "References").unwrap().contains(&original_id));
    assert!(mail::header(reply, "From").unwrap().contains(&assistant));
    assert!(reply.contains("Lunch is at noon, in the garden."), "{reply}");
    let filed = mail::wait_for_messages(&assistant, "Sent", "the Sent copy", |m| !m.is_empty()).await;
    assert_eq!(mail::header(&filed[0], "Message-ID"), mail::header(reply, "Message-ID"));
    // The model read the mail as the owner's words.
    let request = &model.requests()[0];
    assert!(request.to_string().contains("When is lunch today?"));
}
