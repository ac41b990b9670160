//! The command-safety parser: any command line gets a tier (or a refusal to parse, which is
//! treated as dangerous), never a panic or a hang.
#![no_main]
use libfuzzer_sys::fuzz_target;
use steward_tools::safety::{ShellContext, classify_shell};

fuzz_target!(|data: &[u8]| {
    if let Ok(command) = std::str::from_utf8(data) {
        let ctx = ShellContext {
            roots: vec!["/home/me/work".into()],
            home: Some("/home/me".into()),
        };
        let _ = classify_shell(command, &ctx);
    }
});
