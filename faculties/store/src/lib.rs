//! The owner's card store, as the built-in pipeline faculties see it under `/self`.
//!
//! One library compiled into each faculty, so the four agree on the format:
//! - [`card`] — approved cards: Markdown with front matter, one file each;
//! - [`verdict`] — validity verdicts, bound to a card's revision and content hash;
//! - [`candidate`] — candidate cards awaiting the owner;
//! - [`journal`] — observations in the spool;
//! - [`check`] — the two deterministic check types;
//! - [`index`], [`tokens`] — the card index and its token file, caches of the card files;
//! - [`time`], [`ids`], [`args`] — small shared helpers.
//!
//! Every write is atomic (temp file + rename): a crash never leaves a torn file.

pub mod args;
pub mod candidate;
pub mod card;
pub mod check;
pub mod frontmatter;
pub mod ids;
pub mod index;
pub mod journal;
pub mod time;
pub mod tokens;
pub mod verdict;

use std::path::{Path, PathBuf};

pub use butler_faculty_kit::{Failure, Value};

/// Where the store is mounted in the faculty's sandbox.
pub const SELF: &str = "/self";

/// `/self/<relative>`.
#[must_use]
pub fn path(relative: &str) -> PathBuf {
    Path::new(SELF).join(relative)
}

/// Writes `bytes` atomically, creating the parent folder when needed.
///
/// # Errors
/// `io_error` naming the path.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Failure::io(parent, &e))?;
    }
    butler_faculty_kit::fs::write_atomic(path, bytes)
}

/// Reads a JSON file; `Ok(None)` when it does not exist.
///
/// # Errors
/// `io_error`, or `store_corrupt` when the file is not the expected JSON.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, Failure> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| Failure::new("store_corrupt", format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Failure::io(path, &e)),
    }
}

/// Writes a JSON file atomically.
///
/// # Errors
/// `io_error`.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), Failure> {
    let bytes = serde_json::to_vec_pretty(value).map_err(Failure::from)?;
    write(path, &bytes)
}

/// The JSON files in a folder (sorted by name); a missing folder is empty.
///
/// # Errors
/// `io_error`.
pub fn json_files(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    files_with_extension(dir, "json")
}

/// The regular files of a folder with this extension, sorted by name; a missing folder has
/// none.
///
/// # Errors
/// `io_error`.
pub fn files_with_extension(dir: &Path, extension: &str) -> Result<Vec<PathBuf>, Failure> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Failure::io(dir, &e)),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == extension) && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}
