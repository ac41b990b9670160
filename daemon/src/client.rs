//! A client of the control socket, used by the CLI and the end-to-end tests.

use std::path::{Path, PathBuf};

use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::protocol::{Request, Response};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to the steward daemon at {}: {source} (is `steward run` running with this data dir?)", path.display())]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("connection to the daemon failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the daemon sent something unreadable: {0}")]
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

    pub async fn request(&mut self, request: &Request) -> Result<(), ClientError> {
        self.write_line(request).await
    }

    pub async fn write_line<T: Serialize>(&mut self, value: &T) -> Result<(), ClientError> {
        let mut line = serde_json::to_vec(value)?;
        line.push(b'\n');
        self.writer.write_all(&line).await?;
        Ok(())
    }

    /// The next response; `None` when the daemon closed the connection.
    pub async fn next(&mut self) -> Result<Option<Response>, ClientError> {
        match self.lines.next_line().await? {
            Some(line) => Ok(Some(serde_json::from_str(&line)?)),
            None => Ok(None),
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
