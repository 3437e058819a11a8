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

use super::{Host, header, line, line_in, line_us, ms, note, percentiles, poll, rate, read_head};

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
        Self::open_declaring(authority, path, "{}")
    }

    /// A session with the MCP endpoint at `path` of a client that declared `capabilities`
    /// (a JSON object) at `initialize`.
    fn open_declaring(authority: &str, path: &str, capabilities: &str) -> Self {
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
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{capabilities},"clientInfo":{{"name":"bench","version":"1"}}}}}}"#
        );
        let (status, _, id) = session.post(&init);
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
        self.send_post(body, headers);
        let (status, headers) = read_head(&mut self.stream);
        let length = header(&headers, "content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let session = header(&headers, "mcp-session-id").map(str::to_owned);
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).expect("body");
        (status, body, session)
    }

    /// Writes a `POST` of `body` with more header lines `headers` (each ending in CRLF).
    fn send_post(&mut self, body: &str, headers: &str) {
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

    /// Request `method` with `params` on the session: the whole JSON-RPC answer, and its
    /// size in bytes.
    pub(super) fn request(&mut self, method: &str, params: &Value) -> (Value, usize) {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}).to_string();
        let (status, answer, _) = self.post(&body);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        (serde_json::from_slice(&answer).expect("a JSON answer"), answer.len())
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

/// A JSON-RPC client of one provider over a stream of lines — its pipes, or the relay's
/// socket — that writes a request and reads its answer on the caller's thread.
struct Lines<W, R> {
    to: W,
    from: R,
    next: u64,
    line: String,
}

impl<W: Write, R: BufRead> Lines<W, R> {
    /// The client once the provider is initialized.
    fn open(to: W, from: R) -> Self {
        let mut lines = Self { to, from, next: 1, line: String::new() };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}});
        lines.request("initialize", &init.to_string());
        lines.to.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").expect("write");
        lines
    }

    /// One echo call.
    fn call(&mut self) {
        self.request("tools/call", ECHO);
    }

    fn request(&mut self, method: &str, params: &str) {
        let id = self.next;
        self.next += 1;
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params}}}\n");
        self.to.write_all(line.as_bytes()).expect("write");
        loop {
            self.line.clear();
            assert!(self.from.read_line(&mut self.line).expect("read") > 0, "the provider's stream closed");
            let Ok(message) = serde_json::from_str::<Value>(&self.line) else { continue };
            if message["id"].as_u64() == Some(id) {
                return;
            }
        }
    }
}

/// The provider spoken to directly by one caller that writes a request and reads its
/// answer on the same thread: the fastest direct path, the baseline for latency.
pub(super) struct Lone {
    child: Child,
    lines: Lines<ChildStdin, BufReader<ChildStdout>>,
}

impl Lone {
    pub(super) fn start(argv: &[String]) -> Self {
        let (child, stdin, stdout) = spawn_provider(argv);
        Self { child, lines: Lines::open(stdin, BufReader::new(stdout)) }
    }

    /// One echo call.
    pub(super) fn call(&mut self) {
        self.lines.call();
    }
}

impl Drop for Lone {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The floor of one extra hop: a minimal relay — one thread, blocking I/O — that accepts
/// one TCP connection and, for each line its client sends, writes the line to its own
/// process of the provider and, for a request, writes the provider's lines back to the
/// socket up to the answer. What it adds to direct stdio is what any hop must cost here
/// (wake-ups, idle gaps, four more syscalls); the hub is measured against it (issue: the
/// hub's added p50 at most 1.25x the relay's).
pub(super) struct Relay {
    child: Child,
    lines: Lines<TcpStream, BufReader<TcpStream>>,
    inside: AnswerTimes,
}

/// A relay's provider's answers as the relay timed them: for each request, from its write to
/// the provider's pipe to the answer read back — what the hub reports as its provider's p50
/// (`GET /mcp/status`), taken the same way.
#[derive(Clone, Default)]
struct AnswerTimes(Arc<Mutex<Vec<Duration>>>);

impl AnswerTimes {
    fn push(&self, took: Duration) {
        self.0.lock().expect("lock").push(took);
    }

    fn p50(&self) -> Duration {
        percentiles(self.0.lock().expect("lock").clone()).0
    }
}

impl Relay {
    pub(super) fn start(argv: &[String]) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let address = listener.local_addr().expect("the relay's address");
        let (child, stdin, stdout) = spawn_provider(argv);
        let inside = AnswerTimes::default();
        let timed = inside.clone();
        std::thread::spawn(move || relay(&listener, stdin, stdout, &timed));
        Self { child, lines: relay_client(address), inside }
    }

    /// One echo call through the relay.
    pub(super) fn call(&mut self) {
        self.lines.call();
    }

    /// The p50 of the provider's answers as the relay timed them.
    pub(super) fn inside_p50(&self) -> Duration {
        self.inside.p50()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client of the relay listening at `address`, once the provider behind it is initialized.
fn relay_client(address: std::net::SocketAddr) -> Lines<TcpStream, BufReader<TcpStream>> {
    let stream = TcpStream::connect(address).expect("connect to the relay");
    stream.set_nodelay(true).expect("nodelay");
    let reading = BufReader::new(stream.try_clone().expect("the relay's socket"));
    Lines::open(stream, reading)
}

/// Whether a line the relays' client sends is a request, which the provider answers (a
/// notification is not): the client's requests start with their id.
fn is_request(line: &[u8]) -> bool {
    line.starts_with(br#"{"jsonrpc":"2.0","id""#)
}

/// Whether a line of the provider's is the answer the relays wait for: its own requests and
/// notifications, which pass on before it, have a `method`.
fn is_answer(line: &[u8]) -> bool {
    !line.windows(8).any(|w| w == br#""method""#)
}

/// The relay's one thread: until its client or the provider closes.
fn relay(listener: &std::net::TcpListener, mut stdin: ChildStdin, stdout: ChildStdout, inside: &AnswerTimes) {
    let Ok((socket, _)) = listener.accept() else { return };
    let _ = socket.set_nodelay(true);
    let Ok(reading) = socket.try_clone() else { return };
    let (mut from_client, mut to_client) = (BufReader::new(reading), socket);
    let mut from_child = BufReader::new(stdout);
    let (mut request, mut answer) = (Vec::new(), Vec::new());
    loop {
        request.clear();
        if !matches!(from_client.read_until(b'\n', &mut request), Ok(n) if n > 0) {
            return;
        }
        let written = Instant::now();
        if stdin.write_all(&request).is_err() {
            return;
        }
        if !is_request(&request) {
            continue;
        }
        loop {
            answer.clear();
            if !matches!(from_child.read_until(b'\n', &mut answer), Ok(n) if n > 0) {
                return;
            }
            // Timed on reading, as the hub times its provider: the socket write that follows
            // (and the client's wake-up inside it) is the hop's, not the provider's.
            let answered = is_answer(&answer);
            if answered {
                inside.push(written.elapsed());
            }
            if to_client.write_all(&answer).is_err() {
                return;
            }
            if answered {
                break;
            }
        }
    }
}

/// The floor of one extra hop for an event loop: the same relay as [`Relay`], written as the
/// hub is — one current-thread tokio runtime, the socket and the provider's pipes
/// registered with its epoll, each wait a task parked until its descriptor is ready — and
/// nothing else. What it adds beyond [`Relay`] is what waiting in `epoll_wait` instead of a
/// blocking `read` costs here; what the hub adds beyond it is the hub's own work.
pub(super) struct LoopRelay {
    lines: Lines<TcpStream, BufReader<TcpStream>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The relay's thread, as `/proc/<pid>/task/<tid>`.
    thread: PathBuf,
    inside: AnswerTimes,
}

impl LoopRelay {
    pub(super) fn start(argv: &[String]) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let address = listener.local_addr().expect("the relay's address");
        listener.set_nonblocking(true).expect("nonblocking");
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let argv = argv.to_vec();
        let (tell, thread) = mpsc::channel();
        let inside = AnswerTimes::default();
        let timed = inside.clone();
        std::thread::spawn(move || {
            let _ = tell.send(std::fs::read_link("/proc/thread-self").map(|t| Path::new("/proc").join(t)));
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                tokio::select! {
                    () = loop_relay(listener, &argv, &timed) => {}
                    _ = stopped => {}
                }
            });
        });
        let thread = thread.recv().expect("the relay's thread").expect("/proc/thread-self");
        Self { lines: relay_client(address), stop: Some(stop), thread, inside }
    }

    /// One echo call through the relay.
    pub(super) fn call(&mut self) {
        self.lines.call();
    }

    /// The p50 of the provider's answers as the relay timed them.
    pub(super) fn inside_p50(&self) -> Duration {
        self.inside.p50()
    }
}

/// The CPU time `thread` (a `/proc/<pid>/task/<tid>` directory) has used so far, from its
/// `schedstat` (nanoseconds, unlike `stat`'s clock ticks).
fn cpu_time(thread: &Path) -> Duration {
    let stat = std::fs::read_to_string(thread.join("schedstat")).expect("schedstat");
    Duration::from_nanos(stat.split_whitespace().next().and_then(|n| n.parse().ok()).expect("schedstat's CPU time"))
}

/// The CPU time `thread` spends per call over `runs` calls of `call`.
fn cpu_per_call(thread: &Path, runs: u32, mut call: impl FnMut()) -> Duration {
    let before = cpu_time(thread);
    for _ in 0..runs {
        call();
    }
    cpu_time(thread).saturating_sub(before) / runs
}

/// The host's thread named `name`, as `/proc/<pid>/task/<tid>`.
fn host_thread(pid: u32, name: &str) -> PathBuf {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the host's threads")
        .filter_map(Result::ok)
        .map(|task| task.path())
        .find(|task| std::fs::read_to_string(task.join("comm")).is_ok_and(|comm| comm.trim() == name))
        .unwrap_or_else(|| panic!("the host has no thread {name}"))
}

impl Drop for LoopRelay {
    fn drop(&mut self) {
        // The runtime's end drops the child, which is killed then (`kill_on_drop`).
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// [`LoopRelay`]'s task: as [`relay`], until its client or the provider closes.
async fn loop_relay(listener: std::net::TcpListener, argv: &[String], inside: &AnswerTimes) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    let mut child = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the provider");
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else { return };
    let Ok((socket, _)) = listener.accept().await else { return };
    let _ = socket.set_nodelay(true);
    let (reading, mut to_client) = socket.into_split();
    let (mut from_client, mut from_child) = (tokio::io::BufReader::new(reading), tokio::io::BufReader::new(stdout));
    let (mut request, mut answer) = (Vec::new(), Vec::new());
    loop {
        request.clear();
        if !matches!(from_client.read_until(b'\n', &mut request).await, Ok(n) if n > 0) {
            return;
        }
        let written = Instant::now();
        if stdin.write_all(&request).await.is_err() {
            return;
        }
        if !is_request(&request) {
            continue;
        }
        loop {
            answer.clear();
            if !matches!(from_child.read_until(b'\n', &mut answer).await, Ok(n) if n > 0) {
                return;
            }
            let answered = is_answer(&answer);
            if answered {
                inside.push(written.elapsed());
            }
            if to_client.write_all(&answer).await.is_err() {
                return;
            }
            if answered {
                break;
            }
        }
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
    hub_with("everything", "Everything", argv)
}

/// The host on a new instance whose one extension is the provider `argv` as an `mcp`
/// block, under the id (and namespace) `id`.
fn hub_with(id: &str, name: &str, argv: &[String]) -> (Host, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    let ext = root.join("tools").join(id);
    std::fs::create_dir_all(&ext).expect("mkdir");
    std::fs::write(root.join("butler.json"), "{}").expect("root");
    let mcp = json!({"transport": "stdio", "command": argv});
    let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": name, "mcp": mcp});
    std::fs::write(ext.join("butler.json"), manifest.to_string()).expect("manifest");
    (Host::start_quiet(&root), dir)
}

/// Samples of `N` kinds of call measured in turns of [`TURN`] calls of one kind, round
/// after round, so that what a system does after answering (a Node GC, a flush) lands in
/// its own turn rather than in the next system's timing; the first `warmup` calls of each
/// kind are not kept. Each round starts one kind later than the one before, so every kind
/// follows every other equally often: in a fixed order, a kind that follows a turn on its
/// own provider (the hub's second client) would never pay for another process's
/// after-work, and the kinds that follow another provider's turn always would.
pub(super) fn in_turns<const N: usize>(runs: usize, warmup: usize, mut call: impl FnMut(usize)) -> [Vec<Duration>; N] {
    const TURN: usize = 50;
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(runs));
    let mut done = 0;
    let mut round = 0;
    while done < runs + warmup {
        let turn = TURN.min(runs + warmup - done);
        for step in 0..N {
            let kind = (step + round) % N;
            let kept = &mut samples[kind];
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
        round += 1;
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
    let mut relay = Relay::start(&argv);
    let mut loop_relay = LoopRelay::start(&argv);

    // In turns: direct stdio, the two minimal relays, the hub (a 2025-11-25 session and a
    // 2026-07-28 client), and the two floors on the session's connection — `GET /health`
    // (HTTP alone) and an MCP `ping` (HTTP, session, JSON-RPC).
    let mut session = Session::open(host.authority());
    let mut stateless = Session::stateless(host.authority());
    let samples = in_turns::<7>(RUNS, 200, |kind| match kind {
        0 => lone.call(),
        1 => relay.call(),
        2 => loop_relay.call(),
        3 => session.echo(),
        4 => stateless.echo(),
        5 => session.health(),
        _ => session.ping(),
    });
    let [
        (base50, base99),
        (relay50, _),
        (loop50, _),
        (hub50, hub99),
        (stateless50, stateless99),
        (health50, _),
        (ping50, _),
    ] = samples.map(percentiles);
    line_us("B4 tools/call echo through the hub, 1 session (p50; baseline = direct stdio)", hub50, base50);
    line_us("B4 tools/call echo through the hub, 1 session (p99; baseline = direct stdio)", hub99, base99);
    line_us("B4 tools/call echo through the hub, 2026-07-28 (p50; baseline = direct stdio)", stateless50, base50);
    line_us("B4 tools/call echo through the hub, 2026-07-28 (p99; baseline = direct stdio)", stateless99, base99);
    line_us("B4 tools/call echo through a minimal blocking relay (p50; baseline = direct stdio)", relay50, base50);
    line_us("B4 tools/call echo through a minimal event-loop relay (p50; baseline = direct stdio)", loop50, base50);
    let added = |p50: Duration| p50.saturating_sub(base50);
    let (hub_added, stateless_added, relay_added, loop_added) =
        (added(hub50), added(stateless50), added(relay50), added(loop50));
    let floor = "baseline = the minimal blocking relay's added p50, same run";
    line_us(&format!("B4 added p50, 1 session ({floor})"), hub_added, relay_added);
    line_us(&format!("B4 added p50, 2026-07-28 ({floor})"), stateless_added, relay_added);
    line_us(&format!("B4 added p50, the minimal event-loop relay ({floor})"), loop_added, relay_added);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    // The hub's own record of the provider's answers (from its write to the pipe to the
    // answer read back), over the same calls.
    let status = session.get("/myspace-butler/api/mcp/status");
    let inside = status["providers"][0]["p50Ms"].as_f64().unwrap_or(f64::NAN) * 1e3;
    note(&format!(
        "B4: direct stdio p50 {:.0} µs; added p50: the hub {:.0} µs (session), {:.0} µs (2026-07-28), the relay {:.0} µs \
         (target: the hub at most 1.25x the relay), the event-loop relay {:.0} µs. Same run: GET /health {:.0} µs, \
         MCP ping {:.0} µs; inside the hub the provider answered in {inside:.0} µs (p50)",
        us(base50),
        us(hub_added),
        us(stateless_added),
        us(relay_added),
        us(loop_added),
        us(health50),
        us(ping50)
    ));
    // Each system has its own process of the provider, and two processes of one Node server
    // can differ by tens of microseconds a call, which "added" counts as the hop's. Less the
    // provider's answer as each hop timed it (from its write to the pipe to the answer read
    // back), what is left is the hop's own time.
    let hop = |p50: Duration, inside: Duration| p50.saturating_sub(inside);
    let relay_hop = hop(relay50, relay.inside_p50());
    let own_hop = "less the provider's answer p50 inside the hop; baseline = the same for the minimal blocking relay";
    line_us(
        &format!("B4 the hop alone, the minimal event-loop relay ({own_hop})"),
        hop(loop50, loop_relay.inside_p50()),
        relay_hop,
    );
    if inside.is_finite() && inside >= 0.0 {
        let hub_inside = Duration::from_secs_f64(inside / 1e6);
        line_us(&format!("B4 the hop alone, 1 session ({own_hop})"), hop(hub50, hub_inside), relay_hop);
        line_us(&format!("B4 the hop alone, 2026-07-28 ({own_hop})"), hop(stateless50, hub_inside), relay_hop);
        note(&format!(
            "B4: the provider's answer p50 inside each hop: the hub {inside:.0} µs, the blocking relay {:.0} µs, the event-loop relay {:.0} µs",
            us(relay.inside_p50()),
            us(loop_relay.inside_p50())
        ));
    } else {
        note("B4: the hop alone is not printed: the hub's status gave no p50 of its provider's answers");
    }

    // The same calls' CPU on the thread that relays them: the hub's, against the
    // event-loop relay's (the same runtime, doing nothing but relaying). Not timing: the
    // kernel's count of the thread's time on a CPU, so a busy machine moves it far less.
    let hub_thread = host_thread(host.pid(), "butler-hub");
    let runs = u32::try_from(RUNS).unwrap_or(u32::MAX);
    let relay_thread = loop_relay.thread.clone();
    let relay_cpu = cpu_per_call(&relay_thread, runs, || loop_relay.call());
    let hub_cpu = cpu_per_call(&hub_thread, runs, || session.echo());
    let stateless_cpu = cpu_per_call(&hub_thread, runs, || stateless.echo());
    let own = "baseline = the minimal event-loop relay's thread, same run";
    line_us(&format!("B4 CPU per call on the relaying thread, the hub, 1 session ({own})"), hub_cpu, relay_cpu);
    line_us(&format!("B4 CPU per call on the relaying thread, the hub, 2026-07-28 ({own})"), stateless_cpu, relay_cpu);

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

/// B15's provider: `tests/providers/sampling_provider.py` (standard library only, one tool
/// `sample` that asks its client one `sampling/createMessage`), run by the interpreter
/// `python3` resolves to — named by its own path, so no shim starts between the host and it.
fn sampling_provider() -> Vec<String> {
    let output =
        Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().expect("run python3");
    assert!(output.status.success(), "python3: {}", String::from_utf8_lossy(&output.stderr));
    let python = String::from_utf8(output.stdout).expect("UTF-8").trim().to_owned();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/providers/sampling_provider.py");
    let script = script.canonicalize().expect("tests/providers/sampling_provider.py");
    vec![python, script.display().to_string()]
}

/// The client's answer to every `sampling/createMessage` of B15 (a `CreateMessageResult`).
const SAMPLED: &str = r#"{"role":"assistant","model":"bench","content":{"type":"text","text":"sampled"}}"#;

/// What the provider's tool answers once it got [`SAMPLED`].
const SAMPLED_TEXT: &str = "LLM response: sampled";

/// The text of a tool result's first content item.
fn first_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// The sampling provider spoken to directly over its stdio by one caller on its own
/// thread, which declared `sampling` at `initialize` and answers the provider's request on
/// the pipe: the baseline of B15.
struct DirectSampler {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
    line: String,
}

impl DirectSampler {
    fn start(argv: &[String]) -> Self {
        let (child, stdin, stdout) = spawn_provider(argv);
        let mut direct = Self { child, stdin, stdout: BufReader::new(stdout), next: 1, line: String::new() };
        let init = json!({"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}},
                          "clientInfo": {"name": "bench", "version": "1"}});
        direct.request("initialize", &init.to_string());
        direct.stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").expect("write");
        direct
    }

    /// One sampling round trip: the call, the provider's request answered, the result.
    fn sample(&mut self) {
        let result = self.request("tools/call", r#"{"name":"sample","arguments":{"prompt":"hello"}}"#);
        assert_eq!(first_text(&result["result"]), SAMPLED_TEXT, "{result}");
    }

    /// Sends request `method`, answers the provider's `sampling/createMessage` meanwhile;
    /// the answer.
    fn request(&mut self, method: &str, params: &str) -> Value {
        let id = self.next;
        self.next += 1;
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params}}}\n");
        self.stdin.write_all(line.as_bytes()).expect("write");
        loop {
            self.line.clear();
            assert!(self.stdout.read_line(&mut self.line).expect("read") > 0, "the provider closed its stdout");
            let Ok(message) = serde_json::from_str::<Value>(&self.line) else { continue };
            if message["method"] == "sampling/createMessage" {
                let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{SAMPLED}}}\n", message["id"]);
                self.stdin.write_all(answer.as_bytes()).expect("write");
            } else if message["id"].as_u64() == Some(id) {
                return message;
            }
        }
    }
}

impl Drop for DirectSampler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `data` of the SSE events of a chunked response body, decoded as they arrive.
#[derive(Default)]
struct Events {
    /// Body bytes received and not yet taken as an event.
    pending: Vec<u8>,
    /// The last chunk was read.
    ended: bool,
}

impl Events {
    /// The next event's data as JSON; `None` once the body has ended.
    fn next(&mut self, stream: &mut BufReader<TcpStream>) -> Option<Value> {
        loop {
            if let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.pending.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                let data: Vec<&str> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if data.is_empty() {
                    continue; // a comment (keep-alive) or an event without data
                }
                return Some(serde_json::from_str(&data.join("\n")).expect("an event's data is JSON"));
            }
            if self.ended {
                assert!(self.pending.iter().all(u8::is_ascii_whitespace), "a partial event at the end");
                return None;
            }
            let mut line = String::new();
            stream.read_line(&mut line).expect("chunk size");
            let size = line.trim().split(';').next().unwrap_or_default();
            let size = usize::from_str_radix(size, 16).unwrap_or_else(|_| panic!("a chunk size, not {line:?}"));
            if size == 0 {
                // Trailers (none expected) up to the empty line.
                loop {
                    line.clear();
                    stream.read_line(&mut line).expect("trailer");
                    if line.trim_end().is_empty() {
                        break;
                    }
                }
                self.ended = true;
                continue;
            }
            let start = self.pending.len();
            self.pending.resize(start + size, 0);
            stream.read_exact(&mut self.pending[start..]).expect("chunk");
            let mut crlf = [0; 2];
            stream.read_exact(&mut crlf).expect("chunk end");
        }
    }
}

impl Session {
    /// A second connection of the same session (to `POST` on while this one reads a stream).
    fn second_connection(&self) -> Self {
        let stream = TcpStream::connect(&self.authority).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream: BufReader::new(stream),
            authority: self.authority.clone(),
            path: self.path.clone(),
            session: self.session.clone(),
            next: 1,
            stateless: false,
        }
    }

    /// One sampling round trip of a 2025-11-25 session (declared `sampling`): `tools/call` of
    /// `tool` answered as SSE, whose first event is the provider's `sampling/createMessage`
    /// under the hub's id; the answer `POST`ed on `answering` (another connection of the
    /// session: this one is busy with the stream), then the result, the stream's last event.
    fn sample_on_stream(&mut self, answering: &mut Self, tool: &str) {
        self.next += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"prompt":"hello"}}}}}}"#,
            self.next
        );
        self.send_post(&body, "");
        let (status, headers) = read_head(&mut self.stream);
        let sse = header(&headers, "content-type").is_some_and(|t| t.starts_with("text/event-stream"));
        let chunked = header(&headers, "transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
        if !(status == 200 && sse && chunked) {
            let length = header(&headers, "content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            let mut body = vec![0; length];
            self.stream.read_exact(&mut body).expect("body");
            panic!("not an SSE stream ({status}, {headers:?}): {}", String::from_utf8_lossy(&body));
        }
        let mut events = Events::default();
        let mut answered = false;
        loop {
            let message = events.next(&mut self.stream).expect("the call's answer before the stream ends");
            if message["method"] == "sampling/createMessage" {
                let answer = format!(r#"{{"jsonrpc":"2.0","id":{},"result":{SAMPLED}}}"#, message["id"]);
                let (status, refused, _) = answering.post(&answer);
                assert_eq!(status, 202, "{}", String::from_utf8_lossy(&refused));
                answered = true;
            } else if message.get("method").is_none() {
                assert!(answered && first_text(&message["result"]) == SAMPLED_TEXT, "{message}");
                break;
            }
        }
        assert!(events.next(&mut self.stream).is_none(), "the stream ends with the answer");
    }

    /// One sampling round trip of a 2026-07-28 client (`sampling` in its capabilities):
    /// `tools/call` of `tool` answered `input_required` with the provider's request, then
    /// the retry (a new id, the same call, `inputResponses` and the `requestState`) answered
    /// with the result.
    fn sample_in_rounds(&mut self, tool: &str) {
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}"#;
        let headers = format!("MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\n");
        let round = |this: &mut Self, more: &str| {
            this.next += 1;
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"prompt":"hello"}},{meta}{more}}}}}"#,
                this.next
            );
            let (status, answer, _) = this.post_with(&body, &headers);
            let answer: Value = serde_json::from_slice(&answer)
                .unwrap_or_else(|_| panic!("{status}: {}", String::from_utf8_lossy(&answer)));
            assert_eq!(status, 200, "{answer}");
            answer
        };
        let first = round(self, "");
        let asked = &first["result"];
        assert_eq!(asked["resultType"], "input_required", "{first}");
        let (key, request) = asked["inputRequests"].as_object().and_then(|r| r.iter().next()).expect("a request");
        assert_eq!(request["method"], "sampling/createMessage", "{first}");
        let state = asked["requestState"].as_str().expect("a request state");
        let more = format!(r#","inputResponses":{{{}:{SAMPLED}}},"requestState":{}"#, json!(key), json!(state));
        let last = round(self, &more);
        assert!(last["result"]["resultType"] == "complete" && first_text(&last["result"]) == SAMPLED_TEXT, "{last}");
    }
}

/// B15: a sampling round trip (a `tools/call` whose provider asks the client one
/// `sampling/createMessage` before it answers) through the hub, in both eras, against the
/// same round trip with the provider spoken to directly over its stdio.
pub fn b15_sampling() {
    const RUNS: usize = 1000;
    const WARM_UP: usize = 100;
    const TOOL: &str = "sampler__sample";
    let argv = sampling_provider();
    let (host, _dir) = hub_with("sampler", "Sampler", &argv);
    let mut direct = DirectSampler::start(&argv);

    let mut session_2025 = Session::open_declaring(host.authority(), "/myspace-butler/api/mcp", r#"{"sampling":{}}"#);
    let mut answering = session_2025.second_connection();
    // The host starts its providers in the background: until the tool is listed.
    let listed = super::poll(Duration::from_secs(30), Duration::from_millis(20), || {
        session_2025.next += 1;
        let list = format!(r#"{{"jsonrpc":"2.0","id":{},"method":"tools/list"}}"#, session_2025.next);
        let (_, tools, _) = session_2025.post(&list);
        String::from_utf8_lossy(&tools).contains(TOOL).then_some(())
    });
    listed.expect("the sampling provider's tool is listed by the hub");
    let mut stateless = Session::stateless(host.authority());

    // In turns: direct stdio, a 2025-11-25 session (SSE + an answering POST on a second
    // connection), a 2026-07-28 client (input_required + retry), and the HTTP floor of two
    // requests: `GET /health` twice on one connection.
    let samples = in_turns::<4>(RUNS, WARM_UP, |kind| match kind {
        0 => direct.sample(),
        1 => session_2025.sample_on_stream(&mut answering, TOOL),
        2 => stateless.sample_in_rounds(TOOL),
        _ => {
            session_2025.health();
            session_2025.health();
        }
    });
    let [(base50, base99), (sessions50, sessions99), (stateless50, stateless99), (floor50, _)] =
        samples.map(percentiles);
    let label = "B15 sampling round trip through the hub";
    line_us(&format!("{label}, 2025-11-25 session, SSE (p50; baseline = direct stdio)"), sessions50, base50);
    line_us(&format!("{label}, 2025-11-25 session, SSE (p99; baseline = direct stdio)"), sessions99, base99);
    line_us(
        &format!("{label}, 2026-07-28, input_required + retry (p50; baseline = direct stdio)"),
        stateless50,
        base50,
    );
    line_us(
        &format!("{label}, 2026-07-28, input_required + retry (p99; baseline = direct stdio)"),
        stateless99,
        base99,
    );
    let (sessions_added, stateless_added) = (sessions50.saturating_sub(base50), stateless50.saturating_sub(base50));
    let floor = "baseline = two HTTP round trips to the host, GET /health twice";
    line_us(&format!("B15 added p50, 2025-11-25 session ({floor})"), sessions_added, floor50);
    line_us(&format!("B15 added p50, 2026-07-28 ({floor})"), stateless_added, floor50);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    note(&format!(
        "B15: direct stdio p50 {:.0} µs / p99 {:.0} µs; the hub adds {:.0} µs at p50 to a 2025-11-25 session's round \
         trip and {:.0} µs to a 2026-07-28 one's ({:.2}x the session's); two GET /health {:.0} µs",
        us(base50),
        us(base99),
        us(sessions_added),
        us(stateless_added),
        us(stateless_added) / us(sessions_added),
        us(floor50)
    ));
}

/// The providers of B16: `healthy` (the fake provider of the end-to-end tests) and, with
/// `deaf`, one that reads its input and never answers.
fn list_wait_instance(deaf: bool) -> (Host, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::write(root.join("butler.json"), "{}").expect("root");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/providers/fake_mcp.py");
    let script = script.canonicalize().expect("tests/providers/fake_mcp.py");
    let mut providers = vec![("healthy", json!(["python3", script.display().to_string()]))];
    if deaf {
        providers.push(("deaf", json!(["sh", "-c", "exec cat > /dev/null"])));
    }
    for (id, command) in providers {
        let ext = root.join("tools").join(id);
        std::fs::create_dir_all(&ext).expect("mkdir");
        let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id,
                              "mcp": {"transport": "stdio", "command": command}});
        std::fs::write(ext.join("butler.json"), manifest.to_string()).expect("manifest");
    }
    (Host::start_quiet(&root), dir)
}

/// The first `tools/list` of a new session: how long it took, and whether it listed the
/// healthy provider's tools; and how long its `initialize` took (the hub starts the
/// providers for their instructions then, within the same wait).
fn first_list(host: &Host) -> (Duration, bool, Duration) {
    let opening = Instant::now();
    let mut session = Session::open(host.authority());
    let opened = opening.elapsed();
    let start = Instant::now();
    let (status, body, _) = session.post(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    let took = start.elapsed();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    (took, String::from_utf8_lossy(&body).contains("healthy__echo"), opened)
}

/// B16: the first `tools/list` of a fresh client on a fresh host whose providers have
/// never listed, when one of them never answers (the hub answers without it after
/// `butler_mcp::LIST_WAIT`), beside the same with every provider healthy.
pub fn b16_list_wait() {
    const RUNS: usize = 5;
    let (mut stuck, mut healthy, mut later) = (Vec::new(), Vec::new(), Vec::new());
    let (mut opened, mut reopened, mut opened_healthy) = (Vec::new(), Vec::new(), Vec::new());
    // One warm-up of each (the page cache, the Python start), then runs alternating.
    for run in 0..=RUNS {
        let (with_deaf, _dir) = list_wait_instance(true);
        let (took, listed, open) = first_list(&with_deaf);
        assert!(listed, "the healthy provider's tools are in the answer without the deaf one's");
        // A later client of the same host: the healthy provider has listed by then.
        let (again, _, reopen) = first_list(&with_deaf);
        drop(with_deaf);
        let (all_healthy, _dir) = list_wait_instance(false);
        let (base, listed, open_healthy) = first_list(&all_healthy);
        assert!(listed);
        if run > 0 {
            stuck.push(took);
            later.push(again);
            healthy.push(base);
            opened.push(open);
            reopened.push(reopen);
            opened_healthy.push(open_healthy);
        }
    }
    let [(stuck50, _), (healthy50, _), (later50, _)] = [stuck, healthy, later].map(percentiles);
    let [(opened50, _), (reopened50, _), (opened_healthy50, _)] = [opened, reopened, opened_healthy].map(percentiles);
    let max = |d: Duration| d.as_secs_f64() * 1000.0;
    line_in(
        &format!(
            "B16 first tools/list of a fresh client, one provider never answers (p50 of {RUNS}; baseline = every provider healthy)"
        ),
        max(stuck50),
        max(healthy50),
        "ms",
    );
    note(&format!(
        "B16: the bound is LIST_WAIT = {} ms plus the list itself; a second new client of the host with the deaf provider: p50 {:.1} ms",
        butler_mcp::LIST_WAIT.as_millis(),
        max(later50)
    ));
    note(&format!(
        "B16: their initialize (which starts the providers, the same wait): first client p50 {:.0} ms, second {:.1} ms; all healthy {:.0} ms",
        max(opened50),
        max(reopened50),
        max(opened_healthy50)
    ));
}

/// A stateless (2026-07-28) request of `method` (naming `name`, when given, with `params`)
/// to the MCP endpoint at `path`, on a connection of its own: its status and body.
fn stateless_request(authority: &str, path: &str, method: &str, name: Option<&str>, params: &Value) -> (u16, String) {
    let mut params = params.clone();
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let named = name.map(|n| format!("Mcp-Name: {n}\r\n")).unwrap_or_default();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n\
         {named}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(authority).expect("connect");
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned())
}

/// B17: a stdio server that starts in 100 ms, added with `butler mcp add` to a running
/// host, until a call of its tool through the hub answers — beside the same server started
/// directly and called over its pipes (start, handshake, call).
pub fn b17_mcp_add() {
    const RUNS: usize = 7;
    const POLL: Duration = Duration::from_millis(5);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/providers/fake_mcp.py");
    let server = vec!["sh".to_owned(), "-c".to_owned(), format!("sleep 0.1; exec python3 {}", script.display())];
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    std::fs::create_dir_all(root.join("tools")).expect("mkdir");
    std::fs::write(root.join("butler.json"), r#"{"mcp": {"quarantine": false}}"#).expect("root config");
    let host = Host::start_quiet(&root);
    let settings = tempfile::tempdir().expect("settings");
    let echo = json!({"name": "", "arguments": {"text": "hello"}});
    let (mut direct, mut added) = (Vec::new(), Vec::new());
    for run in 0..=RUNS {
        // Directly: start, initialize, call.
        let start = Instant::now();
        let (mut child, stdin, stdout) = spawn_provider(&server);
        let mut lines = Lines::open(stdin, BufReader::new(stdout));
        lines.request("tools/call", r#"{"name":"echo","arguments":{"text":"hello"}}"#);
        let took = start.elapsed();
        let _ = child.kill();
        let _ = child.wait();

        // Through the hub: `butler mcp add`, then calls until one answers.
        let name = format!("b17-{run}");
        let tool = format!("b17_{run}__echo");
        let start = Instant::now();
        let status = butler_test_support::host::butler_command(settings.path())
            .env("BUTLER_WORKDIR", &root)
            .args(["mcp", "add", &name, "--"])
            .args(&server)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("butler mcp add");
        assert!(status.success(), "butler mcp add {name}");
        let mut params = echo.clone();
        params["name"] = json!(tool);
        poll(Duration::from_secs(30), POLL, || {
            let (status, body) =
                stateless_request(host.authority(), "/myspace-butler/api/mcp", "tools/call", Some(&tool), &params);
            (status == 200 && body.contains("hello")).then_some(())
        })
        .unwrap_or_else(|| panic!("{tool} answers through the hub"));
        if run > 0 {
            // The first run warms the page cache and the interpreter; it is not counted.
            direct.push(took);
            added.push(start.elapsed());
        }
    }
    let (direct50, _) = percentiles(direct);
    let (added50, added99) = percentiles(added);
    note(&format!(
        "B17: `butler mcp add` until callable p50 {:.0} ms, p99 {:.0} ms (target ≤ 1500 ms); started directly p50 {:.0} ms",
        ms(added50),
        ms(added99),
        ms(direct50)
    ));
    line(
        &format!(
            "B17 `butler mcp add` of a stdio server starting in 100 ms until callable through the hub (p50 of {RUNS}; baseline = the same server started and called directly)"
        ),
        added50,
        direct50,
    );
}

/// B18: a new profile written into a running host's root config until its endpoint
/// answers a list — beside the root config's poll interval.
pub fn b18_profile_live() {
    const RUNS: usize = 7;
    const POLL: Duration = Duration::from_millis(5);
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    std::fs::create_dir_all(&root).expect("mkdir");
    let config = root.join("butler.json");
    std::fs::write(&config, r#"{"mcp": {"profiles": {}}}"#).expect("root config");
    let host = Host::start_quiet(&root);
    let mut answered = Vec::new();
    let mut profiles = serde_json::Map::new();
    for run in 0..=RUNS {
        let name = format!("b18-{run}");
        profiles.insert(name.clone(), json!({"providers": []}));
        let path = format!("/myspace-butler/api/mcp/p/{name}");
        std::thread::sleep(Duration::from_millis(700));
        let start = Instant::now();
        let text = json!({"mcp": {"profiles": profiles}}).to_string();
        let written = root.join(".butler.json.b18");
        std::fs::write(&written, text).expect("write");
        std::fs::rename(&written, &config).expect("replace");
        poll(Duration::from_secs(10), POLL, || {
            (stateless_request(host.authority(), &path, "tools/list", None, &json!({})).0 == 200).then_some(())
        })
        .unwrap_or_else(|| panic!("profile {name} answers"));
        if run > 0 {
            answered.push(start.elapsed());
        }
    }
    let (answered50, answered99) = percentiles(answered);
    note(&format!(
        "B18: a root-config edit until the new profile answers p50 {:.0} ms, p99 {:.0} ms (target ≤ 2000 ms)",
        ms(answered50),
        ms(answered99)
    ));
    line(
        &format!(
            "B18 root-config edit until a new profile answers (p50 of {RUNS}; baseline = the root config's poll interval)"
        ),
        answered50,
        butler_host::instance::live::POLL,
    );
}
