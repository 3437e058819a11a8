//! The hub faithful to its providers, with real ones: a provider that offers no tools (our
//! fixture on the official Python SDK, `tests/providers/toolless_server.py`) is listed for
//! what it offers, never taken for a crash.

use serde_json::{Value, json};

use crate::mcp::{LIMIT, instance, provider_status, root, tools};
use crate::mcp_stateless::{ask, request};
use crate::util::{Butler, wait_until, write_manifest};

/// A tool manifest whose provider is `tests/providers/<script>` on the Python SDK.
fn python_provider(id: &str, script: &str) -> Value {
    let python = tools().join("mcp-venv/bin/python").display().to_string();
    let script = root().join("tests/providers").join(script).display().to_string();
    json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id,
           "mcp": {"transport": "stdio", "command": [python, script], "timeoutSec": 20}})
}

/// The `key` field of each item of a 2026-07-28 list on `path`.
fn listed(butler: &Butler, path: &str, method: &str, key: &str, field: &str) -> Vec<String> {
    let answer = ask(butler, path, &request(1, method, json!({})));
    answer["result"][key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i[field].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn a_provider_without_tools_offers_its_resources_and_prompts_in_either_era() {
    let dir = instance();
    let config = json!({"mcp": {"legacyProviders": ["toolless-legacy"]}});
    std::fs::write(dir.path().join("butler.json"), config.to_string()).expect("root config");
    for id in ["toolless", "toolless-legacy"] {
        write_manifest(dir.path(), &format!("tools/{id}"), &python_provider(id, "toolless_server.py"));
    }
    let butler = Butler::start(dir.path());

    // Listed for what they offer: a prompt and a resource each, and no tools.
    wait_until(LIMIT, "both providers' prompts", || {
        let prompts = listed(&butler, "/mcp", "prompts/list", "prompts", "name");
        ["toolless__summarize", "toolless_legacy__summarize"].iter().all(|p| prompts.iter().any(|n| n == p))
    });
    let resources = listed(&butler, "/mcp", "resources/list", "resources", "uri");
    assert!(resources.contains(&"toolless://notes".to_owned()), "{resources:?}");
    assert!(resources.contains(&"butler://toolless_legacy/toolless://notes".to_owned()), "{resources:?}");
    let tools = listed(&butler, "/mcp", "tools/list", "tools", "name");
    assert!(!tools.iter().any(|t| t.starts_with("toolless")), "{tools:?}");
    for (id, protocol) in [("toolless", "2026-07-28"), ("toolless-legacy", "2025-06-18")] {
        let status = provider_status(&butler, id);
        assert_eq!(status["state"], "ready", "{status}");
        assert_eq!(status["protocol"], protocol, "{status}");
        assert_eq!(status["lastError"], Value::Null, "{status}");
    }

    // And what they offer answers.
    for uri in ["toolless://notes", "butler://toolless_legacy/toolless://notes"] {
        let read = ask(&butler, "/mcp", &request(2, "resources/read", json!({"uri": uri})));
        assert_eq!(read["result"]["contents"][0]["text"], "The notes of the toolless provider.", "{read}");
    }
    for name in ["toolless__summarize", "toolless_legacy__summarize"] {
        let got = ask(&butler, "/mcp", &request(3, "prompts/get", json!({"name": name, "arguments": {"topic": "x"}})));
        assert_eq!(got["result"]["messages"][0]["content"]["text"], "Summarize x.", "{got}");
    }
    // Still the same runs: nothing crashed and restarted meanwhile.
    for id in ["toolless", "toolless-legacy"] {
        assert_eq!(provider_status(&butler, id)["state"], "ready");
    }
}
