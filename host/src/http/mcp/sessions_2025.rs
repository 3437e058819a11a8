//! The 2025 revisions (2025-11-25, 2025-06-18, 2025-03-26) over Streamable HTTP:
//! `POST` one JSON-RPC message (or a batch) and get JSON back — or, for a `tools/call` from
//! a client that accepts `text/event-stream` and whose provider sends something first, an
//! SSE stream of its progress and of the provider's requests for the client (sampling,
//! elicitation, roots: the client `POST`s its answer under the id the hub gave), ending
//! with the answer. `GET` with a session streams list-change notifications, the updates
//! of the resources it subscribed to (`resources/subscribe`) and, once it set a level
//! (`logging/setLevel`), the log messages its providers send outside any call; `DELETE`
//! ends a session.
//!
//! Sessions: `initialize` opens one (`Mcp-Session-Id` in the answer); every later request
//! must carry it — missing → 400, unknown or ended → 404, so a client re-initializes.

use butler_mcp::methods;
use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::dispatch::{self, Context, Family};
use super::resume;
use super::{accepts_sse, header, rpc_error};
use butler_mcp::framing::{ClientBody, ClientMessage as Message};
use butler_mcp::{Hub, Session, View};

/// the 2025 revisions this endpoint speaks, newest first.
pub const REVISIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// The header that names a 2025 session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The header a client resumes a stream with: the id of the last event it got.
pub const LAST_EVENT_ID: &str = "last-event-id";

/// The session a request names, or the answer refusing it.
fn session_of(
    hub: &Hub,
    view: &View,
    headers: &HeaderMap,
    id: &Value,
) -> Result<(String, Arc<Session>), Box<Response>> {
    let Some(session_id) = header(headers, SESSION_HEADER) else {
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            id.clone(),
            -32000,
            "Bad Request: no Mcp-Session-Id header; send initialize first (2025 revisions), or the per-request _meta of 2026-07-28",
        )));
    };
    let Some(session) = hub.session(session_id).filter(|s| view.is_endpoint(&s.endpoint)) else {
        return Err(Box::new(rpc_error(
            StatusCode::NOT_FOUND,
            id.clone(),
            -32001,
            "Session not found: initialize again",
        )));
    };
    // A POST naming another revision is of 2026-07-28 and never gets here; GET and DELETE do.
    if let Some(version) = header(headers, super::VERSION_HEADER)
        && !REVISIONS.contains(&version)
    {
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            id.clone(),
            -32000,
            format!("Bad Request: unsupported MCP-Protocol-Version {version:?} (supported: {})", REVISIONS.join(", ")),
        )));
    }
    Ok((session_id.to_owned(), session))
}

/// `POST` of a client of the 2025 revisions.
pub async fn post(
    hub: &Arc<Hub>,
    endpoint: &super::Endpoint,
    headers: &HeaderMap,
    body: ClientBody,
    body_bytes: usize,
) -> Response {
    let view = &endpoint.view;
    let ClientBody { array, messages } = body;
    if let Some(Message::Request { id, params, .. }) =
        messages.iter().find(|m| matches!(m, Message::Request { method, .. } if method == methods::INITIALIZE))
    {
        if array {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                id.clone(),
                -32600,
                "Invalid Request: initialize must be sent alone",
            );
        }
        return initialize(hub, view, id.clone(), params).await;
    }
    let first_id = messages
        .iter()
        .find_map(|m| if let Message::Request { id, .. } = m { Some(id.clone()) } else { None })
        .unwrap_or(Value::Null);
    let (session_id, session) = match session_of(hub, view, headers, &first_id) {
        Ok(found) => found,
        Err(refusal) => return *refusal,
    };
    let mut requests = Vec::new();
    for message in messages {
        match message {
            Message::Request { id, method, params } => requests.push((id, method, params)),
            Message::Notification { method, params } => notified(hub, &session_id, &method, &params).await,
            Message::Response { id, reply } => {
                hub.answered(&session_id, &id, reply);
            }
        }
    }
    if requests.is_empty() {
        return StatusCode::ACCEPTED.into_response();
    }
    let context = Arc::new(Context {
        hub: Arc::clone(hub),
        view: view.clone(),
        token: endpoint.token.clone(),
        agent: endpoint.agent.clone(),
        caller: session_id.clone(),
        session: Some(session_id),
        revision: session.version.clone(),
        body_bytes,
        family: Family::Sessions2025,
        capabilities: session.capabilities.clone(),
        log_level: session.log_level.clone(),
    });
    if !array && let Some(request) = requests.pop() {
        return dispatch::single(context, accepts_sse(headers), request, |_| StatusCode::OK).await;
    }
    let mut answers = Vec::with_capacity(requests.len());
    for (id, method, params) in requests {
        let params = context.unwrapped(&method, params);
        let noted = context.note(&id, &method, &params);
        let result = context.result(&id, method.clone(), params).await;
        let answer = context.envelope(id, &method, result);
        context.record(noted, &answer, answer.to_vec().len());
        answers.push(answer.into_value());
    }
    Json(Value::Array(answers)).into_response()
}

async fn initialize(hub: &Hub, view: &View, id: Value, params: &Value) -> Response {
    let requested = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
    let version = REVISIONS.iter().find(|v| **v == requested).unwrap_or(&REVISIONS[0]);
    let capabilities = params.get("capabilities").filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({}));
    let instructions = super::instructions(hub, view, &butler_mcp::Asker::sessions_2025(&capabilities, None)).await;
    let session_id = hub.open_session(view, (*version).to_owned(), capabilities);
    let result = json!({
        "protocolVersion": version,
        "capabilities": super::capabilities(hub, view),
        "serverInfo": super::server_info(),
        "instructions": instructions,
    });
    let mut response = Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response();
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

async fn notified(hub: &Hub, session_id: &str, method: &str, params: &Value) {
    if method == methods::CANCELLED
        && let Some(request) = params.get("requestId")
    {
        let reason = params.get("reason").and_then(Value::as_str).map(str::to_owned);
        hub.cancel(session_id, request, reason).await;
    }
}

/// `GET`: the session's notifications, as SSE: each list change of its own kind, the
/// updates of the resources it subscribed to, and — once it set a level — the log messages
/// its providers send outside any call. A resumable stream ([`resume`]); with
/// `Last-Event-ID`, the stream that event was of (this one, or a `POST`'s streamed answer)
/// resumed after it.
pub fn listen(hub: &Arc<Hub>, view: &View, headers: &HeaderMap) -> Response {
    let session_id = match session_of(hub, view, headers, &Value::Null) {
        Ok((session_id, _)) => session_id,
        Err(refusal) => return *refusal,
    };
    // The session lives while a connection to one of its streams is open.
    let open = hub.session_stream(&session_id);
    if let Some(last) = header(headers, LAST_EVENT_ID) {
        return resume::resume(&session_id, last, open);
    }
    let notes = dispatch::change_notes(
        hub.changes(),
        butler_mcp::Changed::ALL,
        |method| json!({"jsonrpc": "2.0", "method": method}),
    );
    let logs = dispatch::log_notes(Arc::clone(hub), view.clone(), session_id.clone());
    let subscriber = Arc::clone(hub);
    let session = session_id.clone();
    let updates = dispatch::resource_notes(
        hub,
        move |updated| subscriber.subscribed(&session, updated),
        |uri| json!({"jsonrpc": "2.0", "method": methods::RESOURCES_UPDATED, "params": {"uri": uri}}),
    );
    let notes = futures_util::stream::select(futures_util::stream::select(notes, updates), logs);
    let messages = futures_util::StreamExt::map(notes, |note| note.to_string());
    match resume::serve(&session_id, true, messages, Some(open)) {
        Some(response) => response,
        None => rpc_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            Value::Null,
            -32603,
            "the kernel gave no randomness for a stream id: try again",
        ),
    }
}

/// `DELETE`: ends the session.
pub fn end(hub: &Hub, view: &View, headers: &HeaderMap) -> Response {
    match session_of(hub, view, headers, &Value::Null) {
        Ok((session_id, _)) => {
            hub.close_session(&session_id);
            resume::STREAMS.forget_session(&session_id);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(refusal) => *refusal,
    }
}
