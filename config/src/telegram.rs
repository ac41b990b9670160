//! `[telegram]`: the Telegram bot the assistant is reached through.
//!
//! Decisions where the issue is silent:
//! - Exactly one of `token_env` and `token_file`; the token itself never sits in the file.
//! - `api_url` (default `https://api.telegram.org`) must be `https://`, or plain `http://`
//!   to a loopback host (a self-hosted Bot API server or a test server): the token is part
//!   of every request's path.
//! - `owners` and `trusted` are Telegram user ids (positive numbers); owners paired with
//!   `steward telegram pair` are kept in the data dir and added to these. `allow_groups` are
//!   chat ids (groups are negative); no group is allowed by default.
//! - Default `mention_required_in_groups = true`: in an allowed group, a message that does
//!   not mention the bot (or reply to it) is chatter, not a request.

use serde::Deserialize;

use crate::SecretSource;
use crate::error::ConfigError;
use crate::spanned::{LineOf, Spanned};

/// The public Bot API.
pub const DEFAULT_API_URL: &str = "https://api.telegram.org";

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTelegram {
    pub token_env: Option<Spanned<String>>,
    pub token_file: Option<Spanned<String>>,
    pub api_url: Option<Spanned<String>>,
    #[serde(default)]
    pub owners: Vec<Spanned<i64>>,
    #[serde(default)]
    pub trusted: Vec<Spanned<i64>>,
    #[serde(default)]
    pub allow_groups: Vec<Spanned<i64>>,
    pub mention_required_in_groups: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TelegramConfig {
    pub token: SecretSource,
    /// The Bot API's base URL, without a trailing `/`.
    pub api_url: String,
    /// User ids of the owners named in the file (paired ones are kept in the data dir).
    pub owners: Vec<i64>,
    pub trusted: Vec<i64>,
    /// Group chat ids the bot may act in.
    pub allow_groups: Vec<i64>,
    pub mention_required_in_groups: bool,
}

impl TelegramConfig {
    /// The config key that names the token's source.
    pub fn token_key(&self) -> &'static str {
        match self.token {
            SecretSource::Env(_) => "telegram.token_env",
            SecretSource::File(_) => "telegram.token_file",
        }
    }
}

/// Checks every entry of `list` (key `telegram.NAME[i]`) with `valid`.
fn checked(
    name: &str,
    list: Vec<Spanned<i64>>,
    valid: impl Fn(i64) -> bool,
    expected: &str,
    at: LineOf<'_>,
) -> Result<Vec<i64>, ConfigError> {
    list.into_iter()
        .enumerate()
        .map(|(i, entry)| {
            let id = *entry.get_ref();
            if valid(id) {
                Ok(id)
            } else {
                Err(ConfigError::invalid(
                    format!("telegram.{name}[{i}]"),
                    at(entry.span()),
                    format!("{id} is not {expected}"),
                ))
            }
        })
        .collect()
}

pub(crate) fn resolve(raw: RawTelegram, at: LineOf<'_>) -> Result<TelegramConfig, ConfigError> {
    let token = match (raw.token_env, raw.token_file) {
        (Some(var), None) => SecretSource::Env(var.into_inner()),
        (None, Some(path)) => SecretSource::File(path.into_inner().into()),
        (env, file) => {
            let line = env.as_ref().or(file.as_ref()).and_then(|s| at(s.span()));
            return Err(ConfigError::invalid(
                "telegram.token_env",
                line,
                "set exactly one of token_env and token_file",
            ));
        }
    };
    let api_url = match raw.api_url {
        Some(url) => crate::url::service_url(url.get_ref())
            .map_err(|message| ConfigError::invalid("telegram.api_url", at(url.span()), message))?,
        None => DEFAULT_API_URL.to_owned(),
    };
    let user = |id: i64| id > 0;
    Ok(TelegramConfig {
        token,
        api_url,
        owners: checked(
            "owners",
            raw.owners,
            user,
            "a user id (a positive number)",
            at,
        )?,
        trusted: checked(
            "trusted",
            raw.trusted,
            user,
            "a user id (a positive number)",
            at,
        )?,
        allow_groups: checked(
            "allow_groups",
            raw.allow_groups,
            |id| id != 0,
            "a chat id",
            at,
        )?,
        mention_required_in_groups: raw.mention_required_in_groups.unwrap_or(true),
    })
}
