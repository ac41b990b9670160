//! Messages that could not be decrypted when they arrived.
//!
//! Decided here:
//! - An event that cannot be decrypted yet is kept (in sled, [`super::state::ChannelState`])
//!   and tried again after every sync; its keys usually come within seconds, in a later
//!   sync.
//! - After `matrix.keys_wait_secs` (10 minutes) without its keys it is recorded `dead`,
//!   naming its sender and why, and when an owner sent it the owner is told, through the
//!   owner outbox, that it could not be read and should be sent again — otherwise the owner
//!   would only see a message that was never answered. Strangers' and trusted contacts'
//!   unreadable messages are recorded only (a stranger must not be able to make the
//!   assistant write to its owner).
//! - The notice is queued before the event is recorded: a crash between the two tells the
//!   owner twice rather than not at all.

use std::time::Duration;

use chrono::Utc;
use matrix_sdk::Room;
use matrix_sdk::ruma::{EventId, OwnedRoomId};
use steward_events::{EventState, Payload, Trust};
use tracing::warn;

use super::inbound::{Inbound, dedupe_key, stored};
use super::state::Undecrypted;
use crate::channels::context::Down;
use crate::owner::outbox::{MessageKind, NewMessage};

impl Inbound<'_> {
    /// Tries the events that waited for their keys again; gives up on those that waited
    /// longer than `matrix.keys_wait_secs` (see the module docs).
    pub(super) async fn retry_undecrypted(&self) -> Result<(), Down> {
        for waiting in self.state.undecrypted().map_err(stored)? {
            let room = OwnedRoomId::try_from(waiting.room.as_str())
                .ok()
                .and_then(|id| self.client.get_room(&id));
            let event_id = EventId::parse(&waiting.event_id).ok();
            let (Some(room), Some(event_id)) = (room, event_id) else {
                self.state
                    .forget_undecrypted(&waiting.event_id)
                    .map_err(stored)?;
                continue;
            };
            match room.event(&event_id, None).await {
                Ok(event) if !event.kind.is_utd() => {
                    self.state
                        .forget_undecrypted(&waiting.event_id)
                        .map_err(stored)?;
                    self.take(&room, event).await?;
                }
                _ if self.waited_too_long(&waiting) => {
                    self.give_up(&room, &waiting).await?;
                }
                _ => {}
            }
        }
        self.state.flush().await.map_err(stored)
    }

    fn waited_too_long(&self, waiting: &Undecrypted) -> bool {
        (Utc::now() - waiting.first_seen)
            .to_std()
            .is_ok_and(|waited| waited > self.config.keys_wait)
    }

    /// Records an event whose keys never came `dead` and tells the owner when it was theirs
    /// (see the module docs for the order).
    async fn give_up(&self, room: &Room, waiting: &Undecrypted) -> Result<(), Down> {
        let key = dedupe_key(&waiting.event_id);
        if self.taken(&key)? {
            return self
                .state
                .forget_undecrypted(&waiting.event_id)
                .map_err(stored);
        }
        let waited = spoken_wait(self.config.keys_wait);
        let sender = waiting.sender.as_deref().unwrap_or("unknown");
        warn!(event = %waiting.event_id, room = %waiting.room, sender, "a message could not be decrypted: its keys did not arrive within {waited}");
        if self.is_owner(sender) {
            let notice = NewMessage {
                text: format!(
                    "I could not read your encrypted message of {} UTC in {}: the keys to decrypt it did not reach my device within {waited}. Please send it again.",
                    waiting.first_seen.format("%Y-%m-%d %H:%M"),
                    room_label(room).await,
                ),
                ..NewMessage::default()
            };
            self.cx
                .outbox()
                .queue(MessageKind::Problem, notice)
                .await
                .map_err(stored)?;
        }
        let mut event = self.event(
            &waiting.room,
            sender,
            "matrix homeserver",
            Trust::Untrusted,
            Payload::Notice {
                text: format!("encrypted event {}", waiting.event_id),
            },
        );
        event.dedupe_key = Some(key);
        let error = format!("could not be decrypted: its keys did not arrive within {waited}");
        self.cx
            .record_terminal(event, EventState::Dead { error })
            .await
            .map_err(stored)?;
        self.state
            .forget_undecrypted(&waiting.event_id)
            .map_err(stored)
    }
}

/// How a room is named to the owner, who may read it on another channel.
async fn room_label(room: &Room) -> String {
    if room.is_direct().await.unwrap_or(false) {
        return "our Matrix direct room".into();
    }
    match room.name() {
        Some(name) => format!("the Matrix room \"{name}\" ({})", room.room_id()),
        None => format!("the Matrix room {}", room.room_id()),
    }
}

/// `10 minutes`, `1 minute`, `45 seconds`: a wait as the owner reads it.
fn spoken_wait(wait: Duration) -> String {
    let secs = wait.as_secs();
    match (secs / 60, secs % 60) {
        (1, 0) => "1 minute".into(),
        (minutes, 0) => format!("{minutes} minutes"),
        _ if secs == 1 => "1 second".into(),
        _ => format!("{secs} seconds"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_said_in_minutes_when_it_is_whole_minutes() {
        for (secs, said) in [
            (600, "10 minutes"),
            (60, "1 minute"),
            (1, "1 second"),
            (90, "90 seconds"),
        ] {
            assert_eq!(spoken_wait(Duration::from_secs(secs)), said);
        }
    }
}
