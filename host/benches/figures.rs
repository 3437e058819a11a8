//! The project's benchmark entry point (`cargo bench -p butler-host`).
//!
//! Prints one line per figure: `name: value unit (baseline: value unit, ratio: x)`. Every
//! figure is measured beside a baseline taken in the same run, because absolute times on
//! a shared machine are noise; see `docs/benchmarks.md` for what each one means.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use butler_faculty::{CallContext, FacultyRuntime};
use butler_host::catalog::loader::DEBOUNCE;
use butler_host::catalog::{ScanConfig, scan};
use butler_host::instance::Instance;
use butler_host::pipeline::PipelineRouter;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

const BUTLER: &str = env!("CARGO_BIN_EXE_butler");

/// The host under measurement: the harness the end-to-end tests use.
type Host = butler_test_support::Butler;
use butler_test_support::http::{Client, header, read_head, request as http};
use butler_test_support::poll;

/// Whether `/health` answers 200.
fn health_ok(authority: &str) -> bool {
    std::panic::catch_unwind(|| http(authority, "GET", "/health", None)).is_ok_and(|(status, _)| status == 200)
}

#[path = "figures/code.rs"]
mod code;
#[path = "figures/console.rs"]
mod console;
#[path = "figures/mcp.rs"]
mod mcp;
#[path = "figures/peers.rs"]
mod peers;
#[path = "figures/runtime.rs"]
mod runtime;
#[path = "figures/search.rs"]
mod search;
#[path = "figures/soak.rs"]
mod soak;
#[path = "figures/supervise.rs"]
mod supervise;

/// Guests built from source by `host/build.rs`.
mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

fn main() {
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    // A prefix selects the figures it starts, but `B1` is B1, not B10 as well.
    let selects = |f: &str, id: &str| {
        id.starts_with(f)
            && !(f.ends_with(|c: char| c.is_ascii_digit()) && id[f.len()..].starts_with(|c: char| c.is_ascii_digit()))
    };
    let figures: [(&str, fn()); 24] = [
        ("B1", b1_faculty_call),
        ("B2", b2_pipeline_read),
        ("B3", b3_search),
        ("B4", mcp::b4_hub_call),
        ("B5", peers::b5_peers),
        ("B6", b6_startup),
        ("B7", b7_scan),
        ("B8", b8_live_reload),
        ("B9", b9_memory),
        ("B10", b10_validity_refresh),
        ("B12", runtime::b12_cold_start),
        ("B13", runtime::b13_mixed_load),
        ("B14", soak::b14_peer_uid),
        ("B15", mcp::b15_sampling),
        ("B16", mcp::b16_list_wait),
        ("B17", mcp::b17_mcp_add),
        ("B18", mcp::b18_profile_live),
        ("B19", search::b19_tool_search),
        ("B20", code::b20_code_mode),
        ("P1", supervise::p1_start_to_running),
        ("P2", supervise::p2_memory_with_50),
        ("P3", supervise::p3_log_throughput),
        ("C", console::c_console),
        ("S1", soak::s1_soak),
    ];
    for (id, run) in figures {
        // The soak takes ten minutes: only when asked for by name.
        let by_default = !id.starts_with('S');
        if (filter.is_empty() && by_default) || filter.iter().any(|f| selects(f, id)) {
            let before = cpu_times();
            run();
            if let (Some((total0, steal0)), Some((total1, steal1))) = (before, cpu_times())
                && total1 > total0
            {
                #[allow(clippy::cast_precision_loss)]
                let stolen = (steal1 - steal0) as f64 * 100.0 / (total1 - total0) as f64;
                note(&format!(
                    "{id}: steal {stolen:.0} % (CPU time the hypervisor gave to other guests meanwhile); \
                     it moves the absolute figures, so compare only the ratios within a run"
                ));
            }
        }
    }
}

/// This machine's CPU time so far over all CPUs, and the part of it the hypervisor gave to
/// other guests (steal), in clock ticks, from `/proc/stat`.
fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> =
        stat.lines().next()?.strip_prefix("cpu ")?.split_whitespace().filter_map(|t| t.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest times are inside user and nice).
    let steal = *ticks.get(7)?;
    Some((ticks.iter().take(8).sum(), steal))
}

/// Median and 99th percentile of a sample set.
fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
        let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[index]
    };
    (at(0.5), at(0.99))
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub(crate) fn line(name: &str, value: Duration, baseline: Duration) {
    line_in(name, ms(value), ms(baseline), "ms");
}

fn line_us(name: &str, value: Duration, baseline: Duration) {
    line_in(name, value.as_secs_f64() * 1e6, baseline.as_secs_f64() * 1e6, "µs");
}

/// The one output format: `name: value unit (baseline: value unit, ratio: x)`.
fn line_in(name: &str, value: f64, baseline: f64, unit: &str) {
    println!("{name}: {value:.2} {unit} (baseline: {baseline:.2} {unit}, ratio: {:.2}x)", value / baseline);
}

/// Context that is not a figure (goes to stderr, so stdout stays one line per figure).
fn note(text: &str) {
    eprintln!("  note: {text}");
}

/// An instance with `n` valid extensions, spread over the three scan roots.
fn instance_with(root: &Path, n: usize) {
    if !root.join("butler.json").exists() {
        std::fs::write(root.join("butler.json"), "{}").expect("root config");
    }
    for i in 0..n {
        let (folder, kind, extra) = match i % 4 {
            0 => (
                "services",
                "service",
                r#","hosted":{"command":["sleep","1"],"port":9000,"restart":"on-failure"},"health":{"url":"http://127.0.0.1:9000/"}"#,
            ),
            1 => (
                "faculties",
                "faculty",
                r#","commands":[{"id":"run","exec":["run.wasm"],"effect":"read","args":[{"name":"q","pattern":"[a-z]+"}]}],"reports":[{"id":"r","name":"R","exec":["r.wasm"],"shape":"list"}]"#,
            ),
            _ => (
                "tools",
                "tool",
                r#","icon":"🌤","hosted":{"command":"python server.py","env":{"A":"b"}},"actions":[{"label":"Open","url":"http://127.0.0.1:1/","mode":"panel"}],"mcp":{"transport":"stdio","command":["python","mcp.py"]}"#,
            ),
        };
        let dir = root.join(folder).join(format!("ext-{i:04}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let manifest = format!(
            r#"{{"schemaVersion":1,"kind":"{kind}","id":"ext-{i:04}","name":"Extension {i}","description":"Benchmark extension number {i}"{extra}}}"#
        );
        std::fs::write(dir.join("butler.json"), manifest).expect("manifest");
    }
}

/// B6: `butler serve` to `/health` answering, against `butler --version` process start.
fn b6_startup() {
    const RUNS: usize = 15;
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    std::fs::create_dir_all(&root).expect("mkdir");
    // A real instance: the skeleton with the four built-in faculties, plus 100 extensions;
    // `butler check` compiles the built-ins once, so the compile cache is warm (BENCH.md).
    butler_host::instance::Instance::open_or_create(&root).expect("instance with the built-in faculties");
    instance_with(&root, 100);
    // (It exits non-zero: the bench's faculty manifests name components that do not exist.)
    let _ = Command::new(BUTLER).arg("check").arg(&root).stdout(Stdio::null()).status().expect("butler check");
    let mut baseline = Vec::new();
    let mut startup = Vec::new();
    for run in 0..=RUNS {
        let start = Instant::now();
        let status = Command::new(BUTLER).arg("--version").stdout(Stdio::null()).status().expect("butler --version");
        assert!(status.success());
        let version = start.elapsed();

        let start = Instant::now();
        let mut host = Host::start_quiet(&root);
        while !health_ok(host.authority()) {
            std::thread::sleep(Duration::from_micros(200));
        }
        let ready = start.elapsed();
        host.kill();
        if run > 0 {
            // The first run warms the page cache; it is not counted.
            baseline.push(version);
            startup.push(ready);
        }
    }
    let (base, _) = percentiles(baseline);
    let (p50, _) = percentiles(startup);
    line("B6 start-up to /health, 4 built-in faculties + 100 extensions, cache warm (p50)", p50, base);
}

/// B7: scan + validate 1,000 manifests, against parsing the same files as JSON only.
fn b7_scan() {
    const RUNS: usize = 15;
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().to_path_buf();
    instance_with(&root, 1000);
    let config = ScanConfig {
        instance_root: root.clone(),
        roots: ["tools", "services", "faculties"].iter().map(|r| root.join(r)).collect(),
        inspector: None,
        own_listeners: Vec::new(),
    };
    let files: Vec<_> = config.extension_dirs().into_iter().map(|d| d.join("butler.json")).collect();

    let mut baseline = Vec::new();
    let mut scans = Vec::new();
    for run in 0..=RUNS {
        let start = Instant::now();
        let mut parsed = 0;
        for file in &files {
            let bytes = std::fs::read(file).expect("read");
            let value: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
            parsed += usize::from(value.is_object());
        }
        let parse_only = start.elapsed();
        assert_eq!(parsed, 1000);

        let start = Instant::now();
        let catalog = scan(&config, None);
        let full = start.elapsed();
        assert_eq!(catalog.extensions.len(), 1000, "{:?}", catalog.diagnostics.first());
        if run > 0 {
            baseline.push(parse_only);
            scans.push(full);
        }
    }
    let (base, _) = percentiles(baseline);
    let (p50, _) = percentiles(scans);
    line("B7 scan + validate 1,000 manifests (p50)", p50, base);
}

/// B1: one faculty call through the runtime (a fresh instance from the pre-linked
/// component, pooling allocator, on the current thread), for each WIT version: the
/// probe's `read` of a small file in its `/data` (`butler:faculty@0.1.0`: argv in, the
/// argument checker) and the notes example's `list` of a file of the same size
/// (`@0.2.0`: JSON in, the input schema), against the same logic in native Rust with
/// `cap-std`, interleaved call by call.
fn b1_faculty_call() {
    const WARM_UP: usize = 500;
    const CALLS: usize = 5000;
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path();
    std::fs::write(root.join("butler.json"), "{}").expect("root config");
    std::fs::create_dir_all(root.join("faculties")).expect("mkdir");
    std::fs::copy(guests::PROBE, root.join("faculties/probe.wasm")).expect("copy probe");
    std::fs::copy(guests::NOTES, root.join("faculties/notes.wasm")).expect("copy notes");
    let (instance, _) = Instance::open_or_create(root).expect("instance");
    let runtime = FacultyRuntime::new(instance.faculty_setup("http://127.0.0.1:9")).expect("runtime");
    let mut config = instance.scan_config();
    config.inspector = Some(runtime.inspector());
    // New components compile in the background: rescan until both are registered.
    // (A quick version registers first; B1 measures the optimized code.)
    let optimized = |catalog: &butler_host::catalog::Catalog, id: &str| {
        catalog.get(id).is_some_and(|p| p.components.iter().all(|c| c.optimized))
    };
    let catalog = poll(Duration::from_secs(120), Duration::from_millis(5), || {
        let catalog = scan(&config, None);
        (optimized(&catalog, "probe") && optimized(&catalog, "notes")).then_some(catalog)
    })
    .expect("the probe and notes compile and register");
    runtime.reconcile(&catalog);
    if !runtime.stats().pooling {
        note("B1: the pooling allocator is NOT in effect (on-demand allocation)");
    }

    let data_of = |id: &str| {
        let dir = instance.state_dir().join("faculties").join(id);
        std::fs::create_dir_all(&dir).expect("data dir");
        dir
    };
    let text = "A small file in the faculty's own data folder: one line of notes, read whole.\n".repeat(3);
    std::fs::write(data_of("probe").join("note.txt"), &text).expect("note");
    let notes = json!([{"at": 1, "tag": null, "text": text.trim_end()}]);
    std::fs::write(data_of("notes").join("notes.json"), notes.to_string()).expect("notes");
    let expected = json!({"read": true, "text": text});

    let mut args = Map::new();
    args.insert("path".into(), json!("/data/note.txt"));
    let context = CallContext::top(false);
    let v0_1 = || runtime.invoke("probe", "read", &args, &context).expect("0.1.0 call");
    let no_input = json!({});
    let v0_2 = || runtime.invoke_json("notes", "list", &no_input, &context).expect("0.2.0 call");

    let data = cap_std::fs::Dir::open_ambient_dir(data_of("probe"), cap_std::ambient_authority()).expect("open data");
    let native = || {
        // What the guest does (read, print JSON) and what the host does (parse it).
        let text = data.read_to_string("note.txt").expect("native read");
        let out = json!({"read": true, "text": text}).to_string();
        serde_json::from_str::<Value>(&out).expect("json")
    };
    assert_eq!(v0_1(), expected);
    assert_eq!(native(), expected);
    assert_eq!(v0_2()["notes"], notes);

    for _ in 0..WARM_UP {
        std::hint::black_box(native());
        std::hint::black_box(v0_1());
        std::hint::black_box(v0_2());
    }
    // Interleaved, so all three see the same machine.
    let (mut baseline, mut first, mut second) =
        (Vec::with_capacity(CALLS), Vec::with_capacity(CALLS), Vec::with_capacity(CALLS));
    let timed = |f: &dyn Fn() -> Value, into: &mut Vec<Duration>| {
        let start = Instant::now();
        std::hint::black_box(f());
        into.push(start.elapsed());
    };
    for _ in 0..CALLS {
        timed(&native, &mut baseline);
        timed(&v0_1, &mut first);
        timed(&v0_2, &mut second);
    }
    let (base50, base99) = percentiles(baseline);
    let (p50, p99) = percentiles(first);
    let (json50, json99) = percentiles(second);
    line_us("B1 faculty call @0.1.0, fresh instance, read of a file in /data (p50)", p50, base50);
    line_us("B1 faculty call @0.1.0, fresh instance, read of a file in /data (p99)", p99, base99);
    line_us("B1 faculty call @0.2.0, fresh instance, read of a file in /data (p50)", json50, base50);
    line_us("B1 faculty call @0.2.0, fresh instance, read of a file in /data (p99)", json99, base99);
    note(&format!(
        "B1: p99/p50 = {:.2} @0.1.0, {:.2} @0.2.0 (target ≤ 2); p50 @0.2.0 / @0.1.0 = {:.2}",
        p99.as_secs_f64() / p50.as_secs_f64(),
        json99.as_secs_f64() / json50.as_secs_f64(),
        json50.as_secs_f64() / p50.as_secs_f64()
    ));
}

/// `bytes` (a component) with a custom section appended, so its content is new and it
/// must be compiled; a custom section may appear anywhere, so it stays a valid component.
fn with_custom_section(bytes: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            #[allow(clippy::cast_possible_truncation)]
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let mut content = Vec::new();
    leb(name.len(), &mut content);
    content.extend_from_slice(name.as_bytes());
    content.extend_from_slice(payload);
    let mut out = bytes.to_vec();
    out.push(0);
    leb(content.len(), &mut out);
    out.extend_from_slice(&content);
    out
}

/// Bytes no run has seen before.
fn unique_payload(run: usize) -> Vec<u8> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("butler bench {} {nanos} {run}", std::process::id()).into_bytes()
}

/// B8: live reload into a running `butler serve`: a manifest folder dropped into `tools/`
/// until `/catalog` lists it, and a never-seen `.wasm` dropped into `faculties/` until a
/// command on it answers over HTTP (compile included).
fn b8_live_reload() {
    const MANIFEST_RUNS: usize = 10;
    const WASM_RUNS: usize = 7;
    const POLL: Duration = Duration::from_millis(2);
    const SETTLE: Duration = Duration::from_millis(600);
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    for folder in ["tools", "services", "faculties"] {
        std::fs::create_dir_all(root.join(folder)).expect("mkdir");
    }
    std::fs::write(root.join("butler.json"), "{}").expect("root config");
    let host = Host::start_quiet(&root);

    // (a) a new manifest folder → listed in the catalog.
    let mut listed = Vec::new();
    for run in 0..=MANIFEST_RUNS {
        let id = format!("b8-tool-{run:02}");
        let needle = format!("\"id\":\"{id}\"");
        std::thread::sleep(SETTLE);
        let start = Instant::now();
        let folder = root.join("tools").join(&id);
        std::fs::create_dir(&folder).expect("mkdir");
        std::fs::write(
            folder.join("butler.json"),
            json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": format!("Tool {run}")}).to_string(),
        )
        .expect("manifest");
        poll(Duration::from_secs(10), POLL, || host.http("GET", "/catalog", None).1.contains(&needle).then_some(()))
            .unwrap_or_else(|| panic!("{id} listed"));
        if run > 0 {
            // The first drop warms the watcher and the page cache; it is not counted.
            listed.push(start.elapsed());
        }
    }

    // (b) a never-seen component → callable. The baseline for each run is loading another
    // never-seen copy in-process (compile, link, describe) on the same machine.
    let probe = std::fs::read(guests::PROBE).expect("probe");
    let baseline_dir = tempfile::tempdir().expect("temp");
    std::fs::write(baseline_dir.path().join("butler.json"), "{}").expect("root config");
    let (baseline_instance, _) = Instance::open_or_create(baseline_dir.path()).expect("instance");
    let checker = FacultyRuntime::for_check(baseline_instance.faculty_setup("")).expect("runtime");
    let inspector = checker.inspector();
    let target = root.join("faculties").join("probe.wasm");
    let compiles_before = host.faculties()["runtime"]["compiles"].as_u64().unwrap_or(0);
    let mut callable = Vec::new();
    let mut compiled = Vec::new();
    for run in 0..=WASM_RUNS {
        if target.exists() {
            std::fs::remove_file(&target).expect("rm");
            poll(Duration::from_secs(10), POLL, || {
                (host.http("POST", "/faculties/probe/commands/ok", Some(r#"{"args":{}}"#)).0 == 404).then_some(())
            })
            .expect("the previous probe unloaded");
        }
        let copy = baseline_dir.path().join(format!("probe-{run}.wasm"));
        std::fs::write(&copy, with_custom_section(&probe, "butler-bench", &unique_payload(run))).expect("write");
        let start = Instant::now();
        let info = inspector.inspect(&copy).expect("in-process load");
        let in_process = start.elapsed();
        assert!(info.describe.is_some());

        let bytes = with_custom_section(&probe, "butler-bench", &unique_payload(run));
        std::thread::sleep(SETTLE);
        let start = Instant::now();
        std::fs::write(&target, &bytes).expect("drop component");
        poll(Duration::from_secs(30), POLL, || {
            (host.http("POST", "/faculties/probe/commands/ok", Some(r#"{"args":{}}"#)).0 == 200).then_some(())
        })
        .expect("the new probe answers");
        if run > 0 {
            callable.push(start.elapsed());
            compiled.push(in_process);
        }
    }
    let compiles = host.faculties()["runtime"]["compiles"].as_u64().unwrap_or(0) - compiles_before;
    assert!(compiles > WASM_RUNS as u64, "every dropped component was compiled ({compiles} compiles)");

    let slowest = |samples: &[Duration]| samples.iter().max().copied().unwrap_or_default();
    note(&format!(
        "B8: slowest manifest {:.1} ms, slowest .wasm {:.1} ms ({compiles} compiles)",
        ms(slowest(&listed)),
        ms(slowest(&callable))
    ));
    let (listed50, _) = percentiles(listed);
    let (callable50, _) = percentiles(callable);
    let (compiled50, _) = percentiles(compiled);
    line(
        &format!(
            "B8 live reload, new manifest listed in /catalog (p50 of {MANIFEST_RUNS}, polled every 2 ms, baseline = debounce)"
        ),
        listed50,
        DEBOUNCE,
    );
    line(
        &format!(
            "B8 live reload, new .wasm callable over HTTP (p50 of {WASM_RUNS}, polled every 2 ms, baseline = in-process compile)"
        ),
        callable50,
        compiled50,
    );
}

/// VmRSS (or another `/proc/<pid>/status` size field) in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

#[allow(clippy::cast_precision_loss)]
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Threads of `pid` blocked opening a FIFO that has no writer yet.
fn blocked_on_fifo(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter(|t| std::fs::read_to_string(t.path().join("wchan")).is_ok_and(|w| w.trim() == "wait_for_partner"))
        .count()
}

/// B9: memory of the running host: RSS idle with faculties loaded (against the same host
/// with none installed), and RSS growth while 100 faculty calls are in flight at once.
fn b9_memory() {
    const CONCURRENT: usize = 100;
    const IDLE: Duration = Duration::from_secs(2);
    let dir = tempfile::tempdir().expect("temp");
    let instance = |name: &str| {
        let root = dir.path().join(name);
        for folder in ["tools", "services", "faculties"] {
            std::fs::create_dir_all(root.join(folder)).expect("mkdir");
        }
        std::fs::write(root.join("butler.json"), "{}").expect("root config");
        root
    };

    // Baseline: the same host, idle, with no faculties installed.
    let empty = instance("empty");
    let host = Host::start_quiet(&empty);
    std::thread::sleep(IDLE);
    let baseline = status_kib(host.pid(), "VmRSS");
    drop(host);

    // With faculties: a new instance as the host creates it (the built-in faculties),
    // plus the probe and notes. The first start compiles them and fills the compile
    // cache; the figure is taken on a restart, as an owner's host normally starts.
    let loaded = dir.path().join("loaded");
    let (created, _) = Instance::open_or_create(&loaded).expect("new instance");
    let faculties = created.path("faculties");
    let mut ids: Vec<String> = std::fs::read_dir(&faculties)
        .expect("faculties")
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".wasm").map(str::to_owned))
        .collect();
    ids.sort();
    std::fs::copy(guests::PROBE, faculties.join("probe.wasm")).expect("copy probe");
    std::fs::copy(guests::NOTES, faculties.join("notes.wasm")).expect("copy notes");
    ids.extend(["probe".to_owned(), "notes".to_owned()]);
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let host = Host::start_quiet(&loaded);
    host.wait_all_ready(&ids, Duration::from_secs(120));
    std::thread::sleep(IDLE);
    let after_compile = status_kib(host.pid(), "VmRSS");
    drop(host);
    let host = Host::start_quiet(&loaded);
    host.wait_all_ready(&ids, Duration::from_secs(120));
    let runtime = host.faculties()["runtime"].clone();
    if runtime["pooling"] != true {
        note("B9: the pooling allocator is NOT in effect (on-demand allocation)");
    }
    std::thread::sleep(IDLE);
    let idle = status_kib(host.pid(), "VmRSS");

    // 100 calls in flight at once: each is the probe's `read` of a FIFO in its /data, so
    // its instance stays live, blocked in `open` without using CPU, until the FIFO gets a
    // writer. RSS is sampled meanwhile; the writer comes once all 100 are blocked.
    let data = created.state_dir().join("faculties").join("probe");
    std::fs::create_dir_all(&data).expect("data dir");
    let fifo = data.join("hold.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success(), "mkfifo");
    let pid = host.pid();
    let done = AtomicBool::new(false);
    let peak = AtomicU64::new(idle);
    let (all_blocked, results): (u64, Vec<(u16, String)>) = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(status_kib(pid, "VmRSS"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let calls: Vec<_> = (0..CONCURRENT)
            .map(|_| {
                scope.spawn(|| {
                    host.http("POST", "/faculties/probe/commands/read", Some(r#"{"args":{"path":"/data/hold.fifo"}}"#))
                })
            })
            .collect();
        // The host executes at most MAX_CONCURRENT_CALLS at once; the rest wait their turn
        // without a thread. Wait until every executing slot is blocked on the FIFO.
        let executing = CONCURRENT.min(butler_faculty::MAX_CONCURRENT_CALLS);
        let blocked = poll(Duration::from_secs(60), Duration::from_millis(1), || {
            let blocked = blocked_on_fifo(pid);
            (blocked >= executing).then_some(blocked)
        });
        let all_blocked = status_kib(pid, "VmRSS");
        // Opening for writing releases the readers there are; closing gives them end of
        // file. Keep doing it (non-blocking: ENXIO while no reader waits) until every call,
        // including the ones that were queued, has finished.
        let releasing = AtomicBool::new(true);
        let results = std::thread::scope(|inner| {
            inner.spawn(|| {
                use std::os::unix::fs::OpenOptionsExt;
                const O_NONBLOCK: i32 = 0o4000;
                while releasing.load(Ordering::Relaxed) {
                    drop(std::fs::OpenOptions::new().write(true).custom_flags(O_NONBLOCK).open(&fifo));
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            let results = calls.into_iter().map(|c| c.join().expect("call")).collect();
            releasing.store(false, Ordering::Relaxed);
            results
        });
        done.store(true, Ordering::Relaxed);
        assert!(blocked.is_some(), "fewer than {executing} calls were executing at once after 60 s");
        (all_blocked, results)
    });
    for (status, body) in &results {
        assert_eq!(*status, 200, "{body}");
        // WASI reads files at an offset, which a FIFO refuses: the call still completes.
        assert!(body.contains(r#""ok":true"#), "{body}");
    }
    let peak = peak.load(Ordering::Relaxed).max(all_blocked);
    std::thread::sleep(IDLE);
    let after = status_kib(pid, "VmRSS");

    line_in(
        &format!("B9 RSS idle, {} faculties loaded ({}) (baseline = no faculties)", ids.len(), ids.join(", ")),
        mib(idle),
        mib(baseline),
        "MiB",
    );
    line_in(
        &format!(
            "B9 RSS growth with 100 faculty calls in flight, {} executing at once (baseline = idle RSS)",
            butler_faculty::MAX_CONCURRENT_CALLS
        ),
        mib(peak.saturating_sub(idle)),
        mib(idle),
        "MiB",
    );
    note(&format!(
        "B9: RSS with all {CONCURRENT} calls blocked {:.2} MiB, peak {:.2} MiB, {:.2} MiB once they ended; idle \
         right after the start that compiled them {:.2} MiB; pooling {}",
        mib(all_blocked),
        mib(peak),
        mib(after),
        mib(after_compile),
        runtime["pooling"]
    ));
}

// ---------------------------------------------------------------------------------------
// The card pipeline: B2, B3, B10.

/// The built-in faculties a new instance gets.
const BUILTINS: &[&str] = &["journal", "distill", "validity", "cards"];

/// A word no generated text contains, planted in a few cards for B3 to find.
const RARE: &str = "kestrel";

/// Words the generated cards are written with.
const WORDS: &[&str] = &[
    "build",
    "release",
    "cargo",
    "test",
    "commit",
    "branch",
    "merge",
    "review",
    "deploy",
    "config",
    "cache",
    "index",
    "query",
    "server",
    "client",
    "request",
    "response",
    "timeout",
    "retry",
    "error",
    "warning",
    "log",
    "trace",
    "metric",
    "latency",
    "throughput",
    "memory",
    "thread",
    "async",
    "lock",
    "queue",
    "worker",
    "schema",
    "field",
    "record",
    "table",
    "column",
    "migration",
    "backup",
    "restore",
    "token",
    "secret",
    "owner",
    "agent",
    "session",
    "context",
    "prompt",
    "card",
    "rule",
    "knowledge",
    "profile",
    "journal",
    "evidence",
    "check",
    "quote",
    "path",
    "folder",
    "file",
    "script",
    "shell",
    "python",
    "rust",
    "typescript",
    "module",
    "crate",
    "package",
    "version",
    "upgrade",
    "pin",
    "lockfile",
    "format",
    "lint",
    "clippy",
    "docs",
    "readme",
    "changelog",
    "issue",
    "ticket",
    "sprint",
    "meeting",
    "note",
    "summary",
    "draft",
    "always",
    "never",
    "before",
    "after",
    "when",
    "unless",
    "prefer",
    "avoid",
    "use",
    "keep",
    "run",
    "write",
    "read",
    "open",
    "close",
    "start",
    "stop",
    "small",
    "large",
    "fast",
    "slow",
    "local",
    "remote",
    "shared",
    "private",
    "stable",
    "nightly",
    "linux",
    "macos",
    "container",
    "image",
    "port",
    "socket",
    "route",
    "handler",
    "endpoint",
    "payload",
    "header",
    "cookie",
    "browser",
    "console",
];

/// A small deterministic generator (xorshift64), so every run writes the same store.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n as u64).unwrap_or(0)
    }

    fn words(&mut self, n: usize) -> Vec<&'static str> {
        (0..n).map(|_| WORDS[self.below(WORDS.len())]).collect()
    }

    /// A sentence of `min..=max` words, capitalized, with a full stop.
    fn sentence(&mut self, min: usize, max: usize) -> String {
        let n = min + self.below(max - min + 1);
        let text = self.words(n).join(" ");
        let mut chars = text.chars();
        chars.next().map_or_else(String::new, |first| format!("{}{}.", first.to_ascii_uppercase(), chars.as_str()))
    }
}

/// What a generated card says.
struct CardText {
    id: String,
    title: String,
    summary: String,
    body: String,
    tags: Vec<&'static str>,
    checks: Value,
}

impl CardText {
    /// Card `i`: a title of 3 to 5 words, a one-sentence summary, a body of a few hundred
    /// characters (sentences and a command in backticks), two tags. With `rare`, [`RARE`]
    /// goes into its title, summary or body (by `i`).
    fn generate(rng: &mut Rng, i: usize, rare: bool, checks: Value) -> Self {
        let mut title = rng.sentence(3, 5);
        title.pop();
        let mut summary = rng.sentence(8, 12);
        let mut body = (0..4).map(|_| rng.sentence(8, 14)).collect::<Vec<_>>().join(" ");
        body.push_str(&format!(
            "\n\nRun `{} {}` first, then {}.",
            rng.words(1)[0],
            rng.words(1)[0],
            rng.sentence(4, 7)
        ));
        if rare {
            match i % 3 {
                0 => title.push_str(&format!(" {RARE}")),
                1 => summary.insert_str(0, &format!("The {RARE} way: ")),
                _ => body.push_str(&format!(" Ask about the {RARE} dashboard.")),
            }
        }
        Self { id: format!("card-{i:05}"), title, summary, body, tags: rng.words(2), checks }
    }

    /// The card file, exactly as the store writes it (`Card::render`): front matter of
    /// `key: <JSON value>` lines, a blank line, the body.
    fn render(&self) -> String {
        let content = json!(["knowledge", self.title, self.summary, "", self.tags, [], self.body]);
        let hash: String = data_encoding::HEXLOWER.encode(&Sha256::digest(content.to_string().as_bytes()));
        let fields = [
            ("id", json!(self.id)),
            ("kind", json!("knowledge")),
            ("title", json!(self.title)),
            ("summary", json!(self.summary)),
            ("status", json!("active")),
            ("revision", json!(1)),
            ("contentHash", json!(hash)),
            ("scope", json!("local")),
            ("appliesTo", json!("")),
            ("tags", json!(self.tags)),
            ("related", json!([])),
            ("checks", self.checks.clone()),
            ("evidence", json!([format!("obs-{}", self.id)])),
            ("createdAt", json!("2026-11-30T05:29:34.240Z")),
            ("updatedAt", json!("2026-11-30T05:29:34.240Z")),
        ];
        let mut out = String::from("---\n");
        for (key, value) in fields {
            out.push_str(&format!("{key}: {value}\n"));
        }
        out.push_str("---\n\n");
        out.push_str(self.body.trim_end());
        out.push('\n');
        out
    }
}

/// Writes `n` generated cards into the store's `knowledge/` folder (no checks unless
/// `checks_of` gives some); cards whose index `rare` accepts carry [`RARE`]. Returns the ids.
fn write_cards(
    instance: &Instance,
    n: usize,
    rare: impl Fn(usize) -> bool,
    checks_of: impl Fn(usize) -> Value,
) -> Vec<String> {
    let folder = instance.folder("selfRoot").expect("the selfRoot folder").join("knowledge");
    std::fs::create_dir_all(&folder).expect("knowledge folder");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|i| {
            let card = CardText::generate(&mut rng, i, rare(i), checks_of(i));
            std::fs::write(folder.join(format!("{}.md", card.id)), card.render()).expect("card file");
            card.id
        })
        .collect()
}

/// The faculty runtime and pipeline router of a host, set up in-process as `butler serve`
/// sets them up: runtime, catalog scan with its inspector (until the built-in faculties
/// are compiled and registered), reconcile, router, `host.call` dispatch, owner gate.
struct Pipeline {
    router: Arc<PipelineRouter>,
    _runtime: Arc<FacultyRuntime>,
}

impl Pipeline {
    fn new(instance: &Instance) -> Self {
        // Built as the host builds them (`butler_host::host`), the router behind `host.call`.
        let setup = instance.faculty_setup("http://127.0.0.1:9");
        let (runtime, router) =
            butler_host::host::faculties(setup, &instance.config.pipeline.routes, None, false).expect("runtime");
        let mut config = instance.scan_config();
        config.inspector = Some(runtime.inspector());
        let catalog = poll(Duration::from_secs(120), Duration::from_millis(5), || {
            let catalog = scan(&config, None);
            let optimized = |id: &&str| catalog.get(id).is_some_and(|e| e.components.iter().all(|c| c.optimized));
            BUILTINS.iter().all(optimized).then_some(catalog)
        })
        .expect("the built-in faculties compile and register");
        runtime.reconcile(&catalog);
        for id in BUILTINS {
            let state = runtime.status(id).map(|s| s.state);
            assert_eq!(state, Some("ready"), "faculty {id}");
        }
        Self { router, _runtime: runtime }
    }

    /// Runs `action` as an agent (not the owner) would.
    fn call(&self, action: &str, args: &Value) -> Value {
        self.router
            .call(action, args, &CallContext::top(false))
            .unwrap_or_else(|e| panic!("{action}: {} ({e})", e.code()))
    }
}

/// Requests per second that `clients` keep-alive connections complete in `window`, each
/// sending the next request as soon as the previous one is answered; `request(client,
/// n)` sends request `n` of a client.
fn throughput(authority: &str, clients: usize, window: Duration, request: impl Fn(&mut Client, usize) + Sync) -> f64 {
    let request = &request;
    rate(clients, window, |c| {
        let mut client = Client::connect(authority);
        let mut n = 0;
        Box::new(move || {
            request(&mut client, c * 1_000_003 + n);
            n += 1;
        })
    })
}

/// Calls per second `callers` threads complete in `window`, each calling again as soon as
/// its last call returned; `call(c)` prepares caller `c` (its connection) and gives its call,
/// which is made once before the window opens.
fn rate<'a>(callers: usize, window: Duration, call: impl Fn(usize) -> Box<dyn FnMut() + Send + 'a> + Sync) -> f64 {
    let barrier = std::sync::Barrier::new(callers + 1);
    let (done, began) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..callers)
            .map(|c| {
                let (barrier, call) = (&barrier, &call);
                scope.spawn(move || {
                    let mut once = call(c);
                    once();
                    barrier.wait();
                    let deadline = Instant::now() + window;
                    let mut n = 0usize;
                    while Instant::now() < deadline {
                        once();
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        barrier.wait();
        let began = Instant::now();
        (workers.into_iter().map(|w| w.join().expect("caller")).sum::<usize>(), began)
    });
    #[allow(clippy::cast_precision_loss)]
    let per_second = done as f64 / began.elapsed().as_secs_f64();
    per_second
}

/// B2: `POST /pipeline` `cards.read` on a store of 1,000 cards over loopback HTTP against
/// the real host, one client (p50, p99) and 16 concurrent keep-alive clients (throughput);
/// the baseline is `GET /health` over the same client.
fn b2_pipeline_read() {
    const CARDS: usize = 1000;
    const WARM_UP: usize = 100;
    const CALLS: usize = 1000;
    const CLIENTS: usize = 16;
    const WINDOW: Duration = Duration::from_secs(3);
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    let (instance, _) = Instance::open_or_create(&root).expect("new instance");
    let ids = write_cards(&instance, CARDS, |_| false, |_| json!([]));
    let host = Host::start_quiet(&root);
    host.wait_all_ready(BUILTINS, Duration::from_secs(120));
    // A new instance's faculties run quickly compiled code until their optimized compile,
    // which then takes both cores for a second or more: measure the host it leaves.
    for id in BUILTINS {
        host.wait_optimized(id);
    }

    let read_body =
        |n: usize| json!({"action": "cards.read", "args": {"id": ids[n.wrapping_mul(7919) % CARDS]}}).to_string();
    let read = |client: &mut Client, n: usize| {
        let (status, body) = client.send("POST", "/pipeline", &read_body(n));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    };
    let health = |client: &mut Client, _: usize| {
        let (status, body) = client.send("GET", "/health", "");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    };
    let mut client = Client::connect(host.authority());
    let (_, first) = client.send("POST", "/pipeline", &read_body(0));
    let first: Value = serde_json::from_slice(&first).expect("JSON");
    assert_eq!(first["data"]["card"]["id"], ids[0], "{first}");
    assert!(first["data"]["card"]["body"].as_str().is_some_and(|b| b.len() > 200), "{first}");

    for n in 0..WARM_UP {
        health(&mut client, n);
        read(&mut client, n);
    }
    // Interleaved on one connection, so both see the same machine.
    let mut baseline = Vec::with_capacity(CALLS);
    let mut calls = Vec::with_capacity(CALLS);
    for n in 0..CALLS {
        let start = Instant::now();
        health(&mut client, n);
        baseline.push(start.elapsed());
        let start = Instant::now();
        read(&mut client, n);
        calls.push(start.elapsed());
    }
    drop(client);
    let base_rate = throughput(host.authority(), CLIENTS, WINDOW, health);
    let rate = throughput(host.authority(), CLIENTS, WINDOW, read);
    drop(host);

    // Where the time goes: the same read in-process (no HTTP), and the validity refresh it
    // makes through `host.call`, alone.
    let pipeline = Pipeline::new(&instance);
    let in_process = |action: &str, args: &dyn Fn(usize) -> Value| {
        let samples: Vec<Duration> = (0..120)
            .map(|n| {
                let args = args(n);
                let start = Instant::now();
                std::hint::black_box(pipeline.call(action, &args));
                start.elapsed()
            })
            .skip(20)
            .collect();
        percentiles(samples).0
    };
    let id = |n: usize| ids[n.wrapping_mul(7919) % CARDS].clone();
    let direct = in_process("cards.read", &|n| json!({"id": id(n)}));
    let refresh = in_process("validity.refresh", &|n| json!({"ids": [id(n)]}));
    drop(pipeline);
    let breakdown = b2_in_process_host(&root, &|n| id(n));

    let (base50, base99) = percentiles(baseline);
    let (p50, p99) = percentiles(calls);
    line_us("B2 POST /pipeline cards.read, 1,000 cards, 1 client (p50)", p50, base50);
    line_us("B2 POST /pipeline cards.read, 1,000 cards, 1 client (p99)", p99, base99);
    line_in("B2 POST /pipeline cards.read, 1,000 cards, 16 clients (throughput)", rate, base_rate, "req/s");
    note(&format!(
        "B2: in-process cards.read p50 {:.0} µs, of which its nested validity.refresh {{ids:[id]}} alone p50 {:.0} µs",
        direct.as_secs_f64() * 1e6,
        refresh.as_secs_f64() * 1e6
    ));
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    note(&format!(
        "B2: in-process host (Host::new): cards.read through FacultyRuntime::blocking (a hop to a blocking thread) p50 {:.0} µs; POST /pipeline through the router without a socket p50 {:.0} µs, GET /health so {:.0} µs; the same after 150 µs idle each {:.0} µs and {:.0} µs; POST /pipeline as a task on a worker {:.0} µs",
        us(breakdown.hop),
        us(breakdown.stack),
        us(breakdown.health),
        us(breakdown.after_idle),
        us(breakdown.health_after_idle),
        us(breakdown.on_worker),
    ));
}

/// B2's breakdown, in microseconds at p50: the host of `root` assembled in this process as
/// `butler serve` assembles it.
struct B2InProcess {
    /// `cards.read` through `FacultyRuntime::blocking`: what a hop to a blocking thread and
    /// back adds to the call.
    hop: Duration,
    /// `POST /pipeline` through the real router driven without a socket, from this thread.
    stack: Duration,
    /// `GET /health` the same way.
    health: Duration,
    /// `stack`, each request after this thread slept 150 µs (as a served host idles between
    /// a client's requests): the same work on cold caches.
    after_idle: Duration,
    /// `GET /health` the same way.
    health_after_idle: Duration,
    /// `stack` run as a task on the runtime's workers and awaited from this thread: the two
    /// thread wake-ups it adds.
    on_worker: Duration,
}

/// Measures [`B2InProcess`] on `cards.read` of `id(n)`.
fn b2_in_process_host(root: &Path, id: &dyn Fn(usize) -> String) -> B2InProcess {
    use axum::body::Body;
    use axum::http::Request;
    use butler_host::http::connection::{PeerVerified, Transport};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let (instance, _) = Instance::open_or_create(root).expect("instance");
    let listening = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 9));
    let options = butler_host::host::Options { listening, hub_io: None, started: Instant::now() };
    let host = runtime.block_on(butler_host::host::Host::new(instance, options)).expect("host");
    let state = host.state().clone();
    poll(Duration::from_secs(120), Duration::from_millis(5), || state.faculties.readiness().ready.then_some(()))
        .expect("the built-in faculties are ready");
    let router = host.router();
    let samples = |idle: Duration, call: &dyn Fn(usize)| {
        let taken: Vec<Duration> = (0..520)
            .map(|n| {
                if !idle.is_zero() {
                    std::thread::sleep(idle);
                }
                let start = Instant::now();
                call(n);
                start.elapsed()
            })
            .skip(20)
            .collect();
        percentiles(taken).0
    };
    let hop = samples(Duration::ZERO, &|n| {
        let (pipeline, args) = (Arc::clone(&state.pipeline), json!({"id": id(n)}));
        let call = move || pipeline.call("cards.read", &args, &CallContext::top(false));
        runtime.block_on(state.faculties.blocking(None, call)).expect("cards.read");
    });
    let request = |method: &str, path: &str, body: String| {
        Request::builder()
            .method(method)
            .uri(format!("{}{path}", butler_host::http::API_PREFIX))
            .header("host", "127.0.0.1:9")
            .header("content-type", "application/json")
            .extension(Transport::Tcp)
            .extension(PeerVerified(true))
            .body(Body::from(body))
            .expect("a request")
    };
    let answer = |request: Request<Body>| {
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await.expect("an answer");
            assert_eq!(response.status(), 200);
            response.into_body().collect().await.expect("the body").to_bytes()
        }
    };
    let read =
        |n: usize| request("POST", "/pipeline", json!({"action": "cards.read", "args": {"id": id(n)}}).to_string());
    let send = |request: Request<Body>| {
        std::hint::black_box(runtime.block_on(answer(request)));
    };
    let idle = Duration::from_micros(150);
    B2InProcess {
        hop,
        stack: samples(Duration::ZERO, &|n| send(read(n))),
        health: samples(Duration::ZERO, &|_| send(request("GET", "/health", String::new()))),
        after_idle: samples(idle, &|n| send(read(n))),
        health_after_idle: samples(idle, &|_| send(request("GET", "/health", String::new()))),
        on_worker: samples(Duration::ZERO, &|n| {
            let task = runtime.spawn(answer(read(n)));
            std::hint::black_box(runtime.block_on(task).expect("the task"));
        }),
    }
}

/// B3: `cards.search` on 10,000 cards, in-process through the pipeline router (no HTTP),
/// against a plain substring scan of the same files.
fn b3_search() {
    const CARDS: usize = 10_000;
    const WARM_UP: usize = 2;
    const RUNS: usize = 15;
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    let (instance, _) = Instance::open_or_create(&root).expect("new instance");
    let rare = |i: usize| i % 1667 == 137;
    write_cards(&instance, CARDS, rare, |_| json!([]));
    let expected = (0..CARDS).filter(|i| rare(*i)).count();
    let pipeline = Pipeline::new(&instance);
    let knowledge = instance.folder("selfRoot").expect("the selfRoot folder").join("knowledge");

    let search = || {
        let found = pipeline.call("cards.search", &json!({"query": RARE}));
        assert_eq!(found["cards"].as_array().map(Vec::len), Some(expected), "{found}");
    };
    let substring_scan = || {
        let mut hits = 0;
        for entry in std::fs::read_dir(&knowledge).expect("knowledge") {
            let text = std::fs::read_to_string(entry.expect("entry").path()).expect("card");
            hits += usize::from(text.to_lowercase().contains(RARE));
        }
        assert_eq!(hits, expected);
    };
    let mut baseline = Vec::new();
    let mut searches = Vec::new();
    for run in 0..WARM_UP + RUNS {
        let start = Instant::now();
        substring_scan();
        let scanned = start.elapsed();
        let start = Instant::now();
        search();
        let searched = start.elapsed();
        if run >= WARM_UP {
            baseline.push(scanned);
            searches.push(searched);
        }
    }

    // Where the time goes: a search that matches nothing (load and rank only, no nested
    // refresh), and the nested validity refresh of the hits alone.
    let hits: Vec<String> = (0..CARDS).filter(|i| rare(*i)).map(|i| format!("card-{i:05}")).collect();
    let timed = |action: &str, args: &Value| {
        let samples = (0..7)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(pipeline.call(action, args));
                start.elapsed()
            })
            .collect();
        percentiles(samples).0
    };
    let no_match = timed("cards.search", &json!({"query": "zzzz-no-card-says-this"}));
    let refresh = timed("validity.refresh", &json!({"ids": hits}));

    let (base, _) = percentiles(baseline);
    let (p50, _) = percentiles(searches);
    line(&format!("B3 cards.search, 10,000 cards, {expected} hits, in-process (p50)"), p50, base);
    note(&format!(
        "B3: a search matching no card (load + rank, no nested refresh) p50 {:.1} ms; the nested validity.refresh \
         of the {expected} hits alone p50 {:.1} ms",
        ms(no_match),
        ms(refresh)
    ));
}

/// Whitespace-normalized text, as the validity faculty compares it.
fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// B10: `validity.refresh` over 10,000 checks (5,000 cards with a path check and a quote
/// check each, against 5,000 small files under the validity root), in-process through the
/// pipeline router, against the same checks done natively with `cap-std`.
fn b10_validity_refresh() {
    const CARDS: usize = 5000;
    const WARM_UP: usize = 1;
    const RUNS: usize = 9;
    const MAX_READ: u64 = 4 * 1024 * 1024;
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    let (instance, _) = Instance::open_or_create(&root).expect("new instance");

    // 5,000 small files under the validity root (the instance root), in 20 folders.
    let doc = |i: usize| format!("docs/part-{:02}/doc-{i:04}.md", i / 250);
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut quotes = Vec::with_capacity(CARDS);
    for i in 0..CARDS {
        let path = root.join(doc(i));
        std::fs::create_dir_all(path.parent().expect("parent")).expect("docs folder");
        let lines: Vec<String> = (0..6).map(|_| rng.sentence(6, 10)).collect();
        // The quote spans a line break, so it only matches whitespace-normalized.
        let quote = format!("{} {}", lines[2], lines[3]);
        std::fs::write(&path, format!("# Document {i}\n\n{}\n", lines.join("\n"))).expect("doc");
        quotes.push(quote);
    }
    // Card i: a path check on doc i and a quote check on doc i + 2,500. Most pass; 1 in
    // 100 names a missing file, 1 in 50 quotes text its file does not hold.
    let checks: Vec<(String, String, String)> = (0..CARDS)
        .map(|i| {
            let path = if i % 100 == 1 { format!("docs/gone/doc-{i:04}.md") } else { doc(i) };
            let j = (i + CARDS / 2) % CARDS;
            let quote = if i % 50 == 0 { format!("{} (since removed)", quotes[j]) } else { quotes[j].clone() };
            (path, doc(j), quote)
        })
        .collect();
    let failing = checks.iter().enumerate().filter(|(i, _)| i % 100 == 1 || i % 50 == 0).count();
    write_cards(
        &instance,
        CARDS,
        |_| false,
        |i| {
            let (path, quoted, text) = &checks[i];
            json!([{"type": "path", "path": path}, {"type": "quote", "path": quoted, "text": text}])
        },
    );
    let pipeline = Pipeline::new(&instance);

    let native = || {
        let dir = cap_std::fs::Dir::open_ambient_dir(&root, cap_std::ambient_authority()).expect("open root");
        let is_file = |path: &str| dir.metadata(path).is_ok_and(|m| m.is_file());
        let mut passing = 0;
        for (path, quoted, text) in &checks {
            passing += usize::from(is_file(path));
            let mut bytes = Vec::new();
            let read = is_file(quoted)
                && dir.open(quoted).is_ok_and(|file| file.take(MAX_READ).read_to_end(&mut bytes).is_ok());
            passing += usize::from(read && normalize(&String::from_utf8_lossy(&bytes)).contains(&normalize(text)));
        }
        assert_eq!(passing, 2 * CARDS - failing);
    };
    let refresh = || pipeline.call("validity.refresh", &json!({}));

    // The first refresh writes every verdict (and rebuilds the context for the suspended).
    let start = Instant::now();
    let first = refresh();
    let first_time = start.elapsed();
    assert_eq!(first, json!({"checked": CARDS, "suspended": failing, "restored": 0}));

    let mut baseline = Vec::new();
    let mut refreshes = Vec::new();
    for run in 0..WARM_UP + RUNS {
        let start = Instant::now();
        native();
        let checked = start.elapsed();
        let start = Instant::now();
        let answer = refresh();
        let refreshed = start.elapsed();
        // Steady state: verdicts unchanged, nothing rewritten.
        assert_eq!(answer, json!({"checked": CARDS, "suspended": 0, "restored": 0}));
        if run >= WARM_UP {
            baseline.push(checked);
            refreshes.push(refreshed);
        }
    }
    // Where the time goes: a refresh with no card wanted (the fixed cost of the call).
    let loading: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(pipeline.call("validity.refresh", &json!({"ids": []})));
            start.elapsed()
        })
        .collect();
    let (loading, _) = percentiles(loading);

    let (base, _) = percentiles(baseline);
    let (p50, _) = percentiles(refreshes);
    line("B10 validity.refresh, 5,000 cards x (path + quote) = 10,000 checks, steady state (p50)", p50, base);
    note(&format!(
        "B10: the first refresh (writes 5,000 verdicts, {failing} suspended, rebuilds the context) took {:.1} ms; \
         a refresh of no card ({{ids: []}}: the call's fixed cost, no card read) p50 {:.1} ms",
        ms(first_time),
        ms(loading)
    ));
}
