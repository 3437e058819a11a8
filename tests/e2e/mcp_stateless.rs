//! MCP revision 2026-07-28 (stateless) on the hub's endpoints, beside the legacy revisions:
//! a plain HTTP client for the wire rules, then real clients — the official Python SDK
//! (over HTTP and through `butler mcp stdio`), the TypeScript SDK's v2 client, and the
//! newest official conformance suite — in both eras.

use std::io::{BufRead, BufReader, Read, Write};
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::{LIMIT, fake, instance, log_lines, text_of, tools};
use crate::util::{Butler, wait_until, write_manifest};

const REVISION: &str = "2026-07-28";

/// What a 2026-07-28 client puts in every request's `_meta`.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": REVISION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
    })
}

/// A request of this revision with its `_meta` added to `params`.
pub(crate) fn request(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The headers a 2026-07-28 client sends with `message`.
pub(crate) fn headers_for(message: &Value) -> Vec<(String, String)> {
    let mut headers = vec![("mcp-protocol-version".to_owned(), REVISION.to_owned())];
    if let Some(method) = message["method"].as_str() {
        headers.push(("mcp-method".to_owned(), method.to_owned()));
        let name = message["params"]["name"].as_str().or(message["params"]["uri"].as_str());
        if let Some(name) = name {
            headers.push(("mcp-name".to_owned(), name.to_owned()));
        }
    }
    headers
}

/// POSTs `body` to `path` with `headers` and no session: (status, body as JSON or null).
pub(crate) fn post(butler: &Butler, path: &str, body: &Value, headers: &[(String, String)]) -> (u16, Value) {
    let mut request = butler
        .request(reqwest::Method::POST, &butler.api(path))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request.send().expect("request");
    let status = response.status().as_u16();
    assert!(response.headers().get("mcp-session-id").is_none(), "no session is minted for {body}");
    (status, serde_json::from_str(&response.text().expect("body")).unwrap_or(Value::Null))
}

/// A well-formed request of this revision: its whole answer.
pub(crate) fn ask(butler: &Butler, path: &str, message: &Value) -> Value {
    let (status, body) = post(butler, path, message, &headers_for(message));
    assert_eq!(status, 200, "{message}: {body}");
    assert_eq!(body["id"], message["id"], "{body}");
    body
}

/// The `data:` lines of an SSE answer as JSON messages, until `enough` says stop (or the
/// stream ends).
pub(crate) fn events(stream: impl Read, mut enough: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        if let Some(data) = line.strip_prefix("data: ") {
            seen.push(serde_json::from_str(data).expect("a JSON event"));
            if enough(&seen) {
                break;
            }
        }
    }
    seen
}

/// A raw HTTP/1.1 POST on its own connection (the caller decides when it ends).
pub(crate) fn raw_post(butler: &Butler, message: &Value) -> std::net::TcpStream {
    let authority = butler.origin.trim_start_matches("http://").to_owned();
    let body = message.to_string();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    let mut head = format!(
        "POST /myspace-butler/api/mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers_for(message) {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(stream, "{head}\r\n{body}").expect("send");
    stream
}

#[test]
fn the_stateless_revision_is_served_beside_the_2025_ones() {
    tools();
    // A new instance (the skeleton, with the built-in faculties) plus the fake provider.
    let dir = tempfile::tempdir().expect("temp");
    let workdir = dir.path().join("instance");
    let log = dir.path().join("fake.log");
    write_manifest(&workdir, "tools/fake", &fake("fake", &log, json!({})));
    let butler = Butler::start(&workdir);
    // A new instance holds the provider's tools until the owner approves them.
    let token = format!("Bearer {}", butler.owner_token());
    let (status, approved) =
        butler.post_json("/mcp/quarantine/approve", &json!({"provider": "fake"}), &[("authorization", token.as_str())]);
    assert_eq!(status, 200, "{approved}");
    assert!(approved["data"]["approved"].as_array().is_some_and(|a| a.iter().any(|n| n == "echo")), "{approved}");

    // Discovery: the revisions and what the hub serves; who it is in `_meta`.
    let discovered = ask(&butler, "/mcp", &request(1, "server/discover", json!({})))["result"].clone();
    assert_eq!(discovered["resultType"], "complete", "{discovered}");
    assert_eq!(discovered["supportedVersions"], json!([REVISION, "2025-11-25", "2025-06-18", "2025-03-26"]));
    assert_eq!(discovered["capabilities"]["tools"]["listChanged"], true, "{discovered}");
    assert_eq!(discovered["capabilities"]["logging"], json!({}), "{discovered}");
    assert_eq!(discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "butler", "{discovered}");
    assert!(discovered["ttlMs"].as_u64().is_some() && discovered["cacheScope"].is_string(), "{discovered}");

    // Lists and calls, each request on its own, every result saying it is complete.
    let listed = ask(&butler, "/mcp", &request(2, "tools/list", json!({})))["result"].clone();
    assert_eq!((listed["resultType"].as_str(), listed["ttlMs"].as_u64()), (Some("complete"), Some(0)), "{listed}");
    let names: Vec<&str> =
        listed["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"fake__echo") && names.contains(&"butler__search"), "{names:?}");
    let echoed =
        ask(&butler, "/mcp", &request(3, "tools/call", json!({"name": "fake__echo", "arguments": {"text": "hi"}})));
    assert_eq!((text_of(&echoed["result"]), &echoed["result"]["resultType"]), ("hi".to_owned(), &json!("complete")));
    let read = ask(&butler, "/mcp", &request(4, "resources/read", json!({"uri": "fake://readme"})));
    assert_eq!(read["result"]["contents"][0]["text"], "the fake readme", "{read}");
    let prompt = ask(&butler, "/mcp", &request(5, "prompts/get", json!({"name": "fake__greet"})));
    assert_eq!(prompt["result"]["resultType"], "complete", "{prompt}");
    // The distilling agent's endpoint keeps its own, smaller list in this revision too.
    let restricted = ask(&butler, "/mcp/butler", &request(6, "tools/list", json!({})));
    let restricted: Vec<&str> =
        restricted["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(restricted.contains(&"butler__distill_claim") && !restricted.iter().any(|n| n.starts_with("fake__")));

    // Refusals, in the order the revision checks them, each echoing the request's id.
    let refused = |message: &Value, headers: &[(String, String)]| {
        let (status, body) = post(&butler, "/mcp", message, headers);
        assert_eq!(body["id"], message["id"], "{body}");
        (status, body["error"]["code"].as_i64().unwrap_or_default(), body)
    };
    let list = request(7, "tools/list", json!({}));
    let bare = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}});
    let (status, code, body) = refused(&bare, &headers_for(&bare));
    assert_eq!((status, code), (400, -32602), "no _meta: {body}");
    let without_header = &headers_for(&list)[1..];
    assert_eq!(refused(&list, without_header).1, -32020, "no MCP-Protocol-Version");
    let mut other_version = list.clone();
    other_version["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    assert_eq!(refused(&other_version, &headers_for(&list)).1, -32020, "header and _meta disagree");
    let mut unsupported = headers_for(&list);
    unsupported[0].1 = "v999.0.0".to_owned();
    let (status, code, body) = refused(&other_version, &unsupported);
    assert_eq!((status, code), (400, -32022), "{body}");
    assert_eq!(body["error"]["data"]["requested"], "v999.0.0", "{body}");
    assert_eq!(body["error"]["data"]["supported"][0], REVISION, "{body}");
    let call = request(8, "tools/call", json!({"name": "fake__echo", "arguments": {}}));
    let mut wrong_name = headers_for(&call);
    wrong_name[2].1 = "fake__crash".to_owned();
    assert_eq!(refused(&call, &wrong_name).0, 400, "Mcp-Name must name the tool the body calls");
    assert_eq!(refused(&call, &headers_for(&call)[..2]).1, -32020, "no Mcp-Name");
    for removed in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "no/such"]
    {
        let message = request(9, removed, json!({}));
        let (status, code, body) = refused(&message, &headers_for(&message));
        assert_eq!((status, code), (404, -32601), "{removed}: {body}");
    }
    let unknown_tool = request(10, "tools/call", json!({"name": "fake__nothing", "arguments": {}}));
    assert_eq!(refused(&unknown_tool, &headers_for(&unknown_tool)).1, -32602);
    // One message per POST; notifications are accepted, responses are not for this revision.
    let (status, _) = post(&butler, "/mcp", &json!([list, list]), &headers_for(&list));
    assert_eq!(status, 400, "no batches");
    let note =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "_meta": meta()}});
    assert_eq!(post(&butler, "/mcp", &note, &headers_for(&note)).0, 202);
    // GET and DELETE belong to legacy sessions.
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = butler.request(method.clone(), &butler.api("/mcp")).send().expect("request");
        assert_eq!(response.status().as_u16(), 405, "{method}");
        assert_eq!(response.headers().get("allow").and_then(|v| v.to_str().ok()), Some("POST"));
    }

    // Progress: a call with a token, from a client that accepts SSE, streams it.
    let progress = request(11, "tools/call", json!({"name": "fake__progress", "arguments": {}}));
    let mut progress = progress;
    progress["params"]["_meta"]["progressToken"] = json!("p-1");
    let seen = events(raw_post(&butler, &progress), |seen| seen.last().is_some_and(|m| m.get("id").is_some()));
    assert_eq!(seen.iter().filter(|m| m["params"]["progressToken"] == "p-1").count(), 3, "{seen:?}");
    assert_eq!(seen.last().map(|m| m["result"]["resultType"].clone()), Some(json!("complete")), "{seen:?}");

    // Closing the connection is how this revision cancels: the provider is told.
    let hang = request(12, "tools/call", json!({"name": "fake__hang", "arguments": {}}));
    let connection = raw_post(&butler, &hang);
    wait_until(LIMIT, "the provider to get the call", || log_lines(&log).iter().any(|l| l.starts_with("hanging ")));
    let hanging = log_lines(&log).iter().find_map(|l| l.strip_prefix("hanging ").map(str::to_owned)).expect("id");
    drop(connection);
    wait_until(LIMIT, "the cancellation to reach the provider", || {
        log_lines(&log).contains(&format!("cancelled {hanging} the client went away"))
    });

    // The legacy revisions still work on the same endpoint.
    let legacy = crate::mcp::Client::connect(&butler, "/mcp");
    assert_eq!(legacy.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}), &[]).0, 200);
}

/// `subscriptions/listen` opens with the acknowledgement and then carries only the kinds
/// of change asked for, each tagged with the listen request's id.
#[test]
fn list_changes_reach_only_the_listeners_that_asked_for_them() {
    let dir = instance();
    std::fs::create_dir_all(dir.path().join("faculties")).expect("mkdir");
    let butler = Butler::start(dir.path());
    let listen = |id: u64, notifications: Value| {
        let message = request(id, "subscriptions/listen", json!({"notifications": notifications}));
        let stream = raw_post(&butler, &message);
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        stream
    };
    let tools_stream = listen(21, json!({"toolsListChanged": true, "resourceSubscriptions": ["fake://readme"]}));
    let prompts_stream = listen(22, json!({"promptsListChanged": true}));
    let mut tools_events = BufReader::new(tools_stream);
    let mut prompts_events = BufReader::new(prompts_stream);
    let next_event = |reader: &mut BufReader<std::net::TcpStream>| -> Option<Value> {
        let mut line = String::new();
        while reader.read_line(&mut line).ok()? > 0 {
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                return serde_json::from_str(data).ok();
            }
            line.clear();
        }
        None
    };
    let ack = next_event(&mut tools_events).expect("an acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 21, "{ack}");
    // No provider offers the resource, so its subscription is not acknowledged.
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true, "resourceSubscriptions": []}), "{ack}");
    let ack = next_event(&mut prompts_events).expect("an acknowledgement");
    assert_eq!(ack["params"]["notifications"], json!({"promptsListChanged": true}), "{ack}");

    // A faculty dropped in changes the tools, and only the tools.
    std::fs::copy(crate::util::guests::NOTES, dir.path().join("faculties/notes.wasm")).expect("copy");
    let mut told = None;
    wait_until(LIMIT, "the tools listener to be told", || {
        told = next_event(&mut tools_events);
        told.is_some()
    });
    let told = told.expect("a notification");
    assert_eq!(told["method"], "notifications/tools/list_changed", "{told}");
    assert_eq!(told["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 21, "{told}");
    // The prompts listener hears nothing of it (its read times out with no event).
    prompts_events.get_ref().set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
    assert_eq!(next_event(&mut prompts_events), None);
}

/// The official clients of this revision, through the hub: the Python SDK over HTTP and
/// through `butler mcp stdio`, the TypeScript SDK's v2 client, each pinned to 2026-07-28,
/// in auto mode (which probes with `server/discover`) and in legacy mode; then the newest
/// conformance suite's scenarios that need no fixture tools.
#[test]
fn the_official_clients_and_conformance_suite_speak_both_eras_through_the_hub() {
    let tools = tools();
    let dir = instance();
    let log = dir.path().join("fake.log");
    write_manifest(dir.path(), "tools/fake", &fake("fake", &log, json!({})));
    let butler = Butler::start(dir.path());
    let url = format!("http://localhost:{}/myspace-butler/api/mcp", butler.port);

    let python = r#"
import asyncio, sys, mcp
from mcp import StdioServerParameters
async def main(target, mode):
    if target.startswith("http"):
        server = target
    else:
        butler, workdir = target.split("::")
        server = StdioServerParameters(command=butler, args=["mcp", "stdio", "--workdir", workdir])
    async with mcp.Client(server, mode=mode) as client:
        print("VERSION", client.session.protocol_version)
        result = await client.call_tool("fake__echo", {"text": "from python"})
        print("ECHO", result.content[0].text)
        read = await client.read_resource("fake://readme")
        print("READ", read.contents[0].text)
asyncio.run(main(sys.argv[1], sys.argv[2]))
"#;
    let stdio = format!("{}::{}", crate::util::butler_binary().display(), dir.path().display());
    for (target, mode, agreed) in [
        (url.as_str(), REVISION, REVISION),
        (url.as_str(), "auto", REVISION),
        (url.as_str(), "legacy", "2025-11-25"),
        (stdio.as_str(), REVISION, REVISION),
    ] {
        let output = std::process::Command::new(tools.join("mcp-venv/bin/python"))
            .args(["-c", python, target, mode])
            .output()
            .expect("run the Python SDK client");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{mode} {target}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        for expected in [format!("VERSION {agreed}"), "ECHO from python".to_owned(), "READ the fake readme".to_owned()]
        {
            assert!(stdout.lines().any(|l| l == expected), "{mode} {target}: {expected:?} in {stdout}");
        }
    }

    let typescript = r"
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
const [url, mode] = process.argv.slice(-2);
const negotiation = mode === 'legacy' || mode === 'auto' ? mode : { pin: mode };
const client = new Client({ name: 'e2e', version: '1.0.0' }, { capabilities: {}, versionNegotiation: { mode: negotiation } });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
console.log('VERSION', client.getNegotiatedProtocolVersion());
const result = await client.callTool({ name: 'fake__echo', arguments: { text: 'from typescript' } });
console.log('ECHO', result.content[0].text);
await client.close();
";
    let js = tools.join("mcp-js");
    for (mode, agreed) in [(REVISION, REVISION), ("auto", REVISION), ("legacy", "2025-11-25")] {
        let output = std::process::Command::new("node")
            .args(["--input-type=module", "-e", typescript, "--", &url, mode])
            .env("NODE_PATH", js.join("node_modules"))
            .current_dir(&js)
            .output()
            .expect("run the TypeScript SDK client");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{mode}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains(&format!("VERSION {agreed}")) && stdout.contains("ECHO from typescript"), "{stdout}");
    }

    // The newest conformance suite, at 2026-07-28, on the scenarios that need no fixture
    // tools; `server-stateless` with the checks that need them named as expected failures.
    let baseline = crate::conformance::fixture("main-endpoint.yml");
    for scenario in
        ["server-stateless", "caching", "tools-list", "dns-rebinding-protection", "server-sse-multiple-streams"]
    {
        let mut command = crate::conformance::Suite::Next.server(&url);
        command.args(["--scenario", scenario, "--spec-version", REVISION]).arg("--expected-failures").arg(&baseline);
        let run = crate::conformance::run(command);
        assert!(run.success, "{scenario}:\n{}", run.text);
    }
}

#[test]
fn a_stdio_client_of_2026_cancels_a_call_and_the_provider_is_told() {
    tools();
    let dir = instance();
    let log = dir.path().join("fake.log");
    write_manifest(dir.path(), "tools/fake", &fake("fake", &log, json!({})));
    let _butler = Butler::start(dir.path());
    let mut bridge = std::process::Command::new(crate::util::butler_binary())
        .args(["mcp", "stdio", "--workdir"])
        .arg(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the bridge");
    let mut stdin = bridge.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(bridge.stdout.take().expect("stdout"));
    let mut send = |message: &Value| writeln!(stdin, "{message}").and_then(|()| stdin.flush()).expect("write");

    send(&request(5, "tools/call", json!({"name": "fake__hang", "arguments": {}})));
    wait_until(LIMIT, "the provider to get the call", || log_lines(&log).iter().any(|l| l.starts_with("hanging ")));
    let hanging = log_lines(&log).iter().find_map(|l| l.strip_prefix("hanging ").map(str::to_owned)).expect("id");
    // Over stdio this revision cancels with a notification; the bridge closes the request's
    // connection, which is how it cancels over HTTP.
    send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}));
    wait_until(LIMIT, "the cancellation to reach the provider", || {
        log_lines(&log).contains(&format!("cancelled {hanging} the client went away"))
    });
    // The cancelled call gets no answer: the next line is the next request's.
    send(&request(6, "tools/list", json!({})));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("an answer");
    let answer: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(answer["id"], 6, "{answer}");
    assert!(answer["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{answer}");
    let _ = bridge.kill();
    let _ = bridge.wait();
}
