//! Client output. Commands are filters as much as anything (`steward events --json | head`):
//! when the reader goes away the command ends quietly with success, as Unix tools do,
//! instead of the panic `println!` gives on a closed pipe.

use std::fmt;
use std::io::{ErrorKind, Write};

/// `println!` for command output; see the module docs.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::write_line(format_args!($($arg)*))
    };
}
pub(crate) use out;

pub fn write_line(args: fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_fmt(args)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("steward: cannot write the output: {e}");
            std::process::exit(1);
        }
    }
}
