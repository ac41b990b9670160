//! The HTTP API's bearer token: `DATA_DIR/api.token` (mode 0600), made on the first start;
//! `steward token show` prints it and `steward token rotate` replaces it (the old one stops
//! working at once). Compared in constant time.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// The API token, shared by the server and the control socket (which rotates it).
#[derive(Clone, Debug)]
pub struct ApiToken {
    path: PathBuf,
    value: Arc<RwLock<String>>,
}

impl ApiToken {
    /// The token of `data_dir`, made (0600) when there is none yet.
    pub fn load_or_create(data_dir: &Path) -> std::io::Result<Self> {
        let path = data_dir.join("api.token");
        let value = match std::fs::read_to_string(&path) {
            Ok(token) if !token.trim().is_empty() => token.trim().to_owned(),
            _ => write_new(&path)?,
        };
        Ok(Self {
            path,
            value: Arc::new(RwLock::new(value)),
        })
    }

    /// Replaces the token; returns the new one.
    pub fn rotate(&self) -> std::io::Result<String> {
        let token = write_new(&self.path)?;
        *self.value.write().unwrap_or_else(|p| p.into_inner()) = token.clone();
        Ok(token)
    }

    pub fn accepts(&self, given: &str) -> bool {
        let token = self.value.read().unwrap_or_else(|p| p.into_inner());
        constant_time_eq(token.as_bytes(), given.as_bytes())
    }
}

/// 160 random bits from two ULIDs' random parts, hex.
fn write_new(path: &Path) -> std::io::Result<String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let token = format!(
        "{:020x}{:020x}",
        ulid::Ulid::generate().random(),
        ulid::Ulid::generate().random()
    );
    let temporary = path.with_extension("new");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(token.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    Ok(token)
}

/// Equal contents, in time that depends only on the lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
