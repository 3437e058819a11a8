//! How a connection on the hub's runtime is served (see [`super::listen`]): a `POST` to an
//! MCP endpoint goes straight to the hub's handler, every other request through the
//! router. The straight way runs the same checks the router's layers run, as the same
//! functions — the gate ([`super::gate::refusal`]), the credential check
//! ([`super::credential::refusal`]) and the body limit ([`super::error::MAX_BODY_BYTES`]) —
//! and skips only the router's general machinery (route matching, two middlewares, the
//! extractors, a clone of each layer's service per request), which was a tenth of the hub
//! thread's work per call.

use axum::Router;
use axum::body::Bytes;
use axum::http::{Method, Request, StatusCode};
use axum::response::Response;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper_util::service::TowerToHyperService;

use super::AppState;
use super::error::MAX_BODY_BYTES;
use super::mcp::{Door, Unread};

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
        let (parts, body) = request.into_parts();
        let door = (parts.method == Method::POST).then(|| Door::of(parts.uri.path())).flatten();
        let Some(door) = door else {
            let router = TowerToHyperService::new(self.app.clone());
            return match hyper::service::Service::call(&router, Request::from_parts(parts, body)).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
        };
        if let Some(refusal) = super::gate::refusal(self.state.gate, &parts.uri, &parts.headers) {
            return refusal;
        }
        if let Some(refusal) =
            super::credential::refusal(&self.state, self.verified, &parts.method, &parts.uri, &parts.headers)
        {
            return refusal;
        }
        let body = read(body).await;
        super::mcp::post_to(&self.state, door, &parts.headers, body).await
    }
}

/// A request's whole body, at most [`MAX_BODY_BYTES`].
async fn read(body: Incoming) -> Result<Bytes, Unread> {
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => {
            Err(Unread { status: StatusCode::PAYLOAD_TOO_LARGE, why: "length limit exceeded".to_owned() })
        }
        Err(e) => Err(Unread { status: StatusCode::BAD_REQUEST, why: e.to_string() }),
    }
}
