//! Typed view of an extension manifest (`butler.json`, `spec/butler.schema.json`).
//!
//! Values are deserialized only after the schema accepted the document, so these types
//! mirror the schema and carry its defaults; they never decide validity themselves.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What an extension is (`kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An extension tool the owner or an AI operates; shown on the console's tools board.
    Tool,
    /// A hosted external process; shown on the services board.
    Service,
    /// One of the host's own capabilities; shown in the Butler view.
    Faculty,
}

impl Kind {
    /// The manifest spelling of this kind.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Service => "service",
            Self::Faculty => "faculty",
        }
    }
}

/// A whole `butler.json` as read and validated against `spec/butler.schema.json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 1.
    pub schema_version: u32,
    /// The extension's kind.
    pub kind: Kind,
    /// Stable, globally unique id.
    pub id: String,
    /// `name`: shown in the console and lists (not empty).
    pub name: String,
    /// `description`: what it is, for people, if any.
    pub description: Option<String>,
    /// Icon spec as written (see [`super::icon`]).
    pub icon: Option<String>,
    /// `version`: raised when the extension's interface or meaning changes (at least 1,
    /// default 1).
    #[serde(default = "one")]
    pub version: u32,
    /// `low` folds the item into the low-frequency area.
    pub frequency: Option<String>,
    /// The hosted-process block.
    pub hosted: Option<Hosted>,
    /// `health`: how the supervisor probes it (without one, a port check when `hosted.port`
    /// is set).
    pub health: Option<Health>,
    /// `panelUrl` (tools only): the page the console's panel embeds in an iframe; the host
    /// does not proxy it.
    pub panel_url: Option<String>,
    /// `panelSize` (tools only): the panel's preferred size; the console shrinks it to fit.
    pub panel_size: Option<PanelSize>,
    /// `actions` (tools only): the buttons on the tool's console row.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// `reports` (faculties only): what the Butler view shows.
    #[serde(default)]
    pub reports: Vec<Report>,
    /// `commands` (faculties only): what the host, automations and clients may run.
    #[serde(default)]
    pub commands: Vec<Command>,
    /// `delegations` (tools and services): judgement steps handed to an agent session, which
    /// only proposes; the caller adopts the result.
    #[serde(default)]
    pub delegations: Vec<Delegation>,
    /// stdio MCP provider block.
    pub mcp: Option<Mcp>,
    /// The pipeline action prefixes a faculty serves (`journal` for `journal.intake`, …);
    /// the root config's `pipeline.routes` may map a prefix elsewhere.
    #[serde(default)]
    pub serves: Vec<String>,
    /// A faculty's scheduled jobs, run as agent sessions once the owner registers them.
    #[serde(default)]
    pub automations: Vec<AutomationDecl>,
    /// Folders of a faculty's writable grants, by guest path (`/self/journal`), that hold
    /// the owner's private records: the host keeps them owner-only.
    #[serde(default)]
    pub private_folders: Vec<String>,
}

/// `automations[]`: a job a faculty declares for the host's scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutomationDecl {
    /// Its title, unique, ending in ` · Butler`.
    pub title: String,
    /// A cron expression (five fields, or six with seconds first).
    pub schedule: String,
    /// What its agent is told.
    pub instructions: String,
}

fn one() -> u32 {
    1
}

/// `hosted.command`: a shell string or an argv vector.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum CommandLine {
    /// Run through `$SHELL -lic`.
    Shell(String),
    /// Spawned directly.
    Argv(Vec<String>),
}

/// Restart policy after an exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// Never restart.
    Never,
    /// Restart after a non-zero exit or a signal.
    OnFailure,
    /// Restart after any exit.
    Always,
}

/// The hosted-process block.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hosted {
    /// What to run.
    pub command: CommandLine,
    /// Working directory (default: the manifest directory).
    pub cwd: Option<String>,
    /// Environment merged over the host's.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Port the process listens on.
    pub port: Option<u16>,
    /// Entry URL (default `http://127.0.0.1:{port}`).
    pub url: Option<String>,
    /// Local path the console's open button points at.
    pub open_path: Option<String>,
    /// The console group it is listed under.
    pub group: Option<String>,
    /// Start with the host.
    #[serde(default)]
    pub auto_start: bool,
    /// Restart policy; the per-kind default applies when absent.
    pub restart: Option<RestartPolicy>,
}

/// `health`: how the supervisor checks a hosted process (one of `url` or `exec`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// HTTP GET, 2xx is healthy.
    pub url: Option<String>,
    /// Exit 0 is healthy.
    pub exec: Option<Vec<String>>,
    /// Milliseconds between probes (at least 1000; the supervisor's default, 8 s, when absent).
    pub interval_ms: Option<u64>,
}

/// Panel size in CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PanelSize {
    /// Preferred width, 320–2400 (the schema's range).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Preferred height, 240–1600 (the schema's range).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
}

/// How a tool action opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionMode {
    /// iframe panel.
    #[default]
    Panel,
    /// POST the URL at once.
    Post,
    /// Open in a new tab.
    External,
}

/// A tool action button.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// The text on the button.
    pub label: String,
    /// Panel title (default: the label).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The panel page, the POST target or the external link, by `mode`.
    pub url: String,
    /// How it opens (default: a panel).
    #[serde(default)]
    pub mode: ActionMode,
}

/// Shape a report's output must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportShape {
    /// `{status, summary, items?}`.
    #[default]
    Status,
    /// `{items: [{title, at?, preview?}]}`.
    List,
    /// `{markdown}`.
    Markdown,
}

/// `reports[]`: what a faculty's report runs and how its output is shaped.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Report {
    /// Its id within the faculty (`[a-z0-9][a-z0-9-]*`).
    pub id: String,
    /// Shown as the report's title.
    pub name: String,
    /// What produces it: prints JSON of `shape` on stdout.
    pub exec: Vec<String>,
    /// The shape its output must have (default `status`).
    #[serde(default)]
    pub shape: ReportShape,
    /// An advisory cron expression (the schedule may be kept from outside the host).
    pub schedule: Option<String>,
    /// What the host offers through this report (`context`, `review-queue`).
    #[serde(default)]
    pub provides: Option<ReportDoor>,
    /// Files or folders (relative to the instance, `${key}` for an instance folder) whose
    /// change means the report changed: the change feed watches them.
    #[serde(default)]
    pub watch: Vec<String>,
}

/// What a command may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Reads only.
    #[default]
    Read,
    /// Writes instance data.
    Write,
    /// Touches things outside the instance.
    External,
}

/// `commands[]`: what a faculty command runs, who may run it and with what arguments.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Command {
    /// Its id within the faculty (`[a-z0-9][a-z0-9-]*`).
    pub id: String,
    /// What it does, for people (and the MCP tool's default description).
    pub description: Option<String>,
    /// What runs: the argv the declared arguments are appended to.
    pub exec: Vec<String>,
    /// What it may touch.
    #[serde(default)]
    pub effect: Effect,
    /// Arguments callers may pass.
    #[serde(default)]
    pub args: Vec<CommandArg>,
    /// The JSON Schema every call's input is checked against before the command runs.
    #[serde(default)]
    pub input: Option<serde_json::Value>,
    /// A confirming step callers run first: its answer's fields are passed back.
    #[serde(default)]
    pub confirm: Option<Confirm>,
    /// Pipeline actions (`<prefix>.<verb>`) this command may make through `host.call`. A
    /// call takes the store locks of everything it declares before it starts, so declared
    /// nested calls never wait behind another call (see the lock discipline in
    /// `docs/faculties.md`); undeclared ones may fail with `busy` under contention.
    #[serde(default)]
    pub calls: Vec<String>,
    /// The hub's tools this command may call through `butler:hub/tools.call-tool`, as
    /// globs over their public names (`files__*`, `*`). A call reaches a tool only if it
    /// matches one and the endpoint the command was called through offers it.
    #[serde(default, rename = "hubTools")]
    pub hub_tools: Vec<String>,
    /// Only the owner may run it (the CLI's owner token or the console's session), on
    /// every path; never another faculty or an MCP client.
    #[serde(default)]
    pub owner: bool,
    /// Only the operator may run it: the owner through the CLI, over the host's local
    /// socket. Refused on every HTTP path.
    #[serde(default)]
    pub operator: bool,
    /// Only the owner and other faculties (through `host.call`) may call it: no anonymous
    /// client of the pipeline or of a faculty route (for commands whose answers reveal
    /// something about files, such as validity checks).
    #[serde(default)]
    pub private: bool,
    /// How many of its failures with the named codes one caller may get a minute; past
    /// that, the caller's calls are refused until the minute has passed (for commands
    /// whose failures tell something, such as checks that did not pass).
    #[serde(default, rename = "failureLimit")]
    pub failure_limit: Option<CommandFailureLimit>,
    /// The command offered to the hub's clients as an MCP tool.
    #[serde(default)]
    pub mcp: Option<CommandTool>,
    /// The host's door this command serves (`observations`: `POST /observe` and the host's
    /// own observations go to it).
    #[serde(default)]
    pub takes: Option<CommandDoor>,
}

/// `commands[].confirm`: the action a caller runs before this command (showing the owner
/// what they decide on), whose answer's `carry` fields the command then takes back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Confirm {
    /// The confirming action (`<prefix>.<verb>`).
    pub action: String,
    /// The arguments of this command the confirming action takes too.
    #[serde(default = "default_confirm_with")]
    pub with: Vec<String>,
    /// The fields of the confirming action's answer this command takes.
    pub carry: Vec<String>,
}

fn default_confirm_with() -> Vec<String> {
    vec!["id".to_owned()]
}

/// What a command can take on the host's behalf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommandDoor {
    /// Observations (`POST /observe`, the host's own).
    Observations,
    /// Session turns (`POST /sessions/turns`, after the host's collector redacted them).
    SessionTurns,
}

/// What a report can provide on the host's behalf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportDoor {
    /// The owner's compiled context (the MCP context resource and prompt).
    Context,
    /// What awaits the owner's review (the console's Review view and its count).
    ReviewQueue,
}

/// `commands[].mcp`: a faculty command offered as an MCP tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandTool {
    /// The tool's name within its namespace.
    pub tool: String,
    /// The namespace (default: the faculty id, `-` as `_`); the public name is
    /// `<namespace>__<tool>`.
    pub namespace: Option<String>,
    /// What the tool does, for the model (default: the command's description).
    pub description: Option<String>,
    /// The hub endpoints that offer it (default: the main one).
    #[serde(default = "main_endpoint")]
    pub endpoints: Vec<ToolEndpoint>,
    /// The tool's input, as a JSON Schema of its arguments object (default: built from the
    /// command's declared `args`).
    pub input: Option<Value>,
    /// Arguments the host sets whatever the caller sent.
    #[serde(default)]
    pub set: serde_json::Map<String, Value>,
    /// Arguments the host fills when the caller left them out.
    #[serde(default)]
    pub default: serde_json::Map<String, Value>,
    /// The argument (a number of seconds) with which a caller shortens the call's deadline;
    /// the faculty's own timeout stays the longest a call may take.
    #[serde(rename = "timeoutArg")]
    pub timeout_arg: Option<String>,
}

/// Which of the hub's endpoints offers a faculty tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolEndpoint {
    /// `/mcp`, every client's.
    Main,
    /// `/mcp/butler`, the restricted endpoint (no provider tools).
    Butler,
    /// Only the agent sessions the host drives for delegations (`/mcp/s/<session>`), where
    /// a delegation's `tools` name it.
    Agents,
}

fn main_endpoint() -> Vec<ToolEndpoint> {
    vec![ToolEndpoint::Main]
}

impl CommandTool {
    /// The namespace in force for a command of faculty `faculty`.
    #[must_use]
    pub fn effective_namespace(&self, faculty: &str) -> String {
        self.namespace.clone().unwrap_or_else(|| faculty.replace('-', "_"))
    }
}

/// `commands[].failureLimit`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandFailureLimit {
    /// The failure codes counted.
    pub codes: Vec<String>,
    /// How many a caller may get a minute (at least 1).
    #[serde(rename = "perMinute")]
    pub per_minute: std::num::NonZeroU32,
}

/// One declared command argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandArg {
    /// The key in the call's `args` object (`[a-z][a-z0-9-]*`); also the `--<name>` flag.
    pub name: String,
    /// Full-match pattern for its value.
    pub pattern: String,
    /// A call without it is refused.
    #[serde(default)]
    pub required: bool,
    /// Appended as a value rather than `--name value`.
    #[serde(default)]
    pub positional: bool,
    /// Written to standard input instead of the command line.
    #[serde(default)]
    pub stdin: bool,
}

impl CommandArg {
    /// The pattern compiled to match a whole value (`regex` syntax: linear-time matching,
    /// and the crate's default size limit refuses patterns that compile to huge automata).
    ///
    /// # Errors
    /// When the pattern is not a valid regular expression (or compiles too large).
    pub fn compile_pattern(&self) -> Result<regex::Regex, regex::Error> {
        regex::Regex::new(&format!("^(?:{})$", self.pattern))
    }
}

/// How a delegation's result is adopted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Adopted when the session returns it.
    Auto,
    /// Waits for the owner.
    Confirm,
}

/// A judgement step delegated to an agent session.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delegation {
    /// Id, unique within the extension.
    pub id: String,
    /// What the session is told to do; the caller's input follows as data, not instructions.
    pub instructions: String,
    /// Whether the result is adopted at once or waits for the owner.
    pub risk: Risk,
    /// The JSON Schema subset the session's submitted result is checked against.
    pub result: Value,
    /// Tools the session may use.
    pub tools: Option<Vec<String>>,
    /// Seconds the session may take (10–1800, default 300).
    #[serde(default = "default_delegation_timeout")]
    pub timeout_sec: u32,
}

fn default_delegation_timeout() -> u32 {
    300
}

/// The MCP provider block: a process the host starts and speaks to over its stdio
/// (`transport: stdio`, the seed's only kind), or — the host's own extension — a remote
/// server it reaches over HTTP (`transport: http`, with `url` and `headers`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mcp {
    /// `stdio` or `http`.
    pub transport: String,
    /// argv of the provider (`stdio`).
    #[serde(default)]
    pub command: Vec<String>,
    /// Working directory (default: the manifest directory; `stdio`).
    pub cwd: Option<String>,
    /// Environment for the provider (`stdio`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The remote server's URL (`http`).
    pub url: Option<String>,
    /// Headers sent with every request to the remote server, `${VAR}` unexpanded (`http`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Public tool-name prefix (default: the id with `-` → `_`).
    pub namespace: Option<String>,
    /// Per-call limit.
    #[serde(default = "default_mcp_timeout")]
    pub timeout_sec: u32,
}

fn default_mcp_timeout() -> u32 {
    Mcp::DEFAULT_TIMEOUT_SEC
}

impl Mcp {
    /// The per-call limit when none is declared.
    pub const DEFAULT_TIMEOUT_SEC: u32 = 600;

    /// The transport of a remote server.
    pub const HTTP: &str = "http";

    /// The remote server's URL, when the block is `transport: http`.
    #[must_use]
    pub fn remote_url(&self) -> Option<&str> {
        if self.transport == Self::HTTP { self.url.as_deref() } else { None }
    }

    /// The namespace in force: the declared one, or the id with `-` replaced by `_`.
    #[must_use]
    pub fn effective_namespace(&self, id: &str) -> String {
        self.namespace.clone().unwrap_or_else(|| id.replace('-', "_"))
    }
}
