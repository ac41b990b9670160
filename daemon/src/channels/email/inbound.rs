//! The inbound actor: one IMAP connection that turns new mail into events.
//!
//! Connect, log in, select, fetch what is new, then IDLE (re-issued every `IDLE_RENEW`,
//! under the 29 minutes servers allow) or, without IDLE, poll every `email.poll_secs`.
//! Mail that lands between a fetch and the start of IDLE is not left waiting for the next
//! notification: the untagged EXISTS the server sent meanwhile is seen before waiting.
//! Any error closes the session and reconnects after a backoff (1 s doubling to 5 min,
//! with jitter; back to 1 s after a login succeeds); `steward status` shows the channel as
//! `connecting`, `connected`, `idle`, `polling`, or `backoff: <error>`.
//!
//! The watermark is (UIDVALIDITY, last UID) per mailbox, in sled, and moves past a message
//! only once its event is durable (accepted, rejected or dead alike — a message that cannot
//! be processed never holds the mailbox up). A crash between fetching and storing fetches
//! the message again; its dedupe key (the Message-ID, or a hash of the raw bytes) is
//! claimed already if it was stored, so each message becomes one event. A changed
//! UIDVALIDITY rescans the mailbox from the start under the same dedupe keys.
//!
//! Messages over `email.max_message_bytes` (by the server's RFC822.SIZE) are never
//! downloaded: their headers alone are read and the event is `rejected` with the sizes.

use std::path::PathBuf;

use std::time::Duration;

use anyhow::Context;
use async_imap::types::UnsolicitedResponse;
use futures_util::TryStreamExt;
use serde::{Deserialize, Serialize};
use steward_events::{
    EmailMessage, Event, EventState, Payload, SavedAttachment, Sender, SenderDecision, Source,
    Trust,
};
use tracing::{debug, info, warn};

use super::account::{Account, Session, bounded};
use super::auth::SenderAuth;
use super::parse::{self, ParsedMail};
use super::replies::MailCommands;
use crate::channels::ChannelHealth;
use crate::channels::context::{ChannelContext, Down};

/// How long one IDLE lasts before it is re-issued (RFC 2177: servers may drop it at 30 min).
const IDLE_RENEW: Duration = Duration::from_secs(25 * 60);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Bodies fetched in one command, at most (by the server's sizes).
const FETCH_CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// The status board's name for this channel.
pub const CHANNEL: &str = "email";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watermark {
    pub uid_validity: u32,
    pub last_uid: u32,
}

/// Where the watermarks live.
#[derive(Clone, Debug)]
pub struct Watermarks(pub sled::Tree);

impl Watermarks {
    fn key(mailbox: &str) -> Vec<u8> {
        format!("watermark:{mailbox}").into_bytes()
    }

    pub fn load(&self, mailbox: &str) -> anyhow::Result<Watermark> {
        match self.0.get(Self::key(mailbox))? {
            Some(bytes) => Ok(serde_json::from_slice(&bytes)?),
            None => Ok(Watermark::default()),
        }
    }

    fn save(&self, mailbox: &str, mark: Watermark) -> anyhow::Result<()> {
        self.0
            .insert(Self::key(mailbox), serde_json::to_vec(&mark)?)?;
        Ok(())
    }
}

#[derive(Debug)]
pub struct Inbound {
    pub account: Account,
    pub auth: SenderAuth,
    pub cx: ChannelContext,
    pub watermarks: Watermarks,
    pub attachments_dir: PathBuf,
    pub commands: MailCommands,
}

impl Inbound {
    fn channel(&self) -> String {
        format!("email:{}", self.account.config.mailbox.to_ascii_lowercase())
    }

    /// Reads the mailbox until the channel stops, reconnecting after any error.
    pub async fn run(self) {
        self.cx
            .keep_up(MAX_BACKOFF, || async {
                self.cx.set_health(ChannelHealth::starting("connecting"));
                self.session()
                    .await
                    .map_err(|error| Down::Failed(format!("{error:#}")))
            })
            .await;
    }

    /// One session: Ok on shutdown, Err on anything that needs a reconnect.
    async fn session(&self) -> anyhow::Result<()> {
        let shutdown = self.cx.shutdown();
        let config = &self.account.config;
        let mut session = self.account.imap().await?;
        let capabilities = bounded("CAPABILITY", session.capabilities()).await?;
        let has_idle = capabilities.has_str("IDLE");
        let selected = bounded("SELECT", session.select(&config.mailbox)).await?;
        let uid_validity = selected.uid_validity.unwrap_or(0);
        let mut mark = self.watermarks.load(&config.mailbox)?;
        if mark.uid_validity != uid_validity {
            if mark != Watermark::default() {
                info!(mailbox = %config.mailbox, old = mark.uid_validity, new = uid_validity, "UIDVALIDITY changed: rescanning the mailbox (Message-IDs keep it from repeating events)");
            }
            mark = Watermark {
                uid_validity,
                last_uid: 0,
            };
            self.watermarks.save(&config.mailbox, mark)?;
        }
        self.cx.set_health(ChannelHealth::ready("connected"));
        // Untagged responses outside IDLE's wait (EXISTS sent while a FETCH ran, or before
        // the server's "+ idling") land here; one of them means new mail may be waiting.
        let notices = session.unsolicited_responses.clone();
        loop {
            while notices.try_recv().is_ok() {} // the sync below reads whatever they said
            self.sync(&mut session, &mut mark).await?;
            if shutdown.is_cancelled() {
                return Ok(());
            }
            if has_idle {
                self.cx.set_health(ChannelHealth::ready("idle"));
                let mut idle = session.idle();
                bounded("IDLE", idle.init()).await?;
                let arrived_meanwhile = std::iter::from_fn(|| notices.try_recv().ok()).any(|r| {
                    matches!(
                        r,
                        UnsolicitedResponse::Exists(_) | UnsolicitedResponse::Recent(_)
                    )
                });
                if !arrived_meanwhile {
                    let (wait, _stop) = idle.wait_with_timeout(IDLE_RENEW);
                    tokio::select! {
                        () = shutdown.cancelled() => return Ok(()),
                        woke = wait => {
                            let woke = woke.context("IDLE")?;
                            debug!(?woke, "email: IDLE ended");
                        }
                    }
                }
                session = bounded("DONE", idle.done()).await?;
            } else {
                self.cx.set_health(ChannelHealth::ready("polling"));
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(config.poll) => {}
                }
                bounded("NOOP", session.noop()).await?;
            }
        }
    }

    /// Fetches every message past the watermark, oldest first, and records each.
    async fn sync(&self, session: &mut Session, mark: &mut Watermark) -> anyhow::Result<()> {
        let mailbox = self.account.config.mailbox.clone();
        let sizes: Vec<(u32, u64)> = {
            let stream = bounded(
                "UID FETCH sizes",
                session.uid_fetch(format!("{}:*", mark.last_uid + 1), "(UID RFC822.SIZE)"),
            )
            .await?;
            let fetches: Vec<_> = bounded("UID FETCH sizes", stream.try_collect()).await?;
            let mut sizes: Vec<(u32, u64)> = fetches
                .iter()
                .filter_map(|f| Some((f.uid?, u64::from(f.size.unwrap_or(0)))))
                // `n:*` names the last message even when it is below n.
                .filter(|(uid, _)| *uid > mark.last_uid)
                .collect();
            sizes.sort_unstable();
            sizes
        };
        let max = self.account.config.max_message_bytes;
        let mut pending = sizes.as_slice();
        while !pending.is_empty() {
            // A chunk: as many messages as fit in FETCH_CHUNK_BYTES (at least one), or one
            // oversized message.
            let mut take = 0;
            let mut bytes = 0;
            while let Some(&(_, size)) = pending.get(take) {
                if size > max {
                    if take == 0 {
                        take = 1;
                    }
                    break;
                }
                if take > 0 && bytes + size > FETCH_CHUNK_BYTES {
                    break;
                }
                bytes += size;
                take += 1;
            }
            let (chunk, rest) = pending.split_at(take);
            pending = rest;
            // `take` is at least 1 while anything is pending.
            let Some(&(uid, size)) = chunk.first() else {
                break;
            };
            if size > max {
                let header = self.fetch(session, &[uid], "BODY.PEEK[HEADER]").await?;
                let raw = header
                    .into_iter()
                    .next()
                    .map(|(_, raw)| raw)
                    .unwrap_or_default();
                self.record_oversized(&raw, uid, size, max).await?;
                mark.last_uid = uid;
                self.watermarks.save(&mailbox, *mark)?;
                continue;
            }
            let uids: Vec<u32> = chunk.iter().map(|(uid, _)| *uid).collect();
            let mut bodies = self.fetch(session, &uids, "BODY.PEEK[]").await?;
            bodies.sort_unstable_by_key(|(uid, _)| *uid);
            for (uid, raw) in bodies {
                crate::faults::point("email.fetched");
                self.process(uid, &raw).await?;
                mark.last_uid = mark.last_uid.max(uid);
                self.watermarks.save(&mailbox, *mark)?;
            }
            // A message that vanished between the two fetches (expunged) is passed over.
            if let Some(&(last, _)) = chunk.last()
                && last > mark.last_uid
            {
                mark.last_uid = last;
                self.watermarks.save(&mailbox, *mark)?;
            }
        }
        Ok(())
    }

    async fn fetch(
        &self,
        session: &mut Session,
        uids: &[u32],
        item: &str,
    ) -> anyhow::Result<Vec<(u32, Vec<u8>)>> {
        let set: Vec<String> = uids.iter().map(u32::to_string).collect();
        let stream = bounded(
            "UID FETCH",
            session.uid_fetch(set.join(","), format!("(UID {item})")),
        )
        .await?;
        let fetches: Vec<_> = bounded("UID FETCH", stream.try_collect()).await?;
        Ok(fetches
            .iter()
            .filter_map(|f| {
                let raw = f.body().or_else(|| f.header())?;
                Some((f.uid?, raw.to_vec()))
            })
            .collect())
    }

    fn base_event(
        &self,
        identity: &str,
        authenticated_by: &str,
        trust: Trust,
        payload: Payload,
    ) -> Event {
        Event::new(
            Source::Email,
            self.channel(),
            Sender {
                identity: identity.to_owned(),
                authenticated_by: authenticated_by.to_owned(),
            },
            trust,
            payload,
        )
    }

    async fn record_oversized(
        &self,
        header: &[u8],
        uid: u32,
        size: u64,
        max: u64,
    ) -> anyhow::Result<()> {
        let parsed = parse::parse(header).ok();
        let key = match &parsed {
            Some(mail) if mail.has_message_id => mail.dedupe_key(),
            // The header section is unique per delivery (Received lines, dates).
            _ => format!("email:{}", parse::content_id(header)),
        };
        if self.cx.submitter().inbox().is_claimed(&key)? {
            return Ok(());
        }
        let from = parsed.as_ref().map_or("unknown", |m| m.from.as_str());
        let subject = parsed.as_ref().map_or("", |m| m.subject.as_str());
        let reason = format!(
            "message of {size} bytes exceeds email.max_message_bytes ({max}); not downloaded"
        );
        let mut event = self.base_event(
            from,
            "none",
            Trust::Untrusted,
            Payload::Notice {
                text: format!("Email from {from} (subject {subject:?}) refused: {reason}"),
            },
        );
        event.dedupe_key = Some(key);
        warn!(
            uid,
            size, from, "email over the size limit; recorded as rejected"
        );
        self.cx.reject(event, reason).await?;
        Ok(())
    }

    /// Turns one raw message into one durable event (accepted, rejected, dead or handled).
    async fn process(&self, uid: u32, raw: &[u8]) -> anyhow::Result<()> {
        let mail = match parse::parse(raw) {
            Ok(mail) => mail,
            Err(reason) => {
                let key = format!("email:{}", parse::content_id(raw));
                if self.cx.submitter().inbox().is_claimed(&key)? {
                    return Ok(());
                }
                let mut event = self.base_event(
                    "unknown",
                    "none",
                    Trust::Untrusted,
                    Payload::Notice {
                        text: format!(
                            "An email ({} bytes, UID {uid}) could not be processed: {reason}",
                            raw.len()
                        ),
                    },
                );
                event.dedupe_key = Some(key);
                warn!(uid, %reason, "unprocessable email; recorded as dead");
                self.cx
                    .record_terminal(event, EventState::Dead { error: reason })
                    .await?;
                return Ok(());
            }
        };
        let key = mail.dedupe_key();
        if self.cx.submitter().inbox().is_claimed(&key)? {
            debug!(uid, message_id = %mail.message_id, "already an event");
            return Ok(());
        }
        let config = &self.account.config;
        let authentication = if config.require_authentication {
            self.auth.check(raw, mail.from_domain()).await
        } else {
            Ok("not checked (email.require_authentication = false)".to_owned())
        };
        let decision = match &authentication {
            Ok(_) => config.senders.decide(&mail.from),
            // Unauthenticated: whoever the From says, this is someone unknown.
            Err(_) => steward_events::SenderPolicy {
                unknown: config.senders.unknown,
                ..Default::default()
            }
            .decide(&mail.from),
        };
        let (authenticated_by, how) = match &authentication {
            Ok(how) => (how.clone(), format!("authenticated: {how}")),
            Err(why) => ("none".to_owned(), format!("NOT authenticated: {why}")),
        };
        match decision {
            SenderDecision::Reject => {
                let reason = match &authentication {
                    Ok(_) => format!(
                        "{} is not a known sender (email.unknown_senders = \"reject\")",
                        mail.from
                    ),
                    Err(why) => format!(
                        "the sender could not be authenticated ({why}) and email.unknown_senders = \"reject\""
                    ),
                };
                let mut event =
                    self.event(&mail, &authenticated_by, how, Trust::Untrusted, Vec::new());
                event.dedupe_key = Some(key);
                info!(uid, from = %mail.from, %reason, "email rejected");
                self.cx.reject(event, reason).await?;
            }
            SenderDecision::Accept(trust) => {
                if trust == Trust::Owner
                    && let Some(outcome) = self.commands.answer(&mail).await
                {
                    let mut event = self.event(&mail, &authenticated_by, how, trust, Vec::new());
                    event.dedupe_key = Some(key);
                    self.cx
                        .record_terminal(event, EventState::Handled { outcome })
                        .await?;
                    return Ok(());
                }
                let saved = self.save_attachments(&mail).await;
                let mut event = self.event(&mail, &authenticated_by, how, trust, saved);
                event.dedupe_key = Some(key);
                info!(uid, from = %mail.from, trust = ?trust, "email received");
                self.cx.submit(event).await?;
            }
        }
        Ok(())
    }

    fn event(
        &self,
        mail: &ParsedMail,
        authenticated_by: &str,
        how: String,
        trust: Trust,
        attachments: Vec<SavedAttachment>,
    ) -> Event {
        let text = render(mail, &how, &attachments);
        let mut event = self.base_event(
            &mail.from,
            authenticated_by,
            trust,
            Payload::Email(Box::new(EmailMessage {
                message_id: mail.message_id.clone(),
                from: mail.from.clone(),
                to: mail.to.clone(),
                subject: mail.subject.clone(),
                reply_references: mail.reply_references(),
                authentication: how,
                attachments,
                text,
            })),
        );
        event.thread = Some(mail.thread());
        event
    }

    /// Writes the attachments under `attachments_dir/<message hash>/`; a failure is noted
    /// in the listing, not fatal.
    async fn save_attachments(&self, mail: &ParsedMail) -> Vec<SavedAttachment> {
        if mail.attachments.is_empty() {
            return Vec::new();
        }
        let dir = self
            .attachments_dir
            .join(parse::content_id(mail.message_id.as_bytes()));
        let created = tokio::fs::create_dir_all(&dir).await;
        let mut saved = Vec::new();
        for attachment in &mail.attachments {
            let mut name = attachment.name.clone();
            let mut n = 1;
            while saved.iter().any(|s: &SavedAttachment| s.name == name) {
                n += 1;
                name = format!("{n}-{}", attachment.name);
            }
            let path = dir.join(&name);
            let written = match &created {
                Ok(()) => tokio::fs::write(&path, &attachment.contents)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = &written {
                warn!(path = %path.display(), error = %e, "could not save an email attachment");
            }
            saved.push(SavedAttachment {
                name,
                content_type: attachment.content_type.clone(),
                bytes: attachment.contents.len() as u64,
                path: written.ok().map(|()| path.display().to_string()),
            });
        }
        saved
    }
}

/// The email as the brain reads it.
fn render(mail: &ParsedMail, how: &str, attachments: &[SavedAttachment]) -> String {
    let from = match &mail.from_name {
        Some(name) => format!("{name} <{}>", mail.from),
        None => mail.from.clone(),
    };
    let mut text = format!("Email from {from} ({how})\n");
    if !mail.to.is_empty() {
        text.push_str(&format!("To: {}\n", mail.to.join(", ")));
    }
    text.push_str(&format!("Subject: {}\n", mail.subject));
    if let Some(date) = &mail.date {
        text.push_str(&format!("Date: {date}\n"));
    }
    text.push('\n');
    text.push_str(if mail.body.trim().is_empty() {
        "(empty body)"
    } else {
        mail.body.trim_end()
    });
    if !attachments.is_empty() {
        text.push_str("\n\nAttachments:");
        for a in attachments {
            match &a.path {
                Some(path) => text.push_str(&format!(
                    "\n- {} ({}, {} bytes) saved at {path}",
                    a.name, a.content_type, a.bytes
                )),
                None => text.push_str(&format!(
                    "\n- {} ({}, {} bytes) could not be saved",
                    a.name, a.content_type, a.bytes
                )),
            }
        }
    }
    text
}
