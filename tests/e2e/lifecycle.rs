//! The host's lifecycle under real use: one host per instance, no call lost to start-up
//! or to a faculty being replaced, a clean exit even with stuck calls, and calls that can
//! be observed.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Butler, butler_command, guests, instance_with_config, wait_until};

/// Every line of the journal's spool files under `workdir`.
fn journal_lines(workdir: &Path) -> Vec<Value> {
    let spool = workdir.join("self/journal/spool");
    let Ok(entries) = std::fs::read_dir(&spool) else { return Vec::new() };
    let mut lines = Vec::new();
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).expect("spool file");
        lines.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
    }
    lines
}

#[test]
fn an_observation_sent_the_instant_health_answers_is_kept() {
    // A brand-new instance: the built-in faculties are still compiling when the host
    // starts answering.
    let (butler, _dir) = Butler::start_fresh();
    let (status, health) = butler.get_json("/health");
    assert_eq!(status, 200, "{health}");
    assert!(health["faculties"]["ready"].is_boolean(), "readiness is reported: {health}");
    let (status, body) =
        butler.post_json("/observe", &json!({"source": "agent", "text": "the very first observation"}), &[]);
    assert_eq!(status, 202, "accepted, not lost to the compile: {body}");
    let journal = journal_lines(&butler.workdir);
    assert!(journal.iter().any(|o| o["text"] == "the very first observation"), "in the journal: {journal:?}");
    wait_until(Duration::from_secs(60), "every faculty ready", || {
        butler.get_json("/health").1["faculties"]["ready"] == true
    });
    let (_, health) = butler.get_json("/health");
    assert_eq!(health["faculties"]["pending"], json!([]), "{health}");
}

#[test]
fn a_second_host_on_the_same_instance_exits_at_once_and_a_killed_one_leaves_no_lock() {
    let (mut first, _dir) = Butler::start_fresh();
    let host_json = first.workdir.join(".butler/host.json");
    let before = std::fs::read_to_string(&host_json).expect("host.json of the first host");

    let home = tempfile::tempdir().expect("home");
    let started = Instant::now();
    let second = butler_command(home.path())
        .args(["serve", "--port", "0", "--workdir"])
        .arg(&first.workdir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("second serve");
    assert!(started.elapsed() < Duration::from_secs(10), "refused at once, took {:?}", started.elapsed());
    assert!(!second.status.success(), "the second host must not serve");
    let stderr = String::from_utf8_lossy(&second.stderr);
    let expected =
        format!("instance {} is already served by pid {} at {}", first.workdir.display(), first.pid(), first.origin);
    assert!(stderr.contains(&expected), "names the instance, pid and URL: {stderr}");
    assert_eq!(std::fs::read_to_string(&host_json).expect("host.json"), before, "host.json untouched");
    assert_eq!(first.get_json("/health").0, 200, "the first host still serves");

    // SIGKILL: the kernel releases the lock, and a new host starts.
    first.kill();
    let again = Butler::start(&first.workdir);
    assert_eq!(again.get_json("/health").0, 200);
    let info: Value = serde_json::from_str(&std::fs::read_to_string(&host_json).expect("host.json")).expect("json");
    assert_eq!(info["url"], json!(again.origin), "host.json is the new holder's");
    assert_eq!(again.stop().code(), Some(0));
    assert!(!host_json.exists(), "removed by its holder on a clean exit");
}

/// A config where the probe may run for a minute, so only shutdown can end its calls.
fn patient_probe() -> tempfile::TempDir {
    let dir = instance_with_config(&json!({"faculties": {"probe": {"timeoutMs": 60000}}}));
    std::fs::copy(guests::PROBE, dir.path().join("faculties/probe.wasm")).expect("copy probe");
    dir
}

#[test]
fn sigterm_exits_within_the_drain_window_even_with_stuck_calls() {
    let dir = patient_probe();
    let butler = Butler::start(dir.path());
    butler.wait_ready("probe");
    let pid = butler.pid();
    std::thread::scope(|scope| {
        // One guest spinning forever, one holding the probe's store, one waiting for it.
        let calls: Vec<_> =
            [("spin", json!({})), ("hold-write", json!({"ms": "60000"})), ("hold-write", json!({"ms": "60000"}))]
                .into_iter()
                .map(|(command, args)| {
                    let url = butler.api(&format!("/faculties/probe/commands/{command}"));
                    scope.spawn(move || {
                        butler_test_support::http::client()
                            .build()
                            .expect("client")
                            .post(url)
                            .header("content-type", "application/json")
                            .body(json!({"args": args}).to_string())
                            .timeout(Duration::from_secs(30))
                            .send()
                            .map(|r| r.status().as_u16())
                    })
                })
                .collect();
        wait_until(Duration::from_secs(10), "three calls in flight", || {
            butler.faculty("probe").is_some_and(|f| f["calls"]["inFlight"] == 3)
                && butler.get_json("/faculties").1["runtime"]["inFlight"] == 3
        });
        let started = Instant::now();
        let status = butler.stop();
        let took = started.elapsed();
        assert!(took < Duration::from_secs(9), "exited {took:?} after SIGTERM (drain window 5 s)");
        assert_eq!(status.code(), Some(0), "a clean exit");
        for call in calls {
            // Each stuck call got an answer (503 shutting_down) or its connection closed.
            if let Ok(status) = call.join().expect("caller thread") {
                assert!(status == 503 || status == 504, "abandoned call answered {status}");
            }
        }
    });
    let leftover = std::process::Command::new("pgrep").args(["-P", &pid.to_string()]).output().expect("pgrep");
    assert!(leftover.stdout.is_empty(), "nothing left running: {:?}", String::from_utf8_lossy(&leftover.stdout));
}

/// `component` with a custom section appended: the same code under a new content hash,
/// so the host compiles it anew.
fn recompiled_copy(component: &str, tag: &str) -> Vec<u8> {
    let mut bytes = std::fs::read(component).expect("component");
    let name = format!("butler-test-{tag}");
    let mut payload = vec![u8::try_from(name.len()).expect("short name")];
    payload.extend_from_slice(name.as_bytes());
    payload.extend_from_slice(&[0; 64]);
    bytes.push(0); // custom section
    bytes.push(u8::try_from(payload.len()).expect("short section"));
    bytes.extend_from_slice(&payload);
    bytes
}

#[test]
fn a_replaced_faculty_serves_its_previous_version_until_the_new_one_is_ready() {
    let dir = instance_with_config(&json!({}));
    let path = dir.path().join("faculties/probe.wasm");
    std::fs::copy(guests::PROBE, &path).expect("copy probe");
    let butler = Butler::start(dir.path());
    butler.wait_ready("probe");
    let compiles = |b: &Butler| b.get_json("/faculties").1["runtime"]["compiles"].as_u64().expect("compiles");
    let before = compiles(&butler);

    // Replace it (atomically, as an editor or a copy tool does) while calls keep coming.
    let staged = dir.path().join("faculties/.probe.wasm.new");
    std::fs::write(&staged, recompiled_copy(guests::PROBE, "v2")).expect("stage");
    std::fs::rename(&staged, &path).expect("replace");
    let started = Instant::now();
    let mut calls = 0;
    while compiles(&butler) == before || calls < 20 {
        let (status, body) = butler.command("probe", "ok", &json!({}));
        assert_eq!(status, 200, "call {calls} during the replacement: {body}");
        calls += 1;
        assert!(started.elapsed() < Duration::from_secs(60), "the new version never compiled");
    }
    wait_until(Duration::from_secs(30), "the new version registered", || {
        !butler.catalog()["diagnostics"].as_array().expect("diagnostics").iter().any(|d| d["severity"] == "pending")
    });
    let (status, _) = butler.command("probe", "ok", &json!({}));
    assert_eq!(status, 200);
    eprintln!("{calls} calls answered by the previous version while the new one compiled");
}

#[test]
fn every_call_is_counted_and_logged_under_its_faculty() {
    let dir = instance_with_config(
        &json!({"faculties": {"probe": {"timeoutMs": 1500}}, "pipeline": {"routes": {"probe": "probe"}}}),
    );
    std::fs::copy(guests::PROBE, dir.path().join("faculties/probe.wasm")).expect("copy probe");
    let log = dir.path().join("host.log");
    let butler = Butler::start_logging(dir.path(), "info,faculty::probe=debug", &log);
    butler.wait_ready("probe");
    assert_eq!(butler.command("probe", "ok", &json!({})).0, 200);
    assert_eq!(butler.command("probe", "fail", &json!({})).0, 422);
    assert_eq!(butler.command("probe", "spin", &json!({})).0, 504);
    // A nested call: probe.call → probe.ok through the host.
    let (status, body) = butler.command("probe", "call", &json!({"action": "probe.ok", "args": "{}"}));
    assert_eq!(status, 200, "{body}");

    let calls = butler.faculty("probe").expect("listed")["calls"].clone();
    assert_eq!(calls["total"], 5, "four calls and one nested: {calls}");
    assert_eq!(calls["inFlight"], 0, "{calls}");
    assert_eq!(calls["failures"], json!({"probe_failed": 1, "timeout": 1}), "{calls}");
    assert!(calls["maxMs"].as_f64().expect("maxMs") >= 1400.0, "the spin ran to its deadline: {calls}");
    assert!(calls["p50Ms"].as_f64().expect("p50Ms") < 1400.0, "{calls}");
    assert_eq!(butler.get_json("/faculties").1["runtime"]["inFlight"], 0);

    drop(butler);
    let text = std::fs::read_to_string(&log).expect("host log");
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("faculty::probe") && l.contains("call probe/")).collect();
    assert!(
        lines.iter().any(|l| l.contains("call probe/ok parent=probe/call") && l.contains("outcome=ok")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("call probe/spin parent=-") && l.contains("outcome=timeout")),
        "{lines:#?}"
    );
    assert!(lines.iter().any(|l| l.contains("call probe/fail") && l.contains("outcome=probe_failed")), "{lines:#?}");
}
