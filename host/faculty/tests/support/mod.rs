//! The harness of the runtime suite: an instance in a temporary directory, set up by hand
//! the way the host sets one up (`Instance::faculty_setup` and `Instance::scan_config` in
//! `host/src/instance/mod.rs`); the committed WIT 0.1.0 fixture components; a gate that
//! parks a guest mid-call for as long as a test needs; and a router standing in for the
//! pipeline behind `host.call`.
//!
//! Nothing here measures time: every wait is for a condition, bounded by [`LIVENESS`]
//! only so that a broken runtime fails the suite instead of hanging it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak, mpsc};
use std::time::{Duration, Instant};

use butler_catalog::{Catalog, ScanConfig, Severity, lock};
use butler_faculty::{CallContext, CallError, Dispatch, FacultyRuntime, Setup, Wiring};
use serde_json::{Value, json};

/// How long any wait of the suite may take before it counts as a hang. Far above what a
/// working runtime needs; never asserted as a duration.
pub const LIVENESS: Duration = Duration::from_secs(120);

/// The committed WIT 0.1.0 builds of the built-in pipeline faculties.
pub const FIXTURES: [&str; 4] = ["journal", "distill", "validity", "cards"];

/// The path of fixture component `id` (`tests/fixtures/wit-0.1-builtins/<id>.wasm`).
pub fn fixture(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/wit-0.1-builtins").join(format!("{id}.wasm"))
}

/// The compiled code of every fixture, compiled once (and kept across runs under cargo's
/// scratch directory for integration tests). Instances start their compile cache from
/// it, so a test pays milliseconds, not seconds, for each fixture it loads; the tests of
/// compiling itself start cold instead.
fn compiled() -> &'static Path {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    CACHE.get_or_init(|| {
        let state = Path::new(env!("CARGO_TARGET_TMPDIR")).join("butler-faculty-runtime-suite");
        let setup = Setup { root: state.clone(), state_dir: state.clone(), ..Setup::default() };
        let runtime = FacultyRuntime::for_check(setup).expect("a faculty engine");
        let inspector = runtime.inspector();
        for id in FIXTURES {
            if let Err(e) = inspector.inspect(&fixture(id)) {
                panic!("fixture {id} does not load: {e:?}");
            }
        }
        state.join("cache").join("components")
    })
}

/// A Butler instance in a temporary directory: scan root `faculties/`, state directory
/// `.butler/`, the folder `selfRoot` at `self/` (what the skeleton's root config names).
pub struct Instance {
    _dir: tempfile::TempDir,
    /// The instance root, canonical (store names are shown relative to it).
    pub root: PathBuf,
}

impl Instance {
    /// A fresh instance in a temporary folder, with empty `faculties` and `self` folders.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = std::fs::canonicalize(dir.path()).expect("a canonical root");
        for folder in ["faculties", "self"] {
            std::fs::create_dir_all(root.join(folder)).expect("instance folders");
        }
        Self { _dir: dir, root }
    }

    /// `relative` inside the instance.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// Drops fixture `id` into the scan root as a bare, self-describing `<id>.wasm`.
    pub fn install(&self, id: &str) {
        self.install_as(id, &format!("{id}.wasm"));
    }

    /// Drops fixture `id` into the scan root as `name`.
    pub fn install_as(&self, id: &str, name: &str) {
        std::fs::copy(fixture(id), self.path("faculties").join(name)).expect("install a fixture");
    }

    /// A folder faculty `faculties/<name>/`: `manifest` as its `butler.json`, fixture
    /// `component` beside it as `<component>.wasm`.
    pub fn install_folder(&self, name: &str, component: &str, manifest: &Value) {
        let folder = self.path("faculties").join(name);
        std::fs::create_dir_all(&folder).expect("a faculty folder");
        std::fs::copy(fixture(component), folder.join(format!("{component}.wasm"))).expect("its component");
        std::fs::write(folder.join("butler.json"), manifest.to_string()).expect("its manifest");
    }

    /// The runtime's view of this instance, with `settings` as the root config's
    /// `faculties` object.
    pub fn setup(&self, settings: &Value) -> Setup {
        Setup {
            root: self.root.clone(),
            scan_roots: vec![self.path("faculties")],
            state_dir: self.path(".butler"),
            folders: vec![("selfRoot".to_owned(), self.path("self"))],
            settings: serde_json::from_value(settings.clone()).expect("faculty settings"),
            config: serde_json::Map::new(),
            host: butler_process::HostEnv::new(vec![], vec![]),
            ..Setup::default()
        }
    }

    /// A one-shot runtime (compiling on the caller's thread) whose compile cache starts
    /// with the fixtures' compiled code.
    pub fn runtime(&self, settings: &Value) -> Arc<FacultyRuntime> {
        self.runtime_wired(settings, Wiring::default())
    }

    /// [`Self::runtime`], wired as `wiring` says (compiling on the caller's thread still).
    pub fn runtime_wired(&self, settings: &Value, wiring: Wiring) -> Arc<FacultyRuntime> {
        self.runtime_of(self.setup(settings), wiring)
    }

    fn runtime_of(&self, setup: Setup, wiring: Wiring) -> Arc<FacultyRuntime> {
        let cache = self.path(".butler/cache/components");
        std::fs::create_dir_all(&cache).expect("a compile cache");
        for entry in std::fs::read_dir(compiled()).expect("the shared compile cache") {
            let entry = entry.expect("a cache entry");
            std::fs::copy(entry.path(), cache.join(entry.file_name())).expect("seed the compile cache");
        }
        let wiring = Wiring { on_caller_thread: true, ..wiring };
        FacultyRuntime::wired(setup, wiring).expect("a faculty runtime")
    }

    /// The catalog of the scan root as the host scans it, `runtime` describing components.
    pub fn scan(&self, runtime: &FacultyRuntime, previous: Option<&Catalog>) -> Catalog {
        let config = ScanConfig {
            instance_root: self.root.clone(),
            roots: vec![self.path("faculties")],
            inspector: Some(runtime.inspector()),
            own_listeners: Vec::new(),
        };
        butler_catalog::scan(&config, previous)
    }

    /// A runtime serving whatever was installed: scanned without a problem, reconciled,
    /// and ready.
    pub fn start(&self, settings: &Value) -> Arc<FacultyRuntime> {
        self.start_wired(settings, Wiring::default())
    }

    /// [`Self::start`] with a [`Router`] of `routes` serving `host.call` (`declared`: it
    /// tells the runtime its routes, see [`Router`]).
    pub fn start_routed(
        &self,
        settings: &Value,
        routes: Vec<Route>,
        declared: bool,
    ) -> (Arc<FacultyRuntime>, Arc<Router>) {
        let (made_tx, made) = std::sync::mpsc::channel();
        let dispatch = move |runtime: Weak<FacultyRuntime>| {
            let router = Router::new(runtime, routes, declared);
            let _ = made_tx.send(Arc::clone(&router));
            router as Arc<dyn Dispatch>
        };
        let runtime = self.start_wired(settings, Wiring { dispatch: Some(Box::new(dispatch)), ..Wiring::default() });
        let router = made.try_recv().expect("the runtime built its router");
        (runtime, router)
    }

    /// [`Self::start`], the calls running sharing `mb` MiB of memory.
    pub fn start_sharing(&self, settings: &Value, mb: u64) -> Arc<FacultyRuntime> {
        let setup = Setup { shared_memory_mb: Some(mb), ..self.setup(settings) };
        self.ready(self.runtime_of(setup, Wiring::default()))
    }

    fn start_wired(&self, settings: &Value, wiring: Wiring) -> Arc<FacultyRuntime> {
        self.ready(self.runtime_wired(settings, wiring))
    }

    /// `runtime`, serving what the scan root holds.
    fn ready(&self, runtime: Arc<FacultyRuntime>) -> Arc<FacultyRuntime> {
        let catalog = self.scan(&runtime, None);
        assert!(catalog.diagnostics.is_empty(), "a clean scan: {:#?}", catalog.diagnostics);
        runtime.reconcile(&catalog);
        assert!(runtime.readiness().ready, "{:?}", runtime.readiness());
        runtime
    }

    /// Every observation in the journal spool of the store at `store` (relative to the
    /// instance root), in file order.
    pub fn spool(&self, store: &str) -> Vec<Value> {
        let dir = self.path(store).join("journal/spool");
        let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
        let mut files: Vec<PathBuf> = entries.map(|e| e.expect("a spool entry").path()).collect();
        files.sort();
        files
            .iter()
            .flat_map(|file| {
                let text = std::fs::read_to_string(file).expect("a spool file");
                text.lines().map(|line| serde_json::from_str(line).expect("one observation a line")).collect::<Vec<_>>()
            })
            .collect()
    }

    /// The texts of the observations in the spool of `store`.
    pub fn spooled_texts(&self, store: &str) -> Vec<String> {
        self.spool(store).iter().filter_map(|o| o["text"].as_str().map(str::to_owned)).collect()
    }

    /// The diagnostics of `catalog` about the file or folder `display` (relative to the
    /// root), as `(severity, messages)`.
    pub fn diagnostic(catalog: &Catalog, display: &str) -> Option<(Severity, String)> {
        catalog.diagnostics.iter().find(|d| d.path == display).map(|d| {
            (
                d.severity,
                d.errors.iter().map(|e| format!("{}: {}", e.pointer, e.message)).collect::<Vec<_>>().join("; "),
            )
        })
    }
}

/// `faculties.<id>` granting the instance's `selfRoot` folder as `/self`.
pub fn self_grant(write: bool) -> Value {
    grant("${selfRoot}", write)
}

/// `faculties.<id>` granting folder `dir` (relative to the root, or `${key}`) as `/self`.
pub fn grant(dir: &str, write: bool) -> Value {
    json!({"grants": [{"dir": dir, "as": "/self", "write": write}]})
}

/// The skeleton's settings for the four built-ins: each may write `/self`.
pub fn pipeline_settings() -> Value {
    let mut settings = serde_json::Map::new();
    for id in FIXTURES {
        settings.insert(id.to_owned(), self_grant(true));
    }
    Value::Object(settings)
}

/// The input of `journal.intake`: an observation with `text` from source `test`.
pub fn observation(text: &str) -> Value {
    json!({"source": "test", "text": text})
}

/// A top-level call by someone who is not the owner, ending `ms` from now at the latest.
pub fn within(ms: u64) -> CallContext {
    CallContext::top(false).until(Instant::now() + Duration::from_millis(ms))
}

/// Faculty `id`'s calls running now (nested ones included), as `status` counts them.
pub fn in_flight(runtime: &FacultyRuntime, id: &str) -> u64 {
    runtime.status(id).map_or(0, |s| s.calls.in_flight)
}

/// Waits until `done` holds; fails the test after [`LIVENESS`].
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let give_up = Instant::now() + LIVENESS;
    while !done() {
        assert!(Instant::now() < give_up, "gave up waiting until {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A call running on a thread of its own.
pub struct Spawned(mpsc::Receiver<Result<Value, CallError>>);

impl Spawned {
    /// Runs `call` with `runtime` on a new thread.
    pub fn call(
        runtime: &Arc<FacultyRuntime>,
        call: impl FnOnce(&FacultyRuntime) -> Result<Value, CallError> + Send + 'static,
    ) -> Self {
        let (tx, rx) = mpsc::channel();
        let runtime = Arc::clone(runtime);
        std::thread::spawn(move || {
            let _ = tx.send(call(&runtime));
        });
        Self(rx)
    }

    /// How the call ended (it must end within [`LIVENESS`]).
    pub fn outcome(self) -> Result<Value, CallError> {
        self.outcome_within(LIVENESS).expect("the call ended")
    }

    /// How the call ended, if it did within `limit`.
    pub fn outcome_within(self, limit: Duration) -> Option<Result<Value, CallError>> {
        self.0.recv_timeout(limit).ok()
    }
}

/// A named pipe that parks a guest mid-call: put where a faculty opens a file (the
/// journal's `context-build` opens `/self/profile.md` first thing), the guest's open blocks
/// until a writer comes, and its call holds every store it took meanwhile.
///
/// Released, the guest's open returns but its read fails — WASI file streams read at an
/// offset, which a pipe cannot — so the parked call ends with the faculty's own
/// `io_error` about the file. Dropped unreleased (a test that failed), a guest parked in
/// it is let go the same way.
pub struct Gate {
    path: PathBuf,
    released: bool,
}

impl Gate {
    /// A gate at `path` (which must not exist).
    pub fn at(path: &Path) -> Self {
        let mode = rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR;
        rustix::fs::mkfifoat(rustix::fs::CWD, path, mode).expect("a named pipe");
        Self { path: path.to_owned(), released: false }
    }

    /// Lets the parked guest go on (waiting for it to get to the gate if it has not yet),
    /// and removes the gate: whatever opens the file afterwards finds none.
    pub fn release(mut self) {
        self.released = true;
        let (tx, rx) = mpsc::channel();
        let path = self.path.clone();
        std::thread::spawn(move || {
            // Opening the write end blocks until the guest has the other end open.
            let _ = tx.send(File::options().write(true).open(&path));
        });
        let writer = rx.recv_timeout(LIVENESS).expect("a guest came to the gate").expect("open the gate");
        std::fs::remove_file(&self.path).expect("remove the gate");
        drop(writer);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        if !self.released {
            // A non-blocking open of the write end succeeds only while a guest waits in it.
            let flags = rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::NONBLOCK;
            let _ = rustix::fs::open(&self.path, flags, rustix::fs::Mode::empty());
        }
    }
}

/// Whether `outcome` is how a call parked in a [`Gate`] at `file` ends once released: the
/// faculty's own `io_error` about the file.
pub fn ended_at_gate(outcome: &Result<Value, CallError>, file: &str) -> bool {
    matches!(outcome, Err(CallError::Guest { failure, .. }) if failure.code == "io_error" && failure.message.contains(file))
}

/// A latch many threads wait on until it is opened once.
#[derive(Default)]
pub struct Latch {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Latch {
    /// Lets every waiter (and every later one) through.
    pub fn open(&self) {
        *lock(&self.open) = true;
        self.opened.notify_all();
    }

    /// Waits until [`Self::open`] (at most [`LIVENESS`]).
    pub fn wait(&self) {
        let open = lock(&self.open);
        let (open, _) = self
            .opened
            .wait_timeout_while(open, LIVENESS, |open| !*open)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        assert!(*open, "the latch was never opened");
    }
}

/// One `host.call` the [`Router`] routed.
#[derive(Debug, Clone)]
pub struct Routed {
    /// The action the guest called.
    pub action: String,
    /// The nested call's deadline.
    pub deadline: Option<Instant>,
    /// Whether the nested call passed as the owner.
    pub owner: bool,
    /// What the routed command returned (what the guest got back).
    pub result: Result<Value, CallError>,
}

/// Where the [`Router`] sends one action: a faculty's command, with the guest's own input
/// or with `input` in its place.
pub struct Route {
    action: String,
    faculty: String,
    command: String,
    input: Option<Value>,
}

impl Route {
    /// `action` to `faculty`/`command`, with the input the guest gave.
    pub fn to(action: &str, faculty: &str, command: &str) -> Self {
        Self { action: action.to_owned(), faculty: faculty.to_owned(), command: command.to_owned(), input: None }
    }

    /// The same route, always with `input` (whatever the guest gave).
    pub fn with(self, input: Value) -> Self {
        Self { input: Some(input), ..self }
    }
}

/// The suite's stand-in for the pipeline router behind `host.call`: routes actions to
/// commands and records every call it routed. When `declared`, it also tells the runtime
/// its routes (`resolve`), so a command's declared `calls` count with their callees'
/// stores; otherwise the runtime learns of the nested call only when it is made.
pub struct Router {
    runtime: Weak<FacultyRuntime>,
    routes: Vec<Route>,
    declared: bool,
    routed: Mutex<Vec<Routed>>,
}

impl Router {
    /// A router of `routes` behind `runtime` (the one being built, see [`Wiring::dispatch`]).
    pub fn new(runtime: Weak<FacultyRuntime>, routes: Vec<Route>, declared: bool) -> Arc<Self> {
        Arc::new(Self { runtime, routes, declared, routed: Mutex::new(Vec::new()) })
    }

    /// The calls routed so far, in order.
    pub fn routed(&self) -> Vec<Routed> {
        lock(&self.routed).clone()
    }

    fn route(&self, action: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.action == action)
    }
}

impl Dispatch for Router {
    fn dispatch(&self, action: &str, args: Value, context: &CallContext) -> Result<Value, CallError> {
        let route = self.route(action).ok_or_else(|| CallError::UnknownAction(action.to_owned()))?;
        let runtime = self.runtime.upgrade().ok_or(CallError::ShuttingDown)?;
        let input = route.input.as_ref().unwrap_or(&args);
        let result = runtime.invoke_json(&route.faculty, &route.command, input, context);
        lock(&self.routed).push(Routed {
            action: action.to_owned(),
            deadline: context.deadline(),
            owner: context.owner,
            result: result.clone(),
        });
        result
    }

    fn resolve(&self, action: &str) -> Option<(String, String)> {
        let route = self.route(action).filter(|_| self.declared)?;
        Some((route.faculty.clone(), route.command.clone()))
    }
}
