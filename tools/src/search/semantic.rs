//! The semantic channel of tool search: every tool's text as a vector, the query as a
//! vector, cosine similarity — so "what will it cost to fly to Rome" finds a flight-price
//! tool that shares no word with it. Lexical matching stays the backbone (a tool named in
//! the request is found by its name); the two are fused by normalised scores, with the
//! semantic share set by how sure the lexical side is ([`fusion_weight`]): a request whose
//! words are all in one tool's name leans on BM25F, one whose words occur nowhere leans on
//! meaning. Reciprocal-rank fusion, by the measurement that opened issue 24, is worse on 3 of
//! the 4 dev sets: it throws away how far ahead the best match is.
//!
//! Usage learning (Tool2Vec's idea): the requests that led to a call of a tool pull its
//! vector toward them, so the way the owner asks for a tool becomes part of the tool.

use std::sync::Arc;

use super::{SearchDoc, Weights};

/// Only the start of a query is embedded: a request's meaning is in its first sentences,
/// and tokenizing is the dearest part of a search (an 18 KB paste cost 4.8 ms whole).
const QUERY_CHARS: usize = 512;

/// Words longer than this are left out of a query's embedding: no word of a request is,
/// and WordPiece spends time quadratic in a word's length on one (a pasted blob).
const LONGEST_WORD: usize = 40;

/// The part of a query that is embedded: its first [`QUERY_CHARS`] characters, without
/// words over [`LONGEST_WORD`] characters.
fn query_words(text: &str) -> String {
    super::text::head(text, QUERY_CHARS)
        .split_whitespace()
        .filter(|word| word.chars().count() <= LONGEST_WORD)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A text embedder: the static model in the daemon, a toy in tests.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    fn dims(&self) -> usize;
    /// The sum of the text's token vectors, of length [`Embedder::dims`] (all zeros for a
    /// text with no known token): sums of parts add up to the sum of the whole, so a
    /// request cut into sentences is tokenized once.
    fn token_sum(&self, text: &str) -> Vec<f32>;
    /// The text's vector, normalised.
    fn embed(&self, text: &str) -> Vec<f32> {
        let mut sum = self.token_sum(text);
        normalise(&mut sum);
        sum
    }
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v {
            *x /= norm;
        }
    }
}

/// What a tool says about itself, as one text for the embedder: its name in words, its
/// title and server, its description, and the names of its parameters in words (what it
/// takes says what it is for: a `city` and a `date`). Parameters' descriptions are left
/// out: long and generic ("The ID of the item"), they pulled toolbench's endpoints together
/// (dev R@5 0.715 → 0.713 with them; 0.718 with the names in words).
fn doc_text(doc: &SearchDoc) -> String {
    let mut text = super::name_parts(&doc.name).join(" ");
    if let Some(title) = &doc.title {
        text.push(' ');
        text.push_str(title);
    }
    if let Some(server) = &doc.server {
        text.push_str(" (");
        text.push_str(&super::name_parts(server).join(" "));
        text.push(')');
    }
    text.push_str(": ");
    text.push_str(&doc.description);
    for parameter in &doc.parameters {
        let name = parameter.split_whitespace().next().unwrap_or_default();
        for word in super::name_parts(name) {
            text.push(' ');
            text.push_str(&word);
        }
    }
    text
}

/// How many tools a query is compared with in full. [`fuse`] gives a semantic share only to
/// the [`FLOOR_RANK`] nearest tools, so a large catalogue is first compared by the first
/// [`COARSE_DIMS`] dimensions of each vector (WordLlama's table is Matryoshka-trained: its
/// head is a smaller model of its own) and only this many of the nearest by that are
/// compared in full — a quarter of the work, and the same ranking on every dev set.
const SHORTLIST: usize = 256;
/// The dimensions of the coarse comparison.
const COARSE_DIMS: usize = 64;

#[derive(Debug)]
pub(super) struct SemanticIndex {
    model: Arc<dyn Embedder>,
    dims: usize,
    /// One normalised vector per tool, row-major, quantised to ±127 with a scale per tool
    /// and held as 16-bit integers for [`dot`] (2 MB at 4,076 tools × 256).
    rows: Vec<i16>,
    scales: Vec<f32>,
}

impl SemanticIndex {
    pub(super) fn build(model: Arc<dyn Embedder>, docs: &[SearchDoc], usage_pull: f32) -> Self {
        let dims = model.dims();
        let mut vectors = Vec::with_capacity(docs.len() * dims);
        for doc in docs {
            let mut vector = model.embed(&doc_text(doc));
            if !doc.usage.is_empty() && usage_pull > 0.0 {
                let mut used = vec![0f32; dims];
                for request in &doc.usage {
                    for (u, x) in used.iter_mut().zip(model.embed(request)) {
                        *u += x;
                    }
                }
                normalise(&mut used);
                for (v, u) in vector.iter_mut().zip(used) {
                    *v += usage_pull * u;
                }
                normalise(&mut vector);
            }
            vector.resize(dims, 0.0);
            vectors.extend(vector);
        }
        let (rows, scales) = quantise(&vectors, dims.max(1));
        Self {
            model,
            dims,
            rows: rows.into_iter().map(i16::from).collect(),
            scales,
        }
    }

    /// A query text's token sum (see [`Embedder::token_sum`]), read as queries are: its
    /// head, without blobs.
    pub(super) fn query_sum(&self, text: &str) -> Vec<f32> {
        self.model.token_sum(&query_words(text))
    }

    /// Cosine similarity of a query's vector (a [`SemanticIndex::query_sum`], or a sum of
    /// them) with every tool that can be among its nearest: at most [`SHORTLIST`] tools get
    /// their similarity, the others `-∞` (see [`SHORTLIST`]).
    pub(super) fn similarities(&self, query: &[f32]) -> Vec<f32> {
        let tools = self.scales.len();
        let Some((query, query_scale)) = self.quantised(query) else {
            return vec![0.0; tools];
        };
        let similarity = |doc: usize, dims: usize| {
            let start = doc * self.dims;
            match (self.rows.get(start..start + dims), self.scales.get(doc)) {
                (Some(tool), Some(scale)) => dot(tool, &query[..dims]) as f32 * scale * query_scale,
                _ => 0.0,
            }
        };
        if tools <= 2 * SHORTLIST || self.dims < 2 * COARSE_DIMS {
            return (0..tools).map(|doc| similarity(doc, self.dims)).collect();
        }
        let coarse: Vec<f32> = (0..tools).map(|doc| similarity(doc, COARSE_DIMS)).collect();
        let mut nearest: Vec<usize> = (0..tools).collect();
        nearest.select_nth_unstable_by(SHORTLIST, |a, b| coarse[*b].total_cmp(&coarse[*a]));
        nearest.truncate(SHORTLIST);
        let mut out = vec![f32::NEG_INFINITY; tools];
        for doc in nearest {
            out[doc] = similarity(doc, self.dims);
        }
        out
    }

    /// Cosine similarity of the query with each of `docs` (indexes of tools), in that order.
    pub(super) fn similarities_among(&self, query: &[f32], docs: &[usize]) -> Vec<f32> {
        let Some((query, query_scale)) = self.quantised(query) else {
            return vec![0.0; docs.len()];
        };
        docs.iter()
            .map(|&doc| {
                let row = self.rows.get(doc * self.dims..(doc + 1) * self.dims);
                match (row, self.scales.get(doc)) {
                    (Some(tool), Some(scale)) => dot(tool, &query) as f32 * scale * query_scale,
                    _ => 0.0,
                }
            })
            .collect()
    }

    /// The query's direction as integers and the factor back to cosines, or `None` when
    /// the model gave a vector of another length.
    fn quantised(&self, query: &[f32]) -> Option<(Vec<i16>, f32)> {
        if query.len() != self.dims {
            return None;
        }
        let mut unit = query.to_vec();
        normalise(&mut unit);
        Some(quantise_query(&unit))
    }
}

/// Rows to 8-bit integers with one scale per row (the row's largest magnitude maps to 127).
pub(super) fn quantise(values: &[f32], dims: usize) -> (Vec<i8>, Vec<f32>) {
    let mut rows = Vec::with_capacity(values.len());
    let mut scales = Vec::with_capacity(values.len() / dims);
    for row in values.chunks_exact(dims) {
        let largest = row.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = if largest > 0.0 { largest / 127.0 } else { 1.0 };
        scales.push(scale);
        rows.extend(
            row.iter()
                .map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8),
        );
    }
    (rows, scales)
}

/// The query's largest component maps to this: with tool rows within ±127, a product is
/// below 2^22 and a sum over 256 dimensions below 2^30, so an `i32` never overflows.
const QUERY_SCALE: f32 = 32_767.0;

/// The query as 16-bit integers, and the factor that turns an integer dot product with
/// it back into the real one.
fn quantise_query(query: &[f32]) -> (Vec<i16>, f32) {
    let largest = query.iter().fold(0f32, |m, v| m.max(v.abs()));
    if largest == 0.0 {
        return (vec![0; query.len()], 0.0);
    }
    let scale = QUERY_SCALE / largest;
    let ints = query
        .iter()
        .map(|v| (v * scale).round().clamp(-QUERY_SCALE, QUERY_SCALE) as i16)
        .collect();
    (ints, 1.0 / scale)
}

/// An integer dot product in eight independent lanes over fixed-size blocks: the compiler
/// turns it into multiply-add instructions on 16-bit pairs (SSE2's `pmaddwd`, in every
/// x86-64), four times the work per instruction of converting 8-bit rows to floats, which
/// the similarity pass over 4,076 tools spent most of a search on.
fn dot(a: &[i16], b: &[i16]) -> i32 {
    let mut lanes = [0i32; 8];
    let (a_blocks, a_rest) = a.as_chunks::<8>();
    let (b_blocks, b_rest) = b.as_chunks::<8>();
    for (x, y) in a_blocks.iter().zip(b_blocks) {
        for lane in 0..8 {
            lanes[lane] += i32::from(x[lane]) * i32::from(y[lane]);
        }
    }
    let rest: i32 = a_rest
        .iter()
        .zip(b_rest)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    lanes.iter().sum::<i32>() + rest
}

/// The semantic share of the fused score: `semantic_sure` when every term of the query
/// occurs in the catalogue (confidence 1), `semantic_unsure` when none does (confidence
/// 0), in between linearly.
pub(super) fn fusion_weight(weights: &Weights, confidence: f32) -> f32 {
    let c = confidence.clamp(0.0, 1.0);
    weights.semantic_unsure + (weights.semantic_sure - weights.semantic_unsure) * c
}

/// Similarities are scaled so that the tool at this rank scores 0 and the best 1: only the
/// nearest tools get a semantic share (scaling from the mean gave hundreds of tools a
/// little each, which buried lexical matches: toolbench R@5 0.68 → 0.63 on dev).
const FLOOR_RANK: usize = 20;

/// Fuses in place: lexical scores scaled to the best one, similarities scaled from the
/// [`FLOOR_RANK`]th (0) to the best (1), mixed by `weight`.
pub(super) fn fuse(scores: &mut [f32], similarities: &[f32], weight: f32) {
    let best_lexical = scores.iter().copied().fold(0f32, f32::max);
    let floor = if similarities.len() > FLOOR_RANK {
        let mut sorted = similarities.to_vec();
        sorted.select_nth_unstable_by(FLOOR_RANK, |a, b| b.total_cmp(a));
        sorted[FLOOR_RANK]
    } else {
        similarities.iter().copied().fold(f32::MAX, f32::min)
    };
    let best = similarities.iter().copied().fold(f32::MIN, f32::max);
    let spread = best - floor;
    for (score, &similarity) in scores.iter_mut().zip(similarities) {
        let lexical = if best_lexical > 0.0 {
            *score / best_lexical
        } else {
            0.0
        };
        let semantic = if spread > 0.0 {
            ((similarity - floor) / spread).max(0.0)
        } else {
            0.0
        };
        *score = (1.0 - weight) * lexical + weight * semantic;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy embedder over a fixed vocabulary of concepts: words map to one of a few
    /// dimensions, so synonyms share a direction.
    #[derive(Debug)]
    struct Concepts;

    impl Embedder for Concepts {
        fn dims(&self) -> usize {
            3
        }
        fn token_sum(&self, text: &str) -> Vec<f32> {
            let mut v = vec![0f32; 3];
            for word in text.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                match word {
                    "flight" | "fly" | "plane" | "airfare" => v[0] += 1.0,
                    "weather" | "rain" | "umbrella" | "forecast" => v[1] += 1.0,
                    "email" | "mail" | "inbox" => v[2] += 1.0,
                    _ => {}
                }
            }
            v
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
    fn meaning_finds_what_shares_no_word_and_names_still_win() {
        let docs = vec![
            doc("airfare_lookup", "Prices of plane tickets."),
            doc("weather_forecast", "Forecast for a city."),
            doc("mail_send", "Send a message to an inbox."),
        ];
        let model: Arc<dyn Embedder> = Arc::new(Concepts);
        let index = super::super::SearchIndex::with_model(&docs, Weights::default(), Some(model));
        let lexical = super::super::SearchIndex::build(&docs);
        let query = super::super::parse_query("will I need an umbrella tomorrow").unwrap();
        assert_eq!(lexical.search(&query, 3), Vec::<usize>::new());
        assert_eq!(index.search(&query, 1), [1]);
        let query = super::super::parse_query("how much to fly to Rome").unwrap();
        assert_eq!(index.search(&query, 1), [0]);
        // A tool named in the request is still first.
        let query = super::super::parse_query("mail_send the weather").unwrap();
        assert_eq!(index.search(&query, 1), [2]);
    }

    #[test]
    fn usage_pulls_a_tool_toward_the_requests_that_used_it() {
        let mut docs = vec![
            doc("tool_a", "Does something."),
            doc("tool_b", "Does something else."),
        ];
        let model: Arc<dyn Embedder> = Arc::new(Concepts);
        let query = super::super::parse_query("is rain coming").unwrap();
        let cold =
            super::super::SearchIndex::with_model(&docs, Weights::default(), Some(model.clone()));
        assert!(cold.search(&query, 2).is_empty());
        docs[1].usage.push("will it rain in Lyon".into());
        let warm = super::super::SearchIndex::with_model(&docs, Weights::default(), Some(model));
        assert_eq!(warm.search(&query, 1), [1]);
    }

    #[test]
    fn a_query_is_embedded_by_its_head_without_blobs() {
        let blob = "QUJD".repeat(100);
        assert_eq!(
            query_words(&format!("find {blob} the weather")),
            "find the weather"
        );
        let long = "word ".repeat(1000);
        assert!(query_words(&long).len() <= QUERY_CHARS);
    }

    #[test]
    fn quantised_rows_keep_their_direction() {
        let values = [0.5, -0.25, 0.125, 0.0, 0.0, 0.0, 0.0, 0.0];
        let (rows, scales) = quantise(&values, 4);
        assert_eq!(rows[..4], [127, -64, 32, 0]);
        assert_eq!(rows[4..], [0, 0, 0, 0]);
        assert!((f32::from(rows[0]) * scales[0] - 0.5).abs() < 1e-6);
    }

    #[test]
    fn the_lane_dot_product_is_the_dot_product() {
        let a: Vec<i16> = (0..19).map(|i| i * 13 - 127).collect();
        let b: Vec<i16> = (0..19).map(|i| 32_767 - i * 1_700).collect();
        let plain: i64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| i64::from(*x) * i64::from(*y))
            .sum();
        assert_eq!(i64::from(dot(&a, &b)), plain);
        let extreme = dot(&[127; 256], &[32_767; 256]);
        assert_eq!(i64::from(extreme), 127 * 32_767 * 256);
    }

    #[test]
    fn a_quantised_query_keeps_the_similarity() {
        let query = [0.6f32, -0.3, 0.1, 0.0, 0.7, -0.2, 0.05, 0.1];
        let tool = [0.5f32, 0.5, -0.5, 0.0, 0.5, 0.0, 0.0, 0.0];
        let exact: f32 = query.iter().zip(&tool).map(|(q, t)| q * t).sum();
        let (ints, query_scale) = quantise_query(&query);
        let (rows, scales) = quantise(&tool, tool.len());
        let rows: Vec<i16> = rows.into_iter().map(i16::from).collect();
        let approximate = dot(&rows, &ints) as f32 * scales[0] * query_scale;
        assert!(
            (approximate - exact).abs() < 1e-3,
            "{approximate} vs {exact}"
        );
        assert_eq!(quantise_query(&[0.0; 4]), (vec![0; 4], 0.0));
    }

    /// An embedder of many dimensions: a text's number N is a fixed pseudo-random direction,
    /// heavier in the first dimensions as a Matryoshka-trained table is.
    #[derive(Debug)]
    struct Numbered;

    impl Embedder for Numbered {
        fn dims(&self) -> usize {
            128
        }
        fn token_sum(&self, text: &str) -> Vec<f32> {
            let digits: String = text.chars().filter(char::is_ascii_digit).collect();
            let n: u32 = digits.parse().unwrap_or(0);
            (0..128u32)
                .map(|d| {
                    let mixed = n.wrapping_mul(2_654_435_761) ^ d.wrapping_mul(40_503);
                    let unit = (mixed % 1_000) as f32 / 500.0 - 1.0;
                    unit / (1.0 + d as f32 / 16.0)
                })
                .collect()
        }
    }

    #[test]
    fn a_large_catalogue_is_shortlisted_and_the_nearest_keep_exact_similarities() {
        let docs: Vec<SearchDoc> = (0..1_000).map(|n| doc(&format!("t{n}"), "")).collect();
        let index = SemanticIndex::build(Arc::new(Numbered), &docs, 0.0);
        let query = index.query_sum("t417");
        let shortlisted = index.similarities(&query);
        let all: Vec<usize> = (0..docs.len()).collect();
        let exact = index.similarities_among(&query, &all);
        let compared: Vec<usize> = (0..docs.len())
            .filter(|&doc| shortlisted[doc].is_finite())
            .collect();
        assert_eq!(compared.len(), SHORTLIST);
        for &doc in &compared {
            assert_eq!(shortlisted[doc], exact[doc], "tool {doc}");
        }
        // The query's own tool is the nearest, and fusing the shortlist gives no NaN.
        let best = (0..docs.len())
            .max_by(|a, b| shortlisted[*a].total_cmp(&shortlisted[*b]))
            .unwrap();
        assert_eq!(best, 417);
        let mut scores = vec![0.0; docs.len()];
        fuse(&mut scores, &shortlisted, 0.5);
        assert!(scores.iter().all(|s| s.is_finite() && *s >= 0.0));
        assert_eq!(scores[417], 0.5);
    }

    #[test]
    fn the_semantic_share_follows_lexical_confidence() {
        let w = Weights::default();
        let near = |a: f32, b: f32| (a - b).abs() < 1e-6;
        assert!(near(fusion_weight(&w, 1.0), w.semantic_sure));
        assert!(near(fusion_weight(&w, 0.0), w.semantic_unsure));
        assert!(near(fusion_weight(&w, 7.0), w.semantic_sure));
        let mid = fusion_weight(&w, 0.5);
        assert!(mid > w.semantic_sure.min(w.semantic_unsure));
        assert!(mid < w.semantic_sure.max(w.semantic_unsure));
    }
}
