//! Full duplex through the hub: a provider's own requests for the client — sampling,
//! elicitation, roots — reach the client whose call caused them and the answers go back,
//! for every pair of eras: on the call's SSE stream for a legacy session, as an
//! `InputRequiredResult` and its retry for a 2026-07-28 client — whether the provider asked
//! the 2025 way (the hub parks the call) or in 2026-07-28 (its own `InputRequiredResult`,
//! passed through to a 2026-07-28 client and turned into requests for a legacy one). The
//! provider is our port of the conformance suite's reference server
//! (`tests/providers/conformance_server.py`, which speaks both eras; `mcp.legacyProviders`
//! keeps it on the 2025 handshake); the client is the official Python SDK. Then
//! the providers' resources: templates namespaced and readable, a URI two providers offer
//! told apart, and `notifications/resources/updated` reaching only who subscribed.

use serde_json::{Value, json};

use crate::mcp::{LIMIT, instance, root, text_of, tools};
use crate::mcp_stateless::{events, headers_for, post, raw_post, request};
use crate::util::{Butler, wait_until, write_manifest};

const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// The era the hub speaks to the conformance server in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    /// 2026-07-28: it answers `server/discover`.
    Modern,
    /// 2025-06-18: it is named in `mcp.legacyProviders`.
    Legacy,
}

/// An instance whose providers are the conformance server under each of `ids` (each its
/// namespace), spoken to in `era`.
fn with_conformance_providers(ids: &[&str], era: Provider) -> (tempfile::TempDir, Butler) {
    let tools = tools();
    let dir = instance();
    // A profile that offers one harmless tool, to retry a call on where it was not made.
    let legacy: Vec<&str> = if era == Provider::Legacy { ids.to_vec() } else { Vec::new() };
    let config = json!({"mcp": {"legacyProviders": legacy,
                                "profiles": {"narrow": {"providers": [ids[0]], "include": ["*__test_simple_text"]}}}});
    std::fs::write(dir.path().join("butler.json"), config.to_string()).expect("root config");
    let python = tools.join("mcp-venv/bin/python").display().to_string();
    let script = root().join("tests/providers/conformance_server.py").display().to_string();
    for id in ids {
        let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id,
                              "mcp": {"transport": "stdio", "command": [python, script], "timeoutSec": 20}});
        write_manifest(dir.path(), &format!("tools/{id}"), &manifest);
    }
    let butler = Butler::start(dir.path());
    (dir, butler)
}

fn with_conformance_provider(era: Provider) -> (tempfile::TempDir, Butler) {
    with_conformance_providers(&["conf"], era)
}

#[test]
fn a_2025_providers_requests_reach_the_client_whose_call_made_them_in_both_eras() {
    providers_requests_reach_the_client_whose_call_made_them(Provider::Legacy);
}

#[test]
fn a_2026_providers_input_requests_reach_the_client_whose_call_made_them_in_both_eras() {
    providers_requests_reach_the_client_whose_call_made_them(Provider::Modern);
}

fn providers_requests_reach_the_client_whose_call_made_them(era: Provider) {
    let (_dir, butler) = with_conformance_provider(era);
    let protocol = if era == Provider::Modern { "2026-07-28" } else { "2025-06-18" };
    let url = format!("http://localhost:{}/myspace-butler/api/mcp", butler.port);
    let python = r#"
import asyncio, json, sys, mcp
from mcp import types
async def sampling(context, params):
    asked = params.messages[0].content.text
    return types.CreateMessageResult(role="assistant", model="e2e",
        content=types.TextContent(type="text", text=f"sampled {asked}"))
async def elicitation(context, params):
    return types.ElicitResult(action="accept", content={"response": "octocat"})
async def roots(context):
    return types.ListRootsResult(roots=[types.Root(uri="file:///home/owner/notes", name="notes")])
logged = []
async def logging(params):
    logged.append(params)
async def main(url, mode):
    async with mcp.Client(url, mode=mode, sampling_callback=sampling, elicitation_callback=elicitation,
                          list_roots_callback=roots, logging_callback=logging, log_level="info") as client:
        print("VERSION", client.session.protocol_version)
        if mode == "legacy":
            await client.set_logging_level("info")
        await client.call_tool("conf__test_tool_with_logging", {})
        for params in logged:
            print("LOG", params.level, params.logger, params.data)
        for name, arguments in [("conf__test_sampling", {"prompt": "the weather"}),
                                ("conf__test_elicitation", {"message": "who are you?"}),
                                ("conf__test_list_roots", {})]:
            result = await client.call_tool(name, arguments)
            print("CALL", name, result.is_error, result.content[0].text)
    # A client that declared none of them: the hub refuses the provider's request.
    async with mcp.Client(url, mode=mode) as client:
        result = await client.call_tool("conf__test_sampling", {"prompt": "x"})
        print("BARE", result.is_error, result.content[0].text)
asyncio.run(main(sys.argv[1], sys.argv[2]))
"#;
    for (mode, agreed) in [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")] {
        let output = std::process::Command::new(tools().join("mcp-venv/bin/python"))
            .args(["-c", python, &url, mode])
            .output()
            .expect("run the Python SDK client");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{mode}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        for expected in [
            format!("VERSION {agreed}"),
            "CALL conf__test_sampling False LLM response: sampled the weather".to_owned(),
            r#"CALL conf__test_elicitation False User response: action=accept, content={"response":"octocat"}"#
                .to_owned(),
            "CALL conf__test_list_roots False Roots: file:///home/owner/notes".to_owned(),
            // Tagged with the provider's namespace.
            "LOG info conf/conformance-test-server Tool execution started".to_owned(),
            "LOG info conf/conformance-test-server Tool execution completed".to_owned(),
        ] {
            assert!(stdout.lines().any(|l| l == expected), "{mode}: {expected:?} in\n{stdout}");
        }
        // The hub refuses a 2025 provider's request the client cannot take; a 2026-07-28
        // provider hears of the client's capabilities in the envelope and decides itself.
        let bare = stdout.lines().find(|l| l.starts_with("BARE ")).unwrap_or_default();
        let refusal = match era {
            Provider::Legacy => "did not declare the `sampling` capability",
            Provider::Modern => "Sampling not supported: the client did not declare it",
        };
        assert!(bare.starts_with("BARE True") && bare.contains(refusal), "{mode}: {stdout}");
    }
    assert_eq!(crate::mcp::provider_status(&butler, "conf")["protocol"], protocol);
}

/// A 2026-07-28 `tools/call` with the client's capabilities.
fn call(id: u64, name: &str, arguments: Value, capabilities: Value) -> Value {
    let mut message = request(id, "tools/call", json!({"name": name, "arguments": arguments}));
    message["params"]["_meta"][CAPABILITIES] = capabilities;
    message
}

fn send(butler: &Butler, message: &Value) -> (u16, Value) {
    post(butler, "/mcp", message, &headers_for(message))
}

#[test]
fn a_request_state_is_taken_back_once_unaltered_and_for_its_own_tool() {
    let (_dir, butler) = with_conformance_provider(Provider::Legacy);
    let capabilities = json!({"elicitation": {}});
    let asking = call(1, "conf__test_elicitation", json!({"message": "who?"}), capabilities.clone());
    let (status, first) = send(&butler, &asking);
    assert_eq!(status, 200, "{first}");
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let requests = result["inputRequests"].as_object().expect("input requests");
    assert_eq!(requests.len(), 1, "{result}");
    let (key, asked) = requests.iter().next().expect("one");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "who?", "{asked}");
    assert!(asked.get("id").is_none() && asked.get("jsonrpc").is_none(), "a request shape, not a message: {asked}");
    let state = result["requestState"].as_str().expect("a request state").to_owned();
    assert!(result.get("ttlMs").is_none(), "an input_required result carries no cache hints: {result}");

    let retry = |id: u64, name: &str, state: &str| {
        let mut message = call(id, name, json!({"message": "who?"}), capabilities.clone());
        message["params"]["requestState"] = json!(state);
        message["params"]["inputResponses"] =
            json!({key.as_str(): {"action": "accept", "content": {"response": "me"}}});
        send(&butler, &message)
    };
    // Altered, or sent with another tool, other arguments, or to a profile that does not
    // offer the tool: refused, and the call still waits for its own retry.
    let mut altered = state.clone();
    let last = altered.pop().expect("not empty");
    altered.push(if last == 'A' { 'B' } else { 'A' });
    for (name, bad) in [("conf__test_elicitation", altered.as_str()), ("conf__test_sampling", state.as_str())] {
        let (status, refused) = retry(2, name, bad);
        assert_eq!((status, refused["error"]["code"].as_i64()), (200, Some(-32602)), "{name}: {refused}");
        assert!(refused.get("result").is_none(), "{refused}");
    }
    let mut other_arguments = call(2, "conf__test_elicitation", json!({"message": "else"}), capabilities.clone());
    other_arguments["params"]["requestState"] = json!(state);
    other_arguments["params"]["inputResponses"] =
        json!({key.as_str(): {"action": "accept", "content": {"response": "me"}}});
    let (_, refused) = send(&butler, &other_arguments);
    assert_eq!(refused["error"]["code"], -32602, "other arguments: {refused}");
    let mut elsewhere = other_arguments.clone();
    elsewhere["params"]["arguments"] = json!({"message": "who?"});
    let (status, refused) = post(&butler, "/mcp/p/narrow", &elsewhere, &headers_for(&elsewhere));
    assert_eq!((status, refused["error"]["code"].as_i64()), (200, Some(-32602)), "another endpoint: {refused}");
    assert!(refused.get("result").is_none(), "{refused}");
    // An answer that is no result is refused, and the call still waits.
    let mut malformed = elsewhere.clone();
    malformed["params"]["inputResponses"] = json!({key.as_str(): "accept"});
    let (_, refused) = send(&butler, &malformed);
    assert_eq!(refused["error"]["code"], -32602, "a malformed answer: {refused}");
    assert!(refused["error"]["message"].as_str().is_some_and(|m| m.contains(key.as_str())), "{refused}");
    let (status, done) = retry(3, "conf__test_elicitation", &state);
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(text_of(&done["result"]), r#"User response: action=accept, content={"response":"me"}"#, "{done}");
    // Once only.
    let (_, again) = retry(4, "conf__test_elicitation", &state);
    assert_eq!(again["error"]["code"], -32602, "a state is used once: {again}");

    // A retry that leaves the question unanswered is asked it again, under a new state.
    let (_, first) =
        send(&butler, &call(5, "conf__test_elicitation", json!({"message": "again?"}), capabilities.clone()));
    let state = first["result"]["requestState"].as_str().expect("a state").to_owned();
    let mut unanswered = call(6, "conf__test_elicitation", json!({"message": "again?"}), capabilities);
    unanswered["params"]["requestState"] = json!(state);
    unanswered["params"]["inputResponses"] = json!({"not-a-key": {"action": "decline"}});
    let (_, asked_again) = send(&butler, &unanswered);
    assert_eq!(asked_again["result"]["resultType"], "input_required", "{asked_again}");
    assert_ne!(asked_again["result"]["requestState"], json!(state), "{asked_again}");

    // The activity log says which rounds asked for input (it is written in the background).
    let outcomes = || {
        let (_, log) = butler.get_json("/mcp/activity?limit=20");
        let entries = log["entries"].as_array().cloned().unwrap_or_default();
        entries.iter().filter_map(|e| e["outcome"].as_str().map(str::to_owned)).collect::<Vec<_>>()
    };
    wait_until(LIMIT, "both outcomes in the activity log", || {
        let outcomes = outcomes();
        outcomes.iter().any(|o| o == "input_required") && outcomes.iter().any(|o| o == "ok")
    });
}

/// A 2026-07-28 request's result, refusals included.
fn result_of(butler: &Butler, message: &Value) -> Value {
    let (status, body) = send(butler, message);
    assert_eq!(status, 200, "{message}: {body}");
    body["result"].clone()
}

#[test]
fn resources_are_routed_by_uri_and_template_and_their_updates_reach_who_subscribed() {
    let (_dir, butler) = with_conformance_providers(&["conf", "twin"], Provider::Modern);

    // Both offer test://static-text: the first keeps it, the second's is told apart.
    let listed = result_of(&butler, &request(1, "resources/list", json!({})));
    let uris: Vec<&str> =
        listed["resources"].as_array().expect("resources").iter().filter_map(|r| r["uri"].as_str()).collect();
    assert!(uris.contains(&"test://static-text") && uris.contains(&"butler://twin/test://static-text"), "{uris:?}");
    let (_, status) = butler.get_json("/mcp/status");
    let duplicate = status["duplicateUris"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["uri"] == "test://static-text").cloned())
        .expect("the duplicate is reported");
    assert_eq!(
        (&duplicate["provider"], &duplicate["heldBy"], &duplicate["exposedAs"]),
        (&json!("twin"), &json!("conf"), &json!("butler://twin/test://static-text"))
    );
    let twin = result_of(&butler, &request(2, "resources/read", json!({"uri": "butler://twin/test://static-text"})));
    assert_eq!(twin["contents"][0]["uri"], "butler://twin/test://static-text", "{twin}");
    assert_eq!(twin["contents"][0]["text"], "This is the content of the static text resource.", "{twin}");

    // Templates: namespaced names, and a URI one describes is read from its provider.
    let templates = result_of(&butler, &request(3, "resources/templates/list", json!({})));
    let names: Vec<&str> = templates["resourceTemplates"]
        .as_array()
        .expect("templates")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.iter().all(|n| n.starts_with("conf__") || n.starts_with("twin__")) && names.len() == 2, "{names:?}");
    let read = result_of(&butler, &request(4, "resources/read", json!({"uri": "test://template/7/data"})));
    assert!(read["contents"][0]["text"].as_str().is_some_and(|t| t.contains("Data for ID: 7")), "{read}");
    let (status, missing) = send(&butler, &request(5, "resources/read", json!({"uri": "test://nothing/here"})));
    // 2026-07-28 names it `-32602` (SEP-2164), with the URI.
    assert_eq!((status, missing["error"]["code"].as_i64()), (200, Some(-32602)), "{missing}");
    assert_eq!(missing["error"]["data"]["uri"], "test://nothing/here", "{missing}");

    // A stateless listener that named the watched resource gets its update, tagged.
    let listen = {
        let mut message = request(6, "subscriptions/listen", json!({}));
        message["params"]["notifications"] = json!({"resourceSubscriptions": ["test://watched-resource"]});
        message
    };
    let stream = raw_post(&butler, &listen);
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Each event as it comes; the stream ends after the second.
        events(stream, |seen| {
            let _ = seen_tx.send(seen[seen.len() - 1].clone());
            seen.len() >= 2
        })
    });
    let ack = seen_rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the acknowledgement");
    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"], json!(["test://watched-resource"]), "{ack}");
    let triggered = result_of(&butler, &call(7, "conf__test_trigger_resource_update", json!({}), json!({})));
    assert!(text_of(&triggered).contains("sent notifications/resources/updated"), "{triggered}");
    let updated = seen_rx.recv_timeout(std::time::Duration::from_secs(20)).expect("the update");
    assert_eq!(updated["method"], "notifications/resources/updated", "{updated}");
    assert_eq!(updated["params"]["uri"], "test://watched-resource", "{updated}");
    assert_eq!(updated["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 6, "{updated}");

    // A legacy session: subscribe, get the update on its stream; unsubscribed, it does not.
    let url = format!("http://localhost:{}/myspace-butler/api/mcp", butler.port);
    let python = r#"
import asyncio, sys, warnings, mcp, anyio
from mcp import types
warnings.simplefilter("ignore", DeprecationWarning)
updates = []
async def on_message(message):
    if isinstance(message, types.ResourceUpdatedNotification):
        updates.append(str(message.params.uri))
async def main(url):
    async with mcp.Client(url, mode="legacy", message_handler=on_message) as client:
        await client.subscribe_resource("test://watched-resource")
        await client.call_tool("conf__test_trigger_resource_update", {})
        with anyio.fail_after(10):
            while not updates:
                await anyio.sleep(0.05)
        print("UPDATED", updates[0])
        await client.unsubscribe_resource("test://watched-resource")
        await client.call_tool("conf__test_trigger_resource_update", {})
        await anyio.sleep(0.5)
        print("AFTER", len(updates))
asyncio.run(main(sys.argv[1]))
"#;
    let output = std::process::Command::new(tools().join("mcp-venv/bin/python"))
        .args(["-c", python, &url])
        .output()
        .expect("run the Python SDK client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.lines().any(|l| l == "UPDATED test://watched-resource"), "{stdout}");
    assert!(stdout.lines().any(|l| l == "AFTER 1"), "no update once unsubscribed: {stdout}");
}

/// A legacy session that sends nothing for `mcp.sessionIdleSec` ends (its client gets 404
/// and initializes again), unless it holds its notification stream open.
#[test]
fn an_idle_session_ends_unless_its_stream_is_open() {
    let dir = instance();
    std::fs::write(dir.path().join("butler.json"), r#"{"mcp": {"sessionIdleSec": 1}}"#).expect("root config");
    let butler = Butler::start(dir.path());
    let idle = crate::mcp::Client::connect(&butler, "/mcp");
    let listening = crate::mcp::Client::connect(&butler, "/mcp");
    let session = |client: &crate::mcp::Client| client.session_id().to_owned();
    let stream = butler
        .request(reqwest::Method::GET, &butler.api("/mcp"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session(&listening))
        .send()
        .expect("the stream");
    assert_eq!(stream.status(), 200);
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    let (status, _, body) = idle.post(&ping, &[]);
    assert_eq!((status, body["error"]["code"].as_i64()), (404, Some(-32001)), "the idle one ended: {body}");
    let (status, _, body) = listening.post(&ping, &[]);
    assert_eq!(status, 200, "the one with its stream open lives: {body}");
    drop(stream);
}
