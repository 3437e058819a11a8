//! One host per instance, and where it listens.
//!
//! `<stateDir>/host.lock` is held with an exclusive OS file lock (`flock`) by the one host
//! serving the instance, for as long as it runs; the kernel releases it when the process
//! dies, however it dies, so a killed host never leaves a stale lock. The holder writes
//! its pid into it, so a second host can say who serves the instance.
//!
//! `<stateDir>/host.json` says where the running host listens, so the CLI (`butler
//! faculty call`, `butler pipeline`, …) can reach it. Only the lock holder writes it (at
//! start) and removes it (on a clean exit); one left by a crash is recognised because
//! nothing answers at its URL.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// File name under the state directory.
pub const HOST_FILE: &str = "host.json";
/// The lock file under the state directory.
pub const LOCK_FILE: &str = "host.lock";

/// Why this process cannot serve the instance.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum ClaimError {
    /// Another host holds the lock.
    #[error("instance {} is already served by pid {pid} at {url}", root.display())]
    Served {
        root: PathBuf,
        /// The other host's pid (or `unknown`).
        pid: String,
        /// Its URL, or a note that it is still starting.
        url: String,
    },
    /// The lock file could not be opened or locked.
    #[error("cannot lock {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

/// The instance's lock, held by the host serving it.
#[derive(Debug)]
pub struct HostLock {
    /// Holds the lock while open.
    _file: File,
    state_dir: PathBuf,
}

impl HostLock {
    /// Takes the instance's lock, or says who holds it. Never waits.
    ///
    /// # Errors
    /// [`ClaimError::Served`] when another host serves the instance.
    pub fn claim(root: &Path, state_dir: &Path) -> Result<Self, ClaimError> {
        let path = state_dir.join(LOCK_FILE);
        let io = |source| ClaimError::Io { path: path.clone(), source };
        super::create_private_dir(state_dir).map_err(io)?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(butler_catalog::files::PRIVATE_FILE_MODE)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                let url = HostFile::read(state_dir)
                    .ok()
                    .filter(|info| info.pid.to_string() == pid)
                    .map_or_else(|| "(it is still starting)".to_owned(), |info| info.url);
                return Err(ClaimError::Served {
                    root: root.to_owned(),
                    pid: if pid.is_empty() { "unknown".to_owned() } else { pid.to_owned() },
                    url,
                });
            }
            Err(std::fs::TryLockError::Error(source)) => return Err(io(source)),
        }
        file.set_len(0).and_then(|()| file.rewind()).map_err(io)?;
        write!(file, "{}", std::process::id()).and_then(|()| file.flush()).map_err(io)?;
        Ok(Self { _file: file, state_dir: state_dir.to_owned() })
    }

    /// Writes `host.json` for a host listening at `url`; it is removed, and then the lock
    /// released, when the returned [`HostFile`] is dropped.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn publish(self, url: &str) -> std::io::Result<HostFile> {
        let path = self.state_dir.join(HOST_FILE);
        let info = HostInfo { url: url.to_owned(), pid: std::process::id(), version: crate::VERSION.to_owned() };
        let bytes = serde_json::to_vec_pretty(&info).map_err(std::io::Error::other)?;
        super::write_private(&path, &bytes)?;
        Ok(HostFile { path, _lock: self })
    }
}

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

/// The published `host.json`: removed when dropped, before the lock it holds is released.
#[derive(Debug)]
pub struct HostFile {
    path: PathBuf,
    _lock: HostLock,
}

impl HostFile {
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
