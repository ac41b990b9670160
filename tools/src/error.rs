//! Faults of the tool layer itself. Problems a caller can act on (unknown tool, invalid
//! arguments, a tool's own failure) are not errors here: they are `ToolOutcome`s with the
//! reason, so the model can correct itself.

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("tool `{0}` is registered twice")]
    DuplicateTool(String),
    #[error("tool `{tool}` declares an invalid JSON Schema: {reason}")]
    InvalidSchema { tool: String, reason: String },
    #[error("tool `{tool}` is declared badly: {reason}")]
    InvalidContract { tool: String, reason: String },
    #[error("`{0}` in tools.allow or tools.deny is not a tool, a group or an MCP server's tool")]
    UnknownSelection(String),
    #[error("tool `{0}` cannot be disabled")]
    NotDisableable(String),
}
