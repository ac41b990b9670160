//! What the data dir keeps, and for how long — the reason it stays bounded over months.
//!
//! One task purges, soon after start and then periodically:
//! - the inbox: settled events and dedupe keys older than `inbox.dedupe_retention_days`
//!   (pending events never go);
//! - the action ledger and answered confirmation requests older than
//!   `tools.ledger_retention_days` (in-flight actions never go);
//! - trajectory items older than `trajectory.retention_days`, when set (the newest summary
//!   and the last step stay). Unset by default: the trajectory is the assistant's record;
//! - owner messages older than `owner.outbox_retention_days` (the newest stays);
//! - model calls' usage records older than `usage.retention_days`.
//!
//! The period is a quarter of the shortest retention, between 15 s and one hour, so that
//! nothing outlives its retention by more than a quarter of it. The inbox and main
//! trajectory purges read only what they remove (with sled, reading a page keeps it in
//! memory, so a purge that read everything would grow the daemon with its store — measured
//! by the soak benchmark, `--bench soak`); side lanes (short), the ledger and the
//! confirmation requests (a few records per model turn) are read whole. Dedupe keys go with their events; a sweep over all of them
//! runs once at start for keys a crash left behind. A failed purge is logged and tried
//! again at the next period: it never stops the daemon.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use steward_config::Config;
use steward_tools::confirm::PendingStore;
use steward_tools::ledger::Ledger;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::owner::outbox::Outbox;
use crate::store::{Inbox, Store, purge_trajectories};

/// The stores to purge and their retentions.
#[derive(Debug)]
pub struct Retention {
    pub store: Store,
    pub inbox: Arc<Inbox>,
    pub ledger: Option<Ledger>,
    pub pending: PendingStore,
    pub ledger_retention: Duration,
    pub trajectory_retention: Option<Duration>,
    pub outbox: Outbox,
    pub outbox_retention: Duration,
    pub usage: Arc<crate::usage::UsageLedger>,
    pub usage_retention: Duration,
}

const FIRST_PURGE_AFTER: Duration = Duration::from_secs(5);

impl Retention {
    pub fn new(
        config: &Config,
        store: Store,
        inbox: Arc<Inbox>,
        ledger: Option<Ledger>,
        pending: PendingStore,
        outbox: Outbox,
        usage: Arc<crate::usage::UsageLedger>,
    ) -> Self {
        Self {
            store,
            inbox,
            ledger,
            pending,
            ledger_retention: config.tools.ledger_retention,
            trajectory_retention: config.trajectory.retention,
            outbox,
            outbox_retention: config.owner.outbox_retention,
            usage,
            usage_retention: config.usage.retention,
        }
    }

    pub async fn run(self, shutdown: CancellationToken) {
        let period = purge_period(
            [
                Some(self.inbox.retention()),
                Some(self.ledger_retention),
                self.trajectory_retention,
                Some(self.outbox_retention),
            ]
            .into_iter()
            .flatten(),
        );
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + FIRST_PURGE_AFTER, period);
        let mut first = true;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            if std::mem::take(&mut first) {
                report(
                    "inbox: dedupe keys left behind",
                    self.inbox.sweep_expired_keys(Utc::now()),
                );
            }
            self.purge_once();
        }
    }

    /// One purge of every store; failures are logged, never fatal.
    fn purge_once(&self) {
        report("inbox: settled events", self.inbox.purge(Utc::now()));
        if let Some(ledger) = &self.ledger {
            report(
                "ledger: settled actions",
                ledger.purge(self.ledger_retention),
            );
        }
        report(
            "answered confirmation requests",
            self.pending.purge(self.ledger_retention),
        );
        if let Some(retention) = self.trajectory_retention {
            let cutoff = Utc::now() - chrono::Duration::from_std(retention).unwrap_or_default();
            report("trajectory: items", purge_trajectories(&self.store, cutoff));
        }
        let cutoff =
            Utc::now() - chrono::Duration::from_std(self.outbox_retention).unwrap_or_default();
        report("owner outbox: messages", self.outbox.purge(cutoff));
        let cutoff =
            Utc::now() - chrono::Duration::from_std(self.usage_retention).unwrap_or_default();
        report("usage: model calls", self.usage.purge(cutoff));
    }
}

/// Logs what one purge removed, or why it failed (it runs again at the next period).
fn report<E: std::fmt::Display>(what: &str, result: Result<usize, E>) {
    match result {
        Ok(0) => {}
        Ok(purged) => info!(purged, "{what} past the retention removed"),
        Err(e) => warn!(error = %e, "{what}: purge failed; trying again later"),
    }
}

/// A quarter of the shortest retention, at least 15 s and at most an hour.
fn purge_period(retentions: impl IntoIterator<Item = Duration>) -> Duration {
    const MIN: Duration = Duration::from_secs(15);
    const MAX: Duration = Duration::from_secs(3600);
    retentions
        .into_iter()
        .map(|r| r / 4)
        .min()
        .unwrap_or(MAX)
        .clamp(MIN, MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_is_a_quarter_of_the_shortest_retention_within_bounds() {
        let days = |d: u64| Duration::from_secs(d * 86_400);
        let table: &[(&[Duration], Duration)] = &[
            (&[], Duration::from_secs(3600)),
            (&[days(30), days(7)], Duration::from_secs(3600)),
            (
                &[days(30), Duration::from_secs(2 * 3600)],
                Duration::from_secs(1800),
            ),
            (&[Duration::from_secs(120)], Duration::from_secs(30)),
            (&[Duration::from_secs(60), days(1)], Duration::from_secs(15)),
        ];
        for (retentions, expected) in table {
            assert_eq!(
                purge_period(retentions.iter().copied()),
                *expected,
                "{retentions:?}"
            );
        }
    }
}
