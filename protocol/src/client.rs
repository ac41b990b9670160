//! A client of the control socket, used by the CLI and the end-to-end tests.

use std::path::{Path, PathBuf};

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::{Request, Response};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to the steward daemon at {}: {source} (is `steward run` running with this data dir?)", path.display())]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("connection to the daemon failed: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "the daemon sent something this command cannot read ({0}); are they the same version? `steward --version` vs `steward status`"
    )]
    Protocol(#[from] serde_json::Error),
}

#[derive(Debug)]
pub struct Client {
    lines: Lines<BufReader<OwnedReadHalf>>,
    writer: OwnedWriteHalf,
}

impl Client {
    pub async fn connect(socket: &Path) -> Result<Self, ClientError> {
        let stream = UnixStream::connect(socket)
            .await
            .map_err(|source| ClientError::Connect {
                path: socket.to_owned(),
                source,
            })?;
        let (reader, writer) = stream.into_split();
        Ok(Self {
            lines: BufReader::new(reader).lines(),
            writer,
        })
    }

    /// Sends `request` with this CLI's version (see `protocol`'s docs).
    pub async fn request(&mut self, request: &Request) -> Result<(), ClientError> {
        let mut line = serde_json::to_value(request)?;
        if let Some(object) = line.as_object_mut() {
            object.insert(crate::CLIENT_VERSION_FIELD.into(), crate::VERSION.into());
        }
        self.write_line(&line).await
    }

    pub async fn write_line<T: Serialize>(&mut self, value: &T) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(value)?;
        line.push(b'\n');
        self.writer.write_all(&line).await?;
        Ok(())
    }

    /// The next response; `None` when the daemon closed the connection. A version
    /// mismatch notice is printed as a warning on stderr and skipped.
    pub async fn next(&mut self) -> Result<Option<Response>, ClientError> {
        loop {
            let Some(line) = self.lines.next_line().await? else {
                return Ok(None);
            };
            match serde_json::from_str(&line)? {
                Response::VersionMismatch {
                    daemon_version,
                    client_version,
                } => eprintln!(
                    "steward: warning: the daemon runs steward {daemon_version}, this command is {client_version}; restart the daemon to run the new version (systemctl --user restart steward)"
                ),
                response => return Ok(Some(response)),
            }
        }
    }

    /// Sends `request` and collects responses up to `end`.
    pub async fn call(socket: &Path, request: &Request) -> Result<Vec<Response>, ClientError> {
        let mut client = Self::connect(socket).await?;
        client.request(request).await?;
        let mut responses = Vec::new();
        while let Some(response) = client.next().await? {
            if response == Response::End {
                break;
            }
            responses.push(response);
        }
        Ok(responses)
    }
}
