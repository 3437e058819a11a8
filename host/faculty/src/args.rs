//! Command arguments: the caller's `args` object checked against the command's
//! declarations and turned into an argument list and standard input — the same rules
//! whatever language the faculty is written in.
//!
//! - every key must be declared; every required one must be given;
//! - a value must match its `pattern` in full (`regex` syntax, linear-time matching);
//! - a value must not start with `-` (so it can never be read as an option), except
//!   `stdin` arguments, which never reach the command line;
//! - positional values are appended in declaration order, the others as `--name value`.

use regex::Regex;
use serde_json::{Map, Value};

use butler_catalog::manifest::CommandArg;

/// A command's declarations with compiled patterns.
#[derive(Debug, Clone)]
pub struct ArgSpec {
    args: Vec<(CommandArg, Regex)>,
}

/// An argument was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ArgError(pub String);

/// A declared argument's pattern does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("argument `{argument}` has an invalid pattern: {reason}")]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub struct BadPattern {
    /// The argument's name.
    pub argument: String,
    /// The regex crate's reason.
    pub reason: String,
}

/// A call's arguments, each checked against its declared pattern, laid out for the command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Argv {
    /// Positional values and `--name value` pairs.
    pub args: Vec<String>,
    /// The `stdin: true` argument's value.
    pub stdin: Option<String>,
}

impl ArgSpec {
    /// Compiles every declared pattern (anchored: a pattern must match the whole value).
    ///
    /// # Errors
    /// A message naming the argument whose pattern does not compile.
    pub fn compile(declared: &[CommandArg]) -> Result<Self, BadPattern> {
        let args = declared
            .iter()
            .map(|arg| {
                arg.compile_pattern()
                    .map(|re| (arg.clone(), re))
                    .map_err(|e| BadPattern { argument: arg.name.clone(), reason: e.to_string() })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { args })
    }

    /// Checks `given` and builds the argument list.
    ///
    /// # Errors
    /// [`ArgError`] naming the argument and the rule it broke.
    pub fn apply(&self, given: &Map<String, Value>) -> Result<Argv, ArgError> {
        if let Some(unknown) = given.keys().find(|k| !self.args.iter().any(|(a, _)| &a.name == *k)) {
            let known: Vec<&str> = self.args.iter().map(|(a, _)| a.name.as_str()).collect();
            return Err(ArgError(format!(
                "unknown argument `{unknown}` (this command takes: {})",
                if known.is_empty() { "no arguments".to_owned() } else { known.join(", ") }
            )));
        }
        let mut argv = Argv::default();
        for (arg, pattern) in &self.args {
            let Some(value) = given.get(&arg.name) else {
                if arg.required {
                    return Err(ArgError(format!("missing required argument `{}`", arg.name)));
                }
                continue;
            };
            let value = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                Value::Null if !arg.required => continue,
                other => {
                    return Err(ArgError(format!(
                        "argument `{}` must be a string, number or boolean, not {}",
                        arg.name,
                        kind_of(other)
                    )));
                }
            };
            if value.contains('\0') {
                return Err(ArgError(format!("argument `{}` contains a NUL character", arg.name)));
            }
            if !arg.stdin && value.starts_with('-') {
                return Err(ArgError(format!("argument `{}` must not start with `-`", arg.name)));
            }
            if !pattern.is_match(&value) {
                return Err(ArgError(format!("argument `{}` does not match its pattern `{}`", arg.name, arg.pattern)));
            }
            if arg.stdin {
                argv.stdin = Some(value);
            } else if arg.positional {
                argv.args.push(value);
            } else {
                argv.args.push(format!("--{}", arg.name));
                argv.args.push(value);
            }
        }
        Ok(argv)
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
        _ => "a scalar",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> ArgSpec {
        let declared: Vec<CommandArg> = serde_json::from_value(json!([
            {"name": "first", "pattern": "[a-z]+", "positional": true, "required": true},
            {"name": "mode", "pattern": "fast|slow"},
            {"name": "text", "pattern": "(?s).*", "stdin": true}
        ]))
        .expect("declarations");
        ArgSpec::compile(&declared).expect("compiles")
    }

    fn apply(given: Value) -> Result<Argv, ArgError> {
        spec().apply(given.as_object().expect("object"))
    }

    #[test]
    fn builds_positional_named_and_stdin_in_declaration_order() {
        let argv = apply(json!({"text": "-dash is fine on stdin", "mode": "slow", "first": "abc"})).expect("valid");
        assert_eq!(argv.args, ["abc", "--mode", "slow"]);
        assert_eq!(argv.stdin.as_deref(), Some("-dash is fine on stdin"));
    }

    #[test]
    fn every_rule_refuses() {
        for (given, needle) in [
            (json!({}), "missing required argument `first`"),
            (json!({"first": "abc", "extra": "1"}), "unknown argument `extra`"),
            (json!({"first": "abc1"}), "does not match"),
            (json!({"first": "abc", "mode": "fastest"}), "does not match"),
            (json!({"first": "abc", "mode": "fast|slow"}), "does not match"),
            (json!({"first": "-rf"}), "must not start with `-`"),
            (json!({"first": ["a"]}), "must be a string"),
            (json!({"first": "a\u{0}b"}), "NUL"),
        ] {
            let error = apply(given.clone()).expect_err(&given.to_string());
            assert!(error.0.contains(needle), "{given}: {error}");
        }
    }

    #[test]
    fn invalid_patterns_are_reported() {
        let declared: Vec<CommandArg> = serde_json::from_value(json!([{"name": "x", "pattern": "("}])).expect("decl");
        assert!(ArgSpec::compile(&declared).expect_err("bad").to_string().contains("argument `x`"));
    }
}
