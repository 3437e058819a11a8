//! Spawning the processes the host is answerable for — hosted tools and services, stdio
//! MCP providers, native faculties — shared by supervision, the MCP hub and the faculty
//! runtime, so every child is started, grouped, logged and reaped the same way:
//! - [`launch`] turns a manifest's command line into argv, working directory and
//!   environment;
//! - [`keeper`] is the small guardian every child runs under (`butler keep`), which is what
//!   guarantees that nothing survives the host, grandchildren included;
//! - [`tree`] finds a process's descendants and signals them;
//! - [`logs`] keeps a child's output: a bounded ring, a size-capped file, live followers;
//! - [`usage`] reads what a process tree uses: CPU time and resident memory;
//! - [`json_lines`] is the one JSON-lines conversation with a child: line cap, request ids,
//!   the waiting map, the in-flight limit, deadlines on tokio's clock.

pub mod json_lines;
pub mod keeper;
pub mod launch;
pub mod logs;
pub mod tree;
pub mod usage;

pub use keeper::{Kept, STOP_GRACE, spawn_kept};
pub use launch::{HostEnv, Launch, LaunchError};
