//! `[web_search]`: the backend `web_search` asks — a self-hosted SearXNG (`url`, its JSON
//! API enabled) or Brave's Search API (`api_key_env` | `api_key_file`; `url` overrides the
//! public endpoint). No table: no `web_search` tool.

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

use crate::SecretSource;
use crate::error::ConfigError;
use crate::spanned::{InRange, LineOf, Spanned};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWebSearch {
    /// `searxng` or `brave`.
    pub backend: Spanned<String>,
    /// SearXNG's base URL; for Brave, another endpoint than the public one.
    pub url: Option<Spanned<String>>,
    pub api_key_env: Option<String>,
    pub api_key_file: Option<String>,
    pub timeout_secs: Option<Spanned<u64>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebSearchBackend {
    SearxNg {
        url: String,
    },
    Brave {
        api_key: SecretSource,
        url: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebSearchConfig {
    pub backend: WebSearchBackend,
    pub timeout: Duration,
}

pub(crate) fn resolve(
    raw: RawWebSearch,
    at: LineOf<'_>,
    in_range: InRange<'_>,
) -> Result<WebSearchConfig, ConfigError> {
    let url = match &raw.url {
        Some(url)
            if !(url.get_ref().starts_with("http://") || url.get_ref().starts_with("https://")) =>
        {
            return Err(ConfigError::invalid(
                "web_search.url",
                at(url.span()),
                format!("{:?} is not an http(s) URL", url.get_ref()),
            ));
        }
        Some(url) => Some(url.get_ref().trim_end_matches('/').to_owned()),
        None => None,
    };
    let backend = match raw.backend.get_ref().as_str() {
        "searxng" => WebSearchBackend::SearxNg {
            url: url.ok_or_else(|| {
                ConfigError::invalid(
                    "web_search.url",
                    at(raw.backend.span()),
                    "the SearXNG instance's URL is required",
                )
            })?,
        },
        "brave" => WebSearchBackend::Brave {
            api_key: match (raw.api_key_env, raw.api_key_file) {
                (Some(var), None) => SecretSource::Env(var),
                (None, Some(file)) => SecretSource::File(PathBuf::from(file)),
                _ => {
                    return Err(ConfigError::invalid(
                        "web_search.api_key_env",
                        at(raw.backend.span()),
                        "set exactly one of api_key_env and api_key_file",
                    ));
                }
            },
            url,
        },
        other => {
            return Err(ConfigError::invalid(
                "web_search.backend",
                at(raw.backend.span()),
                format!("{other:?}: expected \"searxng\" or \"brave\""),
            ));
        }
    };
    Ok(WebSearchConfig {
        backend,
        timeout: Duration::from_secs(match &raw.timeout_secs {
            Some(secs) => in_range("web_search.timeout_secs", secs, 1, 300)?,
            None => 15,
        }),
    })
}
