//! The Suzu Lives capability packages imported into an instance (`<stateDir>/capabilities/`):
//! their records, the managed copies of their skills, and the owner's steps on them —
//! import (or update), enable, disable, remove.
//!
//! As in Suzu, imported is not enabled. Importing runs the static checks ([`crate::suzu`])
//! and, when they pass, records the package: `<id>/capability.json` (the manifest as
//! imported, where it came from, the skill's files with their sizes and SHA-256) and
//! `<id>/skill/`, the skill's files copied byte for byte (a `file` skill becomes its
//! `SKILL.md`). What is enabled later is exactly what was checked: a change to the source
//! package does not leak in until the owner imports it again as an update, which runs the
//! same checks and reports exactly what differs. Nothing in a package is executed,
//! downloaded or probed here.
//!
//! Every change is made in a staging folder and put in place by one rename (an exchange,
//! for an update), so a reader — or a host killed halfway — sees the old package or the
//! new one, never a mixture. Writers are serialized by one lock held only around file work.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustix::fs::{Mode, OFlags};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::suzu::{self, MANIFEST_FILE, MAX_FILE_BYTES, MAX_SKILL_BYTES, Report};

/// The most packages an instance holds; one more is refused (remove one first).
pub const MAX_PACKAGES: usize = 512;

/// The folder, under the host's state directory, that holds the imported packages.
pub const IMPORTS_DIR: &str = "capabilities";
/// The record's file name inside a package's folder.
pub const RECORD_FILE: &str = "capability.json";
/// The managed copy of the skill inside a package's folder.
pub const SKILL_DIR: &str = "skill";
/// What a staging folder's name starts with.
const STAGING: &str = ".staging-";

/// An imported package, as `capability.json` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    /// The package's id (its folder's name).
    pub id: String,
    /// Its name, shown to the owner.
    pub name: String,
    /// The manifest's `version`, as imported.
    pub version: String,
    /// Its description, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The manifest it was imported from (absolute).
    pub source: PathBuf,
    /// The manifest as imported.
    pub manifest: Value,
    /// The skill's files in the managed copy (none without a skill), by path.
    pub files: Vec<CopiedFile>,
    /// When it was first imported (RFC 3339).
    pub imported_at: String,
    /// When it was last imported or updated.
    pub updated_at: String,
    /// Whether the owner enabled it.
    pub enabled: bool,
}

impl Record {
    /// The adapters it declares: `skill`, `mcp (stdio)`, `cli`…
    #[must_use]
    pub fn adapters(&self) -> Vec<String> {
        suzu::adapter_names(self.manifest.get("adapters").unwrap_or(&Value::Null))
    }

    /// What kind of adapters it has, as an update must keep them while it is enabled:
    /// the skill's form and the MCP transport.
    fn adapter_kinds(&self) -> (Option<&str>, Option<&str>) {
        let adapters = self.manifest.get("adapters");
        let skill = adapters
            .and_then(|a| a.get("skill"))
            .map(|skill| if skill.get("directory").is_some() { "directory skill" } else { "file skill" });
        let mcp = adapters.and_then(|a| a.get("mcp")).and_then(|m| m.get("transport")).and_then(Value::as_str);
        (skill, mcp)
    }
}

/// The longest namespace a package's MCP server gets: its tools' public names
/// (`<namespace>__<tool>`) must fit [`crate::names::MAX_NAME`].
pub const MAX_NAMESPACE: usize = 32;

impl Record {
    /// The folder the package was imported from.
    #[must_use]
    pub fn package_dir(&self) -> PathBuf {
        self.source.parent().map_or_else(|| PathBuf::from("/"), Path::to_owned)
    }

    /// The id its MCP server has among the hub's providers: `suzu:<id>` (no extension's
    /// id has a `:`).
    #[must_use]
    pub fn provider_id(&self) -> String {
        format!("suzu:{}", self.id)
    }

    /// The namespace of its MCP server's tools: the id in lower case, every character
    /// outside `[a-z0-9_-]` replaced by `_`, leading and trailing `_` trimmed, at most
    /// [`MAX_NAMESPACE`] characters (`package` when nothing is left).
    #[must_use]
    pub fn namespace(&self) -> String {
        let normal: String = self
            .id
            .to_lowercase()
            .chars()
            .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' { c } else { '_' })
            .collect();
        let trimmed: String = normal.trim_matches('_').chars().take(MAX_NAMESPACE).collect();
        let trimmed = trimmed.trim_end_matches('_');
        if trimmed.is_empty() { "package".to_owned() } else { trimmed.to_owned() }
    }

    /// Its `stdio` MCP server as the hub runs it: `./` words of the command line made
    /// paths in the package's folder (which is also its working directory); `${VAR}` /
    /// `${VAR:-default}` in `env` are left for the hub to expand (with [`expand`]) from the
    /// variables the owner allows. `None` without a `stdio` server.
    #[must_use]
    pub fn stdio_server(&self) -> Option<crate::manifest::Mcp> {
        let mcp = self.manifest.get("adapters")?.get("mcp")?;
        if mcp.get("transport").and_then(Value::as_str) != Some("stdio") {
            return None;
        }
        let dir = self.package_dir();
        let word = |word: &str| match word.strip_prefix("./") {
            Some(path) => dir.join(path).display().to_string(),
            None => word.to_owned(),
        };
        let command = mcp.get("command").and_then(Value::as_str)?;
        let args = mcp.get("args").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
        let env = mcp.get("env").and_then(Value::as_object).into_iter().flatten();
        Some(crate::manifest::Mcp {
            transport: "stdio".to_owned(),
            command: std::iter::once(command).chain(args).map(word).collect(),
            cwd: None,
            env: env.filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect(),
            url: None,
            headers: std::collections::BTreeMap::new(),
            namespace: Some(self.namespace()),
            timeout_sec: crate::manifest::Mcp::DEFAULT_TIMEOUT_SEC,
        })
    }
}

impl Record {
    /// Its `http` MCP server: the URL, and the headers every request carries, with
    /// `${VAR}` / `${VAR:-default}` left for the hub to expand from the variables the owner
    /// allows. `None` without an `http` server.
    #[must_use]
    pub fn remote_server(&self) -> Option<(String, Vec<(String, String)>)> {
        let mcp = self.manifest.get("adapters")?.get("mcp")?;
        if mcp.get("transport").and_then(Value::as_str) != Some("http") {
            return None;
        }
        let url = mcp.get("url").and_then(Value::as_str)?;
        let headers = mcp.get("headers").and_then(Value::as_object).into_iter().flatten();
        let headers = headers.filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect();
        Some((url.to_owned(), headers))
    }
}

/// An enabled package's skill as agents are offered it: a prompt made of `SKILL.md`, and
/// its files as read-only resources, served from the managed copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The package's id.
    pub package: String,
    /// The skill's name: `SKILL.md`'s front matter `name`, else the package's name.
    pub title: String,
    /// `SKILL.md`'s front matter `description`, else the package's.
    pub description: Option<String>,
    /// `SKILL.md` after its front matter.
    pub body: String,
    /// The folder of the managed copy the skill is served from.
    pub copy: PathBuf,
    /// The copy's files, as recorded at import.
    pub files: Vec<SkillFile>,
    /// `SKILL.md`'s whole YAML front matter as JSON, when it has one that parses to a
    /// mapping with a `name` that follows the Agent Skills naming rules ([`is_skill_name`])
    /// and a `description`: then the skill is also offered as the MCP Skills extension
    /// describes one, and its files' URIs end in its name ([`Skill::uri`]).
    pub frontmatter: Option<Value>,
}

/// A file of a [`Skill`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// Its path below the skill's root, with `/`.
    pub path: String,
    /// Its MIME type, by its extension (`text/markdown` for `.md`).
    pub mime: String,
    /// Its size, as imported.
    pub bytes: u64,
    /// The SHA-256 of its bytes as imported, in lower-case hex.
    pub sha256: String,
}

impl Skill {
    /// The URI of the skill's folder: `skill://<package id>/<name>` when its front matter
    /// names it ([`Skill::frontmatter`]: the MCP Skills extension wants a skill's URI to
    /// end in its name), else `skill://<package id>`.
    #[must_use]
    pub fn root(&self) -> String {
        let name = self.frontmatter.as_ref().and_then(|f| f.get("name")).and_then(Value::as_str);
        match name {
            Some(name) => format!("skill://{}/{name}", self.package),
            None => format!("skill://{}", self.package),
        }
    }

    /// The URI of the skill's file `path`: `<root>/<path>` ([`Skill::root`]), each segment
    /// percent-encoded.
    #[must_use]
    pub fn uri(&self, path: &str) -> String {
        format!("{}/{}", self.root(), encoded(path))
    }

    /// The file `uri` names, when it is one of this skill's: by its URI, or by the
    /// `skill://<package id>/<path>` it had before skills were named in their URIs.
    #[must_use]
    pub fn file_of(&self, uri: &str) -> Option<&SkillFile> {
        self.files.iter().find(|file| {
            self.uri(&file.path) == uri || format!("skill://{}/{}", self.package, encoded(&file.path)) == uri
        })
    }
}

/// `path` with each segment percent-encoded.
fn encoded(path: &str) -> String {
    let segments: Vec<String> =
        path.split('/').map(|s| percent_encoding::utf8_percent_encode(s, URI_SEGMENT).to_string()).collect();
    segments.join("/")
}

/// Whether `name` follows the Agent Skills naming rules: 1 to 64 characters, lower-case
/// ASCII letters, digits and hyphens, no hyphen first, last or twice in a row.
#[must_use]
pub fn is_skill_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// The YAML front matter of a `SKILL.md` as JSON ([`front_matter_json`]) when it names the
/// skill by the Agent Skills rules ([`is_skill_name`]) and describes it, as the MCP Skills
/// extension requires of a skill.
#[must_use]
pub fn skill_frontmatter(text: &str) -> Option<Value> {
    front_matter_json(text).filter(|front| {
        let text_of = |key: &str| front.get(key).and_then(Value::as_str);
        text_of("name").is_some_and(is_skill_name) && text_of("description").is_some_and(|d| !d.is_empty())
    })
}

/// The YAML front matter of a `SKILL.md` as JSON, when it has a block between a first line
/// `---` and the next `---` line that parses to a mapping.
#[must_use]
pub fn front_matter_json(text: &str) -> Option<Value> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n"))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            let parsed: Value = serde_norway::from_str(&rest[..offset]).ok()?;
            return parsed.is_object().then_some(parsed);
        }
        offset += line.len();
    }
    None
}

/// What a URI segment keeps as written: RFC 3986's unreserved characters.
const URI_SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

impl Imports {
    /// The skill of the enabled package `record`, as agents are offered it (reads its
    /// `SKILL.md` in the managed copy: call it off the async runtime's threads). `None`
    /// without a skill, or when the copy cannot be read.
    #[must_use]
    pub fn skill(&self, record: &Record) -> Option<Skill> {
        if record.files.is_empty() {
            return None;
        }
        let copy = self.skill_dir(&record.id);
        let text = String::from_utf8(read_beneath(&copy, "SKILL.md").ok()?).ok()?;
        let (front, body) = front_matter(&text);
        let field = |key: &str| front.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).filter(|v| !v.is_empty());
        let files = record
            .files
            .iter()
            .map(|file| {
                let mime = if file.path.ends_with(".md") {
                    "text/markdown".to_owned()
                } else {
                    mime_guess::from_path(&file.path).first_or_octet_stream().essence_str().to_owned()
                };
                SkillFile { path: file.path.clone(), mime, bytes: file.bytes, sha256: file.sha256.clone() }
            })
            .collect();
        let frontmatter = skill_frontmatter(&text);
        Some(Skill {
            package: record.id.clone(),
            title: field("name").unwrap_or_else(|| record.name.clone()),
            description: field("description").or_else(|| record.description.clone()),
            body: body.to_owned(),
            copy,
            files,
            frontmatter,
        })
    }
}

/// `SKILL.md`'s front matter — the `key: value` lines between a first line `---` and the
/// next `---` line, a value's matching quotes removed (a value spread over several lines
/// is not read) — and the body after it. Without front matter: none, and the whole text.
#[must_use]
pub fn front_matter(text: &str) -> (Vec<(String, String)>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) else {
        return (Vec::new(), text);
    };
    let mut fields = Vec::new();
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        let line = line.trim_end_matches(['\r', '\n']);
        if line == "---" {
            return (fields, &rest[offset..]);
        }
        if line.starts_with([' ', '\t', '#']) {
            continue;
        }
        if let Some((key, value)) = line.split_once(':') {
            let value = value.trim();
            if value.starts_with(['|', '>']) {
                continue; // a block scalar, over the lines below
            }
            let unquoted = [('"', '"'), ('\'', '\'')]
                .iter()
                .find_map(|(open, close)| value.strip_prefix(*open)?.strip_suffix(*close))
                .unwrap_or(value);
            fields.push((key.trim().to_owned(), unquoted.to_owned()));
        }
    }
    (Vec::new(), text)
}

/// `text` with `${VAR}` replaced by `var(VAR)` (empty when unset) and `${VAR:-default}` by
/// `var(VAR)` when set and not empty, else `default` — as a POSIX shell expands them.
/// Anything else, an unterminated `${` included, is kept as written.
#[must_use]
pub fn expand(text: &str, var: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        let is_name = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if is_name {
            let value = var(name).filter(|v| !(v.is_empty() && default.is_some()));
            out.push_str(&value.unwrap_or_else(|| default.unwrap_or_default().to_owned()));
        } else {
            out.push_str(&rest[start..start + 2 + end + 1]);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// One file of a managed skill copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CopiedFile {
    /// Its path below the skill's root, with `/`.
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The SHA-256 of its bytes, in lower-case hex.
    pub sha256: String,
}

/// What an import did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Imported {
    /// The package as now recorded.
    pub record: Record,
    /// What the import did.
    pub outcome: Outcome,
    /// What differs from the earlier import of the same id (empty for a new one).
    pub differences: Vec<String>,
}

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A new package was recorded.
    Imported,
    /// An update replaced the earlier import.
    Updated,
    /// An update found the source as imported: nothing changed.
    Unchanged,
}

/// Why a step on the imported packages was refused.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The package does not pass the static checks: nothing was recorded.
    #[error("{} does not pass the static checks ({} problem(s)); nothing was imported", .0.manifest.display(), .0.problems.len())]
    Invalid(Box<Report>),
    /// The id is imported already and this was no update.
    #[error("`{id}` is imported already; {}", if differences.is_empty() { "the source has not changed".to_owned() } else { format!("import it again as an update to take its {} change(s)", differences.len()) })]
    Exists {
        /// The package id asked for.
        id: String,
        /// What the source changes.
        differences: Vec<String>,
    },
    /// An update changes an enabled package's kind of adapter.
    #[error("`{id}` is enabled and the update changes its {what}: disable it first, then update")]
    DisableFirst {
        /// The package id asked for.
        id: String,
        /// What changes, in words.
        what: String,
    },
    /// No package of this id is imported.
    #[error("no capability package `{0}` is imported")]
    Unknown(String),
    /// Only a disabled package can be removed.
    #[error("`{0}` is enabled: disable it before removing it")]
    Enabled(String),
    /// The package changed while it was read.
    #[error("{0}; nothing was imported (import it again)")]
    Changed(String),
    /// The instance holds as many packages as it may.
    #[error("the instance holds {0} capability packages, the most it may; remove one first")]
    Full(usize),
    /// A file could not be read or written.
    #[error("{0}")]
    Io(String),
}

/// The packages imported into one instance.
#[derive(Debug)]
pub struct Imports {
    /// `<instance>/capabilities`.
    root: PathBuf,
    /// Held by each change, around file work only.
    writing: Mutex<()>,
    /// [`MAX_PACKAGES`], or less in tests.
    limit: usize,
}

impl Imports {
    /// The packages under `root`; staging folders a killed writer left are removed (the
    /// host opens them once, under the instance lock).
    #[must_use]
    pub fn open(root: PathBuf) -> Self {
        if let Ok(entries) = std::fs::read_dir(&root) {
            for entry in entries.map_while(Result::ok) {
                if entry.file_name().to_str().is_some_and(|n| n.starts_with(STAGING)) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
        Self { root, writing: Mutex::new(()), limit: MAX_PACKAGES }
    }

    /// The packages under `root`, to read only (what `butler check` does beside a running
    /// host): unlike [`Imports::open`], nothing is removed.
    #[must_use]
    pub fn read_only(root: PathBuf) -> Self {
        Self { root, writing: Mutex::new(()), limit: MAX_PACKAGES }
    }

    /// [`Imports::open`], holding at most `limit` packages.
    #[must_use]
    pub fn open_with_limit(root: PathBuf, limit: usize) -> Self {
        Self { limit, ..Self::open(root) }
    }

    /// Every imported package, by id; a folder whose record cannot be read is left out.
    #[must_use]
    pub fn list(&self) -> Vec<Record> {
        let Ok(entries) = std::fs::read_dir(&self.root) else { return Vec::new() };
        let mut records: Vec<Record> = entries
            .map_while(Result::ok)
            .filter_map(|entry| entry.file_name().to_str().filter(|n| !n.starts_with('.')).map(str::to_owned))
            .filter_map(|id| self.get(&id))
            .collect();
        records.sort_by(|a, b| a.id.cmp(&b.id));
        records
    }

    /// The package `id`, when it is imported.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<Record> {
        if !is_id(id) {
            return None;
        }
        let bytes = std::fs::read(self.root.join(id).join(RECORD_FILE)).ok()?;
        serde_json::from_slice::<Record>(&bytes).ok().filter(|record| record.id == id)
    }

    /// The managed copy of package `id`'s skill.
    #[must_use]
    pub fn skill_dir(&self, id: &str) -> PathBuf {
        self.root.join(id).join(SKILL_DIR)
    }

    /// Imports the package whose manifest is `manifest` (or whose folder is): checks it,
    /// copies its skill, records it, disabled. An id imported already is replaced only
    /// when `update`, keeping whether it was enabled.
    ///
    /// # Errors
    /// [`ImportError`]: the checks' problems, an id imported already, an update that needs
    /// the package disabled first, a package that changed while it was read, I/O.
    pub fn import(&self, manifest: &Path, update: bool) -> Result<Imported, ImportError> {
        let manifest = if manifest.is_dir() { manifest.join(MANIFEST_FILE) } else { manifest.to_owned() };
        let manifest = std::path::absolute(&manifest).map_err(|e| ImportError::Io(e.to_string()))?;
        let report = suzu::inspect(&manifest);
        let Some(package) = report.package.clone().filter(|_| report.ok()) else {
            return Err(ImportError::Invalid(Box::new(report)));
        };
        let document = crate::json::read_file(&manifest, suzu::MAX_MANIFEST_BYTES)
            .ok()
            .flatten()
            .ok_or_else(|| ImportError::Changed(format!("{} changed while it was checked", manifest.display())))?;
        if document.get("id").and_then(Value::as_str) != Some(package.id.as_str()) {
            return Err(ImportError::Changed(format!("{} changed while it was checked", manifest.display())));
        }
        let skill = match &package.skill {
            Some(skill) => read_skill(manifest.parent().unwrap_or(Path::new("/")), skill)?,
            None => BTreeMap::new(),
        };
        let now = crate::time::rfc3339(crate::time::now_ms());
        let mut record = Record {
            id: package.id.clone(),
            name: package.name,
            version: package.version,
            description: package.description,
            source: manifest,
            manifest: document,
            files: skill
                .iter()
                .map(|(path, bytes)| CopiedFile {
                    path: path.clone(),
                    bytes: bytes.len() as u64,
                    sha256: data_encoding::HEXLOWER.encode(&Sha256::digest(bytes)),
                })
                .collect(),
            imported_at: now.clone(),
            updated_at: now,
            enabled: false,
        };
        let _writing = crate::lock(&self.writing);
        let earlier = self.get(&record.id);
        if earlier.is_none() && self.list().len() >= self.limit {
            return Err(ImportError::Full(self.limit));
        }
        let differences = earlier.as_ref().map(|earlier| differences(earlier, &record)).unwrap_or_default();
        if let Some(earlier) = &earlier {
            if !update {
                return Err(ImportError::Exists { id: record.id, differences });
            }
            if differences.is_empty() {
                return Ok(Imported { record: earlier.clone(), outcome: Outcome::Unchanged, differences });
            }
            if earlier.enabled && earlier.adapter_kinds() != record.adapter_kinds() {
                let what = describe_kinds(earlier.adapter_kinds(), record.adapter_kinds());
                return Err(ImportError::DisableFirst { id: record.id, what });
            }
            record.imported_at.clone_from(&earlier.imported_at);
            record.enabled = earlier.enabled;
        }
        self.put(&record, Some(&skill))?;
        let outcome = if earlier.is_some() { Outcome::Updated } else { Outcome::Imported };
        Ok(Imported { record, outcome, differences })
    }

    /// Enables package `id` (nothing changes when it is enabled already).
    ///
    /// # Errors
    /// [`ImportError::Unknown`], I/O.
    pub fn enable(&self, id: &str) -> Result<Record, ImportError> {
        self.set_enabled(id, true)
    }

    /// Disables package `id`, keeping its record and copy.
    ///
    /// # Errors
    /// [`ImportError::Unknown`], I/O.
    pub fn disable(&self, id: &str) -> Result<Record, ImportError> {
        self.set_enabled(id, false)
    }

    /// Removes package `id`, which must be disabled: its record and its managed copy.
    ///
    /// # Errors
    /// [`ImportError::Unknown`], [`ImportError::Enabled`], I/O.
    pub fn remove(&self, id: &str) -> Result<Record, ImportError> {
        let _writing = crate::lock(&self.writing);
        let record = self.get(id).ok_or_else(|| ImportError::Unknown(id.to_owned()))?;
        if record.enabled {
            return Err(ImportError::Enabled(id.to_owned()));
        }
        // Out of sight in one rename, then deleted: a reader never sees half a package.
        let doomed = self.staging(id);
        std::fs::rename(self.root.join(id), &doomed).map_err(|e| io("cannot remove the package", &e))?;
        std::fs::remove_dir_all(&doomed).map_err(|e| io("cannot delete the package's files", &e))?;
        Ok(record)
    }

    fn set_enabled(&self, id: &str, enabled: bool) -> Result<Record, ImportError> {
        let _writing = crate::lock(&self.writing);
        let mut record = self.get(id).ok_or_else(|| ImportError::Unknown(id.to_owned()))?;
        if record.enabled != enabled {
            record.enabled = enabled;
            let bytes = record_bytes(&record)?;
            crate::files::write_private(&self.root.join(id).join(RECORD_FILE), &bytes)
                .map_err(|e| io("cannot write the package's record", &e))?;
        }
        Ok(record)
    }

    /// Writes `record` and the skill's `files` into a staging folder, then puts it in
    /// place of the package's folder in one rename (an exchange when there is one).
    fn put(&self, record: &Record, files: Option<&BTreeMap<String, Vec<u8>>>) -> Result<(), ImportError> {
        use crate::files::{PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, create_private_dir};
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        create_private_dir(&self.root).map_err(|e| io("cannot create the capabilities folder", &e))?;
        let staging = self.staging(&record.id);
        let new_file = |path: &Path| File::options().write(true).create_new(true).mode(PRIVATE_FILE_MODE).open(path);
        let result = (|| {
            std::fs::DirBuilder::new().mode(PRIVATE_DIR_MODE).create(&staging)?;
            let skill = staging.join(SKILL_DIR);
            std::fs::DirBuilder::new().mode(PRIVATE_DIR_MODE).create(&skill)?;
            for (path, bytes) in files.into_iter().flatten() {
                let target = skill.join(path);
                if let Some(parent) = target.parent() {
                    create_private_dir(parent)?;
                }
                let mut file = new_file(&target)?;
                file.write_all(bytes)?;
                file.sync_all()?;
            }
            let mut file = new_file(&staging.join(RECORD_FILE))?;
            file.write_all(&record_bytes(record).map_err(std::io::Error::other)?)?;
            file.sync_all()?;
            let target = self.root.join(&record.id);
            if target.exists() {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &staging,
                    rustix::fs::CWD,
                    &target,
                    rustix::fs::RenameFlags::EXCHANGE,
                )?;
            } else {
                std::fs::rename(&staging, &target)?;
            }
            File::open(&self.root)?.sync_all()
        })();
        // After an exchange the staging folder holds the old package; after a failure,
        // the half-written new one.
        let _ = std::fs::remove_dir_all(&staging);
        result.map_err(|e| io("cannot write the package into the instance", &e))
    }

    /// A staging folder's path for package `id`.
    fn staging(&self, id: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        self.root.join(format!("{STAGING}{id}-{}-{n}", std::process::id()))
    }
}

/// Whether `id` could be a package's id (and so is a safe folder name).
fn is_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id.starts_with(|c: char| c.is_ascii_alphanumeric())
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn io(what: &str, error: &std::io::Error) -> ImportError {
    ImportError::Io(format!("{what}: {error}"))
}

fn record_bytes(record: &Record) -> Result<Vec<u8>, ImportError> {
    serde_json::to_vec_pretty(record).map_err(|e| ImportError::Io(format!("cannot encode the record: {e}")))
}

/// Reads the skill the checks passed, file by file, never following a link and never
/// leaving the package's folder `root`: its files by path below the skill's root (a
/// `file` skill is its `SKILL.md`), each within the limits the checks applied.
fn read_skill(root: &Path, skill: &suzu::Skill) -> Result<BTreeMap<String, Vec<u8>>, ImportError> {
    let changed = |why: String| ImportError::Changed(format!("the skill changed while it was read: {why}"));
    let mut files = BTreeMap::new();
    let mut total = 0u64;
    for name in &skill.files {
        let inside = if skill.form == "file" { skill.path.clone() } else { format!("{}/{name}", skill.path) };
        let bytes = read_beneath(root, &inside).map_err(|e| changed(format!("{inside}: {e}")))?;
        total += bytes.len() as u64;
        if total > MAX_SKILL_BYTES {
            return Err(changed(format!("its files now come to more than {} MiB", MAX_SKILL_BYTES >> 20)));
        }
        if name == "SKILL.md" && std::str::from_utf8(&bytes).map_or(true, |text| text.trim().is_empty()) {
            return Err(changed("its SKILL.md is now empty or not UTF-8".to_owned()));
        }
        files.insert(name.clone(), bytes);
    }
    Ok(files)
}

/// The bytes of the regular file at `relative` (components separated by `/`) below the
/// folder `root`, opened one component at a time without following a link; at most
/// [`MAX_FILE_BYTES`].
fn read_beneath(root: &Path, relative: &str) -> std::io::Result<Vec<u8>> {
    let directory = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut at: OwnedFd = rustix::fs::open(root, directory, Mode::empty())?;
    let components: Vec<&str> = relative.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    let Some((last, parents)) = components.split_last() else {
        return Err(std::io::Error::other("no file named"));
    };
    for component in parents {
        if *component == ".." {
            return Err(std::io::Error::other("`..` in a path"));
        }
        at = rustix::fs::openat(&at, *component, directory, Mode::empty())?;
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(rustix::fs::openat(&at, *last, flags, Mode::empty())?);
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("no longer a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::other("now over 1 MiB"));
    }
    Ok(bytes)
}

/// What differs between two imports of one package: the manifest's fields (by JSON
/// pointer; the values of `env` and `headers` are never shown — they may carry tokens) and
/// the skill's files.
#[must_use]
pub fn differences(old: &Record, new: &Record) -> Vec<String> {
    let mut out = Vec::new();
    changed_fields("", &old.manifest, &new.manifest, &mut out);
    if old.source != new.source {
        out.push(format!("source: {} → {}", old.source.display(), new.source.display()));
    }
    let before: BTreeMap<&str, &CopiedFile> = old.files.iter().map(|f| (f.path.as_str(), f)).collect();
    let after: BTreeMap<&str, &CopiedFile> = new.files.iter().map(|f| (f.path.as_str(), f)).collect();
    for (path, file) in &after {
        match before.get(path) {
            None => out.push(format!("skill file added: {path} ({} bytes)", file.bytes)),
            Some(was) if was.sha256 != file.sha256 => {
                out.push(format!("skill file changed: {path} ({} → {} bytes)", was.bytes, file.bytes));
            }
            Some(_) => {}
        }
    }
    for path in before.keys().filter(|path| !after.contains_key(*path)) {
        out.push(format!("skill file removed: {path}"));
    }
    out
}

fn changed_fields(pointer: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    if old == new {
        return;
    }
    let secret = pointer.starts_with("/adapters/mcp/env/") || pointer.starts_with("/adapters/mcp/headers/");
    match (old, new) {
        (Value::Object(a), Value::Object(b)) if !secret => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let at = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => changed_fields(&at, x, y, out),
                    (None, Some(_)) => out.push(format!("{at}: added")),
                    (Some(_), None) => out.push(format!("{at}: removed")),
                    (None, None) => {}
                }
            }
        }
        _ if secret => out.push(format!("{pointer}: changed (value not shown)")),
        _ => out.push(format!(
            "{pointer}: {} → {}",
            crate::text::clip(&old.to_string(), 80),
            crate::text::clip(&new.to_string(), 80)
        )),
    }
}

fn describe_kinds(old: (Option<&str>, Option<&str>), new: (Option<&str>, Option<&str>)) -> String {
    let word = |kind: Option<&str>, none: &'static str| kind.map_or(none.to_owned(), str::to_owned);
    let mut parts = Vec::new();
    if old.0 != new.0 {
        parts.push(format!("skill from {} to {}", word(old.0, "none"), word(new.0, "none")));
    }
    if old.1 != new.1 {
        parts.push(format!("MCP transport from {} to {}", word(old.1, "none"), word(new.1, "none")));
    }
    parts.join(" and ")
}

#[cfg(test)]
mod tests;
