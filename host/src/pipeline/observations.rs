//! Observations: the command that takes them (the one whose manifest says `"takes":
//! "observations"`), and what the host witnesses itself, recorded through it with
//! `source=butler` and `ref=butler://<subject>`:
//! - a hosted item's failures (`type=error`, `tool:<id>` or `service:<id>`), one per change
//!   of state ([`CrashLoops`]): its first failure exit, with its exit code and the next
//!   restart delay; while it keeps failing, "still crash-looping" at most once per
//!   reporting period (1 minute, doubling to [`REPORT_CAP`]); a failure after which it is
//!   not restarted; and its recovery (`type=note`) once a restarted run lasts
//!   [`STABLE_RUN`] without failing;
//! - an extension added or removed by a rescan (`type=note`, `catalog:<id>`) — not what
//!   the first scan found, also once a component it found compiling is ready; a component
//!   dropped in later is added when it registers, after its compile.
//!
//! Manual stops and restarts are not failures and never reach here. Recording runs on its
//! own task: a failing journal is logged and never slows supervision or the catalog.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::catalog::{Catalog, CatalogHandle, Kind, Severity};
use crate::supervise::policy::STABLE_RUN;
use crate::supervise::{Event, Supervisor};
use butler_faculty::{CallContext, CallError, FacultyRuntime};

/// The deadline of an observation taken now: the taking faculty's `timeoutMs` from now.
#[must_use]
pub fn deadline(runtime: &FacultyRuntime) -> std::time::Instant {
    match runtime.declared().observations.as_ref() {
        Some((faculty, _)) => runtime.deadline_for(faculty),
        None => std::time::Instant::now() + std::time::Duration::from_millis(butler_faculty::DEFAULT_TIMEOUT_MS),
    }
}

/// Hands `observation` to the command that takes observations; while faculties are still
/// being compiled, waits for one to declare it (within the call's deadline).
///
/// # Errors
/// [`CallError::NotServed`] when no faculty takes observations; the command's own errors.
pub fn take(runtime: &FacultyRuntime, observation: &Value, context: &CallContext) -> Result<Value, CallError> {
    let deadline = context.deadline().unwrap_or_else(|| deadline(runtime));
    let (faculty, command) =
        runtime.declared_by(deadline, |d| d.observations.clone()).ok_or(CallError::NotServed("observations"))?;
    runtime.invoke_json(&faculty, &command, observation, context)
}

/// Records supervision failures and rescan changes from now on.
pub async fn spawn(runtime: Arc<FacultyRuntime>, supervisor: &Supervisor, catalog: &CatalogHandle) {
    let record = move |observation: Value| {
        let runtime = Arc::clone(&runtime);
        async move {
            let context = CallContext::top(false).until(deadline(&runtime));
            let call_deadline = context.deadline();
            let taker = Arc::clone(&runtime);
            if let Err(e) = runtime.blocking(call_deadline, move || take(&taker, &observation, &context)).await {
                tracing::warn!("cannot record an observation: {e}");
            }
        }
    };

    let mut events = supervisor.events();
    let on_event = record.clone();
    tokio::spawn(async move {
        let mut loops = CrashLoops::default();
        loop {
            let due = loops.next_recovery().map(tokio::time::Instant::from_std);
            let received = tokio::select! {
                received = events.recv() => received,
                () = sleep_until(due) => {
                    for observation in loops.recovered(Instant::now()) {
                        on_event(observation).await;
                    }
                    continue;
                }
            };
            match received {
                Ok(event) => {
                    if let Some(observation) = loops.on_event(&event, Instant::now()) {
                        on_event(observation).await;
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!("{n} supervision events were not recorded (the observer fell behind)")
                }
                Err(RecvError::Closed) => break,
            }
        }
    });

    // What the previous snapshot registered; the first one only sets it.
    let seen: Arc<tokio::sync::Mutex<Option<Seen>>> = Arc::default();
    catalog
        .follow_with(move |snapshot| {
            let (seen, record) = (Arc::clone(&seen), record.clone());
            async move {
                let mut seen = seen.lock().await;
                let next = Seen::after(seen.as_ref(), &snapshot);
                if let Some(before) = seen.as_ref() {
                    for observation in before.changes(&next) {
                        record(observation).await;
                    }
                }
                *seen = Some(next);
            }
        })
        .await;
}

/// How long after a first failure a crash loop is first reported again; the period then
/// doubles up to [`REPORT_CAP`].
pub const FIRST_REPORT_AFTER: Duration = Duration::from_secs(60);
/// The longest a crash loop goes unreported.
pub const REPORT_CAP: Duration = Duration::from_secs(3600);
/// A failure this long after the last one starts a new loop (the item ran, or was stopped,
/// in between).
const LOOP_GAP: Duration = Duration::from_secs(300);

/// The hosted items that keep failing, so that the journal gets one observation per
/// change of state rather than one per exit.
#[derive(Debug, Default)]
pub struct CrashLoops {
    loops: HashMap<String, Loop>,
}

#[derive(Debug)]
struct Loop {
    /// When the loop began (wall clock, milliseconds), for the text.
    began_ms: u64,
    /// Failures since it began.
    failures: u32,
    last_failure: Instant,
    next_report: Instant,
    period: Duration,
    /// When the run its restart policy started counts as a recovery, if it lasts.
    recovers_at: Option<(Instant, u32)>,
}

impl CrashLoops {
    /// The observation `event` makes at `now`, if any.
    pub fn on_event(&mut self, event: &Event, now: Instant) -> Option<Value> {
        match event {
            Event::Failed { kind, id, code, restart_in } => {
                let subject = format!("{}:{id}", kind.as_str());
                let current = self.loops.get_mut(&subject).filter(|l| now.duration_since(l.last_failure) < LOOP_GAP);
                let Some(current) = current else {
                    let began_ms = butler_catalog::time::now_ms();
                    let next_report = now + FIRST_REPORT_AFTER;
                    let period = FIRST_REPORT_AFTER;
                    let fresh =
                        Loop { began_ms, failures: 1, last_failure: now, next_report, period, recovers_at: None };
                    self.loops.insert(subject, fresh);
                    return Some(failure(*kind, id, *code, *restart_in));
                };
                current.failures += 1;
                current.last_failure = now;
                current.recovers_at = None;
                if restart_in.is_none() {
                    // Not restarted: the loop ends here, down.
                    self.loops.remove(&subject);
                    return Some(failure(*kind, id, *code, *restart_in));
                }
                if now < current.next_report {
                    return None;
                }
                current.period = (current.period * 2).min(REPORT_CAP);
                current.next_report = now + current.period;
                let since = butler_catalog::time::rfc3339(current.began_ms);
                let text = format!(
                    "{} {id} is still crash-looping: {} failures since {since}; the last exit code was {code}",
                    kind.as_str(),
                    current.failures
                );
                Some(observation(&subject, "error", &[format!("exit-code:{code}")], text))
            }
            Event::Restarted { kind, id, restarts } => {
                if let Some(current) = self.loops.get_mut(&format!("{}:{id}", kind.as_str())) {
                    current.recovers_at = Some((now + STABLE_RUN, *restarts));
                }
                None
            }
        }
    }

    /// When the next restarted run counts as a recovery, if one is running.
    #[must_use]
    pub fn next_recovery(&self) -> Option<Instant> {
        self.loops.values().filter_map(|l| l.recovers_at.map(|(at, _)| at)).min()
    }

    /// The recoveries due at `now`: each loop whose restarted run has lasted ends.
    pub fn recovered(&mut self, now: Instant) -> Vec<Value> {
        let due: Vec<String> = self
            .loops
            .iter()
            .filter(|(_, l)| l.recovers_at.is_some_and(|(at, _)| at <= now))
            .map(|(subject, _)| subject.clone())
            .collect();
        due.into_iter()
            .filter_map(|subject| {
                let ended = self.loops.remove(&subject)?;
                let restarts = ended.recovers_at.map_or(0, |(_, n)| n);
                let since = butler_catalog::time::rfc3339(ended.began_ms);
                let (kind, id) = subject.split_once(':').unwrap_or(("item", subject.as_str()));
                let text = format!(
                    "{kind} {id} recovered: running for {} s after {} failures since {since} ({restarts} restarts)",
                    STABLE_RUN.as_secs(),
                    ended.failures
                );
                Some(observation(&subject, "note", &[], text))
            })
            .collect()
    }
}

/// Sleeps until `at`; never, without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// An observation the host makes about `subject`.
fn observation(subject: &str, kind: &str, tags: &[String], text: String) -> Value {
    let mut all = vec![subject.to_owned()];
    all.extend(tags.iter().cloned());
    json!({"source": "butler", "type": kind, "tags": all, "text": text, "ref": format!("butler://{subject}")})
}

/// The observation of a failure exit.
fn failure(kind: Kind, id: &str, code: i32, restart_in: Option<Duration>) -> Value {
    let what = match kind {
        Kind::Service => format!("service {id} crashed with exit code {code}"),
        _ => format!("{} {id} exited unexpectedly with exit code {code}", kind.as_str()),
    };
    let next = match restart_in {
        Some(delay) => format!("; restarting in {} ms", delay.as_millis()),
        None => "; not restarted (its restart policy)".to_owned(),
    };
    let subject = format!("{}:{id}", kind.as_str());
    observation(&subject, "error", &[format!("exit-code:{code}")], format!("{what}{next}"))
}

/// What a snapshot registers, by id, and which paths the first snapshot found compiling
/// and still wait for their compile.
#[derive(Debug)]
struct Seen {
    extensions: BTreeMap<String, (Kind, String)>,
    found_at_start: BTreeSet<String>,
}

impl Seen {
    /// What `catalog` registers; after `before`, or as the first snapshot (whose pending
    /// components were found at start, not added).
    fn after(before: Option<&Self>, catalog: &Catalog) -> Self {
        let pending = catalog.diagnostics.iter().filter(|d| d.severity == Severity::Pending).map(|d| d.path.clone());
        let found_at_start = match before {
            None => pending.collect(),
            Some(before) => pending.filter(|path| before.found_at_start.contains(path)).collect(),
        };
        Self {
            extensions: catalog.extensions.iter().map(|e| (e.id().to_owned(), (e.kind(), e.display_path()))).collect(),
            found_at_start,
        }
    }

    /// Notes for what `next` added or removed. A component the first snapshot found
    /// compiling is not new when it registers; one dropped in later is.
    fn changes(&self, next: &Self) -> Vec<Value> {
        let note = |id: &str, kind: Kind, text: String| {
            json!({
                "source": "butler",
                "type": "note",
                "tags": [format!("catalog:{id}"), kind.as_str()],
                "text": text,
                "ref": format!("butler://catalog:{id}"),
            })
        };
        let added = next
            .extensions
            .iter()
            .filter(|(id, (_, path))| !self.extensions.contains_key(*id) && !self.found_at_start.contains(path));
        let removed = self.extensions.iter().filter(|(id, _)| !next.extensions.contains_key(*id));
        added
            .map(|(id, (kind, path))| note(id, *kind, format!("{} {id} was added ({path})", kind.as_str())))
            .chain(
                removed
                    .map(|(id, (kind, path))| note(id, *kind, format!("{} {id} was removed ({path})", kind.as_str()))),
            )
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(code: i32, restart_in: Option<u64>) -> Event {
        let restart_in = restart_in.map(Duration::from_secs);
        Event::Failed { kind: Kind::Tool, id: "crashy".to_owned(), code, restart_in }
    }

    #[test]
    fn an_hour_of_crash_looping_is_a_handful_of_observations_then_one_recovery() {
        let mut loops = CrashLoops::default();
        let start = Instant::now();
        let mut texts = Vec::new();
        // A crash every 30 s (the backoff cap) for an hour.
        for i in 0..120u64 {
            if let Some(o) = loops.on_event(&failed(3, Some(30)), start + Duration::from_secs(30 * i)) {
                texts.push(o["text"].as_str().unwrap_or_default().to_owned());
            }
        }
        assert!(texts[0].starts_with("tool crashy exited unexpectedly with exit code 3"), "{texts:?}");
        assert!(texts[1..].iter().all(|t| t.starts_with("tool crashy is still crash-looping: ")), "{texts:?}");
        // Reported after 1, 3, 7, 15 and 31 minutes: six in the hour instead of 120.
        assert_eq!(texts.len(), 6, "{texts:?}");
        assert!(texts[5].contains(" 63 failures since "), "{texts:?}");

        // Restarted, it fails again before it lasts: no recovery.
        let restarted = |restarts| Event::Restarted { kind: Kind::Tool, id: "crashy".to_owned(), restarts };
        let at = start + Duration::from_secs(3600);
        assert_eq!(loops.on_event(&restarted(120), at), None);
        assert_eq!(loops.next_recovery(), Some(at + STABLE_RUN));
        assert!(loops.recovered(at + STABLE_RUN - Duration::from_secs(1)).is_empty(), "not yet");
        assert_eq!(loops.on_event(&failed(3, Some(30)), at + Duration::from_secs(5)), None);
        assert_eq!(loops.next_recovery(), None, "that run did not last");
        // Restarted again, it lasts: one recovery, and the loop is over.
        let at = at + Duration::from_secs(35);
        assert_eq!(loops.on_event(&restarted(121), at), None);
        let recovered = loops.recovered(at + STABLE_RUN);
        let [recovered] = &recovered[..] else { panic!("one recovery: {recovered:?}") };
        assert_eq!(recovered["type"], "note");
        let text = recovered["text"].as_str().unwrap_or_default();
        assert!(text.starts_with("tool crashy recovered: ") && text.contains("121 failures"), "{text}");
        assert!(loops.recovered(at + STABLE_RUN * 2).is_empty() && loops.next_recovery().is_none());
        // A restart with no loop behind it says nothing.
        assert_eq!(loops.on_event(&restarted(1), at + STABLE_RUN * 3), None);
        assert_eq!(loops.next_recovery(), None);
    }

    #[test]
    fn a_failure_after_which_it_stays_down_and_a_later_new_loop_are_each_reported() {
        let mut loops = CrashLoops::default();
        let start = Instant::now();
        assert!(loops.on_event(&failed(1, Some(1)), start).is_some(), "the first failure");
        assert!(loops.on_event(&failed(1, Some(2)), start + Duration::from_secs(2)).is_none());
        let down = loops.on_event(&failed(1, None), start + Duration::from_secs(5)).expect("not restarted");
        assert!(down["text"].as_str().is_some_and(|t| t.contains("not restarted")), "{down}");
        // Much later, failing again is a new loop's first failure.
        let again = loops.on_event(&failed(2, Some(1)), start + Duration::from_secs(4000)).expect("a new loop");
        assert!(again["text"].as_str().is_some_and(|t| t.contains("exited unexpectedly with exit code 2")), "{again}");
    }

    /// A catalog registering tools `ids` (scanned from a temp instance), with the
    /// manifests at `pending` listed as compiling.
    fn catalog(ids: &[&str], pending: &[&str]) -> Catalog {
        let dir = tempfile::tempdir().expect("temp dir");
        for id in ids {
            let folder = dir.path().join("tools").join(id);
            std::fs::create_dir_all(&folder).expect("mkdir");
            let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id});
            std::fs::write(folder.join("butler.json"), manifest.to_string()).expect("manifest");
        }
        let config = crate::catalog::ScanConfig {
            instance_root: dir.path().to_owned(),
            roots: vec![dir.path().join("tools")],
            inspector: None,
            own_listeners: Vec::new(),
        };
        let mut catalog = crate::catalog::scan(&config, None);
        assert!(catalog.diagnostics.is_empty(), "{:?}", catalog.diagnostics);
        catalog.diagnostics = pending
            .iter()
            .map(|path| {
                crate::catalog::Diagnostic::single(
                    (*path).to_owned(),
                    None,
                    Severity::Pending,
                    "",
                    "compiling".to_owned(),
                )
            })
            .collect();
        catalog
    }

    #[test]
    fn a_component_dropped_in_is_added_once_compiled_but_one_found_at_start_is_not() {
        let (early, late) = ("tools/early/butler.json", "tools/late/butler.json");
        let start = Seen::after(None, &catalog(&[], &[early]));
        let dropped = Seen::after(Some(&start), &catalog(&[], &[early, late]));
        assert!(start.changes(&dropped).is_empty(), "nothing registered yet");
        let compiled = Seen::after(Some(&dropped), &catalog(&["early", "late"], &[]));
        let notes = dropped.changes(&compiled);
        let texts: Vec<&str> = notes.iter().filter_map(|n| n["text"].as_str()).collect();
        assert_eq!(texts, ["tool late was added (tools/late/butler.json)"], "{notes:?}");
        assert_eq!(notes[0]["ref"], "butler://catalog:late");
        // Removed later, then dropped in again: removed, then added again.
        let removed = Seen::after(Some(&compiled), &catalog(&["early"], &[]));
        let texts = compiled.changes(&removed);
        assert_eq!(texts[0]["text"], "tool late was removed (tools/late/butler.json)");
        let again = Seen::after(Some(&removed), &catalog(&["early", "late"], &[]));
        assert_eq!(removed.changes(&again)[0]["text"], "tool late was added (tools/late/butler.json)");
    }
}
