//! Report shapes, checked before a report is served.

use serde_json::Value;

use butler_catalog::manifest::ReportShape;

/// Checks `data` against `shape`.
///
/// # Errors
/// What is missing or mistyped.
pub fn check(shape: ReportShape, data: &Value) -> Result<(), BadReport> {
    let object = data.as_object().ok_or(BadReport::NotAnObject)?;
    let string = |key: &str| object.get(key).and_then(Value::as_str).is_some();
    match shape {
        ReportShape::Status => {
            if !string("status") || !string("summary") {
                return Err(BadReport::StatusFields);
            }
            if object.get("items").is_some_and(|i| !i.is_array()) {
                return Err(BadReport::StatusItems);
            }
        }
        ReportShape::List => {
            let items = object.get("items").and_then(Value::as_array).ok_or(BadReport::ListItems)?;
            for (i, item) in items.iter().enumerate() {
                if item.get("title").and_then(Value::as_str).is_none() {
                    return Err(BadReport::ItemTitle(i));
                }
                if item.get("preview").is_some_and(|p| !p.is_string()) {
                    return Err(BadReport::ItemPreview(i));
                }
                if item.get("at").is_some_and(|a| !(a.is_string() || a.is_number())) {
                    return Err(BadReport::ItemAt(i));
                }
            }
        }
        ReportShape::Markdown => {
            if !string("markdown") {
                return Err(BadReport::Markdown);
            }
        }
    }
    Ok(())
}

/// What is missing or mistyped in a report (the message of the caller's
/// `invalid_report` error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadReport {
    /// Not a JSON object.
    #[error("a report must be a JSON object")]
    NotAnObject,
    /// A `status` report without string `status` and `summary`.
    #[error("a `status` report needs string fields `status` and `summary`")]
    StatusFields,
    /// A `status` report whose `items` is not an array.
    #[error("`items` of a `status` report must be an array")]
    StatusItems,
    /// A `list` report without an `items` array.
    #[error("a `list` report needs an `items` array")]
    ListItems,
    /// A `list` item (by index) without a string `title`.
    #[error("item {0} of a `list` report needs a string `title`")]
    ItemTitle(usize),
    /// A `list` item (by index) whose `preview` is not a string.
    #[error("`preview` of item {0} must be a string")]
    ItemPreview(usize),
    /// A `list` item (by index) whose `at` is neither a string nor a number.
    #[error("`at` of item {0} must be a string or a number")]
    ItemAt(usize),
    /// A `markdown` report without a string `markdown`.
    #[error("a `markdown` report needs a string `markdown`")]
    Markdown,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes() {
        assert!(check(ReportShape::Status, &json!({"status":"ok","summary":"s","items":[]})).is_ok());
        assert!(check(ReportShape::Status, &json!({"status":"ok"})).is_err());
        assert!(check(ReportShape::List, &json!({"items":[{"title":"t","at":1,"preview":"p"}]})).is_ok());
        assert!(check(ReportShape::List, &json!({"items":[{"name":"t"}]})).is_err());
        assert!(check(ReportShape::Markdown, &json!({"markdown":"# x"})).is_ok());
        assert!(check(ReportShape::Markdown, &json!([])).is_err());
    }
}
