//! The request gate and the error envelope, tried from outside with real requests.

use reqwest::Method;

use crate::util::{Butler, assert_error, json_of};

#[test]
fn the_gate_refuses_foreign_hosts_origins_and_cross_site_fetches() {
    let (butler, _dir) = Butler::start_fresh();
    let health = butler.api("/health");
    let send = |headers: &[(&str, String)]| {
        let mut request = butler.request(Method::GET, &health);
        for (k, v) in headers {
            request = request.header(*k, v.as_str());
        }
        json_of(request.send().expect("request"))
    };
    let own = butler.origin.clone();

    // DNS rebinding: the attacker's name in Host.
    let (status, body) = send(&[("host", format!("attacker.example:{}", butler.port))]);
    assert_error(status, &body, 403, "host_not_allowed");
    let (status, body) = send(&[("host", format!("127.0.0.1.attacker.example:{}", butler.port))]);
    assert_error(status, &body, 403, "host_not_allowed");

    for bad in [
        "http://attacker.example",
        "null",
        &format!("http://127.0.0.1:{}", butler.port.wrapping_add(1)),
        &format!("https://127.0.0.1:{}", butler.port),
    ] {
        let (status, body) = send(&[("origin", bad.to_owned())]);
        assert_error(status, &body, 403, "origin_not_allowed");
    }
    for site in ["cross-site", "same-site"] {
        // Even with our own Origin, a browser saying the request is cross-site is refused.
        let (status, body) = send(&[("origin", own.clone()), ("sec-fetch-site", site.to_owned())]);
        assert_error(status, &body, 403, "cross_site_request");
    }

    // Same-origin browser traffic and local clients without Origin pass.
    let (status, body) = send(&[("origin", own.clone()), ("sec-fetch-site", "same-origin".to_owned())]);
    assert_eq!((status, body["ok"].as_bool()), (200, Some(true)));
    let (status, _) = send(&[
        ("origin", format!("http://localhost:{}", butler.port)),
        ("host", format!("localhost:{}", butler.port)),
    ]);
    assert_eq!(status, 200);
    let (status, _) = send(&[]);
    assert_eq!(status, 200);

    // The gate covers unknown routes and writes too.
    let response = butler
        .request(Method::PUT, &butler.api("/layout"))
        .header("origin", "http://attacker.example")
        .header("content-type", "application/json")
        .body(r#"{"version":1}"#)
        .send()
        .expect("put");
    let (status, body) = json_of(response);
    assert_error(status, &body, 403, "origin_not_allowed");
    let response = butler
        .request(Method::GET, &format!("{}/anything", butler.origin))
        .header("origin", "http://attacker.example")
        .send()
        .expect("get");
    let (status, body) = json_of(response);
    assert_error(status, &body, 403, "origin_not_allowed");
}

/// An MCP request is served on the hub's own path when it is the first request of a
/// connection (the listener sends that connection to the hub's runtime), and through the
/// router when an earlier request on the same kept-alive connection was not MCP's. Every
/// gate rule, the body limit and a malformed body are tried on both paths, on each endpoint
/// and under both prefixes, and on a route that is not MCP's: the same refusal each time,
/// as a JSON-RPC error on the MCP routes and as the envelope elsewhere.
#[test]
fn the_gate_and_the_body_rules_hold_on_both_mcp_paths_and_the_api() {
    let (butler, _dir) = Butler::start_fresh();
    let authority = butler.origin.trim_start_matches("http://").to_owned();
    let own = butler.origin.clone();
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}})
    .to_string();
    let refusals = [
        (format!("Host: attacker.example:{}\r\n", butler.port), 403, "host_not_allowed"),
        (String::new(), 403, "host_not_allowed"),
        (format!("Host: {authority}\r\nHost: {authority}\r\n"), 400, "duplicate_header"),
        (format!("Host: {authority}\r\nOrigin: http://attacker.example\r\n"), 403, "origin_not_allowed"),
        (format!("Host: {authority}\r\nOrigin: {own}\r\nSec-Fetch-Site: cross-site\r\n"), 403, "cross_site_request"),
    ];
    let big = " ".repeat(1024 * 1024 + 10);
    for path in [
        "/myspace-butler/api/mcp",
        "/myspace-butler/mcp",
        "/myspace-butler/api/mcp/butler",
        "/myspace-butler/api/pipeline",
    ] {
        let mcp = path.contains("/mcp");
        let post = |headers: &str, body: &str| {
            format!(
                "POST {path} HTTP/1.1\r\n{headers}Content-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let code_of = |body: &serde_json::Value| {
            if mcp {
                assert_eq!(
                    (body["jsonrpc"].as_str(), body["error"]["code"].as_i64()),
                    (Some("2.0"), Some(-32600)),
                    "{path}: {body}"
                );
                body["error"]["data"]["code"].clone()
            } else {
                body["error"]["code"].clone()
            }
        };
        for after_health in [false, true] {
            let on = |request: String| {
                if after_health {
                    exchange_after_health(&butler, request.as_bytes())
                } else {
                    raw_exchange(&butler, request.as_bytes())
                }
            };
            let which = if after_health { "the router" } else { "a fresh connection" };
            for (headers, status, code) in &refusals {
                let (got, body) = on(post(headers, &initialize));
                assert_eq!((got, code_of(&body)), (*status, serde_json::json!(code)), "{path} on {which}: {body}");
            }
            // Too large, and a chunked body whose chunk size is not hex.
            let (got, body) = on(post(&format!("Host: {authority}\r\n"), &big));
            assert_eq!(got, 413, "{path} on {which}: {body}");
            if mcp {
                code_of(&body);
            } else {
                assert_eq!(body["error"]["code"], "payload_too_large", "{body}");
            }
            let chunked = format!(
                "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
                 Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n"
            );
            let (got, body) = on(chunked);
            assert_eq!(got, 400, "{path} on {which}: {body}");
            if mcp {
                code_of(&body);
                // The owner's own request passes the same path.
                let (got, body) = on(post(&format!("Host: {authority}\r\n"), &initialize));
                assert_eq!(
                    (got, body["result"]["serverInfo"]["name"].as_str()),
                    (200, Some("butler")),
                    "{path}: {body}"
                );
            }
        }
    }
}

/// With `"mcp": {"auth": "token"}`, a request without the owner's credential, or with a
/// wrong one, is refused on both MCP paths (see above) and on the API alike; the owner
/// token opens all three.
#[test]
fn the_credential_check_holds_on_both_mcp_paths_and_the_api() {
    let (butler, _dir) = Butler::fresh_with_config(|config| config["mcp"]["auth"] = serde_json::json!("token"));
    let authority = butler.origin.trim_start_matches("http://").to_owned();
    let token = butler.owner_token();
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for path in [
        "/myspace-butler/api/mcp",
        "/myspace-butler/mcp/butler",
        "/myspace-butler/api/mcp/p/nobody",
        "/myspace-butler/api/pipeline",
    ] {
        let mcp = path.contains("/mcp");
        for after_health in [false, true] {
            let on = |credential: &str| {
                let request = format!(
                    "POST {path} HTTP/1.1\r\nHost: {authority}\r\n{credential}Content-Type: application/json\r\n\
                     Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
                     Connection: close\r\nContent-Length: {}\r\n\r\n{ping}",
                    ping.len()
                );
                if after_health {
                    exchange_after_health_with(&butler, &token, request.as_bytes())
                } else {
                    raw_exchange(&butler, request.as_bytes())
                }
            };
            for credential in [String::new(), "Authorization: Bearer not-the-token\r\n".to_owned()] {
                let (got, body) = on(&credential);
                let code = if mcp { &body["error"]["data"]["code"] } else { &body["error"]["code"] };
                assert_eq!(
                    (got, code),
                    (401, &serde_json::json!("token_required")),
                    "{path} {credential:?} after /health: {after_health}: {body}"
                );
            }
            let (got, body) = on(&format!("Authorization: Bearer {token}\r\n"));
            assert_ne!(got, 401, "{path} with the owner token: {body}");
        }
    }
}

#[test]
fn every_route_answers_under_the_legacy_alias_and_errors_use_the_envelope() {
    let (butler, _dir) = Butler::start_fresh();
    for path in ["/health", "/catalog", "/overview", "/services", "/faculties", "/layout"] {
        let api = json_of(butler.request(Method::GET, &butler.api(path)).send().expect("api"));
        let legacy = json_of(
            butler.request(Method::GET, &format!("{}/myspace-butler{path}", butler.origin)).send().expect("legacy"),
        );
        assert_eq!(api.0, 200, "{path}");
        assert_eq!(legacy.0, 200, "{path}");
        if path != "/health" {
            assert_eq!(api.1, legacy.1, "{path}");
        }
    }
    let (status, body) = json_of(butler.request(Method::GET, &butler.api("/no-such-route")).send().expect("get"));
    assert_error(status, &body, 404, "unknown_route");
    let (status, body) = json_of(butler.request(Method::GET, &format!("{}/", butler.origin)).send().expect("get"));
    assert_error(status, &body, 404, "unknown_route");
    let (status, body) = json_of(butler.request(Method::DELETE, &butler.api("/catalog")).send().expect("delete"));
    assert_error(status, &body, 405, "method_not_allowed");
}

/// Runs `script` with `/usr/bin/python3` as the user `nobody` (uid 65534); its stdout, or
/// `None` when this test process cannot switch users (it is not root).
pub(crate) fn as_another_user(script: &str) -> Option<String> {
    as_user(NOBODY, script)
}

/// The user `nobody`: the attacker.
const NOBODY: u32 = 65534;
/// The user `daemon`: an ordinary user who owns a host in a test.
const ORDINARY_OWNER: u32 = 1;

/// Runs `script` with `/usr/bin/python3` as the user `uid`; its stdout and stderr, or
/// `None` when this test process cannot switch users (it is not root).
fn as_user(uid: u32, script: &str) -> Option<String> {
    if rustix_uid() != 0 {
        eprintln!("not root: cannot try the host as another user here (CI runs as root)");
        return None;
    }
    let output = std::process::Command::new("setpriv")
        .args([format!("--reuid={uid}"), format!("--regid={uid}"), "--clear-groups".into(), "--".into()])
        .args(["/usr/bin/python3", "-c", script])
        .current_dir("/")
        .output()
        .expect("setpriv");
    Some(String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr))
}

fn rustix_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Uid:")?.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(u32::MAX)
}

#[test]
fn another_local_user_gets_nothing_over_tcp_or_the_local_socket() {
    let (butler, _dir) = Butler::start_fresh();
    let token = butler.owner_token();
    // Over TCP, even with every header the console sends and the owner's token: refused
    // before the request is read.
    let tcp = format!(
        r#"
import socket
s = socket.create_connection(("127.0.0.1", {port}))
s.sendall(b"POST /myspace-butler/api/pipeline HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\nSec-Fetch-Site: same-origin\r\nX-Butler-Review: 1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}")
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.decode())
"#,
        port = butler.port
    );
    let Some(answer) = as_another_user(&tcp) else { return };
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("\"code\":\"foreign_user\""), "{answer}");
    // The MCP endpoint likewise.
    let mcp = tcp.replace("/myspace-butler/api/pipeline", "/myspace-butler/api/mcp");
    let answer = as_another_user(&mcp).expect("root");
    assert!(answer.contains("\"code\":\"foreign_user\""), "{answer}");
    // The local socket is the owner's alone (mode 0600, and its peer is checked).
    let socket = butler.workdir.join(".butler/host.sock");
    let unix = format!(
        r#"
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("{path}")
    s.sendall(b"GET /myspace-butler/api/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    print(s.recv(65536).decode())
except OSError as e:
    print("refused:", e)
"#,
        path = socket.display()
    );
    let answer = as_another_user(&unix).expect("root");
    assert!(answer.starts_with("refused:") || answer.contains("foreign_user"), "{answer}");
    // The owner still gets in.
    assert_eq!(butler.get_json("/health").0, 200);
}

/// Whether any file under `dir` holds `needle`.
fn somewhere_under(dir: &std::path::Path, needle: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.flatten().any(|entry| {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => somewhere_under(&path, needle),
            Ok(kind) if kind.is_file() => {
                std::fs::read(&path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
            }
            _ => false,
        }
    })
}

/// Sends `signal` to the host process `pid`.
fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").args([signal, &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill {signal} {pid}");
}

/// Another user connects, writes a request and the start of a second one, and closes at
/// once. When the host accepts late (a busy or starting host; here it is stopped meanwhile),
/// the client's socket is already a kernel mini-socket, which reports uid 0 — root's, the
/// owner's when the host runs as root. Such a connection is unverified: its request needs a
/// credential, and without one it is refused and does nothing.
#[test]
fn a_connection_that_closed_before_the_host_accepted_it_is_not_the_owners() {
    let (butler, _dir) = Butler::start_fresh();
    butler.wait_ready("journal");
    let observe = |marker: &str| {
        let (status, body) = butler.post_json("/observe", &serde_json::json!({"source": "test", "text": marker}), &[]);
        assert_eq!(status, 202, "{body}");
    };
    try_the_closed_connection_race(&butler, observe);
}

/// The same race against a host an ordinary user runs: uid 0 is not its owner either, and
/// the connection that could no longer vouch for anyone gets nothing.
#[test]
fn a_connection_that_closed_before_an_ordinary_users_host_accepted_it_gets_nothing() {
    if rustix_uid() != 0 {
        eprintln!("not root: cannot run a host as another user here (CI runs as root)");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let butler = Butler::start_as_user(dir.path(), ORDINARY_OWNER);
    // Only the owner's own user may talk to it: the owner's requests are made as that user.
    let observe = |marker: &str| {
        let script = format!(
            r#"
import json, time, urllib.request
base = "http://127.0.0.1:{port}/myspace-butler/api"
for _ in range(300):
    try:
        health = json.load(urllib.request.urlopen(base + "/health", timeout=5))
        if health["faculties"]["ready"]:
            break
    except Exception:
        pass
    time.sleep(0.1)
request = urllib.request.Request(base + "/observe", data=json.dumps({{"source": "test", "text": "{marker}"}}).encode(),
    headers={{"Content-Type": "application/json"}})
print(urllib.request.urlopen(request, timeout=10).status)
"#,
            port = butler.port,
        );
        let answer = as_user(ORDINARY_OWNER, &script).expect("root runs the owner's client");
        assert_eq!(answer.trim(), "202", "{answer}");
    };
    try_the_closed_connection_race(&butler, observe);
}

/// The owner observes a marker (`observe`) and sees it kept; `nobody` races a request that
/// would plant another through a connection closed before the host accepts it; the owner's
/// later marker is kept, and the planted one is nowhere under the instance.
fn try_the_closed_connection_race(butler: &Butler, observe: impl Fn(&str)) {
    let unique = format!("{}x{}", std::process::id(), butler.port);
    let before = format!("owners-note-before-{unique}");
    observe(&before);
    crate::util::wait_until(std::time::Duration::from_secs(20), "the owner's observation is kept", || {
        somewhere_under(&butler.workdir, &before)
    });
    let planted = format!("planted-by-nobody-{unique}");
    let body = serde_json::json!({"source": "attacker", "text": planted}).to_string();
    let race = format!(
        r#"
import socket, time
s = socket.create_connection(("127.0.0.1", {port}))
s.sendall(b"POST /myspace-butler/api/observe HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n{body}POST /myspace-butler/api/observe HTTP/1.1\r\n")
s.close()
time.sleep(0.3)
print("sent")
"#,
        port = butler.port,
        len = body.len(),
        body = body.replace('"', "\\\""),
    );
    // The host accepts late: it is stopped while the attacker connects, writes and closes.
    signal(butler.pid(), "-STOP");
    let sent = as_another_user(&race);
    signal(butler.pid(), "-CONT");
    let Some(sent) = sent else { return };
    assert!(sent.contains("sent"), "{sent}");
    // The host has taken the connection and answered it by the time a later request of the
    // owner's is kept.
    let after = format!("owners-note-after-{unique}");
    observe(&after);
    crate::util::wait_until(std::time::Duration::from_secs(20), "the owner's later observation is kept", || {
        somewhere_under(&butler.workdir, &after)
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!somewhere_under(&butler.workdir, &planted), "the closed connection's request ran as the owner's");
}

#[test]
fn oversized_and_malformed_bodies_get_the_envelope() {
    let (butler, _dir) = Butler::start_fresh();
    let big = vec![b' '; 1024 * 1024 + 10];
    for path in ["/pipeline", "/observe", "/faculties/journal/commands/intake"] {
        let (status, body) = butler.raw("POST", path, &[("content-type", "application/json")], &big);
        assert_error(status, &body, 413, "payload_too_large");
    }
    // A chunked body whose chunk size is not hex.
    use std::io::{Read, Write};
    let authority = butler.origin.trim_start_matches("http://").to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    let request = format!(
        "POST /myspace-butler/api/pipeline HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let (head, body) = answer.split_once("\r\n\r\n").expect("a response");
    assert!(head.starts_with("HTTP/1.1 400"), "{answer}");
    let body: serde_json::Value =
        serde_json::from_str(body.trim()).unwrap_or_else(|_| panic!("not the envelope: {answer}"));
    assert_eq!(body["error"]["code"], "invalid_body", "{body}");
}

/// Sends `request` on a connection whose first request was `GET /health` (kept alive), so
/// that it is served through the router, and returns its status and parsed body.
fn exchange_after_health(butler: &Butler, request: &[u8]) -> (u16, serde_json::Value) {
    exchange_after_health_with(butler, "", request)
}

/// [`exchange_after_health`], the `GET /health` carrying `token` (when not empty).
fn exchange_after_health_with(butler: &Butler, token: &str, request: &[u8]) -> (u16, serde_json::Value) {
    use std::io::{BufRead, BufReader, Read, Write};
    let authority = butler.origin.trim_start_matches("http://").to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).expect("timeout");
    let credential = if token.is_empty() { String::new() } else { format!("Authorization: Bearer {token}\r\n") };
    let health = format!("GET /myspace-butler/api/health HTTP/1.1\r\nHost: {authority}\r\n{credential}\r\n");
    stream.write_all(health.as_bytes()).expect("send");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut length = None;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).expect("head");
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let mut first = vec![0; length.expect("GET /health has a length")];
    reader.read_exact(&mut first).expect("the health answer");
    assert!(
        String::from_utf8_lossy(&first).contains("\"ok\":true"),
        "GET /health: {}",
        String::from_utf8_lossy(&first)
    );
    let _ = stream.write_all(request);
    let mut answer = Vec::new();
    let _ = reader.read_to_end(&mut answer);
    parse_answer(&String::from_utf8_lossy(&answer))
}

/// Sends raw bytes on a fresh connection and returns the status and the parsed body.
fn raw_exchange(butler: &Butler, request: &[u8]) -> (u16, serde_json::Value) {
    use std::io::{Read, Write};
    let authority = butler.origin.trim_start_matches("http://").to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).expect("timeout");
    let _ = stream.write_all(request);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    parse_answer(&String::from_utf8_lossy(&answer))
}

/// The status and the parsed JSON body of a whole HTTP answer.
fn parse_answer(answer: &str) -> (u16, serde_json::Value) {
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no response: {answer:?}"));
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{head}"));
    assert!(head.to_ascii_lowercase().contains("content-type: application/json"), "{head}");
    let body = serde_json::from_str(body.trim()).unwrap_or_else(|_| panic!("not JSON: {answer}"));
    (status, body)
}

#[test]
fn errors_hyper_answers_by_itself_use_the_envelope_and_json_rpc_on_mcp() {
    let (butler, _dir) = Butler::start_fresh();
    let authority = butler.origin.trim_start_matches("http://").to_owned();
    let huge = "a".repeat(70 * 1024);
    // A head over the limit, on an API route and on the MCP route.
    let request = format!("GET /myspace-butler/api/health HTTP/1.1\r\nHost: {authority}\r\nX-Big: {huge}\r\n\r\n");
    let (status, body) = raw_exchange(&butler, request.as_bytes());
    assert_eq!((status, body["error"]["code"].as_str()), (431, Some("headers_too_large")), "{body}");
    let request = format!("POST /myspace-butler/api/mcp HTTP/1.1\r\nHost: {authority}\r\nX-Big: {huge}\r\n\r\n");
    let (status, body) = raw_exchange(&butler, request.as_bytes());
    assert_eq!((status, body["error"]["code"].as_i64()), (431, Some(-32600)), "{body}");
    assert_eq!(body["jsonrpc"], "2.0");
    // A request line that is not HTTP, and a header line without a colon.
    let (status, body) = raw_exchange(&butler, b"\x01\x02 nonsense\r\n\r\n");
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("bad_request")), "{body}");
    let request = format!("GET /myspace-butler/api/health HTTP/1.1\r\nHost: {authority}\r\nno colon here\r\n\r\n");
    let (status, body) = raw_exchange(&butler, request.as_bytes());
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("bad_request")), "{body}");
    // An oversized body on the MCP route: a JSON-RPC error with 413.
    let big = vec![b' '; 1024 * 1024 + 10];
    let (status, body) = butler.raw(
        "POST",
        "/mcp",
        &[("content-type", "application/json"), ("accept", "application/json, text/event-stream")],
        &big,
    );
    assert_eq!((status, &body["error"]["code"]), (413, &serde_json::json!(-32600)), "{body}");
    // The host still answers normally, on a kept-alive connection too.
    assert_eq!(butler.get_json("/health").0, 200);
}
