//! Search mode with real providers — `server-everything` and `server-filesystem` from npm,
//! `mcp-server-time` from PyPI: a client of a search-mode profile lists three tools, finds
//! each provider's by plain requests, reads their definitions as the main endpoint lists
//! them, and calls them through `butler__call_tool` with a direct call's results, in the
//! activity log under the tool's own name; a 2026-07-28 call carried by `butler__call_tool`
//! whose provider asks the client something takes its rounds as a direct call does.

use serde_json::{Value, json};

use crate::mcp::{Client, LIMIT, instance, text_of, tools};
use crate::mcp_stateless::{headers_for, post, request};
use crate::util::{Butler, wait_until, write_manifest};

const SEARCH_TOOLS: [&str; 3] = ["butler__find_tools", "butler__describe_tools", "butler__call_tool"];

/// A tool manifest whose provider is `command`, as `butler mcp add` writes one.
pub(crate) fn stdio(id: &str, command: Value, namespace: Option<&str>) -> Value {
    let mut mcp = json!({"transport": "stdio", "command": command, "timeoutSec": 30});
    if let Some(namespace) = namespace {
        mcp["namespace"] = json!(namespace);
    }
    json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id, "mcp": mcp})
}

/// An instance with the three providers and `config` as its root config; the files
/// server may read `<instance>/notes`, which holds `todo.txt`.
pub(crate) fn three_providers(config: &Value) -> tempfile::TempDir {
    let tools = tools();
    let dir = instance();
    std::fs::write(dir.path().join("butler.json"), config.to_string()).expect("root config");
    let modules = tools.join("mcp-js/node_modules/@modelcontextprotocol");
    let everything = modules.join("server-everything/dist/index.js").display().to_string();
    write_manifest(dir.path(), "tools/everything", &stdio("everything", json!(["node", everything, "stdio"]), None));
    let notes = dir.path().join("notes");
    std::fs::create_dir_all(&notes).expect("notes folder");
    std::fs::write(notes.join("todo.txt"), "water the plants\n").expect("a note");
    let files = modules.join("server-filesystem/dist/index.js").display().to_string();
    let notes = notes.display().to_string();
    write_manifest(dir.path(), "tools/files", &stdio("files", json!(["node", files, notes]), None));
    let time = tools.join("mcp-venv/bin/mcp-server-time").display().to_string();
    write_manifest(dir.path(), "tools/clock", &stdio("clock", json!([time]), Some("time")));
    dir
}

/// The names of a search tool's matches.
fn names_in(result: &Value) -> Vec<String> {
    result["structuredContent"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[test]
fn a_search_mode_profile_finds_describes_and_calls_three_real_providers_tools() {
    let dir = three_providers(&json!({"mcp": {"profiles": {"agent": {"exposure": "search"}}}}));
    let notes = dir.path().join("notes");
    let butler = Butler::start(dir.path());
    let mut agent = Client::connect(&butler, "/mcp/p/agent");
    assert_eq!(agent.tool_names(), SEARCH_TOOLS, "a search-mode profile lists the search tools alone");

    // Plain requests find each provider's tool (the first searches wait for the starts).
    let found = |agent: &mut Client, query: &str| {
        names_in(&agent.call("butler__find_tools", json!({"query": query, "limit": 3})))
    };
    for (query, tool) in [
        ("what time is it in another timezone", "time__get_current_time"),
        ("list the files in a directory", "files__list_directory"),
        ("add two numbers together", "everything__get-sum"),
    ] {
        wait_until(LIMIT, &format!("{query:?} to find {tool}"), || found(&mut agent, query).iter().any(|n| n == tool));
    }

    // Described as the main endpoint lists them.
    let named = ["time__get_current_time", "files__read_text_file", "everything__get-sum"];
    let described = agent.call("butler__describe_tools", json!({"names": named}));
    assert_eq!(names_in(&described), named, "{described}");
    let listed = Client::connect(&butler, "/mcp").request("tools/list", json!({}));
    let listed = listed["result"]["tools"].as_array().cloned().unwrap_or_default();
    assert_eq!(listed.last().map(|t| &t["name"]), Some(&json!("butler__find_tools")), "beside all of them on /mcp");
    for definition in described["structuredContent"]["tools"].as_array().expect("definitions") {
        assert!(listed.contains(definition), "{definition} as /mcp lists it");
    }

    // Called through butler__call_tool, with the results of direct calls.
    let carried = |agent: &mut Client, name: &str, arguments: Value| {
        agent.call("butler__call_tool", json!({"name": name, "arguments": arguments}))
    };
    let sum = carried(&mut agent, "everything__get-sum", json!({"a": 2, "b": 40}));
    assert!(text_of(&sum).contains("42"), "{sum}");
    let now = carried(&mut agent, "time__get_current_time", json!({"timezone": "Asia/Tokyo"}));
    assert!(now["isError"] != true && text_of(&now).contains("Asia/Tokyo"), "{now}");
    let note = notes.join("todo.txt").display().to_string();
    let read = carried(&mut agent, "files__read_text_file", json!({"path": note}));
    assert_eq!(read, agent.call("files__read_text_file", json!({"path": note})), "as the direct call");
    assert!(text_of(&read).contains("water the plants"), "{read}");

    // In the activity log under the tool's own name and the profile's endpoint.
    let logged = || {
        let (_, log) = butler.get_json("/mcp/activity?limit=100");
        log["entries"].as_array().cloned().unwrap_or_default()
    };
    wait_until(LIMIT, "the carried calls in the activity log", || {
        let entries = logged();
        named.iter().all(|name| {
            entries.iter().any(|e| e["name"] == *name && e["endpoint"] == "p/agent" && e["outcome"] == "ok")
        })
    });
    let entries = logged();
    assert!(!entries.iter().any(|e| e["name"] == "butler__call_tool"), "never under the wrapper's name");
    let sum_entry = entries.iter().find(|e| e["name"] == "everything__get-sum").expect("logged");
    assert_eq!(sum_entry["provider"], "everything", "{sum_entry}");
}

#[test]
fn a_carried_call_whose_provider_asks_the_client_takes_its_rounds() {
    let dir = three_providers(&json!({"mcp": {"exposure": "search"}}));
    let butler = Butler::start(dir.path());
    let capabilities = json!({"elicitation": {}});
    let call = |id: u64, extra: Value| {
        let arguments = json!({"name": "everything__trigger-elicitation-request", "arguments": {}});
        let mut message = request(id, "tools/call", json!({"name": "butler__call_tool", "arguments": arguments}));
        message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities.clone();
        if let (Some(params), Some(extra)) = (message["params"].as_object_mut(), extra.as_object()) {
            params.extend(extra.clone());
        }
        let (status, body) = post(&butler, "/mcp", &message, &headers_for(&message));
        assert_eq!(status, 200, "{body}");
        body
    };
    let mut first = Value::Null;
    wait_until(LIMIT, "the provider to ask for input", || {
        first = call(1, json!({}));
        first["result"]["resultType"] == "input_required"
    });
    let result = &first["result"];
    let (key, asked) = result["inputRequests"].as_object().and_then(|r| r.iter().next()).expect("one request");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let state = result["requestState"].as_str().expect("a request state");
    let answered = call(2, json!({"requestState": state, "inputResponses": {key.as_str(): {"action": "decline"}}}));
    assert_eq!(answered["result"]["resultType"], "complete", "{answered}");
    assert!(text_of(&answered["result"]).contains("declined"), "{answered}");
    // The main endpoint in search mode: the three tools alone, to either era.
    let listed = crate::mcp_stateless::ask(&butler, "/mcp", &request(3, "tools/list", json!({})));
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, SEARCH_TOOLS, "{listed}");
}
