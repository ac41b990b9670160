//! The real daemon driven through a scripted model server speaking OpenAI's Chat Completions
//! streaming protocol as documented (SSE `chat.completion.chunk` objects, `tool_calls`
//! deltas keyed by `index` whose `arguments` arrive in fragments, a usage chunk,
//! `data: [DONE]`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::scripted_model::{ScriptedModel, json_message, sse};
use crate::support::{TestDaemon, stdout};

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let object = json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    format!("data: {object}\n\n")
}

fn usage_and_done() -> String {
    let usage = json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
        "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    });
    format!("data: {usage}\n\ndata: [DONE]\n\n")
}

/// An answer that streams `first`, then holds the stream (past the daemon's 10 s model
/// timeout, so the call is tried again), then would send `rest`.
pub(crate) fn text_held_after(first: &str, rest: &str) -> String {
    sse(&[
        chunk(json!({"role": "assistant", "content": first}), None),
        "<<PAUSE>>".to_owned(),
        chunk(json!({"content": rest}), None),
        chunk(json!({}), Some("stop")),
        usage_and_done(),
    ]
    .concat())
}

pub(crate) fn config(port: u16) -> String {
    format!(
        "[model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"scripted\"\ntimeout_secs = 10\n"
    )
}

/// A server that ignores `"stream": true` and answers with one `chat.completion`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_chat_completion_instead_of_a_stream_is_an_answer() {
    let completion = |message: Value, finish: &str| {
        json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}})
    };
    let scripts = vec![
        json_message(&completion(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": "{\"text\":\"Привет\"}"}}]}),
            "tool_calls",
        )),
        json_message(&completion(
            json!({"role": "assistant", "content": "It said Привет."}),
            "stop",
        )),
    ];
    let model = ScriptedModel::start(scripts, 3);
    let daemon = TestDaemon::start_with(&config(model.port));
    let output = daemon.cli(&["send", "--wait", "echo something"]);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains("It said Привет."), "{output:?}");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let tool_message = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert_eq!(tool_message["tool_call_id"], "call_1");
    assert!(tool_message["content"].to_string().contains("Привет"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_reads_and_greps_in_one_response_then_answers() {
    let calls = [
        chunk(json!({"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": "call_a", "type": "function", "function": {"name": "fs_read", "arguments": ""}}]}), None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]}), None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "th\":\"notes.txt\"}"}}]}), None),
        chunk(json!({"tool_calls": [
            {"index": 1, "id": "call_b", "type": "function", "function": {"name": "fs_grep", "arguments": "{\"pattern\":\"caf"}}]}), None),
        chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": "é\"}"}}]}), None),
        chunk(json!({}), Some("tool_calls")),
        usage_and_done(),
    ]
    .concat();
    let answer = [
        chunk(json!({"role": "assistant", "content": "Found it: "}), None),
        chunk(json!({"content": "un café."}), None),
        chunk(json!({}), Some("stop")),
        usage_and_done(),
    ]
    .concat();
    // 7-byte writes: the stream splits inside JSON strings and inside "é".
    let model = ScriptedModel::start(vec![sse(&calls), sse(&answer)], 7);
    let daemon = TestDaemon::start_with(&config(model.port));
    std::fs::write(daemon.path().join("workspace/notes.txt"), "un café\n").unwrap();

    let output = daemon.cli(&["send", "--wait", "what is in my notes?"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output).trim(), "Found it: un café.");

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    // The stable prefix: system text and tools are byte-identical across the turn.
    assert_eq!(requests[0]["messages"][0], requests[1]["messages"][0]);
    assert_eq!(
        requests[0]["tools"].to_string(),
        requests[1]["tools"].to_string()
    );
    assert_eq!(requests[0]["stream"], true);
    // The second request carries both results, after the assistant's two calls.
    let messages = requests[1]["messages"].as_array().unwrap();
    let tool_messages: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 2, "{messages:#?}");
    assert_eq!(tool_messages[0]["tool_call_id"], "call_a");
    assert!(
        tool_messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("un café"),
        "{:?}",
        tool_messages[0]
    );
    assert!(
        tool_messages[1]["content"]
            .as_str()
            .unwrap()
            .contains("notes.txt:1:un café"),
        "{:?}",
        tool_messages[1]
    );
    let user = &messages[1]["content"];
    assert!(
        user.as_str().unwrap().contains("what is in my notes?"),
        "{user}"
    );

    // Usage from both calls is counted in the status.
    let status = daemon.status().await;
    assert_eq!(
        (status.tokens_total.input, status.tokens_total.output),
        (200, 40),
        "{status:?}"
    );
    assert_eq!(status.tokens_last_call.input, 100);
    // The step made both calls.
    assert_eq!(
        (
            status.tokens_last_step.input,
            status.tokens_last_step.output
        ),
        (200, 40)
    );
    assert!(status.tokens_last_step_number >= 1);

    // Both calls were made in one response and ran as one batch.
    let items = daemon.trajectory().await;
    let kinds: Vec<&str> = items.iter().map(|i| i.kind.name()).collect();
    let first_call = kinds.iter().position(|k| *k == "tool_call").unwrap();
    assert_eq!(
        &kinds[first_call..first_call + 4],
        ["tool_call", "tool_call", "tool_result", "tool_result"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_model_loses_nothing_and_the_turn_completes_when_it_recovers() {
    let answer = [
        chunk(json!({"role": "assistant", "content": "Back again."}), None),
        chunk(json!({}), Some("stop")),
        usage_and_done(),
    ]
    .concat();
    let scripts = vec![
        "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
        "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\noops".to_owned(),
        // The connection drops in the middle of a chunk.
        sse("data: {\"id\":\"chatcmpl-1\",\"obj"),
        sse("data: {this is not json}\n\n"),
        sse(&answer),
    ];
    let model = ScriptedModel::start(scripts, 64);
    let daemon = TestDaemon::start_with(&config(model.port));
    let output = daemon.cli(&["send", "--wait", "--timeout", "60", "hello?"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output).trim(), "Back again.");
    // The wait is not silent: the owner hears that the model is unavailable and the event
    // waits — and a deferred step is not reported as an ending.
    let said = crate::support::stderr(&output);
    assert!(
        said.contains("The model is unavailable") && said.contains("1 event waits"),
        "{output:?}"
    );
    assert!(!said.contains("step"), "{output:?}");
    assert_eq!(
        model.requests().len(),
        5,
        "3 attempts, then the deferred step's 2"
    );

    let items = daemon.trajectory().await;
    let deferred = items.iter().any(|i| {
        matches!(&i.kind, steward_events::ItemKind::StepCancelled { reason, .. } if reason.contains("model is unavailable"))
    });
    assert!(deferred, "{items:#?}");
    let merged = crate::support::merged_ids(&items);
    assert_eq!(
        merged.len(),
        1,
        "the message was merged once and answered by the retried step"
    );
    let status = daemon.status().await;
    assert_eq!(
        status.brain_state,
        steward_protocol::BrainState::Ok,
        "{status:?}"
    );
}

/// The owner is told the events "will be answered when it is back": what arrives while
/// the step waits joins it, and a restart while it waits must keep that promise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_put_off_for_the_model_runs_again_after_a_restart() {
    let failure =
        "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\noops";
    let scripts = vec![
        failure.to_owned(),
        failure.to_owned(),
        failure.to_owned(),
        text_answer("Answered after the restart."),
    ];
    let model = ScriptedModel::start(scripts, 64);
    let mut daemon = TestDaemon::start_with(&config(model.port));
    let id = daemon.send("remind me to call Ada", None).await;
    daemon
        .wait_for_trajectory("the step put off", |items| {
            items.iter().any(|i| {
                matches!(
                    &i.kind,
                    steward_events::ItemKind::StepCancelled {
                        runs_again: true,
                        ..
                    }
                )
            })
        })
        .await;
    // What arrives while the step waits joins it at once, without waiting for its retry.
    let later = daemon.send("and to buy milk", None).await;
    daemon
        .wait_for_trajectory("the second message merged into the waiting step", |items| {
            crate::support::merged_ids(items) == vec![id, later]
        })
        .await;
    // Stopped before the deferred step's own retry (2 s after it was put off).
    assert!(daemon.terminate().success());
    assert_eq!(model.requests().len(), 3, "the retry came before the stop");

    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);
    let items = daemon
        .wait_for_trajectory("the put-off step answered", |items| {
            items.iter().any(|i| {
                matches!(&i.kind, steward_events::ItemKind::Assistant { text, .. } if text == "Answered after the restart.")
            })
        })
        .await;
    assert_eq!(
        crate::support::merged_ids(&items),
        vec![id, later],
        "each event was merged once"
    );
    assert_eq!(model.requests().len(), 4, "one answer for both");
    let last_step_events = items.iter().rev().find_map(|i| match &i.kind {
        steward_events::ItemKind::StepStarted { events } => Some(events.clone()),
        _ => None,
    });
    assert_eq!(last_step_events, Some(vec![id, later]));
}

pub(crate) fn text_answer(text: &str) -> String {
    sse(&[
        chunk(json!({"role": "assistant", "content": text}), None),
        chunk(json!({}), Some("stop")),
        usage_and_done(),
    ]
    .concat())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_drops_a_slow_stream_and_the_next_step_starts() {
    let slow = sse(&format!(
        "{}<<PAUSE>>{}",
        chunk(json!({"role": "assistant", "content": "Thinking"}), None),
        usage_and_done()
    ));
    let model = ScriptedModel::start(vec![slow, text_answer("Stopped.")], 4096);
    let daemon = TestDaemon::start_with(&config(model.port));
    daemon.send("write me a long essay", None).await;
    model.wait_for_requests(1);
    let started = std::time::Instant::now();
    let cancel = daemon
        .send("stop", Some(steward_events::Urgency::Cancel))
        .await;
    let items = daemon
        .wait_for_trajectory("the cancelled step and the next answer", |items| {
            items.iter().any(|i| i.kind.name() == "step_cancelled")
                && items.iter().any(|i| matches!(&i.kind, steward_events::ItemKind::Assistant { text, .. } if text == "Stopped."))
        })
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the slow stream was not abandoned"
    );
    let cancelled = items
        .iter()
        .find(|i| i.kind.name() == "step_cancelled")
        .unwrap();
    assert!(
        matches!(&cancelled.kind, steward_events::ItemKind::StepCancelled { by: Some(id), .. } if *id == cancel)
    );
    assert_eq!(model.requests().len(), 2);
    assert!(model.requests()[1]["messages"].to_string().contains("stop"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmed_action_reaches_the_model_and_the_prefix_never_changes() {
    let server = crate::http::Recorder::start(Duration::ZERO);
    let post = sse(&[
        chunk(json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_p", "type": "function",
            "function": {"name": "http_request", "arguments": json!({"method": "POST", "url": format!("http://127.0.0.1:{}/order", server.port), "body": "tea"}).to_string()}}]}), None),
        chunk(json!({}), Some("tool_calls")),
        usage_and_done(),
    ]
    .concat());
    let model = ScriptedModel::start(
        vec![
            post,
            text_answer("Waiting for your confirmation."),
            text_answer("Ordered."),
        ],
        64,
    );
    let daemon = TestDaemon::start_with(&format!(
        "{}[tools.http]\nallow_hosts = [\"127.0.0.1\"]\n",
        config(model.port)
    ));
    let output = daemon.cli(&["send", "--wait", "order tea"]);
    assert_eq!(
        stdout(&output).trim(),
        "Waiting for your confirmation.",
        "{output:?}"
    );
    let second = &model.requests()[1]["messages"];
    assert!(
        second.to_string().contains("pending_id"),
        "the model saw the pending result: {second}"
    );
    assert_eq!(
        server.seen().len(),
        0,
        "nothing sent before the owner answers"
    );

    let rows = stdout(&daemon.cli(&["pending", "--json"]));
    let id = serde_json::from_str::<Value>(rows.lines().next().unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(daemon.cli(&["confirm", &id]).status.success());
    assert_eq!(server.seen().len(), 1);
    model.wait_for_requests(3);
    let third = model.requests()[2].clone();
    assert!(
        third["messages"].to_string().contains("approved action"),
        "the confirmation's result reaches the model: {third}"
    );
    // Across steps and turns the prefix (system text + tools) is byte-identical.
    let requests = model.requests();
    for request in &requests[1..] {
        assert_eq!(request["messages"][0], requests[0]["messages"][0]);
        assert_eq!(
            request["tools"].to_string(),
            requests[0]["tools"].to_string()
        );
    }
}

pub(crate) fn one_call(id: &str, tool: &str, args: Value) -> String {
    sse(&[
        chunk(json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": tool, "arguments": args.to_string()}}]}), None),
        chunk(json!({}), Some("tool_calls")),
        usage_and_done(),
    ]
    .concat())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_finds_a_deferred_tool_and_calls_it_without_the_prefix_changing() {
    let files = tempfile::tempdir().unwrap();
    let model = ScriptedModel::start(
        vec![
            one_call(
                "call_s",
                "tool_search",
                json!({"query": "dictionary definition of a word"}),
            ),
            one_call("call_l", "notes_lookup", json!({"word": "tea"})),
            text_answer("Tea: a word."),
        ],
        64,
    );
    // Threshold 0: the MCP server's tools are always deferred.
    let daemon = TestDaemon::start_with(&format!(
        "{}[tools]\ndefer_threshold_pct = 0\n{}",
        config(model.port),
        crate::mcp::stdio_server(files.path())
    ));
    let output = daemon.cli(&["send", "--wait", "what does tea mean?"]);
    assert_eq!(stdout(&output).trim(), "Tea: a word.", "{output:?}");

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let tool_names: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tool_names.contains(&"tool_search") && tool_names.contains(&"call_tool"));
    assert!(
        !tool_names.iter().any(|n| n.starts_with("notes_")),
        "{tool_names:?}"
    );
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("notes_lookup"),
        "deferred tools are named: {system}"
    );

    // The search result carries the full schema; the model then called the tool by name.
    let found = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        found.contains("notes_lookup") && found.contains("The word to define"),
        "{found}"
    );
    let result = requests[2]["messages"].to_string();
    assert!(result.contains("definition of tea"), "{result}");

    // Byte-identical prefix on every step, before and after the tool was loaded.
    let raw = model.raw_bodies();
    let prefix = |body: &str| {
        let value: Value = serde_json::from_str(body).unwrap();
        (value["messages"][0].to_string(), value["tools"].to_string())
    };
    for body in &raw[1..] {
        assert_eq!(prefix(body), prefix(&raw[0]));
    }
}
