//! `steward service …`: the units it writes pass `systemd-analyze verify`, the launchd
//! plist parses, and install / status / uninstall work on real files (this machine has no
//! systemd as PID 1, so `systemctl` itself fails and says so).

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{BIN, stderr, stdout};

/// Runs the binary with HOME and XDG_CONFIG_HOME inside `home`.
fn steward(home: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--config")
        .arg(home.join("config.toml"))
        .arg("--data-dir")
        .arg(home.join("data"))
        .args(args)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .output()
        .expect("run steward")
}

/// The file part of a `--dry-run` listing.
fn written_file(listing: &str) -> String {
    listing
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("# would run:"))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn verify(unit: &Path, user: bool, runtime_dir: &Path) {
    let mut command = Command::new("systemd-analyze");
    if user {
        command.arg("--user").env("XDG_RUNTIME_DIR", runtime_dir);
    }
    let output = command
        .arg("verify")
        .arg(unit)
        .output()
        .expect("systemd-analyze (apt-get install systemd; .ci/run does) must be on the PATH");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stderr(&output), "", "no warnings either");
}

#[test]
fn the_units_it_writes_pass_systemd_analyze_verify() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "").unwrap();
    let runtime = home.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();

    let output = steward(home.path(), &["service", "install", "--user", "--dry-run"]);
    assert!(output.status.success(), "{output:?}");
    let listing = stdout(&output);
    let unit_path = home.path().join(".config/systemd/user/steward.service");
    assert!(
        listing.starts_with(&format!("# would write {}:", unit_path.display())),
        "{listing}"
    );
    let binary = std::fs::canonicalize(BIN).unwrap();
    assert!(
        listing.contains(&format!(
            "ExecStart={} --config {} --data-dir {} run",
            binary.display(),
            home.path().join("config.toml").display(),
            home.path().join("data").display()
        )),
        "{listing}"
    );
    for line in [
        "Type=notify",
        "NotifyAccess=main",
        "WatchdogSec=30",
        "Restart=on-failure",
        "RestartPreventExitStatus=78",
        "TimeoutStopSec=30",
        "ProtectSystem=strict",
        "SystemCallFilter=@system-service",
        "StateDirectory=steward",
    ] {
        assert!(listing.lines().any(|l| l == line), "{line} in {listing}");
    }
    assert!(listing.ends_with("# would run: systemctl --user daemon-reload\n# would run: systemctl --user enable --now steward.service\n"), "{listing}");
    assert!(!unit_path.exists(), "a dry run writes nothing");
    let user_unit = home.path().join("steward.service");
    std::fs::write(&user_unit, written_file(&listing)).unwrap();
    verify(&user_unit, true, &runtime);

    let output = steward(
        home.path(),
        &["service", "install", "--system", "--dry-run"],
    );
    let listing = stdout(&output);
    assert!(
        listing.starts_with("# would write /etc/systemd/system/steward.service:"),
        "{listing}"
    );
    // Named paths win over the system defaults (/etc/steward, /var/lib/steward).
    assert!(listing.contains(&format!(
        "--config {} --data-dir {} run",
        home.path().join("config.toml").display(),
        home.path().join("data").display()
    )));
    assert!(listing.contains("User=steward"));
    let system_unit = home.path().join("steward-system.service");
    std::fs::write(&system_unit, written_file(&listing)).unwrap();
    verify(&system_unit, false, &runtime);
}

#[test]
fn the_launchd_plist_parses() {
    let template = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../systemd/dev.steward.daemon.plist"
    ))
    .unwrap();
    let filled = template
        .replace("@BIN@", "/usr/local/bin/steward")
        .replace("@CONFIG@", "/Users/me/.config/steward/config.toml")
        .replace("@DATA_DIR@", "/Users/me/.local/share/steward")
        .replace("@LOG_DIR@", "/Users/me/Library/Logs");
    let mut python = Command::new("python3")
        .args([
            "-c",
            "import plistlib, sys, json; d = plistlib.loads(sys.stdin.buffer.read()); print(json.dumps(d))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    python
        .stdin
        .take()
        .unwrap()
        .write_all(filled.as_bytes())
        .unwrap();
    let output = python.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let plist: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(plist["Label"], "dev.steward.daemon");
    assert_eq!(plist["RunAtLoad"], true);
    assert_eq!(plist["KeepAlive"]["SuccessfulExit"], false);
    assert_eq!(plist["ThrottleInterval"], 30);
    assert_eq!(plist["ProgramArguments"][0], "/usr/local/bin/steward");
    assert_eq!(
        plist["ProgramArguments"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        "run"
    );
    assert_eq!(
        plist["StandardErrorPath"],
        "/Users/me/Library/Logs/steward.log"
    );
}

#[test]
fn install_status_and_uninstall_work_on_the_real_files() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "").unwrap();
    let unit_path = home.path().join(".config/systemd/user/steward.service");

    let output = steward(home.path(), &["service", "status"]);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert!(stdout(&output).contains("not installed"), "{output:?}");

    // No systemd user manager here: the file is written, then systemctl fails and says so.
    let output = steward(home.path(), &["service", "install"]);
    assert!(unit_path.exists(), "{output:?}");
    assert!(stdout(&output).contains(&format!("wrote {}", unit_path.display())));
    if !output.status.success() {
        assert!(stderr(&output).contains("systemctl"), "{output:?}");
    }
    let output = steward(home.path(), &["service", "status"]);
    assert!(
        stdout(&output).contains("(matches this binary)"),
        "{output:?}"
    );

    // A unit left by an older binary elsewhere is called out.
    let stale = std::fs::read_to_string(&unit_path).unwrap().replace(
        &std::fs::canonicalize(BIN).unwrap().display().to_string(),
        "/old/place/steward",
    );
    std::fs::write(&unit_path, stale).unwrap();
    let output = steward(home.path(), &["service", "status"]);
    assert!(
        stdout(&output).contains("ExecStart=/old/place/steward"),
        "{output:?}"
    );
    assert!(
        stdout(&output).contains("run `steward service install` again"),
        "{output:?}"
    );

    let output = steward(home.path(), &["service", "uninstall", "--dry-run"]);
    assert!(
        stdout(&output).contains("# would run: systemctl --user disable --now steward.service")
    );
    assert!(unit_path.exists());
    let output = steward(home.path(), &["service", "uninstall"]);
    assert!(output.status.success(), "{output:?}");
    assert!(!unit_path.exists());
}
