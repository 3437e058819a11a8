//! The MCP hub's remote upstreams: the host's [`Dialer`], which connects the hub's
//! line-delimited JSON-RPC pipe to a remote MCP server over HTTP.
//!
//! The transport is chosen on the first message, as the MCP specification's
//! backwards-compatibility section says: it is `POST`ed to the URL (Streamable HTTP); a
//! `404`, `405`, or a `400` that is not a JSON-RPC answer means an older server, and the URL
//! is opened as the 2024-11-05 HTTP+SSE transport's event stream instead (its `endpoint`
//! event names where messages go, which must be on the same origin).
//!
//! Streamable HTTP: every message is a `POST` of its own, with the server's
//! `Mcp-Session-Id` once it gave one, `MCP-Protocol-Version` (the revision the hub's first
//! message or the server's `initialize` answer settled), and for a 2026-07-28 request the
//! headers that repeat its body (`Mcp-Method`, `Mcp-Name`). An answer is one JSON body or
//! an event stream of messages; requests run side by side (at most [`MAX_IN_FLIGHT`]),
//! and `notifications/cancelled` also closes the cancelled request's stream. A session of
//! the 2025 revisions also gets the server's own stream (`GET`), opened again with
//! `Last-Event-ID` when it drops. A `404` on a session means the server ended it: the
//! connection ends, and the hub starts a new one (with backoff).
//!
//! The declared headers (tokens, mostly) go with every request and never anywhere else:
//! errors and notes name the URL without user, query or fragment, and no redirect is
//! followed (it could carry them to another origin).

pub mod oauth;

use butler_mcp::methods;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_catalog::lock;
use butler_mcp::upstream::{DialError, Dialer, Link, Remote, shown_url};
use butler_process::logs::Log;
use futures_util::{Stream, StreamExt};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use sse_stream::{Sse, SseByteStream};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the server may take to answer a message that is not a request, or a `GET`,
/// with its status and headers (a request's answer takes as long as its call may: the hub
/// cancels it, which closes it here).
const HEADERS_TIMEOUT: Duration = Duration::from_secs(30);
/// Messages sent and not yet answered, at most (each may hold a connection); the next one
/// waits for one of them.
pub const MAX_IN_FLIGHT: usize = 64;
/// The largest message, or event, the server may send (as for a stdio provider's line).
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// Messages from the server waiting for the hub to read them.
const QUEUE: usize = 256;
/// The pause before the server's own stream is opened again, doubling up to
/// [`REOPEN_MAX`].
const REOPEN_AFTER: Duration = Duration::from_secs(1);
/// See [`REOPEN_AFTER`].
const REOPEN_MAX: Duration = Duration::from_secs(30);
/// The key of the protocol revision in a 2026-07-28 request's `_meta`.
const REVISION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// The host's HTTP client for remote MCP servers, set up on the first dial: loading the
/// machine's trusted roots costs a host with no remote server start-up time and memory.
#[derive(Debug, Default)]
pub struct HttpDialer {
    client: std::sync::OnceLock<Result<reqwest::Client, DialError>>,
    /// The host's own listener: a URL that names it is refused.
    own: Option<std::net::SocketAddr>,
    /// The OAuth logins whose bearer tokens requests carry (none: static headers only).
    oauth: Option<Arc<oauth::broker::Broker>>,
}

/// The header every request the hub sends to a remote server carries, with
/// [`hop_mark`]: the gate refuses a request that carries this host's own mark, so a
/// provider whose URL reaches the host itself by any name fails at once instead of making
/// the hub list and call itself.
pub const HOP_HEADER: &str = "x-butler-hop";

/// This host process's mark (random, made once): not a secret, only this host's own.
#[must_use]
pub fn hop_mark() -> &'static str {
    static MARK: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MARK.get_or_init(|| {
        crate::instance::owner::random_secret().unwrap_or_else(|_| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            format!("{}-{}", std::process::id(), now.as_nanos())
        })
    })
}

impl HttpDialer {
    /// A dialer whose client will have the machine's trusted roots (rustls' platform
    /// verifier), no redirects, and [`CONNECT_TIMEOUT`].
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The same dialer, refusing a URL that names `own`, the host's listener (see
    /// [`butler_catalog::listeners`]).
    #[must_use]
    pub fn refusing(self, own: std::net::SocketAddr) -> Self {
        Self { own: Some(own), ..self }
    }

    /// The same dialer, with `oauth`'s bearer token on every request to a server that
    /// has a login and declares no `Authorization` header of its own; a server that
    /// refuses one is handled as [`oauth::broker::Broker::refused`] says.
    #[must_use]
    pub fn with_logins(self, oauth: Arc<oauth::broker::Broker>) -> Self {
        Self { oauth: Some(oauth), ..self }
    }

    /// The client, set up now if this is the first dial.
    fn client(&self) -> Result<reqwest::Client, DialError> {
        self.client.get_or_init(|| http_client().map_err(DialError::Client)).clone()
    }
}

/// An HTTP client with the machine's trusted roots (rustls' platform verifier), no
/// redirects (they could carry a token to another origin), and [`CONNECT_TIMEOUT`].
///
/// # Errors
/// Why it could not be set up.
pub fn http_client() -> Result<reqwest::Client, String> {
    // reqwest is built without a crypto provider; ring is the process's. An error means
    // one is installed already, which is all that is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("butler/", env!("CARGO_PKG_VERSION")))
        .tcp_nodelay(true)
        .build()
        .map_err(|e| e.to_string())
}

impl Dialer for HttpDialer {
    fn dial(&self, remote: &Remote, provider: &str, log: Arc<Log>) -> Result<Link, DialError> {
        let shown = remote.shown();
        let url = reqwest::Url::parse(&remote.url)
            .map_err(|e| DialError::BadUrl { shown: shown.clone(), why: e.to_string() })?;
        if self.own.is_some_and(|own| butler_catalog::listeners::names_own_listener(&remote.url, &[own])) {
            return Err(DialError::OwnAddress(shown));
        }
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static(HOP_HEADER), HeaderValue::from_static(hop_mark()));
        for (name, value) in &remote.headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| DialError::HeaderName(butler_catalog::text::clip(name, 60).to_string()))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| DialError::HeaderValue(header.to_string()))?;
            value.set_sensitive(true);
            headers.append(header, value);
        }
        let (hub_writer, from_hub) = tokio::io::duplex(256 * 1024);
        let (to_hub, hub_reader) = tokio::io::duplex(256 * 1024);
        let (out, queued) = mpsc::channel(QUEUE);
        let (close, closed) = oneshot::channel();
        let (fail, failed) = mpsc::channel(1);
        // A server given its own `Authorization` header is not logged in to.
        let oauth = self.oauth.clone().filter(|_| !headers.contains_key(reqwest::header::AUTHORIZATION));
        let bridge = Arc::new(Bridge {
            client: self.client()?,
            url,
            headers,
            provider: provider.to_owned(),
            oauth,
            shown,
            log,
            out,
            fail,
            state: Mutex::new(Session::default()),
            in_flight: Mutex::new(HashMap::new()),
            streams: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        });
        tokio::spawn(deliver(queued, to_hub));
        let task = tokio::spawn(bridge.run(from_hub, closed, failed));
        Ok(Link { writer: Box::new(hub_writer), reader: Box::new(hub_reader), close, task })
    }
}

/// Writes the server's messages to the hub's end of the pipe, one line each.
async fn deliver(mut queued: mpsc::Receiver<Vec<u8>>, mut to_hub: tokio::io::DuplexStream) {
    while let Some(mut line) = queued.recv().await {
        line.push(b'\n');
        if to_hub.write_all(&line).await.is_err() {
            return;
        }
    }
}

/// What the server told of the session.
#[derive(Debug, Default)]
struct Session {
    /// Its `Mcp-Session-Id`.
    id: Option<HeaderValue>,
    /// The revision requests name in `MCP-Protocol-Version`.
    revision: Option<String>,
    /// The older transport's `endpoint`, once it is the one spoken.
    endpoint: Option<reqwest::Url>,
    /// Whether the server's own stream (`GET`) was opened.
    listening: bool,
}

/// One connection to a remote server.
struct Bridge {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    /// The provider's id (its login's name).
    provider: String,
    /// Its logins, when requests may carry a bearer token.
    oauth: Option<Arc<oauth::broker::Broker>>,
    /// The URL as it may be shown.
    shown: String,
    log: Arc<Log>,
    /// The server's messages, to the hub.
    out: mpsc::Sender<Vec<u8>>,
    /// Why the connection must end (the first reason wins).
    fail: mpsc::Sender<String>,
    state: Mutex<Session>,
    /// The requests being answered, by their JSON-RPC id: a cancellation closes their stream.
    in_flight: Mutex<HashMap<String, tokio::task::AbortHandle>>,
    /// The server's own streams (`GET`, the older transport's events): they end with the
    /// connection.
    streams: Mutex<Vec<tokio::task::AbortHandle>>,
    permits: Arc<Semaphore>,
}

/// Why the transport to a remote server could not be settled on its first message (the
/// connection ends with this text).
#[derive(Debug, thiserror::Error)]
enum Unsettled {
    /// A `POST` could not be sent or answered (its text says why).
    #[error("{0}")]
    Post(String),
    /// The older transport's event stream could not be reached.
    #[error("cannot reach {shown}: {why}")]
    Connect {
        /// The server, as shown.
        shown: String,
        /// Why.
        why: String,
    },
    /// It did not answer the event stream's `GET` in time.
    #[error("{0} did not answer within {secs} s", secs = HEADERS_TIMEOUT.as_secs())]
    NoAnswer(String),
    /// Neither transport: the `GET` answered this status or no event stream.
    #[error("{shown} speaks neither Streamable HTTP nor HTTP+SSE (a GET answered HTTP {status})")]
    Neither {
        /// The server, as shown.
        shown: String,
        /// The status of the `GET`.
        status: StatusCode,
    },
    /// The first message was refused with this status over HTTP+SSE.
    #[error("{shown} answered HTTP {status} to the first message")]
    Status {
        /// The server, as shown.
        shown: String,
        /// The status.
        status: StatusCode,
    },
    /// The event stream named no endpoint.
    #[error("{0}'s event stream named no endpoint for messages")]
    NoEndpoint(String),
    /// The endpoint named is not a URL.
    #[error("{0} named an endpoint that is not a URL")]
    BadEndpoint(String),
    /// The endpoint named is on another origin.
    #[error("{shown} named an endpoint on another origin ({endpoint}): refused, it would get the adapter's headers")]
    OtherOrigin {
        /// The server, as shown.
        shown: String,
        /// The endpoint, as shown.
        endpoint: String,
    },
}

/// How a `POST` went.
enum Posted {
    /// The server answered with this status and these headers.
    Answer(reqwest::Response),
    /// It could not be sent or answered (no connection, a timeout).
    Failed(String),
}

impl Bridge {
    /// Carries the hub's messages until the hub or the server ends the connection; why it
    /// ended.
    async fn run(
        self: Arc<Self>,
        from_hub: tokio::io::DuplexStream,
        mut closed: oneshot::Receiver<()>,
        mut failed: mpsc::Receiver<String>,
    ) -> String {
        let mut lines = BufReader::new(from_hub);
        let mut line = Vec::new();
        let mut first = true;
        let why = loop {
            line.clear();
            let mut bounded = (&mut lines).take(MAX_MESSAGE as u64);
            let read = tokio::select! {
                _ = &mut closed => break "stopped".to_owned(),
                why = failed.recv() => break why.unwrap_or_else(|| "the connection ended".to_owned()),
                read = bounded.read_until(b'\n', &mut line) => read,
            };
            if !matches!(read, Ok(n) if n > 0) {
                break "the hub closed the connection".to_owned();
            }
            let Ok(message) = serde_json::from_slice::<Value>(&line) else { continue };
            if std::mem::take(&mut first) {
                if let Err(why) = Arc::clone(&self).first(message).await {
                    break why.to_string();
                }
                continue;
            }
            let Ok(permit) = Arc::clone(&self.permits).acquire_owned().await else { break "stopped".to_owned() };
            self.dispatch(message, permit);
        };
        self.end().await;
        why
    }

    /// Sends the first message, and settles the transport on its answer.
    async fn first(self: Arc<Self>, message: Value) -> Result<(), Unsettled> {
        let answer = match self.post(&self.url, &message, message.to_string().into_bytes()).await {
            Posted::Answer(answer) => answer,
            Posted::Failed(why) => return Err(Unsettled::Post(why)),
        };
        let status = answer.status();
        let older = matches!(status, StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED)
            || (status == StatusCode::BAD_REQUEST && !is_json(&answer));
        if !older {
            // Its body is read on a task of its own: a stream the server keeps open after
            // the answer must not stop the messages after it.
            let bridge = Arc::clone(&self);
            let task = tokio::spawn(async move { bridge.answered(&message, answer).await });
            lock(&self.streams).push(task.abort_handle());
            return Ok(());
        }
        self.log.note(format!(
            "{} answered HTTP {status} to a POST: trying the HTTP+SSE transport (2024-11-05)",
            self.shown
        ));
        let endpoint = Arc::clone(&self).open_event_stream().await?;
        self.log.note(format!("speaks HTTP+SSE; messages go to {}", shown_url(endpoint.as_str())));
        match self.post(&endpoint, &message, message.to_string().into_bytes()).await {
            Posted::Answer(answer) if answer.status().is_success() => Ok(()),
            Posted::Answer(answer) => Err(Unsettled::Status { shown: self.shown.clone(), status: answer.status() }),
            Posted::Failed(why) => Err(Unsettled::Post(why)),
        }
    }

    /// Sends one message of the hub's, on a task of its own.
    fn dispatch(self: &Arc<Self>, message: Value, permit: tokio::sync::OwnedSemaphorePermit) {
        if message.get("method").and_then(Value::as_str) == Some(methods::CANCELLED)
            && let Some(id) = message.get("params").and_then(|p| p.get("requestId"))
            && let Some(task) = lock(&self.in_flight).remove(&id.to_string())
        {
            task.abort();
        }
        if message.get("method").and_then(Value::as_str) == Some(methods::INITIALIZED) {
            Arc::clone(self).listen();
        }
        let request_id = message.get("method").and(message.get("id")).map(Value::to_string);
        let bridge = Arc::clone(self);
        // Held while the task is spawned: it cannot forget its id before it is noted.
        let mut in_flight = lock(&self.in_flight);
        let forget = request_id.clone();
        let task = tokio::spawn(async move {
            let _permit = permit;
            bridge.send(&message).await;
            if let Some(id) = forget {
                lock(&bridge.in_flight).remove(&id);
            }
        });
        if let Some(id) = request_id {
            in_flight.insert(id, task.abort_handle());
        }
    }

    /// Sends `message` where the transport says, and hands its answer to the hub.
    async fn send(&self, message: &Value) {
        let body = message.to_string().into_bytes();
        let endpoint = lock(&self.state).endpoint.clone();
        match self.post(endpoint.as_ref().unwrap_or(&self.url), message, body).await {
            Posted::Answer(answer) if endpoint.is_some() => {
                // The older transport answers on its event stream.
                if !answer.status().is_success() {
                    self.refuse(message, &format!("{} answered HTTP {}", self.shown, answer.status())).await;
                }
            }
            Posted::Answer(answer) => self.answered(message, answer).await,
            Posted::Failed(why) => self.refuse(message, &why).await,
        }
    }

    /// `POST`s `message` (its text is `body`) to `to`, with the session's headers and the
    /// login's bearer token: refreshed and sent once more when the server refuses it and
    /// it can be; a refusal that needs the owner to log in fails the message with that.
    async fn post(&self, to: &reqwest::Url, message: &Value, body: Vec<u8>) -> Posted {
        let Some(oauth) = &self.oauth else { return self.post_with(to, message, body.into(), None).await };
        let body = axum::body::Bytes::from(body);
        let token = oauth.bearer((&self.provider, self.url.as_str())).await;
        let answer = self.post_with(to, message, body.clone(), token.as_deref()).await;
        let Some((status, challenge)) = refusal(&answer) else {
            if token.is_some() && is_work(message) && matches!(&answer, Posted::Answer(a) if a.status().is_success()) {
                oauth.succeeded(&self.provider);
            }
            return answer;
        };
        match oauth.refused((&self.provider, self.url.as_str()), status, challenge, token.as_deref()).await {
            oauth::broker::Verdict::NotOAuth => answer,
            oauth::broker::Verdict::LoginNeeded(why) => Posted::Failed(why),
            oauth::broker::Verdict::Retry(token) => {
                let again = self.post_with(to, message, body, Some(&token)).await;
                match refusal(&again) {
                    // Refused again with a fresh token: the owner logs in.
                    Some((_, challenge)) => {
                        Posted::Failed(oauth.refused_again((&self.provider, self.url.as_str()), challenge))
                    }
                    None => {
                        if is_work(message) && matches!(&again, Posted::Answer(a) if a.status().is_success()) {
                            oauth.succeeded(&self.provider);
                        }
                        again
                    }
                }
            }
        }
    }

    /// `POST`s `message` (`body`) to `to` once, with the session's headers and `token`.
    async fn post_with(
        &self,
        to: &reqwest::Url,
        message: &Value,
        body: axum::body::Bytes,
        token: Option<&str>,
    ) -> Posted {
        let mut request = with_bearer(self.client.post(to.clone()).headers(self.headers.clone()), token)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        let revision = message.get("params").and_then(|p| p.get("_meta")).and_then(|m| m.get(REVISION_KEY));
        if let Some(revision) = revision.and_then(Value::as_str) {
            for (name, value) in stateless_headers(message) {
                request = request.header(name, value);
            }
            lock(&self.state).revision.get_or_insert_with(|| revision.to_owned());
        } else {
            request = self.in_session(request);
        }
        let sent = request.body(body).send();
        let answer =
            if is_request(message) { Ok(sent.await) } else { tokio::time::timeout(HEADERS_TIMEOUT, sent).await };
        match answer {
            Ok(Ok(answer)) => Posted::Answer(answer),
            Ok(Err(e)) => Posted::Failed(format!("cannot reach {}: {}", self.shown, cause(e))),
            Err(_) => Posted::Failed(format!("{} did not answer within {} s", self.shown, HEADERS_TIMEOUT.as_secs())),
        }
    }

    /// Hands the server's answer to `message` to the hub: a JSON body, or each message of an
    /// event stream; an error status becomes the request's error.
    async fn answered(&self, message: &Value, answer: reqwest::Response) {
        let status = answer.status();
        if let Some(id) = answer.headers().get("mcp-session-id") {
            lock(&self.state).id.get_or_insert_with(|| id.clone());
        }
        if status == StatusCode::NOT_FOUND && lock(&self.state).id.is_some() {
            let _ = self.fail.try_send(format!("{} ended the session (HTTP 404)", self.shown));
            return;
        }
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return;
        }
        let initialize = message.get("method").and_then(Value::as_str) == Some(methods::INITIALIZE);
        if is_event_stream(&answer) && status.is_success() {
            let request = is_request(message).then_some(message);
            let (_, answered) = self.relay_events(answer, request).await;
            // A stream that ends (or breaks) without the answer would leave the call
            // waiting for its whole limit.
            if request.is_some() && !answered {
                self.refuse(message, &format!("{}'s event stream ended before the answer", self.shown)).await;
            }
            return;
        }
        // Where a redirect points, said before the answer is consumed: the hub follows none
        // (a header it sends must not reach another server), so the owner should know it.
        let location = answer
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|to| self.url.join(to).ok())
            .map(|to| shown_url(to.as_str()));
        let body = match read_bounded(answer).await {
            Ok(body) => body,
            Err(why) => return self.refuse(message, &format!("{}'s answer {why}", self.shown)).await,
        };
        let parsed = serde_json::from_slice::<Value>(&body).ok();
        if status.is_success()
            && let Some(parsed) = parsed
        {
            if initialize {
                self.settle_revision(&parsed);
            }
            match parsed {
                Value::Array(messages) => {
                    for message in messages {
                        self.to_hub(message.to_string().into_bytes()).await;
                    }
                }
                _ => self.to_hub(body).await,
            }
            return;
        }
        // A JSON-RPC error the server gave with an error status is the request's answer.
        match parsed.as_ref().and_then(|p| p.get("error")) {
            Some(error) if !status.is_success() => {
                if let Some(id) = message.get("id").filter(|_| is_request(message)) {
                    self.to_hub(json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string().into_bytes()).await;
                }
            }
            _ => {
                let hint = if status.is_success() {
                    format!(", but {}", not_one_message(&body))
                } else if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                    " (are the adapter's headers right?)".to_owned()
                } else if let (true, Some(location)) = (status.is_redirection(), &location) {
                    format!(
                        ", a redirect to {location}: the hub follows no redirect (its headers are for this server alone); give the server that URL if it is the same server"
                    )
                } else {
                    String::new()
                };
                self.refuse(message, &format!("{} answered HTTP {status}{hint}", self.shown)).await;
            }
        }
    }

    /// Answers the hub's request `message` with an error saying `why` (a notification or
    /// an answer of the hub's that could not be sent is only noted).
    async fn refuse(&self, message: &Value, why: &str) {
        match message.get("id").filter(|_| is_request(message)) {
            Some(id) => {
                let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": why}});
                self.to_hub(error.to_string().into_bytes()).await;
            }
            None => self.log.note(format!("a message could not be delivered: {why}")),
        }
    }

    /// Queues one message for the hub, waiting while [`QUEUE`] are queued: a server that
    /// sends faster than the hub reads is read no faster.
    async fn to_hub(&self, message: Vec<u8>) {
        // An error means the hub's end is gone, and the connection with it.
        let _ = self.out.send(message).await;
    }

    /// The revision the server's answer to `initialize` settled, for the requests after it.
    fn settle_revision(&self, answer: &Value) {
        if let Some(revision) = answer.pointer("/result/protocolVersion").and_then(Value::as_str) {
            lock(&self.state).revision = Some(revision.to_owned());
        }
    }

    /// Hands the hub every message of `answer`'s event stream until it ends. The last event
    /// id (for the next `GET`), and whether the answer to `request` was among them (the
    /// revision it settles, when it is `initialize`'s).
    async fn relay_events(&self, answer: reqwest::Response, request: Option<&Value>) -> (Option<String>, bool) {
        let initialize = request.and_then(|r| r.get("method")).and_then(Value::as_str) == Some(methods::INITIALIZE);
        let awaited = request.and_then(|r| r.get("id"));
        let (mut last, mut answered) = (None, false);
        let mut events = std::pin::pin!(events(answer));
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    if event.id.is_some() {
                        last.clone_from(&event.id);
                    }
                    let message = event.event.as_deref().is_none_or(|kind| kind == "message");
                    if let Some(data) = event.data.filter(|d| message && !d.is_empty()) {
                        if let Some(awaited) = awaited.filter(|_| !answered)
                            && let Ok(parsed) = serde_json::from_str::<Value>(&data)
                            && parsed.get("id") == Some(awaited)
                            && parsed.get("method").is_none()
                        {
                            answered = true;
                            if initialize {
                                self.settle_revision(&parsed);
                            }
                        }
                        self.to_hub(data.into_bytes()).await;
                    }
                }
                Err(why) => {
                    self.log.note(format!("{}'s event stream broke: {why}", self.shown));
                    break;
                }
            }
        }
        (last, answered)
    }

    /// Opens the server's own stream (`GET`) for a session of the 2025 revisions, once, and
    /// keeps it open: a server that has none (`405`, or `404` outside a session) is left alone.
    fn listen(self: Arc<Self>) {
        {
            let mut state = lock(&self.state);
            if state.listening || state.endpoint.is_some() || state.revision.as_deref() == Some("2026-07-28") {
                return;
            }
            state.listening = true;
        }
        let bridge = Arc::downgrade(&self);
        let mut streams = lock(&self.streams);
        let task = tokio::spawn(async move {
            let (mut pause, mut last) = (REOPEN_AFTER, None::<String>);
            loop {
                let Some(this) = bridge.upgrade() else { return };
                let token = this.token().await;
                let request =
                    with_bearer(this.client.get(this.url.clone()).headers(this.headers.clone()), token.as_deref());
                let mut request = this.in_session(request.header(ACCEPT, "text/event-stream"));
                if let Some(last) = &last {
                    request = request.header("last-event-id", last.as_str());
                }
                match tokio::time::timeout(HEADERS_TIMEOUT, request.send()).await {
                    Ok(Ok(answer)) if answer.status() == StatusCode::METHOD_NOT_ALLOWED => return,
                    // Without a session, a 404 is a server that has no stream to offer.
                    Ok(Ok(answer)) if answer.status() == StatusCode::NOT_FOUND && lock(&this.state).id.is_none() => {
                        return;
                    }
                    Ok(Ok(answer)) if answer.status() == StatusCode::NOT_FOUND => {
                        let _ = this.fail.try_send(format!("{} ended the session (HTTP 404)", this.shown));
                        return;
                    }
                    Ok(Ok(answer)) if answer.status().is_success() && is_event_stream(&answer) => {
                        pause = REOPEN_AFTER;
                        if let (Some(id), _) = this.relay_events(answer, None).await {
                            last = Some(id);
                        }
                    }
                    _ => {}
                }
                drop(this);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(REOPEN_MAX);
            }
        });
        streams.push(task.abort_handle());
    }

    /// Opens the older transport's event stream, and relays its messages on a task of its
    /// own; where messages are to be sent (its `endpoint` event, on the same origin).
    async fn open_event_stream(self: Arc<Self>) -> Result<reqwest::Url, Unsettled> {
        let token = self.token().await;
        let request = with_bearer(self.client.get(self.url.clone()).headers(self.headers.clone()), token.as_deref())
            .header(ACCEPT, "text/event-stream");
        let answer = match tokio::time::timeout(HEADERS_TIMEOUT, request.send()).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Err(Unsettled::Connect { shown: self.shown.clone(), why: cause(e) }),
            Err(_) => return Err(Unsettled::NoAnswer(self.shown.clone())),
        };
        if !answer.status().is_success() || !is_event_stream(&answer) {
            return Err(Unsettled::Neither { shown: self.shown.clone(), status: answer.status() });
        }
        let mut events = Box::pin(events(answer));
        let endpoint = tokio::time::timeout(HEADERS_TIMEOUT, async {
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) if event.event.as_deref() == Some("endpoint") => return event.data,
                    Ok(_) => {}
                    Err(_) => return None,
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .ok_or_else(|| Unsettled::NoEndpoint(self.shown.clone()))?;
        let endpoint = self.url.join(endpoint.trim()).map_err(|_| Unsettled::BadEndpoint(self.shown.clone()))?;
        if endpoint.origin() != self.url.origin() {
            return Err(Unsettled::OtherOrigin { shown: self.shown.clone(), endpoint: shown_url(endpoint.as_str()) });
        }
        lock(&self.state).endpoint = Some(endpoint.clone());
        let bridge = Arc::downgrade(&self);
        let task = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let Some(this) = bridge.upgrade() else { return };
                match event {
                    Ok(Sse { event: kind, data: Some(data), .. }) if kind.as_deref().is_none_or(|k| k == "message") => {
                        this.to_hub(data.into_bytes()).await;
                    }
                    Ok(_) => {}
                    Err(why) => {
                        let _ = this.fail.try_send(format!("{}'s event stream broke: {why}", this.shown));
                        return;
                    }
                }
            }
            if let Some(this) = bridge.upgrade() {
                let _ = this.fail.try_send(format!("{} closed its event stream", this.shown));
            }
        });
        lock(&self.streams).push(task.abort_handle());
        Ok(endpoint)
    }

    /// Ends the session politely (`DELETE`, best effort), and every request still open.
    async fn end(&self) {
        for (_, task) in lock(&self.in_flight).drain() {
            task.abort();
        }
        for task in lock(&self.streams).drain(..) {
            task.abort();
        }
        if lock(&self.state).id.is_none() {
            return;
        }
        let ending = async {
            let token = self.token().await;
            let request = self.client.delete(self.url.clone()).headers(self.headers.clone());
            let _ = self.in_session(with_bearer(request, token.as_deref())).send().await;
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), ending).await;
    }

    /// The bearer token requests carry now, if the server has a login.
    async fn token(&self) -> Option<String> {
        match &self.oauth {
            Some(oauth) => oauth.bearer((&self.provider, self.url.as_str())).await,
            None => None,
        }
    }

    /// `request` with the session's id and revision, once the server gave them.
    fn in_session(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let state = lock(&self.state);
        if let Some(id) = &state.id {
            request = request.header("mcp-session-id", id.clone());
        }
        if let Some(revision) = &state.revision {
            request = request.header("mcp-protocol-version", revision.as_str());
        }
        request
    }
}

/// `request` with `token` as its bearer credential (marked sensitive), if there is one.
fn with_bearer(request: reqwest::RequestBuilder, token: Option<&str>) -> reqwest::RequestBuilder {
    let Some(mut value) = token.and_then(|t| HeaderValue::from_str(&format!("Bearer {t}")).ok()) else {
        return request;
    };
    value.set_sensitive(true);
    request.header(reqwest::header::AUTHORIZATION, value)
}

/// A `401` or `403` answer's status and `Bearer` challenge (if it has one).
fn refusal(answer: &Posted) -> Option<(u16, Option<oauth::Challenge>)> {
    let Posted::Answer(answer) = answer else { return None };
    if !matches!(answer.status(), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return None;
    }
    let challenge = answer
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(oauth::parse_challenge);
    Some((answer.status().as_u16(), challenge))
}

/// What went wrong, down to its cause (a refused connection, a certificate, a name that
/// does not resolve), without the URL, whose query may hold a key.
fn cause(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(inner) = source {
        let said = inner.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = inner.source();
    }
    text
}

/// Whether `message` is a request past the handshake (not `initialize`, `server/discover`
/// or a notification).
fn is_work(message: &Value) -> bool {
    is_request(message)
        && !matches!(
            message.get("method").and_then(Value::as_str),
            Some(methods::INITIALIZE | methods::SERVER_DISCOVER)
        )
}

/// Whether `message` is a request (it has a method and an id).
fn is_request(message: &Value) -> bool {
    message.get("method").is_some() && message.get("id").is_some()
}

fn is_json(answer: &reqwest::Response) -> bool {
    content_type(answer).is_some_and(|t| t.starts_with("application/json"))
}

fn is_event_stream(answer: &reqwest::Response) -> bool {
    content_type(answer).is_some_and(|t| t.starts_with("text/event-stream"))
}

fn content_type(answer: &reqwest::Response) -> Option<String> {
    answer.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_ascii_lowercase)
}

/// Why `body`, a JSON answer that did not read, is not the one JSON-RPC message (or batch)
/// it must be: it is empty, it is not JSON (and where), or more follows its first value (and
/// at which byte).
fn not_one_message(body: &[u8]) -> String {
    let mut values = serde_json::Deserializer::from_slice(body).into_iter::<Value>();
    match values.next() {
        None => "its body is empty: no JSON-RPC message".to_owned(),
        Some(Err(e)) => format!("its body is not JSON ({e})"),
        Some(Ok(_)) => {
            let end = values.byte_offset();
            let at = end + body[end..].iter().take_while(|b| b.is_ascii_whitespace()).count();
            match values.next() {
                Some(Ok(_)) => {
                    format!("its body is not one JSON-RPC message: a second JSON value follows at byte {at}")
                }
                _ => format!(
                    "its body is not one JSON-RPC message: what follows its first JSON value at byte {at} is not JSON"
                ),
            }
        }
    }
}

/// `answer`'s body, at most [`MAX_MESSAGE`] bytes.
async fn read_bounded(answer: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    let mut chunks = answer.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| format!("broke off: {}", cause(e)))?;
        if body.len() + chunk.len() > MAX_MESSAGE {
            return Err(format!("is larger than {} MiB", MAX_MESSAGE >> 20));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The events of `answer`'s stream; one that grows past [`MAX_MESSAGE`] ends it with an
/// error (the decoder would otherwise hold it all).
fn events(answer: reqwest::Response) -> impl Stream<Item = Result<Sse, sse_stream::Error>> + Send {
    let pending = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&pending);
    let bytes = answer.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(|e| std::io::Error::other(cause(e)))?;
        if counted.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len() > MAX_MESSAGE {
            return Err(std::io::Error::other(format!("an event larger than {} MiB", MAX_MESSAGE >> 20)));
        }
        Ok(chunk)
    });
    SseByteStream::new(bytes).map(move |event| {
        pending.store(0, Ordering::Relaxed);
        event
    })
}

/// The headers a 2026-07-28 request repeats from its body over HTTP: its revision, method
/// and — for a call, a prompt or a read — the name or URI, in the `=?base64?…?=` form when
/// it is not plain visible ASCII. None for other messages.
#[must_use]
pub fn stateless_headers(message: &Value) -> Vec<(&'static str, String)> {
    use base64::Engine as _;
    let params = &message["params"];
    let Some(version) = params["_meta"][REVISION_KEY].as_str() else { return Vec::new() };
    let Some(method) = message["method"].as_str() else { return Vec::new() };
    let safe = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    let mut headers = Vec::new();
    if safe(version) && safe(method) {
        headers.push(("MCP-Protocol-Version", version.to_owned()));
        headers.push(("Mcp-Method", method.to_owned()));
    }
    let name = match method {
        methods::TOOLS_CALL | methods::PROMPTS_GET => params["name"].as_str(),
        methods::RESOURCES_READ => params["uri"].as_str(),
        _ => None,
    };
    if let Some(name) = name {
        let value = if safe(name) && name.trim() == name {
            name.to_owned()
        } else {
            format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(name))
        };
        headers.push(("Mcp-Name", value));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server on loopback that answers the first request of each connection with
    /// `answer(request head)` (which says whether the connection closes), and keeps what
    /// it was sent.
    async fn fake_server(answer: fn(&str) -> String) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let heads = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let heads = Arc::clone(&heads);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).await.is_ok_and(|n| n == 1) {
                        head.push(byte[0]);
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let reply = answer(&head);
                    lock(&heads).push(head);
                    let _ = socket.write_all(reply.as_bytes()).await;
                    tokio::time::sleep(Duration::from_secs(30)).await;
                });
            }
        });
        (format!("http://{address}"), seen)
    }

    async fn dial(url: &str, log: &tempfile::TempDir) -> Link {
        let remote = Remote { url: url.to_owned(), headers: vec![("Authorization".into(), "Bearer s3cret".into())] };
        let log = Arc::new(Log::new(log.path().join("provider.log")));
        let mut link = HttpDialer::new().dial(&remote, "remote", log).expect("dial");
        let hello = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
        link.writer.write_all(format!("{hello}\n").as_bytes()).await.expect("write");
        link
    }

    #[tokio::test]
    async fn an_https_server_is_dialled_with_tls_and_a_failed_handshake_ends_the_link() {
        // A server that takes the client's first bytes and closes without a TLS answer:
        // the handshake must have started (a TLS handshake record) and the link must end
        // with a reason, not hang and not panic for want of a crypto provider.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let first = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut record = [0u8; 3];
            socket.read_exact(&mut record).await.expect("read");
            record
        });
        let dir = tempfile::tempdir().expect("dir");
        let mut link = dial(&format!("https://{address}/mcp"), &dir).await;
        let record = tokio::time::timeout(Duration::from_secs(20), first).await.expect("bytes").expect("joined");
        assert_eq!(record, [0x16, 0x03, 0x01], "a TLS ClientHello record");
        let mut rest = String::new();
        tokio::time::timeout(Duration::from_secs(20), link.reader.read_to_string(&mut rest))
            .await
            .expect("the link closes")
            .expect("read");
        assert!(rest.is_empty(), "nothing relayed: {rest}");
        let why = tokio::time::timeout(Duration::from_secs(20), link.task).await.expect("it ends").expect("joined");
        assert!(why.contains("cannot reach https://127.0.0.1"), "{why}");
        assert!(!why.contains("s3cret"), "{why}");
    }

    #[tokio::test]
    async fn an_older_servers_endpoint_on_another_origin_is_refused_and_gets_nothing() {
        let (url, seen) = fake_server(|head| {
            if head.starts_with("POST") {
                "HTTP/1.1 405 Method Not Allowed\r\nconnection: close\r\ncontent-length: 0\r\n\r\n".to_owned()
            } else {
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nevent: endpoint\ndata: http://127.0.0.2:9/messages\n\n"
                    .to_owned()
            }
        })
        .await;
        let dir = tempfile::tempdir().expect("dir");
        let link = dial(&format!("{url}/sse"), &dir).await;
        let why = tokio::time::timeout(Duration::from_secs(20), link.task).await.expect("it ends").expect("joined");
        assert!(why.contains("another origin"), "{why}");
        assert!(!why.contains("s3cret"));
        let seen = lock(&seen).clone();
        assert_eq!(seen.len(), 2, "one POST, one GET, nothing to the other origin: {seen:?}");
    }

    #[tokio::test]
    async fn a_call_whose_stream_ends_without_its_answer_fails_at_once() {
        let (url, _) = fake_server(|_| {
            "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: text/event-stream\r\ncontent-length: 52\r\n\r\n\
             data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n\n"
                .to_owned()
        })
        .await;
        let dir = tempfile::tempdir().expect("dir");
        let mut link = dial(&format!("{url}/mcp"), &dir).await;
        let mut reader = BufReader::new(&mut link.reader);
        let mut lines = Vec::new();
        for _ in 0..2 {
            let mut line = String::new();
            tokio::time::timeout(Duration::from_secs(20), reader.read_line(&mut line))
                .await
                .expect("a line")
                .expect("read");
            lines.push(serde_json::from_str::<Value>(&line).expect("JSON"));
        }
        assert_eq!(lines[0]["method"], "notifications/x", "what came is relayed first: {lines:?}");
        assert_eq!(lines[1]["id"], 1, "{lines:?}");
        let message = lines[1]["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("ended before the answer"), "{message}");
    }

    #[tokio::test]
    async fn a_first_answer_whose_stream_stays_open_does_not_hold_the_messages_after_it() {
        let (url, seen) = fake_server(|_| {
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
                .to_owned()
        })
        .await;
        let dir = tempfile::tempdir().expect("dir");
        let mut link = dial(&format!("{url}/mcp"), &dir).await;
        let mut reader = BufReader::new(&mut link.reader);
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(20), reader.read_line(&mut line))
            .await
            .expect("answer")
            .expect("read");
        let next = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
        link.writer.write_all(format!("{next}\n").as_bytes()).await.expect("write");
        line.clear();
        tokio::time::timeout(Duration::from_secs(20), reader.read_line(&mut line))
            .await
            .expect("second")
            .expect("read");
        assert_eq!(lock(&seen).iter().filter(|head| head.starts_with("POST")).count(), 2);
    }

    #[tokio::test]
    async fn a_redirect_is_not_followed_and_the_call_fails_saying_why() {
        let (url, seen) = fake_server(|_| {
            "HTTP/1.1 307 Temporary Redirect\r\nconnection: close\r\nlocation: http://127.0.0.2:9/steal\r\ncontent-length: 0\r\n\r\n".to_owned()
        })
        .await;
        let dir = tempfile::tempdir().expect("dir");
        let mut link = dial(&format!("{url}/mcp?key=query-secret"), &dir).await;
        let mut line = String::new();
        let mut reader = BufReader::new(&mut link.reader);
        tokio::time::timeout(Duration::from_secs(20), reader.read_line(&mut line))
            .await
            .expect("an answer")
            .expect("read");
        let answer: Value = serde_json::from_str(&line).expect("JSON-RPC");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(answer["id"], 1, "{answer}");
        assert!(message.contains("307") && message.contains("/mcp") && !message.contains("query-secret"), "{message}");
        assert!(message.contains("a redirect to http://127.0.0.2:9/steal: the hub follows no redirect"), "{message}");
        assert_eq!(lock(&seen).len(), 1, "the redirect was not followed");
    }

    #[tokio::test]
    async fn a_json_answer_that_is_not_one_message_is_refused_saying_why() {
        let (url, _) = fake_server(|_| {
            let body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
            format!(
                "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
        })
        .await;
        let dir = tempfile::tempdir().expect("dir");
        let mut link = dial(&format!("{url}/mcp"), &dir).await;
        let mut line = String::new();
        let mut reader = BufReader::new(&mut link.reader);
        tokio::time::timeout(Duration::from_secs(20), reader.read_line(&mut line))
            .await
            .expect("an answer")
            .expect("read");
        let answer: Value = serde_json::from_str(&line).expect("JSON-RPC");
        assert_eq!(answer["id"], 1, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.ends_with(
                "answered HTTP 200 OK, but its body is not one JSON-RPC message: a second JSON value follows at byte 37"
            ),
            "{message}"
        );
    }

    #[test]
    fn why_a_body_is_not_one_message() {
        assert_eq!(not_one_message(b" \n"), "its body is empty: no JSON-RPC message");
        assert!(not_one_message(b"{\"jsonrpc\": ").starts_with("its body is not JSON (EOF while parsing"));
        assert_eq!(
            not_one_message(b"{} []"),
            "its body is not one JSON-RPC message: a second JSON value follows at byte 3"
        );
        assert_eq!(
            not_one_message(b"{}\r\nnot json"),
            "its body is not one JSON-RPC message: what follows its first JSON value at byte 4 is not JSON"
        );
    }

    #[test]
    fn a_stateless_request_repeats_its_method_and_name_in_headers() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "héllo", "_meta": {REVISION_KEY: "2026-07-28"}}});
        assert_eq!(
            stateless_headers(&call),
            vec![
                ("MCP-Protocol-Version", "2026-07-28".to_owned()),
                ("Mcp-Method", "tools/call".to_owned()),
                ("Mcp-Name", "=?base64?aMOpbGxv?=".to_owned()),
            ]
        );
        let of_2025 = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        assert!(stateless_headers(&of_2025).is_empty());
    }
}
