//! Helpers the benchmarks share: starting the daemon, percentiles, formatting, and reading a
//! process's memory and CPU time.
#![allow(dead_code)] // each benchmark uses some of these

pub mod model;

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// A `kB` field of /proc/PID/status (`VmRSS:`, `VmHWM:`…), in MB.
pub fn status_mb(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib as f64 / 1024.0
}

/// Waits for `READY=1` on the daemon's notify socket.
pub fn wait_ready(notify: &UnixDatagram) -> std::io::Result<()> {
    let mut buf = [0u8; 4096];
    loop {
        let n = notify.recv(&mut buf)?;
        if String::from_utf8_lossy(&buf[..n])
            .lines()
            .any(|l| l == "READY=1")
        {
            return Ok(());
        }
    }
}

/// CPU time (user + system) a process has used so far.
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // The kernel reports clock ticks; USER_HZ is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

/// `STEWARD_BENCH_RUST_LOG`: the daemon's log filter when a figure needs explaining
/// (default `error`: logging costs time).
fn log_filter() -> String {
    std::env::var("STEWARD_BENCH_RUST_LOG").unwrap_or_else(|_| "error".into())
}

/// `STEWARD_BENCH_DAEMON_LOG=FILE`: where the daemons' logs go, appended (default nowhere).
fn daemon_log() -> Stdio {
    match std::env::var_os("STEWARD_BENCH_DAEMON_LOG") {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_or_else(|_| Stdio::null(), Stdio::from),
        None => Stdio::null(),
    }
}

/// Starts the real binary on `dir` with `config` written to `dir/config.toml` and `env`
/// set; returns once it reported READY=1, with the time that took.
pub fn spawn_daemon(dir: &Path, config: &str, env: &[(&str, &str)]) -> (Child, Duration) {
    std::fs::write(dir.join("config.toml"), config).unwrap();
    let notify_path = dir.join("notify.sock");
    let _ = std::fs::remove_file(&notify_path);
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let started = tokio::time::Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_steward"))
        .arg("--data-dir")
        .arg(dir)
        .arg("--config")
        .arg(dir.join("config.toml"))
        .arg("run")
        .env("NOTIFY_SOCKET", &notify_path)
        .env("RUST_LOG", log_filter())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(daemon_log())
        .spawn()
        .unwrap();
    wait_ready(&notify).expect("READY=1");
    (child, started.elapsed())
}
