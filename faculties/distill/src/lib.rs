//! The `distill` faculty: turns observations into candidate cards: batches with leases,
//! candidates, completion.
//!
//! Its manifest is `manifest.json` beside this crate (the source of `describe()`). Every
//! command takes its arguments as JSON on standard input (the pipeline's `args`).
//!
//! - `claim {limit?, leaseSeconds?, sources?, types?}` leases a batch of uncovered
//!   observations and session turns — only those of the listed sources and types, when
//!   given; else the root config's `distill.sources` / `distill.types` (granted to this
//!   faculty as `BUTLER_CONFIG`), else all — and returns them with the index of current
//!   cards; the lease is in this response only (the batch file keeps its hash).
//! - `evidence {batchId, lease, itemId}` reads one item of the batch.
//! - `candidate-submit {…}` proposes a candidate card within the lease ([`submit`]).
//! - `complete {batchId, lease, candidates, zeroReason?}` marks the batch's items covered
//!   and closes the batch.
//! - `batches {}` lists the open batches (never a lease); `release {batchId}` (the owner's)
//!   ends an open batch whose lease was lost, so its items can be claimed again at once.
//!
//! Batches, leases and the covered set live in the faculty's own `/data`; candidates and
//! verdicts in the owner's store under `/self`.

mod batch;
mod items;
mod submit;

use std::collections::BTreeSet;

use butler_faculty_kit::{Faculty, Failure, Outcome, Value, faculty, host, json};
use butler_store::card::{Card, Status as CardStatus};
use butler_store::{ids, time, verdict};
use serde::Deserialize;

use batch::{Batch, Covered, ItemKind, PRUNE_AFTER_MS, Status, clip};

/// Items per batch when the caller does not say.
const DEFAULT_LIMIT: u64 = 20;
/// Most items per batch: what an agent can read and weigh in one pass.
const MAX_LIMIT: u64 = 200;
/// A lease lasts this long unless the caller asks otherwise: time to read and submit.
const DEFAULT_LEASE_SECONDS: u64 = 900;
/// The longest lease: an hour, so a crashed agent's items come back the same hour.
const MAX_LEASE_SECONDS: u64 = 3600;
/// The most names in a `sources` or `types` filter.
const MAX_FILTER_NAMES: usize = 32;
/// The environment variable the host puts the root config keys granted to this faculty in
/// (`faculties.distill.config: ["distill"]`).
const CONFIG_ENV: &str = "BUTLER_CONFIG";

struct Distill;

impl Faculty for Distill {
    fn describe() -> Value {
        serde_json::from_str(include_str!("../manifest.json")).unwrap_or_default()
    }

    fn invoke(command: &str, input: Value) -> Outcome {
        match command {
            "claim" => claim(input),
            "evidence" => evidence(input),
            "candidate-submit" => submit::run(input),
            "complete" => complete(input),
            "batches" => open_batches(input),
            "release" => release(input),
            other => Err(Failure::unknown_command(other)),
        }
    }

    fn report(id: &str) -> Outcome {
        match id {
            "batches" => report_batches(),
            other => Err(Failure::unknown_report(other)),
        }
    }
}

faculty!(Distill);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ClaimArgs {
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    lease_seconds: Option<u64>,
    #[serde(default)]
    sources: Option<Vec<String>>,
    #[serde(default)]
    types: Option<Vec<String>>,
}

/// Which items a claim takes: those of these sources and types (`None`: any).
#[derive(Debug, Default, PartialEq, Eq)]
struct Filter {
    sources: Option<BTreeSet<String>>,
    types: Option<BTreeSet<String>>,
}

impl Filter {
    fn admits(&self, item: &batch::Item) -> bool {
        self.sources.as_ref().is_none_or(|s| s.contains(&item.source))
            && self.types.as_ref().is_none_or(|t| t.contains(&item.kind_of))
    }
}

impl ClaimArgs {
    /// The filter: the caller's lists, else the root config's (`config`: the granted root
    /// config's JSON text), else none.
    fn filter(&self, config: Option<&str>) -> Result<Filter, Failure> {
        let configured: Value = config.and_then(|c| serde_json::from_str(c).ok()).unwrap_or_default();
        let list = |given: &Option<Vec<String>>, key: &str| -> Result<Option<BTreeSet<String>>, Failure> {
            let names: Option<Vec<String>> = match given {
                Some(names) => Some(names.clone()),
                None => configured
                    .pointer(&format!("/distill/{key}"))
                    .and_then(Value::as_array)
                    .map(|names| names.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
            };
            let Some(names) = names else { return Ok(None) };
            if names.is_empty() || names.len() > MAX_FILTER_NAMES || names.iter().any(|n| n.is_empty() || n.len() > 64)
            {
                return Err(Failure::invalid_args(format!(
                    "{key} must list 1 to {MAX_FILTER_NAMES} names of 1 to 64 characters"
                )));
            }
            Ok(Some(names.into_iter().collect()))
        };
        Ok(Filter { sources: list(&self.sources, "sources")?, types: list(&self.types, "types")? })
    }

    /// `(limit, lease in ms)`, defaults applied and ranges checked.
    fn resolve(&self) -> Result<(usize, u64), Failure> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Failure::invalid_args(format!("limit must be 1 to {MAX_LIMIT}")));
        }
        let seconds = self.lease_seconds.unwrap_or(DEFAULT_LEASE_SECONDS);
        if !(1..=MAX_LEASE_SECONDS).contains(&seconds) {
            return Err(Failure::invalid_args(format!("leaseSeconds must be 1 to {MAX_LEASE_SECONDS}")));
        }
        Ok((usize::try_from(limit).unwrap_or(usize::MAX), seconds * 1000))
    }
}

fn claim(input: Value) -> Outcome {
    let args: ClaimArgs = butler_store::args::parse(input)?;
    let (limit, lease_ms) = args.resolve()?;
    let filter = args.filter(std::env::var(CONFIG_ENV).ok().as_deref())?;
    if let Err(f) = host::call("validity.refresh", &json!({})) {
        host::warn(&format!("validity.refresh failed before claim ({}): {}", f.code, clip(&f.message, 200)));
    }
    let now = time::now_ms();
    let covered = Covered::load()?;
    let batches = Batch::all()?;
    let held: BTreeSet<String> =
        batches.iter().filter(|b| b.holds(now)).flat_map(|b| b.items.iter().map(|i| i.id.clone())).collect();
    for old in batches.iter().filter(|b| !b.holds(now) && b.ended_ms().saturating_add(PRUNE_AFTER_MS) < now) {
        old.delete();
    }
    let mut uncovered = items::uncovered(items::all()?, &covered, &held);
    uncovered.retain(|item| filter.admits(item));
    let cards = current_cards()?;
    if uncovered.is_empty() {
        return Ok(json!({"batchId": null, "items": [], "cards": cards}));
    }
    let remaining = uncovered.len().saturating_sub(limit);
    uncovered.truncate(limit);

    let batch_id = ids::new_id("batch", &format!("{now}:{}", uncovered.len()));
    let lease = ids::token(&batch_id);
    let expires_ms = now.saturating_add(lease_ms);
    let batch = Batch {
        batch_id: batch_id.clone(),
        lease_hash: ids::sha256_hex(lease.as_bytes()),
        status: Status::Open,
        created_at: time::rfc3339(now),
        expires_at: time::rfc3339(expires_ms),
        expires_ms,
        items: uncovered,
        candidates: Vec::new(),
        failure: None,
        zero_reason: None,
        ended_ms: None,
    };
    batch.save()?;
    host::info(&format!("claimed batch {batch_id}: {} items, {remaining} left", batch.items.len()));
    Ok(json!({
        "batchId": batch_id,
        "lease": lease,
        "expiresAt": batch.expires_at,
        "items": batch.items,
        "cards": cards,
        "remaining": remaining,
    }))
}

/// Index entries of the active cards that are not suspended.
fn current_cards() -> Result<Vec<Value>, Failure> {
    let mut entries = Vec::new();
    for card in Card::load_all()? {
        if card.status == CardStatus::Active && !verdict::is_suspended(&card)? {
            entries.push(card.index_entry());
        }
    }
    Ok(entries)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EvidenceArgs {
    batch_id: String,
    lease: String,
    item_id: String,
}

fn evidence(input: Value) -> Outcome {
    let args: EvidenceArgs = butler_store::args::parse(input)?;
    let batch = Batch::load(&args.batch_id)?;
    batch.authorize(&args.lease, time::now_ms())?;
    let item = batch.item(&args.item_id).ok_or_else(|| {
        Failure::not_found(format!("no item `{}` in batch `{}`", clip(&args.item_id, 80), batch.batch_id))
    })?;
    Ok(json!({"item": item}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CompleteArgs {
    batch_id: String,
    lease: String,
    candidates: Vec<String>,
    #[serde(default)]
    zero_reason: Option<String>,
}

/// The reason a batch produced nothing is for the owner to read, not a document.
const MAX_ZERO_REASON_CHARS: usize = 1000;

fn complete(input: Value) -> Outcome {
    let args: CompleteArgs = butler_store::args::parse(input)?;
    let mut batch = Batch::load(&args.batch_id)?;
    let now = time::now_ms();
    batch.authorize(&args.lease, now)?;
    batch.require_not_failed()?;
    let zero_reason = check_completion(&batch, &args.candidates, args.zero_reason.as_deref())?;
    Covered::add(batch.items.iter().map(|i| i.id.as_str()))?;
    batch.status = Status::Completed;
    batch.ended_ms = Some(now);
    batch.zero_reason = zero_reason;
    batch.save()?;
    host::info(&format!(
        "completed batch {}: {} items covered, {} candidates",
        batch.batch_id,
        batch.items.len(),
        batch.candidates.len()
    ));
    Ok(json!({"covered": batch.items.len()}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReleaseArgs {
    batch_id: String,
}

/// The open batches, oldest first: what each holds and until when (never its lease).
fn open_batches(input: Value) -> Outcome {
    let NoArgs {} = butler_store::args::parse(input)?;
    let now = time::now_ms();
    let mut open: Vec<Batch> = Batch::all()?.into_iter().filter(|b| b.holds(now)).collect();
    open.sort_by(|a, b| a.created_at.cmp(&b.created_at));
    let batches: Vec<Value> = open
        .iter()
        .map(|b| {
            json!({"batchId": b.batch_id, "createdAt": b.created_at, "expiresAt": b.expires_at,
                   "items": b.items.len(), "candidates": b.candidates.len()})
        })
        .collect();
    Ok(json!({"batches": batches}))
}

/// Ends open batch `batchId` without completing it: its items are free at once, its
/// candidates stay in review, its lease stops working.
fn release(input: Value) -> Outcome {
    let args: ReleaseArgs = butler_store::args::parse(input)?;
    let mut batch = Batch::load(&args.batch_id)?;
    let now = time::now_ms();
    if !batch.holds(now) {
        return Err(Failure::new(
            "batch_not_active",
            format!(
                "batch `{}` is not open (completed, failed, released or expired): nothing to release",
                batch.batch_id
            ),
        ));
    }
    batch.status = Status::Released;
    batch.ended_ms = Some(now);
    batch.save()?;
    host::info(&format!("released batch {}: {} items free again", batch.batch_id, batch.items.len()));
    Ok(json!({"released": batch.batch_id, "items": batch.items.len()}))
}

/// The listed candidates must be exactly those submitted in the batch; none needs a reason.
/// Returns the reason to keep.
fn check_completion(batch: &Batch, listed: &[String], zero_reason: Option<&str>) -> Result<Option<String>, Failure> {
    let listed_set: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    if listed_set.len() != listed.len() {
        return Err(Failure::invalid_args("`candidates` lists a candidate twice"));
    }
    let submitted: BTreeSet<&str> = batch.candidates.iter().map(String::as_str).collect();
    if listed_set != submitted {
        let missing: Vec<&str> = submitted.difference(&listed_set).copied().collect();
        let foreign: Vec<String> = listed_set.difference(&submitted).map(|id| clip(id, 80)).collect();
        return Err(Failure::invalid_args(format!(
            "`candidates` must be exactly those submitted in batch `{}`: missing [{}], not of this batch [{}]",
            batch.batch_id,
            missing.join(", "),
            foreign.join(", ")
        )));
    }
    let reason = zero_reason.map(str::trim).filter(|r| !r.is_empty());
    if let Some(r) = reason
        && r.chars().count() > MAX_ZERO_REASON_CHARS
    {
        return Err(Failure::invalid_args(format!("zeroReason is longer than {MAX_ZERO_REASON_CHARS} characters")));
    }
    if listed.is_empty() && reason.is_none() {
        return Err(Failure::invalid_args("a batch completed without candidates needs a `zeroReason`"));
    }
    Ok(reason.map(str::to_owned))
}

fn report_batches() -> Outcome {
    let now = time::now_ms();
    let covered = Covered::load()?;
    let batches = Batch::all()?;
    let uncovered = items::uncovered(items::all()?, &covered, &BTreeSet::new());
    let observations = uncovered.iter().filter(|i| i.kind == ItemKind::Observation).count();
    let sessions = uncovered.len() - observations;
    let open: Vec<&Batch> = batches.iter().filter(|b| b.holds(now)).collect();
    let failed: Vec<&Batch> = batches.iter().filter(|b| b.status == Status::Failed && now < b.expires_ms).collect();
    Ok(summarize(observations, sessions, &open, &failed, now))
}

/// The `status` report: counts, then one line per open or recently failed batch (never
/// its lease).
fn summarize(observations: usize, sessions: usize, open: &[&Batch], failed: &[&Batch], now: u64) -> Value {
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut parts = vec![plural(observations, "uncovered observation", "uncovered observations")];
    if sessions > 0 {
        parts.push(plural(sessions, "uncovered session turn", "uncovered session turns"));
    }
    parts.push(plural(open.len(), "open batch", "open batches"));
    if !failed.is_empty() {
        parts.push(plural(failed.len(), "failed batch", "failed batches"));
    }
    let items: Vec<Value> = open
        .iter()
        .map(|b| {
            json!({
                "title": format!("{}: {} items, {} candidates", b.batch_id, b.items.len(), b.candidates.len()),
                "at": b.created_at,
                "preview": format!("open, lease ends {} ({}s left)", b.expires_at, b.expires_ms.saturating_sub(now) / 1000),
            })
        })
        .chain(failed.iter().map(|b| {
            json!({
                "title": format!("{}: {} items, {} candidates", b.batch_id, b.items.len(), b.candidates.len()),
                "at": b.created_at,
                "preview": format!("failed: {}", b.failure.as_deref().unwrap_or("a step failed")),
            })
        }))
        .collect();
    json!({
        "status": if failed.is_empty() { "ok" } else { "warn" },
        "summary": parts.join(", "),
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(candidates: &[&str]) -> Batch {
        Batch {
            batch_id: "batch-1".into(),
            lease_hash: String::new(),
            status: Status::Open,
            created_at: "2026-11-30T00:00:00.000Z".into(),
            expires_at: "2026-11-30T00:15:00.000Z".into(),
            expires_ms: 10_000,
            items: vec![],
            candidates: candidates.iter().map(|c| (*c).to_owned()).collect(),
            failure: None,
            zero_reason: None,
            ended_ms: None,
        }
    }

    fn parse<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
        butler_store::args::parse_text(text).map_err(|f| f.code)
    }

    #[test]
    fn claim_limits() {
        let resolve = |text: &str| parse::<ClaimArgs>(text).and_then(|a| a.resolve().map_err(|f| f.code));
        assert_eq!(resolve("{}"), Ok((20, 900_000)));
        assert_eq!(resolve(""), Ok((20, 900_000)));
        assert_eq!(resolve(r#"{"limit": 200, "leaseSeconds": 1}"#), Ok((200, 1000)));
        for bad in [
            r#"{"limit": 0}"#,
            r#"{"limit": 201}"#,
            r#"{"limit": -1}"#,
            r#"{"leaseSeconds": 3601}"#,
            r#"{"leaseSeconds": 0}"#,
            r#"{"limit": "5"}"#,
            r#"{"other": 1}"#,
            "[",
        ] {
            assert_eq!(resolve(bad), Err("invalid_args".into()), "{bad}");
        }
    }

    #[test]
    fn claim_filters_come_from_the_caller_then_the_root_config() {
        let filter = |args: &str, config: Option<&str>| {
            parse::<ClaimArgs>(args).and_then(|a| a.filter(config).map_err(|f| f.code))
        };
        let set = |names: &[&str]| Some(names.iter().map(|n| (*n).to_owned()).collect::<BTreeSet<_>>());
        assert_eq!(filter("{}", None), Ok(Filter::default()));
        let config = r#"{"distill": {"sources": ["agent"], "types": ["fact", "decision"]}}"#;
        assert_eq!(
            filter("{}", Some(config)),
            Ok(Filter { sources: set(&["agent"]), types: set(&["decision", "fact"]) }),
            "the root config chooses the default"
        );
        assert_eq!(
            filter(r#"{"types": ["error"]}"#, Some(config)),
            Ok(Filter { sources: set(&["agent"]), types: set(&["error"]) }),
            "the caller's list wins"
        );
        for bad in [r#"{"sources": []}"#, r#"{"types": [""]}"#, r#"{"sources": "agent"}"#] {
            assert_eq!(filter(bad, None), Err("invalid_args".into()), "{bad}");
        }
        let item = |source: &str, kind: &str| batch::Item {
            id: "i".into(),
            kind: ItemKind::Observation,
            at: "t".into(),
            source: source.into(),
            kind_of: kind.into(),
            tags: vec![],
            text: "x".into(),
            r#ref: None,
        };
        let only = Filter { sources: set(&["agent"]), types: None };
        assert!(only.admits(&item("agent", "error")) && !only.admits(&item("butler", "error")));
    }

    #[test]
    fn evidence_and_complete_args_are_strict() {
        assert!(parse::<EvidenceArgs>(r#"{"batchId":"b","lease":"l","itemId":"i"}"#).is_ok());
        assert_eq!(
            parse::<EvidenceArgs>(r#"{"batchId":"b","lease":"l","itemId":"i","x":1}"#).map(|_| ()),
            Err("invalid_args".into())
        );
        assert_eq!(parse::<CompleteArgs>(r#"{"batchId":"b","lease":"l"}"#).map(|_| ()), Err("invalid_args".into()));
    }

    #[test]
    fn completion_needs_exactly_the_batch_candidates() {
        let b = batch(&["cand-a", "cand-b"]);
        let ids = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(check_completion(&b, &ids(&["cand-b", "cand-a"]), None).map_err(|f| f.code), Ok(None));
        for bad in [&["cand-a"][..], &["cand-a", "cand-b", "cand-c"], &["cand-a", "cand-a", "cand-b"], &[]] {
            assert_eq!(
                check_completion(&b, &ids(bad), Some("why")).map_err(|f| f.code),
                Err("invalid_args".into()),
                "{bad:?}"
            );
        }
        let empty = batch(&[]);
        assert_eq!(check_completion(&empty, &[], None).map_err(|f| f.code), Err("invalid_args".into()));
        assert_eq!(check_completion(&empty, &[], Some("  ")).map_err(|f| f.code), Err("invalid_args".into()));
        assert_eq!(
            check_completion(&empty, &[], Some(" nothing new ")).map_err(|f| f.code),
            Ok(Some("nothing new".into()))
        );
    }

    #[test]
    fn the_report_counts_and_never_shows_leases() {
        let open = batch(&["cand-a"]);
        let mut failed = batch(&[]);
        failed.status = Status::Failed;
        failed.failure = Some("io_error: disk full".into());
        let report = summarize(3, 0, &[&open], &[], 4000);
        assert_eq!(report["status"], "ok");
        assert_eq!(report["summary"], "3 uncovered observations, 1 open batch");
        assert_eq!(report["items"][0]["preview"], "open, lease ends 2026-11-30T00:15:00.000Z (6s left)");
        let report = summarize(1, 2, &[], &[&failed], 0);
        assert_eq!(report["status"], "warn");
        assert_eq!(
            report["summary"],
            "1 uncovered observation, 2 uncovered session turns, 0 open batches, 1 failed batch"
        );
        assert!(!report.to_string().contains("lease\""));
    }
}
