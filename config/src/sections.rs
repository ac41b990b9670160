//! A file with many `[[cron]]` tables read in sections rather than as one document.
//!
//! toml reads a document by first collecting every token and every parser event of the whole
//! file, then building a map for each table. For 10,000 `[[cron]]` tables that was most of
//! the start before READY, with a 28 MB peak of memory touched once — page faults, and
//! vectors copied as they doubled. Read in batches of [`TABLES_PER_BATCH`] jobs, the same
//! work stays in memory the allocator has just freed: reading and checking that file went
//! from 37.0 to 25.9 ms and its peak from 28.5 to 13.0 MB (medians, 2026-12-06, BENCHMARKS.md).
//!
//! The file is cut at its table headers, found from toml's own tokens (a line that looks like
//! a header inside a multi-line string is not one). Each `[[cron]]` table runs from its header
//! to the next header that is not one of its sub-tables (`[cron.action]`); everything else is
//! read as one document. The sections are used only when they cannot mean anything else than
//! the whole file means; otherwise [`parse`] returns `None` and the caller reads the whole
//! file as before:
//! - fewer than [`MIN_TABLES`] jobs (small files keep the one path every file used to take);
//! - a header key written in quotes (`["cron"]` is `[cron]`), a header not well formed, a
//!   bracket closed that was never opened, or a syntax error in any section;
//! - `cron` as anything but an array of tables: `[cron]`, a root key `cron = …`, or a
//!   `[cron.x]` sub-table that is not directly after its `[[cron]]` table.
//!
//! Spans inside a batch count from the batch, not the file, so a section's values are right
//! and their lines are not: the caller uses the result only when it also validates, and reads
//! the whole file again for any error, so every error names the same key and line either way.

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use toml_parser::lexer::{Lexer, TokenKind};
use toml_parser::{Source, Span};

use crate::raw::{RawConfig, RawCronJob};

/// Files with fewer jobs are read as one document.
pub(crate) const MIN_TABLES: usize = 512;
/// Jobs read as one document at a time.
pub(crate) const TABLES_PER_BATCH: usize = 256;

/// Threads that read job tables at most.
const MAX_THREADS: usize = 4;

/// The file's values read section by section, or `None` when it must be read whole (see the
/// module docs).
pub(crate) fn parse(text: &str) -> Option<RawConfig> {
    // Most files are small: counted without lexing them (a header written `[[ cron ]]` is
    // not counted, which only sends a file to the whole-file read).
    if text.matches("[[cron]]").count() < MIN_TABLES {
        return None;
    }
    let layout = Layout::of(text)?;
    if layout.jobs.len() < MIN_TABLES {
        return None;
    }
    let mut raw = RawConfig::deserialize(toml::Deserializer::parse(&layout.rest).ok()?).ok()?;
    raw.cron = read_jobs_on_every_core(text, &layout.jobs)?;
    Some(raw)
}

/// The job tables read on as many threads as the machine has cores (at most
/// [`MAX_THREADS`]), each a run of consecutive batches, and put back in the file's order.
/// The batches share nothing, and the start has nothing else to do on the other cores while
/// it reads the file. A thread that cannot be started leaves its part to this one.
fn read_jobs_on_every_core(text: &str, tables: &[Range<usize>]) -> Option<Vec<RawCronJob>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(MAX_THREADS);
    let batches = tables.len().div_ceil(TABLES_PER_BATCH);
    let per_thread = batches.div_ceil(threads.max(1)) * TABLES_PER_BATCH;
    if per_thread >= tables.len() {
        return read_jobs(text, tables);
    }
    std::thread::scope(|scope| {
        let mut parts = tables.chunks(per_thread);
        let first = parts.next()?;
        let others: Vec<_> = parts
            .map(|part| {
                std::thread::Builder::new()
                    .name("config-read".into())
                    .spawn_scoped(scope, move || read_jobs(text, part))
                    .map_err(|_| part)
            })
            .collect();
        let mut jobs = read_jobs(text, first)?;
        for other in others {
            jobs.extend(match other {
                Ok(thread) => thread.join().ok()??,
                Err(part) => read_jobs(text, part)?,
            });
        }
        Some(jobs)
    })
}

/// Job tables read one batch at a time.
fn read_jobs(text: &str, tables: &[Range<usize>]) -> Option<Vec<RawCronJob>> {
    let mut jobs = Vec::with_capacity(tables.len());
    for batch in tables.chunks(TABLES_PER_BATCH) {
        let batch_text = joined(text, batch)?;
        let read = JobsOnly::deserialize(toml::Deserializer::parse(&batch_text).ok()?).ok()?;
        jobs.extend(read.cron);
    }
    Some(jobs)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobsOnly {
    cron: Vec<RawCronJob>,
}

/// The text of consecutive job tables; borrowed when nothing else is written between them.
fn joined<'t>(text: &'t str, tables: &[Range<usize>]) -> Option<Cow<'t, str>> {
    let (first, last) = (tables.first()?, tables.last()?);
    if tables
        .windows(2)
        .all(|pair| matches!(pair, [a, b] if a.end == b.start))
    {
        return text.get(first.start..last.end).map(Cow::Borrowed);
    }
    let mut owned = String::new();
    for table in tables {
        owned.push_str(text.get(table.clone())?);
    }
    Some(Cow::Owned(owned))
}

/// The file cut into its `[[cron]]` tables and the text of everything else.
struct Layout {
    jobs: Vec<Range<usize>>,
    rest: String,
}

impl Layout {
    fn of(text: &str) -> Option<Self> {
        let mut layout = Self {
            jobs: Vec::new(),
            rest: String::new(),
        };
        // The section being read: where it starts, and whether it is a job table.
        let mut section = (0, false);
        for header in headers(text)? {
            let first_is_cron = header.first_key == "cron";
            let job_table = first_is_cron && header.array && header.keys == 1;
            if first_is_cron && !job_table {
                if header.keys > 1 && section.1 {
                    continue; // a sub-table of the job being read
                }
                return None;
            }
            layout.end_section(text, section, header.start)?;
            section = (header.start, job_table);
        }
        layout.end_section(text, section, text.len())?;
        Some(layout)
    }

    fn end_section(&mut self, text: &str, (start, job): (usize, bool), end: usize) -> Option<()> {
        if job {
            self.jobs.push(start..end);
        } else {
            self.rest.push_str(text.get(start..end)?);
        }
        Some(())
    }
}

/// A table header: where its `[` is, and its key.
struct Header<'t> {
    start: usize,
    array: bool,
    first_key: &'t str,
    keys: usize,
}

/// The file's table headers, from toml's own tokens (a string, multi-line or not, is one
/// token, so nothing inside one is taken for a header). A `[` is a header's when it is the
/// first token of a line outside any array or inline table; every other bracket opens or
/// closes a value. `None` when the file may mean something the sections would read
/// differently: a key of the root table that is `cron` or quoted, a quoted header key, a
/// header that is not well formed, or a bracket closed that was never opened. Whatever
/// else is wrong is left to toml, which reads every section.
fn headers(text: &str) -> Option<Vec<Header<'_>>> {
    let mut headers = Vec::new();
    let mut tokens = Source::new(text).lex();
    // Arrays and inline tables open around the current value.
    let mut depth = 0usize;
    let mut line_start = true;
    while let Some(token) = tokens.next() {
        let kind = token.kind();
        match kind {
            TokenKind::Whitespace | TokenKind::Comment | TokenKind::Eof => continue,
            TokenKind::Newline => {
                line_start |= depth == 0;
                continue;
            }
            TokenKind::LeftSquareBracket if line_start && depth == 0 => {
                headers.push(header(text, token.span().start(), &mut tokens)?);
            }
            // The first key of a key/value pair of the root table.
            _ if line_start
                && depth == 0
                && headers.is_empty()
                && (kind != TokenKind::Atom || span_text(text, token.span())? == "cron") =>
            {
                return None;
            }
            TokenKind::LeftSquareBracket | TokenKind::LeftCurlyBracket => depth += 1,
            TokenKind::RightSquareBracket | TokenKind::RightCurlyBracket => {
                depth = depth.checked_sub(1)?;
            }
            _ => {}
        }
        line_start = false;
    }
    Some(headers)
}

/// The rest of a header whose first `[` starts at `start`.
fn header<'t>(text: &'t str, start: usize, tokens: &mut Lexer<'t>) -> Option<Header<'t>> {
    let mut header = Header {
        start,
        array: false,
        first_key: "",
        keys: 0,
    };
    let mut next = tokens.next()?;
    if next.kind() == TokenKind::LeftSquareBracket {
        header.array = true;
        next = tokens.next()?;
    }
    loop {
        match next.kind() {
            TokenKind::Whitespace | TokenKind::Dot => {}
            TokenKind::Atom => {
                if header.keys == 0 {
                    header.first_key = span_text(text, next.span())?;
                }
                header.keys += 1;
            }
            TokenKind::RightSquareBracket => break,
            _ => return None,
        }
        next = tokens.next()?;
    }
    if header.array && tokens.next()?.kind() != TokenKind::RightSquareBracket {
        return None;
    }
    Some(header)
}

fn span_text(text: &str, span: Span) -> Option<&str> {
    text.get(span.start()..span.end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    /// The file read as one document, the way every file was read before sections.
    fn whole(text: &str) -> Result<Config, String> {
        crate::raw::parse(text)
            .and_then(|raw| crate::validate::resolve(raw, text))
            .map_err(|e| e.to_string())
    }

    /// `count` jobs of every kind a file has: sub-tables, quoted values, comments, a
    /// multi-line text with header-like lines in it, and other tables between the jobs.
    fn jobs_file(count: usize) -> String {
        let mut text = String::from(
            "agents.max_running = 3 # a root key\n\n[model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\n",
        );
        for i in 0..count {
            text.push_str(&format!(
                "\n[[cron]] # job {i}\nname = \"job-{i}\"\nschedule = \"{} {} * * *\"\n",
                i % 60,
                i % 24
            ));
            match i % 5 {
                0 => text.push_str("tz = \"Europe/Paris\"\ntext = 'plain'\nmissed = \"all\"\n"),
                1 => text.push_str(&format!("[cron.action]\ntool = \"notify_owner\"\n[cron.action.args]\ntext = \"job {i}\"\nm = [\n[1, 2],\n  [3],\n]\n")),
                2 => text.push_str("text = \"\"\"\n[[cron]]\n[http]\nname = \"not a job\"\n\"\"\"\nurgency = \"queue\"\n"),
                3 => text.push_str("action = { tool = \"notify_owner\", args = { n = [1, 2,\n 3] } }\n"),
                _ => text.push_str("text = \"x\"\nenabled = false\nmax_lateness_secs = 60\n"),
            }
            if i == 100 {
                text.push_str("\n[http]\nlisten = \"127.0.0.1:0\"\n");
            }
            if i == 300 {
                text.push_str(
                    "\n[[webhook.routes]]\nname = \"gh\"\nauth = \"github\"\nsecret_env = \"GH\"\n",
                );
            }
        }
        text
    }

    #[test]
    fn many_jobs_read_in_sections_are_the_jobs_read_whole() {
        let text = jobs_file(MIN_TABLES + 300);
        let raw = parse(&text).expect("a plain file of many jobs is read in sections");
        let sectioned = crate::validate::resolve(raw, &text).unwrap();
        let whole = whole(&text).unwrap();
        assert_eq!(sectioned.cron.len(), MIN_TABLES + 300);
        assert_eq!(sectioned, whole);
        assert_eq!(Config::from_toml(&text, None).unwrap(), whole);
        let job = sectioned
            .cron
            .iter()
            .find(|job| job.name == "job-2")
            .unwrap();
        assert!(matches!(&job.what, crate::CronWhat::Text(t) if t.contains("not a job")));
    }

    #[test]
    fn small_files_and_files_the_sections_could_misread_are_read_whole() {
        let small = jobs_file(MIN_TABLES - 1);
        assert!(parse(&small).is_none());
        let many = jobs_file(MIN_TABLES);
        assert!(parse(&many).is_some());
        for (why, text) in [
            // Still the last job's sub-table, though another table came between.
            (
                "a job's sub-table after another table",
                format!(
                    "{many}\n[http]\nlisten = \"127.0.0.1:0\"\n[cron.action]\ntool = \"notify_owner\"\n"
                ),
            ),
            (
                "a quoted header key",
                format!(
                    "{many}\n[[\"cron\"]]\nname = \"quoted\"\nschedule = \"0 9 * * *\"\ntext = \"q\"\n"
                ),
            ),
            ("a root key named cron", format!("cron = []\n{many}")),
            ("cron as a plain table", format!("{many}\n[cron]\n")),
            ("a syntax error", format!("{many}\nname = = 1\n")),
        ] {
            assert!(parse(&text).is_none(), "{why}: read in sections");
            assert_eq!(
                Config::from_toml(&text, None).map_err(|e| e.to_string()),
                whole(&text),
                "{why}"
            );
        }
    }

    /// Any mistake in a large file is reported as it was before sections: same key, same line.
    #[test]
    fn errors_in_a_file_of_many_jobs_name_the_same_key_and_line() {
        let many = jobs_file(MIN_TABLES + 100);
        for (job, from, to, key) in [
            (
                450,
                "missed = \"all\"",
                "missed = \"sometimes\"",
                "cron[450].missed",
            ),
            (
                520,
                "name = \"job-520\"",
                "name = \"job-519\"",
                "cron[520].name",
            ),
            (
                4,
                "enabled = false\n",
                "enabled = false\nnmae = 1\n",
                "cron[4].nmae",
            ),
            (
                600,
                "name = \"job-600\"\n",
                "name = \"job-600\"\nname = \"twice\"\n",
                "name",
            ),
        ] {
            let at = many.find(&format!("name = \"job-{job}\"")).unwrap();
            let (before, after) = many.split_at(at);
            let text = format!("{before}{}", after.replacen(from, to, 1));
            assert_ne!(text, many, "{key}: the mistake was not written");
            let error = Config::from_toml(&text, None).unwrap_err().to_string();
            assert_eq!(Err(error.clone()), whole(&text));
            assert!(error.contains(key), "{key} not in {error}");
            let changed = text
                .bytes()
                .zip(many.bytes())
                .position(|(a, b)| a != b)
                .unwrap();
            let line = text.get(..changed).unwrap().matches('\n').count() + 1;
            assert!(
                error.starts_with(&format!("config:{line}: ")),
                "not line {line}: {error}"
            );
        }
    }

    /// Text that could make the sections mean something else than the whole file, written
    /// at random places in a file of many jobs: whatever comes of it — a config or an error —
    /// is what reading the file whole gives.
    #[test]
    fn anything_written_anywhere_reads_as_the_whole_file_reads() {
        const SNIPPETS: &[&str] = &[
            "[[cron]]\n",
            "[cron]\n",
            "[cron.action]\n",
            "[[cron.x]]\n",
            "[http]\n",
            "[ cron ]\n",
            "[[ cron ]] # c\n",
            "[[\"cron\"]]\n",
            "['cron'.action]\n",
            "cron = []\n",
            "cron.x = 1\n",
            "\"cron\" = 1\n",
            "a = [\n",
            "]\n",
            "]]\n",
            "}\n",
            "b = {\n",
            "\"\"\"\n",
            "'''\n",
            "x = \"\"\"\n[[cron]]\n\"\"\"\n",
            "# [[cron]]\n",
            "\n",
            "name = \"dup\"\n",
            "text = \"t\"\n",
            "schedule = \"0 9 * * *\"\n",
            "[[webhook.routes]]\n",
            "[[cron]\n",
            "[cron]]\n",
            "= 1\n",
            "[a.cron]\n",
            "[[cron]]\nname = \"extra\"\nschedule = \"0 9 * * *\"\ntext = \"e\"\n",
        ];
        // What a user may well write between the jobs: the file stays valid.
        const HARMLESS: &[&str] = &[
            "# [[cron]]\n",
            "\n",
            "  # [cron]\n",
            "[http]\nlisten = \"127.0.0.1:0\"\n",
            "[[webhook.routes]]\nname = \"r\"\nauth = \"github\"\nsecret_env = \"R\"\n",
        ];
        let many = jobs_file(MIN_TABLES + 4);
        let lines: Vec<&str> = many.split_inclusive('\n').collect();
        let mut seed: u64 = 0x5eed;
        let mut next = |bound: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % bound
        };
        let (mut sectioned, mut refused) = (0, 0);
        for _ in 0..150 {
            let mut edited = lines.clone();
            for _ in 0..1 + next(3) {
                let at = next(edited.len() + 1);
                let snippets = if next(2) == 0 { SNIPPETS } else { HARMLESS };
                edited.insert(at, snippets[next(snippets.len())]);
            }
            let text = edited.concat();
            let read = Config::from_toml(&text, None).map_err(|e| e.to_string());
            assert_eq!(read, whole(&text), "in:\n{text}");
            match read {
                Ok(_) => sectioned += usize::from(parse(&text).is_some()),
                Err(_) => refused += 1,
            }
        }
        assert!(
            sectioned > 20 && refused > 20,
            "{sectioned} read in sections, {refused} errors"
        );
    }
}
