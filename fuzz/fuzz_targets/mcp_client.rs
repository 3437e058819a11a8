//! The hub's framing of what clients send, and of what it forwards to providers: a `POST`
//! body split and classified, then each request as it goes down a provider's pipe.
//!
//! Properties: a body is refused with -32700 exactly when it is not JSON; an accepted one
//! yields one message per item, in order, each what its fields say it is; a forwarded
//! `tools/call` carries the tool's own name and never the client's progress token; every
//! line sent to a provider is one line of JSON that reads back as the same request with
//! the hub's id and token.
#![no_main]

use butler_host::catalog::names;
use butler_mcp::framing::{
    ClientMessage, ProviderLine, ProviderRoute, client_messages, provider_line, provider_lines, provider_request,
    tool_call_params,
};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let parsed = serde_json::from_slice::<Value>(data);
    let body = match client_messages(data) {
        Err(refusal) => {
            assert_eq!(refusal.code == -32700, parsed.is_err(), "{refusal:?}");
            assert!(refusal.code == -32700 || refusal.code == -32600, "{refusal:?}");
            assert!(refusal.id.is_null() || parsed.is_ok(), "{refusal:?}");
            return;
        }
        Ok(body) => body,
    };
    let parsed = parsed.expect("an accepted body is JSON");
    let items = match &parsed {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    };
    assert_eq!(body.array, parsed.is_array());
    assert!(!body.messages.is_empty());
    assert_eq!(body.messages.len(), items.len());
    for (index, (message, raw)) in body.messages.iter().zip(&items).enumerate() {
        assert_eq!(raw["jsonrpc"], "2.0");
        let params = raw.get("params").cloned().unwrap_or_else(|| json!({}));
        match message {
            ClientMessage::Request { id, method, params: given } => {
                assert!(id.is_string() || id.is_i64() || id.is_u64(), "{id}");
                assert_eq!(Some(id), raw.get("id"));
                assert_eq!(raw["method"].as_str(), Some(method.as_str()));
                assert_eq!(given, &params);
                forwarded(index as u64, method, given.clone());
            }
            ClientMessage::Notification { method, params: given } => {
                assert!(raw.get("id").is_none());
                assert_eq!(raw["method"].as_str(), Some(method.as_str()));
                assert_eq!(given, &params);
            }
            ClientMessage::Response { id, reply } => {
                assert!(raw.get("method").is_none());
                assert_eq!(Some(id), raw.get("id"));
                match reply {
                    Err(error) => assert_eq!(Some(error), raw.get("error")),
                    Ok(result) => {
                        assert!(raw.get("error").is_none());
                        assert_eq!(result, raw.get("result").unwrap_or(&Value::Null));
                    }
                }
            }
        }
    }
});

/// A request on its way to a provider (as `tools/call` when it names a tool).
fn forwarded(id: u64, method: &str, params: Value) {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let params = if method == "tools/call" {
        let original = json!(format!("own-{name}"));
        let sent = tool_call_params(params.clone(), original.clone());
        if let (Some(before), Some(after)) = (params.as_object(), sent.as_object()) {
            assert_eq!(after.get("name"), Some(&original));
            assert!(after.get("_meta").and_then(|m| m.get("progressToken")).is_none(), "{sent}");
            for (key, value) in before.iter().filter(|(k, _)| *k != "name" && *k != "_meta") {
                assert_eq!(after.get(key), Some(value), "`{key}` passes through");
            }
        } else {
            assert_eq!(sent, params, "params that are not an object pass as they are");
        }
        sent
    } else {
        params
    };
    // The public name of a tool: `<namespace>__<name>`, letters, digits, `_`, `-`, 64 at most.
    if let Ok(public) = names::public("fuzz", &name) {
        assert!(public.len() <= names::MAX_NAME && public.starts_with("fuzz__"), "{public}");
        assert!(public.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "{public}");
        assert_eq!(&public["fuzz__".len()..], name);
    }
    let token = id.wrapping_mul(2).wrapping_add(1);
    let line = provider_request(id, method, params.clone(), Some(token), None);
    assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1, "one line");
    assert_eq!(line.last(), Some(&b'\n'));
    assert_eq!(provider_lines(&line, line.len()), Ok(vec![&line[..]]));
    let ProviderLine::Message(sent) = provider_line(&line) else { panic!("a request reads back as a message") };
    assert_eq!(sent["jsonrpc"], "2.0");
    assert_eq!(sent["id"], id);
    assert_eq!(sent["method"], method);
    let meta_is_open = params.as_object().is_some_and(|p| p.get("_meta").is_none_or(Value::is_object));
    if meta_is_open {
        assert_eq!(sent["params"]["_meta"]["progressToken"], token, "{sent}");
    } else {
        assert_eq!(sent["params"], params);
    }
    // The provider would see a request of the hub's: were it echoed back, the hub would
    // answer a ping itself and take anything else as the provider's own request.
    match butler_mcp::framing::provider_route(sent) {
        ProviderRoute::Answer(answer) => {
            assert_eq!(method, "ping");
            assert_eq!(answer["id"], id);
        }
        ProviderRoute::Request { id: asked, method: named, .. } => {
            assert_ne!(method, "ping");
            assert_eq!((asked, named.as_str()), (json!(id), method));
        }
        other => panic!("a request read back as {other:?}"),
    }
}
