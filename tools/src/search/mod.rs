//! Tool search: how a model finds deferred tools (DESIGN.md §4) and how `steward tools
//! search` and `steward tools bench` rank them.
//!
//! Ranking is BM25F: one BM25 over several fields of a tool — its name split into words,
//! its original title, its server or group, its `search_hint`, its description, its
//! parameter names — each with its own weight and length normalisation, so a word in the
//! name counts more than the same word deep in a description. Many requests need several
//! tools of one service (a football API's `search` and `details`), so a tool also gains a
//! share of how well its whole server matches the request. Weights were tuned on the
//! `queries-dev.jsonl` files of `../shared/data/toolsearch` only (see [`Weights`]).
//!
//! The index is built once per tool set (milliseconds at thousands of tools) and read
//! without locks; a query costs a walk over the postings of its terms.

mod clauses;
#[cfg(feature = "embeddings")]
mod embedding;
pub mod eval;
mod query;
mod semantic;
#[cfg(feature = "embeddings")]
mod shortcut;
mod text;

use std::collections::HashMap;
use std::sync::Arc;

#[cfg(feature = "embeddings")]
pub use embedding::{EmbeddingError, EmbeddingModel};
pub use query::{Query, QueryError, parse_query};
pub use semantic::{Embedder, normalise};
pub use text::{name_parts, terms};

/// What the search knows about one tool.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchDoc {
    pub name: String,
    /// The name as originally published, when `name` had to be normalised.
    pub title: Option<String>,
    pub description: String,
    pub search_hint: Option<String>,
    /// The MCP server or group the tool comes from (its name and title).
    pub server: Option<String>,
    /// Each parameter's name and description.
    pub parameters: Vec<String>,
    /// Requests that led to a call of this tool (usage learning), most recent last.
    pub usage: Vec<String>,
}

/// What a JSON Schema says about its parameters, for the parameters field: each property's
/// name and description.
pub fn parameter_texts(schema: &serde_json::Value) -> Vec<String> {
    let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(
            |(name, property)| match property.get("description").and_then(|d| d.as_str()) {
                Some(description) => format!("{name} {description}"),
                None => name.clone(),
            },
        )
        .collect()
}

const NAME: usize = 0;
const TITLE: usize = 1;
const SERVER: usize = 2;
const HINT: usize = 3;
const DESCRIPTION: usize = 4;
const PARAMETERS: usize = 5;
const USAGE: usize = 6;
const FIELDS: usize = 7;

/// Results chosen for coverage of the request's terms (see `diversified`): what a model
/// reads of a `tool_search` answer; chosen among the best `DIVERSE_POOL` by score.
const DIVERSE_PLACES: usize = 10;
const DIVERSE_POOL: usize = 20;

/// Ranking constants. The defaults are the values tuned on the dev queries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weights {
    pub field: [f32; FIELDS],
    /// Length normalisation per field (BM25's `b`).
    pub b: [f32; FIELDS],
    pub k1: f32,
    /// How much of its server's best match a tool gains, divided by `1 + ln(tools on
    /// the server)`: a big server is a broad domain label more than one service.
    pub server_share: f32,
    /// The semantic channel's share of the fused score when every term of the request is
    /// in the catalogue, and when none is ([`semantic::fusion_weight`]). Tuned on the dev
    /// queries with the WordLlama model (scripts/embedding-model): a lean on meaning for
    /// requests in other words than the tools' (metatool), little for requests in the
    /// tools' own words (sealtools), where meaning blurs a request for three tools.
    pub semantic_sure: f32,
    pub semantic_unsure: f32,
    /// How far a tool's vector moves toward the requests that used it.
    pub usage_pull: f32,
    /// How much a result loses for matching only query terms that results above it already
    /// matched (0 = plain ranking): a request that needs a weather service and a calendar
    /// gets both instead of five weather endpoints.
    pub redundancy: f32,
    /// What a tool gains (in shares of the request's best score) for being the best match
    /// of one sentence of a request that asks for several things ([`clauses`]); 0 = off.
    pub clause_bonus: f32,
    /// The semantic share when one sentence is ranked on its own: a sentence says one thing,
    /// so its meaning is a surer guide than a whole request's.
    pub clause_semantic: f32,
}

impl Default for Weights {
    /// Tuned on the dev queries (R@5 against plain BM25 over name + description, which
    /// the data set's README reports): metatool 0.629 vs 0.613, toolbench 0.681 vs 0.595,
    /// sealtools 0.881 vs 0.841, livemcpbench 0.397 vs 0.351. The server share is what
    /// lifts toolbench (services of a few endpoints); parameter descriptions lift
    /// sealtools. Metatool (no schemas, no servers, marketing descriptions against
    /// conversational requests) is mostly out of reach of any lexical ranking. The clause
    /// weights were tuned with the model (see [`clauses`] for what they lift).
    fn default() -> Self {
        Self {
            field: [3.0, 2.0, 1.5, 1.5, 1.0, 0.5, 0.3],
            b: [0.5, 0.5, 0.3, 0.5, 0.6, 0.5, 0.5],
            k1: 1.6,
            server_share: 0.5,
            semantic_sure: 0.1,
            semantic_unsure: 0.8,
            usage_pull: 2.0,
            redundancy: 0.3,
            clause_bonus: 0.3,
            clause_semantic: 0.3,
        }
    }
}

impl Weights {
    /// Plain BM25 (k1 1.2, b 0.75) over the name and the description alone: the baseline
    /// the data set's README reports, and what every other figure is compared with.
    pub fn plain_bm25() -> Self {
        let mut field = [0.0; FIELDS];
        field[NAME] = 1.0;
        field[TITLE] = 1.0;
        field[DESCRIPTION] = 1.0;
        Self {
            field,
            b: [0.75; FIELDS],
            k1: 1.2,
            server_share: 0.0,
            semantic_sure: 0.0,
            semantic_unsure: 0.0,
            usage_pull: 0.0,
            redundancy: 0.0,
            clause_bonus: 0.0,
            clause_semantic: 0.0,
        }
    }
}

/// A tool that contains a term, with the term's BM25F weight in it (its frequency over the
/// fields, length-normalised and saturated): everything but the idf is fixed when the index
/// is built, so a search only multiplies.
#[derive(Clone, Copy, Debug)]
struct Posting {
    doc: u32,
    tf: f32,
}

#[derive(Debug)]
pub struct SearchIndex {
    weights: Weights,
    postings: HashMap<String, Vec<Posting>>,
    tools: usize,
    /// Each tool's name parts, for `+term` queries.
    parts: Vec<Vec<String>>,
    names: HashMap<String, u32>,
    /// Each tool's server (an index into `servers`), for the server share.
    server_of: Vec<Option<u32>>,
    servers: usize,
    /// Large servers are broad (a domain label more than a service): their match says
    /// less about each of their tools.
    server_damping: Vec<f32>,
    /// The semantic channel, when a model is configured.
    semantic: Option<semantic::SemanticIndex>,
}

impl SearchIndex {
    pub fn build(docs: &[SearchDoc]) -> Self {
        Self::with_weights(docs, Weights::default())
    }

    pub fn with_weights(docs: &[SearchDoc], weights: Weights) -> Self {
        Self::with_model(docs, weights, None)
    }

    /// The index with a semantic channel: every tool's text embedded by `model` (and
    /// pulled toward the requests that used it).
    pub fn with_model(
        docs: &[SearchDoc],
        weights: Weights,
        model: Option<Arc<dyn Embedder>>,
    ) -> Self {
        let mut counted: HashMap<String, Vec<(u32, [u16; FIELDS])>> = HashMap::new();
        let mut lengths = Vec::with_capacity(docs.len());
        let mut server_ids: HashMap<&str, u32> = HashMap::new();
        let mut server_of = Vec::with_capacity(docs.len());
        for (i, doc) in docs.iter().enumerate() {
            let mut fields: [Vec<String>; FIELDS] = Default::default();
            fields[NAME] = text::name_terms(&doc.name);
            fields[TITLE] = doc.title.as_deref().map(text::terms).unwrap_or_default();
            fields[SERVER] = doc.server.as_deref().map(text::terms).unwrap_or_default();
            fields[HINT] = doc
                .search_hint
                .as_deref()
                .map(text::terms)
                .unwrap_or_default();
            fields[DESCRIPTION] = text::terms(&doc.description);
            fields[PARAMETERS] = doc.parameters.iter().flat_map(|p| text::terms(p)).collect();
            fields[USAGE] = doc.usage.iter().flat_map(|u| text::terms(u)).collect();
            let mut counts: HashMap<&str, [u16; FIELDS]> = HashMap::new();
            let mut length = [0u16; FIELDS];
            for (field, terms) in fields.iter().enumerate() {
                length[field] = terms.len().min(u16::MAX as usize) as u16;
                for term in terms {
                    let tf = &mut counts.entry(term).or_default()[field];
                    *tf = tf.saturating_add(1);
                }
            }
            for (term, tf) in counts {
                counted
                    .entry(term.to_owned())
                    .or_default()
                    .push((i as u32, tf));
            }
            lengths.push(length);
            let next = server_ids.len() as u32;
            server_of.push(
                doc.server
                    .as_deref()
                    .map(|s| *server_ids.entry(s).or_insert(next)),
            );
        }
        let mut sizes = vec![0u32; server_ids.len()];
        for s in server_of.iter().flatten() {
            sizes[*s as usize] += 1;
        }
        let server_damping = sizes.iter().map(|&n| 1.0 + (n as f32).ln()).collect();
        let mut average = [0f32; FIELDS];
        for length in &lengths {
            for (sum, l) in average.iter_mut().zip(length) {
                *sum += f32::from(*l);
            }
        }
        for sum in &mut average {
            *sum = (*sum / docs.len().max(1) as f32).max(1.0);
        }
        let postings = counted
            .into_iter()
            .filter_map(|(term, docs)| {
                let postings: Vec<Posting> = docs
                    .into_iter()
                    .map(|(doc, tf)| Posting {
                        doc,
                        tf: saturated_tf(&weights, &tf, &lengths[doc as usize], &average),
                    })
                    // A tool whose only mention of the term is in fields these weights
                    // ignore (plain BM25: everything but the name and the description) does
                    // not contain it: it neither scores nor makes the term look common.
                    .filter(|posting| posting.tf > 0.0)
                    .collect();
                (!postings.is_empty()).then_some((term, postings))
            })
            .collect();
        let semantic =
            model.map(|model| semantic::SemanticIndex::build(model, docs, weights.usage_pull));
        Self {
            weights,
            postings,
            tools: docs.len(),
            parts: docs.iter().map(|d| text::name_parts(&d.name)).collect(),
            names: docs
                .iter()
                .enumerate()
                .map(|(i, d)| (d.name.clone(), i as u32))
                .collect(),
            server_of,
            servers: server_ids.len(),
            server_damping,
            semantic,
        }
    }

    pub fn len(&self) -> usize {
        self.tools
    }

    pub fn is_empty(&self) -> bool {
        self.tools == 0
    }

    /// The best `k` tools for a query, best first, as indexes into the docs it was built
    /// from. `select:` returns the named tools that exist, in the order named.
    pub fn search(&self, query: &Query, k: usize) -> Vec<usize> {
        match query {
            Query::Select(names) => names
                .iter()
                .filter_map(|n| self.names.get(n).map(|&i| i as usize))
                .collect(),
            Query::Ranked { required, text } => self.ranked(required, text, k),
        }
    }

    fn ranked(&self, required: &[String], text: &str, k: usize) -> Vec<usize> {
        let terms = text::query_terms(text);
        let (mut scores, confidence) = self.lexical(&terms);
        if let Some(semantic) = &self.semantic {
            let weight = semantic::fusion_weight(&self.weights, confidence);
            let parts = if self.weights.clause_bonus > 0.0 {
                clauses::Part::all(semantic, text)
            } else {
                Vec::new()
            };
            let whole = if parts.is_empty() {
                semantic.query_sum(text)
            } else {
                clauses::Part::whole(&parts)
            };
            semantic::fuse(&mut scores, &semantic.similarities(&whole), weight);
            self.add_clause_bonus(semantic, &mut scores, &parts);
        }
        let mut hits: Vec<(usize, f32)> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, score)| *score > 0.0)
            .filter(|(doc, _)| self.has_name_words(*doc, required))
            .collect();
        let by_score = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        // Without a model the ranking is BM25F alone, as it always was.
        let diversify = self.semantic.is_some() && self.weights.redundancy > 0.0;
        // Diversifying looks a little further down than k.
        let pool = if diversify { k.max(DIVERSE_POOL) } else { k };
        if hits.len() > pool {
            hits.select_nth_unstable_by(pool, by_score);
            hits.truncate(pool);
        }
        hits.sort_by(by_score);
        if diversify {
            hits = self.diversified(hits, &terms, k);
        }
        let mut named = self.named_in(text);
        named.retain(|&doc| self.has_name_words(doc, required));
        let rest: Vec<usize> = hits
            .into_iter()
            .map(|(doc, _)| doc)
            .filter(|doc| !named.contains(doc))
            .collect();
        named.extend(rest);
        named.truncate(k);
        named
    }

    /// Whether every `+word` of the request is a word of the tool's name.
    fn has_name_words(&self, doc: usize, required: &[String]) -> bool {
        required
            .iter()
            .all(|r| self.parts[doc].iter().any(|p| p == r))
    }

    /// Tools whose exact name is a word of the request's head, in the order named: they come
    /// first whatever the scores say, since a request that names a tool means that tool
    /// (meaning alone could otherwise rank a tool the other words evoke above it). Only
    /// names of two words or more (`fs_read`, `getWaterQuality`) count: a tool called
    /// `search` or `time` is not named by a request that uses the word (on toolbench,
    /// whose endpoints are often called so, pinning those took R@5 from 0.62 to 0.35).
    fn named_in(&self, text: &str) -> Vec<usize> {
        let mut named = Vec::new();
        let head = text::head(text, text::MAX_QUERY_CHARS);
        for word in head.split(|c: char| c.is_whitespace() || ",.;:!?\"'`()[]{}".contains(c)) {
            if let Some(&doc) = self.names.get(word)
                && self.parts[doc as usize].len() >= 2
                && !named.contains(&(doc as usize))
            {
                named.push(doc as usize);
            }
        }
        named
    }

    /// BM25F scores of every tool (with the server share), and how sure the lexical side
    /// is: the share of the query's terms, weighted by idf, that occur in some tool (0 when
    /// none does — nothing lexical to go by). A request in the catalogue's own words is
    /// one the lexical side can rank; a conversational one ("will I need an umbrella")
    /// mostly is not. The best score over the most a tool could score was measured worse:
    /// a request needing three tools matches each only in part, so it read as unsure and
    /// gave meaning a share that buried exact matches (sealtools R@5 0.907 → 0.849 at the
    /// weights that suit metatool).
    fn lexical(&self, terms: &[String]) -> (Vec<f32>, f32) {
        let mut scores = vec![0f32; self.len()];
        let (mut known, mut all) = (0f32, 0f32);
        for term in terms {
            let postings = self.postings.get(term);
            let idf = self.idf(postings.map_or(0, Vec::len));
            all += idf;
            let Some(postings) = postings else {
                continue;
            };
            known += idf;
            for posting in postings {
                scores[posting.doc as usize] += idf * posting.tf;
            }
        }
        self.add_server_share(&mut scores, 0..self.len());
        let confidence = if all > 0.0 { known / all } else { 0.0 };
        (scores, confidence)
    }

    fn idf(&self, df: usize) -> f32 {
        let (n, df) = (self.len() as f32, df as f32);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Adds to each score (`scores[i]` is the score of the `i`th of `docs`) a share of the
    /// best score among `docs` on its server.
    fn add_server_share(&self, scores: &mut [f32], docs: impl Iterator<Item = usize> + Clone) {
        let share = self.weights.server_share;
        if share <= 0.0 || self.servers == 0 {
            return;
        }
        let mut best = vec![0f32; self.servers];
        for (score, doc) in scores.iter().zip(docs.clone()) {
            if let Some(s) = self.server_of[doc] {
                best[s as usize] = best[s as usize].max(*score);
            }
        }
        for (score, doc) in scores.iter_mut().zip(docs) {
            if let Some(s) = self.server_of[doc] {
                *score += share * best[s as usize] / self.server_damping[s as usize];
            }
        }
    }

    /// Ranked hits reordered for coverage: each pick's score is cut by the share of its
    /// matched query terms (by idf) that results above it already matched, times
    /// `redundancy`. A request naming two needs gets a tool for each.
    fn diversified(
        &self,
        mut pool: Vec<(usize, f32)>,
        terms: &[String],
        k: usize,
    ) -> Vec<(usize, f32)> {
        // Per candidate: (term index, idf) of the query terms it contains.
        let candidates = pool.len().min(DIVERSE_POOL);
        let known: Vec<(usize, &[Posting], f32)> = terms
            .iter()
            .enumerate()
            .filter_map(|(t, term)| {
                let postings = self.postings.get(term)?;
                Some((t, postings.as_slice(), self.idf(postings.len())))
            })
            .collect();
        let matched: Vec<Vec<(usize, f32)>> = pool[..candidates]
            .iter()
            .map(|&(doc, _)| {
                known
                    .iter()
                    .filter(|(_, postings, _)| {
                        postings
                            .binary_search_by_key(&(doc as u32), |p| p.doc)
                            .is_ok()
                    })
                    .map(|&(t, _, idf)| (t, idf))
                    .collect()
            })
            .collect();
        let mut covered = vec![false; terms.len()];
        let mut remaining: Vec<usize> = (0..candidates).collect();
        let mut out = Vec::with_capacity(k.min(pool.len()));
        // Only the first places are chosen for coverage; further down is plain order.
        while out.len() < k.min(DIVERSE_PLACES) && !remaining.is_empty() {
            let adjusted = |i: usize| {
                let total: f32 = matched[i].iter().map(|(_, idf)| idf).sum();
                let old: f32 = matched[i]
                    .iter()
                    .filter(|(t, _)| covered[*t])
                    .map(|(_, idf)| idf)
                    .sum();
                let redundant = if total > 0.0 { old / total } else { 0.0 };
                pool[i].1 * (1.0 - self.weights.redundancy * redundant)
            };
            let mut best = 0;
            for r in 1..remaining.len() {
                if adjusted(remaining[r]) > adjusted(remaining[best]) {
                    best = r;
                }
            }
            let pick = remaining.remove(best);
            for (t, _) in &matched[pick] {
                covered[*t] = true;
            }
            out.push(pool[pick]);
        }
        out.extend(remaining.into_iter().map(|i| pool[i]));
        out.extend(pool.iter().skip(candidates).copied());
        out.truncate(k);
        pool.clear();
        out
    }
}

/// BM25F's term frequency over the fields of one tool (`tf` per field, the tool's field
/// `lengths`, the corpus' `average` lengths), length-normalised and saturated.
fn saturated_tf(
    weights: &Weights,
    tf: &[u16; FIELDS],
    lengths: &[u16; FIELDS],
    average: &[f32; FIELDS],
) -> f32 {
    let w = weights;
    let tf: f32 = (0..FIELDS)
        .filter(|&f| tf[f] > 0)
        .map(|f| {
            let norm = 1.0 - w.b[f] + w.b[f] * f32::from(lengths[f]) / average[f];
            w.field[f] * f32::from(tf[f]) / norm
        })
        .sum();
    tf * (w.k1 + 1.0) / (w.k1 + tf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(name: &str, description: &str, server: Option<&str>) -> SearchDoc {
        SearchDoc {
            name: name.into(),
            description: description.into(),
            server: server.map(str::to_owned),
            ..SearchDoc::default()
        }
    }

    fn index() -> (Vec<SearchDoc>, SearchIndex) {
        let docs = vec![
            doc(
                "slack_send_message",
                "Post a message to a Slack channel.",
                Some("slack"),
            ),
            doc(
                "email_send",
                "Send an email message to an address.",
                Some("mail"),
            ),
            doc(
                "calendar_create_event",
                "Create an event in the owner's calendar.",
                None,
            ),
            doc("weather_forecast", "Weather forecast for a city.", None),
        ];
        let index = SearchIndex::build(&docs);
        (docs, index)
    }

    fn names(docs: &[SearchDoc], hits: Vec<usize>) -> Vec<&str> {
        hits.into_iter().map(|i| docs[i].name.as_str()).collect()
    }

    #[test]
    fn every_query_form_finds_what_it_should() {
        let (docs, index) = index();
        let table: Vec<(&str, Vec<&str>)> = vec![
            (
                "select:weather_forecast,email_send",
                vec!["weather_forecast", "email_send"],
            ),
            ("select:nope,email_send", vec!["email_send"]),
            ("send a message", vec!["email_send", "slack_send_message"]),
            ("+slack send", vec!["slack_send_message"]),
            ("+email message", vec!["email_send"]),
            ("+nothing send", vec![]),
            (
                "what will the weather be in Paris",
                vec!["weather_forecast"],
            ),
            ("schedule events", vec!["calendar_create_event"]),
            ("quantum chromodynamics", vec![]),
        ];
        for (text, expected) in table {
            let query = parse_query(text).unwrap();
            let mut found = names(&docs, index.search(&query, 5));
            if text == "send a message" {
                found.sort();
            }
            assert_eq!(found, expected, "{text}");
        }
    }

    /// The baseline is BM25 over the name and the description alone, so a term's rarity
    /// is counted in those fields only: eight tools that mention "alpha" in their
    /// parameters must not make it look common.
    #[test]
    fn plain_bm25_counts_rarity_in_its_own_fields_only() {
        let mut docs = vec![
            doc("first", "alpha", None),
            doc("second", "beta and more words", None),
        ];
        for i in 0..8 {
            docs.push(SearchDoc {
                parameters: vec!["alpha an input".into()],
                ..doc(&format!("other_{i}"), "unrelated", None)
            });
        }
        let index = SearchIndex::with_weights(&docs, Weights::plain_bm25());
        let hits = index.search(&parse_query("alpha beta").unwrap(), 2);
        assert_eq!(names(&docs, hits), ["first", "second"]);
    }

    #[test]
    fn a_name_match_outranks_a_description_match() {
        let docs = vec![
            doc(
                "notes_append",
                "Append text; can also search nothing.",
                None,
            ),
            doc("search_notes", "Find notes.", None),
        ];
        let index = SearchIndex::build(&docs);
        let hits = index.search(&parse_query("search").unwrap(), 2);
        assert_eq!(names(&docs, hits), ["search_notes", "notes_append"]);
    }

    #[test]
    fn k_bounds_the_results_and_ties_keep_corpus_order() {
        let docs: Vec<SearchDoc> = (0..20)
            .map(|i| doc(&format!("tool_{i}"), "Does the same thing.", None))
            .collect();
        let index = SearchIndex::build(&docs);
        let hits = index.search(&parse_query("same thing").unwrap(), 3);
        assert_eq!(hits, [0, 1, 2]);
    }
}
