//! The mail account: credentials, TLS, and opening an IMAP session the way every server
//! accepts it — connect, (STARTTLS,) read the greeting, log in. Each connection is bounded
//! by `CONNECT_TIMEOUT`; errors say which step failed and against which server.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use steward_config::{EmailConfig, MailTls};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{self, pki_types};

/// Connecting, TLS and login together may take at most this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);
/// One IMAP command (outside IDLE) may take at most this long.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// A byte stream an IMAP session runs over: plain TCP (loopback) or TLS.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + Debug {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Debug> Io for T {}

pub type Session = async_imap::Session<Box<dyn Io>>;

#[derive(Clone)]
pub struct Account {
    pub config: Arc<EmailConfig>,
    password: String,
    tls: Arc<rustls::ClientConfig>,
    /// The `ca_file` certificates, for lettre's own TLS setup.
    pub extra_roots_pem: Vec<u8>,
}

impl Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("username", &self.config.username)
            .field("imap", &self.config.imap)
            .finish_non_exhaustive()
    }
}

impl Account {
    /// Reads the password and the extra trust anchor; fails when either is missing.
    pub fn new(config: EmailConfig) -> Result<Self, AccountError> {
        let password = config.password.read().map_err(AccountError::Password)?;
        let tls = tls_config(&config).map_err(AccountError::Tls)?;
        Ok(Self {
            config: Arc::new(config),
            password,
            tls: Arc::new(tls.0),
            extra_roots_pem: tls.1,
        })
    }

    pub fn password(&self) -> &str {
        &self.password
    }

    /// Opens a logged-in IMAP session (no mailbox selected).
    pub async fn imap(&self) -> anyhow::Result<Session> {
        tokio::time::timeout(CONNECT_TIMEOUT, self.imap_unbounded())
            .await
            .map_err(|_| {
                anyhow!(
                    "IMAP {}:{}: no session within {CONNECT_TIMEOUT:?}",
                    self.config.imap.host,
                    self.config.imap.port
                )
            })?
    }

    async fn imap_unbounded(&self) -> anyhow::Result<Session> {
        let server = &self.config.imap;
        let at = format!("{}:{}", server.host, server.port);
        let tcp = TcpStream::connect((server.host.as_str(), server.port))
            .await
            .with_context(|| format!("IMAP {at}: cannot connect"))?;
        tcp.set_nodelay(true).ok();
        let stream: Box<dyn Io> = match server.tls {
            MailTls::Implicit => Box::new(self.tls_over(tcp, &server.host).await?),
            MailTls::None => Box::new(tcp),
            MailTls::StartTls => {
                let mut client = async_imap::Client::new(tcp);
                greeting(&mut client, &at).await?;
                client
                    .run_command_and_check_ok("STARTTLS", None)
                    .await
                    .with_context(|| format!("IMAP {at}: STARTTLS refused"))?;
                let tcp = client.into_inner();
                Box::new(self.tls_over(tcp, &server.host).await?)
            }
        };
        let mut client = async_imap::Client::new(stream);
        if server.tls != MailTls::StartTls {
            greeting(&mut client, &at).await?;
        }
        client
            .login(&self.config.username, &self.password)
            .await
            .map_err(|(e, _)| anyhow!("IMAP {at}: login as {} failed: {e}", self.config.username))
    }

    async fn tls_over(
        &self,
        tcp: TcpStream,
        host: &str,
    ) -> anyhow::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let name = pki_types::ServerName::try_from(host.to_owned())
            .with_context(|| format!("{host:?} is not a valid TLS server name"))?;
        TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .with_context(|| format!("TLS with {host} failed"))
    }
}

/// The server speaks first; `Client::new` does not read it.
async fn greeting<T: Io>(client: &mut async_imap::Client<T>, at: &str) -> anyhow::Result<()> {
    match client.read_response().await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => bail!("IMAP {at}: closed before the greeting"),
        Err(e) => Err(anyhow!("IMAP {at}: no greeting: {e}")),
    }
}

/// Runs one IMAP command future under `COMMAND_TIMEOUT`.
pub async fn bounded<T, E: std::fmt::Display>(
    what: &str,
    command: impl std::future::Future<Output = Result<T, E>>,
) -> anyhow::Result<T> {
    match tokio::time::timeout(COMMAND_TIMEOUT, command).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(anyhow!("IMAP {what}: {e}")),
        Err(_) => Err(anyhow!("IMAP {what}: no answer within {COMMAND_TIMEOUT:?}")),
    }
}

/// Why an account cannot be used: its password, or its TLS trust (`email.ca_file`).
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("email password: {0}")]
    Password(String),
    #[error("{0:#}")]
    Tls(anyhow::Error),
}

/// The TLS client setup: the system's roots plus `email.ca_file`, and that file's PEM
/// (for the SMTP client). Without a `ca_file` it is the daemon's shared setup
/// (`steward_tools::https`), so the system's CA bundle is not read once more for IMAP.
fn tls_config(config: &EmailConfig) -> anyhow::Result<(rustls::ClientConfig, Vec<u8>)> {
    if config.ca_file.is_none()
        && let Some(shared) = steward_tools::https::tls_config_without_alpn()
    {
        return Ok((shared, Vec::new()));
    }
    let (extra_roots, extra_roots_pem) = match &config.ca_file {
        Some(path) => {
            use pki_types::pem::PemObject;
            let pem =
                std::fs::read(path).with_context(|| format!("email.ca_file {}", path.display()))?;
            let certs = pki_types::CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("email.ca_file {} is not PEM", path.display()))?;
            if certs.is_empty() {
                bail!("email.ca_file {} holds no certificate", path.display());
            }
            (certs, pem)
        }
        None => (Vec::new(), Vec::new()),
    };
    let tls = steward_tools::https::verifying_config(extra_roots)
        .context("cannot set up TLS certificate verification")?;
    Ok((tls, extra_roots_pem))
}
