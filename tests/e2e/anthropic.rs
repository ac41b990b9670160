//! The real daemon driven through a scripted server speaking Anthropic's Messages streaming
//! protocol as documented: named SSE events `message_start`, `content_block_start` (text or
//! `tool_use`), `content_block_delta` (`text_delta`, `input_json_delta` with `partial_json`
//! fragments), `content_block_stop`, `message_delta`, `message_stop`, `ping`, `error`.

use serde_json::{Value, json};

use crate::scripted_model::{ScriptedModel, json_message, sse};
use crate::support::{TestDaemon, stderr, stdout};

fn event(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

fn message_start(input_tokens: u64, cache_read: u64) -> String {
    event(json!({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-scripted",
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": cache_read, "output_tokens": 1}}}))
}

fn text_block(index: u64, pieces: &[&str]) -> String {
    let mut out = event(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "text", "text": ""}}));
    for piece in pieces {
        out.push_str(&event(
            json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    out.push_str(&event(
        json!({"type": "content_block_stop", "index": index}),
    ));
    out
}

fn tool_use_block(index: u64, id: &str, name: &str, fragments: &[&str]) -> String {
    let mut out = event(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
    for fragment in fragments {
        out.push_str(&event(
            json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": fragment}}),
        ));
    }
    out.push_str(&event(
        json!({"type": "content_block_stop", "index": index}),
    ));
    out
}

fn message_end(stop_reason: &str, output_tokens: u64) -> String {
    event(json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": output_tokens}}))
        + event(json!({"type": "message_stop"})).as_str()
}

fn text_answer(text: &str) -> String {
    sse(&[
        message_start(0, 0),
        text_block(0, &[text]),
        message_end("end_turn", 5),
    ]
    .concat())
}

fn config(port: u16) -> String {
    format!(
        "[model]\nprovider = \"anthropic\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"claude-scripted\"\napi_key_env = \"STEWARD_TEST_ANTHROPIC_KEY\"\ntimeout_secs = 10\n"
    )
}

fn start(model: &ScriptedModel, extra: &str) -> TestDaemon {
    TestDaemon::start_with_env(
        &format!("{}{extra}", config(model.port)),
        &[("STEWARD_TEST_ANTHROPIC_KEY", "sk-ant-test")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_reads_and_greps_in_one_message_then_answers() {
    let calls = sse(&[
        message_start(1200, 1000),
        event(json!({"type": "ping"})),
        text_block(0, &["Let me ", "look."]),
        tool_use_block(1, "toolu_a", "fs_read", &["{\"pa", "th\": \"notes.txt\"}"]),
        tool_use_block(2, "toolu_b", "fs_grep", &["{\"pattern\": \"caf", "é\"}"]),
        message_end("tool_use", 40),
    ]
    .concat());
    let answer = sse(&[
        message_start(1500, 1200),
        text_block(0, &["Found it: ", "un café."]),
        message_end("end_turn", 10),
    ]
    .concat());
    // 7-byte writes: the stream splits inside event names, JSON strings and "é".
    let model = ScriptedModel::start(vec![calls, answer], 7);
    let daemon = start(&model, "");
    std::fs::write(daemon.path().join("workspace/notes.txt"), "un café\n").unwrap();

    let output = daemon.cli(&["send", "--wait", "what is in my notes?"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output).trim(), "Let me look.\nFound it: un café.");

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let (path, key) = model.header(0, "x-api-key");
    assert_eq!(
        (path.as_str(), key.as_deref()),
        ("/v1/messages", Some("sk-ant-test"))
    );
    assert_eq!(
        model.header(0, "anthropic-version").1.unwrap(),
        "2023-06-01"
    );
    let first = &requests[0];
    assert_eq!(first["stream"], true);
    assert_eq!(first["model"], "claude-scripted");
    assert_eq!(first["max_tokens"], 4096);
    assert_eq!(
        first["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    let tool_names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tool_names.contains(&"fs_grep"), "{tool_names:?}");
    assert!(first["tools"][0]["input_schema"].is_object());
    // The stable prefix: system and tools are byte-identical across the turn.
    for key in ["system", "tools"] {
        assert_eq!(
            requests[1][key].to_string(),
            first[key].to_string(),
            "{key}"
        );
    }
    // The second request: the assistant's text and both tool_use blocks, then one user
    // message with both tool_result blocks in call order.
    let messages = requests[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:#?}");
    let assistant = &messages[1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0]["text"], "Let me look.");
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    assert_eq!(
        assistant["content"][1]["input"],
        json!({"path": "notes.txt"})
    );
    assert_eq!(assistant["content"][2]["input"], json!({"pattern": "café"}));
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(results[0]["tool_use_id"], "toolu_a");
    assert!(results[0]["content"].as_str().unwrap().contains("un café"));
    assert_eq!(results[1]["tool_use_id"], "toolu_b");
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .contains("notes.txt:1:un café")
    );
    assert_eq!(results[1]["is_error"], false);
    // The conversation's last block is a cache breakpoint too.
    assert_eq!(results[1]["cache_control"], json!({"type": "ephemeral"}));

    // Usage: input counts the cached part too.
    let status = daemon.status().await;
    assert_eq!(
        (
            status.tokens_total.input,
            status.tokens_total.cached_input,
            status.tokens_total.output
        ),
        (2200 + 2700, 2200, 50),
        "{status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_errors_and_cut_streams_lose_nothing() {
    let scripts = vec![
        "HTTP/1.1 529 Overloaded\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
        // An error event inside a 200 stream.
        sse(&[
            message_start(10, 0),
            event(
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ),
        ]
        .concat()),
        // The stream is cut before message_stop.
        sse(&[message_start(10, 0), text_block(0, &["half an ans"])].concat()),
        "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned(),
        text_answer("Here I am."),
    ];
    let model = ScriptedModel::start(scripts, 64);
    let daemon = start(&model, "");
    let output = daemon.cli(&["send", "--wait", "--timeout", "60", "hello?"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output).trim(), "Here I am.");
    assert_eq!(model.requests().len(), 5);
    let items = daemon.trajectory().await;
    assert_eq!(crate::support::merged_ids(&items).len(), 1);
    let answers = items
        .iter()
        .filter(|i| i.kind.name() == "assistant")
        .count();
    assert_eq!(answers, 1, "the cut answer was never recorded: {items:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_request_is_a_clear_error_not_a_retry_loop() {
    let body =
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
    let scripts = vec![format!(
        "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )];
    let model = ScriptedModel::start(scripts, 4096);
    let daemon = start(&model, "");
    let output = daemon.cli(&["send", "--wait", "hello?"]);
    assert!(!output.status.success(), "{output:?}");
    let message = stderr(&output);
    assert!(
        message.contains("rejected") && message.contains("invalid x-api-key"),
        "{message}"
    );
    assert_eq!(model.requests().len(), 1, "a 401 is not retried");
}

/// A server that answers the streaming request with the whole message as JSON (LiteLLM's
/// Anthropic mock does): the answer is taken as it is, with its tool call, not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_json_message_instead_of_a_stream_is_an_answer() {
    let message = |content: Value, stop: &str| {
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-scripted",
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 3}})
    };
    let scripts = vec![
        json_message(&message(
            json!([{"type": "text", "text": "Echoing."},
                   {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "grüße"}}]),
            "tool_use",
        )),
        json_message(&message(
            json!([{"type": "text", "text": "It said grüße."}]),
            "end_turn",
        )),
    ];
    let model = ScriptedModel::start(scripts, 5);
    let daemon = start(&model, "");
    let output = daemon.cli(&["send", "--wait", "--timeout", "60", "echo something"]);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains("It said grüße."), "{output:?}");
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "neither answer was retried");
    assert_eq!(requests[0]["stream"], true);
    let sent = requests[1]["messages"].to_string();
    assert!(sent.contains("toolu_1") && sent.contains("grüße"), "{sent}");
}

/// A 200 that is neither a stream nor JSON (an HTML page from a proxy): a clear, final
/// error that names what came back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_is_neither_a_stream_nor_json_says_what_it_was() {
    let page = "<html><body>Welcome to nginx!</body></html>";
    let scripts = vec![format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
        page.len()
    )];
    let model = ScriptedModel::start(scripts, 4096);
    let daemon = start(&model, "");
    let output = daemon.cli(&["send", "--wait", "hello?"]);
    assert!(!output.status.success(), "{output:?}");
    let message = stderr(&output);
    assert!(
        message.contains("received text/html") && message.contains("Welcome to nginx"),
        "{message}"
    );
    assert_eq!(model.requests().len(), 1, "not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runaway_tool_loop_ends_at_max_steps_per_turn() {
    let again = |n: u64| {
        sse(&[
            message_start(0, 0),
            // Other arguments each time: the loop guard would end the same call sooner.
            tool_use_block(
                0,
                &format!("toolu_{n}"),
                "echo",
                &[&format!("{{\"text\": \"again {n}\"}}")],
            ),
            message_end("tool_use", 5),
        ]
        .concat())
    };
    let model = ScriptedModel::start((0..3).map(again).collect(), 4096);
    let daemon = start(&model, "[dispatcher]\nmax_steps_per_turn = 3\n");
    let output = daemon.cli(&["send", "--wait", "loop forever"]);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout(&output).contains("after 3 model calls"),
        "{output:?}"
    );
    assert_eq!(model.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_and_invalid_arguments_come_back_as_results() {
    let calls = sse(&[
        message_start(0, 0),
        tool_use_block(0, "toolu_x", "launch_rockets", &["{}"]),
        tool_use_block(1, "toolu_y", "fs_read", &["{\"path\": 42}"]),
        message_end("tool_use", 5),
    ]
    .concat());
    let model = ScriptedModel::start(vec![calls, text_answer("Sorry.")], 4096);
    let daemon = start(&model, "");
    let output = daemon.cli(&["send", "--wait", "do something odd"]);
    assert_eq!(stdout(&output).trim(), "Sorry.", "{output:?}");
    let results = model.requests()[1]["messages"][2]["content"].clone();
    assert_eq!(results[0]["is_error"], true);
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("launch_rockets"),
        "{results}"
    );
    assert_eq!(results[1]["is_error"], true);
    assert!(
        results[1]["content"].as_str().unwrap().contains("path"),
        "{results}"
    );
}

/// Lines of recognisable filler, `bytes` long.
fn filler(word: &str, bytes: usize) -> String {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(&format!("{word}-{n:04} lorem ipsum dolor sit amet\n"));
        n += 1;
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overgrown_context_is_compacted_into_a_model_written_summary() {
    let read = |id: &str, path: &str| {
        sse(&[
            message_start(0, 0),
            tool_use_block(0, id, "fs_read", &[&json!({"path": path}).to_string()]),
            message_end("tool_use", 5),
        ]
        .concat())
    };
    let scripts = vec![
        read("toolu_1", "alpha.txt"),
        read("toolu_2", "bravo.txt"),
        // The compaction call.
        text_answer("The owner asked about two files; alpha.txt held alpha lines."),
        text_answer("Both read."),
        // After a restart, the next turn.
        text_answer("Still here."),
    ];
    let model = ScriptedModel::start(scripts, 4096);
    // A prompt budget of 6800 tokens: the prefix (system + tools, 13.8 KB ≈ 3.4k tokens)
    // and one 6 KB file (≈ 1.5k) fit; a second file pushes the estimate past 85% of it
    // (5,780). A new core tool grows the prefix: measure it again then.
    let extra = "context_window_tokens = 7800\nmax_output_tokens = 1000\n";
    let mut daemon = start(&model, extra);
    let workspace = daemon.path().join("workspace");
    std::fs::write(workspace.join("alpha.txt"), filler("alpha", 6000)).unwrap();
    std::fs::write(workspace.join("bravo.txt"), filler("bravo", 6000)).unwrap();

    let output = daemon.cli(&["send", "--wait", "read alpha.txt and bravo.txt"]);
    assert_eq!(stdout(&output).trim(), "Both read.", "{output:?}");
    let requests = model.raw_bodies();
    assert_eq!(requests.len(), 4);
    assert!(
        !requests[1].contains("Summary of the earlier"),
        "no compaction yet"
    );

    let summary_request: Value = serde_json::from_str(&requests[2]).unwrap();
    assert!(
        summary_request["system"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("You compact"),
        "{summary_request}"
    );
    assert!(summary_request.get("tools").is_none());
    let transcript = summary_request["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(transcript.contains("read alpha.txt and bravo.txt"));
    assert!(transcript.contains("alpha-0000"));

    // The call after it sees the summary instead of alpha, and bravo verbatim.
    let next: Value = serde_json::from_str(&requests[3]).unwrap();
    let first = next["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(
        first.starts_with("[Summary of the earlier conversation]\nThe owner asked"),
        "{first}"
    );
    assert!(!requests[3].contains("alpha-0000"));
    assert!(requests[3].contains("bravo-0000"));
    // The prefix did not change.
    assert_eq!(
        next["tools"].to_string(),
        serde_json::from_str::<Value>(&requests[0]).unwrap()["tools"].to_string()
    );

    // The raw items stay on disk; the summary is one more item.
    let items = daemon.trajectory().await;
    let summary = items.iter().find(|i| i.kind.name() == "summary").unwrap();
    let alpha_result = items
        .iter()
        .find(|i| matches!(&i.kind, steward_events::ItemKind::ToolResult { call_id, .. } if call_id == "toolu_1"))
        .unwrap();
    assert!(matches!(
        &summary.kind,
        steward_events::ItemKind::Summary { covers_through, .. } if *covers_through == alpha_result.seq
    ));

    // A restarted daemon starts its view at the summary too.
    assert!(daemon.terminate().success());
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon =
        TestDaemon::start_in_with_env(dir, &[("STEWARD_TEST_ANTHROPIC_KEY", "sk-ant-test")]);
    let output = daemon.cli(&["send", "--wait", "still there?"]);
    assert_eq!(stdout(&output).trim(), "Still here.", "{output:?}");
    let after_restart = &model.raw_bodies()[4];
    assert!(after_restart.contains("[Summary of the earlier conversation]"));
    assert!(!after_restart.contains("alpha-0000"));
    assert!(after_restart.contains("bravo-0000"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_drops_a_slow_stream_and_the_next_step_starts() {
    let slow = sse(&format!(
        "{}{}<<PAUSE>>{}",
        message_start(10, 0),
        event(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        ),
        message_end("end_turn", 1)
    ));
    let model = ScriptedModel::start(vec![slow, text_answer("Stopped.")], 4096);
    let daemon = start(&model, "");
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
        started.elapsed() < std::time::Duration::from_secs(10),
        "the slow stream was not abandoned"
    );
    let cancelled = items
        .iter()
        .find(|i| i.kind.name() == "step_cancelled")
        .unwrap();
    assert!(matches!(
        &cancelled.kind,
        steward_events::ItemKind::StepCancelled { by: Some(id), .. } if *id == cancel
    ));
    assert_eq!(model.requests().len(), 2);
    assert!(model.requests()[1]["messages"].to_string().contains("stop"));
}
