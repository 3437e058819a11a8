//! What both protocol eras share: the methods the hub answers, a `tools/call` answered as
//! SSE (the provider's progress notifications under the client's own token, then the
//! answer), and the hub's list changes as notifications.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use butler_mcp::activity::Entry;
use butler_mcp::{Changed, Hub, RpcError, Scope};

/// What answering a request needs.
pub struct Context {
    /// The hub.
    pub hub: Arc<Hub>,
    /// The endpoint the request came through.
    pub scope: Scope,
    /// Whose request it is, for cancellation: a legacy session, or one stateless request.
    pub caller: String,
    /// The legacy session, for the activity log.
    pub session: Option<String>,
    /// The protocol revision the request is of.
    pub revision: String,
    /// The size of the `POST` body it came in.
    pub body_bytes: usize,
}

/// What the activity log keeps of a request, taken before it is answered.
pub struct Noted {
    method: String,
    name: Option<String>,
    provider: Option<String>,
    began: Instant,
}

impl Context {
    /// Notes a request about to be answered.
    pub fn note(&self, method: &str, params: &Value) -> Noted {
        let name = match method {
            "tools/call" | "prompts/get" => params.get("name"),
            "resources/read" => params.get("uri"),
            "completion/complete" => params.get("ref").and_then(|r| r.get("name").or_else(|| r.get("uri"))),
            _ => None,
        }
        .and_then(Value::as_str)
        .map(str::to_owned);
        let provider = name.as_deref().and_then(|name| self.hub.owner_of(self.scope, method, name));
        Noted { method: method.to_owned(), name, provider, began: Instant::now() }
    }

    /// Records a request answered with `answer`, `response_bytes` long.
    pub fn record(&self, noted: Noted, answer: &Value, response_bytes: usize) {
        let (outcome, code) = match answer.get("error") {
            Some(error) => ("error", error.get("code").and_then(Value::as_i64)),
            None if answer["result"]["isError"] == true => ("tool_error", None),
            None => ("ok", None),
        };
        self.hub.activity().record(Entry {
            seq: 0,
            at: String::new(),
            endpoint: match self.scope {
                Scope::Main => "main",
                Scope::Restricted => "butler",
            }
            .to_owned(),
            revision: self.revision.clone(),
            session: self.session.clone(),
            method: noted.method,
            name: noted.name,
            provider: noted.provider,
            ms: noted.began.elapsed().as_secs_f64() * 1000.0,
            outcome: outcome.to_owned(),
            code,
            request_bytes: self.body_bytes,
            response_bytes,
            dropped_before: 0,
        });
    }
}

/// A JSON answer, serialized once; with its size (for the activity log).
pub fn json(status: StatusCode, answer: &Value) -> (Response, usize) {
    let body = serde_json::to_vec(answer).unwrap_or_default();
    let size = body.len();
    ((status, [(CONTENT_TYPE, "application/json")], body).into_response(), size)
}

impl Context {
    /// The result of one of the shared methods; `None` when `method` is none of them.
    pub async fn shared(
        &self,
        id: &Value,
        method: &str,
        params: Value,
        progress: Option<mpsc::UnboundedSender<Value>>,
    ) -> Option<Result<Value, RpcError>> {
        let hub = &self.hub;
        let scope = self.scope;
        Some(match method {
            "tools/list" => Ok(json!({"tools": hub.list_tools(scope).await})),
            "tools/call" => hub.call_tool(scope, &self.caller, id, params, progress).await,
            "prompts/list" => Ok(json!({"prompts": hub.list_prompts(scope).await})),
            "prompts/get" => hub.get_prompt(scope, params).await,
            "resources/list" => Ok(json!({"resources": hub.list_resources(scope).await})),
            "resources/templates/list" => Ok(json!({"resourceTemplates": hub.list_resource_templates(scope).await})),
            "resources/read" => hub.read_resource(scope, params).await,
            "completion/complete" => hub.complete(scope, params).await,
            _ => return None,
        })
    }
}

/// `Method not found`.
pub fn not_found(method: &str) -> RpcError {
    RpcError { code: -32601, message: format!("Method not found: {method}"), data: None }
}

/// The JSON-RPC response for `id`.
pub fn envelope(id: Value, result: Result<Value, RpcError>) -> Value {
    match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error.to_value()}),
    }
}

/// The future of a whole JSON-RPC response.
pub type Answering = Pin<Box<dyn Future<Output = Value> + Send>>;

/// How an era answers one request: (context, id, method, params, where progress goes).
pub type Respond = fn(Arc<Context>, Value, String, Value, Option<mpsc::UnboundedSender<Value>>) -> Answering;

/// One request (not in a batch), answered by `respond` and recorded in the activity log:
/// as SSE when it is a `tools/call` with a progress token from a client that accepts SSE
/// (`sse`), else as JSON with the HTTP status `status` gives the answer.
pub async fn single(
    context: Arc<Context>,
    sse: bool,
    (id, method, params): (Value, String, Value),
    respond: Respond,
    status: fn(&Value) -> StatusCode,
) -> Response {
    let noted = context.note(&method, &params);
    let token = params.get("_meta").and_then(|m| m.get("progressToken")).cloned();
    if method == "tools/call"
        && sse
        && let Some(token) = token
    {
        return with_progress(token, move |progress| {
            Box::pin(async move {
                let answer = respond(Arc::clone(&context), id, method, params, Some(progress)).await;
                context.record(noted, &answer, answer.to_string().len());
                answer
            })
        });
    }
    let answer = respond(Arc::clone(&context), id, method, params, None).await;
    let (response, size) = json(status(&answer), &answer);
    context.record(noted, &answer, size);
    response
}

/// A call answered as SSE: `answering` is given the sender its progress goes to; what it
/// sends goes out as `notifications/progress` under the client's `token`, then its answer.
pub fn with_progress(token: Value, answering: impl FnOnce(mpsc::UnboundedSender<Value>) -> Answering) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<Value>();
    let answering = answering(tx);
    let progress_note = move |mut progress: Value, token: &Value| {
        progress["progressToken"] = token.clone();
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    };
    let start = (Some(answering), rx, token, VecDeque::<Value>::new());
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

/// One JSON-RPC message as an SSE event.
pub fn message_event(message: &Value) -> Event {
    Event::default().event("message").data(message.to_string())
}

/// The hub's list changes as notifications, only the kinds in `wanted`, each made by
/// `note` from its method. A listener that fell behind is told everything changed.
pub fn change_notes(
    changes: broadcast::Receiver<Changed>,
    wanted: Changed,
    note: impl Fn(&str) -> Value + Send + 'static,
) -> impl Stream<Item = Value> + Send + 'static {
    let start = (changes, VecDeque::<&'static str>::new(), note);
    futures_util::stream::unfold(start, move |(mut changes, mut queued, note)| async move {
        loop {
            if let Some(method) = queued.pop_front() {
                let next = note(method);
                return Some((next, (changes, queued, note)));
            }
            let changed = match changes.recv().await {
                Ok(changed) => changed,
                Err(broadcast::error::RecvError::Lagged(_)) => Changed::ALL,
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            queued.extend(changed.within(wanted).methods());
        }
    })
}
