//! Steward's vocabulary: what every input becomes ([`Event`]), how urgent it is ([`Urgency`],
//! decided by [`classify_urgency`]), where it ends ([`EventState`]), and what the brain reads
//! ([`TrajectoryItem`]).
//!
//! This crate is deliberately pure: no networking, no storage, no async runtime. Everything
//! that decides something (urgency, step routing, delivery routing) is a plain function with table tests, so
//! the daemon can stay a thin layer of wiring around it.

mod budget;
mod chat;
mod delivery;
mod event;
mod hex;
mod id;
mod routing;
mod senders;
mod step;
mod tool_call;
mod trajectory;
mod urgency;

pub use budget::{Caps, LoopGuard, NextCall, Spent, Verdict, before_model_call};
pub use chat::{Admission, ChatRules, RoomFacts, admit};
pub use delivery::{DeliveryClass, DeliveryRules};
pub use event::{
    ChatMessage, EmailMessage, Event, EventState, FileChange, Payload, SavedAttachment,
    ScheduledAction, Sender, Source, StateKind, SubAgentTask, Trust,
};
pub use hex::to_hex;
pub use id::{EventId, ParseIdError};
pub use routing::{LaneFit, Route, route_event};
pub use senders::{SenderDecision, SenderPolicy, Unknown};
pub use step::{StepEnd, TokenUsage};
pub use tool_call::{ToolCallRequest, ToolOutcome, ToolStatus};
pub use trajectory::{ItemKind, TrajectoryId, TrajectoryItem};
pub use urgency::{FieldMatch, Urgency, UrgencyRule, classify_urgency};
