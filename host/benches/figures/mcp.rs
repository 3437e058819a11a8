//! B4: `tools/call` of server-everything's `echo` through the MCP hub against the same call
//! sent straight to the same provider over stdio.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Host, header, line_in, line_us, note, percentiles, rate, read_head};

const ECHO: &str = r#"{"name":"echo","arguments":{"message":"hello"}}"#;

/// `target/test-tools`, with the pinned MCP tools installed.
pub(super) fn tools() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = Command::new("bash")
        .arg(root.join("scripts/install-mcp-test-tools"))
        .stdout(Stdio::null())
        .status()
        .expect("run scripts/install-mcp-test-tools");
    assert!(status.success(), "scripts/install-mcp-test-tools failed");
    root.join("target/test-tools")
}

pub(super) fn everything(tools: &Path) -> Vec<String> {
    let script = tools.join("mcp-js/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    vec!["node".into(), script.display().to_string(), "stdio".into()]
}

/// One MCP session over one keep-alive connection.
pub(super) struct Session {
    stream: BufReader<TcpStream>,
    authority: String,
    path: String,
    session: String,
    next: u64,
    /// Revision 2026-07-28: no session; `_meta` and the headers on every request.
    stateless: bool,
}

impl Session {
    /// A client of the stateless revision 2026-07-28 on its own connection: nothing to open.
    fn stateless(authority: &str) -> Self {
        let stream = TcpStream::connect(authority).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream: BufReader::new(stream),
            authority: authority.to_owned(),
            path: "/myspace-butler/api/mcp".to_owned(),
            session: String::new(),
            next: 1,
            stateless: true,
        }
    }

    /// A session with the hub.
    fn open(authority: &str) -> Self {
        Self::open_at(authority, "/myspace-butler/api/mcp")
    }

    /// A session with the MCP endpoint at `path`.
    pub(super) fn open_at(authority: &str, path: &str) -> Self {
        let stream = TcpStream::connect(authority).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let mut session = Self {
            stream: BufReader::new(stream),
            authority: authority.to_owned(),
            path: path.to_owned(),
            session: String::new(),
            next: 1,
            stateless: false,
        };
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
        let (status, _, id) = session.post(init);
        assert_eq!(status, 200);
        session.session = id.expect("a session id");
        assert_eq!(session.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).0, 202);
        session
    }

    /// `GET /health` on the same connection: an HTTP round trip to the host that does nothing
    /// MCP (the transport floor).
    fn health(&mut self) {
        self.get("/myspace-butler/api/health");
    }

    /// `GET path` on the same connection; the JSON answer.
    fn get(&mut self, path: &str) -> Value {
        let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\n\r\n", self.authority);
        self.stream.get_mut().write_all(request.as_bytes()).expect("send");
        let (status, headers) = read_head(&mut self.stream);
        let length = header(&headers, "content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).expect("body");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).expect("JSON")
    }

    fn post(&mut self, body: &str) -> (u16, Vec<u8>, Option<String>) {
        self.post_with(body, "")
    }

    /// `post` with more header lines (each ending in CRLF).
    fn post_with(&mut self, body: &str, headers: &str) -> (u16, Vec<u8>, Option<String>) {
        let session =
            if self.session.is_empty() { String::new() } else { format!("Mcp-Session-Id: {}\r\n", self.session) };
        let session = format!("{session}{headers}");
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\n\r\n{body}",
            self.path,
            self.authority,
            body.len()
        );
        self.stream.get_mut().write_all(request.as_bytes()).expect("send");
        let (status, headers) = read_head(&mut self.stream);
        let length = header(&headers, "content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let session = header(&headers, "mcp-session-id").map(str::to_owned);
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).expect("body");
        (status, body, session)
    }

    fn echo(&mut self) {
        self.call("everything__echo");
    }

    /// `ping`: answered by the hub itself, so the HTTP and JSON-RPC round trip alone.
    fn ping(&mut self) {
        self.next += 1;
        let (status, answer, _) = self.post(&format!(r#"{{"jsonrpc":"2.0","id":{},"method":"ping"}}"#, self.next));
        assert!(status == 200 && answer.windows(6).any(|w| w == b"result"), "{}", String::from_utf8_lossy(&answer));
    }

    /// `tools/call` of `tool` (an echo) with `{"message": "hello"}`.
    pub(super) fn call(&mut self, tool: &str) {
        self.next += 1;
        let (meta, headers) = if self.stateless {
            (
                r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#,
                format!("MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\n"),
            )
        } else {
            ("", String::new())
        };
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"message":"hello"}}{meta}}}}}"#,
            self.next
        );
        let (status, answer, _) = self.post_with(&body, &headers);
        assert!(status == 200 && answer.windows(5).any(|w| w == b"hello"), "{}", String::from_utf8_lossy(&answer));
    }
}

/// The provider `argv` with its stdin and stdout piped (stderr dropped).
fn spawn_provider(argv: &[String]) -> (Child, ChildStdin, ChildStdout) {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the provider");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    (child, stdin, stdout)
}

/// The provider spoken to directly by one caller that writes a request and reads its
/// answer on the same thread: the fastest direct path, the baseline for latency.
pub(super) struct Lone {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    line: String,
}

impl Lone {
    pub(super) fn start(argv: &[String]) -> Self {
        let (child, stdin, stdout) = spawn_provider(argv);
        let stdout = BufReader::new(stdout);
        let mut lone = Self { child, stdin, stdout, next: 1, line: String::new() };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}});
        lone.request("initialize", &init.to_string());
        lone.stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").expect("write");
        lone
    }

    /// One echo call.
    pub(super) fn call(&mut self) {
        self.request("tools/call", ECHO);
    }

    fn request(&mut self, method: &str, params: &str) {
        let id = self.next;
        self.next += 1;
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params}}}\n");
        self.stdin.write_all(line.as_bytes()).expect("write");
        loop {
            self.line.clear();
            assert!(self.stdout.read_line(&mut self.line).expect("read") > 0, "the provider closed its stdout");
            let Ok(message) = serde_json::from_str::<Value>(&self.line) else { continue };
            if message["id"].as_u64() == Some(id) {
                return;
            }
        }
    }
}

impl Drop for Lone {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The provider spoken to directly: one pipe, callers matched to answers by id.
pub(super) struct Direct {
    child: Child,
    stdin: Mutex<ChildStdin>,
    pending: Arc<Mutex<HashMap<u64, mpsc::Sender<()>>>>,
    next: AtomicU64,
}

impl Direct {
    pub(super) fn start(argv: &[String]) -> Self {
        let (child, stdin, stdout) = spawn_provider(argv);
        let pending: Arc<Mutex<HashMap<u64, mpsc::Sender<()>>>> = Arc::default();
        let routes = Arc::clone(&pending);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
                if let Some(id) = message["id"].as_u64()
                    && let Some(waiting) = routes.lock().expect("lock").remove(&id)
                {
                    let _ = waiting.send(());
                }
            }
        });
        let direct = Self { child, stdin: Mutex::new(stdin), pending, next: AtomicU64::new(1) };
        direct.request("initialize", &json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}).to_string());
        direct.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        direct
    }

    fn send(&self, line: &str) {
        let mut stdin = self.stdin.lock().expect("lock");
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
    }

    fn request(&self, method: &str, params: &str) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        self.pending.lock().expect("lock").insert(id, tx);
        self.send(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#));
        rx.recv_timeout(Duration::from_secs(30)).expect("an answer");
    }
}

impl Drop for Direct {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The host on a new instance whose one extension is the provider `argv` as an `mcp`
/// block (id and namespace `everything`); the instance lives as long as the guard.
pub(super) fn hub_with_everything(argv: &[String]) -> (Host, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    let ext = root.join("tools/everything");
    std::fs::create_dir_all(&ext).expect("mkdir");
    std::fs::write(root.join("butler.json"), "{}").expect("root");
    let mcp = json!({"transport": "stdio", "command": argv});
    let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": "everything", "name": "Everything", "mcp": mcp});
    std::fs::write(ext.join("butler.json"), manifest.to_string()).expect("manifest");
    (Host::start_quiet(&root), dir)
}

/// Samples of `N` kinds of call measured in turns of [`TURN`] calls of one kind, round
/// after round, so that what a system does after answering (a Node GC, a flush) lands in
/// its own turn rather than in the next system's timing; the first `warmup` calls of each
/// kind are not kept.
pub(super) fn in_turns<const N: usize>(runs: usize, warmup: usize, mut call: impl FnMut(usize)) -> [Vec<Duration>; N] {
    const TURN: usize = 50;
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(runs));
    let mut done = 0;
    while done < runs + warmup {
        let turn = TURN.min(runs + warmup - done);
        for (kind, kept) in samples.iter_mut().enumerate() {
            for i in 0..turn {
                let start = Instant::now();
                call(kind);
                let took = start.elapsed();
                if done + i >= warmup {
                    kept.push(took);
                }
            }
        }
        done += turn;
    }
    samples
}

/// B4: hub-added latency (1 session) and throughput (8 and 32 sessions) against direct stdio.
pub fn b4_hub_call() {
    const RUNS: usize = 2000;
    const WINDOW: Duration = Duration::from_secs(3);
    let tools = tools();
    let argv = everything(&tools);
    let (host, _dir) = hub_with_everything(&argv);
    let direct = Direct::start(&argv);
    let mut lone = Lone::start(&argv);

    // In turns: direct stdio, the hub, and the two floors on the same connection —
    // `GET /health` (HTTP alone) and an MCP `ping` (HTTP, session, JSON-RPC).
    let mut session = Session::open(host.authority());
    let mut stateless = Session::stateless(host.authority());
    let samples = in_turns::<5>(RUNS, 200, |kind| match kind {
        0 => lone.call(),
        1 => session.echo(),
        2 => session.health(),
        3 => session.ping(),
        _ => stateless.echo(),
    });
    let [(base50, base99), (hub50, hub99), (health50, _), (ping50, _), (modern50, modern99)] = samples.map(percentiles);
    line_us("B4 tools/call echo through the hub, 1 session (p50; baseline = direct stdio)", hub50, base50);
    line_us("B4 tools/call echo through the hub, 1 session (p99; baseline = direct stdio)", hub99, base99);
    let added = hub50.saturating_sub(base50);
    line_us("B4 added p50, 1 session (baseline = an HTTP round trip to the host, GET /health)", added, health50);
    line_us("B4 tools/call echo through the hub, 2026-07-28 (p50; baseline = direct stdio)", modern50, base50);
    line_us("B4 tools/call echo through the hub, 2026-07-28 (p99; baseline = direct stdio)", modern99, base99);
    line_us(
        "B4 added p50, 2026-07-28 (baseline = the added p50 of a 2025-11-25 session, same run)",
        modern50.saturating_sub(base50),
        added,
    );
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    // The hub's own record of the provider's answers (from its write to the pipe to the
    // answer read back), over the same calls.
    let status = session.get("/myspace-butler/api/mcp/status");
    let inside = status["providers"][0]["p50Ms"].as_f64().unwrap_or(f64::NAN) * 1e3;
    note(&format!(
        "B4: the hub adds {:.0} µs at p50; the target, 40 µs where a do-nothing HTTP endpoint costs ~16 µs, \
         is 2.5x that floor. Same run: GET /health {:.0} µs, MCP ping {:.0} µs; \
         inside the hub the provider answered in {inside:.0} µs (p50)",
        us(added),
        us(health50),
        us(ping50)
    ));

    for callers in [8usize, 32] {
        let authority = host.authority().to_owned();
        let through_hub = rate(callers, WINDOW, |_| {
            let mut session = Session::open(&authority);
            Box::new(move || session.echo())
        });
        let direct = &direct;
        let straight = rate(callers, WINDOW, |_| Box::new(move || direct.request("tools/call", ECHO)));
        line_in(
            &format!(
                "B4 tools/call echo through the hub, {callers} sessions (throughput; baseline = direct stdio, {callers} callers)"
            ),
            through_hub,
            straight,
            "calls/s",
        );
    }
}
