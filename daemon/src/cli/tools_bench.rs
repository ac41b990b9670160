//! `steward tools bench`: tool search measured on a labelled corpus, with the same index
//! and ranking as `tool_search` (every corpus tool indexed as a deferred tool would be),
//! optionally with the semantic channel's model and with labelled queries fed first as
//! past usage.

use std::collections::HashSet;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use steward_tools::search::eval::{evaluate, learn_usage, load_corpus, load_queries};
use steward_tools::search::{Embedder, Weights};

use super::output::out;

/// What to measure.
#[derive(Debug)]
pub struct Inputs<'a> {
    pub tools: &'a Path,
    pub queries: &'a Path,
    pub usage: Option<&'a Path>,
    pub embedding_model: Option<&'a Path>,
}

pub fn run(inputs: &Inputs<'_>, k: usize, json: bool) -> ExitCode {
    if k == 0 {
        eprintln!("steward: --k must be at least 1");
        return ExitCode::from(2);
    }
    let loaded = load_corpus(inputs.tools).and_then(|corpus| {
        let usage = match inputs.usage {
            Some(path) => Some(load_queries(path)?),
            None => None,
        };
        Ok((corpus, load_queries(inputs.queries)?, usage))
    });
    let (mut corpus, queries, usage) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("steward: {e}");
            return ExitCode::FAILURE;
        }
    };
    let model = match inputs.embedding_model.map(load_model).transpose() {
        Ok(model) => model,
        Err(e) => {
            eprintln!("steward: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut learnt = None;
    if let Some(usage) = &usage {
        let taken = learn_usage(&mut corpus, usage);
        let texts: HashSet<&str> = usage.iter().map(|q| q.query.as_str()).collect();
        let overlap = queries
            .iter()
            .filter(|q| texts.contains(q.query.as_str()))
            .count();
        learnt = Some((taken, overlap));
    }
    let report = evaluate(&corpus, &queries, k, Weights::default(), model);
    if json {
        out!("{}", serde_json::to_string(&report).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    if let Some((taken, overlap)) = learnt {
        out!(
            "usage: {taken} labelled queries learnt; {overlap} of the {} measured queries are among them verbatim{}",
            queries.len(),
            if overlap > 0 {
                " (those are not held out)"
            } else {
                ""
            }
        );
    }
    out!(
        "{} tools, {} queries: Recall@1 {:.3}  Recall@{k} {:.3}  Complete@{k} {:.3}  MRR {:.3}  query p50 {:.1} µs p99 {:.1} µs  index build {:.1} ms",
        report.tools,
        report.queries,
        report.recall_at_1,
        report.recall_at_k,
        report.complete_at_k,
        report.mrr,
        report.p50_us,
        report.p99_us,
        report.build_ms
    );
    ExitCode::SUCCESS
}

#[cfg(feature = "embeddings")]
fn load_model(dir: &Path) -> Result<Arc<dyn Embedder>, String> {
    steward_tools::search::EmbeddingModel::load(dir)
        .map(|model| Arc::new(model) as Arc<dyn Embedder>)
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "embeddings"))]
fn load_model(_dir: &Path) -> Result<Arc<dyn Embedder>, String> {
    Err("this build has no semantic tool search (cargo feature `embeddings`)".into())
}
