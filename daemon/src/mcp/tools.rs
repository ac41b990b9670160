//! An MCP server's tools as Steward tools: contracts made from `tools/list` entries and a
//! handler that sends `tools/call`.
//!
//! Decisions:
//! - Names are `SERVER_TOOL`, cut to the 64 characters providers accept (with a hash of the
//!   full name, so two long names never collide); other characters become `_`.
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
    Concurrency, ExecutionContext, SideEffect, Tier, ToolContract, ToolFuture, ToolHandler,
    ToolSource,
};

use super::connection::Connection;

const MAX_NAME: usize = 64;

/// The Steward name of a server's tool.
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
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let hash = format!("{server}_{tool}")
        .bytes()
        .fold(0x811c_9dc5u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
    format!("{}_{hash:08x}", &clean[..MAX_NAME - 9])
}

/// The contract of one `tools/list` entry, or `None` when it has no name.
pub fn contract(server: &McpServerConfig, tool: &Value) -> Option<ToolContract> {
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
    if parameters.get("type").is_none() {
        parameters["type"] = json!("object");
    }
    Some(ToolContract {
        name: tool_name(&server.name, remote),
        description,
        parameters,
        side_effect: if read_only {
            SideEffect::ReadOnly
        } else {
            SideEffect::Write
        },
        idempotent,
        concurrency: if read_only {
            Concurrency::Safe
        } else {
            Concurrency::Unsafe
        },
        tier: if server.defer {
            Tier::Deferred
        } else {
            Tier::Core
        },
        source: ToolSource::Mcp(server.name.clone()),
        groups: vec![format!("group:mcp:{}", server.name)],
        usage_guidance: None,
        search_hint: title.map(str::to_owned),
        result_budget: 64 * 1024,
        disableable: true,
        allowed_in_lane: read_only,
    })
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
            let text: Vec<&str> = result["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|block| block["text"].as_str())
                .collect();
            let text = text.join("\n");
            if result["isError"] == true {
                return ToolOutcome::error(if text.is_empty() {
                    format!("the MCP tool {} failed", self.remote)
                } else {
                    text
                });
            }
            let mut content = json!({"content": text, "untrusted": true});
            if let Some(structured) = result.get("structuredContent") {
                content["structured"] = structured.clone();
            }
            ToolOutcome::ok(content)
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
        let c = contract(&server(), &hinted).unwrap();
        assert_eq!((c.side_effect, c.idempotent), (SideEffect::Write, false));
        assert!(!c.allowed_in_lane);
        assert_eq!(c.tier, Tier::Deferred);
        assert_eq!(c.groups, ["group:mcp:notes"]);

        let c = contract(&server(), &json!({"name": "search"})).unwrap();
        assert_eq!((c.side_effect, c.idempotent), (SideEffect::ReadOnly, true));
        assert_eq!(c.parameters, json!({"type": "object"}));
        assert!(c.description.contains("MCP server notes"));
        let c = contract(
            &server(),
            &json!({"name": "tag", "description": "Tag a note."}),
        )
        .unwrap();
        assert_eq!((c.side_effect, c.idempotent), (SideEffect::Write, true));
        assert!(contract(&server(), &json!({"description": "nameless"})).is_none());
    }
}
