//! The hub faithful to its providers, with real ones: a provider that offers no tools (our
//! fixture on the official Python SDK, `tests/providers/toolless_server.py`) is listed for
//! what it offers, never taken for a crash; every kind of provider — a capability
//! package's, a ChatOS app's — can be pinned to the 2025 handshake (our port of the
//! conformance suite's reference server, which speaks both eras), and a pin that names no
//! provider is in the running host's log; with the reference server `server-everything`,
//! a call its client cancels — by closing its connection or by `notifications/cancelled` —
//! is in the activity log as `cancelled`, and a completion under the provider it went to;
//! the providers' instructions reach the clients of the endpoints that offer them, and the
//! log messages a provider sends outside any call reach the legacy sessions that set a
//! level, at or above it.

use std::io::{BufRead, BufReader, Write};

use serde_json::{Value, json};

use crate::capabilities::cli;
use crate::mcp::{LIMIT, instance, provider_status, root, tools};
use crate::mcp_stateless::{ask, events, raw_post, request};
use crate::util::{Butler, wait_until, write_manifest};

/// A tool manifest whose provider is `tests/providers/<script>` on the Python SDK.
fn python_provider(id: &str, script: &str) -> Value {
    let python = tools().join("mcp-venv/bin/python").display().to_string();
    let script = root().join("tests/providers").join(script).display().to_string();
    json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id,
           "mcp": {"transport": "stdio", "command": [python, script], "timeoutSec": 20}})
}

/// The `key` field of each item of a 2026-07-28 list on `path`.
fn listed(butler: &Butler, path: &str, method: &str, key: &str, field: &str) -> Vec<String> {
    let answer = ask(butler, path, &request(1, method, json!({})));
    answer["result"][key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i[field].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_provider_without_tools_offers_its_resources_and_prompts_in_either_era() {
    let dir = instance();
    let config = json!({"mcp": {"legacyProviders": ["toolless-legacy"]}});
    std::fs::write(dir.path().join("butler.json"), config.to_string()).expect("root config");
    for id in ["toolless", "toolless-legacy"] {
        write_manifest(dir.path(), &format!("tools/{id}"), &python_provider(id, "toolless_server.py"));
    }
    let butler = Butler::start(dir.path());

    // Listed for what they offer: a prompt and a resource each, and no tools.
    wait_until(LIMIT, "both providers' prompts", || {
        let prompts = listed(&butler, "/mcp", "prompts/list", "prompts", "name");
        ["toolless__summarize", "toolless_legacy__summarize"].iter().all(|p| prompts.iter().any(|n| n == p))
    });
    let resources = listed(&butler, "/mcp", "resources/list", "resources", "uri");
    assert!(resources.contains(&"toolless://notes".to_owned()), "{resources:?}");
    assert!(resources.contains(&"butler://toolless_legacy/toolless://notes".to_owned()), "{resources:?}");
    let tools = listed(&butler, "/mcp", "tools/list", "tools", "name");
    assert!(!tools.iter().any(|t| t.starts_with("toolless")), "{tools:?}");
    for (id, protocol) in [("toolless", "2026-07-28"), ("toolless-legacy", "2025-06-18")] {
        let status = provider_status(&butler, id);
        assert_eq!(status["state"], "ready", "{status}");
        assert_eq!(status["protocol"], protocol, "{status}");
        assert_eq!(status["lastError"], Value::Null, "{status}");
    }

    // And what they offer answers.
    for uri in ["toolless://notes", "butler://toolless_legacy/toolless://notes"] {
        let read = ask(&butler, "/mcp", &request(2, "resources/read", json!({"uri": uri})));
        assert_eq!(read["result"]["contents"][0]["text"], "The notes of the toolless provider.", "{read}");
    }
    for name in ["toolless__summarize", "toolless_legacy__summarize"] {
        let got = ask(&butler, "/mcp", &request(3, "prompts/get", json!({"name": name, "arguments": {"topic": "x"}})));
        assert_eq!(got["result"]["messages"][0]["content"]["text"], "Summarize x.", "{got}");
    }
    // Still the same runs: nothing crashed and restarted meanwhile.
    for id in ["toolless", "toolless-legacy"] {
        assert_eq!(provider_status(&butler, id)["state"], "ready");
    }
}

/// The lines of the host's log at `log` that warn of pins naming no provider.
fn pin_warnings(log: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains("WARN") && l.contains("mcp.legacyProviders names no provider"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_kind_of_provider_can_be_pinned_to_the_2025_handshake_and_a_pin_naming_none_is_logged() {
    let (first, dir) = Butler::start_fresh();
    let workdir = first.workdir.clone();
    assert!(first.stop().success());
    let python = tools().join("mcp-venv/bin/python").display().to_string();
    let server = root().join("tests/providers/conformance_server.py");
    // A ChatOS plugin whose app's server is the conformance server...
    let plugin = workdir.join("tools/conf-plugin");
    std::fs::create_dir_all(plugin.join("mcp")).expect("plugin dir");
    std::fs::create_dir_all(plugin.join("ui")).expect("ui dir");
    std::fs::write(plugin.join("ui/index.mjs"), "export function mount() {}").expect("ui");
    std::fs::copy(&server, plugin.join("mcp/server.py")).expect("server");
    let manifest = json!({"manifestVersion": 1, "id": "com.example.Conf", "name": "Conf", "version": "0.1.0",
        "apps": [{"id": "conf", "name": "Conf", "entry": "ui/index.mjs",
                  "ai": {"mcp": {"entry": "mcp/server.py", "command": python}}}]});
    std::fs::write(plugin.join("plugin.json"), manifest.to_string()).expect("plugin.json");
    // ...a capability package whose server is too...
    let package = dir.path().join("conf-package");
    std::fs::create_dir_all(&package).expect("package dir");
    std::fs::copy(&server, package.join("server.py")).expect("server");
    let suzu = json!({"schemaVersion": 1, "id": "example.conf", "name": "Conf", "version": "1.0.0",
        "adapters": {"mcp": {"transport": "stdio", "command": python, "args": ["./server.py"]}}});
    std::fs::write(package.join("suzu-capability.json"), suzu.to_string()).expect("manifest");
    // ...and an extension whose server is, unpinned.
    write_manifest(&workdir, "tools/conf", &python_provider("conf", "conformance_server.py"));
    let path = workdir.join("butler.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("config")).expect("JSON");
    config["mcp"]["legacyProviders"] = json!(["uiapp:com.example.Conf.conf", "suzu:example.conf", "nobody"]);
    std::fs::write(&path, config.to_string()).expect("config");
    let log = dir.path().join("host.log");
    let butler = Butler::start_logging(&workdir, "info", &log);

    // At start the package is not enabled yet: two pins name nothing.
    wait_until(LIMIT, "the warning at start", || !pin_warnings(&log).is_empty());
    assert!(
        pin_warnings(&log)[0].contains("names no provider: nobody, suzu:example.conf ("),
        "{:?}",
        pin_warnings(&log)
    );
    assert_eq!(cli(&butler, &["import", package.to_str().expect("utf8")]).0, 0);
    assert_eq!(cli(&butler, &["capability", "enable", "example.conf"]).0, 0);
    wait_until(LIMIT, "the warning once the package is enabled", || pin_warnings(&log).len() == 2);
    assert!(pin_warnings(&log)[1].contains("names no provider: nobody ("), "{:?}", pin_warnings(&log));

    // Each is spoken to in the era its pin says.
    for (id, protocol) in
        [("uiapp:com.example.Conf.conf", "2025-06-18"), ("suzu:example.conf", "2025-06-18"), ("conf", "2026-07-28")]
    {
        let (code, out) = cli(&butler, &["mcp", "start", id]);
        assert_eq!(code, 0, "{id}: {out}");
        assert_eq!(provider_status(&butler, id)["protocol"], protocol, "{id}");
    }

    // A rescan that takes the app away names it again.
    std::fs::remove_dir_all(&plugin).expect("remove the plugin");
    wait_until(LIMIT, "the warning after the rescan", || pin_warnings(&log).len() == 3);
    let last = &pin_warnings(&log)[2];
    assert!(last.contains("names no provider: nobody, uiapp:com.example.Conf.conf ("), "{last}");
    // A rescan that changes nothing of them says nothing more.
    write_manifest(&workdir, "tools/other", &crate::util::tool("other", "Other"));
    wait_until(LIMIT, "the rescan", || butler.ids().contains(&"other".to_owned()));
    assert_eq!(pin_warnings(&log).len(), 3, "{:?}", pin_warnings(&log));
    // `butler check` counts the same providers.
    let (_, out) = cli(&butler, &["check"]);
    for gone in ["nobody", "uiapp:com.example.Conf.conf"] {
        assert!(out.contains(&format!("/mcp/legacyProviders: no provider `{gone}` is registered")), "{out}");
    }
    assert!(!out.contains("no provider `suzu:example.conf`"), "{out}");
}

/// A tool manifest whose provider is the reference server `server-everything` (npm).
fn everything() -> Value {
    let script = tools().join("mcp-js/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    json!({"schemaVersion": 1, "kind": "tool", "id": "everything", "name": "everything",
           "mcp": {"transport": "stdio", "command": ["node", script.display().to_string(), "stdio"]}})
}

/// The newest `limit` entries of the activity log.
fn activity(butler: &Butler, limit: usize) -> Vec<Value> {
    let (code, page) = butler.get_json(&format!("/mcp/activity?limit={limit}"));
    assert_eq!(code, 200, "{page}");
    page["entries"].as_array().cloned().unwrap_or_default()
}

#[test]
fn cancelled_calls_and_completions_are_logged_with_their_outcome_and_provider() {
    let dir = instance();
    write_manifest(dir.path(), "tools/everything", &everything());
    let butler = Butler::start(dir.path());
    let long = json!({"name": "everything__trigger-long-running-operation", "arguments": {"duration": 60, "steps": 60},
                      "_meta": {"progressToken": "p-1"}});

    // 2026-07-28 cancels by closing the connection: here after the first progress.
    let mut message = request(1, "tools/call", long.clone());
    message["params"]["_meta"]["progressToken"] = json!("p-1");
    let seen = events(raw_post(&butler, &message), |seen| !seen.is_empty());
    assert_eq!(seen[0]["method"], "notifications/progress", "{seen:?}");

    // A legacy session cancels with a notification.
    let client = crate::mcp::Client::connect(&butler, "/mcp");
    let authority = butler.authority().to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 4242, "method": "tools/call", "params": long}).to_string();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    write!(
        stream,
        "POST /myspace-butler/api/mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        client.session_id(),
        body.len()
    )
    .expect("send");
    let mut lines = BufReader::new(stream).lines().map_while(Result::ok).filter_map(|line| {
        line.strip_prefix("data: ").map(|data| serde_json::from_str::<Value>(data).expect("a JSON event"))
    });
    assert_eq!(lines.next().map(|m| m["method"].clone()), Some(json!("notifications/progress")));
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4242, "reason": "enough"}});
    assert_eq!(client.post(&cancel, &[]).0, 202);
    let answer = lines.find(|m| m.get("id").is_some()).expect("the call's answer");
    assert_eq!(answer["result"]["isError"], true, "{answer}");

    // A completion, routed to the provider that owns the prompt.
    let complete = request(
        2,
        "completion/complete",
        json!({
        "ref": {"type": "ref/prompt", "name": "everything__completable-prompt"},
        "argument": {"name": "department", "value": "E"}}),
    );
    let completed = ask(&butler, "/mcp", &complete);
    assert!(completed["result"]["completion"]["values"].as_array().is_some_and(|v| !v.is_empty()), "{completed}");

    let name = "everything__trigger-long-running-operation";
    let mut entries = Vec::new();
    // The log is written as each exchange ends: wait for all three, not only the last.
    wait_until(LIMIT, "both cancellations and the completion in the activity log", || {
        entries = activity(&butler, 50);
        entries.iter().filter(|e| e["name"] == name).count() == 2
            && entries.iter().any(|e| e["method"] == "completion/complete")
    });
    let cancelled: Vec<(&str, Option<&str>)> = entries
        .iter()
        .filter(|e| e["name"] == name)
        .map(|e| (e["outcome"].as_str().unwrap_or_default(), e["session"].as_str()))
        .collect();
    assert!(cancelled.contains(&("cancelled", None)), "the closed connection: {entries:?}");
    assert!(cancelled.contains(&("cancelled", Some(client.session_id()))), "the notification: {entries:?}");
    let completion = entries.iter().find(|e| e["method"] == "completion/complete").expect("the completion");
    assert_eq!(completion["provider"], "everything", "{completion}");
    assert_eq!(completion["outcome"], "ok", "{completion}");
    let (code, page) = butler.get_json("/mcp/activity?outcome=cancelled");
    assert_eq!((code, page["entries"].as_array().map(Vec::len)), (200, Some(2)), "{page}");
}

/// The `initialize` result of a legacy session on `path`.
pub(crate) fn initialize(butler: &Butler, path: &str) -> Value {
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}});
    let response = butler
        .request(reqwest::Method::POST, &butler.api(path))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(message.to_string())
        .send()
        .expect("initialize");
    let body: Value = serde_json::from_str(&response.text().expect("body")).expect("JSON");
    body["result"].clone()
}

#[test]
fn the_providers_instructions_reach_the_clients_of_the_endpoints_that_offer_them() {
    let dir = instance();
    let config = json!({"mcp": {"profiles": {
        "everything": {"providers": ["everything"], "prefix": false},
        "both": {"providers": ["everything", "toolless"]},
        "none": {"providers": ["nobody"]},
    }}});
    std::fs::write(dir.path().join("butler.json"), config.to_string()).expect("root config");
    write_manifest(dir.path(), "tools/everything", &everything());
    write_manifest(dir.path(), "tools/toolless", &python_provider("toolless", "toolless_server.py"));
    let butler = Butler::start(dir.path());
    let theirs = std::fs::read_to_string(
        tools().join("mcp-js/node_modules/@modelcontextprotocol/server-everything/dist/docs/instructions.md"),
    )
    .expect("server-everything's instructions");
    assert!(theirs.len() > 1000, "several KB of instructions: {}", theirs.len());

    // A profile that is the provider under its own names says what the provider says, in
    // either era.
    wait_until(LIMIT, "the provider's instructions on its own profile", || {
        initialize(&butler, "/mcp/p/everything")["instructions"] == theirs.as_str()
    });
    let discovered = ask(&butler, "/mcp/p/everything", &request(2, "server/discover", json!({})));
    assert_eq!(discovered["result"]["instructions"], theirs.as_str(), "{discovered}");

    // Elsewhere each provider's words follow the hub's own, under its namespace.
    let toolless = "The toolless provider offers its notes as a resource and a prompt to summarize them.";
    for path in ["/mcp", "/mcp/p/both"] {
        let mut said = String::new();
        wait_until(LIMIT, "both providers' instructions", || {
            said = initialize(&butler, path)["instructions"].as_str().unwrap_or_default().to_owned();
            said.contains("## toolless")
        });
        let everything = format!("\n\n## everything\n\n{}\n\n## toolless\n\n{toolless}", theirs.trim_end());
        assert!(said.ends_with(&everything), "{path}: {said}");
        assert!(!said.starts_with("## "), "the hub's own words come first: {said}");
        let discovered = ask(&butler, path, &request(3, "server/discover", json!({})));
        assert_eq!(discovered["result"]["instructions"], said.as_str(), "{path}");
    }
    // An endpoint that offers neither says only the hub's words.
    let own = initialize(&butler, "/mcp/p/none")["instructions"].as_str().unwrap_or_default().to_owned();
    assert!(own.starts_with("Butler profile `none`") && !own.contains("##"), "{own}");
    let restricted = initialize(&butler, "/mcp/butler")["instructions"].as_str().unwrap_or_default().to_owned();
    assert!(!restricted.contains("##"), "{restricted}");
}

/// A legacy session's `GET` stream on `/mcp`, read with a short timeout.
fn session_stream(butler: &Butler, session: &str) -> BufReader<std::net::TcpStream> {
    let authority = butler.authority().to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    write!(
        stream,
        "GET /myspace-butler/api/mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\r\n"
    )
    .expect("send");
    stream.set_read_timeout(Some(std::time::Duration::from_millis(500))).expect("timeout");
    BufReader::new(stream)
}

/// The log messages (`notifications/message` params) read from `stream` until `enough`
/// says stop, or nothing came for the read timeout and `enough` allows stopping then.
fn log_messages(
    stream: &mut BufReader<std::net::TcpStream>,
    mut enough: impl FnMut(&[Value], bool) -> bool,
) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let mut line = String::new();
        let quiet = match stream.read_line(&mut line) {
            Ok(0) => panic!("the stream ended"),
            Ok(_) => false,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => true,
            Err(e) => panic!("read: {e}"),
        };
        if let Some(data) = line.strip_prefix("data: ") {
            let message: Value = serde_json::from_str(data).expect("a JSON event");
            if message["method"] == "notifications/message" {
                seen.push(message["params"].clone());
            }
        }
        if enough(&seen, quiet) {
            return seen;
        }
    }
}

#[test]
fn log_messages_sent_outside_a_call_reach_the_sessions_that_set_a_level() {
    let dir = instance();
    write_manifest(dir.path(), "tools/everything", &everything());
    let butler = Butler::start(dir.path());
    // Three sessions, each with its stream open: one takes every level, one only errors
    // and worse, one set no level.
    let sessions: Vec<crate::mcp::Client<'_>> = (0..3).map(|_| crate::mcp::Client::connect(&butler, "/mcp")).collect();
    for (client, level) in sessions.iter().zip(["debug", "error"]) {
        let set = json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": level}});
        assert_eq!(client.post(&set, &[]).0, 200);
    }
    let mut streams: Vec<_> = sessions.iter().map(|c| session_stream(&butler, c.session_id())).collect();
    // The reference server logs once during this call, then every 5 s outside any call.
    let toggle = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                        "params": {"name": "everything__toggle-simulated-logging", "arguments": {}}});
    let response = butler
        .request(reqwest::Method::POST, &butler.api("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-session-id", sessions[0].session_id())
        .body(toggle.to_string())
        .send()
        .expect("toggle");
    assert_eq!(response.status().as_u16(), 200);

    let started = std::time::Instant::now();
    let every = log_messages(&mut streams[0], |seen, _| {
        assert!(started.elapsed() < LIMIT, "timed out waiting for two log messages: {seen:?}");
        seen.len() >= 2
    });
    for message in &every {
        assert_eq!(message["logger"], "everything", "tagged with the provider's namespace: {message}");
        assert!(
            message["data"].as_str().is_some_and(|d| d.contains("-level message") || d.contains("level-message")),
            "{message}"
        );
    }
    let severe = ["error", "critical", "alert", "emergency"];
    let errors = log_messages(&mut streams[1], |_, quiet| quiet);
    assert!(errors.iter().all(|m| severe.contains(&m["level"].as_str().unwrap_or_default())), "{errors:?}");
    let expected: Vec<&Value> =
        every.iter().filter(|m| severe.contains(&m["level"].as_str().unwrap_or_default())).collect();
    assert!(expected.iter().all(|m| errors.contains(m)), "each severe one reached it too: {every:?} / {errors:?}");
    let none = log_messages(&mut streams[2], |_, quiet| quiet);
    assert!(none.is_empty(), "a session that set no level gets none: {none:?}");
}
