//! The catalog loader task: scan, watch, debounce, publish.
//!
//! One task owns every scan, so loads and unloads never run concurrently. It reacts to
//! file-system events (debounced) and, as a safety net for missed events, compares a
//! cheap fingerprint of the scan roots every [`FINGERPRINT_INTERVAL`]. A snapshot is
//! published only when its content changed. A `.wasm` dropped into a scan root is
//! announced as pending at once, before the debounce (see
//! [`butler_catalog::scan::unjudged_components`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};

use super::scan::MANIFEST_FILE;
use super::{Catalog, ScanConfig, scan, scan_confirming};

/// Quiet time after the last relevant event before rescanning: long enough to take a
/// folder copy or an editor's save-rename as one change, short enough that a new manifest
/// is listed well within the 1 s promise.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// A steady stream of events still gets a rescan at least this often.
pub const MAX_DEBOUNCE: Duration = Duration::from_millis(400);
/// How often the fingerprint check backs up the watcher. Stat-only, so cheap even with a
/// thousand extensions; a missed event is caught within this time.
pub const FINGERPRINT_INTERVAL: Duration = Duration::from_secs(2);

/// The catalog loader could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    /// The file watcher could not be created.
    #[error("cannot watch the scan roots: {0}")]
    Watch(#[from] notify::Error),
    /// The first scan did not finish.
    #[error("the first scan failed: {0}")]
    Scan(#[from] tokio::task::JoinError),
}

/// Asks the loader for a rescan. Made before the loader ([`rescan_channel`]), so that
/// what is built before it (the faculty runtime, which rescans after each compile) can ask.
#[derive(Clone)]
pub struct Rescan(mpsc::UnboundedSender<()>);

impl Rescan {
    /// Asks for a rescan now.
    pub fn request(&self) {
        // The loader only stops when the host does; a failed send means nothing to do.
        let _ = self.0.send(());
    }
}

/// The loader's side of a [`Rescan`].
pub struct RescanRequests(mpsc::UnboundedReceiver<()>);

/// A way to ask for rescans, and the loader's end of it ([`spawn_loader_with`]).
#[must_use]
pub fn rescan_channel() -> (Rescan, RescanRequests) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Rescan(tx), RescanRequests(rx))
}

/// Subscribers' side of the loader.
#[derive(Clone)]
pub struct CatalogHandle {
    snapshots: watch::Receiver<Arc<Catalog>>,
    rescan: Rescan,
}

impl CatalogHandle {
    /// The snapshot the loader published last (cheap: a shared pointer).
    #[must_use]
    pub fn current(&self) -> Arc<Catalog> {
        self.snapshots.borrow().clone()
    }

    /// A receiver that wakes on every published snapshot.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<Arc<Catalog>> {
        self.snapshots.clone()
    }

    /// Hands `follower` the current snapshot now, then every new one, in order, on a task
    /// of its own: how every reconciler (the faculty runtime, supervision, the MCP hub)
    /// follows the catalog.
    pub async fn follow<F: super::Follow>(&self, follower: Arc<F>) {
        self.follow_with(move |snapshot| Arc::clone(&follower).on_snapshot(snapshot)).await;
    }

    /// Runs `reconcile` on the current snapshot now, then on every new one, in order, on a
    /// task of its own ([`Self::follow`] for a closure).
    pub async fn follow_with<F, Fut>(&self, reconcile: F)
    where
        F: Fn(Arc<Catalog>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let mut snapshots = self.subscribe();
        let first = snapshots.borrow_and_update().clone();
        reconcile(first).await;
        tokio::spawn(async move {
            while snapshots.changed().await.is_ok() {
                let snapshot = snapshots.borrow_and_update().clone();
                reconcile(snapshot).await;
            }
        });
    }

    /// Asks for a rescan now (e.g. after the host wrote into a scan root itself).
    pub fn request_rescan(&self) {
        self.rescan.request();
    }
}

/// Runs the first scan, then spawns the loader task on the current runtime.
///
/// # Errors
/// [`LoaderError`] when the watcher cannot be created or the first scan panics.
pub async fn spawn_loader(config: ScanConfig) -> Result<CatalogHandle, LoaderError> {
    spawn_loader_with(config, rescan_channel()).await
}

/// [`spawn_loader`], taking rescan requests from `rescans` (made beforehand with
/// [`rescan_channel`]).
///
/// # Errors
/// [`LoaderError`] when the watcher cannot be created or the first scan panics.
pub async fn spawn_loader_with(
    config: ScanConfig,
    (rescan, RescanRequests(rescan_rx)): (Rescan, RescanRequests),
) -> Result<CatalogHandle, LoaderError> {
    let (event_tx, event_rx) = mpsc::unbounded_channel();
    let relevant = Relevance::new(&config);
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let wake = match event {
            // Opening or reading a file changes nothing — and the scanner's own reads would
            // otherwise wake it again, forever.
            Ok(event) if matches!(event.kind, notify::EventKind::Access(_)) => false,
            Ok(event) => event.paths.iter().any(|p| relevant.matters(p)) || event.paths.is_empty(),
            Err(_) => true,
        };
        if wake {
            let _ = event_tx.send(());
        }
    })?;
    let first_config = config.clone();
    let (first, fingerprint, dirs) = tokio::task::spawn_blocking(move || {
        let catalog = scan(&first_config, None);
        let (fingerprint, dirs) = fingerprint(&first_config);
        (catalog, fingerprint, dirs)
    })
    .await?;
    tracing::info!(extensions = first.extensions.len(), diagnostics = first.diagnostics.len(), "catalog: first scan");
    for d in &first.diagnostics {
        log_diagnostic(d);
    }
    let (snapshot_tx, snapshot_rx) = watch::channel(Arc::new(first));
    let mut loader = Loader {
        config,
        watcher,
        watched: BTreeSet::new(),
        fingerprint,
        snapshots: snapshot_tx,
        gone: BTreeSet::new(),
        confirm_at: None,
    };
    loader.update_watches(&dirs);
    tokio::spawn(loader.run(event_rx, rescan_rx));
    Ok(CatalogHandle { snapshots: snapshot_rx, rescan })
}

fn first_message(d: &super::Diagnostic) -> String {
    d.errors
        .first()
        .map(|e| format!("{}: {}", if e.pointer.is_empty() { "(root)" } else { &e.pointer }, e.message))
        .unwrap_or_default()
}

type Fingerprint = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

struct Loader {
    config: ScanConfig,
    watcher: RecommendedWatcher,
    watched: BTreeSet<PathBuf>,
    fingerprint: Fingerprint,
    snapshots: watch::Sender<Arc<Catalog>>,
    /// Folders the last scan found gone (kept registered until a second scan agrees).
    gone: BTreeSet<PathBuf>,
    /// When that second scan runs.
    confirm_at: Option<Instant>,
}

impl Loader {
    async fn run(mut self, mut events: mpsc::UnboundedReceiver<()>, mut requests: mpsc::UnboundedReceiver<()>) {
        let mut tick = tokio::time::interval(FINGERPRINT_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                Some(()) = events.recv() => {
                    self.announce_new_components().await;
                    debounce(&mut events).await;
                    self.rescan().await;
                }
                Some(()) = requests.recv() => self.rescan().await,
                () = sleep_until(self.confirm_at.unwrap_or_else(far_future)), if self.confirm_at.is_some() => {
                    self.rescan().await;
                }
                _ = tick.tick() => {
                    let config = self.config.clone();
                    let Ok((now, _)) = tokio::task::spawn_blocking(move || fingerprint(&config)).await else { continue };
                    if now != self.fingerprint {
                        // A write may be under way whose events have not arrived yet:
                        // the same quiet time as after an event, then the rescan.
                        tracing::debug!("catalog: fingerprint changed without an event; rescanning");
                        self.announce_new_components().await;
                        debounce(&mut events).await;
                        self.rescan().await;
                    }
                }
                () = self.snapshots.closed() => return,
            }
        }
    }

    /// Publishes the `.wasm` files dropped into a scan root since the last snapshot as
    /// pending, before the debounce and the scan that compiles them: a call to one waits
    /// for it from the moment the watcher sees it, and `/catalog` lists it.
    async fn announce_new_components(&mut self) {
        if self.config.inspector.is_none() {
            return;
        }
        let config = self.config.clone();
        let previous = self.snapshots.borrow().clone();
        let prev = Arc::clone(&previous);
        let Ok(found) =
            tokio::task::spawn_blocking(move || butler_catalog::scan::unjudged_components(&config, &prev)).await
        else {
            return;
        };
        if found.is_empty() {
            return;
        }
        let mut next = (*previous).clone();
        next.diagnostics.extend(found);
        next.generation = previous.generation + 1;
        log_changes(&previous, &next);
        self.snapshots.send_replace(Arc::new(next));
    }

    async fn rescan(&mut self) {
        let config = self.config.clone();
        let previous = self.snapshots.borrow().clone();
        let prev = previous.clone();
        let gone_before = std::mem::take(&mut self.gone);
        let Ok(((mut next, gone), fingerprint, dirs)) = tokio::task::spawn_blocking(move || {
            let scanned = scan_confirming(&config, Some(&prev), Some(&gone_before));
            let (fingerprint, dirs) = fingerprint(&config);
            (scanned, fingerprint, dirs)
        })
        .await
        else {
            tracing::error!("catalog: a rescan panicked; keeping the last snapshot");
            return;
        };
        // Something vanished: a second scan, after the debounce, confirms it.
        self.confirm_at = (!gone.is_empty()).then(|| Instant::now() + DEBOUNCE);
        self.gone = gone;
        self.fingerprint = fingerprint;
        self.update_watches(&dirs);
        if next.same_content(&previous) {
            return;
        }
        next.generation = previous.generation + 1;
        log_changes(&previous, &next);
        self.snapshots.send_replace(Arc::new(next));
    }

    /// Watches the instance root, every scan root and every extension directory, each
    /// non-recursively: an extension's own busy subfolders (logs, caches, node_modules)
    /// never cost a watch or an event.
    fn update_watches(&mut self, dirs: &[PathBuf]) {
        let mut desired: BTreeSet<PathBuf> = BTreeSet::new();
        desired.insert(self.config.instance_root.clone());
        desired.extend(self.config.roots.iter().filter(|r| r.is_dir()).cloned());
        desired.extend(dirs.iter().cloned());
        for gone in self.watched.difference(&desired) {
            let _ = self.watcher.unwatch(gone);
        }
        for new in desired.difference(&self.watched) {
            if let Err(e) = self.watcher.watch(new, RecursiveMode::NonRecursive) {
                tracing::debug!(path = %new.display(), "catalog: cannot watch ({e}); the periodic check covers it");
            }
        }
        self.watched = desired;
    }
}

/// A deadline that never comes (for a `select!` branch that is off).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

/// Waits until events have been quiet for [`DEBOUNCE`], or [`MAX_DEBOUNCE`] has passed.
async fn debounce(events: &mut mpsc::UnboundedReceiver<()>) {
    let hard_stop = Instant::now() + MAX_DEBOUNCE;
    loop {
        let quiet = (Instant::now() + DEBOUNCE).min(hard_stop);
        tokio::select! {
            () = sleep_until(quiet) => return,
            more = events.recv() => if more.is_none() { return },
        }
    }
}

/// Directory entries of the scan roots with the stat of their manifests, plus the list of
/// extension directories to watch.
fn fingerprint(config: &ScanConfig) -> (Fingerprint, Vec<PathBuf>) {
    let stamp = |p: &Path| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len())));
    let mut dirs = Vec::new();
    let mut print = Vec::new();
    for dir in config.extension_dirs() {
        if dir.is_dir() {
            print.push((dir.join(MANIFEST_FILE), stamp(&dir.join(MANIFEST_FILE))));
            let plugin = dir.join(butler_catalog::chatos::MANIFEST_FILE);
            print.push((plugin.clone(), stamp(&plugin)));
            dirs.push(dir);
        } else {
            print.push((dir.clone(), stamp(&dir)));
        }
    }
    (print, dirs)
}

/// Decides which file-system events can change the catalog.
struct Relevance {
    parents: Vec<PathBuf>,
}

impl Relevance {
    fn new(config: &ScanConfig) -> Self {
        let mut parents = vec![config.instance_root.clone()];
        parents.extend(config.roots.iter().cloned());
        Self { parents }
    }

    /// A manifest (an extension's or a ChatOS plugin's), an entry directly in a scan root or the instance root, or a file an
    /// icon could point at.
    fn matters(&self, path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == MANIFEST_FILE
            || name == butler_catalog::chatos::MANIFEST_FILE
            || self.parents.iter().any(|p| p == path)
        {
            return true;
        }
        if path.parent().is_some_and(|parent| self.parents.iter().any(|p| p == parent)) {
            return true;
        }
        let ext = Path::new(name).extension().and_then(|e| e.to_str()).unwrap_or_default();
        matches!(ext.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg" | "gif" | "webp" | "svg" | "ico" | "wasm")
    }
}

fn log_changes(previous: &Catalog, next: &Catalog) {
    let ids = |c: &Catalog| c.extensions.iter().map(|e| e.id().to_owned()).collect::<BTreeSet<_>>();
    let (before, after) = (ids(previous), ids(next));
    for id in after.difference(&before) {
        tracing::info!(id, "catalog: registered");
    }
    for id in before.difference(&after) {
        tracing::info!(id, "catalog: unregistered");
    }
    for d in next.diagnostics.iter().filter(|d| !previous.diagnostics.contains(d)) {
        log_diagnostic(d);
    }
}

/// A problem is a warning; a component being compiled in the background is not a problem.
fn log_diagnostic(d: &super::Diagnostic) {
    if d.severity == super::Severity::Pending {
        tracing::info!(path = %d.path, "catalog: {}", first_message(d));
    } else {
        tracing::warn!(path = %d.path, problems = d.errors.len(), "catalog: {}", first_message(d));
    }
}
