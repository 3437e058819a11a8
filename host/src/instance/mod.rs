//! The instance: the owner's working directory.
//!
//! Resolves where it is, creates it from the skeleton on first run (never overwriting),
//! loads and validates the root config, and knows where every configured folder lives.

pub mod builtins;
pub mod config;
pub mod host_file;
pub mod live;
pub mod owner;
pub mod skeleton;
pub mod tokens;

use std::path::{Path, PathBuf};

pub use config::RootConfig;
pub use host_file::{HostFile, HostLock};

use crate::catalog::ScanConfig;
use crate::catalog::scan::MANIFEST_FILE;
use crate::validation::SchemaError;
pub use butler_catalog::files::{create_private_dir, sweep_temps, write_atomic, write_private};

/// Environment variable naming the instance.
pub const WORKDIR_ENV: &str = "BUTLER_WORKDIR";

/// Problems opening or creating an instance.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum InstanceError {
    /// A file or folder could not be created.
    #[error("cannot create {path}: {source}")]
    Create {
        /// What could not be written.
        path: PathBuf,
        source: std::io::Error,
    },
    /// The root config could not be read.
    #[error("cannot read the instance config {path}: {source}")]
    ReadConfig { path: PathBuf, source: std::io::Error },
    /// The root config is not a JSON object.
    #[error("cannot use the instance config {path}: {reason}")]
    ConfigNotJson { path: PathBuf, reason: String },
    /// The root config breaks `spec/instance.schema.json`.
    #[error("the instance config {path} is invalid:{}", list(errors))]
    InvalidConfig { path: PathBuf, errors: Vec<SchemaError> },
    /// The directory has no root `butler.json`.
    #[error("{path} is not a Butler instance (no {MANIFEST_FILE} at its root)")]
    NotAnInstance { path: PathBuf },
}

fn list(errors: &[SchemaError]) -> String {
    errors
        .iter()
        .map(|e| format!("\n  {}: {}", if e.pointer.is_empty() { "(root)" } else { &e.pointer }, e.message))
        .collect()
}

/// An instance that exists on disk, with its root config loaded and validated.
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
            own_listeners: Vec::new(),
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
        butler_faculty::expand_folders(&self.folders(), text)
    }

    /// What the faculty runtime needs of this instance, served at `host_url` (what
    /// native faculties see as `BUTLER_HOST_URL`).
    #[must_use]
    pub fn faculty_setup(&self, host_url: &str) -> butler_faculty::Setup {
        butler_faculty::Setup {
            root: self.root.clone(),
            scan_roots: self.scan_config().roots,
            state_dir: self.state_dir(),
            folders: self.folders(),
            settings: self.config.faculties.clone(),
            config: self.config.raw.clone(),
            host: self.host_env(host_url),
            clock: butler_faculty::Clock::system(),
            shared_memory_mb: None,
        }
    }

    /// What every process the host starts for this instance sees, served at `host_url`:
    /// the configured interpreters (a relative path is relative to the root config's
    /// folder), `BUTLER_HOST_URL` (and its legacy alias `BUTLER_GUARDIAN_URL`),
    /// `BUTLER_WORKDIR`, and one `BUTLER_<KEY>` per instance folder.
    #[must_use]
    pub fn host_env(&self, host_url: &str) -> butler_process::HostEnv {
        let interpreters = [("python", &self.config.python), ("bun", &self.config.bun)]
            .into_iter()
            .filter_map(|(name, path)| {
                let path = path.as_ref()?;
                let resolved = if path.contains('/') && Path::new(path).is_relative() {
                    self.root.join(path).display().to_string()
                } else {
                    path.clone()
                };
                Some((name.to_owned(), resolved))
            })
            .collect();
        let mut vars = vec![
            ("BUTLER_HOST_URL".to_owned(), host_url.to_owned()),
            ("BUTLER_GUARDIAN_URL".to_owned(), host_url.to_owned()),
            ("BUTLER_WORKDIR".to_owned(), self.root.display().to_string()),
        ];
        vars.extend(self.folders().into_iter().map(|(key, path)| (folder_variable(&key), path.display().to_string())));
        butler_process::HostEnv::new(interpreters, vars)
    }

    /// `relative` resolved against the instance root.
    #[must_use]
    pub fn path(&self, relative: &str) -> PathBuf {
        RootConfig::resolve(&self.root, relative)
    }

    /// Makes the state folder owner-only again wherever an older host (or a umask) left a
    /// folder or file open to other users (see [`butler_catalog::files::tighten`]); the one
    /// line saying what changed, if anything did. A state folder holding the instance root
    /// (`"stateDir": "."`) is left alone: the owner's shared files are there too.
    #[must_use]
    pub fn tighten_state(&self) -> Option<String> {
        let state = std::fs::canonicalize(self.state_dir()).ok()?;
        if self.root.starts_with(&state) {
            return Some(format!(
                "the state folder {} holds the instance, so it is not made owner-only",
                state.display()
            ));
        }
        butler_catalog::files::tighten(&state).summary(&state)
    }

    /// Creates the state directory, owner-only (the rest is the owner's to create).
    fn ensure_dirs(&self) -> Result<(), InstanceError> {
        let state = self.state_dir();
        create_private_dir(&state).map_err(|source| InstanceError::Create { path: state, source })
    }
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
