//! What a running channel is given: [`ChannelContext`]. It is the channel's one door to the
//! rest of the daemon — the inbox (through [`ChannelContext::submit`], which applies the
//! urgency rules), its own health in the status board, the reply hub the owner's answers and
//! notices go through, the pending confirmations, its shutdown token and a tracker for the
//! tasks it spawns. The `crate::supervisor::Supervisor` makes one per channel start; a
//! channel never builds one.
//!
//! [`ChannelContext::keep_up`] is the one restart policy: it runs a channel's attempts until
//! shutdown, waiting with the [`Backoff`] after each failure, and starting the backoff over
//! once an attempt got the channel up (it said [`ChannelHealth::Ready`]).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use steward_events::{Event, EventState};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, warn};

use super::health::{Backoff, ChannelHealth, pause};
use super::submit::Submitter;
use crate::confirmations::Confirmations;
use crate::replies::ReplyHub;
use crate::status::StatusBoard;
use crate::store::{StoreError, Submitted};

/// Why one attempt of a channel ended, when it should be tried again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Down {
    /// It failed: retried after the backoff's next wait.
    Failed(String),
    /// Something outside is missing (a watched path): shown as waiting and looked at again
    /// after `retry`, without growing the backoff.
    Waiting { detail: String, retry: Duration },
}

/// The parts every channel's context shares (see the module docs).
#[derive(Clone, Debug)]
pub struct Shared {
    pub submitter: Submitter,
    pub status: Arc<StatusBoard>,
    pub replies: ReplyHub,
    pub confirmations: Arc<Confirmations>,
    /// Everything meant for the owner (see [`crate::owner::outbox`]).
    pub outbox: crate::owner::outbox::Outbox,
    /// Every model call's usage, and the caps on it (see [`crate::usage`]).
    pub usage: Arc<crate::usage::UsageLedger>,
    /// Each trajectory's task list.
    pub todos: steward_tools::builtin::TodoLists,
}

#[derive(Clone, Debug)]
pub struct ChannelContext {
    name: Arc<str>,
    shared: Shared,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    /// `true` once the channel reported anything but starting (see [`Settled`]).
    settled: Arc<watch::Sender<bool>>,
    /// Set when the channel says it is ready; [`Self::keep_up`] reads and clears it.
    was_up: Arc<AtomicBool>,
}

impl ChannelContext {
    pub(crate) fn new(
        name: &str,
        shared: Shared,
        shutdown: CancellationToken,
        tasks: TaskTracker,
    ) -> (Self, Settled) {
        let (settled, seen) = watch::channel(false);
        let cx = Self {
            name: name.into(),
            shared,
            shutdown,
            tasks,
            settled: Arc::new(settled),
            was_up: Arc::default(),
        };
        (cx, Settled(seen))
    }

    /// The channel's name in `steward status` (`timer`, `email`, `watch:NAME`, `mcp:NAME`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Classifies `event` by the urgency rules and stores it (see [`Submitter::submit`]).
    pub async fn submit(&self, event: Event) -> Result<Submitted, StoreError> {
        self.shared.submitter.submit(event).await
    }

    /// Records `event` as rejected, with the reason (see [`Submitter::reject`]).
    pub async fn reject(&self, event: Event, reason: String) -> Result<Submitted, StoreError> {
        self.shared.submitter.reject(event, reason).await
    }

    /// Records `event` straight into a terminal `state` (see [`Submitter::record_terminal`]).
    pub async fn record_terminal(
        &self,
        event: Event,
        state: EventState,
    ) -> Result<Submitted, StoreError> {
        self.shared.submitter.record_terminal(event, state).await
    }

    /// The submitter itself, for parts a channel hands it to (the scheduler, the owner API).
    pub fn submitter(&self) -> &Submitter {
        &self.shared.submitter
    }

    /// Says how the channel is doing; `steward status`, `/metrics` and `/readyz` show it.
    pub fn set_health(&self, health: ChannelHealth) {
        if matches!(health, ChannelHealth::Ready { .. }) {
            self.was_up.store(true, Ordering::Relaxed);
        }
        // The board first: whoever waits on `settled` (start-up, before READY=1) must find
        // the new state there.
        let settled = !matches!(health, ChannelHealth::Starting { .. });
        self.shared.status.set_channel(&self.name, health);
        if settled {
            self.settled.send_replace(true);
        }
    }

    pub fn status(&self) -> &Arc<StatusBoard> {
        &self.shared.status
    }

    pub fn replies(&self) -> &ReplyHub {
        &self.shared.replies
    }

    pub fn confirmations(&self) -> &Arc<Confirmations> {
        &self.shared.confirmations
    }

    /// The owner outbox: what a channel that reaches the owner delivers.
    pub fn outbox(&self) -> &crate::owner::outbox::Outbox {
        &self.shared.outbox
    }

    /// Cancelled when the channel is to stop (daemon shutdown, a reload, a deleted watch).
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Runs `task` as part of this channel: stopped with it and waited for when it stops.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(task.instrument(tracing::Span::current()));
    }

    /// The channel's task tracker, for parts that spawn on their own (an MCP connection).
    pub fn tracker(&self) -> &TaskTracker {
        &self.tasks
    }

    /// The one restart policy (see the module docs): runs `attempt` until it returns
    /// `Ok(())` or the channel is stopped, backing off up to `max_wait` between failures.
    pub async fn keep_up<F, Fut>(&self, max_wait: Duration, mut attempt: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), Down>>,
    {
        let mut backoff = Backoff::new(max_wait);
        loop {
            self.was_up.store(false, Ordering::Relaxed);
            let down = tokio::select! {
                () = self.shutdown.cancelled() => return,
                ended = attempt() => match ended {
                    Ok(()) => return,
                    Err(down) => down,
                },
            };
            if self.was_up.load(Ordering::Relaxed) {
                backoff.reset();
            }
            let wait = match down {
                Down::Waiting { detail, retry } => {
                    self.set_health(ChannelHealth::Waiting { detail });
                    retry
                }
                Down::Failed(error) => {
                    let wait = backoff.next_wait();
                    warn!(channel = %self.name, error = %error, retry_secs = wait.as_secs(), "the channel is down; restarting it");
                    self.set_health(ChannelHealth::backoff(&error, wait));
                    wait
                }
            };
            if !pause(wait, &self.shutdown).await {
                return;
            }
        }
    }
}

/// Resolves once a started channel first says something other than "starting" (ready,
/// waiting, failed) or ends: start-up waits on it so that READY=1 comes after every channel
/// knows where it stands.
#[derive(Debug)]
pub struct Settled(watch::Receiver<bool>);

impl Settled {
    /// Waits at most `within`; `false` when the channel had not settled by then.
    pub async fn wait(mut self, within: Duration) -> bool {
        // `Err` from `wait_for` means the channel ended: settled too.
        tokio::time::timeout(within, self.0.wait_for(|settled| *settled))
            .await
            .is_ok()
    }
}

#[cfg(test)]
impl ChannelContext {
    /// A context over a daemon's parts built on a scratch data dir (kept for the test).
    pub(crate) fn for_tests(name: &str) -> Self {
        let dir = tempfile::tempdir().expect("a scratch dir").keep();
        Self::new(
            name,
            tests::shared(&dir),
            CancellationToken::new(),
            TaskTracker::new(),
        )
        .0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The shared parts of a daemon built on the default config in `dir`.
    pub(crate) fn shared(dir: &std::path::Path) -> Shared {
        let workspace = dir.join("workspace");
        std::fs::create_dir_all(&workspace).expect("a workspace");
        let store = crate::store::Store::open(&dir.join("db")).expect("a store");
        crate::core::Core::build(
            &steward_config::Config::default(),
            store,
            dir.to_path_buf(),
            workspace,
            None,
        )
        .expect("the default config builds")
        .shared()
    }
}
