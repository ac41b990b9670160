//! Tests that walk the registry and run the built-ins through the real pipeline.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use steward_events::{ToolCallRequest, ToolOutcome, ToolStatus, TrajectoryId};
use tokio_util::sync::CancellationToken;

use crate::handler::{ToolFuture, ToolHandler};
use crate::{
    Concurrency, ExecutionContext, SideEffect, Tier, ToolContract, ToolError, ToolPipeline,
};

/// Every built-in, the shell unconfined (these tests never run a command).
fn with_shell() -> crate::registry::ToolRegistryBuilder {
    super::register_shell(super::builtins(), None)
}

fn ctx() -> ExecutionContext {
    ExecutionContext {
        files: Arc::new(crate::files::FileAccess::new(&[std::env::temp_dir()]).unwrap()),
        trajectory: TrajectoryId::main(),
        origin_event: None,
        call_id: String::new(),
        mode: crate::policy::Mode::Normal,
        step_trust: steward_events::Trust::Owner,
        idempotency_key: None,
        owner: Arc::new(Silent),
        cancel: CancellationToken::new(),
        only_tools: None,
    }
}

fn call(id: &str, tool: &str, args: Value) -> ToolCallRequest {
    ToolCallRequest {
        call_id: id.into(),
        tool: tool.into(),
        args,
        origin: None,
    }
}

fn test_budget() -> crate::budget::ResultBudget {
    crate::budget::ResultBudget::new(
        std::env::temp_dir().join("steward-test-spill"),
        crate::budget::BATCH_BUDGET_BYTES,
    )
}

fn pipeline() -> ToolPipeline {
    ToolPipeline::new(with_shell().build().unwrap(), test_budget())
}

#[test]
fn every_builtin_declares_a_complete_contract() {
    let registry = with_shell().build().unwrap();
    let contracts: Vec<_> = registry.contracts();
    assert!(contracts.len() >= 2);
    for c in contracts {
        assert!(!c.description.is_empty(), "{} has no description", c.name);
        assert_eq!(c.parameters["type"], "object", "{}", c.name);
        assert!(jsonschema::meta::is_valid(&c.parameters), "{}", c.name);
        assert!(c.result_budget > 0, "{}", c.name);
    }
}

#[test]
fn every_non_idempotent_or_system_changing_tool_asks_under_the_default_policy() {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new().path(dir.path()).open().unwrap();
    let registry = super::register_memory(with_shell(), db.open_tree("memory").unwrap())
        .build()
        .unwrap();
    let decide = |contract, step_trust| {
        crate::policy::decide(crate::policy::PolicyInput {
            contract,
            mode: crate::policy::Mode::Normal,
            in_lane: false,
            step_trust,
            sends_out: false,
            rules: &[],
        })
    };
    for contract in &registry.contracts() {
        let must_ask = !contract.idempotent || contract.side_effect == SideEffect::SystemChange;
        let decision = decide(contract, steward_events::Trust::Owner);
        let asks = matches!(decision, crate::policy::Decision::Confirm { .. });
        assert_eq!(asks, must_ask, "{}: {decision:?}", contract.name);
        // Under taint, everything that changes something asks.
        if contract.side_effect != SideEffect::ReadOnly {
            let tainted = decide(contract, steward_events::Trust::Untrusted);
            assert!(
                matches!(tainted, crate::policy::Decision::Confirm { .. }),
                "{}",
                contract.name
            );
        }
    }
}

#[tokio::test]
async fn invalid_arguments_are_reported_not_fixed() {
    let p = pipeline();
    let table = [
        (json!({}), "secs"),
        (json!({"secs": "5"}), "number"),
        (json!({"secs": -1}), "minimum"),
        (json!({"secs": 1, "extra": true}), "extra"),
    ];
    for (args, hint) in table {
        let out = p.execute(&call("c", "sleep", args.clone()), &ctx()).await;
        assert_eq!(out.status, ToolStatus::Error, "{args}");
        let text = out.content.as_str().unwrap();
        assert!(text.contains("invalid arguments for `sleep`"), "{text}");
        assert!(text.contains(hint), "{args}: {text}");
    }
}

#[tokio::test]
async fn unknown_and_disabled_tools_are_refused_at_execution() {
    let out = pipeline()
        .execute(&call("c", "nope", json!({})), &ctx())
        .await;
    assert_eq!(out, ToolOutcome::error("unknown tool `nope`"));
    // A near miss gets a suggestion.
    for typo in ["fs_raed", "fs-read", "FS_READ", "fsread"] {
        let out = pipeline()
            .execute(&call("c", typo, json!({})), &ctx())
            .await;
        assert_eq!(
            out,
            ToolOutcome::error(format!("unknown tool `{typo}`; did you mean `fs_read`?")),
            "{typo}"
        );
    }

    let registry = with_shell().disable("echo").build().unwrap();
    assert!(registry.specs(false).iter().all(|s| s.name != "echo"));
    let p = ToolPipeline::new(registry, test_budget());
    let out = p
        .execute(&call("c", "echo", json!({"text": "x"})), &ctx())
        .await;
    assert_eq!(
        out,
        ToolOutcome::error("tool `echo` is disabled: tools.deny has \"echo\"")
    );

    // The default profile has no shell: the error says which profile brings it.
    let p = ToolPipeline::new(with_shell().build().unwrap(), test_budget());
    let out = p
        .execute(&call("c", "shell", json!({"command": "ls"})), &ctx())
        .await;
    assert_eq!(
        out,
        ToolOutcome::error(
            "tool `shell` is disabled: it comes with tools.profile = \"coding\" (or add \"shell\" to tools.allow)"
        )
    );
}

/// A schema that does not compile: an MCP server's tool is refused when offered; one of the
/// daemon's own (compiled at its first call) refuses that call with the reason, and never runs
/// unchecked. A schema that is not an object fails the build at once.
#[tokio::test]
async fn broken_declarations_are_refused() {
    let broken = json!({"type": "object", "properties": {"x": {"type": 7}}});
    let mut own = super::echo::contract();
    own.parameters = broken.clone();
    let registry = crate::ToolRegistryBuilder::new()
        .register(own, super::echo::Echo)
        .build()
        .expect("its schema is compiled at the first call");
    let out = ToolPipeline::new(registry.clone(), test_budget())
        .execute(&call("c", "echo", json!({"x": 1})), &ctx())
        .await;
    assert_eq!(out.status, ToolStatus::Error, "{out:?}");
    let reason = out.content.to_string();
    assert!(
        reason.contains("tool `echo` declares an invalid JSON Schema"),
        "{reason}"
    );

    let mut offered = deferred("calendar_add_event", "Add.");
    offered.parameters = broken;
    let rejected = registry.replace_source(
        &crate::ToolSource::Mcp("calendar".into()),
        vec![(
            offered,
            Arc::new(Counter(Arc::default())) as Arc<dyn ToolHandler>,
        )],
    );
    assert!(
        matches!(&rejected[..], [ToolError::InvalidSchema { tool, .. }] if tool == "calendar_add_event"),
        "{rejected:?}"
    );
    assert!(
        !registry
            .specs(false)
            .iter()
            .any(|s| s.name == "calendar_add_event")
    );

    let mut not_an_object = super::echo::contract();
    not_an_object.parameters = json!({"type": "array"});
    let err = crate::ToolRegistryBuilder::new()
        .register(not_an_object, super::echo::Echo)
        .build()
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidSchema { .. }), "{err}");

    let err = with_shell()
        .register(super::echo::contract(), super::echo::Echo)
        .build()
        .unwrap_err();
    assert!(
        matches!(err, ToolError::DuplicateTool(ref n) if n == "echo"),
        "{err}"
    );

    let err = with_shell().disable("nope").build().unwrap_err();
    assert!(matches!(err, ToolError::UnknownSelection(_)), "{err}");
}

#[tokio::test(start_paused = true)]
async fn sleep_returns_early_with_a_cancelled_result() {
    let ctx = ctx();
    let cancel = ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        cancel.cancel();
    });
    let out = pipeline()
        .execute(&call("c", "sleep", json!({"secs": 60})), &ctx)
        .await;
    assert_eq!(out.status, ToolStatus::Cancelled);
    let slept = out.content["slept_secs"].as_f64().unwrap();
    assert!((1.9..2.1).contains(&slept), "slept {slept}");
}

/// A tool that records when it starts and ends, to observe batch parallelism.
struct Probe {
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ToolHandler for Probe {
    fn call<'a>(&'a self, args: &'a Value, _ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let id = args["id"].as_str().unwrap_or("?").to_owned();
            self.log.lock().unwrap().push(format!("start {id}"));
            tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
            self.log.lock().unwrap().push(format!("end {id}"));
            ToolOutcome::ok(json!(id))
        })
    }
}

fn probe_contract(name: &str, concurrency: Concurrency) -> ToolContract {
    ToolContract {
        name: name.into(),
        description: "probe".into(),
        parameters: json!({"type": "object"}),
        side_effect: SideEffect::ReadOnly,
        idempotent: true,
        concurrency,
        tier: Tier::Core,
        source: crate::ToolSource::Builtin,
        // In the default (assistant) profile.
        groups: vec!["group:debug".into()],
        usage_guidance: None,
        search_hint: None,
        result_budget: 100,
        disableable: true,
        allowed_in_lane: true,
        returns_untrusted: crate::contract::Applies::Never,
        sends_out: crate::contract::Applies::Never,
    }
}

#[tokio::test(start_paused = true)]
async fn safe_calls_run_together_unsafe_ones_alone_results_in_order() {
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let registry = crate::ToolRegistryBuilder::new()
        .register(
            probe_contract("safe", Concurrency::Safe),
            Probe { log: log.clone() },
        )
        .register(
            probe_contract("unsafe", Concurrency::Unsafe),
            Probe { log: log.clone() },
        )
        .build()
        .unwrap();
    let p = ToolPipeline::new(registry, test_budget());
    let calls = vec![
        call("1", "safe", json!({"id": "a", "ms": 30})),
        call("2", "safe", json!({"id": "b", "ms": 10})),
        call("3", "unsafe", json!({"id": "c", "ms": 5})),
        call("4", "safe", json!({"id": "d", "ms": 1})),
    ];
    let outcomes = p.execute_batch(&calls, &ctx()).await;
    let ids: Vec<Value> = outcomes.into_iter().map(|o| o.content).collect();
    assert_eq!(ids, vec![json!("a"), json!("b"), json!("c"), json!("d")]);
    let log = log.lock().unwrap().clone();
    // a and b overlap (b ends before a), c starts only after both ended.
    assert_eq!(&log[..2], ["start a", "start b"]);
    assert_eq!(&log[2..4], ["end b", "end a"]);
    assert_eq!(&log[4..], ["start c", "end c", "start d", "end d"]);
}

/// A write tool that counts its runs.
struct Counter(Arc<std::sync::atomic::AtomicUsize>);

impl ToolHandler for Counter {
    fn call<'a>(&'a self, _args: &'a Value, _ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            ToolOutcome::ok(json!({ "run": n }))
        })
    }
}

#[tokio::test]
async fn a_recorded_write_is_not_run_twice_for_the_same_event() {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new().path(dir.path()).open().unwrap();
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut contract = probe_contract("counter", Concurrency::Unsafe);
    contract.side_effect = SideEffect::Write;
    contract.idempotent = false;
    let registry = crate::ToolRegistryBuilder::new()
        .register(contract, Counter(runs.clone()))
        .build()
        .unwrap();
    let p = ToolPipeline::new(registry, test_budget())
        .with_ledger(crate::ledger::Ledger::new(db.open_tree("ledger").unwrap()));
    let origin = steward_events::EventId::generate();
    let mut first = call("1", "counter", json!({"n": 1}));
    first.origin = Some(origin);
    let mut again = first.clone();
    again.call_id = "2".into();
    assert_eq!(p.execute(&first, &ctx()).await.content, json!({"run": 1}));
    assert_eq!(
        p.execute(&again, &ctx()).await.content,
        json!({"run": 1}),
        "the recorded result"
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    let mut other_event = first.clone();
    other_event.origin = Some(steward_events::EventId::generate());
    assert_eq!(
        p.execute(&other_event, &ctx()).await.content,
        json!({"run": 2}),
        "another event runs it anew"
    );
}

/// An owner with no sessions connected.
#[derive(Debug)]
struct Silent;

impl crate::OwnerChannel for Silent {
    fn notify<'a>(
        &'a self,
        _text: &'a str,
        _origin: Option<steward_events::EventId>,
    ) -> crate::OwnerFuture<'a> {
        Box::pin(async { Ok(1) })
    }
}

fn deferred(name: &str, description: &str) -> ToolContract {
    let mut contract = probe_contract(name, Concurrency::Safe);
    contract.description = description.into();
    contract.tier = Tier::Deferred;
    contract.source = crate::ToolSource::Mcp("calendar".into());
    contract.groups = vec!["group:mcp:calendar".into()];
    contract.parameters = json!({"type": "object", "properties": {"when": {"type": "string", "description": "ISO date"}}, "required": ["when"]});
    contract
}

#[tokio::test]
async fn tool_search_returns_schemas_and_call_tool_runs_them_through_the_pipeline() {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let registry = with_shell()
        .register(
            deferred("calendar_add_event", "Add an event to the calendar."),
            Counter(runs.clone()),
        )
        .register(
            deferred("calendar_list", "List the events of a day."),
            Counter(runs.clone()),
        )
        .build()
        .unwrap();
    let p = ToolPipeline::new(registry, test_budget());
    let search = |query: &str| call("s", "tool_search", json!({"query": query}));

    let out = p.execute(&search("add a calendar event"), &ctx()).await;
    assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
    assert_eq!(
        out.content["tools"][0]["name"], "calendar_add_event",
        "{out:?}"
    );
    assert_eq!(
        out.content["tools"][0]["parameters"]["required"],
        json!(["when"])
    );

    let out = p
        .execute(&search("select:calendar_list,fs_read"), &ctx())
        .await;
    let names: Vec<&str> = out.content["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["calendar_list", "fs_read"]);

    // `+list`: only names with the part "list"; the rest of the words rank them.
    let out = p.execute(&search("+list calendar"), &ctx()).await;
    let names: Vec<&str> = out.content["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["calendar_list", "fs_list"], "{out:?}");

    let out = p.execute(&search("quantum chromodynamics"), &ctx()).await;
    assert_eq!(out.content["tools"], json!([]));
    assert!(
        out.content["message"].as_str().unwrap().contains("broader"),
        "{out:?}"
    );

    let out = p.execute(&search("select:"), &ctx()).await;
    assert_eq!(out.status, ToolStatus::Error);

    // call_tool runs the inner tool as itself: its schema is checked, it runs once.
    let via = |args: Value| {
        call(
            "c",
            "call_tool",
            json!({"name": "calendar_add_event", "arguments": args}),
        )
    };
    let out = p.execute(&via(json!({})), &ctx()).await;
    assert!(
        out.content_text()
            .contains("invalid arguments for `calendar_add_event`"),
        "{out:?}"
    );
    let out = p.execute(&via(json!({"when": "2026-12-01"})), &ctx()).await;
    assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    let out = p
        .execute(&call("c", "call_tool", json!({"name": "nope"})), &ctx())
        .await;
    assert_eq!(out, ToolOutcome::error("unknown tool `nope`"));
    let out = p
        .execute(
            &call("c", "call_tool", json!({"name": "call_tool"})),
            &ctx(),
        )
        .await;
    assert!(
        out.content_text().contains("cannot call call_tool"),
        "{out:?}"
    );
    // Calling the deferred tool directly by name works too.
    let out = p
        .execute(
            &call("d", "calendar_list", json!({"when": "today"})),
            &ctx(),
        )
        .await;
    assert_eq!(out.status, ToolStatus::Ok, "{out:?}");
}

#[test]
fn deferred_tools_are_named_only_past_the_threshold() {
    let table = [
        // (schema bytes, window tokens, pct, deferred)
        (0, 32_768, 10, false),
        (4_000, 32_768, 10, false),
        (13_200, 32_768, 10, true),
        (4_000, 1_000_000, 10, false),
        (1, 32_768, 0, true),
        (40_000, 32_768, 100, false),
    ];
    for (bytes, window, pct, expected) in table {
        let deferral = crate::Deferral {
            context_window_tokens: window,
            threshold_pct: pct,
        };
        assert_eq!(deferral.applies(bytes), expected, "{bytes} {window} {pct}");
    }
    let build = |pct| {
        with_shell()
            .register(
                deferred("calendar_add_event", "Add an event."),
                Counter(Arc::default()),
            )
            .defer(crate::Deferral {
                context_window_tokens: 32_768,
                threshold_pct: pct,
            })
            .build()
            .unwrap()
    };
    let tier = |pct| {
        build(pct)
            .specs(false)
            .into_iter()
            .find(|s| s.name == "calendar_add_event")
            .unwrap()
            .tier
    };
    assert_eq!(tier(10), Tier::Core, "one small schema is sent in full");
    assert_eq!(tier(0), Tier::Deferred);
    let core_tiers = build(0).specs(false);
    assert!(
        core_tiers
            .iter()
            .filter(|s| s.name != "calendar_add_event")
            .all(|s| s.tier == Tier::Core)
    );
}

#[test]
fn a_source_is_replaced_as_a_whole_and_selection_errors_are_named() {
    let registry = with_shell().build().unwrap();
    let source = crate::ToolSource::Mcp("calendar".into());
    let handler = || -> Arc<dyn ToolHandler> { Arc::new(Counter(Arc::default())) };
    let rejected = registry.replace_source(
        &source,
        vec![
            (deferred("calendar_add_event", "Add."), handler()),
            (deferred("fs_read", "Clashes with a built-in."), handler()),
        ],
    );
    assert!(
        matches!(&rejected[..], [ToolError::DuplicateTool(n)] if n == "fs_read"),
        "{rejected:?}"
    );
    assert!(
        registry
            .specs(false)
            .iter()
            .any(|s| s.name == "calendar_add_event")
    );
    registry.replace_source(
        &source,
        vec![(deferred("calendar_list", "List."), handler())],
    );
    let names: Vec<String> = registry.specs(false).into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"calendar_list".to_owned())
            && !names.contains(&"calendar_add_event".to_owned())
    );

    let err = with_shell().disable("tool_search").build().unwrap_err();
    assert!(
        matches!(err, ToolError::NotDisableable(ref n) if n == "tool_search"),
        "{err}"
    );
    let err = with_shell().disable("group:nope").build().unwrap_err();
    assert!(matches!(err, ToolError::UnknownSelection(_)), "{err}");
    let ok = with_shell()
        .expect_mcp_servers(vec!["github".into()])
        .disable("github_delete_repo")
        .build();
    assert!(ok.is_ok());
}
