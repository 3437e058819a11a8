//! Exhaustion: what a misbehaving extension or client can throw at the host — a provider's
//! `list_changed` storm, more silent connections than the host serves, a faculty logging as
//! fast as it can, 64 hosted processes flooding stdout — costs it neither its memory (RSS,
//! `VmRSS` of `/proc/<pid>/status`, back within [`RSS_SLACK_KB`] of its baseline) nor its
//! answers to everyone else, and each is bounded where the docs say it is.
//!
//! Not timings: a deadline here is a correctness bound (a request that outlives it hangs).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Butler, guests, instance_with_config, wait_until, write_manifest};

/// How far above its baseline the host's RSS may stay once a storm is over.
const RSS_SLACK_KB: u64 = 50 * 1024;
/// A request that takes longer than this hangs.
const DEADLINE: Duration = Duration::from_secs(10);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `VmRSS` of process `pid`, in KiB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Samples the RSS of `pid` every 20 ms while `running`; the peak.
fn sample_peak(pid: u32, running: &AtomicBool, peak: &AtomicU64) {
    while running.load(Ordering::SeqCst) {
        peak.fetch_max(rss_kb(pid), Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to `limit` for the RSS of `pid` to come back within the slack; the last value.
fn settled_rss(pid: u32, baseline: u64, limit: Duration) -> u64 {
    let until = Instant::now() + limit;
    loop {
        let now = rss_kb(pid);
        if now <= baseline + RSS_SLACK_KB || Instant::now() > until {
            return now;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

// ---------------------------------------------------------------------------------------
// A list_changed storm

/// A minimal Streamable HTTP MCP client.
struct Mcp<'a> {
    butler: &'a Butler,
    client: reqwest::blocking::Client,
    session: String,
    next: u64,
}

impl<'a> Mcp<'a> {
    fn connect(butler: &'a Butler) -> Self {
        let client = butler_test_support::http::client().timeout(Duration::from_secs(60)).build().expect("client");
        let mut mcp = Self { butler, client, session: String::new(), next: 0 };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "exhaustion", "version": "1"}}});
        let response = mcp.post(&init).expect("initialize");
        assert_eq!(response.status(), 200);
        mcp.session = response.headers()["mcp-session-id"].to_str().expect("session").to_owned();
        mcp.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).expect("initialized");
        mcp
    }

    fn post(&self, body: &Value) -> reqwest::Result<reqwest::blocking::Response> {
        let mut request = self
            .client
            .post(self.butler.api("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if !self.session.is_empty() {
            request = request.header("mcp-session-id", &self.session);
        }
        request.send()
    }

    /// The JSON-RPC answer to `method`.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        let answer: Value = self.post(&body).expect("request").json().expect("JSON answer");
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        answer["result"].clone()
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn provider_status(butler: &Butler, id: &str) -> Value {
    let (_, status) = butler.get_json("/mcp/status");
    status["providers"].as_array().and_then(|p| p.iter().find(|p| p["id"] == id).cloned()).unwrap_or(Value::Null)
}

fn mcp_provider(id: &str, script: &str, env: Value) -> Value {
    let script = root().join("tests/providers").join(script).display().to_string();
    json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id,
           "mcp": {"transport": "stdio", "command": ["python3", script], "env": env, "timeoutSec": 30}})
}

/// A provider sends 100,000 `notifications/tools/list_changed` (8 KiB each) as fast as it
/// can while another provider is being called: the notifications are coalesced into a few
/// relists, the flood is stopped once it passes 1,000 in 10 s — with the reason in its
/// status and in the error of the call in flight on it — the other provider answers every
/// call meanwhile, and the host's RSS is back within 50 MB of what it was before.
#[test]
fn a_list_changed_storm_is_coalesced_then_stopped_and_costs_the_others_nothing() {
    let dir = instance_with_config(&json!({}));
    let storm_log = dir.path().join("storm.log");
    let calm_log = dir.path().join("calm.log");
    write_manifest(
        dir.path(),
        "tools/storm",
        &mcp_provider("storm", "storm_mcp.py", json!({"STORM_MCP_LOG": storm_log.display().to_string()})),
    );
    write_manifest(
        dir.path(),
        "tools/calm",
        &mcp_provider("calm", "fake_mcp.py", json!({"FAKE_MCP_LOG": calm_log.display().to_string()})),
    );
    let butler = Butler::start_logging(dir.path(), "info", &dir.path().join("host.log"));
    let mut client = Mcp::connect(&butler);
    let tools = client.request("tools/list", json!({}));
    let names: Vec<&str> =
        tools["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"storm__storm") && names.contains(&"calm__echo"), "{names:?}");
    for i in 0..20 {
        assert_eq!(text_of(&client.call("calm__echo", json!({"text": format!("warm {i}")}))), format!("warm {i}"));
    }
    let storm_pid = provider_status(&butler, "storm")["pid"].as_u64().expect("storm runs") as u32;
    let relists_before = std::fs::read_to_string(&storm_log).expect("log").matches("tools/list").count();
    std::thread::sleep(Duration::from_millis(500));
    let baseline = rss_kb(butler.pid());

    let (running, peak) = (AtomicBool::new(true), AtomicU64::new(baseline));
    let calm = Mutex::new((0u32, Duration::ZERO, Vec::<String>::new()));
    let started = Instant::now();
    let storm = std::thread::scope(|scope| {
        scope.spawn(|| sample_peak(butler.pid(), &running, &peak));
        scope.spawn(|| {
            let mut other = Mcp::connect(&butler);
            let mut n = 0;
            while running.load(Ordering::SeqCst) {
                n += 1;
                let asked = Instant::now();
                let text = text_of(&other.call("calm__echo", json!({"text": format!("calm {n}")})));
                let took = asked.elapsed();
                let mut calm = calm.lock().expect("lock");
                calm.0 += 1;
                calm.1 = calm.1.max(took);
                if text != format!("calm {n}") || took > DEADLINE {
                    calm.2.push(format!("call {n}: {text:?} after {took:?}"));
                }
            }
        });
        let storm = client.call("storm__storm", json!({"count": 100_000, "padBytes": 8192}));
        // The other provider keeps answering after the storm too.
        std::thread::sleep(Duration::from_millis(500));
        running.store(false, Ordering::SeqCst);
        storm
    });
    let storm_took = started.elapsed();

    assert_eq!(storm["isError"], true, "the call in flight on the stopped provider fails: {storm}");
    assert!(text_of(&storm).contains("more than 1000 notifications"), "{storm}");
    let status = provider_status(&butler, "storm");
    assert_eq!(status["state"], "stopped", "{status}");
    assert!(
        status["lastError"].as_str().is_some_and(|e| e.contains("more than 1000 notifications within 10 s")),
        "the reason is in its status: {status}"
    );
    wait_until(DEADLINE, "the flooding provider's process to be gone", || {
        std::fs::read_to_string(format!("/proc/{storm_pid}/stat"))
            .map_or(true, |s| s.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')))
    });
    let relists = std::fs::read_to_string(&storm_log).expect("log").matches("tools/list").count() - relists_before;
    assert!(relists <= 100, "1,001 notifications were coalesced into a few relists, not {relists}");

    let (calls, slowest, wrong) = calm.into_inner().expect("lock");
    assert!(wrong.is_empty(), "the other provider's calls during the storm: {wrong:?}");
    assert!(calls >= 5, "the other provider was called throughout: {calls} calls");
    assert_eq!(text_of(&client.call("calm__echo", json!({"text": "after"}))), "after");
    assert_eq!(provider_status(&butler, "calm")["state"], "ready");

    let peak = peak.load(Ordering::SeqCst);
    let after = settled_rss(butler.pid(), baseline, Duration::from_secs(5));
    eprintln!(
        "storm: stopped after {storm_took:?}, {relists} relists, {calls} calls to the other provider \
         (slowest {slowest:?}); RSS baseline {baseline} kB, peak {peak} kB, after {after} kB"
    );
    assert!(after <= baseline + RSS_SLACK_KB, "RSS after the storm {after} kB, baseline {baseline} kB");
}

// ---------------------------------------------------------------------------------------
// Silent and half-sent connections

/// The host's connection cap: half its soft open-file limit, between 8 and 512
/// (`http::listen::connection_cap`).
fn connection_cap(pid: u32) -> usize {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("open files");
    let soft: usize = line.split_whitespace().nth(3).and_then(|s| s.parse().ok()).unwrap_or(usize::MAX);
    (soft / 2).clamp(8, 512)
}

/// `GET /health` over the host's Unix socket; the status (0: no answer within 5 s).
fn health_over_local_socket(workdir: &Path) -> (u16, String) {
    let Ok(mut stream) = std::os::unix::net::UnixStream::connect(workdir.join(".butler/host.sock")) else {
        return (0, "cannot connect".to_owned());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ =
        stream.write_all(b"GET /myspace-butler/api/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    (text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), text)
}

/// More connections than the host serves, a third of them silent, a third stopping halfway
/// through a request head and a third after the first byte of a body: the ones past the
/// cap are refused at once with `503 too_many_connections`, the local socket serves
/// meanwhile (its slots are its own), a
/// rescan still registers a newcomer and unregisters nothing, and every held connection is
/// closed by the host once its head or its body has not arrived within 10 s (a body's
/// request answered, saying so) — after which the host serves again over TCP and its local
/// socket.
#[test]
fn silent_connections_past_the_cap_are_refused_then_closed_after_the_header_timeout() {
    let dir = tempfile::tempdir().expect("temp");
    let butler = Butler::start_logging(&dir.path().join("instance"), "info", &dir.path().join("host.log"));
    // A client that keeps no connection open: every slot is for the test's own.
    let unpooled = butler_test_support::http::client().pool_max_idle_per_host(0).build().expect("client");
    let ids = || -> Vec<String> {
        let catalog: Value = unpooled.get(butler.api("/catalog")).send().and_then(|r| r.json()).expect("catalog");
        catalog["extensions"]
            .as_array()
            .expect("extensions")
            .iter()
            .filter_map(|e| e["id"].as_str().map(str::to_owned))
            .collect()
    };
    write_manifest(&butler.workdir, "tools/one", &crate::util::tool("one", "One"));
    wait_until(DEADLINE, "tool one registered", || ids().contains(&"one".to_owned()));
    let ids_before = ids();
    let cap = connection_cap(butler.pid());
    let authority = butler.origin.trim_start_matches("http://").to_owned();

    let token = butler.owner_token();
    let opening = Instant::now();
    let mut held = Vec::new();
    for i in 0..cap {
        let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
        let path = if i % 6 == 2 { "/myspace-butler/api/mcp" } else { "/myspace-butler/api/pipeline" };
        match i % 3 {
            1 => {
                let half = format!("GET /myspace-butler/api/health HTTP/1.1\r\nHost: {authority}\r\nX-Half: ");
                stream.write_all(half.as_bytes()).expect("half a head");
            }
            // A whole head, then a body that stops after its first byte: on the hub's path
            // and on the router's.
            2 => {
                let head = format!(
                    "POST {path} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{"
                );
                stream.write_all(head.as_bytes()).expect("a head and a byte");
            }
            _ => {}
        }
        held.push((Instant::now(), stream, i, Vec::new()));
    }
    let opened = opening.elapsed();
    // Past the cap: refused at once, readable.
    for _ in 0..16 {
        let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
        stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 503") && answer.contains("too_many_connections"), "{answer:?}");
    }
    // The owner's CLI has slots of its own.
    let (status, answer) = health_over_local_socket(&butler.workdir);
    assert_eq!(status, 200, "the local socket serves while the TCP cap is full: {answer:?}");
    write_manifest(&butler.workdir, "tools/newcomer", &crate::util::tool("newcomer", "Newcomer"));

    // The host closes every held connection once the header timeout is over: each is
    // watched until it reads end-of-file, and how long it lived is kept.
    let mut lived = Vec::new();
    for (_, stream, _, _) in &held {
        stream.set_nonblocking(true).expect("nonblocking");
    }
    let give_up = Instant::now() + Duration::from_secs(10) + DEADLINE + opened;
    while !held.is_empty() && Instant::now() < give_up {
        held.retain_mut(|(since, stream, i, got)| {
            let mut buf = [0u8; 4096];
            match stream.read(&mut buf) {
                Ok(0) => {
                    lived.push((since.elapsed(), *i, String::from_utf8_lossy(got).into_owned()));
                    false
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => true,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    true
                }
                Err(e) => {
                    lived.push((since.elapsed(), *i, format!("{e}: {}", String::from_utf8_lossy(got))));
                    false
                }
            }
        });
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(held.is_empty(), "{} held connections still open after {:?}", held.len(), give_up - opening);
    lived.sort();
    let early: Vec<_> = lived.iter().filter(|(t, _, _)| *t < Duration::from_millis(9500)).collect();
    assert!(early.is_empty(), "closed before the 10 s header timeout: {early:?}");
    // A stalled body is answered, saying why, before its connection closes.
    let stalled: Vec<_> = lived.iter().filter(|(_, i, _)| i % 3 == 2).collect();
    assert!(!stalled.is_empty());
    for (_, i, got) in &stalled {
        assert!(got.contains("did not all arrive within 10 s"), "connection {i}: {got:?}");
    }
    let (first, last) = (lived[0].0, lived[lived.len() - 1].0);
    assert!(first >= Duration::from_millis(9500), "not before the 10 s header timeout: {first:?}");
    assert!(last <= Duration::from_secs(10) + DEADLINE, "every held connection closed in time: {last:?}");

    let (status, body) = butler.get_json("/health");
    assert_eq!((status, &body["ok"]), (200, &json!(true)), "{body}");
    let (status, answer) = health_over_local_socket(&butler.workdir);
    assert_eq!(status, 200, "{answer}");
    wait_until(DEADLINE, "the newcomer registered", || butler.ids().contains(&"newcomer".to_owned()));
    let ids_after = butler.ids();
    for id in &ids_before {
        assert!(ids_after.contains(id), "{id} is still registered: {ids_after:?}");
    }
    eprintln!("silent: cap {cap}, opened in {opened:?}; held connections closed after {first:?} … {last:?}");
}

// ---------------------------------------------------------------------------------------
// A faculty's log flood

/// The probe writes a 10,000-byte line and then 100,000 `host.log` lines as fast as it
/// can: the host's log keeps its burst (1,000) and then 100 lines a second; every line
/// dropped is counted — the counts said in the log and the lines that passed add up to
/// exactly what the probe wrote — and the long line is cut at 4 KiB. The limit is the
/// probe's own: the distill faculty's lines right after the flood all pass.
#[test]
fn a_faculty_log_flood_is_rate_and_size_limited_and_the_drops_are_counted() {
    const FLOOD: usize = 100_000;
    const CLAIMS: usize = 3;
    let dir = tempfile::tempdir().expect("temp");
    let workdir = dir.path().join("instance");
    let log = dir.path().join("host.log");
    let first = Butler::start_logging(&workdir, "info", &dir.path().join("first.log"));
    first.wait_optimized("distill");
    drop(first);
    let config_path = workdir.join("butler.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&config_path).expect("config")).expect("JSON");
    config["faculties"]["probe"] = json!({"timeoutMs": 30_000});
    std::fs::write(&config_path, config.to_string()).expect("config");
    std::fs::copy(guests::PROBE, workdir.join("faculties/probe.wasm")).expect("copy probe");
    let butler = Butler::start_logging(&workdir, "info", &log);
    butler.wait_ready("probe");
    butler.wait_ready("distill");

    let started = Instant::now();
    let (status, body) = butler.command("probe", "log-flood", &json!({"count": FLOOD.to_string()}));
    let flood_took = started.elapsed();
    assert_eq!((status, &body["data"]["logged"]), (200, &json!(FLOOD + 1)), "{body}");
    // Another faculty logs while the probe's budget is spent.
    for i in 0..CLAIMS {
        let observed = butler.post_json("/observe", &json!({"source": "flood", "text": format!("fact {i}")}), &[]);
        assert_eq!(observed.0, 202, "{}", observed.1);
        let (status, body) =
            butler.post_json("/pipeline", &json!({"action": "distill.claim", "args": {"limit": 1}}), &[]);
        assert_eq!((status, body["data"]["items"].as_array().map(Vec::len)), (200, Some(1)), "{body}");
    }
    // The next line that passes says how many were dropped before it.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(butler.command("probe", "ok", &json!({})).0, 200);
    let (status, _) = butler.get_json("/health");
    assert_eq!(status, 200);
    drop(butler);

    let text = std::fs::read_to_string(&log).expect("host log");
    let probe: Vec<&str> = text.lines().filter(|l| l.contains("faculty::probe")).collect();
    let end = probe.iter().position(|l| l.contains("probe ran ok")).expect("the probe's line after the flood");
    let (during, _) = probe.split_at(end);
    let passed =
        during.iter().filter(|l| l.contains("flood line ") || l.contains("LLLL") || l.contains("probe ran")).count();
    let dropped: usize = during
        .iter()
        .filter_map(|l| {
            l.split_once(" log lines dropped").and_then(|(head, _)| head.rsplit(' ').next()?.parse::<usize>().ok())
        })
        .sum();
    let long = during.iter().find(|l| l.contains("LLLL")).expect("the long line");
    eprintln!(
        "log flood: {} lines in {flood_took:?}; {passed} passed, {dropped} dropped; host log {} bytes",
        FLOOD + 2,
        text.len()
    );
    assert!(long.contains("(5904 bytes cut)") && long.len() < 4096 + 300, "cut at 4 KiB: {} bytes", long.len());
    assert_eq!(passed + dropped, FLOOD + 2, "every line the probe wrote passed or was counted as dropped");
    let allowed = 1000 + (flood_took.as_secs_f64() * 100.0).ceil() as usize + 1;
    assert!(passed >= 1000 && passed <= allowed, "the burst, then 100 a second: {passed} passed, {allowed} allowed");
    assert!(text.len() < 2 << 20, "the host log stays small: {} bytes", text.len());
    let claimed = text.lines().filter(|l| l.contains("faculty::distill") && l.contains("claimed batch")).count();
    assert_eq!(claimed, CLAIMS, "the distill faculty's own lines all passed");
}

// ---------------------------------------------------------------------------------------
// 64 stdout floods

/// Items flooding at once.
const FLOODERS: usize = 64;
/// How long each floods.
const FLOOD_SECS: u32 = 3;
/// `logs::FILE_CAP_BYTES` and `logs::MAX_LINE_BYTES`: a file may pass its cap by one line.
const FILE_CAP: u64 = 4 * 1024 * 1024 + 16 * 1024 + 64;

/// The backlog of `GET /tools/ID/log` (its `log` events before the `live` one): how many
/// lines, the `seq` of the first and of the last, and the bytes of their text.
fn backlog(butler: &Butler, id: &str) -> (u64, u64, u64, usize) {
    let response = butler.get(&format!("/tools/{id}/log")).timeout(DEADLINE).send().expect("log stream");
    let (mut lines, mut first, mut last, mut bytes) = (0, 0, 0, 0);
    for line in BufReader::new(response).lines() {
        let line = line.expect("line");
        if line == "event: live" {
            return (lines, first, last, bytes);
        }
        if let Some(data) = line.strip_prefix("data: ") {
            let data: Value = serde_json::from_str(data).expect("a log line");
            lines += 1;
            last = data["seq"].as_u64().expect("seq");
            if lines == 1 {
                first = last;
            }
            bytes += data["text"].as_str().map_or(0, str::len);
        }
    }
    panic!("no live event");
}

/// RSS of the host in kB: before, at the peak of, and after the floods.
struct Rss {
    baseline: u64,
    peak: u64,
    after: u64,
}

/// 64 hosted tools print `line` to stdout as fast as they can for 3 s, all at once
/// (`timeout 3 yes LINE`, or with `repeat` the line made of LINE that many times): the
/// host answers `/health` within its deadline throughout, each item's log file stays within
/// its 4 MiB cap (rotated to `.log.1`), the backlog a late reader gets is the last 1,000
/// lines. Returns the host's RSS before, at the peak, and once the floods are over.
fn stdout_floods(label: &str, line: &str, repeat: usize) -> Rss {
    let dir = instance_with_config(&json!({}));
    let ids: Vec<String> = (0..FLOODERS).map(|i| format!("flood-{i:02}")).collect();
    for id in &ids {
        let script = format!("line=$(printf '%.0s{line}' $(seq {repeat})); timeout {FLOOD_SECS} yes \"$line\"; exit 0");
        write_manifest(
            dir.path(),
            &format!("tools/{id}"),
            &json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id,
                    "hosted": {"command": ["sh", "-c", script], "restart": "never"}}),
        );
    }
    let butler = Butler::start_logging(dir.path(), "info", &dir.path().join("host.log"));
    wait_until(DEADLINE, "every flooder registered", || butler.ids().len() == FLOODERS);
    std::thread::sleep(Duration::from_secs(1));
    let pid = butler.pid();
    let baseline = rss_kb(pid);

    let (running, peak) = (AtomicBool::new(true), AtomicU64::new(baseline));
    let health = Mutex::new((0u32, Duration::ZERO, Vec::<String>::new()));
    let client = butler_test_support::http::client().timeout(DEADLINE).build().expect("client");
    let started = Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| sample_peak(pid, &running, &peak));
        scope.spawn(|| {
            while running.load(Ordering::SeqCst) {
                let asked = Instant::now();
                let answer = client.get(butler.api("/health")).send().map(|r| r.status().as_u16());
                let took = asked.elapsed();
                let mut health = health.lock().expect("lock");
                health.0 += 1;
                health.1 = health.1.max(took);
                if !matches!(answer, Ok(200)) {
                    health.2.push(format!("{answer:?} after {took:?}"));
                }
                drop(health);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let starters: Vec<_> = ids
            .chunks(FLOODERS / 8)
            .map(|chunk| {
                let client = &client;
                let butler = &butler;
                scope.spawn(move || {
                    for id in chunk {
                        let response = client.post(butler.api(&format!("/tools/{id}/start"))).send().expect("start");
                        assert_eq!(response.status(), 200, "start {id}");
                    }
                })
            })
            .collect();
        for starter in starters {
            starter.join().expect("starter");
        }
        wait_until(Duration::from_secs(60), "every flood to end", || {
            let (_, overview) = butler.get_json("/overview");
            overview["tools"].as_array().is_some_and(|tools| {
                tools.iter().all(|t| {
                    t["lastExit"].is_object() && !["starting", "running"].contains(&t["state"].as_str().unwrap_or(""))
                })
            })
        });
        running.store(false, Ordering::SeqCst);
    });
    let floods_took = started.elapsed();

    let (asked, slowest, failed) = health.into_inner().expect("lock");
    assert!(failed.is_empty(), "/health during the floods: {failed:?}");
    let logs = butler.workdir.join(".butler/logs");
    let mut total = 0;
    for id in &ids {
        for name in [format!("{id}.log"), format!("{id}.log.1")] {
            let size = std::fs::metadata(logs.join(&name)).map_or(0, |m| m.len());
            assert!(size <= FILE_CAP, "{name} is {size} bytes, past its cap");
            total += size;
        }
    }
    let (mut backlog_bytes, mut printed) = (0, 0);
    for id in &ids[..4] {
        let (lines, first, last, bytes) = backlog(&butler, id);
        assert!(lines <= 1000 && last - first + 1 == lines, "{id}: the backlog is {lines} lines, {first}..={last}");
        backlog_bytes = backlog_bytes.max(bytes);
        printed = printed.max(last);
    }
    let peak = peak.load(Ordering::SeqCst);
    let after = settled_rss(pid, baseline, Duration::from_secs(10));
    eprintln!(
        "stdout floods ({label}, lines of {} bytes): {FLOODERS} × {FLOOD_SECS} s done after {floods_took:?}; \
         {asked} health checks, slowest {slowest:?}; log files {total} bytes in all, backlogs up to \
         {backlog_bytes} bytes (of up to {printed} lines); \
         RSS baseline {baseline} kB, peak {peak} kB, after {after} kB",
        line.len() * repeat
    );
    Rss { baseline, peak, after }
}

/// [`stdout_floods`] of 100-byte lines; the host's RSS comes back within 50 MB.
#[test]
fn sixty_four_stdout_floods_keep_the_host_answering_and_its_memory_bounded() {
    let line = "flood: the quick brown fox jumps over the lazy dog, line after line, as fast as a pipe takes it!";
    let Rss { baseline, peak, after } = stdout_floods("short", line, 1);
    assert!(
        after <= baseline + RSS_SLACK_KB,
        "RSS after the floods {after} kB, baseline {baseline} kB, peak {peak} kB"
    );
}

/// [`stdout_floods`] of lines longer than the 16 KiB a log line is cut at, so every line
/// kept is a full 16 KiB piece; the host's RSS comes back within 50 MB.
#[test]
fn sixty_four_floods_of_long_lines_keep_the_host_memory_bounded() {
    let Rss { baseline, peak, after } = stdout_floods("long", "0123456789abcdef", 1100);
    assert!(
        after <= baseline + RSS_SLACK_KB,
        "RSS after the floods {after} kB, baseline {baseline} kB, peak {peak} kB"
    );
}
