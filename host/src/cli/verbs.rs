//! Help for the short form `butler PREFIX VERB …`, generated from what the running host's
//! faculties declare in `GET /faculties`: `butler PREFIX --help` (or `-h`, or
//! `butler help PREFIX`) lists the prefix's verbs with their descriptions, and
//! `butler PREFIX VERB --help` the verb's arguments from its input schema (type, whether
//! required, description). The CLI itself knows no verb.

use std::fmt::Write as _;

use anyhow::{Context, bail};
use butler_host::pipeline::router::command_of;
use serde_json::Value;

use super::client::Client;

/// What the host serves under one prefix: the faculty behind it and its declaration.
pub struct Served {
    prefix: String,
    faculty: Value,
    /// The other prefixes routed to the same faculty (their commands are not this prefix's).
    siblings: Vec<String>,
}

/// Finds the faculty serving `prefix` on the running host.
///
/// # Errors
/// No host runs (said with how to start one), or `prefix` is served by no faculty.
pub fn served(client: &Client, prefix: &str) -> anyhow::Result<Served> {
    let listing = client.get("/faculties")?;
    let Some(faculty_id) = listing["routes"][prefix].as_str() else {
        let served: Vec<&str> = listing["routes"].as_object().into_iter().flatten().map(|(p, _)| p.as_str()).collect();
        bail!(
            "`{prefix}` is neither a butler command (see `butler --help`) nor an action prefix the host serves ({})",
            if served.is_empty() { "none yet".to_owned() } else { served.join(", ") }
        );
    };
    let siblings = listing["routes"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(other, faculty)| *faculty == faculty_id && other.as_str() != prefix)
        .map(|(other, _)| other.clone())
        .collect();
    let faculty = listing["faculties"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["id"] == faculty_id)
        .cloned()
        .unwrap_or_else(|| serde_json::json!({"id": faculty_id}));
    Ok(Served { prefix: prefix.to_owned(), faculty, siblings })
}

impl Served {
    fn faculty_id(&self) -> &str {
        self.faculty["id"].as_str().unwrap_or_default()
    }

    /// The prefix's verbs and their commands' declarations, in the faculty's order.
    fn verbs(&self) -> Vec<(String, &Value)> {
        let faculty = self.faculty_id();
        self.faculty["commands"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|command| {
                let id = command["id"].as_str()?;
                let verb = if self.prefix == faculty {
                    // A command `<sibling>-verb` belongs to the sibling prefix.
                    (!self.siblings.iter().any(|s| id.starts_with(&format!("{s}-")))).then(|| id.to_owned())?
                } else {
                    id.strip_prefix(&format!("{}-", self.prefix))?.to_owned()
                };
                Some((verb, command))
            })
            .collect()
    }

    /// The declaration of `verb`, if the prefix has it.
    pub fn command(&self, verb: &str) -> Option<&Value> {
        let wanted = command_of(&self.prefix, verb, self.faculty_id());
        self.faculty["commands"].as_array().into_iter().flatten().find(|c| c["id"] == wanted.as_str())
    }

    /// `butler PREFIX --help`: the verbs, each with its description.
    #[must_use]
    pub fn prefix_help(&self) -> String {
        let prefix = &self.prefix;
        let mut out = String::new();
        let _ = writeln!(out, "butler {prefix}: actions of the faculty `{}`", self.faculty_id());
        if let Some(about) = self.faculty["description"].as_str() {
            let _ = writeln!(out, "{about}");
        }
        let _ = writeln!(out, "\nUsage: butler {prefix} VERB [ID] [--name VALUE]… [--args JSON] [--workdir DIR]\n");
        let verbs = self.verbs();
        if verbs.is_empty() {
            let _ = writeln!(out, "Verbs: none declared (the faculty lists no command under `{prefix}`)");
        } else {
            let _ = writeln!(out, "Verbs:");
            let width = verbs.iter().map(|(verb, _)| verb.len()).max().unwrap_or(0);
            for (verb, command) in &verbs {
                let owner = if command["owner"] == true { " [owner]" } else { "" };
                let about = command["description"].as_str().unwrap_or("(no description)");
                let _ = writeln!(out, "  {verb:<width$}  {about}{owner}");
            }
        }
        let _ = writeln!(out, "\n`butler {prefix} VERB --help` lists a verb's arguments.");
        out
    }

    /// `butler PREFIX VERB --help`: the verb's arguments from its input schema.
    ///
    /// # Errors
    /// The prefix has no such verb (the error lists the verbs it has).
    pub fn verb_help(&self, verb: &str) -> anyhow::Result<String> {
        let prefix = &self.prefix;
        let Some(command) = self.command(verb) else {
            let verbs: Vec<String> = self.verbs().into_iter().map(|(v, _)| v).collect();
            bail!(
                "`{prefix}` has no verb `{verb}` (it has: {}); `butler {prefix} --help` describes them",
                if verbs.is_empty() { "none".to_owned() } else { verbs.join(", ") }
            );
        };
        let mut out = String::new();
        let _ =
            writeln!(out, "butler {prefix} {verb}: {}", command["description"].as_str().unwrap_or("(no description)"));
        if command["owner"] == true {
            let _ = writeln!(out, "Only the owner may run it (the CLI is the owner).");
        }
        if command["operator"] == true {
            let _ = writeln!(out, "Only the operator may run it (the CLI over the host's local socket is).");
        }
        let _ = writeln!(out, "\nUsage: butler {prefix} {verb} [ID] [--name VALUE]… [--args JSON] [--workdir DIR]\n");
        let input = &command["input"];
        let required: Vec<&str> =
            input["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let carried: Vec<&str> =
            command["confirm"]["carry"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let declared_args: Vec<&Value> = command["args"].as_array().into_iter().flatten().collect();
        match input["properties"].as_object() {
            Some(properties) if properties.is_empty() => {
                let _ = writeln!(out, "Arguments: none.");
            }
            None if !declared_args.is_empty() => {
                let _ = writeln!(out, "Arguments (as its manifest declares them):");
                for arg in declared_args {
                    let name = arg["name"].as_str().unwrap_or("?");
                    let need = if arg["required"] == true { "required" } else { "optional" };
                    let how = match (arg["positional"] == true, arg["stdin"] == true) {
                        (_, true) => " (from standard input)",
                        (true, false) => " (positional)",
                        _ => "",
                    };
                    let pattern = arg["pattern"].as_str().map(|p| format!(", matching {p}")).unwrap_or_default();
                    let _ = writeln!(out, "  --{}  {need}{how}{pattern}", kebab_case(name));
                }
            }
            None => {
                let _ = writeln!(
                    out,
                    "Arguments: the faculty declares no input schema for it; its description above names them."
                );
            }
            Some(properties) => {
                let _ = writeln!(out, "Arguments (from its input schema):");
                let rows: Vec<[String; 4]> = properties
                    .iter()
                    .map(|(name, schema)| {
                        let need = if required.contains(&name.as_str()) { "required" } else { "optional" };
                        let mut about = schema["description"].as_str().unwrap_or_default().to_owned();
                        let mut note = |text: String| {
                            if !about.is_empty() {
                                about.push_str("; ");
                            }
                            about.push_str(&text);
                        };
                        if name == "id" {
                            note("may be given bare: the one value without a --name".to_owned());
                        }
                        if carried.contains(&name.as_str()) {
                            let step = command["confirm"]["action"].as_str().unwrap_or("its confirm step");
                            note(format!("filled in from `{}`", step.replace('.', " ")));
                        } else if name == "idempotencyKey" {
                            note("the CLI makes a fresh one".to_owned());
                        }
                        [format!("--{}", kebab_case(name)), type_of(schema), need.to_owned(), about]
                    })
                    .collect();
                let widths: [usize; 3] =
                    std::array::from_fn(|i| rows.iter().map(|row| row[i].chars().count()).max().unwrap_or(0));
                for [flag, kind, need, about] in &rows {
                    let line = format!(
                        "  {flag:<w0$}  {kind:<w1$}  {need:<w2$}  {about}",
                        w0 = widths[0],
                        w1 = widths[1],
                        w2 = widths[2]
                    );
                    let _ = writeln!(out, "{}", line.trim_end());
                }
            }
        }
        if let Some(step) = command["confirm"]["action"].as_str() {
            let _ = writeln!(out, "\n`{}` runs first (the CLI runs it for you).", step.replace('.', " "));
        }
        Ok(out)
    }
}

/// A schema's type in a few words: `string`, `integer`, `array of string`, `one of a|b`.
fn type_of(schema: &Value) -> String {
    if let Some(choices) = schema["enum"].as_array() {
        let names: Vec<String> =
            choices.iter().map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned)).collect();
        return format!("one of {}", names.join("|"));
    }
    let base = match &schema["type"] {
        Value::String(kind) => kind.clone(),
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ => "any".to_owned(),
    };
    match schema["items"]["type"].as_str() {
        Some(item) if base.contains("array") => base.replace("array", &format!("array of {item}")),
        _ => base,
    }
}

/// `contentHash` → `content-hash`: the flag `parse_words` turns back into the name.
fn kebab_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Where help is asked for in an action's words: `PREFIX` without a verb, `PREFIX --help`,
/// or `PREFIX VERB … --help` in a flag's place (a `--name -h` pair's `-h` is a value).
#[derive(Debug, PartialEq, Eq)]
pub enum Asked<'a> {
    /// `butler PREFIX` with no verb, or `butler PREFIX --help`.
    Prefix(&'a str),
    /// `butler PREFIX VERB --help`.
    Verb(&'a str, &'a str),
}

/// Whether the words ask for help, and about what.
#[must_use]
pub fn asked(words: &[String]) -> Option<Asked<'_>> {
    let is_help = |word: &str| word == "--help" || word == "-h";
    match words {
        [prefix] => Some(Asked::Prefix(prefix)),
        // No verb (`butler review --workdir DIR`) is a question about the prefix too.
        [prefix, verb, ..] if is_help(verb) || verb.starts_with('-') => Some(Asked::Prefix(prefix)),
        [prefix, verb, rest @ ..] => {
            let mut rest = rest.iter();
            while let Some(word) = rest.next() {
                if is_help(word) {
                    return Some(Asked::Verb(prefix, verb));
                }
                if word.starts_with("--") {
                    rest.next();
                }
            }
            None
        }
        [] => None,
    }
}

/// Prints the help asked for, from the running host's declarations.
///
/// # Errors
/// No host runs for the instance (said with how to start one), or nothing is served under
/// the prefix or verb.
pub fn print(client: anyhow::Result<Client>, asked: &Asked<'_>) -> anyhow::Result<()> {
    let client = client.context(
        "the verbs and their arguments come from the faculties of the running host, and it could not be reached",
    )?;
    let text = match asked {
        Asked::Prefix(prefix) => served(&client, prefix)?.prefix_help(),
        Asked::Verb(prefix, verb) => served(&client, prefix)?.verb_help(verb)?,
    };
    out!("{text}");
    Ok(())
}

/// A command line split at spaces, as a shell would pass `text` (for tests of the parsers).
#[cfg(test)]
pub(super) fn words(text: &str) -> Vec<String> {
    text.split(' ').map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn help_is_found_in_a_flags_place_only() {
        assert_eq!(asked(&words("review")), Some(Asked::Prefix("review")));
        assert_eq!(asked(&words("review --help")), Some(Asked::Prefix("review")));
        assert_eq!(asked(&words("review -h")), Some(Asked::Prefix("review")));
        assert_eq!(asked(&words("review --workdir /w")), Some(Asked::Prefix("review")));
        assert_eq!(asked(&words("review list --help")), Some(Asked::Verb("review", "list")));
        assert_eq!(asked(&words("review approve c-1 -h")), Some(Asked::Verb("review", "approve")));
        assert_eq!(asked(&words("notes add --text -h")), None, "a flag's value");
        assert_eq!(asked(&words("review list")), None);
    }

    fn served() -> Served {
        let faculty = json!({"id": "cards", "description": "Cards.", "commands": [
            {"id": "search", "description": "Search cards.", "input": {"type": "object", "properties": {}}},
            {"id": "review-list", "description": "The candidates.", "input": {"properties": {}}},
            {"id": "review-approve", "description": "Approve one.", "owner": true,
             "input": {"properties": {
                "id": {"type": "string", "description": "The candidate."},
                "contentHash": {"type": "string"},
                "limit": {"type": ["integer", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "kind": {"enum": ["a", "b"]}},
              "required": ["id", "contentHash"]},
             "confirm": {"action": "review.prepare", "with": ["id"], "carry": ["contentHash"]}}]});
        Served { prefix: "review".into(), faculty, siblings: vec!["cards".into()] }
    }

    #[test]
    fn a_prefix_lists_its_own_verbs_with_their_descriptions() {
        let help = served().prefix_help();
        assert!(help.contains("  list     The candidates."), "{help}");
        assert!(help.contains("  approve  Approve one. [owner]"), "{help}");
        assert!(!help.contains("search"), "another prefix's command: {help}");
        let cards = Served { prefix: "cards".into(), siblings: vec!["review".into()], ..served() };
        let help = cards.prefix_help();
        assert!(help.contains("search") && !help.contains("review-list"), "{help}");
    }

    #[test]
    fn a_verb_lists_its_arguments_from_the_schema() {
        let help = served().verb_help("approve").expect("declared");
        let line = |flag: &str| help.lines().find(|l| l.trim_start().starts_with(flag)).unwrap_or_default().to_owned();
        assert!(line("--id ").contains("string") && line("--id ").contains("required"), "{help}");
        assert!(line("--id ").contains("The candidate."), "{help}");
        assert!(line("--content-hash").contains("filled in from `review prepare`"), "{help}");
        assert!(line("--limit").contains("integer or null") && line("--limit").contains("optional"), "{help}");
        assert!(line("--tags").contains("array of string"), "{help}");
        assert!(line("--kind").contains("one of a|b"), "{help}");
        let error = served().verb_help("nope").expect_err("undeclared").to_string();
        assert!(error.contains("no verb `nope`") && error.contains("list, approve"), "{error}");
    }
}
