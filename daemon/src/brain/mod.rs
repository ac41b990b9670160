//! The brain: given the step so far and the visible tools, it answers with messages and/or
//! tool calls. The dispatcher's step loop ([`crate::dispatcher`]) drives it; providers that
//! talk to an LLM implement the same trait. [`NoneBrain`] is the brain without a model.

mod none;
mod openai;
mod sse;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use steward_events::{Event, EventId, ToolCallRequest, ToolOutcome, TrajectoryId, TrajectoryItem};
use steward_tools::ToolSpec;

pub use none::NoneBrain;
pub use openai::{OpenAiBrain, SYSTEM_TEXT, render_messages};

/// What the brain sees for one round of a step.
#[derive(Debug)]
pub struct BrainInput<'a> {
    pub trajectory: &'a TrajectoryId,
    pub step: u64,
    /// The events merged for this step, in arrival order.
    pub events: &'a [Event],
    /// Every item of this step so far (events, messages, calls, results).
    pub step_items: &'a [TrajectoryItem],
    /// The most recent items of the trajectory (`Brain::history_items` of them), this
    /// step's included, oldest first: the conversation a model sees.
    pub history: &'a [TrajectoryItem],
    /// The calls of the previous round with their outcomes. In the first round these are
    /// the tool calls the events asked for directly (`steward tools call`), if any.
    pub last_round: &'a [(ToolCallRequest, ToolOutcome)],
    /// 0 for the brain's first turn in this step.
    pub round: u32,
    pub tools: &'a [ToolSpec],
}

/// A message for the owner; routed back to whoever sent the events it answers.
#[derive(Clone, Debug, PartialEq)]
pub struct AssistantMessage {
    pub text: String,
    pub reply_to: Vec<EventId>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct BrainTurn {
    pub messages: Vec<AssistantMessage>,
    /// Empty: the step is done.
    pub tool_calls: Vec<ToolCallRequest>,
    /// Tokens the provider reported for this call, if it did.
    pub usage: Option<TokenUsage>,
}

/// Token counts as the provider reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TokenUsage {
    pub input: u64,
    /// Input served from the provider's prompt cache (part of `input`).
    pub cached_input: u64,
    pub output: u64,
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, other: Self) {
        self.input += other.input;
        self.cached_input += other.cached_input;
        self.output += other.output;
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BrainError {
    /// Network trouble, rate limits, server errors, broken streams: worth trying later. The
    /// step is deferred and its events stay waiting; nothing is lost.
    #[error("the model is unavailable: {0}")]
    Unavailable(String),
    /// The provider refused the request itself (4xx other than 429): retrying the same
    /// request cannot help.
    #[error("the model rejected the request: {0}")]
    Rejected(String),
}

pub type BrainFuture<'a> = Pin<Box<dyn Future<Output = Result<BrainTurn, BrainError>> + Send + 'a>>;

pub trait Brain: Send + Sync + fmt::Debug + 'static {
    /// Shown in `steward status`.
    fn name(&self) -> &'static str;

    /// How many recent trajectory items to put in `BrainInput::history`. Reading them is
    /// work on every round, so a brain that never looks (the `none` brain) says 0.
    fn history_items(&self) -> usize {
        200
    }
    fn respond<'a>(&'a self, input: BrainInput<'a>) -> BrainFuture<'a>;
}

/// A fresh, unique id for a tool call.
pub fn new_call_id() -> String {
    format!("call_{}", ulid::Ulid::generate())
}
