//! The `watch_*` tools (group `fs`): the model adds, lists and deletes file watches through
//! the same [`WatchSet`] as `steward watch list`. A watch only reports names of changed
//! files (untrusted), so adding one is an idempotent write that needs no confirmation.

use serde_json::{Value, json};
use steward_events::ToolOutcome;
use steward_tools::{
    Concurrency, ExecutionContext, SideEffect, Tier, ToolContract, ToolFuture, ToolHandler,
    ToolRegistryBuilder, ToolSource,
};

use super::set::{WatchRow, WatchSet};

fn contract(name: &str, description: &str, parameters: Value, effect: SideEffect) -> ToolContract {
    ToolContract {
        name: name.into(),
        description: description.into(),
        parameters,
        side_effect: effect,
        idempotent: true,
        concurrency: if effect == SideEffect::ReadOnly {
            Concurrency::Safe
        } else {
            Concurrency::Unsafe
        },
        tier: Tier::Core,
        source: ToolSource::Builtin,
        groups: vec!["group:fs".into()],
        usage_guidance: None,
        search_hint: Some("watch folder directory changes notify files appear".into()),
        result_budget: 32 * 1024,
        disableable: true,
        allowed_in_lane: effect == SideEffect::ReadOnly,
    }
}

pub fn register(builder: ToolRegistryBuilder, watches: &WatchSet) -> ToolRegistryBuilder {
    let create = contract(
        "watch_create",
        "Watch a directory: changes under it (debounced, bursts coalesced) come to you as events.",
        json!({
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
        }),
        SideEffect::Write,
    );
    let list = contract(
        "watch_list",
        "List the file watches and their state.",
        json!({"type": "object", "additionalProperties": false}),
        SideEffect::ReadOnly,
    );
    let delete = contract(
        "watch_delete",
        "Delete a file watch made at run time.",
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}),
        SideEffect::Write,
    );
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
