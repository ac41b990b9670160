//! "Steward is typing…" in a room while a step works on a message from it (which rooms are
//! busy is [`crate::channels::busy`]'s).
//!
//! Decided here:
//! - The notice is renewed every [`RENEW`] (the server lets one lapse after a few seconds,
//!   so a crash clears it by itself) and cleared as soon as no message of the room is left
//!   in work.
//! - When the channel stops, every notice it set is cleared.

use std::time::Duration;

use matrix_sdk::Client;
use matrix_sdk::ruma::{OwnedRoomId, RoomId};
use steward_events::EventId;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::channels::busy::Busy;
use crate::replies::{Announcement, ReplyHub};

const RENEW: Duration = Duration::from_secs(3);

/// The rooms with messages in work.
pub type Typing = Busy<OwnedRoomId>;

/// Keeps the notices up to date until `stop`, then clears them.
pub async fn run(typing: Typing, client: Client, replies: ReplyHub, stop: CancellationToken) {
    let mut announcements = replies.subscribe();
    let mut renew = tokio::time::interval(RENEW);
    loop {
        let ended: Vec<EventId> = tokio::select! {
            () = stop.cancelled() => break,
            () = typing.started() => Vec::new(),
            _ = renew.tick() => Vec::new(),
            announcement = announcements.recv() => match announcement {
                Ok(Announcement::StepEnded { events, .. }) => events,
                Ok(_) | Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => break,
            },
        };
        for room in typing.finish(&ended) {
            set(&client, &room, false).await;
        }
        for room in typing.chats() {
            set(&client, &room, true).await;
        }
    }
    for room in typing.drain() {
        set(&client, &room, false).await;
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
