//! Where things live: the XDG config and data dirs, unless `--config` / `--data-dir` say
//! otherwise.

use std::path::PathBuf;

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

fn xdg(var: &str, fallback: &str) -> Option<PathBuf> {
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => home().map(|h| h.join(fallback)),
    }
}

/// `$XDG_CONFIG_HOME/steward/config.toml`, else `~/.config/steward/config.toml`.
pub fn default_config_path() -> Option<PathBuf> {
    xdg("XDG_CONFIG_HOME", ".config").map(|d| d.join("steward").join("config.toml"))
}

/// `$XDG_DATA_HOME/steward`, else `~/.local/share/steward`.
pub fn default_data_dir() -> Option<PathBuf> {
    xdg("XDG_DATA_HOME", ".local/share").map(|d| d.join("steward"))
}

/// The control socket: from config, else `steward.sock` in the data dir.
pub fn socket_path(configured: Option<&PathBuf>, data_dir: &std::path::Path) -> PathBuf {
    configured
        .cloned()
        .unwrap_or_else(|| data_dir.join("steward.sock"))
}
