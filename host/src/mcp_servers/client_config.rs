//! The MCP servers another client has configured, read from its config file for `butler mcp
//! import`: Claude Desktop's and Cursor's `mcpServers`, Claude Code's (`~/.claude.json` also
//! per project, `.mcp.json`), Windsurf's (`serverUrl`), VS Code's `servers` (`.vscode/mcp.json`,
//! or `mcp.servers` in its settings) — JSON with comments and trailing commas, as those
//! editors write it. Each entry becomes a [`NewServer`], or is skipped with the reason; the
//! file is only read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{MAX_NAME, NewServer, Reach};

/// The largest config file read: a client's settings, not a data file.
pub const MAX_FILE: u64 = 4 << 20;

/// The most servers one import adds; those after are skipped, each saying so.
pub const MAX_SERVERS: usize = 200;

/// One server of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name in the file.
    pub name: String,
    /// What it becomes, or why it cannot be mapped.
    pub outcome: Result<NewServer, Skipped>,
}

/// Why an entry is not imported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Skipped(pub String);

/// Why a file could not be read as a client's config.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// It could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Larger than [`MAX_FILE`].
    #[error("{} is larger than {} MiB: not a client's config", .path.display(), MAX_FILE >> 20)]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// Not JSON (with comments).
    #[error("{} is not JSON: {message}", .path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// No list of servers where any known client keeps one.
    #[error(
        "{} holds no MCP servers: no `mcpServers` (Claude, Cursor, Windsurf), `servers` (VS Code's mcp.json) or `mcp.servers` (VS Code's settings)",
        .path.display()
    )]
    NoServers {
        /// The file.
        path: PathBuf,
    },
}

/// The servers of the client config at `path`, in the file's order (Claude Code's
/// per-project servers after its own, a name seen twice kept once), and which client's
/// file it is.
///
/// # Errors
/// [`ConfigError`] when the file cannot be read, is not JSON, or lists no servers.
pub fn read(path: &Path) -> Result<(Client, Vec<Entry>), ConfigError> {
    let read = |source| ConfigError::Read { path: path.to_owned(), source };
    let size = std::fs::metadata(path).map_err(read)?.len();
    if size > MAX_FILE {
        return Err(ConfigError::TooLarge { path: path.to_owned() });
    }
    let text = std::fs::read_to_string(path).map_err(read)?;
    let options =
        jsonc_parser::ParseOptions { allow_comments: true, allow_trailing_commas: true, ..Default::default() };
    let value: Value = jsonc_parser::parse_to_serde_value(&text, &options)
        .map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })?;
    let lists = server_lists(&value);
    if lists.is_empty() {
        return Err(ConfigError::NoServers { path: path.to_owned() });
    }
    let mut entries: Vec<Entry> = Vec::new();
    for list in lists {
        for (name, server) in list {
            if entries.iter().any(|e| e.name == *name) {
                continue;
            }
            let outcome = if entries.len() < MAX_SERVERS {
                map(name, server)
            } else {
                Err(Skipped(format!("the file lists more than {MAX_SERVERS} servers: import them in parts")))
            };
            entries.push(Entry { name: name.clone(), outcome });
        }
    }
    Ok((Client::of(path, &value), entries))
}

/// Where the known clients keep their servers.
fn server_lists(config: &Value) -> Vec<&Map<String, Value>> {
    let mut lists: Vec<&Map<String, Value>> = ["/mcpServers", "/servers", "/mcp/servers"]
        .iter()
        .filter_map(|pointer| config.pointer(pointer)?.as_object())
        .collect();
    // Claude Code's `~/.claude.json`: servers of each project besides the user's own.
    let projects = config.get("projects").and_then(Value::as_object).into_iter().flatten();
    lists.extend(projects.filter_map(|(_, project)| project.get("mcpServers")?.as_object()));
    lists
}

/// One entry as a server to add.
fn map(name: &str, entry: &Value) -> Result<NewServer, Skipped> {
    let skip = |why: &str| Err(Skipped(why.to_owned()));
    let Some(entry) = entry.as_object() else { return skip("not an object") };
    if entry.get("disabled") == Some(&Value::Bool(true)) || entry.get("enabled") == Some(&Value::Bool(false)) {
        return skip("disabled in the client");
    }
    if entry.contains_key("envFile") {
        return skip("reads its environment from a file (`envFile`): add it with `butler mcp add` and `--env`");
    }
    let kind = entry.get("type").or_else(|| entry.get("transport")).and_then(Value::as_str);
    let url = ["url", "serverUrl", "httpUrl"].iter().find_map(|key| entry.get(*key)?.as_str());
    let command = entry.get("command");
    let reach = match (kind, url, command) {
        (Some("stdio"), _, Some(command)) | (None, None, Some(command)) => {
            let mut argv = match command {
                Value::String(program) => vec![program.clone()],
                Value::Array(words) => strings(words).ok_or_else(|| Skipped("`command` holds a non-string".into()))?,
                _ => return skip("`command` is neither a string nor a list"),
            };
            let args = entry.get("args").and_then(Value::as_array).map(|a| strings(a));
            match args {
                Some(Some(args)) => argv.extend(args),
                Some(None) => return skip("`args` holds a non-string"),
                None => {}
            }
            if argv.first().is_none_or(String::is_empty) {
                return skip("an empty `command`");
            }
            Reach::Stdio { command: argv, env: text_map(entry.get("env"), "env")? }
        }
        (Some("http" | "streamable-http" | "streamableHttp" | "sse") | None, Some(url), _) => {
            Reach::Http { url: url.to_owned(), headers: text_map(entry.get("headers"), "headers")? }
        }
        (Some(other), _, _) if !matches!(other, "stdio" | "http" | "streamable-http" | "streamableHttp" | "sse") => {
            return Err(Skipped(format!("its transport `{other}` is not one the hub speaks")));
        }
        _ => return skip("neither a `command` nor a `url`"),
    };
    let reach = editor_variables(reach)?;
    Ok(NewServer { name: imported_name(name, &reach), reach, timeout_sec: None })
}

/// The name a client's server `name` gets here: [`server_name`] of it, unless it has no
/// ASCII letter or digit to keep (`天气`, `高德地图`) — then of what the server is: the
/// package or program it runs (`@amap/amap-maps-mcp-server` → `amap-maps-mcp-server`), or
/// its URL's host (`mcp.amap.com` → `mcp-amap-com`). Two such servers of one file then get
/// names of their own instead of both `mcp`.
fn imported_name(name: &str, reach: &Reach) -> String {
    if name.chars().any(|c| c.is_ascii_alphanumeric()) {
        return server_name(name);
    }
    let what = match reach {
        Reach::Stdio { command, .. } => ran_package(command),
        Reach::Http { url, .. } => {
            reqwest::Url::parse(url).ok().and_then(|u| u.host_str().map(|h| h.trim_start_matches("www.").to_owned()))
        }
    };
    what.map_or_else(|| server_name(name), |what| server_name(&what))
}

/// The package or program a command runs, as a name. For a runner (`npx`, `uvx`,
/// `docker`, `python3`…): the first argument naming an MCP server (`…mcp…`), else the
/// first that is not a flag or a verb (`run`, `exec`); else the program itself. Its last
/// path segment, without a version (`@1.2`) or a script's extension.
fn ran_package(command: &[String]) -> Option<String> {
    const RUNNERS: &[&str] = &[
        "npx", "npm", "pnpm", "pnpx", "yarn", "bunx", "bun", "deno", "node", "uvx", "uv", "pipx", "python", "python3",
        "docker", "podman", "cmd", "sh", "bash",
    ];
    const VERBS: &[&str] = &["run", "exec", "x", "dlx", "start", "serve", "tool", "tools", "install", "/c"];
    let (program, args) = command.split_first()?;
    let runner = program.rsplit(['/', '\\']).next().unwrap_or(program).trim_end_matches(".exe");
    let words: Vec<&String> = if RUNNERS.contains(&runner) {
        args.iter().filter(|a| !a.starts_with('-') && !VERBS.contains(&a.as_str())).collect()
    } else {
        Vec::new()
    };
    let chosen = words
        .iter()
        .find(|a| a.to_ascii_lowercase().contains("mcp"))
        .or_else(|| words.first())
        .map_or(program.as_str(), |a| a.as_str());
    let last = chosen.trim_end_matches(['/', '\\']).rsplit(['/', '\\']).next().unwrap_or(chosen);
    let unversioned = match last.rfind('@') {
        Some(at) if at > 0 => &last[..at],
        _ => last,
    };
    let bare = [".js", ".mjs", ".cjs", ".ts", ".py", ".exe"]
        .iter()
        .find_map(|ext| unversioned.strip_suffix(ext))
        .unwrap_or(unversioned);
    bare.chars().any(|c| c.is_ascii_alphanumeric()).then(|| bare.to_owned())
}

fn strings(values: &[Value]) -> Option<Vec<String>> {
    values.iter().map(|v| v.as_str().map(str::to_owned)).collect()
}

/// An object of strings (numbers and booleans written as text).
fn text_map(value: Option<&Value>, field: &str) -> Result<BTreeMap<String, String>, Skipped> {
    let Some(value) = value else { return Ok(BTreeMap::new()) };
    let Some(object) = value.as_object() else { return Err(Skipped(format!("`{field}` is not an object"))) };
    object
        .iter()
        .map(|(key, value)| match value {
            Value::String(text) => Ok((key.clone(), text.clone())),
            Value::Number(_) | Value::Bool(_) => Ok((key.clone(), value.to_string())),
            _ => Err(Skipped(format!("`{field}.{key}` is not text"))),
        })
        .collect()
}

/// VS Code's predefined variables (beside `${userHome}`, which the host knows): only the
/// editor can fill them, though they read like environment variables.
const EDITOR_VARIABLES: &[&str] = &[
    "workspaceFolder",
    "workspaceFolderBasename",
    "workspaceRoot",
    "cwd",
    "pathSeparator",
    "execPath",
    "file",
    "fileBasename",
    "fileBasenameNoExtension",
    "fileDirname",
    "fileDirnameBasename",
    "fileExtname",
    "fileWorkspaceFolder",
    "relativeFile",
    "relativeFileDirname",
    "lineNumber",
    "selectedText",
    "defaultBuildTask",
];

/// The editors' own variables made the host's, in the environment, URL and headers:
/// `${env:VAR}` is `${VAR}`, `${userHome}` the home folder; one only the editor can fill
/// (`${input:…}`, `${workspaceFolder}`), or any in the command line, skips the entry.
fn editor_variables(reach: Reach) -> Result<Reach, Skipped> {
    let home = std::env::home_dir().map(|h| h.display().to_string());
    let fix = |text: &str| -> Result<String, Skipped> {
        let mut text = text.replace("${env:", "${");
        if let Some(home) = &home {
            text = text.replace("${userHome}", home);
        }
        let mut rest = text.as_str();
        while let Some(start) = rest.find("${") {
            let inner = &rest[start + 2..];
            let name = inner.split('}').next().unwrap_or_default();
            let var = name.split(":-").next().unwrap_or_default();
            let editors = EDITOR_VARIABLES.contains(&var);
            if editors || var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(Skipped(format!(
                    "it uses the editor's variable `${{{name}}}`, which only the editor can fill"
                )));
            }
            rest = &inner[name.len().min(inner.len())..];
        }
        Ok(text)
    };
    let fix_map = |map: BTreeMap<String, String>| -> Result<BTreeMap<String, String>, Skipped> {
        map.into_iter().map(|(k, v)| Ok((k, fix(&v)?))).collect()
    };
    Ok(match reach {
        Reach::Stdio { command, env } => {
            if let Some(word) = command.iter().find(|w| w.contains("${")) {
                return Err(Skipped(format!(
                    "its command line uses a variable (`{word}`), which the host does not expand there: add it with `butler mcp add` and `--env`"
                )));
            }
            Reach::Stdio { command, env: fix_map(env)? }
        }
        Reach::Http { url, headers } => Reach::Http { url: fix(&url)?, headers: fix_map(headers)? },
    })
}

/// Which client's file it is, as far as the hub's own entry in it differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `claude_desktop_config.json`: servers are commands only.
    ClaudeDesktop,
    /// `servers` (`.vscode/mcp.json`) or `mcp.servers` (its settings).
    VsCode,
    /// `mcp_config.json` of Windsurf: a remote server is a `serverUrl`.
    Windsurf,
    /// `mcpServers` of Claude Code, Cursor and the rest.
    Other,
}

impl Client {
    /// The client whose config is `path`, holding `config`.
    #[must_use]
    pub fn of(path: &Path, config: &Value) -> Self {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == "claude_desktop_config.json" {
            Self::ClaudeDesktop
        } else if config.get("servers").is_some() || config.pointer("/mcp/servers").is_some() {
            Self::VsCode
        } else if name == "mcp_config.json" && path.to_string_lossy().contains("windsurf") {
            Self::Windsurf
        } else {
            Self::Other
        }
    }

    /// The one entry the client keeps, under the name `butler`: the hub's endpoint at
    /// `url`, or (`stdio`, and always for Claude Desktop) the command `PROGRAM mcp stdio`,
    /// which carries the owner's credential (`program`: this binary).
    #[must_use]
    pub fn hub_entry(self, url: &str, program: &str, stdio: bool) -> Value {
        let entry = if stdio || self == Self::ClaudeDesktop {
            let command = if self == Self::VsCode { json!({"type": "stdio"}) } else { json!({}) };
            let mut command = command;
            command["command"] = json!(program);
            command["args"] = json!(["mcp", "stdio"]);
            command
        } else {
            match self {
                Self::Windsurf => json!({"serverUrl": url}),
                _ => json!({"type": "http", "url": url}),
            }
        };
        let key = if self == Self::VsCode { "servers" } else { "mcpServers" };
        json!({key: {"butler": entry}})
    }
}

/// A client's server name as a server name here: lower case, `-` for anything but letters
/// and digits, starting with a letter, at most [`MAX_NAME`] long.
#[must_use]
pub fn server_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '-' };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    if !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.insert_str(0, "mcp-");
    }
    out.truncate(MAX_NAME);
    out.trim_end_matches('-').to_owned()
}

#[cfg(test)]
mod tests;
