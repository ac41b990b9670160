//! Safety checks that run before policy: command tiers for the shell tool. Pure functions of
//! the command text and a [`ShellContext`], so every decision is a table test.

mod lexer;
mod parser;
mod paths;
mod programs;
mod readonly;
mod tiers;

use std::path::PathBuf;

pub use paths::SECRETS_IN_HOME;
pub use tiers::{CommandTier, ShellVerdict, classify_shell};

/// Where a shell command would run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShellContext {
    /// Allowed roots; the first is the working directory.
    pub roots: Vec<PathBuf>,
    /// The user's home directory (`~`, `$HOME`).
    pub home: Option<PathBuf>,
}

#[cfg(test)]
mod corpus_tests;
