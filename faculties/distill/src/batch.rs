//! Batches, their leases and the covered set, kept in the faculty's own directory:
//! `/data/batches/<batchId>.json` and `/data/covered.json`.
//!
//! A lease is a secret handed out once, in `claim`'s response; the batch file keeps only its
//! SHA-256, so neither the file nor any other response can give it away.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use butler_faculty_kit::Failure;
use butler_store::{card, ids, json_files, read_json, write_json};
use serde::{Deserialize, Serialize};

/// Where the faculty's own files live in its sandbox.
pub const DATA: &str = "/data";

/// An ended batch (completed, failed or expired) is deleted this long after it ended: long
/// enough to answer a late `complete` with `lease_expired` rather than `not_found`, short
/// enough that the folder does not grow without bound.
pub const PRUNE_AFTER_MS: u64 = 7 * 24 * 3600 * 1000;

/// Whether an item is an observation from the journal spool or a session turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    /// From `journal/spool/*.jsonl`.
    Observation,
    /// From `sessions/*.jsonl`.
    Session,
}

/// One item of a batch, as `claim` and `evidence` return it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// The observation's or turn's id.
    pub id: String,
    /// Observation or session turn.
    pub kind: ItemKind,
    /// When it was recorded.
    pub at: String,
    /// Who reported it.
    pub source: String,
    /// The observation type.
    #[serde(rename = "type")]
    pub kind_of: String,
    /// Tags, when it has any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// What happened.
    pub text: String,
    /// Where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<String>,
}

impl Item {
    /// The item for observation `o` of `kind`.
    #[must_use]
    pub fn from_observation(o: butler_store::journal::Observation, kind: ItemKind) -> Self {
        Self { id: o.id, kind, at: o.at, source: o.source, kind_of: o.kind, tags: o.tags, text: o.text, r#ref: o.r#ref }
    }
}

/// Where a batch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Leased: candidates may be submitted until it expires.
    Open,
    /// A step failed for a reason other than bad input: it cannot be completed, and its
    /// items are free to be claimed again at once.
    Failed,
    /// Completed: its items are covered and its lease no longer works.
    Completed,
    /// Released by the owner before it ended (its lease was lost): its items are free to
    /// be claimed again at once, and its lease no longer works.
    Released,
}

/// A leased batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Batch {
    /// Id (`batch-…`).
    pub batch_id: String,
    /// SHA-256 of the lease; the lease itself is never stored.
    pub lease_hash: String,
    /// Where it stands.
    pub status: Status,
    /// Claimed at.
    pub created_at: String,
    /// The lease ends at (RFC 3339).
    pub expires_at: String,
    /// The lease ends at (ms since the epoch).
    pub expires_ms: u64,
    /// The items leased.
    pub items: Vec<Item>,
    /// Candidates submitted in it, in order.
    #[serde(default)]
    pub candidates: Vec<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Why it produced no candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_reason: Option<String>,
    /// When it completed or failed (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
}

impl Batch {
    fn dir() -> PathBuf {
        Path::new(DATA).join("batches")
    }

    fn path_of(id: &str) -> PathBuf {
        Self::dir().join(format!("{id}.json"))
    }

    /// Batch `id`.
    ///
    /// # Errors
    /// `not_found` when there is no such batch; `io_error` / `store_corrupt`.
    pub fn load(id: &str) -> Result<Self, Failure> {
        let missing = || Failure::not_found(format!("no batch `{}`", clip(id, 80)));
        if !card::valid_id(id) {
            return Err(missing());
        }
        read_json(&Self::path_of(id))?.ok_or_else(missing)
    }

    /// Every batch on file. Files that do not parse are skipped with a warning.
    ///
    /// # Errors
    /// `io_error` reading the folder.
    pub fn all() -> Result<Vec<Self>, Failure> {
        let mut all = Vec::new();
        for path in json_files(&Self::dir())? {
            match read_json::<Self>(&path) {
                Ok(Some(batch)) => all.push(batch),
                Ok(None) => {}
                Err(f) => butler_faculty_kit::host::warn(&format!("skipping {}: {}", path.display(), f.message)),
            }
        }
        Ok(all)
    }

    /// Writes it.
    ///
    /// # Errors
    /// `io_error`.
    pub fn save(&self) -> Result<(), Failure> {
        write_json(&Self::path_of(&self.batch_id), self)
    }

    /// Deletes it (pruning).
    pub fn delete(&self) {
        let path = Self::path_of(&self.batch_id);
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            butler_faculty_kit::host::warn(&format!("could not prune {}: {e}", path.display()));
        }
    }

    /// Whether it still holds its items at `now_ms` (open and unexpired).
    #[must_use]
    pub fn holds(&self, now_ms: u64) -> bool {
        self.status == Status::Open && now_ms < self.expires_ms
    }

    /// When it ended: completion or failure, or its lease's expiry.
    #[must_use]
    pub fn ended_ms(&self) -> u64 {
        self.ended_ms.unwrap_or(self.expires_ms)
    }

    /// Checks `lease` at `now_ms`: the right lease, a batch not yet closed, not expired. A
    /// failed batch passes (callers that write refuse it with [`Batch::require_not_failed`]).
    ///
    /// # Errors
    /// `lease_invalid` for a wrong lease or a completed batch; `lease_expired`.
    pub fn authorize(&self, lease: &str, now_ms: u64) -> Result<(), Failure> {
        if !same(&ids::sha256_hex(lease.as_bytes()), &self.lease_hash) {
            return Err(Failure::new("lease_invalid", format!("the lease does not hold batch `{}`", self.batch_id)));
        }
        if matches!(self.status, Status::Completed | Status::Released) {
            let how = if self.status == Status::Completed { "completed" } else { "released" };
            return Err(Failure::new(
                "lease_invalid",
                format!("batch `{}` is {how}; its lease no longer works", self.batch_id),
            ));
        }
        if now_ms >= self.expires_ms {
            return Err(Failure::new(
                "lease_expired",
                format!("the lease of batch `{}` expired at {}; claim again", self.batch_id, self.expires_at),
            ));
        }
        Ok(())
    }

    /// Refuses a batch marked failed.
    ///
    /// # Errors
    /// `batch_failed` with the failure.
    pub fn require_not_failed(&self) -> Result<(), Failure> {
        if self.status == Status::Failed {
            return Err(Failure::new(
                "batch_failed",
                format!(
                    "batch `{}` failed ({}); it cannot be completed: claim again",
                    self.batch_id,
                    self.failure.as_deref().unwrap_or("a step failed")
                ),
            ));
        }
        Ok(())
    }

    /// The item `id` of this batch.
    #[must_use]
    pub fn item(&self, id: &str) -> Option<&Item> {
        self.items.iter().find(|i| i.id == id)
    }
}

/// Equal hex strings, compared without an early exit.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub use butler_faculty_kit::clip;

/// The ids of items already distilled.
pub struct Covered;

impl Covered {
    fn path() -> PathBuf {
        Path::new(DATA).join("covered.json")
    }

    /// The covered set.
    ///
    /// # Errors
    /// `io_error` / `store_corrupt`.
    pub fn load() -> Result<BTreeSet<String>, Failure> {
        Ok(read_json(&Self::path())?.unwrap_or_default())
    }

    /// Adds `ids` to the covered set.
    ///
    /// # Errors
    /// `io_error` / `store_corrupt`.
    pub fn add<'a>(ids: impl IntoIterator<Item = &'a str>) -> Result<(), Failure> {
        let mut covered = Self::load()?;
        let before = covered.len();
        covered.extend(ids.into_iter().map(str::to_owned));
        if covered.len() == before {
            return Ok(());
        }
        write_json(&Self::path(), &covered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(lease: &str) -> Batch {
        Batch {
            batch_id: "batch-1".into(),
            lease_hash: ids::sha256_hex(lease.as_bytes()),
            status: Status::Open,
            created_at: "2026-11-30T00:00:00.000Z".into(),
            expires_at: "2026-11-30T00:15:00.000Z".into(),
            expires_ms: 1000,
            items: vec![],
            candidates: vec![],
            failure: None,
            zero_reason: None,
            ended_ms: None,
        }
    }

    #[test]
    fn leases_are_checked_in_order() {
        let mut b = batch("secret");
        assert!(b.authorize("secret", 999).is_ok());
        assert_eq!(b.authorize("other", 10).map_err(|f| f.code), Err("lease_invalid".into()));
        assert_eq!(b.authorize("other", 5000).map_err(|f| f.code), Err("lease_invalid".into()));
        assert_eq!(b.authorize("secret", 1000).map_err(|f| f.code), Err("lease_expired".into()));
        b.status = Status::Failed;
        assert!(b.authorize("secret", 10).is_ok());
        assert_eq!(b.require_not_failed().map_err(|f| f.code), Err("batch_failed".into()));
        b.status = Status::Completed;
        assert_eq!(b.authorize("secret", 10).map_err(|f| f.code), Err("lease_invalid".into()));
    }

    #[test]
    fn the_lease_is_never_serialized() {
        let b = batch("secret-lease-value");
        let text = serde_json::to_string(&b).unwrap_or_default();
        assert!(!text.contains("secret-lease-value"));
        assert!(text.contains("leaseHash"));
    }

    #[test]
    fn holding_ends_with_expiry_failure_or_completion() {
        let mut b = batch("x");
        assert!(b.holds(999));
        assert!(!b.holds(1000));
        b.status = Status::Failed;
        assert!(!b.holds(10));
    }

    #[test]
    fn items_serialize_to_the_wire_shape() {
        let item = Item {
            id: "obs-1".into(),
            kind: ItemKind::Session,
            at: "2026-11-30T00:00:00.000Z".into(),
            source: "claude".into(),
            kind_of: "session".into(),
            tags: vec![],
            text: "t".into(),
            r#ref: None,
        };
        let value = serde_json::to_value(&item).unwrap_or_default();
        assert_eq!(
            value,
            serde_json::json!({"id":"obs-1","kind":"session","at":"2026-11-30T00:00:00.000Z","source":"claude","type":"session","text":"t"})
        );
    }
}
