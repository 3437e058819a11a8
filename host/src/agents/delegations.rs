//! Delegations: an extension's judgement step (`delegations[]` in its manifest), run as a
//! fresh agent session that may use only the declared `tools` (default `glob` and `grep`,
//! read-only search of the validity root) and hands its result back through the submit
//! tool, checked against the declared `result` schema.
//!
//! `risk: "auto"` gives the result to the caller at once; `risk: "confirm"` parks it as a
//! run step awaiting the owner ([`super::runs`]) and gives it to the caller only once the
//! owner confirms — waiting at most [`CONFIRM_WAIT`]; the step stays pending after that and
//! its result is read from the run. Each delegation runs on a task of its own, so a caller
//! that goes away neither leaves the agent running nor loses the run's record.

use std::sync::Arc;
use std::time::Duration;

use butler_catalog::Catalog;
use butler_catalog::manifest::Risk;
use serde_json::{Value, json};

use super::runs::{Decision, RunError, Runs, Status};
use super::{AgentError, Agents, Purpose, Task, Tools};
use crate::notify::Notifier;

/// The tools a delegation that declares none may use.
pub const DEFAULT_TOOLS: &[&str] = &["glob", "grep"];
/// How long a caller waits for the owner's confirmation before it is told the step is
/// still pending.
pub const CONFIRM_WAIT: Duration = Duration::from_secs(3600);

/// Why a delegation gave no result.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum DelegationError {
    /// No such extension.
    #[error("no extension `{0}` in the catalog")]
    UnknownExtension(String),
    /// No such delegation.
    #[error("the extension `{extension}` declares no delegation `{id}`")]
    UnknownDelegation { extension: String, id: String },
    /// The agent session gave none.
    #[error("{error} (run {run})")]
    Agent {
        /// The run that records it.
        run: String,
        error: AgentError,
    },
    /// No agent, or too many sessions (no run was recorded).
    #[error("{0}")]
    NotStarted(AgentError),
    /// The owner rejected it.
    #[error("the owner rejected the result of run {run}{}", reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default())]
    Rejected { run: String, reason: Option<String> },
    /// The owner did not decide within [`CONFIRM_WAIT`].
    #[error(
        "the result of run {run} still awaits the owner's confirmation after {} minutes; read it later with GET /runs/{run}", CONFIRM_WAIT.as_secs() / 60
    )]
    StillPending { run: String },
    /// The run could not be recorded.
    #[error("{0}")]
    Store(#[from] RunError),
}

/// A delegation's result, and the run that records it.
#[derive(Debug, Clone)]
pub struct Delegated {
    /// The id of the run that records it.
    pub run: String,
    /// The session's result, adopted (after the owner confirmed, for a `confirm` delegation).
    pub result: Value,
}

/// Runs delegations.
pub struct Delegations {
    agents: Arc<Agents>,
    runs: Arc<Runs>,
    notifier: Notifier,
}

impl Delegations {
    /// Delegations run by `agents`, recorded in `runs`, a pending confirmation told through
    /// `notifier`.
    #[must_use]
    pub fn new(agents: Arc<Agents>, runs: Arc<Runs>, notifier: Notifier) -> Self {
        Self { agents, runs, notifier }
    }

    /// The store of the runs these delegations record, which `/runs` and the owner's
    /// confirmations read.
    #[must_use]
    pub fn runs(&self) -> &Arc<Runs> {
        &self.runs
    }

    /// Runs `extension`'s delegation `id` on `input`, to its result.
    ///
    /// # Errors
    /// See [`DelegationError`].
    pub async fn delegate(
        &self,
        catalog: &Catalog,
        extension: &str,
        id: &str,
        input: Value,
    ) -> Result<Delegated, DelegationError> {
        let ext = catalog.get(extension).ok_or_else(|| DelegationError::UnknownExtension(extension.to_owned()))?;
        let declared =
            ext.manifest.delegations.iter().find(|d| d.id == id).ok_or_else(|| DelegationError::UnknownDelegation {
                extension: extension.to_owned(),
                id: id.to_owned(),
            })?;
        if !self.agents.available() {
            return Err(DelegationError::NotStarted(AgentError::Unavailable));
        }
        let run = self.runs.start(extension, id, declared.risk)?;
        let task = Task {
            purpose: Purpose::Delegation,
            label: format!("{extension}/{id}"),
            instructions: declared.instructions.clone(),
            input,
            tools: Tools::Matching(
                declared.tools.clone().unwrap_or_else(|| DEFAULT_TOOLS.iter().map(|t| (*t).to_owned()).collect()),
            ),
            result: Some(declared.result.clone()),
            timeout: Duration::from_secs(declared.timeout_sec.into()),
        };
        // On a task of its own: the session ends and is recorded whatever the caller does.
        let (agents, runs, notifier, risk) =
            (Arc::clone(&self.agents), Arc::clone(&self.runs), self.notifier.clone(), declared.risk);
        let label = task.label.clone();
        let run_id = run.id.clone();
        let session = tokio::spawn(async move {
            let ended = agents.run(task).await;
            let decision = (risk == Risk::Confirm && ended.outcome.is_ok()).then(|| runs.watch(&run_id));
            let recorded = runs.update(&run_id, |run| {
                let step = &mut run.steps[0];
                step.session = Some(ended.session.clone());
                step.ended_at = Some(butler_catalog::time::rfc3339(butler_catalog::time::now_ms()));
                match &ended.outcome {
                    Ok(result) => {
                        step.result = Some(result.clone());
                        step.status =
                            if risk == Risk::Confirm { Status::AwaitingConfirmation } else { Status::Completed };
                    }
                    Err(error) => {
                        step.status = Status::Failed;
                        step.error = Some(json!({"code": error.code(), "message": error.to_string()}));
                    }
                }
                Ok(())
            });
            if let (Ok(_), Some(_)) = (&recorded, &decision) {
                notifier.tell(json!({
                    "kind": "confirm",
                    "summary": format!("the delegation {label} awaits your confirmation"),
                    "run": run_id,
                    "delegation": label,
                }));
            }
            (ended, recorded, decision)
        });
        let (ended, recorded, decision) = session
            .await
            .map_err(|e| DelegationError::Agent { run: run.id.clone(), error: AgentError::Start(e.to_string()) })?;
        recorded?;
        let result = ended.outcome.map_err(|error| DelegationError::Agent { run: run.id.clone(), error })?;
        let Some(mut decision) = decision else { return Ok(Delegated { run: run.id, result }) };
        let run_id = run.id.clone();
        let _unwatch = Unwatch { runs: &self.runs, id: &run_id };
        let decided = tokio::time::timeout(CONFIRM_WAIT, decision.wait_for(Option::is_some)).await;
        let decided = match decided {
            Ok(Ok(decided)) => decided.clone(),
            // The sender went: the step was decided (read it), or the host is stopping.
            Ok(Err(_)) => self.runs.get(&run.id).and_then(|run| match run.status {
                Status::Confirmed => Some(Decision::Confirmed),
                Status::Rejected => Some(Decision::Rejected(run.steps[0].reason.clone())),
                _ => None,
            }),
            Err(_) => None,
        };
        match decided {
            Some(Decision::Confirmed) => Ok(Delegated { run: run.id, result }),
            Some(Decision::Rejected(reason)) => Err(DelegationError::Rejected { run: run.id, reason }),
            None => Err(DelegationError::StillPending { run: run.id }),
        }
    }
}

/// Stops watching a run for its decision when its caller is done (or went away).
struct Unwatch<'a> {
    runs: &'a Runs,
    id: &'a str,
}

impl Drop for Unwatch<'_> {
    fn drop(&mut self) {
        self.runs.unwatch(self.id);
    }
}
