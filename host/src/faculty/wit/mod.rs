//! The WIT worlds this host accepts, one module per version over version-neutral host
//! types ([`Op`], [`GuestFailure`]), and the dispatch over them.
//!
//! A component's version is read from its export names before it is instantiated
//! (`butler:faculty/guest@<version>`); a version this host does not know is refused with
//! a message naming the supported ones. Older versions stay accepted when newer ones are
//! added: add a module, a variant, and a match arm. 0.1.0 takes argv-shaped input and
//! untyped failures; 0.2.0 takes JSON and fails with a typed kind.

pub mod v0_1_0;
pub mod v0_2_0;

use wasmtime::component::{Component, types::ComponentItem};
use wasmtime::{Engine, Store};

use super::sandbox::CallState;

/// Export-name prefix of the faculty interface.
const GUEST_EXPORT: &str = "butler:faculty/guest@";
/// Export-name prefix of a plain WASI command.
const COMMAND_EXPORT: &str = "wasi:cli/run@0.2";

/// WIT versions this host accepts, newest first.
pub const SUPPORTED: &[&str] = &["0.2.0", "0.1.0"];

/// What kind of failure a faculty reports (0.2.0 says so; for 0.1.0 failures and the
/// host's own errors it is read off the code's spelling, see [`FailureKind::of_code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The input is wrong.
    InvalidInput,
    /// Something the input names does not exist.
    NotFound,
    /// The state moved on (stale, expired, taken).
    Conflict,
    /// The caller may not do this.
    Forbidden,
    /// Something needed is unavailable right now.
    Unavailable,
    /// Too large.
    TooLarge,
    /// The faculty could not do it, for a reason of its own.
    Failed,
    /// A defect in the faculty.
    Internal,
}

impl FailureKind {
    /// The kind a code's spelling suggests — the convention for failures that carry no
    /// kind (`invalid_*` → invalid input, `*_not_found` → not found, `stale_*`,
    /// `*_expired`, `*_conflict`, `*_not_active` → conflict, `*_required`, `*_invalid` →
    /// forbidden, `*_unavailable`, `busy` → unavailable, `*_too_large` → too large).
    #[must_use]
    pub fn of_code(code: &str) -> Self {
        match code {
            "not_found" | "unknown_command" | "unknown_report" | "unknown_action" | "unknown_faculty" => Self::NotFound,
            "forbidden" => Self::Forbidden,
            "busy" | "timeout" | "shutting_down" => Self::Unavailable,
            "internal" | "trap" => Self::Internal,
            c if c.starts_with("invalid_") => Self::InvalidInput,
            c if c.ends_with("_not_found") => Self::NotFound,
            c if c.starts_with("stale_")
                || c.ends_with("_expired")
                || c.ends_with("_conflict")
                || c.ends_with("_not_active") =>
            {
                Self::Conflict
            }
            c if c.ends_with("_invalid") || c.ends_with("_required") || c.ends_with("_only") => Self::Forbidden,
            c if c.ends_with("_unavailable") => Self::Unavailable,
            c if c.ends_with("_too_large") => Self::TooLarge,
            _ => Self::Failed,
        }
    }
}

/// A faculty's failure, whatever its WIT version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestFailure {
    /// Its kind.
    pub kind: FailureKind,
    /// Its stable code.
    pub code: String,
    /// For people.
    pub message: String,
    /// More, for programs (0.2.0; boxed, so that errors stay small).
    pub details: Option<Box<serde_json::Value>>,
    /// Whether the faculty said the kind (0.2.0) rather than the host reading it off the
    /// code (0.1.0).
    pub typed: bool,
}

impl GuestFailure {
    /// A failure without a declared kind (0.1.0, the host's own errors).
    #[must_use]
    pub fn untyped(code: String, message: String) -> Self {
        Self { kind: FailureKind::of_code(&code), code, message, details: None, typed: false }
    }
}

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
pub fn flavor(engine: &Engine, component: &Component) -> Result<Flavor, String> {
    let ty = component.component_type();
    let mut exports = Vec::new();
    for (name, item) in ty.exports(engine) {
        if let Some(version) = name.strip_prefix(GUEST_EXPORT) {
            if let Some(known) = SUPPORTED.iter().find(|v| **v == version) {
                return Ok(Flavor::Faculty(known));
            }
            return Err(format!(
                "it targets butler:faculty@{version}, but this host supports {}; rebuild it against one of those",
                SUPPORTED.iter().map(|v| format!("@{v}")).collect::<Vec<_>>().join(", ")
            ));
        }
        if name.starts_with(COMMAND_EXPORT) && matches!(item.ty, ComponentItem::ComponentInstance(_)) {
            return Ok(Flavor::Command);
        }
        exports.push(name.to_owned());
    }
    Err(format!(
        "it exports neither butler:faculty/guest nor wasi:cli/run (exports: {})",
        if exports.is_empty() { "none".to_owned() } else { exports.join(", ") }
    ))
}

/// A faculty component, pre-linked for one WIT version.
#[derive(Clone)]
pub enum FacultyPre {
    /// `butler:faculty@0.1.0`.
    V0_1_0(v0_1_0::FacultyPre<CallState>),
    /// `butler:faculty@0.2.0`.
    V0_2_0(v0_2_0::FacultyPre<CallState>),
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
        /// The stdin argument.
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

impl FacultyPre {
    /// Pre-links `component` (whose flavor is `version`) against `linker`.
    ///
    /// # Errors
    /// When the component imports something the host does not provide.
    pub fn new(version: &str, linker: &super::sandbox::Linkers, component: &Component) -> wasmtime::Result<Self> {
        match version {
            "0.1.0" => Ok(Self::V0_1_0(v0_1_0::FacultyPre::new(linker.linker.instantiate_pre(component)?)?)),
            "0.2.0" => Ok(Self::V0_2_0(v0_2_0::FacultyPre::new(linker.linker.instantiate_pre(component)?)?)),
            other => Err(wasmtime::format_err!("unsupported WIT version {other}")),
        }
    }

    /// Whether its commands take JSON input (0.2.0) rather than an argument list.
    #[must_use]
    pub fn json_native(&self) -> bool {
        matches!(self, Self::V0_2_0(_))
    }

    /// Instantiates and runs `op` in `store`.
    ///
    /// # Errors
    /// Traps, deadline and memory errors (the caller classifies them).
    pub fn run(&self, store: &mut Store<CallState>, op: &Op) -> wasmtime::Result<GuestResult> {
        match self {
            Self::V0_1_0(pre) => {
                let faculty = pre.instantiate(&mut *store)?;
                let guest = faculty.butler_faculty_guest();
                let result = match op {
                    Op::Describe => Ok(guest.call_describe(&mut *store)?),
                    Op::Invoke { command, args, stdin } => {
                        guest.call_invoke(&mut *store, command, args, stdin.as_deref())?
                    }
                    Op::Call { command, input } => guest.call_invoke(&mut *store, command, &[], Some(input))?,
                    Op::Report(id) => guest.call_report(&mut *store, id)?,
                };
                Ok(result.map_err(|f| GuestFailure::untyped(f.code, f.message)))
            }
            Self::V0_2_0(pre) => {
                let faculty = pre.instantiate(&mut *store)?;
                let guest = faculty.butler_faculty_guest();
                let result = match op {
                    Op::Describe => Ok(guest.call_describe(&mut *store)?),
                    Op::Call { command, input } => guest.call_invoke(&mut *store, command, input)?,
                    Op::Invoke { command, stdin, .. } => {
                        guest.call_invoke(&mut *store, command, stdin.as_deref().unwrap_or("{}"))?
                    }
                    Op::Report(id) => guest.call_report(&mut *store, id)?,
                };
                Ok(result.map_err(v0_2_0::from_wit))
            }
        }
    }
}
