//! The catalog ([`butler_catalog`]: manifests, validation, the scan) and its [`loader`]:
//! the task that watches the scan roots, rescans, and publishes immutable snapshots the
//! other subsystems follow.

pub use butler_catalog::*;

pub mod loader;

pub use loader::{CatalogHandle, Rescan, RescanRequests, rescan_channel, spawn_loader, spawn_loader_with};
