//! Mail: any bytes become a parsed message or a reason it is unprocessable; threads, the
//! command line of an answer and Authentication-Results headers never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use steward_daemon::channels::email::{auth, parse};

fuzz_target!(|data: &[u8]| {
    if let Ok(mail) = parse::parse(data) {
        let _ = mail.thread();
        let _ = mail.reply_references();
        let _ = mail.dedupe_key();
        let _ = parse::first_line(&mail.body);
    }
    let text = String::from_utf8_lossy(data);
    let _ = auth::passes_in_results(&text, &["mx.example.net".to_owned()], "example.com");
});
