//! Butler host: a local plugin-runtime host that keeps an instance (a working directory),
//! scans it for extension manifests, and serves them over a loopback-only HTTP API.
//!
//! The parts, each in its own module:
//! - [`instance`] — where the instance is, its root config, the skeleton copied on first run;
//! - [`catalog`] — manifests: scan, validate, watch, publish snapshots;
//! - [`faculty`] — faculties as WebAssembly components: engine, sandbox, calls;
//! - [`pipeline`] — `<prefix>.<verb>` action routing to faculty commands;
//! - [`process`] — starting processes in their own group under a keeper, so none outlives the host;
//! - [`supervise`] — hosted tools and services: restart policy, health, logs;
//! - [`mcp`] — the MCP hub: one Streamable HTTP endpoint over every stdio provider;
//! - [`http`] — the API surface, its gate and error envelope;
//! - [`console`] — the web console's page and assets, embedded;
//! - [`validation`] — JSON Schema validation with readable messages, shared by every schema;
//! - [`json`] — strict, size-capped reading of owner-written JSON files;
//! - [`time`] — wall-clock time as the API and logs show it.

pub mod catalog;
pub use butler_catalog::{json, validation};
pub mod faculty;
pub mod http;
pub mod instance;
pub mod mcp;
pub mod pipeline;
pub mod process;
pub mod supervise;
pub mod text;
pub mod time;

/// Locks `mutex`, carrying on past a panic in another holder: every value kept behind one
/// of the host's mutexes stays consistent between statements.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The host's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
