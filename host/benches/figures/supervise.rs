//! Supervision figures (no B-id in the brief; named by what they measure): time from
//! `start` to the program running, the host's RSS with 50 supervised processes, and log
//! throughput to an SSE client.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Host, http, line, line_in, mib, note, percentiles, poll, status_kib};

fn write_service(root: &Path, id: &str, hosted: &Value) {
    let dir = root.join("services").join(id);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let manifest = json!({"schemaVersion": 1, "kind": "service", "id": id, "name": id, "hosted": hosted});
    std::fs::write(dir.join("butler.json"), manifest.to_string()).expect("manifest");
    if !root.join("butler.json").exists() {
        std::fs::write(root.join("butler.json"), "{}").expect("root config");
    }
}

/// The program the keeper leading `group` runs, once it has exec'd `comm`.
fn exec_done(group: u32, comm: &str) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{group}/task/{group}/children")).ok()?;
    let pid: u32 = children.split_ascii_whitespace().next()?.parse().ok()?;
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    (name.trim() == comm).then_some(pid)
}

fn services(host: &Host) -> Vec<Value> {
    let (status, body) = host.http("GET", "/services", None);
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).expect("json")["services"].as_array().cloned().unwrap_or_default()
}

/// P1: `POST /services/x/start` until the program (`sleep`) has exec'd, against spawning
/// the same program directly until it has exec'd.
pub fn p1_start_to_running() {
    const RUNS: usize = 30;
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    write_service(&root, "trivial", &json!({"command": ["sleep", "300"]}));
    let host = Host::start_quiet(&root);
    poll(Duration::from_secs(30), Duration::from_millis(5), || (!services(&host).is_empty()).then_some(()))
        .expect("the service is listed");
    let (mut took, mut base) = (Vec::new(), Vec::new());
    for run in 0..RUNS + 3 {
        let start = Instant::now();
        let (status, body) = http(host.authority(), "POST", "/services/trivial/start", Some("{}"));
        assert_eq!(status, 200, "{body}");
        let answer: Value = serde_json::from_str(&body).expect("json");
        let group = u32::try_from(answer["data"]["status"]["pgid"].as_u64().expect("pgid")).expect("pid");
        poll(Duration::from_secs(10), Duration::from_micros(50), || exec_done(group, "sleep")).expect("sleep runs");
        let elapsed = start.elapsed();
        let (status, body) = http(host.authority(), "POST", "/services/trivial/stop", Some("{}"));
        assert_eq!(status, 200, "{body}");

        let start = Instant::now();
        let mut child = Command::new("sleep").arg("300").spawn().expect("spawn sleep");
        let pid = child.id();
        poll(Duration::from_secs(10), Duration::from_micros(50), || {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).ok().filter(|c| c.trim() == "sleep")
        })
        .expect("sleep runs");
        let direct = start.elapsed();
        let _ = child.kill();
        let _ = child.wait();
        if run >= 3 {
            took.push(elapsed);
            base.push(direct);
        }
    }
    let (p50, _) = percentiles(took);
    let (base50, _) = percentiles(base);
    line(
        &format!("P1 POST start → program running, trivial process (p50 of {RUNS}; baseline = direct spawn)"),
        p50,
        base50,
    );
}

/// P2: the host's RSS with 50 supervised processes running, against the same host with none.
pub fn p2_memory_with_50() {
    const ITEMS: usize = 50;
    let idle_dir = tempfile::tempdir().expect("temp");
    let idle_root = idle_dir.path().join("instance");
    std::fs::create_dir_all(&idle_root).expect("mkdir");
    std::fs::write(idle_root.join("butler.json"), "{}").expect("root");
    let idle = Host::start_quiet(&idle_root);
    std::thread::sleep(Duration::from_secs(2));
    let idle_rss = status_kib(idle.pid(), "VmRSS");
    drop(idle);

    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    for i in 0..ITEMS {
        write_service(&root, &format!("s{i:02}"), &json!({"command": ["sleep", "300"], "autoStart": true}));
    }
    let host = Host::start_quiet(&root);
    poll(Duration::from_secs(60), Duration::from_millis(20), || {
        let listed = services(&host);
        (listed.len() == ITEMS && listed.iter().all(|s| s["state"] == "running" && s["pid"].is_u64())).then_some(())
    })
    .expect("all 50 running");
    std::thread::sleep(Duration::from_secs(2));
    let rss = status_kib(host.pid(), "VmRSS");
    let keepers: Vec<u32> =
        services(&host).iter().filter_map(|s| s["pgid"].as_u64().and_then(|p| u32::try_from(p).ok())).collect();
    let keeper_rss: u64 = keepers.iter().map(|&k| status_kib(k, "VmRSS")).sum();
    let keeper_pss: u64 = keepers.iter().map(|&k| smaps_pss(k)).sum();
    line_in(
        &format!("P2 host RSS with {ITEMS} supervised processes running (baseline = idle host, none)"),
        mib(rss),
        mib(idle_rss),
        "MiB",
    );
    note(&format!(
        "P2: the {} keepers (one per process): RSS {:.2} MiB each on average, PSS {:.2} MiB in all (shared pages counted once)",
        keepers.len(),
        mib(keeper_rss) / keepers.len().max(1) as f64,
        mib(keeper_pss)
    ));
}

fn smaps_pss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Pss:")?.split_whitespace().next()?.parse().ok()))
        .unwrap_or(0)
}

/// P3: lines per second one item pushes through to an SSE client, against the same
/// program's output read straight from a pipe; the host's RSS before and after.
pub fn p3_log_throughput() {
    const WINDOW: Duration = Duration::from_secs(3);
    const TEXT: &str = "GET /api/items/42 200 1.3ms - a typical server log line";
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    write_service(&root, "chatty", &json!({"command": ["yes", TEXT], "autoStart": true}));
    let host = Host::start_quiet(&root);
    poll(Duration::from_secs(30), Duration::from_millis(5), || {
        services(&host).first().is_some_and(|s| s["state"] == "running").then_some(())
    })
    .expect("chatty runs");
    std::thread::sleep(Duration::from_secs(1));
    let before = status_kib(host.pid(), "VmRSS");
    let (lines, skipped, peak) = follow_for(&host, WINDOW);
    let after = status_kib(host.pid(), "VmRSS");

    let mut direct = Command::new("yes").arg(TEXT).stdout(Stdio::piped()).spawn().expect("yes");
    let mut pipe = BufReader::with_capacity(64 * 1024, direct.stdout.take().expect("stdout"));
    let mut count = 0u64;
    let mut buf = Vec::new();
    let start = Instant::now();
    while start.elapsed() < WINDOW {
        buf.clear();
        if pipe.read_until(b'\n', &mut buf).expect("read") == 0 {
            break;
        }
        count += 1;
    }
    let direct_rate = count as f64 / start.elapsed().as_secs_f64();
    let _ = direct.kill();
    let _ = direct.wait();

    line_in(
        "P3 log lines/s from one item to an SSE client (baseline = the program's pipe read directly)",
        lines as f64 / WINDOW.as_secs_f64(),
        direct_rate,
        "lines/s",
    );
    note(&format!(
        "P3: the client was told of {skipped} lines skipped (it fell behind); host RSS {:.2} MiB before, {:.2} MiB after, {:.2} MiB peak",
        mib(before),
        mib(after),
        mib(peak.max(after))
    ));
    // A client that connects and leaves costs nothing afterwards.
    for _ in 0..20 {
        let _ = follow_for(&host, Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    note(&format!("P3: host RSS {:.2} MiB after 20 more clients came and went", mib(status_kib(host.pid(), "VmRSS"))));
}

/// Reads the log stream of `chatty` for `window`: (log lines, skipped lines, peak host RSS).
fn follow_for(host: &Host, window: Duration) -> (u64, u64, u64) {
    let mut stream = TcpStream::connect(host.authority()).expect("connect");
    write!(stream, "GET /myspace-butler/api/services/chatty/log HTTP/1.1\r\nHost: {}\r\n\r\n", host.authority())
        .expect("request");
    stream.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
    let mut reader = BufReader::with_capacity(256 * 1024, stream);
    let (mut lines, mut skipped, mut peak) = (0u64, 0u64, 0u64);
    let mut live = false;
    let mut text = String::new();
    let start = Instant::now();
    let mut sampled = Instant::now();
    while start.elapsed() < window {
        text.clear();
        match reader.read_line(&mut text) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => continue,
        }
        if text.starts_with("event: live") {
            live = true;
        } else if live && text.starts_with("event: log") {
            lines += 1;
        } else if let Some(data) = text.strip_prefix("data: {\"lines\":") {
            skipped += data.trim_end().trim_end_matches('}').parse::<u64>().unwrap_or(0);
        }
        if sampled.elapsed() > Duration::from_millis(100) {
            peak = peak.max(status_kib(host.pid(), "VmRSS"));
            sampled = Instant::now();
        }
    }
    (lines, skipped, peak)
}
