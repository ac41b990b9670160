//! Named fault points, for the crash and watchdog tests: with
//! `STEWARD_FAILPOINTS=name[:n][:hang],…` in the environment the process aborts — no
//! cleanup, no flush, as `kill -9` would leave it — the n-th time (default: first) it
//! reaches `point(name)`; with `:hang` the calling thread stops there for good instead (a
//! wedged loop, for the watchdog). This is how a test puts a crash exactly between two
//! steps that follow each other within microseconds (SMTP accepted / Sent copy filed /
//! ledger updated). Without the variable a point costs one atomic load.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

struct Armed {
    name: String,
    nth: u32,
    hang: bool,
    seen: AtomicU32,
}

static ARMED: OnceLock<Vec<Armed>> = OnceLock::new();

fn armed() -> &'static [Armed] {
    ARMED.get_or_init(|| {
        std::env::var("STEWARD_FAILPOINTS")
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|spec| {
                let mut parts = spec.trim().split(':');
                let name = parts.next().unwrap_or_default().to_owned();
                let mut nth = 1;
                let mut hang = false;
                for part in parts {
                    match part.parse() {
                        Ok(n) => nth = n,
                        Err(_) => hang = part == "hang",
                    }
                }
                Armed {
                    name,
                    nth,
                    hang,
                    seen: AtomicU32::new(0),
                }
            })
            .collect()
    })
}

/// Aborts (or hangs) here when the point is armed and its count is reached.
pub fn point(name: &str) {
    for armed in armed() {
        if armed.name == name && armed.seen.fetch_add(1, Ordering::SeqCst) + 1 == armed.nth {
            if armed.hang {
                eprintln!("failpoint {name} reached: this thread hangs here");
                loop {
                    std::thread::park();
                }
            }
            eprintln!("failpoint {name} reached: aborting");
            std::process::abort();
        }
    }
}
