//! The JSON Schema subset a delegation declares for its result (`delegations[].result`), and
//! the check of a submitted result against it.
//!
//! The subset: `type` (`string`, `integer`, `number`, `boolean`, `array`, `object`, or a
//! list of them), `enum`, `maxLength`, `minimum`, `maximum`, `maxItems`, `required`,
//! `properties`, and `items` for an array's elements; `description` and `title` are
//! annotations and check nothing. Any other keyword is a manifest error ([`unsupported`]):
//! a rule the host would not check must not look as if it did.

use serde_json::Value;

/// The keywords the host checks.
pub const CHECKED: &[&str] =
    &["type", "enum", "maxLength", "minimum", "maximum", "maxItems", "required", "properties", "items"];

/// Keywords that describe and check nothing.
const ANNOTATIONS: &[&str] = &["description", "title"];

/// The types `type` may name.
const TYPES: &[&str] = &["string", "integer", "number", "boolean", "array", "object", "null"];

/// Every problem of `schema` as a result schema: `(JSON pointer below it, message)`.
#[must_use]
pub fn unsupported(schema: &Value) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    walk_schema(schema, String::new(), &mut problems);
    problems
}

fn walk_schema(schema: &Value, at: String, problems: &mut Vec<(String, String)>) {
    let Some(fields) = schema.as_object() else {
        problems.push((at, "a result schema is an object".to_owned()));
        return;
    };
    for (key, value) in fields {
        let here = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
        match key.as_str() {
            "properties" => match value.as_object() {
                Some(properties) => {
                    for (name, property) in properties {
                        walk_schema(
                            property,
                            format!("{here}/{}", name.replace('~', "~0").replace('/', "~1")),
                            problems,
                        );
                    }
                }
                None => problems.push((here, "`properties` is an object of schemas".to_owned())),
            },
            "items" => walk_schema(value, here, problems),
            "type" => {
                let names: Vec<&Value> = match value {
                    Value::Array(names) => names.iter().collect(),
                    one => vec![one],
                };
                if names.is_empty() || names.iter().any(|n| !n.as_str().is_some_and(|n| TYPES.contains(&n))) {
                    problems.push((here, format!("`type` is one of {} (or a list of them)", TYPES.join(", "))));
                }
            }
            "enum" if !value.is_array() => problems.push((here, "`enum` is a list of values".to_owned())),
            "required" if !value.as_array().is_some_and(|names| names.iter().all(Value::is_string)) => {
                problems.push((here, "`required` is a list of property names".to_owned()));
            }
            "maxLength" | "maxItems" if !value.is_u64() => {
                problems.push((here, format!("`{key}` is a non-negative integer")));
            }
            "minimum" | "maximum" if !value.is_number() => problems.push((here, format!("`{key}` is a number"))),
            key if CHECKED.contains(&key) || ANNOTATIONS.contains(&key) => {}
            other => problems.push((
                here,
                format!(
                    "`{other}` is not checked by the host; a result schema may use {} (and `description`, `title`)",
                    CHECKED.join(", ")
                ),
            )),
        }
    }
}

/// Every way `value` breaks `schema` (a schema [`unsupported`] found nothing wrong with),
/// one readable line each, with the JSON pointer of the offending value; empty when it
/// holds. At most `limit` lines.
#[must_use]
pub fn violations(schema: &Value, value: &Value, limit: usize) -> Vec<String> {
    let mut found = Vec::new();
    check(schema, value, "", &mut found, limit);
    found
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check(schema: &Value, value: &Value, at: &str, found: &mut Vec<String>, limit: usize) {
    let mut fail = |message: String| {
        if found.len() < limit {
            let at = if at.is_empty() { "the result" } else { at };
            found.push(format!("{at}: {message}"));
        }
    };
    let actual = type_of(value);
    if let Some(expected) = schema.get("type") {
        let names: Vec<&str> = match expected {
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            one => one.as_str().into_iter().collect(),
        };
        let fits = |name: &&str| *name == actual || (*name == "number" && actual == "integer");
        if !names.iter().any(fits) {
            fail(format!("must be of type {}, not {actual}", names.join(" or ")));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        fail(format!("must be one of {}", listed.join(", ")));
    }
    match value {
        Value::String(text) => {
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
                let length = text.chars().count() as u64;
                if length > max {
                    fail(format!("must be at most {max} characters long, not {length}"));
                }
            }
        }
        Value::Number(number) => {
            let n = number.as_f64().unwrap_or_default();
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && n < min
            {
                fail(format!("must be at least {min}, not {number}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && n > max
            {
                fail(format!("must be at most {max}, not {number}"));
            }
        }
        Value::Array(items) => {
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && items.len() as u64 > max
            {
                fail(format!("must have at most {max} items, not {}", items.len()));
            }
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{at}/{index}"), found, limit);
                }
            }
        }
        Value::Object(fields) => {
            for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
            {
                if !fields.contains_key(name) {
                    fail(format!("lacks the required property `{name}`"));
                }
            }
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    if let Some(field) = fields.get(name) {
                        let pointer = format!("{at}/{}", name.replace('~', "~0").replace('/', "~1"));
                        check(property, field, &pointer, found, limit);
                    }
                }
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["verdict", "score"],
            "properties": {
                "verdict": {"type": "string", "enum": ["keep", "drop"], "description": "what to do"},
                "score": {"type": "integer", "minimum": 0, "maximum": 10},
                "note": {"type": "string", "maxLength": 5},
                "ratio": {"type": "number"},
                "done": {"type": "boolean"},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
            }
        })
    }

    #[test]
    fn a_result_that_holds_has_no_violations() {
        let ok = json!({"verdict": "keep", "score": 3, "note": "短い", "ratio": 2, "done": true, "tags": ["a"]});
        assert!(unsupported(&schema()).is_empty());
        assert_eq!(violations(&schema(), &ok, 10), Vec::<String>::new());
    }

    #[test]
    fn each_rule_is_checked() {
        let cases = [
            (json!([]), "the result: must be of type object, not array"),
            (json!({"score": 1}), "the result: lacks the required property `verdict`"),
            (json!({"verdict": "maybe", "score": 1}), "/verdict: must be one of \"keep\", \"drop\""),
            (json!({"verdict": 1, "score": 1}), "/verdict: must be of type string, not integer"),
            (json!({"verdict": "keep", "score": 1.5}), "/score: must be of type integer, not number"),
            (json!({"verdict": "keep", "score": -1}), "/score: must be at least 0, not -1"),
            (json!({"verdict": "keep", "score": 11}), "/score: must be at most 10, not 11"),
            (
                json!({"verdict": "keep", "score": 1, "note": "toolong"}),
                "/note: must be at most 5 characters long, not 7",
            ),
            (json!({"verdict": "keep", "score": 1, "ratio": "x"}), "/ratio: must be of type number, not string"),
            (json!({"verdict": "keep", "score": 1, "done": "yes"}), "/done: must be of type boolean, not string"),
            (
                json!({"verdict": "keep", "score": 1, "tags": ["a", "b", "c"]}),
                "/tags: must have at most 2 items, not 3",
            ),
            (json!({"verdict": "keep", "score": 1, "tags": [1]}), "/tags/0: must be of type string, not integer"),
        ];
        for (value, expected) in cases {
            assert_eq!(violations(&schema(), &value, 10), vec![expected.to_owned()], "{value}");
        }
        assert_eq!(violations(&schema(), &json!({}), 1).len(), 1, "the limit holds");
    }

    #[test]
    fn keywords_outside_the_subset_are_named() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}},
            "additionalProperties": false});
        let problems = unsupported(&schema);
        let pointers: Vec<&str> = problems.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(pointers, ["/properties/a/pattern", "/additionalProperties"], "{problems:?}");
        assert!(problems[1].1.contains("`additionalProperties` is not checked by the host"), "{problems:?}");
        assert_eq!(unsupported(&json!({"type": "text"}))[0].0, "/type");
        assert_eq!(unsupported(&json!({"maxLength": -1}))[0].0, "/maxLength");
        assert_eq!(unsupported(&json!("string"))[0].1, "a result schema is an object");
    }
}
