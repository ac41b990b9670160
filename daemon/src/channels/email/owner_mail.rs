//! Owner messages by mail (`owner.email_after_secs`): a message of the owner outbox that no
//! channel delivered within that time is mailed to the owner (the first plain address of
//! `email.owners`), once, and recorded delivered on `email` — so the next chat does not
//! show it as new.
//!
//! Decided here:
//! - Messages that come from an email turn are left to the email channel's own answers in
//!   their thread (its requests for confirmation carry the token a reply needs).
//! - Sent only after the SMTP server accepted it is it recorded delivered; a crash in
//!   between sends it again with the same Message-ID (`outbox-ID.steward@DOMAIN`), which
//!   mail clients show once.
//! - Only the kinds `[owner.deliver]` routes to `email` are mailed.
//! - The outbox is looked at every second from the oldest message that may still be owed.

use std::time::Duration;

use chrono::Utc;
use steward_events::Source;
use tracing::{info, warn};

use super::outbound::{Mailer, Outgoing};
use crate::channels::context::ChannelContext;
use crate::owner::outbox::OwnerMessage;

/// The outbox's name for deliveries by mail.
const EMAIL: &str = "email";
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Mails what waited longer than `after` until the channel stops.
pub async fn run(mailer: Mailer, owner: String, after: Duration, cx: ChannelContext) {
    // Every message before this id was mailed, delivered elsewhere, or is not owed.
    let mut from = 0;
    loop {
        tokio::select! {
            () = cx.shutdown().cancelled() => return,
            () = tokio::time::sleep(LOOK_EVERY) => {}
        }
        let waiting = match cx.outbox().after(from) {
            Ok(waiting) => waiting,
            Err(e) => {
                warn!(error = %e, "cannot read the owner outbox");
                continue;
            }
        };
        for message in waiting {
            if message.is_delivered()
                || !cx.outbox().routes(EMAIL, &message)
                || from_email(&cx, &message)
            {
                from = from.max(message.id);
                continue;
            }
            let waited = (Utc::now() - message.at).to_std().unwrap_or_default();
            if waited < after {
                break;
            }
            match mailer.send(&mail_of(&mailer, &owner, &message)).await {
                Ok(()) => {
                    info!(message_id = message.id, to = %owner, "owner message mailed");
                    if let Err(e) = cx.outbox().delivered(message.id, EMAIL).await {
                        warn!(error = %e, "could not record a delivery by mail");
                    }
                    from = from.max(message.id);
                }
                Err(e) => {
                    warn!(error = %format!("{e:#}"), "could not mail an owner message; trying again");
                    break;
                }
            }
        }
    }
}

/// Whether the message answers or came from an email turn.
fn from_email(cx: &ChannelContext, message: &OwnerMessage) -> bool {
    message.origin.is_some_and(|origin| {
        matches!(cx.submitter().inbox().get(origin), Ok(Some(record)) if record.event.source == Source::Email)
    })
}

/// The mail of one owner message.
fn mail_of(mailer: &Mailer, owner: &str, message: &OwnerMessage) -> Outgoing {
    let first_line = message.text.lines().next().unwrap_or_default();
    let subject: String = first_line.chars().take(70).collect();
    Outgoing {
        message_id: mailer.message_id_for(&format!("outbox-{}", message.id)),
        to: vec![owner.to_owned()],
        subject: format!("Steward ({}): {subject}", message.kind.as_str()),
        body: message.text.clone(),
        ..Default::default()
    }
}
