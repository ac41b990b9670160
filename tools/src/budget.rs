//! The result budget (pipeline step 9): a result larger than its tool's `result_budget`, or a
//! batch whose results together exceed the batch budget, is cut to its head and tail; the
//! full output goes to a spill file, and the result says
//! `truncated: original N bytes, kept M, full output at PATH` so the model can read the rest
//! with `fs_read` if it needs to. Spill files are removed by age ([`ResultBudget::clean`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use steward_events::ToolOutcome;
use tracing::warn;

/// Default for the results of one batch together.
pub const BATCH_BUDGET_BYTES: usize = 300 * 1024;

#[derive(Clone, Debug)]
pub struct ResultBudget {
    spill_dir: PathBuf,
    batch_budget: usize,
}

impl ResultBudget {
    pub fn new(spill_dir: PathBuf, batch_budget: usize) -> Self {
        Self {
            spill_dir,
            batch_budget,
        }
    }

    /// The budget each of `calls` results gets when the batch is over its budget.
    pub fn share(&self, calls: usize) -> usize {
        (self.batch_budget / calls.max(1)).max(1024)
    }

    pub fn batch_budget(&self) -> usize {
        self.batch_budget
    }

    /// Cuts `outcome` to `budget` bytes if it is larger, spilling the full text.
    pub fn apply(
        &self,
        call_id: &str,
        tool: &str,
        budget: usize,
        outcome: ToolOutcome,
    ) -> ToolOutcome {
        let text = outcome.content_text();
        if text.len() <= budget {
            return outcome;
        }
        let spill = self
            .spill_dir
            .join(format!("{}-{}.txt", sanitize(call_id), sanitize(tool)));
        let location = match std::fs::create_dir_all(&self.spill_dir)
            .and_then(|()| std::fs::write(&spill, &text))
        {
            Ok(()) => spill.display().to_string(),
            Err(e) => {
                warn!(call_id, tool, error = %e, "cannot write the spill file");
                format!("(not kept: {e})")
            }
        };
        let head = floor_char_boundary(&text, budget * 2 / 3);
        let tail = ceil_char_boundary(&text, text.len() - (budget - head));
        let kept = head + (text.len() - tail);
        let content = format!(
            "{}\n[truncated: original {} bytes, kept {kept}, full output at {location}]\n{}",
            &text[..head],
            text.len(),
            &text[tail..]
        );
        ToolOutcome {
            status: outcome.status,
            content: Value::String(content),
            hint: outcome.hint,
            untrusted: outcome.untrusted,
        }
    }

    /// Removes spill files older than `age`; returns how many.
    pub fn clean(&self, age: Duration) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.spill_dir) else {
            return 0;
        };
        let now = SystemTime::now();
        entries
            .flatten()
            .filter(|e| {
                e.metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|modified| now.duration_since(modified).unwrap_or_default() >= age)
            })
            .filter(|e| std::fs::remove_file(e.path()).is_ok())
            .count()
    }

    pub fn spill_dir(&self) -> &Path {
        &self.spill_dir
    }
}

/// Sizes for the batch check: what a result will weigh in the prompt.
pub(crate) fn size_of(outcome: &ToolOutcome) -> usize {
    match &outcome.content {
        Value::String(s) => s.len(),
        other => other.to_string().len(),
    }
}

fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char_boundary(text: &str, mut at: usize) -> usize {
    while at < text.len() && !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use steward_events::ToolStatus;

    use super::*;

    #[test]
    fn small_results_pass_large_ones_are_cut_and_spilled() {
        let dir = tempfile::tempdir().unwrap();
        let budget = ResultBudget::new(dir.path().join("spill"), BATCH_BUDGET_BYTES);
        let small = ToolOutcome::ok(json!({"a": 1}));
        assert_eq!(budget.apply("c1", "t", 100, small.clone()), small);

        let text: String = (0..2000).map(|i| format!("line {i} é\n")).collect();
        let cut = budget.apply("c2", "fs_read", 1000, ToolOutcome::ok(json!(text)));
        let Value::String(content) = &cut.content else {
            panic!("{cut:?}")
        };
        assert!(content.starts_with("line 0 é\n"), "keeps the head");
        assert!(content.ends_with("line 1999 é\n"), "keeps the tail");
        let note = format!("[truncated: original {} bytes, kept ", text.len());
        assert!(content.contains(&note), "{content}");
        assert!(content.len() < 1200, "{}", content.len());
        let spilled = std::fs::read_to_string(dir.path().join("spill/c2-fs_read.txt")).unwrap();
        assert_eq!(spilled, text, "the full output is kept");
        assert_eq!(cut.status, ToolStatus::Ok);

        let hinted = ToolOutcome::error("x".repeat(5000)).with_hint("try a smaller window");
        let cut = budget.apply("c3", "t", 100, hinted);
        assert_eq!(
            cut.hint.as_deref(),
            Some("try a smaller window"),
            "hints ride outside the budget"
        );

        assert_eq!(
            budget.clean(Duration::from_secs(3600)),
            0,
            "fresh files stay"
        );
        assert_eq!(budget.clean(Duration::ZERO), 2);
    }
}
