//! The instance: the owner's working directory.
//!
//! Resolves where it is, creates it from the skeleton on first run (never overwriting),
//! loads and validates the root config, and knows where every configured folder lives.

pub mod builtins;
pub mod config;
pub mod host_file;
pub mod owner;
pub mod skeleton;

use std::path::{Path, PathBuf};

pub use config::RootConfig;
pub use host_file::{HostFile, HostLock};

use crate::catalog::ScanConfig;
use crate::catalog::scan::MANIFEST_FILE;
use crate::validation::SchemaError;

/// Environment variable naming the instance.
pub const WORKDIR_ENV: &str = "BUTLER_WORKDIR";

/// Problems opening or creating an instance.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    /// A file or folder could not be created.
    #[error("cannot create {path}: {source}")]
    Create {
        /// What could not be written.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The root config could not be read.
    #[error("cannot read the instance config {path}: {source}")]
    ReadConfig {
        /// The root `butler.json`.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The root config is not a JSON object.
    #[error("cannot use the instance config {path}: {reason}")]
    ConfigNotJson {
        /// The root `butler.json`.
        path: PathBuf,
        /// The parser's explanation.
        reason: String,
    },
    /// The root config breaks `spec/instance.schema.json`.
    #[error("the instance config {path} is invalid:{}", list(errors))]
    InvalidConfig {
        /// The root `butler.json`.
        path: PathBuf,
        /// Every violation.
        errors: Vec<SchemaError>,
    },
    /// The directory has no root `butler.json`.
    #[error("{path} is not a Butler instance (no {MANIFEST_FILE} at its root)")]
    NotAnInstance {
        /// The directory.
        path: PathBuf,
    },
}

fn list(errors: &[SchemaError]) -> String {
    errors
        .iter()
        .map(|e| format!("\n  {}: {}", if e.pointer.is_empty() { "(root)" } else { &e.pointer }, e.message))
        .collect()
}

/// An opened instance.
#[derive(Debug, Clone)]
pub struct Instance {
    /// The instance root (absolute, canonical).
    pub root: PathBuf,
    /// The validated root config.
    pub config: RootConfig,
}

impl Instance {
    /// The default instance location, `~/.dsh/butler`.
    #[must_use]
    pub fn default_workdir() -> Option<PathBuf> {
        std::env::home_dir().map(|home| home.join(".dsh").join("butler"))
    }

    /// Opens the instance at `root`, creating it from the skeleton when it has no root
    /// `butler.json` yet. Returns whether it was created.
    ///
    /// # Errors
    /// [`InstanceError`] when it cannot be created or its config is invalid.
    pub fn open_or_create(root: &Path) -> Result<(Self, bool), InstanceError> {
        let created = !root.join(MANIFEST_FILE).exists();
        if created {
            std::fs::create_dir_all(root).map_err(|source| InstanceError::Create { path: root.to_owned(), source })?;
            skeleton::copy_into(root)?;
        }
        let instance = Self::open(root)?;
        instance.ensure_dirs()?;
        if created {
            builtins::install_missing(&instance)?;
        }
        Ok((instance, created))
    }

    /// Opens an existing instance without changing anything.
    ///
    /// # Errors
    /// [`InstanceError::NotAnInstance`] without a root `butler.json`; config errors.
    pub fn open(root: &Path) -> Result<Self, InstanceError> {
        let config_path = root.join(MANIFEST_FILE);
        if !config_path.is_file() {
            return Err(InstanceError::NotAnInstance { path: root.to_owned() });
        }
        let root = std::fs::canonicalize(root)
            .map_err(|source| InstanceError::ReadConfig { path: config_path.clone(), source })?;
        let config = RootConfig::load(&root.join(MANIFEST_FILE))?;
        Ok(Self { root, config })
    }

    /// The scan roots as absolute paths, in priority order.
    #[must_use]
    pub fn scan_config(&self) -> ScanConfig {
        ScanConfig {
            instance_root: self.root.clone(),
            roots: self.config.scan_roots.iter().map(|r| self.path(r)).collect(),
            inspector: None,
        }
    }

    /// The host's state directory.
    #[must_use]
    pub fn state_dir(&self) -> PathBuf {
        self.path(&self.config.state_dir)
    }

    /// The instance's named folders (key → resolved path), which a faculty grant may
    /// name as `${key}` and a hosted process sees as `BUTLER_<KEY>`.
    #[must_use]
    pub fn folders(&self) -> Vec<(String, PathBuf)> {
        self.config.folders.iter().map(|(key, relative)| (key.clone(), self.path(relative))).collect()
    }

    /// The instance folder configured under `key`, resolved.
    #[must_use]
    pub fn folder(&self, key: &str) -> Option<PathBuf> {
        self.config.folders.get(key).map(|relative| self.path(relative))
    }

    /// `text` with every `${key}` of an instance folder replaced by its path.
    #[must_use]
    pub fn expand_folders(&self, text: &str) -> String {
        expand_folders(&self.folders(), text)
    }

    /// `relative` resolved against the instance root.
    #[must_use]
    pub fn path(&self, relative: &str) -> PathBuf {
        RootConfig::resolve(&self.root, relative)
    }

    /// Creates the state directory (the rest is the owner's to create).
    fn ensure_dirs(&self) -> Result<(), InstanceError> {
        let state = self.state_dir();
        std::fs::create_dir_all(&state).map_err(|source| InstanceError::Create { path: state, source })
    }
}

/// `text` with every `${key}` of `folders` replaced by the folder's path.
#[must_use]
pub fn expand_folders(folders: &[(String, PathBuf)], text: &str) -> String {
    folders.iter().fold(text.to_owned(), |text, (key, folder)| {
        text.replace(&format!("${{{key}}}"), &folder.display().to_string())
    })
}

/// The environment variable a hosted process finds folder `key` in: `selfRoot` →
/// `BUTLER_SELF_ROOT`.
#[must_use]
pub fn folder_variable(key: &str) -> String {
    let mut name = String::from("BUTLER_");
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

/// Writes `bytes` to `path` atomically: a temp file in the same folder, flushed, then
/// renamed over the target, so readers see the old or the new file, never half of one.
///
/// # Errors
/// The I/O error of whichever step failed (the temp file is removed).
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(temp_name(name));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The temp file [`write_atomic`] writes `name` through: `.<name>.tmp-<pid>-<n>`.
fn temp_name(name: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(".{name}.tmp-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Whether `name` is one of [`write_atomic`]'s temp files.
fn is_temp_name(name: &str) -> bool {
    name.starts_with('.')
        && name.rsplit_once(".tmp-").is_some_and(|(_, tail)| {
            tail.split_once('-').is_some_and(|(pid, n)| {
                !pid.is_empty() && !n.is_empty() && pid.chars().chain(n.chars()).all(|c| c.is_ascii_digit())
            })
        })
}

/// Removes the temp files a killed process left in `dir` (not its subfolders) — the
/// host calls it at start, under the instance lock. A temp file younger than a minute is
/// left alone: it may be another process's write in progress (`butler check` filling the
/// compile cache).
pub fn sweep_temps(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    entries
        .map_while(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(is_temp_name))
        .filter(|e| e.metadata().is_ok_and(|m| m.is_file() && m.modified().is_ok_and(|t| t < minute_ago)))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_writers_old_temp_files_are_swept_and_nothing_else() {
        let dir = tempfile::tempdir().expect("temp");
        let stale = dir.path().join(temp_name("layout.json"));
        std::fs::write(&stale, b"half").expect("write");
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        std::fs::File::options().write(true).open(&stale).and_then(|f| f.set_modified(old)).expect("age it");
        let fresh = dir.path().join(temp_name("sessions.json"));
        std::fs::write(&fresh, b"in progress").expect("write");
        for other in ["layout.json", ".hidden", ".x.tmp-abc-1", ".x.tmp-1-"] {
            std::fs::write(dir.path().join(other), b"keep").expect("write");
            std::fs::File::options()
                .write(true)
                .open(dir.path().join(other))
                .and_then(|f| f.set_modified(old))
                .expect("age");
        }
        assert_eq!(sweep_temps(dir.path()), 1);
        assert!(!stale.exists() && fresh.exists());
        assert!(dir.path().join(".x.tmp-abc-1").exists() && dir.path().join("layout.json").exists());
    }
}
