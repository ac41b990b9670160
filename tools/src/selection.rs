//! Which tools are enabled: a profile (a list of groups), then `allow` and `deny` lists of
//! tool names or `group:…` names (`group:mcp:*` for every MCP server). Deny wins over
//! allow; allow adds to the profile. A few core tools — the ones a model needs to find and
//! call other tools and to reach its owner — are never disabled, and asking to deny one is
//! an error rather than silently ignored. Disabled tools are neither shown to the model nor
//! executable (the pipeline checks again).
//!
//! Profiles:
//! - `minimal`: finding tools, messaging the owner, memory;
//! - `assistant` (default): minimal + files, web, schedule, email, debug (`echo`, `sleep`)
//!   and every configured MCP server;
//! - `coding`: assistant + `shell` (group `runtime`);
//! - `full`: every tool.

use crate::contract::ToolContract;

/// Tools that cannot be disabled.
pub const ALWAYS_ENABLED: [&str; 3] = ["tool_search", "call_tool", "notify_owner"];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profile {
    Minimal,
    #[default]
    Assistant,
    Coding,
    Full,
}

impl Profile {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "minimal" => Some(Profile::Minimal),
            "assistant" => Some(Profile::Assistant),
            "coding" => Some(Profile::Coding),
            "full" => Some(Profile::Full),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Minimal => "minimal",
            Profile::Assistant => "assistant",
            Profile::Coding => "coding",
            Profile::Full => "full",
        }
    }

    /// Each profile is the one before it plus some groups.
    fn groups(self) -> impl Iterator<Item = &'static str> {
        const MINIMAL: &[&str] = &[
            "group:tools",
            "group:messaging",
            "group:memory",
            "group:todo",
        ];
        const ASSISTANT: &[&str] = &[
            "group:fs",
            "group:web",
            "group:schedule",
            "group:email",
            "group:debug",
            "group:skills",
            "group:agents",
            "group:mcp:*",
        ];
        const CODING: &[&str] = &["group:runtime"];
        let layers: &[&[&str]] = match self {
            Profile::Minimal => &[MINIMAL],
            Profile::Assistant => &[MINIMAL, ASSISTANT],
            Profile::Coding => &[MINIMAL, ASSISTANT, CODING],
            Profile::Full => &[&["*"]],
        };
        layers.iter().flat_map(|layer| layer.iter().copied())
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    pub profile: Profile,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

impl Selection {
    pub fn is_enabled(&self, contract: &ToolContract) -> bool {
        if always_enabled(contract) {
            return true;
        }
        if self.deny.iter().any(|entry| matches(entry, contract)) {
            return false;
        }
        self.profile.groups().any(|entry| matches(entry, contract))
            || self.allow.iter().any(|entry| matches(entry, contract))
    }

    /// Why a tool is not enabled, as the owner would fix it: the `tools.deny` entry that
    /// covers it, or the profile that brings it (`None` when it is enabled).
    pub fn why_disabled(&self, contract: &ToolContract) -> Option<String> {
        if self.is_enabled(contract) {
            return None;
        }
        if let Some(entry) = self.deny.iter().find(|entry| matches(entry, contract)) {
            return Some(format!("tools.deny has {entry:?}"));
        }
        let profile = [Profile::Minimal, Profile::Assistant, Profile::Coding]
            .into_iter()
            .find(|p| p.groups().any(|entry| matches(entry, contract)))
            .unwrap_or(Profile::Full);
        Some(format!(
            "it comes with tools.profile = \"{}\" (or add {:?} to tools.allow)",
            profile.name(),
            contract.name
        ))
    }

    /// The tools that cannot be disabled but that `deny` names explicitly (a group or `*`
    /// in `deny` just leaves them on).
    pub fn denied_core_tools<'a>(
        &self,
        contracts: impl Iterator<Item = &'a ToolContract>,
    ) -> Vec<&'a str> {
        contracts
            .filter(|c| always_enabled(c))
            .filter(|c| self.deny.contains(&c.name))
            .map(|c| c.name.as_str())
            .collect()
    }
}

fn always_enabled(contract: &ToolContract) -> bool {
    ALWAYS_ENABLED.contains(&contract.name.as_str()) || !contract.disableable
}

/// Whether one allow/deny/profile entry covers a tool.
fn matches(entry: &str, contract: &ToolContract) -> bool {
    if entry == "*" {
        return true;
    }
    match entry.strip_suffix('*') {
        Some(prefix) if prefix.starts_with("group:") => {
            contract.groups.iter().any(|g| g.starts_with(prefix))
        }
        _ if entry.starts_with("group:") => contract.groups.iter().any(|g| g == entry),
        _ => contract.name == entry,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::contract::{Concurrency, SideEffect, Tier, ToolSource};

    fn tool(name: &str, group: &str) -> ToolContract {
        ToolContract {
            name: name.into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
            side_effect: SideEffect::ReadOnly,
            idempotent: true,
            concurrency: Concurrency::Safe,
            tier: Tier::Core,
            source: ToolSource::Builtin,
            groups: vec![group.into()],
            usage_guidance: None,
            search_hint: None,
            result_budget: 1,
            disableable: !ALWAYS_ENABLED.contains(&name),
            allowed_in_lane: true,
            returns_untrusted: crate::contract::Applies::Never,
            sends_out: crate::contract::Applies::Never,
        }
    }

    #[test]
    fn profiles_allow_and_deny_decide_together() {
        let shell = tool("shell", "group:runtime");
        let read = tool("fs_read", "group:fs");
        let echo = tool("echo", "group:debug");
        let search = tool("tool_search", "group:tools");
        let mcp = tool("github_issue", "group:mcp:github");
        let selection = |profile, allow: &[&str], deny: &[&str]| Selection {
            profile,
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
        };
        let table: Vec<(&str, Selection, &ToolContract, bool)> = vec![
            (
                "assistant has files",
                selection(Profile::Assistant, &[], &[]),
                &read,
                true,
            ),
            (
                "assistant has no shell",
                selection(Profile::Assistant, &[], &[]),
                &shell,
                false,
            ),
            (
                "coding has shell",
                selection(Profile::Coding, &[], &[]),
                &shell,
                true,
            ),
            (
                "allow adds a tool",
                selection(Profile::Assistant, &["shell"], &[]),
                &shell,
                true,
            ),
            (
                "allow adds a group",
                selection(Profile::Minimal, &["group:runtime"], &[]),
                &shell,
                true,
            ),
            (
                "deny wins over allow",
                selection(Profile::Full, &["shell"], &["shell"]),
                &shell,
                false,
            ),
            (
                "deny a group",
                selection(Profile::Assistant, &[], &["group:fs"]),
                &read,
                false,
            ),
            (
                "minimal has no files",
                selection(Profile::Minimal, &[], &[]),
                &read,
                false,
            ),
            (
                "full has everything",
                selection(Profile::Full, &[], &[]),
                &echo,
                true,
            ),
            (
                "core tools stay",
                selection(Profile::Minimal, &[], &["tool_search", "*"]),
                &search,
                true,
            ),
            (
                "mcp servers in assistant",
                selection(Profile::Assistant, &[], &[]),
                &mcp,
                true,
            ),
            (
                "deny one mcp server",
                selection(Profile::Assistant, &[], &["group:mcp:github"]),
                &mcp,
                false,
            ),
            (
                "deny every mcp server",
                selection(Profile::Full, &[], &["group:mcp:*"]),
                &mcp,
                false,
            ),
            (
                "minimal has no mcp",
                selection(Profile::Minimal, &[], &[]),
                &mcp,
                false,
            ),
        ];
        for (name, selection, contract, enabled) in table {
            assert_eq!(selection.is_enabled(contract), enabled, "{name}");
        }
    }

    #[test]
    fn denying_a_core_tool_by_name_is_reported() {
        let tools = [
            tool("tool_search", "group:tools"),
            tool("echo", "group:debug"),
        ];
        let selection = Selection {
            deny: vec!["tool_search".into(), "echo".into(), "group:tools".into()],
            ..Selection::default()
        };
        assert_eq!(selection.denied_core_tools(tools.iter()), ["tool_search"]);
    }
}
