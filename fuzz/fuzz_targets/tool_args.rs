//! Tool arguments: any JSON is valid or invalid for every built-in tool's schema, and a
//! `call_tool` wrapper unwraps or not; never a panic. First byte picks the tool.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

struct Tool {
    name: String,
    validator: jsonschema::Validator,
}

fn tools() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let registry = steward_tools::builtin::builtins()
            .build()
            .expect("the built-ins build");
        registry
            .contracts()
            .into_iter()
            .map(|c| Tool {
                validator: jsonschema::validator_for(&c.parameters).expect("a valid schema"),
                name: c.name,
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(rest) else {
        return;
    };
    let tool = &tools()[usize::from(which) % tools().len()];
    let _ = tool
        .validator
        .iter_errors(&args)
        .map(|e| e.to_string())
        .count();
    let _ = steward_tools::builtin::unwrap_call_tool(&tool.name, &args);
});
