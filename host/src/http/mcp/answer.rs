//! What both protocol eras share: the methods the hub answers, a `tools/call` answered as
//! SSE (the provider's progress notifications under the client's own token, then the
//! answer), and the hub's list changes as notifications.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use butler_mcp::{Changed, Hub, RpcError, Scope};

/// What answering a request needs.
pub struct Context {
    /// The hub.
    pub hub: Arc<Hub>,
    /// The endpoint the request came through.
    pub scope: Scope,
    /// Whose request it is, for cancellation: a legacy session, or one stateless request.
    pub caller: String,
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
