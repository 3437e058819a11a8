//! The root config while the host runs: the file is looked at every [`POLL`], an edit that
//! validates is published to whoever follows it ([`LiveConfig::subscribe`]), and an
//! invalid one is kept out — the last good config stays in force, every problem is shown
//! with its JSON pointer ([`LiveConfig::diagnostics`], part of `GET /catalog`) and the
//! host's log gets one line. Fields the running host cannot take without a restart
//! ([`RESTART_FIELDS`], and the [`STARTUP_FIELDS`] not yet applied live) keep their running values and say
//! so in the diagnostics until the host restarts or the edit is undone.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use butler_catalog::{Diagnostic, Severity};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::config::RootConfig;
use crate::lock;
use crate::validation::SchemaError;

/// How often the file is looked at: an edit applies within twice this.
pub const POLL: Duration = Duration::from_millis(500);

/// Root config fields that truly need a restart: where the host keeps its state, what it
/// scans, the folders its faculties are granted.
pub const RESTART_FIELDS: &[&str] = &["stateDir", "scanRoots", "selfRoot", "validityRoot"];

/// Root config fields read once, at start, that could apply live but do not yet: the
/// interpreters, which every process the host starts is given.
pub const STARTUP_FIELDS: &[&str] = &["python", "bun"];

/// Root config fields the host applies as soon as an edit validates (any other field it
/// does not read at all, so its change needs nothing).
/// Besides these, every key the faculties are granted (`faculties.<id>.config`) applies live:
/// a faculty reads it on its next call ([`live_fields`]).
pub const LIVE_FIELDS: &[&str] =
    &["mcp", "agent", "inject", "notification", "collector", "faculties", "automations", "pipeline"];

/// The profiles a config declares, checked, by name.
pub type Profiles = std::collections::BTreeMap<String, Arc<butler_mcp::Profile>>;

/// A root config in force: the document and what is derived from it once.
#[derive(Debug)]
pub struct Applied {
    /// The config.
    pub config: RootConfig,
    /// Its `mcp.profiles`, checked.
    pub profiles: Profiles,
}

impl Applied {
    /// `config` with its profiles checked, and the other rules the schema cannot say.
    ///
    /// # Errors
    /// Every problem, with its pointer.
    pub fn of(config: RootConfig) -> Result<Self, Vec<SchemaError>> {
        let mut problems = config.automations.problems();
        match config.mcp.checked_profiles() {
            Ok(profiles) if problems.is_empty() => return Ok(Self { config, profiles }),
            Ok(_) => {}
            Err(e) => problems.push(SchemaError { pointer: "/mcp/profiles".to_owned(), message: e.to_string() }),
        }
        Err(problems)
    }
}

/// The root config of a running host, followed live.
pub struct LiveConfig {
    path: PathBuf,
    /// The file as diagnostics name it (relative to the instance root).
    shown: String,
    current: tokio::sync::watch::Sender<Arc<Applied>>,
    state: Mutex<Watch>,
}

struct Watch {
    /// The file as last read: modified time and length (a change re-reads it).
    seen: Option<(SystemTime, u64)>,
    /// The text last read.
    text: Option<Vec<u8>>,
    /// What is wrong with the file now, or waits for a restart.
    diagnostics: Vec<Diagnostic>,
}

impl LiveConfig {
    /// The config at `path`, `started` with (as read when the host started).
    #[must_use]
    pub fn new(path: &Path, started: Applied) -> Arc<Self> {
        let seen = std::fs::metadata(path).ok().and_then(|m| Some((m.modified().ok()?, m.len())));
        let text = read_bounded(path);
        Arc::new(Self {
            path: path.to_owned(),
            shown: path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            current: tokio::sync::watch::Sender::new(Arc::new(started)),
            state: Mutex::new(Watch { seen, text, diagnostics: Vec::new() }),
        })
    }

    /// The config in force.
    #[must_use]
    pub fn current(&self) -> Arc<Applied> {
        self.current.borrow().clone()
    }

    /// Told of each config that comes into force.
    #[must_use]
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<Applied>> {
        self.current.subscribe()
    }

    /// What is wrong with the file, or waits for a restart (empty when the file is what
    /// runs).
    #[must_use]
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        lock(&self.state).diagnostics.clone()
    }

    /// Looks at the file now: a changed file is read and, when valid, brought into force.
    /// Whether a new config came into force. Reads the file: call it off the async
    /// runtime's threads.
    pub fn check(&self) -> bool {
        let meta = std::fs::metadata(&self.path).ok();
        let seen = meta.as_ref().and_then(|m| Some((m.modified().ok()?, m.len())));
        if seen.is_some() && seen == lock(&self.state).seen {
            return false;
        }
        let text = read_bounded(&self.path);
        {
            let mut state = lock(&self.state);
            state.seen = seen;
            if text == state.text {
                return false;
            }
            state.text.clone_from(&text);
        }
        let judged = match text {
            None => Err(vec![SchemaError {
                pointer: String::new(),
                message: format!(
                    "the file cannot be read, or is larger than {} KiB",
                    super::config::MAX_CONFIG_BYTES >> 10
                ),
            }]),
            Some(text) => judge(&self.path, &text),
        };
        let running = self.current();
        match judged {
            Ok(next) => {
                let waiting = waiting_fields(&running.config, &next);
                let diagnostics = waiting
                    .iter()
                    .map(|field| {
                        let message = if RESTART_FIELDS.contains(&field.as_str()) {
                            "changed: the running host keeps its value until it restarts".to_owned()
                        } else {
                            "changed: applies when the host restarts (it is not yet applied live)".to_owned()
                        };
                        Diagnostic::single(self.shown.clone(), None, Severity::Warning, &format!("/{field}"), message)
                    })
                    .collect();
                lock(&self.state).diagnostics = diagnostics;
                let live = merged(&running.config, next);
                match Applied::of(live) {
                    Ok(applied) => {
                        tracing::info!("root config: the edit is in force");
                        self.current.send_replace(Arc::new(applied));
                        true
                    }
                    Err(problems) => {
                        self.refuse(problems);
                        false
                    }
                }
            }
            Err(problems) => {
                self.refuse(problems);
                false
            }
        }
    }

    /// What bringing `document` into force would come to, judged as an edit of the file is
    /// (the console's Settings view asks before it saves): every problem, and the changed
    /// fields that would wait for a restart.
    #[must_use]
    pub fn judge(&self, document: &Value) -> Verdict {
        let next = RootConfig::from_value(&self.path, document.clone()).map_err(problems_of);
        match next {
            Err(problems) => Verdict { problems, waiting: Vec::new() },
            Ok(next) => {
                let running = self.current();
                let waiting = waiting_fields(&running.config, &next);
                let problems = Applied::of(merged(&running.config, next)).err().unwrap_or_default();
                Verdict { problems, waiting }
            }
        }
    }

    /// Replaces the file with `document` when it would be valid — and, given the
    /// `revision` the editor started from, only while the file is still that revision, so
    /// an edit made by hand meanwhile is never overwritten unseen — and brings it into
    /// force at once (not at the next look); the verdict either way. Writes the file: call
    /// it off the async runtime's threads.
    ///
    /// # Errors
    /// [`ReplaceError::Changed`] when the file is no longer `revision`; writing the file.
    pub fn replace(&self, document: &Value, revision: Option<&str>) -> Result<Verdict, ReplaceError> {
        let verdict = self.judge(document);
        if !verdict.problems.is_empty() {
            return Ok(verdict);
        }
        if let Some(expected) = revision
            && self.file().revision != expected
        {
            return Err(ReplaceError::Changed);
        }
        let mut bytes = serde_json::to_vec_pretty(document).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        butler_catalog::files::write_atomic(&self.path, &bytes)?;
        self.check();
        Ok(verdict)
    }

    /// The file now: its text (`None` when it cannot be read, or is larger than a config
    /// may be), its document when the text is JSON, and its revision.
    #[must_use]
    pub fn file(&self) -> FileNow {
        let bytes = read_bounded(&self.path);
        let revision = data_encoding::HEXLOWER.encode(&Sha256::digest(bytes.as_deref().unwrap_or_default()));
        let document = bytes.as_deref().and_then(|b| serde_json::from_slice(b).ok());
        FileNow { text: bytes.map(|b| String::from_utf8_lossy(&b).into_owned()), document, revision }
    }

    fn refuse(&self, problems: Vec<SchemaError>) {
        tracing::warn!(
            "root config: the edit is invalid ({} problems, first {}: {}); the last good config stays in force — see GET /catalog",
            problems.len(),
            problems.first().map_or("", |p| p.pointer.as_str()),
            problems.first().map_or("", |p| p.message.as_str()),
        );
        lock(&self.state).diagnostics =
            vec![Diagnostic { path: self.shown.clone(), id: None, severity: Severity::Error, errors: problems }];
    }

    /// Looks at the file every [`POLL`] for as long as the runtime runs.
    pub fn watch(self: &Arc<Self>) {
        let live = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(POLL);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(live) = live.upgrade() else { break };
                if tokio::task::spawn_blocking(move || live.check()).await.is_err() {
                    tracing::error!("root config: a check of the file panicked");
                }
            }
        });
    }
}

/// The file's bytes, at most the config's limit; `None` when it cannot be read, is larger,
/// or is not a regular file (a FIFO put in its place is opened without waiting for a
/// writer, then refused, so the watcher never hangs on it).
fn read_bounded(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let nonblocking = rustix::fs::OFlags::NONBLOCK.bits().cast_signed();
    let file = std::fs::OpenOptions::new().read(true).custom_flags(nonblocking).open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(super::config::MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= super::config::MAX_CONFIG_BYTES).then_some(bytes)
}

/// The file's text as a config, or every problem.
fn judge(path: &Path, text: &[u8]) -> Result<RootConfig, Vec<SchemaError>> {
    let value: Value = serde_json::from_slice(text)
        .map_err(|e| vec![SchemaError { pointer: String::new(), message: format!("not JSON: {e}") }])?;
    RootConfig::from_value(path, value).map_err(problems_of)
}

fn problems_of(error: super::InstanceError) -> Vec<SchemaError> {
    match error {
        super::InstanceError::InvalidConfig { errors, .. } => errors,
        other => vec![SchemaError { pointer: String::new(), message: other.to_string() }],
    }
}

/// The root config file as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileNow {
    /// Its text, when it can be read.
    pub text: Option<String>,
    /// Its document, when the text is JSON.
    pub document: Option<Value>,
    /// The SHA-256 of its bytes in hex (of none, when it cannot be read): what an editor
    /// started from, for [`LiveConfig::replace`].
    pub revision: String,
}

/// Why a config was not written.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    /// The file changed since the revision the editor started from.
    #[error("the root config changed since it was opened: load it again, then make the edit")]
    Changed,
    /// Writing the file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What an edit would come to.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    /// Every problem, with its pointer (none: it is valid).
    pub problems: Vec<SchemaError>,
    /// The changed top-level fields that would keep their running value until a restart.
    pub waiting: Vec<String>,
}

/// The top-level fields of `next` that differ from `running` and are not applied live.
fn waiting_fields(running: &RootConfig, next: &RootConfig) -> Vec<String> {
    RESTART_FIELDS
        .iter()
        .chain(STARTUP_FIELDS)
        .filter(|field| running.raw.get(**field) != next.raw.get(**field))
        .map(|field| (*field).to_owned())
        .collect()
}

/// The top-level fields of `config` applied live: [`LIVE_FIELDS`], and the keys its
/// faculties are granted — but never one of [`RESTART_FIELDS`].
#[must_use]
pub fn live_fields(config: &RootConfig) -> std::collections::BTreeSet<String> {
    let granted = config.faculties.values().flat_map(|settings| settings.config.iter().cloned());
    LIVE_FIELDS
        .iter()
        .map(|field| (*field).to_owned())
        .chain(granted)
        .filter(|field| !RESTART_FIELDS.contains(&field.as_str()))
        .collect()
}

/// `next` with every field not applied live kept as `running` has it.
fn merged(running: &RootConfig, next: RootConfig) -> RootConfig {
    let mut live = next;
    for field in RESTART_FIELDS.iter().chain(STARTUP_FIELDS) {
        match running.raw.get(*field) {
            Some(value) => live.raw.insert((*field).to_owned(), value.clone()),
            None => live.raw.remove(*field),
        };
    }
    live.scan_roots.clone_from(&running.scan_roots);
    live.folders.clone_from(&running.folders);
    live.state_dir.clone_from(&running.state_dir);
    live.python.clone_from(&running.python);
    live.bun.clone_from(&running.bun);
    live
}

#[cfg(test)]
mod tests;
