//! Example faculty: short notes in the faculty's own `/data` directory.
//!
//! Shows the whole surface a faculty author uses: a self-describing manifest whose
//! commands declare their JSON `input` schema (the host checks every call against it
//! before the faculty runs), a `write` and a `read` command, both offered to the hub's
//! MCP clients as tools (`notes__add`, `notes__list`), a `list`-shaped report, typed
//! failures with details, atomic writes and the host log.

use std::path::Path;

use butler_faculty_kit::{Faculty, Failure, Kind, Outcome, Value, faculty, fs, host, input, json};
use serde::Deserialize;

const NOTES: &str = "/data/notes.json";
/// The most notes kept: past it, `add` fails with kind `too-large`.
const MAX_NOTES: usize = 1000;

struct Notes;

fn load() -> Result<Vec<Value>, Failure> {
    match std::fs::read(NOTES) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Failure::io(Path::new(NOTES), &e)),
    }
}

use butler_faculty_kit::serde_json;

/// `add {text, tag?}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Add {
    text: String,
    tag: Option<String>,
}

/// `list {tag?}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct List {
    tag: Option<String>,
}

impl Faculty for Notes {
    fn describe() -> Value {
        let tag = json!({"type": "string", "pattern": "^[a-z0-9-]{1,32}$"});
        json!({
            "schemaVersion": 1,
            "kind": "faculty",
            "id": "notes",
            "name": "Notes",
            "description": "Short notes kept in the faculty's own data directory.",
            "commands": [
                {"id": "add", "description": "Add a note.", "exec": ["self"], "effect": "write",
                 "input": {"type": "object", "additionalProperties": false, "required": ["text"],
                           "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 2000}, "tag": tag}},
                 "mcp": {"tool": "add", "description": "Keep a short note for later, with an optional tag."}},
                {"id": "list", "description": "List notes, optionally by tag.", "exec": ["self"], "effect": "read",
                 "input": {"type": "object", "additionalProperties": false, "properties": {"tag": tag}},
                 "mcp": {"tool": "list"}}
            ],
            "reports": [{"id": "recent", "name": "Recent notes", "exec": ["self"], "shape": "list"}]
        })
    }

    fn invoke(command: &str, given: Value) -> Outcome {
        match command {
            "add" => {
                let Add { text, tag } = input(given)?;
                let mut notes = load()?;
                if notes.len() >= MAX_NOTES {
                    return Err(Failure::of_kind(Kind::TooLarge, "notes_full", "no room for another note")
                        .with_details(json!({"limit": MAX_NOTES})));
                }
                let note = json!({"at": host::now_ms(), "tag": tag, "text": text});
                notes.push(note.clone());
                fs::write_atomic(Path::new(NOTES), serde_json::to_string(&notes)?.as_bytes())?;
                host::info(&format!("added note {}", notes.len()));
                Ok(json!({"added": note, "count": notes.len()}))
            }
            "list" => {
                let List { tag } = input(given)?;
                let notes: Vec<_> =
                    load()?.into_iter().filter(|n| tag.as_ref().is_none_or(|t| n["tag"] == t.as_str())).collect();
                Ok(json!({"notes": notes}))
            }
            other => Err(Failure::unknown_command(other)),
        }
    }

    fn report(id: &str) -> Outcome {
        match id {
            "recent" => {
                let items: Vec<_> = load()?
                    .iter()
                    .rev()
                    .take(10)
                    .map(|n| json!({"title": n["text"].as_str().unwrap_or_default().chars().take(60).collect::<String>(), "at": n["at"]}))
                    .collect();
                Ok(json!({"items": items}))
            }
            other => Err(Failure::unknown_report(other)),
        }
    }
}

faculty!(Notes);
