//! How the hub reaches a provider: one [`Transport`] per way — a process under its keeper
//! spoken to over its stdio pipes ([`Stdio`]), a remote MCP server spoken to over HTTP by
//! the [`Dialer`] the host gives the hub ([`Remote`]; this crate has no HTTP client of its
//! own), a server running inside the host's process ([`InProcess`]).
//!
//! Every transport opens the same thing, a [`Connection`]: one line-delimited JSON-RPC pipe
//! each way and what it ends in ([`End`]). So a remote or in-process server gets the same
//! handshake, id mapping, upcalls, names, quarantine, status and activity log as a local
//! one, and the hub's hot path (a `tools/call` relayed as bytes) is the same for all; only
//! opening, ending and what the status shows differ. Adding a transport is one more impl
//! of [`Transport`] (see `docs/architecture.md`, "Adding a provider transport").

use std::any::Any;
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use butler_process::logs::{Log, Stream};
use butler_process::{Kept, Launch, LaunchError, keeper};
use futures_util::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;

/// Set (to `1`) in the environment of a process the hub starts only to learn what the
/// provider lists to less capable clients (a probe): it is closed once it has listed, and
/// is asked nothing else.
pub const PROBE_ENV: &str = "BUTLER_MCP_PROBE";

/// The hub's side of a provider's pipe, written one JSON-RPC line at a time.
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;
/// The provider's side of the pipe, read one JSON-RPC line at a time.
pub type Reader = Box<dyn AsyncRead + Send + Unpin>;

/// A remote MCP server: its URL and the headers every request to it carries (already
/// expanded: they may hold tokens, so they are never shown — see [`Remote::shown`]).
#[derive(Clone, PartialEq, Eq)]
pub struct Remote {
    /// `https://…`, or `http://` to this machine (checked when the server is declared).
    pub url: String,
    /// Sent with every request, in order.
    pub headers: Vec<(String, String)>,
}

impl Remote {
    /// The URL as status, logs and errors show it: scheme, host, port and path — no
    /// user, password, query or fragment, which may carry a token.
    #[must_use]
    pub fn shown(&self) -> String {
        shown_url(&self.url)
    }
}

/// `url` without its user information, query and fragment.
#[must_use]
pub fn shown_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = rest.find('/').map_or((rest, ""), |at| rest.split_at(at));
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    if scheme.is_empty() { format!("{host}{path}") } else { format!("{scheme}://{host}{path}") }
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Remote").field("url", &self.shown()).field("headers", &names).finish()
    }
}

/// A connection to a remote server, as a [`Dialer`] makes it: the two ends of the hub's
/// pipe, and the task that carries the messages over HTTP.
pub struct Link {
    /// Where the hub writes its messages, one JSON-RPC line each.
    pub writer: Writer,
    /// Where the server's messages come from, one JSON-RPC line each; its end means the
    /// connection is over (the session ended, the server went away).
    pub reader: Reader,
    /// Told when the hub stops the connection: the task ends the session politely, then
    /// returns.
    pub close: oneshot::Sender<()>,
    /// The task: it returns why the connection ended.
    pub task: tokio::task::JoinHandle<String>,
}

/// Connects the hub to remote servers (the host's HTTP client implements it).
pub trait Dialer: Send + Sync + std::fmt::Debug {
    /// Starts a connection to `remote`, the provider `provider`, on the current runtime.
    /// `log` is the provider's log (for the notes a connection is worth, never a header's
    /// value).
    ///
    /// # Errors
    /// Why it cannot even be tried (a header that is not one).
    fn dial(&self, remote: &Remote, provider: &str, log: Arc<Log>) -> Result<Link, DialError>;
}

/// Why a [`Dialer`] could not even try to connect (what fails once it tries ends the
/// connection's task instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DialError {
    /// The URL cannot be parsed.
    #[error("`{shown}` is not a URL: {why}")]
    BadUrl {
        /// The URL as shown (without credentials).
        shown: String,
        /// What the parser said.
        why: String,
    },
    /// The URL names the host's own listener.
    #[error("`{0}` is this host's own address: an MCP server cannot be the hub itself")]
    OwnAddress(String),
    /// A header name HTTP does not allow (clipped).
    #[error("the header name `{0}` is not one HTTP allows")]
    HeaderName(String),
    /// A header value HTTP does not allow (its name only).
    #[error("the value of the header `{0}` is not one HTTP allows")]
    HeaderValue(String),
    /// The HTTP client could not be set up.
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
}

/// Why a transport could not open a connection.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// What to run could not be made out of the manifest.
    #[error("{0}")]
    Launch(#[from] LaunchError),
    /// The process could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The process started without the pipes it is spoken to over.
    #[error("its pipes could not be opened")]
    Pipes,
    /// A remote server, and the hub was given no [`Dialer`].
    #[error("this hub cannot connect to remote servers")]
    NoDialer,
    /// The dialer could not even try (a header that is not one).
    #[error(transparent)]
    Dial(DialError),
}

/// What a transport is given to open a connection.
pub struct Opening<'a> {
    /// The provider's id.
    pub provider: &'a str,
    /// The provider's log (its stderr, the hub's notes; never a secret).
    pub log: &'a Arc<Log>,
    /// Whether the connection is a probe's: the process has [`PROBE_ENV`]
    /// in its environment, and is closed once it has listed.
    pub probe: bool,
    /// What connects to remote servers, if the host gave one.
    pub dialer: Option<&'a Arc<dyn Dialer>>,
}

/// One open connection to a provider.
pub struct Connection {
    /// Where the hub writes its messages, one JSON-RPC line each.
    pub writer: Writer,
    /// Where the provider's messages come from, one JSON-RPC line each; its end is the
    /// connection's.
    pub reader: Reader,
    /// What it ends in.
    pub end: Box<dyn End>,
    /// The process group that runs it, if any (shown in the status, used by the
    /// activity log).
    pub group: Option<u32>,
}

/// A way to reach an MCP server: what a provider is started, spoken to and stopped
/// through. Each transport is one impl; a provider holds one as `Arc<dyn Transport>`
/// (`ProviderSpec::with_transport`).
pub trait Transport: Send + Sync + std::fmt::Debug {
    /// Opens one connection, on the current runtime (the hub's).
    ///
    /// # Errors
    /// [`OpenError`].
    fn open(&self, opening: &Opening<'_>) -> Result<Connection, OpenError>;

    /// Why it can never open, if that is known before trying (shown in the status).
    fn unavailable(&self) -> Option<String> {
        None
    }

    /// How its end is told in the status and the log: a process "exited".
    fn ended_word(&self) -> &'static str {
        "exited"
    }

    /// What the status shows as where it is: a remote server's URL without credentials.
    fn shown_url(&self) -> Option<String> {
        None
    }

    /// Whether a connection that fails during the first question is the transport's own
    /// failure (a remote server unreachable: said as it is), rather than a provider that
    /// exits when asked `server/discover` (the next start then skips the question).
    fn fails_by_itself(&self) -> bool {
        false
    }

    /// Whether `other` is the same transport to the same server (an unchanged provider
    /// keeps running).
    fn same_as(&self, other: &dyn Transport) -> bool;

    /// Itself, for [`Transport::same_as`].
    fn as_any(&self) -> &dyn Any;
}

/// What an open connection ends in: stopping it, and learning why it ended.
pub trait End: Send {
    /// Ends it: the process and its children are stopped; a connection ends its session.
    fn stop(&mut self) -> BoxFuture<'_, ()>;
    /// Why its pipe closed: the process's exit code, or the reason the connection ended.
    fn ended(&mut self) -> BoxFuture<'_, String>;
}

/// A process run under its keeper and spoken to over its stdio (what to run, environment
/// scrubbed), as an extension's `mcp` block says.
#[derive(Debug)]
pub struct Stdio {
    /// What to run, or why it cannot be.
    pub launch: Result<Launch, LaunchError>,
    /// The `mcp` block and the folder it was made from, to tell a changed one.
    pub source: (butler_catalog::manifest::Mcp, PathBuf),
}

impl Transport for Stdio {
    fn open(&self, opening: &Opening<'_>) -> Result<Connection, OpenError> {
        let launch = self.launch.as_ref().map_err(Clone::clone)?;
        let mut launch = Cow::Borrowed(launch);
        if opening.probe {
            launch.to_mut().env.push((PROBE_ENV.to_owned(), "1".to_owned()));
        }
        let mut kept = keeper::spawn_kept(&launch, keeper::Input::Piped)
            .map_err(|source| OpenError::Spawn { program: launch.program().to_owned(), source })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (kept.child.stdin.take(), kept.child.stdout.take(), kept.child.stderr.take())
        else {
            return Err(OpenError::Pipes);
        };
        tokio::spawn(Arc::clone(opening.log).capture(Stream::Stderr, stderr));
        opening.log.note(format!("started: {}", launch.argv.join(" ")));
        let group = kept.group;
        Ok(Connection { writer: Box::new(stdin), reader: Box::new(stdout), end: Box::new(kept), group: Some(group) })
    }

    fn unavailable(&self) -> Option<String> {
        self.launch.as_ref().err().map(ToString::to_string)
    }

    fn same_as(&self, other: &dyn Transport) -> bool {
        other.as_any().downcast_ref::<Self>().is_some_and(|other| other.source == self.source)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl End for Kept {
    fn stop(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            Kept::stop(self).await;
        })
    }

    fn ended(&mut self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            let status = match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
                Ok(Ok(status)) => Some(status),
                _ => Kept::stop(self).await,
            };
            status.and_then(|s| s.code()).map_or_else(|| "it exited".to_owned(), |c| format!("exit code {c}"))
        })
    }
}

impl Transport for Remote {
    fn open(&self, opening: &Opening<'_>) -> Result<Connection, OpenError> {
        let dialer = opening.dialer.ok_or(OpenError::NoDialer)?;
        let link = dialer.dial(self, opening.provider, Arc::clone(opening.log)).map_err(OpenError::Dial)?;
        opening.log.note(format!("connecting to {}", self.shown()));
        let end = Box::new(Dialled { close: Some(link.close), task: Some(link.task) });
        Ok(Connection { writer: link.writer, reader: link.reader, end, group: None })
    }

    fn ended_word(&self) -> &'static str {
        "the connection ended"
    }

    fn shown_url(&self) -> Option<String> {
        Some(self.shown())
    }

    fn fails_by_itself(&self) -> bool {
        true
    }

    fn same_as(&self, other: &dyn Transport) -> bool {
        other.as_any().downcast_ref::<Self>() == Some(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A remote server's connection, through its task.
struct Dialled {
    close: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<String>>,
}

/// How long a stopped connection may take to end its session before its task is aborted.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

impl End for Dialled {
    fn stop(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(close) = self.close.take() {
                let _ = close.send(());
            }
            if let Some(mut task) = self.task.take()
                && tokio::time::timeout(CLOSE_TIMEOUT, &mut task).await.is_err()
            {
                task.abort();
            }
        })
    }

    fn ended(&mut self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            self.close.take();
            let Some(mut task) = self.task.take() else { return "the connection closed".to_owned() };
            match tokio::time::timeout(CLOSE_TIMEOUT, &mut task).await {
                Ok(Ok(why)) => why,
                Ok(Err(_)) => "the connection closed".to_owned(),
                Err(_) => {
                    task.abort();
                    "the connection closed".to_owned()
                }
            }
        })
    }
}

/// What an in-process server runs: given its end of the pipe, it serves until it returns
/// (the connection's end).
pub type Serve = Arc<dyn Fn(tokio::io::DuplexStream) -> BoxFuture<'static, ()> + Send + Sync>;

/// A server running inside the host's process, on a task of its own, spoken to over an
/// in-memory pipe: the hub treats it exactly as a process (no process group, nothing to
/// kill but its task).
#[derive(Clone)]
pub struct InProcess {
    /// Its name (two in-process transports are the same when their names are).
    pub name: String,
    /// What serves each connection.
    pub serve: Serve,
}

/// The pipe's buffer each way for an in-process server.
const IN_PROCESS_BUFFER: usize = 64 * 1024;

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Transport for InProcess {
    fn open(&self, opening: &Opening<'_>) -> Result<Connection, OpenError> {
        let (hub, server) = tokio::io::duplex(IN_PROCESS_BUFFER);
        let task = tokio::spawn((self.serve)(server));
        opening.log.note(format!("started in-process: {}", self.name));
        let (reader, writer) = tokio::io::split(hub);
        Ok(Connection {
            writer: Box::new(writer),
            reader: Box::new(reader),
            end: Box::new(Served(Some(task))),
            group: None,
        })
    }

    fn same_as(&self, other: &dyn Transport) -> bool {
        other.as_any().downcast_ref::<Self>().is_some_and(|other| other.name == self.name)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An in-process server's task.
struct Served(Option<tokio::task::JoinHandle<()>>);

impl End for Served {
    fn stop(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(task) = self.0.take() {
                task.abort();
                let _ = task.await;
            }
        })
    }

    fn ended(&mut self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            let Some(mut task) = self.0.take() else { return "it ended".to_owned() };
            match tokio::time::timeout(CLOSE_TIMEOUT, &mut task).await {
                Ok(Ok(())) => "it returned".to_owned(),
                Ok(Err(_)) => "it panicked".to_owned(),
                Err(_) => {
                    task.abort();
                    "it closed its pipe".to_owned()
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shown_url_keeps_no_credential() {
        assert_eq!(shown_url("https://u:secret@example.com:8443/mcp?key=s#x"), "https://example.com:8443/mcp");
        assert_eq!(shown_url("http://127.0.0.1:9/mcp"), "http://127.0.0.1:9/mcp");
        assert_eq!(shown_url("https://example.com?token=s"), "https://example.com");
        let remote =
            Remote { url: "https://a@h/p".to_owned(), headers: vec![("Authorization".into(), "Bearer s".into())] };
        let debug = format!("{remote:?}");
        assert!(!debug.contains("Bearer") && !debug.contains("a@"), "{debug}");
    }
}
