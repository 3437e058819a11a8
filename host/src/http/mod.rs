//! The HTTP surface: binding, the router with its two prefixes, the gate on
//! every route, and graceful shutdown. Handlers read catalog snapshots and own no state.

pub mod body_deadline;
pub mod connection;
pub mod console;
pub mod console_session;
pub mod credential;
pub mod error;
pub mod framing;
pub mod gate;
pub mod hub_service;
pub mod listen;
pub mod mcp;
pub mod own_wakes;
pub mod owner;
pub mod peer;
pub mod routes;
#[cfg(test)]
mod test_support;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::DefaultBodyLimit;

use crate::catalog::CatalogHandle;
use crate::instance::Instance;
use crate::pipeline::PipelineRouter;
use crate::supervise::Supervisor;
use butler_faculty::FacultyRuntime;
use butler_mcp::Hub;
pub use error::{ApiError, ApiJson};
pub use gate::GateConfig;

/// The port `butler serve` listens on unless `--port`, `$BUTLER_PORT` or the settings
/// file names another.
pub const DEFAULT_PORT: u16 = 19387;
/// Where every API route answers (and, as an alias, under [`LEGACY_PREFIX`]).
pub const API_PREFIX: &str = "/myspace-butler/api";
/// The legacy alias every API route also answers under.
pub const LEGACY_PREFIX: &str = "/myspace-butler";

/// What handlers can reach: one shared [`Services`], so that the copy every request and
/// middleware takes of it is one reference count, not one per part.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl AppState {
    /// The state of an app serving `services`.
    #[must_use]
    pub fn new(services: Services) -> Self {
        Self(Arc::new(services))
    }
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// The parts of the host the handlers use.
pub struct Services {
    /// Catalog snapshots.
    pub catalog: CatalogHandle,
    /// The instance being served.
    pub instance: Arc<Instance>,
    /// The faculty runtime.
    pub faculties: Arc<FacultyRuntime>,
    /// The pipeline router.
    pub pipeline: Arc<PipelineRouter>,
    /// Hosted tools and services.
    pub supervisor: Arc<Supervisor>,
    /// The MCP hub.
    pub mcp: Arc<Hub>,
    /// The OAuth logins to its remote servers.
    pub oauth: Arc<crate::upstream::oauth::broker::Broker>,
    /// The root config in force (its MCP profiles and `mcp.auth` are read from it on each
    /// request: they change live).
    pub config: Arc<crate::instance::live::LiveConfig>,
    /// The tokens made for them.
    pub tokens: Arc<crate::instance::tokens::Tokens>,
    /// The local owner token.
    pub owner_token: Arc<str>,
    /// The console's login links and sessions.
    pub console_sessions: Arc<console_session::ConsoleSessions>,
    /// The Suzu Lives capability packages imported into the instance.
    pub imports: Arc<butler_catalog::suzu::imports::Imports>,
    /// The ChatOS plugins' backends.
    pub backends: Arc<crate::chatos_backends::Backends>,
    /// The agent backend: the sessions it runs.
    pub agents: Arc<crate::agents::Agents>,
    /// The scheduled jobs.
    pub automations: Arc<crate::agents::automations::Automations>,
    /// The session collector.
    pub collector: Arc<crate::collector::Collector>,
    /// Delegations and their runs.
    pub delegations: Arc<crate::agents::delegations::Delegations>,
    /// `http://ADDR:PORT`, where the host listens.
    pub origin: Arc<str>,
    /// What the gate checks (our port).
    pub gate: GateConfig,
    /// When the host started.
    pub started: Instant,
}

/// The listener could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// Butler only listens on loopback addresses.
    #[error(
        "refusing to listen on {0}: Butler only binds loopback addresses (127.0.0.1, ::1), because its API controls processes on this machine"
    )]
    NotLoopback(IpAddr),
    /// Something else has the port.
    #[error("port {port} on {addr} is already in use (is another butler running? choose another with --port)")]
    InUse {
        /// The address.
        addr: IpAddr,
        /// The port.
        port: u16,
    },
    /// Any other bind failure.
    #[error("cannot listen on {addr}: {source}")]
    Other {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Opens the listener, refusing non-loopback addresses.
///
/// # Errors
/// [`BindError`] with a message a person can act on.
pub async fn bind(addr: IpAddr, port: u16) -> Result<tokio::net::TcpListener, BindError> {
    if !addr.is_loopback() {
        return Err(BindError::NotLoopback(addr));
    }
    let socket = SocketAddr::new(addr, port);
    tokio::net::TcpListener::bind(socket).await.map_err(|source| match source.kind() {
        std::io::ErrorKind::AddrInUse => BindError::InUse { addr, port },
        _ => BindError::Other { addr: socket, source },
    })
}

/// The whole application: the console, every API route under both prefixes, the
/// error-envelope fallbacks, the body limit and deadline, and the gate.
pub fn router(state: AppState, gate: GateConfig) -> Router {
    let mut app = crate::http::console::routes();
    for (path, route) in routes::api() {
        app = app.route(&format!("{API_PREFIX}{path}"), route.clone()).route(&format!("{LEGACY_PREFIX}{path}"), route);
    }
    app.fallback(error::unknown_route)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(DefaultBodyLimit::max(error::MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(body_deadline::deadline_bodies))
        .layer(axum::middleware::from_fn_with_state(state.clone(), credential::require))
        .layer(axum::middleware::from_fn_with_state(gate, gate::gate))
        .with_state(state)
}

/// Serves the loopback listener and the local socket (if any) until `shutdown` resolves,
/// then gives in-flight requests `grace` to finish; the MCP connections on `hub_io`, the
/// hub's runtime, when there is one (see [`listen`]).
///
/// # Errors
/// I/O errors from the listener.
pub async fn serve(
    listener: tokio::net::TcpListener,
    local: Option<tokio::net::UnixListener>,
    (state, hub_io): (AppState, Option<tokio::runtime::Handle>),
    shutdown: impl Future<Output = ()> + Send,
    grace: std::time::Duration,
) -> std::io::Result<()> {
    let app = router(state.clone(), state.gate);
    listen::serve((listener, local), app, hub_io.map(|io| (io, state)), shutdown, grace).await
}

/// The host's local socket in `state_dir`, for the CLI: mode 0600, replacing a stale one
/// (only the instance's lock holder calls this). `None`, with a warning, when it cannot be
/// made (a path longer than a socket address allows, say); the CLI then uses TCP.
#[must_use]
pub fn bind_local(state_dir: &std::path::Path) -> Option<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let path = state_dir.join(LOCAL_SOCKET);
    let _ = std::fs::remove_file(&path);
    let bound = tokio::net::UnixListener::bind(&path)
        .and_then(|l| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map(|()| l));
    match bound {
        Ok(listener) => Some(listener),
        Err(e) => {
            tracing::warn!(socket = %path.display(), "cannot open the local socket, the CLI will use TCP: {e}");
            None
        }
    }
}

/// The local socket's file name in the state directory.
pub const LOCAL_SOCKET: &str = "host.sock";
