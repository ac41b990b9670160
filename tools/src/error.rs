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
    #[error("cannot disable `{0}`: no such tool")]
    UnknownTool(String),
    #[error("tool `{0}` cannot be disabled")]
    NotDisableable(String),
}
