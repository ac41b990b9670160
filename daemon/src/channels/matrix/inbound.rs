//! The Matrix sync loop: invites, messages, reactions, edits and redactions into events.
//!
//! Decided here:
//! - The loop syncs from the channel's own position ([`ChannelState::sync_token`]) and
//!   saves the next one only after every event of the sync is durable in the inbox (or was
//!   taken before: the same message read again after a crash is recognised by its dedupe
//!   key, `matrix:EVENT_ID`, and skipped). A crash re-reads the last sync; nothing is lost,
//!   nothing is taken twice.
//! - After a session's first sync the loop waits with [`super::peek`]'s long poll and lets
//!   the SDK sync only when something came: an idle channel runs none of the SDK's code.
//! - The very first sync (no position yet) takes no messages: they are history from before
//!   the assistant was there. Likewise, in a room it has just joined, what came before its
//!   own join is history.
//! - A timeline the server cut short (`limited`) is filled in by paginating backwards
//!   until an event already taken, the join, or [`GAP_PAGES`] pages.
//! - An event that cannot be decrypted yet waits for its keys ([`super::undecrypted`]).
//! - Whether a sender's device counts as verified is [`super::vouching`]'s.
//! - Invites are accepted from owners and trusted users only; any other invite is declined
//!   and recorded `rejected`.
//! - Owners' commands (`/status`, `/confirm ID`, …) are answered at once through the owner
//!   API, in a reply; a reply to a request for confirmation saying yes/no (or ✅/❌), and a
//!   ✅/❌ reaction to it, answer that request. Each answer is recorded `handled`.
//! - Edits and redactions of a message already taken are recorded `handled` (what was
//!   taken stays as it was first sent; nothing is run again or undone).

use std::time::Duration;

use chrono::{TimeZone, Utc};
use matrix_sdk::config::{SyncSettings, SyncToken};
use matrix_sdk::deserialized_responses::TimelineEvent;
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::api::client::filter::{Filter as EventFilter, FilterDefinition};
use matrix_sdk::ruma::api::client::sync::sync_events::v3::Filter;
use matrix_sdk::ruma::{OwnedRoomId, UInt};
use matrix_sdk::sync::JoinedRoomUpdate;
use matrix_sdk::{Client, Room, RoomMemberships};
use serde_json::Value;
use steward_events::{
    Admission, ChatMessage, ChatRules, Event, EventState, Payload, RoomFacts, Sender,
    SenderDecision, SenderPolicy, Source, Trust, Unknown, admit,
};
use tracing::{debug, info, warn};

use super::parse::{Incoming, Message, parse};
use super::peek::{News, Peek};
use super::pins::Pins;
use super::state::{ChannelState, Undecrypted};
use super::typing::Typing;
use super::{CHANNEL, reply_to};
use crate::channels::ChannelHealth;
use crate::channels::answers::{answer_of, reply_answer};
use crate::channels::context::{ChannelContext, Down};
use crate::owner::{OwnerApi, OwnerError, Sent};
use steward_config::MatrixConfig;

/// How long the server may hold a sync open.
const SYNC_TIMEOUT: Duration = Duration::from_secs(30);
/// Events per room per sync before the server cuts the timeline short.
const TIMELINE_LIMIT: u32 = 100;
/// How far back a cut timeline is filled in.
const GAP_PAGES: usize = 10;

/// The sync side of one logged-in session.
#[derive(Debug)]
pub struct Inbound<'a> {
    pub client: &'a Client,
    pub config: &'a MatrixConfig,
    pub state: &'a ChannelState,
    pub owner: &'a OwnerApi,
    pub cx: &'a ChannelContext,
    pub typing: &'a Typing,
    pub pins: &'a Pins,
}

fn failed(what: &str) -> impl Fn(matrix_sdk::Error) -> Down + '_ {
    move |e| Down::Failed(format!("{what}: {e}"))
}

pub(super) fn stored(e: crate::store::StoreError) -> Down {
    Down::Failed(format!("the store: {e}"))
}

impl Inbound<'_> {
    pub(super) fn policy(&self) -> SenderPolicy {
        SenderPolicy {
            owner: self.config.owners.clone(),
            trusted: self.config.trusted.clone(),
            unknown: Unknown::Reject,
        }
    }

    fn rules(&self) -> ChatRules {
        ChatRules {
            e2ee: self.config.e2ee,
            mention_required_in_groups: self.config.mention_required_in_groups,
            require_verified_devices: self.config.require_verified_devices,
        }
    }

    /// Syncs until the channel stops (`Ok`) or the homeserver fails (`Err`, retried).
    pub async fn run(&self) -> Result<(), Down> {
        let mut filter = FilterDefinition::default();
        filter.room.timeline.limit = Some(UInt::from(TIMELINE_LIMIT));
        // Presence is not used, and would end every idle long poll.
        filter.presence = EventFilter::ignore_all();
        let mut peek = Peek::new(&filter);
        let filter = Filter::FilterDefinition(filter);
        self.cx
            .set_health(ChannelHealth::starting("syncing with the homeserver"));
        let mut synced = false;
        loop {
            let token = self.state.sync_token().map_err(stored)?;
            // After the session's first sync the SDK runs only when something came.
            let mut wait = SYNC_TIMEOUT;
            if synced && let Some(since) = &token {
                let news = tokio::select! {
                    () = self.cx.shutdown().cancelled() => return Ok(()),
                    news = peek.wait(self.client, since, SYNC_TIMEOUT) => news,
                };
                match news {
                    Some(News::Nothing) => {
                        self.retry_undecrypted().await?;
                        continue;
                    }
                    Some(News::Arrived) => wait = Duration::ZERO,
                    None => {}
                }
            }
            let settings = SyncSettings::default()
                .filter(filter.clone())
                .timeout(wait)
                .token(match &token {
                    Some(token) => SyncToken::Specific(token.clone()),
                    None => SyncToken::NoToken,
                });
            let response = tokio::select! {
                () = self.cx.shutdown().cancelled() => return Ok(()),
                response = self.client.sync_once(settings) => response.map_err(failed("sync"))?,
            };
            if !synced {
                super::session::sign_device(self.client, self.config).await;
                synced = true;
            }
            let first = token.is_none();
            debug!(since = ?token, next = %response.next_batch, joined = response.rooms.joined.len(), left = response.rooms.left.len(), invited = response.rooms.invited.len(), to_device = response.to_device.len(), "synced");
            for room in response.rooms.invited.keys() {
                self.invited(room).await?;
            }
            if !first {
                for (room, update) in response.rooms.joined {
                    self.joined(room, update).await?;
                }
            }
            self.retry_undecrypted().await?;
            // An idle long poll ends with the position it started from: nothing to write.
            if token.as_deref() != Some(response.next_batch.as_str()) {
                self.state
                    .set_sync_token(&response.next_batch)
                    .await
                    .map_err(stored)?;
            }
            let rooms = self.client.joined_rooms().len();
            self.cx
                .set_health(ChannelHealth::ready(format!("ready ({rooms} rooms)")));
        }
    }

    fn own_id(&self) -> &str {
        &self.config.user_id
    }

    async fn invited(&self, room_id: &OwnedRoomId) -> Result<(), Down> {
        let Some(room) = self.client.get_room(room_id) else {
            return Ok(());
        };
        let inviter = room
            .invite_details()
            .await
            .map_err(failed("reading an invite"))?
            .inviter_id;
        match self.policy().decide(inviter.as_str()) {
            SenderDecision::Accept(Trust::Owner | Trust::Trusted) => {
                info!(room = %room_id, %inviter, "accepting an invite");
                room.join().await.map_err(failed("joining a room"))
            }
            _ => {
                info!(room = %room_id, %inviter, "declining an invite from a stranger");
                room.leave().await.map_err(failed("declining an invite"))?;
                let key = format!("matrix:invite:{room_id}:{inviter}");
                let mut event = self.event(
                    room_id.as_str(),
                    inviter.as_str(),
                    "matrix homeserver",
                    Trust::Untrusted,
                    Payload::Notice {
                        text: format!("an invite to {room_id} from {inviter}"),
                    },
                );
                event.dedupe_key = Some(key.clone());
                if !self.taken(&key)? {
                    self.cx
                        .reject(
                            event,
                            "invites are accepted from owners and trusted users only".into(),
                        )
                        .await
                        .map_err(stored)?;
                }
                Ok(())
            }
        }
    }

    async fn joined(&self, room_id: OwnedRoomId, update: JoinedRoomUpdate) -> Result<(), Down> {
        let Some(room) = self.client.get_room(&room_id) else {
            return Ok(());
        };
        let mut events = update.timeline.events;
        debug!(room = %room_id, events = events.len(), limited = update.timeline.limited, "a room's timeline synced");
        if update.timeline.limited {
            let mut earlier = self.gap(&room, update.timeline.prev_batch).await;
            earlier.append(&mut events);
            events = earlier;
        }
        // What came before the assistant's own join is history, not a request.
        if let Some(joined_at) = events.iter().rposition(|e| self.is_own_join(e)) {
            debug!(room = %room_id, before = joined_at, "events before the assistant's join are history");
            events.drain(..=joined_at);
        }
        for event in events {
            self.take(&room, event).await?;
        }
        Ok(())
    }

    fn is_own_join(&self, event: &TimelineEvent) -> bool {
        let Ok(raw) = serde_json::from_str::<Value>(event.raw().json().get()) else {
            return false;
        };
        let field = |pointer: &str| raw.pointer(pointer).and_then(Value::as_str);
        field("/type") == Some("m.room.member")
            && field("/state_key") == Some(self.own_id())
            && field("/content/membership") == Some("join")
            && field("/unsigned/prev_content/membership") != Some("join")
    }

    /// The events of a cut timeline before `from`, oldest first (see the module docs).
    async fn gap(&self, room: &Room, mut from: Option<String>) -> Vec<TimelineEvent> {
        let mut earlier: Vec<TimelineEvent> = Vec::new();
        for _ in 0..GAP_PAGES {
            let Some(token) = from.take() else { break };
            let page = match room
                .messages(MessagesOptions::backward().from(Some(token.as_str())))
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    warn!(room = %room.room_id(), error = %e, "cannot fill in a cut timeline");
                    break;
                }
            };
            let mut reached = false;
            for event in page.chunk {
                let known = event
                    .event_id()
                    .is_some_and(|id| self.taken(&dedupe_key(id.as_str())).unwrap_or(false));
                if known || self.is_own_join(&event) {
                    reached = true;
                    break;
                }
                earlier.push(event);
            }
            if reached {
                break;
            }
            from = page.end;
        }
        earlier.reverse();
        earlier
    }

    pub(super) fn taken(&self, key: &str) -> Result<bool, Down> {
        self.cx.submitter().inbox().is_claimed(key).map_err(stored)
    }

    /// Takes one timeline event (see the module docs).
    pub(super) async fn take(&self, room: &Room, event: TimelineEvent) -> Result<(), Down> {
        debug!(event = ?event.event_id(), undecrypted = event.kind.is_utd(), "a timeline event");
        if event.kind.is_utd() {
            if let Some(id) = event.event_id()
                && event.sender().is_some_and(|s| s.as_str() != self.own_id())
                && !self.taken(&dedupe_key(id.as_str()))?
            {
                debug!(event = %id, "an event waits for its keys");
                self.state
                    .note_undecrypted(&Undecrypted {
                        event_id: id.to_string(),
                        room: room.room_id().to_string(),
                        sender: event.sender().map(|s| s.to_string()),
                        first_seen: Utc::now(),
                    })
                    .map_err(stored)?;
            }
            return Ok(());
        }
        let Ok(raw) = serde_json::from_str::<Value>(event.raw().json().get()) else {
            return Ok(());
        };
        let verified = match event.encryption_info() {
            Some(info) => Some(
                self.vouched_for(&info.verification_state, &info.sender)
                    .await,
            ),
            None => None,
        };
        let device = event
            .encryption_info()
            .and_then(|info| info.sender_device.as_ref().map(|d| d.to_string()));
        let at = raw.get("origin_server_ts").and_then(Value::as_i64);
        match parse(&raw) {
            Incoming::Message(message) if message.sender != self.own_id() => {
                let seen = Seen {
                    verified,
                    device,
                    at,
                };
                self.message(room, message, seen).await
            }
            Incoming::Reaction {
                id,
                sender,
                to,
                key,
            } if self.is_owner(&sender) => {
                let Some(yes) = answer_of(&key) else {
                    return Ok(());
                };
                self.answer_request(room, &id, &sender, &to, yes, None)
                    .await
            }
            Incoming::Edit { id, sender, of } => {
                self.note_change(room, &id, &sender, &of, "an edit").await
            }
            Incoming::Redaction { id, sender, of } => {
                self.note_change(room, &id, &sender, &of, "a redaction")
                    .await
            }
            _ => Ok(()),
        }
    }

    pub(super) fn is_owner(&self, user: &str) -> bool {
        self.policy().decide(user) == SenderDecision::Accept(Trust::Owner)
    }

    async fn message(&self, room: &Room, message: Message, seen: Seen) -> Result<(), Down> {
        let key = dedupe_key(&message.id);
        if self.taken(&key)? {
            return Ok(());
        }
        let sender = self.policy().decide(&message.sender);
        // The member list, not the sync's summary (absent for a room just joined); the SDK
        // fetches it once per room and keeps it current from the sync.
        let members = room
            .members(RoomMemberships::ACTIVE)
            .await
            .map_err(failed("reading a room's members"))?
            .len();
        let facts = RoomFacts {
            listed: self.is_listed(room),
            members: u64::try_from(members).unwrap_or(u64::MAX),
            mentioned: self.mentions_me(&message),
            encrypted: seen.verified.is_some(),
            device_verified: seen.verified,
        };
        let admission = admit(sender, facts, self.rules());
        if admission == Admission::Ignore {
            debug!(room = %room.room_id(), "a group message that does not mention the assistant");
            return Ok(());
        }
        // A reply of the owner's to a request for confirmation, saying yes or no.
        if admission == Admission::Take(Trust::Owner)
            && let Some(to) = &message.in_reply_to
            && let Some((yes, reason)) = reply_answer(&message.text)
            && self.request_of(to)?.is_some()
        {
            return self
                .answer_request(room, &message.id, &message.sender, to, yes, reason)
                .await;
        }
        let authenticated_by = match &seen.device {
            Some(device) if seen.verified == Some(true) => {
                format!("matrix (verified device {device})")
            }
            Some(device) => format!("matrix (unverified device {device})"),
            None => "matrix homeserver".into(),
        };
        let trust = match &admission {
            Admission::Take(trust) => *trust,
            _ => Trust::Untrusted,
        };
        let chat = ChatMessage {
            room: room.room_id().to_string(),
            message_id: message.id.clone(),
            thread_root: message.thread_root.clone(),
            in_reply_to: message.in_reply_to.clone(),
            text: message.text.clone(),
        };
        let mut event = self.event(
            room.room_id().as_str(),
            &message.sender,
            &authenticated_by,
            trust,
            Payload::Chat(Box::new(chat)),
        );
        event.dedupe_key = Some(key);
        if let Some(thread) = &message.thread_root {
            event.thread = Some(format!("{}/{thread}", room.room_id()));
        }
        if let Some(at) = seen.at.and_then(|ms| Utc.timestamp_millis_opt(ms).single()) {
            event.occurred_at = at;
        }
        let reason = match admission {
            Admission::Reject(reason) => reason,
            _ => return self.submit(room, &message, event).await,
        };
        info!(room = %room.room_id(), sender = %message.sender, %reason, "a Matrix message refused");
        self.cx.reject(event, reason).await.map_err(stored)?;
        Ok(())
    }

    /// Hands a taken message to the owner API: an owner's command is answered at once,
    /// anything else becomes an event (and the room shows the assistant typing). A message
    /// that could not be stored (shutdown, storage) fails the session, so that the sync
    /// position stays before it and it is read again.
    async fn submit(&self, room: &Room, message: &Message, event: Event) -> Result<(), Down> {
        let said = match self.owner.take(event, self.cx.shutdown()).await {
            Ok(Sent::Accepted {
                event_id,
                duplicate_of: None,
            }) => {
                self.typing.start(room.room_id().to_owned(), event_id);
                return Ok(());
            }
            Ok(Sent::Accepted { .. }) => return Ok(()),
            Ok(Sent::Said(text)) => text,
            Ok(Sent::Answered(row)) => crate::channels::answers::answered_text(&row),
            Ok(Sent::Rejected { reason, .. }) => format!("Not taken: {reason}"),
            Err(OwnerError::Unavailable(why)) => {
                return Err(Down::Failed(format!(
                    "a message could not be stored: {why}"
                )));
            }
            Err(e) => format!("Nothing was done: {e}"),
        };
        let reply = super::Reply {
            room: room.room_id().to_owned(),
            in_reply_to: Some(message.id.clone()),
            thread_root: message.thread_root.clone(),
        };
        if let Err(e) = reply_to(
            room,
            &reply,
            &said,
            &format!("steward-said-{}", txn_part(&message.id)),
            self.config.e2ee,
        )
        .await
        {
            warn!(error = %format!("{e:#}"), "could not answer a command in Matrix");
        }
        Ok(())
    }

    /// The pending action the assistant's event `event_id` asked about, if any.
    fn request_of(&self, event_id: &str) -> Result<Option<String>, Down> {
        let Some(message) = self.state.sent_message(event_id).map_err(stored)? else {
            return Ok(None);
        };
        let found = self.owner.outbox().get(message).map_err(stored)?;
        Ok(found.and_then(|m| m.pending_id))
    }

    /// Answers the request for confirmation the assistant's event `to` carried, once.
    async fn answer_request(
        &self,
        room: &Room,
        id: &str,
        sender: &str,
        to: &str,
        yes: bool,
        reason: Option<String>,
    ) -> Result<(), Down> {
        let key = dedupe_key(id);
        if self.taken(&key)? {
            return Ok(());
        }
        let Some(pending) = self.request_of(to)? else {
            return Ok(());
        };
        let answered = if yes {
            self.owner.confirm(&pending, None).await
        } else {
            self.owner.deny(&pending, reason).await
        };
        let outcome = match answered {
            Ok(row) => crate::channels::answers::answered_text(&row),
            Err(e) => format!("Nothing was done: {e}"),
        };
        info!(room = %room.room_id(), %pending, yes, %outcome, "a request for confirmation answered in Matrix");
        let mut event = self.event(
            room.room_id().as_str(),
            sender,
            "matrix homeserver",
            Trust::Owner,
            Payload::Notice {
                text: format!("{} to {pending}", if yes { "confirm" } else { "deny" }),
            },
        );
        event.dedupe_key = Some(key);
        self.cx
            .record_terminal(event, EventState::Handled { outcome })
            .await
            .map_err(stored)?;
        Ok(())
    }

    /// Records an edit or a redaction of a message already taken (see the module docs).
    async fn note_change(
        &self,
        room: &Room,
        id: &str,
        sender: &str,
        of: &str,
        what: &str,
    ) -> Result<(), Down> {
        let key = dedupe_key(id);
        if sender == self.own_id() || !self.taken(&dedupe_key(of))? || self.taken(&key)? {
            return Ok(());
        }
        let trust = match self.policy().decide(sender) {
            SenderDecision::Accept(trust) => trust,
            SenderDecision::Reject => Trust::Untrusted,
        };
        let mut event = self.event(
            room.room_id().as_str(),
            sender,
            "matrix homeserver",
            trust,
            Payload::Notice {
                text: format!("{what} of {of}"),
            },
        );
        event.dedupe_key = Some(key);
        let outcome = format!(
            "{what} of {of}, which was taken as first sent; nothing is run again or undone"
        );
        self.cx
            .record_terminal(event, EventState::Handled { outcome })
            .await
            .map_err(stored)?;
        Ok(())
    }

    fn is_listed(&self, room: &Room) -> bool {
        let aliases: Vec<String> = room
            .canonical_alias()
            .into_iter()
            .chain(room.alt_aliases())
            .map(|alias| alias.to_string())
            .collect();
        self.config
            .rooms
            .iter()
            .any(|listed| listed == room.room_id().as_str() || aliases.contains(listed))
    }

    fn mentions_me(&self, message: &Message) -> bool {
        let me = self.own_id();
        let text = message.text.to_lowercase();
        let local = me
            .trim_start_matches('@')
            .split(':')
            .next()
            .unwrap_or(me)
            .to_lowercase();
        message.mentions.iter().any(|id| id == me)
            || text.contains(&me.to_lowercase())
            || text.contains(&local)
    }

    pub(super) fn event(
        &self,
        room: &str,
        sender: &str,
        authenticated_by: &str,
        trust: Trust,
        payload: Payload,
    ) -> Event {
        let mut event = Event::new(
            Source::Chat,
            format!("{CHANNEL}:{room}"),
            Sender {
                identity: sender.to_owned(),
                authenticated_by: authenticated_by.to_owned(),
            },
            trust,
            payload,
        );
        event.thread = Some(room.to_owned());
        event
    }
}

/// What the SDK told about how an event arrived.
#[derive(Debug)]
struct Seen {
    /// `Some` for an encrypted event: whether its device is verified.
    verified: Option<bool>,
    device: Option<String>,
    /// `origin_server_ts`, in milliseconds.
    at: Option<i64>,
}

/// The inbox's dedupe key of a Matrix event.
pub fn dedupe_key(event_id: &str) -> String {
    format!("matrix:{event_id}")
}

/// An event id as part of a transaction id (ids may hold characters a path should not).
pub fn txn_part(event_id: &str) -> String {
    event_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_parts_keep_only_what_a_path_may_hold() {
        assert_eq!(txn_part("$abc/DEF+1:x"), "abcDEF1x");
    }
}
