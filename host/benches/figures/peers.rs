//! B5: the B4 workload through peer aggregators installed from registries — npm `mcp-hub`
//! (the older HTTP+SSE transport) and PyPI `mcp-proxy` (Streamable HTTP) — beside the hub
//! and on the same stdio provider, in one run: added p50 at 1 session, throughput at 32
//! sessions, and the RSS of each whole process tree (aggregator + provider). The hub is set
//! against the best peer for each figure.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use super::mcp::{Lone, Session, everything, hub_with_everything, in_turns, tools};
use super::{line_in, line_us, mib, note, percentiles, poll, rate, read_head, status_kib};

/// `mcp-proxy` serving the provider on a free port; killed when dropped.
struct Proxy {
    child: Child,
    authority: String,
}

impl Proxy {
    fn start(tools: &Path, argv: &[String]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let child = Command::new(tools.join("peers-venv/bin/mcp-proxy"))
            .args(["--port", &port.to_string(), "--host", "127.0.0.1"])
            .args(argv)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mcp-proxy");
        let authority = format!("127.0.0.1:{port}");
        poll(Duration::from_secs(60), Duration::from_millis(50), || std::net::TcpStream::connect(&authority).ok())
            .expect("mcp-proxy listens");
        Self { child, authority }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// VmRSS of `pid` and all its descendants, KiB: (whole tree, the provider processes in it).
fn tree_rss(pid: u32) -> (u64, u64) {
    let Some(root) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return (0, 0) };
    let (mut total, mut provider) = (status_kib(pid, "VmRSS"), 0);
    for child in butler_process::tree::descendants(root) {
        let raw = u32::try_from(child.as_raw_nonzero().get()).unwrap_or(0);
        if std::fs::metadata(format!("/proc/{raw}/status")).is_ok() {
            let rss = status_kib(raw, "VmRSS");
            total += rss;
            let cmdline = std::fs::read(format!("/proc/{raw}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains("server-everything")
                && !String::from_utf8_lossy(&cmdline).contains("keep")
            {
                provider += rss;
            }
        }
    }
    (total, provider)
}

/// B5: hub and `mcp-proxy` side by side on the same provider and client.
pub fn b5_peers() {
    const RUNS: usize = 1000;
    const WINDOW: Duration = Duration::from_secs(3);
    const SESSIONS: usize = 32;
    let tools = tools();
    let status = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-mcp-test-tools"))
        .arg("--peers")
        .stdout(Stdio::null())
        .status()
        .expect("install the peers");
    assert!(status.success(), "scripts/install-mcp-test-tools --peers failed");
    let argv = everything(&tools);

    let (host, _dir) = hub_with_everything(&argv);
    let proxy = Proxy::start(&tools, &argv);
    let peer_hub = Hub::start(&tools, &argv);
    let mut direct = Lone::start(&argv);

    // Added p50 at one session, the four measured in turns.
    let mut hub = Session::open_at(host.authority(), "/myspace-butler/api/mcp");
    let mut by_proxy = Session::open_at(&proxy.authority, "/mcp");
    let mut by_hub = LegacySession::open(&peer_hub.authority);
    let samples = in_turns::<4>(RUNS, 100, |kind| match kind {
        0 => direct.call(),
        1 => hub.call("everything__echo"),
        2 => by_proxy.call("echo"),
        _ => by_hub.call("everything__echo"),
    });
    let [base, ours, proxy_t, hub_t] = samples.map(|s| percentiles(s).0);
    let added = |d: Duration| d.saturating_sub(base);
    let best_added = added(proxy_t).min(added(hub_t));
    line_us("B5 added p50, 1 session: the hub (baseline = the best peer's added p50)", added(ours), best_added);
    note(&format!(
        "B5: added p50 — mcp-hub {:.0} µs, mcp-proxy {:.0} µs, the hub {:.0} µs (direct stdio p50 {:.0} µs)",
        added(hub_t).as_secs_f64() * 1e6,
        added(proxy_t).as_secs_f64() * 1e6,
        added(ours).as_secs_f64() * 1e6,
        base.as_secs_f64() * 1e6
    ));

    // Throughput at 32 sessions, and each tree's RSS right after its run.
    let (ours_at, proxy_at, hub_at) =
        (host.authority().to_owned(), proxy.authority.clone(), peer_hub.authority.clone());
    let ours_rate = rate(SESSIONS, WINDOW, |_| {
        let mut s = Session::open_at(&ours_at, "/myspace-butler/api/mcp");
        Box::new(move || s.call("everything__echo"))
    });
    let ours_rss = tree_rss(host.pid());
    let proxy_rate = rate(SESSIONS, WINDOW, |_| {
        let mut s = Session::open_at(&proxy_at, "/mcp");
        Box::new(move || s.call("echo"))
    });
    let proxy_rss = tree_rss(proxy.child.id());
    let hub_rate = rate(SESSIONS, WINDOW, |_| {
        let mut s = LegacySession::open(&hub_at);
        Box::new(move || s.call("everything__echo"))
    });
    let hub_rss = tree_rss(peer_hub.child.id());
    line_in(
        &format!("B5 throughput, {SESSIONS} sessions: the hub (baseline = the best peer)"),
        ours_rate,
        proxy_rate.max(hub_rate),
        "calls/s",
    );
    line_in(
        "B5 process-tree RSS after its 32-session run: the hub (baseline = the best peer)",
        mib(ours_rss.0),
        mib(proxy_rss.0.min(hub_rss.0)),
        "MiB",
    );
    note(&format!(
        "B5: at {SESSIONS} sessions — mcp-hub {hub_rate:.0} calls/s, tree {:.1} MiB; mcp-proxy {proxy_rate:.0} calls/s, tree {:.1} MiB; the hub {ours_rate:.0} calls/s, tree {:.1} MiB",
        mib(hub_rss.0),
        mib(proxy_rss.0),
        mib(ours_rss.0)
    ));
    note(&format!(
        "B5: without the provider (the same node server-everything in each tree: {:.1} / {:.1} / {:.1} MiB) — mcp-hub {:.1} MiB, mcp-proxy {:.1} MiB, the hub (host and keeper) {:.1} MiB",
        mib(hub_rss.1),
        mib(proxy_rss.1),
        mib(ours_rss.1),
        mib(hub_rss.0 - hub_rss.1),
        mib(proxy_rss.0 - proxy_rss.1),
        mib(ours_rss.0 - ours_rss.1)
    ));
}

/// A client of the older HTTP+SSE transport (what npm `mcp-hub` serves): `GET /mcp` opens
/// the event stream, whose first event names the URL to `POST` messages to; answers come
/// back on the stream.
struct LegacySession {
    events: Chunked,
    post: BufReader<TcpStream>,
    authority: String,
    endpoint: String,
    next: u64,
}

/// A chunked HTTP body read as server-sent events.
struct Chunked {
    stream: BufReader<TcpStream>,
    buf: Vec<u8>,
}

impl Chunked {
    fn fill(&mut self) {
        let mut size = String::new();
        self.stream.read_line(&mut size).expect("chunk size");
        let size = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
        assert!(size > 0, "the event stream ended");
        let mut chunk = vec![0; size + 2];
        self.stream.read_exact(&mut chunk).expect("chunk");
        self.buf.extend_from_slice(&chunk[..size]);
    }

    /// The next event's `data`.
    fn data(&mut self) -> String {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = self.buf.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&event);
                return text.lines().filter_map(|l| l.strip_prefix("data: ")).collect::<Vec<_>>().join("\n");
            }
            self.fill();
        }
    }
}

impl LegacySession {
    fn open(authority: &str) -> Self {
        let mut sse = TcpStream::connect(authority).expect("connect");
        sse.set_nodelay(true).expect("nodelay");
        write!(sse, "GET /mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\n\r\n").expect("send");
        let mut stream = BufReader::new(sse);
        assert_eq!(read_head(&mut stream).0, 200);
        let mut events = Chunked { stream, buf: Vec::new() };
        let endpoint = events.data();
        let post = TcpStream::connect(authority).expect("connect");
        post.set_nodelay(true).expect("nodelay");
        let mut session =
            Self { events, post: BufReader::new(post), authority: authority.to_owned(), endpoint, next: 0 };
        session.request(r#""method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#);
        session.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        session
    }

    /// POSTs one message; the answer (202) carries nothing.
    fn send(&mut self, body: &str) {
        write!(
            self.post.get_mut(),
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.endpoint,
            self.authority,
            body.len()
        )
        .expect("send");
        assert_eq!(read_head(&mut self.post).0, 202);
        // The chunked `Accepted` body, up to its last chunk.
        loop {
            let mut size = String::new();
            self.post.read_line(&mut size).expect("chunk size");
            let size = usize::from_str_radix(size.trim(), 16).expect("hex");
            let mut chunk = vec![0; size + 2];
            self.post.read_exact(&mut chunk).expect("chunk");
            if size == 0 {
                break;
            }
        }
    }

    /// Sends a request (`fields` after `jsonrpc` and `id`) and waits for its answer.
    fn request(&mut self, fields: &str) -> String {
        self.next += 1;
        let id = self.next;
        self.send(&format!(r#"{{"jsonrpc":"2.0","id":{id},{fields}}}"#));
        loop {
            let data = self.events.data();
            let answer: serde_json::Value = serde_json::from_str(&data).unwrap_or_default();
            if answer["id"] == id {
                return data;
            }
        }
    }

    fn call(&mut self, tool: &str) {
        let answer = self.request(&format!(
            r#""method":"tools/call","params":{{"name":"{tool}","arguments":{{"message":"hello"}}}}"#
        ));
        assert!(answer.contains("hello"), "{answer}");
    }
}

/// `mcp-hub` serving the provider on a free port; killed when dropped.
struct Hub {
    child: Child,
    authority: String,
    _config: tempfile::TempDir,
}

impl Hub {
    fn start(tools: &Path, argv: &[String]) -> Self {
        let config = tempfile::tempdir().expect("temp");
        let servers = json!({"mcpServers": {"everything": {"command": argv[0], "args": argv[1..]}}});
        let file = config.path().join("servers.json");
        std::fs::write(&file, servers.to_string()).expect("config");
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let child = Command::new(tools.join("peers-js/node_modules/.bin/mcp-hub"))
            .args(["--port", &port.to_string(), "--config"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mcp-hub");
        let authority = format!("127.0.0.1:{port}");
        // Listening is not enough: its servers start after; wait until a session can call
        // (attempts that fail too early panic inside the client: keep those quiet).
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let ready = poll(Duration::from_secs(60), Duration::from_millis(200), || {
            std::net::TcpStream::connect(&authority).ok()?;
            std::panic::catch_unwind(|| LegacySession::open(&authority).call("everything__echo")).ok()
        });
        std::panic::set_hook(hook);
        ready.expect("mcp-hub serves the provider");
        Self { child, authority, _config: config }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
