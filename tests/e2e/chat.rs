//! `steward chat` on a real terminal (a pseudo-terminal this test holds the other side of):
//! line editing, a history that recalls earlier lines (also those of an earlier chat), owner
//! messages printed while a line is being typed, Ctrl-D leaving.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{BIN, TestDaemon, common_args};

/// A `steward chat` whose stdin, stdout and stderr are a pseudo-terminal.
struct TerminalChat {
    child: Child,
    /// The chat's side, to look at the terminal's mode.
    terminal: OwnedFd,
    keyboard: std::fs::File,
    screen: Arc<Mutex<String>>,
}

impl TerminalChat {
    fn start(daemon: &TestDaemon) -> Self {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let size = rustix::termios::Winsize {
            ws_row: 40,
            ws_col: 120,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&master, size).unwrap();
        let side = || -> OwnedFd {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(name.to_str().unwrap())
                .unwrap()
                .into()
        };
        let child = Command::new(BIN)
            .args(common_args(daemon.path()))
            .arg("chat")
            .env("TERM", "xterm")
            .stdin(Stdio::from(side()))
            .stdout(Stdio::from(side()))
            .stderr(Stdio::from(side()))
            .spawn()
            .unwrap();
        let keyboard = std::fs::File::from(master);
        let mut reader = keyboard.try_clone().unwrap();
        let screen = Arc::new(Mutex::new(String::new()));
        let shown = screen.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n @ 1..) = reader.read(&mut buffer) {
                let chunk = String::from_utf8_lossy(&buffer[..n]).into_owned();
                // A terminal answers the editor's question where the cursor is.
                for _ in 0..chunk.matches("\x1b[6n").count() {
                    let _ = reader.write_all(b"\x1b[1;1R");
                }
                shown.lock().unwrap().push_str(&chunk);
            }
        });
        Self {
            child,
            terminal: side(),
            keyboard,
            screen,
        }
    }

    /// Types `keys` at once, as a paste arrives.
    fn keys(&mut self, keys: &str) {
        self.keyboard.write_all(keys.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }

    /// Waits (at most 30 s) until `text` is on the screen `times` times.
    fn wait_for(&self, text: &str, times: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.screen.lock().unwrap().matches(text).count() < times {
            assert!(
                Instant::now() < deadline,
                "{text:?} not {times}× on the screen: {}",
                self.screen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ctrl-D; the chat must leave with success within 10 s.
    fn leave(mut self) -> String {
        self.keys("\x04");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "{status:?}");
                break;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "Ctrl-D did not end the chat: {}",
                    self.screen.lock().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        use rustix::termios::LocalModes;
        let mode = rustix::termios::tcgetattr(&self.terminal).unwrap();
        assert!(
            mode.local_modes
                .contains(LocalModes::ICANON | LocalModes::ECHO),
            "the terminal is left as it was found: {mode:?}"
        );
        self.screen.lock().unwrap().clone()
    }
}

const UP: &str = "\x1b[A";
const BACKSPACE: &str = "\x7f";

#[test]
fn a_terminal_chat_edits_lines_recalls_history_and_prints_above_the_prompt() {
    let daemon = TestDaemon::start();
    let mut chat = TerminalChat::start(&daemon);
    chat.wait_for("/quit or Ctrl-D leaves", 1);
    chat.keys("/tool echo {\"text\":\"one\"}\r");
    chat.wait_for(r#"echo: {"text":"one"}"#, 1);
    // The line before, recalled with the up arrow and sent again.
    chat.keys(UP);
    chat.keys("\r");
    chat.wait_for(r#"echo: {"text":"one"}"#, 2);
    // A typo taken back before the line is sent.
    chat.keys("/tool echo {\"text\":\"twX");
    chat.keys(BACKSPACE);
    chat.keys("o\"}\r");
    chat.wait_for(r#"echo: {"text":"two"}"#, 1);
    // News while a line is half typed: shown, and the line is still there to finish.
    chat.keys("/tool echo {\"text\":\"thr");
    let args = json!({"text": "the build is green"}).to_string();
    daemon.cli(&["tools", "call", "notify_owner", "--args", &args]);
    chat.wait_for("(notice) the build is green", 1);
    chat.keys("ee\"}\r");
    chat.wait_for(r#"echo: {"text":"three"}"#, 1);
    let screen = chat.leave();
    assert!(!screen.contains("twX\"}"), "{screen}");

    use std::os::unix::fs::PermissionsExt;
    let history = daemon.path().join("chat_history");
    let mode = std::fs::metadata(&history).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the history is private: {mode:o}");
    let kept = std::fs::read_to_string(&history).unwrap();
    assert!(kept.contains(r#"{"text":"three"}"#), "{kept}");

    // The next chat remembers: up arrow brings back the last line of the one before.
    let mut next = TerminalChat::start(&daemon);
    next.wait_for("/quit or Ctrl-D leaves", 1);
    next.keys(UP);
    next.keys("\r");
    next.wait_for(r#"echo: {"text":"three"}"#, 1);
    next.leave();
}
