//! `cards.inspect`: everything the owner's card library shows of one card — the card as
//! it is on file (archived or held ones too), each check with what it says now, why a held
//! card is held, its evidence, its revision history and the candidates still waiting on it.
//!
//! Owner only: evidence quotes the owner's journal, which agents never read.

use butler_faculty_kit::{Failure, Outcome, Value, clip, json};
use butler_store::candidate::{Candidate, Status as CandidateStatus};
use butler_store::card::{Card, Status as CardStatus};
use butler_store::index::Mark;
use butler_store::verdict::Verdict;
use serde::Deserialize;

use crate::{consume, list, pipeline};

/// `cards.inspect` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InspectArgs {
    id: String,
}

/// `cards.inspect`: `{card, suspended?, checks, evidence, history, pending}`.
///
/// # Errors
/// `not_found`; store errors.
pub fn inspect(args: &InspectArgs) -> Outcome {
    let card = Card::load(&args.id)?.ok_or_else(|| Failure::not_found(format!("no card `{}`", clip(&args.id, 80))))?;
    if card.status == CardStatus::Active && consume::needs_refresh(&card)? {
        pipeline::refresh_validity(&[card.id.as_str()]);
    }
    let held = Verdict::load(&card.id)?.filter(|v| Mark::of(v, card.revision, &card.content_hash).holds());
    let candidates = Candidate::list()?;
    let mut inspected = json!({
        "card": shown(&card),
        "checks": pipeline::checks_now(&card.checks),
        "evidence": evidence(&card, &candidates),
        "history": history(&card.id, &candidates),
        "pending": pending(&card.id, &candidates),
    });
    if let (Some(fields), Some(verdict)) = (inspected.as_object_mut(), held) {
        fields.insert("suspended".to_owned(), list::held_because(&verdict));
    }
    Ok(inspected)
}

/// The card's file, all of it but its checks and evidence (listed on their own).
fn shown(card: &Card) -> Value {
    with_content(
        card,
        [
            ("id", json!(card.id)),
            ("status", json!(card.status)),
            ("revision", json!(card.revision)),
            ("contentHash", json!(card.content_hash)),
            ("scope", json!(card.scope)),
            ("createdAt", json!(card.created_at)),
            ("updatedAt", json!(card.updated_at)),
        ],
    )
}

/// What `card` says — `{kind, title, summary, body, appliesTo, tags, related}` — and `more`.
pub(crate) fn with_content<const N: usize>(card: &Card, more: [(&str, Value); N]) -> Value {
    let mut shown = serde_json::to_value(&card.content).unwrap_or_else(|_| json!({}));
    if let Some(fields) = shown.as_object_mut() {
        fields.extend(more.into_iter().map(|(key, value)| (key.to_owned(), value)));
    }
    shown
}

/// The card's evidence, each item as the candidate that cited it kept it (`{id}` alone when
/// no candidate on file did).
fn evidence(card: &Card, candidates: &[Candidate]) -> Vec<Value> {
    let kept = |id: &str| {
        candidates
            .iter()
            .flat_map(|c| c.evidence_items.iter())
            .find(|item| item.get("id").and_then(Value::as_str) == Some(id))
            .cloned()
    };
    card.evidence.iter().map(|id| kept(id).unwrap_or_else(|| json!({ "id": id }))).collect()
}

/// Every approved change of the card, oldest first: the candidate, what it did, the
/// revision it wrote, who wrote it and when it was decided.
fn history(card_id: &str, candidates: &[Candidate]) -> Vec<Value> {
    let mut changes: Vec<(u64, Value)> = candidates
        .iter()
        .filter(|c| c.status == CandidateStatus::Approved)
        .filter_map(|c| {
            let applied = c.applied.as_ref().filter(|a| a.card_id == card_id)?;
            Some((
                applied.revision,
                json!({
                    "candidate": c.id,
                    "op": c.op,
                    "revision": applied.revision,
                    "contentHash": applied.content_hash,
                    "title": c.card.title,
                    "byOwner": c.by_owner,
                    "createdAt": c.created_at,
                    "decidedAt": c.decided_at,
                }),
            ))
        })
        .collect();
    changes.sort_by_key(|(revision, _)| *revision);
    changes.into_iter().map(|(_, change)| change).collect()
}

/// Candidates awaiting the owner that would change the card.
fn pending(card_id: &str, candidates: &[Candidate]) -> Vec<Value> {
    candidates
        .iter()
        .filter(|c| matches!(c.status, CandidateStatus::Pending | CandidateStatus::Applying))
        .filter(|c| c.target.as_deref() == Some(card_id))
        .map(|c| json!({ "id": c.id, "op": c.op, "status": c.status, "createdAt": c.created_at }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        assert!(butler_store::args::parse_text::<InspectArgs>(r#"{"id":"a"}"#).is_ok());
        assert!(butler_store::args::parse_text::<InspectArgs>(r#"{"id":"a","x":1}"#).is_err());
        assert!(butler_store::args::parse_text::<InspectArgs>("{}").is_err());
    }
}
