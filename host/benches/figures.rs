//! The project's benchmark entry point (`cargo bench -p butler-host`).
//!
//! Prints one line per figure: `name: value unit (baseline: value unit, ratio: x)`. Every
//! figure is measured beside a baseline taken in the same run, because absolute times on
//! a shared machine are noise; see `docs/benchmarks.md` for what each one means.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use butler_host::catalog::{ScanConfig, scan};

const BUTLER: &str = env!("CARGO_BIN_EXE_butler");

fn main() {
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wanted = |id: &str| filter.is_empty() || filter.iter().any(|f| id.starts_with(f.as_str()));
    if wanted("B6") {
        b6_startup();
    }
    if wanted("B7") {
        b7_scan();
    }
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn line(name: &str, value: Duration, baseline: Duration) {
    println!(
        "{name}: {:.2} ms (baseline: {:.2} ms, ratio: {:.2}x)",
        ms(value),
        ms(baseline),
        value.as_secs_f64() / baseline.as_secs_f64()
    );
}

/// An instance with `n` valid extensions, spread over the three scan roots.
fn instance_with(root: &Path, n: usize) {
    std::fs::write(root.join("butler.json"), "{}").expect("root config");
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
    instance_with(&root, 100);
    let home = tempfile::tempdir().expect("home");

    let mut baseline = Vec::new();
    let mut startup = Vec::new();
    for run in 0..=RUNS {
        let start = Instant::now();
        let status = Command::new(BUTLER).arg("--version").stdout(Stdio::null()).status().expect("butler --version");
        assert!(status.success());
        let version = start.elapsed();

        let start = Instant::now();
        let mut child = Command::new(BUTLER)
            .args(["serve", "--port", "0", "--workdir"])
            .arg(&root)
            .env("XDG_CONFIG_HOME", home.path())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut first).expect("url line");
        let authority = first
            .split_whitespace()
            .find_map(|w| w.strip_prefix("http://"))
            .and_then(|r| r.split('/').next())
            .expect("url")
            .to_owned();
        while !health_ok(&authority) {
            std::thread::sleep(Duration::from_micros(200));
        }
        let ready = start.elapsed();
        let _ = child.kill();
        let _ = child.wait();
        if run > 0 {
            // The first run warms the page cache; it is not counted.
            baseline.push(version);
            startup.push(ready);
        }
    }
    let (base, _) = percentiles(baseline);
    let (p50, _) = percentiles(startup);
    line("B6 start-up to /health, 100 extensions (p50)", p50, base);
}

fn health_ok(authority: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(authority) else {
        return false;
    };
    let request = format!("GET /myspace-butler/api/health HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200")
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
    };
    let files: Vec<_> = config.candidate_dirs().into_iter().map(|d| d.join("butler.json")).collect();

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
