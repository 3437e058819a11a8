//! Candidate cards: `candidates/<id>.json`, proposed by the distilling agent and
//! decided by the owner.

use serde::{Deserialize, Serialize};

use super::card::Content;
use super::check::Check;
use super::{Failure, json_files, read_json, write_json};

/// What a candidate does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// A new card.
    Create,
    /// A new revision of `target`.
    Revise,
    /// Archive `target`.
    Archive,
}

/// Where a candidate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Awaiting the owner.
    Pending,
    /// Approval started: `applied` says what is being written (finished on retry after a
    /// crash).
    Applying,
    /// Approved.
    Approved,
    /// Rejected.
    Rejected,
}

/// The card an approval writes, recorded before it is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// Card id.
    pub card_id: String,
    /// Its new revision.
    pub revision: u64,
    /// Its new content hash.
    pub content_hash: String,
}

/// A candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    /// Id.
    pub id: String,
    /// Create, revise or archive.
    pub op: Op,
    /// The card revised or archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The target's revision when the candidate was written: approval refuses a candidate
    /// whose target has moved on since (it would undo the newer revision unseen). `None`
    /// for a create, and for candidates written before this was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_revision: Option<u64>,
    /// Changes only if the candidate is resubmitted.
    pub revision: u64,
    /// Hash of `card`.
    pub content_hash: String,
    /// The proposed content.
    pub card: Content,
    /// Evidence item ids.
    pub evidence: Vec<String>,
    /// The evidence items as they were when submitted (for the owner's review).
    #[serde(default)]
    pub evidence_items: Vec<serde_json::Value>,
    /// Checks that move onto the card on approval.
    #[serde(default)]
    pub checks: Vec<Check>,
    /// A conflict with the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<String>,
    /// Where it stands.
    pub status: Status,
    /// The batch it came from.
    pub batch_id: String,
    /// Submitted at.
    pub created_at: String,
    /// Decided at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// The owner's reason for a rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What approval writes (set when approval starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<Applied>,
    /// Written by the owner's own edit or archive of a card (`cards.edit`, `cards.archive`)
    /// rather than proposed by the distilling agent: it has no batch and no evidence, and is
    /// approved as it is written.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_owner: bool,
}

impl Candidate {
    fn path(id: &str) -> std::path::PathBuf {
        super::path(&format!("candidates/{id}.json"))
    }

    /// Candidate `id`.
    ///
    /// # Errors
    /// `io_error` / `store_corrupt`.
    pub fn load(id: &str) -> Result<Option<Self>, Failure> {
        if !super::card::valid_id(id) {
            return Ok(None);
        }
        read_json(&Self::path(id))
    }

    /// Every candidate, pending ones first, then newest first.
    ///
    /// # Errors
    /// `io_error` / `store_corrupt`.
    pub fn list() -> Result<Vec<Self>, Failure> {
        let mut all: Vec<Self> = json_files(&super::path("candidates"))?
            .iter()
            .filter_map(|p| read_json::<Self>(p).transpose())
            .collect::<Result<_, _>>()?;
        all.sort_by(|a, b| {
            let rank = |c: &Self| u8::from(!matches!(c.status, Status::Pending | Status::Applying));
            rank(a).cmp(&rank(b)).then_with(|| b.created_at.cmp(&a.created_at))
        });
        Ok(all)
    }

    /// Writes it.
    ///
    /// # Errors
    /// `io_error`.
    pub fn save(&self) -> Result<(), Failure> {
        write_json(&Self::path(&self.id), self)
    }
}
