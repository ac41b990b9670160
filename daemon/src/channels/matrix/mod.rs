//! The Matrix channel: the owner (and trusted contacts) talk to the assistant in Matrix
//! rooms, end-to-end encrypted, and owner messages reach the owner there.
//!
//! - [`session`]: the account's one device, its session and SQLite stores under
//!   `DATA/matrix/`, restored across restarts (so decryption survives a `kill -9`).
//! - [`inbound`]: the sync loop — invites, messages, reactions, edits, redactions — with
//!   the sync position advanced only after the events are durable.
//! - [`parse`]: what a timeline event's JSON says (pure, table-tested).
//! - [`outbound`]: owner outbox messages sent once each (transaction id = outbox id).
//! - [`typing`]: the typing notice while a step works on a room's message.
//! - [`state`]: what the channel keeps in sled.
//! - [`undecrypted`]: messages waiting for their keys, and the owner told when they never come.
//! - [`vouching`]: which senders' devices count as verified.
//! - [`peek`]: the idle long poll made without the SDK, which runs only when something came.
//! - [`pins`]: the cross-signing identities first seen for owners and trusted contacts.
//!
//! Who is taken, and how trusted, is the pure [`steward_events::admit`]. Sending never
//! goes out in plaintext to an encrypted room: the SDK encrypts for every room whose state
//! says it is encrypted (fetching the state when it does not know it), and with
//! `matrix.e2ee = false` nothing is sent into an encrypted room at all.
// Everything here reads outside input (Matrix events): no slicing that can panic.
#![deny(clippy::string_slice, clippy::indexing_slicing)]

pub mod inbound;
pub mod outbound;
pub mod parse;
pub mod peek;
pub mod pins;
pub mod session;
pub mod state;
pub mod typing;
pub mod undecrypted;
pub mod vouching;

use std::time::Duration;

use anyhow::{Context, bail};
use matrix_sdk::Room;
use matrix_sdk::ruma::events::room::message::RoomMessageEventContent;
use matrix_sdk::ruma::{OwnedRoomId, TransactionId};
use serde_json::{Value, json};
use steward_config::MatrixConfig;

use crate::channels::ChannelHealth;
use crate::channels::context::{ChannelContext, Down};
use crate::owner::OwnerApi;
use crate::store::Store;
use crate::supervisor::Supervisor;

/// The channel's name in `steward status` and in the outbox's deliveries.
pub const CHANNEL: &str = "matrix";
/// The longest wait between attempts to reach the homeserver.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// One event's text at most (Matrix events are limited to 64 KiB, and the HTML form comes
/// on top of the plain one).
const MAX_PART_BYTES: usize = 16_000;

/// What the channel runs with besides its context.
#[derive(Clone, Debug)]
pub struct MatrixChannel {
    pub account: session::Account,
    pub state: state::ChannelState,
    pub owner: OwnerApi,
}

/// Starts the channel (see the module docs).
pub fn start(
    config: &MatrixConfig,
    supervisor: &Supervisor,
    store: &Store,
    data_dir: &std::path::Path,
    owner: &OwnerApi,
) -> anyhow::Result<()> {
    let channel = MatrixChannel {
        account: session::Account::new(config.clone(), data_dir),
        state: state::ChannelState::open(store)?,
        owner: owner.clone(),
    };
    supervisor.start(CHANNEL, move |cx| run(channel, cx));
    Ok(())
}

/// Runs the channel until it is stopped: each session logs in (or restores the saved
/// one), delivers owner messages and syncs, until the homeserver fails; then it is tried
/// again after the backoff.
pub async fn run(channel: MatrixChannel, cx: ChannelContext) {
    cx.keep_up(MAX_WAIT, || session(&channel, &cx)).await;
}

async fn session(channel: &MatrixChannel, cx: &ChannelContext) -> Result<(), Down> {
    cx.set_health(ChannelHealth::starting("logging in"));
    let client = channel
        .account
        .connect()
        .await
        .map_err(|e| Down::Failed(format!("{e:#}")))?;
    // The session's own tasks end with it (a failed sync restarts them with the client).
    let stop = cx.shutdown().child_token();
    let _stop_on_return = stop.clone().drop_guard();
    let typing = typing::Typing::default();
    cx.spawn(typing::run(
        typing.clone(),
        client.clone(),
        cx.replies().clone(),
        stop.clone(),
    ));
    let outbound = outbound::Outbound {
        client: client.clone(),
        config: channel.account.config.clone(),
        state: channel.state.clone(),
        cx: cx.clone(),
    };
    cx.spawn(outbound.run(stop.clone()));
    inbound::Inbound {
        client: &client,
        config: &channel.account.config,
        state: &channel.state,
        owner: &channel.owner,
        cx,
        typing: &typing,
        pins: &pins::Pins::of(&channel.account),
    }
    .run()
    .await
}

/// Where an answer goes in Matrix.
#[derive(Clone, Debug)]
pub struct Reply {
    pub room: OwnedRoomId,
    pub in_reply_to: Option<String>,
    pub thread_root: Option<String>,
}

/// Sends `text` (Markdown) into `room` as `reply` says, in parts of at most
/// [`MAX_PART_BYTES`], the first under transaction id `txn` and the others `txn-N`;
/// the event ids, in order.
pub async fn reply_to(
    room: &Room,
    reply: &Reply,
    text: &str,
    txn: &str,
    e2ee: bool,
) -> anyhow::Result<Vec<String>> {
    if !e2ee && room.latest_encryption_state().await?.is_encrypted() {
        bail!(
            "{} is encrypted and matrix.e2ee is off: nothing is sent into it",
            room.room_id()
        );
    }
    let mut sent = Vec::new();
    for (n, part) in split(text, MAX_PART_BYTES).into_iter().enumerate() {
        let mut content = serde_json::to_value(RoomMessageEventContent::text_markdown(part))
            .context("a message that cannot be written as JSON")?;
        if let Some(relation) = relation(reply, n == 0)
            && let Value::Object(fields) = &mut content
        {
            fields.insert("m.relates_to".into(), relation);
        }
        let txn_id = if n == 0 {
            txn.to_owned()
        } else {
            format!("{txn}-{n}")
        };
        let response = room
            .send_raw("m.room.message", content)
            .with_transaction_id(<&TransactionId>::from(txn_id.as_str()))
            .await
            .with_context(|| format!("sending into {}", room.room_id()))?;
        sent.push(response.response.event_id.to_string());
    }
    Ok(sent)
}

/// `m.relates_to` of a part: in the thread, replying to the message (the first part).
fn relation(reply: &Reply, first: bool) -> Option<Value> {
    let in_reply_to = reply.in_reply_to.as_ref().filter(|_| first);
    match (&reply.thread_root, in_reply_to) {
        (Some(root), Some(to)) => Some(json!({
            "rel_type": "m.thread",
            "event_id": root,
            "is_falling_back": false,
            "m.in_reply_to": {"event_id": to},
        })),
        (Some(root), None) => Some(json!({
            "rel_type": "m.thread",
            "event_id": root,
            "is_falling_back": true,
            "m.in_reply_to": {"event_id": root},
        })),
        (None, Some(to)) => Some(json!({"m.in_reply_to": {"event_id": to}})),
        (None, None) => None,
    }
}

/// `text` in parts of at most `max` bytes, cut after a line break when there is one in
/// the part's second half, else at a character boundary.
fn split(text: &str, max: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let head = rest.get(..cut).unwrap_or(rest);
        if let Some(newline) = head.rfind('\n').filter(|at| *at >= max / 2) {
            cut = newline + 1;
        }
        let (part, after) = rest.split_at(cut);
        parts.push(part);
        rest = after;
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_split_at_line_breaks_or_character_boundaries() {
        let lines = "line\n".repeat(10);
        assert_eq!(
            split(&lines, 22),
            [
                "line\nline\nline\nline\n",
                "line\nline\nline\nline\n",
                "line\nline\n"
            ]
        );
        let wide = "é".repeat(10);
        let parts = split(&wide, 5);
        assert!(parts.iter().all(|p| p.len() <= 5), "{parts:?}");
        assert_eq!(parts.concat(), wide);
        assert_eq!(split("", 5), [""]);
        assert_eq!(split("short", 5), ["short"]);
    }

    #[test]
    fn answers_reply_to_their_message_in_its_thread() {
        let room = OwnedRoomId::try_from("!r:localhost").expect("a room id");
        let reply = |thread: Option<&str>, to: Option<&str>| Reply {
            room: room.clone(),
            in_reply_to: to.map(str::to_owned),
            thread_root: thread.map(str::to_owned),
        };
        assert_eq!(relation(&reply(None, None), true), None);
        assert_eq!(
            relation(&reply(None, Some("$m")), true),
            Some(json!({"m.in_reply_to": {"event_id": "$m"}}))
        );
        assert_eq!(relation(&reply(None, Some("$m")), false), None);
        let threaded = relation(&reply(Some("$root"), Some("$m")), true).expect("a relation");
        assert_eq!(threaded["rel_type"], "m.thread");
        assert_eq!(threaded["event_id"], "$root");
        assert_eq!(threaded["m.in_reply_to"]["event_id"], "$m");
        let later = relation(&reply(Some("$root"), Some("$m")), false).expect("a relation");
        assert_eq!(later["is_falling_back"], true);
    }
}
