//! `steward init` and `steward run`.

use super::output::out;
use std::path::PathBuf;
use std::process::ExitCode;

use steward_config::{DEFAULT_CONFIG_TOML, LogFormat};

use super::{
    Cli, EX_CONFIG, EX_TEMPFAIL, LogFormatArg, data_dir, load_config, named_config_exists,
};
use crate::daemon::OpenDataDir;
use crate::instance_lock::LockError;

pub fn init(config_path: Option<PathBuf>, force: bool) -> ExitCode {
    let Some(path) = config_path else {
        eprintln!("steward: no config path: set --config, XDG_CONFIG_HOME or HOME");
        return ExitCode::FAILURE;
    };
    if path.exists() && !force {
        eprintln!(
            "steward: {} already exists; use --force to overwrite it",
            path.display()
        );
        return ExitCode::FAILURE;
    }
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, DEFAULT_CONFIG_TOML));
    match written {
        Ok(()) => {
            out!("wrote {}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("steward: cannot write {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}

/// Threads of the daemon's async runtime; the allocator keeps one arena for each.
const RUNTIME_WORKERS: usize = 2;

/// `steward run`: the data dir is opened (locked, database open) before the config is
/// parsed — see [`OpenDataDir`] for why the order matters.
pub fn run(cli: &Cli, config_path: Option<PathBuf>, log_format: Option<LogFormatArg>) -> ExitCode {
    crate::allocator::cap_arenas(RUNTIME_WORKERS);
    if let Err(code) = named_config_exists(cli) {
        return code;
    }
    let data_dir = match data_dir(cli) {
        Ok(dir) => dir,
        Err(code) => return code,
    };
    let data = match OpenDataDir::open(data_dir) {
        Ok(data) => data,
        Err(e) => return exit_code(&e),
    };
    let config = match load_config(cli, config_path.as_deref()) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let format = match log_format {
        Some(LogFormatArg::Pretty) => LogFormat::Pretty,
        Some(LogFormatArg::Json) => LogFormat::Json,
        None => config.daemon.log_format,
    };
    crate::logging::init(format);
    if let Some(path) = &config_path
        && !path.exists()
    {
        tracing::info!(config = %path.display(), "no config file; running on the embedded defaults");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RUNTIME_WORKERS)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("steward: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(crate::daemon::run(config, data, config_path)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => exit_code(&e),
    }
}

/// Reports why the daemon stopped (or could not start) and the exit code that says so.
fn exit_code(e: &anyhow::Error) -> ExitCode {
    eprintln!("steward: {e:#}");
    if e.downcast_ref::<LockError>().is_some() {
        return ExitCode::from(EX_TEMPFAIL);
    }
    // A bad config, or a data dir from a newer version: restarting cannot help.
    if e.downcast_ref::<crate::core::ConfigProblem>().is_some()
        || e.downcast_ref::<crate::store::schema::SchemaError>()
            .is_some_and(|e| matches!(e, crate::store::schema::SchemaError::Newer { .. }))
    {
        return ExitCode::from(EX_CONFIG);
    }
    ExitCode::FAILURE
}
