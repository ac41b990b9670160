//! Logs go to stderr, structured fields first.
//!
//! `RUST_LOG` filters; unset or empty, the filter is [`DEFAULT_FILTER`]: Steward's own lines
//! from `info` up and its libraries' from `warn` up. A library's `info` is written for its
//! own developers — the Matrix SDK alone logs "Got the same sync response twice" and the
//! state of key backup and recovery at every start and every idle sync — and an owner reading
//! the journal of a daemon that has run quietly for a week should find what Steward did, not
//! 2,880 lines a day of a library's housekeeping. One library warning is dropped too:
//! `matrix_sdk_crypto::backups` warns "Trying to backup room keys but no backup key was found"
//! after every sync of an account that never set up server-side key backup, which Steward
//! does not use (it keeps its keys in its own store, `matrix/`); a warning repeated every 30 s
//! about a feature that is off teaches the reader to skip warnings. Its errors still show.
//! And `matrix_sdk::http_client` is silenced: it logs every request that did not succeed as an
//! error, the 404s the SDK expects included — at every start it probes the account's data for
//! secret storage and backup settings, four `ERROR … Account data not found` lines on an
//! account that has none. A request of Steward's own that fails comes back to Steward as an
//! error and is reported there with what it was for (the channel's health in `steward status`
//! and `steward doctor`, and the "channel is down" warning); `RUST_LOG=matrix_sdk=debug,…`
//! shows the SDK's side when it is needed.

use steward_config::LogFormat;
use tracing_subscriber::EnvFilter;

/// The filter when `RUST_LOG` is unset or empty (see the module docs). Every crate of the
/// workspace that logs is named here.
const DEFAULT_FILTER: &str = "warn,steward_daemon=info,steward_tools=info,\
    matrix_sdk_crypto::backups=error,matrix_sdk::http_client=off";

pub fn init(format: LogFormat) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .filter(|directives| !directives.trim().is_empty())
        .and_then(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Pretty => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
