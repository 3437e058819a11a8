//! Supervision of hosted tools and services: the reconciler that keeps one
//! [`item`] task per extension with a `hosted` block, in step with the catalog.
//!
//! - [`policy`]: restart policy and backoff;
//! - [`health`]: url / exec / port probes;
//! - [`item`]: the task that owns one item's process.
//!
//! What supervision witnesses (an item failing) goes out as an [`Event`] on a broadcast
//! channel; it never waits for whoever records it.

pub mod health;
pub mod item;
pub mod policy;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;

use crate::catalog::manifest::{Health, Hosted, RestartPolicy};
use crate::catalog::{Catalog, Extension, Kind};
use crate::lock;
use butler_process::{HostEnv, Launch, LaunchError};
pub use item::{Item, Run, State, Status};

/// What an item runs, derived from its manifest.
#[derive(Debug)]
pub struct Spec {
    /// Its kind (tool or service).
    pub kind: Kind,
    /// The manifest's `id`, which the supervisor keys the item by.
    pub id: String,
    /// What to execute.
    pub launch: Result<Launch, LaunchError>,
    /// Its health probe and interval.
    pub probe: Result<Option<(health::Probe, Duration)>, LaunchError>,
    /// Restart policy in effect.
    pub restart: RestartPolicy,
    /// Start with the host.
    pub auto_start: bool,
    /// What it was derived from, to notice a change.
    source: (Hosted, Option<Health>, PathBuf),
}

impl Spec {
    /// The port its manifest says it listens on.
    #[must_use]
    pub fn port(&self) -> Option<u16> {
        self.source.0.port
    }

    /// The spec of `extension`, if it is a hosted tool or service.
    #[must_use]
    pub fn of(extension: &Extension, host: &HostEnv) -> Option<Self> {
        let manifest = &extension.manifest;
        let hosted = manifest.hosted.as_ref()?;
        if !matches!(manifest.kind, Kind::Tool | Kind::Service) {
            return None;
        }
        Some(Self {
            kind: manifest.kind,
            id: manifest.id.clone(),
            launch: Launch::of(&hosted.command, hosted.cwd.as_deref(), &hosted.env, &extension.dir, host),
            probe: health::Probe::of(extension, host),
            restart: policy::effective(manifest.kind, hosted.restart),
            auto_start: hosted.auto_start,
            source: (hosted.clone(), manifest.health.clone(), extension.dir.clone()),
        })
    }

    fn same_source(&self, other: &Self) -> bool {
        self.kind == other.kind && self.source == other.source
    }
}

/// Something supervision witnessed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An item exited with a failure without being asked to stop.
    #[allow(missing_docs)] // `kind` and `id` are the item's, as in its manifest
    Failed {
        kind: Kind,
        id: String,
        /// Its exit code (`128 + N` for signal N).
        code: i32,
        /// When it restarts, if it does.
        restart_in: Option<Duration>,
    },
    /// An item was started again by its restart policy (after its restart delay).
    #[allow(missing_docs)] // `kind` and `id` are the item's, as in its manifest
    Restarted {
        kind: Kind,
        id: String,
        /// How many times it was restarted since it was last started by hand.
        restarts: u32,
    },
}

/// How long a start's answer waits for the started program's pid.
const PID_WAIT: Duration = Duration::from_secs(5);

/// A request on one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start it.
    Start,
    /// Stop it.
    Stop,
    /// Stop, then start it.
    Restart,
}

/// Why a request on an item cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum SuperviseError {
    /// No such extension of this kind.
    #[error("no {kind} with id `{id}`")]
    Unknown { kind: &'static str, id: String },
    /// The extension exists but Butler does not run it.
    #[error("{kind} `{id}` has no `hosted` block, so Butler does not run it (nothing to start or stop)")]
    NotHosted { kind: &'static str, id: String },
    /// It was removed while the request waited.
    #[error("{kind} `{id}` was removed")]
    Removed { kind: &'static str, id: String },
}

impl SuperviseError {
    /// The error code the API uses.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unknown { .. } => "unknown_extension",
            Self::NotHosted { .. } => "not_hosted",
            Self::Removed { .. } => "extension_removed",
        }
    }
}

/// The supervisor: one item task per hosted tool and service.
pub struct Supervisor {
    items: Mutex<BTreeMap<String, Arc<Item>>>,
    host: HostEnv,
    logs_dir: PathBuf,
    events: broadcast::Sender<Event>,
    /// Reconciles run one at a time, in snapshot order; `true` once shut down, after which
    /// a late snapshot starts nothing.
    reconciling: tokio::sync::Mutex<bool>,
    /// The items the owner stopped, kept in [`STOPPED_FILE`]: an `autoStart` item among
    /// them is not started with the host until the owner starts it again.
    stopped: Mutex<BTreeSet<String>>,
    stopped_file: PathBuf,
}

/// Where the ids of the items the owner stopped are kept, in the state directory.
pub const STOPPED_FILE: &str = "stopped.json";

impl Supervisor {
    /// A supervisor whose processes see `host`'s environment and log under `state_dir/logs`.
    #[must_use]
    pub fn new(host: HostEnv, state_dir: &Path) -> Arc<Self> {
        let (events, _) = broadcast::channel(64);
        let stopped_file = state_dir.join(STOPPED_FILE);
        let stopped = match std::fs::read(&stopped_file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(
                    "{}: not a list of ids ({e}); items stopped by hand may start with the host",
                    stopped_file.display()
                );
                BTreeSet::new()
            }),
            Err(_) => BTreeSet::new(),
        };
        Arc::new(Self {
            items: Mutex::new(BTreeMap::new()),
            host,
            logs_dir: state_dir.join("logs"),
            events,
            reconciling: tokio::sync::Mutex::new(false),
            stopped: Mutex::new(stopped),
            stopped_file,
        })
    }

    /// Records that the owner stopped (`true`) or started `id`, for the next host start.
    fn remember_stopped(&self, id: &str, stopped: bool) {
        let mut set = lock(&self.stopped);
        let changed = if stopped { set.insert(id.to_owned()) } else { set.remove(id) };
        if !changed {
            return;
        }
        let bytes = serde_json::to_vec(&*set).unwrap_or_default();
        if let Err(e) = crate::catalog::files::write_private(&self.stopped_file, &bytes) {
            tracing::warn!(
                "cannot record that `{id}` was stopped or started by hand in {}: {e}",
                self.stopped_file.display()
            );
        }
    }

    /// Failures as they happen.
    #[must_use]
    pub fn events(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Brings the items in line with `catalog`: new hosted extensions get an item (started
    /// if `autoStart`, unless the owner stopped it), removed ones are stopped, changed ones restarted with their new
    /// `hosted` block.
    pub async fn reconcile(&self, catalog: &Catalog) {
        let shut_down = self.reconciling.lock().await;
        if *shut_down {
            return;
        }
        let mut wanted: BTreeMap<String, Spec> = [Kind::Tool, Kind::Service]
            .into_iter()
            .flat_map(|kind| catalog.of_kind(kind))
            .filter_map(|e| Spec::of(e, &self.host))
            .map(|spec| (spec.id.clone(), spec))
            .collect();
        let current: Vec<(String, Arc<Item>)> =
            lock(&self.items).iter().map(|(id, item)| (id.clone(), Arc::clone(item))).collect();
        for (id, item) in current {
            match wanted.remove(&id) {
                Some(spec) if spec.same_source(&item.spec()) => {}
                Some(spec) if spec.kind == item.kind => item.update(Arc::new(spec)).await,
                // Gone, or its kind changed: stop it; a changed kind comes back as new below.
                other => {
                    lock(&self.items).remove(&id);
                    item.remove().await;
                    if let Some(spec) = other {
                        wanted.insert(id, spec);
                    }
                }
            }
        }
        for (id, spec) in wanted {
            let auto_start = spec.auto_start;
            let item = Item::spawn(Arc::new(spec), self.logs_dir.join(format!("{id}.log")), self.events.clone());
            lock(&self.items).insert(id.clone(), Arc::clone(&item));
            if auto_start && !lock(&self.stopped).contains(&id) {
                let _ = item.start().await;
            }
        }
    }

    /// The status of item `id`, if it is supervised.
    #[must_use]
    pub fn status(&self, id: &str) -> Option<Status> {
        lock(&self.items).get(id).map(|item| item.status())
    }

    /// The supervised item `id` of `kind`, or why there is none.
    ///
    /// # Errors
    /// [`SuperviseError::Unknown`] or [`SuperviseError::NotHosted`].
    pub fn item(&self, catalog: &Catalog, kind: Kind, id: &str) -> Result<Arc<Item>, SuperviseError> {
        let unknown = || SuperviseError::Unknown { kind: kind.as_str(), id: id.to_owned() };
        let extension = catalog.get(id).filter(|e| e.kind() == kind).ok_or_else(unknown)?;
        if extension.manifest.hosted.is_none() {
            return Err(SuperviseError::NotHosted { kind: kind.as_str(), id: id.to_owned() });
        }
        // Registered a moment ago, not reconciled yet: same answer as a missing one.
        lock(&self.items).get(id).filter(|item| item.kind == kind).cloned().ok_or_else(unknown)
    }

    /// Runs `action` on `item`, answering once it is done (a stop waits for the exit).
    ///
    /// # Errors
    /// [`SuperviseError::Removed`] if the item went away meanwhile.
    pub async fn act(&self, item: &Item, id: &str, action: Action) -> Result<Status, SuperviseError> {
        let done = match action {
            Action::Start => item.start().await,
            Action::Stop => item.stop().await,
            Action::Restart => item.restart().await,
        };
        done.map_err(|_| SuperviseError::Removed { kind: item.kind.as_str(), id: id.to_owned() })?;
        self.remember_stopped(id, action == Action::Stop);
        let mut status = item.status();
        // A started process is the keeper's child: it has a pid a moment after the keeper
        // does. The answer waits for it, briefly.
        let deadline = tokio::time::Instant::now() + PID_WAIT;
        while action != Action::Stop
            && status.pid.is_none()
            && status.pgid.is_some()
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
            status = item.status();
        }
        Ok(status)
    }

    /// Stops every item (the host is shutting down).
    pub async fn shutdown(&self) {
        let mut shut_down = self.reconciling.lock().await;
        *shut_down = true;
        let items: Vec<Arc<Item>> = std::mem::take(&mut *lock(&self.items)).into_values().collect();
        let stops = items.iter().map(|item| item.remove());
        futures_util::future::join_all(stops).await;
    }
}

impl butler_catalog::Follow for Supervisor {
    async fn on_snapshot(self: Arc<Self>, snapshot: Arc<Catalog>) {
        self.reconcile(&snapshot).await;
    }
}
