//! The catalog: every extension found under the instance's scan roots, plus a diagnostic
//! for every manifest that could not be registered — the manifests' types, their
//! validation against `spec/butler.schema.json` and the host's own rules, and the scan.
//! Synchronous and free of any async runtime: the host's loader task runs [`scan`] and
//! publishes the immutable [`Catalog`] snapshots it makes. [`public`] is the only view of
//! a snapshot that leaves the host. [`Follow`] is what every subsystem that follows the
//! snapshots implements. The two neighbouring formats have one module each: [`suzu`] for Suzu
//! Lives capability packages (their checks, and [`suzu::imports`] keeps those imported into
//! the instance), [`chatos`] for ChatOS UI Apps plugins, which the scan finds beside the
//! extensions; [`result_schema`]
//! checks what a delegated agent session submits; [`listeners`] tells a URL that names the
//! host itself.
//!
//! The bottom of the host's layers, so it also holds the few helpers every layer shares:
//! [`json`] (strict, size-capped reading of owner-written JSON), [`validation`] (schema
//! checks with readable messages), [`files`] (atomic writes), [`text`] (clipping echoed
//! text), [`time`] (wall-clock time as the API shows it), [`lock`] and [`redact`] (the one
//! credential redactor: whatever the host stores of what clients send goes through it —
//! the session collector's turns, the MCP activity log's payloads).

pub mod chatos;
pub mod component;
pub mod files;
pub mod icon;
pub mod json;
pub mod listeners;
pub mod manifest;
pub mod names;
pub mod public;
pub mod redact;
pub mod result_schema;
mod rules;
pub mod scan;
pub mod suzu;
pub mod text;
pub mod time;
pub mod validation;

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

pub use component::{ComponentInfo, ComponentInspector, ComponentKind, ComponentRef, InspectError};
pub use icon::Icon;
pub use manifest::{Kind, Manifest};
pub use rules::is_action;
pub use scan::{ScanConfig, check_extension, check_manifest_bytes, scan, scan_confirming};

use crate::validation::SchemaError;

/// Locks `mutex`, carrying on past a panic in another holder: every value kept behind one
/// of the host's mutexes stays consistent between statements.
pub fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A subsystem that follows the catalog (a reconciler): the host's loader calls
/// [`Follow::on_snapshot`] with the current snapshot, then with every new one, in order
/// and one at a time, so a follower never sees two snapshots at once.
pub trait Follow: Send + Sync + 'static {
    /// Brings the subsystem in line with `snapshot`.
    fn on_snapshot(self: Arc<Self>, snapshot: Arc<Catalog>) -> impl Future<Output = ()> + Send;
}

/// An extension the scan registered: its manifest and what the host derived from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Extension {
    /// The manifest, as it passed the schema and the catalog's rules.
    pub manifest: Manifest,
    /// The extension directory (absolute).
    pub dir: PathBuf,
    /// The directory relative to the instance root, for display (`tools/weather`).
    pub display_dir: String,
    /// How its icon is shown.
    pub icon: Icon,
    /// Where its manifest came from.
    pub source: Source,
    /// The WebAssembly components it runs (faculties), with their content hashes.
    pub components: Vec<ComponentRef>,
}

/// Where an extension's manifest came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A `butler.json` in the extension directory.
    Manifest,
    /// The `describe()` of a bare `.wasm` file in a scan root.
    Component(PathBuf),
}

impl Extension {
    /// Where its manifest is, relative to the instance root (`tools/x/butler.json`, or
    /// `faculties/x.wasm` for a self-describing component).
    #[must_use]
    pub fn display_path(&self) -> String {
        match self.source {
            Source::Manifest => format!("{}/{}", self.display_dir, scan::MANIFEST_FILE),
            Source::Component(_) => self.display_dir.clone(),
        }
    }

    /// The component a command's or report's `exec[0]` names, if it is a `.wasm`.
    #[must_use]
    pub fn component_for(&self, exec0: &str) -> Option<&ComponentRef> {
        match &self.source {
            Source::Component(path) => self.components.iter().find(|c| &c.path == path),
            Source::Manifest => {
                let path = component::resolve_exec(&self.dir, exec0).ok()?;
                self.components.iter().find(|c| c.path == path)
            }
        }
    }

    /// The manifest's `id`, unique in the catalog.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.manifest.id
    }

    /// The manifest's `kind`.
    #[must_use]
    pub fn kind(&self) -> Kind {
        self.manifest.kind
    }
}

/// Whether a diagnostic keeps the extension out of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The manifest was rejected.
    Error,
    /// The extension is registered, but something in it is ignored (e.g. an unusable icon).
    Warning,
    /// Not registered yet: its component is being compiled; it appears when ready.
    Pending,
}

impl Severity {
    /// `error`, `warning` or `pending`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Pending => "pending",
        }
    }
}

/// What is wrong with one manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The manifest path relative to the instance root (`tools/weather/butler.json`).
    pub path: String,
    /// The manifest's id, when it could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Rejected, or registered with a warning.
    pub severity: Severity,
    /// Every problem found.
    pub errors: Vec<SchemaError>,
}

impl Diagnostic {
    /// A diagnostic with a single problem.
    #[must_use]
    pub fn single(path: String, id: Option<String>, severity: Severity, pointer: &str, message: String) -> Self {
        Self { path, id, severity, errors: vec![SchemaError { pointer: pointer.to_owned(), message }] }
    }
}

/// One immutable snapshot of the scan.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// Increases by one with every published change.
    pub generation: u64,
    /// Registered extensions, in scan order (scan-root order, then directory name).
    pub extensions: Vec<Arc<Extension>>,
    /// Problems, in scan order.
    pub diagnostics: Vec<Diagnostic>,
    /// The ChatOS UI Apps plugins found beside the extensions, in scan order.
    pub plugins: Vec<Arc<chatos::Plugin>>,
}

impl Catalog {
    /// The extension with this id.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<&Arc<Extension>> {
        self.extensions.iter().find(|e| e.id() == id)
    }

    /// Extensions of one kind, in scan order.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &Arc<Extension>> {
        self.extensions.iter().filter(move |e| e.kind() == kind)
    }

    /// Same extensions and diagnostics (the generation is not compared).
    #[must_use]
    pub fn same_content(&self, other: &Self) -> bool {
        self.extensions == other.extensions && self.diagnostics == other.diagnostics && self.plugins == other.plugins
    }
}
