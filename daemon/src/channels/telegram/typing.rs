//! "typing…" in a chat while a step works on a message from it.
//!
//! Decided here:
//! - Telegram shows a chat action for five seconds (or until the bot's next message), so it
//!   is sent again every [`RENEW`] while a message of the chat is in work, and simply not
//!   renewed once none is: there is no call that clears it, and a crash lets it lapse.
//! - A chat is busy from the moment one of its messages is durable until the step that
//!   merged it ends, however it ends (answered, failed, cancelled); a message is given up on
//!   after [`GIVE_UP`] (the model may be down for hours).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use steward_events::EventId;
use tokio::sync::Notify;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::api::BotApi;
use crate::replies::{Announcement, ReplyHub};

const RENEW: Duration = Duration::from_secs(4);
const GIVE_UP: Duration = Duration::from_secs(120);

/// The chats with messages in work. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Typing {
    busy: Arc<Mutex<HashMap<i64, HashMap<EventId, Instant>>>>,
    changed: Arc<Notify>,
}

impl Typing {
    /// `event`, from `chat`, is durable and waits for a step.
    pub fn start(&self, chat: i64, event: EventId) {
        self.lock()
            .entry(chat)
            .or_default()
            .insert(event, Instant::now());
        self.changed.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, HashMap<EventId, Instant>>> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets ended (and given-up) events; whether anything changed.
    fn finish(&self, ended: &[EventId]) {
        let now = Instant::now();
        self.lock().retain(|_, events| {
            events.retain(|id, since| !ended.contains(id) && now - *since < GIVE_UP);
            !events.is_empty()
        });
    }

    fn busy_chats(&self) -> Vec<i64> {
        self.lock().keys().copied().collect()
    }

    /// Keeps the chat actions going until `stop`.
    pub async fn run(self, api: BotApi, replies: ReplyHub, stop: CancellationToken) {
        let mut announcements = replies.subscribe();
        let mut renew = tokio::time::interval(RENEW);
        loop {
            let ended: Vec<EventId> = tokio::select! {
                () = stop.cancelled() => return,
                () = self.changed.notified() => Vec::new(),
                _ = renew.tick() => Vec::new(),
                announcement = announcements.recv() => match announcement {
                    Ok(Announcement::StepEnded { events, .. }) => {
                        self.finish(&events);
                        continue;
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                },
            };
            self.finish(&ended);
            for chat in self.busy_chats() {
                if let Err(e) = api.send_typing(chat).await {
                    debug!(chat, error = %e, "could not send the typing action");
                }
            }
        }
    }
}
