//! MCP profiles and their tokens: a profile's endpoint offers only the providers and tools
//! the root config names for it — a tool outside it is neither listed nor callable there —
//! a profile that requires a token refuses a missing, wrong, other profile's or revoked one
//! with 401 and `WWW-Authenticate`, and a profile over one provider without prefixes is
//! what the official conformance suite runs against, whole, with our port of its reference
//! server as the provider.

use std::path::Path;

use serde_json::{Value, json};

use crate::conformance::Suite;
use crate::mcp::{LIMIT, fake, root, text_of, tools};
use crate::mcp_stateless::{headers_for, request};
use crate::util::{Butler, wait_until, write_manifest};

/// An instance with the fake provider, the conformance server, mcp-server-time, and three
/// profiles: `echo` (only `fake__echo`, token required), `conformance` (the conformance
/// server's own names) and `readonly` (every provider's tools tagged `readOnly`).
fn instance_with_profiles() -> tempfile::TempDir {
    let tools = tools();
    let dir = tempfile::tempdir().expect("temp");
    let config = json!({"mcp": {"profiles": {
        "echo": {"providers": ["fake"], "include": ["fake__echo"], "requireToken": true},
        "conformance": {"providers": ["conf"], "prefix": false},
        "readonly": {"tags": ["readOnly"]},
    }}});
    std::fs::write(dir.path().join("butler.json"), config.to_string()).expect("root config");
    write_manifest(dir.path(), "tools/fake", &fake("fake", &dir.path().join("fake.log"), json!({})));
    let python = tools.join("mcp-venv/bin/python").display().to_string();
    let script = root().join("tests/providers/conformance_server.py").display().to_string();
    let conf = json!({"schemaVersion": 1, "kind": "tool", "id": "conf", "name": "conf",
                      "mcp": {"transport": "stdio", "command": [python, script], "timeoutSec": 20}});
    write_manifest(dir.path(), "tools/conf", &conf);
    let time = tools.join("mcp-venv/bin/mcp-server-time").display().to_string();
    let clock = json!({"schemaVersion": 1, "kind": "tool", "id": "clock", "name": "clock",
                       "mcp": {"transport": "stdio", "command": [time]}});
    write_manifest(dir.path(), "tools/clock", &clock);
    dir
}

/// `butler mcp token …` on the instance: (exit code, stdout, stderr).
fn token_cli(workdir: &Path, args: &[&str]) -> (i32, String, String) {
    let home = tempfile::tempdir().expect("home");
    let output = crate::util::butler_command(home.path())
        .args(["mcp", "token"])
        .args(args)
        .arg("--workdir")
        .arg(workdir)
        .output()
        .expect("run butler");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

/// A 2026-07-28 request to profile `profile` with `token`: (status, body, WWW-Authenticate).
fn ask(butler: &Butler, profile: &str, message: &Value, token: Option<&str>) -> (u16, Value, Option<String>) {
    let mut builder = butler
        .request(reqwest::Method::POST, &butler.api(&format!("/mcp/p/{profile}")))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(message.to_string());
    for (name, value) in headers_for(message) {
        builder = builder.header(name, value);
    }
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    let response = builder.send().expect("request");
    let status = response.status().as_u16();
    let challenge = response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (status, serde_json::from_str(&response.text().expect("body")).unwrap_or(Value::Null), challenge)
}

fn names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[test]
fn a_profile_offers_only_its_tools_and_its_token_opens_only_it_until_revoked() {
    let dir = instance_with_profiles();
    let (code, _, stderr) = token_cli(dir.path(), &["add", "laptop", "--profile", "nothing"]);
    assert_ne!(code, 0, "no such profile");
    assert!(stderr.contains("no MCP profile `nothing`") && stderr.contains("conformance, echo, readonly"), "{stderr}");
    let (code, laptop, stderr) = token_cli(dir.path(), &["add", "laptop", "--profile", "echo"]);
    assert_eq!(code, 0, "{stderr}");
    let laptop = laptop.trim().to_owned();
    let (_, other, _) = token_cli(dir.path(), &["add", "desk", "--profile", "conformance"]);
    let other = other.trim().to_owned();
    let kept = std::fs::read_to_string(dir.path().join(".butler/mcp-tokens.json")).expect("the token file");
    assert!(!kept.contains(&laptop) && kept.contains("laptop"), "kept hashed: {kept}");
    let butler = Butler::start(dir.path());

    // No token, a wrong one, another profile's: 401 with a challenge, and nothing else said.
    let list = request(1, "tools/list", json!({}));
    for token in [None, Some("bmt_wrong"), Some(other.as_str())] {
        let (status, body, challenge) = ask(&butler, "echo", &list, token);
        assert_eq!(status, 401, "{token:?}: {body}");
        assert!(challenge.is_some_and(|c| c.starts_with("Bearer")), "{token:?}");
        assert!(body.get("result").is_none(), "{body}");
    }
    let (status, body, _) = ask(&butler, "nowhere", &list, None);
    assert_eq!(status, 404, "{body}");
    let (status, body) = butler.raw("POST", "/mcp/p/%ff", &[("content-type", "application/json")], b"{}");
    assert_eq!((status, body["error"]["code"].as_i64()), (400, Some(-32600)), "a JSON-RPC error, never text: {body}");

    // With its token: only what the profile names (and the search tool, which finds only
    // that); the rest is neither listed nor callable.
    let (status, listed, _) = ask(&butler, "echo", &list, Some(&laptop));
    assert_eq!(status, 200, "{listed}");
    assert_eq!(names(&listed), ["fake__echo", "butler__find_tools"], "{listed}");
    let echo = request(2, "tools/call", json!({"name": "fake__echo", "arguments": {"text": "in profile"}}));
    let (_, echoed, _) = ask(&butler, "echo", &echo, Some(&laptop));
    assert_eq!(text_of(&echoed["result"]), "in profile", "{echoed}");
    // Its search finds what it offers, never another tool of the same provider.
    let search =
        request(3, "tools/call", json!({"name": "butler__find_tools", "arguments": {"query": "text environment"}}));
    let (_, found, _) = ask(&butler, "echo", &search, Some(&laptop));
    let found: Vec<&str> = found["result"]["structuredContent"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(found, ["fake__echo"], "fake__env is not the profile's");
    for outside in ["fake__env", "test_simple_text", "conf__test_simple_text", "butler__search"] {
        let call = request(3, "tools/call", json!({"name": outside, "arguments": {}}));
        let (_, refused, _) = ask(&butler, "echo", &call, Some(&laptop));
        assert_eq!(refused["error"]["code"], -32602, "{outside}: {refused}");
    }
    let (_, prompts, _) = ask(&butler, "echo", &request(4, "prompts/list", json!({})), Some(&laptop));
    assert!(
        prompts["result"]["prompts"].as_array().is_some_and(|p| p.iter().all(|p| p["name"] != "butler__context")),
        "no host prompt without hostTools: {prompts}"
    );

    // The activity log (written in the background) names the profile and the token.
    let mut entry = Value::Null;
    wait_until(LIMIT, "the call in the activity log", || {
        let (_, log) = butler.get_json("/mcp/activity?limit=50");
        let found = log["entries"].as_array().and_then(|entries| entries.iter().find(|e| e["name"] == "fake__echo"));
        entry = found.cloned().unwrap_or(Value::Null);
        !entry.is_null()
    });
    assert_eq!((&entry["endpoint"], &entry["token"]), (&json!("p/echo"), &json!("laptop")), "{entry}");

    // A profile by tags: mcp-server-time marks its tools read-only; the fake's and the
    // conformance server's carry no such hint.
    // (A list answers without a provider not ready within `LIST_WAIT`: asked until it is.)
    let mut listed = Value::Null;
    wait_until(LIMIT, "the clock's tools on the readonly profile", || {
        listed = ask(&butler, "readonly", &list, None).1;
        names(&listed).iter().any(|n| n.starts_with("clock__"))
    });
    let readonly = names(&listed);
    assert!(readonly.contains(&"clock__get_current_time".to_owned()), "{listed}");
    // The search tool is the hub's, read-only itself.
    assert!(readonly.iter().all(|name| name.starts_with("clock__") || name == "butler__find_tools"), "{listed}");
    let call = request(5, "tools/call", json!({"name": "fake__echo", "arguments": {"text": "x"}}));
    assert_eq!(ask(&butler, "readonly", &call, None).1["error"]["code"], -32602, "not offered there");
    let now = request(6, "tools/call", json!({"name": "clock__get_current_time", "arguments": {"timezone": "UTC"}}));
    assert!(text_of(&ask(&butler, "readonly", &now, None).1["result"]).contains("UTC"));

    // Revoked: refused from the next request on, the host still running.
    let (code, listed_tokens, _) = token_cli(dir.path(), &["list"]);
    assert!(code == 0 && listed_tokens.contains("laptop") && !listed_tokens.contains(&laptop), "{listed_tokens}");
    let (code, _, stderr) = token_cli(dir.path(), &["revoke", "laptop"]);
    assert_eq!(code, 0, "{stderr}");
    let (status, body, _) = ask(&butler, "echo", &list, Some(&laptop));
    assert_eq!(status, 401, "revoked: {body}");
}

#[test]
fn the_official_conformance_suite_passes_against_a_profile_over_its_reference_server() {
    let dir = instance_with_profiles();
    let butler = Butler::start(dir.path());
    let url = format!("http://localhost:{}/myspace-butler/api/mcp/p/conformance", butler.port);
    // (A list answers without a provider not ready within `LIST_WAIT`: asked until it is.)
    wait_until(LIMIT, "the provider's own names", || {
        let (_, listed, _) = ask(&butler, "conformance", &request(1, "tools/list", json!({})), None);
        names(&listed).contains(&"test_simple_text".to_owned())
    });

    let run = |suite: Suite, extra: &[&str], baseline: &str| {
        let baseline = crate::conformance::fixture(baseline);
        let mut command = suite.server(&url);
        command.args(extra).arg("--expected-failures").arg(&baseline);
        let run = crate::conformance::run(command);
        assert!(run.success, "{extra:?}:\n{}", run.text);
        // Nothing outside the baseline failed (the suite's exit status says so); with an empty
        // baseline, nothing at all. How many checks passed is the suite's own total (so a run
        // that checked nothing fails).
        let expected = std::fs::read_to_string(&baseline).unwrap_or_default();
        assert!(expected.contains("server: []") <= (run.checks.1 == 0), "{extra:?}: {:?}", run.checks);
        run.checks.0
    };
    // 0.1.12: every active server scenario of the 2025 revisions (39 checks when written).
    assert!(run(Suite::Old, &[], "profile.yml") >= 39);
    // The newest: every scenario of 2025-11-25 (80 checks when written).
    assert!(run(Suite::Next, &["--requirements", "2025-11-25"], "profile.yml") >= 80);
    // And every scenario of 2026-07-28 — the multi-round-trip ones passed through from the
    // provider, which speaks that revision too (153 checks when written; the tasks
    // extension's and one pending scenario are expected to fail, with the reason in the
    // baseline).
    assert!(run(Suite::Next, &["--requirements", "2026-07-28"], "profile-2026.yml") >= 150);
}

/// The URIs of a `resources/list` answer.
fn uris(listed: &Value) -> Vec<String> {
    listed["result"]["resources"]
        .as_array()
        .map(|resources| resources.iter().filter_map(|r| r["uri"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// The next `notifications/resources/updated` on a legacy session's `GET` stream.
fn next_update(events: &mut std::io::BufReader<std::net::TcpStream>) -> Option<Value> {
    use std::io::BufRead as _;
    let mut line = String::new();
    while events.read_line(&mut line).ok()? > 0 {
        if let Some(data) = line.trim_end().strip_prefix("data: ")
            && let Ok(message) = serde_json::from_str::<Value>(data)
            && message["method"] == "notifications/resources/updated"
        {
            return Some(message);
        }
        line.clear();
    }
    None
}

/// The acknowledgement of a 2026-07-28 `subscriptions/listen` POSTed to `path` (the stream
/// then ends, and its subscriptions with it).
fn listen(butler: &Butler, path: &str, message: &Value) -> Value {
    use std::io::Write as _;
    let authority = butler.origin.trim_start_matches("http://").to_owned();
    let body = message.to_string();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    let mut head = format!(
        "POST /myspace-butler/api{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers_for(message) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(stream, "{head}\r\n{body}").expect("send");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(20))).expect("timeout");
    let acknowledged = crate::mcp_stateless::events(stream, |seen| !seen.is_empty());
    acknowledged.into_iter().next().unwrap_or(Value::Null)
}

/// Two real providers (the Python SDK port of the suite's reference server, twice) hold the
/// same URIs. The main endpoint tells them apart by renaming the later one's; a profile over
/// either one offers that provider's resources under their own URIs, whatever a provider
/// outside the profile holds: listed, read, subscribed to and updated by the real URI, in
/// both eras.
#[test]
fn a_profile_names_its_resources_by_its_own_providers_only() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().expect("temp");
    let config = json!({"mcp": {"profiles": {
        "first": {"providers": ["conf"], "prefix": false},
        "second": {"providers": ["twin"], "prefix": false},
    }}});
    std::fs::write(dir.path().join("butler.json"), config.to_string()).expect("root config");
    let python = tools().join("mcp-venv/bin/python").display().to_string();
    let script = root().join("tests/providers/conformance_server.py").display().to_string();
    for id in ["conf", "twin"] {
        let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id,
                              "mcp": {"transport": "stdio", "command": [&python, &script], "timeoutSec": 20}});
        write_manifest(dir.path(), &format!("tools/{id}"), &manifest);
    }
    let butler = Butler::start(dir.path());

    // The main endpoint: one provider's URI as it is, the other's renamed, and the status
    // says which.
    let mut main = crate::mcp::Client::connect(&butler, "/mcp");
    // Python starts slowly: a list answers without a provider still starting.
    let mut listed = Vec::new();
    wait_until(LIMIT, "both providers to list", || {
        listed = uris(&main.request("resources/list", json!({})));
        listed.iter().filter(|u| u.ends_with("test://static-text")).count() == 2
    });
    let renamed: Vec<&String> = listed.iter().filter(|u| u.ends_with("/test://static-text")).collect();
    assert!(listed.contains(&"test://static-text".to_owned()) && renamed.len() == 1, "{listed:?}");
    let (_, status) = butler.get_json("/mcp/status");
    let duplicates = status["duplicateUris"].as_array().cloned().unwrap_or_default();
    assert!(duplicates.iter().any(|d| d["uri"] == "test://static-text" && d["exposedAs"] == *renamed[0]), "{status}");

    for profile in ["first", "second"] {
        let path = format!("/mcp/p/{profile}");
        // 2026-07-28: listed and read by the provider's own URIs.
        let (_, listed, _) = ask(&butler, profile, &request(1, "resources/list", json!({})), None);
        let listed = uris(&listed);
        assert!(listed.contains(&"test://static-text".to_owned()), "{profile}: {listed:?}");
        assert!(listed.iter().all(|u| !u.starts_with("butler://")), "{profile}: nothing renamed: {listed:?}");
        let read = request(2, "resources/read", json!({"uri": "test://static-text"}));
        let (_, read, _) = ask(&butler, profile, &read, None);
        assert_eq!(read["result"]["contents"][0]["uri"], "test://static-text", "{profile}: {read}");
        let watch = json!({"resourceSubscriptions": ["test://watched-resource"]});
        let acknowledged = listen(&butler, &path, &request(3, "subscriptions/listen", json!({"notifications": watch})));
        assert_eq!(acknowledged["params"]["notifications"], watch, "{profile}: {acknowledged}");

        // 2025: a session reads, subscribes, and hears of the change by the URI it used.
        let mut client = crate::mcp::Client::connect(&butler, &path);
        let read = client.request("resources/read", json!({"uri": "test://static-text"}));
        assert!(read["result"]["contents"][0]["text"].is_string(), "{profile}: {read}");
        let subscribed = client.request("resources/subscribe", json!({"uri": "test://watched-resource"}));
        assert!(subscribed.get("error").is_none(), "{profile}: {subscribed}");
        let authority = butler.origin.trim_start_matches("http://").to_owned();
        let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
        write!(
            stream,
            "GET /myspace-butler/api{path} HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {}\r\n\r\n",
            client.session_id()
        )
        .expect("send");
        stream.set_read_timeout(Some(std::time::Duration::from_secs(20))).expect("timeout");
        let mut events = std::io::BufReader::new(stream);
        // The stream is open once the hub answered its head; then the change is made.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let changed = client.call("test_trigger_resource_update", json!({}));
        assert_ne!(changed["isError"], true, "{profile}: {changed}");
        let update = next_update(&mut events).expect("told of the update");
        assert_eq!(update["params"]["uri"], "test://watched-resource", "{profile}: {update}");
        let gone = client.request("resources/unsubscribe", json!({"uri": "test://watched-resource"}));
        assert!(gone.get("error").is_none(), "{profile}: {gone}");
    }
}
