//! The task list (`todo_write` / `todo_read`): kept per trajectory across a `kill -9`,
//! shown in `steward status`, and the model is told to keep one.

use serde_json::{Value, json};

use crate::scripted_model::ScriptedModel;
use crate::support::{TestDaemon, stdout};

fn call(daemon: &TestDaemon, tool: &str, args: &Value) -> Value {
    let output = daemon.cli(&["tools", "call", tool, "--args", &args.to_string(), "--json"]);
    serde_json::from_str(stdout(&output).trim()).unwrap_or_else(|e| panic!("{e}: {output:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_list_survives_a_crash_and_shows_in_status() {
    let daemon = TestDaemon::start();
    let items = json!({"items": [
        {"text": "find the invoices", "status": "done"},
        {"text": "sum them up", "status": "in_progress"},
        {"text": "mail the total", "status": "pending"}
    ]});
    let written = call(&daemon, "todo_write", &items);
    assert_eq!(written["outcome"], "ok", "{written}");
    let refused = call(
        &daemon,
        "todo_write",
        &json!({"items": [{"text": "x", "status": "later"}]}),
    );
    assert_eq!(
        refused["outcome"], "error",
        "an unknown status is refused: {refused}"
    );
    let daemon = daemon.crash_and_restart();
    let read = call(&daemon, "todo_read", &json!({}));
    assert_eq!(read["result"]["items"], items["items"], "{read}");
    let status: Value = serde_json::from_str(&stdout(&daemon.cli(&["status", "--json"]))).unwrap();
    assert_eq!(status["todo"][1]["text"], "sum them up", "{status}");
    assert_eq!(status["todo"][1]["status"], "in_progress", "{status}");
    let text = stdout(&daemon.cli(&["status"]));
    assert!(text.contains("[x] find the invoices"), "{text}");
    assert!(text.contains("[~] sum them up"), "{text}");
    assert!(text.contains("[ ] mail the total"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_is_told_to_keep_a_task_list() {
    let model = ScriptedModel::start(vec![crate::model::text_answer("Fine.")], 4096);
    let daemon = TestDaemon::start_with(&crate::model::config(model.port));
    let output = daemon.cli(&["send", "--wait", "a long job"]);
    assert!(stdout(&output).contains("Fine."), "{output:?}");
    let request = model.requests()[0].to_string();
    assert!(
        request.contains("\"todo_write\""),
        "the tool is offered: {request}"
    );
    assert!(
        request.contains("keep a task list with todo_write"),
        "{request}"
    );
}
