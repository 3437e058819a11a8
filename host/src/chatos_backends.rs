//! The backends of ChatOS UI Apps plugins: a plugin's `backend.entry` (an ES module
//! exporting `createUiAppsBackend(ctx)`) run by the host in a Node process of its own,
//! through the bridge the host ships (`chatos_backends/bridge.mjs`), and called one method at
//! a time.
//!
//! One process per plugin, started on its first call under a keeper (its own process
//! group, the environment scrubbed as for MCP providers, its stderr in
//! `<stateDir>/logs/uiapp-backend-<pluginId>.log`), stopped when its plugin leaves the
//! catalog or changes, started again on the next call after it exits. The host and the
//! bridge speak JSON lines over the process's stdin and stdout (the conversation of
//! [`butler_process::json_lines`]); the bridge reloads the
//! module when its file's modification time changes. Every call has a deadline
//! ([`CALL_TIMEOUT`]), at most [`MAX_IN_FLIGHT`] calls wait on one plugin, and an answer
//! longer than [`MAX_ANSWER_BYTES`] stops the process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_catalog::chatos::Plugin;
use butler_catalog::{Catalog, Follow, lock};
use butler_process::HostEnv;
use butler_process::json_lines::{Calls, LineReader, LineWriter, RpcError, WriteError};
use butler_process::keeper::{self, Input, Kept};
use butler_process::launch::Launch;
use butler_process::logs::Log;
use serde_json::{Value, json};

/// The bridge the host ships, written to `<stateDir>/ui_apps/bridge.mjs` before a backend
/// first starts.
pub const BRIDGE: &str = include_str!("chatos_backends/bridge.mjs");
/// How long one call may take, the module's (re)load included.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The most calls waiting on one plugin's backend; one more is refused (429).
pub const MAX_IN_FLIGHT: usize = 16;
/// The longest answer line read from a backend.
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// The longest method name.
pub const MAX_METHOD_LEN: usize = 128;

/// Why a call got no answer from the backend's own code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No plugin with this id, or no app with this id in it.
    #[error("{0}")]
    Unknown(String),
    /// The plugin has no backend, or it cannot run here (no Node, a bad entry).
    #[error("{0}")]
    Unavailable(String),
    /// Too many calls are waiting on this backend.
    #[error("{MAX_IN_FLIGHT} calls are already waiting on this plugin's backend; try again when they are answered")]
    Busy,
    /// No answer within [`CALL_TIMEOUT`].
    #[error("the backend did not answer within {} s", CALL_TIMEOUT.as_secs())]
    Timeout,
    /// The process failed (could not start, exited, answered nonsense).
    #[error("{0}")]
    Failed(String),
}

/// What the backend's method answered: its data, or what it threw.
pub type Answer = Result<Value, Thrown>;

/// What a backend's method threw: its message, as the app is shown it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Thrown(pub String);

/// Why app backends cannot run on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Node.js is not installed (no `node` on PATH): app backends need it")]
pub struct NoNode;

/// Every plugin's backend process.
pub struct Backends {
    host: HostEnv,
    state_dir: PathBuf,
    instance_root: PathBuf,
    /// The plugins of the last catalog snapshot.
    plugins: Mutex<Arc<Vec<Arc<Plugin>>>>,
    /// The running bridges, by plugin id.
    running: Mutex<HashMap<String, Arc<Bridge>>>,
}

/// One running bridge process.
struct Bridge {
    /// The plugin it was started for (a changed plugin gets a new bridge).
    plugin: Arc<Plugin>,
    stdin: LineWriter<tokio::process::ChildStdin>,
    /// The calls waiting on it (at most [`MAX_IN_FLIGHT`]).
    calls: Arc<Calls<Answer>>,
    kept: tokio::sync::Mutex<Option<Kept>>,
    /// Cleared when its output ends (the process exited): the next call starts another.
    alive: Arc<AtomicBool>,
}

impl Backends {
    /// Backends run with `host`'s interpreters and variables, logging under `state_dir`.
    #[must_use]
    pub fn new(host: HostEnv, state_dir: &Path, instance_root: &Path) -> Self {
        Self {
            host,
            state_dir: state_dir.to_owned(),
            instance_root: instance_root.to_owned(),
            plugins: Mutex::new(Arc::new(Vec::new())),
            running: Mutex::new(HashMap::new()),
        }
    }

    /// Why `plugin`'s backend cannot run, if it cannot: none declared, a bad entry, no Node.
    #[must_use]
    pub fn unavailable(&self, plugin: &Plugin) -> Option<String> {
        match &plugin.backend {
            None => Some(format!("Plugin backend not configured: {}", plugin.id)),
            Some(Err(why)) => Some(why.to_string()),
            Some(Ok(_)) => self.node().err().map(|e| e.to_string()),
        }
    }

    /// Node, as the host would run it: the root config's interpreter for `node`, else the
    /// first `node` on `PATH`.
    fn node(&self) -> Result<PathBuf, NoNode> {
        if let Some(configured) = self.host.interpreter("node") {
            return Ok(PathBuf::from(configured));
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join("node"))
            .find(|file| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::metadata(file).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .ok_or(NoNode)
    }

    /// The plugins of the current snapshot.
    #[must_use]
    pub fn plugins(&self) -> Arc<Vec<Arc<Plugin>>> {
        Arc::clone(&lock(&self.plugins))
    }

    /// Calls `method` with `params` on the backend of plugin `plugin_id`, for its app
    /// `app_id`.
    ///
    /// # Errors
    /// See [`CallError`]; what the method itself threw is `Ok(Err(message))`.
    pub async fn call(&self, plugin_id: &str, app_id: &str, method: &str, params: Value) -> Result<Answer, CallError> {
        let plugin = self.plugins().iter().find(|p| p.id == plugin_id).cloned().ok_or_else(|| {
            CallError::Unknown(format!("Plugin not found: {}", butler_catalog::text::clip(plugin_id, 80)))
        })?;
        if !plugin.apps.iter().any(|a| a.id == app_id) {
            let app = butler_catalog::text::clip(app_id, 80);
            return Err(CallError::Unknown(format!("App not found: {plugin_id}:{app}")));
        }
        if method.is_empty() || method.len() > MAX_METHOD_LEN || method.chars().any(char::is_control) {
            return Err(CallError::Unknown(format!(
                "Method not found: a method's name is 1 to {MAX_METHOD_LEN} characters"
            )));
        }
        if let Some(why) = self.unavailable(&plugin) {
            return Err(CallError::Unavailable(why));
        }
        let bridge = self.bridge(&plugin)?;
        let result = bridge.call(method, params).await;
        if matches!(result, Err(CallError::Failed(_))) {
            self.forget(&bridge).await;
        }
        result
    }

    /// The running bridge of `plugin`, started when there is none.
    fn bridge(&self, plugin: &Arc<Plugin>) -> Result<Arc<Bridge>, CallError> {
        let mut running = lock(&self.running);
        if let Some(bridge) = running.get(&plugin.id).filter(|b| b.plugin == *plugin && b.alive.load(Ordering::Acquire))
        {
            return Ok(Arc::clone(bridge));
        }
        let bridge = Arc::new(self.start(plugin)?);
        if let Some(old) = running.insert(plugin.id.clone(), Arc::clone(&bridge)) {
            tokio::spawn(async move { old.stop().await });
        }
        Ok(bridge)
    }

    /// Starts `plugin`'s bridge (writes the bridge file first).
    fn start(&self, plugin: &Arc<Plugin>) -> Result<Bridge, CallError> {
        let failed = |what: &str, e: &dyn std::fmt::Display| CallError::Failed(format!("{what}: {e}"));
        let Some(Ok(entry)) = &plugin.backend else {
            return Err(CallError::Unavailable(format!("Plugin backend not configured: {}", plugin.id)));
        };
        let node = self.node().map_err(|e| CallError::Unavailable(e.to_string()))?;
        let bridge_file = self.state_dir.join("ui_apps").join("bridge.mjs");
        butler_catalog::files::write_private(&bridge_file, BRIDGE.as_bytes())
            .map_err(|e| failed("cannot write the backend bridge", &e))?;
        let data_dir = self.state_dir.join("ui_apps").join("data").join(&plugin.id);
        let config = json!({
            "pluginId": plugin.id, "entry": entry, "pluginDir": plugin.dir, "dataDir": data_dir,
            "stateDir": self.state_dir, "sessionRoot": self.instance_root, "projectRoot": self.instance_root,
        });
        let argv = [node.to_string_lossy().into_owned(), bridge_file.to_string_lossy().into_owned()];
        let env = [("BUTLER_UI_APP_BACKEND".to_owned(), config.to_string())].into_iter().collect();
        let launch = Launch::argv(&argv, None, &env, &plugin.dir, &self.host)
            .map_err(|e| failed("cannot start the backend", &e))?
            .scrubbed(&[]);
        let mut kept = keeper::spawn_kept(&launch, Input::Piped).map_err(|e| failed("cannot start the backend", &e))?;
        let (Some(stdin), Some(stdout)) = (kept.child.stdin.take(), kept.child.stdout.take()) else {
            return Err(CallError::Failed("the backend's pipes could not be opened".to_owned()));
        };
        let log = Arc::new(Log::new(self.state_dir.join("logs").join(format!("uiapp-backend-{}.log", plugin.id))));
        log.note(format!("started: {}", launch.argv.join(" ")));
        kept.log_output(&log, false);
        let calls = Calls::new(MAX_IN_FLIGHT);
        let alive = Arc::new(AtomicBool::new(true));
        let stdout = LineReader::new(stdout, MAX_ANSWER_BYTES, 8 * 1024);
        tokio::spawn(read_answers(stdout, Arc::clone(&calls), Arc::clone(&alive), log));
        Ok(Bridge {
            plugin: Arc::clone(plugin),
            stdin: LineWriter::new(stdin),
            calls,
            kept: tokio::sync::Mutex::new(Some(kept)),
            alive,
        })
    }

    /// Stops `bridge` and forgets it, if it is still the running one.
    async fn forget(&self, bridge: &Arc<Bridge>) {
        let removed = {
            let mut running = lock(&self.running);
            let current = running.get(&bridge.plugin.id).is_some_and(|b| Arc::ptr_eq(b, bridge));
            current.then(|| running.remove(&bridge.plugin.id)).flatten()
        };
        if let Some(bridge) = removed {
            bridge.stop().await;
        }
    }

    /// Stops every backend (the host is stopping).
    pub async fn shutdown(&self) {
        let all: Vec<Arc<Bridge>> = lock(&self.running).drain().map(|(_, b)| b).collect();
        futures_util::future::join_all(all.iter().map(|b| b.stop())).await;
    }
}

impl Bridge {
    async fn call(&self, method: &str, params: Value) -> Result<Answer, CallError> {
        let deadline = tokio::time::Instant::now() + CALL_TIMEOUT;
        let call = self.calls.begin(()).map_err(|e| match e {
            RpcError::Busy { .. } => CallError::Busy,
            RpcError::Timeout | RpcError::Closed(_) => {
                CallError::Failed("the backend's process exited during the call".to_owned())
            }
        })?;
        let mut line = json!({"id": call.id(), "method": method, "params": params}).to_string();
        line.push('\n');
        match self.stdin.write_line(line.into_bytes(), CALL_TIMEOUT).await {
            Ok(()) => {}
            Err(WriteError::TimedOut(_)) => return Err(CallError::Timeout),
            Err(WriteError::Io(e)) => return Err(CallError::Failed(format!("the backend's process is gone ({e})"))),
        }
        call.wait_until(deadline).await.map_err(|e| match e {
            RpcError::Timeout => CallError::Timeout,
            RpcError::Busy { .. } | RpcError::Closed(_) => {
                CallError::Failed("the backend's process exited during the call".to_owned())
            }
        })
    }

    async fn stop(&self) {
        if let Some(mut kept) = self.kept.lock().await.take() {
            kept.stop().await;
        }
    }
}

/// Hands each answer line to the call waiting for it; when the process's stdout ends (or
/// an answer is too long), every waiting call fails.
async fn read_answers(
    mut stdout: LineReader<tokio::process::ChildStdout>,
    calls: Arc<Calls<Answer>>,
    alive: Arc<AtomicBool>,
    log: Arc<Log>,
) {
    loop {
        let line = match stdout.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) | Err(butler_process::json_lines::ReadError::Io(_)) => break,
            Err(butler_process::json_lines::ReadError::TooLong { .. }) => {
                log.note(format!("an answer longer than {MAX_ANSWER_BYTES} bytes: the backend is stopped"));
                break;
            }
        };
        let Ok(answer) = serde_json::from_slice::<Value>(line) else { continue };
        let Some(id) = answer.get("id").and_then(Value::as_u64) else { continue };
        let reply = if answer.get("ok") == Some(&Value::Bool(true)) {
            Ok(answer.get("data").cloned().unwrap_or(Value::Null))
        } else {
            Err(Thrown(answer.get("message").and_then(Value::as_str).unwrap_or("the backend failed").to_owned()))
        };
        calls.answer(id, |()| reply);
    }
    alive.store(false, Ordering::Release);
    log.note("the backend's output ended");
    log.flush();
    calls.close("the backend's process exited during the call");
}

impl Follow for Backends {
    async fn on_snapshot(self: Arc<Self>, snapshot: Arc<Catalog>) {
        *lock(&self.plugins) = Arc::new(snapshot.plugins.clone());
        let stale: Vec<Arc<Bridge>> = {
            let mut running = lock(&self.running);
            let gone: Vec<String> = running
                .iter()
                .filter(|(_, bridge)| !snapshot.plugins.iter().any(|p| **p == *bridge.plugin))
                .map(|(id, _)| id.clone())
                .collect();
            gone.iter().filter_map(|id| running.remove(id)).collect()
        };
        // Stopped on their own tasks: a process slow to stop holds up no other follower.
        for bridge in stale {
            tokio::spawn(async move { bridge.stop().await });
        }
    }
}
