//! Where a chat reads the owner's lines and writes what comes: a line editor on a terminal,
//! plain lines otherwise (a pipe, a file, a test).
//!
//! Decided here:
//! - On a terminal, lines are read by `reedline` on a thread of its own (it blocks), with
//!   editing (Emacs keys), a history kept in the data dir (`chat_history`, private, the last
//!   1,000 lines, shared by every chat, searched with Ctrl-R) and a prompt; what the daemon
//!   sends meanwhile is printed above the prompt (reedline's external printer), so an answer
//!   never tears the line being typed. Ctrl-D or `/quit` leaves; Ctrl-C drops the line being
//!   typed, twice in a row leaves. (rustyline was tried first: with its external printer,
//!   input that arrives in one read — a paste — stalls after the first character.)
//! - The terminal's mode is saved first and put back when the chat ends, whatever the
//!   editor thread was doing.
//! - Elsewhere stdin is read line by line and output goes to stdout (notes to stderr), so
//!   `steward chat < lines.txt` and scripts keep working.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use std::borrow::Cow;
use std::sync::mpsc::SyncSender;

use reedline::{
    ExternalPrinter, FileBackedHistory, Prompt, PromptEditMode, PromptHistorySearch, Reedline,
    Signal,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use crate::cli::output::out;

const PROMPT: &str = "> ";
const HISTORY_LINES: usize = 1000;

/// The owner's side of a chat: its lines in, what comes out.
pub struct Terminal {
    input: Input,
    screen: Screen,
    /// The terminal's mode before the editor changed it.
    saved_mode: Option<rustix::termios::Termios>,
}

enum Input {
    Lines(tokio::io::Lines<BufReader<tokio::io::Stdin>>),
    Editor(mpsc::Receiver<String>),
}

enum Screen {
    Plain,
    Editor(SyncSender<String>),
}

impl Terminal {
    /// The line editor when stdin and stdout are a terminal (and it starts), plain lines
    /// otherwise.
    pub fn open(data_dir: &Path) -> Self {
        let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
        if interactive {
            let saved_mode = rustix::termios::tcgetattr(std::io::stdin()).ok();
            match start_editor(data_dir.join("chat_history")) {
                Ok((lines, printer)) => {
                    return Self {
                        input: Input::Editor(lines),
                        screen: Screen::Editor(printer),
                        saved_mode,
                    };
                }
                Err(e) => eprintln!("steward: no line editing ({e}); reading plain lines"),
            }
        }
        Self {
            input: Input::Lines(BufReader::new(tokio::io::stdin()).lines()),
            screen: Screen::Plain,
            saved_mode: None,
        }
    }

    pub fn is_interactive(&self) -> bool {
        matches!(self.input, Input::Editor(_))
    }

    /// The next line the owner typed; `None` when the input ended (Ctrl-D, end of file).
    pub async fn next_line(&mut self) -> std::io::Result<Option<String>> {
        match &mut self.input {
            Input::Lines(lines) => lines.next_line().await,
            Input::Editor(lines) => Ok(lines.recv().await),
        }
    }

    /// What the assistant or the daemon says, on stdout (above the prompt when editing).
    pub fn show(&mut self, text: &str) {
        match &mut self.screen {
            Screen::Plain => out!("{text}"),
            Screen::Editor(printer) => {
                if printer.send(text.to_owned()).is_err() {
                    out!("{text}");
                }
            }
        }
    }

    /// A note about the chat itself (reconnecting, rejected), on stderr (above the prompt
    /// when editing).
    pub fn note(&mut self, text: &str) {
        match &mut self.screen {
            Screen::Plain => eprintln!("{text}"),
            Screen::Editor(printer) => {
                if printer.send(text.to_owned()).is_err() {
                    eprintln!("{text}");
                }
            }
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(mode) = &self.saved_mode {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                mode,
            );
        }
    }
}

/// Starts the editor's thread; the lines it reads and the printer that writes above it.
fn start_editor(history: PathBuf) -> std::io::Result<(mpsc::Receiver<String>, SyncSender<String>)> {
    private_file(&history)?;
    let kept = FileBackedHistory::with_file(HISTORY_LINES, history)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let printer = ExternalPrinter::new(64);
    let sender = printer.sender();
    let editor = Reedline::create()
        .with_history(Box::new(kept))
        .with_external_printer(printer);
    let (tx, rx) = mpsc::channel(16);
    std::thread::Builder::new()
        .name("chat-input".into())
        .spawn(move || read_lines(editor, &tx))?;
    Ok((rx, sender))
}

/// The editor's loop: each line to the chat (the history keeps itself).
fn read_lines(mut editor: Reedline, tx: &mpsc::Sender<String>) {
    let mut interrupted = false;
    loop {
        match editor.read_line(&ChatPrompt) {
            Ok(Signal::Success(line)) => {
                interrupted = false;
                let quit = line.trim() == "/quit";
                if tx.blocking_send(line).is_err() || quit {
                    return;
                }
            }
            Ok(Signal::CtrlC) if !interrupted => {
                interrupted = true;
                eprintln!("(Ctrl-C again, Ctrl-D or /quit leaves)");
            }
            Ok(Signal::CtrlC | Signal::CtrlD) => return,
            Ok(_) => {}
            Err(e) => {
                eprintln!("steward: cannot read the terminal: {e}");
                return;
            }
        }
    }
}

/// The history file, created private before the editor writes it.
fn private_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// `> `, and what Ctrl-R shows while searching the history.
struct ChatPrompt;

impl Prompt for ChatPrompt {
    fn render_prompt_left(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn render_prompt_right(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn render_prompt_indicator(&self, _mode: PromptEditMode) -> Cow<'_, str> {
        Cow::Borrowed(PROMPT)
    }

    fn render_prompt_multiline_indicator(&self) -> Cow<'_, str> {
        Cow::Borrowed("… ")
    }

    fn render_prompt_history_search_indicator(&self, search: PromptHistorySearch) -> Cow<'_, str> {
        Cow::Owned(format!("(history: {}) ", search.term))
    }
}
