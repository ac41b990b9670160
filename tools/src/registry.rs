//! The registry: contracts and handlers registered once, through one builder, which yields
//! both the specs shown to the model and the handlers that run. Schemas are compiled into
//! validators when the registry is built, so a tool with a broken schema fails at start-up,
//! not at its first call.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{Concurrency, Tier, ToolContract};
use crate::error::ToolError;

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolOutcome> + Send + 'a>>;

/// The code behind a tool. Arguments arrive already validated against the schema.
pub trait ToolHandler: Send + Sync + 'static {
    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a>;

    /// Consulted only for tools declared `Concurrency::FromArgs`.
    fn concurrency_safe_for(&self, _args: &Value) -> bool {
        false
    }

    /// For tools whose effect depends on the call (`http_request`: GET reads, POST acts):
    /// the side effect and idempotency of this call, overriding the contract's.
    fn effect_for(&self, _args: &Value) -> Option<(crate::contract::SideEffect, bool)> {
        None
    }

    /// The safety check of this call (pipeline step 3), before policy. Most tools have
    /// none; the shell tool classifies its command.
    fn safety(&self, _args: &Value, _ctx: &ExecutionContext) -> Safety {
        Safety::Allow
    }
}

/// What a tool's own safety check says about one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Safety {
    Allow,
    /// Needs the owner's confirmation, whatever the policy says (unless it denies).
    Confirm(String),
    /// Never runs and is never offered for confirmation.
    Block(String),
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

pub(crate) struct RegisteredTool {
    pub contract: ToolContract,
    pub handler: Arc<dyn ToolHandler>,
    pub validator: jsonschema::Validator,
}

impl fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("contract", &self.contract)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
pub struct ToolRegistryBuilder {
    tools: Vec<(ToolContract, Arc<dyn ToolHandler>)>,
    disabled: BTreeSet<String>,
}

impl fmt::Debug for ToolRegistryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|(c, _)| c.name.as_str()).collect();
        f.debug_struct("ToolRegistryBuilder")
            .field("tools", &names)
            .field("disabled", &self.disabled)
            .finish()
    }
}

impl ToolRegistryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(mut self, contract: ToolContract, handler: impl ToolHandler) -> Self {
        self.tools.push((contract, Arc::new(handler)));
        self
    }

    /// Hides a tool from the model and refuses its calls.
    pub fn disable(mut self, name: impl Into<String>) -> Self {
        self.disabled.insert(name.into());
        self
    }

    pub fn build(self) -> Result<ToolRegistry, ToolError> {
        let mut tools = BTreeMap::new();
        for (contract, handler) in self.tools {
            check_contract(&contract)?;
            let validator = compile_schema(&contract)?;
            let name = contract.name.clone();
            let tool = RegisteredTool {
                contract,
                handler,
                validator,
            };
            if tools.insert(name.clone(), tool).is_some() {
                return Err(ToolError::DuplicateTool(name));
            }
        }
        for name in &self.disabled {
            match tools.get(name) {
                None => return Err(ToolError::UnknownTool(name.clone())),
                Some(tool) if !tool.contract.disableable => {
                    return Err(ToolError::NotDisableable(name.clone()));
                }
                Some(_) => {}
            }
        }
        Ok(ToolRegistry {
            tools,
            disabled: self.disabled,
        })
    }
}

fn check_contract(contract: &ToolContract) -> Result<(), ToolError> {
    let bad = |reason: &str| ToolError::InvalidContract {
        tool: contract.name.clone(),
        reason: reason.to_owned(),
    };
    let valid_name = !contract.name.is_empty()
        && contract.name.len() <= 64
        && contract
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        return Err(bad("names are 1-64 characters of [A-Za-z0-9_-]"));
    }
    if contract.description.trim().is_empty() {
        return Err(bad("a description is required"));
    }
    if contract.result_budget == 0 {
        return Err(bad("result_budget must be positive"));
    }
    Ok(())
}

fn compile_schema(contract: &ToolContract) -> Result<jsonschema::Validator, ToolError> {
    let invalid = |reason: String| ToolError::InvalidSchema {
        tool: contract.name.clone(),
        reason,
    };
    if contract.parameters.get("type") != Some(&Value::String("object".into())) {
        return Err(invalid(
            "the arguments schema must have \"type\": \"object\"".into(),
        ));
    }
    jsonschema::meta::validate(&contract.parameters).map_err(|e| invalid(e.to_string()))?;
    jsonschema::validator_for(&contract.parameters).map_err(|e| invalid(e.to_string()))
}

/// The built registry, shared read-only by the pipeline and everything that lists tools.
#[derive(Debug)]
pub struct ToolRegistry {
    tools: BTreeMap<String, RegisteredTool>,
    disabled: BTreeSet<String>,
}

impl ToolRegistry {
    /// Every registered contract, disabled ones included, in name order.
    pub fn contracts(&self) -> impl Iterator<Item = &ToolContract> {
        self.tools.values().map(|t| &t.contract)
    }

    pub fn is_disabled(&self, name: &str) -> bool {
        self.disabled.contains(name)
    }

    /// The specs the model is shown: enabled tools, and in a lane only lane-allowed ones.
    pub fn specs(&self, in_lane: bool) -> Vec<ToolSpec> {
        self.tools
            .values()
            .filter(|t| !self.is_disabled(&t.contract.name))
            .filter(|t| !in_lane || t.contract.allowed_in_lane)
            .map(|t| ToolSpec {
                name: t.contract.name.clone(),
                description: t.contract.description.clone(),
                parameters: t.contract.parameters.clone(),
                usage_guidance: t.contract.usage_guidance.clone(),
                tier: t.contract.tier,
            })
            .collect()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.tools.get(name)
    }

    /// Whether a call may share a batch with its neighbours. Unknown tools run alone (and
    /// fail there with a clear result).
    pub fn is_concurrency_safe(&self, name: &str, args: &Value) -> bool {
        match self.get(name) {
            Some(tool) => match tool.contract.concurrency {
                Concurrency::Safe => true,
                Concurrency::Unsafe => false,
                Concurrency::FromArgs => tool.handler.concurrency_safe_for(args),
            },
            None => false,
        }
    }
}
