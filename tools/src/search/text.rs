//! Text to search terms: tool names split on `_`, `-`, `.`, camelCase and digit boundaries
//! (`getPM2_5Level` → get, pm, 2, 5, level), everything lower-cased, common English words
//! dropped, and a light stemmer so that "files"/"file" and "searching"/"search" meet. Text
//! in CJK scripts has no spaces; it is indexed as overlapping character pairs.

/// Words too common in requests and descriptions to tell tools apart.
const STOP_WORDS: &[&str] = &[
    "a", "about", "also", "an", "and", "any", "are", "as", "at", "be", "been", "by", "can",
    "could", "do", "does", "for", "from", "get", "give", "has", "have", "help", "how", "i", "if",
    "in", "into", "is", "it", "its", "let", "like", "me", "my", "need", "of", "on", "or", "our",
    "please", "provide", "should", "so", "some", "that", "the", "their", "them", "then", "there",
    "these", "this", "to", "us", "use", "using", "want", "was", "we", "what", "when", "which",
    "while", "who", "will", "with", "would", "you", "your",
];

/// The terms of free text (a query, a description).
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in words(text) {
        push_term(&mut out, &word);
    }
    out
}

/// Most distinct terms a query is ranked by. A query is a request of a few words; a pasted
/// blob (18 KB of base64 makes thousands of terms) costs a posting walk per term, so only
/// the first terms count and any query stays well under a millisecond.
pub const MAX_QUERY_TERMS: usize = 64;
/// Only the start of a longer query is read for its terms (a request of 64 distinct words
/// is far shorter).
pub const MAX_QUERY_CHARS: usize = 2048;

/// A query's distinct terms, first seen first, at most [`MAX_QUERY_TERMS`], from its first
/// [`MAX_QUERY_CHARS`] characters.
pub fn query_terms(text: &str) -> Vec<String> {
    let head = head(text, MAX_QUERY_CHARS);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for word in words(head) {
        let mut pushed = Vec::new();
        push_term(&mut pushed, &word);
        for term in pushed {
            if seen.insert(term.clone()) {
                out.push(term);
                if out.len() == MAX_QUERY_TERMS {
                    return out;
                }
            }
        }
    }
    out
}

/// The first `chars` characters of `text`.
pub fn head(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((end, _)) => text.get(..end).unwrap_or(text),
        None => text,
    }
}

/// The terms of an identifier (a tool, server or parameter name).
pub fn name_terms(name: &str) -> Vec<String> {
    terms(name)
}

/// A tool name split into its lower-cased parts, without stemming or stop words: what a
/// `+term` query must match.
pub fn name_parts(name: &str) -> Vec<String> {
    words(name)
}

fn push_term(out: &mut Vec<String>, word: &str) {
    if word.chars().next().is_some_and(is_cjk) {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() == 1 {
            out.push(word.to_owned());
        }
        for pair in chars.windows(2) {
            out.push(pair.iter().collect());
        }
        return;
    }
    if STOP_WORDS.binary_search(&word).is_ok() {
        return;
    }
    out.push(stem(word));
}

/// Lower-cased words: split at non-alphanumerics, lower→upper case changes, the end of an
/// acronym (`PMLevel` → pm, level), letter↔digit changes, and script changes (CJK runs are
/// words of their own).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut current = String::new();
    let flush = |current: &mut String, out: &mut Vec<String>| {
        if !current.is_empty() {
            out.push(std::mem::take(current).to_lowercase());
        }
    };
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut current, &mut out);
            continue;
        }
        if let Some(&prev) = i.checked_sub(1).and_then(|p| chars.get(p))
            && prev.is_alphanumeric()
        {
            let next = chars.get(i + 1).copied();
            let boundary = (prev.is_lowercase() && c.is_uppercase())
                || (prev.is_uppercase()
                    && c.is_uppercase()
                    && next.is_some_and(char::is_lowercase))
                || (prev.is_ascii_digit() != c.is_ascii_digit())
                || (is_cjk(prev) != is_cjk(c));
            if boundary {
                flush(&mut current, &mut out);
            }
        }
        current.push(c);
    }
    flush(&mut current, &mut out);
    out
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30ff | 0x3400..=0x4dbf | 0x4e00..=0x9fff | 0xac00..=0xd7af | 0xf900..=0xfaff)
}

/// A light suffix stripper (not Porter): plurals, -ing, -ed, -ies, and a final silent
/// `e` (so "message", "messages" and "messaging" meet); it only needs to map the common
/// inflections of one word to one term.
pub fn stem(word: &str) -> String {
    let mut stem = strip_inflection(word);
    if stem.len() > 4 && stem.ends_with('e') && !stem.ends_with("ee") {
        stem.pop();
    }
    stem
}

fn strip_inflection(word: &str) -> String {
    let n = word.len();
    if n <= 3 || !word.is_ascii() {
        return word.to_owned();
    }
    let strip = |suffix: &str, keep: usize| -> Option<String> {
        word.strip_suffix(suffix)
            .filter(|rest| rest.len() >= keep)
            .map(str::to_owned)
    };
    if let Some(rest) = strip("ies", 2) {
        return rest + "y";
    }
    if let Some(rest) = strip("sses", 2) {
        return rest + "ss";
    }
    if let Some(rest) = strip("ing", 3) {
        return undouble(rest);
    }
    if let Some(rest) = strip("ed", 3) {
        return undouble(rest);
    }
    if word.ends_with("ss") || word.ends_with("us") || word.ends_with("is") {
        return word.to_owned();
    }
    if let Some(rest) = strip("es", 3)
        .filter(|r| r.ends_with('x') || r.ends_with("ch") || r.ends_with("sh") || r.ends_with('s'))
    {
        return rest;
    }
    if let Some(rest) = strip("s", 3) {
        return rest;
    }
    word.to_owned()
}

/// "stopp" → "stop", "shipp" → "ship": the consonant doubled before -ing/-ed.
fn undouble(mut stem: String) -> String {
    let bytes = stem.as_bytes();
    let n = bytes.len();
    if n >= 2 && bytes[n - 1] == bytes[n - 2] && !b"lsz".contains(&bytes[n - 1]) {
        stem.pop();
    }
    stem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_counts_its_first_distinct_terms_only() {
        assert_eq!(
            query_terms("send the email, send it now"),
            ["send", "email", "now"]
        );
        let blob: String = (0..20_000u32)
            .map(|i| {
                char::from(
                    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                        [(i.wrapping_mul(2_654_435_761) >> 26) as usize],
                )
            })
            .collect();
        let terms = query_terms(&blob);
        assert!(terms.len() <= MAX_QUERY_TERMS, "{}", terms.len());
        assert!(!terms.is_empty());
        let long = format!("{} weather", "é".repeat(5000));
        assert!(
            !query_terms(&long).contains(&"weather".to_owned()),
            "only the head is read"
        );
    }

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn names_split_on_every_kind_of_boundary() {
        let table = [
            ("fs_read", vec!["fs", "read"]),
            ("web-fetch", vec!["web", "fetch"]),
            ("getPM2_5Level", vec!["get", "pm", "2", "5", "level"]),
            ("PDF_URLTool", vec!["pdf", "url", "tool"]),
            ("HTMLParser", vec!["html", "parser"]),
            (
                "ytstream_download_youtube_videos",
                vec!["ytstream", "download", "youtube", "videos"],
            ),
            ("mcp.server.list", vec!["mcp", "server", "list"]),
            ("bing搜索", vec!["bing", "搜索"]),
            ("already", vec!["already"]),
        ];
        for (name, parts) in table {
            assert_eq!(name_parts(name), parts, "{name}");
        }
    }

    #[test]
    fn inflections_meet_at_one_term() {
        let table = [
            ("files", "file"),
            ("searching", "search"),
            ("stopped", "stop"),
            ("queries", "query"),
            ("addresses", "address"),
            ("boxes", "box"),
            ("status", "status"),
            ("analysis", "analysis"),
            ("reply", "reply"),
            ("message", "messag"),
            ("messaging", "messag"),
            ("free", "free"),
            ("bus", "bus"),
        ];
        for (word, stemmed) in table {
            assert_eq!(stem(word), stemmed, "{word}");
        }
    }

    #[test]
    fn free_text_drops_stop_words_and_pairs_cjk() {
        assert_eq!(
            terms("Please help me find the weather in Paris"),
            ["find", "weather", "paris"]
        );
        assert_eq!(terms("必应搜索"), ["必应", "应搜", "搜索"]);
    }
}
