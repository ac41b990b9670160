//! "typing…" in a chat while a step works on a message from it (which chats are busy is
//! [`crate::channels::busy`]'s).
//!
//! Decided here: Telegram shows a chat action for five seconds (or until the bot's next
//! message), so it is sent again every [`RENEW`] while a chat is busy, and simply not renewed
//! once it is not: there is no call that clears it, and a crash lets it lapse.

use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::api::BotApi;
use crate::channels::busy::Busy;
use crate::replies::{Announcement, ReplyHub};

const RENEW: Duration = Duration::from_secs(4);

/// The chats with messages in work.
pub type Typing = Busy<i64>;

/// Keeps the chat actions going until `stop`.
pub async fn run(typing: Typing, api: BotApi, replies: ReplyHub, stop: CancellationToken) {
    let mut announcements = replies.subscribe();
    let mut renew = tokio::time::interval(RENEW);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = typing.started() => {}
            _ = renew.tick() => {}
            announcement = announcements.recv() => match announcement {
                Ok(Announcement::StepEnded { events, .. }) => {
                    typing.finish(&events);
                    continue;
                }
                Ok(_) | Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            },
        };
        typing.finish(&[]);
        for chat in typing.chats() {
            if let Err(e) = api.send_typing(chat).await {
                debug!(chat, error = %e, "could not send the typing action");
            }
        }
    }
}
