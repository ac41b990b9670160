//! File tools through the real daemon: confinement to the workspace and read-before-write.

use crate::support::{TestDaemon, stdout};

fn tool(daemon: &TestDaemon, command: &str) -> String {
    let output = daemon.cli(&["send", "--wait", command]);
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
}

#[test]
fn writes_need_a_fresh_read_and_stay_in_the_workspace() {
    let daemon = TestDaemon::start();
    let workspace = daemon.path().join("workspace");
    std::fs::write(workspace.join("plan.md"), "step one\nstep two\n").unwrap();

    let refused = tool(
        &daemon,
        r#"/tool fs_write {"path":"plan.md","content":"replaced"}"#,
    );
    assert!(
        refused.contains("fs_write failed") && refused.contains("read it with fs_read first"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("plan.md")).unwrap(),
        "step one\nstep two\n"
    );

    let read = tool(&daemon, r#"/tool fs_read {"path":"plan.md"}"#);
    assert!(read.contains("lines 1-2 of 2"), "{read}");
    let written = tool(
        &daemon,
        r#"/tool fs_write {"path":"plan.md","content":"replaced\n"}"#,
    );
    assert!(written.starts_with("fs_write: "), "{written}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("plan.md")).unwrap(),
        "replaced\n"
    );

    // Changed behind the tool's back: refused again until read again.
    std::fs::write(workspace.join("plan.md"), "edited by hand\n").unwrap();
    let refused = tool(
        &daemon,
        r#"/tool fs_edit {"path":"plan.md","old_text":"hand","new_text":"tool"}"#,
    );
    assert!(refused.contains("changed since it was read"), "{refused}");
    tool(&daemon, r#"/tool fs_read {"path":"plan.md"}"#);
    let edited = tool(
        &daemon,
        r#"/tool fs_edit {"path":"plan.md","old_text":"hand","new_text":"tool"}"#,
    );
    assert!(edited.contains("\"replacements\":1"), "{edited}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("plan.md")).unwrap(),
        "edited by tool\n"
    );

    // A new file (in a new directory) may be created without a read.
    let created = tool(
        &daemon,
        r#"/tool fs_write {"path":"notes/new.txt","content":"hi"}"#,
    );
    assert!(created.contains("\"created\":true"), "{created}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes/new.txt")).unwrap(),
        "hi"
    );
}

#[test]
fn edits_must_be_unambiguous() {
    let daemon = TestDaemon::start();
    std::fs::write(daemon.path().join("workspace/list.txt"), "a\na\nb\n").unwrap();
    tool(&daemon, r#"/tool fs_read {"path":"list.txt"}"#);
    let twice = tool(
        &daemon,
        r#"/tool fs_edit {"path":"list.txt","old_text":"a","new_text":"c"}"#,
    );
    assert!(twice.contains("occurs 2 times"), "{twice}");
    let absent = tool(
        &daemon,
        r#"/tool fs_edit {"path":"list.txt","old_text":"zzz","new_text":"c"}"#,
    );
    assert!(absent.contains("does not occur"), "{absent}");
    let all = tool(
        &daemon,
        r#"/tool fs_edit {"path":"list.txt","old_text":"a","new_text":"c","replace_all":true}"#,
    );
    assert!(all.contains("\"replacements\":2"), "{all}");
}

#[test]
fn paths_outside_the_workspace_are_refused() {
    let daemon = TestDaemon::start();
    let workspace = daemon.path().join("workspace");
    std::fs::write(daemon.path().join("outside.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(daemon.path().join("outside.txt"), workspace.join("link")).unwrap();
    // A symlinked parent, relative and absolute: the kernel refuses both at the open.
    std::os::unix::fs::symlink("..", workspace.join("up")).unwrap();
    std::os::unix::fs::symlink(daemon.path(), workspace.join("up-absolute")).unwrap();
    for path in [
        "../outside.txt",
        "link",
        "/etc/hostname",
        "up/outside.txt",
        "up-absolute/outside.txt",
    ] {
        let read = tool(&daemon, &format!(r#"/tool fs_read {{"path":"{path}"}}"#));
        assert!(read.contains("outside the allowed roots"), "{path}: {read}");
        let write = tool(
            &daemon,
            &format!(r#"/tool fs_write {{"path":"{path}","content":"x"}}"#),
        );
        assert!(
            write.contains("outside the allowed roots"),
            "{path}: {write}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(daemon.path().join("outside.txt")).unwrap(),
        "secret"
    );
    let listed = tool(&daemon, r#"/tool fs_list {}"#);
    assert!(listed.contains("\"name\":\"link\""), "{listed}");
    let through = tool(&daemon, r#"/tool fs_list {"path":"up"}"#);
    assert!(through.contains("outside the allowed roots"), "{through}");
}

#[test]
fn a_missing_root_is_a_config_error_that_names_only_that_root() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("notes");
    std::fs::create_dir(&existing).unwrap();
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "[tools]\nroots = [{:?}, \"/nonexistent/steward-root\"]\n",
            existing.display().to_string()
        ),
    )
    .unwrap();
    let output = crate::support::cli_in(dir.path(), &["run"]);
    assert_eq!(output.status.code(), Some(78), "{output:?}");
    let message = crate::support::stderr(&output);
    assert!(
        message.contains("tools.roots[1]") && message.contains("/nonexistent/steward-root"),
        "{message}"
    );
    assert!(
        !message.contains(&existing.display().to_string()),
        "the root that exists is not blamed: {message}"
    );
}

#[test]
fn a_large_result_is_cut_and_the_full_output_spilled() {
    let daemon = TestDaemon::start();
    let big: String = (0..20_000)
        .map(|i| format!("row {i} {}\n", "x".repeat(20)))
        .collect();
    std::fs::write(daemon.path().join("workspace/big.txt"), &big).unwrap();
    let read = tool(&daemon, r#"/tool fs_read {"path":"big.txt","limit":10000}"#);
    assert!(
        read.len() < 110 * 1024,
        "the reply is cut to the 100 KB budget: {} bytes",
        read.len()
    );
    assert!(read.contains("truncated: original "), "{}", &read[..200]);
    let spill = read
        .split("full output at ")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("spill path in the result");
    let spilled = std::fs::read_to_string(spill).unwrap();
    assert!(
        spilled.contains("row 0 x") && spilled.contains("row 9999 x"),
        "the spill file has everything read"
    );
    assert!(!spilled.contains("row 10000 "), "and only what was read");
    assert!(spill.starts_with(&daemon.path().join("spill").display().to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glob_and_grep_search_the_workspace_only() {
    let daemon = TestDaemon::start();
    let ws = daemon.path().join("workspace");
    std::fs::create_dir_all(ws.join("src/deep")).unwrap();
    std::fs::create_dir_all(ws.join("target")).unwrap();
    std::fs::write(
        ws.join("src/main.rs"),
        "fn main() {\n    // TODO: greet\n}\n",
    )
    .unwrap();
    std::fs::write(ws.join("src/deep/lib.rs"), "pub fn todo() {}\n").unwrap();
    std::fs::write(ws.join("target/junk.rs"), "TODO in build output\n").unwrap();
    std::fs::write(daemon.path().join("outside.rs"), "TODO outside\n").unwrap();
    std::os::unix::fs::symlink(daemon.path(), ws.join("escape")).unwrap();

    let glob = daemon.cli(&[
        "tools",
        "call",
        "fs_glob",
        "--args",
        r#"{"pattern":"**/*.rs"}"#,
    ]);
    let found: serde_json::Value = serde_json::from_str(stdout(&glob).trim()).unwrap();
    assert_eq!(
        found["files"],
        serde_json::json!(["src/deep/lib.rs", "src/main.rs"]),
        "no target/, no symlinked escape"
    );

    let grep = daemon.cli(&[
        "tools",
        "call",
        "fs_grep",
        "--args",
        r#"{"pattern":"todo","case_insensitive":true}"#,
    ]);
    let matches: serde_json::Value = serde_json::from_str(stdout(&grep).trim()).unwrap();
    assert_eq!(
        matches["matches"],
        serde_json::json!([
            "src/deep/lib.rs:1:pub fn todo() {}",
            "src/main.rs:2:    // TODO: greet"
        ])
    );
    let bad = daemon.cli(&[
        "tools",
        "call",
        "fs_grep",
        "--args",
        r#"{"pattern":"(unclosed"}"#,
    ]);
    assert!(!bad.status.success());
    assert!(
        crate::support::stderr(&bad).contains("invalid regular expression"),
        "{bad:?}"
    );
}
