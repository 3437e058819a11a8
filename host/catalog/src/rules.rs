//! Semantic manifest rules the JSON Schema cannot express: ids unique within a
//! manifest, and the MCP namespace rules.

use std::collections::{HashMap, HashSet};
use std::sync::{LazyLock, Mutex};

use super::Manifest;
use crate::validation::SchemaError;

/// Namespace reserved for the host's own MCP tools.
pub const RESERVED_NAMESPACE: &str = "butler";

/// Every semantic problem in `manifest` (already schema-valid).
pub(super) fn check(manifest: &Manifest) -> Vec<SchemaError> {
    let mut errors = Vec::new();
    unique(&mut errors, "commands", manifest.commands.iter().map(|c| c.id.as_str()));
    unique(&mut errors, "reports", manifest.reports.iter().map(|r| r.id.as_str()));
    unique(&mut errors, "delegations", manifest.delegations.iter().map(|d| d.id.as_str()));
    for (index, delegation) in manifest.delegations.iter().enumerate() {
        for (pointer, message) in crate::result_schema::unsupported(&delegation.result) {
            errors.push(SchemaError { pointer: format!("/delegations/{index}/result{pointer}"), message });
        }
    }
    for (index, command) in manifest.commands.iter().enumerate() {
        for (call_index, action) in command.calls.iter().enumerate() {
            if !is_action(action) {
                errors.push(SchemaError {
                    pointer: format!("/commands/{index}/calls/{call_index}"),
                    message: format!(
                        "`{}` is not a pipeline action (`<prefix>.<verb>`, lower case)",
                        crate::validation::one_line(action)
                    ),
                });
            }
        }
        for (glob_index, pattern) in command.hub_tools.iter().enumerate() {
            if let Err(e) = globset::Glob::new(pattern) {
                errors.push(SchemaError {
                    pointer: format!("/commands/{index}/hubTools/{glob_index}"),
                    message: format!("not a glob: {e}"),
                });
            }
        }
        if !command.hub_tools.is_empty() && command.effect == crate::manifest::Effect::Write {
            errors.push(SchemaError {
                pointer: format!("/commands/{index}/hubTools"),
                message: "a command that writes (`effect: write`) cannot call hub tools: a hub tool may run a faculty \
                          that needs the store this command holds"
                    .to_owned(),
            });
        }
        let mut seen = HashSet::new();
        let mut stdin_args = 0;
        for (arg_index, arg) in command.args.iter().enumerate() {
            let at = format!("/commands/{index}/args/{arg_index}");
            if !seen.insert(arg.name.as_str()) {
                errors.push(SchemaError {
                    pointer: format!("{at}/name"),
                    message: format!("argument `{}` is declared twice", arg.name),
                });
            }
            if let Err(reason) = pattern_problem(arg) {
                errors.push(SchemaError {
                    pointer: format!("{at}/pattern"),
                    message: format!("not a valid regular expression: {reason}"),
                });
            }
            if arg.stdin {
                stdin_args += 1;
                if stdin_args > 1 {
                    errors.push(SchemaError {
                        pointer: format!("{at}/stdin"),
                        message: "a command has one standard input: only one argument may set `stdin`".to_owned(),
                    });
                }
            }
        }
    }
    serving_rules(manifest, &mut errors);
    for (index, command) in manifest.commands.iter().enumerate() {
        if let Some(tool) = &command.mcp {
            tool_rules(&manifest.id, index, tool, &mut errors);
        }
    }
    let envs = manifest
        .hosted
        .iter()
        .map(|h| ("/hosted/env", &h.env))
        .chain(manifest.mcp.iter().map(|m| ("/mcp/env", &m.env)));
    for (at, env) in envs {
        for (key, value) in env {
            let pointer = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
            if let Some(problem) = env_problem(key, value) {
                errors.push(SchemaError { pointer, message: problem });
            }
        }
    }
    if let Some(mcp) = &manifest.mcp {
        transport_rules(mcp, &mut errors);
        let namespace = mcp.effective_namespace(&manifest.id);
        let pointer = if mcp.namespace.is_some() { "/mcp/namespace" } else { "/id" };
        if namespace == RESERVED_NAMESPACE {
            let advice = if mcp.namespace.is_some() { "choose another `mcp.namespace`" } else { "set `mcp.namespace`" };
            errors.push(SchemaError {
                pointer: pointer.to_owned(),
                message: format!(
                    "the MCP namespace `{RESERVED_NAMESPACE}` is reserved for the host's own tools; {advice}"
                ),
            });
        } else if mcp.namespace.is_none() && !valid_namespace(&namespace) {
            errors.push(SchemaError {
                pointer: pointer.to_owned(),
                message: format!(
                    "the MCP namespace derived from the id, `{namespace}`, is not a valid namespace (^[a-z][a-z0-9_]{{0,23}}$, no `__`); set `mcp.namespace`"
                ),
            });
        }
    }
    errors
}

/// `mcp`: the fields its transport needs, none it does not take, and for `http` a URL the
/// host may reach and headers that can be sent.
fn transport_rules(mcp: &super::manifest::Mcp, errors: &mut Vec<SchemaError>) {
    let remote = mcp.transport == super::manifest::Mcp::HTTP;
    let (needs, present) = if remote { ("url", mcp.url.is_some()) } else { ("command", !mcp.command.is_empty()) };
    if !present {
        errors.push(SchemaError {
            pointer: "/mcp".to_owned(),
            message: format!("missing `{needs}`: transport `{}` needs it", mcp.transport),
        });
    }
    let foreign = if remote {
        vec![("command", !mcp.command.is_empty()), ("cwd", mcp.cwd.is_some()), ("env", !mcp.env.is_empty())]
    } else {
        vec![("url", mcp.url.is_some()), ("headers", !mcp.headers.is_empty())]
    };
    for (field, _) in foreign.iter().filter(|(_, set)| *set) {
        errors.push(SchemaError {
            pointer: format!("/mcp/{field}"),
            message: format!("`{field}` is not taken by transport `{}`", mcp.transport),
        });
    }
    if let Some(url) = mcp.remote_url()
        && let Err(why) = crate::suzu::allowed_url(url)
    {
        errors.push(SchemaError { pointer: "/mcp/url".to_owned(), message: why.to_string() });
    }
    for (name, value) in &mcp.headers {
        let pointer = format!("/mcp/headers/{}", name.replace('~', "~0").replace('/', "~1"));
        if let Some(problem) = header_problem(name, value) {
            errors.push(SchemaError { pointer, message: problem });
        }
    }
}

/// Why `name: value` cannot be sent as an HTTP header, if it cannot.
fn header_problem(name: &str, value: &str) -> Option<String> {
    const TOKEN_PUNCTUATION: &str = "!#$%&'*+-.^_`|~";
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || TOKEN_PUNCTUATION.contains(c)) {
        return Some(format!(
            "`{}` is not an HTTP header name (letters, digits and {TOKEN_PUNCTUATION})",
            crate::validation::one_line(name)
        ));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Some(format!("the value of header `{name}` holds a control character (a line break?)"));
    }
    None
}

/// `serves`: action prefixes, each once.
fn serving_rules(manifest: &Manifest, errors: &mut Vec<SchemaError>) {
    let mut seen = HashSet::new();
    for (index, prefix) in manifest.serves.iter().enumerate() {
        let pointer = format!("/serves/{index}");
        if !is_action(&format!("{prefix}.x")) {
            errors.push(SchemaError {
                pointer,
                message: format!(
                    "`{prefix}` is not an action prefix (lower case letters, digits and `-`, starting with a letter)"
                ),
            });
        } else if !seen.insert(prefix.as_str()) {
            errors.push(SchemaError { pointer, message: format!("prefix `{prefix}` is listed twice") });
        }
    }
}

/// `commands[i].mcp`: a valid public name in a valid namespace, a schema that compiles.
fn tool_rules(faculty: &str, index: usize, tool: &super::manifest::CommandTool, errors: &mut Vec<SchemaError>) {
    let at = format!("/commands/{index}/mcp");
    let namespace = tool.effective_namespace(faculty);
    // Faculties may offer tools in the reserved namespace: they run inside the host.
    if namespace != RESERVED_NAMESPACE && !valid_namespace(&namespace) {
        let pointer = if tool.namespace.is_some() { format!("{at}/namespace") } else { "/id".to_owned() };
        errors.push(SchemaError {
            pointer,
            message: format!(
                "`{}` is not a valid MCP namespace (^[a-z][a-z0-9_]{{0,23}}$, no `__`)",
                crate::validation::one_line(&namespace)
            ),
        });
    }
    if let Err(reason) = crate::names::public(&namespace, &tool.tool) {
        errors.push(SchemaError { pointer: format!("{at}/tool"), message: reason.to_string() });
    }
    if let Some(input) = &tool.input
        && let Err(reason) = crate::validation::SchemaValidator::from_declared(input)
    {
        errors.push(SchemaError {
            pointer: format!("{at}/input"),
            message: format!("not a valid JSON Schema: {reason}"),
        });
    }
}

/// Whether an argument's pattern compiles, memoized: a pattern such as `(?s).{1,2000}`
/// takes milliseconds to compile, and every rescan re-validates every manifest.
fn pattern_problem(arg: &super::manifest::CommandArg) -> Result<(), BadPattern> {
    static KNOWN: LazyLock<Mutex<HashMap<String, Result<(), BadPattern>>>> = LazyLock::new(Mutex::default);
    let mut known = KNOWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    known
        .entry(arg.pattern.clone())
        .or_insert_with(|| {
            // On its own first: a pattern that only parses once wrapped (`a)|(b` becomes
            // `^(?:a)|(b)$`, which no longer matches in full) is not a pattern.
            regex::Regex::new(&arg.pattern)
                .and_then(|_| arg.compile_pattern())
                .map(drop)
                .map_err(|e| BadPattern(e.to_string().lines().last().unwrap_or_default().trim().to_owned()))
        })
        .clone()
}

/// Why an argument's pattern does not compile: the last line of the regex crate's
/// message (the line that says what is wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
struct BadPattern(String);

/// The schema's namespace rule, applied to a namespace derived from the id.
fn valid_namespace(namespace: &str) -> bool {
    let mut chars = namespace.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && namespace.len() <= 24
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !namespace.contains("__")
}

fn unique<'a>(errors: &mut Vec<SchemaError>, field: &str, ids: impl Iterator<Item = &'a str>) {
    let mut seen = HashSet::new();
    for (index, id) in ids.enumerate() {
        if !seen.insert(id) {
            errors.push(SchemaError {
                pointer: format!("/{field}/{index}/id"),
                message: format!("id `{}` is used twice in `{field}`", crate::validation::one_line(id)),
            });
        }
    }
}

/// What is wrong with an environment variable a process would get, if anything: the OS
/// cannot pass an empty name, one with `=`, or a NUL in either.
fn env_problem(key: &str, value: &str) -> Option<String> {
    if key.is_empty() {
        Some("an environment variable needs a name".to_owned())
    } else if key.contains('=') {
        Some(format!("environment variable name `{}` contains `=`", key.escape_debug()))
    } else if key.contains('\0') || value.contains('\0') {
        Some(format!("environment variable `{}` contains a NUL character", key.escape_debug()))
    } else {
        None
    }
}

/// Whether `action` has the shape of a pipeline action: `<prefix>.<verb>`, each part lower
/// case letters, digits and `-`, starting with a letter.
#[must_use]
pub fn is_action(action: &str) -> bool {
    let part = |p: &str| {
        p.starts_with(|c: char| c.is_ascii_lowercase())
            && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    action.split_once('.').is_some_and(|(prefix, verb)| part(prefix) && part(verb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_namespaces() {
        assert!(valid_namespace("weather_now"));
        assert!(!valid_namespace("9lives"));
        assert!(!valid_namespace("a__b"));
        assert!(!valid_namespace(&"a".repeat(25)));
    }

    fn problems(manifest: serde_json::Value) -> Vec<String> {
        let manifest: Manifest = serde_json::from_value(manifest).expect("typed manifest");
        check(&manifest).into_iter().map(|e| format!("{}: {}", e.pointer, e.message)).collect()
    }

    #[test]
    fn a_pattern_must_be_a_whole_regex_on_its_own() {
        let with = |pattern: &str| {
            problems(serde_json::json!({"schemaVersion": 1, "kind": "faculty", "id": "f", "name": "F",
                "commands": [{"id": "c", "exec": ["self"], "args": [{"name": "a", "pattern": pattern}]}]}))
        };
        assert!(with("[a-z]+").is_empty());
        let escaped = with("a)|(b");
        assert_eq!(escaped.len(), 1, "{escaped:?}");
        assert!(escaped[0].starts_with("/commands/0/args/0/pattern"), "{escaped:?}");
    }

    #[test]
    fn environment_names_and_values_the_os_can_pass() {
        let with = |key: &str, value: &str| {
            problems(serde_json::json!({"schemaVersion": 1, "kind": "tool", "id": "t", "name": "T",
                "hosted": {"command": ["true"], "env": {key: value}}}))
        };
        assert!(with("API_KEY", "x").is_empty());
        assert_eq!(with("", "x").len(), 1);
        assert_eq!(with("A=B", "x").len(), 1);
        assert_eq!(with("A\0B", "x").len(), 1);
        assert_eq!(with("A", "x\0y").len(), 1);
        assert!(with("A=B", "x")[0].starts_with("/hosted/env/A=B"), "{:?}", with("A=B", "x"));
    }
}
