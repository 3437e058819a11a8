//! Review tokens: short-lived, single-use proofs that the owner prepared a decision
//! on one candidate. Only a token's SHA-256 is stored, in `/data/tokens/<hash>.json`, so
//! reading the faculty's directory does not reveal a usable token.

use std::path::{Path, PathBuf};

use butler_faculty_kit::Failure;
use butler_store::{ids, read_json, write_json};
use serde::{Deserialize, Serialize};

/// Where token records live.
const DIR: &str = "/data/tokens";

/// How long a token stays valid: long enough for the owner to read a diff and decide,
/// short enough that a leaked token is soon useless.
pub const TTL_MS: u64 = 10 * 60 * 1000;

/// What is stored for a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The candidate the token was minted for.
    pub candidate: String,
    /// Expiry, milliseconds since the epoch.
    pub expires_at_ms: u64,
    /// SHA-256 of the idempotency key of the decision that started with this token, set
    /// before the decision touches the store: a crash after the candidate was decided is
    /// finished only by a retry of that same decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_by: Option<String>,
}

/// A minted token: the secret (returned once to the caller) and its expiry.
pub struct Minted {
    /// The secret.
    pub token: String,
    /// Expiry, milliseconds since the epoch.
    pub expires_at_ms: u64,
}

fn path_of(token: &str) -> PathBuf {
    Path::new(DIR).join(format!("{}.json", ids::sha256_hex(token.as_bytes())))
}

/// Whether `token` is spelled like one we mint (64 lowercase hex characters).
#[must_use]
pub fn well_formed(token: &str) -> bool {
    token.len() == 64 && token.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Mints a token for `candidate`, valid for [`TTL_MS`] from `now_ms`, and drops expired
/// records on the way.
///
/// # Errors
/// `io_error`.
pub fn mint(candidate: &str, now_ms: u64) -> Result<Minted, Failure> {
    sweep(now_ms);
    let token = ids::token(candidate);
    let expires_at_ms = now_ms.saturating_add(TTL_MS);
    write_json(&path_of(&token), &Record { candidate: candidate.to_owned(), expires_at_ms, claimed_by: None })?;
    Ok(Minted { token, expires_at_ms })
}

/// Checks that `token` is unexpired and was minted for `candidate`; returns its record.
///
/// # Errors
/// `token_invalid` otherwise; `io_error` / `store_corrupt` reading the record.
pub fn verify(token: &str, candidate: &str, now_ms: u64) -> Result<Record, Failure> {
    let invalid = || Failure::new("token_invalid", "the review token is unknown, expired or for another candidate");
    if !well_formed(token) {
        return Err(invalid());
    }
    match read_json::<Record>(&path_of(token))? {
        Some(record) if record.candidate == candidate && now_ms < record.expires_at_ms => Ok(record),
        _ => Err(invalid()),
    }
}

/// Records on `token` (already verified as `record`) that the decision with idempotency
/// key `key` is using it.
///
/// # Errors
/// `io_error`.
pub fn claim(token: &str, record: &Record, key: &str) -> Result<(), Failure> {
    let claimed_by = Some(ids::sha256_hex(key.as_bytes()));
    if record.claimed_by == claimed_by {
        return Ok(());
    }
    write_json(&path_of(token), &Record { claimed_by, ..record.clone() })
}

/// Whether `record` was claimed by the decision with idempotency key `key`.
#[must_use]
pub fn claimed_by(record: &Record, key: &str) -> bool {
    record.claimed_by.as_deref() == Some(ids::sha256_hex(key.as_bytes()).as_str())
}

/// Consumes `token` (single use). A token already gone is fine.
///
/// # Errors
/// `io_error`.
pub fn consume(token: &str) -> Result<(), Failure> {
    if !well_formed(token) {
        return Ok(());
    }
    let path = path_of(token);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Failure::io(&path, &e)),
        _ => Ok(()),
    }
}

/// Removes expired token records; problems are ignored (a stale record only takes space).
fn sweep(now_ms: u64) {
    let Ok(files) = butler_store::json_files(Path::new(DIR)) else { return };
    for file in files {
        let expired = match read_json::<Record>(&file) {
            Ok(Some(record)) => record.expires_at_ms <= now_ms,
            Ok(None) => false,
            Err(_) => true,
        };
        if expired {
            let _ = std::fs::remove_file(&file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_spelling() {
        assert!(well_formed(&"a1".repeat(32)));
        assert!(!well_formed(&"A1".repeat(32)));
        assert!(!well_formed("abc"));
        assert!(!well_formed(&format!("{}/", "a".repeat(63))));
    }
}
