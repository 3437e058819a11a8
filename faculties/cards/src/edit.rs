//! The owner's own changes to a card: `cards.edit` (a new revision the owner wrote) and
//! `cards.archive`.
//!
//! Neither is a second write path: each writes an owner-authored candidate (`byOwner`, no
//! batch, no evidence) and approves it through the review's own steps, so the card gets the
//! same revision and hash rules, the same crash safety and the same history as an approved
//! proposal. The request names the card's current `revision` and `contentHash` (what
//! `cards.inspect` shows); a card changed since is 409 `stale_card`, never overwritten.
//!
//! A retry is safe: the candidate's id comes from the `idempotencyKey`, so a request cut off
//! after its candidate was recorded finishes that candidate rather than writing a second
//! one, and a request that finished returns its first answer.

use butler_faculty_kit::{Failure, Outcome, clip, json};
use butler_store::candidate::{Applied, Candidate, Op, Status as CandidateStatus};
use butler_store::card::{Card, Content, Status as CardStatus};
use butler_store::{ids, time};
use serde::Deserialize;

use crate::idempotency::{self, Decision};
use crate::{pipeline, review};

/// `cards.edit` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EditArgs {
    id: String,
    revision: u64,
    content_hash: String,
    card: Content,
    idempotency_key: String,
}

/// `cards.archive` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ArchiveArgs {
    id: String,
    revision: u64,
    content_hash: String,
    idempotency_key: String,
}

/// One owner's change, whichever command asked for it.
struct Change<'a> {
    card_id: &'a str,
    revision: u64,
    content_hash: &'a str,
    /// The new content; `None` archives the card as it is.
    content: Option<&'a Content>,
    key: &'a str,
}

impl Change<'_> {
    fn op(&self) -> Op {
        if self.content.is_some() { Op::Revise } else { Op::Archive }
    }

    fn decision(&self) -> Decision {
        if self.content.is_some() { Decision::Edit } else { Decision::Archive }
    }

    /// What the idempotency record names: the card, the revision and the content asked for,
    /// so that one key sent again with other content is refused, never answered.
    fn subject(&self) -> String {
        let content = self.content.map_or_else(|| self.content_hash.to_owned(), Content::hash);
        format!("{}@{}:{content}", self.card_id, self.revision)
    }

    /// Whether `candidate` is the one this request (or an earlier try of it) wrote.
    fn wrote(&self, candidate: &Candidate) -> bool {
        candidate.by_owner
            && candidate.op == self.op()
            && candidate.target.as_deref() == Some(self.card_id)
            && candidate.base_revision == Some(self.revision)
            && self.content.is_none_or(|c| c.hash() == candidate.content_hash)
    }
}

/// `cards.edit`: `{cardId, revision, contentHash}` of the revision written.
///
/// # Errors
/// `invalid_args`, `not_found`, `stale_card`; store errors.
pub fn edit(args: &EditArgs) -> Outcome {
    apply(&Change {
        card_id: &args.id,
        revision: args.revision,
        content_hash: &args.content_hash,
        content: Some(&args.card),
        key: &args.idempotency_key,
    })
}

/// `cards.archive`: `{cardId, revision, contentHash}` of the archived revision.
///
/// # Errors
/// `invalid_args`, `not_found`, `stale_card`; store errors.
pub fn archive(args: &ArchiveArgs) -> Outcome {
    apply(&Change {
        card_id: &args.id,
        revision: args.revision,
        content_hash: &args.content_hash,
        content: None,
        key: &args.idempotency_key,
    })
}

fn stale(message: impl Into<String>) -> Failure {
    Failure::new("stale_card", message)
}

/// The owner candidate's id for `key`: the same for every try of one request.
fn candidate_id(key: &str) -> String {
    let hash = ids::sha256_hex(key.as_bytes());
    format!("own-{}", &hash[..24])
}

fn apply(change: &Change) -> Outcome {
    idempotency::validate_key(change.key)?;
    if let Some(first) = idempotency::replay(change.key, change.decision(), &change.subject())? {
        return Ok(first);
    }
    let id = candidate_id(change.key);
    let mut candidate = match Candidate::load(&id)? {
        Some(earlier) if !change.wrote(&earlier) => {
            return Err(Failure::invalid_args("idempotencyKey was already used for a different request"));
        }
        Some(earlier) => earlier,
        None => record(change, id)?,
    };
    let applied = match (candidate.status, candidate.applied.clone()) {
        (CandidateStatus::Approved, Some(applied)) => return finish(change, &applied),
        (CandidateStatus::Applying, Some(applied)) => applied,
        _ => {
            return Err(stale(format!(
                "the owner's change `{}` was decided in the review queue: send the change again with a new idempotencyKey",
                candidate.id
            )));
        }
    };
    let applied = review::write_card(&mut candidate, applied)?;
    pipeline::refresh_validity(&[applied.card_id.as_str()]);
    candidate.status = CandidateStatus::Approved;
    candidate.decided_at = Some(time::now());
    candidate.save()?;
    finish(change, &applied)
}

/// Checks the request against the card as it is and records the owner candidate that
/// approving writes (status `applying`, with what it will write).
fn record(change: &Change, id: String) -> Result<Candidate, Failure> {
    let card = Card::load(change.card_id)?
        .ok_or_else(|| Failure::not_found(format!("no card `{}`", clip(change.card_id, 80))))?;
    if card.status != CardStatus::Active {
        return Err(stale(format!("card `{}` is archived; only active cards change", card.id)));
    }
    if card.revision != change.revision || card.content_hash != change.content_hash {
        let short = |hash: &str| hash.chars().take(12).collect::<String>();
        return Err(stale(format!(
            "the request names revision {} ({}…) but card `{}` is at revision {} ({}…): reload it and edit the \
             current revision",
            change.revision,
            short(change.content_hash),
            card.id,
            card.revision,
            short(&card.content_hash)
        )));
    }
    let content = match change.content {
        Some(content) => {
            if content.kind != card.content.kind {
                return Err(Failure::invalid_args(format!(
                    "card `{}` is a {} card: card.kind must stay `{}` (to change kinds, archive it and create another)",
                    card.id,
                    card.content.kind.as_str(),
                    card.content.kind.as_str()
                )));
            }
            content.validate()?;
            if content.hash() == card.content_hash {
                return Err(Failure::invalid_args("the edit changes nothing"));
            }
            content.clone()
        }
        None => card.content.clone(),
    };
    let content_hash = content.hash();
    let candidate = Candidate {
        id,
        op: change.op(),
        target: Some(card.id.clone()),
        base_revision: Some(card.revision),
        revision: 1,
        applied: Some(Applied {
            card_id: card.id.clone(),
            revision: card.revision.saturating_add(1),
            content_hash: content_hash.clone(),
        }),
        content_hash,
        card: content,
        evidence: Vec::new(),
        evidence_items: Vec::new(),
        checks: Vec::new(),
        conflict: None,
        status: CandidateStatus::Applying,
        batch_id: String::new(),
        created_at: time::now(),
        decided_at: None,
        reason: None,
        by_owner: true,
    };
    candidate.save()?;
    Ok(candidate)
}

/// The answer, recorded under the key, and the context rebuilt.
fn finish(change: &Change, applied: &Applied) -> Outcome {
    let result =
        json!({ "cardId": applied.card_id, "revision": applied.revision, "contentHash": applied.content_hash });
    idempotency::record(change.key, change.decision(), &change.subject(), &result, time::now())?;
    pipeline::rebuild_context();
    Ok(result)
}

#[cfg(test)]
mod tests {
    use butler_store::card::Kind;

    use super::*;

    #[test]
    fn arguments_are_checked() {
        let card = r#"{"kind":"rule","title":"t","summary":"s","body":"b"}"#;
        let edit = format!(r#"{{"id":"c","revision":1,"contentHash":"h","card":{card},"idempotencyKey":"k"}}"#);
        assert!(butler_store::args::parse_text::<EditArgs>(&edit).is_ok());
        let extra = format!(r#"{{"id":"c","revision":1,"contentHash":"h","card":{card},"idempotencyKey":"k","x":1}}"#);
        assert_eq!(
            butler_store::args::parse_text::<EditArgs>(&extra).map(|_| ()).map_err(|f| f.code),
            Err("invalid_args".into())
        );
        let archive = r#"{"id":"c","revision":1,"contentHash":"h","idempotencyKey":"k"}"#;
        assert!(butler_store::args::parse_text::<ArchiveArgs>(archive).is_ok());
        let no_key = r#"{"id":"c","revision":1,"contentHash":"h"}"#;
        assert!(butler_store::args::parse_text::<ArchiveArgs>(no_key).is_err());
    }

    #[test]
    fn a_key_names_one_request() {
        assert_eq!(candidate_id("k"), candidate_id("k"));
        assert_ne!(candidate_id("k"), candidate_id("k2"));
        assert!(butler_store::card::valid_id(&candidate_id("k")));

        let content = Content {
            kind: Kind::Rule,
            title: "t".into(),
            summary: "s".into(),
            body: "b".into(),
            applies_to: String::new(),
            tags: vec![],
            related: vec![],
        };
        let change = Change { card_id: "c", revision: 3, content_hash: "h", content: Some(&content), key: "k" };
        let mut written = Candidate {
            id: candidate_id("k"),
            op: Op::Revise,
            target: Some("c".into()),
            base_revision: Some(3),
            revision: 1,
            content_hash: content.hash(),
            card: content.clone(),
            evidence: vec![],
            evidence_items: vec![],
            checks: vec![],
            conflict: None,
            status: CandidateStatus::Applying,
            batch_id: String::new(),
            created_at: String::new(),
            decided_at: None,
            reason: None,
            applied: None,
            by_owner: true,
        };
        assert!(change.wrote(&written));
        written.base_revision = Some(2);
        assert!(!change.wrote(&written), "another revision");
        written.base_revision = Some(3);
        written.by_owner = false;
        assert!(!change.wrote(&written), "not the owner's");
        written.by_owner = true;
        let archive = Change { content: None, ..change };
        assert!(!archive.wrote(&written), "an edit is not an archive");
    }
}
