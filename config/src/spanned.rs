//! `toml::Spanned` with a JSON Schema: a value remembers where it was written (for errors
//! that name the line), and its schema is the value's own — the span is not part of the
//! file's shape. A local wrapper because neither the type nor the trait is ours.

use std::borrow::Cow;
use std::ops::Range;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer};

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Spanned<T>(toml::Spanned<T>);

impl<T> Spanned<T> {
    pub fn new(range: Range<usize>, value: T) -> Self {
        Self(toml::Spanned::new(range, value))
    }

    pub fn get_ref(&self) -> &T {
        self.0.get_ref()
    }

    pub fn span(&self) -> Range<usize> {
        self.0.span()
    }

    pub fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Spanned<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        toml::Spanned::<T>::deserialize(deserializer).map(Self)
    }
}

impl<T: JsonSchema> JsonSchema for Spanned<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

/// Maps a span to its line (`None` for defaults without one).
pub(crate) type LineOf<'a> = &'a dyn Fn(std::ops::Range<usize>) -> Option<usize>;
/// Checks a number against its bounds, naming the key.
pub(crate) type InRange<'a> =
    &'a dyn Fn(&str, &Spanned<u64>, u64, u64) -> Result<u64, crate::ConfigError>;
