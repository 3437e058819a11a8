//! The owner's review: `review.list`, `review.prepare`, `review.approve`,
//! `review.reject`.
//!
//! Approval is written so that a crash at any point is finished by the next attempt and a
//! replay never applies twice:
//! 1. a known `idempotencyKey` returns the first answer, whatever the token's state;
//! 2. the token must be valid for this candidate;
//! 3. the candidate must be undecided and match the request's `revision`/`contentHash`;
//! 4. the token is claimed by the request's key (in its record under `/data`), and what
//!    will be written (`applied`: card id, revision, hash) is recorded on the candidate
//!    (status `applying`) before the card is touched;
//! 5. the card file is written, unless it already holds `applied`;
//! 6. a conflict the candidate raised is released and the card's validity refreshed;
//! 7. the candidate is marked `approved`, the answer recorded under the key, the token
//!    consumed, the context rebuilt.
//!
//! A crash after step 7 marked the candidate approved is finished by a retry with the same
//! token and key (the claim in step 4 tells it from a second, different approval, which is
//! `stale_candidate`). The host serializes write commands on a store, so these steps never
//! interleave.

use butler_faculty_kit::{Failure, Outcome, Value, clip, json};
use butler_store::candidate::{Applied, Candidate, Op, Status as CandidateStatus};
use butler_store::card::{self, Card, Kind, Status as CardStatus};
use butler_store::time;
use butler_store::verdict::Verdict;
use serde::Deserialize;

use crate::idempotency::{self, Decision};
use crate::{pipeline, tokens};

/// Longest rejection reason, in characters.
pub const MAX_REASON: usize = 500;

/// `review.list` takes nothing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {}

/// `review.prepare` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PrepareArgs {
    id: String,
}

/// `review.approve` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApproveArgs {
    id: String,
    revision: u64,
    content_hash: String,
    token: String,
    idempotency_key: String,
}

/// `review.reject` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RejectArgs {
    id: String,
    revision: u64,
    content_hash: String,
    token: String,
    idempotency_key: String,
    #[serde(default)]
    reason: Option<String>,
}

fn not_found(id: &str) -> Failure {
    Failure::not_found(format!("no candidate `{}`", clip(id, 80)))
}

fn stale(message: impl Into<String>) -> Failure {
    Failure::new("stale_candidate", message)
}

fn decided(candidate: &Candidate) -> Failure {
    let status = match candidate.status {
        CandidateStatus::Approved => "approved",
        CandidateStatus::Rejected => "rejected",
        CandidateStatus::Pending | CandidateStatus::Applying => "undecided",
    };
    stale(format!("candidate `{}` was already {status}", candidate.id))
}

/// The request names another revision or content than the candidate has now.
fn mismatch(candidate: &Candidate, revision: u64, content_hash: &str) -> Failure {
    let short = |hash: &str| hash.chars().take(12).collect::<String>();
    stale(format!(
        "the request names revision {revision} ({}…) but candidate `{}` is at revision {} ({}…)",
        short(content_hash),
        candidate.id,
        candidate.revision,
        short(&candidate.content_hash)
    ))
}

// ---------------------------------------------------------------------------------------
// review.list

/// `review.list`: every candidate, pending first, with its evidence, the current result
/// of its checks and, for a revision or an archive, the target's current content.
///
/// # Errors
/// Store errors.
pub fn list(_args: &ListArgs) -> Outcome {
    let candidates: Vec<Value> = Candidate::list()?.iter().map(listing).collect();
    Ok(json!({ "candidates": candidates }))
}

fn listing(c: &Candidate) -> Value {
    let checks = pipeline::checks_now(&c.checks);
    let evidence: Vec<Value> = if c.evidence_items.is_empty() {
        c.evidence.iter().map(|id| json!({ "id": id })).collect()
    } else {
        c.evidence_items.clone()
    };
    let mut entry = json!({
        "id": c.id,
        "op": c.op,
        "revision": c.revision,
        "contentHash": c.content_hash,
        "card": c.card,
        "evidence": evidence,
        "checks": checks,
        "status": c.status,
        "createdAt": c.created_at,
    });
    if c.by_owner {
        entry["byOwner"] = json!(true);
    }
    let Some(fields) = entry.as_object_mut() else { return entry };
    if let Some(target) = &c.target {
        fields.insert("target".to_owned(), json!(target));
    }
    if let Some(base) = c.base_revision {
        fields.insert("baseRevision".to_owned(), json!(base));
    }
    if let Some(conflict) = &c.conflict {
        fields.insert("conflict".to_owned(), json!({ "reason": conflict }));
    }
    if let Some(reason) = &c.reason {
        fields.insert("reason".to_owned(), json!(reason));
    }
    if let Some(at) = &c.decided_at {
        fields.insert("decidedAt".to_owned(), json!(at));
    }
    if matches!(c.op, Op::Revise | Op::Archive) {
        fields.insert("current".to_owned(), current(c.target.as_deref()));
    }
    entry
}

/// The target's current content, for a diff; `null` when it is gone or unreadable.
fn current(target: Option<&str>) -> Value {
    match target.map(Card::load) {
        Some(Ok(Some(card))) => {
            crate::inspect::with_content(&card, [("revision", json!(card.revision)), ("status", json!(card.status))])
        }
        _ => Value::Null,
    }
}

// ---------------------------------------------------------------------------------------
// review.prepare

/// `review.prepare`: a short-lived token for an undecided candidate.
///
/// # Errors
/// `not_found`, `stale_candidate`; store errors.
pub fn prepare(args: &PrepareArgs) -> Outcome {
    let candidate = Candidate::load(&args.id)?.ok_or_else(|| not_found(&args.id))?;
    if matches!(candidate.status, CandidateStatus::Approved | CandidateStatus::Rejected) {
        return Err(decided(&candidate));
    }
    let minted = tokens::mint(&candidate.id, time::now_ms())?;
    Ok(json!({
        "token": minted.token,
        "expiresAt": time::rfc3339(minted.expires_at_ms),
        "id": candidate.id,
        "revision": candidate.revision,
        "contentHash": candidate.content_hash,
    }))
}

// ---------------------------------------------------------------------------------------
// review.approve

fn approval(applied: &Applied) -> Value {
    json!({ "cardId": applied.card_id, "revision": applied.revision, "contentHash": applied.content_hash })
}

/// `review.approve`.
///
/// # Errors
/// `invalid_args`, `token_invalid`, `not_found`, `stale_candidate`; store errors.
pub fn approve(args: &ApproveArgs) -> Outcome {
    idempotency::validate_key(&args.idempotency_key)?;
    if let Some(first) = idempotency::replay(&args.idempotency_key, Decision::Approve, &args.id)? {
        return Ok(first);
    }
    let token = tokens::verify(&args.token, &args.id, time::now_ms())?;
    let mut candidate = Candidate::load(&args.id)?.ok_or_else(|| not_found(&args.id))?;
    let same = candidate.revision == args.revision && candidate.content_hash == args.content_hash;
    let applied = match (candidate.status, candidate.applied.clone()) {
        // Approved by this very request, which crashed before its answer was recorded
        // (the token is claimed by its key and not yet consumed): finish the bookkeeping.
        (CandidateStatus::Approved, Some(applied)) if same && tokens::claimed_by(&token, &args.idempotency_key) => {
            return finish_approval(args, &applied);
        }
        (CandidateStatus::Approved | CandidateStatus::Rejected, _) => return Err(decided(&candidate)),
        _ if !same => return Err(mismatch(&candidate, args.revision, &args.content_hash)),
        // A crash during an earlier approval: finish what it recorded.
        (CandidateStatus::Applying, Some(applied)) => {
            tokens::claim(&args.token, &token, &args.idempotency_key)?;
            applied
        }
        _ => {
            tokens::claim(&args.token, &token, &args.idempotency_key)?;
            let applied = plan(&candidate)?;
            candidate.status = CandidateStatus::Applying;
            candidate.applied = Some(applied.clone());
            candidate.save()?;
            applied
        }
    };
    let applied = write_card(&mut candidate, applied)?;
    if let Some(target) = candidate.target.as_deref() {
        release_conflict(target, &candidate.id)?;
    }
    pipeline::refresh_validity(&[applied.card_id.as_str()]);
    candidate.status = CandidateStatus::Approved;
    candidate.decided_at = Some(time::now());
    candidate.save()?;
    finish_approval(args, &applied)
}

/// Step 7 after the candidate is marked approved: record, consume, rebuild.
fn finish_approval(args: &ApproveArgs, applied: &Applied) -> Outcome {
    let result = approval(applied);
    idempotency::record(&args.idempotency_key, Decision::Approve, &args.id, &result, time::now())?;
    tokens::consume(&args.token)?;
    pipeline::rebuild_context();
    Ok(result)
}

/// Step 4: what approving `candidate` writes.
fn plan(candidate: &Candidate) -> Result<Applied, Failure> {
    let content = &candidate.card;
    match candidate.op {
        Op::Create if content.kind == Kind::Profile => {
            let revision = Card::load("profile")?.map_or(1, |p| p.revision.saturating_add(1));
            Ok(Applied { card_id: "profile".to_owned(), revision, content_hash: content.hash() })
        }
        Op::Create => {
            Ok(Applied { card_id: card::fresh_id(&content.title), revision: 1, content_hash: content.hash() })
        }
        Op::Revise => {
            let target = target_of(candidate)?;
            if (target.content.kind == Kind::Profile) != (content.kind == Kind::Profile) {
                return Err(Failure::new(
                    "invalid_candidate",
                    "a revision cannot turn a card into the profile or the profile into a card",
                ));
            }
            Ok(Applied {
                card_id: target.id,
                revision: target.revision.saturating_add(1),
                content_hash: content.hash(),
            })
        }
        Op::Archive => {
            let target = target_of(candidate)?;
            Ok(Applied {
                card_id: target.id,
                revision: target.revision.saturating_add(1),
                content_hash: target.content.hash(),
            })
        }
    }
}

/// The card a revision or an archive applies to, as long as it is still at the revision the
/// candidate was written against.
fn target_of(candidate: &Candidate) -> Result<Card, Failure> {
    let id = candidate.target.as_deref().unwrap_or_default();
    let target =
        Card::load(id)?.ok_or_else(|| stale(format!("the target card `{}` no longer exists", clip(id, 80))))?;
    moved_on(candidate, &target).map_or(Ok(target), |message| Err(stale(message)))
}

/// Why `candidate` no longer applies to `target`: the target was revised since it was written.
fn moved_on(candidate: &Candidate, target: &Card) -> Option<String> {
    let base = candidate.base_revision?;
    (target.revision != base).then(|| {
        format!(
            "candidate `{}` was written against revision {base} of card `{}`, which is now at revision {}: \
             reject it and submit one against the current card",
            candidate.id,
            clip(&target.id, 80),
            target.revision
        )
    })
}

/// Step 5: writes the card `applied` names, unless the file already holds it. Returns what
/// was written (for an archive whose target was edited by hand since step 4, the hash of
/// the content actually archived, recorded on the candidate first).
pub(crate) fn write_card(candidate: &mut Candidate, mut applied: Applied) -> Result<Applied, Failure> {
    let id = applied.card_id.clone();
    let existing = Card::load(&id)?;
    let kind = match candidate.op {
        Op::Archive => existing.as_ref().map_or(candidate.card.kind, |c| c.content.kind),
        Op::Create | Op::Revise => candidate.card.kind,
    };
    if !holds(kind, &id, &applied)? {
        let base = match candidate.op {
            Op::Create => existing,
            Op::Revise | Op::Archive => {
                Some(existing.ok_or_else(|| stale(format!("the target card `{id}` no longer exists")))?)
            }
        };
        let card = build(candidate, &applied, base, &time::now());
        if card.content_hash != applied.content_hash {
            applied.content_hash.clone_from(&card.content_hash);
            candidate.applied = Some(applied.clone());
            candidate.save()?;
        }
        card.save()?;
    }
    remove_other_kinds(kind, &id)?;
    Ok(applied)
}

/// Whether the file of card `id` of `kind` already holds `applied`'s revision and hash.
fn holds(kind: Kind, id: &str, applied: &Applied) -> Result<bool, Failure> {
    let path = Card::path_of(kind, id);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Card::parse(&text, id, kind)
            .is_ok_and(|c| c.revision == applied.revision && c.content_hash == applied.content_hash)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Failure::io(&path, &e)),
    }
}

/// The card approving `candidate` produces over `base` (the card as it is, if any).
#[must_use]
pub fn build(candidate: &Candidate, applied: &Applied, base: Option<Card>, now: &str) -> Card {
    let (content, status) = match (candidate.op, &base) {
        (Op::Archive, Some(base)) => (base.content.clone(), CardStatus::Archived),
        (Op::Archive, None) => (candidate.card.clone(), CardStatus::Archived),
        (Op::Revise, Some(base)) => (candidate.card.clone(), base.status),
        (Op::Create | Op::Revise, _) => (candidate.card.clone(), CardStatus::Active),
    };
    let content_hash = content.hash();
    let base_checks = match candidate.op {
        Op::Create => Vec::new(),
        Op::Revise | Op::Archive => base.as_ref().map(|b| b.checks.clone()).unwrap_or_default(),
    };
    let checks = if candidate.checks.is_empty() { base_checks } else { candidate.checks.clone() };
    let mut evidence = base.as_ref().map(|b| b.evidence.clone()).unwrap_or_default();
    for item in &candidate.evidence {
        if !evidence.contains(item) {
            evidence.push(item.clone());
        }
    }
    let created_at = base.as_ref().map(|b| b.created_at.clone()).filter(|c| !c.is_empty());
    let (scope, extra) = base.map_or_else(|| ("local".to_owned(), serde_json::Map::new()), |b| (b.scope, b.extra));
    Card {
        id: applied.card_id.clone(),
        content,
        status,
        revision: applied.revision,
        content_hash,
        scope,
        checks,
        evidence,
        created_at: created_at.unwrap_or_else(|| now.to_owned()),
        updated_at: now.to_owned(),
        extra,
    }
}

/// Ids are unique across kinds: when a revision moved a card between `rules/` and
/// `knowledge/`, the file of the old kind goes.
fn remove_other_kinds(kind: Kind, id: &str) -> Result<(), Failure> {
    if kind == Kind::Profile {
        return Ok(());
    }
    for other in [Kind::Rule, Kind::Knowledge].into_iter().filter(|k| *k != kind) {
        let path = Card::path_of(other, id);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Failure::io(&path, &e)),
            _ => {}
        }
    }
    Ok(())
}

/// Releases the conflict on `target` when `candidate` raised it. Returns whether it did.
fn release_conflict(target: &str, candidate: &str) -> Result<bool, Failure> {
    if !card::valid_id(target) {
        return Ok(false);
    }
    match Verdict::load(target)? {
        Some(mut verdict) if verdict.conflict.as_ref().is_some_and(|c| c.candidate == candidate) => {
            verdict.conflict = None;
            verdict.save()?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

// ---------------------------------------------------------------------------------------
// review.reject

/// `review.reject`.
///
/// # Errors
/// `invalid_args`, `token_invalid`, `not_found`, `stale_candidate`; store errors.
pub fn reject(args: &RejectArgs) -> Outcome {
    idempotency::validate_key(&args.idempotency_key)?;
    let reason = args.reason.as_deref().map(str::trim).filter(|r| !r.is_empty());
    if reason.is_some_and(|r| r.chars().count() > MAX_REASON) {
        return Err(Failure::invalid_args(format!("reason must be at most {MAX_REASON} characters")));
    }
    if let Some(first) = idempotency::replay(&args.idempotency_key, Decision::Reject, &args.id)? {
        return Ok(first);
    }
    let token = tokens::verify(&args.token, &args.id, time::now_ms())?;
    let mut candidate = Candidate::load(&args.id)?.ok_or_else(|| not_found(&args.id))?;
    let same = candidate.revision == args.revision && candidate.content_hash == args.content_hash;
    match candidate.status {
        // Rejected by this very request, which crashed before its answer was recorded.
        CandidateStatus::Rejected if same && tokens::claimed_by(&token, &args.idempotency_key) => {}
        CandidateStatus::Approved | CandidateStatus::Rejected => return Err(decided(&candidate)),
        CandidateStatus::Applying => {
            return Err(stale(format!("candidate `{}` is being approved; approve it again to finish", candidate.id)));
        }
        CandidateStatus::Pending if !same => return Err(mismatch(&candidate, args.revision, &args.content_hash)),
        CandidateStatus::Pending => {
            tokens::claim(&args.token, &token, &args.idempotency_key)?;
            candidate.status = CandidateStatus::Rejected;
            candidate.reason = reason.map(str::to_owned);
            candidate.decided_at = Some(time::now());
            candidate.save()?;
        }
    }
    if let Some(target) = candidate.target.as_deref()
        && release_conflict(target, &candidate.id)?
    {
        pipeline::refresh_validity(&[target]);
    }
    let result = json!({ "id": candidate.id, "status": "rejected" });
    idempotency::record(&args.idempotency_key, Decision::Reject, &args.id, &result, time::now())?;
    tokens::consume(&args.token)?;
    pipeline::rebuild_context();
    Ok(result)
}

#[cfg(test)]
mod tests {
    use butler_store::card::Content;
    use butler_store::check::Check;

    use super::*;

    fn content(title: &str, kind: Kind) -> Content {
        Content {
            kind,
            title: title.into(),
            summary: "s".into(),
            body: "b".into(),
            applies_to: String::new(),
            tags: vec![],
            related: vec![],
        }
    }

    fn candidate(op: Op, card: Content, checks: Vec<Check>) -> Candidate {
        Candidate {
            id: "cand-1".into(),
            op,
            target: (op != Op::Create).then(|| "old".to_owned()),
            revision: 1,
            content_hash: card.hash(),
            card,
            evidence: vec!["obs-2".into(), "obs-1".into()],
            evidence_items: vec![],
            checks,
            conflict: None,
            status: CandidateStatus::Pending,
            batch_id: "batch".into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            decided_at: None,
            reason: None,
            applied: None,
            base_revision: None,
            by_owner: false,
        }
    }

    fn existing() -> Card {
        let content = content("Old", Kind::Rule);
        Card {
            id: "old".into(),
            content_hash: content.hash(),
            content,
            status: CardStatus::Active,
            revision: 4,
            scope: "shared".into(),
            checks: vec![Check::Path { path: "a.md".into() }],
            evidence: vec!["obs-1".into()],
            created_at: "2025-01-01T00:00:00.000Z".into(),
            updated_at: "2025-01-01T00:00:00.000Z".into(),
            extra: serde_json::Map::new(),
        }
    }

    #[test]
    fn a_target_revised_since_the_candidate_was_written_is_stale() {
        let mut c = candidate(Op::Revise, content("New", Kind::Rule), vec![]);
        assert_eq!(moved_on(&c, &existing()), None, "written before base revisions were recorded");
        c.base_revision = Some(4);
        assert_eq!(moved_on(&c, &existing()), None);
        c.base_revision = Some(3);
        assert!(moved_on(&c, &existing()).is_some_and(|m| m.contains("revision 3") && m.contains("revision 4")));
    }

    #[test]
    fn revise_keeps_checks_without_new_ones_and_appends_evidence() {
        let c = candidate(Op::Revise, content("New", Kind::Rule), vec![]);
        let applied = Applied { card_id: "old".into(), revision: 5, content_hash: c.card.hash() };
        let card = build(&c, &applied, Some(existing()), "now");
        assert_eq!(card.revision, 5);
        assert_eq!(card.content.title, "New");
        assert_eq!(card.content_hash, applied.content_hash);
        assert_eq!(card.checks, existing().checks);
        assert_eq!(card.evidence, ["obs-1", "obs-2"]);
        assert_eq!(card.created_at, "2025-01-01T00:00:00.000Z");
        assert_eq!(card.updated_at, "now");
        assert_eq!(card.scope, "shared");

        let moved = vec![Check::Quote { path: "b.md".into(), text: "x".into() }];
        let c = candidate(Op::Revise, content("New", Kind::Rule), moved.clone());
        assert_eq!(build(&c, &applied, Some(existing()), "now").checks, moved);
    }

    #[test]
    fn archive_keeps_content_and_create_starts_fresh() {
        let c = candidate(Op::Archive, content("Ignored", Kind::Rule), vec![]);
        let applied = Applied { card_id: "old".into(), revision: 5, content_hash: existing().content.hash() };
        let card = build(&c, &applied, Some(existing()), "now");
        assert_eq!(card.status, CardStatus::Archived);
        assert_eq!(card.content, existing().content);
        assert_eq!(card.content_hash, applied.content_hash);

        let c = candidate(Op::Create, content("Fresh", Kind::Knowledge), vec![]);
        let applied = Applied { card_id: "fresh".into(), revision: 1, content_hash: c.card.hash() };
        let card = build(&c, &applied, None, "now");
        assert_eq!((card.status, card.revision, card.created_at.as_str()), (CardStatus::Active, 1, "now"));
        assert_eq!(card.evidence, ["obs-2", "obs-1"]);
        assert_eq!(card.scope, "local");
    }

    #[test]
    fn decision_args_refuse_unknown_fields() {
        let text = r#"{"id":"c","revision":1,"contentHash":"h","token":"t","idempotencyKey":"k","lease":"x"}"#;
        let parsed = butler_store::args::parse_text::<ApproveArgs>(text);
        assert_eq!(parsed.map(|_| ()).map_err(|f| f.code), Err("invalid_args".into()));
        let text = r#"{"id":"c","revision":1,"contentHash":"h","token":"t","idempotencyKey":"k","reason":"r"}"#;
        assert!(butler_store::args::parse_text::<RejectArgs>(text).is_ok());
        assert!(butler_store::args::parse_text::<ListArgs>("{}").is_ok());
        assert!(butler_store::args::parse_text::<ListArgs>("").is_ok());
        assert!(butler_store::args::parse_text::<ListArgs>(r#"{"x":1}"#).is_err());
    }
}
