//! Supervision in-process, on tokio's paused clock: a [`Supervisor`] reconciled from a
//! scanned temp instance runs real `sh` programs under the real keeper, while the test
//! owns time. Covered: the restart backoff doubles from [`BACKOFF_BASE`] and starts again
//! from it after a run of [`STABLE_RUN`] (but not after a shorter one); `never` is not
//! restarted; `always` restarts after a clean exit, which is not reported as a failure;
//! exit codes and signals are reported as the program ended.
//!
//! The restart delays are read from [`Event::Failed`], never measured. Waiting on the
//! event channel lets the clock auto-advance to the next restart; waiting with
//! [`until`] holds it still, so a run lasts exactly as long as the test advanced it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use butler_host::catalog::Kind;
use butler_host::supervise::policy::{BACKOFF_BASE, STABLE_RUN};
use butler_host::supervise::{Event, State, Status, Supervisor};
use butler_process::HostEnv;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::{scan, until, use_real_keeper, within, write_manifest};

/// A little more than a restart delay, so that advancing by it surely makes the restart
/// due (the timer wheel rounds deadlines to the millisecond).
const SLACK: Duration = Duration::from_millis(10);

/// A `kind` manifest with a `hosted` block that runs `sh -c script` at start-up, with
/// `restart` as its policy (or the kind's default).
fn hosted(kind: Kind, id: &str, restart: Option<&str>, script: &str) -> Value {
    let mut hosted = json!({"command": ["sh", "-c", script], "autoStart": true});
    if let Some(restart) = restart {
        hosted["restart"] = json!(restart);
    }
    json!({"schemaVersion": 1, "kind": kind.as_str(), "id": id, "name": id, "hosted": hosted})
}

/// Counts its runs in `count`, and fails with code 3 — at once, unless a file `hold-N`
/// says that run N is held: then it writes `running-N` and keeps running until
/// `release-N` appears.
const FLAKY: &str = r#"n=$(( $(cat count 2>/dev/null || echo 0) + 1 )); echo "$n" > count
if [ -e "hold-$n" ]; then
  : > "running-$n"
  while [ ! -e "release-$n" ]; do sleep 0.01; done
fi
exit 3"#;

/// A supervisor for the instance at `root`, its event receiver, and the instance
/// reconciled into it (every item there has `autoStart`, so they all run).
async fn supervise(root: &Path) -> (Arc<Supervisor>, broadcast::Receiver<Event>) {
    let supervisor = Supervisor::new(HostEnv::default(), &root.join("state"));
    let events = supervisor.events();
    supervisor.reconcile(&scan(root, None)).await;
    (supervisor, events)
}

/// The next failure supervision reports: (id, exit code, restart delay).
async fn next_failure(events: &mut broadcast::Receiver<Event>) -> (String, i32, Option<Duration>) {
    loop {
        let event = within("the next failure event", events.recv()).await.expect("the event channel is open");
        if let Event::Failed { id, code, restart_in, .. } = event {
            return (id, code, restart_in);
        }
    }
}

/// The next failure, which must be `id`'s with `code`: its restart delay.
async fn failure_of(events: &mut broadcast::Receiver<Event>, id: &str, code: i32) -> Option<Duration> {
    let (failed, got, restart_in) = next_failure(events).await;
    assert_eq!((failed.as_str(), got), (id, code), "an unexpected failure");
    restart_in
}

/// Item `id`'s status; it must be supervised.
fn status(supervisor: &Supervisor, id: &str) -> Status {
    supervisor.status(id).expect("the item is supervised")
}

/// Yields to the other tasks (the clock standing still) until `done` holds.
async fn yield_until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{what}: not so after the other tasks ran");
}

/// Lets run `n` of [`FLAKY`] (held) start after its `backoff`, keeps it running for
/// `run_for` of test time, then releases it. The clock stands still from the restart
/// until the advance, so the run lasts `run_for` exactly.
async fn hold_run(dir: &Path, n: u32, backoff: Duration, run_for: Duration) {
    tokio::time::advance(backoff + SLACK).await;
    let running = dir.join(format!("running-{n}"));
    until(&format!("run {n} to start"), move || running.exists()).await;
    tokio::time::advance(run_for).await;
    std::fs::write(dir.join(format!("release-{n}")), "").expect("release the run");
}

#[tokio::test(start_paused = true)]
async fn a_failing_tool_backs_off_doubling_and_a_stable_run_starts_the_backoff_again() {
    use_real_keeper();
    let root = tempfile::tempdir().expect("temp dir");
    let dir = write_manifest(root.path(), "tools/flaky", &hosted(Kind::Tool, "flaky", Some("on-failure"), FLAKY));
    for held in [4, 6] {
        std::fs::write(dir.join(format!("hold-{held}")), "").expect("hold a run");
    }
    let (supervisor, mut events) = supervise(root.path()).await;
    let mut seen = supervisor.events();
    let mut delays = Vec::new();

    // Runs 1–3 fail at once: 1 s, 2 s, 4 s.
    for _ in 0..3 {
        delays.push(failure_of(&mut events, "flaky", 3).await.expect("on-failure restarts it"));
    }
    assert_eq!(delays, [BACKOFF_BASE, BACKOFF_BASE * 2, BACKOFF_BASE * 4]);

    // Run 4 lasts STABLE_RUN: its failure is a new incident, back to the base delay; run 5
    // fails at once and doubles from there.
    hold_run(&dir, 4, delays[2], STABLE_RUN).await;
    delays.push(failure_of(&mut events, "flaky", 3).await.expect("restarted"));
    delays.push(failure_of(&mut events, "flaky", 3).await.expect("restarted"));

    // Run 6 lasts a second less than STABLE_RUN: still part of the loop, so it doubles on.
    hold_run(&dir, 6, delays[4], STABLE_RUN - Duration::from_secs(1)).await;
    let watched = Arc::clone(&supervisor);
    until("run 6 to end", move || {
        watched.status("flaky").is_some_and(|s| s.restarts == 5 && s.state == State::Backoff)
    })
    .await;
    delays.push(failure_of(&mut events, "flaky", 3).await.expect("restarted"));

    let secs: Vec<u64> = delays.iter().map(Duration::as_secs).collect();
    assert_eq!(secs, [1, 2, 4, 1, 2, 4], "restart delays, run by run");
    assert_eq!(std::fs::read_to_string(dir.join("count")).expect("the run count").trim(), "6");
    let now = status(&supervisor, "flaky");
    assert_eq!((now.state, now.restarts), (State::Backoff, 5), "{now:?}");
    assert!(now.next_restart_at.is_some(), "{now:?}");
    // Each start by the restart policy was announced, numbered (the observer of crash
    // loops times recoveries from these).
    let mut restarted = Vec::new();
    while let Ok(event) = seen.try_recv() {
        if let Event::Restarted { id, restarts, .. } = event {
            restarted.push((id, restarts));
        }
    }
    assert_eq!(restarted, (1..=5).map(|n| ("flaky".to_owned(), n)).collect::<Vec<_>>());
    supervisor.shutdown().await;
}

/// Counts its runs in `count` (then ends as the rest of the script says).
const COUNTED: &str = "echo $(( $(cat count 2>/dev/null || echo 0) + 1 )) > count";

#[tokio::test(start_paused = true)]
async fn exit_statuses_are_reported_as_they_were_and_never_is_not_restarted() {
    use_real_keeper();
    let root = tempfile::tempdir().expect("temp dir");
    let r = root.path();
    // (kind, id, policy, how it ends, the exit code reported, the state it is left in).
    // A service's default policy is `never`; a tool's is `on-failure`, which a clean exit
    // does not trigger.
    let items = [
        (Kind::Tool, "once", Some("never"), "exit 7", 7, State::Crashed),
        (Kind::Tool, "killed", Some("never"), "kill -KILL $$", 128 + 9, State::Crashed),
        (Kind::Service, "svc", None, "exit 5", 5, State::Crashed),
        (Kind::Tool, "clean", None, "exit 0", 0, State::Stopped),
    ];
    let folder = |kind: Kind, id: &str| r.join(format!("{}s/{id}", kind.as_str()));
    for (kind, id, restart, end, _, _) in items {
        write_manifest(
            r,
            &format!("{}s/{id}", kind.as_str()),
            &hosted(kind, id, restart, &format!("{COUNTED}; {end}")),
        );
    }
    let mut config = crate::scan_config(r);
    config.roots.push(r.join("services"));
    let catalog = butler_catalog::scan(&config, None);
    assert_eq!(catalog.extensions.len(), items.len(), "{:?}", catalog.diagnostics);
    let supervisor = Supervisor::new(HostEnv::default(), &r.join("state"));
    let mut events = supervisor.events();
    supervisor.reconcile(&catalog).await;

    // Every failure is reported once, with its code and no restart; the clean exit is not
    // a failure.
    let mut failures = BTreeMap::new();
    for _ in 0..3 {
        let (id, code, restart_in) = next_failure(&mut events).await;
        assert!(failures.insert(id.clone(), (code, restart_in)).is_none(), "{id} failed twice");
    }
    let expected: BTreeMap<String, (i32, Option<Duration>)> =
        items.iter().filter(|i| i.4 != 0).map(|i| (i.1.to_owned(), (i.4, None))).collect();
    assert_eq!(failures, expected, "(exit code, restart delay) per item");
    let watched = Arc::clone(&supervisor);
    until("the clean exit", move || watched.status("clean").is_some_and(|s| s.last_exit.is_some())).await;

    // An hour later nothing has come back.
    tokio::time::advance(Duration::from_secs(3600)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    for (kind, id, _, _, code, state) in items {
        let now = status(&supervisor, id);
        let exit = now.last_exit.clone().expect("it exited");
        assert_eq!((now.state, exit.code, exit.requested), (state, code, false), "{id}: {now:?}");
        assert_eq!((now.restarts, now.next_restart_at, now.pid), (0, None, None), "{id}: {now:?}");
        let runs = std::fs::read_to_string(folder(kind, id).join("count")).expect("the run count");
        assert_eq!(runs.trim(), "1", "{id} ran once");
    }
    assert!(events.try_recv().is_err(), "no other failure was reported");
    supervisor.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn always_restarts_after_a_clean_exit_which_is_no_failure() {
    use_real_keeper();
    let root = tempfile::tempdir().expect("temp dir");
    write_manifest(root.path(), "tools/again", &hosted(Kind::Tool, "again", Some("always"), "exit 0"));
    let (supervisor, mut events) = supervise(root.path()).await;
    let watched = Arc::clone(&supervisor);
    until("the first exit", move || watched.status("again").is_some_and(|s| s.state == State::Backoff)).await;
    let now = status(&supervisor, "again");
    assert_eq!(now.last_exit.as_ref().map(|e| e.code), Some(0), "{now:?}");
    assert!(now.next_restart_at.is_some(), "{now:?}");

    // The first delay is the base: after BACKOFF_BASE it runs again.
    tokio::time::advance(BACKOFF_BASE + SLACK).await;
    yield_until("the restart", || status(&supervisor, "again").restarts == 1).await;
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    assert!(!seen.iter().any(|e| matches!(e, Event::Failed { .. })), "a clean exit is not reported as a failure");
    assert!(matches!(&seen[..], [Event::Restarted { restarts: 1, .. }]), "{seen:?}");
    supervisor.shutdown().await;
}
