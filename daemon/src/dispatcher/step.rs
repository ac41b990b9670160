//! One step of a trajectory — a turn, in the model's terms: brain → tool calls (through the
//! pipeline, in batches) → results → brain again, until the brain answers without calls,
//! `dispatcher.max_steps_per_turn` model calls were made (the owner is told), or the step's
//! cancel token fires. Used by the main trajectory and by side lanes alike.
//!
//! What the brain sees is a [`ContextView`]: loaded from the store once, extended as the
//! step records items, compacted when it outgrows the budget. The main trajectory's view is
//! kept between steps (only what was appended since is read); lanes load their own.

use std::sync::Arc;

use steward_events::{
    Event, ItemKind, ToolCallRequest, ToolOutcome, ToolStatus, TrajectoryItem, Trust,
};
use steward_tools::confirm::PendingStore;
use steward_tools::files::FileAccess;
use steward_tools::policy::Mode;
use steward_tools::{ExecutionContext, ToolPipeline};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::context::{ContextView, TokenEstimator};
use crate::brain::{AssistantMessage, BrainInput, new_call_id, prompt};
use crate::owner::outbox::{MessageKind, NewMessage, Outbox};
use crate::replies::{Announcement, ReplyHub};
use crate::store::{StoreError, Trajectory};
use steward_events::StepEnd;
use steward_events::TokenUsage;

#[derive(Debug)]
pub struct StepRunner {
    /// `[model]` and the profiles (see [`super::models`]).
    pub brains: super::Models,
    /// Every call's usage is recorded here; the caps are read from it.
    pub ledger: Arc<crate::usage::UsageLedger>,
    pub pipeline: ToolPipeline,
    pub replies: ReplyHub,
    /// Where answers the owner did not ask for in a session, and requests for
    /// confirmation, are queued for the owner.
    pub outbox: Outbox,
    /// The requests for confirmation (their short ids are unique among these).
    pub pending: PendingStore,
    /// The owner's zone, in which the model reads every event's time.
    pub zone: crate::zone::Zone,
    /// Model calls in one turn (`dispatcher.max_steps_per_turn`).
    pub max_model_calls: u32,
    pub files: Arc<FileAccess>,
    pub mode: Mode,
    /// Where token usage is reported (`steward status`).
    pub usage: Arc<crate::status::StatusBoard>,
    /// Tokens a prompt may take: the context window minus the answer's reserve.
    pub prompt_budget: u64,
    pub estimator: TokenEstimator,
    /// The trusted skills the system text names, computed once at start (the prompt prefix
    /// never changes while the daemon runs).
    pub skills_note: String,
    /// The main trajectory's view between its steps.
    pub main_view: std::sync::Mutex<Option<ContextView>>,
}

/// How a step ended, and the last thing the assistant said in it.
#[derive(Debug)]
pub struct StepReport {
    pub end: StepEnd,
    pub last_message: Option<String>,
}

/// The ids of a step's events for its span: the first few, then how many more.
fn event_ids(events: &[Event]) -> String {
    const SHOWN: usize = 8;
    let mut ids: Vec<String> = events
        .iter()
        .take(SHOWN)
        .map(|e| e.id.to_string())
        .collect();
    if events.len() > SHOWN {
        ids.push(format!("+{} more", events.len() - SHOWN));
    }
    ids.join(",")
}

impl StepRunner {
    /// Every log line of the step, its tool calls' included, names the step and its events.
    #[tracing::instrument(
        name = "step",
        skip_all,
        fields(trajectory = %trajectory.id(), step, events = %event_ids(events))
    )]
    pub async fn run(
        &self,
        trajectory: &Trajectory,
        step: u64,
        events: &[Event],
        items: Vec<TrajectoryItem>,
        flush: MergeFlush,
        cancel: CancellationToken,
    ) -> StepReport {
        let mut last_message = None;
        let result = match self.open_view(trajectory, items) {
            Ok(view) => {
                let mut state = StepState {
                    view,
                    flush,
                    last_message: None,
                    usage: TokenUsage::default(),
                };
                let end = self
                    .rounds(trajectory, step, events, &mut state, &cancel)
                    .await;
                last_message = state.last_message;
                if trajectory.id().is_main() {
                    self.usage.record_step(step, state.usage);
                }
                if end.is_ok() && trajectory.id().is_main() {
                    *self.main_view.lock().unwrap_or_else(|p| p.into_inner()) = Some(state.view);
                }
                end
            }
            Err(e) => Err(e),
        };
        let end = match result {
            Ok(end) => end,
            Err(StepError::Brain(crate::brain::BrainError::Unavailable(error))) => {
                warn!(trajectory = %trajectory.id(), step, error = %error, "the model is unavailable; the step will run again");
                StepEnd::Deferred { error }
            }
            Err(e) => {
                warn!(trajectory = %trajectory.id(), step, error = %e, "step failed");
                StepEnd::Failed {
                    error: e.to_string(),
                }
            }
        };
        StepReport { end, last_message }
    }

    async fn rounds(
        &self,
        trajectory: &Trajectory,
        step: u64,
        events: &[Event],
        state: &mut StepState,
        cancel: &CancellationToken,
    ) -> Result<StepEnd, StepError> {
        let StepState {
            view,
            flush,
            last_message,
            usage: step_usage,
        } = state;
        let mut ctx = self.execution_context(trajectory, events, cancel);
        // Tool calls the events asked for directly run first, through the same pipeline.
        let direct = direct_calls(events);
        let mut last_round = if direct.is_empty() {
            Vec::new()
        } else {
            flush.wait().await?;
            let outcomes = self
                .run_calls(trajectory, step, &direct, &mut ctx, view)
                .await?;
            for (call, outcome) in direct.iter().zip(&outcomes) {
                if let Some(origin) = call.origin {
                    self.replies.announce(Announcement::ToolResult {
                        origin,
                        outcome: outcome.clone(),
                    });
                }
            }
            if cancel.is_cancelled() {
                return Ok(cancelled());
            }
            direct.into_iter().zip(outcomes).collect()
        };
        let streaming = partial_answers(self.replies.clone(), events);
        let answering = Answering::new(events);
        let run = match events.iter().find_map(|e| e.payload.sub_agent()) {
            Some(task) => steward_config::RunSettings {
                max_model_calls_per_run: Some(task.max_model_calls),
                ..Default::default()
            },
            None => self
                .ledger
                .run_settings(events.iter().map(|e| e.channel.as_str())),
        };
        let model = self.brains.get(run.model.as_deref());
        let origin = Origin {
            channel: events.first().map_or("", |e| e.channel.as_str()),
            trajectory: trajectory.id().as_str(),
        };
        let mut guard = steward_events::LoopGuard::default();
        for round in 0..self.max_model_calls {
            if model.brain.history_items() > 0
                && !self
                    .fit_context(trajectory, step, view, cancel, &origin)
                    .await?
            {
                return Ok(cancelled());
            }
            // The tools can change at a compaction: read them from the view each round.
            let tools = match &ctx.only_tools {
                // A sub-agent sees only its own tools.
                Some(only) => Arc::new(
                    view.tools()
                        .iter()
                        .filter(|spec| only.contains(&spec.name))
                        .cloned()
                        .collect(),
                ),
                None => view.tools().clone(),
            };
            let prompt_bytes = view.fixed_bytes() + view.bytes();
            let spent = steward_events::Spent {
                run_tokens: step_usage.input + step_usage.output,
                run_calls: round,
                ..self.spent_today()
            };
            match self.budget_verdict(&run, model, spent, prompt_bytes) {
                steward_events::Verdict::Go => {}
                steward_events::Verdict::WaitForBudget(reason) => {
                    return Ok(StepEnd::OverBudget { reason });
                }
                steward_events::Verdict::StopRun(reason) => {
                    let text = format!("I stopped here: {reason}.");
                    *last_message = Some(text.clone());
                    self.stop(trajectory, step, view, &answering, text).await?;
                    return Ok(StepEnd::Completed);
                }
            }
            let input = BrainInput {
                skills: if ctx.only_tools.is_some() {
                    ""
                } else {
                    &self.skills_note
                },
                trajectory: trajectory.id(),
                step,
                events,
                history: view.items(),
                last_round: &last_round,
                round,
                tools: &tools,
                zone: self.zone,
                on_text: Some(crate::brain::OnText(&streaming)),
            };
            let turn = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(cancelled()),
                turn = model.brain.respond(input) => turn?,
            };
            if let Some(usage) = turn.usage {
                self.usage.record(usage);
                self.record_usage(&origin, model, usage)?;
                *step_usage += usage;
                self.estimator.calibrate(prompt_bytes, usage.input);
            }
            flush.wait().await?;
            if let Some(message) = turn.messages.last() {
                *last_message = Some(message.text.clone());
            }
            self.say(trajectory, step, view, &answering, turn.messages)
                .await?;
            if turn.tool_calls.is_empty() {
                return Ok(StepEnd::Completed);
            }
            let calls = turn.tool_calls.iter().map(|c| (c.tool.as_str(), &c.args));
            if let Some(why) = guard.before_calls(calls) {
                *last_message = Some(why.clone());
                self.stop(trajectory, step, view, &answering, why).await?;
                return Ok(StepEnd::Completed);
            }
            let outcomes = self
                .run_calls(trajectory, step, &turn.tool_calls, &mut ctx, view)
                .await?;
            if cancel.is_cancelled() {
                return Ok(cancelled());
            }
            let results: Vec<String> = outcomes
                .iter()
                .map(|o| serde_json::to_string(o).unwrap_or_default())
                .collect();
            if let Some(why) = guard.after_results(results.iter().map(String::as_str)) {
                *last_message = Some(why.clone());
                self.stop(trajectory, step, view, &answering, why).await?;
                return Ok(StepEnd::Completed);
            }
            last_round = turn.tool_calls.into_iter().zip(outcomes).collect();
        }
        let text = format!(
            "I stopped working on this after {} model calls without a final answer (dispatcher.max_steps_per_turn). Tell me if I should go on.",
            self.max_model_calls
        );
        *last_message = Some(text.clone());
        self.stop(trajectory, step, view, &answering, text).await?;
        Ok(StepEnd::Completed)
    }

    /// Ends a turn early: the daemon says why, in the trajectory and to the owner.
    async fn stop(
        &self,
        trajectory: &Trajectory,
        step: u64,
        view: &mut ContextView,
        answering: &Answering<'_>,
        text: String,
    ) -> Result<(), StepError> {
        warn!(trajectory = %trajectory.id(), step, reason = %text, "a turn ended early");
        let message = AssistantMessage {
            text,
            reply_to: answering.events.iter().map(|e| e.id).collect(),
            canned: true,
        };
        self.say(trajectory, step, view, answering, vec![message])
            .await
    }

    /// Today's spending, for the daily caps.
    fn spent_today(&self) -> steward_events::Spent {
        let (day_tokens, day_cost) = self.ledger.today();
        steward_events::Spent {
            day_tokens,
            day_cost,
            ..Default::default()
        }
    }

    /// Whether the next call (a prompt of `prompt_bytes`) may go out (see
    /// [`steward_events::before_model_call`]).
    fn budget_verdict(
        &self,
        run: &steward_config::RunSettings,
        model: &super::Model,
        spent: steward_events::Spent,
        prompt_bytes: usize,
    ) -> steward_events::Verdict {
        let daily = self.ledger.caps();
        let tokens = self.estimator.tokens(prompt_bytes);
        let caps = steward_events::Caps {
            run_tokens: run.max_tokens_per_run,
            run_calls: run.max_model_calls_per_run,
            daily_tokens: daily.daily_tokens,
            daily_cost: daily.daily_cost,
        };
        let next = steward_events::NextCall {
            tokens,
            cost: model.prices.map_or(0.0, |p| p.cost(tokens, 0, 0)),
        };
        steward_events::before_model_call(&caps, &spent, next)
    }

    fn record_usage(
        &self,
        origin: &Origin<'_>,
        model: &super::Model,
        usage: TokenUsage,
    ) -> Result<(), StepError> {
        self.ledger.record(
            &crate::usage::CallOrigin {
                channel: origin.channel,
                trajectory: origin.trajectory,
                model: &model.name,
                prices: model.prices,
            },
            usage,
        )?;
        Ok(())
    }

    /// What every call of the step runs with. Taint: the least trusted event of the step
    /// decides for every call in it.
    fn execution_context(
        &self,
        trajectory: &Trajectory,
        events: &[Event],
        cancel: &CancellationToken,
    ) -> ExecutionContext {
        ExecutionContext {
            files: self.files.clone(),
            trajectory: trajectory.id().clone(),
            origin_event: events.first().map(|e| e.id),
            call_id: String::new(),
            mode: self.mode,
            step_trust: events
                .iter()
                .map(|e| e.trust)
                .max_by_key(|t| trust_rank(*t))
                .unwrap_or(Trust::Owner),
            idempotency_key: None,
            owner: Arc::new(self.outbox.clone()),
            cancel: cancel.clone(),
            only_tools: events
                .iter()
                .find_map(|e| e.payload.sub_agent())
                .map(|task| task.tools.iter().cloned().collect()),
        }
    }

    /// Records a turn's answers in the trajectory, announces each to whoever waits, and
    /// queues them for the owner (already delivered where the owner asked for it in a
    /// session) with one flush for all of them.
    async fn say(
        &self,
        trajectory: &Trajectory,
        step: u64,
        view: &mut ContextView,
        answering: &Answering<'_>,
        messages: Vec<AssistantMessage>,
    ) -> Result<(), StepError> {
        let mut for_owner = Vec::with_capacity(messages.len());
        for AssistantMessage {
            text,
            reply_to,
            canned,
        } in messages
        {
            view.push(trajectory.append(
                step,
                ItemKind::Assistant {
                    text: text.clone(),
                    reply_to: reply_to.clone(),
                    canned,
                },
            )?);
            let answered = answering.answered(&reply_to);
            for_owner.push(NewMessage {
                text: text.clone(),
                origin: answered.first().map(|e| e.id),
                pending_id: None,
                delivered_to: crate::owner::notices::asked_through(&answered),
            });
            self.replies
                .announce(Announcement::Reply { text, reply_to });
        }
        if answering.for_sub_agent {
            // A sub-agent answers the conversation that spawned it, not the owner.
            return Ok(());
        }
        self.outbox
            .queue_all(MessageKind::Answer, for_owner)
            .await?;
        Ok(())
    }

    /// Queues a request for the owner's confirmation for each call that waits for one.
    async fn ask_owner(
        &self,
        calls: &[ToolCallRequest],
        outcomes: &[ToolOutcome],
    ) -> Result<(), StepError> {
        let waiting: Vec<(&ToolCallRequest, &str)> = calls
            .iter()
            .zip(outcomes)
            .filter(|(_, outcome)| outcome.status == ToolStatus::Pending)
            .filter_map(|(call, outcome)| Some((call, outcome.content["pending_id"].as_str()?)))
            .collect();
        if waiting.is_empty() {
            return Ok(());
        }
        // Read once: the actions asked about, and every id their short ids must differ from.
        let actions = self.pending.list().unwrap_or_default();
        let ids: Vec<&str> = actions.iter().map(|a| a.id.as_str()).collect();
        for (call, id) in waiting {
            let Some(action) = actions.iter().find(|a| a.id == id) else {
                continue;
            };
            let short = crate::owner::notices::short_id(&action.id, &ids);
            let text = crate::owner::notices::confirmation_request(
                &call.tool,
                &action.preview,
                short,
                action.expires_at,
            );
            let message = NewMessage {
                text,
                origin: call.origin.or(action.origin_event),
                pending_id: Some(action.id.clone()),
                delivered_to: None,
            };
            self.outbox
                .queue(MessageKind::Confirmation, message)
                .await?;
        }
        Ok(())
    }
}

/// The tool calls the events ask for directly (`steward tools call`, a job's `action`).
fn direct_calls(events: &[Event]) -> Vec<ToolCallRequest> {
    events
        .iter()
        .filter_map(|e| {
            let (tool, args) = e.payload.direct_call()?;
            Some(ToolCallRequest {
                call_id: new_call_id(),
                tool: tool.to_owned(),
                args: args.clone(),
                origin: Some(e.id),
            })
        })
        .collect()
}

impl StepRunner {
    /// Records the calls, runs them as one batch, records their results in order.
    async fn run_calls(
        &self,
        trajectory: &Trajectory,
        step: u64,
        calls: &[ToolCallRequest],
        ctx: &mut ExecutionContext,
        view: &mut ContextView,
    ) -> Result<Vec<ToolOutcome>, StepError> {
        for call in calls {
            view.push(trajectory.append(
                step,
                ItemKind::ToolCall {
                    call_id: call.call_id.clone(),
                    tool: call.tool.clone(),
                    args: call.args.clone(),
                },
            )?);
        }
        let outcomes = self.pipeline.execute_batch(calls, ctx).await;
        if outcomes.iter().any(|outcome| outcome.untrusted) {
            // Untrusted content is in the step now: taint it for every later round.
            ctx.step_trust = Trust::Untrusted;
        }
        for (call, outcome) in calls.iter().zip(&outcomes) {
            view.push(trajectory.append(
                step,
                ItemKind::ToolResult {
                    call_id: call.call_id.clone(),
                    tool: call.tool.clone(),
                    status: outcome.status,
                    result: outcome.content.clone(),
                    hint: outcome.hint.clone(),
                    untrusted: outcome.untrusted,
                },
            )?);
        }
        self.ask_owner(calls, &outcomes).await?;
        Ok(outcomes)
    }
}

impl StepRunner {
    /// The view this step starts from; `step_items` are the items the dispatcher recorded
    /// for it (already in the store).
    fn open_view(
        &self,
        trajectory: &Trajectory,
        step_items: Vec<TrajectoryItem>,
    ) -> Result<ContextView, StepError> {
        let max_items = self.brains.default.brain.history_items();
        if max_items == 0 {
            return Ok(ContextView::new(self.tools_now(trajectory), step_items));
        }
        let cached = if trajectory.id().is_main() {
            self.main_view
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
        } else {
            None
        };
        Ok(match cached {
            Some(mut view) => {
                let last = view.items().last().map_or(0, |i| i.seq);
                for item in trajectory.after(last)? {
                    view.push(item);
                }
                view
            }
            None => ContextView::new(
                self.tools_now(trajectory),
                trajectory.context_items(max_items)?,
            ),
        })
    }

    /// The tools a fresh view shows: the registry's current set for this trajectory.
    fn tools_now(&self, trajectory: &Trajectory) -> Arc<Vec<steward_tools::ToolSpec>> {
        Arc::new(self.pipeline.registry().specs(!trajectory.id().is_main()))
    }

    /// Compacts the view when it outgrew the budget (see [`super::context`]). `false` when
    /// the step was cancelled meanwhile.
    async fn fit_context(
        &self,
        trajectory: &Trajectory,
        step: u64,
        view: &mut ContextView,
        cancel: &CancellationToken,
        origin: &Origin<'_>,
    ) -> Result<bool, StepError> {
        let Some(cut) = view.cut(self.prompt_budget, &self.estimator) else {
            return Ok(true);
        };
        let covered = &view.items()[..cut];
        let covers_through = covered
            .iter()
            .filter(|i| !matches!(i.kind, ItemKind::Summary { .. }))
            .map(|i| i.seq)
            .max()
            .unwrap_or(0);
        let transcript = prompt::transcript(covered, self.zone);
        let summary = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(false),
            summary = self.brains.default.brain.summarize(transcript) => summary?,
        };
        if let Some(usage) = summary.usage {
            self.usage.record(usage);
            self.record_usage(origin, &self.brains.default, usage)?;
        }
        info!(trajectory = %trajectory.id(), step, items = cut, covers_through, "compacted the model's context into a summary");
        let item = trajectory.append(
            step,
            ItemKind::Summary {
                text: summary.text,
                covers_through,
            },
        )?;
        view.compact(cut, item, self.tools_now(trajectory));
        Ok(true)
    }
}

/// What caused a step's model calls (their usage is counted under it).
#[derive(Debug)]
struct Origin<'a> {
    channel: &'a str,
    trajectory: &'a str,
}

/// What a step carries from round to round.
#[derive(Debug)]
struct StepState {
    view: ContextView,
    flush: MergeFlush,
    /// The last thing the assistant said (a side lane's result).
    last_message: Option<String>,
    /// Tokens of every model call in this step.
    usage: TokenUsage,
}

/// The flush that makes a step's merge durable. It runs alongside the first model call —
/// which changes nothing outside — and is awaited before the step's first visible action (a
/// tool call, a reply), so a crash before it can only replay the events, never repeat what
/// they caused. Keeping the fsync off the critical path saves most of a millisecond per step.
#[derive(Debug, Default)]
pub struct MergeFlush(Option<tokio::task::JoinHandle<Result<(), StoreError>>>);

impl MergeFlush {
    pub fn start(store: crate::store::Store) -> Self {
        Self(Some(tokio::spawn(async move { store.flush().await })))
    }

    async fn wait(&mut self) -> Result<(), StepError> {
        match self.0.take() {
            None => Ok(()),
            Some(flush) => match flush.await {
                Ok(result) => Ok(result?),
                Err(e) => Err(StepError::Flush(e.to_string())),
            },
        }
    }
}

/// Higher is less trusted.
fn trust_rank(trust: Trust) -> u8 {
    match trust {
        Trust::Owner => 0,
        Trust::Trusted => 1,
        Trust::Untrusted => 2,
    }
}

fn cancelled() -> StepEnd {
    StepEnd::Cancelled {
        reason: "cancelled".into(),
    }
}

#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Brain(#[from] crate::brain::BrainError),
    #[error("the step's merge could not be made durable: {0}")]
    Flush(String),
}

/// Announces a streaming answer's text so far (for the owner's page), at most every
/// [`PARTIAL_EVERY`]: the final reply follows anyway, so a skipped update loses nothing.
fn partial_answers(replies: ReplyHub, events: &[Event]) -> impl Fn(&str) + Send + Sync + use<> {
    let reply_to: Vec<steward_events::EventId> = events.iter().map(|e| e.id).collect();
    let last = std::sync::Mutex::new(None::<tokio::time::Instant>);
    move |text: &str| {
        let now = tokio::time::Instant::now();
        let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| now - at < PARTIAL_EVERY) {
            return;
        }
        *last = Some(now);
        replies.announce(Announcement::Partial {
            reply_to: reply_to.clone(),
            text: text.to_owned(),
        });
    }
}

/// How often a streaming answer's progress is announced.
const PARTIAL_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The events a step answers, indexed once per step: a step under load merges thousands of
/// events, and the rules brain answers each with its own message — looking each answer's
/// events up by scanning the batch made a step quadratic (webhooks at 2,000/s).
struct Answering<'a> {
    events: &'a [Event],
    position: std::collections::HashMap<steward_events::EventId, usize>,
    /// The step works for a sub-agent, which answers the conversation that spawned it.
    for_sub_agent: bool,
}

impl<'a> Answering<'a> {
    fn new(events: &'a [Event]) -> Self {
        Self {
            events,
            position: events.iter().enumerate().map(|(i, e)| (e.id, i)).collect(),
            for_sub_agent: events.iter().any(|e| e.payload.sub_agent().is_some()),
        }
    }

    /// The events an answer replies to, in the order they arrived (all of them when it
    /// names none).
    fn answered(&self, reply_to: &[steward_events::EventId]) -> Vec<&'a Event> {
        if reply_to.is_empty() {
            return self.events.iter().collect();
        }
        let mut positions: Vec<usize> = reply_to
            .iter()
            .filter_map(|id| self.position.get(id).copied())
            .collect();
        positions.sort_unstable();
        positions.dedup();
        positions.iter().map(|&i| &self.events[i]).collect()
    }
}

#[cfg(test)]
mod tests {
    use steward_events::{Payload, Sender, Source, Trust};

    use super::*;

    fn event(text: &str) -> Event {
        Event::new(
            Source::User,
            "user:socket",
            Sender {
                identity: "uid:1000".into(),
                authenticated_by: "unix-socket-peer".into(),
            },
            Trust::Owner,
            Payload::Message { text: text.into() },
        )
    }

    #[test]
    fn an_answer_reaches_the_events_it_names_in_arrival_order() {
        let events: Vec<Event> = ["a", "b", "c", "d"].iter().map(|t| event(t)).collect();
        let answering = Answering::new(&events);
        let texts = |answered: Vec<&Event>| -> Vec<String> {
            answered
                .iter()
                .map(|e| e.payload.text().to_owned())
                .collect()
        };
        let named = [
            events[3].id,
            events[1].id,
            events[3].id,
            event("elsewhere").id,
        ];
        assert_eq!(texts(answering.answered(&named)), ["b", "d"]);
        assert_eq!(texts(answering.answered(&[])), ["a", "b", "c", "d"]);
        assert!(!answering.for_sub_agent);
    }
}
