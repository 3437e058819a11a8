//! Loading components: read, hash, compile (or load the compiled artifact from the disk
//! cache), classify, pre-link, and — for faculties — ask them to describe themselves.
//!
//! Compiled code is cached in `<stateDir>/cache/components/<sha256>-<engine>.cwasm`,
//! keyed by the file's content hash and the engine's compatibility hash, so a restart
//! loads by mmap instead of recompiling. In memory, loaded components are kept by
//! content hash; file hashes are memoized by (size, mtime, inode) so rescans do not
//! re-read unchanged files.

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
use super::sandbox::{CallState, Linkers, Sandbox};
use super::wit::{self, FacultyPre, Flavor, Op};
use crate::catalog::{ComponentInfo, ComponentInspector, ComponentKind};

/// Largest component file accepted (language runtimes compiled to components are tens of
/// megabytes; anything far beyond is not a faculty).
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;
/// Deadline and memory for `describe()`.
const DESCRIBE_TIMEOUT_MS: u64 = 10_000;
const DESCRIBE_MEMORY_MB: u64 = 256;

/// A component ready to instantiate.
#[derive(Clone)]
pub enum Prepared {
    /// A `butler:faculty` component.
    Faculty(FacultyPre),
    /// A plain WASI command.
    Command(CommandPre<CallState>),
}

/// One loaded component.
pub struct Loaded {
    /// Content hash (hex SHA-256).
    pub hash: String,
    /// What it is.
    pub flavor: Flavor,
    /// Pre-linked for instantiation.
    pub prepared: Prepared,
    /// `describe()` output, for faculties.
    pub describe: Option<Value>,
}

type Stamp = (u64, i64, i64, u64);

/// The loader and its caches.
pub struct Components {
    engine: Engine,
    linkers: Arc<Linkers>,
    cache_dir: PathBuf,
    engine_key: String,
    file_hashes: Mutex<HashMap<PathBuf, (Stamp, String)>>,
    loaded: Mutex<HashMap<String, Arc<Loaded>>>,
    /// Components compiled from source since start.
    pub compiles: AtomicU64,
    /// Components loaded from the disk cache since start.
    pub cache_hits: AtomicU64,
}

impl Components {
    /// A loader caching compiled code under `cache_dir`.
    #[must_use]
    pub fn new(engine: Engine, linkers: Arc<Linkers>, cache_dir: PathBuf) -> Self {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex(&hasher.0.finalize())[..16].to_owned();
        Self {
            engine,
            linkers,
            cache_dir,
            engine_key,
            file_hashes: Mutex::new(HashMap::new()),
            loaded: Mutex::new(HashMap::new()),
            compiles: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
        }
    }

    /// Loads the component at `path` (memoized by content).
    ///
    /// # Errors
    /// A readable reason.
    pub fn load(&self, path: &Path) -> Result<Arc<Loaded>, String> {
        let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
        if !meta.is_file() {
            return Err("not a regular file".to_owned());
        }
        if meta.len() > MAX_COMPONENT_BYTES {
            return Err(format!("larger than {} MiB", MAX_COMPONENT_BYTES >> 20));
        }
        let stamp = (meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ino());
        let known = lock(&self.file_hashes).get(path).filter(|(s, _)| *s == stamp).map(|(_, h)| h.clone());
        if let Some(loaded) = known.and_then(|hash| lock(&self.loaded).get(&hash).cloned()) {
            return Ok(loaded);
        }
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
        let hash = hex(&Sha256::digest(&bytes));
        lock(&self.file_hashes).insert(path.to_owned(), (stamp, hash.clone()));
        if let Some(loaded) = lock(&self.loaded).get(&hash).cloned() {
            return Ok(loaded);
        }
        let loaded = Arc::new(self.prepare(&bytes, hash.clone(), path)?);
        lock(&self.loaded).insert(hash, loaded.clone());
        Ok(loaded)
    }

    fn prepare(&self, bytes: &[u8], hash: String, path: &Path) -> Result<Loaded, String> {
        let component = self.compile(bytes, &hash, path)?;
        let flavor = wit::flavor(&self.engine, &component)?;
        let (prepared, describe) = match &flavor {
            Flavor::Faculty(version) => {
                let pre = FacultyPre::new(version, &self.linkers, &component).map_err(|e| link_error(&e))?;
                let describe = describe(&self.engine, &pre, path)?;
                (Prepared::Faculty(pre), Some(describe))
            }
            Flavor::Command => {
                let pre = self.linkers.faculty_v0_1_0.instantiate_pre(&component).map_err(|e| link_error(&e))?;
                (Prepared::Command(CommandPre::new(pre).map_err(|e| link_error(&e))?), None)
            }
        };
        Ok(Loaded { hash, flavor, prepared, describe })
    }

    /// The compiled component: from the disk cache when present, else compiled and cached.
    fn compile(&self, bytes: &[u8], hash: &str, path: &Path) -> Result<Component, String> {
        let cached = self.cache_dir.join(format!("{hash}-{}.cwasm", self.engine_key));
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
        if !bytes.starts_with(b"\0asm") {
            return Err("not a WebAssembly file".to_owned());
        }
        // Layer 0x1 / version 0xd is a component; version 1 layer 0 is a core module.
        if bytes.get(4..8) == Some(&[1, 0, 0, 0]) {
            return Err("a core WebAssembly module, not a component (build for wasm32-wasip2, or wrap it with `wasm-tools component new`)".to_owned());
        }
        let started = std::time::Instant::now();
        let component = Component::new(&self.engine, bytes).map_err(|e| format!("does not compile: {e:#}"))?;
        self.compiles.fetch_add(1, Ordering::Relaxed);
        tracing::info!(component = %path.display(), ms = started.elapsed().as_millis(), "faculty runtime: compiled");
        match component.serialize() {
            Ok(artifact) => {
                let written = std::fs::create_dir_all(&self.cache_dir)
                    .and_then(|()| crate::instance::write_atomic(&cached, &artifact));
                if let Err(e) = written {
                    tracing::warn!(cache = %cached.display(), "faculty runtime: cannot write the compile cache: {e}");
                }
            }
            Err(e) => tracing::warn!("faculty runtime: cannot serialize compiled code: {e:#}"),
        }
        Ok(component)
    }

    /// The loaded component with this content hash, if any.
    #[must_use]
    pub fn by_hash(&self, hash: &str) -> Option<Arc<Loaded>> {
        lock(&self.loaded).get(hash).cloned()
    }
}

impl ComponentInspector for Components {
    fn inspect(&self, path: &Path) -> Result<ComponentInfo, String> {
        let loaded = self.load(path)?;
        let kind = match loaded.flavor {
            Flavor::Faculty(version) => ComponentKind::Faculty { wit_version: version.to_owned() },
            Flavor::Command => ComponentKind::Command,
        };
        Ok(ComponentInfo { hash: loaded.hash.clone(), kind, describe: loaded.describe.clone() })
    }
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

fn describe(engine: &Engine, pre: &FacultyPre, path: &Path) -> Result<Value, String> {
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let sandbox =
        Sandbox { faculty: name, preopens: Vec::new(), timeout_ms: DESCRIBE_TIMEOUT_MS, memory_mb: DESCRIBE_MEMORY_MB };
    let state = CallState::new(&sandbox, &[], None, None, CallContext::default()).map_err(|e| format!("{e:#}"))?;
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limits);
    store.set_epoch_deadline(super::engine::ticks_for(DESCRIBE_TIMEOUT_MS));
    let text = match pre.run(&mut store, &Op::Describe) {
        Ok(Ok(text)) => text,
        Ok(Err((code, message))) => return Err(format!("describe() failed: {code}: {message}")),
        Err(e) => return Err(format!("describe() trapped: {}", super::run::trap_summary(&e))),
    };
    crate::json::parse(&text).map_err(|e| format!("describe() did not return JSON: {e}"))
}

fn link_error(error: &wasmtime::Error) -> String {
    format!("cannot be linked: {error:#} (a faculty may import only WASI Preview 2 and butler:faculty/host)")
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
