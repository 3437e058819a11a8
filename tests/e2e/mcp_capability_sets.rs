//! Each client is listed what its providers would list to it directly: the reference server
//! `server-everything` (npm; the 2025 revisions, which decide at `initialize`) lists its
//! sampling, elicitation and roots tools only to clients that declared those capabilities,
//! and so does our fixture `tests/providers/capability_tools.py` (2026-07-28, which decides
//! per request). Through the hub, a client of either era that declared none of them is
//! never shown those tools, one that declared them is, and one that declared some is
//! shown exactly theirs.

use serde_json::{Value, json};

use crate::mcp::{LIMIT, instance, provider_status, root, tools};
use crate::util::{Butler, wait_until, write_manifest};

/// The tools each provider offers only to clients of some capability, by provider and the
/// capabilities that show it (`elicitation.url`: that mode of elicitation).
const CONDITIONAL: [(&str, &str); 8] = [
    ("everything__trigger-sampling-request", "sampling"),
    ("everything__trigger-elicitation-request", "elicitation"),
    ("everything__trigger-url-elicitation", "elicitation.url"),
    ("everything__get-roots-list", "roots"),
    ("captools__sample", "sampling"),
    ("captools__elicit", "elicitation"),
    ("captools__elicit-url", "elicitation.url"),
    ("captools__list-roots", "roots"),
];

/// What each provider offers every client.
const UNCONDITIONAL: [&str; 2] = ["everything__echo", "captools__echo"];

/// Whether a client that declared `capabilities` may be shown a tool needing `needs`.
fn may_see(capabilities: &Value, needs: &str) -> bool {
    match needs.split_once('.') {
        Some((capability, mode)) => capabilities[capability].get(mode).is_some(),
        None => capabilities.get(needs).is_some(),
    }
}

/// A client of one era that declared `capabilities`.
enum Era {
    /// A 2025-11-25 session.
    Legacy(String),
    /// 2026-07-28: the capabilities in each request's `_meta`.
    Modern,
}

/// The names `tools/list` shows a client of `era` that declared `capabilities`.
fn listed(butler: &Butler, era: &Era, capabilities: &Value) -> Vec<String> {
    let mut request = butler
        .request(reqwest::Method::POST, &butler.api("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    let mut params = json!({});
    match era {
        Era::Legacy(session) => request = request.header("mcp-session-id", session),
        Era::Modern => {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": capabilities,
                "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
            });
            request = request.header("mcp-protocol-version", "2026-07-28").header("mcp-method", "tools/list");
        }
    }
    let message = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": params});
    let response = request.body(message.to_string()).send().expect("tools/list");
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = serde_json::from_str(&response.text().expect("body")).expect("JSON");
    let tools = body["result"]["tools"].as_array().cloned().unwrap_or_else(|| panic!("{body}"));
    tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

/// A 2025-11-25 session that declared `capabilities`.
fn session(butler: &Butler, capabilities: &Value) -> Era {
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "e2e", "version": "1"}}});
    let post = |body: &Value, session: Option<&str>| {
        let mut request = butler
            .request(reqwest::Method::POST, &butler.api("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.body(body.to_string()).send().expect("request")
    };
    let response = post(&message, None);
    assert_eq!(response.status().as_u16(), 200);
    let id = response.headers().get("mcp-session-id").expect("a session").to_str().expect("ascii").to_owned();
    let initialized = post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), Some(&id));
    assert_eq!(initialized.status().as_u16(), 202);
    Era::Legacy(id)
}

#[test]
fn a_client_is_listed_only_the_tools_its_declared_capabilities_let_it_use_in_either_era() {
    let dir = instance();
    let everything = tools().join("mcp-js/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": "everything", "name": "everything",
        "mcp": {"transport": "stdio", "command": ["node", everything.display().to_string(), "stdio"]}});
    write_manifest(dir.path(), "tools/everything", &manifest);
    let python = tools().join("mcp-venv/bin/python").display().to_string();
    let script = root().join("tests/providers/capability_tools.py").display().to_string();
    let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": "captools", "name": "captools",
        "mcp": {"transport": "stdio", "command": [python, script], "timeoutSec": 20}});
    write_manifest(dir.path(), "tools/captools", &manifest);
    let butler = Butler::start(dir.path());

    let none = json!({});
    let all = json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}});
    let some = [json!({"sampling": {}}), json!({"elicitation": {}}), json!({"roots": {"listChanged": true}})];
    // The least capable client first: on the code before, it was shown everything at once.
    let mut clients: Vec<(Era, Value)> = vec![(session(&butler, &none), none.clone()), (Era::Modern, none)];
    clients.push((session(&butler, &all), all.clone()));
    clients.push((Era::Modern, all));
    for (at, capabilities) in some.into_iter().enumerate() {
        let era = if at % 2 == 0 { session(&butler, &capabilities) } else { Era::Modern };
        clients.push((era, capabilities));
    }
    for (era, capabilities) in &clients {
        let which = match era {
            Era::Legacy(_) => "2025-11-25",
            Era::Modern => "2026-07-28",
        };
        // Until the hub has learned what they list to such a client it may show less, never
        // more: every answer is checked, the last one must show all it may.
        let wanted: Vec<&str> = UNCONDITIONAL
            .into_iter()
            .chain(CONDITIONAL.iter().filter(|(_, needs)| may_see(capabilities, needs)).map(|(tool, _)| *tool))
            .collect();
        wait_until(LIMIT, &format!("a {which} client declaring {capabilities} to be shown {wanted:?}"), || {
            let names = listed(&butler, era, capabilities);
            for (tool, needs) in CONDITIONAL {
                let shown = names.iter().any(|n| n == tool);
                assert!(
                    !shown || may_see(capabilities, needs),
                    "a {which} client that declared {capabilities} is shown {tool}, which needs {needs}: {names:?}"
                );
            }
            wanted.iter().all(|tool| names.iter().any(|n| n == tool))
        });
    }
    // Each provider in its own era, with its one run: probing spawned others, not it anew.
    for (id, protocol) in [("everything", "2025-06-18"), ("captools", "2026-07-28")] {
        let status = provider_status(&butler, id);
        assert_eq!((&status["state"], &status["protocol"]), (&json!("ready"), &json!(protocol)), "{status}");
        assert_eq!(status["lastError"], Value::Null, "{status}");
    }
}
