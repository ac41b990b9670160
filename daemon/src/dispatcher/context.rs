//! The conversation a model sees, kept within its context window.
//!
//! A step loads the trajectory's recent items once — back to the latest `summary` item,
//! which stands in for everything it covers — and then appends its own items as they are
//! recorded, so rounds never re-read the store. Before each model call the prompt is
//! estimated; when it would take more than [`COMPACT_AT`] of the prompt budget (the window
//! minus the answer's reserve), the older items are compacted: the model writes a summary of
//! them, the summary is appended to the trajectory (the raw items stay on disk), and the
//! view continues from the summary plus the newest items, which keep up to [`KEEP`] of the
//! budget. A tool result is never separated from its call.
//!
//! Token counts are estimated from bytes. The ratio starts at 4 bytes per token and is
//! calibrated from every response's reported input tokens, because tokenizers differ a lot
//! between models (and JSON, code and non-Latin text tokenize very differently from prose).

use std::sync::{Arc, Mutex};

use steward_events::{ItemKind, TrajectoryItem};
use steward_tools::ToolSpec;

/// Compaction starts when the estimated prompt passes this share of the budget, leaving
/// room for the next round's results.
const COMPACT_AT: f64 = 0.85;
/// The newest items kept verbatim after a compaction, as a share of the budget.
const KEEP: f64 = 0.4;

/// Tokens per byte, learned from the provider's usage reports.
#[derive(Debug)]
pub struct TokenEstimator {
    tokens_per_byte: Mutex<f64>,
}

impl Default for TokenEstimator {
    fn default() -> Self {
        Self {
            tokens_per_byte: Mutex::new(0.25),
        }
    }
}

impl TokenEstimator {
    pub fn tokens(&self, bytes: usize) -> u64 {
        (bytes as f64 * self.ratio()).ceil() as u64
    }

    fn ratio(&self) -> f64 {
        *self
            .tokens_per_byte
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the estimate halfway towards what one request of `bytes` really cost.
    pub fn calibrate(&self, bytes: usize, reported_tokens: u64) {
        if bytes < 256 || reported_tokens == 0 {
            return; // too small to say anything about the tokenizer
        }
        let observed = (reported_tokens as f64 / bytes as f64).clamp(0.05, 1.0);
        let mut ratio = self
            .tokens_per_byte
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *ratio = (*ratio + observed) / 2.0;
    }
}

/// Roughly the bytes an item takes once rendered for a model.
fn item_bytes(item: &TrajectoryItem) -> usize {
    // Role markers, headers and JSON punctuation around each item.
    const FRAME: usize = 48;
    FRAME
        + match &item.kind {
            ItemKind::Event {
                channel,
                sender,
                text,
                ..
            } => channel.len() + sender.identity.len() + text.len() + 40,
            ItemKind::Assistant { text, .. } | ItemKind::Summary { text, .. } => text.len(),
            ItemKind::ToolCall { tool, args, .. } => tool.len() + json_len(args),
            ItemKind::ToolResult { result, hint, .. } => {
                json_len(result) + hint.as_ref().map_or(0, String::len) + 30
            }
            ItemKind::StepStarted { .. }
            | ItemKind::StepCompleted
            | ItemKind::StepCancelled { .. } => 0,
        }
}

fn json_len(value: &serde_json::Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing into a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// The prompt's constant part for a tool list: the system text and the schemas.
fn fixed_bytes(tools: &[ToolSpec]) -> usize {
    // (The skills' line, a few hundred bytes at most, is left out of the estimate.)
    crate::brain::prompt::system_text(tools, "").len()
        + serde_json::to_string(tools).map_or(0, |t| t.len())
}

/// Where to cut the view for compaction, or `None` when it fits (or nothing older than the
/// newest item is left to compact). `sizes` are the items' token estimates, `results` marks
/// tool results, `fixed` is the prompt's constant part (system text and tools).
fn compaction_cut(sizes: &[u64], results: &[bool], fixed: u64, budget: u64) -> Option<usize> {
    let total: u64 = fixed + sizes.iter().sum::<u64>();
    if (total as f64) <= budget as f64 * COMPACT_AT {
        return None;
    }
    let keep_budget = (budget as f64 * KEEP) as u64;
    let mut kept = 0u64;
    let mut cut = sizes.len();
    while cut > 1 && kept + sizes[cut - 1] <= keep_budget {
        kept += sizes[cut - 1];
        cut -= 1;
    }
    if cut == sizes.len() {
        // Even the newest item alone is over the keep share: keep it anyway, compact the rest.
        cut -= 1;
    }
    // Results go with their calls.
    while cut < sizes.len() && results[cut] {
        cut += 1;
    }
    (cut > 0).then_some(cut)
}

/// What a step shows its brain: the tools (fixed for as long as the view lives, so the
/// prompt prefix stays byte-identical even when an MCP server's list changes; `tool_search`
/// always searches the live set) and the items, with their estimated sizes.
#[derive(Debug)]
pub struct ContextView {
    tools: Arc<Vec<ToolSpec>>,
    /// Bytes of the prompt's constant part (system text and tool schemas) for `tools`.
    fixed_bytes: usize,
    items: Vec<TrajectoryItem>,
    bytes: Vec<usize>,
}

impl ContextView {
    pub fn new(tools: Arc<Vec<ToolSpec>>, items: Vec<TrajectoryItem>) -> Self {
        let bytes = items.iter().map(item_bytes).collect();
        Self {
            fixed_bytes: fixed_bytes(&tools),
            tools,
            items,
            bytes,
        }
    }

    pub fn fixed_bytes(&self) -> usize {
        self.fixed_bytes
    }

    pub fn tools(&self) -> &Arc<Vec<ToolSpec>> {
        &self.tools
    }

    pub fn items(&self) -> &[TrajectoryItem] {
        &self.items
    }

    pub fn push(&mut self, item: TrajectoryItem) {
        self.bytes.push(item_bytes(&item));
        self.items.push(item);
    }

    pub fn bytes(&self) -> usize {
        self.bytes.iter().sum()
    }

    /// See [`compaction_cut`].
    pub fn cut(&self, budget: u64, estimator: &TokenEstimator) -> Option<usize> {
        let sizes: Vec<u64> = self.bytes.iter().map(|b| estimator.tokens(*b)).collect();
        let results: Vec<bool> = self
            .items
            .iter()
            .map(|i| matches!(i.kind, ItemKind::ToolResult { .. }))
            .collect();
        let cut = compaction_cut(&sizes, &results, estimator.tokens(self.fixed_bytes), budget)?;
        // A lone summary cannot be compacted any further.
        let only_a_summary = cut == 1 && matches!(self.items[0].kind, ItemKind::Summary { .. });
        (!only_a_summary).then_some(cut)
    }

    /// Replaces the items before `cut` with the summary that covers them. The prompt is
    /// rewritten anyway, so the tools are brought up to date too.
    pub fn compact(&mut self, cut: usize, summary: TrajectoryItem, tools: Arc<Vec<ToolSpec>>) {
        self.fixed_bytes = fixed_bytes(&tools);
        self.tools = tools;
        self.items.drain(..cut);
        self.bytes.drain(..cut);
        self.bytes.insert(0, item_bytes(&summary));
        self.items.insert(0, summary);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_cuts_old_items_and_keeps_results_with_their_calls() {
        /// name, item sizes, which are results, fixed prefix, budget, expected cut
        type Case = (&'static str, Vec<u64>, Vec<bool>, u64, u64, Option<usize>);
        let r = true;
        let o = false;
        let table: Vec<Case> = vec![
            ("fits", vec![10, 10, 10], vec![o, o, o], 10, 100, None),
            (
                "exactly at the threshold",
                vec![40, 35],
                vec![o, o],
                10,
                100,
                None,
            ),
            (
                "over: the newest 40% stay",
                vec![30, 30, 20, 20],
                vec![o, o, o, o],
                0,
                100,
                Some(2),
            ),
            (
                "a result is never cut from its call",
                vec![30, 30, 20, 20],
                vec![o, o, r, o],
                0,
                100,
                Some(3),
            ),
            (
                "a huge newest item is kept, everything before it goes",
                vec![10, 10, 90],
                vec![o, o, o],
                0,
                100,
                Some(2),
            ),
            (
                "a huge newest result is compacted with its call",
                vec![10, 5, 90],
                vec![o, o, r],
                0,
                100,
                Some(3),
            ),
            (
                "the fixed prefix counts",
                vec![10, 10],
                vec![o, o],
                80,
                100,
                Some(1),
            ),
        ];
        for (name, sizes, results, fixed, budget, expected) in table {
            assert_eq!(
                compaction_cut(&sizes, &results, fixed, budget),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn the_estimate_follows_the_reported_usage() {
        let estimator = TokenEstimator::default();
        assert_eq!(estimator.tokens(4000), 1000);
        // A tokenizer that needs a token for every 2 bytes.
        for _ in 0..8 {
            estimator.calibrate(10_000, 5_000);
        }
        assert!(
            (estimator.ratio() - 0.5).abs() < 0.01,
            "{}",
            estimator.ratio()
        );
        // Tiny or empty reports teach nothing.
        estimator.calibrate(100, 90);
        estimator.calibrate(10_000, 0);
        assert!((estimator.ratio() - 0.5).abs() < 0.01);
    }
}
