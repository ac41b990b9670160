//! The shell sandbox over the real binary and kernel, proven with harmless probes only: a fake
//! key under a temp HOME that must stay unreadable, a marker file outside the workspace that
//! must not appear, a listener on 127.0.0.1 that must not be reached, a background child
//! that must not outlive its command. With `tools.shell.sandbox = "none"` the same probes
//! succeed (the positive control: the probes can tell).

use std::net::TcpListener;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{TestDaemon, stdout};

const FAKE_KEY: &str = "-----BEGIN FAKE TEST KEY----- not a real secret";

struct Probes {
    daemon: TestDaemon,
    home: tempfile::TempDir,
}

impl Probes {
    fn start(sandbox: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::start_with_config_at(sandbox, dir, None)
    }

    /// With the config file in `folder` (beside a fake token) instead of the data dir: the
    /// data dir's `config.toml`, which the daemon is started with, links to it.
    fn start_with_config_at(
        sandbox: &str,
        dir: tempfile::TempDir,
        folder: Option<&std::path::Path>,
    ) -> Self {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join(".ssh")).unwrap();
        std::fs::write(home.path().join(".ssh/id_ed25519"), FAKE_KEY).unwrap();
        let config = format!(
            "[tools]\nprofile = \"coding\"\n\n[tools.shell]\nsandbox = \"{sandbox}\"\n# FAKE CONFIG SECRET\n"
        );
        match folder {
            None => std::fs::write(dir.path().join("config.toml"), config).unwrap(),
            Some(folder) => {
                std::fs::write(folder.join("config.toml"), config).unwrap();
                std::fs::write(folder.join("token"), "FAKE TOKEN SECRET").unwrap();
                std::os::unix::fs::symlink(
                    folder.join("config.toml"),
                    dir.path().join("config.toml"),
                )
                .unwrap();
            }
        }
        let home_text = home.path().display().to_string();
        let daemon = TestDaemon::start_in_with_env(dir, &[("HOME", home_text.as_str())]);
        Self { daemon, home }
    }

    /// Runs a shell command through the pipeline, confirming it when it is asked; its
    /// result.
    fn run(&self, command: &str) -> Value {
        self.run_with(json!({ "command": command }))
    }

    fn run_with(&self, args: Value) -> Value {
        let args = args.to_string();
        let output = self
            .daemon
            .cli(&["tools", "call", "shell", "--args", &args, "--json"]);
        let line: Value = serde_json::from_str(stdout(&output).trim())
            .unwrap_or_else(|e| panic!("{e}: {output:?}"));
        if line["outcome"] != "pending" {
            return line["result"].clone();
        }
        let id = line["pending_id"].as_str().unwrap();
        let confirmed = self.daemon.cli(&["confirm", id, "--json"]);
        let row: Value = serde_json::from_str(stdout(&confirmed).trim())
            .unwrap_or_else(|e| panic!("{e}: {confirmed:?}"));
        row["result"]["content"].clone()
    }
}

/// Waits (at most 5 s) for process `pid` to be gone (or a zombie nobody reaped yet).
fn assert_ends_soon(pid: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.contains(") Z ") {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {pid} still runs");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn text(result: &Value) -> String {
    format!(
        "{}{}",
        result["stdout"].as_str().unwrap_or(""),
        result["stderr"].as_str().unwrap_or("")
    )
}

#[test]
fn a_confined_command_cannot_read_secrets_write_outside_or_connect() {
    let probes = Probes::start("landlock");
    // A read-only command the classifier lets run: the kernel stops it at ~/.ssh.
    let searched = probes.run("grep -r 'FAKE TEST KEY' ~");
    assert!(!text(&searched).contains("not a real secret"), "{searched}");
    assert_eq!(searched["sandbox"], "landlock", "{searched}");
    // Asked and confirmed: still confined.
    let marker = probes.home.path().join("marker");
    probes.run(&format!("touch {}", marker.display()));
    assert!(
        !marker.exists(),
        "a write outside the workspace was stopped"
    );
    let inside = probes.run("touch made-in-workspace && ls made-in-workspace");
    assert!(text(&inside).contains("made-in-workspace"), "{inside}");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let connect = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')\""
    );
    let connected = probes.run(&connect);
    assert!(!text(&connected).contains("connected\n"), "{connected}");
    assert!(listener.accept().is_err(), "nothing reached the listener");
}

/// A datagram to a UDP socket the test holds on 127.0.0.1, and a connect (nothing sent) to
/// the daemon's own control socket: what each probe printed, and whether the datagram came.
fn socket_probes(probes: &Probes) -> (String, String, bool) {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let port = udp.local_addr().unwrap().port();
    let sent = probes.run(&format!(
        "python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'probe', ('127.0.0.1', {port})); print('sent')\""
    ));
    let mut buffer = [0u8; 16];
    let arrived = udp
        .recv(&mut buffer)
        .is_ok_and(|n| &buffer[..n] == b"probe");
    let reached = probes.run(&format!(
        "python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('{}'); print('reached')\"",
        probes.daemon.socket().display()
    ));
    (text(&sent), text(&reached), arrived)
}

/// Landlock covers neither UDP nor a connect to a named Unix socket: without the socket
/// filter a confined command could send datagrams out and drive the daemon's control socket.
#[test]
fn a_confined_command_can_neither_send_udp_nor_reach_the_control_socket() {
    let probes = Probes::start("landlock");
    let (sent, reached, arrived) = socket_probes(&probes);
    assert!(!arrived, "no datagram left the sandbox: {sent}");
    assert!(sent.contains("Operation not permitted"), "{sent}");
    assert!(!reached.contains("reached\n"), "{reached}");
    assert!(reached.contains("Operation not permitted"), "{reached}");
}

/// `cat` of the config file and of a token beside it, with the config in its own folder
/// outside the data dir (as `--config /etc/steward/config.toml` would be).
fn config_probe(sandbox: &str) -> String {
    let folder = tempfile::tempdir().unwrap();
    let probes =
        Probes::start_with_config_at(sandbox, tempfile::tempdir().unwrap(), Some(folder.path()));
    let read = probes.run(&format!(
        "cat {0}/config.toml {0}/token",
        folder.path().display()
    ));
    text(&read)
}

#[test]
fn the_config_file_and_its_folder_are_hidden_wherever_they_are() {
    let confined = config_probe("landlock");
    assert!(
        !confined.contains("FAKE CONFIG SECRET") && !confined.contains("FAKE TOKEN SECRET"),
        "{confined}"
    );
    let open = config_probe("none");
    assert!(
        open.contains("FAKE CONFIG SECRET") && open.contains("FAKE TOKEN SECRET"),
        "the positive control: {open}"
    );
}

#[test]
fn without_the_sandbox_the_same_probes_succeed() {
    let probes = Probes::start("none");
    let searched = probes.run("grep -r 'FAKE TEST KEY' ~");
    assert!(text(&searched).contains("not a real secret"), "{searched}");
    assert!(
        searched["sandbox"].as_str().unwrap().starts_with("none"),
        "{searched}"
    );
    let marker = probes.home.path().join("marker");
    probes.run(&format!("touch {}", marker.display()));
    assert!(marker.exists());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')\""
    );
    let connected = probes.run(&connect);
    assert!(text(&connected).contains("connected"), "{connected}");
    let (sent, reached, arrived) = socket_probes(&probes);
    assert!(arrived, "the datagram arrives unconfined: {sent}");
    assert!(reached.contains("reached"), "{reached}");
}

#[test]
fn a_background_child_does_not_outlive_its_command() {
    let probes = Probes::start("landlock");
    let started = probes.run("sleep 300 & echo $!");
    let pid: u32 = started["stdout"].as_str().unwrap().trim().parse().unwrap();
    assert_ends_soon(pid, "a background child outlived its command");
}

#[test]
fn a_command_killed_at_its_timeout_takes_its_background_children_along() {
    let probes = Probes::start("landlock");
    let ended = probes.run_with(json!({
        "command": "sleep 300 & echo $! > sleeper.pid; sleep 30",
        "timeout_secs": 1
    }));
    assert!(ended.to_string().contains("timed_out"), "{ended}");
    let pid_file = probes.daemon.path().join("workspace/sleeper.pid");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ends_soon(pid, "a background child outlived the timeout");
}

/// `python3 FORKS` as the unprivileged user `nobody` (the kernel does not hold root to
/// RLIMIT_NPROC), confined by the launcher or not: how many children it could fork of the
/// `tries` it tried. The children only sleep for two seconds.
#[cfg(test_as_root)]
fn forks_as_nobody(confined: bool, tries: usize) -> usize {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = dir.path().join("forks.py");
    std::fs::write(
        &script,
        "import os, sys, time\nn = 0\nfor i in range(int(sys.argv[1])):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n    n += 1\nprint('forked', n, flush=True)\n",
    )
    .unwrap();
    // A copy of the launcher where `nobody` may run it, whoever owns the build dir.
    let launcher = dir.path().join("steward-sandbox");
    std::fs::copy(env!("CARGO_BIN_EXE_steward-sandbox"), &launcher).unwrap();
    let spec = serde_json::json!({"write": [dir.path()], "deny_read": [], "network": false, "cpu_secs": 20});
    let mut command = std::process::Command::new("setpriv");
    command.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    if confined {
        command.arg(&launcher).arg(spec.to_string()).arg("--");
    }
    let output = command
        .arg("/usr/bin/python3")
        .arg(&script)
        .arg(tries.to_string())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    said.trim()
        .strip_prefix("forked ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{output:?}"))
}

#[test]
#[cfg_attr(
    not(test_as_root),
    ignore = "needs root: it runs the probe as the unprivileged user nobody"
)]
fn a_confined_command_cannot_start_processes_without_bound() {
    #[cfg(test_as_root)]
    {
        // The limit is the machine's tasks (threads included) plus 512 when the command
        // starts: a loaded machine (a browser test beside this one) raises it, so the probe
        // tries well beyond it.
        let tasks: usize = std::fs::read_to_string("/proc/loadavg")
            .unwrap()
            .split_whitespace()
            .nth(3)
            .and_then(|f| f.split('/').nth(1))
            .and_then(|total| total.parse().ok())
            .unwrap();
        let tries = (tasks + 512 + 1000).max(1000);
        let confined = forks_as_nobody(true, tries);
        assert!(
            (10..tries).contains(&confined),
            "stopped at the task limit: {confined} of {tries}"
        );
        assert_eq!(forks_as_nobody(false, tries), tries, "the positive control");
    }
}
