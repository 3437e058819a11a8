//! `<stateDir>/host.json`: where the running host listens, so the CLI (`butler faculty
//! call`, `butler pipeline`, …) can reach it. Written at start, removed on a clean exit;
//! a stale file left by a crash is recognised because nothing answers at its URL.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// File name under the state directory.
pub const HOST_FILE: &str = "host.json";

/// The file's content.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostInfo {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The host's process id.
    pub pid: u32,
    /// The host's version.
    pub version: String,
}

/// Removes the file when dropped.
#[derive(Debug)]
pub struct HostFile {
    path: PathBuf,
}

impl HostFile {
    /// Writes the file for a host listening at `url`.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write(state_dir: &Path, url: &str) -> std::io::Result<Self> {
        let path = state_dir.join(HOST_FILE);
        let info = HostInfo { url: url.to_owned(), pid: std::process::id(), version: crate::VERSION.to_owned() };
        let bytes = serde_json::to_vec_pretty(&info).map_err(std::io::Error::other)?;
        super::write_atomic(&path, &bytes)?;
        Ok(Self { path })
    }

    /// Reads the file of the host running on this instance, if any.
    ///
    /// # Errors
    /// When there is none or it is unreadable.
    pub fn read(state_dir: &Path) -> std::io::Result<HostInfo> {
        let bytes = std::fs::read(state_dir.join(HOST_FILE))?;
        serde_json::from_slice(&bytes).map_err(std::io::Error::other)
    }
}

impl Drop for HostFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
