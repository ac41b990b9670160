//! Configuration errors that name the key and the line.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(InvalidConfig),
}

/// One bad value, with where it is.
#[derive(Debug)]
pub struct InvalidConfig {
    pub file: Option<PathBuf>,
    /// Dotted key path, e.g. `daemon.shutdown_grace_secs` or `urgency.rules[0].source`.
    pub key: String,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for InvalidConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}", file.display())?,
            None => write!(f, "config")?,
        }
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": key `{}`: {}", self.key, self.message)
    }
}

impl ConfigError {
    pub(crate) fn invalid(
        key: impl Into<String>,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError::Invalid(InvalidConfig {
            file: None,
            key: key.into(),
            line,
            message: message.into(),
        })
    }

    pub(crate) fn with_origin(mut self, origin: Option<&Path>) -> Self {
        if let ConfigError::Invalid(invalid) = &mut self {
            invalid.file = origin.map(Path::to_owned);
        }
        self
    }

    /// The key at fault, when the error is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid(invalid) => Some(&invalid.key),
            ConfigError::Read { .. } => None,
        }
    }
}

/// 1-based line of the byte offset `at` in `text`.
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(at)
        .filter(|b| **b == b'\n')
        .count()
        + 1
}
