//! MCP Streamable HTTP: `POST` one JSON-RPC message (or a batch) and get JSON back —
//! or, for a `tools/call` that asked for progress and accepts `text/event-stream`, an SSE
//! stream of its progress notifications ending with the answer. `GET` with a session
//! streams list-change notifications; `DELETE` ends a session.
//!
//! Sessions: `initialize` opens one (`Mcp-Session-Id` in the answer); every later request
//! must carry it — missing → 400, unknown or ended → 404, so a client re-initializes. A
//! `MCP-Protocol-Version` header naming a revision we do not speak → 400. The request gate
//! (loopback `Host`, own `Origin`) runs before any of this.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::http::AppState;
use butler_mcp::framing::{self, ClientMessage as Message};
use butler_mcp::{Hub, RpcError, Scope, Session};

/// The revisions this endpoint speaks, newest first.
pub const SUPPORTED: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// `POST /mcp`.
pub async fn post_main(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match body {
        Ok(body) => post(&state.mcp, Scope::Main, &headers, &body).await,
        Err(rejection) => body_refused(&rejection),
    }
}

/// `POST /mcp/butler` (the distilling agent's endpoint).
pub async fn post_restricted(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match body {
        Ok(body) => post(&state.mcp, Scope::Restricted, &headers, &body).await,
        Err(rejection) => body_refused(&rejection),
    }
}

/// A body that could not be read (too large, a malformed chunked encoding), as a JSON-RPC
/// error with the HTTP status that says why.
fn body_refused(rejection: &BytesRejection) -> Response {
    let status = rejection.status();
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        format!("Invalid Request: the body is larger than {} KiB", crate::http::error::MAX_BODY_BYTES / 1024)
    } else {
        format!("Invalid Request: the body could not be read: {}", rejection.body_text())
    };
    rpc_error(status, Value::Null, -32600, message)
}

/// `GET /mcp`.
pub async fn get_main(State(state): State<AppState>, headers: HeaderMap) -> Response {
    listen(&state.mcp, Scope::Main, &headers)
}

/// `GET /mcp/butler`.
pub async fn get_restricted(State(state): State<AppState>, headers: HeaderMap) -> Response {
    listen(&state.mcp, Scope::Restricted, &headers)
}

/// `DELETE /mcp`.
pub async fn delete_main(State(state): State<AppState>, headers: HeaderMap) -> Response {
    end(&state.mcp, Scope::Main, &headers)
}

/// `DELETE /mcp/butler`.
pub async fn delete_restricted(State(state): State<AppState>, headers: HeaderMap) -> Response {
    end(&state.mcp, Scope::Restricted, &headers)
}

/// `GET /mcp/status`.
pub async fn status(State(state): State<AppState>) -> Json<Value> {
    Json(state.mcp.status())
}

fn rpc_error(status: StatusCode, id: Value, code: i64, message: impl Into<String>) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}});
    (status, Json(body)).into_response()
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The session a request names, or the answer refusing it.
fn session_of(hub: &Hub, scope: Scope, headers: &HeaderMap, id: &Value) -> Result<(String, Session), Box<Response>> {
    let Some(session_id) = header(headers, SESSION_HEADER) else {
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            id.clone(),
            -32000,
            "Bad Request: no Mcp-Session-Id header; send initialize first",
        )));
    };
    let Some(session) = hub.session(session_id).filter(|s| s.scope == scope) else {
        return Err(Box::new(rpc_error(
            StatusCode::NOT_FOUND,
            id.clone(),
            -32001,
            "Session not found: initialize again",
        )));
    };
    if let Some(version) = header(headers, VERSION_HEADER)
        && !SUPPORTED.contains(&version)
    {
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            id.clone(),
            -32000,
            format!("Bad Request: unsupported MCP-Protocol-Version {version:?} (supported: {})", SUPPORTED.join(", ")),
        )));
    }
    Ok((session_id.to_owned(), session))
}

async fn post(hub: &Arc<Hub>, scope: Scope, headers: &HeaderMap, body: &Bytes) -> Response {
    let (array, messages) = match framing::client_messages(body) {
        Ok(parsed) => (parsed.array, parsed.messages),
        Err(refusal) => return rpc_error(StatusCode::BAD_REQUEST, refusal.id, refusal.code, refusal.message),
    };
    if let Some(Message::Request { id, params, .. }) =
        messages.iter().find(|m| matches!(m, Message::Request { method, .. } if method == "initialize"))
    {
        if array {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                id.clone(),
                -32600,
                "Invalid Request: initialize must be sent alone",
            );
        }
        return initialize(hub, scope, id.clone(), params);
    }
    let first_id = messages
        .iter()
        .find_map(|m| if let Message::Request { id, .. } = m { Some(id.clone()) } else { None })
        .unwrap_or(Value::Null);
    let (session_id, _) = match session_of(hub, scope, headers, &first_id) {
        Ok(found) => found,
        Err(refusal) => return *refusal,
    };
    let mut requests = Vec::new();
    for message in messages {
        match message {
            Message::Request { id, method, params } => requests.push((id, method, params)),
            Message::Notification { method, params } => notified(hub, &session_id, &method, &params).await,
            Message::Response => {}
        }
    }
    if requests.is_empty() {
        return StatusCode::ACCEPTED.into_response();
    }
    let context = Context { hub: Arc::clone(hub), scope, session_id };
    if !array && let Some((id, method, params)) = requests.first() {
        let token = params.get("_meta").and_then(|m| m.get("progressToken")).cloned();
        let streams = header(headers, "accept").is_some_and(|a| a.contains("text/event-stream"));
        if method == "tools/call"
            && streams
            && let Some(token) = token
        {
            return with_progress(context, id.clone(), params.clone(), token);
        }
        let answer = context.answer(id.clone(), method, params.clone(), None).await;
        return Json(answer).into_response();
    }
    let mut answers = Vec::with_capacity(requests.len());
    for (id, method, params) in requests {
        answers.push(context.answer(id, &method, params, None).await);
    }
    Json(Value::Array(answers)).into_response()
}

fn initialize(hub: &Hub, scope: Scope, id: Value, params: &Value) -> Response {
    let requested = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
    let version = SUPPORTED.iter().find(|v| **v == requested).unwrap_or(&SUPPORTED[0]);
    let session_id = hub.open_session(scope, (*version).to_owned());
    let instructions = match scope {
        Scope::Main => {
            "Butler aggregates the owner's MCP tools as <namespace>__<tool>: those of the owner's extensions and those the owner's faculties offer (each tool's description says what it does)."
        }
        Scope::Restricted => {
            "Butler's restricted endpoint: only the tools the owner's faculties offer here, no extension tools. Nothing arriving here acts as the owner: whatever needs the owner waits for their review."
        }
    };
    let result = json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            "resources": {"listChanged": true},
            "logging": {},
        },
        "serverInfo": {"name": "butler", "title": "Butler", "version": crate::VERSION},
        "instructions": instructions,
    });
    let mut response = Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response();
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

async fn notified(hub: &Hub, session_id: &str, method: &str, params: &Value) {
    if method == "notifications/cancelled"
        && let Some(request) = params.get("requestId")
    {
        let reason = params.get("reason").and_then(Value::as_str).map(str::to_owned);
        hub.cancel(session_id, request, reason).await;
    }
}

/// What answering a request needs.
struct Context {
    hub: Arc<Hub>,
    scope: Scope,
    session_id: String,
}

impl Context {
    /// The full JSON-RPC response to one request.
    async fn answer(
        &self,
        id: Value,
        method: &str,
        params: Value,
        progress: Option<mpsc::UnboundedSender<Value>>,
    ) -> Value {
        let hub = &self.hub;
        let scope = self.scope;
        let result: Result<Value, RpcError> = match method {
            "ping" | "logging/setLevel" => Ok(json!({})),
            "tools/list" => Ok(json!({"tools": hub.list_tools(scope).await})),
            "tools/call" => hub.call_tool(scope, &self.session_id, &id, params, progress).await,
            "prompts/list" => Ok(json!({"prompts": hub.list_prompts(scope).await})),
            "prompts/get" => hub.get_prompt(scope, params).await,
            "resources/list" => Ok(json!({"resources": hub.list_resources(scope).await})),
            "resources/templates/list" => Ok(json!({"resourceTemplates": hub.list_resource_templates(scope).await})),
            "resources/read" => hub.read_resource(scope, params).await,
            "completion/complete" => Ok(json!({"completion": {"values": [], "hasMore": false}})),
            other => Err(RpcError { code: -32601, message: format!("Method not found: {other}"), data: None }),
        };
        match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error.to_value()}),
        }
    }
}

type Answering = Pin<Box<dyn Future<Output = Value> + Send>>;

/// A `tools/call` answered as SSE: the provider's progress (with the client's own token),
/// then the answer.
fn with_progress(context: Context, id: Value, params: Value, token: Value) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<Value>();
    let answering: Answering = Box::pin(async move { context.answer(id, "tools/call", params, Some(tx)).await });
    let progress_note = move |mut progress: Value, token: &Value| {
        progress["progressToken"] = token.clone();
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    };
    let start = (Some(answering), rx, token, std::collections::VecDeque::<Value>::new());
    let stream = futures_util::stream::unfold(start, move |(answering, mut rx, token, mut queued)| async move {
        if let Some(next) = queued.pop_front() {
            return Some((Ok::<_, Infallible>(message_event(&next)), (answering, rx, token, queued)));
        }
        let mut answering = answering?;
        tokio::select! {
            biased;
            Some(progress) = rx.recv() => {
                let note = progress_note(progress, &token);
                Some((Ok(message_event(&note)), (Some(answering), rx, token, queued)))
            }
            answer = &mut answering => {
                // Progress the provider sent just before its answer goes out first.
                while let Ok(progress) = rx.try_recv() {
                    queued.push_back(progress_note(progress, &token));
                }
                queued.push_back(answer);
                let first = queued.pop_front().unwrap_or(Value::Null);
                Some((Ok(message_event(&first)), (None, rx, token, queued)))
            }
        }
    });
    Sse::new(stream).into_response()
}

fn message_event(message: &Value) -> Event {
    Event::default().event("message").data(message.to_string())
}

/// `GET`: list-change notifications for the session, as SSE.
fn listen(hub: &Arc<Hub>, scope: Scope, headers: &HeaderMap) -> Response {
    if let Err(refusal) = session_of(hub, scope, headers, &Value::Null) {
        return *refusal;
    }
    let changes = hub.changes();
    let stream = futures_util::stream::unfold(changes, |mut changes| async move {
        match changes.recv().await {
            Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
                Some((Ok::<_, Infallible>(message_event(&note)), changes))
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => None,
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default()).into_response()
}

/// `DELETE`: ends the session.
fn end(hub: &Hub, scope: Scope, headers: &HeaderMap) -> Response {
    match session_of(hub, scope, headers, &Value::Null) {
        Ok((session_id, _)) => {
            hub.close_session(&session_id);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(refusal) => *refusal,
    }
}
