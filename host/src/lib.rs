//! Butler host: a local plugin-runtime host that keeps an instance (a working directory),
//! scans it for extension manifests, and serves them over a loopback-only HTTP API.
//!
//! The parts, each in its own module:
//! - [`instance`] — where the instance is, its root config, the skeleton copied on first run;
//! - [`catalog`] — manifests: scan, validate, watch, publish snapshots;
//! - [`faculty`] — faculties as WebAssembly components: engine, sandbox, calls;
//! - [`pipeline`] — `<prefix>.<verb>` action routing to faculty commands;
//! - [`http`] — the API surface, its gate and error envelope;
//! - [`validation`] — JSON Schema validation with readable messages, shared by every schema;
//! - [`json`] — strict, size-capped reading of owner-written JSON files.

pub mod catalog;
pub mod faculty;
pub mod http;
pub mod instance;
pub mod json;
pub mod pipeline;
pub mod validation;

/// The host's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
