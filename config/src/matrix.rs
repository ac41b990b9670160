//! `[matrix]`: the Matrix account the assistant is reached through.
//!
//! Decisions where the issue is silent:
//! - `homeserver` must be an `http(s)://` URL; plain `http` only for a loopback host (an
//!   access token must never cross a network in the clear), as for `[email]`'s `none`.
//! - Exactly one of `password_env`, `password_file`, `access_token_env`,
//!   `access_token_file`.
//! - User ids are checked for their shape (`@local:server`); `trusted` also takes
//!   `*:server` (everyone on that server). Rooms are ids (`!id:server`) or aliases
//!   (`#alias:server`); room ids of version 12 on carry no server (`!opaque`).
//! - Defaults: `device_name = "steward"`, `e2ee = true`, `mention_required_in_groups = true`,
//!   `require_verified_devices = false`, `keys_wait_secs = 600`.
//! - `keys_wait_secs` (1 s to a week) is how long a message that cannot be decrypted yet waits
//!   for its keys; after that it is recorded `dead` and, when an owner sent it, the owner is
//!   told to send it again. Keys usually come within seconds; a sender's client that never
//!   shares them is what the wait ends.

use serde::Deserialize;

use crate::SecretSource;
use crate::error::ConfigError;
use crate::spanned::{LineOf, Spanned};

const DEFAULT_KEYS_WAIT_SECS: u64 = 600;
const MAX_KEYS_WAIT_SECS: u64 = 7 * 86_400;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMatrix {
    pub homeserver: Spanned<String>,
    pub user_id: Spanned<String>,
    pub password_env: Option<Spanned<String>>,
    pub password_file: Option<Spanned<String>>,
    pub access_token_env: Option<Spanned<String>>,
    pub access_token_file: Option<Spanned<String>>,
    pub device_name: Option<String>,
    #[serde(default)]
    pub owners: Vec<Spanned<String>>,
    #[serde(default)]
    pub trusted: Vec<Spanned<String>>,
    #[serde(default)]
    pub rooms: Vec<Spanned<String>>,
    pub e2ee: Option<bool>,
    pub mention_required_in_groups: Option<bool>,
    pub require_verified_devices: Option<bool>,
    pub keys_wait_secs: Option<Spanned<u64>>,
}

/// How the account logs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MatrixLogin {
    Password(SecretSource),
    AccessToken(SecretSource),
}

impl MatrixLogin {
    /// Where the secret is read from.
    pub fn secret(&self) -> &SecretSource {
        match self {
            Self::Password(secret) | Self::AccessToken(secret) => secret,
        }
    }

    /// The config key that names it (`matrix.password_env`, …).
    pub fn key(&self) -> &'static str {
        match (self, self.secret()) {
            (Self::Password(_), SecretSource::Env(_)) => "matrix.password_env",
            (Self::Password(_), SecretSource::File(_)) => "matrix.password_file",
            (Self::AccessToken(_), SecretSource::Env(_)) => "matrix.access_token_env",
            (Self::AccessToken(_), SecretSource::File(_)) => "matrix.access_token_file",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatrixConfig {
    /// The homeserver's base URL, without a trailing `/`.
    pub homeserver: String,
    /// `@local:server`.
    pub user_id: String,
    pub login: MatrixLogin,
    pub device_name: String,
    pub owners: Vec<String>,
    /// User ids, or `*:server` for everyone on a server.
    pub trusted: Vec<String>,
    /// Rooms the assistant may act in besides direct messages from owners and trusted users.
    pub rooms: Vec<String>,
    pub e2ee: bool,
    pub mention_required_in_groups: bool,
    /// Messages from an owner's unverified device are taken as untrusted. A device counts
    /// as verified when its user's cross-signing identity signed it and that identity is the
    /// one first seen for them (pinned in `DATA/matrix/pinned-identities.json`).
    pub require_verified_devices: bool,
    /// How long an undecryptable message waits for its keys (see the module docs).
    pub keys_wait: std::time::Duration,
}

/// Whether `text` is `SIGIL` + local part + `:` + server, with no spaces.
fn has_shape(text: &str, sigil: char) -> bool {
    text.strip_prefix(sigil)
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(local, server)| {
            !local.is_empty() && !server.is_empty() && !text.contains(char::is_whitespace)
        })
}

/// `!` + an opaque id: rooms of version 12 on have no `:server` part.
fn is_room_id(text: &str) -> bool {
    text.strip_prefix('!').is_some_and(|rest| {
        !rest.is_empty() && !rest.starts_with(':') && !text.contains(char::is_whitespace)
    })
}

fn is_user_id(text: &str) -> bool {
    has_shape(text, '@')
}

/// Checks every entry of `list` (key `matrix.NAME[i]`) with `valid`.
fn checked(
    name: &str,
    list: Vec<Spanned<String>>,
    valid: impl Fn(&str) -> bool,
    expected: &str,
    at: LineOf<'_>,
) -> Result<Vec<String>, ConfigError> {
    list.into_iter()
        .enumerate()
        .map(|(i, entry)| {
            if valid(entry.get_ref()) {
                Ok(entry.into_inner())
            } else {
                Err(ConfigError::invalid(
                    format!("matrix.{name}[{i}]"),
                    at(entry.span()),
                    format!("{:?} is not {expected}", entry.get_ref()),
                ))
            }
        })
        .collect()
}

pub(crate) fn resolve(raw: RawMatrix, at: LineOf<'_>) -> Result<MatrixConfig, ConfigError> {
    let homeserver = crate::url::service_url(raw.homeserver.get_ref()).map_err(|message| {
        ConfigError::invalid("matrix.homeserver", at(raw.homeserver.span()), message)
    })?;
    let user_id = raw.user_id.get_ref().trim().to_owned();
    if !is_user_id(&user_id) {
        return Err(ConfigError::invalid(
            "matrix.user_id",
            at(raw.user_id.span()),
            format!("{user_id:?} is not a Matrix user id (@name:server)"),
        ));
    }
    let env = |var: Spanned<String>| SecretSource::Env(var.into_inner());
    let file = |path: Spanned<String>| SecretSource::File(path.into_inner().into());
    let login = match (
        raw.password_env,
        raw.password_file,
        raw.access_token_env,
        raw.access_token_file,
    ) {
        (Some(var), None, None, None) => MatrixLogin::Password(env(var)),
        (None, Some(path), None, None) => MatrixLogin::Password(file(path)),
        (None, None, Some(var), None) => MatrixLogin::AccessToken(env(var)),
        (None, None, None, Some(path)) => MatrixLogin::AccessToken(file(path)),
        _ => {
            return Err(ConfigError::invalid(
                "matrix.password_env",
                at(raw.user_id.span()),
                "set exactly one of password_env, password_file, access_token_env and access_token_file",
            ));
        }
    };
    let owners = checked(
        "owners",
        raw.owners,
        is_user_id,
        "a user id (@name:server)",
        at,
    )?;
    let trusted = checked(
        "trusted",
        raw.trusted,
        |t| {
            is_user_id(t)
                || t.strip_prefix("*:")
                    .is_some_and(|server| !server.is_empty())
        },
        "a user id (@name:server) or *:server",
        at,
    )?;
    let rooms = checked(
        "rooms",
        raw.rooms,
        |r| is_room_id(r) || has_shape(r, '#'),
        "a room id (!id, or !id:server before room version 12) or alias (#name:server)",
        at,
    )?;
    let keys_wait = match raw.keys_wait_secs {
        None => DEFAULT_KEYS_WAIT_SECS,
        Some(secs) if (1..=MAX_KEYS_WAIT_SECS).contains(secs.get_ref()) => secs.into_inner(),
        Some(secs) => {
            return Err(ConfigError::invalid(
                "matrix.keys_wait_secs",
                at(secs.span()),
                format!(
                    "{} is out of range; expected 1..={MAX_KEYS_WAIT_SECS} (a week)",
                    secs.get_ref()
                ),
            ));
        }
    };
    Ok(MatrixConfig {
        homeserver,
        user_id,
        login,
        device_name: raw.device_name.unwrap_or_else(|| "steward".into()),
        owners,
        trusted,
        rooms,
        e2ee: raw.e2ee.unwrap_or(true),
        mention_required_in_groups: raw.mention_required_in_groups.unwrap_or(true),
        require_verified_devices: raw.require_verified_devices.unwrap_or(false),
        keys_wait: std::time::Duration::from_secs(keys_wait),
    })
}

#[cfg(test)]
mod tests {
    use super::is_room_id;
    use crate::url::service_url as homeserver;

    #[test]
    fn room_ids_have_a_server_before_version_12_and_none_after() {
        let table = [
            ("!abc:localhost", true),
            ("!9zhpHFIlQsiVPygzataGuzCg37IdN-YBrVLkUgLalLI", true),
            ("!", false),
            ("!:localhost", false),
            ("! spaced", false),
            ("abc:localhost", false),
        ];
        for (id, valid) in table {
            assert_eq!(is_room_id(id), valid, "{id}");
        }
    }

    #[test]
    fn a_token_goes_in_the_clear_only_to_loopback() {
        let table = [
            (
                "https://matrix.example.org/",
                Ok("https://matrix.example.org"),
            ),
            ("http://127.0.0.1:8008", Ok("http://127.0.0.1:8008")),
            ("http://localhost:8008/", Ok("http://localhost:8008")),
            ("http://[::1]:8008", Ok("http://[::1]:8008")),
            ("http://matrix.example.org", Err("plain http only")),
            ("matrix.example.org", Err("not a URL")),
            ("ftp://x", Err("not http or https")),
            ("https://", Err("names no host")),
        ];
        for (url, want) in table {
            match (homeserver(url), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{url}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{url}: {got}"),
                (got, want) => panic!("{url}: got {got:?}, want {want:?}"),
            }
        }
    }
}
