//! Helpers the benchmarks share: percentiles, formatting, and reading a process's memory.

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
