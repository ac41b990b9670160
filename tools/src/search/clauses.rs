//! Requests that ask for several things. "Check the availability of rooms at the Hilton.
//! Then retrieve the usage statistics of the library. Finally, I need the return
//! instructions for my order." needs three tools; ranked as one text, the tools that match
//! its wordiest part fill the first places and the others fall below the fifth. So each
//! sentence of a request is also ranked on its own, and a tool that is the best match of
//! some sentence gains a bonus: every part of the request gets a tool near the top.
//!
//! Decisions, each measured on the dev queries with the WordLlama model (cold R@5):
//! - Only with the semantic channel: without a model the ranking stays BM25F alone.
//! - A part is a sentence (ending in `.`, `?`, `!` or `;` before a space or the end).
//!   Cutting further at ", and" / ", then" was worse (sealtools 0.951 → 0.949).
//! - A sentence of fewer than [`MIN_TERMS`] terms ("Thank you.") is not a part; at most
//!   [`MAX_CLAUSES`] sentences are read, which bounds the cost of any request.
//! - The request is tokenized once: its vector is the sum of its sentences' token sums.
//! - Only the [`CANDIDATES`] best tools of the whole request are scored again: the same
//!   recall as scoring every tool (sealtools 0.950 at 60, 100, 200 or all), and a sentence
//!   costs a hundred dot products instead of one per tool, and BM25F arithmetic only for
//!   the postings of candidates.
//! - The bonus is `clause_bonus × (score / the sentence's best)^`[`PEAK`]: the best match
//!   of a sentence gains it in full, its runners-up little, so a sentence with a clear
//!   winner lifts one tool rather than a family of near-synonyms. A sentence is fused with
//!   a fixed semantic share (`clause_semantic`) rather than by lexical confidence.
//! - Hard places (the best of each sentence first) were measured worse than a bonus: a
//!   preamble ("I need help with my research.") has a best match too, and it took a place
//!   from a tool the whole request ranked well (livemcpbench 0.424 → 0.413).
//! - The weights sit on a plateau: sealtools 0.951–0.953 for `clause_bonus` 0.3–0.45,
//!   `clause_semantic` 0.3–0.6, exponents 2–8, 100 or 200 candidates.
//!
//! Effect, dev R@5 cold: sealtools 0.916 → 0.953, toolbench 0.718 → 0.735, metatool 0.742
//! → 0.740, livemcpbench 0.424 → 0.418. The cost is sealtools' (requests of three to six
//! sentences, 4,076 tools): p99 0.70–0.77 → 0.96–1.17 ms in two A/B runs, brought back to
//! 0.48 ms by precomputed BM25F weights and a shortlisted semantic pass (BENCHMARKS.md).

use super::semantic::{self, SemanticIndex};
use super::{SearchIndex, text};

/// Most sentences of a request that are ranked on their own.
const MAX_CLAUSES: usize = 8;
/// Fewer terms than this and a sentence is not a part of the request.
const MIN_TERMS: usize = 2;
/// How many of the whole request's best tools each sentence scores again.
const CANDIDATES: usize = 100;
/// The exponent that keeps the bonus for a sentence's clear best (see the module docs).
const PEAK: i32 = 8;

/// The sentences of a request's head, at most [`MAX_CLAUSES`], trimmed, without empty ones.
pub(super) fn clauses(text: &str) -> Vec<&str> {
    let head = text::head(text, text::MAX_QUERY_CHARS);
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = head.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let at_end = chars.peek().is_none_or(|(_, next)| next.is_whitespace());
        if matches!(c, '.' | '?' | '!' | ';') && at_end {
            let end = i + c.len_utf8();
            out.extend(
                head.get(start..end)
                    .map(str::trim)
                    .filter(|s| !s.is_empty()),
            );
            start = end;
        }
    }
    out.extend(head.get(start..).map(str::trim).filter(|s| !s.is_empty()));
    out.truncate(MAX_CLAUSES);
    out
}

/// One sentence of a request: its terms and its token sum.
#[derive(Debug)]
pub(super) struct Part {
    terms: Vec<String>,
    sum: Vec<f32>,
}

impl Part {
    /// The sentences of `text`, each tokenized once: the request's own vector is their sum
    /// ([`Part::whole`]), so cutting it costs no second tokenization. A request of one
    /// sentence gets no terms: it is not re-scored.
    pub(super) fn all(semantic: &SemanticIndex, text: &str) -> Vec<Self> {
        let sentences = clauses(text);
        let several = sentences.len() >= 2;
        sentences
            .into_iter()
            .map(|clause| Self {
                terms: if several {
                    text::query_terms(clause)
                } else {
                    Vec::new()
                },
                sum: semantic.query_sum(clause),
            })
            .collect()
    }

    /// The request's vector: the sum of its sentences' (each read up to
    /// `semantic::QUERY_CHARS`, so a long request is read further than as one text).
    pub(super) fn whole(parts: &[Self]) -> Vec<f32> {
        let mut whole = parts.first().map(|p| p.sum.clone()).unwrap_or_default();
        for part in parts.iter().skip(1) {
            for (w, x) in whole.iter_mut().zip(&part.sum) {
                *w += x;
            }
        }
        whole
    }
}

impl SearchIndex {
    /// Adds to `scores` (the whole request's fused scores) each candidate's bonus for being
    /// the best match of one of the request's sentences. A request of one sentence is left
    /// as it is.
    pub(super) fn add_clause_bonus(
        &self,
        semantic: &SemanticIndex,
        scores: &mut [f32],
        parts: &[Part],
    ) {
        if parts.len() < 2 {
            return;
        }
        let best = scores.iter().copied().fold(0f32, f32::max);
        if best <= 0.0 {
            return;
        }
        let candidates = Candidates::new(best_docs(scores, CANDIDATES), self.len());
        let mut bonus = vec![0f32; candidates.docs.len()];
        for part in parts.iter().filter(|p| p.terms.len() >= MIN_TERMS) {
            let mut fused = self.lexical_among(&part.terms, &candidates);
            let similarities = semantic.similarities_among(&part.sum, &candidates.docs);
            semantic::fuse(&mut fused, &similarities, self.weights.clause_semantic);
            let top = fused.iter().copied().fold(0f32, f32::max);
            if top <= 0.0 {
                continue;
            }
            for (gained, score) in bonus.iter_mut().zip(&fused) {
                *gained = gained.max((score / top).powi(PEAK));
            }
        }
        for (doc, gained) in candidates.docs.into_iter().zip(bonus) {
            if let Some(score) = scores.get_mut(doc) {
                *score += best * self.weights.clause_bonus * gained;
            }
        }
    }

    /// BM25F scores of the candidates alone, in their order, with the server share taken
    /// among them: a walk over the postings that only looks up whether each posting is a
    /// candidate (a binary search per candidate and term was measured slower: sealtools
    /// p99 1.0–1.1 ms against 0.76 in the same spell).
    fn lexical_among(&self, terms: &[String], candidates: &Candidates) -> Vec<f32> {
        let mut scores = vec![0f32; candidates.docs.len()];
        for postings in terms.iter().filter_map(|term| self.postings.get(term)) {
            let idf = self.idf(postings.len());
            for posting in postings {
                if let Some(score) = candidates
                    .slot
                    .get(posting.doc as usize)
                    .and_then(|&slot| scores.get_mut(slot as usize))
                {
                    *score += idf * posting.tf;
                }
            }
        }
        self.add_server_share(&mut scores, candidates.docs.iter().copied());
        scores
    }
}

/// The tools a request's sentences score again: their indexes, and for every tool its place
/// among them (`u32::MAX` for the others), built once per request.
struct Candidates {
    docs: Vec<usize>,
    slot: Vec<u32>,
}

impl Candidates {
    fn new(docs: Vec<usize>, tools: usize) -> Self {
        let mut slot = vec![u32::MAX; tools];
        for (place, &doc) in docs.iter().enumerate() {
            if let Some(s) = slot.get_mut(doc) {
                *s = place as u32;
            }
        }
        Self { docs, slot }
    }
}

/// The indexes of the `n` highest scores, in no particular order.
fn best_docs(scores: &[f32], n: usize) -> Vec<usize> {
    let mut docs: Vec<usize> = (0..scores.len()).collect();
    if docs.len() > n {
        let by_score = |a: &usize, b: &usize| {
            let (x, y) = (scores.get(*a), scores.get(*b));
            y.zip(x)
                .map_or(std::cmp::Ordering::Equal, |(y, x)| y.total_cmp(x))
        };
        docs.select_nth_unstable_by(n, by_score);
        docs.truncate(n);
    }
    docs
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::search::{Embedder, SearchDoc, Weights, parse_query};

    #[test]
    fn a_request_is_cut_into_its_sentences() {
        let table: Vec<(&str, Vec<&str>)> = vec![
            ("weather in Paris", vec!["weather in Paris"]),
            (
                "Check the weather. Then send a mail!  Is it late?",
                vec!["Check the weather.", "Then send a mail!", "Is it late?"],
            ),
            ("a; b", vec!["a;", "b"]),
            // A dot inside a word or a number is not the end of a sentence.
            (
                "Read config.toml and version 1.2 now",
                vec!["Read config.toml and version 1.2 now"],
            ),
            ("Done...  ", vec!["Done..."]),
            ("", vec![]),
            ("Où est-il ? Là.", vec!["Où est-il ?", "Là."]),
        ];
        for (text, expected) in table {
            assert_eq!(clauses(text), expected, "{text:?}");
        }
        let many = "Do it. ".repeat(20);
        assert_eq!(clauses(&many).len(), MAX_CLAUSES);
    }

    /// An embedder that knows no word: every vector is zero, so what the test shows is
    /// the clause bonus itself, not meaning.
    #[derive(Debug)]
    struct Blind;

    impl Embedder for Blind {
        fn dims(&self) -> usize {
            4
        }
        fn token_sum(&self, _text: &str) -> Vec<f32> {
            vec![0.0; 4]
        }
    }

    fn doc(name: &str, description: &str) -> SearchDoc {
        SearchDoc {
            name: name.into(),
            description: description.into(),
            ..SearchDoc::default()
        }
    }

    #[test]
    fn every_part_of_a_request_for_several_things_gets_a_tool_near_the_top() {
        let docs = vec![
            doc("weather_forecast", "Weather forecast for a city, by day."),
            doc("weather_alerts", "Weather alerts and warnings for a city."),
            doc("weather_history", "Past weather of a city, by day."),
            doc("weather_radar", "Weather radar images of a city."),
            doc("mail_send", "Send a mail message."),
        ];
        let request = "What is the weather forecast for Paris, with any weather alerts, \
                       the weather radar and the weather history of the city by day? \
                       Then mail it to Bob.";
        let query = parse_query(request).unwrap();
        let model: Arc<dyn Embedder> = Arc::new(Blind);
        let without = Weights {
            clause_bonus: 0.0,
            ..Weights::default()
        };
        let plain = SearchIndex::with_model(&docs, without, Some(model.clone()));
        assert!(
            !plain.search(&query, 3).contains(&4),
            "the weather tools take the first places when the request is ranked as one text"
        );
        let index = SearchIndex::with_model(&docs, Weights::default(), Some(model));
        let top = index.search(&query, 3);
        assert!(top.contains(&4), "{top:?}");
        assert_eq!(
            top.first(),
            Some(&0),
            "the whole request's best stays first"
        );
    }
}
