//! `butler pipeline ACTION --args JSON` and `butler PREFIX VERB [ID] [--name VALUE]…`:
//! any pipeline action from the terminal, through the running host, as the owner (the
//! owner token; over the local socket also the operator).
//!
//! The CLI knows no action: `GET /faculties` says which faculty serves a prefix and what
//! its command declares. A command with a `confirm` step (`review.approve` confirms with
//! `review.prepare`) gets that step run first, with the fields it names carried over; a
//! command whose input schema has an `idempotencyKey` gets a fresh one. Its help
//! (`butler PREFIX --help`, `butler PREFIX VERB --help`) is generated from the same
//! declarations, in `verbs`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use super::Target;
use super::client::Client;
use super::verbs;

/// `butler pipeline ACTION [--args JSON]`.
#[derive(Debug, clap::Args)]
pub struct Pipeline {
    /// The action, `<prefix>.<verb>` (the prefixes are in `GET /faculties`'s `routes`).
    action: String,
    /// Its arguments, as a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
    #[command(flatten)]
    target: Target,
}

/// Runs `butler pipeline`.
pub fn pipeline(command: Pipeline) -> anyhow::Result<ExitCode> {
    let args = json_object(&command.args, "--args")?;
    let client = Client::connect(command.target.workdir)?;
    print_answer(&run(&client, &command.action, args)?);
    Ok(ExitCode::SUCCESS)
}

/// Runs `butler PREFIX VERB [ID] [--name VALUE]… [--args JSON] [--workdir DIR]`, or
/// prints its help (`butler PREFIX --help`, `butler PREFIX VERB --help`, a bare
/// `butler PREFIX`) from what the faculties declare.
pub fn action(words: &[String]) -> anyhow::Result<ExitCode> {
    if let Some(asked) = verbs::asked(words) {
        verbs::print(Client::connect(workdir_of(words)), &asked)?;
        return Ok(ExitCode::SUCCESS);
    }
    let (action, args, workdir) = parse_words(words)?;
    let client = Client::connect(workdir)?;
    print_answer(&run(&client, &action, args)?);
    Ok(ExitCode::SUCCESS)
}

/// The action, its arguments and the `--workdir` of an action's words: `PREFIX VERB`, an
/// optional bare value (the `id` argument), `--name VALUE` pairs (`--content-hash` is
/// `contentHash`; a value that reads as JSON is taken as that JSON, anything else as
/// text), and `--args JSON` with more of them.
fn parse_words(words: &[String]) -> anyhow::Result<(String, Map<String, Value>, Option<PathBuf>)> {
    let usage = "usage: butler PREFIX VERB [ID] [--name VALUE]… (like `butler review list`)";
    let [prefix, verb, rest @ ..] = words else { bail!("{usage}") };
    let action = format!("{prefix}.{verb}");
    if !butler_host::catalog::is_action(&action) {
        bail!("`{prefix} {verb}` is not an action (lowercase words, like `review list`); {usage}");
    }
    let mut args = Map::new();
    let mut workdir = None;
    let mut rest = rest.iter();
    while let Some(word) = rest.next() {
        let Some(flag) = word.strip_prefix("--") else {
            if args.insert("id".to_owned(), json!(word)).is_some() {
                bail!("one bare value only (the `id`): `{word}`; name the others with --name VALUE");
            }
            continue;
        };
        let value = rest.next().with_context(|| format!("--{flag} needs a value"))?;
        match flag {
            "workdir" => workdir = Some(PathBuf::from(value)),
            "args" => args.extend(json_object(value, "--args")?),
            _ => {
                args.insert(camel_case(flag), butler_host::json::parse(value).unwrap_or_else(|_| json!(value)));
            }
        }
    }
    let workdir = workdir.or_else(|| std::env::var_os(butler_host::instance::WORKDIR_ENV).map(PathBuf::from));
    Ok((action, args, workdir))
}

/// The `--workdir DIR` among an action's words (else `BUTLER_WORKDIR`).
fn workdir_of(words: &[String]) -> Option<PathBuf> {
    words
        .windows(2)
        .find(|pair| pair[0] == "--workdir")
        .map(|pair| PathBuf::from(&pair[1]))
        .or_else(|| std::env::var_os(butler_host::instance::WORKDIR_ENV).map(PathBuf::from))
}

/// `content-hash` → `contentHash`.
fn camel_case(flag: &str) -> String {
    let mut out = String::with_capacity(flag.len());
    let mut upper = false;
    for c in flag.chars() {
        if c == '-' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Runs `action` with `args`, its confirming step first when its command declares one.
fn run(client: &Client, action: &str, mut args: Map<String, Value>) -> anyhow::Result<Value> {
    let declared = declaration(client, action)?;
    if let Some(confirm) = declared.get("confirm") {
        let with: Map<String, Value> = confirm["with"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(|key| Some((key.to_owned(), args.get(key)?.clone())))
            .collect();
        let step = confirm["action"].as_str().context("a confirm step without an action")?;
        let answer = post(client, step, with)?;
        for field in confirm["carry"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            let value = answer.get(field).with_context(|| format!("{step} did not return `{field}`"))?;
            args.entry(field.to_owned()).or_insert_with(|| value.clone());
        }
    }
    if declared["input"]["properties"].get("idempotencyKey").is_some() && !args.contains_key("idempotencyKey") {
        args.insert("idempotencyKey".to_owned(), json!(fresh_key()));
    }
    post(client, action, args)
}

fn post(client: &Client, action: &str, args: Map<String, Value>) -> anyhow::Result<Value> {
    client.post("/pipeline", &json!({"action": action, "args": args}))
}

/// What the command behind `action` declares (`{}` when the faculty does not list it:
/// then the host's own answer to the call explains).
fn declaration(client: &Client, action: &str) -> anyhow::Result<Value> {
    let (prefix, verb) = action.split_once('.').context("an action is `<prefix>.<verb>`")?;
    Ok(verbs::served(client, prefix)?.command(verb).cloned().unwrap_or_else(|| json!({})))
}

/// An idempotency key no other run of the CLI uses.
fn fresh_key() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("cli-{}-{nanos}", std::process::id())
}

fn json_object(text: &str, what: &str) -> anyhow::Result<Map<String, Value>> {
    match butler_host::json::parse(text).with_context(|| format!("{what} must be JSON"))? {
        Value::Object(map) => Ok(map),
        _ => bail!("{what} must be a JSON object, like '{{\"query\": \"tests\"}}'"),
    }
}

fn print_answer(data: &Value) {
    outln!("{data:#}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::verbs::words;

    #[test]
    fn words_become_an_action_and_its_arguments() {
        let (action, args, workdir) =
            parse_words(&words("notes add n-1 --content-hash abc --limit 5 --tags [\"a\"] --workdir /w")).expect("ok");
        assert_eq!(action, "notes.add");
        assert_eq!(Value::Object(args), json!({"id": "n-1", "contentHash": "abc", "limit": 5, "tags": ["a"]}));
        assert_eq!(workdir, Some(PathBuf::from("/w")));
        let (_, args, _) = parse_words(&words("notes add --args {\"a\":1} --b x")).expect("ok");
        assert_eq!(Value::Object(args), json!({"a": 1, "b": "x"}));
    }

    #[test]
    fn malformed_words_are_refused_with_the_usage() {
        for bad in ["notes", "Notes add", "notes add a b", "notes add --limit", "notes add --args [1]"] {
            assert!(parse_words(&words(bad)).is_err(), "{bad}");
        }
    }
}
