//! ChatOS UI Apps plugins (`plugin.json`) found in the scan roots: reading one plugin
//! folder into its apps and their AI contributions, with every problem reported against
//! a JSON pointer of the manifest.
//!
//! The format drifted between ChatOS versions; this reads the union of them, so that any
//! plugin some ChatOS version loads loads here: `entry` and `entry.compact` as an object
//! or a bare path, `ai` as an object or a bare `ai.config` path, `ai.mcp.allowMain` /
//! `allowSub`, `ai.mcpServers` / `ai.prompts` / `ai.config`. Unknown keys are ignored, as
//! ChatOS ignores them. Severity follows ChatOS: a manifest that is not one rejects the
//! plugin; a bad app entry drops that app; a bad backend, prompt file, `ai.config` or MCP
//! entry drops only that piece. Nothing here runs, downloads or probes anything.
//!
//! Butler is stricter in two places, both about files: a path in the manifest must stay
//! inside the plugin folder after symbolic links are resolved (ChatOS checks only the
//! text), and a plugin id must be usable as one folder name (its data folder is named
//! after it).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

use crate::validation::SchemaError;

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "plugin.json";
/// The largest manifest read, as in ChatOS.
pub const MAX_MANIFEST_BYTES: u64 = 256 * 1024;
/// The largest prompt or `ai.config` file read, as in ChatOS.
pub const MAX_AI_FILE_BYTES: u64 = 128 * 1024;
/// The interpreter of an `ai.mcp.entry` when no `command` is given.
pub const DEFAULT_COMMAND: &str = "node";

/// One plugin folder, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Plugin {
    /// The plugin folder (absolute).
    pub dir: PathBuf,
    /// The manifest's `id`: required, usable as a folder name (no `/`, `\\`, `.`, `..`).
    pub id: String,
    /// The manifest's `name` (required, trimmed).
    pub name: String,
    /// `version` (`0.0.0` when absent).
    pub version: String,
    /// The manifest's `description` (empty when absent).
    pub description: String,
    /// `backend.entry`, resolved, or why it cannot run.
    pub backend: Option<Result<PathBuf, BadBackendEntry>>,
    /// Its apps that could be read, in manifest order.
    pub apps: Vec<App>,
    /// What was dropped or ignored, by pointer.
    pub problems: Vec<SchemaError>,
}

/// One `apps[i]`.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    /// The app's `id`, unique in its plugin (a second app with it is left out).
    pub id: String,
    /// The app's `name` (required, trimmed).
    pub name: String,
    /// The app's `description` (empty when absent).
    pub description: String,
    /// `ai.mcp`, when it names something to run or reach.
    pub server: Option<AppServer>,
    /// `ai.mcpPrompt`, one per language that could be read (Chinese first).
    pub prompts: Vec<AppPrompt>,
    /// Which existing MCP servers it exposes (`ai.mcpServers`).
    pub servers_exposed: Exposure,
    /// Which existing prompts it exposes (`ai.prompts`).
    pub prompts_exposed: Exposure,
}

/// An app's own MCP server (`ai.mcp`).
#[derive(Debug, Clone, PartialEq)]
pub struct AppServer {
    /// How it is reached.
    pub target: Target,
    /// `callMeta`, as written (variables expanded per call by [`call_meta`]).
    pub call_meta: Option<Value>,
    /// Offered to the main agent (`allowMain`, default true).
    pub allow_main: bool,
    /// Offered to sub-agents (`allowSub`, default true).
    pub allow_sub: bool,
    /// `ai.mcp.description` (empty when absent).
    pub description: String,
}

/// Where an app's MCP server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A process spoken to over stdio: its argv.
    Command(Vec<String>),
    /// A server spoken to over HTTP, with the headers `auth` gives.
    Url(String, BTreeMap<String, String>),
}

/// One language of an app's own prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppPrompt {
    /// `mcp_<normalized server name>`, with `__en` for English.
    pub name: String,
    /// `title`, or `<app name> MCP Prompt`.
    pub title: String,
    /// The text, trimmed.
    pub text: String,
}

/// What an exposure list resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// Nothing is exposed.
    Off,
    /// Everything is.
    All,
    /// These names, trimmed and without repeats.
    Listed(Vec<String>),
}

/// One exposure value as a source gives it, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// `true` or `false`.
    Flag(bool),
    /// A list with at least one name.
    List(Vec<String>),
}

/// The seed's precedence for one exposure list: the inline value in `plugin.json`, then
/// the `ai.config` file, then the host's default list. Inline `false` forces off; an
/// inline list is used as is; inline `true` takes the file's value, else the default's,
/// else everything; unset lets only the file's value apply.
#[must_use]
pub fn resolve_exposure(inline: Option<&Choice>, file: Option<&Choice>, default: Option<&Choice>) -> Exposure {
    let exposure = |choice: &Choice| match choice {
        Choice::Flag(false) => Exposure::Off,
        Choice::Flag(true) => Exposure::All,
        Choice::List(names) => Exposure::Listed(names.clone()),
    };
    match inline {
        Some(Choice::Flag(false)) => Exposure::Off,
        Some(list @ Choice::List(_)) => exposure(list),
        Some(Choice::Flag(true)) => file.or(default).map_or(Exposure::All, exposure),
        None => file.map_or(Exposure::Off, exposure),
    }
}

/// ChatOS's `normalize`: trimmed, lower case, every character outside `[a-z0-9_-]`
/// replaced by `_`, leading and trailing `_` removed. One `_` per character, as the seed
/// says (ChatOS's code folds a run into one `_`).
#[must_use]
pub fn normalize(name: &str) -> String {
    let mapped: String = name
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    mapped.trim_matches('_').to_owned()
}

impl Plugin {
    /// An app's server name: `<pluginId>.<appId>`.
    #[must_use]
    pub fn server_name(&self, app: &App) -> String {
        format!("{}.{}", self.id, app.id)
    }
}

/// The prefix of a ChatOS app's provider id in the hub.
pub const APP_PROVIDER: &str = "uiapp:";

/// What an app is called in the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppNames {
    /// Its server's provider id, `uiapp:<pluginId>.<appId>`.
    pub provider: String,
    /// Its server's namespace: `normalize(<pluginId>.<appId>)` fitted to the hub's rules —
    /// at most [`crate::suzu::imports::MAX_NAMESPACE`] characters, not ending in `_`, `app` when
    /// nothing is left.
    pub namespace: String,
    /// Its profile's name, `normalize(<pluginId>.<appId>)`.
    pub profile: String,
}

impl AppNames {
    /// The names of `plugin`'s `app`.
    #[must_use]
    pub fn of(plugin: &Plugin, app: &App) -> Self {
        let server_name = plugin.server_name(app);
        let profile = normalize(&server_name);
        let fitted: String = profile.chars().take(crate::suzu::imports::MAX_NAMESPACE).collect();
        let fitted = fitted.trim_end_matches('_');
        let namespace = if fitted.is_empty() { "app".to_owned() } else { fitted.to_owned() };
        Self { provider: format!("{APP_PROVIDER}{server_name}"), namespace, profile }
    }
}

/// The places `callMeta` variables and `_meta.chatos.uiApp` speak of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    /// The plugin's data folder (`<stateDir>/ui_apps/data/<pluginId>`).
    pub data_dir: PathBuf,
    /// The host's state folder.
    pub state_dir: PathBuf,
    /// Where sessions live (the instance).
    pub session_root: PathBuf,
    /// The project (the instance).
    pub project_root: PathBuf,
}

/// The `_meta` a `tools/call` to `app`'s server carries: `workdir` (the data folder) and
/// `chatos.uiApp` (who and where), with the app's `callMeta` merged over them, its
/// `$pluginId`, `$appId`, `$pluginDir`, `$dataDir`, `$stateDir`, `$sessionRoot` and
/// `$projectRoot` replaced in every string.
#[must_use]
pub fn call_meta(plugin: &Plugin, app: &App, places: &Places) -> Value {
    let text = |p: &Path| p.to_string_lossy().into_owned();
    let vars = [
        ("$pluginId", plugin.id.clone()),
        ("$appId", app.id.clone()),
        ("$pluginDir", text(&plugin.dir)),
        ("$dataDir", text(&places.data_dir)),
        ("$stateDir", text(&places.state_dir)),
        ("$sessionRoot", text(&places.session_root)),
        ("$projectRoot", text(&places.project_root)),
    ];
    let mut meta = serde_json::json!({
        "workdir": text(&places.data_dir),
        "chatos": {"uiApp": {
            "pluginId": plugin.id, "appId": app.id, "pluginDir": text(&plugin.dir),
            "dataDir": text(&places.data_dir), "stateDir": text(&places.state_dir),
            "sessionRoot": text(&places.session_root), "projectRoot": text(&places.project_root),
        }},
    });
    if let Some(extra) = app.server.as_ref().and_then(|s| s.call_meta.clone()) {
        merge(&mut meta, expand(extra, &vars));
    }
    meta
}

/// Replaces every variable in every string of `value` (keys are left as written).
fn expand(value: Value, vars: &[(&str, String)]) -> Value {
    match value {
        Value::String(mut s) => {
            for (name, with) in vars {
                s = s.replace(name, with);
            }
            Value::String(s)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(|v| expand(v, vars)).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, expand(v, vars))).collect()),
        other => other,
    }
}

/// Merges `over` into `base`: two objects key by key, anything else replaced.
pub fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (slot, over) => *slot = over,
    }
}

/// Reads the plugin in `dir`. `Err` is why the whole plugin is refused (a pointer into
/// the manifest, and what is wrong).
///
/// # Errors
/// An unreadable, oversized or invalid manifest.
pub fn read(dir: &Path) -> Result<Plugin, SchemaError> {
    let refuse = |pointer: &str, message: String| SchemaError { pointer: pointer.to_owned(), message };
    let bytes = read_capped(&dir.join(MANIFEST_FILE), MAX_MANIFEST_BYTES).map_err(|why| refuse("", why.to_string()))?;
    let manifest: Value =
        serde_json::from_slice(&bytes).map_err(|e| refuse("", format!("{MANIFEST_FILE} is not valid JSON: {e}")))?;
    let Value::Object(top) = manifest else {
        return Err(refuse("", format!("{MANIFEST_FILE} must be a JSON object")));
    };
    if let Some(version) = top.get("manifestVersion")
        && version.as_u64() != Some(1)
    {
        return Err(refuse("/manifestVersion", "must be 1".to_owned()));
    }
    let id = required(&top, "id", "")?;
    if id.contains(['/', '\\', '\0']) || id == "." || id == ".." {
        return Err(refuse("/id", "must be usable as a folder name: no `/`, `\\`, and not `.` or `..`".to_owned()));
    }
    let name = required(&top, "name", "")?;
    let version = optional(&top, "version", "")?.unwrap_or_else(|| "0.0.0".to_owned());
    let description = optional(&top, "description", "")?.unwrap_or_default();
    let mut plugin = Plugin {
        dir: dir.to_owned(),
        id,
        name,
        version,
        description,
        backend: None,
        apps: Vec::new(),
        problems: Vec::new(),
    };
    match top.get("backend") {
        None | Some(Value::Null) => {}
        Some(Value::Object(backend)) => {
            let entry = required(backend, "entry", "/backend")?;
            let backend = inside(dir, &entry).map_err(BadBackendEntry);
            if let Err(why) = &backend {
                plugin.problems.push(refuse("/backend/entry", format!("{why}: the backend cannot run")));
            }
            plugin.backend = Some(backend);
        }
        Some(_) => return Err(refuse("/backend", "must be an object with `entry`".to_owned())),
    }
    let apps = match top.get("apps") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(apps)) => apps.clone(),
        Some(_) => return Err(refuse("/apps", "must be an array".to_owned())),
    };
    // The whole manifest is checked before any app is read: a schema error anywhere
    // refuses the plugin, as in ChatOS.
    let mut shapes = Vec::new();
    for (i, app) in apps.iter().enumerate() {
        shapes.push(app_shape(app, &format!("/apps/{i}"))?);
    }
    for (i, shape) in shapes.into_iter().enumerate() {
        let at = format!("/apps/{i}");
        if plugin.apps.iter().any(|a| a.id == shape.id) {
            plugin.problems.push(refuse(&at, format!("duplicate app id `{}`: this app is left out", shape.id)));
            continue;
        }
        if let Err(why) = inside(dir, &shape.entry) {
            plugin.problems.push(refuse(&format!("{at}/entry"), format!("the entry {why}: this app is left out")));
            continue;
        }
        if let Some(compact) = &shape.compact
            && let Err(why) = inside(dir, compact)
        {
            plugin.problems.push(refuse(&format!("{at}/entry/compact"), format!("the compact entry {why}")));
        }
        let (app, problems) = read_ai(&plugin, shape, &at)?;
        plugin.problems.extend(problems);
        plugin.apps.push(app);
    }
    Ok(plugin)
}

/// What an app's manifest entry says, checked for shape.
struct Shape {
    id: String,
    name: String,
    description: String,
    entry: String,
    compact: Option<String>,
    ai: Map<String, Value>,
    config: Option<String>,
}

fn app_shape(app: &Value, at: &str) -> Result<Shape, SchemaError> {
    let refuse = |pointer: String, message: &str| SchemaError { pointer, message: message.to_owned() };
    let Value::Object(app) = app else { return Err(refuse(at.to_owned(), "an app must be an object")) };
    let id = required(app, "id", at)?;
    let name = required(app, "name", at)?;
    let description = optional(app, "description", at)?.unwrap_or_default();
    let module_path = |value: &Value, at: String| -> Result<String, SchemaError> {
        match value {
            Value::String(path) if !path.trim().is_empty() => Ok(path.trim().to_owned()),
            Value::Object(entry) => {
                if let Some(kind) = entry.get("type")
                    && kind.as_str().map(str::trim) != Some("module")
                {
                    return Err(refuse(format!("{at}/type"), "must be `module`"));
                }
                required(entry, "path", &at)
            }
            _ => Err(refuse(at, "must be a module path or `{\"type\": \"module\", \"path\": …}`")),
        }
    };
    let entry_value = app.get("entry").ok_or_else(|| refuse(format!("{at}/entry"), "is required"))?;
    let entry = module_path(entry_value, format!("{at}/entry"))?;
    let compact = match entry_value.get("compact") {
        None | Some(Value::Null) => None,
        Some(compact) => Some(module_path(compact, format!("{at}/entry/compact"))?),
    };
    let (ai, config) = match app.get("ai") {
        None | Some(Value::Null) => (Map::new(), None),
        Some(Value::String(path)) if !path.trim().is_empty() => (Map::new(), Some(path.trim().to_owned())),
        Some(Value::Object(ai)) => {
            let config = optional(ai, "config", &format!("{at}/ai"))?;
            (ai.clone(), config)
        }
        Some(_) => return Err(refuse(format!("{at}/ai"), "must be an object or the path of an AI config file")),
    };
    check_ai_shape(&ai, &format!("{at}/ai"))?;
    Ok(Shape { id, name, description, entry, compact, ai, config })
}

/// The shape rules of an `ai` object (inline or from a config file).
fn check_ai_shape(ai: &Map<String, Value>, at: &str) -> Result<(), SchemaError> {
    let refuse = |pointer: String, message: &str| SchemaError { pointer, message: message.to_owned() };
    for key in ["mcpServers", "prompts"] {
        choice(ai.get(key), &format!("{at}/{key}"))?;
    }
    if let Some(mcp) = ai.get("mcp").filter(|v| !v.is_null()) {
        let Value::Object(mcp) = mcp else { return Err(refuse(format!("{at}/mcp"), "must be an object")) };
        let mcp_at = format!("{at}/mcp");
        let url = optional(mcp, "url", &mcp_at)?;
        let entry = optional(mcp, "entry", &mcp_at)?;
        if url.is_none() && entry.is_none() {
            return Err(refuse(mcp_at, "ai.mcp requires url or entry"));
        }
        optional(mcp, "command", &mcp_at)?;
        strings(mcp.get("args"), &format!("{mcp_at}/args"))?;
        for flag in ["allowMain", "allowSub", "enabled"] {
            if mcp.get(flag).is_some_and(|v| !v.is_boolean() && !v.is_null()) {
                return Err(refuse(format!("{mcp_at}/{flag}"), "must be true or false"));
            }
        }
        if mcp.get("callMeta").is_some_and(|v| !v.is_object() && !v.is_null()) {
            return Err(refuse(format!("{mcp_at}/callMeta"), "must be an object"));
        }
    }
    match ai.get("mcpPrompt") {
        None | Some(Value::Null) => {}
        Some(Value::String(path)) if !path.trim().is_empty() => {}
        Some(Value::Object(prompt)) => {
            let prompt_at = format!("{at}/mcpPrompt");
            optional(prompt, "title", &prompt_at)?;
            let mut any = false;
            for language in ["zh", "en"] {
                match prompt.get(language) {
                    None | Some(Value::Null) => {}
                    Some(Value::String(path)) if !path.trim().is_empty() => any = true,
                    Some(Value::Object(source)) => {
                        let source_at = format!("{prompt_at}/{language}");
                        let path = optional(source, "path", &source_at)?;
                        let content = optional(source, "content", &source_at)?;
                        if path.is_none() && content.is_none() {
                            return Err(refuse(source_at, "ai prompt source requires path or content"));
                        }
                        any = true;
                    }
                    Some(_) => {
                        return Err(refuse(format!("{prompt_at}/{language}"), "must be a path or {path, content}"));
                    }
                }
            }
            if !any {
                return Err(refuse(prompt_at, "ai.mcpPrompt requires zh or en"));
            }
        }
        Some(_) => return Err(refuse(format!("{at}/mcpPrompt"), "must be a path or {title, zh, en}")),
    }
    Ok(())
}

/// Reads an app's AI contributions: the `ai.config` file merged under the inline `ai`
/// (inline wins per top-level key), its server, prompts and exposure lists.
fn read_ai(plugin: &Plugin, shape: Shape, at: &str) -> Result<(App, Vec<SchemaError>), SchemaError> {
    let mut problems = Vec::new();
    let mut problem = |pointer: String, message: String| problems.push(SchemaError { pointer, message });
    let mut file_ai = Map::new();
    if let Some(config) = &shape.config {
        match read_ai_config(&plugin.dir, config) {
            Ok(ai) => file_ai = ai,
            Err(why) => problem(format!("{at}/ai/config"), format!("the AI config file is ignored: {why}")),
        }
    }
    let mut ai = file_ai.clone();
    ai.extend(shape.ai.clone().into_iter().filter(|(k, _)| k != "config"));
    let file_choice = |key: &str| choice(file_ai.get(key), "").ok().flatten();
    let servers_exposed =
        resolve_exposure(choice(shape.ai.get("mcpServers"), "")?.as_ref(), file_choice("mcpServers").as_ref(), None);
    let prompts_exposed =
        resolve_exposure(choice(shape.ai.get("prompts"), "")?.as_ref(), file_choice("prompts").as_ref(), None);
    let mut app = App {
        id: shape.id,
        name: shape.name,
        description: shape.description,
        server: None,
        prompts: Vec::new(),
        servers_exposed,
        prompts_exposed,
    };
    if let Some(Value::Object(mcp)) = ai.get("mcp").filter(|mcp| mcp.get("enabled") != Some(&Value::Bool(false))) {
        match server(&plugin.dir, mcp) {
            Ok((server, warning)) => {
                if let Some(why) = warning {
                    problem(format!("{at}/ai/mcp/entry"), why);
                }
                app.server = Some(server);
            }
            Err((field, why)) => problem(format!("{at}/ai/mcp/{field}"), format!("{why}: this server is left out")),
        }
    }
    let base = normalize(&format!("{}.{}", plugin.id, app.id));
    let default_title = format!("{} MCP Prompt", app.name);
    match ai.get("mcpPrompt") {
        Some(Value::String(path)) => match read_prompt_file(&plugin.dir, path) {
            Ok(text) => app.prompts.push(AppPrompt { name: format!("mcp_{base}"), title: default_title, text }),
            Err(why) => problem(format!("{at}/ai/mcpPrompt"), format!("this prompt is left out: {why}")),
        },
        Some(Value::Object(prompt)) => {
            let title = prompt
                .get("title")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map_or(default_title, str::to_owned);
            for (language, suffix) in [("zh", ""), ("en", "__en")] {
                let text = match prompt.get(language) {
                    Some(Value::String(path)) => read_prompt_file(&plugin.dir, path),
                    Some(Value::Object(source)) => {
                        match source.get("content").and_then(Value::as_str).map(str::trim).filter(|c| !c.is_empty()) {
                            Some(content) => Ok(content.to_owned()),
                            None => source
                                .get("path")
                                .and_then(Value::as_str)
                                .map_or(Err(AiFileError::NoPath), |p| read_prompt_file(&plugin.dir, p)),
                        }
                    }
                    _ => continue,
                };
                match text {
                    Ok(text) => {
                        app.prompts.push(AppPrompt { name: format!("mcp_{base}{suffix}"), title: title.clone(), text })
                    }
                    Err(why) => problem(format!("{at}/ai/mcpPrompt/{language}"), format!("left out: {why}")),
                }
            }
        }
        _ => {}
    }
    Ok((app, problems))
}

/// An app's server from its `ai.mcp`; `Err` names the field at fault. A missing entry
/// file is a warning, not a refusal (the server fails when started, as in ChatOS).
fn server(dir: &Path, mcp: &Map<String, Value>) -> Result<(AppServer, Option<String>), (&'static str, String)> {
    let text = |key: &str| mcp.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let flag = |key: &str| mcp.get(key).and_then(Value::as_bool).unwrap_or(true);
    let mut warning = None;
    let target = if let Some(url) = text("url") {
        target_of_url(url, mcp.get("auth")).map_err(|why| ("url", why.to_string()))?
    } else {
        let entry = text("entry").unwrap_or_default();
        let path = match inside(dir, entry) {
            Ok(path) => path,
            Err(why @ (NotInside::Missing(_) | NotInside::NotAFile(_))) => {
                warning = Some(format!("the entry {why}: the server will fail to start"));
                dir.join(entry)
            }
            Err(why) => return Err(("entry", format!("the entry {why}"))),
        };
        let mut argv = vec![text("command").unwrap_or(DEFAULT_COMMAND).to_owned(), path.to_string_lossy().into_owned()];
        argv.extend(strings(mcp.get("args"), "").unwrap_or_default());
        Target::Command(argv)
    };
    let server = AppServer {
        target,
        call_meta: mcp.get("callMeta").filter(|v| v.is_object()).cloned(),
        allow_main: flag("allowMain"),
        allow_sub: flag("allowSub"),
        description: text("description").unwrap_or_default().to_owned(),
    };
    Ok((server, warning))
}

/// A URL of `ai.mcp`: `http(s)://` (plain `http` only to this machine) or `cmd://` (a
/// command line, split as a shell would).
fn target_of_url(url: &str, auth: Option<&Value>) -> Result<Target, BadServerUrl> {
    if let Some(line) = url.strip_prefix("cmd://") {
        let argv = shlex::split(line).filter(|a| !a.is_empty()).ok_or(BadServerUrl::NoCommandLine)?;
        return Ok(Target::Command(argv));
    }
    let lower = url.to_ascii_lowercase();
    let loopback = ["http://127.", "http://localhost:", "http://localhost/", "http://[::1]"];
    if !lower.starts_with("https://") && !loopback.iter().any(|l| lower.starts_with(l)) {
        return Err(BadServerUrl::Scheme);
    }
    let mut headers = BTreeMap::new();
    if let Some(Value::Object(auth)) = auth {
        if let Some(Value::Object(extra)) = auth.get("headers") {
            headers.extend(extra.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))));
        }
        if let Some(token) = auth.get("token").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            headers.insert("Authorization".to_owned(), format!("Bearer {token}"));
        } else if let Some(Value::Object(basic)) = auth.get("basic") {
            let part = |k: &str| basic.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            let pair = format!("{}:{}", part("username"), part("password"));
            headers
                .insert("Authorization".to_owned(), format!("Basic {}", data_encoding::BASE64.encode(pair.as_bytes())));
        }
    }
    Ok(Target::Url(url.to_owned(), headers))
}

/// Reads an `ai.config` file (JSON for `.json`, YAML for `.yaml`/`.yml`, else by its first
/// character) into an `ai` object, checked as `plugin.json`'s inline one is.
fn read_ai_config(dir: &Path, path: &str) -> Result<Map<String, Value>, AiFileError> {
    let file = inside(dir, path)?;
    let bytes = read_capped(&file, MAX_AI_FILE_BYTES)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| AiFileError::ConfigNotUtf8)?;
    let extension = file.extension().and_then(|e| e.to_str()).unwrap_or_default().to_ascii_lowercase();
    let json = match extension.as_str() {
        "json" => true,
        "yaml" | "yml" => false,
        _ => text.trim_start().starts_with(['{', '[']),
    };
    let value: Value = if json {
        serde_json::from_str(text).map_err(AiFileError::Json)?
    } else {
        serde_norway::from_str(text).map_err(AiFileError::Yaml)?
    };
    let Value::Object(mut ai) = value else { return Err(AiFileError::NotAnObject) };
    ai.remove("config");
    check_ai_shape(&ai, "").map_err(|e| AiFileError::Shape { pointer: e.pointer, message: e.message })?;
    Ok(ai)
}

/// A prompt file's text, trimmed.
fn read_prompt_file(dir: &Path, path: &str) -> Result<String, AiFileError> {
    let bytes = read_capped(&inside(dir, path)?, MAX_AI_FILE_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|_| AiFileError::PromptNotUtf8(path.to_owned()))?;
    let text = text.trim();
    if text.is_empty() {
        return Err(AiFileError::PromptEmpty(path.to_owned()));
    }
    Ok(text.to_owned())
}

/// `path` (relative to `dir`, or absolute) as a regular file inside `dir` once symbolic
/// links are resolved. `Err` says why not, as a phrase after "the entry".
///
/// # Errors
/// Outside the folder, missing, or not a regular file.
pub fn inside(dir: &Path, path: &str) -> Result<PathBuf, NotInside> {
    let shown = crate::text::clip(path, 120);
    let written = Path::new(path.trim());
    let joined = if written.is_absolute() { written.to_owned() } else { dir.join(written) };
    let mut lexical = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    if lexical == dir || !lexical.starts_with(dir) {
        return Err(NotInside::Outside(shown));
    }
    let real_dir = dir.canonicalize().map_err(|e| NotInside::Unchecked(e.to_string()))?;
    let real = match lexical.canonicalize() {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(NotInside::Missing(shown)),
        Err(e) => return Err(NotInside::Unreadable { path: shown, error: e.to_string() }),
    };
    if !real.starts_with(&real_dir) {
        return Err(NotInside::LinksOutside(shown));
    }
    if !real.is_file() {
        return Err(NotInside::NotAFile(shown));
    }
    Ok(lexical)
}

/// A file's bytes, refused unread beyond `limit`.
fn read_capped(path: &Path, limit: u64) -> Result<Vec<u8>, ReadCappedError> {
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let unreadable = |e: std::io::Error| ReadCappedError::Unreadable { name: name.clone(), error: e.to_string() };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(unreadable)?;
    if bytes.len() as u64 > limit {
        return Err(ReadCappedError::TooLarge { name, kib: limit / 1024 });
    }
    Ok(bytes)
}

/// Why a path a plugin names is not a regular file inside its folder (see [`inside`]),
/// worded as a phrase after "the entry"; paths are clipped to 120 characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum NotInside {
    /// The path leaves the folder (or is the folder itself).
    #[error("`{0}` must be within the plugin directory")]
    Outside(String),
    /// The folder itself could not be resolved.
    #[error("cannot be checked: the plugin directory: {0}")]
    Unchecked(String),
    /// Nothing is there.
    #[error("does not exist: `{0}`")]
    Missing(String),
    /// The path could not be resolved.
    #[error("cannot be read: `{path}`: {error}")]
    Unreadable { path: String, error: String },
    /// A symbolic link on the way leads out of the folder.
    #[error("`{0}` must be within the plugin directory (it links outside)")]
    LinksOutside(String),
    /// Something other than a regular file is there.
    #[error("is not a file: `{0}`")]
    NotAFile(String),
}

/// Why a plugin's `backend.entry` cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("backend.entry {0}")]
pub struct BadBackendEntry(pub NotInside);

/// Why a file was refused unread or could not be read (see `read_capped`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum ReadCappedError {
    /// Opening or reading failed.
    #[error("cannot read {name}: {error}")]
    Unreadable { name: String, error: String },
    /// Larger than the limit, in KiB.
    #[error("{name} is larger than {kib} KiB")]
    TooLarge { name: String, kib: u64 },
}

/// Why an `ai.mcp.url` cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum BadServerUrl {
    #[error("a `cmd://` URL must hold a command line")]
    NoCommandLine,
    #[error("must be an `https://` URL (plain `http://` only to this machine) or `cmd://`")]
    Scheme,
}

/// Why an `ai.config` or prompt file is ignored.
#[derive(Debug, thiserror::Error)]
enum AiFileError {
    #[error(transparent)]
    NotInside(#[from] NotInside),
    #[error(transparent)]
    Read(#[from] ReadCappedError),
    #[error("it is not UTF-8 text")]
    ConfigNotUtf8,
    #[error("it is not valid JSON: {0}")]
    Json(serde_json::Error),
    #[error("it is not valid YAML: {0}")]
    Yaml(serde_norway::Error),
    #[error("it must hold an object")]
    NotAnObject,
    #[error("{pointer}: {message}")]
    Shape { pointer: String, message: String },
    #[error("`{0}` is not UTF-8 text")]
    PromptNotUtf8(String),
    #[error("`{0}` is empty")]
    PromptEmpty(String),
    #[error("no path")]
    NoPath,
}

/// A required non-empty string (trimmed).
fn required(map: &Map<String, Value>, key: &str, at: &str) -> Result<String, SchemaError> {
    optional(map, key, at)?.ok_or_else(|| SchemaError { pointer: format!("{at}/{key}"), message: "is required".into() })
}

/// An optional string (trimmed; empty counts as absent).
fn optional(map: &Map<String, Value>, key: &str, at: &str) -> Result<Option<String>, SchemaError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
        Some(_) => Err(SchemaError { pointer: format!("{at}/{key}"), message: "must be a string".to_owned() }),
    }
}

/// An optional array of strings.
fn strings(value: Option<&Value>, at: &str) -> Result<Vec<String>, SchemaError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            items.iter().map(|item| item.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>().ok_or_else(|| {
                SchemaError { pointer: at.to_owned(), message: "must be an array of strings".to_owned() }
            })
        }
        Some(_) => Err(SchemaError { pointer: at.to_owned(), message: "must be an array of strings".to_owned() }),
    }
}

/// An exposure value: `true`, `false` or a non-empty array of non-empty names (trimmed,
/// without repeats).
fn choice(value: Option<&Value>, at: &str) -> Result<Option<Choice>, SchemaError> {
    let wrong = || SchemaError {
        pointer: at.to_owned(),
        message: "must be true, false or a non-empty array of non-empty names".to_owned(),
    };
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(Choice::Flag(*flag))),
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut names: Vec<String> = Vec::new();
            for item in items {
                let name = item.as_str().map(str::trim).filter(|n| !n.is_empty()).ok_or_else(wrong)?;
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_owned());
                }
            }
            Ok(Some(Choice::List(names)))
        }
        Some(_) => Err(wrong()),
    }
}

#[cfg(test)]
mod tests;
