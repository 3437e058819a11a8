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

    /// The owner's card store.
    #[must_use]
    pub fn self_root(&self) -> PathBuf {
        self.path(&self.config.self_root)
    }

    /// The root of validity checks.
    #[must_use]
    pub fn validity_root(&self) -> PathBuf {
        self.path(&self.config.validity_root)
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

/// Writes `bytes` to `path` atomically: a temp file in the same folder, flushed, then
/// renamed over the target, so readers see the old or the new file, never half of one.
///
/// # Errors
/// The I/O error of whichever step failed (the temp file is removed).
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp =
        path.with_file_name(format!(".{name}.tmp-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
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
