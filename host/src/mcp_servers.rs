//! MCP servers the owner adds by name (`butler mcp add`, `butler mcp remove`): each is an
//! extension of its own, `tools/NAME/butler.json` with one `mcp` block — a command the hub
//! starts (`transport: stdio`) or a remote server it reaches by URL (`transport: http`).
//! The catalog picks the folder up live, like any extension; nothing else is recorded, so
//! editing or deleting the manifest by hand is as good as these commands.
//!
//! A manifest is checked as a scan checks it before it is written, and written whole
//! (atomically); one that may hold a credential (a header, an environment variable) is the
//! owner's alone (0600). Removing takes away only what adding wrote: a folder that holds
//! anything besides its manifest is left for the owner.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use butler_catalog::files::{write_atomic, write_private};
use butler_catalog::scan::MANIFEST_FILE;

use crate::instance::Instance;

pub mod client_config;

/// The scan root the servers are written under.
pub const FOLDER: &str = "tools";

/// The longest name: its tools' namespace is the name (with `-` as `_`), at most 24 long.
pub const MAX_NAME: usize = 24;

/// How the hub reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// A process it starts: argv, and its environment.
    Stdio {
        /// The command and its arguments.
        command: Vec<String>,
        /// Environment variables set for it.
        env: BTreeMap<String, String>,
    },
    /// A remote server: its URL, and the headers every request carries.
    Http {
        /// `https://…`, or `http://` to this machine.
        url: String,
        /// Sent with every request (`${VAR}` takes the host's environment at start).
        headers: BTreeMap<String, String>,
    },
}

/// A server to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewServer {
    /// Its name: the extension's id, and (with `-` as `_`) its tools' namespace.
    pub name: String,
    /// How the hub reaches it.
    pub reach: Reach,
    /// Per-call limit, in seconds (the manifest's default when `None`).
    pub timeout_sec: Option<u32>,
}

/// Why a server could not be added or removed.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The manifest it would make is not valid: every problem, with its JSON pointer.
    #[error("{}", .0.join("\n"))]
    Invalid(Vec<String>),
    /// Something is already at `tools/NAME`.
    #[error("{} already exists: choose another name, or `butler mcp remove {name}` first", .path.display())]
    Exists {
        /// The name asked for.
        name: String,
        /// What is in the way.
        path: PathBuf,
    },
    /// No server of that name.
    #[error("no MCP server `{name}`: {} does not exist", .path.display())]
    NotFound {
        /// The name asked for.
        name: String,
        /// Where it would be.
        path: PathBuf,
    },
    /// The extension at `tools/NAME` is not one `butler mcp add` would have made.
    #[error("{} is not only an MCP server's manifest ({why}): remove it yourself if you mean to", .path.display())]
    NotOurs {
        /// The folder.
        path: PathBuf,
        /// What else it is or holds.
        why: String,
    },
    /// Reading or writing the files failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ServerError + '_ {
    move |source| ServerError::Io { path: path.to_owned(), source }
}

/// The folder of server `name` in `instance`.
#[must_use]
pub fn folder(instance: &Instance, name: &str) -> PathBuf {
    instance.path(FOLDER).join(name)
}

/// The manifest `server` is written as.
#[must_use]
pub fn manifest(server: &NewServer) -> Value {
    let mut mcp = match &server.reach {
        Reach::Stdio { command, env } => json!({"transport": "stdio", "command": command, "env": env}),
        Reach::Http { url, headers } => json!({"transport": "http", "url": url, "headers": headers}),
    };
    for empty in ["env", "headers"] {
        if mcp.get(empty).and_then(Value::as_object).is_some_and(serde_json::Map::is_empty) {
            mcp.as_object_mut().map(|m| m.remove(empty));
        }
    }
    if let Some(timeout) = server.timeout_sec {
        mcp["timeoutSec"] = json!(timeout);
    }
    json!({"schemaVersion": 1, "kind": "tool", "id": server.name, "name": server.name, "mcp": mcp})
}

/// Writes `server` as `tools/NAME/butler.json` in `instance`, checked first as a scan
/// checks it; returns the manifest's path.
///
/// # Errors
/// [`ServerError::Invalid`] with every problem; [`ServerError::Exists`] when `tools/NAME`
/// is taken; the I/O error.
pub fn add(instance: &Instance, server: &NewServer) -> Result<PathBuf, ServerError> {
    let Planned { dir, file, bytes } = plan(instance, server)?;
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let secret = match &server.reach {
        Reach::Stdio { env, .. } => !env.is_empty(),
        Reach::Http { headers, .. } => !headers.is_empty(),
    };
    let written = if secret { write_private(&file, &bytes) } else { write_atomic(&file, &bytes) };
    if let Err(e) = written {
        let _ = std::fs::remove_dir(&dir);
        return Err(io(&file)(e));
    }
    Ok(file)
}

impl Reach {
    /// The host variables its headers or environment values read (`${VAR}`), in order.
    #[must_use]
    pub fn variables(&self) -> Vec<String> {
        let values = match self {
            Self::Stdio { env, .. } => env.values(),
            Self::Http { headers, .. } => headers.values(),
        };
        let mut names: Vec<String> = Vec::new();
        for name in values.flat_map(|value| butler_mcp::host_env::names_in(value)) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }
}

/// Gives server `name` the host variables `names` in the root config's `mcp.allowEnv` (see
/// [`butler_mcp::host_env`]): what the owner typed into `butler mcp add` is theirs to give.
/// The rest of the file is kept as it is written; a running host takes the change live.
/// Returns the names it was not given yet.
///
/// # Errors
/// When the root config cannot be read, is not a JSON object, or cannot be written.
pub fn allow_variables(instance: &Instance, name: &str, names: &[String]) -> Result<Vec<String>, ServerError> {
    edit_allowances(instance, |allowances| {
        let given = allowances.entry(name).or_insert_with(|| json!([]));
        let Some(given) = given.as_array_mut() else {
            return Err(format!("/mcp/allowEnv/{name} is not an array"));
        };
        let new: Vec<String> =
            names.iter().filter(|n| !given.iter().any(|known| known.as_str() == Some(n.as_str()))).cloned().collect();
        given.extend(new.iter().map(|n| json!(n)));
        Ok(new)
    })
}

/// Takes back every variable server `name` was given in `mcp.allowEnv` (it was removed).
/// Returns the names taken back.
///
/// # Errors
/// As [`allow_variables`].
pub fn disallow_variables(instance: &Instance, name: &str) -> Result<Vec<String>, ServerError> {
    edit_allowances(instance, |allowances| {
        Ok(allowances
            .remove(name)
            .and_then(|given| given.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect())
    })
}

/// Runs `edit` on the root config's `mcp.allowEnv` object (made when missing) and writes
/// the file back when `edit` returned something (an empty answer changes nothing) — only
/// when the whole file is then one the host accepts.
fn edit_allowances(
    instance: &Instance,
    edit: impl FnOnce(&mut serde_json::Map<String, Value>) -> Result<Vec<String>, String>,
) -> Result<Vec<String>, ServerError> {
    let path = instance.root.join(MANIFEST_FILE);
    let invalid = |why: String| ServerError::Invalid(vec![format!("{}: {why}", path.display())]);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    let mut config: Value = serde_json::from_slice(&bytes).map_err(|e| invalid(format!("not JSON ({e})")))?;
    let root = config.as_object_mut().ok_or_else(|| invalid("not a JSON object".to_owned()))?;
    let mcp = root.entry("mcp").or_insert_with(|| json!({}));
    let mcp = mcp.as_object_mut().ok_or_else(|| invalid("/mcp is not an object".to_owned()))?;
    let allowances = mcp.entry("allowEnv").or_insert_with(|| json!({}));
    let allowances = allowances.as_object_mut().ok_or_else(|| invalid("/mcp/allowEnv is not an object".to_owned()))?;
    let changed = edit(allowances).map_err(invalid)?;
    if changed.is_empty() {
        return Ok(changed);
    }
    // Never a file the host would refuse: the edit is judged as the host judges the file.
    crate::instance::config::RootConfig::from_value(&path, config.clone())
        .map_err(|e| ServerError::Invalid(vec![e.to_string()]))?;
    let mut bytes = serde_json::to_vec_pretty(&config).map_err(|e| io(&path)(std::io::Error::other(e)))?;
    bytes.push(b'\n');
    // A file only its owner could read stays so.
    use std::os::unix::fs::PermissionsExt;
    let private = std::fs::metadata(&path).is_ok_and(|m| m.permissions().mode() & 0o077 == 0);
    if private { write_private(&path, &bytes) } else { write_atomic(&path, &bytes) }.map_err(io(&path))?;
    Ok(changed)
}

/// A server's manifest, checked and ready to write.
struct Planned {
    dir: PathBuf,
    file: PathBuf,
    bytes: Vec<u8>,
}

/// What [`add`] would write for `server`, or why it would refuse: the checks without the
/// writing (`butler mcp import --dry-run`).
///
/// # Errors
/// As [`add`], but for I/O while writing.
pub fn check(instance: &Instance, server: &NewServer) -> Result<PathBuf, ServerError> {
    plan(instance, server).map(|planned| planned.file)
}

fn plan(instance: &Instance, server: &NewServer) -> Result<Planned, ServerError> {
    if !is_name(&server.name) {
        return Err(ServerError::Invalid(vec![format!(
            "`{}` is not a server name: lower-case letters, digits and `-`, starting with a letter, at most {MAX_NAME} (it names the server's tools: `NAME__tool`, with `-` as `_`)",
            server.name.escape_debug()
        )]));
    }
    let dir = folder(instance, &server.name);
    let file = dir.join(MANIFEST_FILE);
    let mut bytes = serde_json::to_vec_pretty(&manifest(server)).map_err(|e| io(&file)(std::io::Error::other(e)))?;
    bytes.push(b'\n');
    let shown = format!("{FOLDER}/{}/{MANIFEST_FILE}", server.name);
    let (_, diagnostics) = butler_catalog::scan::check_manifest_bytes(&bytes, &dir, &shown);
    let problems: Vec<String> = diagnostics
        .iter()
        .flat_map(|d| &d.errors)
        .map(|e| if e.pointer.is_empty() { e.message.clone() } else { format!("{}: {}", e.pointer, e.message) })
        .collect();
    if !problems.is_empty() {
        return Err(ServerError::Invalid(problems));
    }
    match std::fs::symlink_metadata(&dir) {
        Ok(_) => Err(ServerError::Exists { name: server.name.clone(), path: dir }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Planned { dir, file, bytes }),
        Err(e) => Err(io(&dir)(e)),
    }
}

/// What importing one of a client's servers came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Imported {
    /// Added as this server, its manifest at this path (in a dry run: it would be).
    Added(String, PathBuf),
    /// Left out: why.
    Skipped(String),
}

/// Adds each of a client's `entries` ([`client_config::read`]) as [`add`] would, in order —
/// with `dry_run`, checks each and writes nothing. A server name taken already, or by an
/// earlier entry, skips the entry: importing the same file again adds only what is new.
#[must_use]
pub fn import(instance: &Instance, entries: &[client_config::Entry], dry_run: bool) -> Vec<Imported> {
    let mut taken: Vec<&str> = Vec::new();
    entries
        .iter()
        .map(|entry| {
            let server = match &entry.outcome {
                Ok(server) => server,
                Err(skipped) => return Imported::Skipped(skipped.to_string()),
            };
            if taken.contains(&server.name.as_str()) {
                return Imported::Skipped(format!("an earlier server of the file is named `{}` here", server.name));
            }
            taken.push(&server.name);
            let done = if dry_run { check(instance, server) } else { add(instance, server) };
            match done {
                Ok(file) => Imported::Added(server.name.clone(), file),
                Err(ServerError::Exists { .. }) => {
                    Imported::Skipped(format!("a server `{}` is already there ({FOLDER}/{})", server.name, server.name))
                }
                Err(e) => Imported::Skipped(e.to_string().replace('\n', "; ")),
            }
        })
        .collect()
}

/// Takes server `name` away from `instance`: its manifest and its folder, when the folder
/// holds nothing else and the manifest is an MCP server's. Returns the folder.
///
/// # Errors
/// [`ServerError::NotFound`]; [`ServerError::NotOurs`] for a folder that holds more, or
/// a manifest that is not (only) an MCP server; the I/O error.
pub fn remove(instance: &Instance, name: &str) -> Result<PathBuf, ServerError> {
    let dir = folder(instance, name);
    let Some(meta) = is_name(name).then(|| std::fs::symlink_metadata(&dir).ok()).flatten() else {
        return Err(ServerError::NotFound { name: name.to_owned(), path: dir });
    };
    let not_ours = |why: String| ServerError::NotOurs { path: dir.clone(), why };
    if !meta.is_dir() {
        // A link is followed nowhere: what it points at is not this folder's to remove.
        return Err(not_ours("it is not a folder (a link, or a file)".to_owned()));
    }
    let mut others = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
        let entry = entry.map_err(io(&dir))?;
        if entry.file_name() != MANIFEST_FILE {
            others.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    if !others.is_empty() {
        others.sort();
        return Err(not_ours(format!("it also holds {}", others.join(", "))));
    }
    let file = dir.join(MANIFEST_FILE);
    let text = std::fs::read(&file).map_err(io(&file))?;
    let manifest: Value =
        serde_json::from_slice(&text).map_err(|e| not_ours(format!("its manifest is not JSON: {e}")))?;
    let keys: Vec<&str> = manifest.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
    let ours = ["schemaVersion", "kind", "id", "name", "description", "mcp"];
    if manifest.get("mcp").is_none() || keys.iter().any(|k| !ours.contains(k)) {
        return Err(not_ours("its manifest declares more than an MCP server".to_owned()));
    }
    std::fs::remove_file(&file).map_err(io(&file))?;
    std::fs::remove_dir(&dir).map_err(io(&dir))?;
    Ok(dir)
}

/// Whether `name` may name a server: an extension id its namespace can be derived from.
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= MAX_NAME
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// `K=V` (or `K: V`) split into its name and value, both trimmed.
///
/// # Errors
/// [`ServerError::Invalid`] when there is no `=` or `:`, or no name before it.
pub fn pair(text: &str) -> Result<(String, String), ServerError> {
    let invalid = |why: String| ServerError::Invalid(vec![why]);
    let at = text.find(['=', ':']).ok_or_else(|| invalid(format!("`{text}` is not NAME=VALUE")))?;
    let (name, value) = (text[..at].trim(), text[at + 1..].trim());
    if name.is_empty() {
        return Err(invalid(format!("`{text}` has no name before its `{}`", &text[at..=at])));
    }
    Ok((name.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests;
