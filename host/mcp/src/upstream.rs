//! What a provider runs on: a process under its keeper, spoken to over its stdio pipes, or
//! a remote MCP server, spoken to over HTTP by a [`Dialer`] the host gives the hub (this
//! crate has no transport of its own).
//!
//! Either way the hub sees one line-delimited JSON-RPC pipe each way, so a remote server
//! gets the same handshake, id mapping, upcalls, names, quarantine, status and activity log
//! as a local one; only starting, stopping and what the status shows differ.

use std::sync::Arc;
use std::time::Duration;

use butler_process::Kept;
use butler_process::logs::Log;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;

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
    /// Starts a connection to `remote`, on the current runtime. `log` is the provider's
    /// log (for the notes a connection is worth, never a header's value).
    ///
    /// # Errors
    /// Why it cannot even be tried (a header that is not one).
    fn dial(&self, remote: &Remote, log: Arc<Log>) -> Result<Link, String>;
}

/// What a running provider's pipe ends in.
pub(crate) enum Peer {
    /// A process under its keeper.
    Process(Kept),
    /// A remote server, through its connection's task.
    Remote { close: Option<oneshot::Sender<()>>, task: Option<tokio::task::JoinHandle<String>> },
}

/// How long a stopped connection may take to end its session before its task is aborted.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

impl Peer {
    /// Ends it: the process and its children are stopped; the connection ends its session.
    pub(crate) async fn stop(&mut self) {
        match self {
            Self::Process(kept) => {
                kept.stop().await;
            }
            Self::Remote { close, task } => {
                if let Some(close) = close.take() {
                    let _ = close.send(());
                }
                if let Some(mut task) = task.take()
                    && tokio::time::timeout(CLOSE_TIMEOUT, &mut task).await.is_err()
                {
                    task.abort();
                }
            }
        }
    }

    /// Why its pipe closed: the process's exit code, or the reason the connection ended.
    pub(crate) async fn ended(&mut self) -> String {
        match self {
            Self::Process(kept) => {
                let status = match tokio::time::timeout(Duration::from_secs(2), kept.child.wait()).await {
                    Ok(Ok(status)) => Some(status),
                    _ => kept.stop().await,
                };
                status.and_then(|s| s.code()).map_or_else(|| "it exited".to_owned(), |c| format!("exit code {c}"))
            }
            Self::Remote { close, task } => {
                close.take();
                let Some(mut task) = task.take() else { return "the connection closed".to_owned() };
                match tokio::time::timeout(CLOSE_TIMEOUT, &mut task).await {
                    Ok(Ok(why)) => why,
                    Ok(Err(_)) => "the connection closed".to_owned(),
                    Err(_) => {
                        task.abort();
                        "the connection closed".to_owned()
                    }
                }
            }
        }
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
