//! The catalog loader in-process, on tokio's paused clock: [`spawn_loader`] watches a temp
//! instance while the test writes into it. Covered: a burst of writes is one rescan (one
//! published snapshot, nothing before the writes have been quiet for [`DEBOUNCE`]); a new
//! manifest is registered; a folder found gone stays registered until a second scan,
//! [`DEBOUNCE`] later, agrees — and one that is back by then is never unregistered; a
//! `.wasm` dropped into a scan root is announced pending before the scan judges it.
//!
//! Snapshots are counted by their `generation`, which grows by one per published
//! snapshot (a `watch` receiver would fold two quick ones into one wake-up). File-system
//! events come from the watcher's own thread in real time, so no test depends on when
//! one arrives: writes happen while the clock stands still, and the assertions hold
//! whichever way the events and the periodic fingerprint check interleave.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_catalog::{Catalog, lock};
use butler_host::catalog::loader::{DEBOUNCE, FINGERPRINT_INTERVAL};
use butler_host::catalog::{CatalogHandle, spawn_loader};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::{scan_config, within, write_manifest};

/// A minimal valid tool manifest.
fn tool(id: &str) -> Value {
    json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id})
}

/// The ids a snapshot registers.
fn ids(catalog: &Catalog) -> BTreeSet<String> {
    catalog.extensions.iter().map(|e| e.id().to_owned()).collect()
}

/// `["a", "b"]` as the set [`ids`] returns.
/// The ids of `catalog`, in its order.
fn in_order(catalog: &Catalog) -> Vec<String> {
    catalog.extensions.iter().map(|e| e.id().to_owned()).collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|id| (*id).to_owned()).collect()
}

/// Starts the loader on the instance at `root` and lets it settle: its first periodic
/// check is done and it waits for events, [`FINGERPRINT_INTERVAL`] before the next check.
async fn loader(root: &Path) -> (CatalogHandle, watch::Receiver<Arc<Catalog>>) {
    let handle = within("the first scan", spawn_loader(scan_config(root))).await.expect("the loader starts");
    let snapshots = handle.subscribe();
    // Auto-advance reaches this timer only once the loader is idle, its first tick's
    // stat pass (a blocking task, which holds the clock) done.
    tokio::time::sleep(Duration::from_millis(1)).await;
    (handle, snapshots)
}

/// The next published snapshot (the clock auto-advances to the loader's timers meanwhile).
async fn next(snapshots: &mut watch::Receiver<Arc<Catalog>>) -> Arc<Catalog> {
    within("the next snapshot", snapshots.changed()).await.expect("the loader runs");
    snapshots.borrow_and_update().clone()
}

/// A snapshot as a follower saw it: its generation and ids.
type Seen = (u64, BTreeSet<String>);

/// Lets every task run that can, without moving the clock.
async fn let_others_run() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_writes_is_one_rescan_that_registers_the_new_manifests() {
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_manifest(r, "tools/old", &tool("old"));
    let (handle, mut snapshots) = loader(r).await;
    let first = handle.current();
    assert_eq!(ids(&first), set(&["old"]));

    // Five folders, each manifest first written half (as an editor or a copy would leave
    // it for a moment) and then whole; the loader runs between the writes, but the clock
    // stands still, so no write is ever quiet for DEBOUNCE.
    let new = ["n1", "n2", "n3", "n4", "n5"];
    for id in new {
        let folder = r.join("tools").join(id);
        std::fs::create_dir_all(&folder).expect("mkdir");
        std::fs::write(folder.join("butler.json"), r#"{"schemaVersion": 1, "kind": "to"#).expect("half a manifest");
        let_others_run().await;
        write_manifest(r, &format!("tools/{id}"), &tool(id));
        let_others_run().await;
    }
    // A moment short of DEBOUNCE later, nothing is published yet.
    tokio::time::advance(DEBOUNCE - Duration::from_millis(1)).await;
    let_others_run().await;
    assert_eq!(handle.current().generation, first.generation, "published before the writes were quiet");

    let snapshot = next(&mut snapshots).await;
    assert_eq!(snapshot.generation, first.generation + 1, "the burst was taken as one rescan");
    let mut expected = set(&new);
    expected.insert("old".to_owned());
    assert_eq!(ids(&snapshot), expected);
    assert!(snapshot.diagnostics.is_empty(), "no half-written manifest was scanned: {:?}", snapshot.diagnostics);

    // Quiet from here on: a while later, still that one snapshot.
    tokio::time::advance(FINGERPRINT_INTERVAL * 3).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(handle.current().generation, snapshot.generation, "nothing changed, so nothing was published");
}

#[tokio::test(start_paused = true)]
async fn a_new_manifest_is_registered_and_a_changed_one_republished() {
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    let (handle, mut snapshots) = loader(r).await;
    let first = handle.current();
    assert!(first.extensions.is_empty() && first.diagnostics.is_empty(), "an empty instance: {first:?}");

    std::fs::create_dir_all(r.join("tools")).expect("the scan root");
    write_manifest(r, "tools/weather", &tool("weather"));
    let added = next(&mut snapshots).await;
    assert_eq!((ids(&added), added.generation), (set(&["weather"]), first.generation + 1));

    let mut renamed = tool("weather");
    renamed["name"] = json!("Weather Now");
    write_manifest(r, "tools/weather", &renamed);
    let changed = next(&mut snapshots).await;
    assert_eq!(changed.generation, added.generation + 1);
    assert_eq!(changed.get("weather").map(|e| e.manifest.name.as_str()), Some("Weather Now"));
}

#[tokio::test(start_paused = true)]
async fn a_folder_found_gone_is_unregistered_only_when_a_second_scan_agrees() {
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_manifest(r, "tools/stays", &tool("stays"));
    write_manifest(r, "tools/goes", &tool("goes"));
    let (handle, mut snapshots) = loader(r).await;
    let first = handle.current();

    // One change: `goes` vanishes and `fresh` arrives, so the first scan that sees the
    // folder gone publishes (for `fresh`) — with `goes` still registered.
    std::fs::remove_dir_all(r.join("tools/goes")).expect("remove the folder");
    write_manifest(r, "tools/fresh", &tool("fresh"));
    let seen_gone = next(&mut snapshots).await;
    assert_eq!(seen_gone.generation, first.generation + 1);
    assert_eq!(ids(&seen_gone), set(&["fresh", "goes", "stays"]), "kept until a second scan agrees");
    assert_eq!(in_order(&seen_gone), ["fresh", "goes", "stays"], "what is kept stays in scan order");

    // The second scan is DEBOUNCE after the first: a moment before, it is still there.
    tokio::time::advance(DEBOUNCE - Duration::from_millis(1)).await;
    let_others_run().await;
    assert_eq!(handle.current().generation, seen_gone.generation);

    let confirmed = next(&mut snapshots).await;
    assert_eq!(confirmed.generation, seen_gone.generation + 1);
    assert_eq!(ids(&confirmed), set(&["fresh", "stays"]), "gone twice: unregistered");
}

#[tokio::test(start_paused = true)]
async fn a_folder_back_before_the_second_scan_is_never_unregistered() {
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_manifest(r, "tools/flip", &tool("flip"));
    let (handle, mut snapshots) = loader(r).await;
    // Every snapshot, as a follower gets it (its generations show if one was missed).
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = Arc::clone(&seen);
    handle
        .follow_with(move |snapshot| {
            lock(&record).push((snapshot.generation, ids(&snapshot)));
            std::future::ready(())
        })
        .await;

    // Gone (an installer replacing the folder), seen gone by a scan that publishes…
    std::fs::remove_dir_all(r.join("tools/flip")).expect("remove the folder");
    write_manifest(r, "tools/other", &tool("other"));
    let seen_gone = next(&mut snapshots).await;
    assert_eq!(ids(&seen_gone), set(&["flip", "other"]));
    // …and back, the same, before the confirming scan, which is due DEBOUNCE later.
    write_manifest(r, "tools/flip", &tool("flip"));
    tokio::time::advance(DEBOUNCE + Duration::from_millis(1)).await;
    // A last change, so that there is a last snapshot to wait for.
    write_manifest(r, "tools/last", &tool("last"));
    while !ids(&handle.current()).contains("last") {
        next(&mut snapshots).await;
    }
    let_others_run().await;

    let seen = lock(&seen).clone();
    let generations: Vec<u64> = seen.iter().map(|(g, _)| *g).collect();
    let contiguous: Vec<u64> = (generations[0]..).take(seen.len()).collect();
    assert_eq!(generations, contiguous, "the follower saw every snapshot");
    assert!(seen.iter().all(|(_, ids)| ids.contains("flip")), "a snapshot without it: {seen:?}");
    let after: Vec<&Seen> = seen.iter().filter(|(g, _)| *g > seen_gone.generation).collect();
    assert_eq!(after.len(), 1, "the folder back as it was publishes nothing, only `last` does: {after:?}");
    assert_eq!(seen.last().map(|(_, ids)| ids.clone()), Some(set(&["flip", "last", "other"])));
}

/// Refuses every component, as the faculty runtime refuses a broken one.
struct Refusing;

impl butler_catalog::ComponentInspector for Refusing {
    fn inspect(&self, _path: &Path) -> Result<butler_catalog::ComponentInfo, butler_catalog::InspectError> {
        Err(butler_catalog::InspectError::Failed("refused by the test".to_owned()))
    }
}

#[tokio::test(start_paused = true)]
async fn a_dropped_component_is_announced_pending_before_the_scan_judges_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    std::fs::create_dir_all(r.join("tools")).expect("the scan root");
    let mut config = scan_config(r);
    config.inspector = Some(Arc::new(Refusing));
    let handle = within("the first scan", spawn_loader(config)).await.expect("the loader starts");
    let mut snapshots = handle.subscribe();
    tokio::time::sleep(Duration::from_millis(1)).await;
    let first = handle.current();

    std::fs::write(r.join("tools/big.wasm"), b"\0asm\x0d\x00\x01\x00").expect("drop a component");
    let severity_of = |catalog: &Catalog| {
        catalog
            .diagnostics
            .iter()
            .find(|d| d.path == "tools/big.wasm")
            .map(|d| (d.severity, d.errors[0].message.clone()))
    };
    // First announced, before the debounce and the scan (which the inspector refuses)…
    let announced = next(&mut snapshots).await;
    assert_eq!(announced.generation, first.generation + 1);
    let (severity, _) = severity_of(&announced).expect("listed at once");
    assert_eq!(severity, butler_catalog::Severity::Pending, "{announced:?}");
    // …then judged by the scan.
    let judged = next(&mut snapshots).await;
    let (severity, message) = severity_of(&judged).expect("still listed");
    assert_eq!(severity, butler_catalog::Severity::Error);
    assert!(message.contains("refused by the test"), "{message}");
}
