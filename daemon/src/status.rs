//! The status board: what `steward status` reports, updated by the parts it describes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::channels::ChannelHealth;
use crate::store::Inbox;
use steward_events::TokenUsage;
use steward_protocol::{BrainState, ChannelStatus, StatusReport, StepStatus};

#[derive(Debug)]
pub struct StatusBoard {
    pid: u32,
    started: Instant,
    data_dir: PathBuf,
    brain: Mutex<String>,
    shell_sandbox: Mutex<String>,
    /// `None` while the model answers; the last error while it does not.
    brain_error: Mutex<Option<String>>,
    inbox: Arc<Inbox>,
    channels: Mutex<BTreeMap<String, ChannelHealth>>,
    step: Mutex<StepStatus>,
    lanes_running: Mutex<usize>,
    /// Tokens of the last model call, and since start.
    usage: Mutex<(TokenUsage, TokenUsage)>,
    /// Tokens of the last finished step (every model call in it), with its number.
    step_usage: Mutex<(u64, TokenUsage)>,
    /// Finished steps: how many, and their total duration in seconds.
    steps_done: Mutex<(u64, f64)>,
    /// Times each channel went into backoff since start.
    restarts: Mutex<BTreeMap<String, u64>>,
    /// What the last reload said: an invalid file, and sections that need a restart.
    config: Mutex<ConfigState>,
}

/// The outcome of the last SIGHUP.
#[derive(Clone, Debug, Default)]
pub struct ConfigState {
    pub error: Option<String>,
    pub restart_needed: Vec<String>,
}

impl StatusBoard {
    pub fn new(data_dir: PathBuf, inbox: Arc<Inbox>) -> Self {
        Self {
            pid: std::process::id(),
            started: Instant::now(),
            data_dir,
            brain: Mutex::new(String::new()),
            shell_sandbox: Mutex::new(String::new()),
            brain_error: Mutex::new(None),
            inbox,
            channels: Mutex::new(BTreeMap::new()),
            step: Mutex::new(StepStatus::Idle),
            lanes_running: Mutex::new(0),
            usage: Mutex::new((TokenUsage::default(), TokenUsage::default())),
            step_usage: Mutex::new((0, TokenUsage::default())),
            steps_done: Mutex::new((0, 0.0)),
            restarts: Mutex::new(BTreeMap::new()),
            config: Mutex::new(ConfigState::default()),
        }
    }

    /// Records what a reload found (see [`ConfigState`]).
    pub fn set_config_state(&self, state: ConfigState) {
        *lock(&self.config) = state;
    }

    pub fn set_shell_sandbox(&self, said: &str) {
        *lock(&self.shell_sandbox) = said.to_owned();
    }

    pub fn set_brain(&self, name: &str) {
        *lock(&self.brain) = name.to_owned();
    }

    /// Records that the model failed; returns true if it was answering until now.
    pub fn brain_degraded(&self, error: &str) -> bool {
        lock(&self.brain_error).replace(error.to_owned()).is_none()
    }

    pub fn brain_ok(&self) {
        *lock(&self.brain_error) = None;
    }

    /// The state of a channel as `steward status` shows it, when there is one (a watch
    /// deleted at run time has none).
    pub fn channel(&self, name: &str) -> Option<String> {
        lock(&self.channels).get(name).map(|h| h.text(Utc::now()))
    }

    /// The channels that are down (waiting or in backoff): name and what they say.
    pub fn channels_down(&self) -> Vec<(String, String)> {
        let now = Utc::now();
        lock(&self.channels)
            .iter()
            .filter(|(_, health)| health.is_down())
            .map(|(name, health)| (name.clone(), health.text(now)))
            .collect()
    }

    /// Every channel and whether it is up, for `/metrics`.
    pub fn channels_up(&self) -> Vec<(String, bool)> {
        lock(&self.channels)
            .iter()
            .map(|(name, health)| (name.clone(), !health.is_down()))
            .collect()
    }

    /// Whether some channel has not yet said where it stands (still `Starting`: logging in,
    /// its first sync or first pass not done): the start is not over while one has not.
    pub fn any_channel_starting(&self) -> bool {
        lock(&self.channels)
            .values()
            .any(|health| matches!(health, ChannelHealth::Starting { .. }))
    }

    pub fn remove_channel(&self, name: &str) {
        lock(&self.channels).remove(name);
    }

    pub fn set_channel(&self, name: &str, health: ChannelHealth) {
        let backoff = matches!(health, ChannelHealth::Backoff { .. });
        let previous = lock(&self.channels).insert(name.to_owned(), health);
        let entered_backoff = backoff && !matches!(previous, Some(ChannelHealth::Backoff { .. }));
        if entered_backoff {
            *lock(&self.restarts).entry(name.to_owned()).or_default() += 1;
        }
    }

    pub fn step_started(&self, step: u64, started_at: DateTime<Utc>) {
        *lock(&self.step) = StepStatus::Running { step, started_at };
    }

    pub fn step_ended(&self) {
        let ended = std::mem::replace(&mut *lock(&self.step), StepStatus::Idle);
        if let StepStatus::Running { started_at, .. } = ended {
            let secs = (Utc::now() - started_at).num_milliseconds().max(0) as f64 / 1000.0;
            let mut done = lock(&self.steps_done);
            done.0 += 1;
            done.1 += secs;
        }
    }

    /// Finished steps since start and their total duration in seconds.
    pub fn steps_done(&self) -> (u64, f64) {
        *lock(&self.steps_done)
    }

    /// Times each channel went into backoff since start.
    pub fn restarts(&self) -> BTreeMap<String, u64> {
        lock(&self.restarts).clone()
    }

    /// Records what a finished step of the main trajectory cost, all calls together.
    pub fn record_step(&self, step: u64, usage: TokenUsage) {
        *lock(&self.step_usage) = (step, usage);
    }

    /// Records the token usage of one model call.
    pub fn record(&self, usage: TokenUsage) {
        let mut counts = lock(&self.usage);
        counts.0 = usage;
        counts.1 += usage;
    }

    pub fn lanes_changed(&self, delta: isize) {
        let mut lanes = lock(&self.lanes_running);
        *lanes = lanes.saturating_add_signed(delta);
    }

    pub fn report(&self) -> StatusReport {
        // One guard: taking this lock twice in one expression would deadlock.
        let usage = *lock(&self.usage);
        let (last_step, step_usage) = *lock(&self.step_usage);
        let brain_error = lock(&self.brain_error).clone();
        let config = lock(&self.config).clone();
        StatusReport {
            version: steward_protocol::VERSION.to_owned(),
            config_error: config.error,
            restart_needed: config.restart_needed,
            // The usage ledger's, filled in by the owner API.
            usage_today: Default::default(),
            todo: Vec::new(),
            pid: self.pid,
            uptime_secs: self.started.elapsed().as_secs(),
            data_dir: self.data_dir.clone(),
            brain: lock(&self.brain).clone(),
            shell_sandbox: lock(&self.shell_sandbox).clone(),
            brain_state: if brain_error.is_some() {
                BrainState::Degraded
            } else {
                BrainState::Ok
            },
            brain_last_error: brain_error,
            channels: lock(&self.channels)
                .iter()
                .map(|(name, health)| ChannelStatus {
                    name: name.clone(),
                    state: health.text(Utc::now()),
                    health: health.kind().to_owned(),
                    retry_at: health.retry_at(),
                })
                .collect(),
            inbox_pending: self.inbox.pending_count(),
            step: lock(&self.step).clone(),
            lanes_running: *lock(&self.lanes_running),
            events_total: self.inbox.events_total(),
            tokens_last_call: usage.0,
            tokens_last_step: step_usage,
            tokens_last_step_number: last_step,
            tokens_total: usage.1,
        }
    }

    /// One line, for `/status` and systemd's STATUS=.
    pub fn summary(&self) -> String {
        let r = self.report();
        let step = match r.step {
            StepStatus::Idle => "idle".to_owned(),
            StepStatus::Running { step, .. } => format!("running step {step}"),
        };
        format!(
            "up {}s, {step}, {} pending, {} events total, {} lanes running, brain {}",
            r.uptime_secs, r.inbox_pending, r.events_total, r.lanes_running, r.brain
        )
    }
}

/// Status is advisory: a poisoned lock still holds a usable value.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_is_over_once_no_channel_is_starting() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(&dir.path().join("db")).unwrap();
        let inbox = Arc::new(Inbox::open(store, 16, std::time::Duration::from_secs(60)).unwrap());
        let board = StatusBoard::new(dir.path().to_owned(), inbox);
        assert!(
            !board.any_channel_starting(),
            "no channel: nothing to wait for"
        );
        board.set_channel("email", ChannelHealth::starting("connecting"));
        board.set_channel("timer", ChannelHealth::starting("starting"));
        assert!(board.any_channel_starting());
        board.set_channel("email", ChannelHealth::ready("idle"));
        assert!(board.any_channel_starting(), "the timer has not said yet");
        // Down counts as having said where it stands: a failed login ends the start too.
        board.set_channel(
            "timer",
            ChannelHealth::backoff("storage", std::time::Duration::from_secs(1)),
        );
        assert!(!board.any_channel_starting());
    }
}
