//! `docs/openapi.json` is kept true on a live host (the unit tests in
//! `host/src/http/routes/mod.rs` compare it with the router's table):
//!
//! - every documented operation is answered by its handler under both prefixes — not by
//!   the router's unknown-route or wrong-method answer — with a documented status;
//! - schemathesis (pinned in `tests/tools/api/`, installed by `scripts/test`) generates
//!   requests from the document with a fixed seed, as the owner, and finds no server error,
//!   no answer outside its documented schema or content type, and no undocumented status.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::util::{Butler, tool, wait_until, write_manifest};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn document() -> Value {
    let text = std::fs::read_to_string(root().join("docs/openapi.json")).expect("read docs/openapi.json");
    serde_json::from_str(&text).expect("docs/openapi.json is JSON")
}

/// Every (method, path, operation) of the document.
fn operations(doc: &Value) -> Vec<(Method, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("a path item") {
            if let Ok(method) = Method::from_bytes(method.to_uppercase().as_bytes())
                && operation.get("responses").is_some()
            {
                out.push((method, path.clone(), operation.clone()));
            }
        }
    }
    out
}

/// `path` with every `{parameter}` filled in.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|segment| if segment.starts_with('{') { "no-such-id" } else { segment })
        .collect::<Vec<_>>()
        .join("/")
}

/// Sends `operation` (with `body` as its body, if it takes one); the answer's status,
/// content type and body (empty for a stream).
fn send(
    client: &reqwest::blocking::Client,
    url: &str,
    (method, operation): (&Method, &Value),
    body: &str,
    token: Option<&str>,
) -> (u16, String, String) {
    let mut request = client.request(method.clone(), url);
    if operation.get("requestBody").is_some() {
        request = request.header("content-type", "application/json").body(body.to_owned());
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    // An event stream does not end: that it answered is enough.
    let body =
        if content_type.starts_with("text/event-stream") { String::new() } else { response.text().expect("body") };
    (status, content_type, body)
}

/// The error code of an envelope, or of a JSON-RPC error (the MCP routes').
fn code_of(body: &Value) -> &str {
    body["error"]["code"].as_str().or(body["error"]["data"]["code"].as_str()).unwrap_or_default()
}

#[test]
fn every_documented_operation_is_answered_by_its_handler_under_both_prefixes() {
    let doc = document();
    let operations = operations(&doc);
    assert!(operations.len() >= 20, "{} operations", operations.len());
    // Every connection must carry a credential: the token shows the handlers answer, its
    // absence that `401 token_required` is documented where it is answered.
    let (butler, _dir) = Butler::fresh_with_config(|config| config["mcp"]["auth"] = json!("token"));
    let token = butler.owner_token();
    let client = butler_test_support::http::client()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    // `PUT /config` replaces the root config: it is sent the one the host runs with, so the
    // credential it asks for stays what the rest of the test expects.
    let config = std::fs::read_to_string(butler.workdir.join("butler.json")).expect("the root config");
    for prefix in ["/myspace-butler/api", "/myspace-butler"] {
        for (method, path, operation) in &operations {
            let url = format!("{}{prefix}{}", butler.origin, concrete(path));
            let documented = operation["responses"].as_object().expect("responses");
            let sent = if *path == "/config" && *method == Method::PUT { config.as_str() } else { "{}" };
            let (status, content_type, text) = send(&client, &url, (method, operation), sent, Some(&token));
            assert!(documented.contains_key(&status.to_string()), "{method} {url}: {status} is not documented");
            if text.is_empty() {
                assert!(content_type.starts_with("text/event-stream") || status < 400, "{method} {url}: {status}");
                continue;
            }
            let body: Value =
                serde_json::from_str(&text).unwrap_or_else(|_| panic!("{method} {url}: {status}, not JSON: {text}"));
            // The router's own answers: no route, or not this method.
            let code = code_of(&body);
            assert!(
                code != "unknown_route" && code != "method_not_allowed",
                "{method} {url} is documented but answered by the router: {status} {body}"
            );

            let (status, _, text) = send(&client, &url, (method, operation), sent, None);
            if documented.contains_key("401") {
                let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{method} {url}: {text}"));
                assert_eq!((status, code_of(&body)), (401, "token_required"), "{method} {url}: {body}");
            } else {
                assert_ne!(status, 401, "{method} {url}: 401 is not documented");
            }
        }
    }
    // And what is not documented is not served: the router's answers, in the envelope.
    let unknown = client.get(butler.api("/no-such-route")).bearer_auth(&token).send().expect("request");
    let (status, body) = crate::util::json_of(unknown);
    crate::util::assert_error(status, &body, 404, "unknown_route");
    let patch = client.patch(butler.api("/health")).bearer_auth(&token).send().expect("request");
    let (status, body) = crate::util::json_of(patch);
    crate::util::assert_error(status, &body, 405, "method_not_allowed");
}

/// The installed schemathesis (`scripts/test` installs it).
fn schemathesis() -> PathBuf {
    let path = root().join("target/test-tools/api-venv/bin/schemathesis");
    assert!(
        path.is_file(),
        "schemathesis is not installed ({} is missing): run scripts/test, which installs the pinned test tools \
         (or scripts/install-api-test-tools for this one alone)",
        path.display()
    );
    path
}

/// How schemathesis is run (the command line adds the URL, the seed and the checks).
///
/// One operation is excluded: `PUT /config` replaces the root config, and a generated one
/// that validates takes the fixture's agent and grants away for good — after which the host
/// rightly answers 503 where no agent is set (every other documented test of it stands: the
/// check test above sends it the config the host runs with, and the console's Settings test
/// saves through it). Nothing else can stop the host or lose its state. The streams
/// (`/events`, the logs, MCP's `GET`) are read for one event, the first of which each
/// sends at once, so they answer like any other route. Start, stop and restart act on
/// `sleep` processes, which stop at the first SIGTERM; the review decisions need a
/// candidate, and no generated id names one.
///
/// The dictionaries give real ids half the time, so handlers past the lookup are reached:
/// the fixture's tool and service, the built-in faculties and their read-only commands
/// and reports.
const CONFIG: &str = r#"
headers = { Authorization = "Bearer ${BUTLER_OWNER_TOKEN}" }
request-timeout = 30

[generation]
database = "none"

[dictionaries.extensions]
values = ["probe-tool", "probe-service", "plain-tool", "cards"]
[dictionaries.faculties]
values = ["cards", "journal", "distill", "validity"]
[dictionaries.commands]
values = ["list", "search", "read", "review-list", "cards", "check", "evidence"]
[dictionaries.reports]
values = ["queue", "library", "recent", "batches", "summary"]

[parameters]
"path.id" = { dictionary = "extensions", probability = 0.5 }

[[operations]]
include-path-regex = "^/faculties/"
parameters = { "path.id" = { dictionary = "faculties", probability = 0.5 }, "path.command" = { dictionary = "commands", probability = 0.5 }, "path.report" = { dictionary = "reports", probability = 0.5 } }

[[operations]]
include-path-regex = "(/events|/log|^/mcp(/butler)?)$"
max-stream-events = 1

[[operations]]
include-path = "/config"
include-method = "PUT"
enabled = false
"#;

/// The seed, and how many cases per operation and phase: about 40 s on a 2-core machine.
const SEED: &str = "20261201";
const MAX_EXAMPLES: &str = "40";
/// A run that takes longer than this is stopped and fails.
const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn schemathesis_finds_no_server_error_and_no_undocumented_answer() {
    let schemathesis = schemathesis();
    // An agent that does nothing: without one the agent routes answer 503 by design, which
    // the fuzzer would count as a server error.
    let (butler, dir) = Butler::fresh_with_config(|config| config["agent"] = json!({"command": ["true"]}));
    // What the supervise and icon routes act on.
    let sleeper = |kind: &str, id: &str, auto: bool| {
        json!({"schemaVersion": 1, "kind": kind, "id": id, "name": id,
               "hosted": {"command": ["sleep", "600"], "autoStart": auto}})
    };
    write_manifest(&butler.workdir, "tools/probe-tool", &sleeper("tool", "probe-tool", false));
    write_manifest(&butler.workdir, "services/probe-service", &sleeper("service", "probe-service", true));
    let mut plain = tool("plain-tool", "Plain tool");
    plain["icon"] = json!("icon.svg");
    write_manifest(&butler.workdir, "tools/plain-tool", &plain);
    std::fs::write(
        butler.workdir.join("tools/plain-tool/icon.svg"),
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><rect width="1" height="1"/></svg>"#,
    )
    .expect("icon");
    wait_until(Duration::from_secs(30), "the fixture registered and the faculties ready", || {
        let ids = butler.ids();
        let (_, health) = butler.get_json("/health");
        ["probe-tool", "probe-service", "plain-tool"].iter().all(|id| ids.iter().any(|i| i == id))
            && health["faculties"]["ready"] == true
    });

    let work = dir.path().join("schemathesis");
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::write(work.join("schemathesis.toml"), CONFIG).expect("config");
    let run = || {
        let mut command = Command::new(&schemathesis);
        command
            .arg("--config-file")
            .arg(work.join("schemathesis.toml"))
            .arg("run")
            .arg(root().join("docs/openapi.json"))
            .args(["--url", &butler.api("")])
            .args([
                "--checks",
                "not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance",
            ])
            .args(["--phases", "examples,coverage,fuzzing"])
            .args(["--seed", SEED, "--max-examples", MAX_EXAMPLES, "--workers", "2", "--no-color"])
            .current_dir(&work)
            .env("BUTLER_OWNER_TOKEN", butler.owner_token())
            .env("NO_COLOR", "1")
            // The host is on loopback: never through a proxy.
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = command.spawn().expect("run schemathesis");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let out = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let err = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break Some(status);
            }
            if started.elapsed() > LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let elapsed = started.elapsed();
        let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
        eprintln!("schemathesis ran {elapsed:.1?}");
        let Some(status) = status else {
            panic!("schemathesis did not finish within {LIMIT:?}:\n{out}\n{err}");
        };
        (status, out, err)
    };
    let (mut status, mut out, mut err) = run();
    // CPython 3.11's `ast.parse` can fail when two threads parse at once ("AST constructor
    // recursion depth mismatch"), which hypothesis does when two workers describe their
    // strategies: a crash of the tool, not an answer of the host's. It is run once more.
    if !status.success() && out.contains("AST constructor recursion depth mismatch") {
        eprintln!("schemathesis crashed inside Python's ast module; running it once more");
        (status, out, err) = run();
    }
    assert!(
        status.success(),
        "schemathesis found answers docs/openapi.json does not describe ({status}):\n{out}\n{err}"
    );
    assert!(out.contains(" generated, "), "schemathesis generated no test case:\n{out}\n{err}");
    assert!(butler.get_json("/health").0 == 200, "the host is still up");
}

#[test]
fn a_path_or_query_that_does_not_read_is_answered_in_the_envelope() {
    let (butler, _dir) = Butler::start_fresh();
    for (method, path) in [
        (Method::POST, "/tools/%FF/start"),
        (Method::GET, "/services/%C3%28/log"),
        (Method::GET, "/extensions/%FF/icon"),
        (Method::POST, "/faculties/cards/commands/%FF"),
        (Method::GET, "/faculties/%FF/reports/queue"),
    ] {
        let response = butler.request(method.clone(), &butler.api(path)).send().expect("request");
        let (status, body) = crate::util::json_of(response);
        crate::util::assert_error(status, &body, 400, "invalid_path");
    }
    let (status, body) = butler.get_json("/login?t=a&t=b");
    crate::util::assert_error(status, &body, 400, "invalid_query");
}
