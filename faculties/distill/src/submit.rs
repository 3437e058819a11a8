//! `candidate.submit`: a complete candidate card, proposed within a lease.
//!
//! Everything the caller sent is validated before anything is written; checks must pass
//! now (asked of `validity.check`); then the candidate is written, a conflict suspends its
//! target, and the batch records the candidate. A step that fails after the lease was
//! accepted for a reason other than bad input marks the batch failed (a batch with a
//! failed step cannot be completed).

use butler_faculty_kit::{Failure, Outcome, Value, host, json};
use butler_store::candidate::{Candidate, Op, Status as CandidateStatus};
use butler_store::card::{self, Card, Content, Kind, Status as CardStatus};
use butler_store::check::Check;
use butler_store::verdict::{Conflict, State, Verdict};
use butler_store::{ids, time};
use serde::Deserialize;

use crate::batch::{Batch, Item, Status, clip};

/// At most this many checks per candidate: each is a file read at every refresh (the same
/// bound `validity` applies).
const MAX_CHECKS: usize = 64;

/// At most this many evidence refs (a batch holds at most 200 items).
const MAX_EVIDENCE: usize = 200;

/// A conflict reason is a sentence or two for the owner, not a document.
const MAX_REASON_CHARS: usize = 500;

/// Failure codes that mean the caller sent something wrong: they leave the batch open.
const BAD_INPUT: &[&str] =
    &["invalid_args", "invalid_check", "checks_failed", "not_found", "lease_invalid", "lease_expired", "batch_failed"];

/// The arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubmitArgs {
    batch_id: String,
    lease: String,
    op: Op,
    #[serde(default)]
    target: Option<String>,
    card: Content,
    evidence: Vec<String>,
    #[serde(default)]
    checks: Option<Vec<Value>>,
    #[serde(default)]
    conflict: Option<ConflictArgs>,
}

/// `conflict: {reason}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ConflictArgs {
    reason: String,
}

/// What a valid submission amounts to, before anything is written.
#[derive(Debug)]
struct Accepted {
    checks: Vec<Check>,
    evidence: Vec<String>,
    evidence_items: Vec<Item>,
    conflict: Option<String>,
}

/// Runs `candidate-submit`.
///
/// # Errors
/// `invalid_args`, `not_found`, `lease_invalid`, `lease_expired`, `batch_failed`,
/// `invalid_check`, `checks_failed`, or a storage failure (which fails the batch).
pub fn run(input: Value) -> Outcome {
    let args: SubmitArgs = butler_store::args::parse(input)?;
    let mut batch = Batch::load(&args.batch_id)?;
    batch.authorize(&args.lease, time::now_ms())?;
    batch.require_not_failed()?;
    match submit(&mut batch, args) {
        Ok(value) => Ok(value),
        Err(failure) => {
            if !is_bad_input(&failure) {
                mark_failed(&mut batch, &failure);
            }
            Err(failure)
        }
    }
}

fn is_bad_input(failure: &Failure) -> bool {
    BAD_INPUT.contains(&failure.code.as_str())
}

/// Marks `batch` failed because of `failure` (best effort: if even that cannot be written,
/// the log says so).
fn mark_failed(batch: &mut Batch, failure: &Failure) {
    batch.status = Status::Failed;
    batch.failure = Some(clip(&format!("{}: {}", failure.code, failure.message), 300));
    batch.ended_ms = Some(time::now_ms());
    host::warn(&format!("batch {} failed: {}", batch.batch_id, failure.code));
    if let Err(f) = batch.save() {
        host::error(&format!("could not mark batch {} failed: {}", batch.batch_id, f.message));
    }
}

fn submit(batch: &mut Batch, args: SubmitArgs) -> Outcome {
    let target = match (&args.op, &args.target) {
        (Op::Create, _) => None,
        (_, Some(id)) => Some(
            Card::load(id)?
                .ok_or_else(|| Failure::not_found(format!("no card `{}` to revise or archive", clip(id, 80))))?,
        ),
        (_, None) => None,
    };
    let profile_active = if args.op == Op::Create && args.card.kind == Kind::Profile {
        Card::load("profile")?.is_some_and(|p| p.status == CardStatus::Active)
    } else {
        false
    };
    let accepted = validate(batch, &args, target.as_ref(), profile_active)?;
    if let (Some(card), Some(_)) = (&target, &accepted.conflict) {
        refuse_second_conflict(card)?;
    }
    if !accepted.checks.is_empty() {
        let answer = host::call("validity.check", &json!({"checks": accepted.checks}));
        interpret_check(answer)?;
    }

    let id = fresh_candidate_id(&args.card.title)?;
    let candidate = Candidate {
        id: id.clone(),
        op: args.op,
        target: target.as_ref().map(|c| c.id.clone()),
        base_revision: target.as_ref().map(|c| c.revision),
        revision: 1,
        content_hash: args.card.hash(),
        card: args.card,
        evidence: accepted.evidence,
        evidence_items: accepted
            .evidence_items
            .iter()
            .map(|i| serde_json::to_value(i).unwrap_or(Value::Null))
            .collect(),
        checks: accepted.checks,
        conflict: accepted.conflict.clone(),
        status: CandidateStatus::Pending,
        batch_id: batch.batch_id.clone(),
        created_at: time::now(),
        decided_at: None,
        reason: None,
        applied: None,
        by_owner: false,
    };
    candidate.save()?;
    if let (Some(card), Some(reason)) = (&target, accepted.conflict) {
        hold(card, &id, reason)?;
    }
    batch.candidates.push(id.clone());
    batch.save()?;
    host::info(&format!("candidate {id} ({:?}) submitted in batch {}", candidate.op, batch.batch_id));
    Ok(json!({"id": id, "revision": candidate.revision, "contentHash": candidate.content_hash}))
}

/// Everything about a submission that needs no more than the batch, the target card and
/// whether an active profile exists.
fn validate(
    batch: &Batch,
    args: &SubmitArgs,
    target: Option<&Card>,
    profile_active: bool,
) -> Result<Accepted, Failure> {
    match (args.op, &args.target, target) {
        (Op::Create, Some(_), _) => {
            return Err(Failure::invalid_args("`target` is only for revise and archive; create takes none"));
        }
        (Op::Create, None, _) => {}
        (_, None, _) => return Err(Failure::invalid_args("revise and archive need a `target` card id")),
        (_, Some(id), None) => return Err(Failure::not_found(format!("no card `{}`", clip(id, 80)))),
        (_, Some(_), Some(card)) => {
            if card.status != CardStatus::Active {
                return Err(Failure::invalid_args(format!("card `{}` is archived; only active cards change", card.id)));
            }
            if card.content.kind != args.card.kind {
                return Err(Failure::invalid_args(format!(
                    "card `{}` is a {} card: card.kind must be `{}` (to change kinds, archive it and create another)",
                    card.id,
                    card.content.kind.as_str(),
                    card.content.kind.as_str()
                )));
            }
        }
    }
    args.card.validate()?;
    if args.op == Op::Create && args.card.kind == Kind::Profile && profile_active {
        return Err(Failure::invalid_args(
            "a profile card exists: revise it (target `profile`) instead of creating one",
        ));
    }

    let raw_checks = args.checks.as_deref().unwrap_or_default();
    if args.card.kind == Kind::Profile && !raw_checks.is_empty() {
        return Err(Failure::new("invalid_check", "profile cards carry no checks"));
    }
    if raw_checks.len() > MAX_CHECKS {
        return Err(Failure::new("invalid_check", format!("at most {MAX_CHECKS} checks")));
    }
    let checks = raw_checks
        .iter()
        .enumerate()
        .map(|(n, raw)| {
            let check: Check = serde_json::from_value(raw.clone()).map_err(|e| {
                Failure::new(
                    "invalid_check",
                    format!("checks[{n}]: {e} (expected {{type:\"path\", path}} or {{type:\"quote\", path, text}})"),
                )
            })?;
            check.validate()?;
            Ok(check)
        })
        .collect::<Result<Vec<_>, Failure>>()?;

    let mut evidence: Vec<String> = Vec::new();
    for id in &args.evidence {
        if !evidence.contains(id) {
            evidence.push(id.clone());
        }
    }
    if evidence.is_empty() {
        return Err(Failure::invalid_args("`evidence` must cite at least one item of the batch"));
    }
    if evidence.len() > MAX_EVIDENCE {
        return Err(Failure::invalid_args(format!("`evidence`: at most {MAX_EVIDENCE} items")));
    }
    let evidence_items = evidence
        .iter()
        .map(|id| {
            batch.item(id).cloned().ok_or_else(|| {
                Failure::invalid_args(format!(
                    "evidence `{}` is not an item of batch `{}`",
                    clip(id, 80),
                    batch.batch_id
                ))
            })
        })
        .collect::<Result<Vec<_>, Failure>>()?;

    let conflict = match (&args.conflict, args.op) {
        (None, _) => None,
        (Some(_), Op::Create) => {
            return Err(Failure::invalid_args("`conflict` is only for revise and archive"));
        }
        (Some(c), _) => {
            let reason = c.reason.trim();
            if reason.is_empty() || reason.chars().count() > MAX_REASON_CHARS {
                return Err(Failure::invalid_args(format!(
                    "conflict.reason must be 1 to {MAX_REASON_CHARS} characters"
                )));
            }
            Some(reason.to_owned())
        }
    };
    Ok(Accepted { checks, evidence, evidence_items, conflict })
}

/// A card is held by one conflict at a time: a second one while the first candidate is
/// still pending would be released by whichever decision came first.
fn refuse_second_conflict(card: &Card) -> Result<(), Failure> {
    let Some(held_by) = Verdict::load(&card.id)?.and_then(|v| v.conflict).map(|c| c.candidate) else {
        return Ok(());
    };
    let pending = Candidate::load(&held_by)?.is_some_and(|c| c.status == CandidateStatus::Pending);
    if pending {
        return Err(Failure::invalid_args(format!(
            "card `{}` is already held by a conflict from pending candidate `{held_by}`; submit without `conflict`",
            card.id
        )));
    }
    Ok(())
}

/// Suspends `card` at once: its verdict (created valid and bound to the card's current
/// revision if it has none) records the conflict.
fn hold(card: &Card, candidate: &str, reason: String) -> Result<(), Failure> {
    let conflict = Conflict { candidate: candidate.to_owned(), reason };
    let verdict = match Verdict::load(&card.id)? {
        Some(verdict) => Verdict { conflict: Some(conflict), ..verdict },
        None => Verdict {
            id: card.id.clone(),
            revision: card.revision,
            content_hash: card.content_hash.clone(),
            state: State::Valid,
            reasons: Vec::new(),
            conflict: Some(conflict),
            checked_at: time::now(),
        },
    };
    verdict.save()
}

/// What `validity.check` answered, as pass or `checks_failed`. A failure of the call itself
/// (other than a verdict on the checks) is `validity_unavailable`.
fn interpret_check(answer: Outcome) -> Result<(), Failure> {
    let data = match answer {
        Ok(data) => data,
        Err(f) if matches!(f.code.as_str(), "checks_failed" | "invalid_check") => return Err(f),
        Err(f) => {
            return Err(Failure::new(
                "validity_unavailable",
                format!("validity.check could not run the checks ({}): {}", f.code, clip(&f.message, 300)),
            ));
        }
    };
    match verdict_of(&data) {
        Some(Ok(())) => Ok(()),
        Some(Err(reasons)) => {
            let reasons = if reasons.is_empty() { "a check does not hold".to_owned() } else { reasons.join("; ") };
            Err(Failure::new("checks_failed", format!("the checks must pass at submission: {reasons}")))
        }
        None => Err(Failure::new(
            "validity_unavailable",
            format!("validity.check answered something unexpected: {}", clip(&data.to_string(), 200)),
        )),
    }
}

/// Reads a `validity.check` answer — `{ok, results:[{type, path, ok, reason?}]}` — as
/// `Some(Ok)` when the checks pass, `Some(Err(reasons))` when one fails, `None` when the
/// answer says neither. Tolerant of near variants: an overall flag (`ok`,
/// `passed`, `pass`, `valid`, or `state: valid|suspended`), `reasons`, `failed`/`failures`,
/// and per-check `results` carrying one of the same flags.
fn verdict_of(data: &Value) -> Option<Result<(), Vec<String>>> {
    let flag = |v: &Value| -> Option<bool> {
        ["ok", "passed", "pass", "valid"].iter().find_map(|k| v.get(k).and_then(Value::as_bool)).or_else(|| {
            match v.get("state").and_then(Value::as_str) {
                Some("valid") => Some(true),
                Some("suspended" | "failed" | "invalid") => Some(false),
                _ => None,
            }
        })
    };
    let reason_of = |v: &Value| -> String {
        let why = match v {
            Value::String(s) => return s.clone(),
            other => ["reason", "message", "why"]
                .iter()
                .find_map(|k| other.get(k).and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| clip(&other.to_string(), 200)),
        };
        match v.get("path").and_then(Value::as_str) {
            Some(path) if !why.starts_with(path) => format!("{path}: {why}"),
            _ => why,
        }
    };
    let mut reasons: Vec<String> = Vec::new();
    if let Some(list) = data.get("reasons").and_then(Value::as_array) {
        reasons.extend(list.iter().map(reason_of));
    }
    let mut failing = false;
    for key in ["failed", "failures"] {
        if let Some(list) = data.get(key).and_then(Value::as_array)
            && !list.is_empty()
        {
            failing = true;
            reasons.extend(list.iter().map(reason_of));
        }
    }
    let mut results_known = false;
    if let Some(results) = data.get("results").and_then(Value::as_array) {
        results_known = results.iter().all(|r| flag(r).is_some());
        for result in results.iter().filter(|r| flag(r) == Some(false)) {
            failing = true;
            let reason = reason_of(result);
            if !reasons.contains(&reason) {
                reasons.push(reason);
            }
        }
    }
    match flag(data) {
        Some(false) => Some(Err(reasons)),
        _ if failing => Some(Err(reasons)),
        Some(true) => Some(Ok(())),
        None if results_known => Some(Ok(())),
        None => None,
    }
}

/// A new candidate id: `cand-<time>-<hash>`, lowercase `[a-z0-9-]` so it is also a valid
/// file name, and not yet on file.
fn fresh_candidate_id(title: &str) -> Result<String, Failure> {
    for attempt in 0..8 {
        let id: String = ids::new_id("cand", &format!("{title}:{attempt}"))
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
            .collect();
        if card::valid_id(&id) && Candidate::load(&id)?.is_none() {
            return Ok(id);
        }
    }
    Err(Failure::of_kind(butler_faculty_kit::Kind::Internal, "io_error", "could not find a free candidate id"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::ItemKind;

    fn batch() -> Batch {
        let item = |id: &str| Item {
            id: id.into(),
            kind: ItemKind::Observation,
            at: "2026-11-30T00:00:00.000Z".into(),
            source: "s".into(),
            kind_of: "note".into(),
            tags: vec![],
            text: "t".into(),
            r#ref: None,
        };
        Batch {
            batch_id: "batch-1".into(),
            lease_hash: String::new(),
            status: Status::Open,
            created_at: String::new(),
            expires_at: String::new(),
            expires_ms: 1,
            items: vec![item("obs-1"), item("obs-2")],
            candidates: vec![],
            failure: None,
            zero_reason: None,
            ended_ms: None,
        }
    }

    fn args(extra: Value) -> SubmitArgs {
        let mut base = json!({
            "batchId": "batch-1", "lease": "l", "op": "create",
            "card": {"kind": "rule", "title": "T", "summary": "S", "body": "B"},
            "evidence": ["obs-1"]
        });
        if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                base.insert(k.clone(), v.clone());
            }
        }
        butler_store::args::parse(base).expect("valid args")
    }

    fn card(kind: Kind, status: CardStatus) -> Card {
        let content = Content {
            kind,
            title: "Old".into(),
            summary: "s".into(),
            body: "b".into(),
            applies_to: String::new(),
            tags: vec![],
            related: vec![],
        };
        Card {
            id: "old".into(),
            content_hash: content.hash(),
            content,
            status,
            revision: 2,
            scope: "local".into(),
            checks: vec![],
            evidence: vec![],
            created_at: String::new(),
            updated_at: String::new(),
            extra: serde_json::Map::new(),
        }
    }

    fn code(result: Result<Accepted, Failure>) -> String {
        result.map(|_| "ok".to_owned()).unwrap_or_else(|f| f.code)
    }

    #[test]
    fn unknown_fields_are_refused() {
        let text = json!({"batchId": "b", "lease": "l", "op": "create", "card": {"kind": "rule", "title": "T", "summary": "S", "body": "B"}, "evidence": ["x"], "extra": 1}).to_string();
        assert_eq!(
            butler_store::args::parse_text::<SubmitArgs>(&text).map(|_| ()).map_err(|f| f.code),
            Err("invalid_args".into())
        );
        let text = json!({"batchId": "b", "lease": "l", "op": "create", "card": {"kind": "rule", "title": "T", "summary": "S"}, "evidence": ["x"]}).to_string();
        assert!(butler_store::args::parse_text::<SubmitArgs>(&text).is_err(), "a card without a body is incomplete");
    }

    #[test]
    fn ops_and_targets() {
        let b = batch();
        assert_eq!(code(validate(&b, &args(json!({})), None, false)), "ok");
        assert_eq!(code(validate(&b, &args(json!({"target": "old"})), None, false)), "invalid_args");
        assert_eq!(code(validate(&b, &args(json!({"op": "revise"})), None, false)), "invalid_args");
        assert_eq!(code(validate(&b, &args(json!({"op": "revise", "target": "old"})), None, false)), "not_found");
        let active = card(Kind::Rule, CardStatus::Active);
        let archived = card(Kind::Rule, CardStatus::Archived);
        let knowledge = card(Kind::Knowledge, CardStatus::Active);
        let revise = args(json!({"op": "revise", "target": "old"}));
        assert_eq!(code(validate(&b, &revise, Some(&active), false)), "ok");
        assert_eq!(code(validate(&b, &revise, Some(&archived), false)), "invalid_args");
        assert_eq!(code(validate(&b, &revise, Some(&knowledge), false)), "invalid_args");
    }

    #[test]
    fn content_evidence_and_conflict() {
        let b = batch();
        let blank = args(json!({"card": {"kind": "rule", "title": " ", "summary": "S", "body": "B"}}));
        assert_eq!(code(validate(&b, &blank, None, false)), "invalid_args");
        assert_eq!(code(validate(&b, &args(json!({"evidence": []})), None, false)), "invalid_args");
        assert_eq!(code(validate(&b, &args(json!({"evidence": ["obs-1", "obs-9"]})), None, false)), "invalid_args");
        let cited = validate(&b, &args(json!({"evidence": ["obs-2", "obs-1", "obs-2"]})), None, false).expect("valid");
        assert_eq!(cited.evidence, ["obs-2", "obs-1"]);
        assert_eq!(cited.evidence_items.len(), 2);
        assert_eq!(code(validate(&b, &args(json!({"conflict": {"reason": "x"}})), None, false)), "invalid_args");
        let active = card(Kind::Rule, CardStatus::Active);
        let conflict = args(json!({"op": "archive", "target": "old", "conflict": {"reason": "  "}}));
        assert_eq!(code(validate(&b, &conflict, Some(&active), false)), "invalid_args");
        let conflict = args(json!({"op": "archive", "target": "old", "conflict": {"reason": " stale "}}));
        assert_eq!(validate(&b, &conflict, Some(&active), false).expect("valid").conflict.as_deref(), Some("stale"));
    }

    #[test]
    fn profiles_and_checks() {
        let b = batch();
        let profile = json!({"kind": "profile", "title": "Me", "summary": "S", "body": "B"});
        assert_eq!(code(validate(&b, &args(json!({"card": profile})), None, false)), "ok");
        assert_eq!(code(validate(&b, &args(json!({"card": profile})), None, true)), "invalid_args");
        let with_checks = args(json!({"card": profile, "checks": [{"type": "path", "path": "a"}]}));
        assert_eq!(code(validate(&b, &with_checks, None, false)), "invalid_check");
        assert_eq!(code(validate(&b, &args(json!({"card": profile, "checks": []})), None, false)), "ok");
        for bad in [
            json!({"type": "path", "path": "/etc"}),
            json!({"type": "shell", "cmd": "x"}),
            json!({"type": "quote", "path": "a"}),
        ] {
            assert_eq!(code(validate(&b, &args(json!({"checks": [bad]})), None, false)), "invalid_check");
        }
        let good = args(json!({"checks": [{"type": "quote", "path": "docs/a.md", "text": "x"}]}));
        assert_eq!(validate(&b, &good, None, false).expect("valid").checks.len(), 1);
    }

    #[test]
    fn validity_answers() {
        let pass = [json!({"ok": true}), json!({"passed": true, "reasons": []}), json!({"results": [{"ok": true}]})];
        for answer in pass {
            assert!(interpret_check(Ok(answer.clone())).is_ok(), "{answer}");
        }
        let fail = [
            json!({"ok": false, "reasons": ["docs/a.md: missing"]}),
            json!({"failed": [{"check": {}, "reason": "gone"}]}),
            json!({"results": [{"ok": true}, {"ok": false, "reason": "gone"}]}),
            json!({"ok": false, "results": [{"type": "path", "path": "docs/a.md", "ok": false, "reason": "does not exist"}]}),
            json!({"state": "suspended", "reasons": ["x"]}),
        ];
        for answer in fail {
            assert_eq!(
                interpret_check(Ok(answer.clone())).map_err(|f| f.code),
                Err("checks_failed".into()),
                "{answer}"
            );
        }
        let failed = interpret_check(Ok(json!({"ok": false, "reasons": ["docs/a.md: missing"]}))).expect_err("fails");
        assert!(failed.message.contains("docs/a.md: missing"));
        let answer = json!({"ok": false, "results": [
            {"type": "path", "path": "docs", "ok": true},
            {"type": "quote", "path": "docs/a.md", "ok": false, "reason": "no longer contains the text"}]});
        let failed = interpret_check(Ok(answer)).expect_err("fails");
        assert!(failed.message.ends_with("docs/a.md: no longer contains the text"), "{}", failed.message);
        assert_eq!(interpret_check(Ok(json!({"x": 1}))).map_err(|f| f.code), Err("validity_unavailable".into()));
        let stub = Failure::unknown_command("check");
        assert_eq!(interpret_check(Err(stub)).map_err(|f| f.code), Err("validity_unavailable".into()));
        let said = Failure::new("checks_failed", "gone");
        assert_eq!(interpret_check(Err(said)).map_err(|f| f.code), Err("checks_failed".into()));
        assert!(!is_bad_input(&Failure::new("validity_unavailable", "")));
        assert!(!is_bad_input(&Failure::new("io_error", "")));
        assert!(is_bad_input(&Failure::new("checks_failed", "")));
    }
}
