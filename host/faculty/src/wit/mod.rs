//! The WIT worlds this host accepts, one module per version over version-neutral host
//! types ([`Op`], [`GuestFailure`]), and the dispatch over them.
//!
//! A component's version is read from its export names before it is instantiated
//! (`butler:faculty/guest@<version>`); a version this host does not know is refused with
//! a message naming the supported ones. Older versions stay accepted when newer ones are
//! added: add a module, a variant, and a match arm. 0.1.0 takes argv-shaped input and
//! untyped failures; 0.2.0 takes JSON and fails with a typed kind.

pub mod hub_v0_1_0;
pub mod v0_1_0;
pub mod v0_2_0;

pub use super::guest_failure::{FailureKind, GuestFailure};

use wasmtime::component::{Component, types::ComponentItem};
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, Store};

use super::sandbox::CallState;

/// Export-name prefix of the faculty interface.
const GUEST_EXPORT: &str = "butler:faculty/guest@";
/// Export-name prefix of a plain WASI command.
const COMMAND_EXPORT: &str = "wasi:cli/run@0.2";

/// WIT versions this host accepts, newest first.
pub const SUPPORTED: &[&str] = &["0.2.0", "0.1.0"];

/// What a component is, read from its exports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flavor {
    /// A faculty targeting `butler:faculty` at this version.
    Faculty(&'static str),
    /// A plain WASI command (`wasi:cli/run`): argv, stdin, stdout JSON.
    Command,
}

/// Reads the component's flavor from its exports.
///
/// # Errors
/// A readable reason when it is neither a supported faculty nor a command.
pub fn flavor(engine: &Engine, component: &Component) -> Result<Flavor, FlavorError> {
    let ty = component.component_type();
    let mut exports = Vec::new();
    for (name, item) in ty.exports(engine) {
        if let Some(version) = name.strip_prefix(GUEST_EXPORT) {
            if let Some(known) = SUPPORTED.iter().find(|v| **v == version) {
                return Ok(Flavor::Faculty(known));
            }
            return Err(FlavorError::Unsupported {
                version: version.to_owned(),
                supported: SUPPORTED.iter().map(|v| format!("@{v}")).collect::<Vec<_>>().join(", "),
            });
        }
        if name.starts_with(COMMAND_EXPORT) && matches!(item.ty, ComponentItem::ComponentInstance(_)) {
            return Ok(Flavor::Command);
        }
        exports.push(name.to_owned());
    }
    Err(FlavorError::Neither { exports: if exports.is_empty() { "none".to_owned() } else { exports.join(", ") } })
}

/// Why a component is neither a faculty this host supports nor a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum FlavorError {
    /// It targets a `butler:faculty` version this host does not support.
    #[error("it targets butler:faculty@{version}, but this host supports {supported}; rebuild it against one of those")]
    Unsupported {
        version: String,
        /// The supported versions, listed (`@0.1.0, @0.2.0`).
        supported: String,
    },
    /// It exports neither interface.
    #[error("it exports neither butler:faculty/guest nor wasi:cli/run (exports: {exports})")]
    Neither {
        /// What it exports, listed (`none` when nothing).
        exports: String,
    },
}

/// The linkers every faculty component is instantiated against: WASI Preview 2, the
/// `butler:faculty/host` imports of every supported version, and `butler:hub/tools` —
/// once with blocking imports, for calls run on a blocking thread, and once with
/// asynchronous ones, for calls run on an async task (a read, straight from the request
/// that asks for it: no hand-off to another thread and back).
pub struct Linkers {
    /// Linker for faculties of every supported version and plain commands alike: WASI
    /// and each version's `butler:faculty/host` (distinct interface names, one linker).
    pub linker: Linker<CallState>,
    /// The same imports, asynchronous: WASI's files still run on the calling thread
    /// (`allow_blocking_current_thread`), `host.call` and the hub's tools on a blocking
    /// thread, awaited.
    pub awaited: Linker<CallState>,
}

impl Linkers {
    /// Builds the linkers for `engine`.
    ///
    /// # Errors
    /// Only if the bindings conflict (a build defect).
    pub fn new(engine: &Engine) -> wasmtime::Result<Self> {
        let mut linker = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        v0_1_0::Faculty::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        v0_2_0::Faculty::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        hub_v0_1_0::HubTools::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        let mut awaited = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut awaited)?;
        v0_1_0::awaited::Faculty::add_to_linker::<CallState, HasSelf<CallState>>(&mut awaited, |state| state)?;
        v0_2_0::awaited::Faculty::add_to_linker::<CallState, HasSelf<CallState>>(&mut awaited, |state| state)?;
        hub_v0_1_0::awaited::HubTools::add_to_linker::<CallState, HasSelf<CallState>>(&mut awaited, |state| state)?;
        Ok(Self { linker, awaited })
    }
}

/// A faculty component, pre-linked for one WIT version, to run on a blocking thread
/// ([`Self::run`]) or on an async task ([`Self::run_awaited`]).
#[derive(Clone)]
pub struct FacultyPre {
    blocking: BlockingPre,
    awaited: AwaitedPre,
}

#[derive(Clone)]
enum BlockingPre {
    V0_1_0(v0_1_0::FacultyPre<CallState>),
    V0_2_0(v0_2_0::FacultyPre<CallState>),
}

/// A faculty component pre-linked against [`Linkers::awaited`].
#[derive(Clone)]
pub enum AwaitedPre {
    /// `butler:faculty@0.1.0`.
    V0_1_0(v0_1_0::awaited::FacultyPre<CallState>),
    /// `butler:faculty@0.2.0`.
    V0_2_0(v0_2_0::awaited::FacultyPre<CallState>),
}

/// An operation on a faculty instance.
#[derive(Debug, Clone)]
pub enum Op {
    /// `describe()`.
    Describe,
    /// `invoke(command, args, stdin)` (0.1.0).
    Invoke {
        /// Command id.
        command: String,
        /// Validated argv.
        args: Vec<String>,
        /// The value of the command's `stdin: true` argument, if it declares one.
        stdin: Option<String>,
    },
    /// `invoke(command, input)` (0.2.0).
    Call {
        /// Command id.
        command: String,
        /// The input document, checked against the command's schema, as JSON text.
        input: String,
    },
    /// `report(id)`.
    Report(String),
}

/// What the guest returned: JSON text, or its failure.
pub type GuestResult = Result<String, GuestFailure>;

/// One [`Op`] on a fresh instance of a `butler:faculty@0.1.0` pre-link, either way: with
/// `instantiate` and plain calls, or `instantiate_async, await` and awaited ones.
macro_rules! run_v0_1_0 {
    ($pre:expr, $store:expr, $op:expr, $instantiate:ident $(, $wait:tt)?) => {{
        let faculty = $pre.$instantiate(&mut *$store)$(.$wait)??;
        let guest = faculty.butler_faculty_guest();
        let result = match $op {
            Op::Describe => Ok(guest.call_describe(&mut *$store)$(.$wait)??),
            Op::Invoke { command, args, stdin } => {
                guest.call_invoke(&mut *$store, command, args, stdin.as_deref())$(.$wait)??
            }
            Op::Call { command, input } => guest.call_invoke(&mut *$store, command, &[], Some(input))$(.$wait)??,
            Op::Report(id) => guest.call_report(&mut *$store, id)$(.$wait)??,
        };
        Ok(result.map_err(|f| GuestFailure::untyped(f.code, f.message)))
    }};
}

/// [`run_v0_1_0`] for `butler:faculty@0.2.0`, whose commands take JSON only.
macro_rules! run_v0_2_0 {
    ($pre:expr, $store:expr, $op:expr, $instantiate:ident $(, $wait:tt)?) => {{
        let faculty = $pre.$instantiate(&mut *$store)$(.$wait)??;
        let guest = faculty.butler_faculty_guest();
        let result = match $op {
            Op::Describe => Ok(guest.call_describe(&mut *$store)$(.$wait)??),
            Op::Call { command, input } => guest.call_invoke(&mut *$store, command, input)$(.$wait)??,
            Op::Invoke { command, stdin, .. } => {
                guest.call_invoke(&mut *$store, command, stdin.as_deref().unwrap_or("{}"))$(.$wait)??
            }
            Op::Report(id) => guest.call_report(&mut *$store, id)$(.$wait)??,
        };
        Ok(result.map_err(v0_2_0::from_wit))
    }};
}

impl FacultyPre {
    /// Pre-links `component` (whose flavor is `version`) against `linker`.
    ///
    /// # Errors
    /// When the component imports something the host does not provide.
    pub fn new(version: &str, linkers: &Linkers, component: &Component) -> wasmtime::Result<Self> {
        let blocking = linkers.linker.instantiate_pre(component)?;
        let awaited = linkers.awaited.instantiate_pre(component)?;
        match version {
            "0.1.0" => Ok(Self {
                blocking: BlockingPre::V0_1_0(v0_1_0::FacultyPre::new(blocking)?),
                awaited: AwaitedPre::V0_1_0(v0_1_0::awaited::FacultyPre::new(awaited)?),
            }),
            "0.2.0" => Ok(Self {
                blocking: BlockingPre::V0_2_0(v0_2_0::FacultyPre::new(blocking)?),
                awaited: AwaitedPre::V0_2_0(v0_2_0::awaited::FacultyPre::new(awaited)?),
            }),
            other => Err(wasmtime::format_err!("unsupported WIT version {other}")),
        }
    }

    /// Whether its commands take JSON input (0.2.0) rather than an argument list.
    #[must_use]
    pub fn json_native(&self) -> bool {
        matches!(self.blocking, BlockingPre::V0_2_0(_))
    }

    /// Instantiates and runs `op` in `store`.
    ///
    /// # Errors
    /// Traps, deadline and memory errors (the caller classifies them).
    pub fn run(&self, store: &mut Store<CallState>, op: &Op) -> wasmtime::Result<GuestResult> {
        match &self.blocking {
            BlockingPre::V0_1_0(pre) => run_v0_1_0!(pre, store, op, instantiate),
            BlockingPre::V0_2_0(pre) => run_v0_2_0!(pre, store, op, instantiate),
        }
    }

    /// [`Self::run`] on an async task: the guest runs on a fiber of the calling thread and
    /// yields at each epoch tick, so a long call does not hold its thread.
    ///
    /// # Errors
    /// As [`Self::run`].
    pub async fn run_awaited(&self, store: &mut Store<CallState>, op: &Op) -> wasmtime::Result<GuestResult> {
        match &self.awaited {
            AwaitedPre::V0_1_0(pre) => run_v0_1_0!(pre, store, op, instantiate_async, await),
            AwaitedPre::V0_2_0(pre) => run_v0_2_0!(pre, store, op, instantiate_async, await),
        }
    }
}
