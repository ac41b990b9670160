//! How a channel is doing, as a type: what `steward status`, `/metrics` and `/readyz` branch
//! on, and the one restart policy every channel (and MCP connection) follows.
//!
//! Decisions:
//! - Five states. `Waiting` is the issue's `Backoff` without an error: a channel that waits
//!   for something outside it to appear (a watched path not created yet) is down, but not
//!   failing; it keeps the wording users see today (`waiting for PATH`).
//! - The text shown in `steward status` (`state`) stays what each channel says (`idle`,
//!   `watching /x`, `ready (3 tools)`); a backoff reads `backoff: ERROR (retry in Ns)`.
//! - [`Backoff`]: 1 s, doubling up to the channel's cap, plus up to 25 % jitter so that
//!   channels failing together do not retry in lockstep; a channel resets it once it is up.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelHealth {
    /// Starting or connecting; `detail` says which (`starting`, `connecting`).
    Starting {
        detail: String,
    },
    /// Up and doing its work (`idle`, `listening on 127.0.0.1:8787`, `ready (3 tools)`).
    Ready {
        detail: String,
    },
    /// Down without an error: waiting for something outside to appear.
    Waiting {
        detail: String,
    },
    /// Failed; the next attempt is at `retry_at`.
    Backoff {
        error: String,
        retry_at: DateTime<Utc>,
    },
    Stopped,
}

impl ChannelHealth {
    pub fn starting(detail: impl Into<String>) -> Self {
        Self::Starting {
            detail: detail.into(),
        }
    }

    pub fn ready(detail: impl Into<String>) -> Self {
        Self::Ready {
            detail: detail.into(),
        }
    }

    /// Failed with `error`; retried after `wait`.
    pub fn backoff(error: impl std::fmt::Display, wait: Duration) -> Self {
        Self::Backoff {
            error: error.to_string(),
            retry_at: Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default(),
        }
    }

    /// The state's name on the wire (`health` in `steward status --json`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Starting { .. } => "starting",
            Self::Ready { .. } => "ready",
            Self::Waiting { .. } => "waiting",
            Self::Backoff { .. } => "backoff",
            Self::Stopped => "stopped",
        }
    }

    /// Down: `/readyz` answers 503 and the `steward_channel_up` gauge is 0.
    pub fn is_down(&self) -> bool {
        matches!(self, Self::Waiting { .. } | Self::Backoff { .. })
    }

    /// The text `steward status` shows, as of `now`.
    pub fn text(&self, now: DateTime<Utc>) -> String {
        match self {
            Self::Starting { detail } | Self::Ready { detail } | Self::Waiting { detail } => {
                detail.clone()
            }
            Self::Backoff { error, retry_at } => format!(
                "backoff: {error} (retry in {}s)",
                (*retry_at - now).num_seconds().max(0)
            ),
            Self::Stopped => "stopped".to_owned(),
        }
    }

    pub fn retry_at(&self) -> Option<DateTime<Utc>> {
        match self {
            Self::Backoff { retry_at, .. } => Some(*retry_at),
            _ => None,
        }
    }
}

/// The restart policy (see the module docs).
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

const FIRST_WAIT: Duration = Duration::from_secs(1);

impl Backoff {
    pub fn new(max: Duration) -> Self {
        Self {
            next: FIRST_WAIT,
            max,
        }
    }

    /// Back to the first wait: the channel was up again.
    pub fn reset(&mut self) {
        self.next = FIRST_WAIT;
    }

    /// The wait before the next attempt (with jitter); the one after is twice as long.
    pub fn next_wait(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let jitter = (ulid::Ulid::generate().random() % 250) as u32;
        base + base * jitter / 1000
    }
}

/// Sleeps `wait`; `false` when shutdown came first.
pub async fn pause(wait: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(wait) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_cap_with_a_little_jitter_and_resets() {
        let mut backoff = Backoff::new(Duration::from_secs(5));
        let waits: Vec<Duration> = (0..5).map(|_| backoff.next_wait()).collect();
        let bases = [1, 2, 4, 5, 5];
        for (wait, base) in waits.iter().zip(bases) {
            let base = Duration::from_secs(base);
            assert!(
                *wait >= base && *wait <= base + base / 4,
                "{wait:?} for {base:?}"
            );
        }
        backoff.reset();
        assert!(backoff.next_wait() < Duration::from_millis(1250));
    }

    #[test]
    fn health_reads_as_users_see_it_and_says_when_it_is_down() {
        let now = Utc::now();
        let table = [
            (
                ChannelHealth::starting("connecting"),
                "connecting",
                "starting",
                false,
            ),
            (ChannelHealth::ready("idle"), "idle", "ready", false),
            (
                ChannelHealth::Waiting {
                    detail: "waiting for /srv/in".into(),
                },
                "waiting for /srv/in",
                "waiting",
                true,
            ),
            (
                ChannelHealth::Backoff {
                    error: "login refused".into(),
                    retry_at: now + chrono::Duration::seconds(8),
                },
                "backoff: login refused (retry in 8s)",
                "backoff",
                true,
            ),
            (ChannelHealth::Stopped, "stopped", "stopped", false),
        ];
        for (health, text, kind, down) in table {
            assert_eq!(health.text(now), text);
            assert_eq!(health.kind(), kind);
            assert_eq!(health.is_down(), down, "{kind}");
        }
    }
}
