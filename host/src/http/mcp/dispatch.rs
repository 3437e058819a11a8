//! Serving a request of either revision family: the methods the hub answers; a `tools/call` carried
//! through to its answer with what its provider sends back meanwhile — progress under the
//! client's own token, and the provider's requests for the client (on the call's SSE stream
//! for a 2025 session, as an `InputRequiredResult` and its retry for 2026-07-28, see
//! [`super::rounds`]); and the hub's list changes as notifications.

use butler_mcp::methods;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{resume, rounds};
use butler_mcp::activity::Entry;
use butler_mcp::answer::Verbatim;
use butler_mcp::framing::object;
use butler_mcp::upcall::{self, Asked, Call, Next, Parked, Upcall, Upcalls};
use butler_mcp::{Answer, Asker, Changed, Hub, RpcError, View};

/// What answering a request needs.
pub struct Context {
    /// The hub.
    pub hub: Arc<Hub>,
    /// The endpoint the request came through.
    pub view: View,
    /// The name of the profile token it carried.
    pub token: Option<String>,
    /// The agent session whose endpoint it came through: its own tools join the hub's.
    pub agent: Option<Arc<crate::agents::AgentSession>>,
    /// Whose request it is, for cancellation: a 2025 session, or one stateless request.
    pub caller: String,
    /// The 2025 session, for the activity log.
    pub session: Option<String>,
    /// The protocol revision the request is of.
    pub revision: String,
    /// The size of the `POST` body it came in.
    pub body_bytes: usize,
    /// Which family of revisions the request is of.
    pub family: Family,
    /// The capabilities the client declared (at `initialize`, or in this request's `_meta`).
    pub capabilities: Value,
    /// The least severe log level the client wants: its session's (`logging/setLevel`), or
    /// this request's (`_meta`); `None`: every level for a session, none for 2026-07-28.
    pub log_level: Option<String>,
}

/// The protocol revision family of a request: sessions (2025) or stateless (2026-07-28).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// 2025-11-25, 2025-06-18, 2025-03-26: sessions.
    Sessions2025,
    /// 2026-07-28: stateless.
    Stateless2026,
}

/// What the activity log keeps of a request, taken before it is answered: its entry but
/// for how it ended. Dropped before it is recorded — the client went away, which is how a
/// 2026-07-28 client cancels — it is recorded as `cancelled`.
pub struct Noted {
    hub: Arc<Hub>,
    /// The entry, until it is recorded.
    entry: Option<Entry>,
    began: Instant,
    /// The request's id as JSON text, and whose request it is (see [`Context::caller`]).
    call: (String, String),
}

impl Drop for Noted {
    fn drop(&mut self) {
        if let Some(mut entry) = self.entry.take() {
            entry.ms = self.began.elapsed().as_secs_f64() * 1000.0;
            entry.outcome = "cancelled".to_owned();
            self.hub.activity().record(entry);
        }
    }
}

impl Context {
    /// A request's params as the hub answers them: a `butler__call_tool` call is the call it
    /// carries, from here on (the activity log, a 2026-07-28 call's rounds), as the hub's
    /// [`Hub::unwrapped`] says.
    pub fn unwrapped(&self, method: &str, params: Value) -> Value {
        if method == methods::TOOLS_CALL { self.hub.unwrapped(&self.view, params) } else { params }
    }

    /// Notes request `id` about to be answered.
    pub fn note(&self, id: &Value, method: &str, params: &Value) -> Noted {
        let name = match method {
            methods::TOOLS_CALL | methods::PROMPTS_GET => params.get("name"),
            methods::RESOURCES_READ | methods::SKILLS_GET | methods::RESOURCES_DIRECTORY_READ => params.get("uri"),
            methods::COMPLETION_COMPLETE => params.get("ref").and_then(|r| r.get("name").or_else(|| r.get("uri"))),
            _ => None,
        }
        .and_then(Value::as_str)
        .map(str::to_owned);
        let provider = match method {
            methods::COMPLETION_COMPLETE => {
                self.hub.completion_owner(&self.view, params.get("ref").unwrap_or(&Value::Null))
            }
            _ => name.as_deref().and_then(|name| self.hub.owner_of(&self.view, method, name)),
        };
        let params = self.hub.log_payloads().then(|| butler_mcp::activity::payload(params));
        let entry = Entry {
            seq: 0,
            at: String::new(),
            endpoint: self.view.endpoint(),
            token: self.token.clone(),
            revision: self.revision.clone(),
            session: self.session.clone(),
            method: method.to_owned(),
            name,
            provider,
            ms: 0.0,
            outcome: String::new(),
            code: None,
            request_bytes: self.body_bytes,
            response_bytes: 0,
            dropped_before: 0,
            response: None,
            request: params,
            parent: None,
        };
        Noted {
            hub: Arc::clone(&self.hub),
            entry: Some(entry),
            began: Instant::now(),
            call: (self.caller.clone(), id.to_string()),
        }
    }

    /// Records a request answered with `answer`, `response_bytes` long: `cancelled` when it
    /// is a tool call its client cancelled (a 2025 `notifications/cancelled`).
    pub fn record(&self, mut noted: Noted, answer: &Message, response_bytes: usize) {
        let Some(mut entry) = noted.entry.take() else { return };
        let (outcome, code) = match answer {
            Message::Relayed { result, .. } if result.is_error() => ("tool_error", None),
            Message::Relayed { .. } => ("ok", None),
            Message::Built(answer) => match answer.get("error") {
                Some(error) => ("error", error.get("code").and_then(Value::as_i64)),
                None if answer["result"]["isError"] == true => ("tool_error", None),
                None if answer["result"]["resultType"] == "input_required" => ("input_required", None),
                None => ("ok", None),
            },
        };
        let (caller, id) = &noted.call;
        let cancelled = entry.method == methods::TOOLS_CALL && self.hub.was_cancelled(caller, id);
        entry.ms = noted.began.elapsed().as_secs_f64() * 1000.0;
        entry.outcome = if cancelled { "cancelled" } else { outcome }.to_owned();
        entry.code = code;
        entry.response_bytes = response_bytes;
        entry.response = entry.request.is_some().then(|| match answer {
            Message::Relayed { result, .. } => butler_mcp::activity::payload(&result.to_value()),
            Message::Built(answer) => {
                butler_mcp::activity::payload(answer.get("result").or(answer.get("error")).unwrap_or(&Value::Null))
            }
        });
        self.hub.activity().record(entry);
    }
}

/// A JSON answer, serialized once; with its size (for the activity log).
pub fn json(status: StatusCode, answer: &Message) -> (Response, usize) {
    let body = answer.to_vec();
    let size = body.len();
    ((status, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response(), size)
}

/// A message for the client: one the hub built, or the response that carries a provider's
/// result as the provider wrote it ([`Verbatim`]), written out without reading it.
#[derive(Debug)]
pub enum Message {
    /// Built by the hub.
    Built(Value),
    /// The response to request `id`, with a provider's result.
    Relayed {
        /// The client's id for the request.
        id: Value,
        /// The provider's result.
        result: Verbatim,
        /// Whether it gets `"resultType": "complete"` (a 2026-07-28 client's).
        complete: bool,
    },
}

impl Message {
    /// Its JSON text.
    pub fn to_vec(&self) -> Vec<u8> {
        let (id, result, complete) = match self {
            Self::Built(message) => return serde_json::to_vec(message).unwrap_or_default(),
            Self::Relayed { id, result, complete } => (id, result.text(), *complete),
        };
        let mut text = Vec::with_capacity(result.len() + 64);
        text.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        // An id as the client sent it: a string, a number or null.
        let _ = serde_json::to_writer(&mut text, id);
        text.extend_from_slice(br#","result":"#);
        match result.strip_suffix('}') {
            // A verbatim result is an object, without `resultType` (it is read otherwise).
            Some(open) if complete => {
                text.extend_from_slice(open.as_bytes());
                // `open` starts with its `{`: a comma unless nothing follows it.
                if !open[1..].trim_start().is_empty() {
                    text.push(b',');
                }
                text.extend_from_slice(br#""resultType":"complete"}"#);
            }
            _ => text.extend_from_slice(result.as_bytes()),
        }
        text.push(b'}');
        text
    }

    /// The message as a value.
    pub fn into_value(self) -> Value {
        match self {
            Self::Built(message) => message,
            Self::Relayed { id, result, complete } => {
                let result = result.to_value();
                let result = if complete { completed(methods::TOOLS_CALL, result) } else { result };
                envelope(id, Ok(result))
            }
        }
    }

    /// The JSON-RPC error code it carries, if it is an error.
    pub fn error_code(&self) -> Option<i64> {
        match self {
            Self::Built(message) => message.get("error").and_then(|error| error.get("code")).and_then(Value::as_i64),
            Self::Relayed { .. } => None,
        }
    }
}

impl Context {
    /// Who the providers are told the client is, for a request of this context.
    fn asker(&self) -> Asker<'_> {
        match self.family {
            Family::Stateless2026 => Asker::stateless_2026(&self.capabilities, self.log_level.as_deref()),
            // A session that set no level takes every level.
            Family::Sessions2025 => {
                Asker::sessions_2025(&self.capabilities, Some(self.log_level.as_deref().unwrap_or("debug")))
            }
        }
    }

    /// The result of one request of this context's family. For 2026-07-28, a provider's
    /// `InputRequiredResult` gets its state sealed ([`sealed`]).
    pub async fn result(&self, id: &Value, method: String, params: Value) -> Result<Answer, RpcError> {
        if self.family == Family::Stateless2026 && rounds::ROUND_METHODS.contains(&method.as_str()) {
            let name = rounds::subject(&method, &params);
            let arguments = params.get("arguments").cloned();
            let result = self.unsealed(id, &method, params, None).await?;
            return sealed(result, || rounds::State {
                held: rounds::Held::Relayed(None),
                name,
                arguments: rounds::arguments_digest(arguments.as_ref()),
                method,
                endpoint: self.view.endpoint(),
            });
        }
        self.unsealed(id, &method, params, None).await
    }

    /// [`Self::result`] without the sealing, for a caller that seals a round's state itself
    /// (a tool call's [`Drive`], which keeps what the state is bound to); `upcalls` takes what
    /// a tool call's provider sends back meanwhile.
    async fn unsealed(
        &self,
        id: &Value,
        method: &str,
        params: Value,
        upcalls: Option<Upcalls>,
    ) -> Result<Answer, RpcError> {
        if self.family == Family::Sessions2025 {
            let uri = || params.get("uri").and_then(Value::as_str).unwrap_or_default();
            let answered = match (method, &self.session) {
                (methods::PING, _) => Ok(json!({})),
                (methods::LOGGING_SET_LEVEL, _) => self.set_log_level(&params),
                (methods::RESOURCES_SUBSCRIBE, session) => {
                    self.hub.subscribe(&self.view, session.as_deref(), uri()).await
                }
                (methods::RESOURCES_UNSUBSCRIBE, Some(session)) => {
                    self.hub.unsubscribe(&self.view, session, uri()).await
                }
                _ => return self.shared(id, method, params, upcalls).await.unwrap_or_else(|| Err(not_found(method))),
            };
            return answered.map(Answer::Read);
        }
        self.shared(id, method, params, upcalls).await.unwrap_or_else(|| Err(not_found(method)))
    }

    /// `logging/setLevel` for the session: the providers' log messages below the level no
    /// longer reach it.
    fn set_log_level(&self, params: &Value) -> Result<Value, RpcError> {
        let level = params.get("level").and_then(Value::as_str).filter(|l| upcall::LEVELS.contains(l));
        let Some(level) = level else {
            return Err(RpcError::invalid_params(format!(
                "Invalid params: `level` must be one of {}",
                upcall::LEVELS.join(", ")
            )));
        };
        if let Some(session) = &self.session {
            self.hub.set_log_level(session, level);
        }
        Ok(json!({}))
    }

    /// The JSON-RPC response carrying `result`, as this context's family has it.
    pub fn envelope(&self, id: Value, method: &str, result: Result<Answer, RpcError>) -> Message {
        let result = match result {
            Ok(Answer::Verbatim(result)) => {
                return Message::Relayed { id, result, complete: self.family == Family::Stateless2026 };
            }
            Ok(Answer::Read(result)) => Ok(result),
            Err(error) => Err(error),
        };
        Message::Built(match self.family {
            Family::Sessions2025 => envelope(id, result),
            // 2026-07-28 names an unknown resource `-32602` (the 2025 revisions: `-32002`).
            Family::Stateless2026 => envelope(
                id,
                result.map(|result| completed(method, result)).map_err(|error| match error.code {
                    -32002 => RpcError { code: -32602, ..error },
                    _ => error,
                }),
            ),
        })
    }

    /// The result of one of the shared methods; `None` when `method` is none of them.
    async fn shared(
        &self,
        id: &Value,
        method: &str,
        params: Value,
        upcalls: Option<Upcalls>,
    ) -> Option<Result<Answer, RpcError>> {
        let hub = &self.hub;
        let view = &self.view;
        let asker = self.asker();
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
        let agent_tool = self.agent.as_ref().filter(|agent| method == methods::TOOLS_CALL && agent.owns_tool(name));
        if let Some(agent) = agent_tool {
            return Some(Ok(agent.call(params.get("arguments").cloned().unwrap_or(Value::Null)).into()));
        }
        if method == methods::TOOLS_CALL {
            return Some(hub.call_tool(view, &self.caller, id, params, upcalls, &asker).await);
        }
        let result = match method {
            methods::TOOLS_LIST => {
                let mut tools = hub.list_tools(view, &asker).await;
                tools.extend(self.agent.iter().flat_map(|agent| agent.tools()));
                Ok(object([("tools", tools.into())]))
            }
            methods::PROMPTS_LIST => Ok(object([("prompts", hub.list_prompts(view, &asker).await.into())])),
            methods::PROMPTS_GET => hub.get_prompt(view, params, &asker).await,
            methods::RESOURCES_LIST => Ok(object([("resources", hub.list_resources(view, &asker).await.into())])),
            methods::RESOURCES_TEMPLATES_LIST => {
                Ok(object([("resourceTemplates", hub.list_resource_templates(view, &asker).await.into())]))
            }
            methods::RESOURCES_READ => hub.read_resource(view, params, &asker).await,
            methods::COMPLETION_COMPLETE => hub.complete(view, params, &asker).await,
            methods::SKILLS_LIST => hub.list_skills(view, &params).await,
            methods::SKILLS_GET => hub.get_skill(view, &params).await,
            methods::RESOURCES_DIRECTORY_READ => hub.read_directory(view, &params).await,
            _ => return None,
        };
        Some(result.map(Answer::Read))
    }
}

/// A 2026-07-28 result as the client gets it: a provider's `InputRequiredResult` with its
/// state sealed, bound to what `state` says ([`rounds::relayed`]). A verbatim result has no
/// `resultType`: it asks for nothing.
fn sealed(result: Answer, state: impl FnOnce() -> rounds::State) -> Result<Answer, RpcError> {
    match result {
        Answer::Read(result) => rounds::relayed(result, state).map(Answer::Read),
        verbatim => Ok(verbatim),
    }
}

/// Results a 2026-07-28 client may cache, for `ttlMs` under `cacheScope`.
const CACHEABLE: &[&str] = &[
    methods::TOOLS_LIST,
    methods::PROMPTS_LIST,
    methods::RESOURCES_LIST,
    methods::RESOURCES_TEMPLATES_LIST,
    methods::RESOURCES_READ,
    methods::SERVER_DISCOVER,
    methods::SKILLS_LIST,
    methods::SKILLS_GET,
];

/// How long a 2026-07-28 client may keep the hub's lists: not at all (they change with the
/// catalog, and `subscriptions/listen` says when), and `server/discover`: 10 minutes.
pub const LIST_TTL_MS: u64 = 0;
/// See [`LIST_TTL_MS`].
pub const DISCOVER_TTL_MS: u64 = 600_000;

/// A result as 2026-07-28 has it: `resultType` (a provider's own is kept), and cache hints
/// on the cacheable ones.
pub fn completed(method: &str, mut result: Value) -> Value {
    if let Some(fields) = result.as_object_mut() {
        let kind = fields.entry("resultType").or_insert_with(|| json!("complete")).clone();
        if kind == "complete" && CACHEABLE.contains(&method) {
            let ttl = if method == methods::SERVER_DISCOVER { DISCOVER_TTL_MS } else { LIST_TTL_MS };
            fields.entry("ttlMs").or_insert_with(|| json!(ttl));
            // The lists depend on the endpoint (and, with profiles, on who asks).
            fields.entry("cacheScope").or_insert_with(|| json!("private"));
        }
    }
    result
}

/// `Method not found`.
pub fn not_found(method: &str) -> RpcError {
    RpcError { code: -32601, message: format!("Method not found: {method}"), data: None }
}

/// The JSON-RPC response for `id`.
pub fn envelope(id: Value, result: Result<Value, RpcError>) -> Value {
    match result {
        Ok(result) => object([("jsonrpc", "2.0".into()), ("id", id), ("result", result)]),
        Err(error) => object([("jsonrpc", "2.0".into()), ("id", id), ("error", error.to_value())]),
    }
}

/// One request (not in a batch), answered and recorded in the activity log: as JSON with
/// the HTTP status `status` gives the answer's error code — or, when a `tools/call`'s provider sends
/// something for the client before its answer (progress the client asked for, a request of
/// a 2025 session's, and the client accepts SSE: `sse`), as SSE ending with the answer.
/// A 2026-07-28 client's call whose provider asks the client something is set aside and
/// answered with an `InputRequiredResult`; the client's retry takes it up again.
pub async fn single(
    context: Arc<Context>,
    sse: bool,
    (id, method, params): (Value, String, Value),
    status: fn(Option<i64>) -> StatusCode,
) -> Response {
    let params = context.unwrapped(&method, params);
    let noted = context.note(&id, &method, &params);
    let mut params = params;
    // A 2026-07-28 retry: of a call the hub parked (taken up below), or of one whose
    // provider asked itself (it goes to the provider with the provider's state again).
    let mut resumed = None;
    if context.family == Family::Stateless2026
        && rounds::ROUND_METHODS.contains(&method.as_str())
        && rounds::is_retry(&params)
    {
        match rounds::retry_of(&context.view.endpoint(), &method, &params) {
            Ok((rounds::State { held: rounds::Held::Relayed(provider), .. }, _)) => {
                params = rounds::unsealed(params, provider);
            }
            Ok((rounds::State { held: rounds::Held::Parked(parked), .. }, responses)) => {
                resumed = Some(Ok((parked, responses)));
            }
            Err(error) => resumed = Some(Err(error)),
        }
    }
    if method != methods::TOOLS_CALL {
        let result = match resumed {
            Some(Err(error)) => Err(error),
            Some(Ok(_)) => Err(RpcError::invalid_params("Invalid params: this `requestState` belongs to a tool call")),
            None => context.result(&id, method.clone(), params).await,
        };
        let answer = context.envelope(id, &method, result);
        let (response, size) = json(status(answer.error_code()), &answer);
        context.record(noted, &answer, size);
        return response;
    }
    let token = params.get("_meta").and_then(|m| m.get("progressToken")).cloned();
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    // Only a 2026-07-28 call is ever parked, its request state bound to this digest.
    let arguments = if context.family == Family::Stateless2026 { params.get("arguments").cloned() } else { None };
    let mut drive =
        Drive { context, call: None, id, method, name, arguments, keys: 0, token, sse, queued: VecDeque::new() };
    if let Some(resumed) = resumed {
        if let Err(error) = resumed.and_then(|(parked, responses)| drive.resume(&parked, responses)) {
            drive.queued.push_back(Message::Built(envelope(drive.id.clone(), Err(error))));
        }
    } else {
        let (sink, upcalls) = upcall::channel(drive.takes_progress());
        let (context, id) = (Arc::clone(&drive.context), drive.id.clone());
        let calling = async move { context.unsealed(&id, methods::TOOLS_CALL, params, Some(sink)).await };
        drive.call = Some(Call { calling: Box::pin(calling), upcalls });
    }
    let first = drive.advance().await.unwrap_or(Message::Built(Value::Null));
    if drive.call.is_none() && drive.queued.is_empty() {
        let (response, size) = json(status(first.error_code()), &first);
        drive.context.record(noted, &first, size);
        return response;
    }
    // A 2025 session's stream is resumable: the call goes on when the connection drops
    // (only `notifications/cancelled` cancels it), and a `GET` with `Last-Event-ID` takes the
    // stream up again. 2026-07-28 has no resuming: closing the stream cancels the call.
    let session = drive.context.session.clone().filter(|_| drive.context.family == Family::Sessions2025);
    let start = (Some(first), drive, Some(noted));
    let messages = futures_util::stream::unfold(start, |(first, mut drive, mut noted)| async move {
        let next = match first {
            Some(first) => first,
            None => drive.advance().await?,
        };
        let text = String::from_utf8(next.to_vec()).unwrap_or_default();
        if drive.call.is_none()
            && drive.queued.is_empty()
            && let Some(noted) = noted.take()
        {
            drive.context.record(noted, &next, text.len());
        }
        Some((text, (None, drive, noted)))
    });
    if let Some(session) = session {
        // Without randomness for a stream id the call was dropped with its stream: say so.
        return resume::serve(&session, false, messages, None).unwrap_or_else(|| {
            let error = RpcError { code: -32603, message: "no randomness for a stream id".into(), data: None };
            json(StatusCode::INTERNAL_SERVER_ERROR, &Message::Built(envelope(Value::Null, Err(error)))).0
        });
    }
    let events = futures_util::StreamExt::map(messages, |text| {
        Ok::<_, Infallible>(Event::default().event("message").data(text))
    });
    Sse::new(events).into_response()
}

/// What to do with one upcall.
enum Step {
    /// Nothing (dropped, or refused to the provider).
    Skip,
    /// Send this message to the client on the call's stream.
    Send(Value),
    /// Set the call aside and ask the client this in an `InputRequiredResult`.
    Park(Asked),
}

/// One `tools/call` on its way: what its provider sends back, turned into messages for the
/// client, the last of which is the answer.
struct Drive {
    context: Arc<Context>,
    /// The call, until it has given its answer (or was parked).
    call: Option<Call>,
    id: Value,
    method: String,
    name: String,
    /// The call's arguments (of a 2026-07-28 call), whose digest its request state is
    /// bound to.
    arguments: Option<Value>,
    /// Keys given to the provider's requests so far (a parked call keeps counting).
    keys: u64,
    /// The client's progress token.
    token: Option<Value>,
    /// Whether the client takes SSE.
    sse: bool,
    queued: VecDeque<Message>,
}

impl Drive {
    /// The next message for the client; the answer is the last (then `call` is `None` and
    /// nothing is queued).
    async fn advance(&mut self) -> Option<Message> {
        if let Some(next) = self.queued.pop_front() {
            return Some(next);
        }
        loop {
            let next = self.call.as_mut()?.next().await;
            match next {
                Next::Done(result) => {
                    let mut call = self.call.take()?;
                    // Progress sent just before the answer goes first; a request is too late.
                    while let Ok(upcall) = call.upcalls.try_recv() {
                        match upcall {
                            Upcall::Progress(progress) => {
                                self.queued.extend(self.progress(progress).map(Message::Built));
                            }
                            Upcall::Log(message) => self.queued.extend(self.log(message).map(Message::Built)),
                            Upcall::Request(asked) => asked.refuse(-32603, "the call already ended"),
                        }
                    }
                    let result = match self.context.family {
                        Family::Stateless2026 => {
                            result.and_then(|answer| sealed(answer, || self.state(rounds::Held::Relayed(None))))
                        }
                        Family::Sessions2025 => result,
                    };
                    let answer = self.context.envelope(self.id.clone(), &self.method, result);
                    if self.queued.is_empty() {
                        return Some(answer);
                    }
                    self.queued.push_back(answer);
                    return self.queued.pop_front();
                }
                Next::Upcall(upcall) => match self.step(upcall) {
                    Step::Skip => {}
                    Step::Send(message) => return Some(Message::Built(message)),
                    Step::Park(asked) => {
                        let call = self.call.take()?;
                        return Some(self.park(call, asked));
                    }
                },
            }
        }
    }

    /// Whether the client takes progress: it sent a token and takes SSE. Only then is its
    /// provider given a token (progress nobody reads costs a provider real work).
    fn takes_progress(&self) -> bool {
        self.token.is_some() && self.sse
    }

    /// A progress notification for the client, if it takes progress.
    fn progress(&self, mut progress: Value) -> Option<Value> {
        let token = self.token.as_ref().filter(|_| self.takes_progress())?;
        progress["progressToken"] = token.clone();
        Some(object([("jsonrpc", "2.0".into()), ("method", methods::PROGRESS.into()), ("params", progress)]))
    }

    /// What one upcall becomes: progress for the client, or a request of the provider's —
    /// refused when the client did not declare what it needs, else passed on as the revision
    /// has it (on this stream for a 2025 session, in an `InputRequiredResult` for
    /// 2026-07-28).
    /// A provider's log message for the client, if it takes SSE and the message's level
    /// is one it wants (a 2026-07-28 request gets none unless it named a level).
    fn log(&self, message: Value) -> Option<Value> {
        let wanted = self.context.log_level.as_deref();
        if !self.sse || (self.context.family == Family::Stateless2026 && wanted.is_none()) {
            return None;
        }
        let level = message.get("level").and_then(Value::as_str).unwrap_or_default();
        upcall::passes(level, wanted)
            .then(|| object([("jsonrpc", "2.0".into()), ("method", methods::MESSAGE.into()), ("params", message)]))
    }

    fn step(&self, upcall: Upcall) -> Step {
        let asked = match upcall {
            Upcall::Progress(progress) => return self.progress(progress).map_or(Step::Skip, Step::Send),
            Upcall::Log(message) => return self.log(message).map_or(Step::Skip, Step::Send),
            Upcall::Request(asked) => asked,
        };
        if let Err(why) = upcall::client_can_take(&self.context.capabilities, &asked.method, &asked.params) {
            asked.refuse(-32601, why.to_string());
            return Step::Skip;
        }
        match (self.context.family, &self.context.session) {
            (Family::Stateless2026, _) if rounds::available() => Step::Park(asked),
            (Family::Stateless2026, _) => {
                asked.refuse(-32603, "the hub has no key to seal a request state with");
                Step::Skip
            }
            (Family::Sessions2025, Some(session)) if self.sse => {
                let (method, params) = (asked.method.clone(), asked.params.clone());
                let id = self.context.hub.ask(session, asked);
                Step::Send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            }
            (Family::Sessions2025, _) => {
                asked.refuse(
                    -32603,
                    "the client made this call without accepting text/event-stream, so no request can reach it",
                );
                Step::Skip
            }
        }
    }

    /// What a round's state of this call is bound to, held as `held`.
    fn state(&self, held: rounds::Held) -> rounds::State {
        rounds::State {
            held,
            method: self.method.clone(),
            name: self.name.clone(),
            endpoint: self.context.view.endpoint(),
            arguments: rounds::arguments_digest(self.arguments.as_ref()),
        }
    }

    /// Sets `call` aside for the client's next round; the `InputRequiredResult` asking it
    /// what the provider asked (`asked`, and what else it asked meanwhile).
    fn park(&mut self, mut call: Call, asked: Asked) -> Message {
        call.upcalls.set_parked(true);
        let mut waiting = Vec::from([asked]);
        while let Ok(upcall) = call.upcalls.try_recv() {
            if let Step::Park(more) = self.step(upcall) {
                waiting.push(more);
            }
        }
        let mut parked = Parked {
            call,
            waiting: std::collections::BTreeMap::new(),
            method: self.method.clone(),
            name: self.name.clone(),
            keys: self.keys,
        };
        for asked in waiting {
            parked.wait_for(asked);
        }
        self.ask_again(parked)
    }

    /// Parks `parked` and asks its client what it waits for.
    fn ask_again(&self, parked: Parked) -> Message {
        let state = rounds::State {
            method: parked.method.clone(),
            name: parked.name.clone(),
            ..self.state(rounds::Held::Parked(String::new()))
        };
        let mut result = rounds::input_required(&parked);
        let id = self.context.hub.park(parked);
        let Some(sealed) = rounds::seal(&rounds::State { held: rounds::Held::Parked(id), ..state }) else {
            return Message::Built(envelope(
                self.id.clone(),
                Err(RpcError {
                    code: -32603,
                    message: "the hub has no key to seal a request state with".into(),
                    data: None,
                }),
            ));
        };
        result["requestState"] = json!(sealed);
        self.context.envelope(self.id.clone(), &self.method, Ok(Answer::Read(result)))
    }

    /// Takes up the parked call a retry names, answering what its provider asked with the
    /// client's `inputResponses`; what they leave unanswered is asked again at once.
    fn resume(&mut self, parked: &str, mut responses: serde_json::Map<String, Value>) -> Result<(), RpcError> {
        // Each answers a request as its result would: an object. Refused before the call is
        // taken up, so it stays parked for a retry that answers properly.
        if let Some((key, _)) = responses.iter().find(|(_, response)| !response.is_object()) {
            return Err(RpcError::invalid_params(format!(
                "Invalid params: `inputResponses.{key}` must be the result of the request asked (an object)"
            )));
        }
        let mut parked = self.context.hub.unpark(parked).ok_or_else(|| {
            RpcError::invalid_params(
                "Invalid params: this `requestState` was used already, or its call ended or waited too long",
            )
        })?;
        // What the provider stopped waiting for is asked no more.
        parked.waiting.retain(|_, asked| !asked.abandoned());
        for (key, asked) in std::mem::take(&mut parked.waiting) {
            match responses.remove(&key) {
                Some(response) => asked.answer(Ok(response)),
                None => {
                    parked.waiting.insert(key, asked);
                }
            }
        }
        self.keys = parked.keys;
        if parked.waiting.is_empty() {
            parked.call.upcalls.set_parked(false);
            self.call = Some(parked.call);
        } else {
            let again = self.ask_again(parked);
            self.queued.push_back(again);
        }
        Ok(())
    }
}

/// One JSON-RPC message as an SSE event.
pub fn message_event(message: &Value) -> Event {
    Event::default().event("message").data(message.to_string())
}

/// `notifications/message` for each log message a provider sends outside any call that
/// 2025 session `session` takes on `view`, its endpoint ([`Hub::session_takes_log`]: a
/// level set, and met). A listener that fell behind misses the ones it could not keep.
pub fn log_notes(hub: Arc<Hub>, view: View, session: String) -> impl Stream<Item = Value> + Send + 'static {
    let logs = hub.provider_logs();
    futures_util::stream::unfold((hub, logs, view, session), |(hub, mut logs, view, session)| async move {
        loop {
            match logs.recv().await {
                Ok(logged) if hub.session_takes_log(&session, &view, &logged) => {
                    let note = object([
                        ("jsonrpc", "2.0".into()),
                        ("method", methods::MESSAGE.into()),
                        ("params", logged.params),
                    ]);
                    return Some((note, (hub, logs, view, session)));
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

/// `notifications/resources/updated` for each resource a provider offers that changed —
/// only those `wanted` gives a URI for (the one the listener subscribed by: URIs are per
/// endpoint), asked as each comes — each made by `note` from that URI. A listener that fell
/// behind misses the ones it could not keep.
pub fn resource_notes(
    hub: &Hub,
    wanted: impl Fn(&butler_mcp::Updated) -> Option<String> + Send + 'static,
    note: impl Fn(&str) -> Value + Send + 'static,
) -> impl Stream<Item = Value> + Send + 'static {
    let updates = hub.resource_updates();
    futures_util::stream::unfold((updates, wanted, note), |(mut updates, wanted, note)| async move {
        loop {
            match updates.recv().await {
                Ok(updated) => {
                    if let Some(uri) = wanted(&updated) {
                        let next = note(&uri);
                        return Some((next, (updates, wanted, note)));
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use butler_mcp::answer::Written;
    use serde_json::value::RawValue;

    /// The response to `id` carrying `result` kept as written, for a client of each revision.
    fn relayed(id: Value, result: &str) -> [Value; 2] {
        [false, true].map(|complete| {
            let raw: &RawValue = serde_json::from_str(result).unwrap_or_else(|e| panic!("{result}: {e}"));
            let Some(Answer::Verbatim(result)) = Written::check(raw).map(|w| w.answer(true)) else {
                panic!("{raw} is kept as written")
            };
            let message = Message::Relayed { id: id.clone(), result, complete };
            let text = message.to_vec();
            let read: Value = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{message:?}: {e}"));
            assert_eq!(read, message.into_value(), "the text and the value agree");
            read
        })
    }

    #[test]
    fn a_relayed_result_is_written_as_the_built_one_would_be() {
        for (id, result) in [
            (json!(7), r#"{"content":[{"type":"text","text":"caf\u00e9"}]}"#),
            (json!("a\"b"), "{}"),
            (Value::Null, "{ \n }"),
            (json!(-1), r#"{"isError":true,"content":[]}"#),
        ] {
            let expected: Value = serde_json::from_str(result).unwrap_or_default();
            let [sessions, stateless] = relayed(id.clone(), result);
            assert_eq!(sessions, envelope(id.clone(), Ok(expected.clone())));
            assert_eq!(stateless, envelope(id, Ok(completed("tools/call", expected))));
            assert_eq!(stateless["result"]["resultType"], "complete");
        }
    }
}
