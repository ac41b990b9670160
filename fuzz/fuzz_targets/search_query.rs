//! `tool_search` queries: any text parses to a query or an error with an example; a parsed
//! query ranks the built-in tools without a panic.
#![no_main]
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use steward_tools::ToolRegistry;

fn registry() -> &'static Arc<ToolRegistry> {
    static REGISTRY: OnceLock<Arc<ToolRegistry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        steward_tools::builtin::builtins()
            .build()
            .expect("the built-ins build")
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(query) = steward_tools::search::parse_query(text)
    {
        let _ = registry().search(&query, 5, false);
    }
});
