//! Owner messages out to Matrix, from the owner outbox, each at most once.
//!
//! Decided here:
//! - Where a message goes: an answer to a Matrix message goes back to its room, as a reply
//!   (in its thread when it had one); so does anything else about an owner's Matrix message
//!   (its request for confirmation, the outcome). Everything else goes to the owner's
//!   direct room: the saved one, else a two-member room with the owner the assistant is in,
//!   else one it creates (encrypted) and invites the owner to. Answers to the owner's own
//!   requests through the socket or HTTP, and to mail, are left to those doors.
//! - Each Matrix event's transaction id is `steward-outbox-ID` (`-N` for the parts of a long
//!   one): a resend after a crash returns the event sent before, so the owner sees it once.
//!   The message is recorded delivered on `matrix` only after every part was accepted.
//! - Order and retries are the push loop's ([`crate::owner::push`]). A message that can
//!   never go (no owner configured, a room the assistant left) is skipped, and the log says
//!   why.

use anyhow::Context;
use matrix_sdk::ruma::{OwnedRoomId, UserId};
use matrix_sdk::{Client, Room, RoomMemberships, RoomState};
use steward_config::MatrixConfig;
use steward_events::{Payload, Source, Trust};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::state::ChannelState;
use super::{CHANNEL, Reply, reply_to};
use crate::channels::context::ChannelContext;
use crate::owner::outbox::{MessageKind, OwnerMessage};
use crate::owner::push::Push;
use crate::store::StoreError;

#[derive(Debug)]
pub struct Outbound {
    pub client: Client,
    pub config: MatrixConfig,
    pub state: ChannelState,
    pub cx: ChannelContext,
}

/// Where one message goes.
enum Destination {
    Room(Reply),
    Owner,
    /// Another door shows it.
    Elsewhere,
}

impl Outbound {
    /// Delivers owner messages until `stop` (the loop is [`crate::owner::push::run`]).
    pub async fn run(self, stop: CancellationToken) {
        let outbox = self.cx.outbox().clone();
        crate::owner::push::run(&self, &outbox, stop).await;
    }

    fn destination(&self, message: &OwnerMessage) -> anyhow::Result<Destination> {
        let Some(origin) = message.origin else {
            return Ok(Destination::Owner);
        };
        let Some(record) = self.cx.submitter().inbox().get(origin)? else {
            return Ok(Destination::Owner);
        };
        let answer = message.kind == MessageKind::Answer;
        Ok(match (&record.event.source, &record.event.payload) {
            (Source::User | Source::Email, _) if answer => Destination::Elsewhere,
            (Source::Chat, Payload::Chat(chat))
                if record.event.channel.starts_with(CHANNEL)
                    && (answer || record.event.trust == Trust::Owner) =>
            {
                Destination::Room(Reply {
                    room: OwnedRoomId::try_from(chat.room.as_str())
                        .context("a Matrix event with a bad room id")?,
                    in_reply_to: answer.then(|| chat.message_id.clone()),
                    thread_root: chat.thread_root.clone(),
                })
            }
            _ => Destination::Owner,
        })
    }

    /// The owner's direct room (see the module docs); `None` without an owner.
    async fn owner_room(&self) -> anyhow::Result<Option<Room>> {
        let Some(owner) = self.config.owners.first() else {
            return Ok(None);
        };
        let owner_id = UserId::parse(owner.as_str()).context("matrix.owners")?;
        if let Some(saved) = self.state.direct_room(owner)?
            && let Ok(id) = OwnedRoomId::try_from(saved.as_str())
            && let Some(room) = self.client.get_room(&id)
            && room.state() == RoomState::Joined
        {
            return Ok(Some(room));
        }
        let mut found = None;
        for room in self.client.joined_rooms() {
            let members = room.members(RoomMemberships::ACTIVE).await?;
            if members.len() <= 2 && members.iter().any(|m| m.user_id() == owner_id) {
                found = Some(room);
                break;
            }
        }
        let room = match found {
            Some(room) => room,
            None => {
                info!(%owner, "creating a direct room with the owner");
                self.client
                    .create_dm(&owner_id)
                    .await
                    .context("cannot create a direct room with the owner")?
            }
        };
        self.state
            .set_direct_room(owner, room.room_id().as_str())
            .await?;
        Ok(Some(room))
    }
}

impl Push for Outbound {
    fn channel(&self) -> &'static str {
        CHANNEL
    }

    fn delivered_up_to(&self) -> Result<Option<u64>, StoreError> {
        self.state.delivered_up_to()
    }

    async fn set_delivered_up_to(&self, id: u64) -> Result<(), StoreError> {
        self.state.set_delivered_up_to(id).await
    }

    async fn deliver(&self, message: &OwnerMessage) -> anyhow::Result<()> {
        let reply = match self.destination(message)? {
            Destination::Elsewhere => return Ok(()),
            Destination::Room(reply) => reply,
            Destination::Owner => match self.owner_room().await? {
                Some(room) => Reply {
                    room: room.room_id().to_owned(),
                    in_reply_to: None,
                    thread_root: None,
                },
                None => {
                    warn!(
                        message_id = message.id,
                        "matrix.owners names nobody to send owner messages to"
                    );
                    return Ok(());
                }
            },
        };
        let Some(room) = self
            .client
            .get_room(&reply.room)
            .filter(|r| r.state() == RoomState::Joined)
        else {
            warn!(message_id = message.id, room = %reply.room, "the room of an owner message is not joined; skipped");
            return Ok(());
        };
        let mut text = message.text.clone();
        if message.kind == MessageKind::Confirmation {
            text.push_str("\n(or react ✅ / ❌ to this message)");
        }
        let sent = reply_to(
            &room,
            &reply,
            &text,
            &format!("steward-outbox-{}", message.id),
            self.config.e2ee,
        )
        .await?;
        for event_id in &sent {
            self.state.note_sent(event_id, message.id)?;
        }
        self.cx.outbox().delivered(message.id, CHANNEL).await?;
        info!(message_id = message.id, room = %reply.room, parts = sent.len(), "owner message delivered in Matrix");
        Ok(())
    }
}
