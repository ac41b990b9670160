//! Tool search quality and speed on the labelled corpora of `../shared/data/toolsearch`
//! (dev queries only): Recall@1, Recall@5, Complete@5, MRR, query latency p50/p99 and index
//! build time per data set.
//!
//! Run: `cargo bench -p steward-tools --bench search`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::path::PathBuf;

use steward_tools::search::Weights;
use steward_tools::search::eval::{evaluate, load_corpus, load_queries};

const SETS: [&str; 4] = ["metatool", "toolbench", "sealtools", "livemcpbench"];

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/toolsearch")
}

fn main() {
    println!(
        "| data set | tools | queries | R@1 | R@5 | Complete@5 | MRR | p50 µs | p99 µs | build ms |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for set in SETS {
        let dir = data_dir().join(set);
        let corpus = load_corpus(&dir.join("tools.jsonl")).unwrap();
        let queries = load_queries(&dir.join("queries-dev.jsonl")).unwrap();
        let report = evaluate(&corpus, &queries, 5, Weights::default());
        println!(
            "| {set} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} | {:.1} | {:.1} |",
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
}
