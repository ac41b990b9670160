//! The service manager side: systemd's notify protocol (`READY=1`, `STATUS=` — sent with
//! every watchdog ping, so `systemctl status` stays current —, `WATCHDOG=1`, `RELOADING=1`,
//! `STOPPING=1`). Without `NOTIFY_SOCKET` every call is a no-op. The watchdog is pinged from
//! the dispatcher's own loop ([`Heartbeat::tick`]), so a stuck dispatcher stops pinging and
//! systemd restarts the daemon.

use std::future::pending;

use sd_notify::NotifyState;
use tokio::time::{Interval, MissedTickBehavior};
use tracing::debug;

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        debug!(error = %e, "sd_notify failed");
    }
}

pub fn ready(summary: &str) {
    send(&[NotifyState::Ready, NotifyState::Status(summary)]);
}

pub fn reloading() {
    send(&[NotifyState::Reloading]);
}

pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

/// Watchdog pings at half the interval systemd asked for, if it asked.
#[derive(Debug)]
pub struct Heartbeat(Option<Interval>);

impl Heartbeat {
    pub fn from_env() -> Self {
        Self(sd_notify::watchdog_enabled().map(|period| {
            let mut interval = tokio::time::interval(period / 2);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            interval
        }))
    }

    /// Waits for the next ping time and pings, with the current one-line status; never
    /// returns without a watchdog.
    pub async fn tick(&mut self, summary: impl FnOnce() -> String) {
        match &mut self.0 {
            Some(interval) => {
                interval.tick().await;
                send(&[NotifyState::Watchdog, NotifyState::Status(&summary())]);
            }
            None => pending().await,
        }
    }
}
