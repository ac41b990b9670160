//! After a crash: an `email_send` / `email_reply` whose outcome is unknown (the daemon died
//! between claiming the action and recording its result) is looked up in the Sent mailbox
//! by the Message-ID it was given, which derives from its ledger key. Found: the action is
//! settled `completed` (and its confirmation request too) — it is never sent again. Not
//! found: it stays `unknown` (it may have left before the copy was filed) and the owner is
//! told; nothing is resent. Each outcome is told to the trajectory once.

use std::time::Duration;

use serde_json::json;
use steward_events::{Event, Payload, Sender, Source, ToolOutcome, Trust};
use steward_tools::ToolPipeline;
use steward_tools::confirm::{PendingState, PendingStore};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::outbound::Mailer;
use crate::store::Inbox;

const TOOLS: [&str; 2] = ["email_send", "email_reply"];
const ATTEMPTS: u32 = 20;
const RETRY: Duration = Duration::from_secs(15);

/// Settles unknown email actions; retries while the mailbox cannot be reached.
pub async fn run(
    pipeline: ToolPipeline,
    pending: PendingStore,
    mailer: Mailer,
    inbox: std::sync::Arc<Inbox>,
    shutdown: CancellationToken,
) {
    let Some(ledger) = pipeline.ledger() else {
        return;
    };
    for attempt in 1..=ATTEMPTS {
        let unknown = match ledger.unknown() {
            Ok(entries) => entries
                .into_iter()
                .filter(|e| TOOLS.contains(&e.tool.as_str()))
                .collect::<Vec<_>>(),
            Err(e) => {
                warn!(error = %e, "email reconciliation: cannot read the ledger");
                return;
            }
        };
        let mut unreachable = false;
        for entry in unknown {
            let message_id = mailer.message_id_for(&entry.key);
            let text = match mailer.find_sent(&message_id).await {
                Ok(true) => {
                    let result = ToolOutcome::ok(json!({
                        "sent": true,
                        "message_id": message_id,
                        "reconciled": "found in the Sent mailbox after a restart",
                    }));
                    if let Err(e) = ledger.settle_unknown(&entry.key, &result) {
                        warn!(error = %e, "email reconciliation: cannot update the ledger");
                        continue;
                    }
                    settle_pending(&pending, &entry.key, &result);
                    info!(key = %entry.key, %message_id, "email reconciliation: found in Sent; settled as completed");
                    format!(
                        "The interrupted `{}` (ledger key {}) was found in the Sent mailbox as <{message_id}>: it was sent, once. It is recorded as completed.",
                        entry.tool, entry.key
                    )
                }
                Ok(false) => format!(
                    "The interrupted `{}` (ledger key {}) is not in the Sent mailbox (<{message_id}>): it may not have been sent, or it was sent but not filed. It stays unknown and is not retried.",
                    entry.tool, entry.key
                ),
                Err(e) => {
                    warn!(error = %format!("{e:#}"), "email reconciliation: cannot search Sent; trying again later");
                    unreachable = true;
                    break;
                }
            };
            tell(&inbox, &entry.key, text).await;
        }
        if !unreachable {
            return;
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(RETRY) => {}
        }
        if attempt == ATTEMPTS {
            warn!("email reconciliation: gave up for this run; unknown actions stay unknown");
        }
    }
}

fn settle_pending(pending: &PendingStore, key: &str, result: &ToolOutcome) {
    let Ok(actions) = pending.list() else { return };
    for action in actions
        .into_iter()
        .filter(|a| a.key == key && a.state == PendingState::Unknown)
    {
        let _ = pending.transition(&action.id, PendingState::Unknown, |a| {
            a.state = PendingState::Completed;
            a.state_reason = Some("found in the Sent mailbox after a restart".into());
            a.result = Some(result.clone());
        });
    }
}

async fn tell(inbox: &Inbox, key: &str, text: String) {
    let mut event = Event::new(
        Source::System,
        "system:email",
        Sender {
            identity: "steward".into(),
            authenticated_by: "daemon".into(),
        },
        Trust::Owner,
        Payload::Notice { text },
    );
    event.dedupe_key = Some(format!("email-reconciled:{key}"));
    if let Err(e) = inbox.submit(event).await {
        warn!(error = %e, "email reconciliation: cannot record the outcome");
    }
}
