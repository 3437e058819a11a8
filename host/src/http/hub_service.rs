//! How a connection on the hub's runtime is served (see [`super::listen`]): a request for
//! an MCP endpoint (as [`McpUrl`] reads its path) goes straight to the handler every MCP
//! request ends in, [`super::mcp::serve`]; every other request through the router. The
//! straight way runs the checks the router's layers run as the same functions — the gate
//! ([`super::gate::refusal`]) and the credential check ([`super::credential::refusal`]);
//! the body limit is [`super::mcp::read_body`], which `serve` calls on either path — and
//! skips only the router's general machinery (route matching, two middlewares, the
//! extractors, a clone of each layer's service per request), which was a tenth of the hub
//! thread's work per call.

use axum::Router;
use axum::http::{Method, Request};
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::service::TowerToHyperService;

use super::AppState;
use super::mcp::McpUrl;

/// The service for one hub connection: `app` is the router as this connection's requests
/// see it (its transport and peer marks layered on), `verified` whether the connection's
/// user was verified as the owner's.
#[derive(Clone)]
pub struct HubService {
    state: AppState,
    app: Router,
    verified: bool,
}

impl HubService {
    /// The service for a connection of the owner's (`verified`) or of a user the kernel
    /// could not say.
    #[must_use]
    pub fn new(state: AppState, app: Router, verified: bool) -> Self {
        Self { state, app, verified }
    }

    /// Answers one request.
    pub async fn answer(&self, request: Request<Incoming>) -> Response {
        if !is_for_an_endpoint(request.method(), request.uri().path()) {
            let router = TowerToHyperService::new(self.app.clone());
            return match hyper::service::Service::call(&router, request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
        }
        let (parts, body) = request.into_parts();
        if let Some(refusal) = super::gate::refusal(self.state.gate, &parts.uri, &parts.headers) {
            return refusal;
        }
        if let Some(refusal) =
            super::credential::refusal(&self.state, self.verified, &parts.method, &parts.uri, &parts.headers)
        {
            return refusal;
        }
        super::mcp::serve(&self.state, &parts.method, parts.uri.path(), &parts.headers, body).await
    }
}

/// Whether a `method` request for `path` is one the router would hand to
/// [`super::mcp::endpoint`] (a `HEAD`, or a path under `…/mcp/` that is not an endpoint,
/// goes through the router).
fn is_for_an_endpoint(method: &Method, path: &str) -> bool {
    matches!(*method, Method::POST | Method::GET | Method::DELETE) && McpUrl::of(path).is_some_and(McpUrl::is_endpoint)
}
