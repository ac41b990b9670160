//! `getUpdates` long polling: messages, edits and button presses into events.
//!
//! Decided here:
//! - The offset (the next update to ask for) is saved only after every update of a batch is
//!   durable in the inbox, or was taken before: an update read again after a crash is
//!   recognised by its dedupe key, `telegram:BOT:UPDATE`, and skipped. Asking with the new
//!   offset is what tells Telegram to forget the batch.
//! - A `409 Conflict` (a webhook is set, or another client polls with the token) is shown in
//!   the status with Telegram's words and looked at again after ten seconds, not hammered; a
//!   `429` waits its `retry_after`.
//! - `/start CODE` in a private chat pairs its sender as an owner when the code is one
//!   `steward telegram pair` printed and still valid; a wrong or expired code changes nothing
//!   but a `rejected` event (and the sender is told).
//! - Strangers' messages are recorded `rejected` and not answered; in an allowed group a
//!   message that neither mentions the bot nor replies to it is chatter, not an event.
//! - Owners' commands (`/status`, `/confirm ID`, …) are answered at once; a reply to a
//!   request for confirmation saying yes or no, or a press of its button, answers it (then
//!   the request's message is edited to show the outcome). Presses by anyone else are
//!   refused with an alert. Each answer is recorded `handled`.
//! - Edits of a message are recorded `handled`: what was taken stays as first sent.

use std::time::Duration;

use chrono::{TimeZone, Utc};
use serde_json::Value;
use steward_config::TelegramConfig;
use steward_events::{
    Admission, ChatMessage, ChatRules, Event, EventState, Payload, RoomFacts, Sender,
    SenderDecision, SenderPolicy, Source, Trust, Unknown, admit,
};
use tracing::{debug, info, warn};

use super::api::{ApiError, BotApi, Me};
use super::html::{plain, to_html};
use super::parse::{Callback, Incoming, Message, parse, update_id};
use super::state::TelegramState;
use super::typing::Typing;
use super::{CHANNEL, CONFLICT_WAIT};
use crate::channels::ChannelHealth;
use crate::channels::answers::{answered_text, reply_answer};
use crate::channels::context::{ChannelContext, Down};
use crate::owner::{OwnerApi, OwnerError, Sent};

/// The polling side of one session.
#[derive(Debug)]
pub struct Inbound<'a> {
    pub api: &'a BotApi,
    pub me: &'a Me,
    pub config: &'a TelegramConfig,
    pub state: &'a TelegramState,
    pub owner: &'a OwnerApi,
    pub cx: &'a ChannelContext,
    pub typing: &'a Typing,
    /// Said in the status once the bot is polled (an offset that started over).
    pub note: Option<String>,
}

fn stored(e: crate::store::StoreError) -> Down {
    Down::Failed(format!("the store: {e}"))
}

impl Inbound<'_> {
    fn policy(&self) -> SenderPolicy {
        SenderPolicy {
            owner: super::owners(self.config, self.state)
                .iter()
                .map(i64::to_string)
                .collect(),
            trusted: self.config.trusted.iter().map(i64::to_string).collect(),
            unknown: Unknown::Reject,
        }
    }

    /// Polls until the channel stops (`Ok`) or the Bot API fails (`Err`, retried).
    pub async fn run(&self) -> Result<(), Down> {
        let name = self.me.username.as_deref().unwrap_or(&self.me.first_name);
        let ready = match &self.note {
            Some(note) => format!("ready (@{name}; {note})"),
            None => format!("ready (@{name})"),
        };
        self.cx.set_health(ChannelHealth::ready(ready.clone()));
        loop {
            let offset = self.state.offset().map_err(stored)?;
            let polled = tokio::select! {
                () = self.cx.shutdown().cancelled() => return Ok(()),
                polled = self.api.get_updates(offset) => polled,
            };
            let updates = match polled {
                Ok(updates) => updates,
                Err(e) if e.is_conflict() => {
                    warn!(error = %e, "another client polls with this token, or a webhook is set");
                    return Err(Down::Waiting {
                        detail: format!(
                            "conflict: {e} (another getUpdates client, or a webhook: deleteWebhook removes it)"
                        ),
                        retry: CONFLICT_WAIT,
                    });
                }
                Err(e @ ApiError::Refused { code: 429, .. }) => {
                    let wait = e.retry_after().unwrap_or(Duration::from_secs(5));
                    tokio::select! {
                        () = self.cx.shutdown().cancelled() => return Ok(()),
                        () = tokio::time::sleep(wait) => continue,
                    }
                }
                Err(e) => return Err(Down::Failed(e.to_string())),
            };
            let mut next = None;
            for update in &updates {
                let Some(id) = update_id(update) else {
                    continue;
                };
                self.take(id, update).await?;
                next = Some(id + 1);
            }
            if let Some(next) = next {
                self.state.set_offset(next).await.map_err(stored)?;
            }
            self.cx.set_health(ChannelHealth::ready(ready.clone()));
        }
    }

    fn key(&self, update: i64) -> String {
        format!("{CHANNEL}:{}:{update}", self.me.id)
    }

    fn taken(&self, key: &str) -> Result<bool, Down> {
        self.cx.submitter().inbox().is_claimed(key).map_err(stored)
    }

    async fn take(&self, id: i64, update: &Value) -> Result<(), Down> {
        let key = self.key(id);
        if self.taken(&key)? {
            return Ok(());
        }
        match parse(update) {
            Incoming::Message(message) if !message.from_is_bot && message.from.is_some() => {
                self.message(key, message).await
            }
            Incoming::Edited(message) => self.edited(key, message).await,
            Incoming::Callback(callback) => self.pressed(key, callback).await,
            _ => {
                debug!(update = id, "an update the channel does not take");
                Ok(())
            }
        }
    }

    fn event(&self, whence: &Whence, trust: Trust, payload: Payload) -> Event {
        let mut event = Event::new(
            Source::Chat,
            format!("{CHANNEL}:{}", whence.chat),
            Sender {
                identity: whence.from.to_string(),
                authenticated_by: "telegram bot api".into(),
            },
            trust,
            payload,
        );
        event.thread = Some(match whence.reply_to {
            Some(to) => format!("{}/{to}", whence.chat),
            None => whence.chat.to_string(),
        });
        if let Some(at) = Utc.timestamp_opt(whence.date, 0).single() {
            event.occurred_at = at;
        }
        event
    }

    async fn message(&self, key: String, message: Message) -> Result<(), Down> {
        let from = message.from.unwrap_or_default();
        if message.is_private()
            && let Some(code) = message.text.trim().strip_prefix("/start")
            && !self.is_owner(from)
        {
            return self.pair(key, &message, code.trim()).await;
        }
        let facts = RoomFacts {
            listed: self.config.allow_groups.contains(&message.chat_id),
            members: if message.is_private() { 2 } else { 3 },
            mentioned: message.addresses(self.me.id, self.me.username.as_deref()),
            encrypted: false,
            device_verified: None,
        };
        let rules = ChatRules {
            e2ee: true,
            mention_required_in_groups: self.config.mention_required_in_groups,
            require_verified_devices: false,
        };
        let admission = admit(self.policy().decide(&from.to_string()), facts, rules);
        if admission == Admission::Ignore {
            debug!(
                chat = message.chat_id,
                "a group message that does not address the bot"
            );
            return Ok(());
        }
        if admission == Admission::Take(Trust::Owner)
            && let Some(to) = message.reply_to
            && let Some((yes, reason)) = reply_answer(&message.text)
            && let Some(pending) = self.request_of(message.chat_id, to)?
        {
            let outcome = self.answer(&pending, yes, reason).await;
            self.say(message.chat_id, Some(message.message_id), &outcome)
                .await;
            return self
                .handled(key, &whence(&message), &pending, yes, outcome)
                .await;
        }
        let trust = match &admission {
            Admission::Take(trust) => *trust,
            _ => Trust::Untrusted,
        };
        let chat = ChatMessage {
            room: message.chat_id.to_string(),
            message_id: message.message_id.to_string(),
            thread_root: None,
            in_reply_to: message.reply_to.map(|to| to.to_string()),
            text: message.event_text(),
        };
        let mut event = self.event(&whence(&message), trust, Payload::Chat(Box::new(chat)));
        event.dedupe_key = Some(key);
        if let Admission::Reject(reason) = admission {
            info!(chat = message.chat_id, from, %reason, "a Telegram message refused");
            self.cx.reject(event, reason).await.map_err(stored)?;
            return Ok(());
        }
        self.submit(&message, event).await
    }

    /// Hands a taken message to the owner API (see [`crate::channels::matrix::inbound`]
    /// for the same rule): a command is answered at once, anything else is stored and the
    /// chat shows the bot typing. A message that could not be stored fails the session, so
    /// the offset stays before it.
    async fn submit(&self, message: &Message, event: Event) -> Result<(), Down> {
        let said = match self.owner.take(event, self.cx.shutdown()).await {
            Ok(Sent::Accepted {
                event_id,
                duplicate_of: None,
            }) => {
                self.typing.start(message.chat_id, event_id);
                return Ok(());
            }
            Ok(Sent::Accepted { .. }) => return Ok(()),
            Ok(Sent::Said(text)) => text,
            Ok(Sent::Answered(row)) => answered_text(&row),
            Ok(Sent::Rejected { reason, .. }) => format!("Not taken: {reason}"),
            Err(OwnerError::Unavailable(why)) => {
                return Err(Down::Failed(format!(
                    "a message could not be stored: {why}"
                )));
            }
            Err(e) => format!("Nothing was done: {e}"),
        };
        self.say(message.chat_id, Some(message.message_id), &said)
            .await;
        Ok(())
    }

    /// Answers in a chat at once (a command's answer, not an owner message): best effort.
    async fn say(&self, chat: i64, reply_to: Option<i64>, text: &str) {
        if let Err(e) = self
            .api
            .send_message(chat, &to_html(text), reply_to, &[])
            .await
        {
            warn!(chat, error = %e, "could not answer in Telegram");
        }
    }

    fn is_owner(&self, user: i64) -> bool {
        self.policy().decide(&user.to_string()) == SenderDecision::Accept(Trust::Owner)
    }

    async fn pair(&self, key: String, message: &Message, code: &str) -> Result<(), Down> {
        let from = message.from.unwrap_or_default();
        let paired = !code.is_empty()
            && self
                .state
                .redeem(code, Utc::now(), from, message.from_username.clone())
                .await
                .map_err(stored)?;
        let mut event = self.event(
            &whence(message),
            if paired {
                Trust::Owner
            } else {
                Trust::Untrusted
            },
            Payload::Notice {
                text: "/start (pairing)".into(),
            },
        );
        event.dedupe_key = Some(key);
        if paired {
            info!(user = from, "a Telegram user paired as an owner");
            self.say(
                message.chat_id,
                None,
                "Paired: you are now an owner of this assistant. Write to it here.",
            )
            .await;
            let outcome = format!("user {from} paired as an owner");
            self.cx
                .record_terminal(event, EventState::Handled { outcome })
                .await
                .map_err(stored)?;
        } else {
            info!(
                user = from,
                "a Telegram pairing attempt with a wrong or expired code"
            );
            self.say(
                message.chat_id,
                None,
                "This assistant is private. Its owner can pair with `steward telegram pair` and send the code it prints here as /start CODE; that code is not valid or has expired.",
            )
            .await;
            self.cx
                .reject(
                    event,
                    "a pairing code that is not valid or has expired".into(),
                )
                .await
                .map_err(stored)?;
        }
        Ok(())
    }

    /// The pending action the bot's message `message_id` in `chat` asked about, if any.
    fn request_of(&self, chat: i64, message_id: i64) -> Result<Option<String>, Down> {
        let Some(outbox) = self.state.sent_message(chat, message_id).map_err(stored)? else {
            return Ok(None);
        };
        let found = self.owner.outbox().get(outbox).map_err(stored)?;
        Ok(found.and_then(|m| m.pending_id))
    }

    async fn answer(&self, pending: &str, yes: bool, reason: Option<String>) -> String {
        let answered = if yes {
            self.owner.confirm(pending, None).await
        } else {
            self.owner.deny(pending, reason).await
        };
        match answered {
            Ok(row) => answered_text(&row),
            Err(e) => format!("Nothing was done: {e}"),
        }
    }

    async fn handled(
        &self,
        key: String,
        whence: &Whence,
        pending: &str,
        yes: bool,
        outcome: String,
    ) -> Result<(), Down> {
        info!(chat = whence.chat, %pending, yes, %outcome, "a request for confirmation answered in Telegram");
        let mut event = self.event(
            whence,
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

    /// A press of Confirm / Deny (see the module docs).
    async fn pressed(&self, key: String, callback: Callback) -> Result<(), Down> {
        let answer = match callback.data.split_once(':') {
            Some(("confirm", id)) => Some((true, id.to_owned())),
            Some(("deny", id)) => Some((false, id.to_owned())),
            _ => None,
        };
        let pressed = Whence {
            chat: callback.message.map_or(callback.from, |(chat, _)| chat),
            from: callback.from,
            date: Utc::now().timestamp(),
            reply_to: callback.message.map(|(_, message)| message),
        };
        let (yes, pending) = match answer {
            Some(answer) if self.is_owner(callback.from) => answer,
            _ => {
                let alert = "Only the owner can answer this request.";
                if let Err(e) = self
                    .api
                    .answer_callback_query(&callback.id, alert, true)
                    .await
                {
                    warn!(error = %e, "could not refuse a button press");
                }
                let mut event = self.event(
                    &pressed,
                    Trust::Untrusted,
                    Payload::Notice {
                        text: format!("a button press: {}", callback.data),
                    },
                );
                event.dedupe_key = Some(key);
                self.cx
                    .reject(event, "only an owner may answer a request".into())
                    .await
                    .map_err(stored)?;
                return Ok(());
            }
        };
        let outcome = self.answer(&pending, yes, None).await;
        if let Err(e) = self
            .api
            .answer_callback_query(&callback.id, &outcome, false)
            .await
        {
            warn!(error = %e, "could not answer a button press");
        }
        if let Some((chat, message_id)) = callback.message {
            let request = self
                .state
                .sent_message(chat, message_id)
                .map_err(stored)?
                .and_then(|id| self.owner.outbox().get(id).ok().flatten())
                .map(|m| m.text)
                .unwrap_or_default();
            // The request's text and the outcome within one message's limit.
            let request = crate::text::cut(&request, 3000);
            let outcome = crate::text::cut(&outcome, 1000);
            let text = format!("{}\n\n<b>{}</b>", plain(&request), plain(&outcome));
            if let Err(e) = self.api.edit_message_text(chat, message_id, &text).await {
                warn!(error = %e, "could not show the outcome on the request");
            }
        }
        self.handled(key, &pressed, &pending, yes, outcome).await
    }

    /// Records an edit (see the module docs); edits by strangers are not looked at.
    async fn edited(&self, key: String, message: Message) -> Result<(), Down> {
        let from = message.from.unwrap_or_default();
        let SenderDecision::Accept(trust @ (Trust::Owner | Trust::Trusted)) =
            self.policy().decide(&from.to_string())
        else {
            return Ok(());
        };
        let mut event = self.event(
            &whence(&message),
            trust,
            Payload::Notice {
                text: format!("an edit of message {}", message.message_id),
            },
        );
        event.dedupe_key = Some(key);
        let outcome = format!(
            "an edit of message {}, which was taken as first sent; nothing is run again",
            message.message_id
        );
        self.cx
            .record_terminal(event, EventState::Handled { outcome })
            .await
            .map_err(stored)?;
        Ok(())
    }
}

/// Where an event came from in Telegram: the chat, the user, when, and the message it
/// answers (a reply's, or the request a button was on).
#[derive(Debug)]
struct Whence {
    chat: i64,
    from: i64,
    /// Unix seconds.
    date: i64,
    reply_to: Option<i64>,
}

fn whence(message: &Message) -> Whence {
    Whence {
        chat: message.chat_id,
        from: message.from.unwrap_or_default(),
        date: message.date,
        reply_to: message.reply_to,
    }
}
