//! Protocol revision 2026-07-28 over Streamable HTTP: stateless. No `initialize`, no
//! session: every request carries its revision and the client's capabilities in `_meta`,
//! and the `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`, `prompts/get`,
//! `resources/read`) `Mcp-Name` headers repeat what the body says.
//!
//! Checked in this order, each refusal HTTP 400: `_meta` without the revision or the
//! capabilities → `-32602`; a header missing or disagreeing with the body → `-32020`; a
//! revision the hub does not speak → `-32022` with the supported ones. A method this
//! revision removed (`initialize`, `ping`, `logging/setLevel`, `resources/subscribe`,
//! `resources/unsubscribe`) or never had → 404 `-32601`. One message per `POST`;
//! notifications → 202. Every result carries `resultType`, and the cacheable ones (the
//! lists, `resources/read`, `server/discover`) `ttlMs` and `cacheScope`. List changes reach
//! a client only on its `subscriptions/listen` stream.

use butler_mcp::methods;
use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};

use super::dispatch::{self, Context, Family, completed};
use super::{VERSION_HEADER, accepts_sse, header, sessions_2025};
use butler_mcp::framing::{ClientBody, ClientMessage as Message};
use butler_mcp::{Changed, Hub, RpcError, View};

/// The stateless revision.
pub const REVISION: &str = "2026-07-28";

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// Methods of the 2025 revisions that 2026-07-28 removed.
const REMOVED: &[&str] = &[
    methods::INITIALIZE,
    methods::PING,
    methods::LOGGING_SET_LEVEL,
    methods::RESOURCES_SUBSCRIBE,
    methods::RESOURCES_UNSUBSCRIBE,
];

/// Names each stateless request for cancellation (a closed stream cancels its call).
static REQUESTS: AtomicU64 = AtomicU64::new(1);

/// Whether a `POST` is of this revision: its `MCP-Protocol-Version` header names a revision
/// other than the 2025 ones, or a message's `_meta` names a protocol version.
pub fn speaks(headers: &HeaderMap, messages: &[Message]) -> bool {
    let named_in_meta = |params: &Value| params.get("_meta").and_then(|m| m.get(META_VERSION)).is_some();
    header(headers, VERSION_HEADER).is_some_and(|v| !sessions_2025::REVISIONS.contains(&v))
        || messages.iter().any(|m| match m {
            Message::Request { params, .. } | Message::Notification { params, .. } => named_in_meta(params),
            Message::Response { .. } => false,
        })
}

/// A request refused before it reaches the hub.
struct Refused {
    status: StatusCode,
    error: RpcError,
}

impl Refused {
    fn bad(code: i64, message: impl Into<String>) -> Self {
        Self { status: StatusCode::BAD_REQUEST, error: RpcError { code, message: message.into(), data: None } }
    }

    fn answer(self, id: Value) -> Response {
        (self.status, Json(dispatch::envelope(id, Err(self.error)))).into_response()
    }
}

/// `POST` of a 2026-07-28 client.
pub async fn post(
    hub: &Arc<Hub>,
    endpoint: &super::Endpoint,
    headers: &HeaderMap,
    body: ClientBody,
    body_bytes: usize,
) -> Response {
    if body.array {
        return Refused::bad(-32600, "Invalid Request: 2026-07-28 takes one message per POST, not an array of them")
            .answer(Value::Null);
    }
    match body.messages.into_iter().next() {
        Some(Message::Request { id, method, params }) => {
            request(hub, endpoint, headers, id, method, params, body_bytes).await
        }
        Some(Message::Notification { .. }) => StatusCode::ACCEPTED.into_response(),
        Some(Message::Response { .. }) | None => Refused::bad(
            -32600,
            "Invalid Request: a 2026-07-28 client sends no responses (answers to the hub's questions go in `inputResponses`)",
        )
        .answer(Value::Null),
    }
}

async fn request(
    hub: &Arc<Hub>,
    endpoint: &super::Endpoint,
    headers: &HeaderMap,
    id: Value,
    method: String,
    params: Value,
    body_bytes: usize,
) -> Response {
    let view = &endpoint.view;
    if let Err(refused) = check(headers, &method, &params) {
        return refused.answer(id);
    }
    match method.as_str() {
        methods::SERVER_DISCOVER => {
            let declared = params.get("_meta").and_then(|meta| meta.get(META_CAPABILITIES));
            let none = Value::Object(serde_json::Map::new());
            let asker = butler_mcp::Asker::stateless_2026(declared.unwrap_or(&none), None);
            let instructions = super::instructions(hub, view, &asker).await;
            let capabilities = super::capabilities(hub, view);
            return Json(dispatch::envelope(id, Ok(discover(instructions, capabilities)))).into_response();
        }
        methods::SUBSCRIPTIONS_LISTEN => return listen(hub, view, id, &params).await,
        removed if REMOVED.contains(&removed) => {
            let error = RpcError {
                code: -32601,
                message: format!("Method not found: {removed} (removed in {REVISION})"),
                data: None,
            };
            return (StatusCode::NOT_FOUND, Json(dispatch::envelope(id, Err(error)))).into_response();
        }
        _ => {}
    }
    let request_name = format!("stateless-{}", REQUESTS.fetch_add(1, Ordering::Relaxed));
    let capabilities = params["_meta"][META_CAPABILITIES].clone();
    let log_level = params["_meta"][META_LOG_LEVEL].as_str().map(str::to_owned);
    let context = Context {
        hub: Arc::clone(hub),
        view: view.clone(),
        token: endpoint.token.clone(),
        agent: endpoint.agent.clone(),
        caller: request_name,
        session: None,
        revision: REVISION.to_owned(),
        body_bytes,
        family: Family::Stateless2026,
        capabilities,
        log_level,
    };
    // As the transport has it: an unknown method 404; a capability the request needed but
    // did not declare (a provider's own refusal, passed on) 400.
    let status = |code: Option<i64>| match code {
        Some(-32601) => StatusCode::NOT_FOUND,
        Some(-32021) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    };
    dispatch::single(Arc::new(context), accepts_sse(headers), (id, method, params), status).await
}

/// The request's `_meta` and headers, checked in the order the module doc gives.
fn check(headers: &HeaderMap, method: &str, params: &Value) -> Result<(), Refused> {
    let meta = params.get("_meta");
    let version = meta.and_then(|m| m.get(META_VERSION)).and_then(Value::as_str);
    let capabilities = meta.and_then(|m| m.get(META_CAPABILITIES)).filter(|c| c.is_object());
    let (Some(version), Some(_)) = (version, capabilities) else {
        return Err(Refused::bad(
            -32602,
            format!(
                "Invalid params: a {REVISION} request carries `_meta` with \"{META_VERSION}\" (a string) and \"{META_CAPABILITIES}\" (an object)"
            ),
        ));
    };
    if let Some(level) = meta.and_then(|m| m.get(META_LOG_LEVEL))
        && !level.as_str().is_some_and(|l| butler_mcp::upcall::LEVELS.contains(&l))
    {
        return Err(Refused::bad(
            -32602,
            format!("Invalid params: \"{META_LOG_LEVEL}\" must be one of {}", butler_mcp::upcall::LEVELS.join(", ")),
        ));
    }
    let mismatch = |what: &str| Refused::bad(-32020, format!("Header mismatch: {what}"));
    match header(headers, VERSION_HEADER) {
        None => return Err(mismatch(&format!("no MCP-Protocol-Version header (the body's _meta says {version:?})"))),
        Some(named) if named != version => {
            return Err(mismatch(&format!(
                "MCP-Protocol-Version header value {named:?} does not match body value {version:?}"
            )));
        }
        Some(_) => {}
    }
    if version != REVISION {
        let mut supported = vec![REVISION];
        supported.extend(sessions_2025::REVISIONS);
        return Err(Refused {
            status: StatusCode::BAD_REQUEST,
            error: RpcError {
                code: -32022,
                message: "Unsupported protocol version".to_owned(),
                data: Some(json!({"supported": supported, "requested": version})),
            },
        });
    }
    match header(headers, "mcp-method") {
        None => return Err(mismatch(&format!("no Mcp-Method header (the body's method is {method:?})"))),
        Some(named) if named != method => {
            return Err(mismatch(&format!("Mcp-Method header value {named:?} does not match body value {method:?}")));
        }
        Some(_) => {}
    }
    let name_field = match method {
        methods::TOOLS_CALL | methods::PROMPTS_GET => Some("name"),
        methods::RESOURCES_READ => Some("uri"),
        _ => None,
    };
    if let Some(field) = name_field {
        let in_body = params.get(field).and_then(Value::as_str);
        let named = header(headers, "mcp-name").map(decoded);
        match (named, in_body) {
            (None, _) => return Err(mismatch(&format!("no Mcp-Name header (the body's {field} is {in_body:?})"))),
            (Some(Err(why)), _) => return Err(mismatch(&format!("the Mcp-Name header {why}"))),
            (Some(Ok(named)), Some(in_body)) if named == in_body => {}
            (Some(Ok(named)), in_body) => {
                return Err(mismatch(&format!(
                    "Mcp-Name header value {named:?} does not match body value {:?}",
                    in_body.unwrap_or_default()
                )));
            }
        }
    }
    Ok(())
}

/// A header value, decoded from the `=?base64?…?=` form clients use for text a header
/// cannot carry.
fn decoded(value: &str) -> Result<Cow<'_, str>, String> {
    let Some(encoded) = value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) else {
        return Ok(Cow::Borrowed(value));
    };
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|e| format!("is not valid base64 ({e})"))?;
    String::from_utf8(bytes).map(Cow::Owned).map_err(|_| "is not UTF-8 once decoded".to_owned())
}

/// `server/discover`: the revisions and capabilities the hub serves, and what the endpoint
/// tells its clients of itself.
fn discover(instructions: String, capabilities: Value) -> Value {
    let mut supported = vec![REVISION];
    supported.extend(sessions_2025::REVISIONS);
    completed(
        methods::SERVER_DISCOVER,
        json!({
            "supportedVersions": supported,
            "capabilities": capabilities,
            "instructions": instructions,
            "_meta": {META_SERVER_INFO: super::server_info()},
        }),
    )
}

/// `subscriptions/listen`: an SSE stream that opens with the acknowledgement of what it
/// will carry, then each list change the client asked for and each update of the
/// resources it named (`resourceSubscriptions`: those a provider took the subscription
/// for), tagged with the request's id.
async fn listen(hub: &Arc<Hub>, view: &View, id: Value, params: &Value) -> Response {
    let Some(asked) = params.get("notifications").filter(|n| n.is_object()) else {
        let error = RpcError::invalid_params("Invalid params: subscriptions/listen needs `notifications` (an object)");
        return Json(dispatch::envelope(id, Err(error))).into_response();
    };
    let flag = |key: &str| asked.get(key).and_then(Value::as_bool) == Some(true);
    let wanted = Changed {
        tools: flag("toolsListChanged"),
        prompts: flag("promptsListChanged"),
        resources: flag("resourcesListChanged"),
    };
    let mut honoured = serde_json::Map::new();
    for (on, key) in [
        (wanted.tools, "toolsListChanged"),
        (wanted.prompts, "promptsListChanged"),
        (wanted.resources, "resourcesListChanged"),
    ] {
        if on {
            honoured.insert(key.to_owned(), json!(true));
        }
    }
    let named = match asked.get("resourceSubscriptions") {
        None => Vec::new(),
        Some(Value::Array(uris))
            if uris.len() <= butler_mcp::MAX_SUBSCRIPTIONS && uris.iter().all(Value::is_string) =>
        {
            uris.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        }
        Some(_) => {
            let error = RpcError::invalid_params(format!(
                "Invalid params: `resourceSubscriptions` must be an array of at most {} URIs",
                butler_mcp::MAX_SUBSCRIPTIONS
            ));
            return Json(dispatch::envelope(id, Err(error))).into_response();
        }
    };
    let mut subscribed = Vec::new();
    for uri in named {
        if let Ok(listening) = hub.listen_to(view, &uri).await {
            subscribed.push(listening);
        }
    }
    if asked.get("resourceSubscriptions").is_some() {
        let uris: Vec<&str> = subscribed.iter().map(butler_mcp::Listening::uri).collect();
        honoured.insert("resourceSubscriptions".to_owned(), json!(uris));
    }
    let tag = json!({META_SUBSCRIPTION: id});
    let ack = json!({"jsonrpc": "2.0", "method": methods::SUBSCRIPTIONS_ACKNOWLEDGED,
                     "params": {"_meta": tag, "notifications": honoured}});
    let changes = hub.changes();
    let list_tag = tag.clone();
    let notes = dispatch::change_notes(
        changes,
        wanted,
        move |method| json!({"jsonrpc": "2.0", "method": method, "params": {"_meta": list_tag.clone()}}),
    );
    let updates = dispatch::resource_notes(
        hub,
        // The stream holds its subscriptions: they end when it does.
        move |updated| subscribed.iter().find_map(|s| s.uri_of(updated)).map(str::to_owned),
        move |uri| {
            json!({"jsonrpc": "2.0", "method": methods::RESOURCES_UPDATED,
                   "params": {"uri": uri, "_meta": tag.clone()}})
        },
    );
    let events = futures_util::StreamExt::map(
        futures_util::StreamExt::chain(futures_util::stream::iter([ack]), futures_util::stream::select(notes, updates)),
        |note| Ok::<_, Infallible>(dispatch::message_event(&note)),
    );
    let mut response = Sse::new(events).keep_alive(KeepAlive::default()).into_response();
    response.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::mcp::dispatch::{DISCOVER_TTL_MS, LIST_TTL_MS};

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_str(value).expect("a header value"));
        }
        headers
    }

    fn meta(version: &str) -> Value {
        json!({META_VERSION: version, META_CAPABILITIES: {}})
    }

    #[test]
    fn requests_are_checked_in_order() {
        let code = |h: &[(&'static str, &str)], method: &str, params: Value| {
            check(&headers(h), method, &params).err().map(|r| (r.status.as_u16(), r.error.code))
        };
        let good = [(VERSION_HEADER, REVISION), ("mcp-method", "tools/list")];
        assert_eq!(code(&good, "tools/list", json!({"_meta": meta(REVISION)})), None);
        assert_eq!(code(&good, "tools/list", json!({})), Some((400, -32602)), "no _meta");
        assert_eq!(code(&good, "tools/list", json!({"_meta": {META_VERSION: REVISION}})), Some((400, -32602)));
        let loud = json!({"_meta": {META_VERSION: REVISION, META_CAPABILITIES: {}, META_LOG_LEVEL: "loud"}});
        assert_eq!(code(&good, "tools/list", loud), Some((400, -32602)), "an unknown log level");
        assert_eq!(code(&good[1..], "tools/list", json!({"_meta": meta(REVISION)})), Some((400, -32020)));
        assert_eq!(code(&good, "tools/list", json!({"_meta": meta("v9")})), Some((400, -32020)), "disagree");
        let old = [(VERSION_HEADER, "v9"), ("mcp-method", "tools/list")];
        assert_eq!(code(&old, "tools/list", json!({"_meta": meta("v9")})), Some((400, -32022)));
        assert_eq!(code(&good[..1], "tools/list", json!({"_meta": meta(REVISION)})), Some((400, -32020)));
        assert_eq!(code(&good, "prompts/list", json!({"_meta": meta(REVISION)})), Some((400, -32020)));
    }

    #[test]
    fn names_must_match_the_body_plain_or_in_base64() {
        let call = |name: Option<&str>, body: &str| {
            let mut h = vec![(VERSION_HEADER, REVISION), ("mcp-method", "tools/call")];
            if let Some(name) = name {
                h.push(("mcp-name", name));
            }
            check(&headers(&h), "tools/call", &json!({"name": body, "_meta": meta(REVISION)}))
                .err()
                .map(|r| r.error.code)
        };
        assert_eq!(call(Some("ns__echo"), "ns__echo"), None);
        assert_eq!(call(None, "ns__echo"), Some(-32020));
        assert_eq!(call(Some("ns__other"), "ns__echo"), Some(-32020));
        // "héllo" in base64.
        assert_eq!(call(Some("=?base64?aMOpbGxv?="), "héllo"), None);
        assert_eq!(call(Some("=?base64?!!?="), "héllo"), Some(-32020));
    }

    #[test]
    fn results_say_they_are_complete_and_how_long_to_keep_them() {
        let listed = completed("tools/list", json!({"tools": []}));
        assert_eq!(listed, json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}));
        let called = completed("tools/call", json!({"content": []}));
        assert_eq!(called, json!({"content": [], "resultType": "complete"}));
        let asked = completed("tools/call", json!({"resultType": "input_required", "requestState": "x"}));
        assert_eq!(asked["resultType"], "input_required");
        let discovered = discover("what the endpoint is".to_owned(), json!({"logging": {}}));
        assert_eq!(discovered["supportedVersions"][0], REVISION);
        assert!(discovered["capabilities"].get("logging").is_some(), "{discovered}");
        assert_eq!(discovered["ttlMs"], DISCOVER_TTL_MS);
        let skills = completed("skills/list", json!({"skills": []}));
        assert_eq!((&skills["ttlMs"], &skills["cacheScope"]), (&json!(LIST_TTL_MS), &json!("private")));
        assert_eq!(completed("skills/get", json!({"skill": {}}))["cacheScope"], "private");
    }

    #[test]
    fn requests_of_2025_and_2026_revisions_are_told_apart() {
        let request = |params: Value| vec![Message::Request { id: json!(1), method: "tools/list".into(), params }];
        assert!(!speaks(&HeaderMap::new(), &request(json!({}))));
        assert!(!speaks(&headers(&[(VERSION_HEADER, "2025-06-18")]), &request(json!({}))));
        assert!(speaks(&headers(&[(VERSION_HEADER, REVISION)]), &request(json!({}))));
        assert!(speaks(&headers(&[(VERSION_HEADER, "1999-01-01")]), &request(json!({}))));
        assert!(speaks(&HeaderMap::new(), &request(json!({"_meta": meta(REVISION)}))));
    }
}
