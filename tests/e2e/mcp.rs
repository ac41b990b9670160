//! MCP servers through the real daemon: a server written for the tests (`mcp_server.py`)
//! over stdio and over streamable HTTP. Its tools appear deferred under `mcp:NAME`, run
//! through the pipeline (a write is confirmed first, whatever the server's hints say),
//! follow `tools/list_changed`, and come back after the server crashes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{TestDaemon, stdout};

pub fn server_script() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/e2e/mcp_server.py").to_owned()
}

/// `[[mcp.servers]]` for the test server over stdio, writing its files into `dir`.
pub fn stdio_server(dir: &Path) -> String {
    format!(
        "[[mcp.servers]]\nname = \"notes\"\ncommand = \"python3\"\nargs = [{script:?}]\nenv = {{ NOTES_FILE = {notes:?}, STARTS_FILE = {starts:?} }}\nread_only_tools = [\"lookup\"]\nidempotent_tools = [\"fail\", \"grow\", \"crash\"]\n",
        script = server_script(),
        notes = dir.join("notes.txt").display().to_string(),
        starts = dir.join("starts.txt").display().to_string(),
    )
}

fn call(daemon: &TestDaemon, tool: &str, args: &str) -> (bool, Value) {
    let output = daemon.cli(&["tools", "call", tool, "--args", args, "--json"]);
    let line: Value =
        serde_json::from_str(stdout(&output).trim()).unwrap_or_else(|e| panic!("{e}: {output:?}"));
    (output.status.success(), line)
}

async fn channel_state(daemon: &TestDaemon, name: &str) -> String {
    let status = daemon.status().await;
    status
        .channels
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.state.clone())
        .unwrap_or_default()
}

async fn wait_for_state(daemon: &TestDaemon, name: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state = channel_state(daemon, name).await;
        if state.starts_with(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} is {state:?}, not {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn notes(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("notes.txt")).unwrap_or_default()
}

fn confirm_only_pending(daemon: &TestDaemon) {
    let rows = stdout(&daemon.cli(&["pending", "--json"]));
    let row: Value = serde_json::from_str(rows.lines().last().unwrap()).unwrap();
    let id = row["id"].as_str().unwrap();
    let output = daemon.cli(&["confirm", id]);
    assert!(output.status.success(), "{output:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_tools_are_deferred_confirmed_followed_and_restarted() {
    let files = tempfile::tempdir().unwrap();
    let daemon = TestDaemon::start_with(&stdio_server(files.path()));
    // READY=1 does not wait for MCP servers (the first step does): the tools follow.
    wait_for_state(&daemon, "mcp:notes", "ready (5 tools)").await;

    let listed = stdout(&daemon.cli(&["tools", "list", "--json"]));
    let lookup: Value = listed
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|t| t["name"] == "notes_lookup")
        .expect("notes_lookup is listed");
    assert_eq!(lookup["source"], "mcp:notes");
    assert_eq!(lookup["tier"], "deferred");
    assert_eq!(lookup["groups"], serde_json::json!(["group:mcp:notes"]));
    assert_eq!(lookup["side_effect"], "read_only");

    let (ok, line) = call(&daemon, "notes_lookup", r#"{"word":"tea"}"#);
    assert!(ok, "{line}");
    assert!(
        line["result"]["content"]
            .as_str()
            .unwrap()
            .contains("definition of tea")
    );
    let (ok, line) = call(&daemon, "notes_lookup", r#"{"term":"tea"}"#);
    assert!(
        !ok && line["reason"]
            .as_str()
            .unwrap()
            .contains("invalid arguments"),
        "{line}"
    );

    // A write: confirmed first although the server hints it is read-only; runs once.
    let (ok, line) = call(&daemon, "notes_add_note", r#"{"text":"buy tea"}"#);
    assert!(ok && line["outcome"] == "pending", "{line}");
    assert_eq!(notes(files.path()), "");
    confirm_only_pending(&daemon);
    assert_eq!(notes(files.path()), "buy tea\n");

    let (ok, line) = call(&daemon, "notes_fail", "{}");
    assert!(!ok && line["reason"] == "it failed", "{line}");

    // tools/list_changed: the new tool is searchable at once.
    let (ok, line) = call(&daemon, "notes_grow", "{}");
    assert!(ok, "an idempotent write runs without asking: {line}");
    wait_for_state(&daemon, "mcp:notes", "ready (6 tools)").await;
    let found = stdout(&daemon.cli(&["tools", "search", "convert temperatures", "--json"]));
    assert!(found.contains("notes_extra_tool"), "{found}");

    // A crash: the server is restarted and its tools come back.
    call(&daemon, "notes_crash", "{}");
    // The state still says ready until the crash is noticed: wait for the second start.
    let starts = || {
        std::fs::read_to_string(files.path().join("starts.txt"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while starts() < 2 {
        assert!(Instant::now() < deadline, "the server was not restarted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_for_state(&daemon, "mcp:notes", "ready").await;
    assert_eq!(starts(), 2, "restarted once");
    let (ok, line) = call(&daemon, "notes_lookup", r#"{"word":"again"}"#);
    assert!(ok, "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_server_works_like_a_local_one() {
    let files = tempfile::tempdir().unwrap();
    let port_file: PathBuf = files.path().join("port");
    let mut server = std::process::Command::new("python3")
        .arg(server_script())
        .arg("--http")
        .arg(&port_file)
        .env("NOTES_FILE", files.path().join("notes.txt"))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let port = loop {
        if let Ok(port) = std::fs::read_to_string(&port_file)
            && !port.is_empty()
        {
            break port;
        }
        assert!(
            Instant::now() < deadline,
            "the HTTP MCP server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let daemon = TestDaemon::start_with_env(
        &format!(
            "[[mcp.servers]]\nname = \"remote\"\nurl = \"http://127.0.0.1:{port}/mcp\"\nbearer_token_env = \"STEWARD_TEST_MCP_TOKEN\"\nread_only_tools = [\"lookup\"]\n"
        ),
        &[("STEWARD_TEST_MCP_TOKEN", "t0ken")],
    );
    wait_for_state(&daemon, "mcp:remote", "ready (5 tools)").await;
    let (ok, line) = call(&daemon, "remote_lookup", r#"{"word":"http"}"#);
    assert!(ok, "{line}");
    assert!(
        line["result"]["content"]
            .as_str()
            .unwrap()
            .contains("definition of http")
    );
    let (ok, line) = call(&daemon, "remote_add_note", r#"{"text":"over http"}"#);
    assert!(ok && line["outcome"] == "pending", "{line}");
    confirm_only_pending(&daemon);
    assert_eq!(notes(files.path()), "over http\n");
    server.kill().unwrap();
    server.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_reported_not_fatal() {
    let daemon = TestDaemon::start_with(
        "[[mcp.servers]]\nname = \"ghost\"\ncommand = \"/no/such/mcp-server\"\n",
    );
    wait_for_state(&daemon, "mcp:ghost", "backoff: cannot start").await;
    let (ok, line) = call(&daemon, "echo", r#"{"text":"still here"}"#);
    assert!(ok, "{line}");
}
