//! One MCP provider, reached through its [`Transport`] (a stdio process started on first
//! need under a keeper, a remote server the host's [`Dialer`] connects to, a server in the
//! host's process: see [`super::upstream`]); spoken to in line-delimited JSON-RPC over the
//! conversation of [`butler_process::json_lines`] whichever it is, started again 5 s after a
//! crash (longer after each start that fails in a row, up to a minute), on tokio's clock.
//!
//! Requests from the hub get the provider's own ids (one counter per pipe), and a request
//! whose client takes progress has its id as its progress token (one whose client does not
//! gets none, so the provider sends no progress nobody reads): two clients' ids or tokens
//! can never collide on one pipe. A reader task matches each response to its waiting call; a crash fails exactly
//! the calls in flight on that pipe.
//!
//! The provider's own requests for a client (sampling, elicitation, roots) go to the call in
//! flight that can take them — the oldest, when several are: stdio does not say which call a
//! request belongs to — and their answers go back under the provider's own id.
//!
//! A provider speaks either era. Starting, the hub asks it `server/discover`: one that
//! answers with 2026-07-28 among its versions is spoken to statelessly — each request with
//! the envelope naming the client's capabilities and log level, list changes and resource
//! updates through one `subscriptions/listen` request, its `InputRequiredResult`s passed to a
//! 2026-07-28 client as they are, or settled for a client of the 2025 revisions by asking it
//! each input request and retrying the call. Any other answer, or none within
//! [`PROBE_TIMEOUT`], and the hub falls back to `initialize` (the 2025 revisions).

use crate::methods;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{broadcast, oneshot};
use tokio::time::Instant;

use super::answer::Answer;
use super::capability_sets::{CapabilitySet, Listing, Shown, Withheld};
use super::framing::{ProviderLine, ProviderRoute, object, provider_line, provider_reply};
use super::upcall::{self, Asked, Asker, Upcall, Upcalls};
use super::upstream::{Connection, Dialer, End, Opening, Reader, Remote, Stdio, Transport, Writer};
use crate::FastMap;
use crate::host_env::AllowedEnv;
use butler_catalog::Extension;
use butler_catalog::lock;
use butler_process::json_lines::{Calls, LineReader, LineWriter, ReadError, RpcError, WriteError};
use butler_process::logs::Log;
use butler_process::{HostEnv, Launch};

/// Spawn, `initialize` and the first lists must fit in this: a provider slower than that
/// is reported as failing, and `tools/list` answers from its cached list meanwhile.
pub const START_TIMEOUT: Duration = Duration::from_secs(15);

/// A crashed provider is started again this long after (and a failed start is not tried
/// again sooner); each start that fails in a row doubles it, up to [`RESTART_MAX`].
pub const RESTART_AFTER: Duration = Duration::from_secs(5);
/// See [`RESTART_AFTER`].
pub const RESTART_MAX: Duration = Duration::from_secs(60);

/// The pause before the next start after `failures` failed starts in a row.
fn restart_after(failures: u32) -> Duration {
    RESTART_AFTER.saturating_mul(1 << failures.saturating_sub(1).min(4)).min(RESTART_MAX)
}

/// Set (to `1`) in the environment of a process the hub starts only to learn what the
/// provider lists to less capable clients ([`Provider::probe`]).
pub use super::upstream::PROBE_ENV;

/// The protocol revision the hub speaks to providers of the 2025 revisions.
const PROVIDER_PROTOCOL: &str = "2025-06-18";

/// How long a starting provider may take to answer `server/discover` before the hub also
/// sends it `initialize` (providers of the 2025 revisions mostly refuse the question at once;
/// one that answers neither is given [`START_TIMEOUT`] in all).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The resources one 2026-07-28 provider is asked to report updates of, at most (its listen
/// request names them all, and is sent again whenever they change).
pub const MAX_LISTENED: usize = 1024;

/// How long a message that is not a call (a notification, an answer) may wait to be
/// written to a provider; a call waits as long as its own limit.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The rounds of input one request of a 2026-07-28 provider may ask of a client of the
/// 2025 revisions; one more and the call fails.
pub const MAX_ROUNDS: usize = 16;

/// The longest line a provider may send (a huge tool list, a large result).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// The buffer a provider's output is read through.
const READ_BUFFER: usize = 64 * 1024;

/// Notifications a provider may send within [`FLOOD_WINDOW`]; one more and it is stopped
/// with the reason in its status (a storm must cost the host neither memory nor the other
/// providers' latency).
const FLOOD_LIMIT: u32 = 1000;
/// See [`FLOOD_LIMIT`].
const FLOOD_WINDOW: Duration = Duration::from_secs(10);

/// Whether a relist is running, and whether another was asked for meanwhile: however many
/// `list_changed` notifications arrive, at most one relist runs and one more is pending.
#[derive(Default)]
struct Relist {
    running: bool,
    again: bool,
}

/// Latency samples kept per provider for the status.
const LATENCY_SAMPLES: usize = 256;

/// A provider as derived from its manifest.
#[derive(Debug)]
pub struct ProviderSpec {
    /// The extension id.
    pub id: String,
    /// Its namespace.
    pub namespace: String,
    /// How it is reached.
    pub transport: Arc<dyn Transport>,
    /// Per-call limit.
    pub timeout: Duration,
    /// Whether it is asked `server/discover` first (else it is spoken to with the 2025
    /// revisions' `initialize` at once: `mcp.legacyProviders`).
    pub probe: bool,
    /// What every `tools/call` carries in `_meta` (merged over the caller's).
    pub call_meta: Option<Arc<Value>>,
    /// Whether it is on the main endpoint (else only on profiles).
    pub on_main: bool,
    /// The host variables its `headers` or `env` name that `mcp.allowEnv` does not allow
    /// (read as unset; see [`crate::host_env`]).
    pub env_not_allowed: BTreeSet<String>,
}

impl ProviderSpec {
    /// The provider of `extension`, if it has an `mcp` block: its headers and environment
    /// values take the host's variables that `allowed` names (see [`crate::host_env`]),
    /// never written anywhere.
    #[must_use]
    pub fn of(extension: &Extension, host: &HostEnv, allowed: &AllowedEnv) -> Option<Self> {
        let mcp = extension.manifest.mcp.as_ref()?;
        let mut refused = BTreeSet::new();
        let Some(url) = mcp.remote_url() else {
            let spec = Self::of_mcp(
                extension.id(),
                &allowed.expand_env(extension.id(), mcp, &mut refused),
                &extension.dir,
                host,
            );
            return Some(Self { env_not_allowed: refused, ..spec });
        };
        let headers = allowed.expand_headers(extension.id(), &mcp.headers, &mut refused);
        let remote = Remote { url: url.to_owned(), headers };
        let timeout = Duration::from_secs(u64::from(mcp.timeout_sec));
        let spec = Self::of_remote(extension.id(), &mcp.effective_namespace(extension.id()), remote, timeout);
        Some(Self { env_not_allowed: refused, ..spec })
    }

    /// The provider `id` that runs as `mcp` says, in `dir`.
    #[must_use]
    pub fn of_mcp(id: &str, mcp: &butler_catalog::manifest::Mcp, dir: &Path, host: &HostEnv) -> Self {
        let launch = Launch::argv(&mcp.command, mcp.cwd.as_deref(), &mcp.env, dir, host)
            .map(|l| l.scrubbed(&[("BUTLER_MCP_CHANNEL", "butler-hub")]));
        Self {
            id: id.to_owned(),
            namespace: mcp.effective_namespace(id),
            transport: Arc::new(Stdio { launch, source: (mcp.clone(), dir.to_owned()) }),
            timeout: Duration::from_secs(u64::from(mcp.timeout_sec)),
            probe: true,
            call_meta: None,
            on_main: true,
            env_not_allowed: BTreeSet::new(),
        }
    }

    /// The provider `id` that is the remote server `remote`, under `namespace`.
    #[must_use]
    pub fn of_remote(id: &str, namespace: &str, remote: Remote, timeout: Duration) -> Self {
        Self::with_transport(id, namespace, Arc::new(remote), timeout)
    }

    /// The provider `id` reached through `transport`, under `namespace`.
    #[must_use]
    pub fn with_transport(id: &str, namespace: &str, transport: Arc<dyn Transport>, timeout: Duration) -> Self {
        Self {
            id: id.to_owned(),
            namespace: namespace.to_owned(),
            transport,
            timeout,
            probe: true,
            call_meta: None,
            on_main: true,
            env_not_allowed: BTreeSet::new(),
        }
    }

    /// Why it cannot start at all, if it cannot.
    #[must_use]
    pub fn cannot_start(&self) -> Option<String> {
        self.transport.unavailable()
    }

    /// Same manifest block and folder, asked the same way and offered the same way.
    #[must_use]
    pub fn same_source(&self, other: &Self) -> bool {
        self.transport.same_as(&*other.transport)
            && self.probe == other.probe
            && self.call_meta == other.call_meta
            && self.on_main == other.on_main
    }
}

/// Where a provider's lists are cached (`stateDir/mcp/<id>.json`), and which of its
/// lists the file holds.
struct ListCache {
    path: PathBuf,
    /// The generation of the lists last written.
    written: Arc<Mutex<u64>>,
    /// The generation of the lists last stored.
    stored: AtomicU64,
}

/// What a provider offers, as it listed it (kept in `stateDir/mcp/<id>.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Lists {
    /// `tools/list`.
    pub tools: Vec<Value>,
    /// `prompts/list`.
    pub prompts: Vec<Value>,
    /// `resources/list`.
    pub resources: Vec<Value>,
    /// `resources/templates/list`.
    #[serde(rename = "resourceTemplates")]
    pub resource_templates: Vec<Value>,
    /// What it tells its clients of itself (its `initialize` or `server/discover` answer's
    /// `instructions`), for the endpoints that offer it to pass on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// What it withholds from the clients of each capability set learned so far, by the
    /// set's [`CapabilitySet::key`] (see [`super::capability_sets`]); forgotten when the
    /// lists above change.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub withheld: BTreeMap<String, Withheld>,
    /// `skills/list`, when it declares the Skills extension (see the `skills` module): the
    /// entries as it gives them, its files never fetched ahead of need.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<Value>,
}

impl Lists {
    /// The four lists, borrowed, for comparing with another set's.
    #[must_use]
    pub fn listing(&self) -> Listing<'_> {
        Listing {
            tools: &self.tools,
            prompts: &self.prompts,
            resources: &self.resources,
            resource_templates: &self.resource_templates,
        }
    }
}

/// A provider's run state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Not started yet (providers start on first need).
    Idle,
    /// Being started.
    Starting,
    /// Running and listed.
    Ready,
    /// Exited or failed to start; restarts after 5 s (or on the next need).
    Crashed,
    /// Removed or replaced.
    Stopped,
}

/// Why a provider could not be started; its text is the `last_error` of `/mcp/status`.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// It was removed from the catalog (or replaced).
    #[error("the provider was removed")]
    Removed,
    /// It was stopped on request and stays stopped until started.
    #[error("it was stopped on request; start it with `butler mcp start {id}` or POST /mcp/providers/{id}/start")]
    Held {
        /// The provider.
        id: String,
    },
    /// It failed recently and is not retried yet: the last failure, as it was said, and
    /// when it is tried again (so a call that had nothing to do with the failure is told
    /// it waits for a restart, not only what went wrong before).
    #[error("{last}; it is started again in {} s", .retry_in.as_millis().div_ceil(1000).max(1))]
    Pausing {
        /// The last failure.
        last: String,
        /// How long until the next start may be tried.
        retry_in: Duration,
    },
    /// The start, handshake and lists together took too long.
    #[error("it did not start and list its tools within {} s", .0.as_secs())]
    Timeout(Duration),
    /// The task that started it panicked or was cancelled.
    #[error("its start failed: {0}")]
    Aborted(tokio::task::JoinError),
    /// Its transport could not open a connection (spawn, dial).
    #[error(transparent)]
    Open(#[from] super::upstream::OpenError),
    /// A remote server's connection closed during the handshake.
    #[error("{0}")]
    Closed(String),
    /// It exited on being asked `server/discover`.
    #[error("it stopped when asked server/discover ({0}); the next start uses initialize")]
    ExitedOnDiscover(String),
    /// `initialize` was refused or not answered.
    #[error("initialize failed: {0}")]
    Initialize(CallFailure),
    /// `notifications/initialized` could not be sent.
    #[error("initialized failed: {0}")]
    Initialized(WriteError),
    /// `tools/list` was refused or not answered.
    #[error("tools/list failed: {0}")]
    ToolsList(CallFailure),
    /// It did not give its lists in time.
    #[error("it did not list within {} s", .0.as_secs())]
    ListTimeout(Duration),
}

/// Why a call did not get the provider's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum CallFailure {
    /// The provider could not be started.
    Unavailable(String),
    /// No answer within the provider's `timeoutSec`.
    Timeout(Duration),
    /// The provider exited while the call was in flight.
    Crashed(String),
    /// The caller cancelled it.
    Cancelled,
    /// The provider answered with a JSON-RPC error.
    Error(Value),
    /// A 2026-07-28 provider asked for input the client could not give (see
    /// [`Provider::call`]).
    Unanswered(String),
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unavailable(why) => write!(f, "the provider is unavailable: {why}"),
            Self::Timeout(limit) => write!(f, "the provider did not answer within {} s", limit.as_secs()),
            Self::Crashed(why) => write!(f, "the provider stopped during the call ({why})"),
            Self::Cancelled => f.write_str("the call was cancelled"),
            Self::Unanswered(why) => f.write_str(why),
            Self::Error(error) => {
                write!(
                    f,
                    "{}",
                    error.get("message").and_then(Value::as_str).unwrap_or("the provider returned an error")
                )
            }
        }
    }
}

type Reply = Result<Answer, CallFailure>;

/// One running provider: its pipe and what is in flight on it.
pub struct Conn {
    stdin: LineWriter<Writer>,
    /// The hub's requests waiting for their answers, each marked with whether its caller
    /// takes the result as its provider wrote it (a `tools/call`: see [`Answer`]).
    calls: Arc<Calls<Reply, bool>>,
    /// Where each call in flight that takes them sends its upcalls, by the hub's request id.
    upcalls: Mutex<FastMap<u64, Upcalls>>,
    /// The provider's requests waiting for a client's answer (at most [`upcall::QUEUE`]).
    asking: std::sync::atomic::AtomicUsize,
    /// How long a request of the provider's may wait for the client's answer.
    timeout: Duration,
    /// The provider's namespace, which its log messages' `logger` starts with.
    namespace: String,
    peer: tokio::sync::Mutex<Box<dyn End>>,
    /// Its keeper's process group (none for a remote server).
    group: Option<u32>,
    /// Whether it speaks 2026-07-28 (set while it is asked `server/discover`).
    speaks_2026: AtomicBool,
    /// Its `subscriptions/listen` request (2026-07-28).
    listen: Mutex<Listen>,
    /// What it said of itself (at `initialize`, or in its `server/discover` answer).
    declared: std::sync::OnceLock<Declared>,
    /// When it was started (the process spawned, the remote server dialled), ms since the
    /// epoch, and the same moment on the monotonic clock for its uptime.
    started_at: u64,
    started: Instant,
}

/// A 2026-07-28 provider's one `subscriptions/listen` request: what it asks to be told, and
/// its id while it is open (it is sent again, the old one cancelled, when the resources
/// clients subscribe to change).
#[derive(Debug, Default)]
struct Listen {
    id: Option<u64>,
    /// The list changes it is asked for (`toolsListChanged`, …), as its capabilities offer.
    changes: Vec<&'static str>,
    /// The resources clients subscribe to, by the provider's own URIs.
    uris: BTreeSet<String>,
    /// Whether its capabilities offer resource subscriptions (`resources.subscribe`).
    subscribes: bool,
}

impl Conn {
    fn take_id(&self) -> u64 {
        self.calls.take_id()
    }

    async fn send(&self, message: &Value) -> Result<(), WriteError> {
        let mut line = serde_json::to_vec(message).map_err(|e| WriteError::Io(std::io::Error::other(e)))?;
        line.push(b'\n');
        self.write_line(line, WRITE_TIMEOUT).await
    }

    /// Writes `line` to the provider's stdin within `limit`, whole (see
    /// [`LineWriter::write_line`]): a provider that stopped reading fills the pipe, and then
    /// its callers fail instead of waiting.
    async fn write_line(&self, line: Vec<u8>, limit: Duration) -> Result<(), WriteError> {
        self.stdin.write_line(line, limit).await
    }

    /// Sends a request and waits for its answer, at most `limit`; a timeout cancels it on
    /// the provider. `upcalls` receives the provider's progress for it (its token is the
    /// request's id) and its requests for the client.
    /// A provider of 2026-07-28 hears of the client as `asker` says, in the request's envelope.
    async fn request(
        &self,
        (method, params): (&str, Value),
        upcalls: Option<Upcalls>,
        asker: &Asker<'_>,
        limit: Duration,
        started: impl FnOnce(u64),
    ) -> Reply {
        let call = self.calls.begin(method == methods::TOOLS_CALL).map_err(|e| CallFailure::Crashed(e.to_string()))?;
        let id = call.id();
        // The request's id is its progress token, when its client takes progress.
        let token = upcalls.and_then(|sink| {
            let progress = sink.wants_progress();
            lock(&self.upcalls).insert(id, sink);
            progress.then_some(id)
        });
        started(id);
        let envelope = self.speaks_2026().then(|| super::framing::envelope(&asker.capabilities(), asker.log_level));
        let line = super::framing::provider_request(id, method, params, token, envelope.as_ref());
        let began = tokio::time::Instant::now();
        if let Err(e) = self.write_line(line, limit).await {
            return Err(match e {
                WriteError::TimedOut(_) => CallFailure::Timeout(limit),
                WriteError::Io(e) => CallFailure::Crashed(format!("cannot write to it: {e}")),
            });
        }
        // Dropped with this future too (a cancelled call), so no upcall outlives its call
        // (and the call itself, dropped, waits no more).
        let _forget = Forget { conn: self, id };
        match call.wait_until(began + limit).await {
            Ok(reply) => reply,
            Err(RpcError::Closed(why)) => Err(CallFailure::Crashed(why)),
            Err(RpcError::Busy { .. }) => Err(CallFailure::Crashed("its pipe closed".to_owned())),
            Err(RpcError::Timeout) => {
                let reason = format!("timed out after {} s", limit.as_secs());
                let cancel = json!({"jsonrpc": "2.0", "method": methods::CANCELLED,
                                    "params": {"requestId": id, "reason": reason}});
                // Told at once or not at all: a provider that reads nothing holds no caller.
                let _ = self.write_line(format!("{cancel}\n").into_bytes(), Duration::from_secs(1)).await;
                Err(CallFailure::Timeout(limit))
            }
        }
    }

    async fn notify(&self, method: &str, params: Value) -> Result<(), WriteError> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params})).await
    }

    /// Whether it speaks 2026-07-28.
    fn speaks_2026(&self) -> bool {
        self.speaks_2026.load(Ordering::Acquire)
    }

    /// Sends its `subscriptions/listen` request again with what [`Listen`] holds now (none
    /// when it asks for nothing), and cancels the one open before.
    async fn relisten(&self) {
        let (open, fresh) = {
            let mut listen = lock(&self.listen);
            let open = listen.id.take();
            let mut notifications: serde_json::Map<String, Value> =
                listen.changes.iter().map(|change| ((*change).to_owned(), json!(true))).collect();
            if !listen.uris.is_empty() {
                notifications.insert("resourceSubscriptions".into(), json!(listen.uris));
            }
            let fresh = (!notifications.is_empty()).then(|| {
                let id = self.take_id();
                listen.id = Some(id);
                (id, json!({"notifications": notifications}))
            });
            (open, fresh)
        };
        if let Some(open) = open {
            let _ = self.notify(methods::CANCELLED, json!({"requestId": open})).await;
        }
        if let Some((id, params)) = fresh {
            // Open for as long as the provider runs: nobody waits for its answer.
            let envelope = super::framing::envelope(&upcall::routed_capabilities(), None);
            let line =
                super::framing::provider_request(id, methods::SUBSCRIPTIONS_LISTEN, params, None, Some(&envelope));
            let _ = self.write_line(line, WRITE_TIMEOUT).await;
        }
    }

    /// `resources/subscribe` or `resources/unsubscribe` of a 2026-07-28 provider (which has
    /// neither): the URI joins or leaves its `subscriptions/listen` request.
    async fn subscription(&self, method: &str, params: &Value) -> Reply {
        let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
        let changed = {
            let mut listen = lock(&self.listen);
            if !listen.subscribes {
                return Err(CallFailure::Error(
                    json!({"code": -32601, "message": "this provider does not offer resource subscriptions"}),
                ));
            }
            if method == methods::RESOURCES_SUBSCRIBE
                && listen.uris.len() >= MAX_LISTENED
                && !listen.uris.contains(&uri)
            {
                return Err(refused(format!("this provider already follows {MAX_LISTENED} resources for clients")));
            }
            if method == methods::RESOURCES_SUBSCRIBE { listen.uris.insert(uri) } else { listen.uris.remove(&uri) }
        };
        if changed {
            self.relisten().await;
        }
        Ok(Answer::Read(json!({})))
    }

    /// The caller cancelled request `id`: tell the provider and end the wait.
    pub async fn cancel(&self, id: u64, reason: Option<String>) {
        self.calls.answer(id, |_| Err(CallFailure::Cancelled));
        let mut params = json!({"requestId": id});
        if let Some(reason) = reason {
            params["reason"] = json!(reason);
        }
        let _ = self.notify(methods::CANCELLED, params).await;
    }

    /// The answer to the hub's request `id` (its result, or its error), to whoever waits for
    /// it: `reply` makes it, told whether they take a result as its provider wrote it.
    fn reply(&self, id: u64, reply: impl FnOnce(bool) -> Result<Answer, Value>) {
        self.calls.answer(id, |verbatim| reply(*verbatim).map_err(CallFailure::Error));
    }

    /// Routes one message from `provider`.
    async fn dispatch(self: &Arc<Self>, message: Value, provider: &Arc<Provider>) {
        match super::framing::provider_route(message) {
            ProviderRoute::Reply { id, reply } => self.reply(id, |_| reply.map(Answer::Read)),
            ProviderRoute::Answer(answer) => {
                let _ = self.send(&answer).await;
            }
            ProviderRoute::Request { id, method, params } => self.ask_client(id, method, params).await,
            ProviderRoute::Progress { token, params } => {
                if let Some(sink) = lock(&self.upcalls).get(&token).cloned() {
                    // A client that reads too slowly loses progress, never the reader.
                    let _ = sink.try_send(Upcall::Progress(params));
                }
            }
            ProviderRoute::ListChanged => provider.relist(),
            ProviderRoute::ResourceUpdated(uri) => {
                let _ = provider.updated.send(crate::Updated { provider: provider.spec.id.clone(), uri });
            }
            ProviderRoute::Log(mut params) => {
                let logger = params.get("logger").and_then(Value::as_str).map(str::to_owned);
                params["logger"] = json!(match logger {
                    Some(logger) => format!("{}/{logger}", self.namespace),
                    None => self.namespace.clone(),
                });
                // stdio does not say which call a log message is about: the oldest in flight;
                // with none in flight it is about none, and goes to whoever takes those.
                match self.oldest_caller() {
                    Some(sink) => {
                        let _ = sink.try_send(Upcall::Log(params));
                    }
                    None => {
                        let _ = provider.logged.send(crate::Logged { provider: provider.spec.id.clone(), params });
                    }
                }
            }
            ProviderRoute::Ignored => {}
        }
    }

    /// Where the oldest call in flight that takes upcalls sends them — the oldest of those
    /// that run, when any does.
    fn oldest_caller(&self) -> Option<Upcalls> {
        let upcalls = lock(&self.upcalls);
        // A call that runs before a parked one: the parked one's client may never come back.
        upcalls
            .iter()
            .filter(|(_, sink)| !sink.is_closed())
            .min_by_key(|(call, sink)| (sink.is_parked(), **call))
            .map(|(_, s)| s.clone())
    }

    /// Passes the provider's request `id` to the client of the oldest call in flight that
    /// takes upcalls, and its answer back when it comes (within the provider's
    /// `timeoutSec`); refuses it at once when no such call is in flight or too many of the
    /// provider's requests already wait.
    async fn ask_client(self: &Arc<Self>, id: Value, method: String, params: Value) {
        let Some(sink) = self.oldest_caller() else {
            let why = format!(
                "no client call is in flight to take `{method}` (the hub passes a provider's requests only to the client whose call is running)"
            );
            let _ = self.send(&refusal(&id, why)).await;
            return;
        };
        if self.asking.fetch_add(1, Ordering::AcqRel) >= upcall::QUEUE {
            self.asking.fetch_sub(1, Ordering::AcqRel);
            let why = format!("more than {} requests of this provider already wait for the client", upcall::QUEUE);
            let _ = self.send(&refusal(&id, why)).await;
            return;
        }
        let (asked, answer) = Asked::new(method.clone(), params);
        if sink.try_send(Upcall::Request(asked)).is_err() {
            self.asking.fetch_sub(1, Ordering::AcqRel);
            let _ = self.send(&refusal(&id, "the client's queue is full".to_owned())).await;
            return;
        }
        let conn = Arc::clone(self);
        tokio::spawn(async move {
            let limit = conn.timeout;
            let message = match tokio::time::timeout(limit, answer).await {
                Ok(Ok(Ok(result))) => object([("jsonrpc", "2.0".into()), ("id", id), ("result", result)]),
                Ok(Ok(Err(error))) => object([("jsonrpc", "2.0".into()), ("id", id), ("error", error)]),
                Ok(Err(_)) => refusal(&id, format!("the client's call ended before it answered `{method}`")),
                Err(_) => refusal(&id, format!("the client did not answer `{method}` within {} s", limit.as_secs())),
            };
            conn.asking.fetch_sub(1, Ordering::AcqRel);
            let _ = conn.send(&message).await;
        });
    }

    /// Fails every call in flight (the process is gone).
    fn fail_all(&self, why: &str) {
        self.calls.close(why);
        lock(&self.upcalls).clear();
    }
}

/// Reads a probe's pipe ([`Provider::probe`]) until it closes: answers reach their
/// requests, a request of the provider's is refused, anything else is dropped.
async fn replies_only(conn: Arc<Conn>, stdout: Reader) {
    let mut reader = LineReader::new(stdout, MAX_LINE, 8 * 1024);
    while let Ok(Some(line)) = reader.next_line().await {
        if let Some((id, reply)) = provider_reply(line) {
            conn.reply(id, |verbatim| reply.map(|written| written.answer(verbatim)));
        } else if let ProviderLine::Message(message) = provider_line(line)
            && let ProviderRoute::Request { id, method, .. } = super::framing::provider_route(message)
        {
            let _ =
                conn.send(&refusal(&id, format!("`{method}` is not answered while the hub learns the lists"))).await;
        }
    }
    conn.fail_all("its pipe closed");
}

/// A 2026-07-28 provider's answer as the client gets it: without the protocol's keys in
/// `_meta` (the provider's identity and the like: the hub is the server clients talk to)
/// and without cache hints (the hub gives its own); for a client of the 2025 revisions
/// without `resultType: "complete"` either. A verbatim answer has none of these keys.
fn for_the_client(answer: Answer, asker: &Asker<'_>) -> Answer {
    let Answer::Read(mut answer) = answer else { return answer };
    let Some(fields) = answer.as_object_mut() else { return Answer::Read(answer) };
    if let Some(meta) = fields.get_mut("_meta").and_then(Value::as_object_mut) {
        // The protocol's own keys are about the server the client talks to: the hub.
        meta.retain(|key, _| !key.starts_with("io.modelcontextprotocol/"));
        if meta.is_empty() {
            fields.remove("_meta");
        }
    }
    // Cache hints are the hub's to give (its lists and endpoints have their own).
    fields.remove("ttlMs");
    fields.remove("cacheScope");
    if !asker.stateless_2026 && fields.get("resultType").and_then(Value::as_str) == Some("complete") {
        fields.remove("resultType");
    }
    Answer::Read(answer)
}

/// A call failed by the hub itself, saying why.
fn refused(why: impl Into<String>) -> CallFailure {
    CallFailure::Unanswered(why.into())
}

/// The 2025 revisions' handshake with a starting provider, declaring `capabilities` (the
/// hub's own: [`upcall::routed_capabilities`]; a probe's: its set's); its answer.
async fn initialize(conn: &Conn, capabilities: Value) -> Result<Value, StartError> {
    let init = json!({
        "protocolVersion": PROVIDER_PROTOCOL,
        "capabilities": capabilities,
        "clientInfo": {"name": "butler", "version": env!("CARGO_PKG_VERSION")},
    });
    let answer = conn
        .request((methods::INITIALIZE, init), None, &Asker::hub(), START_TIMEOUT, |_| {})
        .await
        .map(Answer::into_value)
        .map_err(StartError::Initialize)?;
    conn.notify(methods::INITIALIZED, json!({})).await.map_err(StartError::Initialized)?;
    Ok(answer)
}

/// What a provider said of itself when it started: its capabilities (which lists it is
/// asked for) and its instructions for clients.
#[derive(Debug, Clone, Default)]
struct Declared {
    capabilities: Value,
    instructions: Option<String>,
}

impl Declared {
    /// What an `initialize` or `server/discover` answer says.
    fn of(answer: &Value) -> Self {
        Self {
            capabilities: answer.get("capabilities").cloned().unwrap_or(Value::Null),
            instructions: answer.get("instructions").and_then(Value::as_str).map(str::to_owned),
        }
    }
}

/// The error answer to the provider's request `id`.
fn refusal(id: &Value, why: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": why}})
}

/// A provider's start, run as a task of the hub's runtime and awaited from anywhere:
/// dropped unfinished (a timeout, a caller gone), it is cancelled, as an awaited future
/// would be.
struct Launching(tokio::task::JoinHandle<Result<Arc<Conn>, StartError>>);

impl std::future::Future for Launching {
    type Output = Result<Arc<Conn>, StartError>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|joined| joined.unwrap_or_else(|e| Err(StartError::Aborted(e))))
    }
}

impl Drop for Launching {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Forgets a request's upcall channel when its wait ends, however it ends.
struct Forget<'a> {
    conn: &'a Conn,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.conn.upcalls).remove(&self.id);
    }
}

/// Counters for the status.
#[derive(Debug, Default)]
struct Stats {
    calls: u64,
    errors: u64,
    timeouts: u64,
    latencies_us: std::collections::VecDeque<u64>,
}

/// What a provider's status shows.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The extension id.
    pub id: String,
    /// Its namespace.
    pub namespace: String,
    /// Run state.
    pub state: State,
    /// The provider's pid while it runs.
    pub pid: Option<u32>,
    /// While it runs: when this run started (its process, or its connection to a remote
    /// server), ms since the epoch.
    pub started_at: Option<u64>,
    /// While it runs: how long this run has lasted, in ms.
    pub uptime_ms: Option<u64>,
    /// The protocol revision it is spoken to with, while it runs.
    pub protocol: Option<&'static str>,
    /// A remote server's URL, as it may be shown (no user, query or fragment).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Public tool names (from the cache until it first runs).
    pub tools: Vec<String>,
    /// Tools not exposed, and why.
    pub rejected: Vec<Rejected>,
    /// The last failure.
    pub last_error: Option<String>,
    /// Whether the lists shown come from the cache of an earlier run.
    pub cached: bool,
    /// Whether it is still starting for a list that answered without it (it did not list
    /// within [`crate::LIST_WAIT`]).
    pub pending: bool,
    /// Whether a list answered without it during this start of it: lists no longer wait
    /// for it until it has listed or is started again.
    pub missed_list_wait: bool,
    /// Calls routed to it.
    pub calls: u64,
    /// Calls that failed (error, crash, timeout).
    pub errors: u64,
    /// Calls that timed out.
    pub timeouts: u64,
    /// Median call latency over the last 256 calls, ms.
    pub p50_ms: Option<f64>,
    /// Slowest of the last 256 calls, ms.
    pub max_ms: Option<f64>,
}

/// A tool that is not exposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejected {
    /// Its name as the provider gives it.
    pub tool: String,
    /// Why.
    pub reason: String,
}

struct Inner {
    state: State,
    conn: Option<Arc<Conn>>,
    lists: Lists,
    /// Whether `lists` came from the cache of an earlier run.
    cached: bool,
    /// Whether `lists` are known at all (from the cache or a run): a provider whose lists
    /// are known is not started just to list them.
    known: bool,
    last_error: Option<String>,
    failed_at: Option<Instant>,
    /// When a call last began or ended (for the idle stop).
    last_used: Instant,
    /// Calls begun and not ended, counted before the provider is even started: one that is
    /// starting keeps it from the idle stop.
    active: u32,
    /// Stopped on request: calls are refused until it is started again.
    held: bool,
    /// Starts that failed in a row (each doubles the pause before the next).
    failures: u32,
    /// It exited when asked `server/discover`: it is spoken to with `initialize` only.
    skip_probe: bool,
}

/// One provider.
pub struct Provider {
    /// What it runs.
    pub spec: Arc<ProviderSpec>,
    inner: Mutex<Inner>,
    start_lock: tokio::sync::Mutex<()>,
    /// Its stderr and the hub's notes about it.
    pub log: Arc<Log>,
    cache: ListCache,
    changed: broadcast::Sender<crate::Changed>,
    /// Told when a resource it offers changed.
    updated: broadcast::Sender<crate::Updated>,
    /// Told of the log messages it sends outside any call.
    logged: broadcast::Sender<crate::Logged>,
    /// Bumped whenever any provider's lists change (the hub's routing cache key).
    epoch: Arc<AtomicU64>,
    stats: Mutex<Stats>,
    removed: AtomicBool,
    relist: Mutex<Relist>,
    /// Whether a start that a list asked for runs in a task of its own
    /// ([`Self::start_for_a_list`]); at most one at a time.
    list_start: AtomicBool,
    /// Told when such a start ends.
    list_started: tokio::sync::Notify,
    /// Whether a list answered without it during the start [`Self::start_for_a_list`] made
    /// last: later lists do not wait for that start.
    list_missed: AtomicBool,
    /// The capability sets whose lists are being learned, or wanted once it has listed.
    learning: Mutex<Learning>,
    /// Told when the learning of a set ends.
    learned: tokio::sync::Notify,
    /// Where it runs.
    io: Io,
}

/// Why what a provider lists to a capability set was not learned.
enum Unlearned {
    /// It does not run (stopped, failing to start): nothing is known of it.
    Unavailable,
    /// It runs, and its lists for the set could not be had.
    Failed(StartError),
}

/// The capability sets a provider's lists are learned for ([`Provider::learn`]).
#[derive(Default)]
struct Learning {
    /// Being learned now.
    running: BTreeSet<CapabilitySet>,
    /// Asked for before it had listed: learned once it has.
    wanted: BTreeSet<CapabilitySet>,
    /// Those a list answered without (lists no longer wait for them until learned).
    missed: BTreeSet<CapabilitySet>,
}

/// Where providers run: the runtime whose thread reads and writes their pipes
/// ([`crate::Settings::io`]), and what connects to remote servers ([`crate::Settings::dialer`]).
#[derive(Clone)]
pub struct Io {
    /// The runtime providers are started on.
    pub runtime: tokio::runtime::Handle,
    /// Connects to remote servers (none: they cannot be reached).
    pub dialer: Option<Arc<dyn Dialer>>,
}

impl Provider {
    /// A provider, idle until first needed; its last lists come from `cache_dir` if any.
    #[must_use]
    pub fn new(
        spec: Arc<ProviderSpec>,
        cache_dir: &std::path::Path,
        logs_dir: &std::path::Path,
        (changed, updated, logged): (
            broadcast::Sender<crate::Changed>,
            broadcast::Sender<crate::Updated>,
            broadcast::Sender<crate::Logged>,
        ),
        epoch: Arc<AtomicU64>,
        io: Io,
    ) -> Arc<Self> {
        let cache = cache_dir.join(format!("{}.json", spec.id));
        let lists: Option<Lists> = std::fs::read(&cache).ok().and_then(|b| serde_json::from_slice(&b).ok());
        Arc::new(Self {
            log: Arc::new(Log::new(logs_dir.join(format!("mcp-{}.log", spec.id)))),
            inner: Mutex::new(Inner {
                state: State::Idle,
                conn: None,
                cached: lists.is_some(),
                known: lists.is_some(),
                lists: lists.unwrap_or_default(),
                last_error: None,
                failed_at: None,
                last_used: Instant::now(),
                active: 0,
                held: false,
                failures: 0,
                skip_probe: false,
            }),
            spec,
            start_lock: tokio::sync::Mutex::new(()),
            cache: ListCache { path: cache, written: Arc::new(Mutex::new(0)), stored: AtomicU64::new(0) },
            changed,
            updated,
            logged,
            epoch,
            stats: Mutex::new(Stats::default()),
            removed: AtomicBool::new(false),
            relist: Mutex::new(Relist::default()),
            list_start: AtomicBool::new(false),
            list_started: tokio::sync::Notify::new(),
            list_missed: AtomicBool::new(false),
            learning: Mutex::new(Learning::default()),
            learned: tokio::sync::Notify::new(),
            io,
        })
    }

    /// Starts it, when its lists are not known yet, in a task of its own (one at a time),
    /// so that a list can wait for it for a while ([`Self::wait_listed`]) and answer
    /// without it when it is slow: the start goes on, and the lists it brings are
    /// announced as a change.
    pub fn start_for_a_list(self: &Arc<Self>) {
        if self.listed() || self.list_start.swap(true, Ordering::AcqRel) {
            return;
        }
        // A new start: lists wait for it (once) again.
        self.list_missed.store(false, Ordering::Release);
        let provider = Arc::clone(self);
        self.io.runtime.spawn(async move {
            let _ = provider.ensure().await;
            provider.list_start.store(false, Ordering::Release);
            provider.list_started.notify_waiters();
            let wanted = std::mem::take(&mut lock(&provider.learning).wanted);
            for set in wanted {
                provider.learn(set);
            }
        });
    }

    /// Whether a list waits for it to list for clients of `set` (`Hub`'s lists): not
    /// when a list already answered without it during its current start (or learning).
    #[must_use]
    pub fn awaited(&self, set: CapabilitySet) -> bool {
        if !self.listed() {
            return !self.list_missed.load(Ordering::Acquire);
        }
        self.knows(set) || !lock(&self.learning).missed.contains(&set)
    }

    /// A list for clients of `set` answered without it: later ones do not wait for it
    /// until it has listed (or starts again) and what it lists to `set` is learned.
    pub fn missed_a_list(&self, set: CapabilitySet) {
        if !self.listed() {
            self.list_missed.store(true, Ordering::Release);
        }
        if !self.knows(set) {
            lock(&self.learning).missed.insert(set);
        }
    }

    /// Until what it lists to clients of `set` is known, or the learning that would tell
    /// has ended ([`Self::learn`]; the caller bounds the wait).
    pub async fn wait_learned(&self, set: CapabilitySet) {
        loop {
            let ended = self.learned.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.knows(set) || !lock(&self.learning).running.contains(&set) {
                return;
            }
            ended.await;
        }
    }

    /// Starts what would tell its lists for clients of `set`, when they are not known: a
    /// start ([`Self::start_for_a_list`]), after which `set` is learned, or the learning
    /// ([`Self::learn`]).
    pub fn prepare(self: &Arc<Self>, set: CapabilitySet) {
        if !self.listed() {
            if set != CapabilitySet::FULL {
                lock(&self.learning).wanted.insert(set);
            }
            self.start_for_a_list();
        } else if !self.knows(set) {
            self.learn(set);
        }
    }

    /// Whether what it lists to clients of `set` is known.
    #[must_use]
    pub fn knows(&self, set: CapabilitySet) -> bool {
        set == CapabilitySet::FULL || lock(&self.inner).lists.withheld.contains_key(&set.key())
    }

    /// What a client of `set` is shown of its lists: all but what it withholds from that
    /// set — or, not known yet, from the most capable set learned that `set` covers —
    /// and nothing when no such set is learned.
    #[must_use]
    pub fn shown(&self, set: CapabilitySet) -> Shown {
        Shown::to(set, &lock(&self.inner).lists.withheld)
    }

    /// Learns, in a task of its own (one per set at a time), what it lists to clients of
    /// `set`: a 2026-07-28 provider is asked with `set`'s capabilities in the envelope, one
    /// of the 2025 revisions is probed ([`Self::probe`]). Clients are told of the lists it
    /// narrows. A set that cannot be learned is shown the lists whole (the log says why).
    pub fn learn(self: &Arc<Self>, set: CapabilitySet) {
        if self.knows(set) || !lock(&self.learning).running.insert(set) {
            return;
        }
        let provider = Arc::clone(self);
        self.io.runtime.spawn(async move {
            let withheld = match provider.lists_for(set).await {
                Ok(narrower) => Withheld::between(provider.lists().listing(), narrower.listing()),
                // It does not run: nothing is learned, and the next list tries again.
                Err(Unlearned::Unavailable) => {
                    let mut learning = lock(&provider.learning);
                    learning.running.remove(&set);
                    drop(learning);
                    provider.learned.notify_waiters();
                    return;
                }
                Err(Unlearned::Failed(why)) => {
                    provider.log.note(format!(
                        "cannot learn what it lists to clients that declare {} ({why}): they see its lists whole",
                        set.key()
                    ));
                    Withheld::default()
                }
            };
            let told = withheld.narrows();
            lock(&provider.inner).lists.withheld.insert(set.key(), withheld);
            let missed = {
                let mut learning = lock(&provider.learning);
                learning.running.remove(&set);
                learning.missed.remove(&set)
            };
            provider.cache_lists();
            provider.learned.notify_waiters();
            // A client that was shown less while it was learned lists again.
            let changed = if missed { crate::Changed::ALL } else { told };
            if changed.any() {
                let _ = provider.changed.send(changed);
            }
        });
    }

    /// Its lists as it gives them to clients of `set`, within [`START_TIMEOUT`] once it runs.
    async fn lists_for(self: &Arc<Self>, set: CapabilitySet) -> Result<Lists, Unlearned> {
        let conn = self.ensure().await.map_err(|_| Unlearned::Unavailable)?;
        let late = |_| StartError::ListTimeout(START_TIMEOUT);
        let listed = if conn.speaks_2026() {
            let declared = conn.declared.get().cloned().unwrap_or_default();
            let capabilities = set.declared();
            let asker = Asker::stateless_2026(&capabilities, None);
            tokio::time::timeout(START_TIMEOUT, list_all(&conn, &declared, &asker))
                .await
                .unwrap_or_else(|e| Err(late(e)))
        } else {
            self.probe(set).await
        };
        listed.map_err(Unlearned::Failed)
    }

    /// A provider of the 2025 revisions as a client of `set` sees it: a second connection
    /// of it (another process, another session of a remote server), initialized declaring
    /// `set`'s capabilities, asked its lists and closed. It answers nothing the provider
    /// asks meanwhile.
    async fn probe(&self, set: CapabilitySet) -> Result<Lists, StartError> {
        self.log.note(format!("probing what it lists to clients that declare {}", set.key()));
        let Connection { writer, reader, end, group } = self.open(true)?;
        let conn = Arc::new(self.conn(writer, end, group));
        let reader = tokio::spawn(replies_only(Arc::clone(&conn), reader));
        let listed = async {
            let answer = initialize(&conn, set.declared()).await?;
            list_all(&conn, &Declared::of(&answer), &Asker::hub()).await
        };
        // Bounded here, so that the probe is always stopped.
        let listed = tokio::time::timeout(START_TIMEOUT, listed)
            .await
            .unwrap_or_else(|_| Err(StartError::ListTimeout(START_TIMEOUT)));
        conn.peer.lock().await.stop().await;
        reader.abort();
        listed
    }

    /// Until its lists are known or the start [`Self::start_for_a_list`] made has ended
    /// (the caller bounds the wait).
    pub async fn wait_listed(&self) {
        loop {
            let ended = self.list_started.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.listed() || !self.list_start.load(Ordering::Acquire) {
                return;
            }
            ended.await;
        }
    }

    /// Its lists as last seen (running, or cached from an earlier run).
    #[must_use]
    pub fn lists(&self) -> Lists {
        lock(&self.inner).lists.clone()
    }

    /// Its skills as last seen (without copying its other lists: every read asks).
    #[must_use]
    pub fn skills(&self) -> Vec<Value> {
        lock(&self.inner).lists.skills.clone()
    }

    /// What it tells its clients of itself, as last seen (running, or cached).
    #[must_use]
    pub fn instructions(&self) -> Option<String> {
        lock(&self.inner).lists.instructions.clone()
    }

    /// Whether its lists are known (from a run or the cache of an earlier one).
    #[must_use]
    pub fn listed(&self) -> bool {
        lock(&self.inner).known
    }

    /// Whether it has nothing in flight.
    #[must_use]
    pub fn idle(&self) -> bool {
        lock(&self.inner).conn.as_ref().is_none_or(|c| c.calls.is_empty())
    }

    /// The running connection, starting the provider if needed. Concurrent first callers
    /// share one start; a provider that failed less than 5 s ago is not retried yet.
    ///
    /// # Errors
    /// Why it cannot run.
    pub async fn ensure(self: &Arc<Self>) -> Result<Arc<Conn>, StartError> {
        if let Some(conn) = self.ready() {
            return Ok(conn);
        }
        let _one_start = self.start_lock.lock().await;
        if let Some(conn) = self.ready() {
            return Ok(conn);
        }
        if self.removed.load(Ordering::Relaxed) {
            return Err(StartError::Removed);
        }
        {
            let inner = lock(&self.inner);
            if inner.held {
                return Err(StartError::Held { id: self.spec.id.clone() });
            }
            if let (Some(at), Some(error)) = (inner.failed_at, inner.last_error.as_ref())
                && let Some(retry_in) = restart_after(inner.failures).checked_sub(at.elapsed())
                && !retry_in.is_zero()
            {
                return Err(StartError::Pausing { last: error.clone(), retry_in });
            }
        }
        lock(&self.inner).state = State::Starting;
        let (tx, rx) = oneshot::channel();
        // On the hub's runtime, whose thread then reads and writes its pipes.
        let launching = Arc::clone(self);
        let launch = Launching(self.io.runtime.spawn(async move { launching.launch(tx).await }));
        let result = match tokio::time::timeout(START_TIMEOUT, launch).await {
            Ok(result) => result,
            Err(_) => Err(StartError::Timeout(START_TIMEOUT)),
        };
        match result {
            Ok(conn) => Ok(conn),
            Err(error) => {
                // Whatever was spawned goes.
                if let Ok(conn) = rx.await {
                    conn.peer.lock().await.stop().await;
                }
                self.log.note(format!("failed to start: {error}"));
                let mut inner = lock(&self.inner);
                inner.failures = inner.failures.saturating_add(1);
                inner.state = State::Crashed;
                inner.conn = None;
                inner.last_error = Some(error.to_string());
                inner.failed_at = Some(Instant::now());
                Err(error)
            }
        }
    }

    fn ready(&self) -> Option<Arc<Conn>> {
        let inner = lock(&self.inner);
        (inner.state == State::Ready).then(|| inner.conn.clone()).flatten()
    }

    /// Spawns, initializes and lists. `spawned` gets the connection as soon as it exists,
    /// so a start that times out can still be stopped.
    ///
    /// Boxed with an explicit `Send`: launch → reader → exit → restart → launch is a cycle
    /// the compiler cannot infer `Send` through.
    fn launch(
        self: &Arc<Self>,
        spawned: oneshot::Sender<Arc<Conn>>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Arc<Conn>, StartError>> + Send + '_>> {
        Box::pin(self.launch_inner(spawned))
    }

    /// Opens a connection through its transport (starts the process, connects to the
    /// remote server). A `probe`'s process has [`PROBE_ENV`]`=1` in its environment.
    fn open(&self, probe: bool) -> Result<Connection, super::upstream::OpenError> {
        let opening = Opening { provider: &self.spec.id, log: &self.log, probe, dialer: self.io.dialer.as_ref() };
        self.spec.transport.open(&opening)
    }

    /// A connection on the pipe `stdin` of `peer`, nothing sent yet.
    fn conn(&self, stdin: Writer, peer: Box<dyn End>, group: Option<u32>) -> Conn {
        Conn {
            stdin: LineWriter::new(stdin),
            // No in-flight limit of its own: a provider's calls are bounded by the
            // sessions' (the hub's, per client).
            calls: Calls::new(usize::MAX),
            upcalls: Mutex::new(FastMap::default()),
            asking: std::sync::atomic::AtomicUsize::new(0),
            timeout: self.spec.timeout,
            namespace: self.spec.namespace.clone(),
            peer: tokio::sync::Mutex::new(peer),
            group,
            speaks_2026: AtomicBool::new(false),
            listen: Mutex::new(Listen::default()),
            declared: std::sync::OnceLock::new(),
            started_at: butler_catalog::time::now_ms(),
            started: Instant::now(),
        }
    }

    async fn launch_inner(self: &Arc<Self>, spawned: oneshot::Sender<Arc<Conn>>) -> Result<Arc<Conn>, StartError> {
        let Connection { writer, reader, end, group } = self.open(false)?;
        let conn = Arc::new(self.conn(writer, end, group));
        let _ = spawned.send(Arc::clone(&conn));
        tokio::spawn(Arc::clone(self).read(Arc::clone(&conn), reader));

        let probe = self.spec.probe && !lock(&self.inner).skip_probe;
        let answer =
            if probe { self.handshake(&conn).await? } else { initialize(&conn, upcall::routed_capabilities()).await? };
        let declared = conn.declared.get_or_init(|| Declared::of(&answer));
        let capabilities = &declared.capabilities;
        let lists = list_all(&conn, declared, &Asker::hub()).await?;
        if conn.speaks_2026() {
            let offers =
                |kind: &str, what: &str| capabilities.get(kind).and_then(|c| c.get(what)) == Some(&json!(true));
            {
                let mut listen = lock(&conn.listen);
                listen.changes = [("tools", "toolsListChanged"), ("prompts", "promptsListChanged")]
                    .into_iter()
                    .chain([("resources", "resourcesListChanged")])
                    .filter(|(kind, _)| offers(kind, "listChanged"))
                    .map(|(_, change)| change)
                    .collect();
                listen.subscribes = offers("resources", "subscribe");
            }
            conn.relisten().await;
        }
        self.store(lists);
        let mut inner = lock(&self.inner);
        inner.state = State::Ready;
        inner.conn = Some(Arc::clone(&conn));
        inner.last_error = None;
        inner.failed_at = None;
        inner.failures = 0;
        // A start counts as use: the idle time runs from here.
        inner.last_used = Instant::now();
        drop(inner);
        Ok(conn)
    }

    /// The era a starting provider speaks, and its answer (what it says of itself): it is asked
    /// `server/discover`, and speaks 2026-07-28 (then `conn` does too) when it answers with
    /// that among its versions; on any other answer it gets `initialize`. One silent for
    /// [`PROBE_TIMEOUT`] gets `initialize` too, and its era is that of the first of the two
    /// it answers as asked: a provider that is only slow to start is not taken for one of
    /// the 2025 revisions.
    ///
    /// # Errors
    /// Neither succeeded; it exited on being asked (then the next start skips the question).
    async fn handshake(&self, conn: &Conn) -> Result<Value, StartError> {
        conn.speaks_2026.store(true, Ordering::Release);
        let asked = std::sync::atomic::AtomicU64::new(0);
        let hub = Asker::hub();
        let discover = async {
            let asking = conn.request((methods::SERVER_DISCOVER, json!({})), None, &hub, START_TIMEOUT, |id| {
                asked.store(id, Ordering::Relaxed);
            });
            asking.await.map(Answer::into_value)
        };
        tokio::pin!(discover);
        let first = tokio::select! {
            answer = &mut discover => Some(answer),
            () = tokio::time::sleep(PROBE_TIMEOUT) => None,
        };
        let speaks_2026 = |answer: &Value| {
            answer
                .get("supportedVersions")
                .and_then(Value::as_array)
                .is_some_and(|versions| versions.iter().any(|v| v.as_str() == Some(super::framing::STATELESS_REVISION)))
        };
        let discovered = |answer: Value| {
            self.log.note(format!("speaks {} (it answered server/discover)", super::framing::STATELESS_REVISION));
            answer
        };
        match first {
            Some(Ok(answer)) if speaks_2026(&answer) => return Ok(discovered(answer)),
            // A remote server's connection failed: that is all there is to say.
            Some(Err(CallFailure::Crashed(why))) if self.spec.transport.fails_by_itself() => {
                return Err(StartError::Closed(why));
            }
            Some(Err(CallFailure::Crashed(why))) => {
                lock(&self.inner).skip_probe = true;
                return Err(StartError::ExitedOnDiscover(why));
            }
            Some(_) => {
                conn.speaks_2026.store(false, Ordering::Release);
                return initialize(conn, upcall::routed_capabilities()).await;
            }
            None => conn.speaks_2026.store(false, Ordering::Release),
        }
        let initialized = initialize(conn, upcall::routed_capabilities());
        tokio::pin!(initialized);
        let answered_2025 = tokio::select! {
            biased;
            answer = &mut discover => match answer {
                Ok(answer) if speaks_2026(&answer) => {
                    conn.speaks_2026.store(true, Ordering::Release);
                    return Ok(discovered(answer));
                }
                // Refused late: the handshake decides.
                _ => (&mut initialized).await,
            },
            capabilities = &mut initialized => capabilities,
        };
        // The question nobody answered waits no longer.
        conn.calls.forget(asked.load(Ordering::Relaxed));
        answered_2025
    }

    /// Writes the lists' cache on the blocking pool: the write ends with an fsync, which
    /// must never hold the hub's thread (every MCP call waits on it). When writes overlap,
    /// the newest lists stay on disk.
    fn cache_later(&self, bytes: Vec<u8>) {
        let generation = self.cache.stored.fetch_add(1, Ordering::AcqRel) + 1;
        let (path, written, id) = (self.cache.path.clone(), Arc::clone(&self.cache.written), self.spec.id.clone());
        self.io.runtime.spawn_blocking(move || {
            let mut last = lock(&written);
            if *last > generation {
                return;
            }
            if let Some(dir) = path.parent() {
                let _ = butler_catalog::files::create_private_dir(dir);
            }
            match butler_catalog::files::write_private(&path, &bytes) {
                Ok(()) => *last = generation,
                Err(e) => tracing::warn!(provider = %id, "cannot cache its lists: {e}"),
            }
        });
    }

    /// Writes its lists as they are now to the cache.
    fn cache_lists(&self) {
        let bytes = serde_json::to_vec(&lock(&self.inner).lists);
        if let Ok(bytes) = bytes {
            self.cache_later(bytes);
        }
    }

    /// Keeps fresh lists, in memory and in the cache, and tells the listeners which of
    /// them changed.
    fn store(&self, mut lists: Lists) {
        let mut inner = lock(&self.inner);
        let changed = crate::Changed::between(&inner.lists, &lists);
        // What it withholds from less capable clients holds as long as its lists do.
        if !changed.any() && inner.known {
            lists.withheld = std::mem::take(&mut inner.lists.withheld);
        }
        if let Ok(bytes) = serde_json::to_vec(&lists) {
            self.cache_later(bytes);
        }
        inner.lists = lists;
        inner.cached = false;
        inner.known = true;
        drop(inner);
        self.epoch.fetch_add(1, Ordering::Release);
        if changed.any() {
            let _ = self.changed.send(changed);
        }
    }

    /// Reads the provider's stdout (or its connection's messages) until it closes, then
    /// handles the exit.
    async fn read(self: Arc<Self>, conn: Arc<Conn>, stdout: Reader) {
        let mut reader = LineReader::new(stdout, MAX_LINE, READ_BUFFER);
        let (mut window, mut notifications) = (Instant::now(), 0u32);
        loop {
            let line = match reader.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) | Err(ReadError::Io(_)) => break,
                Err(ReadError::TooLong { .. }) => {
                    let why = format!("provider sent a message larger than {} MiB", MAX_LINE >> 20);
                    self.stop_for(&conn, why).await;
                    break;
                }
            };
            if let Some((id, reply)) = provider_reply(line) {
                conn.reply(id, |verbatim| reply.map(|written| written.answer(verbatim)));
                continue;
            }
            match provider_line(line) {
                ProviderLine::Notification(message) => {
                    if window.elapsed() > FLOOD_WINDOW {
                        (window, notifications) = (Instant::now(), 0);
                    }
                    notifications += 1;
                    if notifications > FLOOD_LIMIT {
                        let why = format!(
                            "stopped: it sent more than {FLOOD_LIMIT} notifications within {} s",
                            FLOOD_WINDOW.as_secs()
                        );
                        self.stop_for(&conn, why).await;
                        break;
                    }
                    conn.dispatch(message, &self).await;
                }
                ProviderLine::Message(message) => conn.dispatch(message, &self).await,
                ProviderLine::Blank => {}
                ProviderLine::NotJson => {
                    let text = String::from_utf8_lossy(line);
                    self.log.note(format!("not JSON-RPC on stdout (ignored): {}", text.trim_end()));
                }
            }
        }
        self.exited(conn).await;
    }

    /// The process closed its stdout (or the connection ended): fail its calls, and start
    /// it again in 5 s unless it was removed.
    async fn exited(self: Arc<Self>, conn: Arc<Conn>) {
        let why = conn.peer.lock().await.ended().await;
        conn.fail_all(&why);
        let removed = self.removed.load(Ordering::Relaxed);
        {
            let mut inner = lock(&self.inner);
            if !inner.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, &conn)) && inner.state != State::Starting {
                return;
            }
            inner.conn = None;
            inner.state = if removed { State::Stopped } else { State::Crashed };
            if !removed {
                inner.last_error = Some(format!("{} ({why})", self.ended_word()));
                inner.failed_at = Some(Instant::now());
            }
        }
        if removed {
            return;
        }
        self.log.note(format!("{} ({why}); restarting in {} s", self.ended_word(), RESTART_AFTER.as_secs()));
        // Its lists stay as they were; a restart that lists differently tells the clients.
        // Tried until it runs again (a remote server back up reconnects by itself), each
        // failed start doubling the pause, until it is stopped, removed or started anew.
        tokio::spawn(async move {
            loop {
                let failures = lock(&self.inner).failures;
                tokio::time::sleep(restart_after(failures)).await;
                let crashed = {
                    let inner = lock(&self.inner);
                    inner.state == State::Crashed && !inner.held
                };
                if !crashed || self.removed.load(Ordering::Relaxed) || self.ensure().await.is_ok() {
                    return;
                }
            }
        });
    }

    /// How its end is told: a process exits, a connection ends.
    fn ended_word(&self) -> &'static str {
        self.spec.transport.ended_word()
    }

    /// The provider said its lists changed: list again, then tell the clients. Coalesced:
    /// one relist runs at a time, and notifications meanwhile make one more.
    fn relist(self: &Arc<Self>) {
        {
            let mut relist = lock(&self.relist);
            if relist.running {
                relist.again = true;
                return;
            }
            relist.running = true;
        }
        let provider = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                if let Some(conn) = provider.ready() {
                    let declared = conn.declared.get().cloned().unwrap_or_default();
                    if let Ok(lists) = list_all(&conn, &declared, &Asker::hub()).await {
                        provider.store(lists);
                    }
                }
                let mut relist = lock(&provider.relist);
                if !std::mem::take(&mut relist.again) {
                    relist.running = false;
                    return;
                }
            }
        });
    }

    /// Stops a provider that broke a rule (a flood, an oversized message): its calls fail
    /// with `why`, which its status shows; it is not restarted until it is needed again.
    async fn stop_for(&self, conn: &Arc<Conn>, why: String) {
        // The host's log says it too: the calls in flight fail, and the next ones wait for
        // a restart, which the owner should be able to read the reason of.
        tracing::warn!(provider = %self.spec.id, "MCP provider stopped: {why}");
        self.log.note(format!("{why}; stopping it"));
        {
            let mut inner = lock(&self.inner);
            if inner.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
                inner.conn = None;
                inner.state = State::Stopped;
            }
            inner.last_error = Some(why.clone());
            inner.failed_at = Some(Instant::now());
        }
        conn.fail_all(&why);
        conn.peer.lock().await.stop().await;
    }

    /// Sends `method` with `params` to the provider (started if needed) for `asker` and
    /// waits for the answer within its `timeoutSec`. `started` learns the provider's id for
    /// each request (to forward a cancellation).
    ///
    /// A 2026-07-28 provider's `InputRequiredResult` is the answer for a 2026-07-28 client;
    /// for another, the hub asks the client each input request through `upcalls` and sends
    /// the request again with the answers, at most [`MAX_ROUNDS`] times.
    ///
    /// # Errors
    /// [`CallFailure`].
    pub async fn call(
        self: &Arc<Self>,
        (method, mut params): (&str, Value),
        upcalls: Option<Upcalls>,
        asker: &Asker<'_>,
        mut started: impl FnMut(Arc<Conn>, u64),
    ) -> Reply {
        let _active = Active::begin(self);
        let conn = self.ensure().await.map_err(|e| CallFailure::Unavailable(e.to_string()))?;
        let began = Instant::now();
        let settles = conn.speaks_2026() && !asker.stateless_2026;
        if !(conn.speaks_2026() && asker.stateless_2026)
            && let Some(fields) = params.as_object_mut()
        {
            // A round's fields come only from a 2026-07-28 client (whose state the hub
            // checked) to a provider of that revision, or from the hub itself (below).
            fields.remove("inputResponses");
            fields.remove("requestState");
        }
        if conn.speaks_2026() && matches!(method, methods::RESOURCES_SUBSCRIBE | methods::RESOURCES_UNSUBSCRIBE) {
            return conn.subscription(method, &params).await;
        }
        let mut rounds = 0;
        // One limit for the whole call, however many rounds it takes.
        let deadline = tokio::time::Instant::now() + self.spec.timeout;
        let reply = loop {
            let again = settles.then(|| params.clone());
            let handle = Arc::clone(&conn);
            let started = &mut started;
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                break Err(CallFailure::Timeout(self.spec.timeout));
            }
            let reply =
                conn.request((method, params), upcalls.clone(), asker, left, move |id| started(handle, id)).await;
            let reply = match reply {
                Err(CallFailure::Timeout(_)) => Err(CallFailure::Timeout(self.spec.timeout)),
                other => other,
            };
            let reply = if conn.speaks_2026() { reply.map(|answer| for_the_client(answer, asker)) } else { reply };
            // A verbatim answer has no `resultType`: it asks for nothing.
            let (Ok(Answer::Read(answer)), Some(mut again)) = (&reply, again) else { break reply };
            if answer.get("resultType").and_then(Value::as_str) != Some("input_required") {
                break reply;
            }
            rounds += 1;
            if rounds > MAX_ROUNDS {
                break Err(refused(format!("the provider asked for input more than {MAX_ROUNDS} times in one call")));
            }
            match self.settle(answer, upcalls.as_ref(), deadline).await {
                Ok(responses) => {
                    if let Some(fields) = again.as_object_mut() {
                        fields.insert("inputResponses".into(), responses);
                        match answer.get("requestState") {
                            Some(state) => fields.insert("requestState".into(), state.clone()),
                            None => fields.remove("requestState"),
                        };
                    }
                    params = again;
                }
                Err(failure) => break Err(failure),
            }
        };
        self.record(began.elapsed(), &reply);
        reply
    }

    /// Asks the client each input request of a 2026-07-28 provider's `InputRequiredResult`
    /// through the call's `upcalls`, as the 2025 revisions' requests; the answers by key,
    /// all within the provider's `timeoutSec`.
    async fn settle(
        &self,
        answer: &Value,
        upcalls: Option<&Upcalls>,
        deadline: tokio::time::Instant,
    ) -> Result<Value, CallFailure> {
        let requests = answer.get("inputRequests").and_then(Value::as_object);
        let Some(requests) = requests.filter(|r| !r.is_empty() && r.len() <= upcall::QUEUE) else {
            return Err(refused(format!(
                "the provider asked for input without naming it, or more than {} inputs at once",
                upcall::QUEUE
            )));
        };
        let Some(sink) = upcalls else {
            return Err(refused(
                "the provider asked the client for input, which the hub passes to clients of the 2025 revisions only during a tool call",
            ));
        };
        let limit = self.spec.timeout;
        let mut answers = Vec::with_capacity(requests.len());
        for (key, request) in requests {
            let method = request.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
            if upcall::capability_of(&method).is_none() {
                return Err(refused(format!(
                    "the provider asked for input `{key}` by {method:?}, which is no request a client is asked"
                )));
            }
            let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
            if !params.is_object() {
                return Err(refused(format!("the provider asked for input `{key}` with params that are no object")));
            }
            let (asked, answer) = Asked::new(method.clone(), params);
            if tokio::time::timeout_at(deadline, sink.send(Upcall::Request(asked))).await.is_err() {
                return Err(CallFailure::Timeout(limit));
            }
            answers.push((key.clone(), method, answer));
        }
        let mut responses = serde_json::Map::new();
        for (key, method, answer) in answers {
            match tokio::time::timeout_at(deadline, answer).await {
                Ok(Ok(Ok(response))) => {
                    responses.insert(key, response);
                }
                Ok(Ok(Err(error))) => {
                    let why = error.get("message").and_then(Value::as_str).unwrap_or("it refused");
                    return Err(CallFailure::Unanswered(format!(
                        "the provider needs `{method}` answered, and the client could not: {why}"
                    )));
                }
                Ok(Err(_)) => return Err(CallFailure::Cancelled),
                Err(_) => return Err(CallFailure::Timeout(limit)),
            }
        }
        Ok(Value::Object(responses))
    }

    /// Stops the process if it has run `idle` without a call and has nothing in flight;
    /// it keeps its lists and starts again on the next call. Whether it was stopped.
    pub async fn stop_if_idle(&self, idle: Duration) -> bool {
        let conn = {
            let mut inner = lock(&self.inner);
            let quiet = inner.last_used.elapsed() >= idle;
            let busy = inner.active > 0 || inner.conn.as_ref().is_some_and(|c| !c.calls.is_empty());
            if inner.state != State::Ready || !quiet || busy {
                return false;
            }
            inner.state = State::Idle;
            inner.conn.take()
        };
        let Some(conn) = conn else { return false };
        self.log.note(format!("stopping: no call for {} s (it starts again on the next one)", idle.as_secs()));
        conn.peer.lock().await.stop().await;
        true
    }

    /// Stops it on request: calls in flight fail, and it stays stopped — calls are refused
    /// — until [`Self::start`].
    pub async fn stop(&self) {
        let conn = {
            let mut inner = lock(&self.inner);
            inner.held = true;
            inner.state = State::Stopped;
            inner.last_error = Some("stopped on request".to_owned());
            inner.conn.take()
        };
        if let Some(conn) = conn {
            self.log.note("stopping on request");
            conn.fail_all("the provider was stopped on request");
            conn.peer.lock().await.stop().await;
        }
    }

    /// Starts it now (also after [`Self::stop`], a crash or an idle stop).
    ///
    /// # Errors
    /// Why it cannot run.
    pub async fn start(self: &Arc<Self>) -> Result<(), StartError> {
        {
            let mut inner = lock(&self.inner);
            inner.held = false;
            // Asked for now: no waiting out the pause after a failure.
            inner.failed_at = None;
        }
        self.ensure().await.map(|_| ())
    }

    fn record(&self, took: Duration, reply: &Reply) {
        let mut stats = lock(&self.stats);
        stats.calls += 1;
        match reply {
            Ok(_) => {}
            Err(CallFailure::Timeout(_)) => {
                stats.errors += 1;
                stats.timeouts += 1;
            }
            Err(_) => stats.errors += 1,
        }
        if stats.latencies_us.len() == LATENCY_SAMPLES {
            stats.latencies_us.pop_front();
        }
        stats.latencies_us.push_back(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
    }

    /// Its status, with the public tool names and rejections the hub settled.
    #[must_use]
    pub fn status(&self, tools: Vec<String>, rejected: Vec<Rejected>) -> Status {
        let inner = lock(&self.inner);
        let pid = inner.conn.as_ref().and_then(|c| c.group).and_then(butler_process::tree::first_child);
        let stats = lock(&self.stats);
        let mut sorted: Vec<u64> = stats.latencies_us.iter().copied().collect();
        sorted.sort_unstable();
        #[allow(clippy::cast_precision_loss)]
        let ms = |us: u64| us as f64 / 1000.0;
        Status {
            id: self.spec.id.clone(),
            namespace: self.spec.namespace.clone(),
            state: inner.state,
            pid,
            started_at: inner.conn.as_ref().map(|c| c.started_at),
            uptime_ms: inner.conn.as_ref().map(|c| u64::try_from(c.started.elapsed().as_millis()).unwrap_or(u64::MAX)),
            protocol: inner
                .conn
                .as_ref()
                .map(|c| if c.speaks_2026() { super::framing::STATELESS_REVISION } else { PROVIDER_PROTOCOL }),
            url: self.spec.transport.shown_url(),
            tools,
            rejected,
            last_error: inner.last_error.clone(),
            cached: inner.cached,
            pending: !inner.known && self.list_start.load(Ordering::Acquire),
            missed_list_wait: !inner.known && self.list_missed.load(Ordering::Acquire),
            calls: stats.calls,
            errors: stats.errors,
            timeouts: stats.timeouts,
            p50_ms: sorted.get(sorted.len() / 2).map(|&us| ms(us)),
            max_ms: sorted.last().map(|&us| ms(us)),
        }
    }

    /// Stops it for good (removed from the catalog, or replaced). In-flight calls fail.
    pub async fn shutdown(&self) {
        self.removed.store(true, Ordering::Relaxed);
        let conn = {
            let mut inner = lock(&self.inner);
            inner.state = State::Stopped;
            inner.conn.take()
        };
        if let Some(conn) = conn {
            self.log.note("stopping");
            conn.fail_all("the provider was removed");
            conn.peer.lock().await.stop().await;
        }
    }
}

/// A call from its beginning to its end (also when its future is dropped): it keeps the
/// provider from the idle stop, and both ends count as use.
struct Active<'a>(&'a Provider);

impl<'a> Active<'a> {
    fn begin(provider: &'a Provider) -> Self {
        let mut inner = lock(&provider.inner);
        inner.active += 1;
        inner.last_used = Instant::now();
        Self(provider)
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        let mut inner = lock(&self.0.inner);
        inner.active = inner.active.saturating_sub(1);
        inner.last_used = Instant::now();
    }
}

/// The lists a provider offers, every page of each: those its capabilities declare
/// (`tools`, `prompts`, `resources` with its templates), and no other — a server that
/// offers only resources or prompts answers `tools/list` with `-32601`, which is not a
/// failure. One that declares none of the three is asked for its tools all the same (a
/// server may leave its capabilities out), and `-32601` then means it has none.
///
/// `asker` is the client they are listed for (to a 2026-07-28 provider).
///
/// # Errors
/// The tools it declares (or, declaring nothing, may have) could not be listed.
async fn list_all(conn: &Conn, declared: &Declared, asker: &Asker<'_>) -> Result<Lists, StartError> {
    let declares = |kind: &str| declared.capabilities.get(kind).is_some_and(|c| !c.is_null());
    let mut lists = Lists { instructions: declared.instructions.clone(), ..Lists::default() };
    if declares("tools") {
        lists.tools = paged(conn, asker, methods::TOOLS_LIST, "tools").await.map_err(StartError::ToolsList)?;
    } else if !declares("prompts") && !declares("resources") {
        lists.tools = match paged(conn, asker, methods::TOOLS_LIST, "tools").await {
            Err(CallFailure::Error(error)) if error.get("code").and_then(Value::as_i64) == Some(-32601) => Vec::new(),
            listed => listed.map_err(StartError::ToolsList)?,
        };
    }
    if declares("prompts") {
        lists.prompts = paged(conn, asker, methods::PROMPTS_LIST, "prompts").await.unwrap_or_default();
    }
    if declares("resources") {
        lists.resources = paged(conn, asker, methods::RESOURCES_LIST, "resources").await.unwrap_or_default();
        lists.resource_templates =
            paged(conn, asker, methods::RESOURCES_TEMPLATES_LIST, "resourceTemplates").await.unwrap_or_default();
    }
    if declares_skills(&declared.capabilities) {
        lists.skills = paged(conn, asker, methods::SKILLS_LIST, "skills").await.unwrap_or_default();
    }
    Ok(lists)
}

/// The Skills extension's identifier, the key of its settings in `capabilities.extensions`
/// (what the hub does with skills is the `skills` module's).
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// Whether a server's `capabilities` declare the Skills extension: the provider is then
/// asked for its `skills/list`.
#[must_use]
pub fn declares_skills(capabilities: &Value) -> bool {
    capabilities.get("extensions").and_then(|e| e.get(SKILLS_EXTENSION)).is_some_and(Value::is_object)
}

/// Every page of `method`'s list, the items under `key` (at most 100 pages).
async fn paged(conn: &Conn, asker: &Asker<'_>, method: &str, key: &str) -> Result<Vec<Value>, CallFailure> {
    let mut all = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..100 {
        let params = cursor.take().map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let page = conn.request((method, params), None, asker, START_TIMEOUT, |_| {}).await.map(Answer::into_value)?;
        all.extend(page.get(key).and_then(Value::as_array).cloned().unwrap_or_default());
        match page.get("nextCursor") {
            Some(next) if !next.is_null() => cursor = Some(next.clone()),
            _ => break,
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/mcp/status`, the logs and `butler mcp` show these texts: the typed errors keep them.
    #[test]
    fn start_errors_say_what_they_said_as_strings() {
        let said = |e: StartError| e.to_string();
        assert_eq!(said(StartError::Removed), "the provider was removed");
        assert_eq!(
            said(StartError::Held { id: "p".into() }),
            "it was stopped on request; start it with `butler mcp start p` or POST /mcp/providers/p/start"
        );
        assert_eq!(
            said(StartError::Pausing { last: "it broke".into(), retry_in: Duration::from_millis(2400) }),
            "it broke; it is started again in 3 s"
        );
        assert_eq!(
            said(StartError::Pausing { last: "it broke".into(), retry_in: Duration::from_millis(10) }),
            "it broke; it is started again in 1 s"
        );
        assert_eq!(
            said(StartError::Timeout(Duration::from_secs(30))),
            "it did not start and list its tools within 30 s"
        );
        assert_eq!(said(StartError::ListTimeout(Duration::from_secs(30))), "it did not list within 30 s");
        assert_eq!(
            said(StartError::ExitedOnDiscover("exit 1".into())),
            "it stopped when asked server/discover (exit 1); the next start uses initialize"
        );
        assert_eq!(
            said(StartError::Initialize(CallFailure::Timeout(Duration::from_secs(5)))),
            "initialize failed: the provider did not answer within 5 s"
        );
        assert_eq!(said(StartError::ToolsList(CallFailure::Cancelled)), "tools/list failed: the call was cancelled");
        let dial = super::super::upstream::DialError::OwnAddress("http://127.0.0.1:1/mcp".into());
        assert_eq!(
            said(StartError::Open(super::super::upstream::OpenError::Dial(dial))),
            "`http://127.0.0.1:1/mcp` is this host's own address: an MCP server cannot be the hub itself"
        );
    }

    #[test]
    fn each_failed_start_in_a_row_doubles_the_pause_up_to_a_minute() {
        let pauses: Vec<u64> = (0..8).map(|failures| restart_after(failures).as_secs()).collect();
        assert_eq!(pauses, [5, 5, 10, 20, 40, 60, 60, 60]);
    }

    /// The restart rule on the paused clock: a provider whose every start fails (an
    /// in-process server that hangs up at once, so no real pipe keeps the runtime waiting
    /// and the clock moves only when the test advances it) is not tried again before the
    /// pause is over, is tried once it is, and each failure in a row doubles the pause.
    #[tokio::test(start_paused = true)]
    async fn a_failed_start_is_tried_again_only_after_the_pause_on_tokios_clock() {
        use std::sync::atomic::AtomicUsize;
        let dir = tempfile::tempdir().expect("temp dir");
        let opened = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&opened);
        let serve: crate::upstream::Serve = Arc::new(move |pipe| {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(pipe);
            Box::pin(async {})
        });
        let transport = crate::upstream::InProcess { name: "hangs-up".to_owned(), serve };
        let spec = ProviderSpec::with_transport("hangs-up", "hangs_up", Arc::new(transport), Duration::from_secs(30));
        let channels = (broadcast::channel(4).0, broadcast::channel(4).0, broadcast::channel(4).0);
        let io = Io { runtime: tokio::runtime::Handle::current(), dialer: None };
        let provider = Provider::new(Arc::new(spec), dir.path(), dir.path(), channels, Arc::default(), io);
        let starts = || opened.load(Ordering::SeqCst);

        assert!(provider.ensure().await.is_err(), "it hangs up");
        assert_eq!(starts(), 1);
        tokio::time::advance(RESTART_AFTER - Duration::from_secs(1)).await;
        assert!(provider.ensure().await.is_err());
        assert_eq!(starts(), 1, "not tried again before the pause is over");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(provider.ensure().await.is_err());
        assert_eq!(starts(), 2, "tried again once it is (by the caller or its restart task)");
        // Two failures in a row: the pause is twice as long.
        tokio::time::advance(RESTART_AFTER).await;
        assert!(provider.ensure().await.is_err());
        assert_eq!(starts(), 2, "the second pause is longer");
        tokio::time::advance(RESTART_AFTER).await;
        assert!(provider.ensure().await.is_err());
        assert_eq!(starts(), 3);
        provider.shutdown().await;
    }
    /// A transport is one impl: an in-process server (a task answering over an in-memory
    /// pipe) is started, handshaken, listed and called as a process would be, and its end
    /// is told as the transport says.
    #[tokio::test]
    async fn an_in_process_server_is_a_provider_like_any_other() {
        use tokio::io::AsyncWriteExt;
        let serve: crate::upstream::Serve = Arc::new(|pipe| {
            Box::pin(async move {
                let (read, mut write) = tokio::io::split(pipe);
                let mut lines = LineReader::new(read, 1 << 20, 4096);
                while let Ok(Some(line)) = lines.next_line().await {
                    let Ok(message) = serde_json::from_slice::<Value>(line) else { continue };
                    let Some(id) = message.get("id").cloned() else { continue };
                    let result = match message["method"].as_str() {
                        Some("initialize") => json!({"protocolVersion": PROVIDER_PROTOCOL,
                            "capabilities": {"tools": {}}, "serverInfo": {"name": "inside", "version": "1"}}),
                        Some("tools/list") => json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
                        Some("tools/call") => {
                            json!({"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}]})
                        }
                        _ => Value::Null,
                    };
                    let answer = if result.is_null() {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "unknown"}})
                    } else {
                        json!({"jsonrpc": "2.0", "id": id, "result": result})
                    };
                    let line = format!("{answer}\n");
                    if write.write_all(line.as_bytes()).await.is_err() {
                        break;
                    }
                }
            })
        });
        let dir = tempfile::tempdir().expect("temp dir");
        let transport = crate::upstream::InProcess { name: "inside".to_owned(), serve };
        let spec = ProviderSpec::with_transport("inside", "inside", Arc::new(transport), Duration::from_secs(30));
        let channels = (broadcast::channel(4).0, broadcast::channel(4).0, broadcast::channel(4).0);
        let io = Io { runtime: tokio::runtime::Handle::current(), dialer: None };
        let provider = Provider::new(Arc::new(spec), dir.path(), dir.path(), channels, Arc::default(), io);
        let call = ("tools/call", json!({"name": "echo", "arguments": {"text": "from inside"}}));
        let answer = provider.call(call, None, &Asker::hub(), |_, _| {}).await.expect("answered").into_value();
        assert_eq!(answer["content"][0]["text"], "from inside", "{answer}");
        assert_eq!(provider.lists().tools.len(), 1, "listed at its start");
        let status = provider.status(Vec::new(), Vec::new());
        assert_eq!((status.state, status.url), (State::Ready, None));
        provider.shutdown().await;
    }
}
