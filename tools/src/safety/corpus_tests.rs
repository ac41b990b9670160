//! The command-safety corpus (`corpus.tsv`): every line must get exactly its tier.

use std::path::PathBuf;

use super::{CommandTier, ShellContext, classify_shell};

const CORPUS: &str = include_str!("corpus.tsv");

fn context() -> ShellContext {
    ShellContext {
        roots: vec![PathBuf::from("/home/u/ws")],
        home: Some(PathBuf::from("/home/u")),
    }
}

fn entries() -> Vec<(CommandTier, String)> {
    CORPUS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let (tier, command) = line.split_once('\t').expect("TIER<TAB>COMMAND");
            let tier = match tier {
                "safe" => CommandTier::Safe,
                "dangerous" => CommandTier::Dangerous,
                "catastrophic" => CommandTier::Catastrophic,
                other => panic!("unknown tier {other:?}"),
            };
            (tier, command.replace("\\n", "\n"))
        })
        .collect()
}

#[test]
fn every_corpus_command_gets_its_tier() {
    let entries = entries();
    assert!(
        entries.len() >= 1000,
        "the corpus has {} commands",
        entries.len()
    );
    let ctx = context();
    let wrong: Vec<String> = entries
        .iter()
        .filter_map(|(expected, command)| {
            let verdict = classify_shell(command, &ctx);
            (verdict.tier != *expected).then(|| {
                format!(
                    "{command:?}: expected {expected:?}, got {:?} {:?}",
                    verdict.tier, verdict.reasons
                )
            })
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of {} misclassified:\n{}",
        wrong.len(),
        entries.len(),
        wrong.join("\n")
    );
}

#[test]
fn blocked_and_dangerous_verdicts_say_why() {
    for (tier, command) in entries() {
        let verdict = classify_shell(&command, &context());
        if tier != CommandTier::Safe {
            assert!(!verdict.reasons.is_empty(), "{command:?} has no reason");
        }
    }
}

#[test]
fn hostile_nesting_ends_and_is_never_safe() {
    let ctx = context();
    let wrapped = format!("{}ls", "sudo ".repeat(400));
    assert_eq!(classify_shell(&wrapped, &ctx).tier, CommandTier::Dangerous);
    let hidden = format!("{}rm -rf /", "nice ".repeat(300));
    assert_eq!(
        classify_shell(&hidden, &ctx).tier,
        CommandTier::Catastrophic
    );
    let runners = format!("{}ls", "strace -f ".repeat(200));
    assert_eq!(classify_shell(&runners, &ctx).tier, CommandTier::Dangerous);
}
