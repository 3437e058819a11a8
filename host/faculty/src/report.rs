//! Report shapes, checked before a report is served.

use serde_json::Value;

use butler_catalog::manifest::ReportShape;

/// Checks `data` against `shape`.
///
/// # Errors
/// What is missing or mistyped.
pub fn check(shape: ReportShape, data: &Value) -> Result<(), String> {
    let object = data.as_object().ok_or("a report must be a JSON object")?;
    let string = |key: &str| object.get(key).and_then(Value::as_str).is_some();
    match shape {
        ReportShape::Status => {
            if !string("status") || !string("summary") {
                return Err("a `status` report needs string fields `status` and `summary`".to_owned());
            }
            if object.get("items").is_some_and(|i| !i.is_array()) {
                return Err("`items` of a `status` report must be an array".to_owned());
            }
        }
        ReportShape::List => {
            let items =
                object.get("items").and_then(Value::as_array).ok_or("a `list` report needs an `items` array")?;
            for (i, item) in items.iter().enumerate() {
                if item.get("title").and_then(Value::as_str).is_none() {
                    return Err(format!("item {i} of a `list` report needs a string `title`"));
                }
                if item.get("preview").is_some_and(|p| !p.is_string()) {
                    return Err(format!("`preview` of item {i} must be a string"));
                }
                if item.get("at").is_some_and(|a| !(a.is_string() || a.is_number())) {
                    return Err(format!("`at` of item {i} must be a string or a number"));
                }
            }
        }
        ReportShape::Markdown => {
            if !string("markdown") {
                return Err("a `markdown` report needs a string `markdown`".to_owned());
            }
        }
    }
    Ok(())
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
