//! The assistant's Markdown as Telegram HTML (`parse_mode: HTML`), in parts Telegram takes.
//!
//! Decided here:
//! - Only the tags Telegram knows are written (`b`, `i`, `s`, `code`, `pre`, `a`); every
//!   `<`, `>`, `&` of the text is escaped, and `"` too inside an `href`, so that no text can
//!   break the markup (Telegram refuses a whole message whose HTML does not parse).
//! - Converted: fenced code blocks, `inline code`, `**bold**`, `*italic*`, `_italic_` at
//!   word edges (not inside `snake_case`), `~~strike~~`, `[text](url)` and `# headings` (bold).
//!   Anything else stays as written.
//! - A message is cut into parts of at most [`MAX_PART_UNITS`] UTF-16 code units of its
//!   Markdown (Telegram's limit of 4,096 counts the text after the markup is parsed, which is
//!   never longer than the Markdown), after a line break where one is in the part's second
//!   half; a code block cut in two is closed and opened again.

/// Telegram's limit for one message's text, in UTF-16 code units.
pub const MAX_PART_UNITS: usize = 4096;

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// Plain text, escaped (for messages the channel writes itself).
pub fn plain(text: &str) -> String {
    escape(text)
}

/// One part of Markdown as Telegram HTML.
pub fn to_html(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() + 32);
    let mut in_code = false;
    let mut first = true;
    for line in markdown.split('\n') {
        let fence = line.trim_start().starts_with("```");
        if fence && in_code {
            out.push_str("</code></pre>");
            in_code = false;
            continue;
        }
        if !first && !out.ends_with("<pre><code>") {
            out.push('\n');
        }
        first = false;
        if fence {
            out.push_str("<pre><code>");
            in_code = true;
        } else if in_code {
            out.push_str(&escape(line));
        } else if let Some(heading) = heading(line) {
            out.push_str(&format!("<b>{}</b>", inline(heading)));
        } else {
            out.push_str(&inline(line));
        }
    }
    if in_code {
        out.push_str("</code></pre>");
    }
    out
}

/// The text of a `#`…`######` heading line.
fn heading(line: &str) -> Option<&str> {
    let rest = line.trim_start_matches('#');
    let level = line.len() - rest.len();
    ((1..=6).contains(&level) && rest.starts_with(' ')).then(|| rest.trim())
}

/// Inline Markdown of one line.
fn inline(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let rest = chars.get(i..).unwrap_or_default();
        let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
        let span = match c {
            '`' => closing(rest, "`").map(|end| (1, end, 1, "code")),
            '*' if rest.starts_with(&['*', '*']) => closing(rest, "**").map(|e| (2, e, 2, "b")),
            '~' if rest.starts_with(&['~', '~']) => closing(rest, "~~").map(|e| (2, e, 2, "s")),
            '*' => closing(rest, "*").map(|e| (1, e, 1, "i")),
            '_' if prev.is_none_or(|p| !p.is_alphanumeric()) => closing(rest, "_")
                .filter(|end| {
                    rest.get(end + 1)
                        .is_none_or(|after| !after.is_alphanumeric())
                })
                .map(|e| (1, e, 1, "i")),
            '[' => link(rest).map(|(text_end, url_end)| (1, text_end, url_end - text_end, "a")),
            _ => None,
        };
        match span {
            Some((open, end, close, tag)) => {
                let inner: String = rest.get(open..end).unwrap_or_default().iter().collect();
                if tag == "a" {
                    let url: String = rest
                        .get(end + 2..end + close)
                        .unwrap_or_default()
                        .iter()
                        .collect();
                    out.push_str(&format!(
                        "<a href=\"{}\">{}</a>",
                        escape(&url),
                        inline(&inner)
                    ));
                    i += end + close + 1;
                    continue;
                }
                let body = if tag == "code" {
                    escape(&inner)
                } else {
                    inline(&inner)
                };
                out.push_str(&format!("<{tag}>{body}</{tag}>"));
                i += end + close;
            }
            None => {
                out.push_str(&escape(&c.to_string()));
                i += 1;
            }
        }
    }
    out
}

/// Where the closing `marker` of a span opened at the start of `rest` is (index into
/// `rest`), when there is one with something between.
fn closing(rest: &[char], marker: &str) -> Option<usize> {
    let marker: Vec<char> = marker.chars().collect();
    let open = marker.len();
    let first = rest.get(open)?;
    if first.is_whitespace() {
        return None;
    }
    (open + 1..rest.len()).find(|&at| {
        rest.get(at..at + marker.len()) == Some(marker.as_slice())
            && rest.get(at - 1).is_some_and(|c| !c.is_whitespace())
    })
}

/// `[text](url)` at the start of `rest`: the index of `]` and of `)`.
fn link(rest: &[char]) -> Option<(usize, usize)> {
    let text_end = rest.iter().position(|c| *c == ']')?;
    if text_end < 2 || rest.get(text_end + 1) != Some(&'(') {
        return None;
    }
    let url_end = text_end + 1 + rest.get(text_end + 1..)?.iter().position(|c| *c == ')')?;
    let url: String = rest.get(text_end + 2..url_end)?.iter().collect();
    let safe = ["https://", "http://", "mailto:", "tg://"]
        .iter()
        .any(|scheme| url.starts_with(scheme));
    (safe && !url.contains(char::is_whitespace)).then_some((text_end, url_end))
}

/// `text` in parts of at most `max` UTF-16 units (see the module docs).
pub fn split(text: &str, max: usize) -> Vec<String> {
    // Room for a fence closed at the end of a part and opened at the start of the next.
    let budget = max.saturating_sub(8).max(16);
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut units = 0;
    let mut in_code = false;
    for line in text.split_inclusive('\n') {
        let mut line = line;
        loop {
            let line_units = line.encode_utf16().count();
            if units + line_units <= budget {
                current.push_str(line);
                units += line_units;
                break;
            }
            // Only what a part was opened with (nothing, or a code fence reopened).
            let fresh = current.is_empty() || current == "```\n";
            if !fresh && (units > budget / 2 || line_units <= budget) {
                // Cut before this line.
                close_part(&mut parts, &mut current, &mut units, in_code);
                continue;
            }
            // A line longer than a part: cut it at a character boundary.
            let mut taken = 0;
            let cut = line
                .char_indices()
                .find(|(_, c)| {
                    taken += c.len_utf16();
                    units + taken > budget
                })
                .map_or(line.len(), |(at, _)| at);
            let (head, tail) = line.split_at(cut);
            current.push_str(head);
            units += head.encode_utf16().count();
            close_part(&mut parts, &mut current, &mut units, in_code);
            line = tail;
        }
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
    }
    if !current.is_empty() || parts.is_empty() {
        parts.push(current);
    }
    parts
}

/// Ends the part being built (closing an open code block) and starts the next.
fn close_part(parts: &mut Vec<String>, current: &mut String, units: &mut usize, in_code: bool) {
    let mut part = std::mem::take(current);
    if in_code {
        if !part.ends_with('\n') {
            part.push('\n');
        }
        part.push_str("```");
        current.push_str("```\n");
    }
    parts.push(part);
    *units = current.encode_utf16().count();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_the_html_telegram_takes_and_text_is_escaped() {
        let table = [
            ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
            ("**bold** and *it*", "<b>bold</b> and <i>it</i>"),
            ("`x<y>` code", "<code>x&lt;y&gt;</code> code"),
            ("snake_case_name stays", "snake_case_name stays"),
            ("_quiet_ please", "<i>quiet</i> please"),
            ("~~gone~~", "<s>gone</s>"),
            ("2 * 3 * 4", "2 * 3 * 4"),
            (
                "[docs](https://x.org/?a=1&b=\"2\")",
                "<a href=\"https://x.org/?a=1&amp;b=&quot;2&quot;\">docs</a>",
            ),
            ("[bad](javascript:alert(1))", "[bad](javascript:alert(1))"),
            ("# Title", "<b>Title</b>"),
            ("#hashtag", "#hashtag"),
            (
                "before\n```\nlet x = a<b;\n```\nafter",
                "before\n<pre><code>let x = a&lt;b;</code></pre>\nafter",
            ),
            ("**unclosed", "**unclosed"),
        ];
        for (markdown, html) in table {
            assert_eq!(to_html(markdown), html, "{markdown:?}");
        }
        assert_eq!(plain("<b>&"), "&lt;b&gt;&amp;");
    }

    #[test]
    fn long_text_is_cut_at_lines_within_the_limit_and_code_blocks_stay_closed() {
        let lines = "line\n".repeat(3000);
        let parts = split(&lines, MAX_PART_UNITS);
        assert!(parts.len() >= 4, "{}", parts.len());
        assert!(
            parts
                .iter()
                .all(|p| p.encode_utf16().count() <= MAX_PART_UNITS)
        );
        assert!(parts.iter().all(|p| p.ends_with('\n')));
        assert_eq!(parts.concat(), lines);

        // Emoji count two units each.
        let wide = "😀".repeat(3000);
        let parts = split(&wide, MAX_PART_UNITS);
        assert!(
            parts
                .iter()
                .all(|p| p.encode_utf16().count() <= MAX_PART_UNITS)
        );
        assert_eq!(parts.concat(), wide);

        let code = format!("```\n{}```\n", "code line\n".repeat(1000));
        let parts = split(&code, MAX_PART_UNITS);
        assert!(parts.len() >= 3);
        for part in &parts {
            assert_eq!(part.matches("```").count(), 2, "{part:.40}…");
            assert!(
                to_html(part).ends_with("</code></pre>\n")
                    || to_html(part).ends_with("</code></pre>")
            );
        }
        assert_eq!(split("", MAX_PART_UNITS), [""]);
        assert_eq!(split("short", MAX_PART_UNITS), ["short"]);
    }
}
