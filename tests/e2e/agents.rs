//! Sub-agents through the real daemon, with a scripted model that answers the main
//! conversation and the sub-agent from separate queues (whichever asks first).

use std::time::Duration;

use serde_json::{Value, json};

use crate::model::{config, one_call, text_answer};
use crate::scripted_model::ScriptedModel;
use crate::support::{TestDaemon, stdout, wait_until};

const MAIN: usize = 0;
const SUB: usize = 1;

/// Whether a request offers the model `tool`.
fn offers(body: &str, tool: &str) -> bool {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|b| b["tools"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .any(|t| t["function"]["name"] == tool)
}

/// The main conversation is offered `agent_spawn`; a sub-agent never is.
fn route(body: &str) -> usize {
    if offers(body, "agent_spawn") {
        MAIN
    } else {
        SUB
    }
}

fn outbox(daemon: &TestDaemon) -> String {
    stdout(&daemon.cli(&["outbox", "--json"]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_works_with_its_own_tools_only_and_its_result_returns_once() {
    let model = ScriptedModel::start_routed(
        route,
        vec![
            vec![
                one_call(
                    "call_1",
                    "agent_spawn",
                    json!({
                    "task": "Count the invoices listed in invoices.txt.",
                    "tools": ["fs_read"], "max_model_calls": 5}),
                ),
                text_answer("I asked a helper."),
                text_answer("The helper says there are 3 invoices."),
            ],
            vec![
                one_call("s1", "fs_write", json!({"path": "x.txt", "content": "x"})),
                one_call("s2", "agent_spawn", json!({"task": "go deeper"})),
                one_call("s3", "fs_read", json!({"path": "invoices.txt"})),
                text_answer("There are 3 invoices."),
            ],
        ],
        4096,
    );
    let daemon = TestDaemon::start_with(&config(model.port));
    std::fs::write(daemon.path().join("workspace/invoices.txt"), "a\nb\nc\n").unwrap();
    let sent = daemon.cli(&["send", "--wait", "count my invoices"]);
    assert!(stdout(&sent).contains("I asked a helper."), "{sent:?}");
    wait_until(
        60,
        "the parent answers with the helper's result",
        || async { outbox(&daemon).contains("The helper says there are 3 invoices.") },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let requests = model.requests();
    let sub: Vec<&Value> = requests
        .iter()
        .filter(|r| !offers(&r.to_string(), "agent_spawn"))
        .collect();
    assert_eq!(sub.len(), 4, "{requests:#?}");
    // It was shown only its tool, and what it called outside its set was refused.
    let offered: Vec<&str> = sub[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["fs_read"]);
    assert!(
        sub[1]
            .to_string()
            .contains("not among this sub-agent's tools"),
        "{}",
        sub[1]
    );
    assert!(
        sub[2]
            .to_string()
            .contains("not among this sub-agent's tools"),
        "a sub-agent cannot spawn"
    );
    assert!(sub[3].to_string().contains("lines 1-3 of 3"), "{}", sub[3]);
    assert!(!daemon.path().join("workspace/x.txt").exists());
    // Its answer went to the parent, once, not to the owner.
    let outbox = outbox(&daemon);
    assert!(!outbox.contains("\"There are 3 invoices.\""), "{outbox}");
    let results: Vec<_> = daemon
        .events()
        .await
        .into_iter()
        .filter(|e| e.text == "There are 3 invoices.")
        .collect();
    assert_eq!(results.len(), 1, "{results:#?}");
    assert_eq!(results[0].state, "merged");
    let main = requests
        .iter()
        .rfind(|r| offers(&r.to_string(), "agent_spawn"))
        .unwrap()
        .to_string();
    assert!(
        main.contains("There are 3 invoices."),
        "the parent read the result: {main}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_is_stopped_by_its_timeout_and_its_budget_and_the_cap_refuses_one_more() {
    // Main, the sleeper, the lister: each its own queue.
    fn route3(body: &str) -> usize {
        if offers(body, "agent_spawn") {
            0
        } else if body.contains("wait forever") {
            1
        } else {
            2
        }
    }
    let lister = |n: u32| one_call(&format!("r{n}"), "fs_list", json!({"path": "."}));
    let spawn_lister = |id: &str| {
        one_call(
            id,
            "agent_spawn",
            json!({"task": "list forever", "tools": ["fs_list"], "max_model_calls": 2}),
        )
    };
    let model = ScriptedModel::start_routed(
        route3,
        vec![
            vec![
                one_call(
                    "m1",
                    "agent_spawn",
                    json!({"task": "wait forever", "tools": ["sleep"], "timeout_secs": 2}),
                ),
                spawn_lister("m2"),
                text_answer("One helper at work."),
                // The sleeper's result: now there is room for the lister.
                spawn_lister("m3"),
                text_answer("Noted the timeout."),
                text_answer("Noted the budget."),
            ],
            // A long sleep, cut by its timeout.
            vec![one_call("z1", "sleep", json!({"secs": 30}))],
            // Two calls, then its budget stops it before a third.
            vec![lister(1), lister(2)],
        ],
        4096,
    );
    let daemon = TestDaemon::start_with(&format!(
        "{}[agents]\nmax_running = 1\n",
        config(model.port)
    ));
    let sent = daemon.cli(&["send", "--wait", "start helpers"]);
    assert!(stdout(&sent).contains("One helper at work."), "{sent:?}");
    let second = model
        .requests()
        .iter()
        .filter(|r| offers(&r.to_string(), "agent_spawn"))
        .nth(2)
        .map(|r| r.to_string())
        .unwrap_or_default();
    assert!(
        second.contains("agents.max_running = 1"),
        "a second one is refused: {second}"
    );
    wait_until(60, "both helpers' results are back and read", || async {
        outbox(&daemon).contains("Noted the budget.")
    })
    .await;
    let events = daemon.events().await;
    assert!(
        events.iter().any(|e| e.text.contains("its 2 s were up")),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.text.contains("made its 2 model calls")),
        "{events:#?}"
    );
    let listed = model
        .requests()
        .iter()
        .filter(|r| {
            r.to_string().contains("list forever") && !offers(&r.to_string(), "agent_spawn")
        })
        .count();
    assert_eq!(listed, 2, "no third call past its budget");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_sub_agent_is_listed_and_cancelled() {
    let model = ScriptedModel::start_routed(
        route,
        vec![
            vec![
                one_call(
                    "m1",
                    "agent_spawn",
                    json!({"task": "wait a long time", "tools": ["sleep"]}),
                ),
                text_answer("Started."),
                text_answer("It was cancelled."),
            ],
            vec![one_call("z1", "sleep", json!({"secs": 60}))],
        ],
        4096,
    );
    let daemon = TestDaemon::start_with(&config(model.port));
    let sent = daemon.cli(&["send", "--wait", "start one"]);
    assert!(stdout(&sent).contains("Started."), "{sent:?}");
    let call = |tool: &str, args: Value| -> Value {
        let output = daemon.cli(&["tools", "call", tool, "--args", &args.to_string(), "--json"]);
        serde_json::from_str(stdout(&output).trim()).unwrap_or_else(|e| panic!("{e}: {output:?}"))
    };
    let mut id = String::new();
    wait_until(30, "the sub-agent is running", || {
        let listed = call("agent_list", json!({}));
        let running = listed["result"]["agents"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["state"] == "running").cloned());
        if let Some(agent) = &running {
            id = agent["agent_id"].as_str().unwrap().to_owned();
        }
        async move { running.is_some() }
    })
    .await;
    let cancelled = call("agent_cancel", json!({"agent_id": id}));
    assert_eq!(cancelled["result"]["state"], "cancelled", "{cancelled}");
    wait_until(30, "its result says it was cancelled", || async {
        daemon
            .events()
            .await
            .iter()
            .any(|e| e.text == "The sub-agent was cancelled.")
    })
    .await;
    let again = call("agent_cancel", json!({"agent_id": id}));
    assert_eq!(again["outcome"], "error", "{again}");
    let listed = call("agent_list", json!({}));
    assert_eq!(
        listed["result"]["agents"][0]["state"], "cancelled",
        "{listed}"
    );
}
