//! Spawning processes the host is answerable for: hosted tools and services (and, later,
//! stdio MCP providers). One toolkit so every child is started, grouped and reaped the same
//! way:
//! - [`launch`] turns a manifest's command line into argv, working directory and
//!   environment;
//! - [`keeper`] is the small guardian every child runs under (`butler keep`), which is what
//!   guarantees that nothing survives the host, grandchildren included;
//! - [`tree`] finds a process's descendants and signals them.

pub mod keeper;
pub mod launch;
pub mod tree;

pub use keeper::{Kept, STOP_GRACE, spawn_kept};
pub use launch::{HostEnv, Launch, LaunchError};
