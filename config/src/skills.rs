//! `[skills]`: where skill folders are found (`dirs`; default the config file's and the
//! data dir's `skills/`, filled in by the daemon, which knows both) and which of those
//! directories the owner trusts (`trusted`: their skills are not untrusted content).

use std::path::PathBuf;

use serde::Deserialize;

use crate::error::ConfigError;
use crate::spanned::{LineOf, Spanned};

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RawSkills {
    /// Absolute directories holding skill folders; unset: CONFIG_DIR/skills and DATA_DIR/skills.
    pub dirs: Option<Vec<Spanned<String>>>,
    /// Those of the directories whose skills the owner trusts.
    pub trusted: Vec<Spanned<String>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SkillsConfig {
    /// `None`: the defaults (see the module docs).
    pub dirs: Option<Vec<PathBuf>>,
    pub trusted: Vec<PathBuf>,
}

fn absolute(
    key: &str,
    paths: &[Spanned<String>],
    at: LineOf<'_>,
) -> Result<Vec<PathBuf>, ConfigError> {
    paths
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let buf = PathBuf::from(path.get_ref());
            if buf.is_absolute() {
                Ok(buf)
            } else {
                Err(ConfigError::invalid(
                    format!("{key}[{i}]"),
                    at(path.span()),
                    format!("{:?} is not an absolute path", path.get_ref()),
                ))
            }
        })
        .collect()
}

pub(crate) fn resolve(raw: &RawSkills, at: LineOf<'_>) -> Result<SkillsConfig, ConfigError> {
    Ok(SkillsConfig {
        dirs: match &raw.dirs {
            Some(dirs) => Some(absolute("skills.dirs", dirs, at)?),
            None => None,
        },
        trusted: absolute("skills.trusted", &raw.trusted, at)?,
    })
}
