//! Tool search quality and speed on the labelled corpora of `../shared/data/toolsearch`
//! (dev queries only): Recall@1, Recall@5, Complete@5, MRR, query latency p50/p99 and index
//! build time per data set; and the bytes of tool declarations a request carries for each
//! corpus under full injection (every schema as a function declaration), tiered loading
//! (`tool_search` and `call_tool` in full, the corpus as a list of names) and names only.
//!
//! Last, the time of a hostile query (18 KB of base64 pasted as a query) on the largest
//! corpus: the median and the worst of 200 searches.
//!
//! Run: `cargo bench -p steward-tools --bench search`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::path::PathBuf;

use serde_json::json;
use steward_tools::search::Weights;
use steward_tools::search::eval::{Corpus, evaluate, load_corpus, load_queries};

const SETS: [&str; 4] = ["metatool", "toolbench", "sealtools", "livemcpbench"];

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/toolsearch")
}

/// (full, tiered, names only) bytes of declarations for a corpus.
fn declaration_bytes(corpus: &Corpus, tools_jsonl: &std::path::Path) -> (usize, usize, usize) {
    let declaration = |name: &str, description: &str, parameters: &serde_json::Value| {
        json!({"type": "function", "function": {"name": name, "description": description, "parameters": parameters}})
            .to_string()
            .len()
    };
    let text = std::fs::read_to_string(tools_jsonl).unwrap();
    let full: usize = text
        .lines()
        .map(|line| {
            let tool: serde_json::Value = serde_json::from_str(line).unwrap();
            let parameters = match &tool["parameters"] {
                serde_json::Value::Null => json!({"type": "object"}),
                p => p.clone(),
            };
            declaration(
                tool["name"].as_str().unwrap(),
                tool["description"].as_str().unwrap_or(""),
                &parameters,
            )
        })
        .sum();
    // As Steward would name them: an MCP server's tools are `SERVER_TOOL`.
    let names: Vec<String> = corpus.ids.iter().map(|id| id.replace('/', "_")).collect();
    let names_only = names.join(", ").len();
    let registry = steward_tools::ToolRegistryBuilder::new().build().unwrap();
    let meta: usize = registry
        .contracts()
        .iter()
        .map(|c| declaration(&c.name, &c.description, &c.parameters))
        .sum();
    (full, meta + names_only, names_only)
}

/// 18 KB of base64-like text, deterministic.
fn base64_blob(bytes: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = 0x2545_f491_u32;
    (0..bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            char::from(ALPHABET[(state % 64) as usize])
        })
        .collect()
}

fn hostile_query() {
    let corpus = load_corpus(&data_dir().join("sealtools/tools.jsonl")).unwrap();
    let index = steward_tools::search::SearchIndex::build(&corpus.docs);
    let query = steward_tools::search::Query::Ranked {
        required: Vec::new(),
        text: base64_blob(18 * 1024),
    };
    let mut times: Vec<std::time::Duration> = (0..200)
        .map(|_| {
            let started = tokio::time::Instant::now();
            std::hint::black_box(index.search(&query, 5));
            started.elapsed()
        })
        .collect();
    times.sort();
    println!();
    println!(
        "hostile query (18 KB of base64) over sealtools, {} tools: median {:.1} µs, worst {:.1} µs",
        corpus.docs.len(),
        times[times.len() / 2].as_secs_f64() * 1e6,
        times[times.len() - 1].as_secs_f64() * 1e6
    );
}

fn main() {
    println!(
        "| data set | tools | queries | R@1 | R@5 | Complete@5 | MRR | p50 µs | p99 µs | build ms |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut declarations = Vec::new();
    for set in SETS {
        let dir = data_dir().join(set);
        let corpus = load_corpus(&dir.join("tools.jsonl")).unwrap();
        let queries = load_queries(&dir.join("queries-dev.jsonl")).unwrap();
        let report = evaluate(&corpus, &queries, 5, Weights::default());
        declarations.push((set, declaration_bytes(&corpus, &dir.join("tools.jsonl"))));
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
    hostile_query();
    println!();
    println!(
        "| data set | full injection bytes | tiered bytes | names only bytes | tiered saves |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (set, (full, tiered, names)) in declarations {
        println!(
            "| {set} | {full} | {tiered} | {names} | {:.1}% |",
            100.0 * (1.0 - tiered as f64 / full as f64)
        );
    }
}
