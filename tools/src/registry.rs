//! The registry: contracts and handlers registered through one builder, which yields both
//! the specs shown to the model and the handlers that run.
//!
//! A tool's arguments schema becomes a validator at two different moments. A tool from
//! outside (an MCP server's) is compiled when it is offered, and refused then if its schema
//! is broken. The daemon's own tools — fixed in the binary, every one compiled by the test
//! `every_tool_of_a_full_daemon_declares_a_complete_contract` — are compiled at their first
//! call: compiling ~40 schemas (and the meta-schema they are checked against) was ~3 ms of
//! every start before READY, and the validators of tools a daemon never calls are memory it
//! never needs. The cheap checks (name, description, an object schema) still fail the build.
//!
//! The tool set can change while the daemon runs (an MCP server's list changes): the set is
//! an immutable catalog behind a lock, replaced as a whole, so a call or a listing works on
//! one consistent snapshot. Which tools are enabled is fixed by the [`Selection`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock, Weak};

use serde_json::Value;

use crate::builtin::tool_search::{self, ToolFinder};
use crate::contract::{Concurrency, Tier, ToolContract, ToolSource, ToolSpec};
use crate::error::ToolError;
use crate::handler::ToolHandler;
use crate::search::{Embedder, Query, SearchDoc, SearchIndex, Weights};
use crate::search_usage::SearchUsage;
use crate::selection::Selection;

pub(crate) struct RegisteredTool {
    pub contract: ToolContract,
    pub handler: Arc<dyn ToolHandler>,
    /// The arguments' validator, or why the schema does not compile (see the module docs).
    validator: OnceLock<Result<jsonschema::Validator, ToolError>>,
}

impl fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("contract", &self.contract)
            .finish_non_exhaustive()
    }
}

/// Collects the built-in tools, the selection (profile, allow, deny) and the deferral
/// threshold; [`ToolRegistryBuilder::build`] checks and compiles everything once.
#[derive(Default)]
pub struct ToolRegistryBuilder {
    tools: Vec<(ToolContract, Arc<dyn ToolHandler>)>,
    selection: Selection,
    deferral: Deferral,
    /// Configured MCP servers, whose tools `allow`/`deny` may name before they are listed.
    mcp_servers: Vec<String>,
    /// The skills `tool_search` finds beside the tools.
    skills: Option<crate::skills::SkillLibrary>,
    search: SearchSetup,
}

/// What tool search ranks with beside the tools' own words: the semantic channel's model
/// and the requests learnt from use.
#[derive(Clone, Debug, Default)]
pub struct SearchSetup {
    pub model: Option<Arc<dyn Embedder>>,
    pub usage: Option<Arc<SearchUsage>>,
}

impl fmt::Debug for ToolRegistryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.tools.iter().map(|(c, _)| c.name.as_str()).collect();
        f.debug_struct("ToolRegistryBuilder")
            .field("tools", &names)
            .field("selection", &self.selection)
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

    /// Which tools are enabled (see [`Selection`]).
    pub fn select(mut self, selection: Selection) -> Self {
        self.selection = selection;
        self
    }

    /// Hides a tool from the model and refuses its calls.
    pub fn disable(mut self, name: impl Into<String>) -> Self {
        self.selection.deny.push(name.into());
        self
    }

    /// The MCP servers that will add tools once they are running.
    pub fn expect_mcp_servers(mut self, names: Vec<String>) -> Self {
        self.mcp_servers = names;
        self
    }

    /// Tool search with a semantic channel and/or usage learning.
    pub fn search(mut self, setup: SearchSetup) -> Self {
        self.search = setup;
        self
    }

    /// The skills `tool_search` lists beside the tools it finds.
    pub fn skills(mut self, library: crate::skills::SkillLibrary) -> Self {
        self.skills = Some(library);
        self
    }

    /// When deferred-eligible tools are shown by name only (see [`Deferral`]).
    pub fn defer(mut self, deferral: Deferral) -> Self {
        self.deferral = deferral;
        self
    }

    /// Checks every contract and selection entry and builds the registry, with
    /// `tool_search` and `call_tool` added (every registry has them).
    pub fn build(self) -> Result<Arc<ToolRegistry>, ToolError> {
        let mut tools = BTreeMap::new();
        let call_tool = tool_search::call_contract();
        let entries = self.tools.into_iter().chain([(
            call_tool,
            Arc::new(tool_search::CallTool) as Arc<dyn ToolHandler>,
        )]);
        for (contract, handler) in entries {
            let tool = RegisteredTool::own(contract, handler)?;
            let name = tool.contract.name.clone();
            if tools.insert(name.clone(), Arc::new(tool)).is_some() {
                return Err(ToolError::DuplicateTool(name));
            }
        }
        let search = tool_search::search_contract();
        check_object_schema(&search)?;
        if tools.contains_key(&search.name) {
            return Err(ToolError::DuplicateTool(search.name));
        }
        let contracts = || tools.values().map(|t: &Arc<RegisteredTool>| &t.contract);
        let with_search = contracts().chain(std::iter::once(&search));
        if let Some(name) = self.selection.denied_core_tools(with_search).first() {
            return Err(ToolError::NotDisableable((*name).to_owned()));
        }
        // A misspelt `deny` entry would leave a tool on without a word: refuse it.
        for entry in self.selection.deny.iter().chain(&self.selection.allow) {
            let mcp = |s: &String| {
                entry == &format!("group:mcp:{s}") || entry.starts_with(&format!("{s}_"))
            };
            let known = entry == "*"
                || entry == "group:mcp:*"
                || entry == &search.name
                || self.mcp_servers.iter().any(mcp)
                || contracts().any(|c| &c.name == entry || c.groups.contains(entry));
            if !known {
                return Err(ToolError::UnknownSelection(entry.clone()));
            }
        }
        Ok(Arc::new_cyclic(|registry| {
            let search = RegisteredTool {
                contract: search,
                handler: Arc::new(tool_search::ToolSearch(
                    registry.clone() as Weak<dyn ToolFinder>
                )),
                validator: OnceLock::new(),
            };
            tools.insert(search.contract.name.clone(), Arc::new(search));
            ToolRegistry {
                catalog: Arc::new(RwLock::new(Arc::new(Catalog::new(
                    tools,
                    &self.selection,
                    &self.search,
                )))),
                selection: self.selection,
                deferral: self.deferral,
                skills: self.skills,
                search: self.search,
            }
        }))
    }
}

impl RegisteredTool {
    /// One of the daemon's own tools: checked now, its schema compiled at its first call.
    fn own(contract: ToolContract, handler: Arc<dyn ToolHandler>) -> Result<Self, ToolError> {
        check_contract(&contract)?;
        check_object_schema(&contract)?;
        Ok(Self {
            contract,
            handler,
            validator: OnceLock::new(),
        })
    }

    /// A tool offered from outside: refused now unless its schema compiles.
    fn offered(contract: ToolContract, handler: Arc<dyn ToolHandler>) -> Result<Self, ToolError> {
        check_contract(&contract)?;
        let validator = compile_schema(&contract)?;
        Ok(Self {
            contract,
            handler,
            validator: OnceLock::from(Ok(validator)),
        })
    }

    /// The arguments' validator, compiled on first use.
    pub(crate) fn validator(&self) -> Result<&jsonschema::Validator, &ToolError> {
        self.validator
            .get_or_init(|| compile_schema(&self.contract))
            .as_ref()
    }
}

/// When deferred-eligible tools are shown by name only: once their schemas would take more
/// than `threshold_pct` percent of the model's context window (DESIGN.md §4). Below that,
/// every tool is sent in full — a search step costs more than a few schemas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deferral {
    pub context_window_tokens: u64,
    pub threshold_pct: u8,
}

impl Default for Deferral {
    fn default() -> Self {
        Self {
            context_window_tokens: 32_768,
            threshold_pct: 10,
        }
    }
}

impl Deferral {
    /// Whether eligible schemas of `schema_bytes` (serialized) are deferred.
    pub fn applies(&self, schema_bytes: usize) -> bool {
        // About four bytes of JSON per token.
        let tokens = schema_bytes as u64 / 4;
        schema_bytes > 0
            && tokens * 100 >= self.context_window_tokens * u64::from(self.threshold_pct)
    }
}

/// The live tool set: built-ins plus whatever MCP servers offer now, with the search index
/// over the enabled ones. Replaced as a whole when a server's tools change; readers keep
/// the snapshot they took.
struct Catalog {
    tools: BTreeMap<String, Arc<RegisteredTool>>,
    /// The enabled tools, in the index's document order.
    searchable: Vec<Arc<RegisteredTool>>,
    index: SearchIndex,
}

impl fmt::Debug for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("searchable", &self.searchable.len())
            .finish_non_exhaustive()
    }
}

impl Catalog {
    fn new(
        tools: BTreeMap<String, Arc<RegisteredTool>>,
        selection: &Selection,
        search: &SearchSetup,
    ) -> Self {
        let searchable: Vec<Arc<RegisteredTool>> = tools
            .values()
            .filter(|t| selection.is_enabled(&t.contract))
            .cloned()
            .collect();
        let docs: Vec<SearchDoc> = searchable
            .iter()
            .map(|t| {
                let mut doc = search_doc(&t.contract);
                if let Some(usage) = &search.usage {
                    doc.usage = usage.requests(&t.contract.name);
                }
                doc
            })
            .collect();
        Self {
            index: SearchIndex::with_model(&docs, Weights::default(), search.model.clone()),
            tools,
            searchable,
        }
    }
}

fn search_doc(contract: &ToolContract) -> SearchDoc {
    let parameters = crate::search::parameter_texts(&contract.parameters);
    let groups: Vec<&str> = contract
        .groups
        .iter()
        .map(|g| g.trim_start_matches("group:"))
        .collect();
    SearchDoc {
        name: contract.name.clone(),
        title: None,
        description: contract.description.clone(),
        search_hint: contract.search_hint.clone(),
        server: (!groups.is_empty()).then(|| groups.join(" ")),
        parameters,
        usage: Vec::new(),
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

fn invalid_schema(contract: &ToolContract, reason: String) -> ToolError {
    ToolError::InvalidSchema {
        tool: contract.name.clone(),
        reason,
    }
}

/// Arguments are always an object (the check that costs nothing to make at registration).
fn check_object_schema(contract: &ToolContract) -> Result<(), ToolError> {
    if contract.parameters.get("type") != Some(&Value::String("object".into())) {
        return Err(invalid_schema(
            contract,
            "the arguments schema must have \"type\": \"object\"".into(),
        ));
    }
    Ok(())
}

fn compile_schema(contract: &ToolContract) -> Result<jsonschema::Validator, ToolError> {
    check_object_schema(contract)?;
    let invalid = |e: jsonschema::ValidationError<'_>| invalid_schema(contract, e.to_string());
    jsonschema::meta::validate(&contract.parameters).map_err(invalid)?;
    jsonschema::validator_for(&contract.parameters).map_err(invalid)
}

/// The registry, shared by the pipeline and everything that lists or searches tools.
#[derive(Debug)]
pub struct ToolRegistry {
    catalog: Arc<RwLock<Arc<Catalog>>>,
    selection: Selection,
    deferral: Deferral,
    skills: Option<crate::skills::SkillLibrary>,
    search: SearchSetup,
}

impl ToolRegistry {
    fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Every registered contract, disabled ones included, in name order.
    pub fn contracts(&self) -> Vec<ToolContract> {
        self.catalog()
            .tools
            .values()
            .map(|t| t.contract.clone())
            .collect()
    }

    /// The names every source but `source` holds (what an MCP server's tools must not take).
    pub fn names_outside(&self, source: &ToolSource) -> std::collections::HashSet<String> {
        self.catalog()
            .tools
            .values()
            .filter(|t| t.contract.source != *source)
            .map(|t| t.contract.name.clone())
            .collect()
    }

    /// Why a registered tool is disabled, or `None` when it is enabled or unknown.
    pub fn why_disabled(&self, name: &str) -> Option<String> {
        let catalog = self.catalog();
        self.selection
            .why_disabled(&catalog.tools.get(name)?.contract)
    }

    /// The registered name nearest `name` (a typo, `fs-read` for `fs_read`), if one is
    /// near enough to suggest: at most a third of the name's characters differ.
    pub fn closest_name(&self, name: &str) -> Option<String> {
        let catalog = self.catalog();
        let wanted = name.to_lowercase().replace('-', "_");
        let limit = (wanted.chars().count() / 3).max(1);
        catalog
            .tools
            .keys()
            .map(|candidate| (edit_distance(&wanted, candidate, limit + 1), candidate))
            .filter(|(distance, _)| *distance <= limit)
            .min()
            .map(|(_, candidate)| candidate.clone())
    }

    /// Whether a side lane may run `name` (an unknown tool is refused wherever it runs).
    pub fn allowed_in_lane(&self, name: &str) -> bool {
        self.get(name)
            .is_none_or(|tool| tool.contract.allowed_in_lane)
    }

    pub fn is_disabled(&self, name: &str) -> bool {
        self.catalog()
            .tools
            .get(name)
            .is_some_and(|t| !self.selection.is_enabled(&t.contract))
    }

    /// The specs the model is shown: enabled tools (in a lane only lane-allowed ones), in
    /// name order. Deferred-eligible tools keep `Tier::Deferred` only when [`Deferral`]
    /// applies to them; otherwise every tool is shown in full.
    pub fn specs(&self, in_lane: bool) -> Vec<ToolSpec> {
        let catalog = self.catalog();
        let mut specs: Vec<ToolSpec> = catalog
            .searchable
            .iter()
            .filter(|t| !in_lane || t.contract.allowed_in_lane)
            .map(|t| spec(&t.contract))
            .collect();
        let eligible_bytes: usize = specs
            .iter()
            .filter(|s| s.tier == Tier::Deferred)
            .map(|s| serde_json::to_string(s).map_or(0, |j| j.len()))
            .sum();
        if !self.deferral.applies(eligible_bytes) {
            for spec in &mut specs {
                spec.tier = Tier::Core;
            }
        }
        specs
    }

    /// The enabled tools that best match a `tool_search` query, best first.
    pub fn search(&self, query: &Query, max_results: usize, in_lane: bool) -> Vec<ToolSpec> {
        if self
            .search
            .usage
            .as_ref()
            .is_some_and(|usage| usage.take_changed())
        {
            self.rebuild_index();
        }
        let catalog = self.catalog();
        // Over-fetch a little: lane-disallowed tools are dropped after ranking.
        catalog
            .index
            .search(query, max_results * 2)
            .into_iter()
            .map(|i| &catalog.searchable[i].contract)
            .filter(|c| !in_lane || c.allowed_in_lane)
            .take(max_results)
            .map(spec)
            .collect()
    }

    /// Replaces every tool of `source` (an MCP server's list, after a change) at once.
    /// Tools that fail their checks are left out and returned with the reason.
    pub fn replace_source(
        &self,
        source: &ToolSource,
        tools: Vec<(ToolContract, Arc<dyn ToolHandler>)>,
    ) -> Vec<ToolError> {
        let mut rejected = Vec::new();
        let mut catalog = self.catalog.write().unwrap_or_else(|p| p.into_inner());
        let mut all: BTreeMap<String, Arc<RegisteredTool>> = catalog
            .tools
            .iter()
            .filter(|(_, t)| &t.contract.source != source)
            .map(|(name, t)| (name.clone(), t.clone()))
            .collect();
        for (contract, handler) in tools {
            match RegisteredTool::offered(contract, handler) {
                Ok(tool) if all.contains_key(&tool.contract.name) => {
                    rejected.push(ToolError::DuplicateTool(tool.contract.name));
                }
                Ok(tool) => {
                    all.insert(tool.contract.name.clone(), Arc::new(tool));
                }
                Err(e) => rejected.push(e),
            }
        }
        *catalog = Arc::new(Catalog::new(all, &self.selection, &self.search));
        rejected
    }

    /// The index built again over the same tools (requests were learnt).
    fn rebuild_index(&self) {
        let mut catalog = self.catalog.write().unwrap_or_else(|p| p.into_inner());
        let tools = catalog.tools.clone();
        *catalog = Arc::new(Catalog::new(tools, &self.selection, &self.search));
    }

    /// `tool` runs in `trajectory`: a search that found it there learns from it.
    pub(crate) fn called(&self, trajectory: &steward_events::TrajectoryId, tool: &str) {
        if let Some(usage) = &self.search.usage {
            usage.called(trajectory, tool);
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        self.catalog().tools.get(name).cloned()
    }

    /// Whether a call may share a batch with its neighbours. Unknown tools run alone (and
    /// fail there with a clear result); `call_tool` is as safe as the call it makes.
    pub fn is_concurrency_safe(&self, name: &str, args: &Value) -> bool {
        if let Some((inner, inner_args)) = tool_search::unwrap_call_tool(name, args) {
            return self.is_concurrency_safe(inner, inner_args);
        }
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

fn spec(contract: &ToolContract) -> ToolSpec {
    ToolSpec {
        name: contract.name.clone(),
        description: contract.description.clone(),
        parameters: contract.parameters.clone(),
        usage_guidance: contract.usage_guidance.clone(),
        tier: contract.tier,
    }
}

/// Levenshtein distance between `a` and `b`, counted up to `cap` (anything farther is
/// `cap`): a long MCP name list costs little.
fn edit_distance(a: &str, b: &str, cap: usize) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len().abs_diff(b.len()) >= cap {
        return cap;
    }
    // Both rows have b.len() + 1 entries and j < b.len(): every index is in range.
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        if current.iter().all(|&d| d >= cap) {
            return cap;
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()].min(cap)
}

impl ToolFinder for ToolRegistry {
    fn find(&self, query: &Query, max_results: usize, in_lane: bool) -> Vec<ToolSpec> {
        self.search(query, max_results, in_lane)
    }

    fn found(&self, trajectory: &steward_events::TrajectoryId, request: &str, tools: Vec<String>) {
        if let Some(usage) = &self.search.usage {
            usage.searched(trajectory, request, tools);
        }
    }

    fn find_skills(&self, text: &str, max_results: usize) -> Vec<crate::skills::Skill> {
        match &self.skills {
            Some(library) if !self.is_disabled("skill_load") => library.search(text, max_results),
            _ => Vec::new(),
        }
    }
}
