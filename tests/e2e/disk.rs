//! Disk faults: a data dir on a small tmpfs that fills up, and a read-only data dir. The
//! daemon refuses new input with a clear error (socket error, HTTP 503) before the disk is
//! full, keeps what it had, and takes input again once there is room; filled to the last
//! byte by someone else, it may stop on the storage fault instead (sled takes no writes
//! after an I/O error), and after a restart with room again nothing it acknowledged is
//! missing; a read-only data dir is refused at start with the reason.
//!
//! Needs root (mount); `.ci/run` runs as root.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{TestDaemon, send_to};

/// A tmpfs of `megabytes` mounted on a fresh temp dir, unmounted on drop.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(megabytes: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(
            status.success(),
            "mounting a tmpfs needs root (CI runs as root)"
        );
        Self { dir }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the file system of `dir` until less than `leave` bytes are free (something else
/// using up the disk; the daemon's own bookkeeping still has a little room).
fn fill(dir: &std::path::Path, leave: u64) -> std::path::PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let block = vec![0u8; 64 * 1024];
    while fs2::available_space(dir).unwrap() >= leave {
        file.write_all(&block).unwrap();
        file.sync_data().unwrap();
    }
    path
}

/// Fills the file system of `dir` until a write of even one page fails.
fn fill_to_the_last_byte(dir: &std::path::Path) -> std::path::PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    for block in [64 * 1024, 4096, 1] {
        while file.write_all(&vec![0u8; block]).is_ok() {}
    }
    let _ = file.sync_data();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_input_keeps_what_it_had_and_recovers() {
    let disk = SmallDisk::mount(24);
    let data_dir = tempfile::TempDir::new_in(disk.dir.path()).unwrap();
    std::fs::write(data_dir.path().join("config.toml"), "[daemon]\nmin_free_mb = 6\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[[webhook.routes]]\nname = \"ci\"\nauth = \"bearer\"\nsecret_env = \"T\"\n").unwrap();
    let daemon = TestDaemon::start_in_with_env(data_dir, &[("T", "token")]);
    let before = send_to(&daemon.socket(), "before the disk filled", None)
        .await
        .unwrap();

    daemon
        .wait_for_trajectory("the first message handled", |items| {
            crate::support::merged_ids(items).contains(&before)
        })
        .await;
    let filler = fill(disk.dir.path(), 3 * 1024 * 1024);
    // Input is refused with a reason, not lost silently and not a crash.
    let deadline = Instant::now() + Duration::from_secs(20);
    let refusal = loop {
        match send_to(&daemon.socket(), "while full", None).await {
            Err(reason) => break reason,
            Ok(_) => assert!(
                Instant::now() < deadline,
                "the daemon kept accepting with a full disk"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(refusal.contains("disk is nearly full"), "{refusal}");
    assert!(refusal.contains("daemon.min_free_mb"), "{refusal}");
    let address = std::fs::read_to_string(daemon.path().join("http.addr")).unwrap();
    let post = reqwest::Client::new()
        .post(format!("http://{address}/hooks/ci"))
        .bearer_auth("token")
        .header("Idempotency-Key", "full-1")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(
        post.status(),
        503,
        "a webhook gets 503 while the disk is full"
    );
    assert!(daemon.child.is_some());
    let status = daemon.status().await;
    eprintln!("status while full: {status:?}");

    // Room again: input is taken, and nothing acknowledged before was lost.
    std::fs::remove_file(filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        if let Ok(id) = send_to(&daemon.socket(), "after", None).await {
            break id;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon did not recover once space returned"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let events = daemon.events().await;
    assert!(events.iter().any(|e| e.id == before), "kept what it had");
    assert!(events.iter().any(|e| e.id == after));
}

/// Something else takes the file system down to its last byte. Input is refused with the
/// reason, or — when sled's own bookkeeping can no longer be written — the daemon stops on
/// the storage fault (non-zero exit, for the service manager to restart; sled takes no
/// writes after an I/O error). Either way, once there is room again (and a restart if it
/// stopped), every input it acknowledged is there and handled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_filled_to_the_last_byte_loses_nothing_acknowledged() {
    let disk = SmallDisk::mount(24);
    let data_dir = tempfile::TempDir::new_in(disk.dir.path()).unwrap();
    std::fs::write(
        data_dir.path().join("config.toml"),
        "[daemon]\nmin_free_mb = 6\n",
    )
    .unwrap();
    let mut daemon = TestDaemon::start_in(data_dir);
    let mut acked = vec![send_to(&daemon.socket(), "before", None).await.unwrap()];
    let filler = fill_to_the_last_byte(disk.dir.path());
    assert_eq!(fs2::available_space(disk.dir.path()).unwrap(), 0);

    let mut refusals = 0;
    for i in 0..30 {
        match send_to(&daemon.socket(), &format!("while full {i}"), None).await {
            Ok(id) => acked.push(id),
            Err(reason) => {
                refusals += 1;
                assert!(
                    reason.contains("disk is nearly full")
                        || reason.contains("No space left")
                        || reason.contains("connect"),
                    "{reason}"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refusals > 0, "a full disk refuses input");
    let stopped = daemon.child.as_mut().unwrap().try_wait().unwrap();
    if let Some(status) = stopped {
        assert!(!status.success(), "a storage fault is a failure exit");
    }

    std::fs::remove_file(filler).unwrap();
    if stopped.is_some() {
        daemon = TestDaemon::start_in(daemon.into_dir());
    }
    let after = send_to(&daemon.socket(), "after", None).await.unwrap();
    acked.push(after);
    daemon
        .wait_for_trajectory("every acknowledged input handled", |items| {
            let merged = crate::support::merged_ids(items);
            acked.iter().all(|id| merged.contains(id))
        })
        .await;
}

#[test]
fn a_read_only_data_dir_is_refused_at_start_with_the_reason() {
    let disk = SmallDisk::mount(16);
    let data = disk.dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("config.toml"), "").unwrap();
    let status = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(disk.dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let output = Command::new(crate::support::BIN)
        .args(crate::support::common_args(&data))
        .arg("run")
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    let stderr = crate::support::stderr(&output);
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(
        stderr.contains(&data.display().to_string()),
        "names the dir: {stderr}"
    );
}
