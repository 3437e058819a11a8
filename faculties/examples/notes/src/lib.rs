//! Example faculty: short notes in the faculty's own `/data` directory.
//!
//! Shows the whole surface a faculty author uses: a self-describing manifest with
//! declared arguments (positional, named, stdin), a `write` and a `read` command, both
//! offered to the hub's MCP clients as tools (`notes__add`, `notes__list`), a
//! `list`-shaped report, typed failures, atomic writes and the host log.

use std::path::Path;

use butler_faculty_kit::{Args, Faculty, Failure, Outcome, faculty, fs, host, json};

const NOTES: &str = "/data/notes.json";

struct Notes;

fn load() -> Result<Vec<butler_faculty_kit::Value>, Failure> {
    match std::fs::read(NOTES) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Failure::io(Path::new(NOTES), &e)),
    }
}

use butler_faculty_kit::serde_json;

impl Faculty for Notes {
    fn describe() -> butler_faculty_kit::Value {
        json!({
            "schemaVersion": 1,
            "kind": "faculty",
            "id": "notes",
            "name": "Notes",
            "description": "Short notes kept in the faculty's own data directory.",
            "commands": [
                {"id": "add", "description": "Add a note (text on stdin).", "exec": ["self"], "effect": "write",
                 "args": [{"name": "tag", "pattern": "[a-z0-9-]{1,32}"},
                          {"name": "text", "pattern": "(?s).{1,2000}", "required": true, "stdin": true}],
                 "mcp": {"tool": "add", "description": "Keep a short note for later, with an optional tag."}},
                {"id": "list", "description": "List notes, optionally by tag.", "exec": ["self"], "effect": "read",
                 "args": [{"name": "tag", "pattern": "[a-z0-9-]{1,32}", "positional": true}],
                 "mcp": {"tool": "list"}}
            ],
            "reports": [{"id": "recent", "name": "Recent notes", "exec": ["self"], "shape": "list"}]
        })
    }

    fn invoke(command: &str, args: Args, stdin: Option<String>) -> Outcome {
        match command {
            "add" => {
                let text = stdin.ok_or_else(|| Failure::invalid_args("the note text comes on stdin"))?;
                let mut notes = load()?;
                let note = json!({"at": host::now_ms(), "tag": args.get("tag"), "text": text});
                notes.push(note.clone());
                fs::write_atomic(Path::new(NOTES), serde_json::to_string(&notes)?.as_bytes())?;
                host::info(&format!("added note {}", notes.len()));
                Ok(json!({"added": note, "count": notes.len()}))
            }
            "list" => {
                let notes = load()?;
                let tag = args.positional(0);
                let notes: Vec<_> = notes.into_iter().filter(|n| tag.is_none_or(|t| n["tag"] == t)).collect();
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
