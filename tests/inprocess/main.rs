//! The in-process test tier: parts of the host built from the library inside the test
//! process, so that their tricky rules are tested in milliseconds rather than only
//! through the binary. Children still run under the real keeper (`butler keep`, the
//! binary these tests are built beside); time, where it matters, is tokio's paused clock,
//! advanced by hand, and for faculties a [`butler_faculty::Clock::manual`].
//!
//! - [`supervise`]: restart backoff and its reset, restart policies, exit statuses;
//! - [`hub`]: public names and namespace conflicts, id remapping, cancellation, crashes;
//! - [`search_mode`]: the search tools — found, described and called as direct calls are;
//! - [`loader`]: the catalog loader's debounce and its confirmed unregistering;
//! - [`leases`]: the pipeline's leases and review tokens on the faculties' hand-moved clock;
//! - [`http`]: the real router without a socket: the gate, credentials, the error envelope,
//!   owner actions.
//!
//! No test sleeps to let something happen and no test measures how long something took:
//! a wait is for an outcome, bounded only by [`LIMIT`] of real time.

mod http;
mod hub;
mod leases;
mod loader;
mod search_mode;
mod supervise;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use butler_catalog::{Catalog, ScanConfig};
use serde_json::Value;

/// The longest real time any single wait of these tests may take: a liveness bound for a
/// loaded machine, never a measure of speed.
const LIMIT: Duration = Duration::from_secs(60);

/// Makes this test process start its children under the real `butler` binary.
fn use_real_keeper() {
    butler_process::keeper::use_keeper(env!("CARGO_BIN_EXE_butler").into());
}

/// Writes `manifest` as `<root>/<rel>/butler.json` (creating the folder); returns the
/// extension folder.
fn write_manifest(root: &Path, rel: &str, manifest: &Value) -> PathBuf {
    let dir = root.join(rel);
    std::fs::create_dir_all(&dir).expect("create the extension folder");
    std::fs::write(dir.join("butler.json"), serde_json::to_vec_pretty(manifest).expect("a manifest serializes"))
        .expect("write the manifest");
    dir
}

/// The scan of an instance at `root` whose one scan root is `root/tools`.
fn scan_config(root: &Path) -> ScanConfig {
    ScanConfig {
        instance_root: root.to_path_buf(),
        roots: vec![root.join("tools")],
        inspector: None,
        own_listeners: Vec::new(),
    }
}

/// One scan of the instance at `root`, as the loader's first scan does it.
fn scan(root: &Path, previous: Option<&Catalog>) -> Catalog {
    butler_catalog::scan(&scan_config(root), previous)
}

/// `future`'s output, or a panic naming `what` once [`LIMIT`] of *real* time has passed.
/// The deadline is kept by a thread, not by a tokio timer, so it holds under a paused
/// clock too (where a tokio timeout would fire as soon as the runtime is idle).
async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let (late, too_late) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        if finished.recv_timeout(LIMIT) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            let _ = late.send(());
        }
    });
    let output = tokio::select! {
        output = future => output,
        _ = too_late => panic!("{what}: not done within {LIMIT:?} of real time"),
    };
    drop(done);
    output
}

/// Waits until `ready` holds, polling it on a blocking thread every few milliseconds of
/// real time (at most [`LIMIT`]). Under a paused clock, time stands still meanwhile: tokio
/// does not auto-advance while a blocking task runs, so what is waited for happens at one
/// instant of test time.
async fn until(what: &str, mut ready: impl FnMut() -> bool + Send + 'static) {
    let polled = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + LIMIT;
        while std::time::Instant::now() < deadline {
            if ready() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    })
    .await
    .expect("the poll does not panic");
    assert!(polled, "{what}: not so within {LIMIT:?} of real time");
}

#[test]
fn children_of_this_process_run_under_the_real_keeper() {
    use_real_keeper();
    let out = butler_process::keeper::command(&["sh".to_owned(), "-c".to_owned(), "echo kept".to_owned()])
        .output()
        .expect("run under the keeper");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "kept\n");
}
