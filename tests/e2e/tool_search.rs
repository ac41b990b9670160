//! Tool search beyond words: the semantic channel with a model named by
//! `tools.search.embedding_model` (a small model2vec-format model written here — a
//! Hugging Face tokenizer.json and a safetensors matrix, the very files the daemon reads
//! from a real one), a broken model refused at start naming the key, and usage learning:
//! a request the model searched with and then called a tool for finds that tool next time,
//! after a `kill -9` too.

use std::path::Path;

use serde_json::{Value, json};

use crate::model::{one_call, text_answer};
use crate::scripted_model::ScriptedModel;
use crate::support::{TestDaemon, cli_in, stderr, stdout};

/// A model whose vocabulary puts "haystack", "needle" and "grep" on one axis and
/// "umbrella" and "weather" on another; every other word is unknown (a zero row).
fn write_model(dir: &Path) {
    let vocab =
        json!({"[UNK]": 0, "haystack": 1, "needle": 2, "grep": 3, "umbrella": 4, "weather": 5});
    let tokenizer = json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    let rows: [[f32; 2]; 6] = [
        [0.0, 0.0],
        [1.0, 0.0],
        [1.0, 0.0],
        [1.0, 0.0],
        [0.0, 1.0],
        [0.0, 1.0],
    ];
    let data: Vec<u8> = rows
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let header =
        json!({"embeddings": {"dtype": "F32", "shape": [6, 2], "data_offsets": [0, data.len()]}})
            .to_string();
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend(header.as_bytes());
    file.extend(data);
    std::fs::write(dir.join("model.safetensors"), file).unwrap();
}

fn found(daemon: &TestDaemon, query: &str) -> Vec<String> {
    let output = daemon.cli(&["tools", "search", query, "--json"]);
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn the_model_finds_a_tool_by_meaning_and_without_it_nothing_changes() {
    let model = tempfile::tempdir().unwrap();
    write_model(model.path());
    let config = format!(
        "[tools.search]\nembedding_model = {:?}\n",
        model.path().display().to_string()
    );
    let daemon = TestDaemon::start_with(&config);
    // No tool has either word: only meaning connects them to fs_grep ("grep").
    let names = found(&daemon, "needle haystack");
    assert_eq!(
        names.first().map(String::as_str),
        Some("fs_grep"),
        "{names:?}"
    );
    // A tool named in the request still comes first.
    let names = found(&daemon, "fs_read needle");
    assert_eq!(
        names.first().map(String::as_str),
        Some("fs_read"),
        "{names:?}"
    );
    drop(daemon);

    let plain = TestDaemon::start();
    assert!(found(&plain, "needle haystack").is_empty());
}

/// The model a user builds with `scripts/embedding-model/build.sh` (WordLlama's table from
/// PyPI), which `scripts/interop-venv.sh` builds into the interop venv.
#[cfg_attr(
    not(interop_wordllama),
    ignore = "needs the WordLlama model from PyPI in the interop venv (scripts/interop-venv.sh)"
)]
#[test]
fn the_real_model_finds_the_web_tools_for_a_request_with_none_of_their_words() {
    let model = Path::new(env!("STEWARD_INTEROP_VENV")).join("embedding-model");
    let config = format!(
        "[tools]\nprofile = \"full\"\n[tools.search]\nembedding_model = {:?}\n",
        model.display().to_string()
    );
    let daemon = TestDaemon::start_with(&config);
    let names = found(&daemon, "ask the internet");
    let web = ["http_request", "web_fetch"];
    assert!(
        names.len() >= 2 && names[..2].iter().all(|n| web.contains(&n.as_str())),
        "{names:?}"
    );
    drop(daemon);

    let plain = TestDaemon::start_with("[tools]\nprofile = \"full\"\n");
    assert!(found(&plain, "ask the internet").is_empty());
}

#[test]
fn a_broken_model_stops_the_start_naming_the_key() {
    let model = tempfile::tempdir().unwrap();
    write_model(model.path());
    std::fs::write(model.path().join("tokenizer.json"), "{not json").unwrap();
    let table = [
        (
            model.path().display().to_string(),
            "is not a tokenizer.json",
        ),
        ("relative/model".to_owned(), "is not an absolute path"),
        ("/nonexistent/model".to_owned(), "holds no model"),
    ];
    for (path, says) in table {
        let dir = tempfile::tempdir().unwrap();
        let config = format!("[tools.search]\nembedding_model = {path:?}\n");
        std::fs::write(dir.path().join("config.toml"), &config).unwrap();
        let output = cli_in(dir.path(), &["run"]);
        assert_eq!(output.status.code(), Some(78), "{config}: {output:?}");
        let message = stderr(&output);
        assert!(
            message.contains("`tools.search.embedding_model`") && message.contains(says),
            "{config}: {message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_led_to_a_call_finds_that_tool_next_time() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "a line\n").unwrap();
    let model = ScriptedModel::start(
        vec![
            one_call(
                "call_s",
                "tool_search",
                json!({"query": "search lines in files, the quokka way"}),
            ),
            one_call("call_g", "fs_grep", json!({"pattern": "line"})),
            text_answer("Found it."),
        ],
        4096,
    );
    let config = format!(
        "{}\n[tools]\nroots = [{:?}]\n",
        crate::model::config(model.port),
        workspace.path().display().to_string()
    );
    let daemon = TestDaemon::start_with(&config);
    // Before: the odd word of the request is in no tool.
    assert!(found(&daemon, "quokka").is_empty());
    let output = daemon.cli(&["send", "--wait", "look for lines"]);
    assert!(stdout(&output).contains("Found it."), "{output:?}");
    // Learnt: first (its group's other tools follow it, as they follow any fs_grep match).
    let first = |names: Vec<String>| names.first().cloned();
    assert_eq!(first(found(&daemon, "quokka")).as_deref(), Some("fs_grep"));
    // Durably.
    let daemon = daemon.crash_and_restart();
    assert_eq!(first(found(&daemon, "quokka")).as_deref(), Some("fs_grep"));
}
