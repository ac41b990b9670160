//! A file with many `[[cron]]` tables read in sections rather than as one document.
//!
//! toml reads a document by first collecting every token and every parser event of the whole
//! file, then building a map for each table; for 10,000 `[[cron]]` tables that was ~40 ms of
//! the start before READY and a ~40 MB peak, most of it page faults and vectors copied as
//! they doubled (measured 2026-12-06, see BENCHMARKS.md). Read in batches of
//! [`TABLES_PER_BATCH`] jobs, the same work stays in memory the allocator has just freed.
//!
//! The file is cut at its table headers, found by toml's own parser (a line that looks like a
//! header inside a multi-line string is not one). Each `[[cron]]` table runs from its header
//! to the next header that is not one of its sub-tables (`[cron.action]`); everything else is
//! read as one document. The sections are used only when they cannot mean anything else than
//! the whole file means; otherwise [`parse`] returns `None` and the caller reads the whole
//! file as before:
//! - fewer than [`MIN_TABLES`] jobs (small files keep the one path every file used to take);
//! - a syntax error anywhere, or a header key written in quotes (`["cron"]` is `[cron]`);
//! - `cron` as anything but an array of tables: `[cron]`, a root key `cron = …`, or a
//!   `[cron.x]` sub-table that is not directly after its `[[cron]]` table.
//!
//! Spans inside a batch count from the batch, not the file, so a section's values are right
//! and their lines are not: the caller uses the result only when it also validates, and reads
//! the whole file again for any error, so every error names the same key and line either way.

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use toml_parser::parser::EventReceiver;
use toml_parser::{ErrorSink, Source, Span};

use crate::raw::{RawConfig, RawCronJob};

/// Files with fewer jobs are read as one document.
pub(crate) const MIN_TABLES: usize = 512;
/// Jobs read as one document at a time.
pub(crate) const TABLES_PER_BATCH: usize = 256;

/// The file's values read section by section, or `None` when it must be read whole (see the
/// module docs).
pub(crate) fn parse(text: &str) -> Option<RawConfig> {
    let layout = Layout::of(text)?;
    if layout.jobs.len() < MIN_TABLES {
        return None;
    }
    let mut raw = RawConfig::deserialize(toml::Deserializer::parse(&layout.rest).ok()?).ok()?;
    for batch in layout.jobs.chunks(TABLES_PER_BATCH) {
        let batch_text = joined(text, batch)?;
        let jobs = JobsOnly::deserialize(toml::Deserializer::parse(&batch_text).ok()?).ok()?;
        raw.cron.extend(jobs.cron);
    }
    Some(raw)
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
        // Room for a token every two bytes: `Lexer::into_vec` guesses fewer for a file of
        // short job tables and copies the whole vector as it grows.
        let mut tokens = Vec::with_capacity(text.len() / 2 + 16);
        tokens.extend(Source::new(text).lex());
        let mut scan = Scan::new(text);
        let mut error = None;
        toml_parser::parser::parse_document(&tokens, &mut scan, &mut error);
        if error.is_some() || scan.unsure {
            return None;
        }
        let mut layout = Self {
            jobs: Vec::new(),
            rest: String::new(),
        };
        // The section being read: where it starts, and whether it is a job table.
        let mut section = (0, false);
        for header in &scan.headers {
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

/// Collects the headers from toml's parser events, and the first key of each key/value
/// pair written before the first header (the root table's own keys).
struct Scan<'t> {
    text: &'t str,
    headers: Vec<Header<'t>>,
    in_header: bool,
    /// Arrays and inline tables open around the current value.
    depth: usize,
    /// The next key at depth 0 starts a key/value pair.
    line_start: bool,
    /// Something was written that the sections could read differently from the whole file.
    unsure: bool,
}

impl<'t> Scan<'t> {
    fn new(text: &'t str) -> Self {
        Self {
            text,
            headers: Vec::new(),
            in_header: false,
            depth: 0,
            line_start: true,
            unsure: false,
        }
    }

    fn open_header(&mut self, span: Span, array: bool) {
        self.in_header = true;
        self.headers.push(Header {
            start: span.start(),
            array,
            first_key: "",
            keys: 0,
        });
    }

    /// A key written bare, or `None` for a quoted one (which may spell `cron` another way).
    fn bare_key(
        &self,
        span: Span,
        encoding: Option<toml_parser::decoder::Encoding>,
    ) -> Option<&'t str> {
        match encoding {
            None => self.text.get(span.start()..span.end()),
            Some(_) => None,
        }
    }
}

impl EventReceiver for Scan<'_> {
    fn std_table_open(&mut self, span: Span, _error: &mut dyn ErrorSink) {
        self.open_header(span, false);
    }
    fn std_table_close(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.in_header = false;
    }
    fn array_table_open(&mut self, span: Span, _error: &mut dyn ErrorSink) {
        self.open_header(span, true);
    }
    fn array_table_close(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.in_header = false;
    }
    fn inline_table_open(&mut self, _span: Span, _error: &mut dyn ErrorSink) -> bool {
        self.depth += 1;
        true
    }
    fn inline_table_close(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.depth = self.depth.saturating_sub(1);
    }
    fn array_open(&mut self, _span: Span, _error: &mut dyn ErrorSink) -> bool {
        self.depth += 1;
        true
    }
    fn array_close(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.depth = self.depth.saturating_sub(1);
    }
    fn simple_key(
        &mut self,
        span: Span,
        encoding: Option<toml_parser::decoder::Encoding>,
        _error: &mut dyn ErrorSink,
    ) {
        let key = self.bare_key(span, encoding);
        if self.in_header {
            match (key, self.headers.last_mut()) {
                (Some(key), Some(header)) => {
                    if header.keys == 0 {
                        header.first_key = key;
                    }
                    header.keys += 1;
                }
                _ => self.unsure = true,
            }
        } else if self.headers.is_empty() && self.depth == 0 && self.line_start {
            self.line_start = false;
            if key.is_none_or(|key| key == "cron") {
                self.unsure = true;
            }
        }
    }
    fn key_val_sep(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.line_start = false;
    }
    fn newline(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        if self.depth == 0 {
            self.line_start = true;
        }
    }
    fn error(&mut self, _span: Span, _error: &mut dyn ErrorSink) {
        self.unsure = true;
    }
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
                1 => text.push_str(&format!("[cron.action]\ntool = \"notify_owner\"\n[cron.action.args]\ntext = \"job {i}\"\n")),
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
}
