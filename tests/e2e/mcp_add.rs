//! `butler mcp add` and `butler mcp remove` beside a running host: a remote server added
//! by its URL (a header taken from the host's environment) and a command added after `--`
//! join the hub without a restart, answer through it, and leave it when removed; the
//! header's token shows nowhere.

use serde_json::json;

use crate::capabilities::{RemoteServer, call_text, cli};
use crate::mcp::{LIMIT, root, tools};
use crate::mcp_stateless::{ask, request};
use crate::util::{Butler, wait_until};

#[test]
fn servers_added_by_url_or_command_join_the_running_hub_and_leave_when_removed() {
    let token = "tok-added-81f0a";
    let remote = RemoteServer::start(&["--token", token]);
    let dir = tempfile::tempdir().expect("dir");
    let butler = Butler::start_with_env(&dir.path().join("instance"), &[], &[("ADDED_TOKEN", token)]);

    let header = "Authorization: Bearer ${ADDED_TOKEN}";
    let (code, out) = cli(&butler, &["mcp", "add", "remote-one", &remote.url, "--header", header]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("added `remote-one`") && out.contains("remote_one__<tool>"), "{out}");
    let python = tools().join("mcp-venv/bin/python").display().to_string();
    let script = root().join("tests/providers/conformance_server.py").display().to_string();
    let (code, out) = cli(&butler, &["mcp", "add", "local", "--env", "CONF_MARK=1", "--", &python, &script]);
    assert_eq!(code, 0, "{out}");

    // New providers' tools are held on a fresh instance until the owner approves them; a
    // list starts the providers.
    wait_until(LIMIT, "both added servers' tools held for review", || {
        let _ = ask(&butler, "/mcp", &request(1, "tools/list", json!({})));
        let (_, held) = cli(&butler, &["mcp", "held"]);
        held.contains("remote_one__whoami") && held.contains("local__test_simple_text")
    });
    for id in ["remote-one", "local"] {
        let (code, out) = cli(&butler, &["mcp", "approve", id, "--all"]);
        assert_eq!(code, 0, "{out}");
    }
    let seen = call_text(&butler, "remote_one__whoami", json!({})).expect("whoami through the hub");
    let seen: serde_json::Value = serde_json::from_str(&seen).expect("JSON");
    assert_eq!(seen["auth"], json!("Bearer"), "the header reached the server, expanded: {seen}");
    assert_eq!(
        call_text(&butler, "local__test_simple_text", json!({})),
        Ok("This is a simple text response for testing.".to_owned())
    );
    let (_, status) = butler.get_json("/mcp/status");
    assert!(!status.to_string().contains(token), "the token is not in the status");
    let manifest = std::fs::read_to_string(butler.workdir.join("tools/remote-one/butler.json")).expect("manifest");
    assert!(manifest.contains("${ADDED_TOKEN}") && !manifest.contains(token), "{manifest}");

    // A second server under a name in use is refused, and the first keeps answering.
    let (code, out) = cli(&butler, &["mcp", "add", "local", "https://example.com/mcp"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("already exists"), "{out}");
    let (code, out) = cli(&butler, &["mcp", "add", "plain", "http://example.com/mcp"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("/mcp/url"), "the problem's pointer: {out}");

    for id in ["remote-one", "local"] {
        let (code, out) = cli(&butler, &["mcp", "remove", id]);
        assert_eq!(code, 0, "{out}");
    }
    wait_until(LIMIT, "the removed servers' tools gone from the hub", || {
        let (_, status) = butler.get_json("/mcp/status");
        let providers = status["providers"].as_array().cloned().unwrap_or_default();
        !providers.iter().any(|p| p["id"] == "remote-one" || p["id"] == "local")
    });
    let (code, out) = cli(&butler, &["mcp", "remove", "local"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("no MCP server `local`"), "{out}");
}
