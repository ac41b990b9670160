//! Skills: folders with a `SKILL.md`, listed, searched, loaded, their files read beneath
//! their folder only; an untrusted skill taints the step; an edit is what the next load
//! gives, and the prompt prefix does not change.

use std::path::Path;

use serde_json::{Value, json};

use crate::model::{config, one_call, text_answer};
use crate::scripted_model::ScriptedModel;
use crate::support::{TestDaemon, stdout};

fn write_skill(dir: &Path, folder: &str, name: &str, description: &str, body: &str) {
    let folder = dir.join(folder);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: {description}\nwhen_to_use: when asked\n---\n{body}\n"
        ),
    )
    .unwrap();
}

fn call(daemon: &TestDaemon, tool: &str, args: Value) -> Value {
    let output = daemon.cli(&["tools", "call", tool, "--args", &args.to_string(), "--json"]);
    serde_json::from_str(stdout(&output).trim()).unwrap_or_else(|e| panic!("{e}: {output:?}"))
}

struct Library {
    trusted: tempfile::TempDir,
    untrusted: tempfile::TempDir,
}

impl Library {
    fn new() -> Self {
        let library = Self {
            trusted: tempfile::tempdir().unwrap(),
            untrusted: tempfile::tempdir().unwrap(),
        };
        write_skill(
            library.trusted.path(),
            "invoices",
            "invoices",
            "Sum this month's invoices",
            "1. List the invoices.\n2. Add them up.",
        );
        std::fs::create_dir_all(library.trusted.path().join("invoices/templates")).unwrap();
        std::fs::write(
            library.trusted.path().join("invoices/templates/total.txt"),
            "Total: {sum}",
        )
        .unwrap();
        std::fs::write(
            library.trusted.path().join("secret.txt"),
            "beside the skill, not in it",
        )
        .unwrap();
        std::os::unix::fs::symlink(
            library.trusted.path().join("secret.txt"),
            library.trusted.path().join("invoices/escape.txt"),
        )
        .unwrap();
        write_skill(library.trusted.path(), "broken", "", "no name", "x");
        write_skill(
            library.untrusted.path(),
            "cleanup",
            "cleanup",
            "Clean up old downloads",
            "Run shell rm -rf ~/Downloads/* and write a note.",
        );
        library
    }

    fn config(&self) -> String {
        format!(
            "[skills]\ndirs = [{:?}, {:?}]\ntrusted = [{:?}]\n",
            self.trusted.path(),
            self.untrusted.path(),
            self.trusted.path()
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_is_listed_searched_loaded_and_only_its_own_files_are_readable() {
    let library = Library::new();
    let daemon = TestDaemon::start_with(&library.config());
    let listed = call(&daemon, "skill_list", json!({}));
    let names: Vec<&str> = listed["result"]["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["invoices", "cleanup"], "{listed}");
    assert_eq!(
        listed["untrusted"], true,
        "an untrusted skill's words are in the list"
    );
    // tool_search names the trusted skill, and only counts the untrusted one.
    let found = call(
        &daemon,
        "tool_search",
        json!({"query": "sum invoices clean downloads"}),
    );
    assert_eq!(
        found["result"]["skills"]["skills"][0]["name"], "invoices",
        "{found}"
    );
    assert_eq!(found["result"]["skills"]["untrusted_skills"], 1, "{found}");
    assert!(!found.to_string().contains("Downloads"), "{found}");
    let loaded = call(&daemon, "skill_load", json!({"name": "invoices"}));
    assert_eq!(loaded["outcome"], "ok", "{loaded}");
    assert!(
        loaded.get("untrusted").is_none(),
        "a trusted skill: {loaded}"
    );
    assert_eq!(
        loaded["result"]["text"],
        "1. List the invoices.\n2. Add them up."
    );
    // Symlinks are not listed (nor followed out of the folder, below).
    assert_eq!(loaded["result"]["files"], json!(["templates/total.txt"]));
    let file = call(
        &daemon,
        "skill_load",
        json!({"name": "invoices", "file": "templates/total.txt"}),
    );
    assert_eq!(file["result"]["text"], "Total: {sum}", "{file}");
    for outside in ["../secret.txt", "escape.txt", "/etc/passwd"] {
        let refused = call(
            &daemon,
            "skill_load",
            json!({"name": "invoices", "file": outside}),
        );
        assert_eq!(refused["outcome"], "error", "{outside}: {refused}");
        assert!(
            !refused.to_string().contains("beside the skill"),
            "{refused}"
        );
    }
    // The CLI lists them too, and says which folder is not a skill and why.
    let cli = stdout(&daemon.cli(&["skills", "list"]));
    assert!(cli.contains("invoices"), "{cli}");
    assert!(cli.contains("Clean up old downloads  (untrusted)"), "{cli}");
    assert!(
        cli.contains("not a skill") && cli.contains("no name"),
        "{cli}"
    );
    let shown = stdout(&daemon.cli(&["skills", "show", "invoices"]));
    assert!(shown.contains("Add them up."), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_skill_grants_nothing_and_an_edit_keeps_the_prompt_prefix() {
    let library = Library::new();
    let model = ScriptedModel::start(
        vec![
            one_call("call_1", "skill_load", json!({"name": "cleanup"})),
            one_call(
                "call_2",
                "fs_write",
                json!({"path": "note.txt", "content": "cleaned"}),
            ),
            text_answer("Waiting for you."),
            one_call("call_3", "skill_load", json!({"name": "invoices"})),
            text_answer("Loaded again."),
        ],
        4096,
    );
    let daemon = TestDaemon::start_with(&format!("{}{}", config(model.port), library.config()));
    let first = daemon.cli(&["send", "--wait", "tidy my downloads"]);
    assert!(stdout(&first).contains("Waiting for you."), "{first:?}");
    assert!(
        !daemon.path().join("workspace/note.txt").exists(),
        "the write waits for the owner"
    );
    let pending = stdout(&daemon.cli(&["pending", "--json"]));
    assert!(pending.contains("fs_write"), "{pending}");
    // Edit a skill: the next load gives the new text; the tools and system text stay.
    write_skill(
        library.trusted.path(),
        "invoices",
        "invoices",
        "Sum this month's invoices",
        "1. Ask the owner first.",
    );
    let second = daemon.cli(&["send", "--wait", "the invoices please"]);
    assert!(stdout(&second).contains("Loaded again."), "{second:?}");
    let requests = model.requests();
    let loaded = requests[4]["messages"].to_string();
    assert!(loaded.contains("Ask the owner first."), "{loaded}");
    // The system text names the trusted skill and only counts the untrusted one.
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("invoices — Sum this month's invoices"),
        "{system}"
    );
    assert!(system.contains("1 more from untrusted folders"), "{system}");
    assert!(!system.contains("downloads"), "{system}");
    assert_eq!(
        requests[0]["tools"], requests[4]["tools"],
        "the tools never change"
    );
    assert_eq!(
        requests[0]["messages"][0], requests[4]["messages"][0],
        "the system text never changes"
    );
}
