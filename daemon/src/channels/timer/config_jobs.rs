//! The config file's `[[cron]]` jobs are reconciled with the store after READY, not before it.
//!
//! Checking them stays before READY: every schedule and zone is parsed while the daemon
//! starts, and a bad one still stops it with exit 78 naming `cron[i].schedule` or
//! `cron[i].tz`. Reconciling them with the store (`super::file_jobs`: each job's moment
//! read from the baseline, the jobs laid out in memory, the baseline written when it
//! changed) is work nothing needs before the timer runs — when each job was a record of its
//! own, 10,000 were ~100 ms of sled inserts on a first start. So the checked jobs are kept as
//! [`PendingConfigJobs`] and reconciled on a blocking thread once READY=1 is sent (as MCP
//! servers finish their start after it); the timer, `steward cron …`, the `cron_*` tools and a
//! reload wait on [`JobsSettled`] first, so none of them sees the store half-reconciled. A
//! write that fails stops the daemon as any storage fault does, and the waiters get
//! [`NotSettled`] instead of waiting for ever.

use tokio::sync::watch;

use super::job_store::JobStore;
use super::jobs::JobSpec;
use crate::store::StoreError;

/// Whether the config's jobs are in the store yet: cloned to everything that reads or
/// changes jobs.
#[derive(Clone, Debug)]
pub struct JobsSettled(watch::Receiver<bool>);

#[derive(Debug, thiserror::Error)]
#[error("the config file's jobs could not be written to the store; the daemon is stopping")]
pub struct NotSettled;

impl JobsSettled {
    /// Settled from the start: there is nothing from a config file to write.
    pub fn already() -> Self {
        let (_done, settled) = watch::channel(true);
        Self(settled)
    }

    /// Returns once the config's jobs are in the store; [`NotSettled`] when writing them
    /// failed.
    pub async fn wait(&self) -> Result<(), NotSettled> {
        let mut settled = self.0.clone();
        if *settled.borrow_and_update() {
            return Ok(());
        }
        settled
            .wait_for(|done| *done)
            .await
            .map(drop)
            .map_err(|_| NotSettled)
    }
}

/// The config's jobs are checked and waiting to be reconciled into the store.
#[derive(Debug)]
pub struct PendingConfigJobs {
    done: watch::Sender<bool>,
}

impl PendingConfigJobs {
    /// The reconciliation to come, and what waits for it.
    pub fn new() -> (Self, JobsSettled) {
        let (done, settled) = watch::channel(false);
        (Self { done }, JobsSettled(settled))
    }

    /// Reconciles the config's jobs into `jobs` (blocking: sled writes) and lets the
    /// waiters go on; returns how many jobs the config has. On an error the waiters get
    /// [`NotSettled`].
    pub fn settle(self, jobs: &JobStore, specs: Vec<JobSpec>) -> Result<usize, StoreError> {
        let count = specs.len();
        jobs.reconcile(specs, chrono::Utc::now())?;
        self.done.send_replace(true);
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn spec(name: &str) -> JobSpec {
        JobSpec {
            name: name.into(),
            schedule: "0 9 * * *".into(),
            zone: "UTC".into(),
            text: format!("{name} runs"),
            action: None,
            urgency: steward_events::Urgency::Parallel,
            missed: Default::default(),
            max_lateness_secs: crate::channels::timer::jobs::DEFAULT_MAX_LATENESS_SECS,
            enabled: true,
        }
    }

    /// `steward cron list` and the `cron_*` tools go through the scheduler: a list asked
    /// for while the config's jobs are being written shows all of them, never a part.
    #[tokio::test]
    async fn the_scheduler_answers_once_the_jobs_are_in_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path()).unwrap();
        let inbox = std::sync::Arc::new(
            crate::store::Inbox::open(store.clone(), 100, Duration::from_secs(3600)).unwrap(),
        );
        let (pending, settled) = PendingConfigJobs::new();
        let scheduler = super::super::control::Scheduler {
            jobs: JobStore::open(&store).unwrap(),
            submitter: crate::channels::Submitter::new(inbox, Vec::new()),
            changed: Default::default(),
            default_zone: "UTC".into(),
            settled,
        };
        let listing = tokio::spawn({
            let scheduler = scheduler.clone();
            async move { scheduler.list().await.unwrap().len() }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !listing.is_finished(),
            "a list was answered before the jobs were written"
        );
        assert_eq!(
            pending
                .settle(&scheduler.jobs, vec![spec("a"), spec("b")])
                .unwrap(),
            2
        );
        assert_eq!(listing.await.unwrap(), 2, "the list shows every config job");
        scheduler.settled.wait().await.unwrap();
    }

    #[tokio::test]
    async fn waiters_are_told_when_the_jobs_will_never_be_written() {
        let (pending, settled) = PendingConfigJobs::new();
        drop(pending);
        assert!(settled.wait().await.is_err());
        JobsSettled::already().wait().await.unwrap();
    }
}
