//! `memory_write`, `memory_read`, `memory_delete`, `memory_list`: small named notes the
//! assistant keeps across conversations and restarts, in the daemon's sled database.
//! Side lanes cannot write memory (policy refuses; the contracts also keep the write tools
//! out of lanes).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{SideEffect, ToolContract};
use crate::handler::{ToolFuture, ToolHandler};
use crate::registry::ToolRegistryBuilder;

const MAX_VALUE_BYTES: usize = 64 * 1024;
const MAX_LISTED: usize = 500;

#[derive(Serialize, Deserialize)]
struct Note {
    value: String,
    updated_at: chrono::DateTime<chrono::Utc>,
}

/// Adds the memory tools, keeping their notes in `tree`.
pub fn register_memory(builder: ToolRegistryBuilder, tree: sled::Tree) -> ToolRegistryBuilder {
    builder
        .register(
            contract(
                "memory_write",
                "Remember a note under a key (replaces an older one).",
                SideEffect::Write,
                crate::args::schema::<WriteArgs>(),
            ),
            Memory {
                tree: tree.clone(),
                op: Op::Write,
            },
        )
        .register(
            contract(
                "memory_read",
                "Read the note stored under a key.",
                SideEffect::ReadOnly,
                crate::args::schema::<KeyArgs>(),
            ),
            Memory {
                tree: tree.clone(),
                op: Op::Read,
            },
        )
        .register(
            contract(
                "memory_delete",
                "Forget the note under a key.",
                SideEffect::Write,
                crate::args::schema::<KeyArgs>(),
            ),
            Memory {
                tree: tree.clone(),
                op: Op::Delete,
            },
        )
        .register(
            contract(
                "memory_list",
                "List remembered keys, optionally those starting with a prefix.",
                SideEffect::ReadOnly,
                crate::args::schema::<ListArgs>(),
            ),
            Memory { tree, op: Op::List },
        )
}

/// A memory tool: its own schema, and what every memory tool shares (idempotent — writing
/// or deleting the same note again leaves the same memory — its group, words and budget).
fn contract(
    name: &str,
    description: &str,
    side_effect: SideEffect,
    parameters: Value,
) -> ToolContract {
    ToolContract::with_effect(side_effect, name, description, parameters)
        .idempotent(true)
        .group("group:memory")
        .hint("remember recall note store fact")
        .budget(100 * 1024)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    #[schemars(length(min = 1, max = 200))]
    key: String,
    #[schemars(length(max = MAX_VALUE_BYTES))]
    value: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KeyArgs {
    #[schemars(length(min = 1, max = 200))]
    key: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[schemars(length(max = 200))]
    prefix: Option<String>,
}

#[derive(Clone, Copy)]
enum Op {
    Write,
    Read,
    Delete,
    List,
}

struct Memory {
    tree: sled::Tree,
    op: Op,
}

impl Memory {
    fn run(&self, args: &Value) -> Result<Value, ToolOutcome> {
        let storage = |e: sled::Error| ToolOutcome::error(format!("memory storage failed: {e}"));
        match self.op {
            Op::Write => {
                let WriteArgs { key, value } = crate::args::parse(args)?;
                let note = Note {
                    value,
                    updated_at: chrono::Utc::now(),
                };
                let bytes =
                    serde_json::to_vec(&note).map_err(|e| ToolOutcome::error(e.to_string()))?;
                let replaced = self
                    .tree
                    .insert(key.as_bytes(), bytes)
                    .map_err(storage)?
                    .is_some();
                Ok(json!({"key": key, "replaced": replaced}))
            }
            Op::Read => {
                let KeyArgs { key } = crate::args::parse(args)?;
                let bytes = self
                    .tree
                    .get(key.as_bytes())
                    .map_err(storage)?
                    .ok_or_else(|| {
                        ToolOutcome::error(format!("nothing is remembered under `{key}`"))
                    })?;
                let note: Note = serde_json::from_slice(&bytes).map_err(|e| {
                    ToolOutcome::error(format!("the note under `{key}` is unreadable: {e}"))
                })?;
                Ok(json!({"key": key, "value": note.value, "updated_at": note.updated_at}))
            }
            Op::Delete => {
                let KeyArgs { key } = crate::args::parse(args)?;
                let existed = self.tree.remove(key.as_bytes()).map_err(storage)?.is_some();
                Ok(json!({"key": key, "deleted": existed}))
            }
            Op::List => {
                let ListArgs { prefix } = crate::args::parse(args)?;
                let prefix = prefix.unwrap_or_default();
                let mut keys = Vec::new();
                for item in self
                    .tree
                    .scan_prefix(prefix.as_bytes())
                    .take(MAX_LISTED + 1)
                {
                    let (key, bytes) = item.map_err(storage)?;
                    keys.push(json!({"key": String::from_utf8_lossy(&key), "bytes": bytes.len()}));
                }
                let truncated = keys.len() > MAX_LISTED;
                keys.truncate(MAX_LISTED);
                Ok(json!({"keys": keys, "truncated": truncated}))
            }
        }
    }
}

impl ToolHandler for Memory {
    fn call<'a>(&'a self, args: &'a Value, _ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match self.run(args) {
                Ok(content) => ToolOutcome::ok(content),
                Err(refused) => refused,
            }
        })
    }
}
