//! How a step ended and what its model calls cost: the dispatcher decides the first, the
//! brain reports the second, and both are told to the owner (the socket, HTTP, status).

use serde::{Deserialize, Serialize};

/// How a step (or a side lane) ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum StepEnd {
    Completed,
    Cancelled {
        reason: String,
    },
    Failed {
        error: String,
    },
    /// The model was unreachable; the step runs again later for the same events. Not
    /// announced as an ending: whoever waits keeps waiting for the real answer.
    Deferred {
        error: String,
    },
    /// The daily budget is reached; the step runs again for the same events once it
    /// allows (a raised cap, or the next day). Not announced as an ending either.
    OverBudget {
        reason: String,
    },
}

/// Token counts as the provider reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
