//! The multi-round-trip requests of 2026-07-28, for a stateless client, whichever revision its
//! provider speaks:
//!
//! - a provider of the 2025 revisions asks the client something (sampling, elicitation,
//!   roots) during a `tools/call`: the hub sets the call aside ("parks" it) and answers with
//!   an `InputRequiredResult`; the client's retry carries `inputResponses` and the
//!   `requestState` the hub gave, and the call goes on;
//! - a provider of 2026-07-28 answers with an `InputRequiredResult` of its own (a
//!   `tools/call`, `prompts/get` or `resources/read`): it reaches the client as it is, but
//!   with the provider's `requestState` sealed inside the hub's ("relayed"); the retry goes
//!   to the provider with the provider's state again.
//!
//! `requestState` names the parked call or carries the provider's state, and names the
//! endpoint the call was made on, the method, the tool, prompt or URI it was made for and a
//! digest of its arguments, sealed with an HMAC-SHA256 under a key drawn when the host
//! starts: a state that was altered, or comes from another run of the host, is refused
//! (`-32602`), as is a retry on another endpoint (a profile that does not offer the tool),
//! of another tool, or with other arguments.
//! A call is parked at most [`butler_mcp::PARKED_FOR`], once: the retry takes it back.

use butler_mcp::methods;
use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use butler_mcp::RpcError;
use butler_mcp::upcall::Parked;

/// Sealed states start so; a later format gets another prefix.
const FORMAT: &str = "b1";

/// The key states are sealed with: random per run of the host (`None` when the kernel gave
/// no randomness — then no call is parked).
static KEY: LazyLock<Option<String>> = LazyLock::new(|| crate::instance::owner::random_secret().ok());

/// What a sealed state holds the call by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// The hub's parked call, by its id.
    Parked(String),
    /// The provider's own `requestState`, if it gave one.
    Relayed(Option<String>),
}

/// What a sealed state says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// The call it continues.
    pub held: Held,
    /// The method the call was made with.
    pub method: String,
    /// The tool or prompt it called, or the URI it read.
    pub name: String,
    /// The endpoint it was made on ([`butler_mcp::View::endpoint`]).
    pub endpoint: String,
    /// The digest of its arguments ([`butler_mcp::quarantine::fingerprint`]).
    pub arguments: String,
}

/// The digest a call's arguments are bound to its state by (key order aside).
pub fn arguments_digest(arguments: Option<&Value>) -> String {
    butler_mcp::quarantine::fingerprint(arguments.unwrap_or(&Value::Null))
}

/// What a request of `method` is made for: its tool or prompt name, or the URI it reads.
pub fn subject(method: &str, params: &Value) -> String {
    let key = if method == methods::RESOURCES_READ { "uri" } else { "name" };
    params.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The largest provider `requestState` the hub relays: sealed, it must come back within one
/// request's 1 MiB.
pub const MAX_RELAYED_STATE: usize = 256 * 1024;

/// The methods whose result may be an `InputRequiredResult`.
pub const ROUND_METHODS: &[&str] = &[methods::TOOLS_CALL, methods::PROMPTS_GET, methods::RESOURCES_READ];

fn mac(key: &str, text: &str) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap_or_else(|_| unreachable!());
    mac.update(text.as_bytes());
    mac
}

/// `state`, sealed; `None` without a key.
pub fn seal(state: &State) -> Option<String> {
    let key = KEY.as_deref()?;
    let mut payload = json!({"m": state.method, "n": state.name, "e": state.endpoint, "a": state.arguments});
    match &state.held {
        Held::Parked(id) => payload["p"] = json!(id),
        Held::Relayed(provider) => payload["r"] = json!(provider),
    }
    let payload = payload.to_string();
    let body = format!("{FORMAT}.{}", URL_SAFE_NO_PAD.encode(payload));
    let tag = URL_SAFE_NO_PAD.encode(mac(key, &body).finalize().into_bytes());
    Some(format!("{body}.{tag}"))
}

/// What a sealed `text` says, if the hub sealed it in this run and nobody altered it.
///
/// # Errors
/// `-32602`, saying the state is not one the hub gave.
pub fn open(text: &str) -> Result<State, RpcError> {
    let refused = || {
        RpcError::invalid_params("Invalid params: `requestState` is not a state this server gave, or it was altered")
    };
    let key = KEY.as_deref().ok_or_else(refused)?;
    let (body, tag) = text.rsplit_once('.').ok_or_else(refused)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| refused())?;
    mac(key, body).verify_slice(&tag).map_err(|_| refused())?;
    let payload = body.strip_prefix(FORMAT).and_then(|p| p.strip_prefix('.')).ok_or_else(refused)?;
    let payload: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).map_err(|_| refused())?).map_err(|_| refused())?;
    let field = |key: &str| payload.get(key).and_then(Value::as_str).map(str::to_owned).ok_or_else(refused);
    let held = match (payload.get("p"), payload.get("r")) {
        (Some(_), None) => Held::Parked(field("p")?),
        (None, Some(Value::Null)) => Held::Relayed(None),
        (None, Some(_)) => Held::Relayed(Some(field("r")?)),
        _ => return Err(refused()),
    };
    Ok(State { held, method: field("m")?, name: field("n")?, endpoint: field("e")?, arguments: field("a")? })
}

/// Whether a request is a retry: it carries `requestState`. (`inputResponses` alone answer
/// nothing the hub asked: the request goes on as a fresh one, as the revision says of
/// parameters a server does not expect.)
pub fn is_retry(params: &Value) -> bool {
    params.get("requestState").is_some()
}

/// Whether calls can be parked (the key was drawn).
pub fn available() -> bool {
    KEY.is_some()
}

/// A 2026-07-28 provider's `result` for a client: an `InputRequiredResult` gets the
/// provider's `requestState` sealed inside the hub's, bound to the call `state` describes
/// (made only then: a digest of the arguments costs more than most calls' other work).
///
/// # Errors
/// `-32603` when the hub has no key to seal with.
pub fn relayed(mut result: Value, state: impl FnOnce() -> State) -> Result<Value, RpcError> {
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return Ok(result);
    }
    let malformed = |why: &str| RpcError {
        code: -32603,
        message: format!("the provider asked for input in a malformed InputRequiredResult: {why}"),
        data: None,
    };
    let requests = result.get("inputRequests").and_then(Value::as_object);
    let Some(requests) = requests.filter(|r| !r.is_empty()) else {
        return Err(malformed("`inputRequests` is no object naming at least one request"));
    };
    let well_formed = |request: &Value| {
        request.get("method").is_some_and(Value::is_string) && request.get("params").is_none_or(Value::is_object)
    };
    if let Some((key, _)) = requests.iter().find(|(_, request)| !well_formed(request)) {
        return Err(malformed(&format!("`inputRequests.{key}` is no {{\"method\", \"params\"?}} request")));
    }
    let provider = match result.get("requestState") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) if text.len() <= MAX_RELAYED_STATE => Some(text.clone()),
        Some(Value::String(_)) => {
            return Err(malformed(&format!(
                "its `requestState` is over {} KiB, too large for the client's retry to carry back",
                MAX_RELAYED_STATE >> 10
            )));
        }
        Some(_) => return Err(malformed("`requestState` is no string")),
    };
    let sealed = seal(&State { held: Held::Relayed(provider), ..state() }).ok_or_else(|| RpcError {
        code: -32603,
        message: "the hub has no key to seal a request state with".into(),
        data: None,
    })?;
    if let Some(fields) = result.as_object_mut() {
        fields.insert("requestState".into(), json!(sealed));
    }
    Ok(result)
}

/// A relayed retry's params as the provider gets them: its own `requestState` again (none
/// when it gave none).
pub fn unsealed(mut params: Value, provider: Option<String>) -> Value {
    if let Some(fields) = params.as_object_mut() {
        match provider {
            Some(state) => fields.insert("requestState".into(), json!(state)),
            None => fields.remove("requestState"),
        };
    }
    params
}

/// The `InputRequiredResult` asking the client what `parked` waits for (its
/// `requestState` is added once the call is parked).
pub fn input_required(parked: &Parked) -> Value {
    let requests: serde_json::Map<String, Value> = parked
        .waiting
        .iter()
        .map(|(key, asked)| (key.clone(), json!({"method": asked.method, "params": asked.params})))
        .collect();
    json!({"resultType": "input_required", "inputRequests": requests})
}

/// A retry's `requestState` and `inputResponses`, checked: the state sealed, naming the same
/// endpoint, method, tool and arguments, the responses an object (or absent).
///
/// # Errors
/// `-32602` for each of those that fails.
pub fn retry_of(
    endpoint: &str,
    method: &str,
    params: &Value,
) -> Result<(State, serde_json::Map<String, Value>), RpcError> {
    let text = params
        .get("requestState")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("Invalid params: `requestState` must be the string the server gave"))?;
    let state = open(text)?;
    let name = subject(method, params);
    if state.method != method || state.name != name {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: this `requestState` belongs to {} of {:?}, not {method} of {name:?}",
            state.method, state.name
        )));
    }
    if state.endpoint != endpoint {
        return Err(RpcError::invalid_params(
            "Invalid params: this `requestState` belongs to a call made on another endpoint; retry where the call was made",
        ));
    }
    if state.arguments != arguments_digest(params.get("arguments")) {
        return Err(RpcError::invalid_params(
            "Invalid params: a retry repeats the call's arguments as they were; these differ",
        ));
    }
    let responses = match params.get("inputResponses") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(responses)) => responses.clone(),
        Some(_) => return Err(RpcError::invalid_params("Invalid params: `inputResponses` must be an object")),
    };
    Ok((state, responses))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State {
            held: Held::Parked("abc".into()),
            method: "tools/call".into(),
            name: "ns__ask".into(),
            endpoint: "main".into(),
            arguments: arguments_digest(Some(&json!({"q": 1}))),
        }
    }

    #[test]
    fn a_sealed_state_opens_and_an_altered_one_does_not() {
        let sealed = seal(&state()).expect("a key");
        assert_eq!(open(&sealed).expect("opens"), state());
        let (body, tag) = sealed.rsplit_once('.').expect("a tag");
        let mut forged = body.to_owned();
        forged.push('A');
        for altered in
            [format!("{forged}.{tag}"), format!("{body}.{tag}A"), format!("{body}."), "b1".into(), String::new()]
        {
            assert_eq!(open(&altered).map_err(|e| e.code), Err(-32602), "{altered}");
        }
        // Another payload under the same tag.
        let other = State { held: Held::Parked("abd".into()), ..state() };
        let other_body = seal(&other).expect("a key").rsplit_once('.').map(|(b, _)| b.to_owned()).expect("a tag");
        assert!(open(&format!("{other_body}.{tag}")).is_err());
    }

    #[test]
    fn a_providers_state_travels_sealed_inside_the_hubs() {
        let ask = json!({"user_name": {"method": "elicitation/create", "params": {"message": "?"}}});
        let asks = json!({"resultType": "input_required", "inputRequests": ask, "requestState": "theirs"});
        let sent = relayed(asks, state).expect("sealed");
        assert_eq!(sent["inputRequests"], ask, "asked as the provider asked");
        let sealed = sent["requestState"].as_str().expect("a state");
        assert_ne!(sealed, "theirs");
        let opened = open(sealed).expect("opens");
        assert_eq!(opened.held, Held::Relayed(Some("theirs".into())));
        assert_eq!(
            unsealed(json!({"requestState": sealed, "x": 1}), Some("theirs".into())),
            json!({"requestState": "theirs", "x": 1})
        );
        // A provider that keeps no state gets none back.
        let stateless = relayed(json!({"resultType": "input_required", "inputRequests": ask}), state).expect("sealed");
        let opened = open(stateless["requestState"].as_str().expect("a state")).expect("opens");
        assert_eq!(opened.held, Held::Relayed(None));
        assert_eq!(unsealed(json!({"requestState": "b1.x.y"}), None), json!({}));
        // A complete result passes untouched.
        assert_eq!(relayed(json!({"content": []}), state).expect("as is"), json!({"content": []}));
        // What a client could not act on, or not send back, is refused.
        let too_large = json!("s".repeat(MAX_RELAYED_STATE + 1));
        for (requests, state_given) in [
            (json!({}), json!(null)),
            (json!(5), json!(null)),
            (json!({"k": 5}), json!(null)),
            (json!({"k": {"method": 5}}), json!(null)),
            (json!({"k": {"method": "roots/list", "params": "zzz"}}), json!(null)),
            (ask.clone(), json!(7)),
            (ask.clone(), too_large),
        ] {
            let result =
                json!({"resultType": "input_required", "inputRequests": requests, "requestState": state_given});
            assert_eq!(relayed(result, state).map_err(|e| e.code).err(), Some(-32603), "{requests}");
        }
    }

    #[test]
    fn a_retry_must_name_the_same_tool_and_carry_an_object() {
        let sealed = seal(&state()).expect("a key");
        let args = json!({"q": 1});
        let ok = json!({"name": "ns__ask", "arguments": args, "requestState": sealed, "inputResponses": {"k": {}}});
        assert_eq!(retry_of("main", "tools/call", &ok).expect("a retry").1.len(), 1);
        let refused =
            |endpoint: &str, params: Value| retry_of(endpoint, "tools/call", &params).map_err(|e| e.code).err();
        assert_eq!(refused("p/narrow", ok.clone()), Some(-32602), "another endpoint");
        let other_args = json!({"name": "ns__ask", "arguments": {"q": 2}, "requestState": sealed});
        assert_eq!(refused("main", other_args), Some(-32602), "other arguments");
        let other_tool = json!({"name": "ns__other", "arguments": args, "requestState": sealed});
        assert_eq!(refused("main", other_tool), Some(-32602));
        let not_object = json!({"name": "ns__ask", "arguments": args, "requestState": sealed, "inputResponses": 7});
        assert_eq!(refused("main", not_object), Some(-32602));
        let no_state = json!({"name": "ns__ask", "inputResponses": {}});
        assert_eq!(refused("main", no_state.clone()), Some(-32602));
        assert!(!is_retry(&no_state) && !is_retry(&json!({"name": "x"})) && is_retry(&ok));
    }
}
