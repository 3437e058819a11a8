//! Butler host: a local plugin-runtime host that keeps an instance (a working directory),
//! scans it for extension manifests, and serves them over a loopback-only HTTP API.
//!
//! The crates below it, bottom to top (each uses only those before it):
//! - `butler-catalog` — manifests: types, validation, the scan; the shared helpers
//!   ([`json`], [`validation`], [`text`], [`time`], [`lock`], and [`redact`], the one
//!   credential redactor);
//! - `butler-process` — starting children under a keeper, process trees, bounded logs;
//! - `butler-faculty` — the faculty runtime: WebAssembly components behind WIT;
//! - `butler-mcp` — the MCP hub: providers, routing, public names, sessions.
//!
//! This crate's own modules, bottom to top:
//! - [`catalog`] — the loader that watches the scan roots and publishes snapshots;
//! - [`instance`] — where the instance is, its root config, the skeleton copied on first run;
//! - [`supervise`] — hosted tools and services: restart policy, health;
//! - [`pipeline`] — `<prefix>.<verb>` action routing to faculty commands;
//! - [`mcp_servers`] — the MCP servers the owner adds by name (`butler mcp add`);
//! - [`packages`] — the enabled capability packages and the ChatOS apps, handed to the hub;
//! - [`upstream`] — the hub's connections to remote MCP servers over HTTP;
//! - [`chatos_backends`] — the ChatOS plugins' backends, run in Node through a bridge;
//! - [`notify`] — the owner's notification command, told what awaits them;
//! - [`collector`] — the owner's session turns, redacted and stored durably for the journal;
//! - [`hub_tools`] — the faculties' tools, one of the MCP hub's tool sources;
//! - [`agents`] — the owner's agent, run as sessions for delegations and automations;
//! - [`http`] — the API surface (MCP over Streamable HTTP among it), its gate and error
//!   envelope, and the web console;
//! - [`host`] — the composition root: every part above assembled into one host.

pub mod agents;
pub mod catalog;
pub mod chatos_backends;
pub mod collector;
pub mod host;
pub use butler_catalog::{json, lock, redact, text, time, validation};
pub mod http;
pub mod hub_tools;
pub mod instance;
pub mod mcp_servers;
pub mod notify;
pub mod packages;
pub mod pipeline;
pub mod supervise;
pub mod upstream;

/// The host's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
