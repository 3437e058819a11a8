//! MCP over Streamable HTTP for the hub: both protocol revision families on the same
//! endpoints, chosen per request.
//!
//! - [`stateless_2026`]: revision 2026-07-28 — stateless, every request carrying its revision and
//!   the client's capabilities in `_meta` (and the `MCP-Protocol-Version` header),
//!   `server/discover`, `resultType`, `subscriptions/listen` for change notifications;
//! - [`sessions_2025`]: revisions 2025-11-25, 2025-06-18 and 2025-03-26 — `initialize` opens a
//!   session (`Mcp-Session-Id`), `GET` streams its notifications, `DELETE` ends it;
//! - [`dispatch`]: the methods both revision families share, and a call carried through to its answer with
//!   what its provider sends back meanwhile (progress, its requests for the client);
//! - [`rounds`]: 2026-07-28's multi-round-trip requests for providers of the 2025 revisions;
//! - [`resume`]: the 2025 revisions' resumable SSE streams (event ids, `Last-Event-ID`).
//!
//! A request is of 2026-07-28 when its `MCP-Protocol-Version` header names a revision
//! other than the 2025 ones, or its `_meta` names a protocol version; every other request
//! is of the 2025 revisions. The request gate (loopback `Host`, own `Origin`) and the credential
//! check run before any of this.
//!
//! Which endpoint a request is for is read by [`url::McpUrl`], the one parser of MCP URLs.
//! Every request for an endpoint, whichever way it came (the router's [`endpoint`], or the
//! hub's own path, [`crate::http::hub_service`]), is answered by [`serve`], which also reads
//! a `POST`'s body within the limit ([`read_body`]).

pub mod dispatch;
pub mod resume;
pub mod rounds;
pub mod sessions_2025;
pub mod stateless_2026;
pub mod url;

use axum::Json;
use axum::body::Bytes;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{ALLOW, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use percent_encoding::percent_decode_str;
use serde_json::{Value, json};

use crate::http::AppState;
use crate::http::error::MAX_BODY_BYTES;
use butler_mcp::framing;
use butler_mcp::{Hub, View};
pub use url::McpUrl;

/// The header that names a request's protocol revision.
const VERSION_HEADER: &str = "mcp-protocol-version";

/// Every request the router routes to an MCP endpoint (`POST`, `GET` and `DELETE` on
/// `…/mcp`, `…/mcp/butler`, `…/mcp/p/{name}` and `…/mcp/s/{session}`).
pub async fn endpoint(State(state): State<AppState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    serve(&state, &parts.method, parts.uri.path(), &parts.headers, body).await
}

/// A `method` request for the MCP endpoint `path` names, on either request path: the
/// router's [`endpoint`] and the hub's own path call it alike, after the gate and the
/// credential check. A `POST`'s body is read here ([`read_body`]).
pub async fn serve<B>(state: &AppState, method: &Method, path: &str, headers: &HeaderMap, body: B) -> Response
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let body = if method == Method::POST { Some(read_body(body).await) } else { None };
    let endpoint = match McpUrl::of(path).map(|url| endpoint_at(state, url, headers)) {
        Some(Ok(endpoint)) => endpoint,
        Some(Err(refusal)) => return *refusal,
        None => return rpc_error(StatusCode::NOT_FOUND, Value::Null, -32600, "no such MCP endpoint"),
    };
    match (method.as_str(), body) {
        ("POST", Some(body)) => post(&state.mcp, &endpoint, headers, body).await,
        // The router answers `HEAD` with what `GET` does.
        ("GET" | "HEAD", _) => {
            session_only(headers, "GET").unwrap_or_else(|| sessions_2025::listen(&state.mcp, &endpoint.view, headers))
        }
        ("DELETE", _) => {
            session_only(headers, "DELETE").unwrap_or_else(|| sessions_2025::end(&state.mcp, &endpoint.view, headers))
        }
        _ => {
            let mut response = rpc_error(
                StatusCode::METHOD_NOT_ALLOWED,
                Value::Null,
                -32600,
                format!("Method Not Allowed: an MCP endpoint takes POST, GET and DELETE, not {method}"),
            );
            response.headers_mut().insert(ALLOW, HeaderValue::from_static("POST, GET, DELETE"));
            response
        }
    }
}

/// The endpoint `url` names, for a request with `headers`: a profile's or an agent
/// session's only when it exists and the request may use it (see [`profile_named`],
/// [`session`]); names are percent-decoded, as the router decodes a path's parameters.
fn endpoint_at(state: &AppState, url: McpUrl<'_>, headers: &HeaderMap) -> Result<Endpoint, Box<Response>> {
    match url {
        McpUrl::Main => Ok(Endpoint::of(View::Main)),
        McpUrl::Restricted => Ok(Endpoint::of(View::Restricted)),
        McpUrl::Profile(name) => match percent_decode_str(name).decode_utf8() {
            Ok(name) => profile_named(state, &name, headers),
            Err(_) => Err(Box::new(rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                -32600,
                "Invalid Request: the profile's name does not read (not UTF-8)",
            ))),
        },
        McpUrl::AgentSession(id) => session(state, percent_decode_str(id).decode_utf8().ok().as_deref(), headers),
        McpUrl::Other => Err(Box::new(rpc_error(StatusCode::NOT_FOUND, Value::Null, -32600, "no such MCP endpoint"))),
    }
}

/// A request's whole body, at most [`MAX_BODY_BYTES`], all of it within
/// [`crate::http::body_deadline::BODY_TIMEOUT`]: the one body limit of the MCP endpoints,
/// on both request paths.
pub async fn read_body<B>(body: B) -> Result<Bytes, Unread>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use crate::http::body_deadline::{BodyTimedOut, Deadlined};
    match Limited::new(Deadlined::new(body), MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => {
            Err(Unread { status: StatusCode::PAYLOAD_TOO_LARGE, why: "length limit exceeded".to_owned() })
        }
        Err(e) if e.is::<BodyTimedOut>() => Err(Unread { status: StatusCode::REQUEST_TIMEOUT, why: e.to_string() }),
        Err(e) => Err(Unread { status: StatusCode::BAD_REQUEST, why: e.to_string() }),
    }
}

/// Agent session `id`'s endpoint for a request with `headers`: it must carry the session's
/// own token, whoever sends it (the owner's credential does not open it). An unknown or
/// ended session, and a wrong token, are the same 404, so the endpoint tells nothing about
/// which sessions run.
fn session(state: &AppState, id: Option<&str>, headers: &HeaderMap) -> Result<Endpoint, Box<Response>> {
    let found = id.and_then(|id| state.agents.session(id));
    match found {
        Some(session) if bearer(headers).is_some_and(|given| session.accepts(given)) => {
            Ok(Endpoint { view: session.view.clone(), token: None, agent: Some(session) })
        }
        _ => Err(Box::new(rpc_error(
            StatusCode::NOT_FOUND,
            Value::Null,
            -32600,
            "no such agent session: it ended, or the request does not carry its token as `Authorization: Bearer <token>`",
        ))),
    }
}

/// Why a request's body could not be read: too large, a malformed chunked encoding.
pub struct Unread {
    /// The HTTP status that says why.
    pub status: StatusCode,
    /// What went wrong, for the client.
    pub why: String,
}

/// The endpoint a request came through, and the profile token it sent.
pub struct Endpoint {
    /// What the endpoint offers.
    pub view: View,
    /// The name of the profile token the request carried, if any.
    pub token: Option<String>,
    /// The agent session whose endpoint it is.
    pub agent: Option<Arc<crate::agents::AgentSession>>,
}

impl Endpoint {
    fn of(view: View) -> Self {
        Self { view, token: None, agent: None }
    }
}

/// Profile `name`'s endpoint for a request with `headers`: 404 when the root config
/// declares no such profile; 401 with `WWW-Authenticate` when it requires a token and the
/// request carries none made for it.
fn profile_named(state: &AppState, name: &str, headers: &HeaderMap) -> Result<Endpoint, Box<Response>> {
    let Some(profile) = state.config.current().profiles.get(name).cloned().or_else(|| state.mcp.package_profile(name))
    else {
        return Err(Box::new(rpc_error(
            StatusCode::NOT_FOUND,
            Value::Null,
            -32600,
            format!(
                "no MCP profile `{}`: the root config's `mcp.profiles` declares them, and each ChatOS app has its own",
                butler_catalog::text::clip(name, 80)
            ),
        )));
    };
    let token = bearer(headers).and_then(|given| state.tokens.check(given)).filter(|t| t.profile == name);
    if profile.spec.require_token && token.is_none() {
        let mut refusal = rpc_error(
            StatusCode::UNAUTHORIZED,
            Value::Null,
            -32001,
            format!(
                "the profile `{name}` needs a token made for it: `butler mcp token add NAME --profile {name}`, sent as `Authorization: Bearer <token>`"
            ),
        );
        refusal
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static(r#"Bearer realm="butler", error="invalid_token""#));
        return Err(Box::new(refusal));
    }
    Ok(Endpoint { view: View::Profile(profile), token: token.map(|t| t.name), agent: None })
}

/// The bearer token of a request, if it carries one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    header(headers, "authorization").and_then(|v| v.strip_prefix("Bearer ")).map(str::trim)
}

async fn post(hub: &Arc<Hub>, endpoint: &Endpoint, headers: &HeaderMap, body: Result<Bytes, Unread>) -> Response {
    let raw = match body {
        Ok(raw) => raw,
        Err(unread) => return body_refused(&unread),
    };
    let body = match framing::client_messages(&raw) {
        Ok(parsed) => parsed,
        Err(refusal) => return rpc_error(StatusCode::BAD_REQUEST, refusal.id, refusal.code, refusal.message),
    };
    let body_bytes = raw.len();
    if stateless_2026::speaks(headers, &body.messages) {
        stateless_2026::post(hub, endpoint, headers, body, body_bytes).await
    } else {
        sessions_2025::post(hub, endpoint, headers, body, body_bytes).await
    }
}

/// `GET` and `DELETE` exist only for 2025 sessions: without `Mcp-Session-Id` they are
/// 405 (2026-07-28 has neither).
fn session_only(headers: &HeaderMap, method: &str) -> Option<Response> {
    if header(headers, sessions_2025::SESSION_HEADER).is_some() {
        return None;
    }
    let mut response = rpc_error(
        StatusCode::METHOD_NOT_ALLOWED,
        Value::Null,
        -32600,
        format!(
            "Method Not Allowed: {method} is for a session of the 2025 revisions (send its Mcp-Session-Id); 2026-07-28 uses POST only"
        ),
    );
    response.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
    Some(response)
}

/// A body that could not be read (too large, a malformed chunked encoding), as a JSON-RPC
/// error with the HTTP status that says why.
fn body_refused(unread: &Unread) -> Response {
    let message = if unread.status == StatusCode::PAYLOAD_TOO_LARGE {
        format!("Invalid Request: the body is larger than {} KiB", crate::http::error::MAX_BODY_BYTES / 1024)
    } else {
        format!("Invalid Request: the body could not be read: {}", unread.why)
    };
    rpc_error(unread.status, Value::Null, -32600, message)
}

/// A JSON-RPC error answer.
fn rpc_error(status: StatusCode, id: Value, code: i64, message: impl Into<String>) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}});
    (status, Json(body)).into_response()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

fn accepts_sse(headers: &HeaderMap) -> bool {
    header(headers, "accept").is_some_and(|a| a.contains("text/event-stream"))
}

/// What an endpoint tells a client of itself, at `initialize` and `server/discover`: the
/// hub's own words, and its providers' ([`Hub::instructions`]), for `asker`.
async fn instructions(hub: &Hub, view: &View, asker: &butler_mcp::Asker<'_>) -> String {
    hub.instructions(view, &own_instructions(view), asker).await
}

/// What the hub tells a client it is for.
fn own_instructions(view: &View) -> String {
    match view {
        View::Profile(profile) if profile.spec.session => {
            "Butler agent session: the tools your task allows, and the submit tool to hand your result back with (see its description). Nothing arriving here acts as the owner.".to_owned()
        }
        View::Profile(profile) => format!(
            "Butler profile `{}`: a part of the owner's MCP tools, as the owner chose it for this client (each tool's description says what it does).",
            profile.name
        ),
        View::Main => {
            "Butler aggregates the owner's MCP tools as <namespace>__<tool>: those of the owner's extensions and those the owner's faculties offer (each tool's description says what it does).".to_owned()
        }
        View::Restricted => {
            "Butler's restricted endpoint: only the tools the owner's faculties offer here, no extension tools. Nothing arriving here acts as the owner: whatever needs the owner waits for their review.".to_owned()
        }
    }
}

/// What the hub serves on `view`, in both eras (logging: the providers' log messages, per
/// session after `logging/setLevel`, or per request after `_meta`'s `logLevel` in
/// 2026-07-28): and the Skills extension, with `resources/directory/read`, where the
/// endpoint offers a skill (its methods answer on every endpoint, with no skill where it
/// offers none).
fn capabilities(hub: &Hub, view: &View) -> Value {
    let mut capabilities = json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": true},
        "completions": {},
        "logging": {},
    });
    if hub.offers_skills(view) {
        capabilities["extensions"] = json!({butler_mcp::skills::EXTENSION: butler_mcp::skills::settings()});
    }
    capabilities
}

/// Who the hub is.
fn server_info() -> Value {
    json!({"name": "butler", "title": "Butler", "version": crate::VERSION})
}
