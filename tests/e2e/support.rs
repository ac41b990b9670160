//! A real `steward` process in a temp data dir, started as a user would start it, with
//! `NOTIFY_SOCKET` pointing at a datagram socket so tests know when it is READY.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use steward_events::{EventId, TrajectoryItem, Urgency};
use steward_protocol::client::Client;
use steward_protocol::{EventRow, Request, Response, StatusReport};
use tempfile::TempDir;

pub const BIN: &str = env!("CARGO_BIN_EXE_steward");
pub const MAX_TEXT: usize = steward_daemon::owner::MAX_MESSAGE_BYTES;

pub struct TestDaemon {
    pub dir: TempDir,
    pub child: Option<Child>,
    /// Receives what the daemon sends to `NOTIFY_SOCKET` after `READY=1`.
    pub notify: UnixDatagram,
}

impl TestDaemon {
    pub fn start() -> Self {
        Self::start_with("")
    }

    pub fn start_with(config: &str) -> Self {
        Self::start_with_env(config, &[])
    }

    pub fn start_with_env(config: &str, env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("config.toml"), config).expect("write config");
        Self::start_in_with_env(dir, env)
    }

    /// Starts the daemon on an existing data dir (a restart).
    pub fn start_in(dir: TempDir) -> Self {
        Self::start_in_with_env(dir, &[])
    }

    pub fn start_in_with_env(dir: TempDir, env: &[(&str, &str)]) -> Self {
        Self::launch(dir, env, Stdio::inherit())
    }

    /// Like [`Self::start_with_env`], with the daemon's log (its stderr) written to `log`.
    pub fn start_with_log(config: &str, env: &[(&str, &str)], log: &Path) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("config.toml"), config).expect("write config");
        let file = std::fs::File::create(log).expect("create the log file");
        Self::launch(dir, env, Stdio::from(file))
    }

    fn launch(dir: TempDir, env: &[(&str, &str)], stderr: Stdio) -> Self {
        let notify_path = dir.path().join("notify.sock");
        let _ = std::fs::remove_file(&notify_path);
        let notify = UnixDatagram::bind(&notify_path).expect("bind notify socket");
        notify
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let child = Command::new(BIN)
            .args(common_args(dir.path()))
            .arg("run")
            .env("NOTIFY_SOCKET", &notify_path)
            // `STEWARD_TEST_LOG` raises the daemons' log level when a test is investigated.
            .env(
                "RUST_LOG",
                std::env::var("STEWARD_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn steward run");
        let mut buf = [0u8; 4096];
        loop {
            let n = notify.recv(&mut buf).expect("READY=1 within 30 s");
            let message = String::from_utf8_lossy(&buf[..n]);
            if message.lines().any(|l| l == "READY=1") {
                break;
            }
        }
        Self {
            dir,
            child: Some(child),
            notify,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.path().join("steward.sock")
    }

    /// Runs a CLI command against this daemon's data dir and config.
    pub fn cli(&self, args: &[&str]) -> Output {
        cli_in(self.path(), args)
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
        }
    }

    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
        child.wait().expect("reap")
    }

    /// Kills (SIGKILL) and starts again on the same data dir.
    pub fn crash_and_restart(mut self) -> Self {
        self.kill9();
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir"));
        Self::start_in(dir)
    }

    pub async fn send(&self, text: &str, urgency: Option<Urgency>) -> EventId {
        send_to(&self.socket(), text, urgency)
            .await
            .expect("message accepted")
    }

    pub async fn trajectory(&self) -> Vec<TrajectoryItem> {
        let responses = Client::call(
            &self.socket(),
            &Request::Trajectory {
                limit: None,
                follow: false,
            },
        )
        .await
        .expect("trajectory");
        responses
            .into_iter()
            .filter_map(|r| match r {
                Response::Item { item } => Some(item),
                _ => None,
            })
            .collect()
    }

    pub async fn events(&self) -> Vec<EventRow> {
        let request = Request::Events {
            limit: None,
            state: None,
            follow: false,
        };
        let responses = Client::call(&self.socket(), &request)
            .await
            .expect("events");
        responses
            .into_iter()
            .filter_map(|r| match r {
                Response::Event { event } => Some(event),
                _ => None,
            })
            .collect()
    }

    pub async fn status(&self) -> StatusReport {
        let responses = Client::call(&self.socket(), &Request::Status)
            .await
            .expect("status");
        match responses.into_iter().next() {
            Some(Response::Status { status }) => status,
            other => panic!("unexpected status answer {other:?}"),
        }
    }

    /// Polls the trajectory until `done` holds (60 s at most: a burst of a thousand events
    /// takes a while on a loaded 2-core machine).
    pub async fn wait_for_trajectory(
        &self,
        what: &str,
        done: impl Fn(&[TrajectoryItem]) -> bool,
    ) -> Vec<TrajectoryItem> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let items = self.trajectory().await;
            if done(&items) {
                return items;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; trajectory: {items:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn wait_for_events(
        &self,
        what: &str,
        done: impl Fn(&[EventRow]) -> bool,
    ) -> Vec<EventRow> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let events = self.events().await;
            if done(&events) {
                return events;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; events: {events:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for `n` events on channels starting with `prefix`; those events, oldest first.
    pub async fn events_on(&self, prefix: &str, n: usize) -> Vec<EventRow> {
        let on = |e: &EventRow| e.channel.starts_with(prefix);
        self.wait_for_events(&format!("{n} events on {prefix}*"), |events| {
            events.iter().filter(|e| on(e)).count() >= n
        })
        .await
        .into_iter()
        .filter(on)
        .collect()
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Polls `done` every 50 ms until it holds; fails the test after `secs`, naming `what`.
pub async fn wait_until<F, Fut>(secs: u64, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn common_args(dir: &Path) -> Vec<String> {
    vec![
        "--data-dir".into(),
        dir.display().to_string(),
        "--config".into(),
        dir.join("config.toml").display().to_string(),
    ]
}

/// Runs the CLI, 60 s at most (through coreutils' `timeout`): a daemon that accepted a
/// request and never answered must fail the test, not hang it.
pub fn cli_in(dir: &Path, args: &[&str]) -> Output {
    let output = Command::new("timeout")
        .args(["--kill-after=5", "60", BIN])
        .args(common_args(dir))
        .args(args)
        .output()
        .expect("run steward");
    assert_ne!(
        output.status.code(),
        Some(124),
        "steward {args:?} got no answer within 60 s; stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Sends one message over its own connection; `Err` when the daemon did not accept it.
pub async fn send_to(
    socket: &Path,
    text: &str,
    urgency: Option<Urgency>,
) -> Result<EventId, String> {
    let request = Request::Send {
        text: text.into(),
        urgency,
        wait: false,
    };
    let responses = Client::call(socket, &request)
        .await
        .map_err(|e| e.to_string())?;
    match responses.first() {
        Some(Response::Accepted { event_id, .. }) => Ok(*event_id),
        other => Err(format!("not accepted: {other:?}")),
    }
}

/// The event ids of the `event` items, in trajectory order.
pub fn merged_ids(items: &[TrajectoryItem]) -> Vec<EventId> {
    items
        .iter()
        .filter_map(|item| match &item.kind {
            steward_events::ItemKind::Event { event_id, .. } => Some(*event_id),
            _ => None,
        })
        .collect()
}

/// Runs `steward chat` with `lines` on its standard input, until it exits.
pub fn run_chat(daemon: &TestDaemon, lines: &[&str]) -> Output {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(common_args(daemon.path()))
        .arg("chat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// A running CLI command (`steward chat`, `steward outbox --follow`, …): lines go in, its
/// output is collected as it comes.
pub struct Running {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    pub fn cli(daemon: &TestDaemon, args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(BIN)
            .args(common_args(daemon.path()))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    pub fn say(&mut self, text: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{text}").unwrap();
    }

    /// Waits (at most 30 s) for a line containing `text`; the first such line shown.
    pub fn wait_for(&mut self, text: &str) -> String {
        self.wait_for_nth(text, 1)
    }

    /// Waits (at most 30 s) until `n` lines contain `text`; the `n`th.
    pub fn wait_for_nth(&mut self, text: &str, n: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(line) = self.seen.iter().filter(|l| l.contains(text)).nth(n - 1) {
                return line.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!(
                    "no line {n} with {text:?}; the command showed {:#?}",
                    self.seen
                ),
            }
        }
    }

    /// Ends its input and waits for it to leave (killed, and the test failed, if it has
    /// not left within 10 s); everything it showed.
    pub fn finish(mut self) -> Vec<String> {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "the command did not leave after its input ended: {:#?}",
                    self.seen
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.seen.extend(self.lines.try_iter());
        self.seen
    }

    /// Stops a command that runs until interrupted (`--follow`); everything it showed.
    pub fn stop(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.seen.extend(self.lines.try_iter());
        self.seen
    }
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// One HTTP/1.1 request as the test servers read it: method, headers (names lower-case),
/// body by Content-Length.
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn read(stream: &std::net::TcpStream) -> Self {
        use std::io::{BufRead, BufReader, Read};
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let mut words = line.split_whitespace();
        let method = words.next().unwrap_or("").to_owned();
        let path = words.next().unwrap_or("").to_owned();
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            if header.trim().is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap();
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        let length = headers
            .iter()
            .find(|(name, _)| name == "content-length")
            .map_or(0, |(_, value)| value.parse().unwrap());
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        Self {
            method,
            path,
            headers,
            body,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl TestDaemon {
    /// Polls `steward status` until `done` holds (30 s at most).
    pub async fn wait_for_status(
        &self,
        what: &str,
        done: impl Fn(&StatusReport) -> bool,
    ) -> StatusReport {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = self.status().await;
            if done(&status) {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; status: {status:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `steward status` shows `channel` ready (`secs` at most).
    pub async fn wait_channel_ready(&self, channel: &str, secs: u64) {
        wait_until(secs, &format!("the {channel} channel is ready"), || async {
            self.channel_state(channel)
                .await
                .is_some_and(|s| s.starts_with("ready"))
        })
        .await;
    }

    /// The events of channels named `prefix…` (`telegram:`, `matrix:`), oldest first.
    pub async fn channel_events(&self, prefix: &str) -> Vec<EventRow> {
        self.events()
            .await
            .into_iter()
            .filter(|e| e.channel.starts_with(prefix))
            .collect()
    }

    /// The state `steward status` shows for a channel.
    pub async fn channel_state(&self, name: &str) -> Option<String> {
        self.status()
            .await
            .channels
            .into_iter()
            .find(|c| c.name == name)
            .map(|c| c.state)
    }

    /// Waits for the process to end by itself (a failpoint killed it), 60 s at most.
    pub fn wait_for_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not stop by itself"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Gives up the data dir (the process must have ended) for a restart.
    pub fn into_dir(mut self) -> TempDir {
        self.kill9();
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir"))
    }
}
