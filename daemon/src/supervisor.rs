//! The supervisor: the one place that spawns channels (the socket, HTTP, email, the timer,
//! each file watch, each MCP server), tracks their tasks and stops them — one at a time (a
//! reload restarts channel N with its new config; a deleted watch stops) or all at shutdown.
//!
//! A channel is `run(config, cx)`: an async function that gets its own checked config and a
//! [`ChannelContext`], and returns when its context's shutdown is cancelled. Restarting after
//! a failure happens inside, through [`ChannelContext::keep_up`], the one backoff policy.
//! Each started channel gets a child of the daemon's shutdown token and a tracker of its own,
//! so stopping one waits for exactly its tasks (bounded by `daemon.shutdown_grace_secs`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, warn};

use crate::channels::ChannelHealth;
use crate::channels::context::{ChannelContext, Settled, Shared};

#[derive(Clone, Debug)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shared: Shared,
    shutdown: CancellationToken,
    /// Waits for every channel's tracker: what shutdown drains.
    all: TaskTracker,
    running: Mutex<BTreeMap<String, Slot>>,
    grace: Duration,
}

/// One started channel: its stop token and its tasks.
#[derive(Debug)]
struct Slot {
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl Supervisor {
    /// A supervisor whose channels stop with `shutdown`; stopping one channel waits `grace`.
    pub fn new(shared: Shared, shutdown: &CancellationToken, grace: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                shared,
                shutdown: shutdown.clone(),
                all: TaskTracker::new(),
                running: Mutex::new(BTreeMap::new()),
                grace,
            }),
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Slot>> {
        self.inner.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts channel `name` as `run(cx)`; a channel of that name still running is told to
    /// stop first (not waited for). The returned [`Settled`] says when it knows where it
    /// stands.
    pub fn start<F, Fut>(&self, name: &str, run: F) -> Settled
    where
        F: FnOnce(ChannelContext) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let stop = self.inner.shutdown.child_token();
        let tasks = TaskTracker::new();
        let (cx, settled) =
            ChannelContext::new(name, self.inner.shared.clone(), stop.clone(), tasks.clone());
        self.inner
            .shared
            .status
            .set_channel(name, ChannelHealth::starting("starting"));
        // Every log line of the channel, its own tasks' included, names it.
        tasks.spawn(run(cx).instrument(tracing::info_span!("channel", channel = name)));
        // Closed now so that waiting ends once its tasks are done; a closed tracker still
        // takes the tasks the channel spawns later.
        tasks.close();
        let waited = tasks.clone();
        self.inner.all.spawn(async move { waited.wait().await });
        if let Some(previous) = self.running().insert(name.to_owned(), Slot { stop, tasks }) {
            previous.stop.cancel();
        }
        settled
    }

    /// Tells channel `name` to stop and forgets it, without waiting (its tasks still count
    /// for shutdown); `steward status` no longer lists it.
    pub fn cancel(&self, name: &str) {
        if let Some(slot) = self.running().remove(name) {
            slot.stop.cancel();
        }
        self.inner.shared.status.remove_channel(name);
    }

    /// Stops channel `name` and waits for its tasks, at most the grace period.
    pub async fn stop(&self, name: &str) {
        let slot = self.running().remove(name);
        if let Some(slot) = slot {
            slot.stop.cancel();
            if tokio::time::timeout(self.inner.grace, slot.tasks.wait())
                .await
                .is_err()
            {
                warn!(
                    channel = name,
                    grace_secs = self.inner.grace.as_secs(),
                    "the channel did not stop within the grace period"
                );
            }
        }
        self.inner.shared.status.remove_channel(name);
    }

    /// Waits for every channel to end once the daemon's shutdown token is cancelled (the
    /// caller bounds the wait).
    pub async fn drained(&self) {
        self.inner.all.close();
        self.inner.all.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::context::Down;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_failing_channel_is_restarted_with_backoff_and_stopping_it_waits_for_its_tasks() {
        let scratch = tempfile::tempdir().unwrap();
        let shared = crate::channels::context::tests::shared(scratch.path());
        let shutdown = CancellationToken::new();
        let supervisor = Supervisor::new(shared.clone(), &shutdown, Duration::from_secs(5));
        let attempts = Arc::new(AtomicUsize::new(0));
        let counted = attempts.clone();
        let settled = supervisor.start("flaky", move |cx| async move {
            cx.keep_up(Duration::from_millis(50), || {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Err(Down::Failed("refused".into())) }
            })
            .await;
        });
        assert!(
            settled.wait(Duration::from_secs(5)).await,
            "a failure settles"
        );
        let report = shared.status.report();
        let flaky = report
            .channels
            .iter()
            .find(|c| c.name == "flaky")
            .expect("listed");
        assert_eq!(flaky.health, "backoff");
        assert!(flaky.state.contains("refused"), "{}", flaky.state);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            attempts.load(Ordering::SeqCst) >= 2,
            "retried after its wait"
        );

        supervisor.stop("flaky").await;
        let after = attempts.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(attempts.load(Ordering::SeqCst), after, "stopped for good");
        assert!(
            shared
                .status
                .report()
                .channels
                .iter()
                .all(|c| c.name != "flaky"),
            "a stopped channel leaves the status"
        );
    }

    #[tokio::test]
    async fn shutdown_drains_every_channel_and_the_tasks_they_spawned() {
        let scratch = tempfile::tempdir().unwrap();
        let shared = crate::channels::context::tests::shared(scratch.path());
        let shutdown = CancellationToken::new();
        let supervisor = Supervisor::new(shared, &shutdown, Duration::from_secs(5));
        let finished = Arc::new(AtomicUsize::new(0));
        for name in ["a", "b"] {
            let finished = finished.clone();
            supervisor.start(name, move |cx| async move {
                let helper = cx.clone();
                let done = finished.clone();
                cx.spawn(async move {
                    helper.shutdown().cancelled().await;
                    done.fetch_add(1, Ordering::SeqCst);
                });
                cx.set_health(ChannelHealth::ready("idle"));
                cx.shutdown().cancelled().await;
                finished.fetch_add(1, Ordering::SeqCst);
            });
        }
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), supervisor.drained())
            .await
            .expect("drained");
        assert_eq!(finished.load(Ordering::SeqCst), 4);
    }
}
