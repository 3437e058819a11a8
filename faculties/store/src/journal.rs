//! The journal spool: observations appended to `journal/spool/<day>.jsonl`, one
//! JSON object per line.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Failure;

/// Observation types.
pub const TYPES: &[&str] = &["note", "decision", "fact", "milestone", "error", "session"];

/// One observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// Id.
    pub id: String,
    /// When it was recorded (RFC 3339).
    pub at: String,
    /// Who reported it (`[a-z0-9-]+`).
    pub source: String,
    /// One of [`TYPES`].
    #[serde(rename = "type")]
    pub kind: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// What happened.
    pub text: String,
    /// Where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<String>,
}

impl Observation {
    /// Checks the observation rules.
    ///
    /// # Errors
    /// `invalid_observation` naming the field.
    pub fn validate(&self) -> Result<(), Failure> {
        let bad = |message: String| Err(Failure::new("invalid_observation", message));
        if self.source.is_empty()
            || self.source.len() > 64
            || !self.source.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return bad("source must match [a-z0-9-]+ (at most 64 characters)".to_owned());
        }
        if !TYPES.contains(&self.kind.as_str()) {
            return bad(format!("type must be one of {}", TYPES.join(", ")));
        }
        let chars = self.text.chars().count();
        if !(1..=2000).contains(&chars) || self.text.trim().is_empty() {
            return bad("text must be 1 to 2000 characters".to_owned());
        }
        if self.tags.len() > 32 {
            return bad("at most 32 tags".to_owned());
        }
        if let Some(tag) = self
            .tags
            .iter()
            .find(|t| t.is_empty() || t.len() > 64 || t.contains(',') || t.chars().any(char::is_control))
        {
            return bad(format!("tag {tag:?} must be 1 to 64 characters without commas or control characters"));
        }
        if self.r#ref.as_ref().is_some_and(|r| r.chars().count() > 500) {
            return bad("ref must be at most 500 characters".to_owned());
        }
        Ok(())
    }

    /// Appends it to today's spool file (one `write` of a whole line).
    ///
    /// # Errors
    /// `io_error`.
    pub fn append(&self) -> Result<(), Failure> {
        self.append_to("journal/spool")
    }

    /// Appends it to its day's file, `<folder>/<day>.jsonl` in the store (one `write` of a
    /// whole line, synced).
    ///
    /// # Errors
    /// `io_error`.
    pub fn append_to(&self, folder: &str) -> Result<(), Failure> {
        let dir = super::path(folder);
        std::fs::create_dir_all(&dir).map_err(|e| Failure::io(&dir, &e))?;
        let day = day_of(&self.at).ok_or_else(|| {
            Failure::new(
                "invalid_args",
                format!("`at` is not an RFC 3339 time: `{}`", butler_faculty_kit::clip(&self.at, 40)),
            )
        })?;
        let file = dir.join(format!("{day}.jsonl"));
        let mut line = serde_json::to_vec(self).map_err(Failure::from)?;
        line.push(b'\n');
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .and_then(|mut f| f.write_all(&line).and_then(|()| f.sync_data()))
            .map_err(|e| Failure::io(&file, &e))
    }

    /// Every observation in the spool, oldest first. Torn or foreign lines are skipped.
    ///
    /// # Errors
    /// `io_error`.
    pub fn all() -> Result<Vec<Self>, Failure> {
        read_jsonl_dir(&super::path("journal/spool"))
    }
}

/// The `*.jsonl` files of `dir`, sorted by name (day files sort by date); a missing
/// folder has none.
///
/// # Errors
/// `io_error`.
pub fn jsonl_files(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    super::files_with_extension(dir, "jsonl")
}

/// Every observation-shaped line of the `*.jsonl` files of `dir` (the spool, or the
/// session turns), oldest file first. Torn or foreign lines, and lines without an id, are
/// skipped.
///
/// # Errors
/// `io_error`.
pub fn read_jsonl_dir(dir: &Path) -> Result<Vec<Observation>, Failure> {
    let mut all = Vec::new();
    for file in jsonl_files(dir)? {
        let text = std::fs::read_to_string(&file).map_err(|e| Failure::io(&file, &e))?;
        all.extend(
            text.lines().filter_map(|line| serde_json::from_str::<Observation>(line).ok()).filter(|o| !o.id.is_empty()),
        );
    }
    Ok(all)
}

/// The day (`YYYY-MM-DD`) the RFC 3339 time `at` starts with, if it starts with one: the
/// name of the file its line goes to, so nothing else may reach a path.
#[must_use]
pub fn day_of(at: &str) -> Option<&str> {
    let day = at.get(..10)?;
    let shaped = day.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    shaped.then_some(day)
}
