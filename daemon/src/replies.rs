//! Where replies and step endings are announced, for whoever waits on them (a `send --wait`,
//! a chat session). A broadcast: a session that falls behind by more than the buffer loses
//! announcements and is told so; the trajectory keeps everything regardless.

use steward_events::{EventId, ToolOutcome};
use tokio::sync::broadcast;

use steward_events::StepEnd;

#[derive(Clone, Debug)]
pub enum Announcement {
    Reply {
        text: String,
        reply_to: Vec<EventId>,
    },
    /// A model's answer as it streams in: its text so far (replaced by the `Reply` that
    /// follows, or dropped when the step is cancelled).
    Partial {
        text: String,
        reply_to: Vec<EventId>,
    },
    StepEnded {
        events: Vec<EventId>,
        outcome: StepEnd,
    },
    /// The outcome of a tool call asked for directly (`steward tools call`).
    ToolResult {
        origin: EventId,
        outcome: ToolOutcome,
    },
}

#[derive(Clone, Debug)]
pub struct ReplyHub(broadcast::Sender<Announcement>);

impl Default for ReplyHub {
    fn default() -> Self {
        Self(broadcast::channel(4096).0)
    }
}

impl ReplyHub {
    pub fn announce(&self, announcement: Announcement) {
        // No receiver is fine: nobody is waiting.
        let _ = self.0.send(announcement);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Announcement> {
        self.0.subscribe()
    }
}
