//! Validity verdicts: `validity/<card id>.json`, kept apart from the card so that
//! checking never rewrites a card file. A verdict is bound to the revision and content
//! hash it was computed for; a verdict for another revision does not apply.

use serde::{Deserialize, Serialize};

use super::card::Card;
use super::{Failure, read_json, write_json};

/// Valid or suspended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Every check passes.
    Valid,
    /// A check fails (or a conflict holds the card).
    Suspended,
}

/// A pending revision or archive that holds the card suspended until the owner decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// The candidate that raised it.
    pub candidate: String,
    /// Why.
    pub reason: String,
}

/// One card's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// Card id.
    pub id: String,
    /// The revision it was computed for.
    pub revision: u64,
    /// The content hash it was computed for.
    pub content_hash: String,
    /// What the checks said.
    pub state: State,
    /// Why checks failed (empty when valid).
    #[serde(default)]
    pub reasons: Vec<String>,
    /// A conflict holding the card, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflict: Option<Conflict>,
    /// When the checks last changed their answer.
    pub checked_at: String,
}

impl Verdict {
    fn path(id: &str) -> std::path::PathBuf {
        super::path(&format!("validity/{id}.json"))
    }

    /// The stored verdict of card `id`, if any.
    ///
    /// # Errors
    /// `io_error` / `store_corrupt`.
    pub fn load(id: &str) -> Result<Option<Self>, Failure> {
        read_json(&Self::path(id))
    }

    /// Writes it.
    ///
    /// # Errors
    /// `io_error`.
    pub fn save(&self) -> Result<(), Failure> {
        write_json(&Self::path(&self.id), self)
    }

    /// Whether this verdict applies to `card` as it is now.
    #[must_use]
    pub fn applies_to(&self, card: &Card) -> bool {
        self.revision == card.revision && self.content_hash == card.content_hash
    }

    /// Whether it keeps the card out of consumers' reach.
    #[must_use]
    pub fn suspends(&self) -> bool {
        self.state == State::Suspended || self.conflict.is_some()
    }
}

/// Whether `card` is suspended: a conflict on it, or a failing verdict for its current
/// revision.
///
/// # Errors
/// `io_error` / `store_corrupt`.
pub fn is_suspended(card: &Card) -> Result<bool, Failure> {
    Ok(Verdict::load(&card.id)?.is_some_and(|v| v.conflict.is_some() || (v.applies_to(card) && v.suspends())))
}
