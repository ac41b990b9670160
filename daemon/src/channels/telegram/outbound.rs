//! Owner messages out to Telegram, from the owner outbox, each at most once per chat.
//!
//! Decided here:
//! - Where a message goes: an answer to a Telegram message goes back to its chat as a reply
//!   to it; so does anything else about an owner's Telegram message (its request for
//!   confirmation, the outcome). Everything else goes to each owner's private chat (a user's
//!   private chat with a bot has the user's id), once they have written to the bot.
//!   Answers to requests made through the socket, HTTP or mail are left to those doors.
//! - At most once: each (message, chat) is recorded before its request goes out (see
//!   [`super::state`]); a send whose answer was lost, or that the daemon died during, is
//!   `unknown` and never sent again — the owner is told through the other channels (an
//!   outbox notice already marked delivered on `telegram`), and `steward outbox` still has
//!   the text. A refusal (a chat the bot may not write to) is logged and not retried.
//! - A `429` waits the `retry_after` it names and sends the same part again (nothing was
//!   done); a connection that never opened is tried again by the push loop
//!   ([`crate::owner::push`]), which keeps the order.
//! - Pacing: at most [`BURST`] messages at once into one chat, then one per
//!   [`PER_CHAT_EVERY`] (Telegram asks bots to stay near one message a second per chat).
//! - A request for confirmation carries the buttons Confirm / Deny (on its last part).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use steward_config::TelegramConfig;
use steward_events::{Payload, Source, Trust};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::CHANNEL;
use super::api::{ApiError, BotApi};
use super::html::{MAX_PART_UNITS, split, to_html};
use super::state::{SendRecord, SendState, TelegramState};
use crate::channels::context::ChannelContext;
use crate::owner::outbox::{MessageKind, NewMessage, OwnerMessage};
use crate::owner::push::Push;
use crate::store::StoreError;

/// Waited on a 429 that names no `retry_after`.
const RETRY: Duration = Duration::from_secs(2);
const BURST: u32 = 5;
const PER_CHAT_EVERY: Duration = Duration::from_secs(1);

/// A token bucket per chat (see the module docs). Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Pacing {
    chats: Arc<Mutex<HashMap<i64, (f64, Instant)>>>,
}

impl Pacing {
    /// How long to wait before the next message into `chat` (and takes its place).
    fn wait(&self, chat: i64) -> Duration {
        let now = Instant::now();
        let mut chats = self.chats.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, at) = chats.entry(chat).or_insert((f64::from(BURST), now));
        let refill = now.duration_since(*at).as_secs_f64() / PER_CHAT_EVERY.as_secs_f64();
        *tokens = (*tokens + refill).min(f64::from(BURST)) - 1.0;
        *at = now;
        if *tokens >= 0.0 {
            Duration::ZERO
        } else {
            PER_CHAT_EVERY.mul_f64(-*tokens)
        }
    }
}

#[derive(Debug)]
pub struct Outbound {
    pub api: BotApi,
    pub config: TelegramConfig,
    pub state: TelegramState,
    pub cx: ChannelContext,
    pub pacing: Pacing,
}

/// One chat a message goes to, and the message it replies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Destination {
    chat: i64,
    reply_to: Option<i64>,
}

impl Outbound {
    /// Delivers owner messages until `stop` (the loop is [`crate::owner::push::run`]).
    pub async fn run(self, stop: CancellationToken) {
        let outbox = self.cx.outbox().clone();
        crate::owner::push::run(&self, &outbox, stop).await;
    }

    /// Sends `message` into one chat unless it was sent (or tried) there before; where it
    /// stands after. `Err` only when it can be tried again (nothing of it went out).
    async fn send_to(&self, message: &OwnerMessage, to: Destination) -> anyhow::Result<SendRecord> {
        let mut record = match self.state.send(message.id, to.chat)? {
            Some(record)
                if !matches!(
                    record.state,
                    SendState::Sending { .. } | SendState::Retrying { .. }
                ) =>
            {
                return Ok(record);
            }
            Some(record) => record,
            None => SendRecord {
                message: message.id,
                chat: to.chat,
                parts: Vec::new(),
                state: SendState::Sending { part: 0 },
            },
        };
        let parts = split(&message.text, MAX_PART_UNITS);
        let buttons = match (&message.kind, &message.pending_id) {
            (MessageKind::Confirmation, Some(id)) => vec![
                ("✅ Confirm".to_owned(), format!("confirm:{id}")),
                ("❌ Deny".to_owned(), format!("deny:{id}")),
            ],
            _ => Vec::new(),
        };
        let count = parts.len();
        for (n, part) in parts.iter().enumerate().skip(record.parts.len()) {
            let last = n + 1 == count;
            record.state = SendState::Sending { part: n };
            self.state.put_send(&record).await?;
            loop {
                let wait = self.pacing.wait(to.chat);
                tokio::time::sleep(wait).await;
                let sent = self
                    .api
                    .send_message(
                        to.chat,
                        &to_html(part),
                        to.reply_to.filter(|_| n == 0),
                        if last { &buttons } else { &[] },
                    )
                    .await;
                match sent {
                    Ok(sent) => {
                        record.parts.push(sent.message_id);
                        self.state.note_sent(to.chat, sent.message_id, message.id)?;
                        break;
                    }
                    Err(e @ ApiError::Refused { code: 429, .. }) => {
                        let wait = e.retry_after().unwrap_or(RETRY);
                        info!(
                            chat = to.chat,
                            wait_secs = wait.as_secs(),
                            "Telegram asks to slow down"
                        );
                        tokio::time::sleep(wait).await;
                    }
                    Err(e @ ApiError::NotSent { .. }) => {
                        // Nothing of this part went out: the next try starts from it.
                        record.state = SendState::Retrying { part: n };
                        self.state.put_send(&record).await?;
                        anyhow::bail!(e);
                    }
                    Err(e @ ApiError::Refused { .. }) => {
                        record.state = SendState::Refused { why: e.to_string() };
                        self.state.put_send(&record).await?;
                        return Ok(record);
                    }
                    Err(e @ ApiError::Lost { .. }) => {
                        record.state = SendState::Unknown { why: e.to_string() };
                        self.state.put_send(&record).await?;
                        return Ok(record);
                    }
                }
            }
        }
        record.state = SendState::Sent;
        self.state.put_send(&record).await?;
        info!(
            message_id = message.id,
            chat = to.chat,
            parts = record.parts.len(),
            "owner message delivered in Telegram"
        );
        Ok(record)
    }

    /// Tells the owner, on the other channels, of sends that may not have arrived.
    pub async fn tell_unknown(&self, records: &[SendRecord]) {
        for record in records {
            let SendState::Unknown { why } = &record.state else {
                continue;
            };
            warn!(message_id = record.message, chat = record.chat, %why, "a Telegram send may not have arrived; it is not sent again");
            let notice = NewMessage {
                text: format!(
                    "Owner message #{} may not have reached Telegram chat {} ({why}); it is not sent again. `steward outbox` has it.",
                    record.message, record.chat
                ),
                delivered_to: Some(CHANNEL),
                ..NewMessage::default()
            };
            if let Err(e) = self.cx.outbox().queue(MessageKind::Problem, notice).await {
                warn!(error = %e, "cannot queue the notice of an unknown Telegram send");
            }
        }
    }

    fn destinations(&self, message: &OwnerMessage) -> anyhow::Result<Vec<Destination>> {
        let owners = || {
            super::owners(&self.config, &self.state)
                .into_iter()
                .map(|chat| Destination {
                    chat,
                    reply_to: None,
                })
                .collect()
        };
        let Some(origin) = message.origin else {
            return Ok(owners());
        };
        let Some(record) = self.cx.submitter().inbox().get(origin)? else {
            return Ok(owners());
        };
        let answer = message.kind == MessageKind::Answer;
        Ok(match (&record.event.source, &record.event.payload) {
            (Source::User | Source::Email, _) if answer => Vec::new(),
            (Source::Chat, Payload::Chat(chat))
                if record.event.channel.starts_with(&format!("{CHANNEL}:"))
                    && (answer || record.event.trust == Trust::Owner) =>
            {
                vec![Destination {
                    chat: chat.room.parse()?,
                    reply_to: chat.message_id.parse().ok().filter(|_| answer),
                }]
            }
            // A chat elsewhere (Matrix) answers there.
            (Source::Chat, _) if answer => Vec::new(),
            _ => owners(),
        })
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
        let destinations = self.destinations(message)?;
        if destinations.is_empty() {
            return Ok(());
        }
        let mut arrived = false;
        for destination in destinations {
            let record = self.send_to(message, destination).await?;
            match &record.state {
                SendState::Sent => arrived = true,
                SendState::Unknown { .. } => self.tell_unknown(&[record]).await,
                SendState::Refused { why } => {
                    warn!(message_id = message.id, chat = destination.chat, %why, "Telegram refused an owner message; it is not sent again");
                }
                SendState::Sending { .. } | SendState::Retrying { .. } => {}
            }
        }
        if arrived {
            self.cx.outbox().delivered(message.id, CHANNEL).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_chat_gets_a_burst_then_one_message_a_second() {
        let pacing = Pacing::default();
        let waits: Vec<Duration> = (0..7).map(|_| pacing.wait(1)).collect();
        assert!(waits.iter().take(5).all(Duration::is_zero), "{waits:?}");
        assert_eq!(waits[5], Duration::from_secs(1));
        assert_eq!(waits[6], Duration::from_secs(2));
        assert_eq!(pacing.wait(2), Duration::ZERO, "another chat has its own");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(pacing.wait(1), Duration::ZERO);
    }
}
