//! "Steward is typing…" in a room while a step works on a message from it.
//!
//! Decided here:
//! - A room is busy from the moment one of its messages is durable until the step that
//!   merged it ends (any ending: answered, failed, cancelled). The notice is renewed every
//!   [`RENEW`] (the server lets one lapse after a few seconds, so a crash clears it by
//!   itself) and cleared as soon as no message of the room is left in work.
//! - A message is given up on after [`GIVE_UP`] (the model may be down and its events wait
//!   for hours): the notice must never stay on for ever.
//! - When the channel stops, every notice it set is cleared.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use matrix_sdk::Client;
use matrix_sdk::ruma::{OwnedRoomId, RoomId};
use steward_events::EventId;
use tokio::sync::Notify;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::replies::{Announcement, ReplyHub};

const RENEW: Duration = Duration::from_secs(3);
const GIVE_UP: Duration = Duration::from_secs(120);

/// The rooms with messages in work. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Typing {
    busy: Arc<Mutex<HashMap<OwnedRoomId, HashMap<EventId, Instant>>>>,
    changed: Arc<Notify>,
}

impl Typing {
    /// `event`, from `room`, is durable and waits for a step.
    pub fn start(&self, room: &RoomId, event: EventId) {
        self.lock()
            .entry(room.to_owned())
            .or_default()
            .insert(event, Instant::now());
        self.changed.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<OwnedRoomId, HashMap<EventId, Instant>>> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets ended (and given-up) events; the rooms left with none.
    fn finish(&self, ended: &[EventId]) -> Vec<OwnedRoomId> {
        let now = Instant::now();
        let mut busy = self.lock();
        let mut idle = Vec::new();
        busy.retain(|room, events| {
            events.retain(|id, since| !ended.contains(id) && now - *since < GIVE_UP);
            if events.is_empty() {
                idle.push(room.clone());
            }
            !events.is_empty()
        });
        idle
    }

    fn busy_rooms(&self) -> Vec<OwnedRoomId> {
        self.lock().keys().cloned().collect()
    }

    /// Keeps the notices up to date until `stop`, then clears them.
    pub async fn run(self, client: Client, replies: ReplyHub, stop: CancellationToken) {
        let mut announcements = replies.subscribe();
        let mut renew = tokio::time::interval(RENEW);
        loop {
            let ended: Vec<EventId> = tokio::select! {
                () = stop.cancelled() => break,
                () = self.changed.notified() => Vec::new(),
                _ = renew.tick() => Vec::new(),
                announcement = announcements.recv() => match announcement {
                    Ok(Announcement::StepEnded { events, .. }) => events,
                    Ok(_) | Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                },
            };
            for room in self.finish(&ended) {
                set(&client, &room, false).await;
            }
            for room in self.busy_rooms() {
                set(&client, &room, true).await;
            }
        }
        let rooms: Vec<OwnedRoomId> = self.lock().drain().map(|(room, _)| room).collect();
        for room in rooms {
            set(&client, &room, false).await;
        }
    }
}

async fn set(client: &Client, room: &RoomId, typing: bool) {
    let Some(room) = client.get_room(room) else {
        return;
    };
    if let Err(e) = room.typing_notice(typing).await {
        debug!(room = %room.room_id(), typing, error = %e, "could not set the typing notice");
    }
}
