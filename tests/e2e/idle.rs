//! An idle daemon leaves the disk alone: once what it wrote is durable, it does not fsync
//! again until it writes again. Before, sled's background flusher fsynced its file every
//! second whether or not anything had been written (86,400 a day on an idle daemon: a
//! disk kept from sleeping, an SD card worn for nothing). Watched with `strace`.

use std::process::Command;
use std::time::Duration;

use crate::support::TestDaemon;

#[cfg_attr(not(strace), ignore = "needs strace (apt-get install strace)")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_daemon_does_not_fsync() {
    let mut daemon = TestDaemon::start();
    // Something written, so that there is something the flusher made durable once.
    daemon.send("hello", None).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pid = daemon.child.as_ref().unwrap().id().to_string();
    let trace = tempfile::NamedTempFile::new().unwrap();
    let output = Command::new("timeout")
        .args(["--signal=INT", "6", "strace", "-f", "-qq", "-y"])
        .args(["-e", "trace=fsync,fdatasync,sync_file_range,syncfs,sync"])
        .arg("-o")
        .arg(trace.path())
        .args(["-p", &pid])
        .output()
        .unwrap();
    // `timeout` ends strace with SIGINT, which detaches it; its status is timeout's 124.
    assert_eq!(output.status.code(), Some(124), "{output:?}");
    let calls = std::fs::read_to_string(trace.path()).unwrap();
    let syncs: Vec<&str> = calls
        .lines()
        .filter(|l| !l.contains("+++") && !l.contains("---"))
        .collect();
    assert!(syncs.is_empty(), "an idle daemon synced: {syncs:#?}");
    assert!(
        daemon.terminate().success(),
        "still running after the trace"
    );
}
