//! The execution pipeline every call goes through, in order: lookup (disabled tools are
//! refused here too, not only hidden), argument validation (never rewritten), then execution
//! under the step's cancel token. Later stages (safety, policy, ledger, confirmation, result
//! budget) slot in between validation and execution.
//!
//! Cancellation: a read-only call is abandoned the moment the token fires (nothing in the
//! world is half-done by dropping it); a call with side effects is left to finish and record
//! its outcome — its handler sees the token and decides how to stop cleanly.

use std::sync::Arc;

use serde_json::json;
use steward_events::{ToolCallRequest, ToolOutcome, ToolStatus};
use tokio::task::JoinSet;
use tracing::{Instrument, debug, info, warn};

use crate::batch::{MAX_PARALLEL_CALLS, partition_batches};
use crate::budget::{ResultBudget, size_of};
use crate::confirm::PendingStore;
use crate::context::ExecutionContext;
use crate::contract::{Applies, SideEffect};
use crate::handler::Safety;
use crate::ledger::{Begin, Ledger, args_hash, key_for};
use crate::policy::{Decision, PolicyInput, PolicyRules, decide};
use crate::registry::RegisteredTool;
use crate::registry::ToolRegistry;

/// Whether this call can carry data to someone the owner has not allowed (the contract's
/// `sends_out`, asked of the handler per call when it says so).
fn sends_out(tool: &RegisteredTool, args: &serde_json::Value) -> bool {
    match tool.contract.sends_out {
        Applies::Never => false,
        Applies::Always => true,
        Applies::PerCall => tool.handler.sends_out_for(args),
    }
}

/// Whether what this call returned is someone else's words (the contract's
/// `returns_untrusted`): the pipeline, not the tool, marks the outcome.
fn returns_untrusted(
    tool: &RegisteredTool,
    args: &serde_json::Value,
    ctx: &ExecutionContext,
) -> bool {
    match tool.contract.returns_untrusted {
        Applies::Never => false,
        Applies::Always => true,
        Applies::PerCall => tool.handler.returns_untrusted_for(args, ctx),
    }
}

/// A `call_tool` call becomes the call it makes, so the inner tool meets every stage as
/// itself (see `builtin::tool_search`). A call that is not one stays as it is; a malformed
/// one stays too, and fails `call_tool`'s own validation with the reason.
fn resolve(call: &ToolCallRequest) -> std::borrow::Cow<'_, ToolCallRequest> {
    match crate::builtin::tool_search::unwrap_call_tool(&call.tool, &call.args) {
        Some((tool, args)) if tool != "call_tool" => std::borrow::Cow::Owned(ToolCallRequest {
            call_id: call.call_id.clone(),
            tool: tool.to_owned(),
            args: args.clone(),
            origin: call.origin,
        }),
        _ => std::borrow::Cow::Borrowed(call),
    }
}

/// How long a call may stay `in_progress` in the ledger before it is overdue.
const ACTION_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);

#[derive(Clone, Debug)]
pub struct ToolPipeline {
    registry: Arc<ToolRegistry>,
    budget: ResultBudget,
    ledger: Option<Ledger>,
    authorization: Option<Authorization>,
    /// Calls since start by tool and outcome (for `/metrics`).
    calls: Arc<std::sync::Mutex<std::collections::BTreeMap<(String, ToolStatus), u64>>>,
}

/// Policy rules and where confirmation requests go.
#[derive(Clone, Debug)]
pub struct Authorization {
    pub rules: PolicyRules,
    pub pending: PendingStore,
    /// How long a request waits for an answer.
    pub expiry: std::time::Duration,
}

impl ToolPipeline {
    pub fn new(registry: Arc<ToolRegistry>, budget: ResultBudget) -> Self {
        Self {
            registry,
            budget,
            ledger: None,
            authorization: None,
            calls: Arc::default(),
        }
    }

    /// Applies policy to every call; calls that need confirmation become pending actions.
    /// Without it every valid call runs (tests of single tools).
    pub fn with_authorization(mut self, authorization: Authorization) -> Self {
        self.authorization = Some(authorization);
        self
    }

    /// Records every call that changes something, so it never runs twice (see [`Ledger`]).
    pub fn with_ledger(mut self, ledger: Ledger) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Replaces the policy rules (a reload); calls already deciding keep the set they read.
    pub fn replace_policy(&self, rules: Vec<crate::policy::PolicyRule>) {
        if let Some(auth) = &self.authorization {
            auth.rules.replace(rules);
        }
    }

    /// The idempotency ledger, for reconciliation after a crash.
    pub fn ledger(&self) -> Option<&Ledger> {
        self.ledger.as_ref()
    }

    pub fn registry(&self) -> &ToolRegistry {
        &self.registry
    }

    /// Runs one call through every stage, the result cut to the tool's budget.
    pub async fn execute(&self, call: &ToolCallRequest, ctx: &ExecutionContext) -> ToolOutcome {
        let call = resolve(call);
        let span = call_span(&call, ctx);
        async {
            let outcome = match self.prepare(&call) {
                Ok(_) if !within_tools(&call.tool, ctx) => ToolOutcome::denied(format!(
                    "`{}` is not among this sub-agent's tools",
                    call.tool
                )),
                Ok(tool) => match self.authorize(&tool, &call, ctx) {
                    Some(refusal_or_pending) => refusal_or_pending,
                    None => self.perform(&tool, &call, ctx).await,
                },
                Err(outcome) => outcome,
            };
            self.within_budget(&call, outcome)
        }
        .instrument(span)
        .await
    }

    /// Runs an action the owner approved: every stage again except policy, whose question
    /// the approval answered (edited arguments are validated here like any others).
    pub async fn execute_approved(
        &self,
        call: &ToolCallRequest,
        ctx: &ExecutionContext,
    ) -> ToolOutcome {
        let call = resolve(call);
        let span = call_span(&call, ctx);
        async {
            let outcome = match self.prepare(&call) {
                Ok(tool) => self.perform(&tool, &call, ctx).await,
                Err(outcome) => outcome,
            };
            self.within_budget(&call, outcome)
        }
        .instrument(span)
        .await
    }

    /// The policy decision alone, for checking edited arguments before an approval runs them.
    pub fn decide(
        &self,
        call: &ToolCallRequest,
        ctx: &ExecutionContext,
    ) -> Result<Decision, ToolOutcome> {
        let tool = self.prepare(&resolve(call))?;
        let rules = self
            .authorization
            .as_ref()
            .map(|a| a.rules.snapshot())
            .unwrap_or_default();
        Ok(decide(PolicyInput {
            contract: &tool.contract,
            mode: ctx.mode,
            in_lane: !ctx.trajectory.is_main(),
            step_trust: ctx.step_trust,
            sends_out: sends_out(&tool, &call.args),
            rules: &rules,
        }))
    }

    /// The idempotency ledger's actions by state (empty without a ledger).
    pub fn ledger_states(&self) -> Vec<(&'static str, u64)> {
        self.ledger
            .as_ref()
            .and_then(|ledger| ledger.state_counts().ok())
            .map(|counts| counts.into_iter().collect())
            .unwrap_or_default()
    }

    /// How many calls ended how, by tool, since start.
    pub fn call_counts(&self) -> Vec<(String, ToolStatus, u64)> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|((tool, status), n)| (tool.clone(), *status, *n))
            .collect()
    }

    fn within_budget(&self, call: &ToolCallRequest, outcome: ToolOutcome) -> ToolOutcome {
        *self
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((call.tool.clone(), outcome.status))
            .or_default() += 1;
        let budget = self
            .registry
            .get(&call.tool)
            .map_or(self.budget.batch_budget(), |t| t.contract.result_budget);
        self.budget
            .apply(&call.call_id, &call.tool, budget, outcome)
    }

    /// Lookup (disabled tools refused here too) and argument validation.
    fn prepare(&self, call: &ToolCallRequest) -> Result<Arc<RegisteredTool>, ToolOutcome> {
        let Some(tool) = self.registry.get(&call.tool) else {
            return Err(ToolOutcome::error(
                match self.registry.closest_name(&call.tool) {
                    Some(near) => format!("unknown tool `{}`; did you mean `{near}`?", call.tool),
                    None => format!("unknown tool `{}`", call.tool),
                },
            ));
        };
        if let Some(why) = self.registry.why_disabled(&call.tool) {
            return Err(ToolOutcome::error(format!(
                "tool `{}` is disabled: {why}",
                call.tool
            )));
        }
        // A schema of the daemon's own that does not compile is a bug its tests catch; the
        // call is refused, with the reason, rather than run unchecked.
        let validator = tool
            .validator()
            .map_err(|e| ToolOutcome::error(e.to_string()))?;
        let problems: Vec<String> = validator
            .iter_errors(&call.args)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect();
        if !problems.is_empty() {
            return Err(ToolOutcome::error(format!(
                "invalid arguments for `{}`: {}",
                call.tool,
                problems.join("; ")
            )));
        }
        Ok(tool)
    }

    /// The contract as it applies to this call (see `ToolHandler::effect_for`).
    fn effective_contract<'t>(
        tool: &'t RegisteredTool,
        args: &serde_json::Value,
    ) -> std::borrow::Cow<'t, crate::contract::ToolContract> {
        match tool.handler.effect_for(args) {
            Some((side_effect, idempotent)) => {
                let mut contract = tool.contract.clone();
                contract.side_effect = side_effect;
                contract.idempotent = idempotent;
                std::borrow::Cow::Owned(contract)
            }
            None => std::borrow::Cow::Borrowed(&tool.contract),
        }
    }

    /// Safety, then policy: `None` to go on; a refusal, or a `pending` result naming the
    /// stored request. A blocked call is refused before policy is even asked; a call safety
    /// wants confirmed is confirmed unless policy denies it outright.
    fn authorize(
        &self,
        tool: &RegisteredTool,
        call: &ToolCallRequest,
        ctx: &ExecutionContext,
    ) -> Option<ToolOutcome> {
        let safety = tool.handler.safety(&call.args, ctx);
        if let Safety::Block(reason) = &safety {
            return Some(ToolOutcome::blocked(format!(
                "`{}` was blocked and never run: {reason}",
                call.tool
            )));
        }
        let Some(auth) = self.authorization.as_ref() else {
            return match safety {
                Safety::Confirm(reason) => Some(ToolOutcome::denied(format!(
                    "needs confirmation ({reason}), and none can be asked here"
                ))),
                _ => None,
            };
        };
        let contract = Self::effective_contract(tool, &call.args);
        let mut decision = decide(PolicyInput {
            contract: &contract,
            mode: ctx.mode,
            in_lane: !ctx.trajectory.is_main(),
            step_trust: ctx.step_trust,
            sends_out: sends_out(tool, &call.args),
            rules: &auth.rules.snapshot(),
        });
        if let Safety::Confirm(reason) = safety {
            decision = match decision {
                deny @ Decision::Deny { .. } => deny,
                _ => Decision::Confirm { reason },
            };
        }
        match decision {
            Decision::Allow => None,
            Decision::Deny { reason, policy_id } => Some(ToolOutcome::denied(format!(
                "denied by policy `{policy_id}`: {reason}"
            ))),
            Decision::Confirm { reason } => Some(
                match auth
                    .pending
                    .create(call, &reason, &ctx.trajectory, auth.expiry)
                {
                    Ok(action) => ToolOutcome {
                        status: ToolStatus::Pending,
                        content: json!({
                            "pending_id": action.id,
                            "preview": action.preview,
                            "reason": reason,
                            "expires_at": action.expires_at,
                            "confirm_with": format!("steward confirm {}", action.id),
                            "deny_with": format!("steward deny {} --reason TEXT", action.id),
                        }),
                        hint: Some(
                            "the call runs once the owner confirms it; do not call it again".into(),
                        ),
                        untrusted: false,
                    },
                    Err(e) => ToolOutcome::error(format!(
                        "needs confirmation, but the request could not be stored: {e}"
                    )),
                },
            ),
        }
    }

    /// Executes a call that may run, and marks its outcome untrusted when the contract says
    /// what it returns is someone else's words (an error too: it may quote the server).
    async fn perform(
        &self,
        tool: &RegisteredTool,
        call: &ToolCallRequest,
        ctx: &ExecutionContext,
    ) -> ToolOutcome {
        if ctx.cancel.is_cancelled() {
            return ToolOutcome::cancelled(json!("not started: the step was cancelled"));
        }
        self.registry.called(&ctx.trajectory, &call.tool);
        let mut outcome = self.run(tool, call, ctx).await;
        outcome.untrusted = returns_untrusted(tool, &call.args, ctx);
        outcome
    }

    /// Runs a call: through the ledger when it changes something, under the step's cancel
    /// token.
    async fn run(
        &self,
        tool: &RegisteredTool,
        call: &ToolCallRequest,
        ctx: &ExecutionContext,
    ) -> ToolOutcome {
        let mut ctx = ctx.for_call(&call.call_id, call.origin);
        debug!(call_id = %call.call_id, tool = %call.tool, "executing tool call");
        let contract = Self::effective_contract(tool, &call.args);
        if contract.side_effect != SideEffect::ReadOnly {
            let outcome = self
                .run_recorded(tool, call, contract.idempotent, &mut ctx)
                .await;
            info!(status = ?outcome.status, "a tool call that changes something finished");
            return outcome;
        }
        let run = tool.handler.call(&call.args, &ctx);
        tokio::select! {
            biased;
            outcome = run => outcome,
            () = ctx.cancel.cancelled() => {
                ToolOutcome::cancelled(json!("aborted: the step was cancelled"))
            }
        }
    }

    /// Runs a call that changes something under its ledger record: a completed record
    /// replays its result, an in-progress or unknown one refuses, and the outcome is stored.
    async fn run_recorded(
        &self,
        tool: &RegisteredTool,
        call: &ToolCallRequest,
        idempotent: bool,
        ctx: &mut ExecutionContext,
    ) -> ToolOutcome {
        let Some(ledger) = &self.ledger else {
            return tool.handler.call(&call.args, ctx).await;
        };
        let key = key_for(call);
        match ledger.begin(
            &key,
            &call.tool,
            &args_hash(&call.args),
            idempotent,
            ACTION_DEADLINE,
        ) {
            Ok(Begin::Run) => {}
            Ok(Begin::Replay(result)) => {
                debug!(call_id = %call.call_id, key, "already done; returning the recorded result");
                return result;
            }
            Ok(Begin::Refuse(reason)) => return ToolOutcome::error(reason),
            Err(e) => {
                return ToolOutcome::error(format!("not run: the action ledger failed ({e})"));
            }
        }
        if !idempotent && let Err(e) = ledger.sync().await {
            return ToolOutcome::error(format!(
                "not run: the action ledger could not be made durable ({e})"
            ));
        }
        ctx.idempotency_key = Some(key.clone());
        let outcome = tool.handler.call(&call.args, ctx).await;
        if let Err(e) = ledger.finish(&key, &outcome) {
            warn!(call_id = %call.call_id, key, error = %e, "could not record the outcome in the ledger");
        }
        outcome
    }

    /// Runs the calls of one step: consecutive concurrency-safe calls together (at most
    /// [`MAX_PARALLEL_CALLS`] at a time), every other call alone. Outcomes come back in the
    /// order of `calls`.
    pub async fn execute_batch(
        &self,
        calls: &[ToolCallRequest],
        ctx: &ExecutionContext,
    ) -> Vec<ToolOutcome> {
        let safe: Vec<bool> = calls
            .iter()
            .map(|c| self.registry.is_concurrency_safe(&c.tool, &c.args))
            .collect();
        let mut outcomes: Vec<ToolOutcome> = Vec::with_capacity(calls.len());
        // Taint: once an untrusted result is in, later calls run as in an untrusted step.
        let mut ctx = ctx.clone();
        for range in partition_batches(&safe) {
            let before = outcomes.len();
            if range.len() == 1 {
                outcomes.push(self.execute(&calls[range.start], &ctx).await);
            } else {
                for chunk in calls[range].chunks(MAX_PARALLEL_CALLS) {
                    outcomes.extend(self.execute_parallel(chunk, &ctx).await);
                }
            }
            if outcomes[before..].iter().any(|outcome| outcome.untrusted) {
                ctx.step_trust = steward_events::Trust::Untrusted;
            }
        }
        // Together over the batch budget: every result gets an equal share at most.
        if outcomes.iter().map(size_of).sum::<usize>() > self.budget.batch_budget() {
            let share = self.budget.share(outcomes.len());
            outcomes = calls
                .iter()
                .zip(outcomes)
                .map(|(call, outcome)| self.budget.apply(&call.call_id, &call.tool, share, outcome))
                .collect();
        }
        outcomes
    }

    async fn execute_parallel(
        &self,
        calls: &[ToolCallRequest],
        ctx: &ExecutionContext,
    ) -> Vec<ToolOutcome> {
        let mut set = JoinSet::new();
        for (index, call) in calls.iter().cloned().enumerate() {
            let pipeline = self.clone();
            let ctx = ctx.clone();
            set.spawn(async move { (index, pipeline.execute(&call, &ctx).await) });
        }
        let mut outcomes: Vec<Option<ToolOutcome>> = vec![None; calls.len()];
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((index, outcome)) => outcomes[index] = Some(outcome),
                Err(e) => warn!(error = %e, "tool task failed"),
            }
        }
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| ToolOutcome::error("the tool crashed; see the daemon log"))
            })
            .collect()
    }
}

/// The span of one call: every log line inside it (the pipeline's, the tool's) carries the
/// call id, the tool and the event the call came from, so a log follows one input from its
/// channel (the submitter's `event stored` line) to its side effect.
fn call_span(call: &ToolCallRequest, ctx: &ExecutionContext) -> tracing::Span {
    let span = tracing::info_span!(
        "tool_call",
        call_id = %call.call_id,
        tool = %call.tool,
        event_id = tracing::field::Empty
    );
    if let Some(event) = call.origin.or(ctx.origin_event) {
        span.record("event_id", tracing::field::display(event));
    }
    span
}

/// Whether a sub-agent's tool set (if the call runs in one) has `tool`.
fn within_tools(tool: &str, ctx: &ExecutionContext) -> bool {
    ctx.only_tools
        .as_ref()
        .is_none_or(|tools| tools.iter().any(|t| t == tool))
}
