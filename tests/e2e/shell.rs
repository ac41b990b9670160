//! The shell tool through the real daemon: read-only commands run in the workspace with a
//! scrubbed environment, everything else (a write too: default deny) waits for confirmation,
//! catastrophic ones never run — however they are wrapped.

use serde_json::Value;

use crate::support::{TestDaemon, stdout};

/// The profile with the shell tool (the default `assistant` profile leaves it off).
const CODING: &str = "[tools]\nprofile = \"coding\"\n";

fn shell(daemon: &TestDaemon, command: &str) -> String {
    let args = serde_json::json!({ "command": command });
    let output = daemon.cli(&["send", "--wait", &format!("/tool shell {args}")]);
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
}

#[test]
fn safe_commands_run_in_the_workspace_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), CODING).unwrap();
    let daemon = TestDaemon::start_in_with_env(dir, &[("STEWARD_TEST_SECRET", "hunter2")]);
    std::fs::write(daemon.path().join("workspace/in.txt"), "hi\n").unwrap();
    let reply = shell(
        &daemon,
        "cat in.txt && pwd && echo \"secret=[$STEWARD_TEST_SECRET]\"",
    );
    assert!(reply.starts_with("shell: "), "{reply}");
    let result: Value = serde_json::from_str(reply.trim().trim_start_matches("shell: ")).unwrap();
    let out = result["stdout"].as_str().unwrap();
    assert!(out.starts_with("hi\n"), "{out}");
    assert!(
        out.contains(&daemon.path().join("workspace").display().to_string()),
        "runs in the workspace: {out}"
    );
    assert!(
        out.contains("secret=[]"),
        "the environment is scrubbed: {out}"
    );
    assert_eq!(result["exit_code"], 0);

    // A write, even inside the workspace, is not read-only: it is asked.
    let write = shell(&daemon, "echo hi > out.txt");
    assert!(
        write.contains("needs your confirmation") && write.contains("out.txt"),
        "{write}"
    );
    assert!(!daemon.path().join("workspace/out.txt").exists());

    let failing = shell(&daemon, "echo oops >&2; exit 3");
    assert!(
        failing.starts_with("shell failed: ")
            && failing.contains("\"exit_code\":3")
            && failing.contains("oops"),
        "{failing}"
    );
}

#[test]
fn catastrophic_commands_are_blocked_however_they_are_wrapped() {
    let daemon = TestDaemon::start_with(CODING);
    for command in [
        "rm -rf /",
        "sh -c 'rm -rf ~'",
        "echo ok\nrm -rf /",
        "env rm -rf $HOME",
        ":(){ :|:& };:",
    ] {
        let reply = shell(&daemon, command);
        assert!(
            reply.contains("`shell` was blocked and never run: `"),
            "{command:?}: {reply}"
        );
    }
    let pending = stdout(&daemon.cli(&["pending", "--json"]));
    assert!(
        pending.is_empty(),
        "blocked commands are never offered for confirmation: {pending}"
    );
}

#[test]
fn dangerous_commands_wait_for_the_owner() {
    let daemon = TestDaemon::start_with(CODING);
    std::fs::create_dir(daemon.path().join("workspace/build")).unwrap();
    let reply = shell(&daemon, "rm -r build");
    assert!(
        reply.contains("needs your confirmation")
            && reply.contains("rm -r deletes directory trees"),
        "{reply}"
    );
    assert!(
        daemon.path().join("workspace/build").exists(),
        "nothing ran yet"
    );
    let row: Value = serde_json::from_str(
        stdout(&daemon.cli(&["pending", "--json"]))
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let confirmed = daemon.cli(&["confirm", row["id"].as_str().unwrap(), "--json"]);
    assert!(confirmed.status.success(), "{confirmed:?}");
    assert!(
        !daemon.path().join("workspace/build").exists(),
        "ran once approved"
    );
}

#[test]
fn a_command_that_runs_too_long_is_killed() {
    let daemon = TestDaemon::start_with(CODING);
    let args = serde_json::json!({"command": "sleep 30", "timeout_secs": 1});
    let output = daemon.cli(&["send", "--wait", &format!("/tool shell {args}")]);
    let reply = stdout(&output);
    assert!(reply.contains("timed_out"), "{reply}");
}

fn call_json(daemon: &TestDaemon, tool: &str, args: &str) -> (bool, Value) {
    let output = daemon.cli(&["tools", "call", tool, "--args", args, "--json"]);
    let line: Value =
        serde_json::from_str(stdout(&output).trim()).unwrap_or_else(|e| panic!("{e}: {output:?}"));
    (output.status.success(), line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_call_reports_every_kind_of_outcome() {
    let daemon = TestDaemon::start_with(&format!(
        "{CODING}[[tools.policy]]\nid = \"no-listing\"\ntool = \"fs_list\"\ndecision = \"deny\"\n"
    ));
    let (ok, line) = call_json(&daemon, "echo", r#"{"text":"x"}"#);
    assert!(ok);
    assert_eq!(
        line,
        serde_json::json!({"outcome": "ok", "result": {"text": "x"}})
    );

    let (ok, line) = call_json(&daemon, "shell", r#"{"command":"rm -rf /"}"#);
    assert!(!ok);
    assert_eq!(line["outcome"], "blocked");
    assert!(
        line["reason"].as_str().unwrap().contains("rm -r of `/`"),
        "{line}"
    );

    let (ok, line) = call_json(&daemon, "shell", r#"{"command":"git push --force"}"#);
    assert!(ok);
    assert_eq!(line["outcome"], "pending");
    assert!(line["pending_id"].is_string(), "{line}");

    let (ok, line) = call_json(&daemon, "fs_list", "{}");
    assert!(!ok);
    assert_eq!(line["outcome"], "denied");
    assert!(
        line["reason"].as_str().unwrap().contains("no-listing"),
        "{line}"
    );

    let (ok, line) = call_json(&daemon, "sleep", r#"{"secs":"soon"}"#);
    assert!(!ok);
    assert_eq!(line["outcome"], "error");
    assert!(
        line["reason"]
            .as_str()
            .unwrap()
            .contains("invalid arguments"),
        "{line}"
    );

    // Each call is in the main trajectory: its event, then the call and its result.
    let items = daemon.trajectory().await;
    let calls = items
        .iter()
        .filter(|i| i.kind.name() == "tool_call")
        .count();
    let results = items
        .iter()
        .filter(|i| i.kind.name() == "tool_result")
        .count();
    assert_eq!((calls, results), (5, 5), "{items:#?}");
}

#[test]
fn memory_notes_survive_a_restart() {
    let mut daemon = TestDaemon::start();
    let (ok, line) = call_json(
        &daemon,
        "memory_write",
        r#"{"key":"prefs/coffee","value":"black"}"#,
    );
    assert!(ok, "{line}");
    assert_eq!(line["result"]["replaced"], false);
    assert!(daemon.terminate().success());
    let dir = std::mem::replace(&mut daemon.dir, tempfile::tempdir().unwrap());
    let daemon = TestDaemon::start_in(dir);
    let (_, line) = call_json(&daemon, "memory_read", r#"{"key":"prefs/coffee"}"#);
    assert_eq!(line["result"]["value"], "black");
    let (_, line) = call_json(&daemon, "memory_list", r#"{"prefix":"prefs/"}"#);
    assert_eq!(line["result"]["keys"][0]["key"], "prefs/coffee");
    let (_, line) = call_json(&daemon, "memory_delete", r#"{"key":"prefs/coffee"}"#);
    assert_eq!(line["result"]["deleted"], true);
    let (ok, line) = call_json(&daemon, "memory_read", r#"{"key":"prefs/coffee"}"#);
    assert!(!ok);
    assert!(
        line["reason"]
            .as_str()
            .unwrap()
            .contains("nothing is remembered"),
        "{line}"
    );
}

#[test]
fn plan_mode_runs_only_read_only_tools() {
    let daemon = TestDaemon::start_with("[tools]\nplan_mode = true\n");
    let (ok, line) = call_json(&daemon, "fs_write", r#"{"path":"p.txt","content":"x"}"#);
    assert!(!ok);
    assert_eq!(line["outcome"], "denied");
    assert!(
        line["reason"].as_str().unwrap().contains("mode.plan"),
        "{line}"
    );
    let (ok, line) = call_json(&daemon, "fs_list", "{}");
    assert!(ok, "{line}");
    assert!(!daemon.path().join("workspace/p.txt").exists());
}

#[test]
fn a_failed_command_comes_with_a_hint() {
    let daemon = TestDaemon::start_with(CODING);
    let reply = shell(&daemon, "no-such-program-xyz --version");
    assert!(reply.contains("\"exit_code\":127"), "{reply}");
    assert!(
        reply.contains("(hint: a program in the command was not found"),
        "{reply}"
    );
}

#[test]
fn the_default_profile_leaves_the_shell_off() {
    let daemon = TestDaemon::start();
    let output = daemon.cli(&["tools", "call", "shell", "--args", r#"{"command":"true"}"#]);
    assert!(!output.status.success(), "{output:?}");
    assert!(
        crate::support::stderr(&output).contains("tool `shell` is disabled")
            || stdout(&output).contains("tool `shell` is disabled"),
        "{output:?}"
    );
}
