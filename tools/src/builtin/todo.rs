//! `todo_write` and `todo_read`: the task list of one trajectory (the main conversation, or
//! a side lane's own), kept in sled so it survives restarts, shown in `steward status` and
//! on the web page. The model is told (in the tools' guidance) to keep one for work of more
//! than a few steps, so that long work stays visible to the owner and to itself after a
//! compaction.
//!
//! Decided here: `todo_write` replaces the whole list (a list the model rewrites is simpler
//! to keep consistent than edits by index); it is idempotent for that reason. At most
//! [`MAX_ITEMS`] items of at most 500 characters each.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{SideEffect, ToolContract};
use crate::handler::{ToolFuture, ToolHandler};
use crate::registry::ToolRegistryBuilder;

pub const MAX_ITEMS: usize = 50;

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Done,
}

/// One task of the list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    #[schemars(length(min = 1, max = 500))]
    pub text: String,
    pub status: TodoStatus,
}

/// The task lists, one per trajectory (keyed by its id).
#[derive(Clone, Debug)]
pub struct TodoLists(sled::Tree);

impl TodoLists {
    pub fn new(tree: sled::Tree) -> Self {
        Self(tree)
    }

    /// The list of `trajectory` (empty when it has none).
    pub fn get(&self, trajectory: &str) -> Result<Vec<TodoItem>, String> {
        match self.0.get(trajectory.as_bytes()) {
            Ok(Some(bytes)) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("the task list of {trajectory} is unreadable: {e}")),
            Ok(None) => Ok(Vec::new()),
            Err(e) => Err(format!("task list storage failed: {e}")),
        }
    }

    fn set(&self, trajectory: &str, items: &[TodoItem]) -> Result<(), String> {
        let bytes = serde_json::to_vec(items).map_err(|e| e.to_string())?;
        self.0
            .insert(trajectory.as_bytes(), bytes)
            .map(drop)
            .map_err(|e| format!("task list storage failed: {e}"))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// The whole list, in order; it replaces the previous one.
    #[schemars(length(max = MAX_ITEMS))]
    items: Vec<TodoItem>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {}

const GUIDANCE: &str = "For work of more than a few steps, keep a task list with todo_write (the whole list each time, statuses pending / in_progress / done) and update it as you go; the owner sees it.";

/// Adds `todo_write` and `todo_read` over `lists`.
pub fn register_todo(builder: ToolRegistryBuilder, lists: TodoLists) -> ToolRegistryBuilder {
    builder
        .register(
            contract(
                "todo_write",
                "Replace this conversation's task list (the whole list, in order).",
                SideEffect::Write,
                crate::args::schema::<WriteArgs>(),
            ),
            Todo {
                lists: lists.clone(),
                write: true,
            },
        )
        .register(
            contract(
                "todo_read",
                "Read this conversation's task list.",
                SideEffect::ReadOnly,
                crate::args::schema::<ReadArgs>(),
            ),
            Todo {
                lists,
                write: false,
            },
        )
}

fn contract(name: &str, description: &str, effect: SideEffect, parameters: Value) -> ToolContract {
    ToolContract::with_effect(effect, name, description, parameters)
        .idempotent(true)
        .group("group:todo")
        .hint("task list plan steps progress checklist")
        .guidance(GUIDANCE)
        .in_lane(true)
        .budget(64 * 1024)
}

struct Todo {
    lists: TodoLists,
    write: bool,
}

impl ToolHandler for Todo {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let trajectory = ctx.trajectory.as_str();
            let done = if self.write {
                match crate::args::parse::<WriteArgs>(args) {
                    Ok(WriteArgs { items }) => self.lists.set(trajectory, &items).map(|()| items),
                    Err(refused) => return refused,
                }
            } else {
                match crate::args::parse::<ReadArgs>(args) {
                    Ok(ReadArgs {}) => self.lists.get(trajectory),
                    Err(refused) => return refused,
                }
            };
            match done {
                Ok(items) => ToolOutcome::ok(json!({ "items": items })),
                Err(e) => ToolOutcome::error(e),
            }
        })
    }
}
