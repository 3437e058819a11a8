//! `butler check [PATH]`: validate a manifest, an extension folder, a faculty component, or
//! a whole instance — its extensions, the MCP namespaces they claim, and the parts of its
//! root config the host checks only as it starts (the MCP profiles; the providers
//! `mcp.legacyProviders` names) — exactly as the host loads them (components through the
//! same faculty runtime: not a component, a core module, an unsupported WIT version, a
//! missing file are the host's own diagnostics), or run a Suzu Lives capability
//! package's static checks (`suzu-capability.json`, or its folder), or read a ChatOS UI Apps
//! plugin (`plugin.json`, or its folder) as the scan does, and say in the terminal what is
//! wrong. Exits 1 when anything is rejected.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use butler_faculty::FacultyRuntime;
use butler_host::catalog::scan::MANIFEST_FILE;
use butler_host::catalog::{Diagnostic, Severity, chatos, check_extension, scan, suzu};
use butler_host::instance::Instance;
use serde_json::{Value, json};

use super::settings::{self, Settings};

/// `butler check` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A manifest file, an extension folder, a faculty component (`.wasm`), an instance
    /// folder, a Suzu Lives capability package (its `suzu-capability.json` or its folder),
    /// or a ChatOS UI Apps plugin (its `plugin.json` or its folder) [default: the instance]
    path: Option<PathBuf>,
    /// Instance directory: checked when no PATH is given, and whose faculty settings a
    /// checked extension's components are loaded with [default: the one `serve` uses]
    #[arg(long, env = butler_host::instance::WORKDIR_ENV, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the check.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let path = match &args.path {
        Some(path) => path.clone(),
        None => settings::workdir(args.workdir.clone(), &Settings::load()?)?,
    };
    if let Some(manifest) = suzu_manifest(&path) {
        return Ok(check_suzu(&manifest, args.json));
    }
    let outcome = if let Some(dir) = ui_apps_plugin(&path) {
        check_plugin(&dir)
    } else if is_extension(&path) {
        check_one(&path, args.workdir.as_deref())?
    } else {
        check_instance(&path)?
    };
    if args.json {
        let diagnostics = &outcome.diagnostics;
        outln!("{:#}", json!({"ok": outcome.ok(), "registered": outcome.registered, "diagnostics": diagnostics}));
    } else {
        out!("{}", outcome.render());
    }
    Ok(if outcome.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

struct Outcome {
    registered: Vec<String>,
    diagnostics: Vec<Diagnostic>,
}

impl Outcome {
    fn ok(&self) -> bool {
        self.diagnostics.iter().all(|d| d.severity != Severity::Error)
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for d in &self.diagnostics {
            let verdict = match d.severity {
                Severity::Error => "rejected",
                Severity::Warning => "warning",
                Severity::Pending => "pending",
            };
            out.push_str(&format!("{} — {verdict}\n", d.path));
            for e in &d.errors {
                let at = if e.pointer.is_empty() { "(root)" } else { &e.pointer };
                out.push_str(&format!("  {at}: {}\n", e.message));
            }
        }
        let rejected = self.diagnostics.iter().filter(|d| d.severity == Severity::Error).count();
        let warnings = self.diagnostics.len() - rejected;
        out.push_str(&format!(
            "{} valid, {rejected} rejected, {warnings} with warnings{}\n",
            plural(self.registered.len(), "extension"),
            if self.registered.is_empty() { String::new() } else { format!(" ({})", self.registered.join(", ")) },
        ));
        out
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

/// The Suzu Lives manifest `path` is or holds: the file `suzu-capability.json`, or a folder
/// with one and no `butler.json`.
fn suzu_manifest(path: &Path) -> Option<PathBuf> {
    if path.file_name().is_some_and(|name| name == suzu::MANIFEST_FILE) {
        return Some(path.to_owned());
    }
    let manifest = path.join(suzu::MANIFEST_FILE);
    (path.is_dir() && manifest.is_file() && !path.join(MANIFEST_FILE).exists()).then_some(manifest)
}

/// A Suzu Lives package's static checks, printed; failure when any problem was found.
fn check_suzu(manifest: &Path, json: bool) -> ExitCode {
    let report = suzu::inspect(&std::path::absolute(manifest).unwrap_or_else(|_| manifest.to_owned()));
    if json {
        outln!("{:#}", json!({"ok": report.ok(), "format": "suzu-capability", "report": report}));
    } else {
        out!("{}", render_suzu(&report));
    }
    if report.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn render_suzu(report: &suzu::Report) -> String {
    let mut out = format!("{} — Suzu Lives capability package\n", report.manifest.display());
    if let Some(package) = &report.package {
        out.push_str(&format!("  {} {} — {}\n", package.id, package.version, package.name));
        let mut adapters = package.adapters.join(", ");
        if let Some(skill) = &package.skill {
            adapters.push_str(&format!(
                "; skill {} `{}`: {}, {} bytes",
                skill.form,
                skill.path,
                plural(skill.files.len(), "file"),
                skill.bytes
            ));
        }
        out.push_str(&format!("  adapters: {adapters}\n"));
    }
    for problem in &report.problems {
        out.push_str(&problem_line(&json!(problem)));
    }
    if report.ok() {
        out.push_str("passes the static checks\n");
    } else {
        out.push_str(&format!("rejected: {}\n", plural(report.problems.len(), "problem")));
    }
    out
}

/// One problem of a Suzu Lives package's report (as JSON: `file`, `rule`, `pointer`?,
/// `message`), as a line: `  FILE POINTER: [RULE] MESSAGE`.
pub(super) fn problem_line(problem: &serde_json::Value) -> String {
    let text = |key: &str| problem.get(key).and_then(serde_json::Value::as_str).unwrap_or_default();
    let at = match text("pointer") {
        "" => text("file").to_owned(),
        pointer => format!("{} {pointer}", text("file")),
    };
    format!("  {at}: [{}] {}\n", text("rule"), text("message"))
}

/// A manifest file, a component, or a folder whose `butler.json` looks like a manifest (has
/// `kind`, `id` or `schemaVersion`) rather than an instance config.
fn is_extension(path: &Path) -> bool {
    if path.is_file() {
        return true;
    }
    let manifest = path.join(MANIFEST_FILE);
    if !manifest.is_file() {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(&manifest) else {
        return true;
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => ["kind", "id", "schemaVersion"].iter().any(|k| map.contains_key(*k)),
        _ => true,
    }
}

/// The folder of the ChatOS UI Apps plugin `path` is (its `plugin.json`, or a folder with
/// one and no `butler.json`), if it is one.
fn ui_apps_plugin(path: &Path) -> Option<PathBuf> {
    if path.file_name().is_some_and(|n| n == chatos::MANIFEST_FILE) && path.is_file() {
        return Some(path.parent().map_or_else(|| PathBuf::from("."), Path::to_owned));
    }
    (path.join(chatos::MANIFEST_FILE).is_file() && !path.join(MANIFEST_FILE).exists()).then(|| path.to_owned())
}

/// Reads a ChatOS plugin as the scan does: what it offers, and its problems.
fn check_plugin(dir: &Path) -> Outcome {
    let display = dir.join(chatos::MANIFEST_FILE).to_string_lossy().into_owned();
    match chatos::read(dir) {
        Err(refused) => Outcome {
            registered: Vec::new(),
            diagnostics: vec![Diagnostic { path: display, id: None, severity: Severity::Error, errors: vec![refused] }],
        },
        Ok(plugin) => {
            let registered = plugin
                .apps
                .iter()
                .map(|app| {
                    let server = if app.server.is_some() { ", MCP server" } else { "" };
                    format!("ChatOS app `{}`{server}", plugin.server_name(app))
                })
                .collect();
            let diagnostics = if plugin.problems.is_empty() {
                Vec::new()
            } else {
                let id = Some(plugin.id.clone());
                vec![Diagnostic { path: display, id, severity: Severity::Warning, errors: plugin.problems }]
            };
            Outcome { registered, diagnostics }
        }
    }
}

/// One extension or component, loaded as the host loads it: through a faculty runtime set
/// up as `workdir`'s (its faculty settings and compile cache), or, without an instance, as
/// a new one's in a temporary folder.
fn check_one(path: &Path, workdir: Option<&Path>) -> anyhow::Result<Outcome> {
    // Without an instance, the runtime compiles into it; it outlives the runtime (declared
    // before it).
    let mut scratch = None;
    let setup = match workdir {
        Some(dir) => Instance::open(dir)?.faculty_setup(""),
        None => {
            let dir = tempfile::tempdir().map_err(|e| anyhow::anyhow!("cannot create a temporary folder: {e}"))?;
            let root = scratch.insert(dir).path().to_owned();
            butler_faculty::Setup {
                root: root.clone(),
                scan_roots: Vec::new(),
                state_dir: root,
                folders: Vec::new(),
                settings: std::collections::BTreeMap::new(),
                config: serde_json::Map::new(),
                host: butler_process::HostEnv::default(),
                clock: butler_faculty::Clock::system(),
                shared_memory_mb: None,
            }
        }
    };
    let runtime = runtime(setup)?;
    let (manifest, diagnostics) = check_extension(path, Some(runtime.inspector()));
    Ok(Outcome {
        registered: manifest.map(|m| format!("{} `{}`", m.kind.as_str(), m.id)).into_iter().collect(),
        diagnostics,
    })
}

fn runtime(setup: butler_faculty::Setup) -> anyhow::Result<Arc<FacultyRuntime>> {
    FacultyRuntime::for_check(setup).map_err(|e| anyhow::anyhow!("cannot start the faculty runtime: {e:#}"))
}

fn check_instance(path: &Path) -> anyhow::Result<Outcome> {
    let instance = Instance::open(path)?;
    let runtime = runtime(instance.faculty_setup(""))?;
    let mut config = instance.scan_config();
    config.inspector = Some(runtime.inspector());
    let catalog = scan(&config, None);
    let mut diagnostics = catalog.diagnostics.clone();
    let root = |severity, pointer: String, message: String| {
        Diagnostic::single(MANIFEST_FILE.to_owned(), None, severity, &pointer, message)
    };
    if let Err(wrong) = instance.config.mcp.checked_profiles() {
        diagnostics.push(root(Severity::Error, format!("/mcp/profiles/{}", wrong.name), wrong.why));
    }
    let imports = butler_catalog::suzu::imports::Imports::read_only(
        instance.state_dir().join(butler_catalog::suzu::imports::IMPORTS_DIR),
    );
    let mut providers: Vec<String> =
        catalog.extensions.iter().filter(|e| e.manifest.mcp.is_some()).map(|e| e.id().to_owned()).collect();
    providers.extend(butler_host::packages::provider_ids(&catalog, &imports));
    for id in instance.config.mcp.legacy_providers.iter().filter(|id| !providers.contains(id)) {
        let why = format!(
            "no provider `{id}` is registered — an extension with an `mcp` block, an enabled capability package's server (`suzu:<id>`) or a ChatOS app's (`uiapp:<pluginId>.<appId>`) — so it is ignored"
        );
        diagnostics.push(root(Severity::Warning, "/mcp/legacyProviders".to_owned(), why));
    }
    diagnostics.extend(writable_by_others(&instance));
    diagnostics.extend(variables_not_allowed(&instance, &catalog));
    let mut registered: Vec<String> = catalog.extensions.iter().map(|e| e.id().to_owned()).collect();
    registered.extend(catalog.plugins.iter().map(|p| format!("ChatOS plugin `{}`", p.id)));
    Ok(Outcome { registered, diagnostics })
}

/// A warning for each `${VAR}` an extension's MCP server names in its `headers` or `env`
/// that the root config's `mcp.allowEnv` does not give it: the hub reads it as unset.
fn variables_not_allowed(instance: &Instance, catalog: &butler_catalog::Catalog) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    for extension in &catalog.extensions {
        let Some(mcp) = &extension.manifest.mcp else { continue };
        let file = extension.dir.join(MANIFEST_FILE);
        let shown = file.strip_prefix(&instance.root).unwrap_or(&file).display().to_string();
        for (field, values) in [("headers", &mcp.headers), ("env", &mcp.env)] {
            for (key, value) in values {
                let refused =
                    instance.config.mcp.variables_not_given(extension.id(), butler_mcp::host_env::names_in(value));
                if refused.is_empty() {
                    continue;
                }
                let why = format!(
                    "reads {} from the host's environment, which the root config's mcp.allowEnv does not give this server: the hub reads it as unset (list it under \"{}\" in mcp.allowEnv if this server should have it)",
                    butler_mcp::host_env::listed(&refused),
                    extension.id()
                );
                let pointer = format!("/mcp/{field}/{}", key.replace('~', "~0").replace('/', "~1"));
                diagnostics.push(Diagnostic::single(
                    shown.clone(),
                    Some(extension.id().to_owned()),
                    Severity::Warning,
                    &pointer,
                    why,
                ));
            }
        }
    }
    diagnostics
}

/// A warning for the instance root and each scan root that other users of the machine may
/// write to (a group or other write bit): they could put an extension there, or change
/// one, and the host would run it as the owner.
fn writable_by_others(instance: &Instance) -> Vec<Diagnostic> {
    use std::os::unix::fs::PermissionsExt;
    std::iter::once(instance.root.clone())
        .chain(instance.scan_config().roots)
        .filter_map(|folder| {
            let mode = std::fs::metadata(&folder).ok()?.permissions().mode() & 0o7777;
            if mode & 0o022 == 0 {
                return None;
            }
            let shown = match folder.strip_prefix(&instance.root) {
                Ok(inside) if inside.as_os_str().is_empty() => ".".to_owned(),
                Ok(inside) => inside.display().to_string(),
                Err(_) => folder.display().to_string(),
            };
            let message = format!(
                "other users of the machine can write to this folder (mode {mode:04o}): they could add or change an extension the host runs as you; `chmod go-w {}`",
                folder.display()
            );
            Some(Diagnostic::single(shown, None, Severity::Warning, "", message))
        })
        .collect()
}
