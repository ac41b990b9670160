//! The Matrix account's session: one device, kept across restarts, so that the assistant
//! keeps decrypting after a `kill -9`.
//!
//! Decided here:
//! - Everything lives under `DATA/matrix/` (mode 0700): `session.json` (homeserver, user,
//!   device and access token; mode 0600) and `store/`, the SDK's SQLite state and crypto
//!   stores (the device's keys). The stores are not encrypted with a passphrase: one kept
//!   beside them would protect nothing the directory's mode does not.
//! - A password login happens once; afterwards the saved session is restored. The store is
//!   bound to its device: whenever a new device logs in (no session saved, or the saved one
//!   is for another account or was revoked) the old store is moved aside as
//!   `store.old-TIMESTAMP` — never reused, never deleted.
//! - With an access token, the device is the token's own (asked with `whoami`); a revoked
//!   token is an error to fix, not something to log in around.
//! - The channel's sync position is the only one that counts: the SDK's own (in its state
//!   store) is forgotten before a saved session is restored. The SDK drops a response whose
//!   `next_batch` equals the token it saved last ("the same response twice"); after a crash
//!   between the SDK's processing of a sync and the channel's taking of its events, the
//!   channel's re-read of that sync would otherwise come back empty and its messages be lost.
//! - The session file is written before the first request made with the new device, so a
//!   crash right after logging in leaves an orphan device at worst, never a store that does
//!   not match its session.
//! - The stores are opened with the SDK's low-memory settings (a pool of as many SQLite
//!   connections as physical cores instead of four per core, a 500 KB page cache each
//!   instead of 2 MB, the journal kept under 2 MB): a one-account assistant makes few
//!   concurrent store calls, and each connection's cache is memory the daemon keeps.
//! - Its HTTP client is built here, as the SDK builds it, on the daemon's shared TLS setup.
//! - The device is signed by the account's cross-signing identity, made at the first start
//!   when the account has none. Clients that share room keys only with devices their
//!   account's identity signed (Element's "exclude insecure devices", MSC4153, meant to
//!   become the default) never share a key with an unsigned device, so without this an owner
//!   on such a client could write to the assistant and never be read. Uploading a new
//!   identity asks the homeserver for the account's password when it wants one (interactive
//!   auth; a server with MSC3967 takes the first upload without): with an access-token login
//!   the server's answer decides. The identity's private keys stay in the device's crypto
//!   store. An account that already has an identity made elsewhere is not replaced (that
//!   would break every verification of it): a device it did not sign is logged as a warning
//!   saying to verify it from another session of the account. Failing to set this up is a
//!   warning, never a reason to stop the channel: owners sharing keys with every device
//!   are still read.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::ruma::api::client::uiaa::{
    AuthData, MatrixUserIdentifier, Password, UserIdentifier,
};
use matrix_sdk::ruma::api::error::ErrorKind;
use matrix_sdk::store::StateStoreDataKey;
use matrix_sdk::{Client, SessionMeta, SessionTokens, SqliteStoreConfig};
use serde::{Deserialize, Serialize};
use steward_config::{MatrixConfig, MatrixLogin};
use tracing::{info, warn};

/// What `session.json` holds.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    homeserver: String,
    #[serde(flatten)]
    session: MatrixSession,
}

/// What `steward doctor` found of the account (see [`Account::diagnose`]).
#[derive(Debug)]
pub struct Diagnosis {
    pub detail: String,
    /// Clients that share keys only with signed devices will not reach this one.
    pub unsigned_device: bool,
}

/// Where the account's session and stores live.
#[derive(Clone, Debug)]
pub struct Account {
    pub config: MatrixConfig,
    dir: PathBuf,
}

impl Account {
    pub fn new(config: MatrixConfig, data_dir: &Path) -> Self {
        Self {
            config,
            dir: data_dir.join("matrix"),
        }
    }

    /// `DATA/matrix/`, where the account's files live.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn session_file(&self) -> PathBuf {
        self.dir.join("session.json")
    }

    fn store_dir(&self) -> PathBuf {
        self.dir.join("store")
    }

    /// A client logged in as the account's device: the saved session restored, or a new
    /// login (see the module docs).
    pub async fn connect(&self) -> anyhow::Result<Client> {
        crate::core::create_private_dir(&self.dir)?;
        if let Some(saved) = self.saved()? {
            let client = self.client().await?;
            forget_sdk_sync_token(&client).await?;
            client
                .restore_session(saved.session)
                .await
                .context("cannot restore the saved Matrix session")?;
            match client.whoami().await {
                Ok(_) => {
                    info!(device = %client.device_id().map(|d| d.to_string()).unwrap_or_default(), "restored the saved Matrix session");
                    return Ok(client);
                }
                Err(e)
                    if matches!(
                        e.client_api_error_kind(),
                        Some(ErrorKind::UnknownToken { .. })
                    ) =>
                {
                    if matches!(self.config.login, MatrixLogin::AccessToken(_)) {
                        bail!("the homeserver refused the access token (revoked?): {e}");
                    }
                    warn!("the saved Matrix session was revoked; logging in as a new device");
                    drop(client);
                    self.set_aside()?;
                }
                Err(e) => return Err(e).context("the homeserver did not answer whoami"),
            }
        } else {
            self.set_aside()?;
        }
        self.log_in().await
    }

    /// The saved session, when it is this account's on this homeserver.
    fn saved(&self) -> anyhow::Result<Option<Saved>> {
        let path = self.session_file();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let saved: Saved = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a saved session", path.display()))?;
        let same = saved.homeserver == self.config.homeserver
            && saved.session.meta.user_id.as_str() == self.config.user_id;
        if !same {
            info!(saved = %saved.session.meta.user_id, "the saved Matrix session is for another account; logging in anew");
        }
        Ok(same.then_some(saved))
    }

    async fn client(&self) -> anyhow::Result<Client> {
        Client::builder()
            .homeserver_url(&self.config.homeserver)
            .http_client(http_client()?)
            .sqlite_store_with_config_and_cache_path(
                SqliteStoreConfig::with_low_memory_config(self.store_dir()),
                None::<PathBuf>,
            )
            .build()
            .await
            .with_context(|| format!("cannot open the Matrix store in {}", self.dir.display()))
    }

    /// A client with no store: for logging in, `whoami` and checks, which must not touch
    /// the device's keys.
    async fn storeless(&self) -> anyhow::Result<Client> {
        Client::builder()
            .homeserver_url(&self.config.homeserver)
            .http_client(http_client()?)
            .build()
            .await
            .context("cannot reach the homeserver")
    }

    /// Moves a store left by another device aside (kept, never deleted).
    fn set_aside(&self) -> anyhow::Result<()> {
        let store = self.store_dir();
        if !store.exists() {
            return Ok(());
        }
        let aside = self.dir.join(format!(
            "store.old-{}",
            chrono::Utc::now().format("%Y%m%dT%H%M%S%.3f")
        ));
        std::fs::rename(&store, &aside)
            .with_context(|| format!("cannot move {} aside", store.display()))?;
        info!(to = %aside.display(), "the Matrix store of an earlier device was set aside");
        Ok(())
    }

    async fn log_in(&self) -> anyhow::Result<Client> {
        let session = match &self.config.login {
            MatrixLogin::Password(secret) => {
                let password = secret
                    .read()
                    .map_err(|e| anyhow::anyhow!("matrix password: {e}"))?;
                // A throwaway client: the login must not touch a store before its device
                // is known and saved.
                let probe = self.storeless().await?;
                let response = probe
                    .matrix_auth()
                    .login_username(&self.config.user_id, &password)
                    .initial_device_display_name(&self.config.device_name)
                    .send()
                    .await
                    .context("the homeserver refused the login")?;
                MatrixSession::from(&response)
            }
            MatrixLogin::AccessToken(secret) => {
                let token = secret
                    .read()
                    .map_err(|e| anyhow::anyhow!("matrix access token: {e}"))?;
                self.token_session(token).await?
            }
        };
        if session.meta.user_id.as_str() != self.config.user_id {
            bail!(
                "the homeserver logged in {} where matrix.user_id says {}",
                session.meta.user_id,
                self.config.user_id
            );
        }
        self.save(&session)?;
        info!(device = %session.meta.device_id, "logged in to Matrix as a new device");
        let client = self.client().await?;
        client
            .restore_session(session)
            .await
            .context("cannot start the new Matrix session")?;
        Ok(client)
    }

    /// `steward doctor`: the homeserver answers, the saved session is still valid, and —
    /// when the daemon does not hold it (`store_in_use`) — the store opens and holds that
    /// device's keys, and whether the account's cross-signing identity signed the device.
    /// Never logs in: a new device would be an orphan. What was found, or what is wrong.
    pub async fn diagnose(&self, store_in_use: bool) -> anyhow::Result<Diagnosis> {
        self.config
            .login
            .secret()
            .read()
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.config.login.key()))?;
        let Some(saved) = self.saved()? else {
            let probe = self.storeless().await?;
            probe
                .server_versions()
                .await
                .context("the homeserver does not answer")?;
            return Ok(Diagnosis {
                detail: format!(
                    "{} answers; not logged in yet (the daemon logs in as a new device at its first start)",
                    self.config.homeserver
                ),
                unsigned_device: false,
            });
        };
        let device = saved.session.meta.device_id.to_string();
        let client = if store_in_use {
            self.storeless().await?
        } else {
            self.client().await?
        };
        client
            .restore_session(saved.session)
            .await
            .context("the store does not match the saved session")?;
        let who = client
            .whoami()
            .await
            .context("the homeserver refused the saved session")?;
        if store_in_use {
            return Ok(Diagnosis {
                detail: format!(
                    "logged in as {} (device {device}); the running daemon holds the store",
                    who.user_id
                ),
                unsigned_device: false,
            });
        }
        let signed = device_signed(&client.encryption())
            .await
            .context("cannot read the device's own keys from the store")?;
        let signing = if signed {
            "the device is signed by the account's cross-signing identity"
        } else {
            "the device is not signed by the account's cross-signing identity"
        };
        Ok(Diagnosis {
            detail: format!(
                "logged in as {} (device {device}); the store holds its keys; {signing}",
                who.user_id
            ),
            unsigned_device: !signed,
        })
    }

    /// The session of an access token: its own user and device.
    async fn token_session(&self, token: String) -> anyhow::Result<MatrixSession> {
        let probe = self.storeless().await?;
        let placeholder = MatrixSession {
            meta: SessionMeta {
                user_id: matrix_sdk::ruma::UserId::parse(&self.config.user_id)
                    .context("matrix.user_id")?,
                device_id: "STEWARDPROBE".into(),
            },
            tokens: SessionTokens {
                access_token: token.clone(),
                refresh_token: None,
            },
        };
        // `whoami` needs a session; the placeholder's device id is never used for keys
        // because this client has no store.
        probe
            .matrix_auth()
            .restore_session(placeholder, Default::default())
            .await?;
        let who = probe
            .whoami()
            .await
            .context("the homeserver refused the access token")?;
        let device_id = who
            .device_id
            .context("the access token belongs to no device (an appservice token?)")?;
        Ok(MatrixSession {
            meta: SessionMeta {
                user_id: who.user_id,
                device_id,
            },
            tokens: SessionTokens {
                access_token: token,
                refresh_token: None,
            },
        })
    }

    fn save(&self, session: &MatrixSession) -> anyhow::Result<()> {
        let saved = Saved {
            homeserver: self.config.homeserver.clone(),
            session: session.clone(),
        };
        let text = serde_json::to_vec_pretty(&saved)?;
        let path = self.session_file();
        write_private(&path, &text).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// The HTTP client the SDK would make — its user agent and 30 s request timeout — on the
/// daemon's one shared TLS configuration (`steward_tools::https`) rather than a verifier of
/// its own, which would read the system's CA bundle again for each client.
fn http_client() -> anyhow::Result<reqwest::Client> {
    steward_tools::https::client_builder()
        .user_agent("matrix-rust-sdk")
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .context("cannot build the Matrix HTTP client")
}

/// Writes `path` readable by the owner only, whole or not at all (a temporary file renamed
/// over it, synced first).
pub(super) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = path.with_extension("json.new");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

/// Forgets the sync token the SDK saved in its state store (see the module docs); it is
/// read from there when the session is restored.
async fn forget_sdk_sync_token(client: &Client) -> anyhow::Result<()> {
    client
        .state_store()
        .remove_kv_data(StateStoreDataKey::SyncToken)
        .await
        .context("cannot clear the Matrix store's own sync position")
}

/// Makes the account's cross-signing identity when it has none, which signs this device;
/// warns when the device stays unsigned (see the module docs). Called after the channel's
/// first sync: the SDK has uploaded the device's keys by then, so the account's devices and
/// identity, asked for here, are known (asked before the upload, the new device is missing
/// from the answer).
pub async fn sign_device(client: &Client, config: &MatrixConfig) {
    let encryption = client.encryption();
    let made = match encryption.bootstrap_cross_signing_if_needed(None).await {
        // The homeserver asks for interactive auth: again, with the password if there is one.
        Err(e) => match e
            .as_uiaa_response()
            .and_then(|info| password_auth(config, info.session.clone()))
        {
            Some(auth) => {
                encryption
                    .bootstrap_cross_signing_if_needed(Some(auth))
                    .await
            }
            None => Err(e),
        },
        made => made,
    };
    if let Err(e) = made {
        warn!(error = %e, "cannot give the Matrix account a cross-signing identity; clients that share keys only with signed devices will not reach this one");
        return;
    }
    match device_signed(&encryption).await {
        Ok(true) => {
            info!("the Matrix device is signed by its account's cross-signing identity");
        }
        Ok(false) => warn!(
            "the Matrix device is not signed by its account's cross-signing identity (made by another session); clients that share keys only with signed devices will not reach it until it is verified from a session of the account"
        ),
        Err(e) => warn!(error = %e, "cannot read the Matrix device's own keys"),
    }
}

/// Whether the account's cross-signing identity signed this device. Holding the identity's
/// self-signing key, the device signed itself when the identity was made (the local copy of
/// its own keys learns of that signature only at the next key query); otherwise another
/// session may have signed it.
async fn device_signed(
    encryption: &matrix_sdk::encryption::Encryption,
) -> Result<bool, matrix_sdk::encryption::CryptoStoreError> {
    let holds_key = encryption
        .cross_signing_status()
        .await
        .is_some_and(|status| status.has_self_signing);
    Ok(holds_key
        || encryption
            .get_own_device()
            .await?
            .is_some_and(|device| device.is_cross_signed_by_owner()))
}

/// The password as interactive auth for `session`, when the account logs in by password.
fn password_auth(config: &MatrixConfig, session: Option<String>) -> Option<AuthData> {
    let MatrixLogin::Password(secret) = &config.login else {
        return None;
    };
    let password = secret.read().ok()?;
    let identifier = UserIdentifier::Matrix(MatrixUserIdentifier::new(config.user_id.clone()));
    let mut auth = Password::new(identifier, password);
    auth.session = session;
    Some(AuthData::Password(auth))
}
