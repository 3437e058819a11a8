//! The hub's framing of what a provider prints on stdout: the stream cut into lines (the
//! first byte of the input sets the line limit), each line classified, each message routed.
//!
//! Properties: the lines are the stream, in order, each at most the limit and ending at its
//! only `\n` (the last may lack it); an oversized line stops the stream right where it
//! starts; each line is what its bytes are (notification, message, blank, not JSON); a
//! message is routed by its `id` and `method` exactly, and an answer to the provider is a
//! well-formed JSON-RPC response to the same id, sendable as one line; an answer read
//! straight into its parts (the reader's fast path) is routed to the same reply, whether its
//! result is read or kept as the provider wrote it.
#![no_main]

use butler_mcp::framing::{ProviderLine, ProviderRoute, provider_line, provider_lines, provider_reply, provider_route};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const LIST_CHANGED: [&str; 3] =
    ["notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed"];

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else { return };
    // Small limits exercise the oversize rule; 255 stands for the real 16 MiB.
    let max = if first == 255 { 16 << 20 } else { usize::from(first % 64) + 1 };
    let (lines, stopped) = match provider_lines(stream, max) {
        Ok(lines) => (lines, false),
        Err(lines) => (lines, true),
    };
    let consumed: usize = lines.iter().map(|l| l.len()).sum();
    assert_eq!(lines.concat(), stream[..consumed], "the lines are the stream");
    if stopped {
        let rest = &stream[consumed..];
        assert!(rest.len() >= max && !rest[..max].contains(&b'\n'), "stopped only at an oversized line");
    } else {
        assert_eq!(consumed, stream.len());
    }
    for (index, line) in lines.iter().enumerate() {
        assert!(!line.is_empty() && line.len() <= max);
        let newlines = line.iter().filter(|b| **b == b'\n').count();
        let last = index + 1 == lines.len() && !stopped;
        assert!(newlines == 1 && line.ends_with(b"\n") || (last && newlines == 0), "{line:?}");
        classified(line);
    }
});

fn classified(line: &[u8]) {
    let parsed = serde_json::from_slice::<Value>(line);
    // The answer read straight into its parts is the one the message routes to.
    if let Some((id, reply)) = provider_reply(line) {
        let message = parsed.as_ref().expect("a reply read into its parts is JSON").clone();
        let route = provider_route(message);
        // Read, or kept as the provider wrote it and read when asked: the same value.
        for verbatim in [false, true] {
            let reply = reply.clone().map(|written| written.answer(verbatim).into_value());
            assert_eq!(route, ProviderRoute::Reply { id, reply });
        }
    }
    match provider_line(line) {
        ProviderLine::Blank => assert!(parsed.is_err() && line.iter().all(u8::is_ascii_whitespace)),
        ProviderLine::NotJson => assert!(parsed.is_err() && !line.iter().all(u8::is_ascii_whitespace)),
        ProviderLine::Notification(message) => {
            assert!(message.get("id").is_none() && message.get("method").is_some());
            assert_eq!(Ok(&message), parsed.as_ref().map_err(drop));
            routed(message);
        }
        ProviderLine::Message(message) => {
            assert!(message.get("id").is_some() || message.get("method").is_none());
            assert_eq!(Ok(&message), parsed.as_ref().map_err(drop));
            routed(message);
        }
    }
}

fn routed(message: Value) {
    let method = message.get("method").and_then(Value::as_str);
    let id = message.get("id");
    match provider_route(message.clone()) {
        ProviderRoute::Reply { id: hub_id, reply } => {
            assert!(method.is_none());
            assert_eq!(id.and_then(Value::as_u64), Some(hub_id));
            match reply {
                Err(error) => assert_eq!(Some(&error), message.get("error")),
                Ok(result) => {
                    assert!(message.get("error").is_none());
                    assert_eq!(&result, message.get("result").unwrap_or(&Value::Null));
                }
            }
        }
        ProviderRoute::Request { id: asked, method: named, params } => {
            assert_eq!(Some(&asked), id);
            assert_eq!(method, Some(named.as_str()));
            assert_ne!(named, "ping", "the hub answers pings itself");
            assert_eq!(&params, message.get("params").unwrap_or(&json!({})));
        }
        ProviderRoute::Answer(answer) => {
            let id = id.expect("only requests are answered");
            assert_eq!(method, Some("ping"));
            assert_eq!(&answer["id"], id);
            assert_eq!(answer["jsonrpc"], "2.0");
            assert_ne!(answer.get("result").is_some(), answer.get("error").is_some(), "{answer}");
            let line = serde_json::to_vec(&answer).expect("serializes");
            assert!(!line.contains(&b'\n'), "an answer is one line");
        }
        ProviderRoute::Progress { token, params } => {
            assert!(id.is_none());
            assert_eq!(method, Some("notifications/progress"));
            assert_eq!(params["progressToken"].as_u64(), Some(token));
            assert_eq!(Some(&params), message.get("params"));
        }
        ProviderRoute::ResourceUpdated(uri) => {
            assert!(id.is_none());
            assert_eq!(method, Some("notifications/resources/updated"));
            assert_eq!(message.pointer("/params/uri").and_then(Value::as_str), Some(uri.as_str()));
        }
        ProviderRoute::Log(params) => {
            assert!(id.is_none());
            assert_eq!(method, Some("notifications/message"));
            assert!(params.is_object());
            assert_eq!(Some(&params), message.get("params"));
        }
        ProviderRoute::ListChanged => {
            assert!(id.is_none());
            assert!(method.is_some_and(|m| LIST_CHANGED.contains(&m)));
        }
        ProviderRoute::Ignored => {
            let reply = id.is_some_and(Value::is_u64) && method.is_none();
            let request = id.is_some() && method.is_some();
            let progress = id.is_none()
                && method == Some("notifications/progress")
                && message.get("params").and_then(|p| p.get("progressToken")).is_some_and(Value::is_u64);
            let changed = id.is_none() && method.is_some_and(|m| LIST_CHANGED.contains(&m));
            let log = id.is_none()
                && method == Some("notifications/message")
                && message.get("params").is_some_and(Value::is_object);
            let updated = id.is_none()
                && method == Some("notifications/resources/updated")
                && message.pointer("/params/uri").is_some_and(Value::is_string);
            assert!(!(reply || request || progress || changed || log || updated), "{message} was dropped");
        }
    }
}
