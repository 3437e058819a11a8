//! The agent backend: the owner's own agent program (`agent.command` in the root config),
//! which the host runs once per **agent session** — a delegation's judgement step
//! ([`delegations`]) or a scheduled automation's run ([`automations`]).
//!
//! A session's process starts under a keeper (its own process group, the environment
//! scrubbed as for MCP providers, its output in `<stateDir>/logs/agent-<session>.log`,
//! credentials redacted)
//! and reads its [`Task`] as one JSON line on stdin: the instructions, the input as a
//! separate field (data, never part of the instructions), the compiled context as the
//! root config's `inject` allows, the deadline, and an MCP endpoint of its own —
//! `…/api/mcp/s/<session>` with a bearer token that is valid only for that session and only
//! while it runs, offering exactly the tools the task allows plus the submit tool
//! ([`session`]). The session ends when the agent submits, exits, or the deadline passes;
//! then whatever is left of its process group is stopped.
//!
//! Without `agent.command` every session fails with [`AgentError::Unavailable`] (the
//! routes answer 503 `agent_unavailable`) and nothing else changes.

pub mod agent_session;
pub mod automations;
pub mod delegations;
pub mod runs;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_catalog::lock;
use butler_catalog::manifest::CommandLine;
use butler_mcp::{Hub, Profile, ProfileSpec, Prompts, Scope, View};
use butler_process::HostEnv;
use butler_process::json_lines::LineWriter;
use butler_process::keeper::{self, Input, Kept};
use butler_process::launch::Launch;
use butler_process::logs::Log;
use serde_json::{Value, json};

use crate::instance::config::InjectConfig;
pub use agent_session::{AgentSession, SUBMIT_TOOL};

/// The most agent sessions running at once; one more is refused ([`AgentError::Busy`]).
pub const MAX_SESSIONS: usize = 4;
/// After it submitted, how long the agent has to exit by itself before it is stopped.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);
/// How long the agent has to read its task from stdin.
const TASK_WRITE_LIMIT: Duration = Duration::from_secs(10);

/// What an agent session is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    /// A delegation's judgement step.
    Delegation,
    /// A scheduled automation's run.
    Automation,
}

/// What an agent session is asked to do.
#[derive(Debug, Clone)]
pub struct Task {
    /// Why it runs: for a delegation or an automation.
    pub purpose: Purpose,
    /// Who asked, for the log (`<extension>/<delegation>`, an automation's title).
    pub label: String,
    /// What the agent is told to do.
    pub instructions: String,
    /// The data to do it on (never mixed into the instructions).
    pub input: Value,
    /// What the session's endpoint offers.
    pub tools: Tools,
    /// The schema of the result it submits (`None`: no submit tool; the session ends when
    /// the agent exits).
    pub result: Option<Value>,
    /// How long it may take.
    pub timeout: Duration,
}

/// Which tools an agent session's endpoint offers (besides the submit tool).
#[derive(Debug, Clone)]
pub enum Tools {
    /// Those whose public names match these globs: the hub's tools on `/mcp` and the
    /// faculties' tools offered to agents. A name without a namespace also means the
    /// host's own tool of that name (`glob` is `butler__glob`).
    Matching(Vec<String>),
    /// The restricted endpoint's (`/mcp/butler`): the distilling agent's tool set.
    Restricted,
}

/// How an agent session ended without a result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AgentError {
    /// No `agent.command`.
    #[error(
        "no agent is configured: set `agent.command` in the root config to the program the host runs for each agent session"
    )]
    Unavailable,
    /// [`MAX_SESSIONS`] are running.
    #[error("{MAX_SESSIONS} agent sessions are already running; try again when one has ended")]
    Busy,
    /// The agent could not be started.
    #[error("the agent could not be started: {0}")]
    Start(String),
    /// The session ran past its task's `timeout` (the field: the limit in seconds).
    #[error("the agent did not submit a result within {0} s; its processes were stopped")]
    Timeout(u64),
    /// The agent exited first.
    #[error("the agent exited ({0}) without submitting a result")]
    Exited(String),
    /// The host is stopping; the session's processes were stopped.
    #[error("the host is stopping: the agent session was ended")]
    Stopping,
}

impl AgentError {
    /// The error's code in API answers.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable => "agent_unavailable",
            Self::Busy => "agent_busy",
            Self::Start(_) => "agent_failed",
            Self::Timeout(_) => "delegation_timeout",
            Self::Exited(_) => "agent_exited",
            Self::Stopping => "shutting_down",
        }
    }
}

/// How one session ended.
#[derive(Debug, Clone)]
pub struct Ended {
    /// The session's id (its log is `logs/agent-<id>.log`).
    pub session: String,
    /// Its accepted submission, or why there is none.
    pub outcome: Result<Value, AgentError>,
}

/// Runs the owner's agent (`agent.command`) for delegations and automations, at most
/// [`MAX_SESSIONS`] at a time, and keeps the sessions that are running.
pub struct Agents {
    /// The agent program and what its sessions are told: the root config's `agent.command`
    /// and `inject`, changed live ([`Self::retune`]); a session takes them as it starts.
    settings: Mutex<(Option<CommandLine>, InjectConfig)>,
    host: HostEnv,
    /// The folder the agent runs in (the instance's root).
    workdir: PathBuf,
    logs: PathBuf,
    /// `http://ADDR:PORT/myspace-butler/api`.
    api_url: String,
    hub: Arc<Hub>,
    running: Mutex<HashMap<String, Arc<AgentSession>>>,
    /// Set when the host stops: every session ends.
    stopping: tokio::sync::watch::Sender<bool>,
}

impl Agents {
    /// The backend running `command` (none: agents are unavailable) in `workdir`, its
    /// sessions' endpoints under `api_url`.
    #[must_use]
    pub fn new(
        command: Option<CommandLine>,
        host: HostEnv,
        (workdir, state_dir): (PathBuf, PathBuf),
        api_url: String,
        inject: InjectConfig,
        hub: Arc<Hub>,
    ) -> Self {
        let logs = state_dir.join("logs");
        let stopping = tokio::sync::watch::Sender::new(false);
        let settings = Mutex::new((command, inject));
        Self { settings, host, workdir, logs, api_url, hub, running: Mutex::default(), stopping }
    }

    /// Whether an agent is configured.
    #[must_use]
    pub fn available(&self) -> bool {
        lock(&self.settings).0.is_some()
    }

    /// From the next session on, the agent is `command` (none: agents are unavailable) and
    /// its sessions are told what `inject` says; running sessions go on as they started.
    pub fn retune(&self, command: Option<CommandLine>, inject: InjectConfig) {
        *lock(&self.settings) = (command, inject);
    }

    /// Ends every session (their processes stopped) and starts no more; waits for that at
    /// most [`keeper::STOP_GRACE`] and a few seconds.
    pub async fn shutdown(&self) {
        self.stopping.send_replace(true);
        let deadline = tokio::time::Instant::now() + keeper::STOP_GRACE + Duration::from_secs(3);
        while !lock(&self.running).is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The running session `id`.
    #[must_use]
    pub fn session(&self, id: &str) -> Option<Arc<AgentSession>> {
        lock(&self.running).get(id).cloned()
    }

    /// Runs one agent session for `task`, to its end.
    pub async fn run(&self, task: Task) -> Ended {
        let id = match crate::instance::owner::random_secret() {
            Ok(secret) => secret[..16].to_owned(),
            Err(e) => return Ended { session: String::new(), outcome: Err(AgentError::Start(e.to_string())) },
        };
        let outcome = self.run_as(&id, task).await;
        Ended { session: id, outcome }
    }

    async fn run_as(&self, id: &str, task: Task) -> Result<Value, AgentError> {
        let (command, inject) = lock(&self.settings).clone();
        let command = command.ok_or(AgentError::Unavailable)?;
        let mut stopping = self.stopping.subscribe();
        if *stopping.borrow_and_update() {
            return Err(AgentError::Stopping);
        }
        let token = crate::instance::owner::random_secret().map_err(|e| AgentError::Start(e.to_string()))?;
        let view = session_view(id, &task.tools)?;
        let (session, submitted) = AgentSession::new(id.to_owned(), token.clone(), view, task.result.clone());
        let _registered = self.register(&session)?;
        let log = Arc::new(Log::redacting(self.logs.join(format!("agent-{id}.log"))));
        log.note(format!("session {id} ({:?}: {}) starting", task.purpose, task.label));
        let context = if inject.enabled { Some(self.context(inject.max_chars).await) } else { None };
        let deadline = butler_catalog::time::now_ms() + u64::try_from(task.timeout.as_millis()).unwrap_or(u64::MAX);
        let message = json!({
            "sessionId": id,
            "purpose": task.purpose,
            "instructions": task.instructions,
            "input": task.input,
            "context": context,
            "deadline": butler_catalog::time::rfc3339(deadline),
            "timeoutSec": task.timeout.as_secs(),
            "mcp": {"url": format!("{}/mcp/s/{id}", self.api_url), "token": token},
            "submitTool": task.result.as_ref().map(|_| SUBMIT_TOOL),
        });
        let launch = Launch::of(&command, None, &BTreeMap::new(), &self.workdir, &self.host)
            .map_err(|e| AgentError::Start(e.to_string()))?
            .scrubbed(&[]);
        let mut kept = keeper::spawn_kept(&launch, Input::Piped).map_err(|e| {
            log.note(format!("cannot start `{}`: {e}", launch.program()));
            AgentError::Start(format!("`{}`: {e}", launch.program()))
        })?;
        kept.log_output(&log, true);
        if let Some(stdin) = kept.child.stdin.take() {
            let mut line = message.to_string();
            line.push('\n');
            // Written on its own task: an agent that reads late cannot hold the session up,
            // and closing stdin (the writer dropped) tells it the task is complete.
            tokio::spawn(async move {
                let _ = LineWriter::new(stdin).write_line(line.into_bytes(), TASK_WRITE_LIMIT).await;
            });
        }
        let outcome = tokio::select! {
            outcome = wait(&mut kept, submitted, task.timeout) => outcome,
            _ = stopping.wait_for(|stop| *stop) => Err(AgentError::Stopping),
        };
        match &outcome {
            Ok(_) => log.note(format!("session {id}: result submitted")),
            Err(e) => log.note(format!("session {id}: {e}")),
        }
        // Whatever is left of the group (the agent's children too) is stopped.
        kept.stop().await;
        log.flush();
        outcome
    }

    /// Registers `session` while the returned guard lives.
    fn register(&self, session: &Arc<AgentSession>) -> Result<Registered<'_>, AgentError> {
        let mut running = lock(&self.running);
        if running.len() >= MAX_SESSIONS {
            return Err(AgentError::Busy);
        }
        running.insert(session.id.clone(), Arc::clone(session));
        Ok(Registered { agents: self, id: session.id.clone() })
    }

    /// The compiled context, cut to `max_chars` (`inject.maxChars`).
    async fn context(&self, max_chars: usize) -> String {
        let text = self.hub.compiled_context().await;
        match text.char_indices().nth(max_chars) {
            Some((cut, _)) => format!("{}\n[…cut at {max_chars} characters]", &text[..cut]),
            None => text,
        }
    }
}

/// A session in the running set; removed (its token dead) when dropped.
struct Registered<'a> {
    agents: &'a Agents,
    id: String,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        lock(&self.agents.running).remove(&self.id);
    }
}

/// Waits for the first of: a submission (then the agent gets [`EXIT_GRACE`] to exit), the
/// agent's exit, the deadline.
async fn wait(
    kept: &mut Kept,
    mut submitted: tokio::sync::oneshot::Receiver<Value>,
    timeout: Duration,
) -> Result<Value, AgentError> {
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    tokio::select! {
        result = &mut submitted => {
            let result = result.map_err(|_| AgentError::Exited("its session closed".to_owned()))?;
            let _ = tokio::time::timeout(EXIT_GRACE, kept.child.wait()).await;
            Ok(result)
        }
        status = kept.child.wait() => {
            // A submission answered just before the exit still counts.
            if let Ok(result) = submitted.try_recv() {
                return Ok(result);
            }
            let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
            Err(AgentError::Exited(status))
        }
        () = &mut deadline => Err(AgentError::Timeout(timeout.as_secs())),
    }
}

/// What session `id`'s endpoint offers.
fn session_view(id: &str, tools: &Tools) -> Result<View, AgentError> {
    let spec = match tools {
        Tools::Matching(globs) => ProfileSpec {
            include: globs
                .iter()
                .flat_map(|glob| {
                    let bare = !glob.contains("__");
                    std::iter::once(glob.clone()).chain(bare.then(|| format!("butler__{glob}")))
                })
                .collect(),
            // Nothing matches an empty list of globs… except everything: offer none then.
            providers: if globs.is_empty() { Some(Vec::new()) } else { None },
            scope: Scope::Agent,
            ..ProfileSpec::default()
        },
        Tools::Restricted => {
            ProfileSpec { providers: Some(Vec::new()), scope: Scope::Restricted, ..ProfileSpec::default() }
        }
    };
    let empty = matches!(tools, Tools::Matching(globs) if globs.is_empty());
    let spec =
        ProfileSpec { prefixed: true, host_tools: !empty, prompts: Prompts::Named(Vec::new()), session: true, ..spec };
    let profile = Profile::new(id, spec).map_err(|e| AgentError::Start(format!("the session's tools: {e}")))?;
    Ok(View::Profile(Arc::new(profile)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_offers_what_its_task_allows() {
        let View::Profile(view) = session_view("abc", &Tools::Matching(vec!["glob".into(), "fs__read*".into()]))
            .expect("as the test set it up")
        else {
            panic!("a profile")
        };
        assert_eq!(view.spec.include, ["glob", "butler__glob", "fs__read*"]);
        assert!(view.spec.session && view.spec.host_tools && view.spec.scope == Scope::Agent);
        let endpoint =
            session_view("abc", &Tools::Matching(vec!["x__y".into()])).expect("as the test set it up").endpoint();
        assert_eq!(endpoint, "s/abc");
        let View::Profile(none) = session_view("abc", &Tools::Matching(Vec::new())).expect("as the test set it up")
        else {
            panic!()
        };
        assert!(!none.spec.host_tools && none.spec.providers == Some(Vec::new()), "no tools at all");
        let View::Profile(restricted) = session_view("abc", &Tools::Restricted).expect("as the test set it up") else {
            panic!()
        };
        assert_eq!(restricted.spec.scope, Scope::Restricted);
    }
}
