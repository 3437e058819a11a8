//! One pass over the scan roots: find manifests, read them safely, validate them, and
//! settle id ties. Pure with respect to the host: it reads files and returns a
//! [`Catalog`]; it never starts or stops anything.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use serde_json::Value;

use super::component::{self, ComponentInspector, ComponentRef, InspectError};
use super::{Catalog, Diagnostic, Extension, Manifest, Severity, Source, chatos, icon, rules};
use crate::json;
use crate::validation::{SchemaError, SchemaValidator};

/// The manifest file name.
pub const MANIFEST_FILE: &str = "butler.json";
/// Manifests are small; anything larger than this is refused unread (a bad or hostile
/// file must not make the host allocate without bound).
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

static MANIFEST_SCHEMA: LazyLock<SchemaValidator> = LazyLock::new(|| {
    SchemaValidator::compile("spec/butler.schema.json", include_str!("../../../spec/butler.schema.json"))
        .expect("the bundled manifest schema compiles (covered by the fixture tests)")
});

/// Where to look, and who can tell what a `.wasm` file is.
#[derive(Clone)]
pub struct ScanConfig {
    /// The instance root; display paths are relative to it.
    pub instance_root: PathBuf,
    /// Absolute scan roots, in priority order.
    pub roots: Vec<PathBuf>,
    /// Inspects WebAssembly components; without one, bare `.wasm` files are ignored and
    /// faculty components are not checked.
    pub inspector: Option<Arc<dyn ComponentInspector>>,
    /// The host's own listening addresses: an MCP server whose URL names one of them is
    /// refused (see [`crate::listeners`]).
    pub own_listeners: Vec<std::net::SocketAddr>,
}

impl std::fmt::Debug for ScanConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanConfig")
            .field("instance_root", &self.instance_root)
            .field("roots", &self.roots)
            .field("inspector", &self.inspector.is_some())
            .field("own_listeners", &self.own_listeners)
            .finish()
    }
}

impl ScanConfig {
    /// `path` relative to the instance root when it is inside it, else as given.
    #[must_use]
    pub fn display(&self, path: &Path) -> String {
        path.strip_prefix(&self.instance_root).unwrap_or(path).to_string_lossy().into_owned()
    }

    /// Candidate extension directories, in scan order: scan-root order, then entry name
    /// in byte order, so outcomes never depend on directory-listing order.
    #[must_use]
    pub fn extension_dirs(&self) -> Vec<PathBuf> {
        self.listed().0
    }

    /// [`Self::extension_dirs`], and the scan roots that could not be listed (a root that
    /// does not exist is not among them: it has no extensions).
    /// Where `extension` stands in a scan: its root's position among the roots, then its
    /// folder's (or component file's) name, byte by byte — the order [`Self::listed`] visits.
    fn scan_order(&self, extension: &Extension) -> (usize, Vec<u8>) {
        let folder = match &extension.source {
            Source::Component(file) => file.as_path(),
            Source::Manifest => extension.dir.as_path(),
        };
        let root = self.roots.iter().position(|r| folder.parent() == Some(r.as_path())).unwrap_or(usize::MAX);
        (root, folder.file_name().map(|n| n.as_bytes().to_vec()).unwrap_or_default())
    }

    fn listed(&self) -> (Vec<PathBuf>, Vec<(PathBuf, std::io::Error)>) {
        let mut out = Vec::new();
        let mut unreadable = Vec::new();
        for root in &self.roots {
            let entries = match std::fs::read_dir(root) {
                Ok(entries) => entries,
                Err(e) if !json::is_unreadable(&e) => continue,
                Err(e) => {
                    unreadable.push((root.clone(), e));
                    continue;
                }
            };
            let mut names: Vec<OsString> = Vec::new();
            for entry in entries {
                match entry {
                    Ok(entry) => names.push(entry.file_name()),
                    Err(e) => {
                        unreadable.push((root.clone(), e));
                        break;
                    }
                }
            }
            names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.extend(names.into_iter().map(|n| root.join(n)));
        }
        (out, unreadable)
    }
}

/// Scans every root. `previous` is the last published snapshot: an extension it already
/// registered keeps its id even if a newcomer sorts earlier, and one whose replacement is
/// still compiling stays registered as it was until the new component is ready (so a
/// replaced faculty keeps serving its previous version). An extension that vanished is
/// unregistered at once (for one-shot checks; the loader uses [`scan_confirming`]).
#[must_use]
pub fn scan(config: &ScanConfig, previous: Option<&Catalog>) -> Catalog {
    scan_confirming(config, previous, None).0
}

/// [`scan`], where a scan that cannot read is not a scan that found nothing: what could not
/// be read (a scan root, a folder, a manifest, a component — out of file descriptors,
/// permission, I/O) keeps what `previous` registered from it, with a warning; and an
/// extension whose folder is gone (`ENOENT` on the folder itself) is unregistered only when
/// it was already gone in the scan before (`gone_before`; `None` unregisters at once).
/// Returns the catalog and the folders found gone for the first time, for a second scan to
/// confirm.
#[must_use]
pub fn scan_confirming(
    config: &ScanConfig,
    previous: Option<&Catalog>,
    gone_before: Option<&BTreeSet<PathBuf>>,
) -> (Catalog, BTreeSet<PathBuf>) {
    let mut loaded: Vec<Extension> = Vec::new();
    let mut diagnostics = Vec::new();
    let incumbent = |path: &str| previous.and_then(|p| p.extensions.iter().find(|e| e.display_path() == path));
    let mut plugins: Vec<Arc<chatos::Plugin>> = Vec::new();
    let (dirs, unreadable_roots) = config.listed();
    for dir in dirs {
        match load_dir(config, &dir) {
            Loaded::NotAnExtension => {
                if let Some(plugin) = load_plugin(config, &dir, &plugins, &mut diagnostics) {
                    plugins.push(Arc::new(plugin));
                }
            }
            Loaded::Unreadable(d) => {
                loaded.extend(incumbent(&d.path).map(|kept| (**kept).clone()));
                diagnostics.push(d);
            }
            Loaded::Rejected(d) if d.severity == Severity::Pending => {
                loaded.extend(incumbent(&d.path).map(|kept| (**kept).clone()));
                diagnostics.push(d);
            }
            Loaded::Rejected(d) => diagnostics.push(d),
            Loaded::Registered(ext, warning) => {
                diagnostics.extend(warning);
                loaded.push(*ext);
            }
        }
    }
    for (root, error) in &unreadable_roots {
        let kept: Vec<Extension> = previous
            .into_iter()
            .flat_map(|p| p.extensions.iter())
            .filter(|e| e.dir.starts_with(root) || matches!(&e.source, Source::Component(p) if p.starts_with(root)))
            .map(|e| (**e).clone())
            .collect();
        diagnostics.push(Diagnostic::single(
            config.display(root),
            None,
            Severity::Warning,
            "",
            format!("cannot read this scan root ({error}); its {} extension(s) stay as they were", kept.len()),
        ));
        loaded.extend(kept);
    }
    let mut gone_now = BTreeSet::new();
    if let (Some(previous), Some(gone_before)) = (previous, gone_before) {
        for ext in &previous.extensions {
            let path = ext.display_path();
            if loaded.iter().any(|e| e.display_path() == path) {
                continue;
            }
            let folder = match &ext.source {
                Source::Component(file) => file.clone(),
                Source::Manifest => ext.dir.clone(),
            };
            let gone = matches!(std::fs::symlink_metadata(&folder), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
            if gone && !gone_before.contains(&folder) {
                // Gone once: kept until a second scan says the same.
                gone_now.insert(folder);
                loaded.push((**ext).clone());
            }
        }
    }
    // What was kept (a folder gone once, an unreadable root's extensions) goes back to its
    // place: extensions are always in scan order.
    loaded.sort_by_cached_key(|e| config.scan_order(e));
    let extensions = settle_ids(loaded, previous, &mut diagnostics);
    let extensions: Vec<Arc<Extension>> = extensions.into_iter().map(Arc::new).collect();
    diagnostics.extend(namespace_collisions(config, &extensions, &plugins));
    (Catalog { generation: 0, extensions, diagnostics, plugins }, gone_now)
}

/// A warning for each MCP server whose namespace the host, an earlier extension's server or
/// an earlier app's already has: the hub leaves it out (its status says so too). Extensions
/// come first, in scan order, then the apps.
fn namespace_collisions(
    config: &ScanConfig,
    extensions: &[Arc<Extension>],
    plugins: &[Arc<chatos::Plugin>],
) -> Vec<Diagnostic> {
    let mut taken: HashMap<String, String> =
        [(crate::names::RESERVED.to_owned(), "the host's own tools".to_owned())].into_iter().collect();
    let mut found = Vec::new();
    for ext in extensions {
        let Some(mcp) = &ext.manifest.mcp else { continue };
        let namespace = mcp.effective_namespace(ext.id());
        match taken.get(&namespace) {
            Some(holder) => found.push(Diagnostic::single(
                ext.display_path(),
                Some(ext.id().to_owned()),
                Severity::Warning,
                if mcp.namespace.is_some() { "/mcp/namespace" } else { "/id" },
                format!("its MCP server would have the namespace `{namespace}`, which {holder} has: it is left out of the hub"),
            )),
            None => {
                taken.insert(namespace, format!("the extension `{}`", ext.id()));
            }
        }
    }
    for plugin in plugins {
        for app in plugin.apps.iter().filter(|a| a.server.is_some()) {
            let names = chatos::AppNames::of(plugin, app);
            match taken.get(&names.namespace) {
                Some(holder) => found.push(Diagnostic::single(
                    config.display(&plugin.dir.join(chatos::MANIFEST_FILE)),
                    Some(plugin.id.clone()),
                    Severity::Warning,
                    "",
                    format!(
                        "the app `{}`'s MCP server would have the namespace `{}`, which {holder} has: it is left out of the hub",
                        app.id, names.namespace
                    ),
                )),
                None => {
                    taken.insert(names.namespace, format!("the app `{}`", plugin.server_name(app)));
                }
            }
        }
    }
    found
}

/// The ChatOS UI Apps plugin in `dir`, a folder with a `plugin.json` and no
/// `butler.json`, if it has one that reads; its problems, or why it was refused, become a
/// diagnostic. A plugin id taken by an earlier folder is refused.
fn load_plugin(
    config: &ScanConfig,
    dir: &Path,
    earlier: &[Arc<chatos::Plugin>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<chatos::Plugin> {
    let manifest = dir.join(chatos::MANIFEST_FILE);
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) || !manifest.is_file() {
        return None;
    }
    let display = config.display(&manifest);
    match chatos::read(dir) {
        Err(refused) => {
            diagnostics.push(Diagnostic { path: display, id: None, severity: Severity::Error, errors: vec![refused] });
            None
        }
        Ok(plugin) if earlier.iter().any(|p| p.id == plugin.id) => {
            let message = format!("another plugin folder has the id `{}`: this one is left out", plugin.id);
            diagnostics.push(Diagnostic::single(display, Some(plugin.id), Severity::Error, "/id", message));
            None
        }
        Ok(mut plugin) => {
            refuse_own_endpoints(config, &mut plugin);
            if !plugin.problems.is_empty() {
                let (id, errors) = (Some(plugin.id.clone()), plugin.problems.clone());
                diagnostics.push(Diagnostic { path: display, id, severity: Severity::Warning, errors });
            }
            Some(plugin)
        }
    }
}

/// Leaves out of the hub each app server of `plugin` whose URL names one of the host's own
/// listeners, with a problem saying why (the hub would list and call itself).
fn refuse_own_endpoints(config: &ScanConfig, plugin: &mut chatos::Plugin) {
    for (i, app) in plugin.apps.iter_mut().enumerate() {
        let Some(chatos::Target::Url(url, _)) = app.server.as_ref().map(|s| &s.target) else { continue };
        if crate::listeners::names_own_listener(url, &config.own_listeners) {
            plugin.problems.push(crate::validation::SchemaError {
                pointer: format!("/apps/{i}/ai/mcp/url"),
                message: format!(
                    "`{}` is this host's own address: an MCP server cannot be the hub itself, so the app's server is left out",
                    crate::text::clip(url, 120)
                ),
            });
            app.server = None;
        }
    }
}

/// Validates one extension outside any instance, as a scan loads it (for `butler check`):
/// a folder, its manifest file (by any name), or a bare faculty component. With an
/// `inspector`, the components a faculty names — or the bare component itself — are loaded
/// as the host loads them. Returns the manifest and the diagnostics (none when it is valid).
#[must_use]
pub fn check_extension(
    path: &Path,
    inspector: Option<Arc<dyn ComponentInspector>>,
) -> (Option<Manifest>, Vec<Diagnostic>) {
    let config = ScanConfig { instance_root: PathBuf::new(), roots: Vec::new(), inspector, own_listeners: Vec::new() };
    let bare = path.is_file() && path.file_name().and_then(|n| n.to_str()).is_some_and(component::is_wasm);
    if path.is_dir() || bare {
        if bare && config.inspector.is_none() {
            let message = "a component is checked by the faculty runtime, which this check runs without".to_owned();
            return (None, vec![Diagnostic::single(config.display(path), None, Severity::Error, "", message)]);
        }
        let display = config.display(&path.join(MANIFEST_FILE));
        return checked(load_dir(&config, path), display);
    }
    let dir = path.parent().map_or_else(|| PathBuf::from("."), Path::to_owned);
    let display = config.display(path);
    let loaded = with_components(&config, load_manifest(path, &dir, &display), &dir, display.clone());
    checked(loaded, display)
}

/// Validates the bytes of a manifest as a scan does once it has read them (strict JSON,
/// the schema, the typed view, the semantic rules; its icon resolved against `dir`), with
/// `display` naming it in the diagnostics. Answers as [`check_extension`] does.
#[must_use]
pub fn check_manifest_bytes(bytes: &[u8], dir: &Path, display: &str) -> (Option<Manifest>, Vec<Diagnostic>) {
    let name = Path::new(display).file_name().map_or_else(|| display.to_owned(), |n| n.to_string_lossy().into_owned());
    let loaded = match json::parse_bytes(bytes, &name) {
        Ok(value) => validate(value, dir, display),
        Err(error) => {
            Loaded::Rejected(Diagnostic::single(display.to_owned(), None, Severity::Error, "", error.to_string()))
        }
    };
    checked(loaded, display.to_owned())
}

/// [`check_extension`]'s answer for one load.
fn checked(loaded: Loaded, display: String) -> (Option<Manifest>, Vec<Diagnostic>) {
    match loaded {
        Loaded::NotAnExtension => {
            (None, vec![Diagnostic::single(display, None, Severity::Error, "", "file not found".to_owned())])
        }
        Loaded::Rejected(d) | Loaded::Unreadable(d) => (None, vec![d]),
        Loaded::Registered(ext, warning) => (Some(ext.manifest), warning.into_iter().collect()),
    }
}

enum Loaded {
    NotAnExtension,
    Rejected(Diagnostic),
    /// It could not be read; what was known of it stands.
    Unreadable(Diagnostic),
    Registered(Box<Extension>, Option<Diagnostic>),
}

fn load_dir(config: &ScanConfig, dir: &Path) -> Loaded {
    let display = config.display(&dir.join(MANIFEST_FILE));
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(meta) if meta.is_file() && dir.file_name().and_then(|n| n.to_str()).is_some_and(component::is_wasm) => {
            return load_bare_component(config, dir);
        }
        // Other files and dangling links are not extensions.
        Ok(_) => return Loaded::NotAnExtension,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Loaded::NotAnExtension,
        Err(e) if json::is_unreadable(&e) => {
            return Loaded::Unreadable(Diagnostic::single(
                display,
                None,
                Severity::Warning,
                "",
                format!("cannot open the extension directory ({e}); what was registered from it stays"),
            ));
        }
        Err(e) => {
            return Loaded::Rejected(Diagnostic::single(
                config.display(dir),
                None,
                Severity::Error,
                "",
                format!("cannot open the extension directory: {e}"),
            ));
        }
    }
    let loaded = load_manifest(&dir.join(MANIFEST_FILE), dir, &display);
    with_components(config, loaded, dir, display)
}

/// A loaded manifest of the folder `dir` with the components it names attached, when the
/// config has an inspector: rejected when one does not load, pending while one compiles.
fn with_components(config: &ScanConfig, mut loaded: Loaded, dir: &Path, display: String) -> Loaded {
    if let Loaded::Registered(ext, _) = &mut loaded {
        ext.display_dir = config.display(dir);
        if let Some(inspector) = &config.inspector {
            let id = Some(ext.manifest.id.clone());
            match attach_components(ext, inspector.as_ref()) {
                Ok(Attached::All) => {}
                Ok(Attached::Pending(pointer)) => return pending(display, id, &pointer),
                Ok(Attached::Unreadable(pointer, why)) => {
                    let message = format!("cannot read the component it names ({why}); what was registered stays");
                    return Loaded::Unreadable(Diagnostic::single(display, id, Severity::Warning, &pointer, message));
                }
                Err(errors) => {
                    return Loaded::Rejected(Diagnostic { path: display, id, severity: Severity::Error, errors });
                }
            }
        }
    }
    loaded
}

/// A bare `.wasm` in a scan root: registered from its `describe()` output.
fn load_bare_component(config: &ScanConfig, path: &Path) -> Loaded {
    let Some(inspector) = &config.inspector else { return Loaded::NotAnExtension };
    let display = config.display(path);
    let reject =
        |message: String| Loaded::Rejected(Diagnostic::single(display.clone(), None, Severity::Error, "", message));
    let info = match inspector.inspect(path) {
        Ok(info) => info,
        Err(InspectError::Pending) => return pending(display.clone(), None, ""),
        Err(InspectError::Failed(why)) => return reject(format!("cannot load this component: {why}")),
        Err(InspectError::Unreadable(why)) => {
            let message = format!("cannot read this component ({why}); what was registered from it stays");
            return Loaded::Unreadable(Diagnostic::single(display, None, Severity::Warning, "", message));
        }
    };
    let Some(described) = info.describe.clone() else {
        return reject(
            "a bare .wasm must be a faculty component (exporting butler:faculty/guest); put a plain WASI command in a folder with a butler.json instead".to_owned(),
        );
    };
    let dir = path.parent().map_or_else(|| config.instance_root.clone(), Path::to_owned);
    let mut loaded = validate(described, &dir, &display);
    if let Loaded::Registered(ext, warning) = &mut loaded {
        if ext.manifest.kind != super::Kind::Faculty {
            return reject(format!(
                "describe() says kind `{}`; a component dropped into a scan root must be a faculty",
                ext.manifest.kind.as_str()
            ));
        }
        ext.display_dir = display.clone();
        ext.source = Source::Component(path.to_owned());
        ext.components =
            vec![ComponentRef { path: path.to_owned(), hash: info.hash, kind: info.kind, optimized: info.optimized }];
        if let Some(w) = warning {
            w.errors.iter_mut().for_each(|e| e.message = format!("in describe(): {}", e.message));
        }
    } else if let Loaded::Rejected(d) = &mut loaded {
        d.errors.iter_mut().for_each(|e| e.message = format!("in describe(): {}", e.message));
    }
    loaded
}

/// What a pending diagnostic says: the component is compiling (or about to be).
pub const PENDING_MESSAGE: &str = "compiling this component in the background; it is registered when ready";

/// A manifest whose component is still compiling.
fn pending(path: String, id: Option<String>, pointer: &str) -> Loaded {
    Loaded::Rejected(Diagnostic::single(path, id, Severity::Pending, pointer, PENDING_MESSAGE.to_owned()))
}

/// The `.wasm` files directly in a scan root that `catalog` has not judged yet — neither
/// registered, nor listed as pending, nor refused — each as a pending diagnostic: a
/// component dropped in since that snapshot, which the next scan will compile. Cheap (one
/// directory listing per root, nothing read), so the loader announces new components the
/// moment the watcher sees them, before the debounce and long before a big component is
/// hashed and compiled. (Only a scan with an inspector loads bare components: ask only then.)
#[must_use]
pub fn unjudged_components(config: &ScanConfig, catalog: &Catalog) -> Vec<Diagnostic> {
    let judged: BTreeSet<String> = catalog
        .extensions
        .iter()
        .map(|e| e.display_path())
        .chain(catalog.diagnostics.iter().map(|d| d.path.clone()))
        .collect();
    config
        .listed()
        .0
        .into_iter()
        .filter(|path| path.file_name().and_then(|n| n.to_str()).is_some_and(component::is_wasm))
        .filter(|path| std::fs::metadata(path).is_ok_and(|m| m.is_file()))
        .map(|path| config.display(&path))
        .filter(|display| !judged.contains(display))
        .map(|display| Diagnostic::single(display, None, Severity::Pending, "", PENDING_MESSAGE.to_owned()))
        .collect()
}

/// Whether every component of a faculty folder could be attached.
enum Attached {
    All,
    /// The one at this pointer is still compiling.
    Pending(String),
    /// The one at this pointer could not be read, and why.
    Unreadable(String, String),
}

/// Inspects every `.wasm` a faculty folder's commands and reports name.
fn attach_components(ext: &mut Extension, inspector: &dyn ComponentInspector) -> Result<Attached, Vec<SchemaError>> {
    if ext.manifest.kind != super::Kind::Faculty {
        return Ok(Attached::All);
    }
    let execs =
        ext.manifest.commands.iter().enumerate().map(|(i, c)| (format!("/commands/{i}/exec/0"), c.exec.first())).chain(
            ext.manifest.reports.iter().enumerate().map(|(i, r)| (format!("/reports/{i}/exec/0"), r.exec.first())),
        );
    let mut errors = Vec::new();
    let mut pending = None;
    let mut unreadable = None;
    for (pointer, exec0) in execs {
        let Some(exec0) = exec0.filter(|e| component::is_wasm(e)) else { continue };
        let path = match component::resolve_exec(&ext.dir, exec0) {
            Ok(path) => path,
            Err(outside) => {
                errors.push(SchemaError { pointer, message: outside.to_string() });
                continue;
            }
        };
        if ext.components.iter().any(|c| c.path == path) {
            continue;
        }
        match inspector.inspect(&path) {
            Ok(info) => {
                ext.components.push(ComponentRef { path, hash: info.hash, kind: info.kind, optimized: info.optimized });
            }
            Err(InspectError::Pending) => {
                pending.get_or_insert(pointer);
            }
            Err(InspectError::Failed(why)) => {
                errors.push(SchemaError { pointer, message: format!("cannot load the component it names: {why}") });
            }
            Err(InspectError::Unreadable(why)) => {
                unreadable.get_or_insert((pointer, why));
            }
        }
    }
    if let Some((pointer, why)) = unreadable {
        return Ok(Attached::Unreadable(pointer, why));
    }
    match (errors.is_empty(), pending) {
        (false, _) => Err(errors),
        (true, Some(pointer)) => Ok(Attached::Pending(pointer)),
        (true, None) => Ok(Attached::All),
    }
}

fn load_manifest(file: &Path, dir: &Path, display: &str) -> Loaded {
    match json::read_file(file, MAX_MANIFEST_BYTES) {
        Ok(Some(value)) => validate(value, dir, display),
        Ok(None) => Loaded::NotAnExtension,
        Err(e) if e.unreadable => Loaded::Unreadable(Diagnostic::single(
            display.to_owned(),
            None,
            Severity::Warning,
            "",
            format!("{}; what was registered from it stays", e.message),
        )),
        Err(e) => Loaded::Rejected(Diagnostic::single(display.to_owned(), None, Severity::Error, "", e.message)),
    }
}

/// Schema, typed and semantic validation of a manifest document.
fn validate(value: Value, dir: &Path, display: &str) -> Loaded {
    let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
    // A rejected manifest still shows its unknown fields: the typo behind an error is often
    // one of them (`hosted` spelt otherwise, so the required field is "missing").
    let mut warnings = unknown_fields(&value);
    let rejected = |id: Option<String>, mut errors: Vec<SchemaError>, warnings: &[SchemaError]| {
        // A field an error names already is not named again.
        let hints: Vec<SchemaError> =
            warnings.iter().filter(|w| !errors.iter().any(|e| e.pointer == w.pointer)).cloned().collect();
        errors.extend(hints);
        Loaded::Rejected(Diagnostic { path: display.to_owned(), id, severity: Severity::Error, errors })
    };
    let mut errors = MANIFEST_SCHEMA.errors(&value);
    if !errors.is_empty() {
        return rejected(id, errors, &warnings);
    }
    let manifest: Manifest = match json::typed(value) {
        Ok(m) => m,
        Err((pointer, message)) => return rejected(id, vec![SchemaError { pointer, message }], &warnings),
    };
    errors = rules::check(&manifest);
    if !errors.is_empty() {
        return Loaded::Rejected(Diagnostic { path: display.to_owned(), id, severity: Severity::Error, errors });
    }
    let (icon, icon_warning) = icon::resolve(manifest.icon.as_deref(), &manifest.name, dir);
    warnings.extend(icon_warning.map(|message| SchemaError { pointer: "/icon".to_owned(), message }));
    let warning = (!warnings.is_empty()).then(|| Diagnostic {
        path: display.to_owned(),
        id: id.clone(),
        severity: Severity::Warning,
        errors: warnings,
    });
    Loaded::Registered(
        Box::new(Extension {
            manifest,
            dir: dir.to_owned(),
            display_dir: String::new(),
            icon,
            source: Source::Manifest,
            components: Vec::new(),
        }),
        warning,
    )
}

/// Top-level fields the schema does not define are allowed, but most often a typo
/// (`panelURL`) or a removed feature (`flows`): warn, and suggest the likely field.
fn unknown_fields(value: &Value) -> Vec<SchemaError> {
    let Some(object) = value.as_object() else {
        return Vec::new();
    };
    let known: Vec<&str> = MANIFEST_SCHEMA.root_properties().collect();
    object
        .keys()
        .filter(|key| key.as_str() != "$schema" && !known.contains(&key.as_str()))
        .map(|key| {
            let hint = known
                .iter()
                .find(|k| k.eq_ignore_ascii_case(key))
                .map(|k| format!("; did you mean `{k}`?"))
                .unwrap_or_default();
            SchemaError {
                pointer: format!("/{}", key.replace('~', "~0").replace('/', "~1")),
                message: format!("unknown field `{}` is ignored{hint}", crate::validation::one_line(key)),
            }
        })
        .collect()
}

/// Keeps one extension per id. The winner is the one `previous` registered from the same
/// directory, else the first in scan order; every loser gets a diagnostic naming both.
fn settle_ids(loaded: Vec<Extension>, previous: Option<&Catalog>, diagnostics: &mut Vec<Diagnostic>) -> Vec<Extension> {
    let incumbent = |ext: &Extension| previous.and_then(|p| p.get(ext.id())).is_some_and(|p| p.dir == ext.dir);
    let mut winner: HashMap<String, usize> = HashMap::new();
    for (index, ext) in loaded.iter().enumerate() {
        let slot = winner.entry(ext.id().to_owned()).or_insert(index);
        if *slot != index && incumbent(ext) && !incumbent(&loaded[*slot]) {
            *slot = index;
        }
    }
    let mut kept = Vec::with_capacity(loaded.len());
    let paths: Vec<String> = loaded.iter().map(Extension::display_path).collect();
    for (index, ext) in loaded.into_iter().enumerate() {
        let first = winner[ext.id()];
        if first == index {
            kept.push(ext);
        } else {
            diagnostics.push(Diagnostic {
                path: paths[index].clone(),
                id: Some(ext.id().to_owned()),
                severity: Severity::Error,
                errors: vec![SchemaError {
                    pointer: "/id".to_owned(),
                    message: format!(
                        "id `{}` is already registered by {}; this manifest is ignored",
                        ext.id(),
                        paths[first]
                    ),
                }],
            });
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message of every diagnostic `bytes` gets, which must each be one line.
    fn messages(bytes: &[u8]) -> Vec<String> {
        let (_, diagnostics) = check_manifest_bytes(bytes, Path::new("/nonexistent"), "tools/x/butler.json");
        let messages: Vec<String> = diagnostics.into_iter().flat_map(|d| d.errors).map(|e| e.message).collect();
        assert!(messages.iter().all(|m| !m.contains('\n')), "{messages:?}");
        messages
    }

    /// Found by `scripts/fuzz` (target `manifest`): a field name with a newline made a
    /// two-line message: an unknown field inside a block, one at the top level (a warning),
    /// a pipeline action, a key written twice.
    #[test]
    fn field_names_with_newlines_give_one_line_messages() {
        let nested = br#"{"schemaVersion": 1, "kind": "tool", "id": "weather", "name": "Weather",
            "mcp": {"transport": "stdio", "command": ["bun", "mcp.ts"], "nam\npace": "Weather-Now"}}"#;
        assert_eq!(messages(nested), ["unknown field `nam\\npace`"]);
        let top = br#"{"schemaVersion": 1, "kind": "tool", "id": "t", "name": "T", "x\ny": 1}"#;
        assert_eq!(messages(top), ["unknown field `x\\ny` is ignored"]);
        let action = br#"{"schemaVersion": 1, "kind": "faculty", "id": "f", "name": "F",
            "commands": [{"id": "c", "exec": ["self"], "calls": ["a.b\nc"]}]}"#;
        assert_eq!(messages(action), ["`a.b\\nc` is not a pipeline action (`<prefix>.<verb>`, lower case)"]);
        let twice = b"{\"schemaVersi\\n\": 1, \"schemaVersi\\n\": 1}";
        let refused = messages(twice);
        assert!(refused[0].contains("the field `schemaVersi\\n` is written twice at line 1"), "{refused:?}");
    }

    #[test]
    fn hub_tools_are_globs_and_only_for_commands_that_do_not_write() {
        let manifest = |command: &str| {
            format!(r#"{{"schemaVersion": 1, "kind": "faculty", "id": "f", "name": "F", "commands": [{command}]}}"#)
        };
        let reading = manifest(r#"{"id": "c", "exec": ["self"], "hubTools": ["time__*", "files__read_*"]}"#);
        assert!(messages(reading.as_bytes()).is_empty(), "{:?}", messages(reading.as_bytes()));
        let bad_glob = manifest(r#"{"id": "c", "exec": ["self"], "hubTools": ["time__[a"]}"#);
        let said = messages(bad_glob.as_bytes());
        assert!(said.len() == 1 && said[0].starts_with("not a glob"), "{said:?}");
        let writing = manifest(r#"{"id": "c", "exec": ["self"], "effect": "write", "hubTools": ["*"]}"#);
        let said = messages(writing.as_bytes());
        assert!(said.len() == 1 && said[0].contains("cannot call hub tools"), "{said:?}");
    }

    #[test]
    fn a_rejected_manifest_still_names_the_misspelt_field() {
        // `Hosted` for `hosted`: the kind's required block is missing, and the typo says why.
        let misspelt = br#"{"schemaVersion": 1, "kind": "service", "id": "s", "name": "S",
            "Hosted": {"command": ["sleep", "1"]}}"#;
        let (_, diagnostics) = check_manifest_bytes(misspelt, Path::new("/nonexistent"), "services/s/butler.json");
        assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
        assert_eq!(diagnostics[0].severity, Severity::Error, "{diagnostics:?}");
        let all = messages(misspelt);
        assert!(all.len() >= 2, "the error and the hint: {all:?}");
        assert!(all.iter().any(|m| m == "unknown field `Hosted` is ignored; did you mean `hosted`?"), "{all:?}");
    }
}
