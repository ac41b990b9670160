//! Spending decisions: whether the next model call may go out ([`before_model_call`]) and
//! whether a turn is going round in circles ([`LoopGuard`]). Pure, so each rule is a row in
//! a table test.
//!
//! Decided here:
//! - The daily caps are looked at first: past them the work *waits* (its events stay
//!   pending until the owner raises the cap or the day turns), while a run's own caps
//!   *stop* that run (waiting would not make it cheaper).
//! - A cap is passed by the call that would go beyond it: the tokens already spent plus the
//!   next call's estimated prompt. A call count cap allows exactly that many calls.
//! - The loop guard ends a turn when a call with the same tool and the same arguments would
//!   be made in a third round (the same call twice in one round counts once), or after [`STALE_ROUNDS`] rounds in a row whose results were all
//!   seen before in the turn.

use std::collections::{HashMap, HashSet};

/// Rounds in a row with no new tool result after which a turn ends.
pub const STALE_ROUNDS: u32 = 3;
/// The same call (tool and arguments) may be made this many times in a turn.
pub const SAME_CALL_LIMIT: u32 = 2;

/// The caps that apply to the next call.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Caps {
    pub run_tokens: Option<u64>,
    pub run_calls: Option<u32>,
    pub daily_tokens: Option<u64>,
    pub daily_cost: Option<f64>,
}

/// What was spent so far: in this run, and today (in the owner's zone).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spent {
    pub run_tokens: u64,
    pub run_calls: u32,
    pub day_tokens: u64,
    pub day_cost: f64,
}

/// The next call, as estimated before it is made.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NextCall {
    pub tokens: u64,
    pub cost: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Go,
    /// This run stops here, saying why.
    StopRun(String),
    /// Nothing more runs today (or until a cap is raised); the work waits.
    WaitForBudget(String),
}

pub fn before_model_call(caps: &Caps, spent: &Spent, next: NextCall) -> Verdict {
    if let Some(cap) = caps.daily_tokens
        && spent.day_tokens.saturating_add(next.tokens) > cap
    {
        return Verdict::WaitForBudget(format!(
            "the daily token budget (budget.daily_tokens = {cap}) is reached: {} used today, the next call needs about {}",
            spent.day_tokens, next.tokens
        ));
    }
    if let Some(cap) = caps.daily_cost
        && spent.day_cost + next.cost > cap
    {
        return Verdict::WaitForBudget(format!(
            "the daily cost budget (budget.daily_cost = {cap}) is reached: {:.4} spent today",
            spent.day_cost
        ));
    }
    if let Some(cap) = caps.run_calls
        && spent.run_calls >= cap
    {
        return Verdict::StopRun(format!(
            "this run made its {cap} model calls (max_model_calls_per_run)"
        ));
    }
    if let Some(cap) = caps.run_tokens
        && spent.run_tokens.saturating_add(next.tokens) > cap
    {
        return Verdict::StopRun(format!(
            "the next model call would pass this run's {cap} tokens (max_tokens_per_run): {} used, about {} more needed",
            spent.run_tokens, next.tokens
        ));
    }
    Verdict::Go
}

/// Watches one turn's calls and results (see the module docs).
#[derive(Debug, Default)]
pub struct LoopGuard {
    calls: HashMap<String, u32>,
    results: HashSet<String>,
    stale_rounds: u32,
}

impl LoopGuard {
    /// Before a round's calls run: why the turn must end instead, if it must. `calls` are
    /// (tool, canonical arguments).
    pub fn before_calls<'a>(
        &mut self,
        calls: impl IntoIterator<Item = (&'a str, &'a serde_json::Value)>,
    ) -> Option<String> {
        // A call repeated within one round is one batch (several events can ask for the
        // same thing at once); a loop repeats it round after round.
        let round: HashSet<(String, String)> = calls
            .into_iter()
            .map(|(tool, args)| (tool.to_owned(), args.to_string()))
            .collect();
        for (tool, args) in round {
            let count = self.calls.entry(format!("{tool} {args}")).or_insert(0);
            *count += 1;
            if *count > SAME_CALL_LIMIT {
                return Some(format!(
                    "I stopped: the same call ({tool} with the same arguments) came a third time in this turn."
                ));
            }
        }
        None
    }

    /// After a round's results: why the turn must end, if it must. `results` are the
    /// results' canonical text.
    pub fn after_results<'a>(
        &mut self,
        results: impl IntoIterator<Item = &'a str>,
    ) -> Option<String> {
        let mut new = false;
        for result in results {
            new |= self.results.insert(result.to_owned());
        }
        if new {
            self.stale_rounds = 0;
            return None;
        }
        self.stale_rounds += 1;
        (self.stale_rounds >= STALE_ROUNDS).then(|| {
            format!("I stopped: {STALE_ROUNDS} rounds of tool calls in a row brought nothing new.")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn caps_table() {
        let spent = Spent {
            run_tokens: 900,
            run_calls: 3,
            day_tokens: 9_000,
            day_cost: 0.9,
        };
        let next = NextCall {
            tokens: 200,
            cost: 0.05,
        };
        let go = |caps: Caps| before_model_call(&caps, &spent, next);
        let stop = |v: &Verdict| matches!(v, Verdict::StopRun(_));
        let wait = |v: &Verdict| matches!(v, Verdict::WaitForBudget(_));
        assert_eq!(go(Caps::default()), Verdict::Go);
        // Run tokens: 900 + 200 passes 1000, not 1100.
        assert!(stop(&go(Caps {
            run_tokens: Some(1000),
            ..Caps::default()
        })));
        assert_eq!(
            go(Caps {
                run_tokens: Some(1100),
                ..Caps::default()
            }),
            Verdict::Go
        );
        // Run calls: three made, three allowed.
        assert!(stop(&go(Caps {
            run_calls: Some(3),
            ..Caps::default()
        })));
        assert_eq!(
            go(Caps {
                run_calls: Some(4),
                ..Caps::default()
            }),
            Verdict::Go
        );
        // Daily tokens and cost wait.
        assert!(wait(&go(Caps {
            daily_tokens: Some(9_100),
            ..Caps::default()
        })));
        assert_eq!(
            go(Caps {
                daily_tokens: Some(9_200),
                ..Caps::default()
            }),
            Verdict::Go
        );
        assert!(wait(&go(Caps {
            daily_cost: Some(0.94),
            ..Caps::default()
        })));
        assert_eq!(
            go(Caps {
                daily_cost: Some(1.0),
                ..Caps::default()
            }),
            Verdict::Go
        );
        // The day's caps come first: waiting, not stopping, when both apply.
        assert!(wait(&go(Caps {
            run_calls: Some(1),
            daily_tokens: Some(1),
            ..Caps::default()
        })));
    }

    #[test]
    fn the_same_call_a_third_time_ends_the_turn() {
        let mut guard = LoopGuard::default();
        let args = json!({"path": "a"});
        let other = json!({"path": "b"});
        assert_eq!(guard.before_calls([("fs_read", &args)]), None);
        assert_eq!(
            guard.before_calls([("fs_read", &other), ("fs_read", &args)]),
            None
        );
        assert!(guard.before_calls([("fs_read", &args)]).is_some());
        // The same call twice in one batch counts once.
        let mut guard = LoopGuard::default();
        assert_eq!(guard.before_calls([("sleep", &args); 10]), None);
        assert_eq!(
            guard.before_calls([("sleep", &args), ("sleep", &args)]),
            None
        );
        assert!(guard.before_calls([("sleep", &args)]).is_some());
        // Another tool with the same arguments is another call.
        let mut guard = LoopGuard::default();
        for _ in 0..2 {
            assert_eq!(
                guard.before_calls([("fs_read", &args), ("fs_list", &args)]),
                None
            );
        }
    }

    #[test]
    fn rounds_that_bring_nothing_new_end_the_turn() {
        let mut guard = LoopGuard::default();
        assert_eq!(guard.after_results(["a"]), None);
        assert_eq!(guard.after_results(["a"]), None);
        assert_eq!(guard.after_results(["b", "a"]), None, "b is new");
        assert_eq!(guard.after_results(["a"]), None);
        assert_eq!(guard.after_results(["b"]), None);
        assert!(
            guard.after_results(["a", "b"]).is_some(),
            "three stale rounds"
        );
    }
}
