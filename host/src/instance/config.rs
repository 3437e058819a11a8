//! The instance's root `butler.json`, validated against `spec/instance.schema.json`.
//!
//! The host keeps the whole document as read, so fields it does not know survive any
//! rewrite; the typed fields below are the ones the host acts on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::{Map, Value};

pub use butler_faculty::settings::{FacultySettings, Grant};

use super::InstanceError;
use crate::json;
use crate::validation::SchemaValidator;

/// Root config files are small; refuse anything larger unread.
pub(crate) const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

const INSTANCE_SCHEMA_TEXT: &str = include_str!("../../../spec/instance.schema.json");

static INSTANCE_SCHEMA: LazyLock<SchemaValidator> = LazyLock::new(|| {
    SchemaValidator::compile("spec/instance.schema.json", INSTANCE_SCHEMA_TEXT)
        .expect("the bundled instance schema compiles (covered by the instance tests)")
});

/// The schema's `folder` properties and their defaults: which keys of the root config
/// name folders of the instance. The host knows them from the schema, not by name.
static FOLDER_DEFAULTS: LazyLock<Vec<(String, String)>> = LazyLock::new(|| {
    let schema: Value = serde_json::from_str(INSTANCE_SCHEMA_TEXT).unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else { return Vec::new() };
    properties
        .iter()
        .filter(|(_, p)| p["$ref"] == "#/$defs/folder")
        .filter_map(|(key, p)| Some((key.clone(), p["default"].as_str()?.to_owned())))
        .collect()
});

/// The root config: typed fields the host uses, plus the whole document.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootConfig {
    /// Folders scanned for extensions, in priority order.
    #[serde(default = "default_scan_roots")]
    pub scan_roots: Vec<String>,
    /// The instance's named folders (the schema's `folder` properties: key → relative
    /// path), the configured value or the schema's default.
    #[serde(skip)]
    pub folders: BTreeMap<String, String>,
    /// `stateDir`: the folder, relative to the instance root, where the host keeps its own
    /// state (default `.butler`).
    #[serde(default = "default_state_dir")]
    pub state_dir: String,
    /// Interpreter for commands whose `argv[0]` is `python`.
    pub python: Option<String>,
    /// Interpreter for commands whose `argv[0]` is `bun`.
    pub bun: Option<String>,
    /// Per-faculty sandbox settings, by faculty id.
    #[serde(default)]
    pub faculties: BTreeMap<String, FacultySettings>,
    /// `pipeline`: which faculty serves each action prefix, over what the faculties declare.
    #[serde(default)]
    pub pipeline: PipelineConfig,
    /// The MCP hub and API access.
    #[serde(default)]
    pub mcp: McpConfig,
    /// What tells the owner something awaits them.
    #[serde(default)]
    pub notification: NotificationConfig,
    /// The owner's agent, which the host runs for delegations and automations.
    #[serde(default)]
    pub agent: AgentConfig,
    /// What of the compiled context an agent session is given.
    #[serde(default)]
    pub inject: InjectConfig,
    /// The host's scheduled jobs.
    #[serde(default)]
    pub automations: AutomationsConfig,
    /// Which session turns the collector takes.
    #[serde(default)]
    pub collector: CollectorConfig,
    /// The document as read, unknown fields included.
    #[serde(skip)]
    pub raw: Map<String, Value>,
}

/// `notification`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct NotificationConfig {
    /// Whether notifications are sent (default: when there is a command).
    pub enabled: Option<bool>,
    /// The command that receives each notification as JSON on its stdin.
    pub command: Option<butler_catalog::manifest::CommandLine>,
}

impl NotificationConfig {
    /// The command to run, when notifications are on.
    #[must_use]
    pub fn active(&self) -> Option<&butler_catalog::manifest::CommandLine> {
        self.command.as_ref().filter(|_| self.enabled != Some(false))
    }
}

/// The root config's `collector`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollectorConfig {
    /// Whether turns are collected at all (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Only turns of these workspaces (none given: any).
    #[serde(default)]
    pub workspaces: Vec<String>,
    /// Turns of these presets are not collected.
    #[serde(default = "default_excluded_presets")]
    pub exclude_presets: Vec<String>,
    /// Whether sub-agents' turns are collected.
    #[serde(default)]
    pub include_subagents: bool,
    /// How long after the last turn arrived the pending ones are handed over.
    #[serde(default = "default_debounce_ms")]
    pub debounce_ms: u64,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            workspaces: Vec::new(),
            exclude_presets: default_excluded_presets(),
            include_subagents: false,
            debounce_ms: default_debounce_ms(),
        }
    }
}

fn default_excluded_presets() -> Vec<String> {
    vec!["butler".to_owned()]
}

fn default_debounce_ms() -> u64 {
    1000
}

/// The root config's `automations`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutomationsConfig {
    /// The time zone schedules are read in (an IANA name).
    pub time_zone: Option<String>,
    /// A schedule other than the default for a host job, by title.
    #[serde(default)]
    pub schedules: BTreeMap<String, String>,
}

impl AutomationsConfig {
    /// Every problem the host would refuse it for: a time zone that is not an IANA name, a
    /// schedule that is not a cron expression — each with its pointer.
    #[must_use]
    pub fn problems(&self) -> Vec<crate::validation::SchemaError> {
        let mut problems = Vec::new();
        if let Some(zone) = &self.time_zone
            && zone.parse::<chrono_tz::Tz>().is_err()
        {
            problems.push(crate::validation::SchemaError {
                pointer: "/automations/timeZone".to_owned(),
                message: format!("`{zone}` is not a time zone (an IANA name, such as Asia/Shanghai)"),
            });
        }
        for (title, schedule) in &self.schedules {
            if let Err(e) = cron(schedule) {
                let title = title.replace('~', "~0").replace('/', "~1");
                problems.push(crate::validation::SchemaError {
                    pointer: format!("/automations/schedules/{title}"),
                    message: format!("`{schedule}` is not a cron schedule: {e}"),
                });
            }
        }
        problems
    }
}

/// `schedule` read as the host reads cron schedules: five fields, or six with seconds first.
///
/// # Errors
/// The parser's error.
pub fn cron(schedule: &str) -> Result<croner::Cron, croner::errors::CronError> {
    croner::parser::CronParser::builder().seconds(croner::parser::Seconds::Optional).build().parse(schedule)
}

/// `agent`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    /// The agent program, run once per agent session with its task as JSON on stdin.
    pub command: Option<butler_catalog::manifest::CommandLine>,
    /// How long an automation's agent session may run (a delegation has its own
    /// `timeoutSec`); default 900.
    pub timeout_sec: Option<u64>,
}

/// `inject`: the compiled context given to agent sessions.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InjectConfig {
    /// Whether sessions are given the context at all (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// At most this many characters of it (default 8000).
    #[serde(default = "default_inject_chars")]
    pub max_chars: usize,
}

impl Default for InjectConfig {
    fn default() -> Self {
        Self { enabled: true, max_chars: default_inject_chars() }
    }
}

fn yes() -> bool {
    true
}

fn default_inject_chars() -> usize {
    8000
}

/// `mcp`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct McpConfig {
    /// Who must send a credential.
    #[serde(default)]
    pub auth: AuthMode,
    /// A provider that ran this many seconds without a call is stopped (it starts again
    /// on the next one).
    #[serde(rename = "idleSec", default = "default_idle_sec")]
    pub idle_sec: u64,
    /// Named profiles, each served at `/mcp/p/<name>`.
    #[serde(default)]
    pub profiles: std::collections::BTreeMap<String, ProfileConfig>,
    /// Whether providers' tools are held until the owner approves their definitions.
    #[serde(default)]
    pub quarantine: bool,
    /// A session that sent nothing for this many seconds (no stream open) ends.
    #[serde(rename = "sessionIdleSec", default = "default_session_idle_sec")]
    pub session_idle_sec: u64,
    /// Providers (by extension id) spoken to with the 2025 revisions' `initialize` at once,
    /// never asked `server/discover`.
    #[serde(rename = "legacyProviders", default)]
    pub legacy_providers: std::collections::BTreeSet<String>,
    /// Whether the activity log keeps each request's params and answer (credentials
    /// redacted, each side cut to 4 KiB).
    #[serde(rename = "logPayloads", default)]
    pub log_payloads: bool,
    /// How the main endpoint lists its tools: all of them (default), or only the search
    /// tools.
    #[serde(default)]
    pub exposure: butler_mcp::Exposure,
    /// Whether the main endpoint offers `butler__run_code` (code mode).
    #[serde(rename = "codeMode", default)]
    pub code_mode: bool,
    /// The host variables each MCP server's `headers` and `env` may read, by server id (see
    /// [`butler_mcp::host_env`]).
    #[serde(rename = "allowEnv", default)]
    pub allow_env: std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
}

fn default_session_idle_sec() -> u64 {
    1800
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            auth: AuthMode::default(),
            idle_sec: default_idle_sec(),
            profiles: std::collections::BTreeMap::new(),
            quarantine: false,
            session_idle_sec: default_session_idle_sec(),
            legacy_providers: std::collections::BTreeSet::new(),
            log_payloads: false,
            exposure: butler_mcp::Exposure::All,
            code_mode: false,
            allow_env: std::collections::BTreeMap::new(),
        }
    }
}

impl McpConfig {
    /// Those of `names` (host variables) that `allowEnv` does not give server `id`.
    #[must_use]
    pub fn variables_not_given(&self, id: &str, names: impl IntoIterator<Item = String>) -> Vec<String> {
        let given = self.allow_env.get(id);
        names.into_iter().filter(|name| !given.is_some_and(|g| g.contains(name))).collect()
    }

    /// The profiles, checked.
    ///
    /// # Errors
    /// The first profile declared wrongly.
    pub fn checked_profiles(
        &self,
    ) -> Result<std::collections::BTreeMap<String, std::sync::Arc<butler_mcp::Profile>>, butler_mcp::view::ProfileError>
    {
        self.profiles
            .iter()
            .map(|(name, config)| {
                let spec = butler_mcp::ProfileSpec {
                    providers: config.providers.clone(),
                    include: config.include.clone(),
                    exclude: config.exclude.clone(),
                    tags: config.tags.clone(),
                    prefixed: config.prefix,
                    host_tools: config.host_tools,
                    require_token: config.require_token,
                    prompts: butler_mcp::Prompts::OfProviders,
                    exposure: config.exposure,
                    find_tools: config.prefix,
                    code_mode: config.code_mode,
                    ..butler_mcp::ProfileSpec::default()
                };
                butler_mcp::Profile::new(name, spec).map(|p| (name.clone(), std::sync::Arc::new(p)))
            })
            .collect()
    }
}

/// `mcp.profiles.<name>`: what a client of that profile's endpoint sees.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileConfig {
    /// The providers (extension ids) it offers; absent: all.
    #[serde(default)]
    pub providers: Option<Vec<String>>,
    /// Globs over public tool names; a tool is offered when it matches one (none: all).
    #[serde(default)]
    pub include: Vec<String>,
    /// Globs over public tool names; a tool that matches one is not offered.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Tags: a provider's tool is offered only when it carries one (none: any tool).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Whether names keep their `<namespace>__` prefix (default); `false` only over one
    /// provider.
    #[serde(default = "default_prefix")]
    pub prefix: bool,
    /// Whether the faculties' tools and the compiled context are offered too.
    #[serde(rename = "hostTools", default)]
    pub host_tools: bool,
    /// Whether a client must send a token made for this profile.
    #[serde(rename = "requireToken", default)]
    pub require_token: bool,
    /// How it lists its tools: all of them (default), or only the search tools.
    #[serde(default)]
    pub exposure: butler_mcp::Exposure,
    /// Whether it offers `butler__run_code` (code mode).
    #[serde(rename = "codeMode", default)]
    pub code_mode: bool,
}

fn default_prefix() -> bool {
    true
}

fn default_idle_sec() -> u64 {
    600
}

/// The root config's `mcp.auth`: who must send a credential (see
/// `crate::http::credential`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// A credential only where the connection's user could not be verified (the default).
    #[default]
    Peer,
    /// A credential on every API and MCP request, whoever connects.
    Token,
}

/// `pipeline`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PipelineConfig {
    /// Action prefix → faculty id, over the defaults.
    #[serde(default)]
    pub routes: BTreeMap<String, String>,
}

fn default_scan_roots() -> Vec<String> {
    ["tools", "services", "faculties"].map(str::to_owned).to_vec()
}
fn default_state_dir() -> String {
    ".butler".to_owned()
}

impl RootConfig {
    /// Reads and validates the root config at `path`.
    ///
    /// # Errors
    /// [`InstanceError`] naming the file, and for schema violations every field and reason.
    pub fn load(path: &Path) -> Result<Self, InstanceError> {
        let value = json::read_file(path, MAX_CONFIG_BYTES)
            .map_err(|e| InstanceError::ConfigNotJson { path: path.to_owned(), reason: e.message })?
            .ok_or_else(|| InstanceError::NotAnInstance { path: path.parent().unwrap_or(path).to_owned() })?;
        Self::from_value(path, value)
    }

    /// Validates an already-parsed document.
    ///
    /// # Errors
    /// [`InstanceError::InvalidConfig`] with every violation.
    pub fn from_value(path: &Path, value: Value) -> Result<Self, InstanceError> {
        let errors = INSTANCE_SCHEMA.errors(&value);
        if !errors.is_empty() {
            return Err(InstanceError::InvalidConfig { path: path.to_owned(), errors });
        }
        let Value::Object(raw) = value else {
            return Err(InstanceError::ConfigNotJson { path: path.to_owned(), reason: "not a JSON object".to_owned() });
        };
        let mut config: Self =
            json::typed(Value::Object(raw.clone())).map_err(|(pointer, message)| InstanceError::InvalidConfig {
                path: path.to_owned(),
                errors: vec![crate::validation::SchemaError { pointer, message }],
            })?;
        config.folders = FOLDER_DEFAULTS
            .iter()
            .map(|(key, default)| {
                let value = raw.get(key).and_then(Value::as_str).unwrap_or(default);
                (key.clone(), value.to_owned())
            })
            .collect();
        config.raw = raw;
        Ok(config)
    }

    /// `relative` resolved against the directory of the root config.
    #[must_use]
    pub fn resolve(root: &Path, relative: &str) -> PathBuf {
        let joined = root.join(relative);
        // `root.join(".")` keeps a trailing `/.`; normalise the common cases for display.
        if relative == "." { root.to_owned() } else { joined }
    }

    /// The state folder a root config at `root` names, read leniently — only its
    /// `stateDir`, the default when it has none or the file is not JSON — for the CLI to
    /// reach a running host while the file is invalid (the host keeps its last good one).
    #[must_use]
    pub fn state_dir_of_unchecked(root: &Path) -> PathBuf {
        let named = std::fs::read(root.join(butler_catalog::scan::MANIFEST_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .and_then(|config| config.get("stateDir").and_then(serde_json::Value::as_str).map(str::to_owned));
        Self::resolve(root, &named.unwrap_or_else(default_state_dir))
    }
}
