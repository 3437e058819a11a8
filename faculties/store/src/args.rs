//! Pipeline input: actions receive their input as one JSON document (checked by the
//! host against the command's declared `input` schema first).

use serde::de::DeserializeOwned;

use super::{Failure, Value};

/// A command's JSON input as `T` (unknown fields refused by `T`'s serde attributes).
///
/// # Errors
/// `invalid_args` naming the field and the problem.
pub fn parse<T: DeserializeOwned>(input: Value) -> Result<T, Failure> {
    butler_faculty_kit::input(input)
}

/// [`parse`] of JSON text (blank text is `{}`).
///
/// # Errors
/// `invalid_args` for text that is not JSON or does not fit `T`.
pub fn parse_text<T: DeserializeOwned>(text: &str) -> Result<T, Failure> {
    let text = if text.trim().is_empty() { "{}" } else { text };
    let value = serde_json::from_str(text).map_err(|e| Failure::invalid_args(e.to_string()))?;
    parse(value)
}
