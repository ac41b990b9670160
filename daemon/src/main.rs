//! The `steward` binary: parses the command line and hands over to the library.

fn main() -> std::process::ExitCode {
    steward_daemon::cli::main()
}
