//! The multi-round-trip requests of 2026-07-28, for a provider of the 2025 revisions: when
//! a provider asks the client something (sampling, elicitation, roots) during a stateless
//! client's `tools/call`, the hub sets the call aside and answers with an
//! `InputRequiredResult`; the client's retry carries `inputResponses` and the
//! `requestState` the hub gave, and the call goes on.
//!
//! `requestState` names the parked call, the endpoint it was made on, the tool it was
//! called as and a digest of its arguments, sealed with an HMAC-SHA256 under a key drawn
//! when the host starts: a state that was altered, or comes from another run of the host,
//! is refused (`-32602`), as is a retry on another endpoint (a profile that does not offer
//! the tool), of another tool, or with other arguments.
//! A call is parked at most [`butler_mcp::PARKED_FOR`], once: the retry takes it back.

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

/// What a sealed state says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// The parked call's id.
    pub parked: String,
    /// The method the call was made with.
    pub method: String,
    /// The tool it called.
    pub name: String,
    /// The endpoint it was made on ([`butler_mcp::View::endpoint`]).
    pub endpoint: String,
    /// The digest of its arguments ([`butler_mcp::quarantine::fingerprint`]).
    pub arguments: String,
}

/// The digest a call's arguments are bound to its state by (key order aside).
pub fn arguments_digest(params: &Value) -> String {
    butler_mcp::quarantine::fingerprint(params.get("arguments").unwrap_or(&Value::Null))
}

fn mac(key: &str, text: &str) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap_or_else(|_| unreachable!());
    mac.update(text.as_bytes());
    mac
}

/// `state`, sealed; `None` without a key.
pub fn seal(state: &State) -> Option<String> {
    let key = KEY.as_deref()?;
    let payload =
        json!({"p": state.parked, "m": state.method, "n": state.name, "e": state.endpoint, "a": state.arguments})
            .to_string();
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
    Ok(State {
        parked: field("p")?,
        method: field("m")?,
        name: field("n")?,
        endpoint: field("e")?,
        arguments: field("a")?,
    })
}

/// Whether a request is a retry: it carries `requestState` or `inputResponses`.
pub fn is_retry(params: &Value) -> bool {
    params.get("requestState").is_some() || params.get("inputResponses").is_some()
}

/// Whether calls can be parked (the key was drawn).
pub fn available() -> bool {
    KEY.is_some()
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
    let text = params.get("requestState").and_then(Value::as_str).ok_or_else(|| {
        RpcError::invalid_params("Invalid params: `inputResponses` without the `requestState` the server gave")
    })?;
    let state = open(text)?;
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
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
    if state.arguments != arguments_digest(params) {
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
            parked: "abc".into(),
            method: "tools/call".into(),
            name: "ns__ask".into(),
            endpoint: "main".into(),
            arguments: arguments_digest(&json!({"arguments": {"q": 1}})),
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
        let other = State { parked: "abd".into(), ..state() };
        let other_body = seal(&other).expect("a key").rsplit_once('.').map(|(b, _)| b.to_owned()).expect("a tag");
        assert!(open(&format!("{other_body}.{tag}")).is_err());
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
        assert!(is_retry(&no_state) && !is_retry(&json!({"name": "x"})));
    }
}
