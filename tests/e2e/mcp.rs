//! The MCP hub with real providers — `@modelcontextprotocol/server-everything` (npm),
//! `mcp-server-time` (PyPI) and a small provider that misbehaves on request
//! (`tests/providers/fake_mcp.py`) — and real clients: a plain HTTP client here, the
//! official Python SDK and the official conformance suite. The tools are pinned in
//! `tests/tools/mcp/` and installed by `scripts/install-mcp-test-tools`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Butler, wait_until, write_manifest};

pub(crate) const LIMIT: Duration = Duration::from_secs(60);

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Installs the pinned MCP tools once per test run; returns `target/test-tools`.
pub(crate) fn tools() -> PathBuf {
    static INSTALLED: OnceLock<PathBuf> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let status = std::process::Command::new("bash")
                .arg(root().join("scripts/install-mcp-test-tools"))
                .status()
                .expect("run scripts/install-mcp-test-tools (needs python3, node and npm)");
            assert!(status.success(), "scripts/install-mcp-test-tools failed");
            root().join("target/test-tools")
        })
        .clone()
}

fn provider(id: &str, command: Value, extra: Value) -> Value {
    let mut mcp = json!({"transport": "stdio", "command": command});
    if let (Some(mcp), Some(extra)) = (mcp.as_object_mut(), extra.as_object()) {
        mcp.extend(extra.clone());
    }
    json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id, "mcp": mcp})
}

pub(crate) fn fake(id: &str, log: &Path, extra: Value) -> Value {
    let script = root().join("tests/providers/fake_mcp.py").display().to_string();
    let mut settings = json!({"env": {"FAKE_MCP_LOG": log.display().to_string()}, "timeoutSec": 5});
    if let (Some(s), Some(e)) = (settings.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    provider(id, json!(["python3", script]), settings)
}

/// An instance with a root config and nothing else.
pub(crate) fn instance() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp");
    std::fs::write(dir.path().join("butler.json"), "{}").expect("root config");
    dir
}

/// A minimal Streamable HTTP client.
pub(crate) struct Client<'a> {
    butler: &'a Butler,
    path: String,
    session: Option<String>,
    next: u64,
}

impl<'a> Client<'a> {
    pub(crate) fn connect(butler: &'a Butler, path: &str) -> Self {
        let mut client = Self { butler, path: path.to_owned(), session: None, next: 1 };
        let (status, headers, body) = client.post(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}),
            &[],
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["protocolVersion"], "2025-11-25");
        client.session = Some(headers.get("mcp-session-id").expect("a session id").to_str().expect("ascii").to_owned());
        let (status, _, _) = client.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), &[]);
        assert_eq!(status, 202);
        client
    }

    /// The session's id.
    pub(crate) fn session_id(&self) -> &str {
        self.session.as_deref().unwrap_or_default()
    }

    pub(crate) fn post(&self, body: &Value, headers: &[(&str, &str)]) -> (u16, reqwest::header::HeaderMap, Value) {
        let mut request = self
            .butler
            .request(reqwest::Method::POST, &self.butler.api(&self.path))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = request.send().expect("request");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().expect("body");
        (status, headers, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let (status, _, body) =
            self.post(&json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}), &[]);
        assert_eq!(status, 200, "{method}: {body}");
        assert_eq!(body["id"], self.next, "{body}");
        body
    }

    pub(crate) fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let body = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        assert!(body.get("error").is_none(), "{tool}: {body}");
        body["result"].clone()
    }

    pub(crate) fn tool_names(&mut self) -> Vec<String> {
        let body = self.request("tools/list", json!({}));
        body["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_owned())
            .collect()
    }
}

pub(crate) fn text_of(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn status(butler: &Butler) -> Value {
    let (code, body) = butler.get_json("/mcp/status");
    assert_eq!(code, 200, "{body}");
    body
}

pub(crate) fn provider_status(butler: &Butler, id: &str) -> Value {
    status(butler)["providers"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["id"] == id).cloned())
        .unwrap_or(Value::Null)
}

pub(crate) fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_owned).collect()
}

#[test]
fn real_providers_are_aggregated_under_their_namespaces() {
    let tools = tools();
    let dir = instance();
    let everything = tools.join("mcp-js/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    write_manifest(
        dir.path(),
        "tools/everything",
        &provider("everything", json!(["node", everything.display().to_string(), "stdio"]), json!({})),
    );
    write_manifest(
        dir.path(),
        "tools/clock",
        &provider(
            "clock",
            json!([tools.join("mcp-venv/bin/mcp-server-time").display().to_string()]),
            json!({"namespace": "time"}),
        ),
    );
    let log = dir.path().join("fake.log");
    write_manifest(dir.path(), "tools/fake", &fake("fake", &log, json!({})));
    let butler = Butler::start(dir.path());
    assert!(log_lines(&log).is_empty(), "providers start lazily, not with the host");

    let mut client = Client::connect(&butler, "/mcp");
    // A list answers without the providers not ready within `LIST_WAIT` (and waits for a
    // start once): on a loaded machine the four may take longer, so lists are asked again.
    let expected = ["everything__echo", "everything__get-sum", "time__get_current_time", "fake__echo"];
    let mut names = Vec::new();
    wait_until(LIMIT, "every provider's tools", || {
        names = client.tool_names();
        expected.iter().all(|tool| names.iter().any(|n| n == tool))
    });
    // The `butler__` tools are the faculties' offers (an instance without them has none)
    // and the hub's search tool, after all the others.
    assert_eq!(names.last().map(String::as_str), Some("butler__find_tools"), "{names:?}");
    assert!(!names[..names.len() - 1].iter().any(|n| n.starts_with("butler__")), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("distill") || n.contains("approve") || n.contains("review")), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("fake__x") || n.contains(' ')),
        "invalid names are not exposed: {names:?}"
    );
    assert_eq!(client.tool_names(), names, "the order is stable");

    assert!(text_of(&client.call("everything__echo", json!({"message": "hello hub"}))).contains("hello hub"));
    let sum = client.call("everything__get-sum", json!({"a": 2, "b": 40}));
    assert!(text_of(&sum).contains("42"), "{sum}");
    let now = client.call("time__get_current_time", json!({"timezone": "UTC"}));
    assert_ne!(now["isError"], true, "{now}");
    assert!(text_of(&now).contains("UTC"), "{now}");
    let unknown = client.request("tools/call", json!({"name": "fake__nope", "arguments": {}}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    let fake = provider_status(&butler, "fake");
    assert_eq!(fake["state"], "ready", "{fake}");
    assert!(fake["pid"].as_u64().is_some(), "{fake}");
    let rejected: Vec<&str> =
        fake["rejected"].as_array().expect("rejected").iter().filter_map(|r| r["tool"].as_str()).collect();
    assert!(rejected.contains(&"bad name!") && rejected.iter().any(|r| r.len() == 70), "{fake}");
    assert_eq!(provider_status(&butler, "clock")["namespace"], "time");
    assert!(provider_status(&butler, "everything")["calls"].as_u64() >= Some(2));

    // Each is spoken to in its own era: mcp-server-time answers `server/discover` with
    // 2026-07-28; server-everything and the fake refuse it and get `initialize`.
    assert_eq!(provider_status(&butler, "clock")["protocol"], "2026-07-28");
    assert_eq!(provider_status(&butler, "everything")["protocol"], "2025-06-18");
    assert_eq!(provider_status(&butler, "fake")["protocol"], "2025-06-18");
    // Whichever era the client speaks.
    let asked = crate::mcp_stateless::request(
        9,
        "tools/call",
        json!({"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}),
    );
    let now = crate::mcp_stateless::ask(&butler, "/mcp", &asked);
    assert!(text_of(&now["result"]).contains("UTC"), "{now}");
    let asked = crate::mcp_stateless::request(
        10,
        "tools/call",
        json!({"name": "everything__echo", "arguments": {"message": "stateless"}}),
    );
    assert!(text_of(&crate::mcp_stateless::ask(&butler, "/mcp", &asked)["result"]).contains("stateless"));
}

#[test]
fn a_provider_named_in_legacy_providers_is_spoken_to_with_initialize_only() {
    let tools = tools();
    let dir = instance();
    std::fs::write(dir.path().join("butler.json"), json!({"mcp": {"legacyProviders": ["clock"]}}).to_string())
        .expect("root config");
    let time = json!([tools.join("mcp-venv/bin/mcp-server-time").display().to_string()]);
    write_manifest(dir.path(), "tools/clock", &provider("clock", time, json!({"namespace": "time"})));
    let butler = Butler::start(dir.path());
    let mut client = Client::connect(&butler, "/mcp");
    let now = client.call("time__get_current_time", json!({"timezone": "UTC"}));
    assert!(text_of(&now).contains("UTC"), "{now}");
    assert_eq!(provider_status(&butler, "clock")["protocol"], "2025-06-18");
}

#[test]
fn a_provider_that_crashes_hangs_or_reports_progress_costs_only_itself() {
    tools();
    let dir = instance();
    let log = dir.path().join("fake.log");
    write_manifest(dir.path(), "tools/fake", &fake("fake", &log, json!({})));
    let butler = Butler::start_with_env(dir.path(), &[], &[("BUTLER_TEST_SECRET", "do-not-leak")]);
    let mut client = Client::connect(&butler, "/mcp");
    client.tool_names();

    // Its environment: the safe list, its manifest's env, the hub channel — not the host's.
    let env: Vec<String> = serde_json::from_str(&text_of(&client.call("fake__env", json!({})))).expect("env list");
    for expected in ["PATH", "BUTLER_MCP_CHANNEL", "FAKE_MCP_LOG", "BUTLER_HOST_URL"] {
        assert!(env.contains(&expected.to_owned()), "{expected} missing: {env:?}");
    }
    assert!(!env.contains(&"BUTLER_TEST_SECRET".to_owned()), "the host's environment leaked: {env:?}");

    // Progress reaches the client with its own token, before the answer.
    let events = sse_call(
        &butler,
        &client,
        json!({"name": "fake__progress", "arguments": {}, "_meta": {"progressToken": "mine-1"}}),
    );
    let progress: Vec<&Value> = events.iter().filter(|e| e["method"] == "notifications/progress").collect();
    assert_eq!(progress.len(), 3, "{events:?}");
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "mine-1"), "{events:?}");
    assert_eq!(events.last().map(|e| text_of(&e["result"])), Some("done".to_owned()), "{events:?}");

    // A hang times out (timeoutSec 5): isError to the caller, notifications/cancelled to
    // the provider with the provider's own request id.
    let started = Instant::now();
    let hung = client.call("fake__hang", json!({}));
    assert_eq!(hung["isError"], true, "{hung}");
    assert!(started.elapsed() >= Duration::from_secs(5));
    let hanging = log_lines(&log).iter().find_map(|l| l.strip_prefix("hanging ").map(str::to_owned)).expect("hanging");
    wait_until(LIMIT, "the cancellation to reach the provider", || {
        log_lines(&log).iter().any(|l| l.starts_with(&format!("cancelled {hanging} timed out")))
    });
    assert_eq!(provider_status(&butler, "fake")["timeouts"], 1);

    // A client's own cancellation is forwarded too, from the session that made the call.
    let other = Client::connect(&butler, "/mcp");
    std::thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            other.post(&json!({"jsonrpc": "2.0", "id": 777, "method": "tools/call", "params": {"name": "fake__hang", "arguments": {}}}), &[])
        });
        wait_until(LIMIT, "a second hang", || log_lines(&log).iter().filter(|l| l.starts_with("hanging")).count() == 2);
        let second =
            log_lines(&log).iter().filter_map(|l| l.strip_prefix("hanging ").map(str::to_owned)).nth(1).expect("id");
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 777, "reason": "user cancelled"}});
        assert_eq!(other.post(&cancel, &[]).0, 202);
        wait_until(LIMIT, "the client's cancellation to reach the provider", || {
            log_lines(&log).iter().any(|l| l == &format!("cancelled {second} user cancelled"))
        });
        let (status, _, answer) = waiting.join().expect("thread");
        assert_eq!(status, 200, "{answer}");
    });

    // A crash: isError for the call, the provider comes back by itself after 5 s.
    let crashed = client.call("fake__crash", json!({}));
    assert_eq!(crashed["isError"], true, "{crashed}");
    assert_eq!(provider_status(&butler, "fake")["state"], "crashed");
    wait_until(LIMIT, "the provider to restart", || {
        provider_status(&butler, "fake")["state"] == "ready"
            && log_lines(&log).iter().filter(|l| l.starts_with("started")).count() == 2
    });
    assert_eq!(text_of(&client.call("fake__echo", json!({"text": "back"}))), "back");

    // A provider that stops reading its input: once the pipe is full, a call still ends
    // at its timeoutSec (5 s) — and so does the next, however the last write ended.
    let deaf = client.call("fake__deaf", json!({}));
    assert_eq!(deaf["isError"], true, "{deaf}");
    let large = "x".repeat(300_000);
    for text in [large.as_str(), "small"] {
        let began = std::time::Instant::now();
        let stuck = client.call("fake__echo", json!({"text": text}));
        assert_eq!(stuck["isError"], true, "{}", text_of(&stuck));
        assert!(text_of(&stuck).contains("did not answer within 5 s"), "{}", text_of(&stuck));
        assert!(began.elapsed() < Duration::from_secs(30), "ended at its limit, not never: {:?}", began.elapsed());
    }
}

/// `tools/call` with a progress token, answered as SSE: every message, in order.
fn sse_call(butler: &Butler, client: &Client<'_>, params: Value) -> Vec<Value> {
    let authority = butler.origin.trim_start_matches("http://").to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 4242, "method": "tools/call", "params": params}).to_string();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    write!(
        stream,
        "POST /myspace-butler/api/mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        client.session.as_deref().unwrap_or_default(),
        body.len()
    )
    .expect("send");
    let reader = BufReader::new(stream);
    let mut events = Vec::new();
    for line in reader.lines().map_while(Result::ok) {
        // The priming event (an id and empty data) carries no message.
        if let Some(data) = line.strip_prefix("data: ").filter(|data| !data.is_empty()) {
            let message: Value = serde_json::from_str(data).expect("JSON event");
            let done = message.get("id").is_some();
            events.push(message);
            if done {
                break;
            }
        }
    }
    events
}

#[test]
fn sessions_versions_and_the_gate_follow_the_transport_rules() {
    let dir = instance();
    let butler = Butler::start(dir.path());
    let mut client = Client::connect(&butler, "/mcp");
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});

    let anonymous = Client { butler: &butler, path: "/mcp".into(), session: None, next: 0 };
    assert_eq!(anonymous.post(&list, &[]).0, 400, "no session header");
    let stranger = Client { butler: &butler, path: "/mcp".into(), session: Some("0123".into()), next: 0 };
    assert_eq!(stranger.post(&list, &[]).0, 404, "unknown session");
    assert_eq!(client.post(&list, &[("mcp-protocol-version", "1999-01-01")]).0, 400);
    assert_eq!(client.post(&list, &[("mcp-protocol-version", "2025-06-18")]).0, 200);
    let (status, _, body) = client.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "no/such"}), &[]);
    assert_eq!((status, body["error"]["code"].as_i64()), (200, Some(-32601)), "{body}");
    let (status, _, body) = client.post(&json!({"id": 1, "method": "ping"}), &[]);
    assert_eq!((status, body["error"]["code"].as_i64()), (400, Some(-32600)), "{body}");
    let response = butler
        .request(reqwest::Method::POST, &butler.api("/mcp"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .expect("request");
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().expect("json");
    assert_eq!(body["error"]["code"], -32700);
    assert_eq!(client.request("ping", json!({}))["result"], json!({}));
    let (status, _, _) = client.post(
        &json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]),
        &[],
    );
    assert_eq!(status, 200, "a batch");

    // Older revisions are spoken; an unknown one gets the latest.
    for (asked, agreed) in [("2025-03-26", "2025-03-26"), ("2025-06-18", "2025-06-18"), ("2031-01-01", "2025-11-25")] {
        let (status, _, body) = anonymous.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}), &[]);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["protocolVersion"], agreed);
    }

    // The gate: a foreign Origin is refused before MCP sees anything (a foreign Host is
    // the conformance suite's dns-rebinding-protection scenario, below).
    assert_eq!(client.post(&list, &[("origin", "http://evil.example")]).0, 403);

    // DELETE ends the session; it is then unknown.
    let session = client.session.clone().expect("session");
    let deleted = butler
        .request(reqwest::Method::DELETE, &butler.api("/mcp"))
        .header("mcp-session-id", &session)
        .send()
        .expect("delete");
    assert_eq!(deleted.status().as_u16(), 204);
    assert_eq!(client.post(&list, &[]).0, 404);
    // A session of one endpoint is not valid on the other.
    let distill = Client::connect(&butler, "/mcp/butler");
    let crossed = Client { butler: &butler, path: "/mcp".into(), session: distill.session.clone(), next: 0 };
    assert_eq!(crossed.post(&list, &[]).0, 404);
}

#[test]
fn host_tools_and_the_restricted_distill_endpoint() {
    // A new instance (the skeleton, with the built-in faculties) plus the fake provider.
    let dir = tempfile::tempdir().expect("temp");
    let workdir = dir.path().join("instance");
    let log = dir.path().join("fake.log");
    write_manifest(&workdir, "tools/fake", &fake("fake", &log, json!({})));
    let butler = Butler::start(&workdir);
    // The built-in faculties' first compile can outlast the hub's settle on a loaded
    // machine; the cold start has its own tests in `lifecycle`.
    butler.wait_compiled();
    let mut client = Client::connect(&butler, "/mcp");
    let names = client.tool_names();
    assert!(!names.iter().any(|n| n.contains("distill") || n.contains("candidate")), "{names:?}");

    // includeInactive is not in butler__search's schema: passing it is an error.
    let refused = client.call("butler__search", json!({"query": "anything", "includeInactive": true}));
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text_of(&refused).contains("includeInactive"), "{refused}");
    let missing = client.call("butler__read", json!({}));
    assert_eq!(missing["isError"], true, "{missing}");

    let mut distill = Client::connect(&butler, "/mcp/butler");
    let restricted = distill.tool_names();
    for expected in [
        "butler__search",
        "butler__read",
        "butler__distill_claim",
        "butler__distill_evidence",
        "butler__candidate_submit",
        "butler__distill_complete",
    ] {
        assert!(restricted.contains(&expected.to_owned()), "{expected}: {restricted:?}");
    }
    assert!(!restricted.iter().any(|n| n.starts_with("fake__")), "no provider tools there: {restricted:?}");
    assert!(
        !restricted.iter().chain(&names).any(|n| n.contains("approve") || n.contains("reject") || n.contains("review"))
    );
    let on_main = client.request("tools/call", json!({"name": "butler__distill_claim", "arguments": {}}));
    assert_eq!(on_main["error"]["code"], -32602, "distill tools are not on the main endpoint: {on_main}");

    // The context is a resource and a prompt on both.
    let resources = client.request("resources/list", json!({}));
    assert!(
        resources["result"]["resources"].as_array().expect("resources").iter().any(|r| r["uri"] == "butler://context")
    );
    let read = client.request("resources/read", json!({"uri": "butler://context"}));
    assert!(read["result"]["contents"][0]["text"].is_string(), "{read}");
    let prompt = distill.request("prompts/get", json!({"name": "butler__context"}));
    assert!(prompt["result"]["messages"][0]["content"]["text"].is_string(), "{prompt}");
    // Providers' prompts and resources are namespaced too — once approved: a new instance
    // holds them, as it holds tools, until the owner approves them.
    let held = client.request("prompts/list", json!({}));
    assert!(!held.to_string().contains("fake__greet"), "{held}");
    let held = client.request("prompts/get", json!({"name": "fake__greet"}));
    assert!(held.to_string().contains("held for the owner"), "{held}");
    let token = format!("Bearer {}", butler.owner_token());
    let (status, approved) =
        butler.post_json("/mcp/quarantine/approve", &json!({"provider": "fake"}), &[("authorization", token.as_str())]);
    assert_eq!(status, 200, "{approved}");
    let prompts = client.request("prompts/list", json!({}));
    assert!(
        prompts["result"]["prompts"].as_array().expect("prompts").iter().any(|p| p["name"] == "fake__greet"),
        "{prompts}"
    );
    let greet = client.request("prompts/get", json!({"name": "fake__greet"}));
    assert_eq!(greet["result"]["messages"][0]["content"]["text"], "hello from fake", "{greet}");
    let readme = client.request("resources/read", json!({"uri": "fake://readme"}));
    assert_eq!(readme["result"]["contents"][0]["text"], "the fake readme", "{readme}");

    // A session report goes through the session collector to the journal: redacted,
    // stored durably, and a session line the distiller reads.
    butler.wait_ready("journal");
    let reported = client.call(
        "butler__report_session",
        json!({"text": "we chose sqlite for the cache; password=hunter2-x", "id": "report-1"}),
    );
    assert_ne!(reported["isError"], true, "{reported}");
    assert_eq!(reported["structuredContent"]["queued"], true, "{reported}");
    butler.post_json("/sessions/flush", &json!({}), &[]);
    let lines: Vec<Value> = std::fs::read_dir(butler.workdir.join("self/sessions"))
        .expect("session lines")
        .flatten()
        .flat_map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect::<Vec<Value>>()
        })
        .collect();
    let line = lines.iter().find(|o| o["id"] == "report-1").unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(line["type"], "session");
    assert_eq!(line["source"], "mcp-client");
    assert_eq!(line["text"], "assistant: we chose sqlite for the cache; password=[redacted]");
}

#[test]
fn namespace_conflicts_and_live_changes() {
    tools();
    let dir = instance();
    let log_a = dir.path().join("a.log");
    let log_b = dir.path().join("b.log");
    write_manifest(dir.path(), "tools/a-dup", &fake("a-dup", &log_a, json!({"namespace": "dup"})));
    write_manifest(dir.path(), "tools/b-dup", &fake("b-dup", &log_b, json!({"namespace": "dup"})));
    write_manifest(dir.path(), "tools/sneaky", &fake("sneaky", &log_b, json!({"namespace": "butler"})));
    let butler = Butler::start(dir.path());
    let conflicts = status(&butler)["conflicts"].clone();
    let held =
        |id: &str| conflicts.as_array().and_then(|c| c.iter().find(|x| x["id"] == id)).map(|x| x["heldBy"].clone());
    assert_eq!(held("b-dup"), Some(json!("a-dup")), "{conflicts}");
    // The reserved namespace is refused when the manifest is read.
    let diagnostics = butler.catalog()["diagnostics"].clone();
    assert!(
        diagnostics.as_array().is_some_and(|d| d.iter().any(|d| d["path"] == "tools/sneaky/butler.json")),
        "{diagnostics}"
    );

    let mut client = Client::connect(&butler, "/mcp");
    assert!(client.tool_names().contains(&"dup__echo".to_owned()));
    wait_until(LIMIT, "a-dup to run", || log_lines(&log_a).iter().any(|l| l.starts_with("started")));
    let pid: u32 = log_lines(&log_a)[0].trim_start_matches("started ").parse().expect("pid");

    // Removing a-dup stops its process and frees the namespace for b-dup.
    std::fs::remove_dir_all(butler.workdir.join("tools/a-dup")).expect("rm");
    wait_until(LIMIT, "b-dup to take the namespace", || {
        let s = status(&butler);
        s["providers"].as_array().is_some_and(|p| p.iter().any(|p| p["id"] == "b-dup"))
            && !s["providers"].as_array().is_some_and(|p| p.iter().any(|p| p["id"] == "a-dup"))
    });
    wait_until(LIMIT, "a-dup's process to stop", || !Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid));
    assert_eq!(text_of(&client.call("dup__echo", json!({"text": "from b"}))), "from b");
    assert!(log_lines(&log_b).iter().any(|l| l.starts_with("started")), "the call went to b-dup");

    // A changed `mcp` block replaces the provider: the next call runs the new one.
    let log_c = dir.path().join("c.log");
    write_manifest(&butler.workdir, "tools/b-dup", &fake("b-dup", &log_c, json!({"namespace": "dup"})));
    wait_until(LIMIT, "the changed provider to be called", || {
        client.call("dup__echo", json!({"text": "again"}));
        log_lines(&log_c).iter().any(|l| l.starts_with("started"))
    });
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(true)
}

#[test]
fn the_official_python_sdk_and_conformance_suite_pass() {
    let tools = tools();
    let dir = instance();
    let log = dir.path().join("fake.log");
    write_manifest(dir.path(), "tools/fake", &fake("fake", &log, json!({})));
    let butler = Butler::start(dir.path());
    let url = format!("http://localhost:{}/myspace-butler/api/mcp", butler.port);

    let script = r#"
import asyncio, sys, mcp
async def main(url):
    async with mcp.Client(url, mode="legacy") as client:
        tools = await client.list_tools()
        names = sorted(t.name for t in tools.tools)
        print("TOOLS", ",".join(names))
        result = await client.call_tool("fake__echo", {"text": "from python"})
        print("ECHO", result.content[0].text)
asyncio.run(main(sys.argv[1]))
"#;
    let output = std::process::Command::new(tools.join("mcp-venv/bin/python"))
        .args(["-c", script, &url])
        .output()
        .expect("run the Python SDK client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("ECHO from python"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("TOOLS") && l.contains("fake__echo")), "{stdout}");

    for scenario in ["server-initialize", "ping", "tools-list", "dns-rebinding-protection", "logging-set-level"] {
        let mut command = crate::conformance::Suite::Old.server(&url);
        command.args(["--scenario", scenario]);
        let run = crate::conformance::run(command);
        assert!(run.success && run.text.contains(" 0 failed"), "{scenario}:\n{}", run.text);
    }
}

/// With `"mcp": {"auth": "token"}` nothing answers without a credential, and `butler mcp
/// stdio` — driven by the official Python SDK's stdio client — carries the owner's
/// token over the local socket, and outlives a host restart without the client noticing.
#[test]
fn token_auth_and_the_stdio_bridge_through_a_host_restart() {
    let tools = tools();
    let dir = tempfile::tempdir().expect("temp");
    std::fs::write(dir.path().join("butler.json"), r#"{"mcp": {"auth": "token"}}"#).expect("root config");
    let log = dir.path().join("fake.log");
    write_manifest(dir.path(), "tools/fake", &fake("fake", &log, json!({})));
    let butler = Butler::start(dir.path());

    // No credential: the envelope on the API, a JSON-RPC error on /mcp — 401 both.
    let (status, body) = butler.raw("GET", "/health", &[], b"");
    crate::util::assert_error(status, &body, 401, "token_required");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}});
    let (status, body) = butler.raw(
        "POST",
        "/mcp",
        &[("content-type", "application/json"), ("accept", "application/json, text/event-stream")],
        initialize.to_string().as_bytes(),
    );
    assert_eq!((status, &body["error"]["data"]["code"]), (401, &json!("token_required")), "{body}");
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    let (status, body) = butler.raw("GET", "/health", &[("authorization", "Bearer 00")], b"");
    crate::util::assert_error(status, &body, 401, "token_required");
    // The owner token, and the console's session, get in; the login link needs neither.
    let bearer = format!("Bearer {}", butler.owner_token());
    assert_eq!(butler.raw("GET", "/health", &[("authorization", &bearer)], b"").0, 200);
    let (cookie, proof) = butler.console_login();
    assert_eq!(butler.raw("GET", "/catalog", &[("cookie", &cookie), ("x-butler-proof", &proof)], b"").0, 200);
    // The cookie alone is nothing: a page on another loopback port can be sent it.
    let (status, body) = butler.raw("GET", "/catalog", &[("cookie", &cookie)], b"");
    crate::util::assert_error(status, &body, 401, "token_required");

    let script = r#"
import asyncio, sys, mcp
from mcp.client.stdio import StdioServerParameters
async def main(binary, workdir):
    server = StdioServerParameters(command=binary, args=["mcp", "stdio", "--workdir", workdir])
    async with mcp.Client(server, mode="legacy") as client:
        tools = await client.list_tools()
        print("TOOLS", ",".join(sorted(t.name for t in tools.tools)), flush=True)
        result = await client.call_tool("fake__echo", {"text": "over stdio"})
        print("ECHO", result.content[0].text, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        result = await client.call_tool("fake__echo", {"text": "after the restart"})
        print("AGAIN", result.content[0].text, flush=True)
asyncio.run(main(sys.argv[1], sys.argv[2]))
"#;
    let mut client = std::process::Command::new(tools.join("mcp-venv/bin/python"))
        .args(["-c", script, env!("CARGO_BIN_EXE_butler")])
        .arg(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run the Python SDK client");
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let stdout = client.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let next = || lines.recv_timeout(LIMIT).expect("the client printed a line");
    let tools_line = next();
    assert!(tools_line.contains("fake__echo"), "{tools_line}");
    assert_eq!(next(), "ECHO over stdio");

    // The host restarts (a new session on its side); the client carries on as if nothing happened.
    assert!(butler.stop().success());
    let butler = Butler::start(dir.path());
    let bearer = format!("Bearer {}", butler.owner_token());
    wait_until(LIMIT, "the provider is registered again", || {
        let (_, status) = butler.raw("GET", "/mcp/status", &[("authorization", &bearer)], b"");
        status["providers"].as_array().is_some_and(|all| all.iter().any(|p| p["id"] == "fake"))
    });
    client.stdin.take().expect("stdin").write_all(b"go\n").expect("tell the client");
    assert_eq!(next(), "AGAIN after the restart");
    assert!(client.wait().expect("client exit").success());
}

/// Any faculty can offer commands as tools: the notes example dropped into `faculties/`
/// is listed as `notes__add` and `notes__list` (clients are told the list changed), runs
/// sandboxed with its declared arguments checked, and goes away with its file.
#[test]
fn a_dropped_faculty_offers_its_commands_as_tools() {
    let dir = instance();
    std::fs::create_dir_all(dir.path().join("faculties")).expect("mkdir");
    let butler = Butler::start(dir.path());
    let mut client = Client::connect(&butler, "/mcp");
    assert!(!client.tool_names().iter().any(|n| n.starts_with("notes__")));
    // Follow the notification stream, then drop the component in.
    let session = client.session.clone().expect("session");
    let stream = butler
        .get("/mcp")
        .header("mcp-session-id", session)
        .header("accept", "text/event-stream")
        .send()
        .expect("GET stream");
    std::fs::copy(crate::util::guests::NOTES, dir.path().join("faculties/notes.wasm")).expect("copy");
    let mut events = BufReader::new(stream);
    let mut told = false;
    for _ in 0..50 {
        let mut line = String::new();
        if events.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if line.contains("notifications/tools/list_changed") {
            told = true;
            break;
        }
    }
    assert!(told, "the client was told the tool list changed");
    let listed = client.request("tools/list", json!({}));
    let add = listed["result"]["tools"].as_array().expect("tools").iter().find(|t| t["name"] == "notes__add").cloned();
    let add = add.unwrap_or_else(|| panic!("notes__add listed: {listed}"));
    assert_eq!(add["description"], "Keep a short note for later, with an optional tag.");
    assert_eq!(add["inputSchema"]["required"], json!(["text"]), "{add}");

    let added = client.call("notes__add", json!({"text": "buy milk", "tag": "home"}));
    assert_ne!(added["isError"], true, "{added}");
    assert_eq!(added["structuredContent"]["count"], 1, "{added}");
    let listed = client.call("notes__list", json!({"tag": "home"}));
    assert_eq!(listed["structuredContent"]["notes"][0]["text"], "buy milk", "{listed}");
    // The command's own argument rules still hold (`tag` is `[a-z0-9-]{1,32}`).
    let refused = client.call("notes__add", json!({"text": "x", "tag": "Not A Tag"}));
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text_of(&refused).contains("invalid_args"), "{refused}");
    let refused = client.call("notes__add", json!({"tag": "home"}));
    assert!(text_of(&refused).contains("text"), "the schema names the missing argument: {refused}");

    std::fs::remove_file(dir.path().join("faculties/notes.wasm")).expect("remove");
    wait_until(LIMIT, "the tools go with the faculty", || {
        !client.tool_names().iter().any(|n| n.starts_with("notes__"))
    });
}

/// A list starts only providers whose tools are not known; one left without calls for
/// `mcp.idleSec` stops and comes back on the next call; `stop` keeps one stopped until
/// `start` (CLI and API alike), and `restart` gives it a new process.
#[test]
fn providers_start_on_need_stop_when_idle_and_on_request() {
    tools();
    let dir = tempfile::tempdir().expect("temp");
    std::fs::write(dir.path().join("butler.json"), json!({"mcp": {"idleSec": 1}}).to_string()).expect("config");
    let log = dir.path().join("fake.log");
    write_manifest(dir.path(), "tools/fake", &fake("fake", &log, json!({})));
    let butler = Butler::start(dir.path());
    let starts = || log_lines(&log).iter().filter(|l| l.starts_with("started")).count();
    let mut client = Client::connect(&butler, "/mcp");
    assert!(client.tool_names().contains(&"fake__echo".to_owned()), "never listed: the list starts it");
    assert_eq!(starts(), 1);

    wait_until(LIMIT, "the idle provider to stop", || provider_status(&butler, "fake")["state"] == "idle");
    let status = provider_status(&butler, "fake");
    assert!(status["pid"].is_null(), "its process is gone: {status}");
    assert!(client.tool_names().contains(&"fake__echo".to_owned()), "listed from what it listed last");
    assert_eq!(starts(), 1, "a list of known tools starts nothing");
    assert_eq!(text_of(&client.call("fake__echo", json!({"text": "again"}))), "again");
    assert_eq!(starts(), 2, "a call starts it");

    let cli = |action: &str| {
        let output = std::process::Command::new(crate::util::butler_binary())
            .args(["mcp", action, "fake", "--workdir"])
            .arg(dir.path())
            .output()
            .expect("run butler");
        assert!(output.status.success(), "{action}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    assert_eq!(cli("stop").trim(), "fake: stopped (-)");
    let refused = client.call("fake__echo", json!({"text": "while stopped"}));
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text_of(&refused).contains("butler mcp start fake"), "it says how to start it: {refused}");
    assert_eq!(starts(), 2, "a stopped provider is not started by a call");
    assert!(cli("start").starts_with("fake: ready (pid "), "started on request");
    assert_eq!(text_of(&client.call("fake__echo", json!({"text": "back"}))), "back");

    let restart = |butler: &Butler| {
        let (code, body) = butler.post_json("/mcp/providers/fake/restart", &json!({}), &[]);
        assert_eq!(code, 200, "{body}");
        body["data"]["status"]["pid"].as_u64().expect("a new process")
    };
    let first = restart(&butler);
    assert_ne!(restart(&butler), first, "a restart is a new process");
    let (code, body) = butler.post_json("/mcp/providers/nobody/start", &json!({}), &[]);
    assert_eq!((code, body["error"]["code"].as_str()), (404, Some("unknown_provider")), "{body}");
    let (code, body) = butler.post_json("/mcp/providers/fake/pause", &json!({}), &[]);
    assert_eq!((code, body["error"]["code"].as_str()), (404, Some("unknown_action")), "{body}");
}

/// Every request the hub answers is in the activity log — who answered, how it went, the
/// sizes — and never what was asked or answered; the CLI prints it, filtered by name.
#[test]
fn with_log_payloads_the_activity_log_keeps_arguments_and_results_but_no_credential() {
    tools();
    let dir = instance();
    std::fs::write(dir.path().join("butler.json"), json!({"mcp": {"logPayloads": true}}).to_string())
        .expect("root config");
    let log = dir.path().join("fake.log");
    write_manifest(dir.path(), "tools/fake", &fake("fake", &log, json!({})));
    let butler = Butler::start(dir.path());
    let mut client = Client::connect(&butler, "/mcp");
    // The five secrets the collector's redactor always caught and the activity log's own
    // once kept, in the free text the tool echoes: the request and the answer lose them.
    let planted = [
        concat!("Authorization: Bearer gh", "p_4711xbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B2"),
        "curl -H 'Authorization: Bearer tok4711zs0z-1wNiMg9aW37k5wCnHDepQHgI3HLBk' https://api.example.com",
        concat!("my butler token is bmt_", "4711d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
        concat!("GITHUB_TOKEN=gh", "p_4711UxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B"),
        "DATABASE_URL=postgres://app:pw4711db@db.example.com:5432/prod",
    ];
    let text = format!("visible words\n{}", planted.join("\n"));
    let arguments = json!({"text": text, "api_key": "sk-live-4711",
                           "options": {"header": "Bearer tok-4711", "password": "hunter4711",
                                       "tokens": ["t4711"], "secret": {"value": "v4711"}}});
    assert_eq!(text_of(&client.call("fake__echo", arguments)), text, "the client gets its answer whole");
    let mut echo = Value::Null;
    wait_until(LIMIT, "the call to be logged", || {
        let (_, page) = butler.get_json("/mcp/activity?name=fake__echo");
        echo = page["entries"][0].clone();
        !echo.is_null()
    });
    let kept = &echo["request"]["arguments"];
    for kept_text in [kept["text"].as_str(), echo["response"]["content"][0]["text"].as_str()] {
        let kept_text = kept_text.unwrap_or_default();
        assert!(kept_text.starts_with("visible words\nAuthorization: Bearer "), "{echo}");
        assert!(kept_text.contains("my butler token is bmt_[redacted]"), "{echo}");
        assert!(kept_text.contains("postgres://[redacted]@db.example.com"), "{echo}");
    }
    assert_eq!(kept["options"]["header"], "Bearer [redacted]", "{echo}");
    let options = &kept["options"];
    for redacted in [&kept["api_key"], &options["password"], &options["tokens"], &options["secret"]] {
        assert_eq!(redacted, "[redacted]", "{echo}");
    }
    let file = std::fs::read_to_string(dir.path().join(".butler/logs/mcp-activity.jsonl")).expect("the log file");
    assert!(file.contains("visible words"), "{file}");
    assert!(!file.contains("4711"), "no credential reaches the file: {file}");
}

#[test]
fn every_answered_request_is_in_the_activity_log_without_its_arguments() {
    tools();
    let dir = instance();
    let log = dir.path().join("fake.log");
    write_manifest(dir.path(), "tools/fake", &fake("fake", &log, json!({})));
    let butler = Butler::start(dir.path());
    let mut client = Client::connect(&butler, "/mcp");
    client.tool_names();
    let secret = "a-secret-argument-4711";
    assert_eq!(text_of(&client.call("fake__echo", json!({"text": secret}))), secret);
    let failed = client.request("tools/call", json!({"name": "fake__nothing", "arguments": {}}));
    assert_eq!(failed["error"]["code"], -32602, "{failed}");

    let mut entries = Vec::new();
    wait_until(LIMIT, "the calls to be logged", || {
        let (code, page) = butler.get_json("/mcp/activity?limit=10");
        assert_eq!(code, 200, "{page}");
        entries = page["entries"].as_array().cloned().unwrap_or_default();
        entries.len() >= 3
    });
    let echo = entries.iter().find(|e| e["name"] == "fake__echo").expect("the echo call is logged");
    assert_eq!(echo["provider"], "fake", "{echo}");
    assert_eq!((echo["outcome"].as_str(), echo["revision"].as_str()), (Some("ok"), Some("2025-11-25")), "{echo}");
    assert_eq!(echo["session"].as_str(), client.session.as_deref(), "{echo}");
    assert!(echo["requestBytes"].as_u64() > Some(20) && echo["responseBytes"].as_u64() > Some(20), "{echo}");
    let unknown = entries.iter().find(|e| e["name"] == "fake__nothing").expect("the failed call is logged");
    assert_eq!((unknown["outcome"].as_str(), unknown["code"].as_i64()), (Some("error"), Some(-32602)), "{unknown}");
    assert!(entries.iter().any(|e| e["method"] == "tools/list"), "{entries:?}");
    // Newest first, one page at a time.
    let newest = entries[0]["seq"].as_u64().expect("seq");
    let (_, older) = butler.get_json(&format!("/mcp/activity?limit=1&before={newest}"));
    assert_eq!(older["entries"][0]["seq"].as_u64(), Some(newest - 1), "{older}");
    let file = std::fs::read_to_string(dir.path().join(".butler/logs/mcp-activity.jsonl")).expect("the log file");
    assert!(!file.contains(secret), "arguments are never logged");
    let (code, refused) = butler.get_json("/mcp/activity?name=%5B");
    assert_eq!((code, refused["error"]["code"].as_str()), (400, Some("invalid_query")), "{refused}");

    let output = std::process::Command::new(crate::util::butler_binary())
        .args(["mcp", "log", "--tool", "fake__e*", "--workdir"])
        .arg(dir.path())
        .output()
        .expect("run butler");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(printed.lines().count(), 1, "only the echo call: {printed}");
    assert!(printed.contains("tools/call") && printed.contains("fake__echo") && printed.contains(" ok "), "{printed}");
}
