//! Named crash points, for the crash tests: with `STEWARD_FAILPOINTS=name[:n],…` in the
//! environment the process aborts — no cleanup, no flush, as `kill -9` would leave it — the
//! n-th time (default: first) it reaches `point(name)`. This is how a test puts a crash
//! exactly between two steps that follow each other within microseconds (SMTP accepted /
//! Sent copy filed / ledger updated). Without the variable a point costs one atomic load.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

static ARMED: OnceLock<Vec<(String, u32, AtomicU32)>> = OnceLock::new();

fn armed() -> &'static [(String, u32, AtomicU32)] {
    ARMED.get_or_init(|| {
        std::env::var("STEWARD_FAILPOINTS")
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|spec| {
                let (name, nth) = spec.trim().split_once(':').unwrap_or((spec.trim(), "1"));
                (name.to_owned(), nth.parse().unwrap_or(1), AtomicU32::new(0))
            })
            .collect()
    })
}

/// Aborts the process here when the point is armed and its count is reached.
pub fn point(name: &str) {
    for (armed, nth, seen) in armed() {
        if armed == name && seen.fetch_add(1, Ordering::SeqCst) + 1 == *nth {
            eprintln!("failpoint {name} reached: aborting");
            std::process::abort();
        }
    }
}
