//! Measuring tool search on a labelled corpus in the format of `../shared/data/toolsearch`
//! (`tools.jsonl`: `id`, `server`, `name`, `description`, `parameters`, optional `title`,
//! `server_title`; `queries-dev.jsonl`: `query`, `relevant`, optional `relevant_groups`).
//! Every tool is indexed as a deferred tool would be, and queried as `tool_search` would.
//!
//! Scoring, as the data set's README suggests: each needed tool is a group (one id, or the
//! interchangeable ids of `relevant_groups`); recall@k is the share of groups found in the
//! top k, complete@k whether all were, MRR the reciprocal rank of the first found.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

use super::{Embedder, Query, SearchDoc, SearchIndex, Weights};

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {reason}")]
    Parse {
        path: String,
        line: usize,
        reason: String,
    },
}

#[derive(Debug, Deserialize)]
struct CorpusTool {
    id: String,
    server: Option<String>,
    name: String,
    #[serde(default)]
    description: String,
    parameters: Option<Value>,
    title: Option<String>,
    server_title: Option<String>,
}

#[derive(Debug, Deserialize)]
struct LabelledQuery {
    query: String,
    relevant: Vec<String>,
    relevant_groups: Option<Vec<Vec<String>>>,
}

/// A corpus loaded for search: the ids and the documents, in file order.
#[derive(Debug)]
pub struct Corpus {
    pub ids: Vec<String>,
    pub docs: Vec<SearchDoc>,
}

/// A query with the tools it needs, as groups of interchangeable tool ids.
#[derive(Debug)]
pub struct Labelled {
    pub query: String,
    pub groups: Vec<Vec<String>>,
}

fn lines<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>, EvalError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read {
        path: shown.clone(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| EvalError::Parse {
                path: shown.clone(),
                line: i + 1,
                reason: e.to_string(),
            })
        })
        .collect()
}

pub fn load_corpus(path: &Path) -> Result<Corpus, EvalError> {
    let tools: Vec<CorpusTool> = lines(path)?;
    let mut ids = Vec::with_capacity(tools.len());
    let mut docs = Vec::with_capacity(tools.len());
    for tool in tools {
        let server = match (tool.server, tool.server_title) {
            (Some(s), Some(t)) => Some(format!("{s} {t}")),
            (s, t) => s.or(t),
        };
        let parameters = tool
            .parameters
            .as_ref()
            .map(super::parameter_texts)
            .unwrap_or_default();
        ids.push(tool.id);
        docs.push(SearchDoc {
            name: tool.name,
            title: tool.title,
            description: tool.description,
            search_hint: None,
            server,
            parameters,
            usage: Vec::new(),
        });
    }
    Ok(Corpus { ids, docs })
}

pub fn load_queries(path: &Path) -> Result<Vec<Labelled>, EvalError> {
    let queries: Vec<LabelledQuery> = lines(path)?;
    Ok(queries
        .into_iter()
        .map(|q| Labelled {
            groups: q
                .relevant_groups
                .unwrap_or_else(|| q.relevant.into_iter().map(|id| vec![id]).collect()),
            query: q.query,
        })
        .collect())
}

/// Feeds labelled queries as past usage: each query becomes a request that led to a call of
/// each tool it needs (the first of a group of interchangeable ones). Returns how many
/// queries were taken.
pub fn learn_usage(corpus: &mut Corpus, usage: &[Labelled]) -> usize {
    let position: HashMap<String, usize> = corpus
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.clone(), i))
        .collect();
    let mut taken = 0;
    for labelled in usage {
        let mut used = false;
        for group in &labelled.groups {
            if let Some(&tool) = group.iter().find_map(|id| position.get(id)) {
                corpus.docs[tool].usage.push(labelled.query.clone());
                used = true;
            }
        }
        taken += usize::from(used);
    }
    taken
}

/// What `steward tools bench --json` prints.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub recall_at_1: f64,
    pub recall_at_k: f64,
    pub complete_at_k: f64,
    pub mrr: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub build_ms: f64,
    pub queries: usize,
    pub tools: usize,
    /// The k of `recall_at_k`; not part of the JSON report, whose keys are fixed.
    #[serde(skip)]
    pub k: usize,
}

/// Builds the index over `corpus` (with the semantic channel when `model` is given) and
/// runs every query.
pub fn evaluate(
    corpus: &Corpus,
    queries: &[Labelled],
    k: usize,
    weights: Weights,
    model: Option<Arc<dyn Embedder>>,
) -> Report {
    let started = Instant::now();
    let index = SearchIndex::with_model(&corpus.docs, weights, model);
    let build = started.elapsed();
    let position: HashMap<&str, usize> = corpus
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    // Ranks far enough down for MRR; recall only looks at the top k.
    let depth = k.max(100);
    let (mut r1, mut rk, mut complete, mut mrr) = (0.0, 0.0, 0.0, 0.0);
    let mut latencies = Vec::with_capacity(queries.len());
    let mut scored = 0usize;
    for labelled in queries {
        let groups: Vec<Vec<usize>> = labelled
            .groups
            .iter()
            .map(|g| {
                g.iter()
                    .filter_map(|id| position.get(id.as_str()).copied())
                    .collect()
            })
            .filter(|g: &Vec<usize>| !g.is_empty())
            .collect();
        let started = Instant::now();
        let query = Query::Ranked {
            required: Vec::new(),
            text: labelled.query.clone(),
        };
        let hits = index.search(&query, depth);
        latencies.push(started.elapsed());
        if groups.is_empty() {
            continue;
        }
        scored += 1;
        let found_within = |n: usize| {
            groups
                .iter()
                .filter(|g| hits.iter().take(n).any(|h| g.contains(h)))
                .count() as f64
                / groups.len() as f64
        };
        r1 += found_within(1);
        let at_k = found_within(k);
        rk += at_k;
        if at_k == 1.0 {
            complete += 1.0;
        }
        if let Some(rank) = hits
            .iter()
            .position(|h| groups.iter().any(|g| g.contains(h)))
        {
            mrr += 1.0 / (rank + 1) as f64;
        }
    }
    latencies.sort();
    let percentile = |p: f64| {
        latencies
            .get(((latencies.len().saturating_sub(1)) as f64 * p).round() as usize)
            .copied()
            .unwrap_or(Duration::ZERO)
            .as_secs_f64()
            * 1e6
    };
    let n = scored.max(1) as f64;
    Report {
        recall_at_1: r1 / n,
        recall_at_k: rk / n,
        complete_at_k: complete / n,
        mrr: mrr / n,
        p50_us: percentile(0.5),
        p99_us: percentile(0.99),
        build_ms: build.as_secs_f64() * 1e3,
        queries: scored,
        tools: corpus.docs.len(),
        k,
    }
}

/// Usage learning measured without leakage: the queries are split in two halves
/// (alternate lines); each half is learnt as past usage (its first `usage_limit` queries,
/// or all) and the other half evaluated; the two reports are averaged.
pub fn evaluate_learnt(
    corpus: &Corpus,
    queries: &[Labelled],
    k: usize,
    weights: Weights,
    model: Option<Arc<dyn Embedder>>,
    usage_limit: Option<usize>,
) -> Report {
    let half = |parity: usize| -> Vec<&Labelled> {
        queries
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 2 == parity)
            .map(|(_, q)| q)
            .collect()
    };
    let mut reports = Vec::new();
    for parity in 0..2 {
        let learnt = half(parity);
        let limit = usage_limit.unwrap_or(learnt.len()).min(learnt.len());
        let mut warm = Corpus {
            ids: corpus.ids.clone(),
            docs: corpus.docs.clone(),
        };
        let usage: Vec<Labelled> = learnt[..limit]
            .iter()
            .map(|q| Labelled {
                query: q.query.clone(),
                groups: q.groups.clone(),
            })
            .collect();
        learn_usage(&mut warm, &usage);
        let tested: Vec<Labelled> = half(1 - parity)
            .into_iter()
            .map(|q| Labelled {
                query: q.query.clone(),
                groups: q.groups.clone(),
            })
            .collect();
        reports.push(evaluate(&warm, &tested, k, weights, model.clone()));
    }
    let mean = |f: fn(&Report) -> f64| reports.iter().map(f).sum::<f64>() / reports.len() as f64;
    Report {
        recall_at_1: mean(|r| r.recall_at_1),
        recall_at_k: mean(|r| r.recall_at_k),
        complete_at_k: mean(|r| r.complete_at_k),
        mrr: mean(|r| r.mrr),
        p50_us: mean(|r| r.p50_us),
        p99_us: mean(|r| r.p99_us),
        build_ms: mean(|r| r.build_ms),
        queries: reports.iter().map(|r| r.queries).sum(),
        tools: corpus.docs.len(),
        k,
    }
}
