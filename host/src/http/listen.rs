//! Accepting connections: who may connect, how many at once, how long a connection may
//! sit silent, and a bounded graceful shutdown. The router never sees a connection these
//! rules refused.
//!
//! - **Only the owner's user.** A TCP connection whose socket belongs to another uid
//!   ([`super::peer`]) is answered `403 foreign_user` before a byte of it is read; so is a
//!   Unix-socket peer with another uid (`SO_PEERCRED`). Where the kernel cannot say — or
//!   the client's socket can no longer vouch for its uid (closed before the accept, a
//!   mini-socket, a state other than established) — the connection is let through, marked
//!   unverified: then every API and MCP request on it must carry the owner's credential
//!   ([`super::credential`]). Only a verified connection is ever the owner's user.
//! - **A connection cap** (half the process's file limit, at most [`MAX_CONNECTIONS`]): one
//!   over it is answered `503 too_many_connections` and closed. The local socket (the
//!   owner's CLI; 0600) has a cap of its own, [`MAX_LOCAL_CONNECTIONS`], so that TCP
//!   clients filling theirs never lock the owner's commands out.
//! - **Timeouts**: a request head must arrive within [`HEADER_TIMEOUT`] (also the idle time
//!   allowed between requests on a kept-alive connection), its body within
//!   [`super::body_deadline::BODY_TIMEOUT`] after it.
//! - **Readable refusals**: what hyper refuses by itself (a head it cannot parse, or too
//!   large) is answered with the error envelope ([`super::framing`]).
//!
//! - **The hub's connections on the hub's thread.** With a hub runtime (`serve`'s
//!   `hub_io`), a TCP connection whose first request is for the MCP routes under either
//!   prefix ([`is_for_the_hub`], read with `peek` before anything is consumed, by
//!   [`McpUrl`] as every MCP URL is) is served there
//!   by [`HubService`], where the providers' pipes are read too: a call and its provider's
//!   answer then never cross a thread, which on a small machine is most of what one extra
//!   hop costs. The peek waits [`HEADER_TIMEOUT`] at most, like any request head.
//!
//! Both listeners serve the same router; requests that came over the local socket carry
//! [`Transport::Local`] in their extensions (the CLI's operator commands need it).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::runtime::Handle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::AppState;
pub use super::connection::{PeerVerified, Transport};
use super::framing::Enveloped;
use super::hub_service::HubService;
use super::mcp::McpUrl;
use super::own_wakes::OwnWakes;
use super::peer;

/// TCP connections served at once, at most. Each costs a file
/// descriptor and a task; the host raises its soft file limit at start and serves at most
/// half of it ([`connection_cap`]), so connections can never take the descriptors the
/// catalog, logs and providers need.
pub const MAX_CONNECTIONS: usize = 512;

/// Connections served at once on the local socket, beside [`MAX_CONNECTIONS`].
pub const MAX_LOCAL_CONNECTIONS: usize = 32;

/// The connection cap for a process allowed `open_files` descriptors.
#[must_use]
pub fn connection_cap(open_files: u64) -> usize {
    usize::try_from(open_files / 2).unwrap_or(usize::MAX).clamp(8, MAX_CONNECTIONS)
}
/// Time a client has to send a request head, and to start the next one on a kept-alive
/// connection, before the connection is closed.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub use super::framing::MAX_HEAD_BYTES;
/// How long a refusal may take to write before the connection is dropped.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);

/// Accepts and serves connections on the loopback TCP listener and (if any) the local
/// socket until `shutdown` resolves; then lets the open ones finish for `grace` at most.
/// With `hub_io`, the TCP connections that start with a request for the MCP endpoints are
/// served on that runtime (see the module doc).
///
/// # Errors
/// When the TCP listener fails for good.
pub async fn serve(
    (tcp, local): (TcpListener, Option<UnixListener>),
    app: Router,
    hub_io: Option<(Handle, AppState)>,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
) -> std::io::Result<()> {
    let cap = connection_cap(rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX));
    let slots = Arc::new(Semaphore::new(cap));
    let local_slots = Arc::new(Semaphore::new(MAX_LOCAL_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let own = peer::own_uid();
    let tcp_app = app.clone().layer(axum::Extension(Transport::Tcp));
    // Two variants of the TCP router, chosen per connection: built once, not per connection.
    let tcp_verified = tcp_app.clone().layer(axum::Extension(PeerVerified(true)));
    let tcp_unverified = tcp_app.layer(axum::Extension(PeerVerified(false)));
    let local_app = app.layer(axum::Extension(Transport::Local)).layer(axum::Extension(PeerVerified(true)));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = tcp.accept() => {
                let (stream, peer_addr) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // EMFILE and the like: wait a little instead of spinning.
                        tracing::warn!("cannot accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let uid = stream
                    .local_addr()
                    .ok()
                    .and_then(|local_addr| peer::tcp_peer_uid(local_addr, peer_addr).ok().flatten());
                let foreign = uid.filter(|uid| *uid != own);
                let verified = uid == Some(own);
                let app = if verified { &tcp_verified } else { &tcp_unverified };
                match (&hub_io, foreign) {
                    (Some((hub_io, state)), None) => {
                        let hub = HubService::new(state.clone(), app.clone(), verified);
                        admit_tcp(stream, (&slots, cap), &graceful, (app, hub), hub_io);
                    }
                    _ => admit(stream, foreign, (&slots, cap), &graceful, app),
                }
            }
            accepted = accept_local(local.as_ref()) => {
                let Ok(stream) = accepted else { continue };
                let foreign = match peer::unix_peer_uid(&stream) {
                    Ok(uid) if uid == own => None,
                    Ok(uid) => Some(uid),
                    Err(_) => Some(u32::MAX),
                };
                admit(stream, foreign, (&local_slots, MAX_LOCAL_CONNECTIONS), &graceful, &local_app);
            }
            () = &mut shutdown => break,
        }
    }
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open {} s after shutdown began are closed", grace.as_secs());
    }
    Ok(())
}

async fn accept_local(listener: Option<&UnixListener>) -> std::io::Result<tokio::net::UnixStream> {
    match listener {
        Some(listener) => listener.accept().await.map(|(stream, _)| stream),
        None => std::future::pending().await,
    }
}

/// Serves one accepted connection, or refuses it (another user's; over the cap).
fn admit<S>(
    stream: S,
    foreign: Option<u32>,
    (slots, cap): (&Arc<Semaphore>, usize),
    graceful: &GracefulShutdown,
    app: &Router,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    if let Some(uid) = foreign {
        refuse(
            stream,
            403,
            "foreign_user",
            &format!("this connection belongs to another user (uid {uid}); Butler serves only the user who runs it"),
        );
        return;
    }
    let Ok(permit) = Arc::clone(slots).try_acquire_owned() else {
        refuse(stream, 503, "too_many_connections", &over_the_cap(cap));
        return;
    };
    tokio::spawn(connection(stream, permit, graceful.watcher(), app.clone()));
}

/// Serves one accepted TCP connection of the owner's: with `hub` on `hub_io` when its first
/// request is for the MCP endpoints, with `app` here otherwise; over the cap, refused.
fn admit_tcp(
    stream: TcpStream,
    (slots, cap): (&Arc<Semaphore>, usize),
    graceful: &GracefulShutdown,
    (app, hub): (&Router, HubService),
    hub_io: &Handle,
) {
    let Ok(permit) = Arc::clone(slots).try_acquire_owned() else {
        refuse(stream, 503, "too_many_connections", &over_the_cap(cap));
        return;
    };
    let (watcher, app, hub_io) = (graceful.watcher(), app.clone(), hub_io.clone());
    tokio::spawn(async move {
        let mut start = [0u8; HUB_REQUEST_START];
        // A connection silent for the whole header timeout is closed, as hyper would.
        let Ok(peeked) = tokio::time::timeout(HEADER_TIMEOUT, stream.peek(&mut start)).await else { return };
        let for_the_hub = peeked.is_ok_and(|n| is_for_the_hub(&start[..n]));
        if !for_the_hub {
            return connection(stream, permit, watcher, app).await;
        }
        // Moved between runtimes as the plain socket it is (nothing of it was read).
        let Ok(socket) = stream.into_std() else { return };
        hub_io.spawn(async move {
            if let Ok(stream) = TcpStream::from_std(socket) {
                hub_connection(stream, permit, watcher, hub).await;
            }
        });
    });
}

/// How much of a connection's first bytes [`is_for_the_hub`] looks at.
const HUB_REQUEST_START: usize = 64;

/// Whether a request starting with `start` is for the MCP routes (`…/mcp`, `…/mcp/…`,
/// under either prefix).
fn is_for_the_hub(start: &[u8]) -> bool {
    let (method, url) = McpUrl::of_request_start(start);
    matches!(method, "POST" | "GET" | "DELETE") && url.is_some()
}

/// Serves `stream` with `app` until it closes (or the graceful shutdown ends it), holding
/// its slot under the connection cap.
async fn connection<S>(stream: S, permit: OwnedSemaphorePermit, watcher: Watcher, app: Router)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _permit = permit;
    let connection = http1().serve_connection(TokioIo::new(Enveloped::new(stream)), TowerToHyperService::new(app));
    let _ = OwnWakes::new(watcher.watch(connection)).await;
}

/// [`connection`] for a connection on the hub's runtime, served by [`HubService`].
async fn hub_connection(stream: TcpStream, permit: OwnedSemaphorePermit, watcher: Watcher, hub: HubService) {
    let _permit = permit;
    // Shared by the connection's requests: a clone per request would copy every handle the
    // state holds.
    let hub = std::sync::Arc::new(hub);
    let service = hyper::service::service_fn(move |request| {
        let hub = std::sync::Arc::clone(&hub);
        async move { Ok::<_, std::convert::Infallible>(hub.answer(request).await) }
    });
    let connection = http1().serve_connection(TokioIo::new(Enveloped::new(stream)), service);
    let _ = OwnWakes::new(watcher.watch(connection)).await;
}

/// How every connection's HTTP/1 is served: the head's timeout and size limit.
fn http1() -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT).max_buf_size(MAX_HEAD_BYTES);
    builder
}

/// Why a connection over the cap is refused.
fn over_the_cap(cap: usize) -> String {
    format!("the host already serves {cap} connections, as many as it allows; close some and try again")
}

/// Writes an error envelope and closes, without reading the request. The write is
/// bounded; a refused peer costs one short-lived task (refusals are not counted against
/// the cap, but each ends within [`REFUSAL_WRITE`]).
fn refuse<S>(mut stream: S, status: u16, code: &str, message: &str)
where
    S: AsyncWrite + Unpin + Send + 'static,
{
    let reason = if status == 403 { "Forbidden" } else { "Service Unavailable" };
    let body = serde_json::json!({"ok": false, "error": {"code": code, "message": message}}).to_string();
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::spawn(async move {
        let _ = tokio::time::timeout(REFUSAL_WRITE, async {
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        })
        .await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The listener sends to the hub what the router and the error framing take for MCP's,
    /// under both prefixes: the same parser reads all three.
    #[test]
    fn the_hubs_connections_are_those_of_the_mcp_routes_under_either_prefix() {
        for prefix in [super::super::API_PREFIX, super::super::LEGACY_PREFIX] {
            for (method, rest, hub) in [
                ("POST", "/mcp", true),
                ("GET", "/mcp/butler", true),
                ("DELETE", "/mcp/p/fs?x", true),
                ("POST", "/mcp/s/abc", true),
                ("GET", "/mcp/status", true),
                ("PUT", "/mcp", false),
                ("POST", "/mcpx", false),
                ("GET", "/health", false),
            ] {
                let start = format!("{method} {prefix}{rest} HTTP/1.1\r\nHost: x\r\n");
                assert_eq!(is_for_the_hub(start.as_bytes()), hub, "{start}");
                let path = rest.split('?').next().unwrap_or_default();
                assert_eq!(
                    McpUrl::of(&format!("{prefix}{path}")).is_some(),
                    rest.starts_with("/mcp/") || rest == "/mcp"
                );
            }
        }
        assert!(!is_for_the_hub(b"POST /myspace-butler/api/mcp"), "cut short: may be /mcpx");
    }
}
