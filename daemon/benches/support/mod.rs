//! Helpers the benchmarks share: percentiles, formatting, and reading a process's memory.
#![allow(dead_code)] // each benchmark uses some of these

use std::os::unix::net::UnixDatagram;
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
