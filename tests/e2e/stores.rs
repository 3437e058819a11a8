//! What the crash and torture tests check in the files the host and its faculties wrote:
//! none torn (every `.json` parses, every `.jsonl` line parses and the last one is whole,
//! every `.md` is UTF-8 and not empty, every card's front matter is the `key: <JSON>`
//! lines the pipeline writes), and which temp files were left.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Every regular file below `dir` (none if it does not exist).
pub fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, out),
            Ok(t) if t.is_file() => out.push(path),
            _ => {}
        }
    }
}

/// Whether `path` is a card file: `rules/*.md`, `knowledge/*.md` or `profile.md`.
pub fn is_card_file(path: &Path) -> bool {
    let parent = path.parent().and_then(Path::file_name).and_then(|n| n.to_str());
    matches!(parent, Some("rules" | "knowledge")) || path.file_name().is_some_and(|n| n == "profile.md")
}

/// The front matter of a card as the pipeline writes it: a `---` line, `key: <JSON>`
/// lines, a `---` line.
pub fn front_matter(text: &str) -> Result<serde_json::Map<String, Value>, String> {
    let rest = text.strip_prefix("---\n").ok_or("no front matter")?;
    let (block, _body) = rest.split_once("\n---\n").ok_or("the front matter is not closed")?;
    let mut fields = serde_json::Map::new();
    for line in block.lines() {
        let (key, value) = line.split_once(": ").ok_or_else(|| format!("not `key: value`: {line}"))?;
        let value = serde_json::from_str(value).map_err(|e| format!("`{key}` is not JSON: {e}"))?;
        fields.insert(key.to_owned(), value);
    }
    Ok(fields)
}

/// What [`check`] found.
#[derive(Debug, Default)]
pub struct Checked {
    /// How many `.json`, `.jsonl` and `.md` files were read.
    pub files: usize,
    /// The temp files (`.<name>…`) left, relative to the instance.
    pub temps: Vec<String>,
    /// One line per torn or unreadable file.
    pub torn: Vec<String>,
}

/// Checks the files below each of `dirs` (relative to `workdir`), the compile cache and
/// the logs aside.
pub fn check(workdir: &Path, dirs: &[&str]) -> Checked {
    let mut files = Vec::new();
    for dir in dirs {
        walk(&workdir.join(dir), &mut files);
    }
    let mut checked = Checked::default();
    for path in &files {
        let shown = path.strip_prefix(workdir).unwrap_or(path).display().to_string();
        if shown.starts_with(".butler/cache/") || shown.starts_with(".butler/logs/") {
            continue;
        }
        if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')) {
            checked.temps.push(shown);
            continue;
        }
        let Some(extension) = path.extension().and_then(|e| e.to_str()) else { continue };
        if !["json", "jsonl", "md"].contains(&extension) {
            continue;
        }
        checked.files += 1;
        let text = match std::fs::read(path).map(String::from_utf8) {
            Ok(Ok(text)) => text,
            Ok(Err(_)) => {
                checked.torn.push(format!("torn file {shown}: not UTF-8"));
                continue;
            }
            Err(e) => {
                checked.torn.push(format!("unreadable file {shown}: {e}"));
                continue;
            }
        };
        let problem = match extension {
            "json" => serde_json::from_str::<Value>(&text).err().map(|e| format!("not JSON: {e}")),
            "jsonl" => text
                .lines()
                .position(|line| serde_json::from_str::<Value>(line).is_err())
                .map(|n| format!("line {} is not JSON", n + 1))
                .or_else(|| (!text.is_empty() && !text.ends_with('\n')).then(|| "its last line is cut".to_owned())),
            _ if text.trim().is_empty() => Some("empty".to_owned()),
            _ if is_card_file(path) => front_matter(&text).err(),
            _ => None,
        };
        if let Some(problem) = problem {
            checked.torn.push(format!("torn file {shown}: {problem}"));
        }
    }
    checked
}
