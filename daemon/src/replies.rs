//! Where replies and step endings are announced, for whoever waits on them (a `send --wait`,
//! a chat session). A broadcast: a session that falls behind by more than the buffer loses
//! announcements and is told so; the trajectory keeps everything regardless.
//!
//! Announcements travel shared, not copied: the channel writes every one of its slots when it
//! is made, and a slot of a pointer is 32 bytes against ~100 for a whole announcement — 130 KB
//! a daemon holds from its start instead of 420.

use std::sync::Arc;

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
pub struct ReplyHub(broadcast::Sender<Arc<Announcement>>);

impl Default for ReplyHub {
    fn default() -> Self {
        Self(broadcast::channel(4096).0)
    }
}

impl ReplyHub {
    pub fn announce(&self, announcement: Announcement) {
        // No receiver is fine: nobody is waiting.
        let _ = self.0.send(Arc::new(announcement));
    }

    pub fn subscribe(&self) -> Announcements {
        Announcements(self.0.subscribe())
    }
}

/// One listener's announcements, each its own copy.
#[derive(Debug)]
pub struct Announcements(broadcast::Receiver<Arc<Announcement>>);

impl Announcements {
    /// The next announcement, or how many this listener fell behind by.
    pub async fn recv(&mut self) -> Result<Announcement, broadcast::error::RecvError> {
        self.0.recv().await.map(Arc::unwrap_or_clone)
    }
}
