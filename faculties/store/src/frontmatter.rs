//! Front matter: the `---` block at the top of a card, in the subset of YAML that Markdown
//! wiki tools read and people write by hand.
//!
//! Written as `key: <JSON value>` lines (JSON scalars and flow lists are valid YAML), so
//! the host never needs a YAML library. Read back leniently: a value that is not JSON is a
//! plain string (`title: My card`), and a key followed by `- item` lines is a list.

use serde_json::{Map, Value};

/// Splits `text` into its front matter fields and the body.
///
/// # Errors
/// When the text does not start with a `---` line or the block is never closed.
pub fn split(text: &str) -> Result<(Map<String, Value>, String), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("a card starts with a `---` line".to_owned());
    }
    let mut fields = Map::new();
    let mut open_list: Option<String> = None;
    let mut consumed = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut closed = false;
    for line in lines {
        consumed += line.len();
        let trimmed = line.trim_end();
        if trimmed == "---" {
            closed = true;
            break;
        }
        if trimmed.trim().is_empty() || trimmed.trim_start().starts_with('#') {
            continue;
        }
        if let (Some(key), Some(item)) = (&open_list, trimmed.trim_start().strip_prefix("- ")) {
            if let Some(Value::Array(items)) = fields.get_mut(key) {
                items.push(scalar(item));
            }
            continue;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            return Err(format!("front matter line without `key: value`: {trimmed}"));
        };
        let (key, value) = (key.trim().to_owned(), value.trim());
        if value.is_empty() {
            fields.insert(key.clone(), Value::Array(Vec::new()));
            open_list = Some(key);
        } else {
            fields.insert(key, scalar(value));
            open_list = None;
        }
    }
    if !closed {
        return Err("the front matter is not closed by a `---` line".to_owned());
    }
    let body = text.get(consumed..).unwrap_or_default().to_owned();
    Ok((fields, body.strip_prefix('\n').unwrap_or(&body).to_owned()))
}

/// A JSON value if the text is JSON, else the text itself (quotes removed).
fn scalar(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| {
        let unquoted = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')).unwrap_or(text);
        Value::String(unquoted.to_owned())
    })
}

/// Renders fields (in the given order) and a body as a card file.
#[must_use]
pub fn render(fields: &[(&str, Value)], body: &str) -> String {
    let mut out = String::from("---\n");
    for (key, value) in fields {
        out.push_str(key);
        out.push_str(": ");
        out.push_str(&value.to_string());
        out.push('\n');
    }
    out.push_str("---\n\n");
    out.push_str(body.trim_end());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip_and_hand_written() {
        let text = render(&[("title", json!("A: b")), ("tags", json!(["x", "y"])), ("revision", json!(2))], "Body\n");
        let (fields, body) = split(&text).expect("parses");
        assert_eq!(fields["title"], "A: b");
        assert_eq!(fields["tags"], json!(["x", "y"]));
        assert_eq!(fields["revision"], 2);
        assert_eq!(body, "Body\n");

        let hand = "---\ntitle: My card\ntags:\n  - one\n  - two\nscope: for Rust projects\n---\nText";
        let (fields, body) = split(hand).expect("parses");
        assert_eq!(fields["title"], "My card");
        assert_eq!(fields["tags"], json!(["one", "two"]));
        assert_eq!(body, "Text");
        assert!(split("no front matter").is_err());
        assert!(split("---\ntitle: x\n").is_err());
    }
}
