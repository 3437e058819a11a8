//! Loading components: read, hash, compile (or load the compiled artifact from the disk
//! cache), classify, pre-link, and — for faculties — ask them to describe themselves.
//!
//! Compiled code is cached in `<stateDir>/cache/components/<sha256>-<engine>.cwasm`,
//! keyed by the file's content hash and the engine's compatibility hash, so a restart
//! loads by mmap instead of recompiling. In memory, loaded components are kept by
//! content hash; file hashes are memoized by (size, mtime, inode) so rescans do not
//! re-read unchanged files.
//!
//! Compiling is slow for big components (a Python or JavaScript runtime takes seconds), so
//! in background mode a component that is neither loaded nor in the disk cache is compiled
//! on a worker thread: the caller is told it is pending, and the `on_ready` callback (a
//! catalog rescan) runs when it is done. The catalog loader is never blocked by a compile.
//! Up to [`MAX_PARALLEL_COMPILES`] compile at once (a new instance's built-ins compile
//! side by side); more wait in a queue, each started by a worker that finished.
//!
//! Two tiers: a component not in the disk cache is first compiled by the quick engine
//! (Winch, ~4× faster to compile) and registered at once, then compiled by the optimizing
//! engine (Cranelift) and registered again — the catalog sees the change and the runtime
//! switches over as for any replacement. Only optimized code is cached.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::bindings::sync::CommandPre;

use super::CallContext;
use super::sandbox::{CallState, Sandbox};
use super::wit::Linkers;
use super::wit::{self, FacultyPre, Flavor, Op};
use butler_catalog::lock;
use butler_catalog::{ComponentInfo, ComponentInspector, ComponentKind};

/// Largest component file accepted (language runtimes compiled to components are tens of
/// megabytes; anything far beyond is not a faculty).
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;
/// Compiles running at once. Each one is memory-hungry and cranelift already spreads one
/// compile over the cores, so more would only add memory; fewer would leave a core idle
/// during a compile's serial phases (parsing, linking, writing the cache).
pub const MAX_PARALLEL_COMPILES: usize = 4;
/// Deadline and memory for `describe()`.
const DESCRIBE_TIMEOUT_MS: u64 = 10_000;
const DESCRIBE_MEMORY_MB: u64 = 256;

/// A component ready to instantiate.
#[derive(Clone)]
pub enum Prepared {
    /// A `butler:faculty` component.
    Faculty(Arc<FacultyPre>),
    /// A plain WASI command.
    Command(CommandPre<CallState>),
}

/// One loaded component.
pub struct Loaded {
    /// Content hash (hex SHA-256).
    pub hash: String,
    /// The engine it was compiled for (its stores must be of this engine).
    pub engine: Engine,
    /// Optimized code (else the quick engine's, replaced when the optimized is ready).
    pub optimized: bool,
    /// What it is.
    pub flavor: Flavor,
    /// Pre-linked for instantiation.
    pub prepared: Prepared,
    /// `describe()` output, for faculties.
    pub describe: Option<Value>,
}

type Stamp = (u64, i64, i64, u64);

/// A component's state in memory.
#[derive(Clone)]
enum Slot {
    Compiling,
    Ready(Arc<Loaded>),
    Failed(String),
}

/// Why [`Components::load`] returned no component.
pub use butler_catalog::InspectError as LoadError;

/// What runs after each background compile (the host asks for a rescan).
pub type OnReady = Box<dyn Fn() + Send + Sync>;

/// The loader and its caches.
pub struct Components {
    engine: Engine,
    linkers: Arc<Linkers>,
    /// The quick engine and its linkers, for a first version of new components.
    quick: Option<(Engine, Arc<Linkers>)>,
    cache_dir: PathBuf,
    engine_key: String,
    file_hashes: Mutex<HashMap<PathBuf, (Stamp, String)>>,
    slots: Mutex<HashMap<String, Slot>>,
    /// Compile new components on a worker thread instead of the caller's.
    background: bool,
    /// Runs when a background compile finished (given at construction).
    on_ready: Option<OnReady>,
    /// Compiles waiting for a worker, and how many workers run.
    queue: Mutex<CompileQueue>,
    /// Components compiled from source since start.
    pub compiles: AtomicU64,
    /// Components loaded from the disk cache since start.
    pub cache_hits: AtomicU64,
}

impl Components {
    /// A loader caching compiled code under `cache_dir`; `background` compiles new
    /// components on a worker thread (the host), otherwise on the caller's (`butler check`),
    /// and runs `on_ready` after each background compile.
    #[must_use]
    pub fn new(
        engine: Engine,
        linkers: Arc<Linkers>,
        quick: Option<(Engine, Arc<Linkers>)>,
        cache_dir: PathBuf,
        (background, on_ready): (bool, Option<OnReady>),
    ) -> Self {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = data_encoding::HEXLOWER.encode(&hasher.0.finalize())[..16].to_owned();
        Self {
            engine,
            linkers,
            quick,
            cache_dir,
            engine_key,
            file_hashes: Mutex::new(HashMap::new()),
            slots: Mutex::new(HashMap::new()),
            background,
            on_ready,
            queue: Mutex::new(CompileQueue::default()),
            compiles: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
        }
    }

    /// Loads the component at `path` (memoized by content).
    ///
    /// # Errors
    /// [`LoadError::Pending`] while it compiles in the background; [`LoadError::Failed`]
    /// with a readable reason.
    pub fn load(self: &Arc<Self>, path: &Path) -> Result<Arc<Loaded>, LoadError> {
        let failed = LoadError::Failed;
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => failed("file not found".to_owned()),
            _ if butler_catalog::json::is_unreadable(&e) => LoadError::Unreadable(format!("cannot read it: {e}")),
            _ => failed(format!("cannot read it: {e}")),
        })?;
        if !meta.is_file() {
            return Err(failed("not a regular file".to_owned()));
        }
        if meta.len() > MAX_COMPONENT_BYTES {
            return Err(failed(format!("larger than {} MiB", MAX_COMPONENT_BYTES >> 20)));
        }
        let stamp = (meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ino());
        let known = lock(&self.file_hashes).get(path).filter(|(s, _)| *s == stamp).map(|(_, h)| h.clone());
        if let Some(slot) = known.and_then(|hash| self.slot(&hash)) {
            return slot;
        }
        let bytes = std::fs::read(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => failed("file not found".to_owned()),
            _ if butler_catalog::json::is_unreadable(&e) => LoadError::Unreadable(format!("cannot read it: {e}")),
            _ => failed(format!("cannot read it: {e}")),
        })?;
        let hash = data_encoding::HEXLOWER.encode(&Sha256::digest(&bytes));
        lock(&self.file_hashes).insert(path.to_owned(), (stamp, hash.clone()));
        if let Some(slot) = self.slot(&hash) {
            return slot;
        }
        if let Err(why) = precheck(&bytes) {
            return self.finish(&hash, Err(why));
        }
        if !self.background || self.cached_path(&hash).is_file() {
            // Loading from the disk cache takes milliseconds: do it here.
            return self.finish(&hash, self.prepare(&bytes, hash.clone(), path));
        }
        lock(&self.slots).insert(hash.clone(), Slot::Compiling);
        {
            let mut queue = lock(&self.queue);
            if queue.workers >= MAX_PARALLEL_COMPILES {
                // Queued by path, not bytes: a queue of big components costs no memory.
                queue.waiting.push_back(CompileJob { bytes: None, hash, path: path.to_owned() });
                return Err(LoadError::Pending);
            }
            queue.workers += 1;
        }
        let job = CompileJob { bytes: Some(bytes), hash: hash.clone(), path: path.to_owned() };
        let this = Arc::clone(self);
        let spawned = std::thread::Builder::new().name("faculty-compile".into()).spawn(move || this.work(job));
        match spawned {
            Ok(_) => Err(LoadError::Pending),
            Err(e) => {
                lock(&self.queue).workers -= 1;
                let why = CompileError::NoThread(e.to_string());
                let message = why.to_string();
                let _ = self.finish(&hash, Err(why));
                Err(failed(message))
            }
        }
    }

    /// A compile worker: runs `job`, then whatever is queued, then ends.
    fn work(&self, mut job: CompileJob) {
        loop {
            self.compile_job(&mut job);
            let mut queue = lock(&self.queue);
            match queue.waiting.pop_front() {
                Some(next) => job = next,
                None => {
                    queue.workers -= 1;
                    return;
                }
            }
        }
    }

    /// A quick version first, callable at once (the catalog is told); then the optimized
    /// one. If the optimized compile fails where the quick one worked (for want of memory
    /// or descriptors, say), the quick version stays rather than a failure taking its place.
    fn compile_job(&self, job: &mut CompileJob) {
        let bytes = match job.bytes.take() {
            Some(bytes) => Ok(bytes),
            None => std::fs::read(&job.path).map_err(|e| CompileError::Unreadable(e.to_string())),
        };
        let bytes = bytes.and_then(|bytes| {
            if data_encoding::HEXLOWER.encode(&Sha256::digest(&bytes)) == job.hash {
                Ok(bytes)
            } else {
                Err(CompileError::Changed)
            }
        });
        let bytes = match bytes {
            Ok(bytes) => bytes,
            Err(why) => {
                let _ = self.finish(&job.hash, Err(why));
                return self.notify_ready();
            }
        };
        let quick = match self.prepare_quick(&bytes, job.hash.clone(), &job.path) {
            Some(Ok(quick)) => {
                let _ = self.finish(&job.hash, Ok(quick));
                self.notify_ready();
                true
            }
            _ => false,
        };
        match self.prepare(&bytes, job.hash.clone(), &job.path) {
            Err(why) if quick => {
                tracing::warn!(component = %job.path.display(), "faculty runtime: the optimized compile failed, the quick version stays: {why}");
            }
            result => {
                let _ = self.finish(&job.hash, result);
                self.notify_ready();
            }
        }
    }

    fn notify_ready(&self) {
        if let Some(callback) = &self.on_ready {
            callback();
        }
    }

    fn slot(&self, hash: &str) -> Option<Result<Arc<Loaded>, LoadError>> {
        match lock(&self.slots).get(hash)? {
            Slot::Compiling => Some(Err(LoadError::Pending)),
            Slot::Ready(loaded) => Some(Ok(Arc::clone(loaded))),
            Slot::Failed(why) => Some(Err(LoadError::Failed(why.clone()))),
        }
    }

    fn finish(&self, hash: &str, result: Result<Loaded, CompileError>) -> Result<Arc<Loaded>, LoadError> {
        let (slot, answer) = match result {
            Ok(loaded) => {
                let loaded = Arc::new(loaded);
                (Slot::Ready(Arc::clone(&loaded)), Ok(loaded))
            }
            Err(why) => (Slot::Failed(why.to_string()), Err(LoadError::Failed(why.to_string()))),
        };
        lock(&self.slots).insert(hash.to_owned(), slot);
        answer
    }

    fn cached_path(&self, hash: &str) -> PathBuf {
        self.cache_dir.join(format!("{hash}-{}.cwasm", self.engine_key))
    }

    fn prepare(&self, bytes: &[u8], hash: String, path: &Path) -> Result<Loaded, CompileError> {
        let component = self.compile(bytes, &hash, path)?;
        link(&self.engine, &self.linkers, component, hash, path, true)
    }

    /// A first, quickly compiled version (never cached: the optimized one replaces it).
    fn prepare_quick(&self, bytes: &[u8], hash: String, path: &Path) -> Option<Result<Loaded, CompileError>> {
        let (engine, linkers) = self.quick.as_ref()?;
        let started = std::time::Instant::now();
        let component = match Component::new(engine, bytes) {
            Ok(component) => component,
            Err(e) => {
                tracing::debug!(component = %path.display(), "faculty runtime: no quick version: {e:#}");
                return None;
            }
        };
        tracing::debug!(component = %path.display(), ms = started.elapsed().as_millis(), "faculty runtime: quick version compiled");
        Some(link(engine, linkers, component, hash, path, false))
    }

    /// The compiled component: from the disk cache when present, else compiled and cached.
    fn compile(&self, bytes: &[u8], hash: &str, path: &Path) -> Result<Component, CompileError> {
        let cached = self.cached_path(hash);
        if cached.is_file() {
            match deserialize_cached(&self.engine, &cached) {
                Ok(component) => {
                    self.cache_hits.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(component = %path.display(), "faculty runtime: loaded compiled code from the cache");
                    return Ok(component);
                }
                Err(e) => {
                    tracing::warn!(cache = %cached.display(), "faculty runtime: unusable cache entry, recompiling: {e:#}")
                }
            }
        }
        precheck(bytes)?;
        let started = std::time::Instant::now();
        let component =
            Component::new(&self.engine, bytes).map_err(|e| CompileError::DoesNotCompile(format!("{e:#}")))?;
        tracing::info!(component = %path.display(), ms = started.elapsed().as_millis(), "faculty runtime: compiled");
        match component.serialize() {
            Ok(artifact) => {
                let written = butler_catalog::files::create_private_dir(&self.cache_dir)
                    .and_then(|()| butler_catalog::files::write_private(&cached, &artifact));
                if let Err(e) = written {
                    tracing::warn!(cache = %cached.display(), "faculty runtime: cannot write the compile cache: {e}");
                }
            }
            Err(e) => tracing::warn!("faculty runtime: cannot serialize compiled code: {e:#}"),
        }
        // Counted once cached, so a count that moved means a restart will not compile it.
        self.compiles.fetch_add(1, Ordering::Relaxed);
        Ok(component)
    }

    /// The loaded component with this content hash, if any.
    #[must_use]
    pub fn by_hash(&self, hash: &str) -> Option<Arc<Loaded>> {
        match lock(&self.slots).get(hash)? {
            Slot::Ready(loaded) => Some(Arc::clone(loaded)),
            Slot::Compiling | Slot::Failed(_) => None,
        }
    }
}

/// A component waiting to be compiled.
struct CompileJob {
    /// The file's bytes when already read; queued jobs read the file again.
    bytes: Option<Vec<u8>>,
    hash: String,
    path: PathBuf,
}

/// Compiles not started yet, and the workers running.
#[derive(Default)]
struct CompileQueue {
    waiting: std::collections::VecDeque<CompileJob>,
    workers: usize,
}

/// The catalog's view: shares the loader (an `Arc`) so background compiles can outlive
/// the call.
pub struct Inspector(pub Arc<Components>);

impl ComponentInspector for Inspector {
    fn inspect(&self, path: &Path) -> Result<ComponentInfo, LoadError> {
        let loaded = self.0.load(path)?;
        let kind = match loaded.flavor {
            Flavor::Faculty(version) => ComponentKind::Faculty { wit_version: version.to_owned() },
            Flavor::Command => ComponentKind::Command,
        };
        Ok(ComponentInfo {
            hash: loaded.hash.clone(),
            kind,
            describe: loaded.describe.clone(),
            optimized: loaded.optimized,
        })
    }
}

/// What can be told from the first bytes, before compiling.
fn precheck(bytes: &[u8]) -> Result<(), CompileError> {
    if !bytes.starts_with(b"\0asm") {
        return Err(CompileError::NotWasm);
    }
    // A core module is version 1, layer 0; a component has layer 1.
    if bytes.get(4..8) == Some(&[1, 0, 0, 0]) {
        return Err(CompileError::CoreModule);
    }
    Ok(())
}

/// Why a component file could not be made callable; the message is the component's
/// diagnostic in the catalog and the faculty's status.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum CompileError {
    /// It does not start with the WebAssembly magic.
    #[error("not a WebAssembly file")]
    NotWasm,
    /// A core module, not a component.
    #[error(
        "a core WebAssembly module, not a component (build for wasm32-wasip2, or wrap it with `wasm-tools component new`)"
    )]
    CoreModule,
    /// The file could not be read again for a queued compile.
    #[error("cannot read it: {0}")]
    Unreadable(String),
    /// The file changed while its compile waited.
    #[error("it changed while waiting to be compiled; the next scan compiles the new file")]
    Changed,
    /// No thread could be started to compile it.
    #[error("cannot start a compile thread: {0}")]
    NoThread(String),
    /// wasmtime refused it (its reason, with causes).
    #[error("does not compile: {0}")]
    DoesNotCompile(String),
    /// Neither a supported faculty nor a command.
    #[error(transparent)]
    Flavor(#[from] wit::FlavorError),
    /// It imports something the host does not provide (wasmtime's reason).
    #[error(
        "cannot be linked: {0} (a faculty may import only WASI Preview 2, butler:faculty/host and butler:hub/tools)"
    )]
    Link(String),
    /// The sandbox for `describe()` could not be set up.
    #[error("{0}")]
    DescribeSetup(String),
    /// `describe()` returned a failure.
    #[error("describe() failed: {code}: {message}")]
    DescribeFailed { code: String, message: String },
    /// `describe()` trapped.
    #[error("describe() trapped: {0}")]
    DescribeTrapped(String),
    /// `describe()` returned something other than JSON.
    #[error("describe() did not return JSON: {0}")]
    DescribeNotJson(serde_json::Error),
}

/// Loads an artifact this host wrote.
#[allow(unsafe_code)]
fn deserialize_cached(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: `deserialize_file` trusts its input to be wasmtime-compiled code. The file
    // lives in the host's own state directory, was written (atomically) by this host from
    // a component it compiled, and is named by that component's content hash and this
    // engine's compatibility hash, so only an artifact made for this engine is loaded;
    // wasmtime also checks its header against the engine's configuration.
    unsafe { Component::deserialize_file(engine, path) }
}

fn describe(engine: &Engine, pre: &FacultyPre, path: &Path) -> Result<Value, CompileError> {
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let sandbox = Sandbox {
        faculty: name,
        preopens: Vec::new(),
        timeout_ms: DESCRIBE_TIMEOUT_MS,
        memory_mb: DESCRIBE_MEMORY_MB,
        env: Vec::new(),
        clock: crate::Clock::system(),
    };
    let state = CallState::new(&sandbox, &[], None, None, CallContext::default(), "describe".to_owned())
        .map_err(|e| CompileError::DescribeSetup(format!("{e:#}")))?;
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limits);
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(DESCRIBE_TIMEOUT_MS);
    let _ticking = super::engine::arm(
        &mut store,
        deadline,
        Arc::new(std::sync::atomic::AtomicBool::new(false)),
        None,
        super::engine::Ticks::Continue,
    );
    let text = match pre.run(&mut store, &Op::Describe) {
        Ok(Ok(text)) => text,
        Ok(Err(f)) => return Err(CompileError::DescribeFailed { code: f.code, message: f.message }),
        Err(e) => return Err(CompileError::DescribeTrapped(super::engine::trap_summary(&e))),
    };
    butler_catalog::json::parse(&text).map_err(CompileError::DescribeNotJson)
}

/// Classifies, pre-links and (for faculties) describes a compiled component.
fn link(
    engine: &Engine,
    linkers: &Linkers,
    component: Component,
    hash: String,
    path: &Path,
    optimized: bool,
) -> Result<Loaded, CompileError> {
    let flavor = wit::flavor(engine, &component)?;
    let (prepared, describe) = match &flavor {
        Flavor::Faculty(version) => {
            let pre = FacultyPre::new(version, linkers, &component).map_err(|e| link_error(&e))?;
            let describe = describe(engine, &pre, path)?;
            (Prepared::Faculty(Arc::new(pre)), Some(describe))
        }
        Flavor::Command => {
            let pre = linkers.linker.instantiate_pre(&component).map_err(|e| link_error(&e))?;
            (Prepared::Command(CommandPre::new(pre).map_err(|e| link_error(&e))?), None)
        }
    };
    Ok(Loaded { hash, engine: engine.clone(), optimized, flavor, prepared, describe })
}

fn link_error(error: &wasmtime::Error) -> CompileError {
    CompileError::Link(format!("{error:#}"))
}

/// Feeds `Hash` output into SHA-256 (stable across runs, unlike `DefaultHasher`).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
