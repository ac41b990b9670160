//! One step of a trajectory: brain → tool calls (through the pipeline, in batches) →
//! results → brain again, until the brain answers without calls, the round limit is hit, or
//! the step's cancel token fires. Used by the main trajectory and by side lanes alike.

use std::sync::Arc;

use steward_events::{
    Event, ItemKind, Payload, ToolCallRequest, ToolOutcome, TrajectoryItem, Trust,
};
use steward_tools::files::FileAccess;
use steward_tools::policy::Mode;
use steward_tools::{ExecutionContext, ToolPipeline};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::brain::{Brain, BrainInput, new_call_id};
use crate::protocol::StepEnd;
use crate::replies::{Announcement, ReplyHub};
use crate::store::{StoreError, Trajectory};

#[derive(Debug)]
pub struct StepRunner {
    pub brain: Arc<dyn Brain>,
    pub pipeline: ToolPipeline,
    pub replies: ReplyHub,
    pub max_rounds: u32,
    pub files: Arc<FileAccess>,
    pub mode: Mode,
    /// Where token usage is reported (`steward status`).
    pub usage: Arc<crate::status::StatusBoard>,
}

/// How a step ended, and the last thing the assistant said in it.
#[derive(Debug)]
pub struct StepReport {
    pub end: StepEnd,
    pub last_message: Option<String>,
}

impl StepRunner {
    pub async fn run(
        &self,
        trajectory: &Trajectory,
        step: u64,
        events: &[Event],
        items: Vec<TrajectoryItem>,
        cancel: CancellationToken,
    ) -> StepReport {
        let mut last_message = None;
        let end = match self
            .rounds(trajectory, step, events, items, &cancel, &mut last_message)
            .await
        {
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
        mut items: Vec<TrajectoryItem>,
        cancel: &CancellationToken,
        last_message: &mut Option<String>,
    ) -> Result<StepEnd, StepError> {
        let tools = self.pipeline.registry().specs(!trajectory.id().is_main());
        let mut ctx = ExecutionContext {
            files: self.files.clone(),
            trajectory: trajectory.id().clone(),
            origin_event: events.first().map(|e| e.id),
            call_id: String::new(),
            mode: self.mode,
            // Taint: the least trusted event of the step decides for every call in it.
            step_trust: events
                .iter()
                .map(|e| e.trust)
                .max_by_key(|t| trust_rank(*t))
                .unwrap_or(Trust::Owner),
            idempotency_key: None,
            owner: Arc::new(self.replies.clone()),
            cancel: cancel.clone(),
        };
        // Tool calls the events asked for directly run first, through the same pipeline.
        let direct: Vec<ToolCallRequest> = events
            .iter()
            .filter_map(|e| match &e.payload {
                Payload::ToolCall { tool, args, .. } => Some(ToolCallRequest {
                    call_id: new_call_id(),
                    tool: tool.clone(),
                    args: args.clone(),
                    origin: Some(e.id),
                }),
                _ => None,
            })
            .collect();
        let mut last_round = if direct.is_empty() {
            Vec::new()
        } else {
            let outcomes = self
                .run_calls(trajectory, step, &direct, &mut ctx, &mut items)
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
        for round in 0..self.max_rounds {
            let history = match self.brain.history_items() {
                0 => Vec::new(),
                n => trajectory.list(Some(n))?,
            };
            let input = BrainInput {
                trajectory: trajectory.id(),
                step,
                events,
                step_items: &items,
                history: &history,
                last_round: &last_round,
                round,
                tools: &tools,
            };
            let turn = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(cancelled()),
                turn = self.brain.respond(input) => turn?,
            };
            if let Some(usage) = turn.usage {
                self.usage.record(usage);
            }
            for message in turn.messages {
                let item = trajectory.append(
                    step,
                    ItemKind::Assistant {
                        text: message.text.clone(),
                        reply_to: message.reply_to.clone(),
                    },
                )?;
                items.push(item);
                *last_message = Some(message.text.clone());
                self.replies.announce(Announcement::Reply {
                    text: message.text,
                    reply_to: message.reply_to,
                });
            }
            if turn.tool_calls.is_empty() {
                return Ok(StepEnd::Completed);
            }
            let outcomes = self
                .run_calls(trajectory, step, &turn.tool_calls, &mut ctx, &mut items)
                .await?;
            if cancel.is_cancelled() {
                return Ok(cancelled());
            }
            last_round = turn.tool_calls.into_iter().zip(outcomes).collect();
        }
        let text = format!(
            "Stopped this step after {} rounds of tool calls (dispatcher.max_rounds_per_step).",
            self.max_rounds
        );
        let reply_to: Vec<_> = events.iter().map(|e| e.id).collect();
        trajectory.append(
            step,
            ItemKind::Assistant {
                text: text.clone(),
                reply_to: reply_to.clone(),
            },
        )?;
        self.replies
            .announce(Announcement::Reply { text, reply_to });
        Ok(StepEnd::Completed)
    }
}

impl StepRunner {
    /// Records the calls, runs them as one batch, records their results in order.
    async fn run_calls(
        &self,
        trajectory: &Trajectory,
        step: u64,
        calls: &[ToolCallRequest],
        ctx: &mut ExecutionContext,
        items: &mut Vec<TrajectoryItem>,
    ) -> Result<Vec<ToolOutcome>, StepError> {
        for call in calls {
            items.push(trajectory.append(
                step,
                ItemKind::ToolCall {
                    call_id: call.call_id.clone(),
                    tool: call.tool.clone(),
                    args: call.args.clone(),
                },
            )?);
        }
        let outcomes = self.pipeline.execute_batch(calls, ctx).await;
        if outcomes.iter().any(steward_tools::is_untrusted) {
            // Untrusted content is in the step now: taint it for every later round.
            ctx.step_trust = Trust::Untrusted;
        }
        for (call, outcome) in calls.iter().zip(&outcomes) {
            items.push(trajectory.append(
                step,
                ItemKind::ToolResult {
                    call_id: call.call_id.clone(),
                    tool: call.tool.clone(),
                    status: outcome.status,
                    result: outcome.content.clone(),
                    hint: outcome.hint.clone(),
                },
            )?);
        }
        Ok(outcomes)
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
}
