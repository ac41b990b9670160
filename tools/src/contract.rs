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

/// Whether something holds for a tool's calls: never, always, or as the handler says for
/// each call from its arguments (`ToolHandler::returns_untrusted_for` / `sends_out_for`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Applies {
    Never,
    Always,
    PerCall,
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
    /// Whether what the tool returns is someone else's words (a fetched page, an email, an
    /// MCP server's answer): the pipeline marks such a result untrusted, which taints the
    /// step. Declared here so no tool can forget it.
    pub returns_untrusted: Applies,
    /// Whether a call can carry data off the machine to someone the owner has not allowed
    /// (an HTTP request to a host not in `tools.http.trusted_hosts`, an email): in a tainted
    /// step such a call asks first even when it only reads.
    pub sends_out: Applies,
}

/// Result bytes kept before spilling, unless a tool says otherwise.
pub const DEFAULT_RESULT_BUDGET: usize = 16 * 1024;

/// Contracts are built from what a tool is, then what sets it apart: the constructor fixes
/// the side effect and the defaults that follow from it, so a tool names only its
/// differences (`ToolContract::read_only("fs_read", …).group("group:fs").budget(64 * 1024)`).
impl ToolContract {
    /// Only reads: idempotent, safe beside other calls, allowed in lanes.
    pub fn read_only(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            side_effect: SideEffect::ReadOnly,
            idempotent: true,
            concurrency: Concurrency::Safe,
            tier: Tier::Core,
            source: ToolSource::Builtin,
            groups: Vec::new(),
            usage_guidance: None,
            search_hint: None,
            result_budget: DEFAULT_RESULT_BUDGET,
            disableable: true,
            allowed_in_lane: true,
            returns_untrusted: Applies::Never,
            sends_out: Applies::Never,
        }
    }

    /// Changes something: not idempotent (so confirmed first) until said otherwise, runs
    /// alone, not in lanes.
    pub fn write(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        Self {
            side_effect: SideEffect::Write,
            idempotent: false,
            concurrency: Concurrency::Unsafe,
            allowed_in_lane: false,
            ..Self::read_only(name, description, parameters)
        }
    }

    /// Changes the system (processes, packages, services): like [`Self::write`].
    pub fn system_change(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        Self {
            side_effect: SideEffect::SystemChange,
            ..Self::write(name, description, parameters)
        }
    }

    /// The constructor for `side_effect`, for helpers that declare several tools at once.
    pub fn with_effect(
        side_effect: SideEffect,
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        match side_effect {
            SideEffect::ReadOnly => Self::read_only(name, description, parameters),
            SideEffect::Write => Self::write(name, description, parameters),
            SideEffect::SystemChange => Self::system_change(name, description, parameters),
        }
    }

    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    pub fn concurrency(mut self, concurrency: Concurrency) -> Self {
        self.concurrency = concurrency;
        self
    }

    pub fn tier(mut self, tier: Tier) -> Self {
        self.tier = tier;
        self
    }

    pub fn source(mut self, source: ToolSource) -> Self {
        self.source = source;
        self
    }

    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.groups.push(group.into());
        self
    }

    pub fn guidance(mut self, text: impl Into<String>) -> Self {
        self.usage_guidance = Some(text.into());
        self
    }

    pub fn hint(mut self, words: impl Into<String>) -> Self {
        self.search_hint = Some(words.into());
        self
    }

    pub fn budget(mut self, bytes: usize) -> Self {
        self.result_budget = bytes;
        self
    }

    /// A tool the selection can never turn off (finding tools, reaching the owner).
    pub fn always_enabled(mut self) -> Self {
        self.disableable = false;
        self
    }

    pub fn in_lane(mut self, allowed: bool) -> Self {
        self.allowed_in_lane = allowed;
        self
    }

    pub fn returns_untrusted(mut self, applies: Applies) -> Self {
        self.returns_untrusted = applies;
        self
    }

    pub fn sends_out(mut self, applies: Applies) -> Self {
        self.sends_out = applies;
        self
    }
}

/// What the model sees of a tool.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_guidance: Option<String>,
    /// Deferred tools are shown to the model by name only.
    pub tier: Tier,
}
