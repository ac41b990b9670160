//! The one delivery loop of the chat channels that push the owner outbox (Matrix, Telegram):
//! each keeps its own cursor — every outbox message up to it was delivered there or is not
//! owed there — and hands the loop one message at a time.
//!
//! Decided here:
//! - Order is kept: a message that cannot be delivered now is tried again (after [`RETRY`])
//!   before any later one goes, and the cursor stays before it.
//! - A message already delivered on the channel, or not routed to it (`[owner.deliver]`),
//!   is passed over.
//! - On a channel's first run, the outbox's history is not replayed: the cursor starts at the
//!   newest message then in it.
//! - The loop wakes on every new message, and every [`LOOK_EVERY`] without news (a room or
//!   chat that became reachable meanwhile).

use std::future::Future;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::outbox::{Outbox, OwnerMessage};
use crate::store::StoreError;

const RETRY: Duration = Duration::from_secs(2);
const LOOK_EVERY: Duration = Duration::from_secs(5);

/// A channel that pushes owner messages.
pub trait Push: Sync {
    /// The channel's name in the outbox's deliveries and routing.
    fn channel(&self) -> &'static str;

    /// Every message up to this id was handled; `None` before the channel first ran.
    fn delivered_up_to(&self) -> Result<Option<u64>, StoreError>;

    fn set_delivered_up_to(&self, id: u64) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Delivers one message routed to the channel; `Err` when it should be tried again.
    fn deliver(&self, message: &OwnerMessage) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// Delivers `outbox` through `push` until `stop` (see the module docs).
pub async fn run(push: &impl Push, outbox: &Outbox, stop: CancellationToken) {
    let mut queued = outbox.subscribe();
    let mut from = match start_point(push, outbox).await {
        Ok(from) => from,
        Err(e) => {
            warn!(channel = push.channel(), error = %e, "cannot read where delivery of owner messages stopped");
            return;
        }
    };
    loop {
        let (delivered, failed) = deliver_after(push, outbox, from).await;
        from = delivered;
        if let Some(e) = failed {
            warn!(channel = push.channel(), error = %format!("{e:#}"), "could not deliver an owner message; trying again");
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(RETRY) => continue,
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            news = queued.recv() => if matches!(news, Err(RecvError::Closed)) { return },
            () = tokio::time::sleep(LOOK_EVERY) => {}
        }
    }
}

async fn start_point(push: &impl Push, outbox: &Outbox) -> Result<u64, StoreError> {
    if let Some(from) = push.delivered_up_to()? {
        return Ok(from);
    }
    let newest = outbox.list(Some(1))?.last().map_or(0, |m| m.id);
    push.set_delivered_up_to(newest).await?;
    Ok(newest)
}

/// Delivers every message after `from`: how far it got, and the error that stopped it.
async fn deliver_after(
    push: &impl Push,
    outbox: &Outbox,
    from: u64,
) -> (u64, Option<anyhow::Error>) {
    let waiting = match outbox.after(from) {
        Ok(waiting) => waiting,
        Err(e) => return (from, Some(e.into())),
    };
    let mut done = from;
    for message in waiting {
        if !message.delivered.contains_key(push.channel())
            && outbox.routes(push.channel(), &message)
            && let Err(e) = push.deliver(&message).await
        {
            return (done, Some(e));
        }
        done = message.id;
        if let Err(e) = push.set_delivered_up_to(done).await {
            return (done, Some(e.into()));
        }
    }
    (done, None)
}
