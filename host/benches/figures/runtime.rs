//! Faculty-runtime figures under real use: B12 (a new instance until every built-in
//! faculty is ready) and B13 (pipeline throughput under a mixed concurrent load).

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Host, http, line, line_in, note, percentiles, poll};

/// Spawns `butler serve` on `root` and returns how long it took until `/health` said every
/// faculty is ready; with `optimized`, waits on (untimed) until every faculty runs its
/// optimized code, so that the compile cache is complete when the host is stopped.
fn spawn_until_ready(root: &Path, optimized: bool) -> Duration {
    let start = Instant::now();
    let mut host = Host::start_quiet(root);
    let authority = host.authority().to_owned();
    let ready = poll(Duration::from_secs(60), Duration::from_micros(500), || {
        let (status, body) = std::panic::catch_unwind(|| http(&authority, "GET", "/health", None)).ok()?;
        let health: Value = serde_json::from_str(&body).ok()?;
        (status == 200 && health["faculties"]["ready"] == true).then(|| start.elapsed())
    })
    .expect("every faculty ready");
    if optimized {
        poll(Duration::from_secs(120), Duration::from_millis(20), || {
            let (_, body) = http(&authority, "GET", "/faculties", None);
            let listed: Value = serde_json::from_str(&body).ok()?;
            let all = listed["faculties"].as_array()?;
            (!all.is_empty() && all.iter().all(|f| f["optimized"] == true)).then_some(())
        })
        .expect("every faculty optimized");
    }
    host.kill();
    ready
}

/// B12: a brand-new instance from spawn until its four built-in faculties are ready
/// (compiled from scratch), against the same start with a warm compile cache.
pub fn b12_cold_start() {
    const RUNS: usize = 5;
    let dir = tempfile::tempdir().expect("temp");
    let warm_root = dir.path().join("warm");
    spawn_until_ready(&warm_root, true); // creates it and fills its cache
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for run in 0..RUNS {
        let root = dir.path().join(format!("cold-{run}"));
        cold.push(spawn_until_ready(&root, false));
        warm.push(spawn_until_ready(&warm_root, false));
    }
    let (cold50, _) = percentiles(cold);
    let (warm50, _) = percentiles(warm);
    line(
        "B12 new instance, spawn to every built-in faculty ready, cold compile (p50; baseline = warm cache)",
        cold50,
        warm50,
    );
    note(&format!("B12: target cold ≤ 500 ms; cold p50 {:.0} ms", cold50.as_secs_f64() * 1000.0));
}

/// One request of the B13 mix: what it is called, its path and body.
pub type MixRequest = (&'static str, String, Option<String>);

/// The B13 mix: observations, the agents' reads, the owner's listing, and the writers that
/// nest (a refresh commits verdicts and rebuilds the context; a context build). Claims and
/// review decisions are left out: they are one-at-a-time by design (a lease, a decision),
/// so under a closed loop they would measure refusals; the torture test covers them.
pub fn mix(i: usize) -> MixRequest {
    let pipeline = |action: &str, args: Value| Some(json!({"action": action, "args": args}).to_string());
    match i % 8 {
        0 | 1 | 7 => (
            "observe",
            "/observe".to_owned(),
            Some(json!({"source": "bench", "text": format!("observation {i}")}).to_string()),
        ),
        2 => ("cards.search", "/pipeline".to_owned(), pipeline("cards.search", json!({"query": "bench"}))),
        3 => ("cards.list", "/pipeline".to_owned(), pipeline("cards.list", json!({}))),
        4 => ("review.list", "/pipeline".to_owned(), pipeline("review.list", json!({}))),
        5 => ("validity.refresh", "/pipeline".to_owned(), pipeline("validity.refresh", json!({}))),
        _ => ("context.build", "/pipeline".to_owned(), pipeline("context.build", json!({}))),
    }
}

/// B13: the mixed pipeline load at 16 clients (requests/s and p99), against `GET /health`
/// from the same clients.
pub fn b13_mixed_load() {
    const CLIENTS: usize = 16;
    const WINDOW: Duration = Duration::from_secs(10);
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    let host = Host::start_quiet(&root);
    host.wait_all_ready(&["journal", "distill", "validity", "cards"], Duration::from_secs(120));
    let run = |request: &(dyn Fn(usize) -> MixRequest + Sync)| {
        let latencies = Mutex::new(Vec::new());
        let failures = AtomicUsize::new(0);
        let started = Instant::now();
        std::thread::scope(|scope| {
            for client in 0..CLIENTS {
                let (latencies, failures) = (&latencies, &failures);
                let authority = host.authority().to_owned();
                scope.spawn(move || {
                    let mut own = Vec::new();
                    let mut i = client;
                    while started.elapsed() < WINDOW {
                        let (_, path, body) = request(i);
                        let method = if body.is_some() { "POST" } else { "GET" };
                        let t = Instant::now();
                        let (status, _) = http(&authority, method, &path, body.as_deref());
                        own.push(t.elapsed());
                        if !(200..300).contains(&status) {
                            failures.fetch_add(1, Ordering::Relaxed);
                        }
                        i += CLIENTS;
                    }
                    latencies.lock().expect("latencies").extend(own);
                });
            }
        });
        let elapsed = started.elapsed().as_secs_f64();
        let samples = latencies.into_inner().expect("latencies");
        #[allow(clippy::cast_precision_loss)]
        let rate = samples.len() as f64 / elapsed;
        (rate, percentiles(samples).1, failures.into_inner())
    };
    let (health_rate, health_p99, _) = run(&|_| ("health", "/health".to_owned(), None));
    let (rate, p99, failures) = run(&mix);
    line_in("B13 mixed pipeline load, 16 clients (throughput; baseline = GET /health)", rate, health_rate, "req/s");
    line("B13 mixed pipeline load, 16 clients (p99; baseline = GET /health)", p99, health_p99);
    let faculties = host.faculties();
    let waits: Vec<String> = faculties["faculties"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| format!("{} {} waits", f["id"].as_str().unwrap_or("?"), f["calls"]["lockWaits"]))
        .collect();
    note(&format!("B13: {failures} answers outside 2xx; lock waits: {}", waits.join(", ")));
}
