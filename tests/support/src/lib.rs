//! What the end-to-end tests and the benchmarks share, so both drive the real `butler`
//! the same way:
//! - [`host`] — start `butler serve` on an instance (isolated from the user's settings),
//!   talk to it, stop it;
//! - [`http`] — the JSON envelope's checks, and a minimal HTTP/1.1 client on raw sockets
//!   for measurements where an HTTP library's own cost would show;
//! - [`instance`] — instance folders and manifests written for a test;
//! - [`marker`] and [`marked`] — finding the processes a test started, by their environment.
//!
//! The binary under test is the `butler` that Cargo built beside the running test or
//! benchmark ([`butler_binary`]).

pub mod host;
pub mod http;
pub mod instance;

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use host::{Butler, butler_command};
pub use http::{Client, assert_error, json_of};
pub use instance::{instance_with_config, tool, write_manifest};

/// The `butler` binary Cargo built for this test or benchmark: in the profile folder
/// above the `deps/` folder the running executable is in (`target/debug/butler` for
/// `target/debug/deps/e2e-…`).
///
/// # Panics
/// When there is none: the caller is not a test or bench target of `butler-host`.
#[must_use]
pub fn butler_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the running executable");
    let profile = exe.parent().and_then(|deps| deps.parent()).expect("a target folder");
    let butler = profile.join("butler");
    assert!(butler.is_file(), "no `butler` binary at {}: run this as a test or bench of butler-host", butler.display());
    butler
}

/// Calls `probe` every `interval` until it returns something, for at most `limit`.
pub fn poll<T>(limit: Duration, interval: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(found) = probe() {
            return Some(found);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(interval);
    }
}

/// Polls `condition` until it holds; returns how long it took.
///
/// # Panics
/// After `limit`, naming `what` was awaited.
pub fn wait_until(limit: Duration, what: &str, mut condition: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    poll(limit, Duration::from_millis(20), || condition().then(|| start.elapsed()))
        .unwrap_or_else(|| panic!("timed out after {limit:?} waiting for {what}"))
}

/// A value unique to one test run, named after `name`: put it in the environment of the
/// processes a test starts (`BUTLER_TEST_MARKER=<marker>`) to find them with [`marked`].
#[must_use]
pub fn marker(name: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{name}-{}-{nanos}", std::process::id())
}

/// Pids of processes that still run — any of their threads: a process whose main thread
/// ended with `pthread_exit` shows as a zombie yet runs on — whose environment holds
/// `BUTLER_TEST_MARKER=<marker>` (read through a running thread: a zombie main thread has
/// no environment left to read).
#[must_use]
pub fn marked(marker: &str) -> Vec<u32> {
    let needle = format!("BUTLER_TEST_MARKER={marker}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        let marked_and_running = tasks.flatten().any(|task| {
            let dir = task.path();
            let running = std::fs::read_to_string(dir.join("stat"))
                .ok()
                .and_then(|s| s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])))
                .unwrap_or(false);
            running
                && std::fs::read(dir.join("environ"))
                    .is_ok_and(|environ| environ.split(|&b| b == 0).any(|var| var == needle.as_bytes()))
        });
        if marked_and_running {
            pids.push(pid);
        }
    }
    pids
}
