//! Idempotency records: the first result of a decision, kept under
//! `/data/idempotency/<sha256(key)>.json`, so that a replay returns it unchanged and never
//! applies twice — even after its token expired.

use std::path::{Path, PathBuf};

use butler_faculty_kit::{Failure, Value};
use butler_store::{ids, read_json, write_json};
use serde::{Deserialize, Serialize};

/// Where the records live.
const DIR: &str = "/data/idempotency";

/// The longest key accepted: room for a UUID with a prefix, short enough for a log line.
pub const MAX_KEY: usize = 128;

/// What a decision was: replays must be the same decision on the same candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// `review.approve`.
    Approve,
    /// `review.reject`.
    Reject,
    /// `cards.edit`.
    Edit,
    /// `cards.archive`.
    Archive,
}

/// One record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Approve or reject.
    pub decision: Decision,
    /// The candidate decided (for an owner's edit or archive, the card, its revision and the
    /// content asked for).
    pub candidate: String,
    /// The answer the first call gave.
    pub result: Value,
    /// When (RFC 3339).
    pub at: String,
}

/// Checks a key: 1 to [`MAX_KEY`] characters of `[A-Za-z0-9_.:-]`.
///
/// # Errors
/// `invalid_args`.
pub fn validate_key(key: &str) -> Result<(), Failure> {
    let ok = !key.is_empty()
        && key.len() <= MAX_KEY
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Failure::invalid_args(format!("idempotencyKey must be 1 to {MAX_KEY} characters of [A-Za-z0-9_.:-]")))
    }
}

fn path_of(key: &str) -> PathBuf {
    Path::new(DIR).join(format!("{}.json", ids::sha256_hex(key.as_bytes())))
}

/// The first result recorded under `key`, if any. A key first used for another decision or
/// another candidate is refused rather than answered with a foreign result.
///
/// # Errors
/// `invalid_args` for a key reused for a different request; `io_error` / `store_corrupt`.
pub fn replay(key: &str, decision: Decision, candidate: &str) -> Result<Option<Value>, Failure> {
    match read_json::<Record>(&path_of(key))? {
        None => Ok(None),
        Some(record) if record.decision == decision && record.candidate == candidate => Ok(Some(record.result)),
        Some(_) => Err(Failure::invalid_args("idempotencyKey was already used for a different request")),
    }
}

/// Records the result of the first call under `key`.
///
/// # Errors
/// `io_error`.
pub fn record(key: &str, decision: Decision, candidate: &str, result: &Value, at: String) -> Result<(), Failure> {
    write_json(&path_of(key), &Record { decision, candidate: candidate.to_owned(), result: result.clone(), at })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for good in ["a", "approve:cand-1.2_x", &"k".repeat(MAX_KEY), "0-0"] {
            assert!(validate_key(good).is_ok(), "{good}");
        }
        for bad in ["", "with space", "slash/no", &"k".repeat(MAX_KEY + 1), "ünï", "a\n"] {
            assert_eq!(validate_key(bad).map_err(|f| f.code), Err("invalid_args".to_owned()), "{bad}");
        }
    }
}
