//! An MCP server's tools as Steward tools: contracts made from `tools/list` entries and a
//! handler that sends `tools/call`.
//!
//! Decisions:
//! - Names are `SERVER_TOOL`, cut to the 64 characters providers accept (with a hash of the
//!   full name, so two long names never collide); other characters become `_`.
//! - MCP names may hold `.` and `/`, so two remote names can map to one Steward name
//!   (`math.mul` and `math_mul`). No tool is dropped for it: the one whose name maps to
//!   itself keeps the plain name, every other one gets `_` and a hash of its remote name
//!   ([`local_names`]); the outcome depends only on the names, never on the listing order.
//!   A name listed twice is one tool (the first entry wins). A name that another source
//!   already has (a built-in, another server's tool) is hashed the same way: built-ins
//!   always keep theirs, and between two servers the one connected first keeps the plain
//!   name.
//! - An MCP tool is a non-idempotent `write` (so it is confirmed first) unless the config
//!   lists it in `read_only_tools` or `idempotent_tools`: `readOnlyHint` and
//!   `destructiveHint` come from the server and are only hints.
//! - Only read-only tools may run in side lanes, and they may share a batch.
//! - Results are marked untrusted: what an MCP server returns (issues, pages, mail) comes
//!   from outside, so it taints the step like a fetched web page.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use steward_config::McpServerConfig;
use steward_events::ToolOutcome;
use steward_tools::{
    Applies, ExecutionContext, SideEffect, Tier, ToolContract, ToolFuture, ToolHandler, ToolSource,
};

use super::connection::Connection;

const MAX_NAME: usize = 64;

/// FNV-1a: stable across builds and platforms, unlike std's hasher.
fn fnv1a(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// `name` cut to leave room for `_XXXXXXXX`, then the hash of `full`.
fn with_hash(name: &str, full: &str) -> String {
    let kept: String = name.chars().take(MAX_NAME - 9).collect();
    format!("{kept}_{:08x}", fnv1a(full))
}

/// The Steward name of a server's tool, before collisions are settled ([`local_names`]).
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean: String = format!("{server}_{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= MAX_NAME {
        return clean;
    }
    // `clean` is ASCII, so characters and bytes agree.
    with_hash(&clean, &format!("{server}_{tool}"))
}

/// One remote tool and the name Steward gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalName<'a> {
    pub remote: &'a str,
    pub local: String,
    /// The plain mapping was taken by another tool of the server; a hash was added.
    pub disambiguated: bool,
}

/// Steward names for the tools a server lists, in the order listed, each remote name once,
/// no two alike and none in `reserved` (the names other sources hold; see the module docs
/// for the rule).
pub fn local_names<'a>(
    server: &str,
    remotes: &[&'a str],
    reserved: &std::collections::HashSet<String>,
) -> Vec<LocalName<'a>> {
    let mut unique: Vec<&'a str> = Vec::with_capacity(remotes.len());
    let mut seen = std::collections::HashSet::new();
    for remote in remotes {
        if seen.insert(*remote) {
            unique.push(remote);
        }
    }
    let mut by_plain: std::collections::HashMap<String, Vec<&'a str>> =
        std::collections::HashMap::new();
    for remote in &unique {
        by_plain
            .entry(tool_name(server, remote))
            .or_default()
            .push(remote);
    }
    let mut taken: std::collections::HashSet<String> = reserved.clone();
    let mut names: std::collections::HashMap<&'a str, (String, bool)> =
        std::collections::HashMap::new();
    // Plain names first, so that a hashed name can never take one.
    for (plain, group) in &by_plain {
        if reserved.contains(plain) {
            continue;
        }
        let keeper = match group.as_slice() {
            [only] => Some(*only),
            _ => group
                .iter()
                .copied()
                .find(|remote| format!("{server}_{remote}") == *plain),
        };
        if let Some(keeper) = keeper {
            taken.insert(plain.clone());
            names.insert(keeper, (plain.clone(), false));
        }
    }
    let mut plains: Vec<&String> = by_plain.keys().collect();
    plains.sort();
    for plain in plains {
        let Some(mut group) = by_plain.get(plain).cloned() else {
            continue;
        };
        group.sort_unstable();
        for remote in group {
            if names.contains_key(remote) {
                continue;
            }
            let full = format!("{server}_{remote}");
            let mut local = with_hash(plain, &full);
            let mut salt = 0u32;
            while taken.contains(&local) {
                salt += 1;
                local = with_hash(plain, &format!("{full}#{salt}"));
            }
            taken.insert(local.clone());
            names.insert(remote, (local, true));
        }
    }
    unique
        .into_iter()
        .filter_map(|remote| {
            let (local, disambiguated) = names.remove(remote)?;
            Some(LocalName {
                remote,
                local,
                disambiguated,
            })
        })
        .collect()
}

/// The contract of one `tools/list` entry, named `name` ([`local_names`]); `None` when the
/// entry has no name.
pub fn contract(server: &McpServerConfig, tool: &Value, name: String) -> Option<ToolContract> {
    let remote = tool["name"].as_str().filter(|n| !n.is_empty())?;
    let read_only = server.read_only_tools.iter().any(|t| t == remote);
    let idempotent = read_only || server.idempotent_tools.iter().any(|t| t == remote);
    let title = tool["title"]
        .as_str()
        .or_else(|| tool.pointer("/annotations/title").and_then(Value::as_str));
    let description = match tool["description"]
        .as_str()
        .filter(|d| !d.trim().is_empty())
    {
        Some(d) => d.to_owned(),
        None => format!(
            "{} (from the MCP server {})",
            title.unwrap_or(remote),
            server.name
        ),
    };
    let mut parameters = match &tool["inputSchema"] {
        Value::Object(schema) => Value::Object(schema.clone()),
        _ => json!({"type": "object"}),
    };
    if let Some(schema) = parameters.as_object_mut() {
        schema.entry("type").or_insert_with(|| json!("object"));
    }
    let effect = if read_only {
        SideEffect::ReadOnly
    } else {
        SideEffect::Write
    };
    let mut contract = ToolContract::with_effect(effect, name, description, parameters)
        .idempotent(idempotent)
        .tier(if server.defer {
            Tier::Deferred
        } else {
            Tier::Core
        })
        .source(ToolSource::Mcp(server.name.clone()))
        .group(format!("group:mcp:{}", server.name))
        .budget(64 * 1024)
        // A server's answers are its words; a tool that acts may carry data to it.
        .returns_untrusted(Applies::Always)
        .sends_out(if read_only {
            Applies::Never
        } else {
            Applies::Always
        });
    if let Some(title) = title {
        contract = contract.hint(title);
    }
    Some(contract)
}

/// Calls one tool of one connected server.
pub struct McpTool {
    pub connection: Arc<Connection>,
    pub server: String,
    pub remote: String,
    pub timeout: Duration,
}

impl ToolHandler for McpTool {
    fn call<'a>(&'a self, args: &'a Value, _ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let params = json!({"name": self.remote, "arguments": args});
            let result = match self
                .connection
                .request("tools/call", params, self.timeout)
                .await
            {
                Ok(result) => result,
                Err(e) => return ToolOutcome::error(format!("MCP server {}: {e}", self.server)),
            };
            let text: Vec<&str> = result
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|block| block["text"].as_str())
                .collect();
            let text = text.join("\n");
            if result.get("isError").and_then(Value::as_bool) == Some(true) {
                return ToolOutcome::error(if text.is_empty() {
                    format!("the MCP tool {} failed", self.remote)
                } else {
                    text
                });
            }
            let structured = result.get("structuredContent").cloned();
            let mut content = serde_json::Map::new();
            content.insert("content".into(), text.into());
            if let Some(structured) = structured {
                content.insert("structured".into(), structured);
            }
            ToolOutcome::ok(Value::Object(content))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> McpServerConfig {
        McpServerConfig {
            name: "notes".into(),
            transport: steward_config::McpTransport::Http {
                url: "http://127.0.0.1:1/mcp".into(),
                bearer_token_env: None,
            },
            read_only_tools: vec!["search".into()],
            idempotent_tools: vec!["tag".into()],
            defer: true,
            call_timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn names_are_prefixed_cleaned_and_bounded() {
        assert_eq!(tool_name("notes", "search"), "notes_search");
        assert_eq!(tool_name("gh", "issues.list/all"), "gh_issues_list_all");
        let long = tool_name("server", &"x".repeat(80));
        assert_eq!(long.len(), 64);
        assert_ne!(long, tool_name("server", &"x".repeat(81)));
    }

    #[test]
    fn hints_do_not_decide_effects_the_config_does() {
        let hinted = json!({"name": "delete", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true, "destructiveHint": false}});
        let named = |tool: &Value| {
            let remote = tool["name"].as_str().unwrap_or("");
            contract(&server(), tool, tool_name("notes", remote))
        };
        let c = named(&hinted).unwrap();
        assert_eq!((c.side_effect, c.idempotent), (SideEffect::Write, false));
        assert!(!c.allowed_in_lane);
        assert_eq!(c.tier, Tier::Deferred);
        assert_eq!(c.groups, ["group:mcp:notes"]);

        let c = named(&json!({"name": "search"})).unwrap();
        assert_eq!((c.side_effect, c.idempotent), (SideEffect::ReadOnly, true));
        assert_eq!(c.parameters, json!({"type": "object"}));
        assert!(c.description.contains("MCP server notes"));
        let c = named(&json!({"name": "tag", "description": "Tag a note."})).unwrap();
        assert_eq!((c.side_effect, c.idempotent), (SideEffect::Write, true));
        assert!(named(&json!({"description": "nameless"})).is_none());
    }

    #[test]
    fn names_that_collide_after_mapping_are_all_kept_whatever_the_order() {
        let none = std::collections::HashSet::new();
        let listed = ["math.mul", "math_mul", "math/mul", "add", "add"];
        let names = local_names("calc", &listed, &none);
        let locals: Vec<&str> = names.iter().map(|n| n.local.as_str()).collect();
        assert_eq!(
            names.len(),
            4,
            "every distinct tool kept, the repeated one once: {names:?}"
        );
        assert_eq!(
            names[1].local, "calc_math_mul",
            "the name that maps to itself keeps it"
        );
        assert!(!names[1].disambiguated);
        assert_eq!(names[3].local, "calc_add");
        for hashed in [&names[0], &names[2]] {
            assert!(hashed.disambiguated);
            assert!(
                hashed.local.starts_with("calc_math_mul_"),
                "{}",
                hashed.local
            );
            assert_eq!(hashed.local.len(), "calc_math_mul_".len() + 8);
        }
        let distinct: std::collections::HashSet<&str> = locals.iter().copied().collect();
        assert_eq!(distinct.len(), locals.len(), "{locals:?}");

        let mut reversed = listed;
        reversed.reverse();
        let again = local_names("calc", &reversed, &none);
        for name in &names {
            let same = again.iter().find(|n| n.remote == name.remote).unwrap();
            assert_eq!(same.local, name.local, "the order listed does not matter");
        }

        // Two names that both change under mapping: neither keeps the plain name.
        let both = local_names("s", &["a.b", "a/b"], &none);
        assert!(
            both.iter()
                .all(|n| n.disambiguated && n.local.len() == "s_a_b_".len() + 8)
        );
        assert_ne!(both[0].local, both[1].local);
        // Long names stay within 64 characters.
        let long = "x".repeat(70);
        let long_dotted = format!("{}.y", "x".repeat(68));
        let long_names = local_names("server", &[&long, &long_dotted], &none);
        assert!(
            long_names.iter().all(|n| n.local.len() <= MAX_NAME),
            "{long_names:?}"
        );
        assert_ne!(long_names[0].local, long_names[1].local);

        // A name another source holds (server `a_b`'s `c` and server `a`'s `b_c`) is hashed.
        let reserved: std::collections::HashSet<String> = ["a_b_c".to_owned()].into();
        let other = local_names("a", &["b_c", "d"], &reserved);
        assert!(
            other[0].disambiguated && other[0].local.starts_with("a_b_c_"),
            "{other:?}"
        );
        assert!(!reserved.contains(&other[0].local));
        assert_eq!(other[1].local, "a_d");
    }
}
