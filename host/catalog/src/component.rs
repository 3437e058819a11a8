//! WebAssembly components in the catalog.
//!
//! The catalog does not run code; it asks a [`ComponentInspector`] (the faculty runtime)
//! what a `.wasm` file is. A bare `faculties/<name>.wasm` is registered from its
//! `describe()` output, validated like any manifest; a faculty folder's `.wasm` commands
//! are checked too, so a component that fails to compile, is not a component, or targets
//! an unsupported WIT version shows up as a diagnostic instead of failing at call time.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// What a component is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentKind {
    /// Exports `butler:faculty/guest` at this WIT version.
    Faculty {
        /// e.g. `0.1.0`.
        wit_version: String,
    },
    /// A plain WASI command (`wasi:cli/run`).
    Command,
}

/// The inspector's answer for one file.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentInfo {
    /// SHA-256 of the file (hex): changed code is a changed extension.
    pub hash: String,
    /// What it is.
    pub kind: ComponentKind,
    /// `describe()` output, for faculty components.
    pub describe: Option<Value>,
    /// Compiled by the optimizing compiler (else by the quick baseline compiler, while the
    /// optimized code is being made: the extension changes when it is ready).
    pub optimized: bool,
}

/// Why a component cannot be used (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InspectError {
    /// It is being compiled in the background; the catalog is rescanned when it is ready.
    Pending,
    /// It cannot be used: not wasm, a core module, unsupported world, compile error,
    /// `describe` failed… (a readable reason).
    Failed(String),
    /// The file could not be read (out of file descriptors, permission, I/O): it may be
    /// fine, so what was known of it stands.
    Unreadable(String),
}

/// Compiles (or loads from cache) and classifies components. Implemented by the faculty
/// runtime; called on the catalog loader's blocking thread, never on a request path.
pub trait ComponentInspector: Send + Sync {
    /// What the component at `path` is.
    ///
    /// # Errors
    /// [`InspectError`].
    fn inspect(&self, path: &Path) -> Result<ComponentInfo, InspectError>;
}

/// A component an extension runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentRef {
    /// Absolute path.
    pub path: PathBuf,
    /// SHA-256 of the file's bytes, lower-case hex: the key of its compiled code.
    pub hash: String,
    /// What it is.
    pub kind: ComponentKind,
    /// Whether its optimized code is in use (see [`ComponentInfo::optimized`]).
    pub optimized: bool,
}

/// Whether `name` is a WebAssembly file name.
#[must_use]
pub fn is_wasm(name: &str) -> bool {
    Path::new(name).extension().is_some_and(|e| e.eq_ignore_ascii_case("wasm"))
}

/// Resolves an `exec[0]` naming a `.wasm` inside the manifest directory. Only plain
/// relative paths are accepted: no absolute paths and no `..`.
///
/// # Errors
/// [`OutsideFolder`] when `exec0` is absolute or holds `..`.
pub fn resolve_exec(dir: &Path, exec0: &str) -> Result<PathBuf, OutsideFolder> {
    let relative = Path::new(exec0);
    let plain =
        relative.components().all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir));
    if !plain {
        return Err(OutsideFolder);
    }
    Ok(dir.join(relative))
}

/// An `exec[0]` that is absolute or has a `..`: [`resolve_exec`] takes only paths inside
/// the faculty's folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a component must be named by a path inside the faculty folder (no absolute paths, no `..`)")]
pub struct OutsideFolder;
