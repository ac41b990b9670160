//! Human output of the listings: aligned columns under a header, times a person reads.
//!
//! Decided here:
//! - A listing is buffered and printed at its end, each column as wide as its widest cell
//!   (listings are bounded by `--limit`); a followed listing (`--follow`) cannot wait for
//!   its end, so its rows are printed as they come, in columns as wide as the header or a
//!   minimum, whichever is wider, and a longer cell pushes the rest of its row only.
//! - The last column is never padded. Its text is folded to the terminal's width
//!   (else `COLUMNS`, else 100) with continuation lines under it, so a long tool result does not
//!   run off to the right — or, in a listing of one line per row (events, the outbox), cut
//!   to its first line with `…` (`--json` has it whole).
//! - Times are shown in this machine's local zone, to the second (`2026-12-01 14:03:07`);
//!   the JSON output keeps RFC 3339 in UTC with full precision.

use chrono::{DateTime, Local, Utc};

use super::output::out;

/// A table printed at its end, or row by row when followed.
pub struct Table {
    headers: Vec<&'static str>,
    widths: Vec<usize>,
    rows: Vec<Vec<String>>,
    live: bool,
    last: Last,
    header_printed: bool,
}

/// What is done with a last cell wider than the room left for it.
#[derive(Clone, Copy)]
enum Last {
    Fold,
    Cut,
}

impl Table {
    /// `columns`: each header with the width a followed listing gives it at least.
    pub fn new(columns: &[(&'static str, usize)], live: bool) -> Self {
        Self {
            headers: columns.iter().map(|(name, _)| *name).collect(),
            widths: columns
                .iter()
                .map(|(name, min)| (*min).max(name.chars().count()))
                .collect(),
            rows: Vec::new(),
            live,
            last: Last::Fold,
            header_printed: false,
        }
    }

    /// One line per row: the last cell is cut to the room left (at least 24 characters).
    pub fn one_line(mut self) -> Self {
        self.last = Last::Cut;
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        if self.live {
            self.print_header();
            print_row(&cells, &self.widths, self.last);
        } else {
            self.rows.push(cells);
        }
    }

    /// Prints what was buffered (and the header, unless there were no rows); whether any
    /// row was printed.
    pub fn finish(mut self) -> bool {
        if self.rows.is_empty() {
            return self.header_printed;
        }
        // All rows are known: each column as wide as its widest cell or its header.
        self.widths = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in self.widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        self.print_header();
        for row in &self.rows {
            print_row(row, &self.widths, self.last);
        }
        true
    }

    fn print_header(&mut self) {
        if !std::mem::replace(&mut self.header_printed, true) {
            let headers: Vec<String> = self.headers.iter().map(|h| (*h).to_owned()).collect();
            print_row(&headers, &self.widths, self.last);
        }
    }
}

fn print_row(cells: &[String], widths: &[usize], last_cell: Last) {
    let mut line = String::new();
    let last = cells.len().saturating_sub(1);
    for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
        if index == last {
            let indent = line.chars().count();
            let room = terminal_width().saturating_sub(indent);
            if let Last::Cut = last_cell {
                line.push_str(&short(cell, room.max(24)));
                break;
            }
            let mut folded = fold(cell, room.max(20)).into_iter();
            line.push_str(&folded.next().unwrap_or_default());
            for more in folded {
                line.push('\n');
                line.push_str(&" ".repeat(indent));
                line.push_str(&more);
            }
        } else {
            line.push_str(cell);
            let pad = width.saturating_sub(cell.chars().count()) + 2;
            line.push_str(&" ".repeat(pad));
        }
    }
    out!("{}", line.trim_end());
}

/// The width of the terminal the output goes to; `COLUMNS` when the output is not a
/// terminal (a pipe, a file), else 100.
fn terminal_width() -> usize {
    let terminal = rustix::termios::tcgetwinsize(std::io::stdout())
        .ok()
        .map(|size| usize::from(size.ws_col));
    terminal
        .or_else(|| std::env::var("COLUMNS").ok()?.trim().parse().ok())
        .filter(|&c| c >= 40)
        .unwrap_or(100)
}

/// `text` in lines of at most `width` characters, broken at spaces where it can be.
pub fn fold(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    for paragraph in text.lines() {
        let mut line = String::new();
        for word in paragraph.split(' ') {
            let mut word = word;
            loop {
                let used = line.chars().count();
                let needed = word.chars().count() + usize::from(used > 0);
                if used + needed <= width {
                    if used > 0 {
                        line.push(' ');
                    }
                    line.push_str(word);
                    break;
                }
                if used > 0 {
                    lines.push(std::mem::take(&mut line));
                    continue;
                }
                // A word longer than a line: cut it.
                let cut = word
                    .char_indices()
                    .nth(width)
                    .map_or(word.len(), |(i, _)| i);
                let (head, tail) = word.split_at(cut);
                lines.push(head.to_owned());
                word = tail;
                if word.is_empty() {
                    break;
                }
            }
        }
        lines.push(line);
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

/// The first line of `text`, at most `max` characters (`…` when cut).
pub fn short(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    if first.chars().count() <= max && !text.trim_end().contains('\n') {
        return first.to_owned();
    }
    let kept: String = first.chars().take(max.saturating_sub(1)).collect();
    format!("{kept}…")
}

/// A time as a person reads it here: local zone, to the second.
pub fn local(at: DateTime<Utc>) -> String {
    at.with_timezone(&Local)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_breaks_at_spaces_and_cuts_only_words_longer_than_a_line() {
        let table: &[(&str, usize, &[&str])] = &[
            ("short", 10, &["short"]),
            ("one two three four", 9, &["one two", "three", "four"]),
            ("abcdefghijkl", 5, &["abcde", "fghij", "kl"]),
            ("a\nb c", 10, &["a", "b c"]),
            ("", 10, &[""]),
            ("grüße aus köln", 6, &["grüße", "aus", "köln"]),
        ];
        for (text, width, expected) in table {
            assert_eq!(fold(text, *width), *expected, "{text:?} in {width}");
        }
    }

    #[test]
    fn short_text_is_the_first_line_cut_with_an_ellipsis() {
        assert_eq!(short("hello", 10), "hello");
        assert_eq!(short("hello world", 6), "hello…");
        assert_eq!(short("first\nsecond", 20), "first…");
        assert_eq!(short("Grüße aus Köln", 6), "Grüße…");
    }
}
