//! JSON Schema validation with messages a person can act on.
//!
//! Wraps the `jsonschema` crate for the two schemas the host validates against
//! (`spec/butler.schema.json` for extension manifests, `spec/instance.schema.json` for the
//! root config). Every error becomes a [`SchemaError`]: a JSON pointer into the document and
//! a one-line message. Messages never echo whole documents: the composite keywords
//! (`not`, `oneOf`, `anyOf`) are explained from the schema itself.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde::Serialize;
use serde_json::Value;

/// One schema violation: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, PartialOrd, Ord)]
pub struct SchemaError {
    /// JSON pointer (RFC 6901) to the offending value; `""` is the document root.
    pub pointer: String,
    /// What is wrong, in one line.
    pub message: String,
}

/// One of the host's schemas, compiled once; checks documents and explains what fails.
pub struct SchemaValidator {
    validator: jsonschema::Validator,
    schema: Value,
}

/// The schema text itself is broken (a build defect, never user input).
#[derive(Debug, thiserror::Error)]
#[error("schema {name} is invalid: {reason}")]
pub struct InvalidSchema {
    name: &'static str,
    reason: String,
}

/// A schema a manifest declares is not a valid JSON Schema: the first line of the
/// validator's reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DeclaredSchemaError(String);

impl SchemaValidator {
    /// Compiles `schema_text` (draft 2020-12, formats asserted).
    ///
    /// # Errors
    /// [`InvalidSchema`] when the text is not JSON or not a valid schema.
    pub fn compile(name: &'static str, schema_text: &str) -> Result<Self, InvalidSchema> {
        let schema: Value =
            serde_json::from_str(schema_text).map_err(|e| InvalidSchema { name, reason: e.to_string() })?;
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| InvalidSchema { name, reason: e.to_string() })?;
        Ok(Self { validator, schema })
    }

    /// Compiles a schema a manifest declares (formats asserted, as for the host's own).
    ///
    /// # Errors
    /// Why it is not a valid JSON Schema, in one line.
    pub fn from_declared(schema: &Value) -> Result<Self, DeclaredSchemaError> {
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(schema)
            .map_err(|e| DeclaredSchemaError(e.to_string().lines().next().unwrap_or_default().to_owned()))?;
        Ok(Self { validator, schema: schema.clone() })
    }

    /// Every violation in `instance`, sorted by pointer, duplicates removed.
    #[must_use]
    pub fn errors(&self, instance: &Value) -> Vec<SchemaError> {
        let errors: Vec<_> = self.validator.iter_errors(instance).collect();
        // A type error says it all: `const`/`enum` complaints about the same value are noise.
        let mistyped: Vec<&str> = errors
            .iter()
            .filter(|e| matches!(e.kind(), ValidationErrorKind::Type { .. }))
            .map(|e| e.instance_path().as_str())
            .collect();
        let mut out = Vec::new();
        for error in &errors {
            let pointer = error.instance_path().as_str();
            let redundant =
                matches!(error.kind(), ValidationErrorKind::Constant { .. } | ValidationErrorKind::Enum { .. });
            if redundant && mistyped.contains(&pointer) {
                continue;
            }
            let context = match self.condition(error.schema_path().as_str()) {
                Some(condition) if !condition.holds_for(instance) => continue,
                Some(condition) => condition.describe(),
                None => String::new(),
            };
            explain(pointer, error.kind(), instance, &context, &mut out);
        }
        out.sort();
        out.dedup();
        out
    }

    /// Every violation in `instance` as one readable line (`/pointer: reason; …`), or
    /// `None` when it is valid.
    #[must_use]
    pub fn describe_errors(&self, instance: &Value) -> Option<String> {
        let problems = self.errors(instance);
        if problems.is_empty() {
            return None;
        }
        let listed: Vec<String> = problems
            .iter()
            .map(|p| if p.pointer.is_empty() { p.message.clone() } else { format!("{}: {}", p.pointer, p.message) })
            .collect();
        Some(listed.join("; "))
    }

    /// The names the schema defines at its root (`properties`).
    pub fn root_properties(&self) -> impl Iterator<Item = &str> {
        self.schema.get("properties").and_then(Value::as_object).into_iter().flat_map(|p| p.keys().map(String::as_str))
    }

    /// For an error raised inside a root-level `allOf/N/then`, the `if` it hangs on.
    fn condition(&self, schema_path: &str) -> Option<Condition<'_>> {
        let rest = schema_path.strip_prefix("/allOf/")?;
        let (index, rest) = rest.split_once('/')?;
        if !(rest == "then" || rest.starts_with("then/")) {
            return None;
        }
        let properties = self.schema.pointer(&format!("/allOf/{index}/if/properties"))?.as_object()?;
        Some(Condition { properties })
    }
}

/// The `if: {properties: {...}}` of a conditional rule.
struct Condition<'a> {
    properties: &'a serde_json::Map<String, Value>,
}

impl Condition<'_> {
    /// A `properties`-only `if` also matches documents that lack the field (or are not
    /// objects at all); the rule is only meant for documents that have it.
    fn holds_for(&self, instance: &Value) -> bool {
        self.properties.keys().all(|key| instance.get(key).is_some())
    }

    /// " for kind `service`", from the `if`'s `const`s.
    fn describe(&self) -> String {
        self.properties
            .iter()
            .filter_map(|(key, rule)| Some(format!(" for {key} `{}`", rule.get("const")?.as_str()?)))
            .collect()
    }
}

/// Turns one error into one or more [`SchemaError`]s.
fn explain(pointer: &str, kind: &ValidationErrorKind, root: &Value, context: &str, out: &mut Vec<SchemaError>) {
    let mut push = |pointer: String, message: String| out.push(SchemaError { pointer, message });
    let value = root.pointer(pointer);
    match kind {
        ValidationErrorKind::Not { schema } => {
            // `not: {anyOf: [{required: [x]}, …]}` is how the manifest schema forbids fields
            // per kind: name each forbidden field that is present, at its own pointer.
            let forbidden = forbidden_fields(schema);
            let present: Vec<&str> =
                forbidden.iter().copied().filter(|f| value.and_then(|v| v.get(f)).is_some()).collect();
            if present.is_empty() {
                push(pointer.to_owned(), not_message(schema));
            } else {
                for field in present {
                    push(
                        format!("{pointer}/{}", escape_pointer(field)),
                        format!("`{}` is not allowed{context}", one_line(field)),
                    );
                }
            }
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().map_or_else(|| property.to_string(), str::to_owned);
            push(pointer.to_owned(), format!("missing required field `{name}`{context}"));
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            for field in unexpected {
                push(format!("{pointer}/{}", escape_pointer(field)), format!("unknown field `{}`", one_line(field)));
            }
        }
        ValidationErrorKind::OneOfNotValid { context } => {
            // Say what each branch wanted, briefly, without the instance.
            let mut branches: Vec<String> = context
                .iter()
                .map(|errs| {
                    errs.iter()
                        .map(|e| {
                            let mut nested = Vec::new();
                            explain(e.instance_path().as_str(), e.kind(), root, "", &mut nested);
                            nested
                                .into_iter()
                                .map(|n| relative(&n.pointer, pointer, &n.message))
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .collect();
            branches.dedup();
            push(
                pointer.to_owned(),
                format!("must match exactly one allowed form, but matches none ({})", branches.join(" | ")),
            );
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => push(
            pointer.to_owned(),
            "matches more than one allowed form; give exactly one of them (for example `url` or `exec`, not both)"
                .to_owned(),
        ),
        ValidationErrorKind::AnyOf { .. } => {
            push(pointer.to_owned(), "matches none of the allowed forms".to_owned());
        }
        ValidationErrorKind::Type { kind } => {
            push(pointer.to_owned(), format!("must be {}, found {}", type_name(kind), json_type(value)))
        }
        ValidationErrorKind::Constant { expected_value } => {
            let found = json_type(value);
            if json_type(Some(expected_value)) == found {
                push(pointer.to_owned(), format!("must be {expected_value}"));
            } else {
                push(pointer.to_owned(), format!("must be {expected_value}, found {found}"));
            }
        }
        ValidationErrorKind::Enum { options } => {
            let options = options
                .as_array()
                .map(|a| a.iter().map(Value::to_string).collect::<Vec<_>>().join(", "))
                .unwrap_or_else(|| options.to_string());
            push(pointer.to_owned(), format!("must be one of {options}"));
        }
        ValidationErrorKind::Pattern { pattern } => {
            push(pointer.to_owned(), format!("{} does not match the pattern `{pattern}`", short(value)))
        }
        ValidationErrorKind::Format { format } => {
            push(pointer.to_owned(), format!("{} is not a valid {format}", short(value)))
        }
        ValidationErrorKind::MinLength { limit } => push(
            pointer.to_owned(),
            if *limit == 1 {
                "must not be empty".to_owned()
            } else {
                format!("must be at least {limit} characters long")
            },
        ),
        ValidationErrorKind::MaxLength { limit } => {
            push(pointer.to_owned(), format!("must be at most {limit} characters long"))
        }
        ValidationErrorKind::Minimum { limit } => {
            push(pointer.to_owned(), format!("must be at least {limit}"));
        }
        ValidationErrorKind::Maximum { limit } => {
            push(pointer.to_owned(), format!("must be at most {limit}"));
        }
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            push(pointer.to_owned(), format!("must be greater than {limit}"));
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            push(pointer.to_owned(), format!("must be less than {limit}"));
        }
        ValidationErrorKind::MinItems { limit } => push(
            pointer.to_owned(),
            if *limit == 1 { "must not be empty".to_owned() } else { format!("must have at least {limit} items") },
        ),
        ValidationErrorKind::MaxItems { limit } => {
            push(pointer.to_owned(), format!("must have at most {limit} items"));
        }
        ValidationErrorKind::MinProperties { limit } => {
            push(pointer.to_owned(), format!("must have at least {limit} field{}", if *limit == 1 { "" } else { "s" }))
        }
        ValidationErrorKind::MaxProperties { limit } => {
            push(pointer.to_owned(), format!("must have at most {limit} fields"));
        }
        ValidationErrorKind::PropertyNames { error } => {
            let name = error.instance().as_str().unwrap_or_default().to_owned();
            push(
                format!("{pointer}/{}", escape_pointer(&name)),
                format!("`{}` is not an allowed key here", one_line(&name)),
            );
        }
        ValidationErrorKind::UniqueItems => {
            push(pointer.to_owned(), "items must be unique".to_owned());
        }
        other => push(pointer.to_owned(), format!("fails the `{}` rule", other.keyword())),
    }
}

/// Fields named by `not: {anyOf: [{required: [...]}, ...]}` (or a single `required`).
fn forbidden_fields(schema: &Value) -> Vec<&str> {
    match schema.get("anyOf").and_then(Value::as_array) {
        Some(branches) => branches.iter().flat_map(required_fields).collect(),
        None => required_fields(schema),
    }
}

fn required_fields(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A message for a `not` that is not a forbidden-field list, e.g. `not: {pattern: "__"}`.
fn not_message(schema: &Value) -> String {
    match schema.get("pattern").and_then(Value::as_str) {
        Some(literal) if literal.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-') => {
            format!("must not contain `{literal}`")
        }
        Some(pattern) => format!("must not match the pattern `{pattern}`"),
        None => "matches a form that is not allowed here".to_owned(),
    }
}

/// Prefixes a nested message with its sub-path relative to `base`, if any.
fn relative(pointer: &str, base: &str, message: &str) -> String {
    match pointer.strip_prefix(base) {
        Some("") | None => message.to_owned(),
        Some(rest) => format!("{rest}: {message}"),
    }
}

/// `text` fit for a one-line message: control characters (a newline in a field name) are
/// escaped as Rust writes them (`\n`), everything else is kept.
#[must_use]
pub(crate) fn one_line(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_debug().to_string() } else { c.to_string() }).collect()
}

fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn type_name(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(t) => article(&t.to_string()),
        TypeKind::Multiple(set) => set.iter().map(|t| article(&t.to_string())).collect::<Vec<_>>().join(" or "),
    }
}

fn article(name: &str) -> String {
    match name {
        "array" | "object" | "integer" => format!("an {name}"),
        "null" => "null".to_owned(),
        _ => format!("a {name}"),
    }
}

fn json_type(value: Option<&Value>) -> &'static str {
    match value {
        None | Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "a boolean",
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => "an integer",
        Some(Value::Number(_)) => "a number",
        Some(Value::String(_)) => "a string",
        Some(Value::Array(_)) => "an array",
        Some(Value::Object(_)) => "an object",
    }
}

/// The value, quoted and cut to a readable length.
fn short(value: Option<&Value>) -> String {
    const MAX: usize = 60;
    let text = value.map_or_else(|| "null".to_owned(), Value::to_string);
    if text.chars().count() <= MAX {
        text
    } else {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validator() -> SchemaValidator {
        SchemaValidator::compile(
            "test",
            r#"{"type":"object","properties":{"a":{"type":"integer","minimum":2},
               "b":{"oneOf":[{"type":"string"},{"type":"array","items":{"type":"string"}}]}},
               "allOf":[{"if":{"properties":{"kind":{"const":"x"}}},
                 "then":{"not":{"anyOf":[{"required":["c"]},{"required":["d"]}]}}}]}"#,
        )
        .expect("test schema compiles")
    }

    #[test]
    fn conditional_rules_apply_only_when_their_field_is_present() {
        assert_eq!(validator().errors(&json!({"c": 1})), vec![]);
        let errors = validator().errors(&json!([1]));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].message, "must be an object, found an array");
    }

    #[test]
    fn forbidden_fields_are_named_at_their_own_pointer() {
        let errors = validator().errors(&json!({"kind":"x","c":1,"d":2}));
        assert_eq!(
            errors,
            vec![
                SchemaError { pointer: "/c".into(), message: "`c` is not allowed for kind `x`".into() },
                SchemaError { pointer: "/d".into(), message: "`d` is not allowed for kind `x`".into() },
            ]
        );
    }

    #[test]
    fn messages_do_not_echo_the_document() {
        let long = "z".repeat(500);
        let errors = validator().errors(&json!({"a": 1, "b": 5, "kind":"x", "c": long}));
        assert!(errors.iter().all(|e| e.message.len() < 200), "{errors:?}");
        assert!(errors.iter().any(|e| e.pointer == "/a" && e.message == "must be at least 2"));
        assert!(errors.iter().any(|e| e.pointer == "/b" && e.message.starts_with("must match exactly one")));
    }
}
