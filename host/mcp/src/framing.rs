//! The hub's JSON-RPC framing in both directions, as pure functions (testable, and fuzzed,
//! without a client or a provider process):
//!
//! - from clients: a `POST` body is one message or a non-empty batch of them, each a
//!   request, a notification or a response ([`client_messages`]);
//! - to providers: a `tools/call` goes out under the tool's own name, without the client's
//!   progress token ([`tool_call_params`]); every request is one line of compact JSON
//!   with the hub's own id and progress token ([`provider_request`]);
//! - from providers: stdout is split into lines of at most a given length
//!   ([`provider_lines`]); a line is a notification, another message, blank, or not
//!   JSON-RPC ([`provider_line`]); a message is routed by its `id` and `method`
//!   ([`provider_route`]); the common line, an answer, is read straight into its parts
//!   ([`provider_reply`]). These are the rules the provider's reader task follows.
//!
//! Messages are assembled with [`object`], which moves its values in: `json!` copies each
//! value it is given through a serializer, a whole result or tool list included.

use crate::methods;
use serde_json::{Value, json};

use crate::answer::Written;

/// A JSON object of `fields`, in order, each value moved in.
#[must_use]
pub fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    let mut object = serde_json::Map::with_capacity(N);
    for (key, value) in fields {
        object.insert(key.to_owned(), value);
    }
    Value::Object(object)
}

/// What one client message is.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientMessage {
    /// A request: it gets an answer.
    Request {
        /// Its id: a string or an integer.
        id: Value,
        /// The method.
        method: String,
        /// Its `params` (`{}` when absent).
        params: Value,
    },
    /// A notification: no answer.
    Notification {
        /// The method.
        method: String,
        /// Its `params` (`{}` when absent).
        params: Value,
    },
    /// A response: a client's answer to a request the hub passed on from a provider.
    Response {
        /// The id the hub gave the request.
        id: Value,
        /// Its `result`, or its `error` object.
        reply: Result<Value, Value>,
    },
}

/// A body refused as a whole, and the JSON-RPC error to answer it with.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// The id of the message refused (`null` when it has none, or the body is not JSON).
    pub id: Value,
    /// `-32700` (not JSON) or `-32600` (not a valid request).
    pub code: i64,
    /// What is wrong, for a person.
    pub message: String,
}

/// The messages of one `POST` body.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientBody {
    /// The body was an array: the answers go back as one.
    pub array: bool,
    /// Its messages, in order (never empty).
    pub messages: Vec<ClientMessage>,
}

/// Splits and classifies a `POST` body: one message, or a non-empty array of them.
///
/// # Errors
/// [`Refusal`]: the body is not JSON, is an empty batch, or one of its messages is not a
/// JSON-RPC 2.0 message (the first such one is named).
pub fn client_messages(body: &[u8]) -> Result<ClientBody, Refusal> {
    if let Some(message) = single_request(body) {
        return Ok(ClientBody { array: false, messages: vec![message] });
    }
    let parsed: Value = serde_json::from_slice(body).map_err(|e| Refusal {
        id: Value::Null,
        code: -32700,
        message: format!("Parse error: {e}"),
    })?;
    let (array, raw) = match parsed {
        Value::Array(items) if items.is_empty() => {
            return Err(Refusal {
                id: Value::Null,
                code: -32600,
                message: "Invalid Request: an empty array".to_owned(),
            });
        }
        Value::Array(items) => (true, items),
        other => (false, vec![other]),
    };
    let mut messages = Vec::with_capacity(raw.len());
    for mut message in raw {
        match classify(&mut message) {
            Ok(message) => messages.push(message),
            Err(why) => {
                // JSON-RPC: an id that cannot be read (neither a string nor an integer) is
                // answered with `null`, never echoed.
                let id = message.get("id").filter(|id| id.is_string() || id.is_i64() || id.is_u64()).cloned();
                let id = id.unwrap_or(Value::Null);
                return Err(Refusal { id, code: -32600, message: format!("Invalid Request: {why}") });
            }
        }
    }
    Ok(ClientBody { array, messages })
}

/// A field of a message read straight into its parts ([`Lone`], [`ReplyLine`]) that tells
/// absent (`None`) from `null` (`Some(Value::Null)`), which `Option` would not.
struct Field<T>(Option<T>);

impl<T> Default for Field<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Field<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(|value| Self(Some(value)))
    }
}

/// One client message read straight into its parts: no map is built for the envelope.
/// Any other key makes it fall back to the `Value` reading: a value read only to be
/// skipped is not checked as one that is kept would be (its UTF-8, its escapes, its
/// numbers' range, its depth), and the two readings must refuse the same bodies.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Lone<'a> {
    #[serde(default, borrow)]
    jsonrpc: Field<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    id: Field<Value>,
    #[serde(default, borrow)]
    method: Field<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    params: Field<Value>,
    #[serde(default)]
    result: Field<serde::de::IgnoredAny>,
    #[serde(default)]
    error: Field<serde::de::IgnoredAny>,
}

/// Whether `json` is an object: a struct also reads from an array (its fields in order), but
/// only an object is one message.
fn is_object(json: &[u8]) -> bool {
    json.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// The common body, one valid request or notification, read without building the
/// envelope as a map (a `tools/call` is the hub's hot path). `None` for anything else — a
/// batch, a response, a message [`classify`] refuses, a duplicated or unknown key — which
/// [`client_messages`] then reads as a [`Value`], so the answer is the same either way.
fn single_request(body: &[u8]) -> Option<ClientMessage> {
    if !is_object(body) {
        return None;
    }
    let lone: Lone = serde_json::from_slice(body).ok()?;
    if lone.jsonrpc.0.as_deref() != Some("2.0") || lone.result.0.is_some() || lone.error.0.is_some() {
        return None;
    }
    let method = lone.method.0?.into_owned();
    let params = lone.params.0.unwrap_or_else(|| json!({}));
    match lone.id.0 {
        None => Some(ClientMessage::Notification { method, params }),
        Some(id) if id.is_string() || id.is_i64() || id.is_u64() => Some(ClientMessage::Request { id, method, params }),
        Some(_) => None,
    }
}

/// Why a client message is not a JSON-RPC message (answered `-32600 Invalid Request: …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Malformed {
    #[error("a JSON-RPC message must be an object")]
    NotAnObject,
    #[error("`jsonrpc` must be \"2.0\"")]
    NotJsonRpc2,
    #[error("`id` must be a string or an integer")]
    BadId,
    #[error("`method` must be a string")]
    BadMethod,
    #[error("a request needs a `method`")]
    NoMethod,
}

/// What one client message is; its `params` are taken out of it.
fn classify(message: &mut Value) -> Result<ClientMessage, Malformed> {
    let object = message.as_object_mut().ok_or(Malformed::NotAnObject)?;
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Malformed::NotJsonRpc2);
    }
    // Taken out, not cloned: tool arguments can be large.
    let params = object.remove("params").unwrap_or_else(|| json!({}));
    match (object.get("method"), object.get("id")) {
        (Some(Value::String(method)), Some(id)) if id.is_string() || id.is_i64() || id.is_u64() => {
            Ok(ClientMessage::Request { id: id.clone(), method: method.clone(), params })
        }
        (Some(Value::String(_)), Some(_)) => Err(Malformed::BadId),
        (Some(Value::String(method)), None) => Ok(ClientMessage::Notification { method: method.clone(), params }),
        (Some(_), _) => Err(Malformed::BadMethod),
        (None, Some(id)) if object.contains_key("result") || object.contains_key("error") => {
            let id = id.clone();
            let reply = match object.remove("error") {
                Some(error) => Err(error),
                None => Ok(object.remove("result").unwrap_or(Value::Null)),
            };
            Ok(ClientMessage::Response { id, reply })
        }
        (None, _) => Err(Malformed::NoMethod),
    }
}

/// The `_meta` keys of a 2026-07-28 request's envelope: they are for the hub, and a
/// provider of the 2025 revisions refuses a request that carries them.
pub const ENVELOPE_KEYS: &[&str] = &[
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/logLevel",
];

/// A client's params as they go to a provider: without the 2026-07-28 envelope in `_meta`
/// ([`ENVELOPE_KEYS`]). Params that are not an object are left as they are.
#[must_use]
pub fn without_envelope(mut params: Value) -> Value {
    if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.retain(|key, _| !ENVELOPE_KEYS.contains(&key.as_str()));
    }
    params
}

/// A client's `tools/call` params as they go to the provider: under the tool's own name
/// (`original`, as the provider listed it), without the client's progress token (the hub
/// sets its own) and without the 2026-07-28 envelope ([`without_envelope`]). Params that
/// are not an object are left as they are.
#[must_use]
pub fn tool_call_params(params: Value, original: Value) -> Value {
    let mut params = without_envelope(params);
    if let Some(object) = params.as_object_mut() {
        object.insert("name".to_owned(), original);
        if let Some(meta) = object.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove("progressToken");
        }
    }
    params
}

/// The protocol revision of the stateless era, as the hub speaks it to providers.
pub const STATELESS_REVISION: &str = "2026-07-28";

/// The `_meta` envelope of a 2026-07-28 request the hub sends a provider: the revision, the
/// client capabilities it may rely on, the hub as the client, and the log level wanted
/// (none: the provider sends no log messages).
#[must_use]
pub fn envelope(capabilities: &Value, log_level: Option<&str>) -> serde_json::Map<String, Value> {
    let mut meta = serde_json::Map::new();
    meta.insert(ENVELOPE_KEYS[0].into(), json!(STATELESS_REVISION));
    meta.insert(ENVELOPE_KEYS[1].into(), capabilities.clone());
    meta.insert(ENVELOPE_KEYS[2].into(), json!({"name": "butler", "version": env!("CARGO_PKG_VERSION")}));
    if let Some(level) = log_level {
        meta.insert(ENVELOPE_KEYS[3].into(), json!(level));
    }
    meta
}

/// The line (compact JSON and `\n`) that sends request `id` to a provider; with `progress`,
/// the hub's own progress token goes into `params._meta`, and with `envelope` (a provider
/// of 2026-07-28) its keys do too (when `params` and its `_meta` are objects).
#[must_use]
pub fn provider_request(
    id: u64,
    method: &str,
    mut params: Value,
    progress: Option<u64>,
    envelope: Option<&serde_json::Map<String, Value>>,
) -> Vec<u8> {
    if (progress.is_some() || envelope.is_some())
        && let Some(object) = params.as_object_mut()
    {
        let meta = object.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            if let Some(token) = progress {
                meta.insert("progressToken".into(), json!(token));
            }
            for (key, value) in envelope.into_iter().flatten() {
                meta.insert(key.clone(), value.clone());
            }
        }
    }
    #[derive(serde::Serialize)]
    struct Request<'a> {
        jsonrpc: &'static str,
        id: u64,
        method: &'a str,
        params: &'a Value,
    }
    let mut line = Vec::with_capacity(256);
    // A `Value` always serializes, and into a `Vec` nothing fails.
    let _ = serde_json::to_writer(&mut line, &Request { jsonrpc: "2.0", id, method, params: &params });
    line.push(b'\n');
    line
}

/// A provider's stdout, cut as its reader cuts it: each line with its `\n` (the last one may
/// lack it), none longer than `max` bytes. `Err` carries the lines before the first one
/// that reached `max` bytes without ending: there the provider is stopped.
///
/// # Errors
/// The complete lines before an oversized one.
pub fn provider_lines(stream: &[u8], max: usize) -> Result<Vec<&[u8]>, Vec<&[u8]>> {
    let max = max.max(1);
    let mut lines = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let window = &rest[..rest.len().min(max)];
        let end = window.iter().position(|b| *b == b'\n').map_or(window.len(), |at| at + 1);
        let line = &rest[..end];
        if line.last() != Some(&b'\n') && line.len() >= max {
            return Err(lines);
        }
        lines.push(line);
        rest = &rest[end..];
    }
    Ok(lines)
}

/// One line from a provider.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderLine {
    /// JSON with a `method` and no `id`: a notification, counted against the flood limit.
    Notification(Value),
    /// Any other JSON value: a response, or a request of the provider's own.
    Message(Value),
    /// Nothing but whitespace: ignored.
    Blank,
    /// Not JSON: noted in the provider's log and ignored.
    NotJson,
}

/// What one line of a provider's stdout is.
#[must_use]
pub fn provider_line(line: &[u8]) -> ProviderLine {
    match serde_json::from_slice::<Value>(line) {
        Ok(message) if message.get("id").is_none() && message.get("method").is_some() => {
            ProviderLine::Notification(message)
        }
        Ok(message) => ProviderLine::Message(message),
        Err(_) if line.iter().all(u8::is_ascii_whitespace) => ProviderLine::Blank,
        Err(_) => ProviderLine::NotJson,
    }
}

/// A provider's line read straight into the parts of a response; any other key makes it
/// fall back to the `Value` reading, as for [`Lone`].
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyLine<'a> {
    /// Read so that it is checked as JSON; the route does not look at it.
    #[serde(default, borrow, rename = "jsonrpc")]
    _jsonrpc: Field<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    id: Field<u64>,
    #[serde(default)]
    method: Field<serde::de::IgnoredAny>,
    /// Its text, checked by [`Written::check`].
    #[serde(default, borrow)]
    result: Field<&'a serde_json::value::RawValue>,
    #[serde(default)]
    error: Field<Value>,
}

/// The common line, the answer to one of the hub's requests (its id, and its `result`'s
/// text or its `error`), read without building the message as a map. `None` for any other
/// line — a notification, a request, a duplicated or unknown key, not JSON — which
/// [`provider_line`] and [`provider_route`] then read, routing an answer to the same reply.
#[must_use]
pub fn provider_reply(line: &[u8]) -> Option<(u64, Result<Written<'_>, Value>)> {
    if !is_object(line) {
        return None;
    }
    let reply: ReplyLine = serde_json::from_slice(line).ok()?;
    if reply.method.0.is_some() {
        return None;
    }
    let id = reply.id.0?;
    let result = Written::check(reply.result.0.unwrap_or(serde_json::value::RawValue::NULL))?;
    Some((id, reply.error.0.map_or(Ok(result), Err)))
}

/// What the hub does with one message from a provider.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderRoute {
    /// The answer to the hub's request `id`: its `result` (`null` when absent), or its
    /// `error`.
    Reply {
        /// The hub's id for the request.
        id: u64,
        /// `result`, or `error`.
        reply: Result<Value, Value>,
    },
    /// A `ping` of the provider's: the hub answers it with this message.
    Answer(Value),
    /// Another request of the provider's: for the client whose call is in flight (the hub
    /// answers it under the provider's own `id`).
    Request {
        /// The provider's id for it.
        id: Value,
        /// The method.
        method: String,
        /// Its params (`{}` when absent).
        params: Value,
    },
    /// Progress for the hub's token `token`.
    Progress {
        /// The hub's progress token.
        token: u64,
        /// The notification's params, passed on to the caller.
        params: Value,
    },
    /// The provider's tools, prompts or resources changed: list them again.
    ListChanged,
    /// A log message (`notifications/message`): its params.
    Log(Value),
    /// A resource the provider offers changed (`notifications/resources/updated`): its URI.
    ResourceUpdated(String),
    /// Nothing to do: another notification, a response with an id the hub never gives (not
    /// an unsigned integer), progress without such a token, or neither `id` nor `method`.
    Ignored,
}

/// Routes one message from a provider by its `id` and `method`.
#[must_use]
pub fn provider_route(mut message: Value) -> ProviderRoute {
    let id = message.get("id").cloned();
    let method = message.get("method").and_then(Value::as_str).map(str::to_owned);
    match (id, method) {
        (Some(id), None) => {
            let Some(id) = id.as_u64() else { return ProviderRoute::Ignored };
            // Taken out, not cloned: a result can be large.
            let reply = match message.get_mut("error").map(Value::take) {
                Some(error) => Err(error),
                None => Ok(message.get_mut("result").map(Value::take).unwrap_or(Value::Null)),
            };
            ProviderRoute::Reply { id, reply }
        }
        (Some(id), Some(method)) if method == methods::PING => {
            ProviderRoute::Answer(object([("jsonrpc", "2.0".into()), ("id", id), ("result", json!({}))]))
        }
        (Some(id), Some(method)) => {
            let params = message.get_mut("params").map_or_else(|| json!({}), Value::take);
            ProviderRoute::Request { id, method, params }
        }
        (None, Some(method)) => match method.as_str() {
            methods::PROGRESS => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                match params.get("progressToken").and_then(Value::as_u64) {
                    Some(token) => ProviderRoute::Progress { token, params },
                    None => ProviderRoute::Ignored,
                }
            }
            methods::TOOLS_LIST_CHANGED | methods::PROMPTS_LIST_CHANGED | methods::RESOURCES_LIST_CHANGED => {
                ProviderRoute::ListChanged
            }
            methods::RESOURCES_UPDATED => match message.pointer("/params/uri").and_then(Value::as_str) {
                Some(uri) => ProviderRoute::ResourceUpdated(uri.to_owned()),
                None => ProviderRoute::Ignored,
            },
            methods::MESSAGE => match message.get_mut("params").map(Value::take) {
                Some(params) if params.is_object() => ProviderRoute::Log(params),
                _ => ProviderRoute::Ignored,
            },
            _ => ProviderRoute::Ignored,
        },
        (None, None) => ProviderRoute::Ignored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_split_into_messages() {
        let body =
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
        let parsed = client_messages(body).expect("a batch");
        assert!(parsed.array);
        assert_eq!(
            parsed.messages,
            [
                ClientMessage::Request { id: json!(1), method: "ping".into(), params: json!({}) },
                ClientMessage::Notification { method: "notifications/initialized".into(), params: json!({}) },
            ]
        );
        // Read without a map for the envelope, or as a `Value`: the same messages.
        for (body, message) in [
            (
                &br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}"#[..],
                ClientMessage::Request { id: json!("a"), method: "tools/call".into(), params: json!({"name": "x"}) },
            ),
            (
                br#"{"id":2,"jsonrpc":"2\u002e0","method":"ping","params":null}"#,
                ClientMessage::Request { id: json!(2), method: "ping".into(), params: Value::Null },
            ),
            (
                br#"{"jsonrpc":"2.0","method":"a","method":"b"}"#,
                ClientMessage::Notification { method: "b".into(), params: json!({}) },
            ),
        ] {
            let parsed = client_messages(body).expect("a message");
            assert!(!parsed.array);
            assert_eq!(parsed.messages, [message], "{}", String::from_utf8_lossy(body));
        }
        let answered = client_messages(br#"{"jsonrpc":"2.0","id":"b-1","result":{"roots":[]}}"#).expect("a response");
        assert_eq!(answered.messages, [ClientMessage::Response { id: json!("b-1"), reply: Ok(json!({"roots": []})) }]);
        for (body, code) in [
            (&b"{"[..], -32700),
            (b"[]", -32600),
            (br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, -32600),
            (br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, -32600),
            (br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#, -32600),
            (br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, -32600),
            (br#"{"jsonrpc":"2.0","id":1,"method":7}"#, -32600),
            (br#" ["2.0",1,"ping",{}]"#, -32600),
            // A key the fast reading does not know is read as a `Value`, which checks it.
            (b"{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"extra\":\"\xff\"}", -32700),
            (br#"{"jsonrpc":"2.0","method":"x","extra":"\ud800"}"#, -32700),
            (br#"{"jsonrpc":"2.0","method":"x","extra":1e400}"#, -32700),
        ] {
            assert_eq!(client_messages(body).expect_err("refused").code, code, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn forwarded_requests_carry_the_hubs_ids() {
        let params = tool_call_params(
            json!({"name": "ns__echo", "_meta": {"progressToken": "client", "io.modelcontextprotocol/protocolVersion": "2026-07-28", "trace": 1}, "arguments": {}}),
            json!("echo"),
        );
        assert_eq!(params, json!({"name": "echo", "_meta": {"trace": 1}, "arguments": {}}));
        let line = provider_request(7, "tools/call", params.clone(), Some(8), None);
        assert_eq!(line.last(), Some(&b'\n'));
        let ProviderLine::Message(sent) = provider_line(&line) else { panic!("a message") };
        assert_eq!(sent["id"], 7);
        assert_eq!(sent["params"]["_meta"]["progressToken"], 8);
        assert!(sent["params"]["_meta"].get(ENVELOPE_KEYS[0]).is_none(), "no envelope for the 2025 revisions");
        // A provider of 2026-07-28 hears of the client in each request's envelope.
        let meta = envelope(&json!({"sampling": {}}), Some("info"));
        let ProviderLine::Message(sent) = provider_line(&provider_request(9, "tools/call", params, None, Some(&meta)))
        else {
            panic!("a message")
        };
        let sent = &sent["params"]["_meta"];
        assert_eq!(sent[ENVELOPE_KEYS[0]], STATELESS_REVISION);
        assert_eq!(sent[ENVELOPE_KEYS[1]], json!({"sampling": {}}));
        assert_eq!(sent[ENVELOPE_KEYS[2]]["name"], "butler");
        assert_eq!(sent[ENVELOPE_KEYS[3]], "info");
        assert_eq!(sent["trace"], 1, "the client's own keys stay");
        assert!(envelope(&json!({}), None).get(ENVELOPE_KEYS[3]).is_none(), "no level: no log messages");
    }

    #[test]
    fn provider_output_is_cut_and_routed() {
        assert_eq!(provider_lines(b"a\nbb\nc", 4), Ok(vec![&b"a\n"[..], b"bb\n", b"c"]));
        assert_eq!(provider_lines(b"a\nbbbb\n", 4), Err(vec![&b"a\n"[..]]));
        assert_eq!(provider_line(b" \r\n"), ProviderLine::Blank);
        assert_eq!(provider_line(b"hello\n"), ProviderLine::NotJson);
        assert_eq!(
            provider_route(json!({"jsonrpc": "2.0", "id": 3, "result": {"x": 1}})),
            ProviderRoute::Reply { id: 3, reply: Ok(json!({"x": 1})) }
        );
        assert_eq!(provider_route(json!({"id": -1, "result": 1})), ProviderRoute::Ignored);
        // Read into its parts, or as a `Value` and routed: the same reply.
        for line in [
            &br#"{"jsonrpc":"2.0","id":3,"result":{"x":1}}"#[..],
            br#"{"id":3,"error":{"code":-1}}"#,
            br#"{"id":3,"error":null,"result":1}"#,
            br#"{"id":3}"#,
            br#"{"id":3,"result":1,"result":2}"#,
            br#"{"id":3,"result":{"content":[{"type":"text","text":"caf\u00e9"}],"isError":true}}"#,
        ] {
            let ProviderLine::Message(message) = provider_line(line) else { panic!("a message") };
            let ProviderRoute::Reply { id, reply } = provider_route(message) else { panic!("a reply") };
            if let Some((read_id, read)) = provider_reply(line) {
                // Read, or kept verbatim and read when asked: the same value.
                for verbatim in [false, true] {
                    let read = read.clone().map(|written| written.answer(verbatim).into_value());
                    assert_eq!((read_id, read), (id, reply.clone()), "{}", String::from_utf8_lossy(line));
                }
            }
        }
        assert!(provider_reply(br#"{"id":3,"result":1}"#).is_some(), "the common line is read into its parts");
        let deep = format!(r#"{{"id":3,"result":1,"x":{}{}}}"#, "[".repeat(200), "]".repeat(200));
        let deep_result = format!(r#"{{"id":3,"result":{{"a":{}{}}}}}"#, "[".repeat(200), "]".repeat(200));
        for line in [
            &br#"{"id":3,"method":"ping"}"#[..],
            br#"{"id":-1,"result":1}"#,
            br#"[3,null,{"x":1}]"#,
            b"{",
            b"{\"jsonrpc\":\"2.0\xe5\",\"id\":1,\"result\":1}",
            br#"{"id":3,"result":1,"x":"\udc00"}"#,
            br#"{"id":3,"result":{"a":"\udc00"}}"#,
            br#"{"id":3,"result":{"a":1e400}}"#,
            deep.as_bytes(),
            deep_result.as_bytes(),
        ] {
            assert!(provider_reply(line).is_none(), "{}", String::from_utf8_lossy(line));
        }
        assert_eq!(provider_route(json!({"method": "notifications/tools/list_changed"})), ProviderRoute::ListChanged);
        let logged = json!({"method": "notifications/message", "params": {"level": "info", "data": "x"}});
        assert_eq!(provider_route(logged), ProviderRoute::Log(json!({"level": "info", "data": "x"})));
        assert_eq!(provider_route(json!({"method": "notifications/message", "params": 3})), ProviderRoute::Ignored);
        let updated = json!({"method": "notifications/resources/updated", "params": {"uri": "test://a"}});
        assert_eq!(provider_route(updated), ProviderRoute::ResourceUpdated("test://a".into()));
        let ProviderRoute::Answer(answer) = provider_route(json!({"id": "x", "method": "ping"})) else {
            panic!("answered")
        };
        assert_eq!(answer, json!({"jsonrpc": "2.0", "id": "x", "result": {}}));
        assert_eq!(
            provider_route(json!({"id": "x", "method": "sampling/createMessage", "params": {"maxTokens": 9}})),
            ProviderRoute::Request {
                id: json!("x"),
                method: "sampling/createMessage".into(),
                params: json!({"maxTokens": 9})
            }
        );
    }
}
