//! The faculty runtime: faculties as WebAssembly components behind a WIT interface.
//!
//! - [`engine`] — one engine: pooling allocator, epoch deadlines, limits;
//! - [`components`] — read, hash, compile or load from the disk cache, pre-link, describe;
//! - [`wit`] — the accepted WIT versions and dispatch over them;
//! - [`sandbox`] — what one call sees: preopens only, no network, no environment;
//! - [`args`] — the command-argument rules;
//! - [`clock`] — the wall clock faculties read (the system's, or a hand-moved one);
//! - [`locks`] — the store-lock discipline that keeps concurrent calls deadlock-free;
//! - [`run`] — one call from instantiation to JSON or a clean error;
//! - [`stats`] — per-faculty call counters and each call's debug line;
//! - [`report`] — report shapes.
//!
//! This module reconciles catalog snapshots into runnable faculties and serves calls.
//! Calls are synchronous and run on the caller's (blocking) thread: HTTP handlers use
//! [`FacultyRuntime::blocking`] once per call. Faculties compose through [`Dispatch`],
//! which the pipeline router implements, so this module never depends on the pipeline.
//!
//! Every wait in here ends by the call tree's deadline or at shutdown: for a call slot,
//! for a faculty that is still compiling, for a store lock. At shutdown
//! ([`FacultyRuntime::abandon`]) running guests are interrupted within one epoch tick.

pub mod args;
pub mod clock;
pub mod components;
pub mod declared;
pub mod engine;
pub mod failure_limits;
pub mod guest_failure;
pub mod hub;
pub mod locks;
pub mod report;
mod run;
pub mod sandbox;
pub mod settings;
pub mod stats;
pub mod wit;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};

use args::ArgSpec;
use butler_catalog::lock;
use butler_catalog::manifest::{Effect, ReportShape};
use butler_catalog::{Catalog, Extension, Follow, Kind};
use butler_process::HostEnv;
pub use clock::Clock;
use components::{Components, Prepared};
use engine::FacultyEngine;
use locks::{LockFailure, StoreLocks, TreeId};
use sandbox::{Preopen, Sandbox};
pub use settings::{FacultySettings, Grant};
use stats::CallStats;
use wit::Linkers;
use wit::Op;

/// Default deadline of one call.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Default memory cap of one call.
pub const DEFAULT_MEMORY_MB: u64 = 64;
/// The linear memory all calls running at once may hold together (MiB), unless
/// [`Setup::shared_memory_mb`] says otherwise: a growth past it fails that call, `busy`.
pub const SHARED_MEMORY_MB: u64 = 1024;
/// Faculty calls executing at once. Each holds a blocking thread and an instance; on two
/// cores more would not run faster, only add threads and their memory (~0.1 MB each). Calls
/// beyond it wait their turn; nested `host.call`s run inside their caller's slot.
pub const MAX_CONCURRENT_CALLS: usize = 32;
/// Nested `host.call`s deeper than this are refused (a faculty calling itself in a loop
/// must fail, not exhaust the pool).
pub const MAX_CALL_DEPTH: u8 = 8;

/// Numbers call trees; 0 is never used.
static NEXT_TREE: AtomicU64 = AtomicU64::new(1);

/// Who is calling, and what the call tree already holds.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// The caller passed the owner gate (HTTP or CLI only; never nested calls).
    pub owner: bool,
    /// The caller is the operator: the owner through the CLI over the local socket.
    pub operator: bool,
    depth: u8,
    tree: TreeId,
    held: Vec<PathBuf>,
    deadline: Option<Instant>,
    /// When the deadline was set: what the call had is `deadline - since`, whatever part of
    /// it went to waiting for a slot before it ran.
    since: Option<Instant>,
    /// `faculty/command` of the call that made this one, for the call log.
    parent: Option<String>,
    /// Who is calling, as proved to the transport (`owner`, `agent:<id>`, …; see
    /// [`failure_limits`]), for per-caller limits; nested calls keep their top-level caller.
    caller: Option<Arc<str>>,
    /// The hub endpoint the call came through, for the commands that declare `hubTools`
    /// (see [`hub`]); nested calls keep it.
    hub: Option<hub::HubAccess>,
    /// Set when the caller stopped waiting: the call is stopped at the next epoch tick (a
    /// native one at its next poll); nested calls share it.
    cancel: Option<Arc<AtomicBool>>,
}

impl CallContext {
    /// A top-level call: a new call tree. Its deadline is set by [`Self::until`], or by
    /// the first faculty it runs (that faculty's `timeoutMs`).
    #[must_use]
    pub fn top(owner: bool) -> Self {
        Self { owner, tree: NEXT_TREE.fetch_add(1, Ordering::Relaxed), ..Self::default() }
    }

    /// A top-level call by the operator (who is also the owner).
    #[must_use]
    pub fn operator() -> Self {
        Self { operator: true, ..Self::top(true) }
    }

    /// The same call, ending by `deadline` at the latest.
    #[must_use]
    pub fn until(mut self, deadline: Instant) -> Self {
        self.deadline = Some(self.deadline.map_or(deadline, |d| d.min(deadline)));
        self.since.get_or_insert_with(Instant::now);
        self
    }

    /// The same call, made by `caller` (see [`failure_limits`]).
    #[must_use]
    pub fn by(mut self, caller: impl Into<Arc<str>>) -> Self {
        self.caller = Some(caller.into());
        self
    }

    /// The same call, made through a hub endpoint whose tools `hub` calls (for commands
    /// that declare `hubTools`).
    #[must_use]
    pub fn through(mut self, hub: hub::HubAccess) -> Self {
        self.hub = Some(hub);
        self
    }

    /// The same call, stopped as soon as `cancel` is set (by a caller that went away).
    #[must_use]
    pub fn cancelled_by(mut self, cancel: Arc<AtomicBool>) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// When the whole call tree must be done, if that is decided yet.
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The context of a `host.call` made from within `parent` (`faculty/command`): never
    /// the owner, one level deeper, in the same tree, holding what this call holds, and
    /// bound by the same deadline.
    ///
    /// # Errors
    /// [`CallError::CallDepth`] past [`MAX_CALL_DEPTH`].
    pub fn nested(&self, parent: &str) -> Result<Self, CallError> {
        if self.depth >= MAX_CALL_DEPTH {
            return Err(CallError::CallDepth);
        }
        Ok(Self {
            owner: false,
            operator: false,
            depth: self.depth + 1,
            tree: self.tree,
            held: self.held.clone(),
            deadline: self.deadline,
            since: self.since,
            parent: Some(parent.to_owned()),
            caller: self.caller.clone(),
            hub: self.hub.clone(),
            cancel: self.cancel.clone(),
        })
    }
}

/// Builds what serves `host.call` from a weak reference to the runtime being built.
pub type BuildDispatch = Box<dyn FnOnce(std::sync::Weak<FacultyRuntime>) -> Arc<dyn Dispatch> + Send>;

/// What a [`FacultyRuntime`] is connected to, given once when it is built
/// ([`FacultyRuntime::wired`]): nothing can be attached later.
#[derive(Default)]
pub struct Wiring {
    /// Runs whenever a background compile finishes (the host rescans, so a component's
    /// `describe()` registers it).
    pub on_compiled: Option<components::OnReady>,
    /// Builds what serves `host.call` from a weak reference to the runtime being built
    /// (the pipeline router resolves actions through the runtime that dispatches to it).
    pub dispatch: Option<BuildDispatch>,
    /// Compiles new components on the caller's thread instead of a worker's (one-shot
    /// checks, where waiting is the point).
    pub on_caller_thread: bool,
}

/// The answer of a call dispatched from async code ([`Dispatch::dispatch_awaited`]).
pub type Dispatched = std::pin::Pin<Box<dyn Future<Output = Result<Value, CallError>> + Send>>;

/// Routes `host.call(action, args)`; implemented by the pipeline router.
pub trait Dispatch: Send + Sync {
    /// Runs `action` with `args` as a call made in `context`.
    ///
    /// # Errors
    /// Whatever the routed call returns.
    fn dispatch(&self, action: &str, args: Value, context: &CallContext) -> Result<Value, CallError>;

    /// [`Self::dispatch`] for a guest running on an async task; by default on a blocking
    /// thread, awaited.
    fn dispatch_awaited(self: Arc<Self>, action: String, args: Value, context: CallContext) -> Dispatched
    where
        Self: 'static,
    {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || self.dispatch(&action, args, &context))
                .await
                .unwrap_or_else(|e| Err(CallError::Internal(format!("the nested call panicked: {e}"))))
        })
    }

    /// The `(faculty, command)` serving `action`, if it is routed.
    fn resolve(&self, action: &str) -> Option<(String, String)>;
}

/// Why a call did not return data. Messages name the faculty.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No such faculty.
    #[error("no faculty `{0}`")]
    UnknownFaculty(String),
    /// No such command.
    #[error("faculty `{faculty}` has no command `{command}`")]
    UnknownCommand {
        /// Faculty id.
        faculty: String,
        /// Command id.
        command: String,
    },
    /// No such report.
    #[error("faculty `{faculty}` has no report `{report}`")]
    UnknownReport {
        /// Faculty id.
        faculty: String,
        /// Report id.
        report: String,
    },
    /// No route for a pipeline action.
    #[error("no faculty serves the action `{0}`")]
    UnknownAction(String),
    /// The faculty is registered but cannot run, or its component was refused (it does not
    /// compile, does not link, …).
    #[error("faculty `{faculty}` is unavailable: {reason}")]
    Unavailable {
        /// Faculty id.
        faculty: String,
        /// Its load or compile error, as its status shows it.
        reason: String,
    },
    /// The arguments broke a rule.
    #[error("faculty `{faculty}`: {message}")]
    InvalidArgs {
        /// Faculty id.
        faculty: String,
        /// The argument or schema rule broken, naming the argument or pointer.
        message: String,
    },
    /// An owner-only or `external` command without the owner.
    #[error(
        "faculty `{faculty}`: command `{command}` needs the owner: the CLI's owner token, or the console logged in with the link `butler serve` printed (`butler console` makes another)"
    )]
    OwnerRequired {
        /// Faculty id.
        faculty: String,
        /// Command id.
        command: String,
    },
    /// An operator command from anywhere but the CLI.
    #[error(
        "faculty `{faculty}`: command `{command}` is an operator command: run it with the butler CLI on this machine"
    )]
    OperatorOnly {
        /// Faculty id.
        faculty: String,
        /// Command id.
        command: String,
    },
    /// The faculty's own failure.
    #[error("faculty `{faculty}`: {}", failure.message)]
    Guest {
        /// Faculty id.
        faculty: String,
        /// What it said.
        failure: wit::GuestFailure,
    },
    /// The call ran past the faculty's deadline and was interrupted.
    #[error("faculty `{faculty}` did not finish within {ms} ms")]
    Timeout {
        /// Faculty id.
        faculty: String,
        /// Its deadline in milliseconds (its settings' `timeout_ms`, or the default).
        ms: u64,
    },
    /// The memory cap was hit.
    #[error("faculty `{faculty}` needed more than its {mb} MiB of memory")]
    MemoryLimit {
        /// Faculty id.
        faculty: String,
        /// Its memory cap in MiB (its settings' `memory_mb`, or the default).
        mb: u64,
    },
    /// The component trapped.
    #[error("faculty `{faculty}` trapped: {message}")]
    Trap {
        /// Faculty id.
        faculty: String,
        /// What trapped, as wasmtime words it.
        message: String,
    },
    /// A command exited with a failure status.
    #[error("faculty `{faculty}` failed: {message}")]
    CommandFailed {
        /// Faculty id.
        faculty: String,
        /// Its exit status or why it could not start, with the end of its stderr.
        message: String,
    },
    /// The output was not one JSON value.
    #[error("faculty `{faculty}` {message}")]
    InvalidOutput {
        /// Faculty id.
        faculty: String,
        /// What was wrong.
        message: String,
    },
    /// A report did not have its declared shape.
    #[error("faculty `{faculty}`: report `{report}` is malformed: {message}")]
    InvalidReport {
        /// Faculty id.
        faculty: String,
        /// Report id.
        report: String,
        /// What was wrong.
        message: String,
    },
    /// The calls running held the memory they share ([`SHARED_MEMORY_MB`]).
    #[error("faculty `{faculty}`: the {mb} MiB of memory the faculty calls running share is in use, try again")]
    MemoryBusy {
        /// Faculty id.
        faculty: String,
        /// The shared cap, in MiB.
        mb: u64,
    },
    /// No instance slot was free.
    #[error("faculty `{faculty}`: too many calls at once, try again")]
    Busy {
        /// Faculty id.
        faculty: String,
    },
    /// A store the call may write is held by another call, and waiting for it could
    /// deadlock (see [`locks`]).
    #[error(
        "faculty `{faculty}`: the store `{store}` is in use by another call, try again (a command that declares the actions it calls in `calls` takes its stores up front)"
    )]
    StoreBusy {
        /// Faculty id.
        faculty: String,
        /// The store, relative to the instance root.
        store: String,
    },
    /// A store stayed held by another call until the deadline.
    #[error("faculty `{faculty}`: the store `{store}` stayed in use by another call for {ms} ms (its deadline)")]
    LockTimeout {
        /// Faculty id.
        faculty: String,
        /// The store, relative to the instance root.
        store: String,
        /// How long it waited.
        ms: u64,
    },
    /// The faculty is registered but was still compiling when the deadline passed.
    #[error("faculty `{faculty}` was still being compiled after {ms} ms (its deadline); try again shortly")]
    NotReady {
        /// Faculty id.
        faculty: String,
        /// How long it waited.
        ms: u64,
    },
    /// Every call slot stayed in use until the deadline.
    #[error("all {MAX_CONCURRENT_CALLS} faculty call slots stayed in use for {ms} ms; try again")]
    SlotsBusy {
        /// How long it waited.
        ms: u64,
    },
    /// The host is shutting down; the call was abandoned.
    #[error("the host is shutting down; the faculty call was abandoned")]
    ShuttingDown,
    /// The caller stopped waiting, and the call was stopped.
    #[error("faculty `{faculty}`: stopped, its caller went away")]
    Cancelled {
        /// Faculty id.
        faculty: String,
    },
    /// The host's side of the call panicked (a host defect; the call is lost, the host
    /// carries on).
    #[error("the faculty call failed inside the host: {0}")]
    Internal(String),
    /// Nested calls went too deep.
    #[error("faculty calls nested deeper than {MAX_CALL_DEPTH} levels")]
    CallDepth,
    /// No registered faculty stands behind one of the host's doors.
    #[error("no registered faculty takes {0}")]
    NotServed(&'static str),
    /// The caller has had as many of this command's counted failures as it may a minute.
    #[error(
        "faculty `{faculty}`: command `{command}` failed {limit} times for this caller in the last minute, as many as it allows; try again in {retry_after} s"
    )]
    TooManyFailures {
        /// Faculty id.
        faculty: String,
        /// Command id.
        command: String,
        /// The failures a caller may get a minute (the manifest's `failureLimit.perMinute`).
        limit: u32,
        /// Seconds until the caller may call it again.
        retry_after: u64,
    },
}

impl CallError {
    /// The stable code clients see.
    #[must_use]
    pub fn code(&self) -> &str {
        match self {
            Self::UnknownFaculty(_) => "unknown_faculty",
            Self::UnknownCommand { .. } => "unknown_command",
            Self::UnknownReport { .. } => "unknown_report",
            Self::UnknownAction(_) => "unknown_action",
            Self::Unavailable { .. } => "faculty_unavailable",
            Self::InvalidArgs { .. } => "invalid_args",
            Self::OwnerRequired { .. } => "owner_required",
            Self::OperatorOnly { .. } => "operator_only",
            Self::Guest { failure, .. } => &failure.code,
            Self::Timeout { .. } => "timeout",
            Self::MemoryLimit { .. } => "memory_limit",
            Self::Trap { .. } => "trap",
            Self::CommandFailed { .. } => "command_failed",
            Self::InvalidOutput { .. } => "invalid_output",
            Self::InvalidReport { .. } => "invalid_report",
            Self::Busy { .. } | Self::MemoryBusy { .. } | Self::StoreBusy { .. } | Self::SlotsBusy { .. } => "busy",
            Self::LockTimeout { .. } | Self::NotReady { .. } => "timeout",
            Self::ShuttingDown => "shutting_down",
            Self::Cancelled { .. } => "cancelled",
            Self::Internal(_) => "internal",
            Self::CallDepth => "call_depth_exceeded",
            Self::TooManyFailures { .. } => "too_many_failures",
            Self::NotServed(_) => "not_served",
        }
    }

    /// A faculty's own failure; a code that is not `snake_case` becomes `command_failed`.
    #[must_use]
    pub fn guest(faculty: &str, failure: wit::GuestFailure) -> Self {
        let code = &failure.code;
        let valid = code.len() <= 64
            && code.starts_with(|c: char| c.is_ascii_lowercase())
            && code.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if valid {
            Self::Guest { faculty: faculty.to_owned(), failure }
        } else {
            Self::CommandFailed { faculty: faculty.to_owned(), message: format!("{code:?}: {}", failure.message) }
        }
    }

    /// This error as a faculty sees it when its `host.call` failed: the faculty's own
    /// failure as it was, anything else with the kind its code suggests.
    #[must_use]
    pub fn failure(&self) -> wit::GuestFailure {
        match self {
            Self::Guest { failure, .. } => wit::GuestFailure { message: self.to_string(), ..failure.clone() },
            other => wit::GuestFailure::untyped(other.code().to_owned(), other.to_string()),
        }
    }
}

/// How a faculty runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// A `butler:faculty` component.
    Component,
    /// A plain WASI command component.
    Command,
    /// A native process (compatibility).
    Native,
}

/// One thing asked of a faculty.
enum Request<'a> {
    /// A command with its checked input.
    Command { id: &'a str, input: Input },
    /// A report, by id.
    Report(&'a str),
}

impl Request<'_> {
    /// The argument list and standard input of a command that takes them (a JSON input
    /// travels on standard input; a report takes nothing).
    fn into_argv(self) -> (Vec<String>, Option<String>) {
        match self {
            Request::Command { input: Input::Argv(argv), .. } => (argv.args, argv.stdin),
            Request::Command { input: Input::Json(text), .. } => (Vec::new(), Some(text)),
            Request::Report(_) => (Vec::new(), None),
        }
    }
}

/// What a command or report runs.
#[derive(Clone)]
enum Target {
    Component { prepared: Prepared, engine: wasmtime::Engine, argv0: String, leading: Vec<String> },
    Native { argv: Vec<String> },
}

impl Target {
    fn runtime(&self) -> Runtime {
        match self {
            Self::Component { prepared: Prepared::Faculty(_), .. } => Runtime::Component,
            Self::Component { prepared: Prepared::Command(_), .. } => Runtime::Command,
            Self::Native { .. } => Runtime::Native,
        }
    }
}

/// What a caller gave a command, owned (for a call that runs as a future).
enum Supplied {
    Args(Map<String, Value>),
    Json(Value),
}

impl Supplied {
    fn given(&self) -> Given<'_> {
        match self {
            Self::Args(args) => Given::Args(args),
            Self::Json(input) => Given::Json(input),
        }
    }
}

/// Polls `call` on the calling task until it first has to wait; then moves the rest of it
/// to a blocking thread (a faculty call's future may move between threads), where it is
/// driven to its end. A call that does not wait ends where it started.
async fn on_task_until_it_waits<T: Send + 'static>(
    call: impl Future<Output = Result<T, CallError>> + Send + 'static,
) -> Result<T, CallError> {
    let mut call = Box::pin(call);
    // A panic in this first poll is the call's, as on a blocking thread: a 500 for this
    // call, not the end of the caller's task (the call's future is dropped with it).
    let first = std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call.as_mut().poll(cx))) {
            Ok(std::task::Poll::Ready(done)) => std::task::Poll::Ready(Some(done)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Ready(None),
            Err(panic) => std::task::Poll::Ready(Some(Err(CallError::Internal(format!(
                "the call panicked: {}",
                panic_message(&*panic)
            ))))),
        }
    })
    .await;
    if let Some(done) = first {
        return done;
    }
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(call))
        .await
        .unwrap_or_else(|e| Err(CallError::Internal(format!("the call panicked: {e}"))))
}

/// What a panic said, as a `JoinError` of a panicked task shows it.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("Box<dyn Any>")
}

/// What a caller gave a command.
#[derive(Clone, Copy)]
enum Given<'a> {
    /// Named arguments (a faculty route's `args`).
    Args(&'a Map<String, Value>),
    /// A JSON document (the pipeline, MCP, `host.call`).
    Json(&'a Value),
}

/// A command's input, checked, as the command takes it.
enum Input {
    /// An argument list and standard input (0.1.0 components, commands, native).
    Argv(args::Argv),
    /// A JSON document as text (0.2.0).
    Json(String),
}

impl Runnable {
    /// Checks what the caller gave against the command's declarations and shapes it the
    /// way the command takes it.
    fn input_of(&self, command: &str, given: Given<'_>) -> Result<Input, BadInput> {
        if self.json_native {
            let document = match given {
                Given::Args(map) => Value::Object(map.clone()),
                Given::Json(Value::Null) => Value::Object(Map::new()),
                Given::Json(value) => value.clone(),
            };
            if let Some(problems) = self.input.as_ref().and_then(|schema| schema.describe_errors(&document)) {
                return Err(BadInput::Schema(problems));
            }
            return Ok(Input::Json(document.to_string()));
        }
        let wrapped;
        let map = match given {
            Given::Args(map) => map,
            Given::Json(value) => {
                let empty = value.is_null() || value.as_object().is_some_and(Map::is_empty);
                let mut map = Map::new();
                match &self.stdin_arg {
                    Some(name) => {
                        let text = if value.is_null() { "{}".to_owned() } else { value.to_string() };
                        map.insert(name.clone(), Value::String(text));
                    }
                    None if empty => {}
                    None => return Err(BadInput::TakesNoArguments(command.to_owned())),
                }
                wrapped = map;
                &wrapped
            }
        };
        let argv = self.args.apply(map)?;
        if let Some(input) = &self.input {
            check_input(input, map, argv.stdin.as_deref())?;
        }
        Ok(Input::Argv(argv))
    }
}

/// Why a call's input does not fit the command (the message of
/// [`CallError::InvalidArgs`]).
#[derive(Debug, thiserror::Error)]
enum BadInput {
    /// The declared schema's violations, as one line.
    #[error("invalid input: {0}")]
    Schema(String),
    #[error("command `{0}` takes no arguments")]
    TakesNoArguments(String),
    #[error(transparent)]
    Args(#[from] args::ArgError),
    #[error("the input is not JSON: {0}")]
    NotJson(serde_json::Error),
}

/// Why a faculty cannot run (its status's `error`, and the reason of
/// [`CallError::Unavailable`]).
#[derive(Debug, thiserror::Error)]
enum NotReady {
    #[error(
        "command `{0}` declares `args`, but a butler:faculty@0.2.0 command takes JSON: declare its `input` schema instead"
    )]
    ArgsOnJsonCommand(String),
    #[error(transparent)]
    Pattern(#[from] args::BadPattern),
    #[error("command `{command}` has an invalid input schema: {error}")]
    InputSchema { command: String, error: butler_catalog::validation::DeclaredSchemaError },
    #[error("command `{command}` declares a `hubTools` pattern that is not a glob: {error}")]
    HubTools { command: String, error: String },
    #[error("empty `exec`")]
    EmptyExec,
    #[error("its component is still compiling")]
    Compiling,
    /// The component failed to compile or could not be read: the loader's reason.
    #[error("{0}")]
    Load(String),
    #[error("component `{0}` is not loaded")]
    NotLoaded(String),
}

struct Runnable {
    effect: Effect,
    /// Owner only (declared, or `external`).
    owner: bool,
    /// Operator only.
    operator: bool,
    /// Owner or another faculty only.
    private: bool,
    args: ArgSpec,
    stdin_arg: Option<String>,
    /// The declared input schema, compiled.
    input: Option<butler_catalog::validation::SchemaValidator>,
    /// It takes a JSON document (a 0.2.0 component), not an argument list.
    json_native: bool,
    /// The actions it declares it may `host.call`.
    calls: Vec<String>,
    /// The hub tools it declares it may call (`hubTools`), compiled.
    hub_tools: Option<globset::GlobSet>,
    /// Its per-caller failure limit, if it declares one.
    failure_limit: Option<failure_limits::FailureLimit>,
    target: Target,
}

struct Ready {
    commands: HashMap<String, Runnable>,
    reports: HashMap<String, (ReportShape, Target)>,
    write_stores: Vec<PathBuf>,
    runtime: Option<Runtime>,
    wit: Option<String>,
}

struct Faculty {
    ext: Arc<Extension>,
    sandbox: Sandbox,
    ready: Result<Ready, NotReady>,
}

impl Faculty {
    /// What runs its command `command` as a future, when a `butler:faculty` component
    /// does (see [`FacultyRuntime::invoke_json_awaited`]).
    fn on_task(&self, command: &str) -> Option<OnTask> {
        let runnable = self.ready.as_ref().ok()?.commands.get(command)?;
        match &runnable.target {
            Target::Component { prepared: Prepared::Faculty(pre), engine, leading, .. } => {
                Some(OnTask { engine: engine.clone(), pre: Arc::clone(pre), leading: leading.clone() })
            }
            _ => None,
        }
    }
}

/// A `butler:faculty` component's command, as a call that runs as a future needs it.
struct OnTask {
    engine: wasmtime::Engine,
    pre: Arc<wit::FacultyPre>,
    /// The arguments its manifest puts before the caller's.
    leading: Vec<String>,
}

/// A faculty's run state, for `GET /faculties`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FacultyStatus {
    /// `ready` or `failed`.
    pub state: &'static str,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// The WIT version of a component faculty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wit: Option<String>,
    /// Its deadline per call, in ms (its settings' `timeoutMs`, or the default).
    pub timeout_ms: u64,
    /// Its memory cap per call, in MiB (its settings' `memoryMb`, or the default).
    pub memory_mb: u64,
    /// Guest paths it sees.
    pub preopens: Vec<String>,
    /// For a component faculty: whether it runs optimized code yet (`false` for the first
    /// seconds after it was found, while the optimized code is being compiled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optimized: Option<bool>,
    /// Its calls since start.
    pub calls: stats::CallSummary,
}

/// Runtime-wide counters.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    /// Whether the pooling allocator is in use.
    pub pooling: bool,
    /// Components compiled since start.
    pub compiles: u64,
    /// Components loaded from the compile cache since start.
    pub cache_hits: u64,
    /// WIT versions accepted.
    pub wit_versions: &'static [&'static str],
    /// Top-level calls holding a call slot now.
    pub in_flight: usize,
    /// Call slots in all.
    pub slots: usize,
    /// KiB of linear memory the calls running hold now.
    pub memory_kib: u64,
    /// MiB they may hold together.
    pub memory_cap_mb: u64,
}

/// Whether every registered faculty can be called, for `GET /health`.
#[derive(Debug, Clone, Serialize)]
pub struct Readiness {
    /// No faculty is still compiling.
    pub ready: bool,
    /// Faculties found but still compiling (ids, or file names until described).
    pub pending: Vec<String>,
}

/// The instance paths and settings a runtime needs — what the host reads from its root
/// config, handed over as plain values so the runtime knows nothing of how they are kept.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// The instance root (grants' `dir` is relative to it).
    pub root: PathBuf,
    /// The folders the catalog scans (a grant may not cover one).
    pub scan_roots: Vec<PathBuf>,
    /// The host's state directory: compile cache, each faculty's own `/data`.
    pub state_dir: PathBuf,
    /// The folders a grant's `dir` may name as `${key}` (the instance says which).
    pub folders: Vec<(String, PathBuf)>,
    /// `faculties.<id>` of the root config, at start ([`FacultyRuntime::retune`] changes them).
    pub settings: BTreeMap<String, FacultySettings>,
    /// The root config as read at start, for the keys granted to faculties (changed as
    /// `settings` is).
    pub config: Map<String, Value>,
    /// What native faculties' processes see.
    pub host: HostEnv,
    /// The clock faculties read through `host.now-ms`.
    pub clock: Clock,
    /// The memory the calls running may hold together, in MiB (`None`: [`SHARED_MEMORY_MB`]).
    pub shared_memory_mb: Option<u64>,
}

/// What [`FacultyRuntime::retune`] changes: each faculty's settings, and the root config
/// the keys granted to faculties are read from.
#[derive(Debug)]
struct Tunables {
    settings: BTreeMap<String, FacultySettings>,
    config: Map<String, Value>,
}

/// `text` with every `${key}` of `folders` replaced by the folder's path.
#[must_use]
pub fn expand_folders(folders: &[(String, PathBuf)], text: &str) -> String {
    folders.iter().fold(text.to_owned(), |text, (key, folder)| {
        text.replace(&format!("${{{key}}}"), &folder.display().to_string())
    })
}

/// Faculties the catalog found whose component is still compiling, and what it made of
/// the components it did not register; calls waiting for one re-check on every reconcile
/// ([`FacultyRuntime::reconciled`]).
#[derive(Default)]
struct Pending {
    ids: HashSet<String>,
    /// Why the catalog refused a component faculty: by a bare component's file stem, or by
    /// the id of a folder faculty whose component does not load.
    refused: HashMap<String, String>,
    /// The bare components the catalog has judged (registered, pending or refused), by
    /// path relative to the instance root: a `.wasm` in a scan root not among them was
    /// dropped in since, and the next scan compiles it.
    judged: HashSet<String>,
}

impl Pending {
    fn of(catalog: &Catalog) -> Self {
        let is_wasm = |path: &str| butler_catalog::component::is_wasm(path);
        let refused = catalog
            .diagnostics
            .iter()
            .filter(|d| d.severity == butler_catalog::Severity::Error)
            .filter_map(|d| {
                let reason = d.errors.iter().map(|e| e.message.as_str()).collect::<Vec<_>>().join("; ");
                if is_wasm(&d.path) {
                    return Some((component_stem(&d.path)?, reason));
                }
                // A folder faculty whose component (named at `…/exec/0`) does not load.
                let component = d.errors.iter().any(|e| e.pointer.ends_with("/exec/0"));
                Some((d.id.clone().filter(|_| component)?, reason))
            })
            .collect();
        let judged = catalog
            .extensions
            .iter()
            .map(|e| e.display_path())
            .chain(catalog.diagnostics.iter().map(|d| d.path.clone()))
            .filter(|path| is_wasm(path))
            .collect();
        Self { ids: pending_ids(catalog), refused, judged }
    }
}

/// The file stem of a component path (`faculties/notes.wasm` → `notes`).
fn component_stem(path: &str) -> Option<String> {
    let name = std::path::Path::new(path).file_name()?.to_str()?;
    Some(name.strip_suffix(".wasm").unwrap_or(name).to_owned())
}

/// The registered faculties, ready to call: follows the catalog (compiling each component
/// in the background), checks a command's callers and input, runs it in a fresh sandbox
/// within a call slot, and keeps per-faculty call counters.
pub struct FacultyRuntime {
    engine: FacultyEngine,
    components: Arc<Components>,
    setup: Setup,
    /// What the owner may change while the host runs ([`Self::retune`]): each faculty's
    /// settings and the root config keys granted to it, read by every call as it starts.
    tunables: RwLock<Arc<Tunables>>,
    /// The environment of native faculties: a few of the host's variables, then its own.
    native_env: Vec<(String, String)>,
    faculties: RwLock<HashMap<String, Arc<Faculty>>>,
    /// What serves `host.call`, given at construction ([`Wiring::dispatch`]).
    dispatch: Option<Arc<dyn Dispatch>>,
    store_locks: StoreLocks,
    slots: Arc<tokio::sync::Semaphore>,
    /// The linear memory of the calls running, against the cap they share.
    memory: Arc<sandbox::SharedMemory>,
    pending: Mutex<Pending>,
    reconciled: Condvar,
    stats: Mutex<HashMap<String, CallStats>>,
    /// Set by [`Self::abandon`]: every wait ends and running guests are interrupted.
    stop: Arc<AtomicBool>,
    /// Counted failures per caller, for commands that declare a `failureLimit`.
    failures: failure_limits::FailureCounts,
    /// What the registered faculties declare (prefixes served, tools offered).
    declared: RwLock<Arc<declared::Declared>>,
    /// Bumped when [`Self::declared`] changes (the hub tells its clients).
    declared_changes: tokio::sync::watch::Sender<u64>,
    /// Bumped by every reconcile (and at shutdown): async waiters for readiness wake on it.
    reconciles: tokio::sync::watch::Sender<u64>,
}

impl FacultyRuntime {
    /// Builds the engine and linkers for an instance set up as `setup`; components compile
    /// on background threads. Nothing serves `host.call` (see [`Self::wired`]).
    ///
    /// # Errors
    /// When the engine cannot be built.
    pub fn new(setup: Setup) -> wasmtime::Result<Arc<Self>> {
        Self::wired(setup, Wiring::default())
    }

    /// A runtime that compiles on the caller's thread (for one-shot checks, where waiting
    /// is the point).
    ///
    /// # Errors
    /// When the engine cannot be built.
    pub fn for_check(setup: Setup) -> wasmtime::Result<Arc<Self>> {
        Self::wired(setup, Wiring { on_caller_thread: true, ..Wiring::default() })
    }

    /// A runtime for `setup` wired as `wiring` says, once and for all: what runs after a
    /// background compile, and what serves `host.call` (built with a weak reference to the
    /// runtime itself, since the router it names resolves actions through it).
    ///
    /// # Errors
    /// When the engine cannot be built.
    pub fn wired(setup: Setup, wiring: Wiring) -> wasmtime::Result<Arc<Self>> {
        let Wiring { on_compiled, dispatch, on_caller_thread } = wiring;
        let engine = FacultyEngine::new()?;
        let linkers = Arc::new(Linkers::new(&engine.engine)?);
        let cache = setup.state_dir.join("cache").join("components");
        let quick = engine.quick.as_ref().and_then(|quick| Some((quick.clone(), Arc::new(Linkers::new(quick).ok()?))));
        let components =
            Arc::new(Components::new(engine.engine.clone(), linkers, quick, cache, (!on_caller_thread, on_compiled)));
        let mut native_env: Vec<(String, String)> = ["PATH", "HOME", "LANG", "TMPDIR"]
            .iter()
            .filter_map(|k| Some(((*k).to_owned(), std::env::var(k).ok()?)))
            .collect();
        native_env.extend(setup.host.vars().iter().cloned());
        let tunables =
            RwLock::new(Arc::new(Tunables { settings: setup.settings.clone(), config: setup.config.clone() }));
        let shared_memory_mb = setup.shared_memory_mb.unwrap_or(SHARED_MEMORY_MB);
        Ok(Arc::new_cyclic(|this| Self {
            engine,
            components,
            setup,
            tunables,
            native_env,
            faculties: RwLock::new(HashMap::new()),
            dispatch: dispatch.map(|build| build(this.clone())),
            store_locks: StoreLocks::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_CALLS)),
            memory: Arc::new(sandbox::SharedMemory::new(shared_memory_mb)),
            pending: Mutex::new(Pending::default()),
            reconciled: Condvar::new(),
            stats: Mutex::new(HashMap::new()),
            stop: Arc::new(AtomicBool::new(false)),
            failures: failure_limits::FailureCounts::default(),
            declared: RwLock::default(),
            declared_changes: tokio::sync::watch::Sender::new(0),
            reconciles: tokio::sync::watch::Sender::new(0),
        }))
    }

    /// From the next call on, faculties run with `settings` (`faculties.<id>` of the root
    /// config: deadlines, memory caps, grants, granted keys) and see `config`'s values of
    /// the keys granted to them; calls running go on as they started.
    ///
    /// Each loaded faculty's sandbox is made anew (it is built when the faculty loads); a
    /// faculty the catalog replaced meanwhile keeps what its reload built. Builds
    /// sandboxes (folders are created): call it off the async runtime's threads.
    pub fn retune(&self, settings: BTreeMap<String, FacultySettings>, config: Map<String, Value>) {
        *self.tunables.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Arc::new(Tunables { settings, config });
        let loaded: Vec<Arc<Extension>> = {
            let faculties = self.faculties.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            faculties.values().map(|f| Arc::clone(&f.ext)).collect()
        };
        tracing::debug!(faculties = loaded.len(), "faculty runtime: settings changed, sandboxes made anew");
        for ext in loaded {
            let rebuilt = Arc::new(self.build(&ext));
            let mut faculties = self.faculties.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(current) = faculties.get_mut(ext.id())
                && Arc::ptr_eq(&current.ext, &ext)
            {
                *current = rebuilt;
            }
        }
    }

    fn tunables(&self) -> Arc<Tunables> {
        Arc::clone(&self.tunables.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// What the catalog uses to inspect `.wasm` files.
    #[must_use]
    pub fn inspector(&self) -> Arc<dyn butler_catalog::ComponentInspector> {
        Arc::new(components::Inspector(Arc::clone(&self.components)))
    }

    /// The deadline of a top-level call that starts now and runs faculty `id` first: its
    /// `timeoutMs` (or the default) from now.
    #[must_use]
    pub fn deadline_for(&self, id: &str) -> Instant {
        Instant::now() + Duration::from_millis(self.timeout_ms(id))
    }

    fn timeout_ms(&self, id: &str) -> u64 {
        self.tunables().settings.get(id).and_then(|s| s.timeout_ms).unwrap_or(DEFAULT_TIMEOUT_MS)
    }

    /// Runs a synchronous faculty call (`invoke`, `report`, a pipeline action) from async
    /// code: waits for one of [`MAX_CONCURRENT_CALLS`] slots — until `deadline` at most
    /// (the call's, or the default timeout from now) — then runs it on a blocking thread.
    ///
    /// # Errors
    /// The call's own [`CallError`]; `busy` when no slot came free in time,
    /// `shutting_down` after [`Self::abandon`], `internal` when the call panicked.
    pub async fn blocking(
        &self,
        deadline: Option<Instant>,
        call: impl FnOnce() -> Result<Value, CallError> + Send + 'static,
    ) -> Result<Value, CallError> {
        let slot = self.slot(deadline).await?;
        tokio::task::spawn_blocking(move || {
            let _slot = slot;
            call()
        })
        .await
        .map_err(|e| CallError::Internal(format!("the call panicked: {e}")))?
    }

    /// Runs `call`, made in `context`, on a blocking thread: a top-level call in a slot of
    /// its own ([`Self::blocking`]), a nested one in its caller's
    /// ([`Self::blocking_in_callers_slot`]), so a nested call never waits for a slot.
    ///
    /// # Errors
    /// As those two.
    pub async fn blocking_for(
        &self,
        context: &CallContext,
        call: impl FnOnce() -> Result<Value, CallError> + Send + 'static,
    ) -> Result<Value, CallError> {
        if context.depth > 0 {
            self.blocking_in_callers_slot(call).await
        } else {
            self.blocking(context.deadline(), call).await
        }
    }

    /// One of the [`MAX_CONCURRENT_CALLS`] slots, waited for until `deadline` (the call's,
    /// or the default timeout from now).
    async fn slot(&self, deadline: Option<Instant>) -> Result<tokio::sync::OwnedSemaphorePermit, CallError> {
        let started = Instant::now();
        let deadline = deadline.unwrap_or_else(|| started + Duration::from_millis(DEFAULT_TIMEOUT_MS));
        match tokio::time::timeout_at(deadline.into(), Arc::clone(&self.slots).acquire_owned()).await {
            Ok(Ok(slot)) => Ok(slot),
            Ok(Err(_closed)) => Err(CallError::ShuttingDown),
            Err(_elapsed) => Err(CallError::SlotsBusy { ms: millis(started.elapsed()) }),
        }
    }

    /// Runs a faculty call that a running call waits for (a tool its program calls through
    /// the hub) on a blocking thread in its caller's slot, as nested `host.call`s run:
    /// the caller holds a slot while it waits, so taking a second one could leave every
    /// slot to callers waiting for calls that wait for a slot. Still bounded: a caller
    /// waits for one such call at a time, and such a call cannot make another, so they
    /// are never more than [`MAX_CONCURRENT_CALLS`].
    ///
    /// # Errors
    /// The call's own [`CallError`]; `shutting_down` once the runtime stopped taking
    /// calls; `internal` when the call panicked.
    pub async fn blocking_in_callers_slot(
        &self,
        call: impl FnOnce() -> Result<Value, CallError> + Send + 'static,
    ) -> Result<Value, CallError> {
        if self.slots.is_closed() || self.stop.load(Ordering::Acquire) {
            return Err(CallError::ShuttingDown);
        }
        tokio::task::spawn_blocking(call).await.map_err(|e| CallError::Internal(format!("the call panicked: {e}")))?
    }

    /// At shutdown: refuses new calls and gives the ones in flight up to `limit` to
    /// finish, so none is cut off mid-write; then [`abandons`](Self::abandon) the rest.
    pub async fn drain(&self, limit: Duration) {
        if !self.slots.is_closed() {
            let all = u32::try_from(MAX_CONCURRENT_CALLS).unwrap_or(u32::MAX);
            match tokio::time::timeout(limit, self.slots.acquire_many(all)).await {
                Ok(Ok(permits)) => permits.forget(),
                Ok(Err(_closed)) => {}
                Err(_elapsed) => tracing::warn!(
                    in_flight = MAX_CONCURRENT_CALLS - self.slots.available_permits(),
                    "faculty calls still running after {} s are abandoned",
                    limit.as_secs()
                ),
            }
            self.slots.close();
        }
        self.abandon();
    }

    /// Ends every wait in the runtime and interrupts every running guest (within one
    /// epoch tick); their calls fail with `shutting_down`. Irreversible: for shutdown.
    pub fn abandon(&self) {
        self.stop.store(true, Ordering::Release);
        self.store_locks.wake_all();
        let _pending = lock(&self.pending);
        self.reconciled.notify_all();
        self.reconciles.send_modify(|n| *n += 1);
    }

    /// Brings the runnable faculties in line with `catalog`: new ones loaded, changed ones
    /// replaced (in-flight calls finish on the old code), removed ones dropped. Calls
    /// waiting for a faculty that was still compiling look again.
    pub fn reconcile(&self, catalog: &Catalog) {
        let current = self.faculties.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let mut next = HashMap::new();
        for ext in catalog.of_kind(Kind::Faculty) {
            let keep = current.get(ext.id()).filter(|f| *f.ext == **ext).cloned();
            let faculty = keep.unwrap_or_else(|| {
                let built = Arc::new(self.build(ext));
                match &built.ready {
                    Ok(_) => tracing::info!(faculty = ext.id(), "faculty runtime: loaded"),
                    Err(e) => tracing::warn!(faculty = ext.id(), "faculty runtime: cannot run: {e}"),
                }
                built
            });
            next.insert(ext.id().to_owned(), faculty);
        }
        for gone in current.keys().filter(|id| !next.contains_key(*id)) {
            tracing::info!(faculty = %gone, "faculty runtime: unloaded");
        }
        *self.faculties.write().unwrap_or_else(std::sync::PoisonError::into_inner) = next;
        let declared = declared::Declared::from_catalog(catalog);
        let changed = {
            let mut current = self.declared.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            // What a client of the hub sees of a tool: its name, description, schema and endpoints.
            let seen = |o: &Arc<declared::Offer>| {
                (o.public.clone(), o.description.clone(), o.schema.clone(), o.endpoints.clone())
            };
            let changed = current.serving != declared.serving
                || current.offers.iter().map(seen).ne(declared.offers.iter().map(seen));
            *current = Arc::new(declared);
            changed
        };
        if changed {
            self.declared_changes.send_modify(|n| *n += 1);
        }
        let seen = Pending::of(catalog);
        *lock(&self.pending) = seen;
        self.reconciled.notify_all();
        self.reconciles.send_modify(|n| *n += 1);
    }

    /// Tells when a reconcile ran (the readiness may have changed), for async waiters.
    #[must_use]
    pub fn reconciles(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reconciles.subscribe()
    }

    /// What the registered faculties declare now.
    #[must_use]
    pub fn declared(&self) -> Arc<declared::Declared> {
        Arc::clone(&self.declared.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Tells when [`Self::declared`] changed.
    #[must_use]
    pub fn declared_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.declared_changes.subscribe()
    }

    /// The faculty serving action prefix `prefix`; while faculties are still being
    /// compiled (their manifests unknown), waits for them until `deadline`.
    #[must_use]
    pub fn serving(&self, prefix: &str, deadline: Instant) -> Option<String> {
        self.declared_by(deadline, |declared| declared.serving.get(prefix).cloned())
    }

    /// What `pick` finds in the declarations; while faculties are still being compiled,
    /// waits for them until `deadline` for it to appear.
    pub fn declared_by<T>(&self, deadline: Instant, pick: impl Fn(&declared::Declared) -> Option<T>) -> Option<T> {
        let mut pending = lock(&self.pending);
        loop {
            if let Some(found) = pick(&self.declared()) {
                return Some(found);
            }
            let now = Instant::now();
            if pending.ids.is_empty() || now >= deadline || self.stop.load(Ordering::Acquire) {
                return None;
            }
            pending = self
                .reconciled
                .wait_timeout(pending, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Whether every faculty the catalog found can be called.
    #[must_use]
    pub fn readiness(&self) -> Readiness {
        let mut pending: Vec<String> = lock(&self.pending).ids.iter().cloned().collect();
        pending.sort();
        Readiness { ready: pending.is_empty(), pending }
    }

    /// Runs command `command` of faculty `id` with the caller's `args` object: a 0.2.0
    /// command's input document, a 0.1.0 command's named arguments.
    ///
    /// # Errors
    /// [`CallError`] for this call only.
    pub fn invoke(
        &self,
        id: &str,
        command: &str,
        args: &Map<String, Value>,
        context: &CallContext,
    ) -> Result<Value, CallError> {
        self.run_command(id, command, Given::Args(args), context)
    }

    /// Runs a command the way the pipeline calls it, with `input` (any JSON): a 0.2.0
    /// command takes it as it is; a 0.1.0 one as text on its `stdin: true` argument.
    ///
    /// # Errors
    /// [`CallError`]; `invalid_args` when a 0.1.0 command takes no standard input but
    /// `input` is not empty.
    pub fn invoke_json(
        &self,
        id: &str,
        command: &str,
        input: &Value,
        context: &CallContext,
    ) -> Result<Value, CallError> {
        self.run_command(id, command, Given::Json(input), context)
    }

    fn run_command(
        &self,
        id: &str,
        command: &str,
        given: Given<'_>,
        context: &CallContext,
    ) -> Result<Value, CallError> {
        let context = self.bound(id, context);
        let faculty = self.ready_faculty(id, &context)?;
        let (runnable, input) = admit(&faculty, id, command, given, &context)?;
        self.admit_failures(id, command, runnable, &context)?;
        let result = self.observed(id, command, &context, |waited| {
            let stores = self.stores_of(id, command);
            let (_guards, context) = self.lock_stores(id, &stores, &context, waited)?;
            self.execute(&faculty, &runnable.target, Request::Command { id: command, input }, &context)
        });
        self.count_failure(id, command, runnable, &context, result)
    }

    /// [`Self::invoke`] from async code, as [`Self::invoke_json_awaited`] runs it.
    ///
    /// # Errors
    /// As [`Self::invoke`] and [`Self::blocking`].
    pub async fn invoke_awaited(
        self: &Arc<Self>,
        id: String,
        command: String,
        args: Map<String, Value>,
        context: CallContext,
    ) -> Result<Value, CallError> {
        self.run_awaited(id, command, Supplied::Args(args), context).await
    }

    /// Runs command `command` of faculty `id` with `input` (any JSON, as
    /// [`Self::invoke_json`] takes it) from async code.
    ///
    /// When nothing has to be waited for — the faculty is loaded, it is a
    /// `butler:faculty` component, and the command takes no store (it only reads) — the
    /// call starts right on the calling task, and so do the `host.call`s it makes: no
    /// hand-off to a blocking thread and back, which on two cores costs more than a read
    /// itself. If it has to wait — it is still running at an epoch tick, or it waits for
    /// a call that runs on a blocking thread — the rest of it moves to a blocking thread,
    /// so a long call holds the task's thread for one tick at most. Anything else runs on
    /// a blocking thread from the start, as [`Self::blocking`] runs it, and so does every
    /// call made from a current-thread runtime (the MCP hub's). A top-level call
    /// (depth 0) takes one of the [`MAX_CONCURRENT_CALLS`] slots; a nested one runs in
    /// its caller's (see [`Self::blocking_in_callers_slot`]).
    ///
    /// # Errors
    /// As [`Self::invoke_json`] and [`Self::blocking`].
    pub async fn invoke_json_awaited(
        self: &Arc<Self>,
        id: String,
        command: String,
        input: Value,
        context: CallContext,
    ) -> Result<Value, CallError> {
        self.run_awaited(id, command, Supplied::Json(input), context).await
    }

    async fn run_awaited(
        self: &Arc<Self>,
        id: String,
        command: String,
        supplied: Supplied,
        context: CallContext,
    ) -> Result<Value, CallError> {
        let context = self.bound(&id, &context);
        let deadline = context.deadline();
        let nested = context.depth > 0;
        // A current-thread runtime (the MCP hub's thread) only relays: nothing runs on it.
        let relay_only = tokio::runtime::Handle::try_current()
            .is_ok_and(|runtime| runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        let on_task = self
            .get(&id)
            .filter(|_| !relay_only && self.stores_of(&id, &command).is_empty())
            .and_then(|faculty| Some((faculty.on_task(&command)?, faculty)));
        let Some((target, faculty)) = on_task else {
            let (runtime, called) = (Arc::clone(self), context.clone());
            return self
                .blocking_for(&called, move || runtime.run_command(&id, &command, supplied.given(), &context))
                .await;
        };
        let call = Arc::clone(self).run_on_task(faculty, target, id, command, supplied, context);
        if nested {
            // Its caller's task moves as a whole when it has to wait.
            return call.await;
        }
        let _slot = self.slot(deadline).await?;
        on_task_until_it_waits(call).await
    }

    /// The body of [`Self::run_awaited`] for a call that runs as a future: checked,
    /// counted and observed as [`Self::run_command`] does.
    async fn run_on_task(
        self: Arc<Self>,
        faculty: Arc<Faculty>,
        target: OnTask,
        id: String,
        command: String,
        supplied: Supplied,
        context: CallContext,
    ) -> Result<Value, CallError> {
        let (runnable, checked) = admit(&faculty, &id, &command, supplied.given(), &context)?;
        let OnTask { engine, pre, leading } = target;
        self.admit_failures(&id, &command, runnable, &context)?;
        let op = match checked {
            Input::Json(input) => Op::Call { command: command.clone(), input },
            Input::Argv(argv) => Op::Invoke {
                command: command.clone(),
                args: leading.iter().cloned().chain(argv.args).collect(),
                stdin: argv.stdin,
            },
        };
        let started = self.observe_start(&id)?;
        let frame = self.frame(&faculty, &command, runnable.hub_tools.clone(), &context);
        let outcome = run::component_awaited(&engine, &faculty.sandbox, &pre, &op, &frame).await;
        let result = self.observe_end(&id, &command, &context, started, Duration::ZERO, outcome);
        self.count_failure(&id, &command, runnable, &context, result)
    }

    /// Past the command's failure limit for this caller: `too_many_failures`.
    fn admit_failures(
        &self,
        id: &str,
        command: &str,
        runnable: &Runnable,
        context: &CallContext,
    ) -> Result<(), CallError> {
        let Some(limit) = &runnable.failure_limit else { return Ok(()) };
        let caller = context.caller.as_deref().unwrap_or(failure_limits::ANONYMOUS);
        self.failures.admit(id, command, caller, limit, Instant::now()).map_err(|retry_after| {
            CallError::TooManyFailures {
                faculty: id.to_owned(),
                command: command.to_owned(),
                limit: limit.per_minute,
                retry_after,
            }
        })
    }

    /// Counts `result` against the command's failure limit, when it has one.
    fn count_failure(
        &self,
        id: &str,
        command: &str,
        runnable: &Runnable,
        context: &CallContext,
        result: Result<Value, CallError>,
    ) -> Result<Value, CallError> {
        let caller = context.caller.as_deref().unwrap_or(failure_limits::ANONYMOUS);
        if let (Some(limit), Err(e)) = (&runnable.failure_limit, &result)
            && let Some(count) = self.failures.record((id, command, caller), limit, e.code(), Instant::now())
        {
            tracing::warn!(
                faculty = id,
                command,
                caller,
                code = e.code(),
                "a counted failure: {count} of {} this caller may get a minute",
                limit.per_minute
            );
        }
        result
    }

    /// Renders report `report` of faculty `id`, checked against its declared shape.
    ///
    /// # Errors
    /// [`CallError`] for this call only.
    pub fn report(&self, id: &str, report: &str, context: &CallContext) -> Result<Value, CallError> {
        let context = self.bound(id, context);
        let faculty = self.ready_faculty(id, &context)?;
        let ready = faculty
            .ready
            .as_ref()
            .map_err(|e| CallError::Unavailable { faculty: id.to_owned(), reason: e.to_string() })?;
        let (shape, target) = ready
            .reports
            .get(report)
            .ok_or_else(|| CallError::UnknownReport { faculty: id.to_owned(), report: report.to_owned() })?;
        let data =
            self.observed(id, report, &context, |_| self.execute(&faculty, target, Request::Report(report), &context))?;
        report::check(*shape, &data).map_err(|bad| CallError::InvalidReport {
            faculty: id.to_owned(),
            report: report.to_owned(),
            message: bad.to_string(),
        })?;
        Ok(data)
    }

    /// The run state of faculty `id`, if it is registered.
    #[must_use]
    pub fn status(&self, id: &str) -> Option<FacultyStatus> {
        let faculty = self.get(id)?;
        let (state, error, runtime, wit) = match &faculty.ready {
            Ok(ready) => ("ready", None, ready.runtime, ready.wit.clone()),
            Err(e) => ("failed", Some(e.to_string()), None, None),
        };
        let calls = lock(&self.stats).get(id).map(CallStats::summary).unwrap_or_else(|| CallStats::default().summary());
        Some(FacultyStatus {
            state,
            error,
            runtime,
            wit,
            timeout_ms: faculty.sandbox.timeout_ms,
            memory_mb: faculty.sandbox.memory_mb,
            preopens: faculty.sandbox.preopens.iter().map(|p| p.guest.clone()).collect(),
            optimized: (!faculty.ext.components.is_empty()).then(|| faculty.ext.components.iter().all(|c| c.optimized)),
            calls,
        })
    }

    /// Runtime-wide counters.
    #[must_use]
    pub fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            pooling: self.engine.pooling,
            compiles: self.components.compiles.load(Ordering::Relaxed),
            cache_hits: self.components.cache_hits.load(Ordering::Relaxed),
            wit_versions: wit::SUPPORTED,
            in_flight: if self.slots.is_closed() { 0 } else { MAX_CONCURRENT_CALLS - self.slots.available_permits() },
            slots: MAX_CONCURRENT_CALLS,
            memory_kib: u64::try_from(self.memory.in_use() >> 10).unwrap_or(u64::MAX),
            memory_cap_mb: self.memory.cap_mb(),
        }
    }

    fn get(&self, id: &str) -> Option<Arc<Faculty>> {
        self.faculties.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(id).cloned()
    }

    /// `context` with its deadline decided: the tree's, or faculty `id`'s timeout from now.
    fn bound(&self, id: &str, context: &CallContext) -> CallContext {
        let own = self.deadline_for(id);
        context.clone().until(own)
    }

    /// Faculty `id`; while its component is still compiling — the catalog lists it pending,
    /// or `<id>.wasm` was dropped into a scan root and no scan has judged it yet — waits for
    /// it (until the call's deadline). A component the catalog refused fails the call with
    /// the reason (it does not compile, does not link, …).
    fn ready_faculty(&self, id: &str, context: &CallContext) -> Result<Arc<Faculty>, CallError> {
        let started = Instant::now();
        let deadline = context.deadline.unwrap_or_else(|| self.deadline_for(id));
        let mut pending = lock(&self.pending);
        loop {
            if let Some(faculty) = self.get(id) {
                return Ok(faculty);
            }
            if !pending.ids.contains(id) {
                if let Some(reason) = pending.refused.get(id) {
                    return Err(CallError::Unavailable { faculty: id.to_owned(), reason: reason.clone() });
                }
                if !self.dropped_unjudged(id, &pending) {
                    return Err(CallError::UnknownFaculty(id.to_owned()));
                }
            }
            if self.stop.load(Ordering::Acquire) {
                return Err(CallError::ShuttingDown);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(CallError::NotReady { faculty: id.to_owned(), ms: millis(started.elapsed()) });
            }
            pending = self
                .reconciled
                .wait_timeout(pending, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Whether a scan root holds `<id>.wasm` that the last catalog did not judge: dropped
    /// in since, to be compiled by the next scan (a stat per scan root, nothing read).
    fn dropped_unjudged(&self, id: &str, pending: &Pending) -> bool {
        if id.is_empty() || id.contains(['/', '\\']) || id.starts_with('.') {
            return false;
        }
        self.setup.scan_roots.iter().map(|root| root.join(format!("{id}.wasm"))).any(|path| {
            let shown = path.strip_prefix(&self.setup.root).unwrap_or(&path).to_string_lossy().into_owned();
            !pending.judged.contains(&shown) && std::fs::metadata(&path).is_ok_and(|m| m.is_file())
        })
    }

    /// Runs `call` as one observed call of `id`/`what`: counted, timed, and logged at
    /// debug under the faculty's target. `call` reports its lock wait through its argument.
    /// After [`Self::abandon`] nothing runs: [`CallError::ShuttingDown`].
    fn observed(
        &self,
        id: &str,
        what: &str,
        context: &CallContext,
        call: impl FnOnce(&mut Duration) -> Result<Value, CallError>,
    ) -> Result<Value, CallError> {
        let started = self.observe_start(id)?;
        let mut waited = Duration::ZERO;
        let outcome = call(&mut waited);
        self.observe_end(id, what, context, started, waited, outcome)
    }

    /// The start of an observed call (see [`Self::observed`]): when it started.
    fn observe_start(&self, id: &str) -> Result<Instant, CallError> {
        // Once abandoned, no call starts a guest — a read as little as a write.
        if self.stop.load(Ordering::Acquire) {
            return Err(CallError::ShuttingDown);
        }
        lock(&self.stats).entry(id.to_owned()).or_default().started();
        Ok(Instant::now())
    }

    /// The end of an observed call: counted, timed and logged.
    fn observe_end(
        &self,
        id: &str,
        what: &str,
        context: &CallContext,
        started: Instant,
        waited: Duration,
        outcome: Result<Value, CallError>,
    ) -> Result<Value, CallError> {
        let took = started.elapsed();
        let failure = outcome.as_ref().err().map(CallError::code);
        {
            let mut stats = lock(&self.stats);
            let entry = stats.entry(id.to_owned()).or_default();
            entry.waited(waited);
            entry.ended(took, failure);
        }
        // The cheap global check first: no target string is built on the hot path unless
        // debug lines can be wanted at all.
        if log::max_level() >= log::Level::Debug
            && log::log_enabled!(target: stats::target(id).as_str(), log::Level::Debug)
        {
            let parent = context.parent.as_deref().unwrap_or("-");
            stats::emit_host(
                log::Level::Debug,
                id,
                &format!(
                    "call {id}/{what} parent={parent} ms={:.3} lock_wait_ms={:.3} outcome={}",
                    took.as_secs_f64() * 1000.0,
                    waited.as_secs_f64() * 1000.0,
                    failure.unwrap_or("ok")
                ),
            );
        }
        outcome
    }

    fn execute(
        &self,
        faculty: &Faculty,
        target: &Target,
        request: Request<'_>,
        context: &CallContext,
    ) -> Result<Value, CallError> {
        let (name, hub_tools) = match &request {
            Request::Command { id, .. } => (
                *id,
                faculty
                    .ready
                    .as_ref()
                    .ok()
                    .and_then(|ready| ready.commands.get(*id))
                    .and_then(|runnable| runnable.hub_tools.clone()),
            ),
            Request::Report(id) => (*id, None),
        };
        let frame = self.frame(faculty, name, hub_tools, context);
        match target {
            Target::Component { prepared, engine, argv0, leading } => {
                let call = match (prepared, request) {
                    (Prepared::Faculty(_), Request::Command { id, input: Input::Json(input) }) => {
                        run::Call::Guest(Op::Call { command: id.to_owned(), input })
                    }
                    (Prepared::Faculty(_), Request::Command { id, input: Input::Argv(argv) }) => {
                        let args = leading.iter().cloned().chain(argv.args).collect();
                        run::Call::Guest(Op::Invoke { command: id.to_owned(), args, stdin: argv.stdin })
                    }
                    (Prepared::Faculty(_), Request::Report(id)) => run::Call::Guest(Op::Report(id.to_owned())),
                    (Prepared::Command(_), request) => {
                        let (args, stdin) = request.into_argv();
                        let argv = std::iter::once(argv0.clone()).chain(leading.iter().cloned()).chain(args).collect();
                        run::Call::Command { argv, stdin }
                    }
                };
                run::component(engine, &faculty.sandbox, prepared, &call, &frame)
            }
            Target::Native { argv } => {
                let (args, stdin) = request.into_argv();
                let argv: Vec<String> = argv.iter().cloned().chain(args).collect();
                run::native(&faculty.sandbox, &argv, &faculty.ext.dir, &self.native_env, stdin.as_deref(), &frame)
            }
        }
    }

    /// Where a call of `faculty`'s `name` (a command or report) stands, and when it must stop.
    fn frame<'a>(
        &self,
        faculty: &Faculty,
        name: &str,
        hub_tools: Option<globset::GlobSet>,
        context: &'a CallContext,
    ) -> run::Frame<'a> {
        run::Frame {
            memory: Arc::clone(&self.memory),
            context,
            caller: format!("{}/{name}", faculty.sandbox.faculty),
            deadline: context.deadline.unwrap_or_else(|| self.deadline_for(&faculty.sandbox.faculty)),
            stop: Arc::clone(&self.stop),
            dispatch: self.dispatch.clone(),
            hub_tools,
        }
    }

    /// The stores a call of `id`/`command` takes before it runs (see [`locks`]). A write
    /// command takes every store it may write, itself and through the actions it declares
    /// in `calls`, transitively; a declared callee that is not loaded counts with every
    /// store its sandbox could write. A read command takes nothing: it holds nothing while
    /// its nested calls run, so they take their own stores in order from a clean slate.
    fn stores_of(&self, id: &str, command: &str) -> Vec<PathBuf> {
        let writes =
            self.get(id).and_then(|f| f.ready.as_ref().ok().and_then(|r| r.commands.get(command)).map(|r| r.effect))
                == Some(Effect::Write);
        if !writes {
            return Vec::new();
        }
        let mut stores = Vec::new();
        let mut seen = HashSet::new();
        self.collect_stores(id, command, &mut seen, &mut stores);
        stores.sort();
        stores.dedup();
        stores
    }

    fn collect_stores(&self, id: &str, command: &str, seen: &mut HashSet<(String, String)>, out: &mut Vec<PathBuf>) {
        if !seen.insert((id.to_owned(), command.to_owned())) {
            return;
        }
        let faculty = self.get(id);
        let Some(ready) = faculty.as_ref().and_then(|f| f.ready.as_ref().ok()) else {
            out.extend(self.sandbox_for(id).write_stores());
            return;
        };
        let Some(runnable) = ready.commands.get(command) else { return };
        if runnable.effect == Effect::Write {
            out.extend(ready.write_stores.iter().cloned());
        }
        let Some(dispatch) = &self.dispatch else { return };
        for action in &runnable.calls {
            if let Some((callee, callee_command)) = dispatch.resolve(action) {
                self.collect_stores(&callee, &callee_command, seen, out);
            }
        }
    }

    /// Takes the stores of `stores` the call tree does not hold yet (see [`locks`] for the
    /// rules), adding the time spent waiting to `waited`. The returned context holds them.
    fn lock_stores(
        &self,
        id: &str,
        stores: &[PathBuf],
        context: &CallContext,
        waited: &mut Duration,
    ) -> Result<(locks::Acquired, CallContext), CallError> {
        let deadline = context.deadline.unwrap_or_else(|| self.deadline_for(id));
        let started = Instant::now();
        let acquired =
            self.store_locks.acquire(context.tree, &context.held, stores, deadline, &self.stop).map_err(|failure| {
                match failure {
                    LockFailure::Busy(store) => {
                        CallError::StoreBusy { faculty: id.to_owned(), store: locks::display(&self.setup.root, &store) }
                    }
                    LockFailure::Timeout(store) => CallError::LockTimeout {
                        faculty: id.to_owned(),
                        store: locks::display(&self.setup.root, &store),
                        ms: millis(started.elapsed()),
                    },
                    LockFailure::ShuttingDown => CallError::ShuttingDown,
                }
            })?;
        *waited += acquired.waited;
        let mut context = context.clone();
        context.held.extend(acquired.taken.iter().cloned());
        Ok((acquired, context))
    }

    fn build(&self, ext: &Arc<Extension>) -> Faculty {
        let sandbox = self.sandbox_for(ext.id());
        sandbox.keep_private(&ext.manifest.private_folders);
        let ready = self.prepare(ext, &sandbox);
        Faculty { ext: Arc::clone(ext), sandbox, ready }
    }

    fn prepare(&self, ext: &Extension, sandbox: &Sandbox) -> Result<Ready, NotReady> {
        let mut commands = HashMap::new();
        let mut runtime = None;
        for command in &ext.manifest.commands {
            let target = self.target(ext, &command.exec)?;
            runtime.get_or_insert(target.runtime());
            let json_native =
                matches!(&target, Target::Component { prepared: Prepared::Faculty(pre), .. } if pre.json_native());
            if json_native && !command.args.is_empty() {
                return Err(NotReady::ArgsOnJsonCommand(command.id.clone()));
            }
            let args = ArgSpec::compile(&command.args)?;
            let stdin_arg = command.args.iter().find(|a| a.stdin).map(|a| a.name.clone());
            let input = command
                .input
                .as_ref()
                .map(butler_catalog::validation::SchemaValidator::from_declared)
                .transpose()
                .map_err(|error| NotReady::InputSchema { command: command.id.clone(), error })?;
            let runnable = Runnable {
                effect: command.effect,
                owner: command.owner || command.operator || command.effect == Effect::External,
                operator: command.operator,
                private: command.private,
                args,
                stdin_arg,
                input,
                json_native,
                calls: command.calls.clone(),
                hub_tools: hub::globs(&command.hub_tools)
                    .map_err(|e| NotReady::HubTools { command: command.id.clone(), error: e.to_string() })?,
                failure_limit: command
                    .failure_limit
                    .as_ref()
                    .map(|l| failure_limits::FailureLimit { codes: l.codes.clone(), per_minute: l.per_minute.get() }),
                target,
            };
            commands.insert(command.id.clone(), runnable);
        }
        let mut reports = HashMap::new();
        for report in &ext.manifest.reports {
            let target = self.target(ext, &report.exec)?;
            runtime.get_or_insert(target.runtime());
            reports.insert(report.id.clone(), (report.shape, target));
        }
        let wit = ext.components.iter().find_map(|c| match &c.kind {
            butler_catalog::ComponentKind::Faculty { wit_version } => Some(wit_version.clone()),
            butler_catalog::ComponentKind::Command => None,
        });
        Ok(Ready { commands, reports, write_stores: sandbox.write_stores(), runtime, wit })
    }

    fn target(&self, ext: &Extension, exec: &[String]) -> Result<Target, NotReady> {
        let exec0 = exec.first().ok_or(NotReady::EmptyExec)?;
        if let Some(component) = ext.component_for(exec0) {
            let loaded = match self.components.by_hash(&component.hash) {
                Some(loaded) => loaded,
                None => self.components.load(&component.path).map_err(|e| match e {
                    components::LoadError::Pending => NotReady::Compiling,
                    components::LoadError::Failed(why) | components::LoadError::Unreadable(why) => NotReady::Load(why),
                })?,
            };
            let argv0 = component.path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            return Ok(Target::Component {
                prepared: loaded.prepared.clone(),
                engine: loaded.engine.clone(),
                argv0,
                leading: exec[1..].to_vec(),
            });
        }
        if butler_catalog::component::is_wasm(exec0) {
            return Err(NotReady::NotLoaded(exec0.clone()));
        }
        Ok(Target::Native { argv: self.setup.host.resolve_argv(&ext.dir, exec) })
    }

    /// `/data` plus the configured grants, deadline and memory cap for faculty `id`.
    fn sandbox_for(&self, id: &str) -> Sandbox {
        let tunables = self.tunables();
        let settings = tunables.settings.get(id).cloned().unwrap_or_default();
        let mut preopens = vec![Preopen {
            host: self.setup.state_dir.join("faculties").join(id),
            guest: sandbox::DATA.to_owned(),
            write: true,
        }];
        for grant in &settings.grants {
            let dir = expand_folders(&self.setup.folders, &grant.dir);
            preopens.push(Preopen { host: self.setup.root.join(dir), guest: grant.guest.clone(), write: grant.write });
        }
        // The root config keys granted to it, as they are (a key not set is left out: the
        // faculty applies its own default).
        let mut env = if settings.config.is_empty() {
            Vec::new()
        } else {
            let granted: Map<String, Value> = settings
                .config
                .iter()
                .filter_map(|key| Some((key.clone(), tunables.config.get(key)?.clone())))
                .collect();
            vec![(sandbox::CONFIG_ENV.to_owned(), Value::Object(granted).to_string())]
        };
        env.extend(self.internals_under(&preopens));
        Sandbox {
            faculty: id.to_owned(),
            preopens,
            timeout_ms: settings.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
            memory_mb: settings.memory_mb.unwrap_or(DEFAULT_MEMORY_MB).min(engine::MAX_MEMORY_MB),
            env,
            clock: self.setup.clock.clone(),
        }
    }
}

impl FacultyRuntime {
    /// [`sandbox::INTERNAL_ENV`] for a faculty whose grants hold the instance's own
    /// internals — its state directory (the owner token, the host's records) and its
    /// extension manifests — naming them by guest path, so a faculty that reads files on
    /// others' behalf (validity checks) can refuse them. `None` when no grant does.
    fn internals_under(&self, preopens: &[Preopen]) -> Option<(String, String)> {
        let canonical = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
        let state = canonical(&self.setup.state_dir);
        let root = canonical(&self.setup.root);
        let mut paths = Vec::new();
        let mut manifests = false;
        for grant in preopens.iter().filter(|p| p.guest != sandbox::DATA) {
            let host = canonical(&grant.host);
            if host.starts_with(&state) {
                paths.push(grant.guest.clone());
            } else if let Ok(inside) = state.strip_prefix(&host) {
                paths.push(format!("{}/{}", grant.guest.trim_end_matches('/'), inside.display()));
            }
            manifests |=
                root.starts_with(&host) || self.setup.scan_roots.iter().any(|r| canonical(r).starts_with(&host));
        }
        if paths.is_empty() && !manifests {
            return None;
        }
        let names: Vec<&str> = if manifests { vec![butler_catalog::scan::MANIFEST_FILE] } else { Vec::new() };
        Some((sandbox::INTERNAL_ENV.to_owned(), serde_json::json!({"paths": paths, "names": names}).to_string()))
    }
}

/// The ids of the faculties `catalog` found whose component is still compiling: the
/// manifest's id, or for a bare `.wasm` (not described yet) its file stem.
/// Command `command` of the loaded `faculty` (`id`), if `context` may run it, with what
/// the caller gave checked and shaped as the command takes it.
fn admit<'f>(
    faculty: &'f Faculty,
    id: &str,
    command: &str,
    given: Given<'_>,
    context: &CallContext,
) -> Result<(&'f Runnable, Input), CallError> {
    let ready =
        faculty.ready.as_ref().map_err(|e| CallError::Unavailable { faculty: id.to_owned(), reason: e.to_string() })?;
    let runnable = ready
        .commands
        .get(command)
        .ok_or_else(|| CallError::UnknownCommand { faculty: id.to_owned(), command: command.to_owned() })?;
    if runnable.operator && !context.operator {
        return Err(CallError::OperatorOnly { faculty: id.to_owned(), command: command.to_owned() });
    }
    if (runnable.owner || (runnable.private && context.depth == 0)) && !context.owner {
        return Err(CallError::OwnerRequired { faculty: id.to_owned(), command: command.to_owned() });
    }
    let input = runnable
        .input_of(command, given)
        .map_err(|bad| CallError::InvalidArgs { faculty: id.to_owned(), message: bad.to_string() })?;
    Ok((runnable, input))
}

fn pending_ids(catalog: &Catalog) -> HashSet<String> {
    catalog
        .diagnostics
        .iter()
        .filter(|d| d.severity == butler_catalog::Severity::Pending)
        .filter_map(|d| d.id.clone().or_else(|| component_stem(&d.path)))
        .collect()
}

/// Checks a call's input against the command's declared schema: the JSON document its
/// `stdin` argument carries, or else the object of its text arguments.
fn check_input(
    input: &butler_catalog::validation::SchemaValidator,
    args: &Map<String, Value>,
    stdin: Option<&str>,
) -> Result<(), BadInput> {
    let document = match stdin {
        Some(text) => butler_catalog::json::parse(text).map_err(BadInput::NotJson)?,
        None => Value::Object(args.clone()),
    };
    match input.describe_errors(&document) {
        Some(problems) => Err(BadInput::Schema(problems)),
        None => Ok(()),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Reconciles off the async threads: a reconcile compiles and describes components.
impl Follow for FacultyRuntime {
    async fn on_snapshot(self: Arc<Self>, snapshot: Arc<Catalog>) {
        if tokio::task::spawn_blocking(move || self.reconcile(&snapshot)).await.is_err() {
            tracing::error!("faculty runtime: a reconcile panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that panics, before or after it first waits, is a 500 for that call: the
    /// caller's task goes on (the hand-off to a blocking thread did this before calls
    /// started on the request's task; the first poll must do it too).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_that_panics_on_the_task_or_after_the_hand_off_is_an_internal_error() {
        let at_once: Result<(), CallError> = on_task_until_it_waits(async { panic!("a host defect") }).await;
        assert!(matches!(&at_once, Err(CallError::Internal(m)) if m.contains("a host defect")), "{at_once:?}");
        let after_waiting: Result<(), CallError> = on_task_until_it_waits(async {
            tokio::task::yield_now().await;
            panic!("a host defect")
        })
        .await;
        assert!(matches!(&after_waiting, Err(CallError::Internal(_))), "{after_waiting:?}");
        let fine = on_task_until_it_waits(async {
            tokio::task::yield_now().await;
            Ok(7)
        })
        .await;
        assert!(matches!(fine, Ok(7)), "{fine:?}");
    }
}
