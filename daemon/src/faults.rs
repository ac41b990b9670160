//! Named fault points, for the crash and watchdog tests: with
//! `STEWARD_FAILPOINTS=name[:n][:hang],…` in the environment the process sends itself
//! SIGKILL — no cleanup, no flush, exactly what `kill -9` leaves — the n-th time
//! (default: first) it reaches `point(name)`; with `:hang` the calling thread stops there
//! for good instead (a wedged loop, for the watchdog). This is how a test puts a crash
//! exactly between two steps that follow each other within microseconds (SMTP accepted /
//! Sent copy filed / ledger updated). Without the variable a point costs one atomic load.

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

/// Ends the process the way `kill -9` does. Not `abort()`: SIGABRT dumps core where the
/// machine allows it, and a slow or wedged core handler (a piped `core_pattern`) keeps the
/// process — and its sockets — alive for as long as it takes, which is not a crash.
fn kill_self() -> ! {
    let me = rustix::process::getpid();
    let _ = rustix::process::kill_process(me, rustix::process::Signal::KILL);
    // SIGKILL cannot be caught; should the call itself fail, end without cleanup anyway.
    std::process::abort()
}

/// Kills the process (or hangs) here when the point is armed and its count is reached.
pub fn point(name: &str) {
    for armed in armed() {
        if armed.name == name && armed.seen.fetch_add(1, Ordering::SeqCst) + 1 == armed.nth {
            if armed.hang {
                eprintln!("failpoint {name} reached: this thread hangs here");
                loop {
                    std::thread::park();
                }
            }
            eprintln!("failpoint {name} reached: killing this process");
            kill_self();
        }
    }
}
