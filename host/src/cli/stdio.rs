//! `butler mcp stdio`: the running host's MCP hub as a stdio MCP server, for clients that
//! start their servers as processes. Each JSON-RPC line read from stdin is POSTed to the
//! hub's `/mcp` over the host's local socket (TCP when there is none) with the owner
//! token; each answer — a JSON body or the events of an SSE stream — is written to stdout
//! as one line. The hub's notifications (list changes) come from a `GET /mcp` stream and
//! are written the same way.
//!
//! The bridge outlives the host: it finds the host again for every message, so a host
//! that restarts (a new session, perhaps a new port) is met by a fresh `initialize` —
//! replayed from the client's own — before the message is sent again. While no host runs,
//! requests are answered with a JSON-RPC error saying so.
//!
//! A client of revision 2026-07-28 needs no session: each request's `_meta` names the
//! revision, and the bridge adds the headers that revision asks of HTTP clients
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`). Over HTTP that revision cancels a
//! request by closing its connection: the client's `notifications/cancelled` for one in
//! flight closes it.
//!
//! Bounds: a line of at most [`MAX_LINE`] bytes, at most [`IN_FLIGHT`] requests at once
//! (stdin is not read further until one ends), every answer within [`ANSWER_TIMEOUT`].

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use anyhow::Context;
use butler_host::instance::{HostFile, Instance, owner};
use butler_mcp::methods;
use serde_json::{Value, json};

use super::settings::{self, Settings};

/// Largest message read from stdin.
pub const MAX_LINE: usize = 16 << 20;
/// Requests forwarded at once, at most.
pub const IN_FLIGHT: usize = 16;
/// How long one answer may take (a tool call's own deadline is shorter).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the notification stream may stay silent before it is opened again (the hub
/// sends keep-alive comments more often than this).
const LISTEN_IDLE: Duration = Duration::from_secs(60);

/// Runs the bridge until stdin ends.
pub fn run(workdir: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let workdir = settings::workdir(workdir, &Settings::load()?)?;
    let instance = Instance::open(&workdir)?;
    let bridge = Arc::new(Bridge {
        state_dir: instance.state_dir(),
        instance: instance.root.display().to_string(),
        session: Mutex::new(None),
        initialize: Mutex::new(None),
        out: Mutex::new(std::io::stdout()),
        closed: AtomicBool::new(false),
        stateless: Mutex::new(HashMap::new()),
        cancelled: Mutex::new(std::collections::HashSet::new()),
    });
    let (slot_back, slots) = mpsc::sync_channel::<()>(IN_FLIGHT);
    for _ in 0..IN_FLIGHT {
        let _ = slot_back.send(());
    }
    let mut stdin = BufReader::new(std::io::stdin().lock());
    let mut listening = false;
    while let Some(line) = read_line(&mut stdin)? {
        if bridge.closed.load(Ordering::Relaxed) {
            break;
        }
        let message: Value = match line {
            Line::TooLong => {
                bridge.write(&rpc_error(
                    &Value::Null,
                    -32600,
                    format!("the message is larger than {} MiB", MAX_LINE >> 20),
                ));
                continue;
            }
            Line::Text(text) if text.trim().is_empty() => continue,
            Line::Text(text) => match serde_json::from_str(&text) {
                Ok(message) => message,
                Err(e) => {
                    bridge.write(&rpc_error(&Value::Null, -32700, format!("Parse error: {e}")));
                    continue;
                }
            },
        };
        if message["method"] == methods::INITIALIZE {
            // Everything after it needs its session: answer it before reading on.
            *lock(&bridge.initialize) = Some(message.clone());
            bridge.forward(&message);
            if !listening {
                listening = true;
                let listener = Arc::clone(&bridge);
                std::thread::spawn(move || listener.listen());
            }
            continue;
        }
        if message["method"] == methods::CANCELLED && bridge.cancel(&message["params"]["requestId"]) {
            continue;
        }
        let _ = slots.recv();
        let worker = Arc::clone(&bridge);
        let slot_back = slot_back.clone();
        std::thread::spawn(move || {
            worker.forward(&message);
            let _ = slot_back.send(());
        });
    }
    // Wait for the requests still in flight, then end the session.
    for _ in 0..IN_FLIGHT {
        if slots.recv_timeout(ANSWER_TIMEOUT).is_err() {
            break;
        }
    }
    if let Some(session) = lock(&bridge.session).take() {
        let _ = bridge.exchange("DELETE", Some(&session), None, &mut |_| {});
    }
    Ok(ExitCode::SUCCESS)
}

enum Line {
    Text(String),
    TooLong,
}

/// One line of stdin, at most [`MAX_LINE`] bytes (a longer one is skipped to its end).
fn read_line(input: &mut impl BufRead) -> anyhow::Result<Option<Line>> {
    let mut bytes = Vec::new();
    let read = input.by_ref().take(MAX_LINE as u64 + 1).read_until(b'\n', &mut bytes).context("cannot read stdin")?;
    if read == 0 {
        return Ok(None);
    }
    if bytes.len() > MAX_LINE && bytes.last() != Some(&b'\n') {
        let mut rest = Vec::new();
        loop {
            rest.clear();
            let n = input.by_ref().take(1 << 20).read_until(b'\n', &mut rest)?;
            if n == 0 || rest.last() == Some(&b'\n') {
                break;
            }
        }
        return Ok(Some(Line::TooLong));
    }
    Ok(Some(Line::Text(String::from_utf8_lossy(&bytes).into_owned())))
}

struct Bridge {
    state_dir: PathBuf,
    instance: String,
    /// The hub's session, once `initialize` has been answered.
    session: Mutex<Option<String>>,
    /// The client's `initialize`, replayed when the host has restarted.
    initialize: Mutex<Option<Value>>,
    out: Mutex<std::io::Stdout>,
    /// Set when stdout is gone: nobody reads any more.
    closed: AtomicBool,
    /// The connections of the 2026-07-28 requests in flight, by request id.
    stateless: Mutex<HashMap<String, Stream>>,
    /// Those the client cancelled: their end is not answered.
    cancelled: Mutex<std::collections::HashSet<String>>,
}

/// What an exchange with the host ended with.
enum Outcome {
    /// Status, the session id the host named, and the body (empty after an SSE stream).
    Answered { status: u16, session: Option<String>, body: Vec<u8> },
    /// No host could be reached.
    Unreachable(String),
}

/// Why no host could be reached.
#[derive(Debug, thiserror::Error)]
enum NoHost {
    /// The owner token could not be read.
    #[error("cannot read the owner token: {0}")]
    Token(std::io::Error),
    /// No host runs for the instance (named here).
    #[error("no Butler host is running for the instance {0} (start it with `butler serve`)")]
    NotRunning(String),
}

impl Bridge {
    fn write(&self, message: &Value) {
        self.write_raw(message.to_string().as_bytes());
    }

    fn write_raw(&self, line: &[u8]) {
        let mut out = lock(&self.out);
        let written = out.write_all(line).and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush());
        if written.is_err() {
            self.closed.store(true, Ordering::Relaxed);
        }
    }

    /// Sends one client message and writes what the hub answers.
    fn forward(&self, message: &Value) {
        let id = message.get("id").cloned();
        for attempt in 0..2 {
            let session = lock(&self.session).clone();
            let body = message.to_string();
            let mut streamed = false;
            let headers = stateless_headers(message);
            // A 2026-07-28 request's connection can be closed to cancel it.
            let cancellable = id.as_ref().filter(|_| !headers.is_empty()).map(Value::to_string);
            let outcome = self.exchange_with(
                ("POST", session.as_deref(), Some(&body)),
                (&headers, cancellable.as_deref()),
                &mut |event| {
                    streamed = true;
                    self.write_raw(event);
                },
            );
            if cancellable.as_ref().is_some_and(|id| lock(&self.cancelled).remove(id)) {
                return; // the client asked for no answer
            }
            match outcome {
                Outcome::Answered { status: 404, .. } if attempt == 0 && session.is_some() && !streamed => {
                    // The host restarted and forgot the session: open a new one, send again.
                    if !self.reinitialize() {
                        break;
                    }
                }
                Outcome::Answered { status, session: named, body } => {
                    if message["method"] == methods::INITIALIZE
                        && let Some(named) = named
                    {
                        *lock(&self.session) = Some(named);
                    }
                    if !body.is_empty() {
                        match serde_json::from_slice::<Value>(&body) {
                            Ok(answer) => self.write(&answer),
                            Err(_) => {
                                if let Some(id) = &id {
                                    let text = String::from_utf8_lossy(&body);
                                    self.write(&rpc_error(
                                        id,
                                        -32603,
                                        format!(
                                            "the host answered HTTP {status}: {}",
                                            butler_host::text::clip(&text, 200)
                                        ),
                                    ));
                                }
                            }
                        }
                    } else if status >= 400
                        && !streamed
                        && let Some(id) = &id
                    {
                        self.write(&rpc_error(id, -32603, format!("the host answered HTTP {status}")));
                    }
                    return;
                }
                Outcome::Unreachable(why) => {
                    if let Some(id) = &id {
                        self.write(&rpc_error(id, -32603, why));
                    }
                    return;
                }
            }
        }
        if let Some(id) = &id {
            self.write(&rpc_error(id, -32603, "the host restarted and the session could not be opened again"));
        }
    }

    /// Closes the connection of the 2026-07-28 request `id` if one is in flight (the hub
    /// then tells its provider); whether one was.
    fn cancel(&self, id: &Value) -> bool {
        let Some(stream) = lock(&self.stateless).remove(&id.to_string()) else { return false };
        lock(&self.cancelled).insert(id.to_string());
        stream.shutdown();
        true
    }

    /// Replays the client's `initialize` (and `notifications/initialized`) on a new session.
    fn reinitialize(&self) -> bool {
        let Some(initialize) = lock(&self.initialize).clone() else { return false };
        *lock(&self.session) = None;
        let Outcome::Answered { status: 200, session: Some(session), .. } =
            self.exchange("POST", None, Some(&initialize.to_string()), &mut |_| {})
        else {
            return false;
        };
        let initialized = json!({"jsonrpc": "2.0", "method": methods::INITIALIZED}).to_string();
        let _ = self.exchange("POST", Some(&session), Some(&initialized), &mut |_| {});
        *lock(&self.session) = Some(session);
        true
    }

    /// Follows the hub's notification stream while the bridge runs.
    fn listen(&self) {
        let mut pause = Duration::from_millis(200);
        while !self.closed.load(Ordering::Relaxed) {
            let session = lock(&self.session).clone();
            if let Some(session) = session {
                let outcome = self.exchange("GET", Some(&session), None, &mut |event| {
                    pause = Duration::from_millis(200);
                    self.write_raw(event);
                });
                if matches!(outcome, Outcome::Answered { status: 200, .. }) {
                    pause = Duration::from_millis(200);
                }
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    /// One HTTP exchange with the host's `/mcp`: SSE events are passed to `on_event` as
    /// they arrive; a JSON body is returned whole.
    fn exchange(
        &self,
        method: &str,
        session: Option<&str>,
        body: Option<&str>,
        on_event: &mut dyn FnMut(&[u8]),
    ) -> Outcome {
        self.exchange_with((method, session, body), ("", None), on_event)
    }

    /// [`Self::exchange`] with more header lines (each ending in CRLF); with `cancellable`,
    /// the connection is kept under that request id while the answer comes, for
    /// [`Self::cancel`].
    fn exchange_with(
        &self,
        (method, session, body): (&str, Option<&str>, Option<&str>),
        (headers, cancellable): (&str, Option<&str>),
        on_event: &mut dyn FnMut(&[u8]),
    ) -> Outcome {
        let (mut stream, token) = match self.connect() {
            Ok(found) => found,
            Err(why) => return Outcome::Unreachable(why.to_string()),
        };
        let _kept = cancellable.and_then(|id| {
            let clone = stream.try_clone().ok()?;
            lock(&self.stateless).insert(id.to_owned(), clone);
            Some(Kept { calls: &self.stateless, id })
        });
        let timeout = if method == "GET" { LISTEN_IDLE } else { ANSWER_TIMEOUT };
        let _ = stream.set_read_timeout(Some(timeout));
        let body = body.unwrap_or_default();
        let mut head = format!(
            "{method} {}/mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            butler_host::http::API_PREFIX,
            body.len()
        );
        if let Some(session) = session {
            head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        head.push_str(headers);
        head.push_str("\r\n");
        if stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body.as_bytes())).is_err() {
            return Outcome::Unreachable(self.not_running().to_string());
        }
        let mut reader = BufReader::new(stream);
        match read_answer(&mut reader, on_event) {
            Ok(outcome) => outcome,
            Err(e) => Outcome::Unreachable(format!("the host's answer could not be read: {e}")),
        }
    }

    fn not_running(&self) -> NoHost {
        NoHost::NotRunning(self.instance.to_string())
    }

    /// A connection to the host that runs now, and its owner token.
    fn connect(&self) -> Result<(Stream, String), NoHost> {
        let token = owner::read(&self.state_dir).map_err(NoHost::Token)?;
        let socket = self.state_dir.join(butler_host::http::LOCAL_SOCKET);
        if let Ok(stream) = UnixStream::connect(&socket) {
            return Ok((Stream::Local(stream), token));
        }
        let info = HostFile::read(&self.state_dir).map_err(|_| self.not_running())?;
        let authority = info.url.trim_start_matches("http://").trim_end_matches('/').to_owned();
        let stream = connect_tcp(&authority).ok_or_else(|| self.not_running())?;
        Ok((Stream::Tcp(stream), token))
    }
}

/// The headers a 2026-07-28 request repeats from its body over HTTP (stdio has none), as
/// header lines ([`butler_host::upstream::stateless_headers`]).
fn stateless_headers(message: &Value) -> String {
    butler_host::upstream::stateless_headers(message)
        .into_iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect()
}

fn connect_tcp(authority: &str) -> Option<std::net::TcpStream> {
    use std::net::ToSocketAddrs;
    let addr = authority.to_socket_addrs().ok()?.next()?;
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()
}

/// Reads one HTTP/1.1 answer (the connection closes after it).
fn read_answer(reader: &mut impl BufRead, on_event: &mut dyn FnMut(&[u8])) -> std::io::Result<Outcome> {
    let mut status = 0;
    let mut session = None;
    let mut chunked = false;
    let mut length = None;
    let mut sse = false;
    let mut first = true;
    loop {
        let mut line = String::new();
        if reader.by_ref().take(64 << 10).read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end();
        if first {
            status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            first = false;
            continue;
        }
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "mcp-session-id" => session = Some(value.to_owned()),
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "content-length" => length = value.parse::<usize>().ok(),
            "content-type" => sse = value.starts_with("text/event-stream"),
            _ => {}
        }
    }
    let mut body: Box<dyn BufRead + '_> = if chunked {
        Box::new(BufReader::new(Dechunk { inner: reader, left: 0, done: false }))
    } else if let Some(length) = length {
        Box::new(reader.take(length as u64))
    } else {
        Box::new(reader)
    };
    if !sse {
        let mut bytes = Vec::new();
        body.by_ref().take(MAX_LINE as u64).read_to_end(&mut bytes)?;
        return Ok(Outcome::Answered { status, session, body: bytes });
    }
    // Server-sent events: each event's `data:` lines joined, one message per event.
    let mut data: Vec<u8> = Vec::new();
    loop {
        let mut line = Vec::new();
        if body.by_ref().take(MAX_LINE as u64).read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let line = line.strip_suffix(b"\n").unwrap_or(&line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if !data.is_empty() {
                on_event(&data);
                data.clear();
            }
        } else if let Some(rest) = line.strip_prefix(b"data:") {
            if !data.is_empty() {
                data.push(b'\n');
            }
            data.extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
        }
    }
    Ok(Outcome::Answered { status, session, body: Vec::new() })
}

/// A chunked body as plain bytes.
struct Dechunk<'a, R: BufRead> {
    inner: &'a mut R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Read for Dechunk<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            self.inner.by_ref().take(1024).read_line(&mut line)?;
            if line.trim().is_empty() {
                // The CRLF ending the previous chunk.
                line.clear();
                self.inner.by_ref().take(1024).read_line(&mut line)?;
            }
            let size = line.trim().split(';').next().unwrap_or_default();
            self.left = usize::from_str_radix(size, 16)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "a bad chunk size"))?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.left -= n;
        Ok(n)
    }
}

enum Stream {
    Local(UnixStream),
    Tcp(std::net::TcpStream),
}

/// A request's connection kept for [`Bridge::cancel`] until its answer has been read.
struct Kept<'a> {
    calls: &'a Mutex<HashMap<String, Stream>>,
    id: &'a str,
}

impl Drop for Kept<'_> {
    fn drop(&mut self) {
        lock(self.calls).remove(self.id);
    }
}

impl Stream {
    fn try_clone(&self) -> std::io::Result<Self> {
        Ok(match self {
            Self::Local(s) => Self::Local(s.try_clone()?),
            Self::Tcp(s) => Self::Tcp(s.try_clone()?),
        })
    }

    /// Closes the connection both ways (a reader of a clone sees its end).
    fn shutdown(&self) {
        let _ = match self {
            Self::Local(s) => s.shutdown(std::net::Shutdown::Both),
            Self::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            Self::Local(s) => s.set_read_timeout(timeout),
            Self::Tcp(s) => s.set_read_timeout(timeout),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Local(s) => s.read(buf),
            Self::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Local(s) => s.write(buf),
            Self::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Local(s) => s.flush(),
            Self::Tcp(s) => s.flush(),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn rpc_error(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}
