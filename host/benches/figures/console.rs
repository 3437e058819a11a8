//! Web console figures (no B-id in the brief; the console issue asks for them): time to
//! interactive of the review queue in a real browser, the bytes the page and its assets
//! cost, and the host's CPU while the console sits open and idle.
//!
//! The browser side is `console.py` beside this file: Debian's Chromium driven by
//! Playwright, installed by `scripts/install-console-test-tools` as for the browser tests.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use butler_host::instance::Instance;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{BUILTINS, Host, http, line_in, note, write_cards};

const CANDIDATES: usize = 200;
const CARDS: usize = 1000;
/// Cold loads of each page (after one warm-up each).
const RUNS: usize = 9;
/// C3's window.
const IDLE: Duration = Duration::from_secs(10);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Playwright client's Python, installed (or found up to date) by the project script.
fn python() -> PathBuf {
    let status = Command::new("bash")
        .arg(root().join("scripts/install-console-test-tools"))
        .stdout(Stdio::null())
        .status()
        .expect("run scripts/install-console-test-tools (needs python3)");
    assert!(status.success(), "scripts/install-console-test-tools failed");
    root().join("target/test-tools/console-venv/bin/python")
}

fn driver() -> Command {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(Path::new(&chromium).exists(), "no Chromium at {chromium} (apt-get install chromium)");
    let mut command = Command::new(python());
    command.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/figures/console.py")).env("CHROMIUM", chromium);
    command
}

/// `n` pending candidates written straight into `candidates/` as the distill faculty writes
/// them: one in four revises an existing card (so the queue shows diffs against it), the
/// rest create new cards; each with one evidence item and no checks.
fn write_candidates(instance: &Instance, n: usize, cards: &[String]) {
    let folder = instance.folder("selfRoot").expect("the selfRoot folder").join("candidates");
    std::fs::create_dir_all(&folder).expect("candidates folder");
    for i in 0..n {
        let title = format!("Candidate {i} about release builds");
        let summary = format!("What session {i} found out about building releases");
        let body = format!(
            "Build with `cargo build --release` (note {i}).\n\n- keep the **lock file**\n- run the tests first\n\nSee the runbook."
        );
        let tags = json!(["build", "release"]);
        let canonical = json!(["knowledge", title, summary, "", tags, [], body]);
        let hash: String = data_encoding::HEXLOWER.encode(&Sha256::digest(canonical.to_string().as_bytes()));
        let id = format!("cand-{i:05}");
        let mut candidate = json!({
            "id": id,
            "op": "create",
            "revision": 1,
            "contentHash": hash,
            "card": {"kind": "knowledge", "title": title, "summary": summary, "body": body, "appliesTo": "", "tags": tags, "related": []},
            "evidence": [format!("obs-{i:05}")],
            "evidenceItems": [{"id": format!("obs-{i:05}"), "source": "bench", "type": "fact", "text": format!("Observation {i}: releases are built with cargo."), "at": "2026-11-30T05:29:34.240Z"}],
            "checks": [],
            "status": "pending",
            "batchId": "batch-bench",
            "createdAt": "2026-11-30T05:29:34.240Z",
        });
        if i % 4 == 0 {
            candidate["op"] = json!("revise");
            candidate["target"] = json!(cards[i % cards.len()]);
            candidate["baseRevision"] = json!(1);
        }
        std::fs::write(folder.join(format!("{id}.json")), candidate.to_string()).expect("candidate file");
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// utime + stime of `pid`, in clock ticks (`/proc/<pid>/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<u64> = rest.split_whitespace().skip(11).take(2).filter_map(|f| f.parse().ok()).collect();
    fields.iter().sum()
}

/// Milliseconds per clock tick (`getconf CLK_TCK`, 100 on Linux almost everywhere).
fn tick_ms() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().ok();
    let hz = out.and_then(|o| String::from_utf8(o.stdout).ok()).and_then(|s| s.trim().parse::<f64>().ok());
    1000.0 / hz.unwrap_or(100.0)
}

/// CPU milliseconds `pid` consumed over `window`.
#[allow(clippy::cast_precision_loss)]
fn cpu_over(pid: u32, window: Duration) -> f64 {
    let before = cpu_ticks(pid);
    std::thread::sleep(window);
    (cpu_ticks(pid) - before) as f64 * tick_ms()
}

/// C1–C3.
pub fn c_console() {
    let dir = tempfile::tempdir().expect("temp");
    let full = dir.path().join("full");
    let (instance, _) = Instance::open_or_create(&full).expect("new instance");
    let cards = write_cards(&instance, CARDS, |_| false, |_| json!([]));
    write_candidates(&instance, CANDIDATES, &cards);
    let empty = dir.path().join("empty");
    Instance::open_or_create(&empty).expect("new instance");
    let host = Host::start_quiet(&full);
    host.wait_all_ready(BUILTINS, Duration::from_secs(120));
    let bare = Host::start_quiet(&empty);
    bare.wait_all_ready(BUILTINS, Duration::from_secs(120));
    let (status, body) = http(host.authority(), "POST", "/pipeline", Some(r#"{"action":"review.list","args":{}}"#));
    assert!(status == 200 && body.contains("cand-00199"), "review.list: {status} {}", &body[..body.len().min(400)]);
    note(&format!("C1: review.list answer for {CANDIDATES} candidates: {} KiB", body.len() / 1024));

    // C1, C2: cold loads, interleaved with the empty console and about:blank.
    let output = driver()
        .args(["load", &format!("http://{}", host.authority()), &CANDIDATES.to_string()])
        .arg(format!("http://{}", bare.authority()))
        .arg(RUNS.to_string())
        .output()
        .expect("run console.py");
    assert!(output.status.success(), "console.py load failed:\n{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("console.py JSON");
    let times = |key: &str| -> Vec<f64> {
        result[key].as_array().map(|a| a.iter().filter_map(Value::as_f64).collect()).unwrap_or_default()
    };
    let (loaded, bare_ms, blank) = (median(times("full")), median(times("empty")), median(times("blank")));
    line_in(
        &format!(
            "C1 console review queue, {CANDIDATES} pending candidates + {CARDS} cards, navigation → interactive (p50 of {RUNS}; baseline = the same console with an empty store)"
        ),
        loaded,
        bare_ms,
        "ms",
    );
    note(&format!(
        "C1: slowest {:.0} ms, fastest {:.0} ms; about:blank navigation p50 {blank:.1} ms (the browser's own floor)",
        times("full").iter().copied().fold(f64::MIN, f64::max),
        times("full").iter().copied().fold(f64::MAX, f64::min)
    ));
    let transfer = &result["transfer"];
    #[allow(clippy::cast_precision_loss)]
    let kib = |key: &str| transfer[key].as_u64().unwrap_or(0) as f64 / 1024.0;
    line_in(
        &format!(
            "C2 console page + assets transferred, cold load ({} files, headers included; baseline = their uncompressed bodies)",
            transfer["files"]
        ),
        kib("wire"),
        kib("decoded"),
        "KiB",
    );

    // C3: CPU of the loaded host over 10 s with no console, then with the console open and idle.
    std::thread::sleep(Duration::from_secs(1));
    let quiet = cpu_over(host.pid(), IDLE);
    let mut idle = driver()
        .args(["idle", &format!("http://{}", host.authority()), &CANDIDATES.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run console.py idle");
    let mut ready = String::new();
    BufReader::new(idle.stdout.take().expect("stdout")).read_line(&mut ready).expect("console.py says ready");
    assert_eq!(ready.trim(), "ready", "console.py idle");
    // Let the load itself settle (its requests are answered; the event stream is open).
    std::thread::sleep(Duration::from_secs(1));
    let start = Instant::now();
    let open = cpu_over(host.pid(), IDLE);
    let measured = start.elapsed();
    if let Some(mut stdin) = idle.stdin.take() {
        let _ = stdin.write_all(b"");
    }
    let _ = idle.wait();
    line_in(
        &format!(
            "C3 host CPU over {} s with the console open and idle on the review queue (baseline = the same host, no console open)",
            IDLE.as_secs()
        ),
        open,
        quiet,
        "ms",
    );
    note(&format!(
        "C3: {:.3} % of one core with the console open; the measurement window was {:.2} s; clock tick {:.0} ms",
        open / measured.as_secs_f64() / 10.0,
        measured.as_secs_f64(),
        tick_ms()
    ));
    drop(bare);
    drop(host);
}
