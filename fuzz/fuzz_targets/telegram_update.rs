//! Telegram: any bytes read as a Bot API update become a message, an edit, a button press
//! or nothing; any text becomes Telegram HTML and parts within the limit, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use steward_daemon::channels::telegram::html::{MAX_PART_UNITS, split, to_html};
use steward_daemon::channels::telegram::parse::{Incoming, parse, update_id};

fuzz_target!(|data: &[u8]| {
    if let Ok(update) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = update_id(&update);
        if let Incoming::Message(message) | Incoming::Edited(message) = parse(&update) {
            let _ = message.event_text();
            let _ = message.addresses(1, Some("steward_bot"));
        }
    }
    let text = String::from_utf8_lossy(data);
    let _ = to_html(&text);
    for part in split(&text, MAX_PART_UNITS) {
        assert!(part.encode_utf16().count() <= MAX_PART_UNITS);
    }
    // A small limit reaches the cutting paths with short inputs too.
    for part in split(&text, 40) {
        assert!(part.encode_utf16().count() <= 40, "{part:?}");
    }
});
