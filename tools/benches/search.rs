//! Tool search quality and speed on the labelled corpora of `../shared/data/toolsearch`
//! (dev queries only): Recall@1, Recall@5, Complete@5, MRR, query latency p50/p99 and index
//! build time per data set; and the bytes of tool declarations a request carries for each
//! corpus under full injection (every schema as a function declaration), tiered loading
//! (`tool_search` and `call_tool` in full, the corpus as a list of names) and names only.
//!
//! Each data set is measured in every mode: plain BM25 over name + description (the
//! baseline), the lexical ranking alone (no model), with the semantic channel cold (the
//! embedding model, no usage), and with usage learnt — measured without leakage: the dev
//! queries are split in two halves, each learnt as past usage while the other is measured
//! (`evaluate_learnt`); then how many queries of usage it takes to help (10, 30, 100, 300).
//!
//! The model is read from `STEWARD_EMBEDDING_MODEL` or `/var/cache/steward-embedding`
//! (built by `scripts/embedding-model/build.sh`); without one the semantic rows say so.
//!
//! Last, the time of a hostile query (18 KB of base64 pasted as a query) on the largest
//! corpus, with and without the model: the median and the worst of 200 searches.
//!
//! Run: `cargo bench -p steward-tools --bench search`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use steward_tools::search::eval::{
    Corpus, Report, evaluate, evaluate_learnt, load_corpus, load_queries,
};
use steward_tools::search::{Embedder, EmbeddingModel, Weights};

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

fn hostile_query(model: Option<Arc<dyn Embedder>>) {
    let corpus = load_corpus(&data_dir().join("sealtools/tools.jsonl")).unwrap();
    let with_model = model.is_some();
    let index =
        steward_tools::search::SearchIndex::with_model(&corpus.docs, Weights::default(), model);
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
        "hostile query (18 KB of base64) over sealtools, {} tools{}: median {:.1} µs, worst {:.1} µs",
        corpus.docs.len(),
        if with_model { ", with the model" } else { "" },
        times[times.len() / 2].as_secs_f64() * 1e6,
        times[times.len() - 1].as_secs_f64() * 1e6
    );
}

/// Resident set size of this process, in bytes.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn load_model() -> Option<Arc<dyn Embedder>> {
    let dir = std::env::var_os("STEWARD_EMBEDDING_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/steward-embedding"));
    if !dir.join("model.safetensors").is_file() {
        println!(
            "no embedding model at {} (scripts/embedding-model/build.sh builds one): the semantic rows are not measured",
            dir.display()
        );
        return None;
    }
    let before = rss_bytes();
    let started = tokio::time::Instant::now();
    let model = EmbeddingModel::load(&dir).unwrap();
    println!(
        "embedding model {}: loaded in {:.0} ms, table {:.1} MB, RSS added {:.1} MB",
        dir.display(),
        started.elapsed().as_secs_f64() * 1e3,
        model.memory_bytes() as f64 / 1e6,
        rss_bytes().saturating_sub(before) as f64 / 1e6
    );
    Some(Arc::new(model))
}

fn row(set: &str, mode: &str, report: &Report) {
    println!(
        "| {set} | {mode} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} | {:.1} | {:.1} |",
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

fn main() {
    let model = load_model();
    println!();
    println!(
        "| data set | mode | tools | queries | R@1 | R@5 | Complete@5 | MRR | p50 µs | p99 µs | build ms |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut declarations = Vec::new();
    let mut curves = Vec::new();
    for set in SETS {
        let dir = data_dir().join(set);
        let corpus = load_corpus(&dir.join("tools.jsonl")).unwrap();
        let queries = load_queries(&dir.join("queries-dev.jsonl")).unwrap();
        declarations.push((set, declaration_bytes(&corpus, &dir.join("tools.jsonl"))));
        let baseline = evaluate(&corpus, &queries, 5, Weights::plain_bm25(), None);
        row(set, "plain BM25 (name + description)", &baseline);
        row(
            set,
            "lexical (no model)",
            &evaluate(&corpus, &queries, 5, Weights::default(), None),
        );
        row(
            set,
            "lexical + usage (2-fold)",
            &evaluate_learnt(&corpus, &queries, 5, Weights::default(), None, None),
        );
        let Some(model) = &model else { continue };
        let cold = evaluate(
            &corpus,
            &queries,
            5,
            Weights::default(),
            Some(model.clone()),
        );
        row(set, "with model, cold", &cold);
        let warm = evaluate_learnt(
            &corpus,
            &queries,
            5,
            Weights::default(),
            Some(model.clone()),
            None,
        );
        row(set, "with model + usage (2-fold)", &warm);
        let mut curve = vec![(0, cold.recall_at_k)];
        for limit in [10, 30, 100, 300] {
            if limit >= queries.len() / 2 {
                break;
            }
            let r = evaluate_learnt(
                &corpus,
                &queries,
                5,
                Weights::default(),
                Some(model.clone()),
                Some(limit),
            );
            curve.push((limit, r.recall_at_k));
        }
        curve.push((queries.len() / 2, warm.recall_at_k));
        curves.push((set, baseline.recall_at_k, curve));
    }
    if !curves.is_empty() {
        println!();
        println!(
            "R@5 with the model by queries of usage learnt (each half of the dev queries learns that many of its own, the other half is measured):"
        );
        for (set, baseline, curve) in curves {
            let points: Vec<String> = curve
                .iter()
                .map(|(n, r)| format!("{n}: {r:.3} ({:+.3})", r - baseline))
                .collect();
            println!("- {set} (plain BM25 {baseline:.3}): {}", points.join(", "));
        }
    }
    hostile_query(None);
    hostile_query(model.clone());
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
