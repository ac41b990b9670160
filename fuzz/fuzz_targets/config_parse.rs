//! The config file: any text is a config or an error naming the key, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = steward_config::Config::from_toml(text, None);
    }
});
