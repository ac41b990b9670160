//! Typed tool arguments: a tool declares its arguments as one struct (`serde` to read them,
//! `schemars` to describe them). The schema shown to the model is generated from the struct
//! and the handler parses into the same struct, so the two cannot drift.
//!
//! Decided here: the generated schema is made to read like a hand-written one — inline (no
//! `$defs`), without `$schema`, `title` or the root `description` (the contract's
//! description is the tool's), without schemars' `format` hints (`uint64` is no JSON Schema
//! format), and with an `Option` field simply optional rather than nullable. A struct with
//! `#[serde(deny_unknown_fields)]` gives `"additionalProperties": false`.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;
use serde_json::Value;
use steward_events::ToolOutcome;

/// What a tool that takes no arguments takes.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

/// The arguments schema of `T` (see the module docs).
pub fn schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(root) = schema.as_object_mut() {
        root.remove("title");
        root.remove("description");
    }
    tidy(&mut schema);
    schema
}

/// Removes the `format` keywords schemars adds to numbers, and makes a nullable type
/// (`["integer", "null"]`, `null` among an `enum`'s values, or `anyOf` with
/// `{"type": "null"}`) plain: absent is how an argument is left out.
fn tidy(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("type").is_some_and(|t| t != "string") {
                map.remove("format");
            }
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if let [single] = types.as_slice() {
                    let single = single.clone();
                    map.insert("type".into(), single);
                }
            }
            if let Some(Value::Array(allowed)) = map.get_mut("enum") {
                allowed.retain(|v| !v.is_null());
            }
            if let Some(Value::Array(options)) = map.get("anyOf") {
                let kept: Vec<Value> = options
                    .iter()
                    .filter(|o| o.get("type").is_none_or(|t| t != "null"))
                    .cloned()
                    .collect();
                if let [single] = kept.as_slice()
                    && let Some(fields) = single.as_object()
                {
                    let fields = fields.clone();
                    map.remove("anyOf");
                    map.extend(fields);
                }
            }
            map.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// The call's arguments as `T`. They were checked against `T`'s schema already, so a
/// failure here means the two disagree; it is reported as the tool's error.
pub fn parse<T: DeserializeOwned>(args: &Value) -> Result<T, ToolOutcome> {
    T::deserialize(args).map_err(|e| ToolOutcome::error(format!("invalid arguments: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// What `fs_read` takes, as a hand-written schema said it.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Sample {
        /// Path relative to the workspace.
        path: String,
        /// First line (1-based).
        #[schemars(range(min = 1))]
        offset: Option<u64>,
        #[serde(default)]
        tags: Vec<String>,
        mode: Option<Mode>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Fast,
        Careful,
    }

    #[test]
    fn the_schema_reads_like_a_hand_written_one() {
        assert_eq!(
            schema::<Sample>(),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the workspace."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
                    "tags": {"type": "array", "items": {"type": "string"}, "default": []},
                    "mode": {"type": "string", "enum": ["fast", "careful"]}
                },
                "required": ["path"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn arguments_that_do_not_fit_are_the_tools_error() {
        let parsed: Sample = parse(&json!({"path": "a", "offset": 3})).unwrap();
        assert_eq!((parsed.path.as_str(), parsed.offset), ("a", Some(3)));
        let refused = parse::<Sample>(&json!({"path": 1})).err().unwrap();
        assert!(
            refused.content_text().contains("invalid arguments"),
            "{refused:?}"
        );
    }
}
