//! What the email channel sends without being asked by a tool:
//!
//! - **Answers.** When a step that merged an email ends, the last assistant message of the
//!   step goes back to that email's sender as a reply in its thread (`Re:` subject,
//!   `In-Reply-To`, `References`). Intermediate messages (those that came with tool calls)
//!   are not mailed; a cancelled step mails nothing. An answer goes through the outbox: it
//!   is written to sled with its Message-ID before it is sent and removed after, and at
//!   start every answer still there is looked up in Sent and sent only if it is not found.
//!   Only the owner and trusted senders get automatic answers; mail from anyone else is
//!   answered only through `email_reply` (which asks first).
//! - **Requests for confirmation.** A pending action whose origin is an email event is
//!   mailed to the owner (the authenticated sender of that email when it was the owner,
//!   else the first plain address of `email.owners`) with its preview and token, once.
//! - **Answers by email** ([`MailCommands`]): an authenticated owner's mail whose first
//!   unquoted line is `CONFIRM <token>` or `DENY <token> [reason]` resolves the action
//!   through the same `Confirmations` as `steward confirm`; a wrong, reused or expired
//!   token changes nothing, and the reply says which.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use steward_events::{EventId, Payload, Source, Trust};
use steward_tools::confirm::{PendingAction, PendingState};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::outbound::{Mailer, Outgoing, Parent};
use super::parse::{ParsedMail, first_line};
use crate::confirmations::{Answer, Confirmations};
use crate::replies::{Announcement, ReplyHub};
use crate::store::Inbox;

/// How often new requests for confirmation are looked for.
const PENDING_SCAN: Duration = Duration::from_millis(500);

/// Answers to `CONFIRM` / `DENY` mails.
#[derive(Clone, Debug)]
pub struct MailCommands {
    pub confirmations: Arc<Confirmations>,
    pub mailer: Mailer,
}

impl MailCommands {
    /// `Some(outcome)` when the mail was an answer to a request for confirmation (it has
    /// then been handled and replied to); `None` for any other mail.
    pub async fn answer(&self, mail: &ParsedMail) -> Option<String> {
        let line = first_line(&mail.body);
        let mut words = line.split_whitespace();
        let verb = words.next()?.to_owned();
        let token = words.next().unwrap_or("");
        // Exactly as the request asks for it: "Deny the request from Bob" is a message for
        // the assistant, not an answer.
        if !is_answer(&verb, token) {
            return None;
        }
        let reason: Vec<&str> = words.collect();
        let outcome = self.resolve(&verb, token, reason.join(" ")).await;
        info!(from = %mail.from, %verb, %outcome, "answer by email to a request for confirmation");
        let references = mail.reply_references();
        let reply = Outgoing::reply(
            Parent::of_mail(mail, &references),
            self.mailer.message_id_for(&format!(
                "answer.{}",
                super::parse::content_id(mail.message_id.as_bytes())
            )),
            mail.from.clone(),
            format!("{outcome}\n"),
        );
        if let Err(e) = self.mailer.send(&reply).await {
            warn!(error = %format!("{e:#}"), "could not mail the outcome of a confirmation answer");
        }
        Some(outcome)
    }

    async fn resolve(&self, verb: &str, token: &str, reason: String) -> String {
        let action = match self.confirmations.pending.find_by_token(token) {
            Ok(Some(action)) => action,
            Ok(None) => {
                return format!(
                    "{verb} {token}: no request for confirmation has this token; nothing was done."
                );
            }
            Err(e) => {
                return format!(
                    "{verb} {token}: the pending actions could not be read ({e}); nothing was done."
                );
            }
        };
        let answer = if verb == "CONFIRM" {
            self.confirmations.approve(&action.id, None).await
        } else {
            let reason = (!reason.is_empty()).then_some(reason);
            self.confirmations.deny(&action.id, reason).await
        };
        match answer {
            Ok(Answer::Ran(done)) if action.state == PendingState::Pending => {
                format!(
                    "Confirmed: `{}` ran ({}). {}",
                    done.tool,
                    format!("{:?}", done.state).to_lowercase(),
                    done.result.map(|r| r.content_text()).unwrap_or_default()
                )
            }
            Ok(Answer::Ran(done)) => format!(
                "Already answered: `{}` ran earlier ({}); it was not run again.",
                done.tool,
                format!("{:?}", done.state).to_lowercase()
            ),
            Ok(Answer::Denied(done)) => format!("Denied: `{}` will not run.", done.tool),
            Ok(Answer::Refused(why) | Answer::Unknown(why)) => format!("Nothing was done: {why}."),
            Err(e) => format!("Nothing was done: {e}."),
        }
    }
}

/// `CONFIRM <token>` / `DENY <token>`: the verb in capitals, the token hexadecimal.
fn is_answer(verb: &str, token: &str) -> bool {
    (verb == "CONFIRM" || verb == "DENY")
        && token.len() >= 8
        && token.chars().all(|c| c.is_ascii_hexdigit())
}

/// An answer waiting to be sent (the outbox).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Queued {
    message_id: String,
    to: Vec<String>,
    subject: String,
    body: String,
    in_reply_to: Option<String>,
    references: Vec<String>,
}

impl From<Outgoing> for Queued {
    fn from(mail: Outgoing) -> Self {
        Self {
            message_id: mail.message_id,
            to: mail.to,
            subject: mail.subject,
            body: mail.body,
            in_reply_to: mail.in_reply_to,
            references: mail.references,
        }
    }
}

impl From<Queued> for Outgoing {
    fn from(q: Queued) -> Self {
        Outgoing {
            message_id: q.message_id,
            to: q.to,
            subject: q.subject,
            body: q.body,
            in_reply_to: q.in_reply_to,
            references: q.references,
            cc: Vec::new(),
        }
    }
}

#[derive(Debug)]
pub struct Replier {
    pub mailer: Mailer,
    pub inbox: Arc<Inbox>,
    pub replies: ReplyHub,
    pub confirmations: Arc<Confirmations>,
    /// The email tree: outbox entries and "request mailed" marks.
    pub tree: sled::Tree,
    pub owners: Vec<String>,
    pub confirm_by_email: bool,
}

impl Replier {
    pub async fn run(self, shutdown: CancellationToken) {
        self.drain_outbox().await;
        let mut announcements = self.replies.subscribe();
        let mut last_text: HashMap<EventId, String> = HashMap::new();
        let mut scan = tokio::time::interval(PENDING_SCAN);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = scan.tick(), if self.confirm_by_email => self.mail_new_requests().await,
                announcement = announcements.recv() => match announcement {
                    Ok(Announcement::Reply { text, reply_to }) => {
                        // Only answers to email events are kept until their step ends.
                        for id in reply_to {
                            if self.is_email(id) {
                                last_text.insert(id, text.clone());
                            }
                        }
                    }
                    Ok(Announcement::StepEnded { events, outcome }) => {
                        let texts: Vec<(EventId, String)> = events
                            .iter()
                            .filter_map(|id| last_text.remove(id).map(|t| (*id, t)))
                            .collect();
                        if matches!(outcome, steward_events::StepEnd::Cancelled { .. }) {
                            continue;
                        }
                        self.answer(texts).await;
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(n)) => warn!(missed = n, "email: fell behind the replies; some answers may not be mailed"),
                    Err(RecvError::Closed) => return,
                },
            }
        }
    }

    fn is_email(&self, id: EventId) -> bool {
        matches!(self.inbox.get(id), Ok(Some(record)) if record.event.source == Source::Email)
    }

    /// Mails the step's final text to the newest email among the step's events.
    async fn answer(&self, texts: Vec<(EventId, String)>) {
        let mut newest: Option<(EventId, String, Box<steward_events::EmailMessage>)> = None;
        for (id, text) in texts {
            let Ok(Some(record)) = self.inbox.get(id) else {
                continue;
            };
            // Strangers get no automatic answer: no backscatter, nothing a prompt injection
            // could make the assistant say to them (the model may still use email_reply,
            // which asks first).
            if record.event.source != Source::Email || record.event.trust == Trust::Untrusted {
                continue;
            }
            if let Payload::Email(email) = record.event.payload
                && newest.as_ref().is_none_or(|(n, _, _)| *n < id)
            {
                newest = Some((id, text, email));
            }
        }
        let Some((id, text, email)) = newest else {
            return;
        };
        let queued = Queued::from(Outgoing::reply(
            Parent::of_event(&email),
            self.mailer.message_id_for(&format!("answer.{id}")),
            email.from.clone(),
            format!("{text}\n"),
        ));
        let key = format!("outbox:{}", queued.message_id);
        match serde_json::to_vec(&queued) {
            Ok(bytes) => {
                if let Err(e) = self.tree.insert(key.as_bytes(), bytes) {
                    warn!(error = %e, "email: could not queue an answer");
                }
                let _ = self.tree.flush_async().await;
            }
            Err(e) => warn!(error = %e, "email: could not queue an answer"),
        }
        self.deliver(&key, queued).await;
    }

    async fn deliver(&self, key: &str, queued: Queued) {
        let message_id = queued.message_id.clone();
        match self.mailer.send(&queued.into()).await {
            Ok(()) => {
                let _ = self.tree.remove(key.as_bytes());
            }
            Err(e) => {
                warn!(%message_id, error = %format!("{e:#}"), "email: the answer could not be sent; it stays in the outbox until the next start")
            }
        }
    }

    /// At start: answers queued before a crash are sent unless Sent already has them.
    async fn drain_outbox(&self) {
        for item in self.tree.scan_prefix(b"outbox:") {
            let Ok((key, bytes)) = item else { continue };
            let Ok(queued) = serde_json::from_slice::<Queued>(&bytes) else {
                let _ = self.tree.remove(&key);
                continue;
            };
            let key = String::from_utf8_lossy(&key).into_owned();
            match self.mailer.find_sent(&queued.message_id).await {
                Ok(true) => {
                    info!(message_id = %queued.message_id, "email: a queued answer is already in Sent; not sent again");
                    let _ = self.tree.remove(key.as_bytes());
                }
                Ok(false) => self.deliver(&key, queued).await,
                Err(e) => {
                    warn!(error = %format!("{e:#}"), "email: cannot check Sent for queued answers; they wait for the next start")
                }
            }
        }
    }

    /// Mails each new pending action that came from an email turn to the owner, once.
    async fn mail_new_requests(&self) {
        let Ok(actions) = self.confirmations.pending.list() else {
            return;
        };
        self.forget_answered_marks(&actions);
        for action in actions {
            if action.state != PendingState::Pending {
                continue;
            }
            let mark = format!("asked:{}", action.id);
            if self.tree.contains_key(mark.as_bytes()).unwrap_or(true) {
                continue;
            }
            let _ = self.tree.insert(mark.as_bytes(), &[]);
            let Some(origin) = action.origin_event else {
                continue;
            };
            let Ok(Some(record)) = self.inbox.get(origin) else {
                continue;
            };
            let Payload::Email(email) = &record.event.payload else {
                continue;
            };
            let owner = if record.event.trust == Trust::Owner {
                Some(email.from.clone())
            } else {
                self.owners.iter().find(|o| !o.starts_with('*')).cloned()
            };
            let Some(owner) = owner else {
                warn!(pending_id = %action.id, "no owner address to mail the request for confirmation to (email.owners)");
                continue;
            };
            let request = confirmation_request(
                &action,
                Parent::of_event(email),
                self.mailer
                    .message_id_for(&format!("confirm.{}", action.id)),
                owner,
            );
            if let Err(e) = self.mailer.send(&request).await {
                warn!(pending_id = %action.id, error = %format!("{e:#}"), "could not mail the request for confirmation");
            }
        }
    }

    /// A "request mailed" mark matters only while its action waits: answered, expired or
    /// purged actions are never mailed again, so their marks go (the email tree stays
    /// bounded).
    fn forget_answered_marks(&self, actions: &[PendingAction]) {
        let waiting: std::collections::HashSet<String> = actions
            .iter()
            .filter(|a| a.state == PendingState::Pending)
            .map(|a| format!("asked:{}", a.id))
            .collect();
        for entry in self.tree.scan_prefix(b"asked:") {
            let Ok((key, _)) = entry else { continue };
            if !waiting.contains(String::from_utf8_lossy(&key).as_ref()) {
                let _ = self.tree.remove(key);
            }
        }
    }
}

/// The mail that asks the owner to confirm `action`, in the thread of the mail it came
/// from.
pub fn confirmation_request(
    action: &PendingAction,
    parent: Parent<'_>,
    message_id: String,
    owner: String,
) -> Outgoing {
    Outgoing::reply(parent, message_id, owner, request_text(action))
}

fn request_text(action: &PendingAction) -> String {
    format!(
        "Steward wants to do something that needs your confirmation:\n\n    {}\n\nWhy it asks: {}\nAction: {}\nExpires: {}\n\nTo run it once, reply with this first line:\n\nCONFIRM {}\n\nTo refuse it:\n\nDENY {} <reason>\n",
        action.preview,
        action.reason,
        action.id,
        action
            .expires_at
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        action.token,
        action.token
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_capitalised_verb_and_a_hex_token_make_an_answer() {
        let table = [
            ("CONFIRM", "0123456789abcdef0123456789abcdef", true),
            ("DENY", "0123456789ABCDEF", true),
            ("CONFIRM", "", false),
            ("CONFIRM", "abc", false),
            ("Deny", "0123456789abcdef", false),
            ("DENY", "the", false),
            ("confirm", "0123456789abcdef", false),
        ];
        for (verb, token, expected) in table {
            assert_eq!(is_answer(verb, token), expected, "{verb} {token}");
        }
    }
}
