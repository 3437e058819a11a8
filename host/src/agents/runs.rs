//! The runs of delegations: every delegation the host ran, with its step — status, result,
//! timestamps and, for `risk: "confirm"`, the owner's decision. Each run is one file,
//! `<stateDir>/runs/<runId>.json`, written atomically, so a step awaiting the owner's
//! confirmation survives a restart of the host; a run a stopped host left running is
//! marked failed when the store opens. The newest [`MAX_RUNS`] are kept.
//!
//! A caller blocked on a step awaiting confirmation is woken by the owner's decision.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use butler_catalog::lock;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

/// The most runs kept; beyond, the oldest finished ones are removed.
pub const MAX_RUNS: usize = 500;
/// The folder under the state directory.
pub const RUNS_DIR: &str = "runs";
/// A run file larger than this is not read (a result is at most the body limit).
const MAX_RUN_BYTES: u64 = 4 * 1024 * 1024;

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Its agent session runs.
    Running,
    /// Its result waits for the owner.
    AwaitingConfirmation,
    /// The owner confirmed it: the result was given to the caller.
    Confirmed,
    /// The owner rejected it.
    Rejected,
    /// Its result was given to the caller (`risk: "auto"`).
    Completed,
    /// No result: the agent failed, exited, or ran out of time.
    Failed,
}

impl Status {
    /// Whether nothing more happens to a step in this state.
    #[must_use]
    pub fn finished(self) -> bool {
        !matches!(self, Self::Running | Self::AwaitingConfirmation)
    }
}

/// One step of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// `delegation`.
    pub kind: String,
    /// `auto` or `confirm`.
    pub risk: butler_catalog::manifest::Risk,
    /// Where it stands.
    pub status: Status,
    /// The agent session that ran it (its log: `logs/agent-<session>.log`).
    pub session: Option<String>,
    /// What the session submitted, checked against the delegation's result schema.
    pub result: Option<Value>,
    /// Why there is no result: `{code, message}`.
    pub error: Option<Value>,
    /// When it started, and ended.
    pub started_at: String,
    /// See `started_at`.
    pub ended_at: Option<String>,
    /// When the owner decided, and why (a rejection's reason).
    pub decided_at: Option<String>,
    /// See `decided_at`.
    pub reason: Option<String>,
}

/// One delegation the host ran: what delegated it, its status and its steps, as kept in
/// `<stateDir>/runs/<runId>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// Its id: the file name under `<stateDir>/runs/`, without `.json`.
    pub id: String,
    /// The extension that delegated.
    pub extension: String,
    /// Its delegation's id.
    pub delegation: String,
    /// Its status: its last step's.
    pub status: Status,
    /// When it was created.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// Its steps (one per delegation today).
    pub steps: Vec<Step>,
}

/// The owner's decision on a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Confirmed.
    Confirmed,
    /// Rejected, with the reason given.
    Rejected(Option<String>),
}

/// Why a run could not be changed or read.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No such run or step.
    #[error("no run `{0}`")]
    Unknown(String),
    /// The step does not await a decision.
    #[error("step {step} of run `{run}` is {status:?}, not awaiting confirmation")]
    #[allow(missing_docs)] // the fields are the parts of the message
    NotPending { run: String, step: usize, status: Status },
    /// The file could not be written.
    #[error("the run could not be saved: {0}")]
    Io(#[from] std::io::Error),
}

/// The runs on disk (`<stateDir>/runs/`), the newest [`MAX_RUNS`] of them, and the callers
/// waiting on a step's confirmation.
pub struct Runs {
    dir: PathBuf,
    /// Counts the writes, so a watcher (the console's live updates) knows when to look.
    generation: std::sync::atomic::AtomicU64,
    /// Serializes the read-modify-write of run files (never held across an await).
    writing: Mutex<()>,
    waiting: Mutex<HashMap<String, watch::Sender<Option<Decision>>>>,
}

impl Runs {
    /// The store in `state_dir`; runs a stopped host left running are marked failed.
    #[must_use]
    pub fn open(state_dir: &Path) -> Self {
        let runs = Self {
            dir: state_dir.join(RUNS_DIR),
            generation: std::sync::atomic::AtomicU64::new(0),
            writing: Mutex::default(),
            waiting: Mutex::default(),
        };
        for mut run in runs.all() {
            if run.status == Status::Running {
                let now = now();
                for step in run.steps.iter_mut().filter(|s| s.status == Status::Running) {
                    step.status = Status::Failed;
                    step.ended_at = Some(now.clone());
                    step.error = Some(
                        serde_json::json!({"code": "host_stopped", "message": "the host stopped while the agent session ran"}),
                    );
                }
                run.status = Status::Failed;
                run.updated_at = now;
                if let Err(e) = runs.save(&run) {
                    tracing::warn!(run = run.id, "cannot mark the interrupted run failed: {e}");
                }
            }
        }
        runs
    }

    /// A new run of `extension`'s `delegation`, its one step running.
    ///
    /// # Errors
    /// When it cannot be saved.
    pub fn start(
        &self,
        extension: &str,
        delegation: &str,
        risk: butler_catalog::manifest::Risk,
    ) -> Result<Run, RunError> {
        let now = now();
        let suffix = crate::instance::owner::random_secret()?;
        let run = Run {
            id: format!("r{}-{}", butler_catalog::time::now_ms(), &suffix[..8]),
            extension: extension.to_owned(),
            delegation: delegation.to_owned(),
            status: Status::Running,
            created_at: now.clone(),
            updated_at: now.clone(),
            steps: vec![Step {
                kind: "delegation".to_owned(),
                risk,
                status: Status::Running,
                session: None,
                result: None,
                error: None,
                started_at: now,
                ended_at: None,
                decided_at: None,
                reason: None,
            }],
        };
        self.save(&run)?;
        self.prune();
        Ok(run)
    }

    /// Changes run `id` with `change` and saves it.
    ///
    /// # Errors
    /// An unknown run, what `change` refuses, or a failed write.
    pub fn update(&self, id: &str, change: impl FnOnce(&mut Run) -> Result<(), RunError>) -> Result<Run, RunError> {
        let _writing = lock(&self.writing);
        let mut run = self.get(id).ok_or_else(|| RunError::Unknown(id.to_owned()))?;
        change(&mut run)?;
        run.status = run.steps.last().map_or(Status::Failed, |s| s.status);
        run.updated_at = now();
        self.write(&run)?;
        Ok(run)
    }

    /// The owner's decision on step `index` of run `id`; wakes a caller waiting for it.
    ///
    /// # Errors
    /// An unknown run or step, a step not awaiting confirmation, a failed write.
    pub fn decide(&self, id: &str, index: usize, decision: &Decision) -> Result<Run, RunError> {
        let run = self.update(id, |run| {
            let step = run.steps.get_mut(index).ok_or_else(|| RunError::Unknown(format!("{id}/steps/{index}")))?;
            if step.status != Status::AwaitingConfirmation {
                return Err(RunError::NotPending { run: id.to_owned(), step: index, status: step.status });
            }
            step.status = match decision {
                Decision::Confirmed => Status::Confirmed,
                Decision::Rejected(_) => Status::Rejected,
            };
            step.decided_at = Some(now());
            if let Decision::Rejected(reason) = decision {
                step.reason.clone_from(reason);
            }
            Ok(())
        })?;
        if let Some(waiter) = lock(&self.waiting).remove(id) {
            let _ = waiter.send(Some(decision.clone()));
        }
        Ok(run)
    }

    /// A receiver told of the owner's decision on run `id` (register before the step is
    /// saved as awaiting, so no decision can slip between).
    pub fn watch(&self, id: &str) -> watch::Receiver<Option<Decision>> {
        let (sender, receiver) = watch::channel(None);
        lock(&self.waiting).insert(id.to_owned(), sender);
        receiver
    }

    /// Stops waiting for run `id` (its caller went away or gave up).
    pub fn unwatch(&self, id: &str) {
        lock(&self.waiting).remove(id);
    }

    /// Run `id`.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<Run> {
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return None;
        }
        read(&self.dir.join(format!("{id}.json")))
    }

    /// Every run, newest first.
    #[must_use]
    pub fn all(&self) -> Vec<Run> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut runs: Vec<Run> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .filter_map(|p| read(&p))
            .collect();
        runs.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| b.id.cmp(&a.id)));
        runs
    }

    fn save(&self, run: &Run) -> Result<(), RunError> {
        let _writing = lock(&self.writing);
        self.write(run)
    }

    fn write(&self, run: &Run) -> Result<(), RunError> {
        butler_catalog::files::create_private_dir(&self.dir)?;
        let text = serde_json::to_vec_pretty(run).map_err(std::io::Error::other)?;
        butler_catalog::files::write_private(&self.dir.join(format!("{}.json", run.id)), &text)?;
        self.generation.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// How many times a run was written since the store opened.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Removes the oldest finished runs beyond [`MAX_RUNS`].
    fn prune(&self) {
        let runs = self.all();
        if runs.len() <= MAX_RUNS {
            return;
        }
        let _writing = lock(&self.writing);
        let excess = runs.len() - MAX_RUNS;
        for run in runs.iter().rev().filter(|r| r.status.finished()).take(excess) {
            let _ = std::fs::remove_file(self.dir.join(format!("{}.json", run.id)));
        }
    }
}

fn read(path: &Path) -> Option<Run> {
    let file = std::fs::File::open(path).ok()?;
    if file.metadata().ok()?.len() > MAX_RUN_BYTES {
        return None;
    }
    serde_json::from_reader(std::io::BufReader::new(file)).ok()
}

fn now() -> String {
    butler_catalog::time::rfc3339(butler_catalog::time::now_ms())
}

#[cfg(test)]
mod tests {
    use super::*;
    use butler_catalog::manifest::Risk;

    #[test]
    fn a_step_is_decided_once_and_its_waiter_told() {
        let dir = tempfile::tempdir().expect("as the test set it up");
        let runs = Runs::open(dir.path());
        let run = runs.start("ext", "judge", Risk::Confirm).expect("as the test set it up");
        let refused = runs.decide(&run.id, 0, &Decision::Confirmed);
        assert!(matches!(refused, Err(RunError::NotPending { status: Status::Running, .. })), "{refused:?}");
        let mut told = runs.watch(&run.id);
        runs.update(&run.id, |run| {
            run.steps[0].status = Status::AwaitingConfirmation;
            Ok(())
        })
        .expect("as the test set it up");
        let decided = runs.decide(&run.id, 0, &Decision::Rejected(Some("no".into()))).expect("as the test set it up");
        assert_eq!((decided.status, decided.steps[0].reason.as_deref()), (Status::Rejected, Some("no")));
        assert_eq!(*told.borrow_and_update(), Some(Decision::Rejected(Some("no".into()))));
        assert!(runs.decide(&run.id, 0, &Decision::Confirmed).is_err(), "decided once");
        assert!(runs.decide(&run.id, 1, &Decision::Confirmed).is_err(), "no such step");
        assert!(runs.get("../x").is_none() && runs.get("").is_none());
    }

    #[test]
    fn a_run_left_running_by_a_stopped_host_is_failed_at_open() {
        let dir = tempfile::tempdir().expect("as the test set it up");
        let id = Runs::open(dir.path()).start("ext", "judge", Risk::Auto).expect("as the test set it up").id;
        let reopened = Runs::open(dir.path());
        let run = reopened.get(&id).expect("as the test set it up");
        assert_eq!(run.status, Status::Failed);
        assert_eq!(run.steps[0].error.as_ref().expect("as the test set it up")["code"], "host_stopped");
    }
}
