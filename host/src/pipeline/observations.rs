//! Observations: the command that takes them (the one whose manifest says `"takes":
//! "observations"`), and what the host witnesses itself, recorded through it with
//! `source=butler` and `ref=butler://<subject>`:
//! - a hosted item's failure exit (`type=error`, `tool:<id>` or `service:<id>`), with its
//!   exit code and the next restart delay;
//! - an extension added or removed by a rescan (`type=note`, `catalog:<id>`) — not the
//!   first scan, and not a `.wasm` that only finished compiling.
//!
//! Manual stops and restarts are not failures and never reach here. Recording runs on its
//! own task: a failing journal is logged and never slows supervision or the catalog.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::catalog::{Catalog, CatalogHandle, Kind, Severity};
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
        loop {
            match events.recv().await {
                Ok(event) => on_event(failure(&event)).await,
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
                let next = Seen::of(&snapshot);
                let mut seen = seen.lock().await;
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

/// The observation of a failure exit.
fn failure(event: &Event) -> Value {
    let Event::Failed { kind, id, code, restart_in } = event;
    let what = match kind {
        Kind::Service => format!("service {id} crashed with exit code {code}"),
        _ => format!("{} {id} exited unexpectedly with exit code {code}", kind.as_str()),
    };
    let next = match restart_in {
        Some(delay) => format!("; restarting in {} ms", delay.as_millis()),
        None => "; not restarted (its restart policy)".to_owned(),
    };
    let subject = format!("{}:{id}", kind.as_str());
    json!({
        "source": "butler",
        "type": "error",
        "tags": [subject, format!("exit-code:{code}")],
        "text": format!("{what}{next}"),
        "ref": format!("butler://{subject}"),
    })
}

/// What a snapshot registers, by id, and which paths wait for their compile.
struct Seen {
    extensions: BTreeMap<String, (Kind, String)>,
    pending: BTreeSet<String>,
}

impl Seen {
    fn of(catalog: &Catalog) -> Self {
        Self {
            extensions: catalog.extensions.iter().map(|e| (e.id().to_owned(), (e.kind(), e.display_path()))).collect(),
            pending: catalog
                .diagnostics
                .iter()
                .filter(|d| d.severity == Severity::Pending)
                .map(|d| d.path.clone())
                .collect(),
        }
    }

    /// Notes for what `next` added or removed. An extension whose `.wasm` was compiling is
    /// not new: it was found by an earlier scan.
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
            .filter(|(id, (_, path))| !self.extensions.contains_key(*id) && !self.pending.contains(path));
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
