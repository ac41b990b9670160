//! The brain: given the step so far and the visible tools, it answers with messages and/or
//! tool calls. The dispatcher's step loop ([`crate::dispatcher`]) drives it; providers that
//! talk to an LLM implement the same trait. [`NoneBrain`] is the brain without a model.
//!
//! Providers share [`prompt`] (what is said) and [`transport`] (how it travels, retries);
//! each owns only its JSON shapes and its stream decoder.
// Everything here reads outside input (model APIs): no slicing that can panic; where an
// index is proven in range, a comment says why.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

mod anthropic;
mod none;
mod openai;
pub mod prompt;
pub(crate) mod sse;
pub mod transport;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use steward_events::{
    Event, EventId, TokenUsage, ToolCallRequest, ToolOutcome, TrajectoryId, TrajectoryItem,
};
use steward_tools::ToolSpec;

pub use anthropic::AnthropicBrain;
pub use none::NoneBrain;
pub use openai::OpenAiBrain;

/// What the brain sees for one round of a step.
#[derive(Debug)]
pub struct BrainInput<'a> {
    pub trajectory: &'a TrajectoryId,
    pub step: u64,
    /// The events merged for this step, in arrival order.
    pub events: &'a [Event],
    /// The conversation a model sees, oldest first, this step's items included: recent
    /// items (at most `Brain::history_items`), possibly opened by a summary of older ones.
    pub history: &'a [TrajectoryItem],
    /// The calls of the previous round with their outcomes. In the first round these are
    /// the tool calls the events asked for directly (`steward tools call`), if any.
    pub last_round: &'a [(ToolCallRequest, ToolOutcome)],
    /// 0 for the brain's first turn in this step.
    pub round: u32,
    /// Shared: a brain recognises the list it saw last without comparing it.
    pub tools: &'a Arc<Vec<ToolSpec>>,
    /// The skills the system text names (empty: none), fixed for the daemon's run.
    pub skills: &'a str,
    /// The owner's zone: events are dated in it (`owner.timezone`).
    pub zone: crate::zone::Zone,
    /// Told the answer's text so far while a model streams it (the owner's page shows it).
    pub on_text: Option<OnText<'a>>,
}

/// Where a streaming answer's text so far goes (see [`BrainInput::on_text`]).
#[derive(Clone, Copy)]
pub struct OnText<'a>(pub &'a transport::Progress);

impl fmt::Debug for OnText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnText(..)")
    }
}

/// A message for the owner; routed back to whoever sent the events it answers.
#[derive(Clone, Debug, PartialEq)]
pub struct AssistantMessage {
    pub text: String,
    pub reply_to: Vec<EventId>,
    /// Written by the daemon, not a model (see `ItemKind::Assistant::canned`).
    pub canned: bool,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct BrainTurn {
    pub messages: Vec<AssistantMessage>,
    /// Empty: the step is done.
    pub tool_calls: Vec<ToolCallRequest>,
    /// Tokens the provider reported for this call, if it did.
    pub usage: Option<TokenUsage>,
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

/// A model-written summary of older conversation (context compaction).
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub text: String,
    pub usage: Option<TokenUsage>,
}

pub type SummaryFuture<'a> = Pin<Box<dyn Future<Output = Result<Summary, BrainError>> + Send + 'a>>;

pub trait Brain: Send + Sync + fmt::Debug + 'static {
    /// Shown in `steward status`.
    fn name(&self) -> &'static str;

    /// How many recent trajectory items to put in `BrainInput::history`. Reading them is
    /// work on every round, so a brain that never looks (the `none` brain) says 0.
    fn history_items(&self) -> usize {
        1000
    }
    fn respond<'a>(&'a self, input: BrainInput<'a>) -> BrainFuture<'a>;

    /// Summarizes a transcript of older conversation so it can stand in for it. Brains
    /// without a model never see history (`history_items` 0), so they are never asked.
    fn summarize(&self, _transcript: String) -> SummaryFuture<'_> {
        Box::pin(async {
            Err(BrainError::Rejected(
                "this brain cannot write summaries".into(),
            ))
        })
    }
}

impl transport::Answer {
    /// The turn a completed answer makes: its text answers the step's events, its calls
    /// come from the first of them.
    fn into_turn(self, events: &[Event]) -> BrainTurn {
        let origin = events.first().map(|e| e.id);
        let mut turn = BrainTurn {
            usage: self.usage,
            ..BrainTurn::default()
        };
        if !self.text.trim().is_empty() {
            turn.messages.push(AssistantMessage {
                text: self.text,
                reply_to: events.iter().map(|e| e.id).collect(),
                canned: false,
            });
        }
        turn.tool_calls = self
            .calls
            .into_iter()
            .filter(|c| !c.name.is_empty())
            .map(|c| ToolCallRequest {
                call_id: if c.id.is_empty() { new_call_id() } else { c.id },
                tool: c.name,
                // Arguments that are not JSON reach the pipeline as a string and fail its
                // validation, which tells the model what was wrong.
                args: match c.arguments.trim() {
                    "" => Value::Object(Default::default()),
                    text => serde_json::from_str(text).unwrap_or(Value::String(c.arguments)),
                },
                origin,
            })
            .collect();
        turn
    }
}

/// A fresh, unique id for a tool call.
pub fn new_call_id() -> String {
    format!("call_{}", ulid::Ulid::generate())
}
