//! What the owner sets per faculty in the root config's `faculties.<id>`: the call's
//! deadline and memory, the directories granted to it, the root-config keys it may read.

use serde::Deserialize;

/// `faculties.<id>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FacultySettings {
    /// `timeoutMs`: the deadline of one call, in ms (default 30000).
    pub timeout_ms: Option<u64>,
    /// `memoryMb`: the memory cap of one call's instance, in MiB (default 64).
    pub memory_mb: Option<u64>,
    /// Directories preopened for the faculty besides its own `/data`.
    #[serde(default)]
    pub grants: Vec<Grant>,
    /// Top-level keys of the root config the faculty reads, passed to it read-only (see
    /// [`crate::sandbox::CONFIG_ENV`]).
    #[serde(default)]
    pub config: Vec<String>,
}

/// One directory granted to a faculty.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Grant {
    /// Host directory, relative to the root `butler.json`; `${key}` stands for the
    /// instance folder configured under `key` (see [`crate::Setup::folders`]).
    pub dir: String,
    /// Guest path it appears at (`/data` is the faculty's own).
    #[serde(rename = "as")]
    pub guest: String,
    /// Whether the faculty may write there.
    #[serde(default)]
    pub write: bool,
}
