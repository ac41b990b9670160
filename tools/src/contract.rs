//! The contract every tool declares (DESIGN.md §4). The runtime reads these fields to decide
//! parallelism, confirmation and visibility; a tool never decides those for itself.

use serde::Serialize;
use serde_json::Value;

/// What running the tool can change in the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffect {
    ReadOnly,
    Write,
    SystemChange,
}

/// Whether calls may run beside other calls in the same batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Concurrency {
    Safe,
    Unsafe,
    /// The handler decides per call from the arguments.
    FromArgs,
}

/// Whether the schema is always sent to the model or found with `tool_search`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    Core,
    Deferred,
}

/// Where a tool comes from: shown in `steward tools list`, and MCP tools are replaced as a
/// whole when their server's list changes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ToolSource {
    Builtin,
    Mcp(String),
}

impl std::fmt::Display for ToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolSource::Builtin => f.write_str("builtin"),
            ToolSource::Mcp(server) => write!(f, "mcp:{server}"),
        }
    }
}

impl Serialize for ToolSource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolContract {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    pub side_effect: SideEffect,
    /// Non-idempotent tools (send, POST, pay) go through two-phase confirmation.
    pub idempotent: bool,
    pub concurrency: Concurrency,
    /// `Deferred`: eligible for deferred loading — shown by name only, and found with
    /// `tool_search`, once the eligible tools' schemas outgrow their share of the context.
    pub tier: Tier,
    pub source: ToolSource,
    pub groups: Vec<String>,
    /// Injected into the prompt only together with the tool.
    pub usage_guidance: Option<String>,
    /// Extra words for `tool_search`.
    pub search_hint: Option<String>,
    /// Bytes of output kept in the result before spilling to a file.
    pub result_budget: usize,
    pub disableable: bool,
    pub allowed_in_lane: bool,
}
