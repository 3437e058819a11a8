//! The `validity` faculty: path and quote checks that suspend cards whose evidence went away,
//! and restore them when it returns.
//!
//! Its manifest is `manifest.json` beside this crate (the source of `describe()`). Every
//! command takes its arguments as JSON on standard input (the pipeline's `args`).
//!
//! - `check {checks}` evaluates checks and stores nothing;
//! - `cards {}` lists the ids a full refresh checks;
//! - `refresh {ids?}` recomputes verdicts (`/self/validity/<id>.json`), never touching a card:
//!   a read command that evaluates every check (all cards from the card index) and hands the
//!   cards whose verdict changes to `commit {ids}`, the write command that re-evaluates them
//!   under the store's write lock and writes;
//! - `set-checks {id, revision, checks}` (operator) sets a card's checks;
//! - `glob {pattern, path?, limit?}` → `{paths, truncated}` lists the files whose path
//!   matches a glob, and `grep {pattern, path?, glob?, ignoreCase?, limit?}` →
//!   `{matches: [{path, line, text}], truncated, filesSearched}` the lines matching a regular
//!   expression: read-only searches of the validity root for the agents the host drives (the
//!   MCP tools `butler__glob`, `butler__grep`; see `search`);
//! - report `summary`: which active cards are suspended and why.
//!
//! Checks and searches read only through the `/validity` preopen, resolved by [`files`]:
//! every symlink followed inside the root, and the resolved path refused when it is hidden,
//! in the host's internals, a manifest, or a file with other hard links — no check is an
//! oracle for a secret's contents, and a search skips such paths without a word (it is no
//! oracle for their existence either).

/// How check paths are resolved and refused (public for the fuzz targets only).
#[doc(hidden)]
pub mod files;
mod search;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use butler_faculty_kit::{Faculty, Failure, Outcome, Value, clip, faculty, host, json};
use butler_store::card::{Card, Kind, Status};
use butler_store::check::{Check, normalize};
use butler_store::index::Index;
use butler_store::verdict::{State, Verdict};
use serde::Deserialize;

/// Where the validity root is mounted.
const ROOT: &str = "/validity";
/// At most this much of a file is read for a quote check.
const MAX_READ: u64 = 4 * 1024 * 1024;
/// At most this many checks per card (or per `check` call).
const MAX_CHECKS: usize = 64;

struct Validity;

impl Faculty for Validity {
    fn describe() -> Value {
        serde_json::from_str(include_str!("../manifest.json")).unwrap_or_default()
    }

    fn invoke(command: &str, input: Value) -> Outcome {
        match command {
            "check" => check(input),
            "refresh" => refresh(input),
            "cards" => cards(),
            "commit" => commit(input),
            "set-checks" => set_checks(input),
            "glob" => search_root().and_then(|root| search::glob(&root, input)),
            "grep" => search_root().and_then(|root| search::grep(&root, input)),
            other => Err(Failure::unknown_command(other)),
        }
    }

    fn report(id: &str) -> Outcome {
        match id {
            "summary" => summary(),
            other => Err(Failure::unknown_report(other)),
        }
    }
}

faculty!(Validity);

// ---------------------------------------------------------------------------------------
// Evaluating checks

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Evaluation {
    check: Check,
    /// Why it fails; `None` when it passes.
    failure: Option<String>,
}

impl Evaluation {
    fn to_json(&self) -> Value {
        let kind = match self.check {
            Check::Path { .. } => "path",
            Check::Quote { .. } => "quote",
        };
        let mut out = json!({"type": kind, "path": self.check.path(), "ok": self.failure.is_none()});
        if let Some(reason) = &self.failure {
            out["reason"] = json!(reason);
        }
        out
    }

    /// The verdict's reason: `<path>: <why>`.
    fn reason(&self) -> Option<String> {
        self.failure.as_ref().map(|why| format!("{}: {why}", self.check.path()))
    }
}

/// The validity root, if it is there (`None`: unavailable, and the last verdicts stand).
fn root() -> Option<&'static Path> {
    let root = Path::new(ROOT);
    std::fs::metadata(root).ok().filter(std::fs::Metadata::is_dir).map(|_| root)
}

/// Why opening or reading a checked path failed, in words for the owner.
fn io_reason(error: &std::io::Error) -> String {
    use std::io::ErrorKind;
    if let Some(refused) = error.get_ref().and_then(|inner| inner.downcast_ref::<files::Refused>()) {
        return format!("is never checked: {refused}");
    }
    match error.kind() {
        ErrorKind::NotFound | ErrorKind::NotADirectory => "does not exist".to_owned(),
        // The sandbox answers "not permitted" for a path (or a symlink on it) that leads out
        // of the preopened root.
        ErrorKind::PermissionDenied => "leaves the validity root".to_owned(),
        _ => format!("cannot be read: {error}"),
    }
}

/// Evaluates a spelling-checked `check` against `root`. Only regular files count: a
/// directory (or anything else) where a file is expected fails.
fn evaluate(root: &Path, check: &Check) -> Evaluation {
    let failure = Probe::new(root).failure(check);
    Evaluation { check: check.clone(), failure }
}

/// What a path is, as far as checks care: a regular file of this size, or why not.
type Found = Result<u64, String>;

/// Evaluates checks against a root, looking at each path once per refresh (a refresh is
/// one snapshot: a file named by several checks is looked up once).
struct Probe {
    /// `None` when the root found by its path has no preopen (never, in the sandbox).
    root: Option<files::Root>,
    found: HashMap<String, Found>,
    bytes: Vec<u8>,
    haystack: String,
}

impl Probe {
    fn new(root: &Path) -> Self {
        let root = root.to_str().and_then(files::Root::open);
        Self { root, found: HashMap::new(), bytes: Vec::new(), haystack: String::new() }
    }

    /// What `relative` is: one `stat`, remembered.
    fn find(&mut self, relative: &str) -> Found {
        if let Some(found) = self.found.get(relative) {
            return found.clone();
        }
        let Some(root) = &self.root else { return Err("cannot be read: the validity root is not open".to_owned()) };
        let found = match root.entry(relative) {
            Ok(files::Entry::File(size)) => Ok(size),
            Ok(files::Entry::Dir) => Err("is a directory, not a file".to_owned()),
            Ok(files::Entry::Other) => Err("is not a regular file".to_owned()),
            Err(e) => Err(io_reason(&e)),
        };
        self.found.insert(relative.to_owned(), found.clone());
        found
    }

    /// Why `check` fails; `None` when it passes.
    fn failure(&mut self, check: &Check) -> Option<String> {
        // Checks written into a card by hand never passed `validate`: a path that could leave
        // the root by its spelling fails here, before anything is opened.
        if let Err(f) = check.validate() {
            return Some(format!("invalid check: {}", f.message));
        }
        let size = match self.find(check.path()) {
            Ok(size) => size,
            Err(why) => return Some(why),
        };
        let Check::Quote { text, .. } = check else {
            return None;
        };
        // One open and reads of the size the file had when it was looked up (at most
        // MAX_READ): no second `stat` on the handle and no read past the end to find it.
        let Some(root) = &self.root else { return Some("cannot be read: the validity root is not open".to_owned()) };
        if let Err(e) = root.read(check.path(), size.min(MAX_READ), &mut self.bytes) {
            return Some(io_reason(&e));
        }
        normalize_into(&String::from_utf8_lossy(&self.bytes), &mut self.haystack);
        let needle = normalize(text);
        if memchr::memmem::find(self.haystack.as_bytes(), needle.as_bytes()).is_some() {
            None
        } else if size > MAX_READ {
            Some(format!("does not contain the quoted text \"{}\" in its first 4 MiB", clip(&needle, 60)))
        } else {
            Some(format!("does not contain the quoted text \"{}\"", clip(&needle, 60)))
        }
    }
}

/// [`normalize`] into a buffer, in one pass.
fn normalize_into(text: &str, out: &mut String) {
    out.clear();
    out.reserve(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
}

/// Parses and spell-checks a list of checks.
fn parse_checks(checks: Vec<Value>) -> Result<Vec<Check>, Failure> {
    if checks.len() > MAX_CHECKS {
        return Err(Failure::new("invalid_check", format!("at most {MAX_CHECKS} checks")));
    }
    checks
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let check: Check = serde_json::from_value(value).map_err(|e| {
                Failure::new(
                    "invalid_check",
                    format!("check {i}: {e} (expected {{type:\"path\", path}} or {{type:\"quote\", path, text}})"),
                )
            })?;
            check.validate()?;
            Ok(check)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// check

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CheckArgs {
    checks: Vec<Value>,
}

fn check(input: Value) -> Outcome {
    let args: CheckArgs = butler_store::args::parse(input)?;
    let checks = parse_checks(args.checks)?;
    if checks.is_empty() {
        return Ok(json!({"ok": true, "results": []}));
    }
    let root = root().ok_or_else(unavailable)?;
    let results: Vec<Evaluation> = checks.iter().map(|c| evaluate(root, c)).collect();
    Ok(json!({
        "ok": results.iter().all(|r| r.failure.is_none()),
        "results": results.iter().map(Evaluation::to_json).collect::<Vec<_>>(),
    }))
}

fn unavailable() -> Failure {
    Failure::new("validity_unavailable", "the validity root is not available")
}

/// The validity root for `glob` and `grep`.
fn search_root() -> Result<files::Root, Failure> {
    root().and_then(Path::to_str).and_then(files::Root::open).ok_or_else(unavailable)
}

// ---------------------------------------------------------------------------------------
// Verdicts

/// Whether a verdict keeps `card` from consumers (as `verdict::is_suspended` decides).
fn holds(verdict: Option<&Verdict>, card: &Card) -> bool {
    verdict.is_some_and(|v| v.conflict.is_some() || (v.applies_to(card) && v.suspends()))
}

/// Whether a card's verdict must be rewritten, given the verdict that applies to its current
/// revision (`current`: state and reasons) and what its checks found (`failures`, `None`:
/// the card has no checks). An unchanged verdict is not rewritten.
fn verdict_changes(current: Option<(State, &[String])>, failures: Option<&[String]>) -> bool {
    match failures {
        Some(reasons) => {
            let state = if reasons.is_empty() { State::Valid } else { State::Suspended };
            current.is_none_or(|(was, why)| was != state || why != reasons)
        }
        // No checks: nothing to say, unless a verdict from earlier checks still suspends
        // this revision (its checks were removed) — then it is cleared.
        None => current.is_some_and(|(was, why)| was == State::Suspended || !why.is_empty()),
    }
}

/// The verdict to write for `card`, if one must be written. `failures` is what its checks
/// found (`None`: the card has no checks). An unchanged verdict is not rewritten; a
/// conflict is always carried over.
fn next_verdict(card: &Card, previous: Option<&Verdict>, failures: Option<Vec<String>>, now: &str) -> Option<Verdict> {
    let current = previous.filter(|v| v.applies_to(card)).map(|v| (v.state, v.reasons.as_slice()));
    if !verdict_changes(current, failures.as_deref()) {
        return None;
    }
    let reasons = failures.unwrap_or_default();
    let state = if reasons.is_empty() { State::Valid } else { State::Suspended };
    Some(Verdict {
        id: card.id.clone(),
        revision: card.revision,
        content_hash: card.content_hash.clone(),
        state,
        reasons,
        conflict: previous.and_then(|v| v.conflict.clone()),
        checked_at: now.to_owned(),
    })
}

/// How one card's availability moved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Moves {
    checked: usize,
    suspended: usize,
    restored: usize,
}

/// What `checks` found: the reasons of those failing, each once — two checks of one
/// missing file fail for one reason (`None` when there are none to run).
fn failures(probe: &mut Probe, checks: &[Check]) -> Option<Vec<String>> {
    (!checks.is_empty()).then(|| {
        let mut reasons: Vec<String> = Vec::new();
        for reason in checks.iter().filter_map(|c| probe.failure(c).map(|why| format!("{}: {why}", c.path()))) {
            if !reasons.contains(&reason) {
                reasons.push(reason);
            }
        }
        reasons
    })
}

/// Re-evaluates `card`'s checks and stores its verdict if it changed.
fn refresh_card(probe: &mut Probe, card: &Card, now: &str) -> Result<Moves, Failure> {
    let previous = Verdict::load(&card.id)?;
    let failures = failures(probe, &card.checks);
    let mut moves = Moves { checked: usize::from(failures.is_some()), ..Moves::default() };
    if let Some(next) = next_verdict(card, previous.as_ref(), failures, now) {
        let (before, after) = (holds(previous.as_ref(), card), holds(Some(&next), card));
        next.save()?;
        moves.suspended = usize::from(!before && after);
        moves.restored = usize::from(before && !after);
        if before != after {
            host::info(&format!("card {} {}", card.id, if after { "suspended" } else { "restored" }));
        }
    }
    Ok(moves)
}

/// Rebuilds the context after cards came or went; a failure is logged, not returned (the
/// verdicts are stored either way).
fn rebuild_context() {
    if let Err(f) = host::call("context.build", &json!({})) {
        host::warn(&format!("context not rebuilt: {} ({})", f.message, f.code));
    }
}

// ---------------------------------------------------------------------------------------
// refresh

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RefreshArgs {
    #[serde(default)]
    ids: Option<Vec<String>>,
}

fn parse_ids(ids: Option<Vec<String>>) -> Result<Option<BTreeSet<String>>, Failure> {
    let wanted: Option<BTreeSet<String>> = ids.map(|ids| ids.into_iter().collect());
    if let Some(bad) = wanted.iter().flatten().find(|id| !butler_store::card::valid_id(id)) {
        return Err(Failure::invalid_args(format!("ids: `{}` is not a card id", clip(bad, 80))));
    }
    Ok(wanted)
}

fn unavailable_answer() -> Outcome {
    host::warn("validity root unavailable: verdicts left as they are");
    Ok(json!({"checked": 0, "suspended": 0, "restored": 0, "unavailable": true}))
}

/// `refresh` evaluates every check without the store's write lock (it is a read command)
/// and hands only the cards whose verdict changes to `commit`, which evaluates them again
/// under the lock and writes. An unchanged refresh reads and writes nothing else.
fn refresh(input: Value) -> Outcome {
    let args: RefreshArgs = butler_store::args::parse(input)?;
    let wanted = parse_ids(args.ids)?;
    let Some(root) = root() else {
        return unavailable_answer();
    };
    let mut probe = Probe::new(root);
    let mut checked = 0;
    let mut changed = Vec::new();
    match &wanted {
        // A refresh of named cards reads just those files, not the index.
        Some(ids) => {
            for id in ids {
                let Some(card) = Card::load(id)? else { continue };
                if card.status != Status::Active {
                    continue;
                }
                let previous = match Verdict::load(&card.id) {
                    Ok(previous) => previous,
                    // One unreadable verdict must not stop the others; it is left for the owner.
                    Err(f) if f.code == "store_corrupt" => {
                        host::warn(&format!("card {} not refreshed: {}", card.id, f.message));
                        continue;
                    }
                    Err(f) => return Err(f),
                };
                let failures = failures(&mut probe, &card.checks);
                checked += usize::from(failures.is_some());
                let current =
                    previous.as_ref().filter(|v| v.applies_to(&card)).map(|v| (v.state, v.reasons.as_slice()));
                if verdict_changes(current, failures.as_deref()) {
                    changed.push(card.id);
                }
            }
        }
        None => {
            let index = Index::current()?;
            for entry in index.entries() {
                if entry.status != Status::Active || (!index.has_checks(entry) && entry.verdict.is_none()) {
                    continue;
                }
                let checks: Vec<Check> = serde_json::from_str(index.checks_json(entry)).map_err(|e| {
                    Failure::new("store_corrupt", format!("card index: checks of `{}`: {e}", clip(&entry.id, 80)))
                })?;
                let failures = failures(&mut probe, &checks);
                checked += usize::from(failures.is_some());
                let current = entry.verdict.as_ref().filter(|m| m.applies).map(|m| (m.state, m.reasons.as_slice()));
                if verdict_changes(current, failures.as_deref()) {
                    changed.push(entry.id.clone());
                }
            }
        }
    }
    if changed.is_empty() {
        return Ok(json!({"checked": checked, "suspended": 0, "restored": 0}));
    }
    let committed = host::call("validity.commit", &json!({ "ids": changed }))?;
    let count = |key: &str| committed.get(key).and_then(Value::as_u64).unwrap_or(0);
    Ok(json!({"checked": checked, "suspended": count("suspended"), "restored": count("restored")}))
}

// ---------------------------------------------------------------------------------------
// cards

/// `cards {}`: the ids a full refresh would check (active cards with checks or a verdict),
/// so a caller can refresh them in parts and show progress.
fn cards() -> Outcome {
    let index = Index::current()?;
    let ids: Vec<&str> = index
        .entries()
        .iter()
        .filter(|e| e.status == Status::Active && (index.has_checks(e) || e.verdict.is_some()))
        .map(|e| e.id.as_str())
        .collect();
    Ok(json!({ "ids": ids }))
}

// ---------------------------------------------------------------------------------------
// commit

/// `commit {ids}`: re-evaluates the named cards under the store's write lock and writes the
/// verdicts that changed (what `refresh` found changing may have changed again since).
fn commit(input: Value) -> Outcome {
    let args: RefreshArgs = butler_store::args::parse(input)?;
    let ids = parse_ids(args.ids)?.unwrap_or_default();
    let Some(root) = root() else {
        return unavailable_answer();
    };
    let now = butler_store::time::now();
    let mut probe = Probe::new(root);
    let mut total = Moves::default();
    for id in &ids {
        let Some(card) = Card::load(id)? else { continue };
        if card.status != Status::Active {
            continue;
        }
        let moves = match refresh_card(&mut probe, &card, &now) {
            Ok(moves) => moves,
            // One unreadable verdict must not stop the others; it is left for the owner.
            Err(f) if f.code == "store_corrupt" => {
                host::warn(&format!("card {} not refreshed: {}", card.id, f.message));
                continue;
            }
            Err(f) => return Err(f),
        };
        total.checked += moves.checked;
        total.suspended += moves.suspended;
        total.restored += moves.restored;
    }
    if total.suspended + total.restored > 0 {
        rebuild_context();
    }
    // Bring the index up to date now, under the lock, rather than in the next search.
    if let Err(f) = Index::current() {
        host::warn(&format!("card index not updated: {}", f.message));
    }
    Ok(json!({"checked": total.checked, "suspended": total.suspended, "restored": total.restored}))
}

// ---------------------------------------------------------------------------------------
// set-checks

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SetChecksArgs {
    id: String,
    revision: u64,
    checks: Vec<Value>,
}

fn set_checks(input: Value) -> Outcome {
    let args: SetChecksArgs = butler_store::args::parse(input)?;
    let mut card =
        Card::load(&args.id)?.ok_or_else(|| Failure::not_found(format!("no card `{}`", clip(&args.id, 80))))?;
    if card.id != args.id {
        return Err(Failure::new(
            "store_corrupt",
            format!("the file of card `{}` declares the id `{}`", args.id, clip(&card.id, 80)),
        ));
    }
    if card.revision != args.revision {
        return Err(Failure::new(
            "stale_revision",
            format!("card `{}` is at revision {}, not {}", card.id, card.revision, args.revision),
        ));
    }
    let checks = parse_checks(args.checks)?;
    if card.content.kind == Kind::Profile && !checks.is_empty() {
        return Err(Failure::new("invalid_check", "the profile card takes no checks"));
    }
    let root = match root() {
        Some(root) => Some(root),
        None if checks.is_empty() => None,
        None => return Err(unavailable()),
    };
    if let Some(root) = root {
        let failing: Vec<String> = checks.iter().map(|c| evaluate(root, c)).filter_map(|e| e.reason()).collect();
        if !failing.is_empty() {
            return Err(Failure::new("checks_failed", failing.join("; ")));
        }
    }
    if card.checks != checks {
        card.checks = checks;
        card.save()?;
    }
    // The checks pass (or there are none): the verdict follows without reading them again.
    let now = butler_store::time::now();
    let previous = Verdict::load(&card.id)?;
    let failures = (!card.checks.is_empty()).then(Vec::new);
    if let Some(next) = next_verdict(&card, previous.as_ref(), failures, &now) {
        let changed = holds(previous.as_ref(), &card) != holds(Some(&next), &card);
        next.save()?;
        if changed {
            rebuild_context();
        }
    }
    Ok(json!({"id": card.id, "revision": card.revision, "checks": card.checks}))
}

// ---------------------------------------------------------------------------------------
// summary

fn summary() -> Outcome {
    let mut checked = 0;
    let mut unchecked = 0;
    let mut items = Vec::new();
    for card in Card::load_all()? {
        if card.status != Status::Active {
            continue;
        }
        let verdict = Verdict::load(&card.id).unwrap_or_else(|f| {
            host::warn(&format!("verdict of {}: {}", card.id, f.message));
            None
        });
        let current = verdict.as_ref().filter(|v| v.applies_to(&card));
        if !card.checks.is_empty() {
            if current.is_some() {
                checked += 1;
            } else {
                unchecked += 1;
            }
        }
        if holds(verdict.as_ref(), &card) {
            items.push(json!({"title": card.content.title, "preview": why_suspended(verdict.as_ref(), &card)}));
        }
    }
    let mut summary = format!("{checked} {} checked, {} suspended", cards_word(checked), items.len());
    if unchecked > 0 {
        summary.push_str(&format!(", {unchecked} not yet checked"));
    }
    if root().is_none() {
        summary.push_str(" (validity root unavailable)");
    }
    let status = if items.is_empty() { "ok" } else { "attention" };
    Ok(json!({"status": status, "summary": summary, "items": items}))
}

fn cards_word(n: usize) -> &'static str {
    if n == 1 { "card" } else { "cards" }
}

/// The first reason a suspended card is held: a failing check, else its conflict.
fn why_suspended(verdict: Option<&Verdict>, card: &Card) -> String {
    let reason = verdict.filter(|v| v.applies_to(card)).and_then(|v| v.reasons.first().cloned());
    let conflict = verdict.and_then(|v| v.conflict.as_ref()).map(|c| format!("conflict: {}", c.reason));
    reason.or(conflict).unwrap_or_else(|| "suspended".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use butler_store::card::Content;
    use butler_store::verdict::Conflict;

    fn card(checks: Vec<Check>) -> Card {
        let content = Content {
            kind: Kind::Knowledge,
            title: "T".into(),
            summary: "S".into(),
            body: "B".into(),
            applies_to: String::new(),
            tags: vec![],
            related: vec![],
        };
        Card {
            id: "c".into(),
            content_hash: content.hash(),
            content,
            status: Status::Active,
            revision: 2,
            scope: "local".into(),
            checks,
            evidence: vec![],
            created_at: String::new(),
            updated_at: String::new(),
            extra: serde_json::Map::new(),
        }
    }

    fn verdict(card: &Card, state: State, reasons: &[&str]) -> Verdict {
        Verdict {
            id: card.id.clone(),
            revision: card.revision,
            content_hash: card.content_hash.clone(),
            state,
            reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
            conflict: None,
            checked_at: "then".into(),
        }
    }

    struct TempRoot(std::path::PathBuf);

    impl TempRoot {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("butler-validity-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("docs/sub")).expect("temp dir");
            std::fs::write(dir.join("docs/a.md"), "Run  `cargo test`\n before\tevery commit.\n").expect("write");
            Self(dir)
        }
    }

    impl Drop for TempRoot {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn path_and_quote_checks() {
        let root = TempRoot::new("eval");
        let eval = |c: Check| evaluate(&root.0, &c).failure;
        assert_eq!(eval(Check::Path { path: "docs/a.md".into() }), None);
        assert_eq!(eval(Check::Path { path: "docs/b.md".into() }).as_deref(), Some("does not exist"));
        assert_eq!(eval(Check::Path { path: "docs/a.md/x".into() }).as_deref(), Some("does not exist"));
        assert_eq!(eval(Check::Path { path: "docs/sub".into() }).as_deref(), Some("is a directory, not a file"));
        assert_eq!(eval(Check::Quote { path: "docs/a.md".into(), text: "`cargo test` before every".into() }), None);
        let missing = eval(Check::Quote { path: "docs/a.md".into(), text: "cargo  build".into() });
        assert_eq!(missing.as_deref(), Some("does not contain the quoted text \"cargo build\""));
        assert_eq!(
            eval(Check::Quote { path: "docs/sub".into(), text: "x".into() }).as_deref(),
            Some("is a directory, not a file")
        );
        // Spelled escapes from a hand-edited card are refused before anything is opened.
        for bad in ["../a.md", "/etc/passwd", "docs/../../a.md"] {
            let reason = eval(Check::Path { path: bad.into() }).expect("fails");
            assert!(reason.starts_with("invalid check: "), "{reason}");
        }
    }

    #[test]
    fn check_lists_are_spell_checked() {
        for bad in [
            json!([{"type": "path", "path": "../x"}]),
            json!([{"type": "path", "path": "/etc/passwd"}]),
            json!([{"type": "path", "path": "docs/../../x"}]),
            json!([{"type": "quote", "path": "a", "text": " "}]),
            json!([{"type": "glob", "path": "a"}]),
            json!([{"type": "path", "path": "a", "extra": 1}]),
            json!([{"type": "quote", "path": "a"}]),
            json!(["a"]),
        ] {
            let Value::Array(list) = bad.clone() else { unreachable!() };
            assert_eq!(parse_checks(list).expect_err(&bad.to_string()).code, "invalid_check", "{bad}");
        }
        let many = vec![json!({"type": "path", "path": "a"}); MAX_CHECKS + 1];
        assert!(parse_checks(many).is_err());
        let ok = parse_checks(vec![json!({"type": "quote", "path": "docs/a.md", "text": "x"})]).expect("valid");
        assert_eq!(ok.len(), 1);
    }

    #[test]
    fn verdicts_are_written_only_on_change_and_keep_conflicts() {
        let c = card(vec![Check::Path { path: "a".into() }]);
        // First verdict, valid.
        let v = next_verdict(&c, None, Some(vec![]), "now").expect("written");
        assert_eq!((v.state, v.revision), (State::Valid, 2));
        // Unchanged: not rewritten.
        assert_eq!(next_verdict(&c, Some(&v), Some(vec![]), "later"), None);
        // Fails: suspended, with reasons.
        let s = next_verdict(&c, Some(&v), Some(vec!["a: does not exist".into()]), "later").expect("written");
        assert_eq!((s.state, s.reasons.len()), (State::Suspended, 1));
        assert!(!holds(Some(&v), &c) && holds(Some(&s), &c));
        // Other reasons: rewritten.
        assert!(next_verdict(&c, Some(&s), Some(vec!["a: is a directory, not a file".into()]), "x").is_some());
        // A verdict for another revision is replaced, even with the same answer.
        let mut old = verdict(&c, State::Valid, &[]);
        old.revision = 1;
        assert_eq!(next_verdict(&c, Some(&old), Some(vec![]), "x").map(|v| v.revision), Some(2));
        old.revision = 2;
        old.content_hash = "other".into();
        assert!(next_verdict(&c, Some(&old), Some(vec![]), "x").is_some());
        // A conflict survives every rewrite.
        let mut conflicted = verdict(&c, State::Valid, &[]);
        conflicted.conflict = Some(Conflict { candidate: "cand-1".into(), reason: "outdated".into() });
        let next = next_verdict(&c, Some(&conflicted), Some(vec!["a: gone".into()]), "x").expect("written");
        assert_eq!(next.conflict, conflicted.conflict);
        assert!(holds(Some(&conflicted), &c));
    }

    #[test]
    fn cards_without_checks() {
        let c = card(vec![]);
        // No verdict needed.
        assert_eq!(next_verdict(&c, None, None, "x"), None);
        // A stale verdict (other revision) with a conflict is kept as it is.
        let mut stale = verdict(&c, State::Suspended, &["a: gone"]);
        stale.revision = 1;
        stale.conflict = Some(Conflict { candidate: "cand-1".into(), reason: "r".into() });
        assert_eq!(next_verdict(&c, Some(&stale), None, "x"), None);
        assert!(holds(Some(&stale), &c));
        // A current failing verdict whose checks were removed is cleared (conflict kept).
        let mut failing = verdict(&c, State::Suspended, &["a: gone"]);
        failing.conflict = stale.conflict.clone();
        let cleared = next_verdict(&c, Some(&failing), None, "x").expect("written");
        assert_eq!((cleared.state, cleared.reasons.len()), (State::Valid, 0));
        assert_eq!(cleared.conflict, stale.conflict);
        // A current valid verdict stays.
        assert_eq!(next_verdict(&c, Some(&verdict(&c, State::Valid, &[])), None, "x"), None);
    }

    #[test]
    fn one_missing_file_named_by_two_checks_is_one_reason() {
        let root = std::env::temp_dir();
        let gone = "butler-validity-test-no-such-file.md".to_owned();
        let checks = [
            Check::Path { path: gone.clone() },
            Check::Quote { path: gone.clone(), text: "anything".into() },
            Check::Quote { path: gone.clone(), text: "something else".into() },
        ];
        let reasons = failures(&mut Probe::new(&root), &checks).expect("checks ran");
        assert_eq!(reasons, [format!("{gone}: does not exist")]);
    }

    #[test]
    fn suspension_reasons() {
        let c = card(vec![]);
        let failing = verdict(&c, State::Suspended, &["a: gone", "b: gone"]);
        assert_eq!(why_suspended(Some(&failing), &c), "a: gone");
        let mut conflicted = verdict(&c, State::Valid, &[]);
        conflicted.conflict = Some(Conflict { candidate: "x".into(), reason: "superseded".into() });
        assert_eq!(why_suspended(Some(&conflicted), &c), "conflict: superseded");
    }
}
