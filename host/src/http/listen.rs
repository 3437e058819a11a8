//! Accepting connections: who may connect, how many at once, how long a connection may
//! sit silent, and a bounded graceful shutdown. The router never sees a connection these
//! rules refused.
//!
//! - **Only the owner's user.** A TCP connection whose socket belongs to another uid
//!   ([`super::peer`]) is answered `403 foreign_user` before a byte of it is read; so is a
//!   Unix-socket peer with another uid (`SO_PEERCRED`). Where the kernel cannot say, the
//!   connection is let through, marked unverified: then every API and MCP request on it
//!   must carry the owner's credential ([`super::credential`]).
//! - **A connection cap** (half the process's file limit, at most [`MAX_CONNECTIONS`]): one
//!   over it is answered `503 too_many_connections` and closed.
//! - **Timeouts**: a request head must arrive within [`HEADER_TIMEOUT`] (also the idle time
//!   allowed between requests on a kept-alive connection).
//! - **Readable refusals**: what hyper refuses by itself (a head it cannot parse, or too
//!   large) is answered with the error envelope ([`super::framing`]).
//!
//! Both listeners serve the same router; requests that came over the local socket carry
//! [`Transport::Local`] in their extensions (the CLI's operator commands need it).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;

pub use super::connection::{PeerVerified, Transport};
use super::framing::Enveloped;
use super::peer;

/// Connections served at once (both listeners together), at most. Each costs a file
/// descriptor and a task; the host raises its soft file limit at start and serves at most
/// half of it ([`connection_cap`]), so connections can never take the descriptors the
/// catalog, logs and providers need.
pub const MAX_CONNECTIONS: usize = 512;

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
///
/// # Errors
/// When the TCP listener fails for good.
pub async fn serve(
    tcp: TcpListener,
    local: Option<UnixListener>,
    app: Router,
    shutdown: impl Future<Output = ()> + Send,
    grace: Duration,
) -> std::io::Result<()> {
    let cap = connection_cap(rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX));
    let slots = Arc::new(Semaphore::new(cap));
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
                let app = if uid == Some(own) { &tcp_verified } else { &tcp_unverified };
                admit(stream, foreign, (&slots, cap), &graceful, app);
            }
            accepted = accept_local(local.as_ref()) => {
                let Ok(stream) = accepted else { continue };
                let foreign = match peer::unix_peer_uid(&stream) {
                    Ok(uid) if uid == own => None,
                    Ok(uid) => Some(uid),
                    Err(_) => Some(u32::MAX),
                };
                admit(stream, foreign, (&slots, cap), &graceful, &local_app);
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
        refuse(
            stream,
            503,
            "too_many_connections",
            &format!("the host already serves {cap} connections, as many as it allows; close some and try again"),
        );
        return;
    };
    let service = TowerToHyperService::new(app.clone());
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(Enveloped::new(stream)), service);
    let watched = graceful.watch(connection);
    tokio::spawn(async move {
        let _permit = permit;
        let _ = watched.await;
    });
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
