//! Supervision with real processes: a Python HTTP server, shells that
//! spawn grandchildren, programs that fail at once. Processes are found through an
//! environment marker in `/proc/<pid>/environ`, never through the host's own answers.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Butler, assert_error, marked, marker, wait_until, write_manifest};

const LIMIT: Duration = Duration::from_secs(30);

/// A hosted extension manifest.
fn hosted(kind: &str, id: &str, hosted: Value) -> Value {
    json!({"schemaVersion": 1, "kind": kind, "id": id, "name": id, "hosted": hosted})
}

/// `sh -c SCRIPT` as an argv command.
fn sh(script: &str) -> Value {
    json!(["sh", "-c", script])
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// The board item `id` from `/overview` (tools) or `/services`.
fn item(butler: &Butler, kind: &str, id: &str) -> Value {
    let (path, key) = if kind == "tool" { ("/overview", "tools") } else { ("/services", "services") };
    let (status, body) = butler.get_json(path);
    assert_eq!(status, 200, "{body}");
    body[key].as_array().and_then(|items| items.iter().find(|i| i["id"] == id).cloned()).unwrap_or(Value::Null)
}

fn wait_state(butler: &Butler, kind: &str, id: &str, state: &str) -> Value {
    let mut last = Value::Null;
    wait_until(LIMIT, &format!("{kind} {id} to be {state}"), || {
        last = item(butler, kind, id);
        last["state"] == state
    });
    last
}

fn act(butler: &Butler, kind: &str, id: &str, action: &str) -> (u16, Value) {
    butler.post_json(&format!("/{kind}s/{id}/{action}"), &json!({}), &[])
}

/// Reads server-sent events from `path` until `done` holds for what was read (or the
/// limit passes); returns (event, data) pairs.
fn events_until(butler: &Butler, path: &str, mut done: impl FnMut(&[(String, Value)]) -> bool) -> Vec<(String, Value)> {
    let authority = butler.origin.trim_start_matches("http://").to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    stream.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
    write!(stream, "GET /myspace-butler/api{path} HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\n\r\n")
        .expect("request");
    let mut reader = BufReader::new(stream);
    let mut events = Vec::new();
    let (mut name, mut data) = (String::new(), String::new());
    let deadline = Instant::now() + LIMIT;
    let mut line = String::new();
    while Instant::now() < deadline {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) => panic!("reading the event stream: {e}"),
        }
        let text = line.trim_end_matches(['\r', '\n']);
        if let Some(rest) = text.strip_prefix("event: ") {
            name = rest.to_owned();
        } else if let Some(rest) = text.strip_prefix("data: ") {
            data.push_str(rest);
        } else if text.is_empty() && !name.is_empty() {
            events.push((std::mem::take(&mut name), serde_json::from_str(&data).unwrap_or(Value::Null)));
            data.clear();
            if done(&events) {
                return events;
            }
        }
    }
    panic!("the event stream {path} did not deliver what was expected; got {events:?}");
}

fn log_texts(events: &[(String, Value)]) -> Vec<String> {
    events.iter().filter(|(e, _)| e == "log").filter_map(|(_, d)| d["text"].as_str().map(str::to_owned)).collect()
}

#[test]
fn hosted_items_start_with_the_host_report_health_and_obey_start_stop_restart() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    let (web_port, porty_port) = (free_port(), free_port());
    let server = |port: u16| json!(["python3", "-m", "http.server", port.to_string(), "--bind", "127.0.0.1"]);
    let mut web = hosted("service", "web", json!({"command": server(web_port), "autoStart": true}));
    web["health"] = json!({"url": format!("http://127.0.0.1:{web_port}/"), "intervalMs": 1000});
    write_manifest(&w, "services/web", &web);
    write_manifest(
        &w,
        "tools/porty",
        &hosted("tool", "porty", json!({"command": server(porty_port), "port": porty_port, "autoStart": true})),
    );
    let mut checked = hosted("tool", "checked", json!({"command": ["sleep", "300"], "autoStart": true}));
    checked["health"] = json!({"exec": ["test", "-f", "healthy"], "intervalMs": 1000});
    write_manifest(&w, "tools/checked", &checked);
    write_manifest(
        &w,
        "tools/plain",
        &hosted("tool", "plain", json!({"command": ["sleep", "300"], "autoStart": true})),
    );
    write_manifest(&w, "services/manual", &hosted("service", "manual", json!({"command": ["sleep", "300"]})));
    write_manifest(
        &w,
        "tools/panel",
        &json!({"schemaVersion": 1, "kind": "tool", "id": "panel", "name": "Panel", "panelUrl": "http://127.0.0.1:1/"}),
    );
    let butler = Butler::start(&w);
    // exec: starting until its first success (and unhealthy once its start-up window of
    // 30 s has passed, so this is seen first, not after the servers below).
    wait_state(&butler, "tool", "checked", "starting");

    // url, port and no probe.
    let web = wait_state(&butler, "service", "web", "healthy");
    assert_eq!(web["health"]["detail"], "HTTP 200", "{web}");
    let pid = web["pid"].as_u64().expect("pid");
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    assert!(String::from_utf8_lossy(&cmdline).contains("http.server"), "the pid is the program itself");
    let porty = wait_state(&butler, "tool", "porty", "healthy");
    assert!(porty["health"]["detail"].as_str().is_some_and(|d| d.contains(&porty_port.to_string())), "{porty}");
    let plain = wait_state(&butler, "tool", "plain", "running");
    assert!(plain["health"].is_null() && plain["uptimeMs"].as_u64().is_some(), "{plain}");
    assert_eq!(item(&butler, "tool", "panel")["state"], "unmanaged");

    // exec: healthy after its first success, then unhealthy.
    let tool_dir = butler.workdir.join("tools/checked");
    std::fs::write(tool_dir.join("healthy"), "").expect("write");
    wait_state(&butler, "tool", "checked", "healthy");
    std::fs::remove_file(tool_dir.join("healthy")).expect("rm");
    let unhealthy = wait_state(&butler, "tool", "checked", "unhealthy");
    assert_eq!(unhealthy["health"]["ok"], false, "{unhealthy}");

    // Manual control of a service that does not start with the host.
    assert_eq!(item(&butler, "service", "manual")["state"], "stopped");
    let (status, body) = act(&butler, "service", "manual", "start");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["status"]["state"], "running", "{body}");
    let first = wait_until_pid(&butler, "service", "manual");
    assert_eq!(body["data"]["status"]["pid"], json!(first), "the start's answer carries the pid: {body}");
    let (status, body) = act(&butler, "service", "manual", "restart");
    assert_eq!(status, 200, "{body}");
    let second = wait_until_pid(&butler, "service", "manual");
    assert_ne!(first, second, "a restart runs a new process");
    assert!(!alive(first), "the first process is gone after the restart");
    let (status, body) = act(&butler, "service", "manual", "stop");
    assert_eq!(status, 200, "{body}");
    let stopped = &body["data"]["status"];
    assert_eq!(stopped["state"], "stopped", "{body}");
    assert_eq!(stopped["lastExit"]["requested"], true, "{body}");
    assert!(!alive(second), "stop waits for the process to be gone");
    // Stopping a stopped item is harmless; so is starting a running one.
    assert_eq!(act(&butler, "service", "manual", "stop").0, 200);
    let (_, again) = act(&butler, "tool", "plain", "start");
    assert_eq!(again["data"]["status"]["pid"], plain["pid"], "start on a running item changes nothing");

    // Refusals.
    let (status, body) = act(&butler, "tool", "nope", "start");
    assert_error(status, &body, 404, "unknown_extension");
    let (status, body) = act(&butler, "tool", "web", "start");
    assert_error(status, &body, 404, "unknown_extension");
    let (status, body) = act(&butler, "service", "web", "explode");
    assert_error(status, &body, 404, "unknown_action");
    let (status, body) = act(&butler, "tool", "panel", "start");
    assert_error(status, &body, 409, "not_hosted");
    let (status, body) = butler.get_json("/tools/nope/log");
    assert_error(status, &body, 404, "unknown_extension");
    let (status, body) = butler.post_json("/services/web/stop", &json!({}), &[("Origin", "http://evil.example")]);
    assert_eq!(status, 403, "{body}");
    assert_eq!(item(&butler, "service", "web")["state"], "healthy", "a cross-site stop does nothing");
}

fn wait_until_pid(butler: &Butler, kind: &str, id: &str) -> u64 {
    let mut pid = 0;
    wait_until(LIMIT, &format!("{id} to have a pid"), || {
        pid = item(butler, kind, id)["pid"].as_u64().unwrap_or(0);
        pid != 0
    });
    pid
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| !rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

#[test]
fn failing_items_back_off_and_the_delay_resets_after_a_stable_run() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    // Runs 1–3 fail at once, run 4 lasts longer than a stable run (10 s), run 5 fails at once.
    let script = r#"n=$(cat runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > runs; echo "run $n"; if [ "$n" -eq 4 ]; then sleep 11; fi; exit 1"#;
    write_manifest(&w, "tools/flaky", &hosted("tool", "flaky", json!({"command": sh(script), "autoStart": true})));
    let butler = Butler::start(&w);
    let backoff = wait_state(&butler, "tool", "flaky", "backoff");
    let (next, exited) =
        (backoff["nextRestartAt"].as_u64().expect("next"), backoff["lastExit"]["at"].as_u64().expect("at"));
    assert!(next > exited, "the next restart time is visible: {backoff}");
    assert_eq!(backoff["lastExit"]["code"], 1);

    let delays = |events: &[(String, Value)]| -> Vec<u64> {
        log_texts(events)
            .iter()
            .filter_map(|t| t.strip_prefix("exited with code 1; restarting in ")?.strip_suffix(" ms")?.parse().ok())
            .collect()
    };
    let events = events_until(&butler, "/tools/flaky/log", |events| delays(events).len() >= 5);
    assert_eq!(delays(&events)[..5], [1000, 2000, 4000, 1000, 2000], "{:?}", log_texts(&events));
    let restarts = item(&butler, "tool", "flaky")["restarts"].as_u64().expect("restarts");
    assert!(restarts >= 4, "{restarts}");
}

#[test]
fn a_host_killed_outright_leaves_no_process_behind() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    let mark = marker("sigkill");
    let env = json!({"BUTLER_TEST_MARKER": mark});
    // A child, a grandchild that left the process group with setsid, and a subshell that
    // ignores SIGTERM (so only SIGKILL ends it).
    let script = "sleep 300 & setsid sh -c 'sleep 300 & wait' & (trap '' TERM; sleep 300) & wait";
    write_manifest(
        &w,
        "tools/tree",
        &hosted("tool", "tree", json!({"command": sh(script), "env": env, "autoStart": true})),
    );
    let port = free_port();
    write_manifest(
        &w,
        "services/web",
        &hosted(
            "service",
            "web",
            json!({"command": ["python3", "-m", "http.server", port.to_string(), "--bind", "127.0.0.1"], "port": port, "env": env, "autoStart": true}),
        ),
    );
    let mut butler = Butler::start(&w);
    wait_state(&butler, "service", "web", "healthy");
    // keeper, sh, sleep, setsid sh + its sleep, the subshell's sleep (sh execs it), and
    // keeper + python.
    wait_until(LIMIT, "every marked process to run", || marked(&mark).len() >= 8);

    butler.kill();
    // By the marker, not by pid: on a busy machine a pid may already belong to someone else.
    wait_until(Duration::from_secs(20), "every marked process to be gone", || marked(&mark).is_empty());
}

#[test]
fn a_clean_stop_stops_everything_before_the_host_exits() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    let mark = marker("clean");
    let script = "sleep 300 & (trap '' TERM; sleep 300) & wait";
    write_manifest(
        &w,
        "services/tree",
        &hosted(
            "service",
            "tree",
            json!({"command": sh(script), "env": {"BUTLER_TEST_MARKER": mark}, "autoStart": true}),
        ),
    );
    let butler = Butler::start(&w);
    // keeper, sh, and its two sleeps (one ignoring SIGTERM).
    wait_until(LIMIT, "the marked processes to run", || marked(&mark).len() >= 4);
    let status = butler.stop();
    assert!(status.success(), "{status}");
    let left: Vec<String> = marked(&mark)
        .iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            format!("{} [{}]", stat.trim(), String::from_utf8_lossy(&cmdline).replace('\0', " "))
        })
        .collect();
    assert!(left.is_empty(), "still running after the host exited: {left:#?}");
}

/// Python that hides processes from a walk of parent links and from its process group,
/// each noting its pid in `pids/<kind>`: a grandchild (double fork) in a new session that
/// ignores `SIGTERM` and ends its main thread with `pthread_exit` while a worker thread
/// runs on — `/proc` shows it as a zombie —; a grandchild in a new session; a child in a
/// process group of its own. The program itself sleeps.
const ESCAPES: &str = r#"
import ctypes, os, signal, threading, time

def forked(body, double):
    if os.fork() == 0:
        if double and os.fork() != 0:
            os._exit(0)
        body()
        os._exit(0)
    if double:
        os.wait()

def note(kind):
    with open(f"pids/{kind}.tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(f"pids/{kind}.tmp", f"pids/{kind}")

def thread_only():
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=lambda: time.sleep(300)).start()
    note("thread")
    ctypes.CDLL(None).pthread_exit(None)

def session():
    os.setsid()
    note("session")
    time.sleep(300)

def group():
    os.setpgid(0, 0)
    note("group")
    time.sleep(300)

os.makedirs("pids", exist_ok=True)
forked(thread_only, double=True)
forked(session, double=True)
forked(group, double=False)
time.sleep(300)
"#;

/// SIGKILLs whatever still carries the marker when the test ends, so a failing test does
/// not leave its escapees running.
struct KillMarked(Vec<String>);

impl Drop for KillMarked {
    fn drop(&mut self) {
        for mark in &self.0 {
            for pid in marked(mark) {
                if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
        }
    }
}

/// Writes `kind`/`id` running [`ESCAPES`] with `mark`.
fn escaping_item(workdir: &Path, kind: &str, id: &str, mark: &str) {
    write_manifest(
        workdir,
        &format!("{kind}s/{id}"),
        &hosted(
            kind,
            id,
            json!({"command": ["python3", "-c", ESCAPES], "env": {"BUTLER_TEST_MARKER": mark}, "autoStart": true}),
        ),
    );
}

/// Waits until all of [`ESCAPES`]'s processes run — keeper, program, and the three that
/// hide — and checks that the one that ended its main thread is what it claims: `Z` in
/// `/proc/<pid>/stat`, in a session of its own, with a thread that runs.
fn wait_escaped(folder: &Path, mark: &str) {
    wait_until(LIMIT, "every escape to run", || {
        marked(mark).len() >= 5
            && ["thread", "session", "group"].iter().all(|kind| folder.join("pids").join(kind).exists())
    });
    let pid = std::fs::read_to_string(folder.join("pids/thread")).expect("pid file");
    let pid = pid.trim();
    wait_until(LIMIT, "its main thread to end", || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')))
    });
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let fields: Vec<&str> = stat.rsplit_once(')').expect("stat").1.split_whitespace().collect();
    assert_eq!(fields[3], pid, "it leads a session of its own: {stat}");
    assert!(marked(mark).contains(&pid.parse().expect("pid")), "it still runs, by its worker thread");
}

/// Every process still carrying `mark`, described.
fn left_behind(mark: &str) -> Vec<String> {
    marked(mark)
        .iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count);
            format!("{} ({tasks} threads)", stat.trim())
        })
        .collect()
}

#[test]
fn nothing_an_item_starts_survives_its_stop_whatever_it_does_with_sessions_groups_and_threads() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    let (stopped, at_exit) = (marker("escapes-stop"), marker("escapes-exit"));
    let _cleanup = KillMarked(vec![stopped.clone(), at_exit.clone()]);
    escaping_item(&w, "tool", "escaper", &stopped);
    escaping_item(&w, "service", "lingerer", &at_exit);
    let butler = Butler::start(&w);
    wait_escaped(&butler.workdir.join("tools/escaper"), &stopped);
    wait_escaped(&butler.workdir.join("services/lingerer"), &at_exit);

    // A stop through the API: it answers once the keeper is gone, and the keeper goes only
    // when nothing below it runs (the zombie-looking one ignores SIGTERM: SIGKILL ends it).
    let (status, body) = act(&butler, "tool", "escaper", "stop");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["status"]["state"], "stopped", "{body}");
    let left = left_behind(&stopped);
    assert!(left.is_empty(), "still running after the stop answered: {left:#?}");
    assert!(!left_behind(&at_exit).is_empty(), "the other item runs on");

    // The host's clean stop.
    let status = butler.stop();
    assert!(status.success(), "{status}");
    let left = left_behind(&at_exit);
    assert!(left.is_empty(), "still running after the host exited: {left:#?}");
}

#[test]
fn nothing_an_item_starts_survives_a_host_killed_outright_whatever_it_does_with_sessions_and_threads() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    let mark = marker("escapes-sigkill");
    let _cleanup = KillMarked(vec![mark.clone()]);
    escaping_item(&w, "tool", "escaper", &mark);
    let mut butler = Butler::start(&w);
    wait_escaped(&butler.workdir.join("tools/escaper"), &mark);
    butler.kill();
    // The keeper sees the host gone, stops its tree (SIGKILL after the grace for the one
    // that ignores SIGTERM) and only then exits.
    wait_until(Duration::from_secs(20), "every marked process to be gone", || marked(&mark).is_empty());
}

#[test]
fn logs_stream_their_backlog_then_follow_and_see_the_host_environment() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    let script = "echo one; echo two >&2; echo \"url=$BUTLER_HOST_URL legacy=$BUTLER_GUARDIAN_URL mine=$MY_VAR\"; \
                  while [ ! -f go ]; do sleep 0.05; done; echo late; sleep 300";
    write_manifest(
        &w,
        "tools/talker",
        &hosted("tool", "talker", json!({"command": sh(script), "env": {"MY_VAR": "42"}, "autoStart": true})),
    );
    let butler = Butler::start(&w);
    wait_state(&butler, "tool", "talker", "running");
    // Connect once the first lines are out: they arrive as backlog, then `live`. stdout and
    // stderr are separate pipes read apart, so `two` may land after the `url=` line.
    let mut backlog = Vec::new();
    wait_until(LIMIT, "the first lines in the backlog", || {
        backlog = events_until(&butler, "/tools/talker/log", |events| events.iter().any(|(e, _)| e == "live"));
        let texts = log_texts(&backlog);
        texts.iter().any(|t| t.starts_with("url=")) && texts.iter().any(|t| t == "two")
    });
    let texts = log_texts(&backlog);
    let url = format!("url={} legacy={} mine=42", butler.origin, butler.origin);
    assert!(texts.contains(&url), "{texts:?}");
    let two = backlog.iter().find(|(_, d)| d["text"] == "two").expect("stderr line");
    assert_eq!(two.1["stream"], "stderr");
    assert!(texts.iter().all(|t| t != "late"));

    // Follow: `late` arrives live, after `live`, on a connection opened before it was printed.
    let go = butler.workdir.join("tools/talker/go");
    let mut created = false;
    let events = events_until(&butler, "/tools/talker/log", |events| {
        if !created && events.iter().any(|(e, _)| e == "live") {
            std::fs::write(&go, "").expect("go");
            created = true;
        }
        log_texts(events).iter().any(|t| t == "late")
    });
    let live_at = events.iter().position(|(e, _)| e == "live").expect("live");
    let late_at = events.iter().position(|(_, d)| d["text"] == "late").expect("late");
    assert!(late_at > live_at, "late was followed, not replayed");
    let seqs: Vec<u64> = events.iter().filter_map(|(_, d)| d["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "no gap, no repeat: {seqs:?}");

    let file = std::fs::read_to_string(butler.workdir.join(".butler/logs/talker.log")).expect("log file");
    assert!(file.lines().any(|l| l.ends_with(" stdout late")), "{file}");
    assert!(file.lines().any(|l| l.ends_with(" stderr two")), "{file}");
}

#[test]
fn catalog_changes_restart_changed_items_and_stop_removed_ones() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    let mark = marker("changes");
    let manifest = |value: &str| {
        hosted(
            "tool",
            "changing",
            json!({"command": sh("echo mark=$MARK; sleep 300"), "env": {"MARK": value, "BUTLER_TEST_MARKER": mark}, "autoStart": true}),
        )
    };
    write_manifest(&w, "tools/changing", &manifest("a"));
    let butler = Butler::start(&w);
    let first = wait_until_pid(&butler, "tool", "changing");

    write_manifest(&butler.workdir, "tools/changing", &manifest("b"));
    let mut second = first;
    wait_until(LIMIT, "a restart with the new hosted block", || {
        second = item(&butler, "tool", "changing")["pid"].as_u64().unwrap_or(first);
        second != first
    });
    assert!(!alive(first));
    let events =
        events_until(&butler, "/tools/changing/log", |events| log_texts(events).contains(&"mark=b".to_owned()));
    assert!(log_texts(&events).contains(&"mark=a".to_owned()), "the log spans both runs");

    std::fs::remove_dir_all(butler.workdir.join("tools/changing")).expect("rm");
    wait_until(LIMIT, "the removed tool's processes to stop", || marked(&mark).is_empty());
    assert!(item(&butler, "tool", "changing").is_null());
}

#[test]
fn concurrent_requests_on_one_item_leave_exactly_one_process() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    let mark = marker("serial");
    write_manifest(
        &w,
        "services/one",
        &hosted("service", "one", json!({"command": ["sleep", "300"], "env": {"BUTLER_TEST_MARKER": mark}})),
    );
    let butler = Butler::start(&w);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let butler = &butler;
                scope.spawn(move || act(butler, "service", "one", if i % 2 == 0 { "restart" } else { "start" }))
            })
            .collect();
        for handle in handles {
            let (status, body) = handle.join().expect("thread");
            assert_eq!(status, 200, "{body}");
        }
    });
    // The keeper and `sleep`: one pair, whatever the interleaving.
    wait_until(LIMIT, "the last start's keeper and program", || marked(&mark).len() == 2);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(marked(&mark).len(), 2, "{:?}", marked(&mark));
    assert_eq!(item(&butler, "service", "one")["state"], "running");
}

#[test]
fn items_that_cannot_start_say_why() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    write_manifest(
        &w,
        "services/missing",
        &hosted("service", "missing", json!({"command": ["definitely-not-a-command-7f3a"], "autoStart": true})),
    );
    write_manifest(
        &w,
        "services/nowhere",
        &hosted("service", "nowhere", json!({"command": ["true"], "cwd": "no-such-dir", "autoStart": true})),
    );
    let butler = Butler::start(&w);
    let missing = wait_state(&butler, "service", "missing", "crashed");
    assert_eq!(missing["lastExit"]["code"], 127, "{missing}");
    let events = events_until(&butler, "/services/missing/log", |events| {
        log_texts(events).iter().any(|t| t.contains("cannot start `definitely-not-a-command-7f3a`"))
    });
    assert!(!events.is_empty());
    let nowhere = wait_state(&butler, "service", "nowhere", "crashed");
    assert!(
        nowhere["error"].as_str().is_some_and(|e| e.contains("no-such-dir") && e.contains("does not exist")),
        "{nowhere}"
    );
}

#[test]
fn failures_and_rescans_are_observed_in_the_journal_but_manual_stops_are_not() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    write_manifest(
        &w,
        "services/crashy",
        &hosted("service", "crashy", json!({"command": sh("exit 2"), "autoStart": true})),
    );
    write_manifest(&w, "tools/flappy", &hosted("tool", "flappy", json!({"command": sh("exit 3"), "autoStart": true})));
    write_manifest(
        &w,
        "services/calm",
        &hosted("service", "calm", json!({"command": ["sleep", "300"], "autoStart": true})),
    );
    let butler = Butler::start(&w);
    wait_state(&butler, "service", "calm", "running");
    let (status, body) = act(&butler, "service", "calm", "stop");
    assert_eq!(status, 200, "{body}");
    write_manifest(&butler.workdir, "tools/later", &crate::util::tool("later", "Later"));
    wait_until(LIMIT, "the new tool to be registered", || butler.ids().contains(&"later".to_owned()));
    std::fs::remove_dir_all(butler.workdir.join("tools/later")).expect("rm");

    let spool = butler.workdir.join("self/journal/spool");
    let observations = || -> Vec<Value> {
        let Ok(entries) = std::fs::read_dir(&spool) else { return Vec::new() };
        entries
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .flat_map(|text| text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect::<Vec<Value>>())
            .filter(|o: &Value| o["source"] == "butler")
            .collect()
    };
    let find = |all: &[Value], reference: &str, needle: &str| {
        all.iter().any(|o| o["ref"] == reference && o["text"].as_str().is_some_and(|t| t.contains(needle)))
    };
    let mut all = Vec::new();
    wait_until(Duration::from_secs(60), "the L0 observations", || {
        all = observations();
        find(&all, "butler://service:crashy", "crashed with exit code 2; not restarted")
            && find(&all, "butler://tool:flappy", "exit code 3; restarting in 1000 ms")
            && find(&all, "butler://catalog:later", "was added")
            && find(&all, "butler://catalog:later", "was removed")
    });
    let crash = all.iter().find(|o| o["ref"] == "butler://service:crashy").expect("crash");
    assert_eq!(crash["type"], "error");
    assert!(all.iter().filter(|o| o["ref"] == "butler://catalog:later").all(|o| o["type"] == "note"));
    assert!(!all.iter().any(|o| o["ref"] == "butler://service:calm"), "a manual stop is not an observation: {all:?}");
    assert!(!all.iter().any(|o| o["ref"] == "butler://catalog:crashy"), "the first scan is not an observation");
}
