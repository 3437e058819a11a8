//! Pipeline arguments: actions receive their `args` object as JSON text on the command's
//! standard-input argument.

use serde::de::DeserializeOwned;

use super::Failure;

/// Parses a command's JSON arguments into `T` (unknown fields refused by `T`'s serde
/// attributes). An absent or blank stdin is `{}`.
///
/// # Errors
/// `invalid_args` naming the field and the problem.
pub fn parse<T: DeserializeOwned>(stdin: Option<String>) -> Result<T, Failure> {
    let text = stdin.filter(|s| !s.trim().is_empty()).unwrap_or_else(|| "{}".to_owned());
    serde_json::from_str(&text).map_err(|e| Failure::invalid_args(e.to_string()))
}
