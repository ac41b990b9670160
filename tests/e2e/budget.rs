//! Usage and budgets through the real daemon, with scripted models of both providers that
//! report usage in their responses as documented (OpenAI's `usage` chunk after the choices;
//! Anthropic's `message_start` and `message_delta` usage, cache reads included).

use std::time::Duration;

use serde_json::{Value, json};

use crate::scripted_model::{ScriptedModel, sse};
use crate::support::{TestDaemon, stdout, wait_until};

/// One OpenAI streamed answer: `text`, or a call of `tool` with `args`, then its usage.
fn openai(text: Option<&str>, call: Option<(&str, Value)>, prompt: u64, completion: u64) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let object = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
            "model": "scripted", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {object}\n\n")
    };
    let mut body = String::new();
    if let Some(text) = text {
        body.push_str(&chunk(json!({"role": "assistant", "content": text}), None));
        body.push_str(&chunk(json!({}), Some("stop")));
    }
    if let Some((tool, args)) = call {
        body.push_str(&chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                "id": format!("call_{}", ulid::Ulid::generate()), "type": "function",
                "function": {"name": tool, "arguments": args.to_string()}}]}),
            None,
        ));
        body.push_str(&chunk(json!({}), Some("tool_calls")));
    }
    let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
        "model": "scripted", "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": prompt / 4}}});
    body.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
    sse(&body)
}

fn anthropic_event(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

/// One Anthropic streamed answer (text or a tool call), with `input` fresh tokens,
/// `cached` read from the cache and `output` tokens.
fn anthropic(
    text: Option<&str>,
    call: Option<(&str, Value)>,
    input: u64,
    cached: u64,
    output: u64,
) -> String {
    let mut body = anthropic_event(json!({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-scripted",
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": cached, "output_tokens": 1}}}));
    let stop = if let Some(text) = text {
        body.push_str(&anthropic_event(
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ));
        body.push_str(&anthropic_event(
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}}),
        ));
        "end_turn"
    } else {
        let (tool, args) = call.expect("text or a call");
        body.push_str(&anthropic_event(
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": format!("toolu_{}", ulid::Ulid::generate()),
                "name": tool, "input": {}}}),
        ));
        body.push_str(&anthropic_event(
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": args.to_string()}}),
        ));
        "tool_use"
    };
    body.push_str(&anthropic_event(
        json!({"type": "content_block_stop", "index": 0}),
    ));
    body.push_str(&anthropic_event(json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": output}})));
    body.push_str(&anthropic_event(json!({"type": "message_stop"})));
    sse(&body)
}

#[derive(Clone, Copy, Debug)]
enum Provider {
    OpenAi,
    Anthropic,
}

const KEY_ENV: &str = "STEWARD_TEST_MODEL_KEY";

impl Provider {
    /// A model section (`[model]` or `[models.NAME]`) for the scripted server.
    fn section(self, header: &str, port: u16, model: &str) -> String {
        let provider = match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        };
        format!(
            "{header}\nprovider = \"{provider}\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"{model}\"\napi_key_env = \"{KEY_ENV}\"\ntimeout_secs = 10\nprice_in_per_mtok = 2.0\nprice_cached_per_mtok = 1.0\nprice_out_per_mtok = 10.0\n"
        )
    }

    /// A text answer reporting 1,000 input tokens (250 of them cached) and 100 output.
    fn text(self, text: &str) -> String {
        match self {
            Provider::OpenAi => openai(Some(text), None, 1000, 100),
            Provider::Anthropic => anthropic(Some(text), None, 750, 250, 100),
        }
    }

    fn call(self, tool: &str, args: Value, input: u64) -> String {
        match self {
            Provider::OpenAi => openai(None, Some((tool, args)), input, 10),
            Provider::Anthropic => anthropic(None, Some((tool, args)), input, 0, 10),
        }
    }
}

fn start(config: &str) -> TestDaemon {
    TestDaemon::start_with_env(config, &[(KEY_ENV, "sk-test")])
}

fn usage(daemon: &TestDaemon, by: &str) -> Vec<Value> {
    let output = daemon.cli(&["usage", "--by", by, "--json"]);
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn row<'a>(rows: &'a [Value], key: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no row {key}: {rows:#?}"))
}

async fn usage_adds_up_and_a_job_runs_on_its_own_profile(provider: Provider) {
    let model = ScriptedModel::start(
        (0..3)
            .map(|n| provider.text(&format!("Answer {n}.")))
            .collect(),
        4096,
    );
    let config = provider.section("[model]", model.port, "big-model")
        + provider
            .section("[models.cheap]", model.port, "cheap-model")
            .as_str()
        + "[[cron]]\nname = \"brief\"\nschedule = \"at +1s\"\ntext = \"the morning brief\"\nmodel = \"cheap\"\n"
        + "[[cron]]\nname = \"digest\"\nschedule = \"at +1s\"\ntext = \"the digest\"\n";
    let daemon = start(&config);
    let sent = daemon.cli(&["send", "--wait", "hello"]);
    assert!(sent.status.success(), "{sent:?}");
    wait_until(30, "three model calls are counted", || async {
        usage(&daemon, "day")
            .first()
            .is_some_and(|r| r["model_calls"] == 3)
    })
    .await;
    // The provider reported 1,000 in (250 cached) and 100 out per call.
    for by in ["day", "job", "channel", "model"] {
        let rows = usage(&daemon, by);
        let sum = |field: &str| rows.iter().map(|r| r[field].as_u64().unwrap()).sum::<u64>();
        assert_eq!(sum("model_calls"), 3, "{by}: {rows:#?}");
        assert_eq!(sum("tokens_in"), 3000, "{by}: {rows:#?}");
        assert_eq!(sum("tokens_cached"), 750, "{by}: {rows:#?}");
        assert_eq!(sum("tokens_out"), 300, "{by}: {rows:#?}");
        let cost: f64 = rows.iter().map(|r| r["cost"].as_f64().unwrap()).sum();
        // (750 × 2 + 250 × 1 + 100 × 10) / 1e6 per call.
        assert!((cost - 3.0 * 0.00275).abs() < 1e-9, "{by}: {cost}");
        for r in &rows {
            let fields: Vec<&String> = r.as_object().unwrap().keys().collect();
            assert_eq!(
                fields,
                [
                    "cost",
                    "key",
                    "model_calls",
                    "tokens_cached",
                    "tokens_in",
                    "tokens_out"
                ],
                "exactly these fields"
            );
        }
    }
    let jobs = usage(&daemon, "job");
    assert_eq!(row(&jobs, "cron:brief")["model_calls"], 1);
    assert_eq!(row(&jobs, "cron:digest")["model_calls"], 1);
    assert_eq!(row(&jobs, "(not a job)")["model_calls"], 1);
    let channels = usage(&daemon, "channel");
    assert_eq!(row(&channels, "cron:brief")["tokens_in"], 1000);
    assert_eq!(
        channels.len(),
        3,
        "the brief, the digest and the socket: {channels:#?}"
    );
    let models = usage(&daemon, "model");
    assert_eq!(row(&models, "cheap-model")["model_calls"], 1, "{models:#?}");
    assert_eq!(row(&models, "big-model")["model_calls"], 2, "{models:#?}");
    // The scripted server saw the profile's model name for the brief, and only for it.
    let names: Vec<String> = model
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap().to_owned())
        .collect();
    let brief = model
        .requests()
        .iter()
        .position(|r| r.to_string().contains("the morning brief"))
        .expect("the brief reached the model");
    assert_eq!(names[brief], "cheap-model", "{names:?}");
    assert_eq!(
        names.iter().filter(|n| *n == "cheap-model").count(),
        1,
        "{names:?}"
    );
    // `steward status` shows today's.
    let status = stdout(&daemon.cli(&["status", "--json"]));
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["usage_today"]["model_calls"], 3, "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_usage_adds_up_and_a_job_runs_on_its_own_profile() {
    usage_adds_up_and_a_job_runs_on_its_own_profile(Provider::OpenAi).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_usage_adds_up_and_a_job_runs_on_its_own_profile() {
    usage_adds_up_and_a_job_runs_on_its_own_profile(Provider::Anthropic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_caps_stop_it_before_the_call_that_would_pass_them() {
    let provider = Provider::OpenAi;
    // The first call reports 49,990 input tokens: the next one would pass 50,000.
    let model = ScriptedModel::start(
        vec![
            provider.call("echo", json!({"text": "one"}), 49_990),
            provider.call("echo", json!({"text": "two"}), 100),
            provider.text("never asked for"),
        ],
        4096,
    );
    let config = provider.section("[model]", model.port, "big-model")
        + "[[cron]]\nname = \"tight\"\nschedule = \"at +1s\"\ntext = \"a tight job\"\nurgency = \"queue\"\nmax_tokens_per_run = 50000\n"
        + "[[cron]]\nname = \"once\"\nschedule = \"at +3s\"\ntext = \"a one-call job\"\nurgency = \"queue\"\nmax_model_calls_per_run = 1\n";
    let daemon = start(&config);
    let outbox = || stdout(&daemon.cli(&["outbox", "--json"]));
    wait_until(30, "both runs stop", || async {
        let outbox = outbox();
        outbox.contains("max_tokens_per_run") && outbox.contains("max_model_calls_per_run")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(model.requests().len(), 2, "no call past a cap");
    // Each run's tool call ran before it stopped, and the trajectory says why.
    let trajectory = stdout(&daemon.cli(&["trajectory", "--json"]));
    assert_eq!(
        trajectory.matches("\"kind\":\"tool_call\"").count(),
        2,
        "{trajectory}"
    );
    assert!(
        trajectory.contains("would pass this run's 50000 tokens"),
        "{trajectory}"
    );
    assert!(
        trajectory.contains("made its 1 model calls"),
        "{trajectory}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daily_budget_holds_model_work_tells_once_and_a_raised_cap_lets_it_run() {
    let provider = Provider::Anthropic;
    // The first answer reports 59,990 input tokens and 20 out: the day's 60,000 are used
    // up, and the next call would pass them.
    let big = |text: &str| anthropic(Some(text), None, 59_990, 0, 20);
    let model = ScriptedModel::start(vec![big("First."), big("Second."), big("Third.")], 4096);
    let section = provider.section("[model]", model.port, "claude-scripted");
    let daemon = start(&(section.clone() + "[budget]\ndaily_tokens = 60000\n"));
    let first = daemon.cli(&["send", "--wait", "one"]);
    assert!(stdout(&first).contains("First."), "{first:?}");
    daemon.send("two", None).await;
    wait_until(30, "the owner is told model work is paused", || async {
        stdout(&daemon.cli(&["outbox", "--json"])).contains("Model work is paused")
    })
    .await;
    // Sent once "two" waits in its step (sent together, the two could share one step).
    daemon.send("three", None).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let outbox = stdout(&daemon.cli(&["outbox", "--json"]));
    assert_eq!(
        outbox.matches("Model work is paused").count(),
        1,
        "told once: {outbox}"
    );
    assert_eq!(model.requests().len(), 1, "no call past the daily cap");
    let budget: Value =
        serde_json::from_str(&stdout(&daemon.cli(&["budget", "status", "--json"]))).unwrap();
    assert_eq!(budget["tokens_today"], 60_010, "{budget}");
    assert!(
        budget["waiting"]
            .as_str()
            .unwrap()
            .contains("budget.daily_tokens"),
        "{budget}"
    );
    // Slash commands still work; nothing is lost meanwhile.
    let status = daemon.cli(&["send", "--wait", "/status"]);
    assert!(
        status.status.success() && !stdout(&status).is_empty(),
        "{status:?}"
    );
    // "two" is in the step that waits, and "three" joined it: merged, not left pending.
    let merged = stdout(&daemon.cli(&["events", "--state", "merged", "--json"]));
    assert!(merged.contains("\"text\":\"three\""), "{merged}");
    let pending = stdout(&daemon.cli(&["events", "--state", "pending", "--json"]));
    assert!(!pending.contains("\"text\":\"three\""), "{pending}");
    // The owner raises the cap and reloads: the waiting events run.
    std::fs::write(
        daemon.path().join("config.toml"),
        section + "[budget]\ndaily_tokens = 1000000\n",
    )
    .unwrap();
    let pid = daemon.child.as_ref().unwrap().id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
    wait_until(30, "the waiting events are answered", || async {
        let outbox = stdout(&daemon.cli(&["outbox", "--json"]));
        outbox.contains("Second.")
    })
    .await;
    assert_eq!(
        model.requests().len(),
        2,
        "one step for both waiting events"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_guard_ends_a_model_that_repeats_the_same_call() {
    let provider = Provider::Anthropic;
    let same = || provider.call("echo", json!({"text": "again"}), 100);
    let model = ScriptedModel::start(vec![same(), same(), same(), same()], 4096);
    let daemon = start(&provider.section("[model]", model.port, "claude-scripted"));
    let output = daemon.cli(&["send", "--wait", "loop"]);
    assert!(stdout(&output).contains("came a third time"), "{output:?}");
    assert_eq!(model.requests().len(), 3, "no fourth call");
    let trajectory = stdout(&daemon.cli(&["trajectory", "--json"]));
    assert_eq!(
        trajectory.matches("\"kind\":\"tool_call\"").count(),
        2,
        "the third never ran"
    );
}
