//! `steward-sandbox`: the shell sandbox's launcher, a binary of its own so that a command's
//! start does not pay for loading the daemon (see `steward_tools::sandbox::launcher`).

fn main() -> std::process::ExitCode {
    steward_tools::sandbox::launcher::main()
}
