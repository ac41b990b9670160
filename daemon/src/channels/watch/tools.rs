//! The `watch_*` tools (group `fs`): the model adds, lists and deletes file watches through
//! the same [`WatchSet`] as `steward watch list`. A watch only reports names of changed
//! files (untrusted), so adding one is an idempotent write that needs no confirmation.

use serde_json::{Value, json};
use steward_events::ToolOutcome;
use steward_tools::{ExecutionContext, ToolContract, ToolFuture, ToolHandler, ToolRegistryBuilder};

use super::set::WatchSet;
use steward_protocol::WatchRow;

/// What every watch tool shares (all idempotent: the same watch made or removed twice
/// leaves the same set).
fn watch_tool(contract: ToolContract) -> ToolContract {
    contract
        .group("group:fs")
        .hint("watch folder directory changes notify files appear")
        .budget(32 * 1024)
}

pub fn register(builder: ToolRegistryBuilder, watches: &WatchSet) -> ToolRegistryBuilder {
    let create = watch_tool(ToolContract::write("watch_create", "Watch a directory: changes under it (debounced, bursts coalesced) come to you as events.", json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                "path": {"type": "string", "description": "Absolute path"},
                "recursive": {"type": "boolean"},
                "include": {"type": "array", "items": {"type": "string"}, "description": "Globs, e.g. **/*.pdf"},
                "exclude": {"type": "array", "items": {"type": "string"}},
                "events": {"type": "array", "items": {"type": "string", "enum": ["create", "modify", "remove", "rename"]}},
                "debounce_ms": {"type": "integer", "minimum": 10, "maximum": 600000},
                "text": {"type": "string", "description": "What the event says before the list of changes"}
            },
            "required": ["name", "path"],
            "additionalProperties": false
        })).idempotent(true));
    let list = watch_tool(ToolContract::read_only(
        "watch_list",
        "List the file watches and their state.",
        json!({"type": "object", "additionalProperties": false}),
    ));
    let delete = watch_tool(ToolContract::write("watch_delete", "Delete a file watch made at run time.", json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false})).idempotent(true));
    let handler = |op| WatchTool {
        op,
        watches: watches.clone(),
    };
    builder
        .register(create, handler(Op::Create))
        .register(list, handler(Op::List))
        .register(delete, handler(Op::Delete))
}

#[derive(Clone, Copy)]
enum Op {
    Create,
    List,
    Delete,
}

struct WatchTool {
    op: Op,
    watches: WatchSet,
}

impl ToolHandler for WatchTool {
    fn call<'a>(&'a self, args: &'a Value, _ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let result = match self.op {
                Op::Create => match serde_json::from_value::<WatchRow>(args.clone()) {
                    Ok(row) => self.watches.create(row).map(|row| json!(row)),
                    Err(e) => return ToolOutcome::error(format!("invalid watch: {e}")),
                },
                Op::List => Ok(json!({"watches": self.watches.list()})),
                Op::Delete => {
                    let name = args["name"].as_str().unwrap_or_default();
                    self.watches.delete(name).map(|()| json!({"deleted": name}))
                }
            };
            match result {
                Ok(content) => ToolOutcome::ok(content),
                Err(e) => ToolOutcome::error(e.to_string()),
            }
        })
    }
}
