//! The `watch_*` tools (group `fs`): the model adds, lists and deletes file watches through
//! the same [`WatchSet`] as `steward watch list`. A watch only reports names of changed
//! files (untrusted), so adding one is an idempotent write that needs no confirmation.

use schemars::JsonSchema;
use serde::Deserialize;
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

/// What `watch_create` takes (a [`WatchRow`] as the model may ask for it).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    #[schemars(pattern(r"^[A-Za-z0-9_-]{1,64}$"))]
    name: String,
    /// Absolute path
    path: std::path::PathBuf,
    recursive: Option<bool>,
    /// Globs, e.g. **/*.pdf
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    events: Vec<ChangeKind>,
    #[schemars(range(min = 10, max = 600000))]
    debounce_ms: Option<u64>,
    /// What the event says before the list of changes
    text: Option<String>,
}

#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum ChangeKind {
    Create,
    Modify,
    Remove,
    Rename,
}

impl From<CreateArgs> for WatchRow {
    fn from(args: CreateArgs) -> Self {
        WatchRow {
            name: args.name,
            path: args.path,
            recursive: args.recursive.unwrap_or(true),
            include: args.include,
            exclude: args.exclude,
            events: args
                .events
                .into_iter()
                .map(|kind| {
                    match kind {
                        ChangeKind::Create => "create",
                        ChangeKind::Modify => "modify",
                        ChangeKind::Remove => "remove",
                        ChangeKind::Rename => "rename",
                    }
                    .to_owned()
                })
                .collect(),
            debounce_ms: args.debounce_ms,
            text: args.text,
            urgency: None,
            origin: String::new(),
            state: String::new(),
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ByName {
    name: String,
}

pub fn register(builder: ToolRegistryBuilder, watches: &WatchSet) -> ToolRegistryBuilder {
    let create = watch_tool(
        ToolContract::write(
            "watch_create",
            "Watch a directory: changes under it (debounced, bursts coalesced) come to you as events.",
            steward_tools::args::schema::<CreateArgs>(),
        )
        .idempotent(true),
    );
    let list = watch_tool(ToolContract::read_only(
        "watch_list",
        "List the file watches and their state.",
        steward_tools::args::schema::<steward_tools::args::NoArguments>(),
    ));
    let delete = watch_tool(
        ToolContract::write(
            "watch_delete",
            "Delete a file watch made at run time.",
            steward_tools::args::schema::<ByName>(),
        )
        .idempotent(true),
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
                Op::Create => match steward_tools::args::parse::<CreateArgs>(args) {
                    Ok(new) => self.watches.create(new.into()).map(|row| json!(row)),
                    Err(refused) => return refused,
                },
                Op::List => Ok(json!({"watches": self.watches.list()})),
                Op::Delete => match steward_tools::args::parse::<ByName>(args) {
                    Ok(ByName { name }) => self
                        .watches
                        .delete(&name)
                        .map(|()| json!({"deleted": name})),
                    Err(refused) => return refused,
                },
            };
            match result {
                Ok(content) => ToolOutcome::ok(content),
                Err(e) => ToolOutcome::error(e.to_string()),
            }
        })
    }
}
