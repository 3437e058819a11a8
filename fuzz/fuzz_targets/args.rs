//! The faculty argument checker: a command's declared arguments and a caller's `args`
//! object, either as JSON (`{"declared": [...], "given": {...}}`, the seed corpus's form)
//! or built from the fuzzer's bytes.
//!
//! Properties: the declarations compile exactly when every pattern does; the checker
//! accepts exactly what the rules of `faculty::args` allow, and what it builds is the
//! declared arguments in declaration order, no value on the command line starting with `-`
//! or holding a NUL, each one matching its pattern.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use butler_faculty::args::{ArgSpec, Argv, BadPattern};
use butler_host::catalog::manifest::CommandArg;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

/// Argument names from the repository's faculties, and a few that collide with them.
const NAMES: &[&str] = &["id", "text", "query", "limit", "path", "ids", "checks", "revision", "-x", ""];
/// Patterns from the repository's faculties, and a few edge cases.
const PATTERNS: &[&str] = &[
    "[a-z0-9][a-z0-9-]{0,63}",
    "(?s).{1,20}",
    "[0-9]{1,4}",
    "true|false",
    ".*",
    "(?s).*",
    "-.*",
    "[^\\x00]*",
    "a)|(b",
    "(",
    "",
];

#[derive(Debug, Arbitrary)]
struct Decl {
    name: Choice,
    pattern: Choice,
    required: bool,
    positional: bool,
    stdin: bool,
}

#[derive(Debug, Arbitrary)]
enum Choice {
    Known(u8),
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Given {
    Text(String),
    Dash(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Null,
    List,
    Object,
}

fn pick(choice: &Choice, from: &[&str]) -> String {
    match choice {
        Choice::Known(i) => from[usize::from(*i) % from.len()].to_owned(),
        Choice::Other(s) => s.chars().take(40).collect(),
    }
}

fn case(data: &[u8]) -> Option<(Vec<CommandArg>, Map<String, Value>)> {
    if let Ok(Value::Object(mut json)) = serde_json::from_slice::<Value>(data) {
        let declared = serde_json::from_value(json.remove("declared")?).ok()?;
        let Value::Object(given) = json.remove("given")? else { return None };
        return Some((declared, given));
    }
    let mut u = Unstructured::new(data);
    let decls: Vec<Decl> = u.arbitrary().ok()?;
    let given: Vec<(Choice, Given)> = u.arbitrary().ok()?;
    let declared = decls
        .iter()
        .take(8)
        .map(|d| CommandArg {
            name: pick(&d.name, NAMES),
            pattern: pick(&d.pattern, PATTERNS),
            required: d.required,
            positional: d.positional,
            stdin: d.stdin,
        })
        .collect();
    let given = given
        .into_iter()
        .take(8)
        .map(|(name, value)| {
            let value = match value {
                Given::Text(s) => Value::String(s),
                Given::Dash(s) => Value::String(format!("-{s}")),
                Given::Int(n) => Value::from(n),
                Given::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
                Given::Bool(b) => Value::Bool(b),
                Given::Null => Value::Null,
                Given::List => Value::Array(vec![Value::from(1)]),
                Given::Object => Value::Object(Map::new()),
            };
            (pick(&name, NAMES), value)
        })
        .collect();
    Some((declared, given))
}

fuzz_target!(|data: &[u8]| {
    let Some((declared, given)) = case(data) else { return };
    let spec = compiled_spec(&declared);
    assert_eq!(
        spec.is_ok(),
        declared.iter().all(|a| compiled(&format!("^(?:{})$", a.pattern)).is_some()),
        "{declared:?}"
    );
    let Ok(spec) = spec else { return };
    let result = spec.apply(&given);
    let expected = rules(&declared, &given);
    match (&result, &expected) {
        (Ok(argv), Ok(want)) => {
            assert_eq!(argv, want, "{declared:?} {given:?}");
            for (arg, value) in declared.iter().filter_map(|a| Some((a, given.get(&a.name)?))) {
                let Some(text) = scalar(value) else { continue };
                if !arg.stdin {
                    assert!(!text.starts_with('-') && !text.contains('\0'), "{text:?}");
                }
                // A value that matches in full matches the pattern on its own too.
                if let Some(alone) = compiled(&arg.pattern) {
                    assert!(alone.is_match(&text), "{text:?} against {:?}", arg.pattern);
                }
            }
        }
        (Err(error), Err(())) => assert!(error.0.contains('`'), "the refusal names the argument: {error}"),
        _ => panic!("checker {result:?}, rules {expected:?}: {declared:?} {given:?}"),
    }
});

/// `ArgSpec::compile`, remembered per declaration list: compiling patterns is most of the
/// time a case takes, and the checker is what is fuzzed here.
fn compiled_spec(declared: &[CommandArg]) -> Result<ArgSpec, BadPattern> {
    thread_local! {
        static KNOWN: std::cell::RefCell<std::collections::HashMap<String, Result<ArgSpec, BadPattern>>> =
            Default::default();
    }
    let key = serde_json::to_string(declared).expect("declarations serialize");
    KNOWN.with_borrow_mut(|known| {
        if known.len() > 1024 {
            known.clear();
        }
        known.entry(key).or_insert_with(|| ArgSpec::compile(declared)).clone()
    })
}

/// `pattern` compiled, remembered: compiling is most of the time a case takes.
fn compiled(pattern: &str) -> Option<regex::Regex> {
    thread_local! {
        static KNOWN: std::cell::RefCell<std::collections::HashMap<String, Option<regex::Regex>>> =
            Default::default();
    }
    KNOWN.with_borrow_mut(|known| {
        if known.len() > 4096 {
            known.clear();
        }
        known.entry(pattern.to_owned()).or_insert_with(|| regex::Regex::new(pattern).ok()).clone()
    })
}

/// The value as the command line would get it, for the scalar kinds.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The module's rules, stated again: every key declared, every required one given (and
/// not null), scalars only, no NUL, no leading `-` outside stdin, a full match.
fn rules(declared: &[CommandArg], given: &Map<String, Value>) -> Result<Argv, ()> {
    if given.keys().any(|k| !declared.iter().any(|a| &a.name == k)) {
        return Err(());
    }
    let mut argv = Argv::default();
    for arg in declared {
        let value = match given.get(&arg.name) {
            None | Some(Value::Null) if !arg.required => continue,
            None => return Err(()),
            Some(value) => scalar(value).ok_or(())?,
        };
        let full = compiled(&format!("^(?:{})$", arg.pattern)).ok_or(())?;
        if value.contains('\0') || (!arg.stdin && value.starts_with('-')) || !full.is_match(&value) {
            return Err(());
        }
        if arg.stdin {
            argv.stdin = Some(value);
        } else if arg.positional {
            argv.args.push(value);
        } else {
            argv.args.extend([format!("--{}", arg.name), value]);
        }
    }
    Ok(argv)
}
