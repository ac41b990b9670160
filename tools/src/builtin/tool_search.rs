//! `tool_search` and `call_tool`: how a model reaches deferred tools without the tools array
//! ever changing (the prompt prefix stays byte-identical, DESIGN.md §3).
//!
//! `tool_search` returns the full schemas of the best matches inside its result; the model
//! then calls a found tool by name, or through `call_tool {name, arguments}` where a
//! provider only accepts calls to declared tools. `call_tool` is unwrapped by the pipeline
//! into the inner call before lookup ([`unwrap_call_tool`]), so the inner tool goes through
//! every stage as itself: its schema, its safety check, its policy, its ledger key.
//!
//! Both are part of every registry and cannot be disabled.

use std::sync::Weak;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{Concurrency, ToolContract, ToolSpec};
use crate::handler::{ToolFuture, ToolHandler};
use crate::search::{Query, parse_query};

const DEFAULT_RESULTS: u64 = 5;
const MAX_RESULTS: u64 = 20;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// select:a,b | keywords | +name_word keywords
    query: String,
    /// How many tools to return (default 5).
    #[schemars(range(min = 1, max = MAX_RESULTS))]
    max_results: Option<u64>,
}

/// What `call_tool` takes; the pipeline reads it before validation
/// ([`unwrap_call_tool`]), so that the inner call is checked as itself.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct CallToolArgs {
    /// The tool's name.
    name: String,
    /// The tool's arguments, as its schema says.
    arguments: Option<serde_json::Map<String, Value>>,
}

pub fn search_contract() -> ToolContract {
    ToolContract::read_only(
        "tool_search",
        "Find tools that are not loaded yet and get their full schemas. Query forms: \
\"select:name1,name2\" loads tools by exact name; free keywords rank tools by relevance; \
\"+word more words\" requires `word` in the tool's name.",
        crate::args::schema::<SearchArgs>(),
    )
    .group("group:tools")
    .guidance(
        "Tools listed by name in the system text are loaded with it. Call a found tool by \
its name, or through call_tool. If a tool fails to execute, do not search for it again.",
    )
    .budget(64 * 1024)
    .always_enabled()
}

pub fn call_contract() -> ToolContract {
    // The inner call's own contract decides everything; see the module docs.
    ToolContract::read_only(
        "call_tool",
        "Call a tool found with tool_search by its name, with its arguments.",
        crate::args::schema::<CallToolArgs>(),
    )
    .concurrency(Concurrency::FromArgs)
    .group("group:tools")
    .budget(64 * 1024)
    .always_enabled()
}

/// The inner call of a `call_tool` call: `(name, arguments)`.
pub fn unwrap_call_tool<'a>(tool: &str, args: &'a Value) -> Option<(&'a str, &'a Value)> {
    if tool != "call_tool" {
        return None;
    }
    static EMPTY: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!({}));
    let name = args.get("name")?.as_str()?;
    Some((name, args.get("arguments").unwrap_or(&EMPTY)))
}

/// What `tool_search` searches: the registry it belongs to.
pub(crate) trait ToolFinder: Send + Sync {
    fn find(&self, query: &Query, max_results: usize, in_lane: bool) -> Vec<ToolSpec>;
    /// A ranked search found these tools (for usage learning).
    fn found(&self, trajectory: &steward_events::TrajectoryId, request: &str, tools: Vec<String>);
    /// The skills matching `text` (see [`crate::skills::SkillLibrary::search`]).
    fn find_skills(&self, text: &str, max_results: usize) -> Vec<crate::skills::Skill>;
}

/// Matching skills as `tool_search` shows them: a trusted skill's name and description; of
/// untrusted ones only how many there are (their words would taint the step, so they are
/// read through `skill_list` or `skill_load`, whose results do).
fn skills_found(skills: &[crate::skills::Skill]) -> Option<Value> {
    if skills.is_empty() {
        return None;
    }
    let trusted: Vec<Value> = skills
        .iter()
        .filter(|s| s.trusted)
        .map(|s| json!({"name": s.name, "description": s.description}))
        .collect();
    let untrusted = skills.len() - trusted.len();
    Some(json!({
        "skills": trusted,
        "untrusted_skills": untrusted,
        "how": "Load a skill with skill_load {name}; skill_list lists every skill.",
    }))
}

/// Searches the registry it belongs to (a weak link: the registry owns this handler).
pub struct ToolSearch(pub(crate) Weak<dyn ToolFinder>);

impl ToolHandler for ToolSearch {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(registry) = self.0.upgrade() else {
                return ToolOutcome::error("the tool registry is shutting down");
            };
            let args: SearchArgs = match crate::args::parse(args) {
                Ok(args) => args,
                Err(refused) => return refused,
            };
            let text = args.query.as_str();
            let query = match parse_query(text) {
                Ok(query) => query,
                Err(e) => return ToolOutcome::error(e.to_string()),
            };
            let max = args.max_results.unwrap_or(DEFAULT_RESULTS).min(MAX_RESULTS) as usize;
            let found = registry.find(&query, max, !ctx.trajectory.is_main());
            if matches!(query, Query::Ranked { .. }) {
                let names = found.iter().map(|spec| spec.name.clone()).collect();
                registry.found(&ctx.trajectory, text, names);
            }
            let skills = skills_found(&registry.find_skills(text, max));
            let mut answer = if found.is_empty() {
                json!({
                    "tools": [],
                    "message": format!("No tool matches {text:?}. Try broader or different words, or select:NAME if you know the name."),
                })
            } else {
                json!({
                    "tools": found,
                    "message": "Call these tools by name, or through call_tool {name, arguments}.",
                })
            };
            if let Some(skills) = skills {
                answer["skills"] = skills;
            }
            ToolOutcome::ok(answer)
        })
    }
}

/// Reached only when the pipeline left the call as it was: `call_tool` naming itself.
pub struct CallTool;

impl ToolHandler for CallTool {
    fn call<'a>(&'a self, _args: &'a Value, _ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async {
            ToolOutcome::error("call_tool cannot call call_tool; give the name of the tool to run")
        })
    }

    fn concurrency_safe_for(&self, _args: &Value) -> bool {
        // The registry asks the inner tool instead (see `is_concurrency_safe`).
        false
    }
}
