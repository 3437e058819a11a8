//! Suzu Lives capability packages (`suzu-capability.json`, V1): the static checks a
//! package must pass before it can be imported, and the report they make — the package's
//! name, version and adapters, and every problem with the file it is in and the rule it
//! breaks (a JSON pointer for the manifest's fields).
//!
//! The rules are Suzu's own: unknown fields rejected; `skill` is exactly one of
//! `{directory}` or `{file}`; package paths relative, with `/`, without `..`; a directory
//! skill read recursively accepting only real directories and regular files — symlinks,
//! special files, more than [`MAX_DEPTH`] levels of directories, more than [`MAX_FILES`]
//! files, a file over [`MAX_FILE_BYTES`] or more than [`MAX_SKILL_BYTES`] in all refused;
//! `SKILL.md` at the skill's root non-empty UTF-8; at least one of `skill` or `mcp`; `cli`
//! kept, never run. Nothing in a package is executed, downloaded or probed: the checks read
//! the manifest, `SKILL.md`, and the metadata of the other files the manifest names, never
//! following a link.

pub mod imports;

use std::fs::Metadata;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use serde::Serialize;
use serde_json::Value;

use crate::validation::SchemaValidator;

/// The manifest's file name.
pub const MANIFEST_FILE: &str = "suzu-capability.json";
/// The largest manifest read.
pub const MAX_MANIFEST_BYTES: u64 = 256 * 1024;
/// Levels of directories below a directory skill's root, at most (its root is level 0).
pub const MAX_DEPTH: usize = 16;
/// Files in a directory skill, at most.
pub const MAX_FILES: usize = 256;
/// The largest file of a skill: 1 MiB.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// A skill's files together, at most: 8 MiB.
pub const MAX_SKILL_BYTES: u64 = 8 * 1024 * 1024;
/// Directory entries looked at in one skill before the walk gives up: a package with
/// more than this is refused for too many files without being read to its end.
const MAX_ENTRIES: usize = 4 * MAX_FILES;

static SCHEMA: LazyLock<SchemaValidator> = LazyLock::new(|| {
    SchemaValidator::compile(
        "spec/suzu-capability.schema.json",
        include_str!("../../../spec/suzu-capability.schema.json"),
    )
    .unwrap_or_else(|e| panic!("{e}"))
});

/// The rule a problem breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The manifest cannot be read as JSON (missing, not a regular file, too large, not
    /// UTF-8, not JSON, a key twice).
    Unreadable,
    /// A field breaks the V1 schema (an unknown field, a wrong type, a missing field).
    Schema,
    /// Neither `skill` nor `mcp`.
    NoAdapter,
    /// `skill` is not exactly one of `directory` or `file`.
    SkillForm,
    /// A package path is absolute, uses `\`, has a `..` segment, or a name is not UTF-8.
    PathForm,
    /// A file or directory the manifest names is not there.
    Missing,
    /// A symbolic link where a real file or directory must be.
    Symlink,
    /// A FIFO, socket or device.
    SpecialFile,
    /// A file where a directory must be, or a directory where a file must be.
    WrongType,
    /// More than [`MAX_DEPTH`] levels of directories.
    TooDeep,
    /// More than [`MAX_FILES`] files.
    TooManyFiles,
    /// A file over [`MAX_FILE_BYTES`].
    FileTooLarge,
    /// More than [`MAX_SKILL_BYTES`] in all.
    SkillTooLarge,
    /// No `SKILL.md` at the skill's root.
    SkillMdMissing,
    /// `SKILL.md` is empty (or only whitespace).
    SkillMdEmpty,
    /// `SKILL.md` is not UTF-8.
    SkillMdNotUtf8,
    /// A field the `mcp` adapter's transport needs is missing, or one it does not take is
    /// there.
    TransportFields,
    /// An `http` adapter's URL is neither `https://` nor `http://` to a loopback address.
    UrlNotAllowed,
}

/// One problem of a package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The file it is about, relative to the package's directory (the manifest's own name
    /// for a problem with its fields).
    pub file: String,
    /// The rule it breaks.
    pub rule: Rule,
    /// For a manifest field, the JSON pointer to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// What is wrong, in one line.
    pub message: String,
}

/// What a package's manifest says it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Package {
    /// The manifest's `id`.
    pub id: String,
    /// The manifest's `name`.
    pub name: String,
    /// The manifest's `version`, as written.
    pub version: String,
    /// Its description, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The adapters it declares, of `skill`, `mcp` (with its transport) and `cli`.
    pub adapters: Vec<String>,
    /// Its skill, when it declares one that could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill: Option<Skill>,
}

/// A package's skill, as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    /// `directory` or `file`.
    pub form: &'static str,
    /// The path the manifest gives.
    pub path: String,
    /// Its files, relative to the skill's root (for a `file` skill: `SKILL.md`), sorted.
    pub files: Vec<String>,
    /// Their size in all.
    pub bytes: u64,
}

/// The result of the static checks.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The path of the manifest checked, as given.
    pub manifest: PathBuf,
    /// What it says, when its `id`, `name` and `version` could be read.
    pub package: Option<Package>,
    /// Every problem found; none means the package passes.
    pub problems: Vec<Problem>,
}

impl Report {
    /// Whether the package passes every check.
    #[must_use]
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Runs the static checks on the package whose manifest is `manifest`.
#[must_use]
pub fn inspect(manifest: &Path) -> Report {
    let mut checks = Checks { root: manifest.parent().unwrap_or(Path::new(".")).to_owned(), problems: Vec::new() };
    let document = match crate::json::read_file(manifest, MAX_MANIFEST_BYTES) {
        Ok(Some(document)) => document,
        Ok(None) => {
            checks.manifest_problem(Rule::Unreadable, "", format!("{} does not exist", manifest.display()));
            return checks.report(manifest, None);
        }
        Err(e) => {
            checks.manifest_problem(Rule::Unreadable, "", e.to_string());
            return checks.report(manifest, None);
        }
    };
    for error in SCHEMA.errors(&document) {
        checks.manifest_problem(Rule::Schema, &error.pointer, error.message);
    }
    let adapters = document.get("adapters").filter(|a| a.is_object()).unwrap_or(&Value::Null);
    if adapters.get("skill").is_none() && adapters.get("mcp").is_none() {
        checks.manifest_problem(
            Rule::NoAdapter,
            "/adapters",
            "a package declares at least one of the adapters `skill` or `mcp` (`cli` alone is never run)".to_owned(),
        );
    }
    let skill = adapters.get("skill").and_then(|skill| checks.skill(skill));
    if let Some(mcp) = adapters.get("mcp") {
        checks.mcp(mcp);
    }
    let text = |key: &str| document.get(key).and_then(Value::as_str).map(str::to_owned);
    let package = match (text("id"), text("name"), text("version")) {
        (Some(id), Some(name), Some(version)) => Some(Package {
            id,
            name,
            version,
            description: text("description"),
            adapters: adapter_names(adapters),
            skill,
        }),
        _ => None,
    };
    checks.report(manifest, package)
}

/// `skill`, `mcp (stdio)`, `cli`: the adapters a manifest declares.
pub(crate) fn adapter_names(adapters: &Value) -> Vec<String> {
    let mut names = Vec::new();
    if adapters.get("skill").is_some() {
        names.push("skill".to_owned());
    }
    if let Some(mcp) = adapters.get("mcp") {
        names.push(match mcp.get("transport").and_then(Value::as_str) {
            Some(transport) => format!("mcp ({transport})"),
            None => "mcp".to_owned(),
        });
    }
    if adapters.get("cli").is_some() {
        names.push("cli".to_owned());
    }
    names
}

/// The checks of one package, and the problems they found.
struct Checks {
    /// The package's directory.
    root: PathBuf,
    problems: Vec<Problem>,
}

/// What a package path must name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Directory,
    File,
    /// A file or a directory (a path in an `mcp` command line).
    Either,
}

impl Checks {
    fn report(mut self, manifest: &Path, package: Option<Package>) -> Report {
        self.problems.dedup();
        Report { manifest: manifest.to_owned(), package, problems: self.problems }
    }

    fn manifest_problem(&mut self, rule: Rule, pointer: &str, message: String) {
        self.problems.push(Problem {
            file: MANIFEST_FILE.to_owned(),
            rule,
            pointer: Some(pointer.to_owned()),
            message,
        });
    }

    fn file_problem(&mut self, file: &str, rule: Rule, message: String) {
        self.problems.push(Problem { file: file.to_owned(), rule, pointer: None, message });
    }

    /// The `skill` adapter: its form, its path, and its files.
    fn skill(&mut self, skill: &Value) -> Option<Skill> {
        let directory = skill.get("directory").and_then(Value::as_str);
        let file = skill.get("file").and_then(Value::as_str);
        let (form, path, want) = match (directory, file) {
            (Some(directory), None) => ("directory", directory, Want::Directory),
            (None, Some(file)) => ("file", file, Want::File),
            _ => {
                let message = "`skill` takes exactly one of `directory` (a folder with SKILL.md at its root) or `file` (a single SKILL.md)";
                self.manifest_problem(Rule::SkillForm, "/adapters/skill", message.to_owned());
                return None;
            }
        };
        let pointer = format!("/adapters/skill/{form}");
        if let Err(why) = path_form(path) {
            self.manifest_problem(Rule::PathForm, &pointer, why.to_string());
            return None;
        }
        let (location, meta) = self.resolve(path, want)?;
        let mut skill = Skill { form, path: path.to_owned(), files: Vec::new(), bytes: 0 };
        if want == Want::File {
            if self.fits(path, &meta) {
                self.skill_md(&location, path);
            }
            skill.files.push("SKILL.md".to_owned());
            skill.bytes = meta.len();
            return Some(skill);
        }
        let mut walk = Walk::default();
        self.walk(&location, &relative_join(path, ""), 0, &mut walk, &mut skill);
        if walk.files > MAX_FILES || walk.entries > MAX_ENTRIES {
            let message = format!("the skill has more than {MAX_FILES} files (at most {MAX_FILES} are allowed)");
            self.file_problem(path, Rule::TooManyFiles, message);
        }
        if skill.bytes > MAX_SKILL_BYTES {
            let message =
                format!("the skill's files come to more than {} MiB (at most 8 MiB in all)", MAX_SKILL_BYTES >> 20);
            self.file_problem(path, Rule::SkillTooLarge, message);
        }
        let skill_md = relative_join(path, "SKILL.md");
        match walk.skill_md {
            Some(true) => self.skill_md(&location.join("SKILL.md"), &skill_md),
            Some(false) => {} // too large, said already
            None => self.file_problem(
                &skill_md,
                Rule::SkillMdMissing,
                "a directory skill has SKILL.md at its root (a regular file, named exactly so)".to_owned(),
            ),
        }
        skill.files.sort();
        Some(skill)
    }

    /// Reads a directory skill's `dir` (`relative` to the package, `depth` levels below the
    /// skill's root): every entry a real directory or a regular file, within the limits.
    fn walk(&mut self, dir: &Path, relative: &str, depth: usize, walk: &mut Walk, skill: &mut Skill) {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                self.file_problem(relative, Rule::Unreadable, format!("cannot read the directory: {e}"));
                return;
            }
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            walk.entries += 1;
            if walk.entries > MAX_ENTRIES || walk.files > MAX_FILES {
                return;
            }
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                let message = format!("a file name that is not UTF-8 ({})", entry.file_name().to_string_lossy());
                self.file_problem(relative, Rule::PathForm, message);
                continue;
            };
            let path = format!("{relative}{name}");
            let meta = match std::fs::symlink_metadata(entry.path()) {
                Ok(meta) => meta,
                Err(e) => {
                    self.file_problem(&path, Rule::Unreadable, format!("cannot read its metadata: {e}"));
                    continue;
                }
            };
            if meta.file_type().is_symlink() {
                self.file_problem(
                    &path,
                    Rule::Symlink,
                    "a symbolic link: a skill holds only real directories and regular files".to_owned(),
                );
            } else if meta.is_dir() {
                if depth + 1 > MAX_DEPTH {
                    let message = format!("more than {MAX_DEPTH} levels of directories below the skill's root");
                    self.file_problem(&path, Rule::TooDeep, message);
                } else {
                    self.walk(&entry.path(), &format!("{path}/"), depth + 1, walk, skill);
                }
            } else if meta.is_file() {
                walk.files += 1;
                let fits = self.fits(&path, &meta);
                if depth == 0 && name == "SKILL.md" {
                    walk.skill_md = Some(fits);
                }
                skill.files.push(path.strip_prefix(&relative_join(&skill.path, "")).unwrap_or(&path).to_owned());
                skill.bytes = skill.bytes.saturating_add(meta.len());
            } else {
                self.file_problem(
                    &path,
                    Rule::SpecialFile,
                    "a FIFO, socket or device: a skill holds only real directories and regular files".to_owned(),
                );
            }
        }
    }

    /// Whether a skill's file is within [`MAX_FILE_BYTES`]; a problem when not.
    fn fits(&mut self, path: &str, meta: &Metadata) -> bool {
        if meta.len() <= MAX_FILE_BYTES {
            return true;
        }
        let message = format!("{} bytes: a skill's file is at most 1 MiB ({MAX_FILE_BYTES} bytes)", meta.len());
        self.file_problem(path, Rule::FileTooLarge, message);
        false
    }

    /// `SKILL.md` (at `location`, `shown` as): non-empty UTF-8 text.
    fn skill_md(&mut self, location: &Path, shown: &str) {
        let bytes = match read_regular(location, MAX_FILE_BYTES) {
            Ok(bytes) => bytes,
            Err(e) => {
                self.file_problem(shown, Rule::Unreadable, format!("cannot read it: {e}"));
                return;
            }
        };
        match std::str::from_utf8(&bytes) {
            Err(e) => {
                let message = format!("SKILL.md is not UTF-8 text (invalid byte at offset {})", e.valid_up_to());
                self.file_problem(shown, Rule::SkillMdNotUtf8, message);
            }
            Ok(text) if text.trim().is_empty() => {
                self.file_problem(
                    shown,
                    Rule::SkillMdEmpty,
                    "SKILL.md is empty: it names and describes the skill".to_owned(),
                );
            }
            Ok(_) => {}
        }
    }

    /// The `mcp` adapter: the fields its transport takes, its URL, and the package files
    /// its command line names (`./…`).
    fn mcp(&mut self, mcp: &Value) {
        let (needs, refuses): (&str, &[&str]) = match mcp.get("transport").and_then(Value::as_str) {
            Some("stdio") => ("command", &["url", "headers"]),
            Some("http") => ("url", &["command", "args", "env"]),
            _ => return, // the schema said it
        };
        let transport = mcp["transport"].as_str().unwrap_or_default().to_owned();
        if mcp.get(needs).is_none() {
            let message = format!("missing `{needs}`: transport `{transport}` needs it");
            self.manifest_problem(Rule::TransportFields, "/adapters/mcp", message);
        }
        for field in refuses.iter().filter(|f| mcp.get(**f).is_some()) {
            let message = format!("`{field}` is not taken by transport `{transport}`");
            self.manifest_problem(Rule::TransportFields, &format!("/adapters/mcp/{field}"), message);
        }
        if transport == "http" {
            if let Some(url) = mcp.get("url").and_then(Value::as_str)
                && let Err(why) = allowed_url(url)
            {
                self.manifest_problem(Rule::UrlNotAllowed, "/adapters/mcp/url", why.to_string());
            }
            return;
        }
        let command = mcp.get("command").and_then(Value::as_str).map(|c| ("/adapters/mcp/command".to_owned(), c));
        let args = mcp.get("args").and_then(Value::as_array).into_iter().flatten().enumerate();
        let args = args.filter_map(|(i, arg)| Some((format!("/adapters/mcp/args/{i}"), arg.as_str()?)));
        let named: Vec<(String, &str)> = command.into_iter().chain(args).collect();
        for (pointer, word) in named {
            let Some(path) = word.strip_prefix("./") else { continue };
            match path_form(path) {
                Err(why) => self.manifest_problem(Rule::PathForm, &pointer, why.to_string()),
                Ok(()) => {
                    self.resolve(path, Want::Either);
                }
            }
        }
    }

    /// `relative` (of a good form) inside the package, as `want` says it must be: every
    /// component a real directory but the last, which is what `want` says; a problem, and
    /// `None`, when it is not.
    fn resolve(&mut self, relative: &str, want: Want) -> Option<(PathBuf, Metadata)> {
        let components: Vec<&str> = relative.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
        let mut location = self.root.clone();
        for (i, component) in components.iter().enumerate() {
            location.push(component);
            let shown = components[..=i].join("/");
            let meta = match std::fs::symlink_metadata(&location) {
                Ok(meta) => meta,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    self.file_problem(
                        &shown,
                        Rule::Missing,
                        "not in the package (restore the package's files)".to_owned(),
                    );
                    return None;
                }
                Err(e) => {
                    self.file_problem(&shown, Rule::Unreadable, format!("cannot read its metadata: {e}"));
                    return None;
                }
            };
            let last = i + 1 == components.len();
            let (rule, message) = if meta.file_type().is_symlink() {
                (Rule::Symlink, "a symbolic link: package paths name real directories and regular files")
            } else if meta.is_dir() && (!last || want != Want::File)
                || meta.is_file() && last && want != Want::Directory
            {
                if last {
                    return Some((location, meta));
                }
                continue;
            } else if meta.is_dir() {
                (Rule::WrongType, "a directory, where a file must be")
            } else if meta.is_file() {
                (Rule::WrongType, "a file, where a directory must be")
            } else {
                (Rule::SpecialFile, "a FIFO, socket or device: package paths name real directories and regular files")
            };
            self.file_problem(&shown, rule, message.to_owned());
            return None;
        }
        // Only `.` segments: the package's own directory.
        let meta = std::fs::symlink_metadata(&location).ok().filter(|m| m.is_dir() && want != Want::File);
        if meta.is_none() {
            self.file_problem(
                relative,
                Rule::WrongType,
                "the package's own directory, where a file must be".to_owned(),
            );
        }
        meta.map(|meta| (location, meta))
    }
}

/// How far a directory skill's walk has gone.
#[derive(Default)]
struct Walk {
    entries: usize,
    files: usize,
    /// `SKILL.md` at the root: `Some(fits)` once seen.
    skill_md: Option<bool>,
}

/// `base/name` for shown paths (`base/` when `name` is empty), `base` normalised.
fn relative_join(base: &str, name: &str) -> String {
    let base: Vec<&str> = base.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    let mut joined = base.join("/");
    if !joined.is_empty() {
        joined.push('/');
    }
    joined.push_str(name);
    joined
}

/// Which rule of a package path's form a path breaks (see [`path_form`]); the message
/// shows the path clipped to 80 characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathFormError {
    /// The path is empty.
    #[error("an empty path")]
    Empty,
    /// The path starts with `/`.
    #[error("`{0}` is absolute: package paths are relative to the package's folder")]
    Absolute(String),
    /// The path uses a backslash.
    #[error("`{0}` uses `\\`: package paths use `/`")]
    Backslash(String),
    /// The path has a `..` segment.
    #[error("`{0}` has a `..` segment: package paths stay inside the package")]
    ParentSegment(String),
    /// The path has a NUL character.
    #[error("a path with a NUL character")]
    Nul,
}

/// Whether `path` is a package path of a good form: relative, with `/`, no `..`.
///
/// # Errors
/// Which rule it breaks.
pub fn path_form(path: &str) -> Result<(), PathFormError> {
    let shown = || crate::text::clip(path, 80);
    if path.is_empty() {
        return Err(PathFormError::Empty);
    }
    if path.starts_with('/') {
        return Err(PathFormError::Absolute(shown()));
    }
    if path.contains('\\') {
        return Err(PathFormError::Backslash(shown()));
    }
    if path.split('/').any(|segment| segment == "..") {
        return Err(PathFormError::ParentSegment(shown()));
    }
    if path.contains('\0') {
        return Err(PathFormError::Nul);
    }
    Ok(())
}

/// Why an `http` adapter may not connect to a URL (see [`allowed_url`]); the message
/// shows the URL clipped to 120 characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlNotAllowed {
    /// It has no `://`.
    #[error("`{0}` is not a URL")]
    NotAUrl(String),
    /// It names no host.
    #[error("`{0}` names no host")]
    NoHost(String),
    /// Plain `http://` to another machine.
    #[error("`{0}`: plain `http://` only to this machine (localhost, 127.x.x.x, [::1]); use `https://`")]
    PlainHttp(String),
    /// A scheme other than `https` or `http`.
    #[error("`{0}`: an `http` adapter connects over `https://` (or `http://` to this machine)")]
    Scheme(String),
}

/// Whether an `http` adapter may connect to `url`: `https://`, or `http://` to a loopback
/// address (`localhost`, `127.0.0.0/8`, `[::1]`).
///
/// # Errors
/// Why not.
pub fn allowed_url(url: &str) -> Result<(), UrlNotAllowed> {
    let shown = crate::text::clip(url, 120);
    let Some((scheme, rest)) = url.split_once("://") else { return Err(UrlNotAllowed::NotAUrl(shown)) };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    let host = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    if host.is_empty() {
        return Err(UrlNotAllowed::NoHost(shown));
    }
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Ok(()),
        "http" if is_loopback(host) => Ok(()),
        "http" => Err(UrlNotAllowed::PlainHttp(shown)),
        _ => Err(UrlNotAllowed::Scheme(shown)),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Reads the regular file at `path`, at most `max` bytes, without following a link or
/// blocking on a FIFO put in its place since it was looked at.
fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags.bits().cast_signed()).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
