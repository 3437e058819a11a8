//! The session collector: the turns of the owner's AI sessions (their messages — user,
//! assistant, tool calls and results), taken by `POST /sessions/turns` and by that
//! command's MCP tool (`butler__report_session`, which takes a one-line `text` too), and
//! handed to the faculty command whose manifest says `takes: "session-turns"` (the
//! journal's `turns`).
//!
//! A turn is taken in this order, and answered only once the last step is done:
//! 1. the root config's `collector` filters: `enabled`, `workspaces` (only turns of these),
//!    `excludePresets` (default `["butler"]`: the host's own agent sessions), and
//!    `includeSubagents` (default false);
//! 2. every credential in its messages is redacted ([`redact`]), and a message longer than
//!    [`MAX_MESSAGE_CHARS`] is cut and marked `partial`;
//! 3. it is written durably — atomically, synced — to `<stateDir>/collector-pending/`. A
//!    full queue ([`MAX_PENDING`]) or a failed write is refused (503, and a log line), never
//!    answered as collected.
//!
//! Delivery runs on its own task: `debounceMs` after the last turn arrived, the pending
//! turns are handed to the journal oldest first, and each file is deleted only once the
//! journal acknowledged it (the journal stores a turn id once, so a turn handed over twice —
//! the host died between the two — is stored once). Pending turns are replayed when the host
//! starts, on `POST /sessions/flush`, and retried with a growing delay while the journal
//! cannot take them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_faculty::{CallContext, FacultyRuntime};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::{lock, redact};
use tokio::sync::Notify;

pub use crate::instance::config::CollectorConfig;

/// The folder under the state directory.
pub const PENDING_DIR: &str = "collector-pending";
/// The most turns waiting for the journal; beyond, a new one is refused.
pub const MAX_PENDING: usize = 1000;
/// The most characters of one message; a longer one is cut and marked `partial`.
pub const MAX_MESSAGE_CHARS: usize = 16_000;
/// The most messages in one turn.
pub const MAX_MESSAGES: usize = 200;
/// The longest delay between two attempts to hand pending turns over.
const MAX_RETRY: Duration = Duration::from_secs(60);
/// How long `flush` waits for the queue to drain.
pub const FLUSH_LIMIT: Duration = Duration::from_secs(10);

/// A turn as a client sends it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnIn {
    id: Option<String>,
    #[serde(default)]
    messages: Vec<MessageIn>,
    /// A one-line report instead of the messages (`butler__report_session {text}`).
    text: Option<String>,
    workspace: Option<String>,
    preset: Option<String>,
    #[serde(default)]
    subagent: bool,
    source: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageIn {
    role: String,
    /// Text, or any JSON (a tool call's arguments, a tool's structured result).
    content: Value,
    name: Option<String>,
}

/// What became of a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Collected {
    /// Stored durably; handed to the journal soon.
    Queued {
        /// The turn's id.
        id: String,
        /// How many credentials were redacted.
        redacted: usize,
    },
    /// Not collected, by the `collector` config; why.
    Skipped(&'static str),
}

/// Why a turn was not taken.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// Not a turn.
    #[error("{0}")]
    Invalid(String),
    /// [`MAX_PENDING`] turns wait.
    #[error("{MAX_PENDING} turns already wait to be handed over; this one was not collected: try again later")]
    Full,
    /// It could not be stored.
    #[error("the turn could not be stored, so it was not collected: {0}")]
    Persist(std::io::Error),
}

/// Takes session turns, filters and redacts them, writes each durably to
/// `<stateDir>/collector-pending/` before it is acknowledged, and hands the pending ones,
/// oldest first, to the faculty that `takes: "session-turns"` once they stop arriving for
/// `debounceMs` — and at start, what a crash left there.
pub struct Collector {
    dir: PathBuf,
    /// The root config's `collector`, changed live ([`Self::retune`]).
    config: Mutex<Arc<CollectorConfig>>,
    runtime: Arc<FacultyRuntime>,
    wake: Notify,
    /// Cuts the wait for a burst short (a flush).
    flushing: Notify,
    /// Tells `flush` that a pass ended.
    passed: Notify,
}

impl Collector {
    /// The collector of the instance whose state directory is `state_dir`.
    #[must_use]
    pub fn new(state_dir: &Path, config: CollectorConfig, runtime: Arc<FacultyRuntime>) -> Arc<Self> {
        Arc::new(Self {
            dir: state_dir.join(PENDING_DIR),
            config: Mutex::new(Arc::new(config)),
            runtime,
            wake: Notify::new(),
            flushing: Notify::new(),
            passed: Notify::new(),
        })
    }

    /// Takes one turn (a JSON object).
    ///
    /// # Errors
    /// See [`CollectError`]; each is logged too, but an invalid turn.
    pub fn collect(&self, body: Map<String, Value>) -> Result<Collected, CollectError> {
        let mut turn: TurnIn = serde_json::from_value(Value::Object(body))
            .map_err(|e| CollectError::Invalid(format!("not a turn: {e}")))?;
        if let Some(text) = turn.text.take() {
            if !turn.messages.is_empty() {
                return Err(CollectError::Invalid("a turn has `messages` or a `text`, not both".to_owned()));
            }
            turn.messages.push(MessageIn { role: "assistant".to_owned(), content: Value::String(text), name: None });
        }
        if let Some(skipped) = self.skipped(&turn) {
            return Ok(Collected::Skipped(skipped));
        }
        if turn.messages.is_empty() || turn.messages.len() > MAX_MESSAGES {
            return Err(CollectError::Invalid(format!("a turn has 1 to {MAX_MESSAGES} messages")));
        }
        let id = match turn.id {
            Some(id) if valid_id(&id) => id,
            Some(_) => {
                return Err(CollectError::Invalid(
                    "`id` is 1 to 128 of A-Z, a-z, 0-9, `-`, `_` and `.`, not starting with `.`".to_owned(),
                ));
            }
            None => crate::instance::owner::random_secret().map_err(CollectError::Persist)?[..24].to_owned(),
        };
        let mut redacted = 0;
        let messages: Vec<Value> = turn
            .messages
            .into_iter()
            .map(|message| {
                // Structured content first as JSON, so that what a credential-named key holds
                // goes whole, then as the text it is stored as.
                let text = match message.content {
                    Value::String(text) => text,
                    mut other => {
                        redacted += redact::redact_value(&mut other);
                        other.to_string()
                    }
                };
                let (clean, count) = redact::redact_text(&text);
                redacted += count;
                let (content, partial) = cut(&clean, MAX_MESSAGE_CHARS);
                let mut shown = json!({"role": message.role, "content": content});
                if let Some(name) = message.name {
                    shown["name"] = json!(redact::redact_text(&name).0);
                }
                if partial {
                    shown["partial"] = json!(true);
                }
                shown
            })
            .collect();
        let stored = json!({
            "id": id,
            "at": butler_catalog::time::rfc3339(butler_catalog::time::now_ms()),
            "messages": messages,
            "workspace": turn.workspace,
            "preset": turn.preset,
            "subagent": turn.subagent,
            "source": turn.source,
        });
        self.persist(&id, &stored)?;
        self.wake.notify_one();
        Ok(Collected::Queued { id, redacted })
    }

    /// The collector's settings in force.
    fn config(&self) -> Arc<CollectorConfig> {
        Arc::clone(&lock(&self.config))
    }

    /// From the next turn on, the collector follows `config`.
    pub fn retune(&self, config: CollectorConfig) {
        *lock(&self.config) = Arc::new(config);
    }

    /// Why the config leaves `turn` out, if it does.
    fn skipped(&self, turn: &TurnIn) -> Option<&'static str> {
        let config = self.config();
        if !config.enabled {
            return Some("the collector is off (`collector.enabled` is false)");
        }
        if !config.workspaces.is_empty() && !turn.workspace.as_ref().is_some_and(|w| config.workspaces.contains(w)) {
            return Some("its workspace is not one of `collector.workspaces`");
        }
        if turn.preset.as_ref().is_some_and(|p| config.exclude_presets.contains(p)) {
            return Some("its preset is one of `collector.excludePresets`");
        }
        if turn.subagent && !config.include_subagents {
            return Some("it is a sub-agent's (`collector.includeSubagents` is false)");
        }
        None
    }

    fn persist(&self, id: &str, turn: &Value) -> Result<(), CollectError> {
        let pending = self.pending();
        if pending.len() >= MAX_PENDING {
            tracing::warn!("collector: refused a turn: {MAX_PENDING} turns already wait to be handed over");
            return Err(CollectError::Full);
        }
        let written = butler_catalog::files::create_private_dir(&self.dir).and_then(|()| {
            let bytes = serde_json::to_vec(turn).map_err(std::io::Error::other)?;
            butler_catalog::files::write_private(&self.dir.join(format!("{id}.json")), &bytes)
        });
        written.map_err(|e| {
            tracing::warn!(dir = %self.dir.display(), "collector: cannot store a turn, so it was not collected: {e}");
            CollectError::Persist(e)
        })
    }

    /// The pending turns' files, oldest first.
    fn pending(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(".json") && !n.starts_with('.')))
            .map(|e| (e.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH), e.path()))
            .collect();
        files.sort();
        files.into_iter().map(|(_, path)| path).collect()
    }

    /// How many turns wait for the journal.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.pending().len()
    }

    /// Hands the pending turns over now; waits (at most [`FLUSH_LIMIT`]) for the pass;
    /// returns how many still wait.
    pub async fn flush(&self) -> usize {
        let passed = self.passed.notified();
        tokio::pin!(passed);
        passed.as_mut().enable();
        self.wake.notify_one();
        self.flushing.notify_one();
        let _ = tokio::time::timeout(FLUSH_LIMIT, passed).await;
        self.waiting()
    }

    /// Delivers pending turns from now on: at once (what a previous host left), then
    /// `debounceMs` after each new turn, on a flush, and again after a failure.
    pub fn spawn_delivery(self: &Arc<Self>) {
        let collector = Arc::clone(self);
        tokio::spawn(async move {
            let debounce = Duration::from_millis(collector.config().debounce_ms);
            let mut retry = Duration::from_secs(1);
            loop {
                let ok = collector.deliver_all().await;
                collector.passed.notify_waiters();
                if ok {
                    // Wait for a new turn, then let its burst gather.
                    retry = Duration::from_secs(1);
                    collector.wake.notified().await;
                    tokio::select! {
                        () = tokio::time::sleep(debounce) => {}
                        () = collector.flushing.notified() => {}
                    }
                } else {
                    // The journal could not take them: again after a growing delay, or on a flush.
                    retry = (retry * 2).min(MAX_RETRY);
                    let _ = tokio::time::timeout(retry, collector.wake.notified()).await;
                }
            }
        });
    }

    /// One pass over the pending turns; whether every one was acknowledged.
    async fn deliver_all(&self) -> bool {
        for path in self.pending() {
            let turn: Value = match std::fs::read(&path).map(|bytes| serde_json::from_slice(&bytes)) {
                Ok(Ok(turn)) => turn,
                Ok(Err(e)) => {
                    // Written atomically, so never torn: a file someone else put there.
                    tracing::warn!(path = %path.display(), "collector: not a turn, set aside: {e}");
                    let _ = std::fs::rename(&path, path.with_extension("invalid"));
                    continue;
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), "collector: cannot read a pending turn: {e}");
                    return false;
                }
            };
            match self.hand_over(turn).await {
                Ok(()) => {
                    if let Err(e) = std::fs::remove_file(&path) {
                        tracing::warn!(path = %path.display(), "collector: cannot remove a delivered turn: {e}");
                    }
                }
                Err(e) => {
                    tracing::warn!("collector: the session-turns command did not take a turn (it stays pending): {e}");
                    return false;
                }
            }
        }
        true
    }

    async fn hand_over(&self, turn: Value) -> Result<(), butler_faculty::CallError> {
        let runtime = Arc::clone(&self.runtime);
        let deadline = std::time::Instant::now() + Duration::from_millis(butler_faculty::DEFAULT_TIMEOUT_MS);
        // The host's own door: the command is private (no client can bypass the redaction
        // through the pipeline), so the collector calls it as the owner would.
        let context = CallContext::top(true).by("collector").until(deadline);
        let call_deadline = context.deadline();
        let runner = Arc::clone(&runtime);
        runtime
            .blocking(call_deadline, move || {
                let (faculty, command) = runner
                    .declared_by(deadline, |d| d.session_turns.clone())
                    .ok_or(butler_faculty::CallError::NotServed("session turns"))?;
                runner.invoke_json(&faculty, &command, &turn, &context)
            })
            .await
            .map(|_| ())
    }
}

/// `butler__report_session`: the MCP tool of the journal's `session-turns` command hands
/// its calls to the collector, so a turn reported over MCP is redacted and stored durably
/// like one sent to `POST /sessions/turns`.
impl crate::hub_tools::TurnSink for Collector {
    fn take(&self, arguments: Map<String, Value>) -> Result<Value, crate::hub_tools::NotTaken> {
        match self.collect(arguments).map_err(|e| crate::hub_tools::NotTaken(Box::new(e)))? {
            Collected::Queued { id, redacted } => Ok(json!({"queued": true, "id": id, "redacted": redacted})),
            Collected::Skipped(why) => Ok(json!({"queued": false, "skipped": why})),
        }
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `text` cut to `max` characters; whether it was.
fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((end, _)) => (text[..end].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_cuts() {
        assert!(valid_id("turn-1.a_b") && !valid_id(".x") && !valid_id("a/b") && !valid_id(""));
        assert_eq!(cut("héllo", 2), ("hé".to_owned(), true));
        assert_eq!(cut("hé", 2), ("hé".to_owned(), false));
    }
}
