//! An MCP server's tool list mapped to Steward names, whatever the names: no panic, every
//! distinct remote name kept, no two Steward names alike, none that another source holds,
//! each at most 64 characters, and the same name for a tool whatever the order listed.
#![no_main]
use libfuzzer_sys::fuzz_target;
use steward_daemon::mcp::local_names;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let server = lines.next().unwrap_or("");
    let remotes: Vec<&str> = lines.filter(|l| !l.is_empty()).take(2000).collect();
    // Every other line's plain mapping is held by another source.
    let reserved: std::collections::HashSet<String> = remotes
        .iter()
        .step_by(2)
        .map(|r| format!("{server}_{r}"))
        .collect();
    let names = local_names(server, &remotes, &reserved);
    let distinct: std::collections::HashSet<&str> = remotes.iter().copied().collect();
    assert_eq!(names.len(), distinct.len(), "every distinct tool kept");
    let locals: std::collections::HashSet<&str> = names.iter().map(|n| n.local.as_str()).collect();
    assert_eq!(locals.len(), names.len(), "no two alike");
    assert!(names.iter().all(|n| !reserved.contains(&n.local)), "none taken from another source");
    for name in &names {
        assert!(name.local.chars().count() <= 64, "{}", name.local);
        assert!(name.local.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }
    let mut reversed = remotes.clone();
    reversed.reverse();
    for again in local_names(server, &reversed, &reserved) {
        let first = names.iter().find(|n| n.remote == again.remote).expect("same tools");
        assert_eq!(first.local, again.local, "order does not matter");
    }
});
