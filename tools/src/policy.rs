//! Policy: whether a call may run, must be confirmed by the owner, or is refused — a pure
//! function of the tool's contract, the mode, the lane, the taint of the step, and the
//! configured rules, so that every decision is a row in a table test.
//!
//! Order of precedence (first that applies wins, except that taint can only tighten):
//! 1. plan mode runs only `read_only` tools;
//! 2. a side lane runs only lane-allowed tools and never writes memory; what needs the
//!    owner's confirmation asks as in the main trajectory (the request reaches the owner
//!    through the owner outbox, wherever they are);
//! 3. the first configured rule matching the tool (`name`, `group:…` or `*`);
//! 4. defaults: read-only and idempotent writes run; non-idempotent tools and system changes
//!    need confirmation;
//! 5. taint: once untrusted content entered the step, every call that is not read-only needs
//!    confirmation, whatever the rules said (a `deny` stays a `deny`), and so does every call
//!    that can carry data out (`sends_out`: an HTTP request to a host the owner has not
//!    trusted, GET included — the URL itself can carry what the step read).

use steward_events::Trust;

use crate::contract::{SideEffect, ToolContract};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// Look, don't touch.
    Plan,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Confirm { reason: String },
    Deny { reason: String, policy_id: String },
}

/// A configured rule: `tool` is a tool name, `group:NAME` or `*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRule {
    pub id: String,
    pub tool: String,
    pub decision: RuleDecision,
}

/// The configured rules, replaceable as a whole while the daemon runs (SIGHUP): a decision
/// reads one snapshot, so it sees the old set or the new one, never a mix.
#[derive(Clone, Debug, Default)]
pub struct PolicyRules(std::sync::Arc<std::sync::RwLock<std::sync::Arc<[PolicyRule]>>>);

impl PolicyRules {
    pub fn new(rules: Vec<PolicyRule>) -> Self {
        Self(std::sync::Arc::new(std::sync::RwLock::new(rules.into())))
    }

    pub fn snapshot(&self) -> std::sync::Arc<[PolicyRule]> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn replace(&self, rules: Vec<PolicyRule>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = rules.into();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleDecision {
    Allow,
    Confirm,
    Deny,
}

/// Everything a decision depends on.
#[derive(Clone, Copy, Debug)]
pub struct PolicyInput<'a> {
    pub contract: &'a ToolContract,
    pub mode: Mode,
    pub in_lane: bool,
    /// The least trusted content that entered the step so far.
    pub step_trust: Trust,
    /// This call can carry data to someone the owner has not allowed (see
    /// `ToolContract::sends_out`).
    pub sends_out: bool,
    pub rules: &'a [PolicyRule],
}

fn deny(reason: impl Into<String>, policy_id: &str) -> Decision {
    Decision::Deny {
        reason: reason.into(),
        policy_id: policy_id.to_owned(),
    }
}

pub fn decide(input: PolicyInput<'_>) -> Decision {
    let c = input.contract;
    if input.mode == Mode::Plan && c.side_effect != SideEffect::ReadOnly {
        return deny(
            format!("plan mode runs only read-only tools; `{}` is not", c.name),
            "mode.plan",
        );
    }
    if input.in_lane {
        if !c.allowed_in_lane {
            return deny(
                format!("`{}` is not allowed in a side lane", c.name),
                "lane.tools",
            );
        }
        if c.side_effect != SideEffect::ReadOnly && c.groups.iter().any(|g| g == "group:memory") {
            return deny("side lanes cannot write memory", "lane.memory");
        }
    }
    let matched = input
        .rules
        .iter()
        .find(|rule| rule.tool == "*" || rule.tool == c.name || c.groups.contains(&rule.tool));
    let mut decision = match matched {
        Some(rule) => match rule.decision {
            RuleDecision::Allow => Decision::Allow,
            RuleDecision::Confirm => Decision::Confirm {
                reason: format!("policy `{}` asks to confirm `{}`", rule.id, c.name),
            },
            RuleDecision::Deny => {
                return deny(
                    format!("policy `{}` denies `{}`", rule.id, c.name),
                    &rule.id,
                );
            }
        },
        None if !c.idempotent => Decision::Confirm {
            reason: format!(
                "`{}` is not idempotent: it runs once, after you confirm",
                c.name
            ),
        },
        None if c.side_effect == SideEffect::SystemChange => Decision::Confirm {
            reason: format!("`{}` changes the system", c.name),
        },
        None => Decision::Allow,
    };
    let source = match input.step_trust {
        Trust::Owner => return decision,
        Trust::Trusted => "trusted but not owner",
        Trust::Untrusted => "untrusted",
    };
    if decision == Decision::Allow {
        if c.side_effect != SideEffect::ReadOnly {
            decision = Decision::Confirm {
                reason: format!(
                    "content from a {source} source is in this step; `{}` changes things, so it needs your confirmation",
                    c.name
                ),
            };
        } else if input.sends_out {
            decision = Decision::Confirm {
                reason: format!(
                    "content from a {source} source is in this step; `{}` could carry it out to a host you have not trusted, so it needs your confirmation",
                    c.name
                ),
            };
        }
    }
    decision
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::contract::{Concurrency, Tier, ToolSource};

    fn tool(
        name: &str,
        side_effect: SideEffect,
        idempotent: bool,
        groups: &[&str],
        lane: bool,
    ) -> ToolContract {
        ToolContract {
            name: name.into(),
            description: "test".into(),
            parameters: json!({"type": "object"}),
            side_effect,
            idempotent,
            concurrency: Concurrency::Unsafe,
            tier: Tier::Core,
            source: ToolSource::Builtin,
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            usage_guidance: None,
            search_hint: None,
            result_budget: 100,
            disableable: true,
            allowed_in_lane: lane,
            returns_untrusted: crate::contract::Applies::Never,
            sends_out: crate::contract::Applies::Never,
        }
    }

    fn rule(id: &str, tool: &str, decision: RuleDecision) -> PolicyRule {
        PolicyRule {
            id: id.into(),
            tool: tool.into(),
            decision,
        }
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Want {
        Allow,
        Confirm,
        Deny(&'static str),
    }

    #[test]
    fn policy_table() {
        use SideEffect::{ReadOnly, SystemChange, Write};
        use Trust::{Owner, Trusted, Untrusted};
        let read = tool("fs_read", ReadOnly, true, &["group:fs"], true);
        let write = tool("fs_write", Write, true, &["group:fs"], false);
        let post = tool("http_request", Write, false, &["group:web"], true);
        let shell = tool("shell", SystemChange, true, &["group:runtime"], false);
        let memory = tool("memory_write", Write, true, &["group:memory"], true);
        let lane_write = tool("note", Write, true, &[], true);
        let allow_web = [rule("web.auto", "group:web", RuleDecision::Allow)];
        let deny_all = [rule("lockdown", "*", RuleDecision::Deny)];
        let confirm_write = [rule("careful", "fs_write", RuleDecision::Confirm)];
        type Row<'a> = (
            &'a str,
            &'a ToolContract,
            Mode,
            bool,
            Trust,
            &'a [PolicyRule],
            Want,
        );
        let table: Vec<Row> = vec![
            (
                "read runs",
                &read,
                Mode::Normal,
                false,
                Owner,
                &[],
                Want::Allow,
            ),
            (
                "idempotent write runs for the owner",
                &write,
                Mode::Normal,
                false,
                Owner,
                &[],
                Want::Allow,
            ),
            (
                "non-idempotent asks",
                &post,
                Mode::Normal,
                false,
                Owner,
                &[],
                Want::Confirm,
            ),
            (
                "system change asks",
                &shell,
                Mode::Normal,
                false,
                Owner,
                &[],
                Want::Confirm,
            ),
            (
                "plan mode: read runs",
                &read,
                Mode::Plan,
                false,
                Owner,
                &[],
                Want::Allow,
            ),
            (
                "plan mode: write refused",
                &write,
                Mode::Plan,
                false,
                Owner,
                &[],
                Want::Deny("mode.plan"),
            ),
            (
                "plan mode beats allow rules",
                &post,
                Mode::Plan,
                false,
                Owner,
                &allow_web,
                Want::Deny("mode.plan"),
            ),
            (
                "rule allows a non-idempotent tool",
                &post,
                Mode::Normal,
                false,
                Owner,
                &allow_web,
                Want::Allow,
            ),
            (
                "rule denies",
                &read,
                Mode::Normal,
                false,
                Owner,
                &deny_all,
                Want::Deny("lockdown"),
            ),
            (
                "rule asks",
                &write,
                Mode::Normal,
                false,
                Owner,
                &confirm_write,
                Want::Confirm,
            ),
            (
                "taint: write asks",
                &write,
                Mode::Normal,
                false,
                Untrusted,
                &[],
                Want::Confirm,
            ),
            (
                "taint: even an allowed tool asks",
                &post,
                Mode::Normal,
                false,
                Untrusted,
                &allow_web,
                Want::Confirm,
            ),
            (
                "taint: trusted contacts taint too",
                &write,
                Mode::Normal,
                false,
                Trusted,
                &[],
                Want::Confirm,
            ),
            (
                "taint: reads still run",
                &read,
                Mode::Normal,
                false,
                Untrusted,
                &[],
                Want::Allow,
            ),
            (
                "taint: deny stays deny",
                &write,
                Mode::Normal,
                false,
                Untrusted,
                &deny_all,
                Want::Deny("lockdown"),
            ),
            (
                "lane: read runs",
                &read,
                Mode::Normal,
                true,
                Owner,
                &[],
                Want::Allow,
            ),
            (
                "lane: tool not allowed in lanes",
                &write,
                Mode::Normal,
                true,
                Owner,
                &[],
                Want::Deny("lane.tools"),
            ),
            (
                "lane: no memory writes",
                &memory,
                Mode::Normal,
                true,
                Owner,
                &[],
                Want::Deny("lane.memory"),
            ),
            (
                "lane: asks the owner",
                &post,
                Mode::Normal,
                true,
                Owner,
                &[],
                Want::Confirm,
            ),
            (
                "lane: allowed write runs for the owner",
                &lane_write,
                Mode::Normal,
                true,
                Owner,
                &[],
                Want::Allow,
            ),
            (
                "lane: a tainted write asks",
                &lane_write,
                Mode::Normal,
                true,
                Untrusted,
                &[],
                Want::Confirm,
            ),
            (
                "lane: rule allow still works",
                &post,
                Mode::Normal,
                true,
                Owner,
                &allow_web,
                Want::Allow,
            ),
        ];
        for (name, contract, mode, in_lane, step_trust, rules, want) in table {
            let got = decide(PolicyInput {
                contract,
                mode,
                in_lane,
                step_trust,
                sends_out: false,
                rules,
            });
            let matches = match (&got, want) {
                (Decision::Allow, Want::Allow) | (Decision::Confirm { .. }, Want::Confirm) => true,
                (Decision::Deny { policy_id, reason }, Want::Deny(id)) => {
                    policy_id == id && !reason.is_empty()
                }
                _ => false,
            };
            assert!(matches, "{name}: got {got:?}, want {want:?}");
        }
    }

    /// A call that can carry data out asks only once the step read someone else's words,
    /// even when it only reads and a rule allows it; a deny stays a deny.
    #[test]
    fn calls_that_send_out_ask_in_a_tainted_step() {
        use Trust::{Owner, Trusted, Untrusted};
        let get = tool(
            "http_request",
            SideEffect::ReadOnly,
            true,
            &["group:web"],
            true,
        );
        let allow_web = [rule("web.auto", "group:web", RuleDecision::Allow)];
        let deny_web = [rule("no-web", "group:web", RuleDecision::Deny)];
        let table: [(&str, Trust, bool, &[PolicyRule], Want); 7] = [
            (
                "owner step: a GET anywhere runs",
                Owner,
                true,
                &[],
                Want::Allow,
            ),
            (
                "tainted: a GET to an untrusted host asks",
                Untrusted,
                true,
                &[],
                Want::Confirm,
            ),
            (
                "trusted contact's words taint too",
                Trusted,
                true,
                &[],
                Want::Confirm,
            ),
            (
                "tainted: a GET to a trusted host runs",
                Untrusted,
                false,
                &[],
                Want::Allow,
            ),
            (
                "tainted: an allow rule does not lift it",
                Untrusted,
                true,
                &allow_web,
                Want::Confirm,
            ),
            (
                "tainted: deny stays deny",
                Untrusted,
                true,
                &deny_web,
                Want::Deny("no-web"),
            ),
            (
                "owner step: the allow rule runs it",
                Owner,
                true,
                &allow_web,
                Want::Allow,
            ),
        ];
        for (name, step_trust, sends_out, rules, want) in table {
            let got = decide(PolicyInput {
                contract: &get,
                mode: Mode::Normal,
                in_lane: false,
                step_trust,
                sends_out,
                rules,
            });
            let matches = match (&got, want) {
                (Decision::Allow, Want::Allow) | (Decision::Confirm { .. }, Want::Confirm) => true,
                (Decision::Deny { policy_id, .. }, Want::Deny(id)) => policy_id == id,
                _ => false,
            };
            assert!(matches, "{name}: got {got:?}, want {want:?}");
        }
    }
}
