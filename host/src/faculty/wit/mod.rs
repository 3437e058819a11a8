//! The WIT worlds this host accepts, one module per version, and the dispatch over them.
//!
//! A component's version is read from its export names before it is instantiated
//! (`butler:faculty/guest@<version>`); a version this host does not know is refused with
//! a message naming the supported ones. Older versions stay accepted when newer ones are
//! added: add a module, a variant, and a match arm.

pub mod v0_1_0;

use wasmtime::component::{Component, types::ComponentItem};
use wasmtime::{Engine, Store};

use super::sandbox::CallState;

/// Export-name prefix of the faculty interface.
const GUEST_EXPORT: &str = "butler:faculty/guest@";
/// Export-name prefix of a plain WASI command.
const COMMAND_EXPORT: &str = "wasi:cli/run@0.2";

/// WIT versions this host accepts, newest first.
pub const SUPPORTED: &[&str] = &["0.1.0"];

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
}

/// An operation on a faculty instance.
#[derive(Debug, Clone)]
pub enum Op {
    /// `describe()`.
    Describe,
    /// `invoke(command, args, stdin)`.
    Invoke {
        /// Command id.
        command: String,
        /// Validated argv.
        args: Vec<String>,
        /// The stdin argument.
        stdin: Option<String>,
    },
    /// `report(id)`.
    Report(String),
}

/// What the guest returned: JSON text, or its typed failure.
pub type GuestResult = Result<String, (String, String)>;

impl FacultyPre {
    /// Pre-links `component` (whose flavor is `version`) against `linker`.
    ///
    /// # Errors
    /// When the component imports something the host does not provide.
    pub fn new(version: &str, linker: &super::sandbox::Linkers, component: &Component) -> wasmtime::Result<Self> {
        match version {
            "0.1.0" => Ok(Self::V0_1_0(v0_1_0::FacultyPre::new(linker.faculty_v0_1_0.instantiate_pre(component)?)?)),
            other => Err(wasmtime::format_err!("unsupported WIT version {other}")),
        }
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
                    Op::Report(id) => guest.call_report(&mut *store, id)?,
                };
                Ok(result.map_err(|f| (f.code, f.message)))
            }
        }
    }
}
