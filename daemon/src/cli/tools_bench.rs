//! `steward tools bench`: tool search measured on a labelled corpus, with the same index
//! and ranking as `tool_search` (every corpus tool indexed as a deferred tool would be).

use std::path::Path;
use std::process::ExitCode;

use steward_tools::search::Weights;
use steward_tools::search::eval::{evaluate, load_corpus, load_queries};

use super::output::out;

pub fn run(tools: &Path, queries: &Path, k: usize, json: bool) -> ExitCode {
    if k == 0 {
        eprintln!("steward: --k must be at least 1");
        return ExitCode::from(2);
    }
    let loaded = load_corpus(tools).and_then(|corpus| Ok((corpus, load_queries(queries)?)));
    let (corpus, queries) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("steward: {e}");
            return ExitCode::FAILURE;
        }
    };
    let report = evaluate(&corpus, &queries, k, Weights::default());
    if json {
        out!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
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
    }
    ExitCode::SUCCESS
}
