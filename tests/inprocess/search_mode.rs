//! The search tools in-process, over two real providers (`fake_mcp.py`, as in [`crate::hub`]):
//! in search mode the list is the three search tools, and what they find, describe and call
//! is what the endpoint offers — no more — with a direct call's result; switched back while
//! the hub runs, the list is whole again and `butler__find_tools` stays beside it; the
//! owner's use lifts a tool over an equal match.

use std::sync::Arc;

use butler_mcp::exposure::{CALL_TOOL, DESCRIBE_TOOLS, FIND_TOOLS};
use butler_mcp::{Asker, Exposure, Hub, Profile, ProfileSpec, View};
use serde_json::{Value, json};

use crate::hub::{hub_with, text_of, write_providers};
use crate::{scan, use_real_keeper, within};

/// The answer to `tools/call` of `name` on `view` (a read result, as the hub passes it on).
async fn call_on(hub: &Hub, view: &View, name: &str, arguments: Value) -> Result<Value, butler_mcp::RpcError> {
    let params = json!({"name": name, "arguments": arguments});
    within(&format!("{name} to answer"), hub.call_tool(view, "search", &json!(1), params, None, &Asker::hub()))
        .await
        .map(butler_mcp::Answer::into_value)
}

/// The names `tools/list` shows on `view`.
async fn listed(hub: &Hub, view: &View) -> Vec<String> {
    within("tools/list", hub.list_tools(view, &Asker::hub()))
        .await
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// The spec of a profile's view.
fn profile_spec(view: &View) -> ProfileSpec {
    match view {
        View::Profile(profile) => profile.spec.clone(),
        View::Main | View::Restricted => ProfileSpec::default(),
    }
}

/// The names in a search tool's structured result.
fn names_in(result: &Value) -> Vec<String> {
    result["structuredContent"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn in_search_mode_the_search_tools_find_describe_and_call_what_the_endpoint_offers() {
    use_real_keeper();
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_providers(r, &[("alpha", None), ("beta", None)]);
    let search = butler_mcp::Settings { exposure: Exposure::Search, ..butler_mcp::Settings::default() };
    let hub = hub_with(r, &scan(r, None), search).await;
    let main = View::Main;
    assert_eq!(listed(&hub, &main).await, [FIND_TOOLS, DESCRIBE_TOOLS, CALL_TOOL], "only the search tools");

    let found = call_on(&hub, &main, FIND_TOOLS, json!({"query": "echo some text back", "limit": 2})).await;
    let found = found.expect("a search is answered");
    assert_eq!(names_in(&found), ["alpha__echo", "beta__echo"], "{found}");
    assert_eq!(found["structuredContent"]["searched"], 12, "both providers' public tools were searched");
    let first = &found["structuredContent"]["tools"][0];
    assert_eq!(first["inputSchema"]["properties"]["text"]["type"], "string", "each match with its schema: {first}");

    let asked = json!({"names": ["beta__env", "nope__x", "beta__env", "nope__x"]});
    let described = call_on(&hub, &main, DESCRIBE_TOOLS, asked).await;
    let described = described.expect("a description is answered");
    assert_eq!(names_in(&described), ["beta__env"], "each name once");
    assert_eq!(described["structuredContent"]["unknown"], json!(["nope__x"]));

    let direct = call_on(&hub, &main, "alpha__echo", json!({"text": "hi"})).await.expect("a direct call");
    let carried = call_on(&hub, &main, CALL_TOOL, json!({"name": "alpha__echo", "arguments": {"text": "hi"}})).await;
    assert_eq!(carried.expect("a carried call"), direct, "the same result as the direct call");

    for (arguments, why) in
        [(json!({"arguments": {}}), "`name`"), (json!({"name": CALL_TOOL}), "not butler__call_tool itself")]
    {
        let refused = call_on(&hub, &main, CALL_TOOL, arguments.clone()).await.expect("an isError result");
        assert!(refused["isError"] == true && text_of(&refused).contains(why), "{arguments}: {refused}");
    }
    for (tool, arguments) in [(FIND_TOOLS, json!({})), (FIND_TOOLS, json!({"query": "x", "limit": 0}))]
        .into_iter()
        .chain([(DESCRIBE_TOOLS, json!({"names": []})), (DESCRIBE_TOOLS, json!({"names": [1]}))])
        // A name no tool could have is not echoed back at its size.
        .chain([(DESCRIBE_TOOLS, json!({"names": ["x".repeat(100_000)]}))])
    {
        let refused = call_on(&hub, &main, tool, arguments.clone()).await.expect("an isError result");
        assert_eq!(refused["isError"], true, "{tool} {arguments}: {refused}");
    }
    let unknown = call_on(&hub, &main, CALL_TOOL, json!({"name": "gamma__echo", "arguments": {}})).await;
    assert!(unknown.is_err_and(|e| e.message.contains("unknown tool: gamma__echo")), "as a direct call of it");

    // A profile in search mode over alpha alone: beta is neither found nor called.
    let spec = ProfileSpec {
        providers: Some(vec!["alpha".to_owned()]),
        prefixed: true,
        exposure: Exposure::Search,
        ..ProfileSpec::default()
    };
    let profile = View::Profile(Arc::new(Profile::new("only-alpha", spec).expect("a valid profile")));
    let found = call_on(&hub, &profile, FIND_TOOLS, json!({"query": "echo"})).await.expect("answered");
    assert_eq!(names_in(&found), ["alpha__echo"], "{found}");
    let beta = call_on(&hub, &profile, CALL_TOOL, json!({"name": "beta__echo", "arguments": {"text": "x"}})).await;
    assert!(beta.is_err_and(|e| e.message.contains("unknown tool")), "beta is not the profile's");
    // The root config edited: the same name now over beta, searched afresh.
    let spec = ProfileSpec { providers: Some(vec!["beta".to_owned()]), ..profile_spec(&profile) };
    let edited = View::Profile(Arc::new(Profile::new("only-alpha", spec).expect("a valid profile")));
    let found = call_on(&hub, &edited, FIND_TOOLS, json!({"query": "echo"})).await.expect("answered");
    assert_eq!(names_in(&found), ["beta__echo"], "not the index of the profile as it was: {found}");

    // Back to all while the hub runs: the whole list, find_tools after it; the others go.
    assert!(!hub.retune(&butler_mcp::Settings::default()));
    let all = listed(&hub, &main).await;
    assert_eq!(all.len(), 13, "{all:?}");
    assert_eq!(all.last().map(String::as_str), Some(FIND_TOOLS));
    let gone = call_on(&hub, &main, DESCRIBE_TOOLS, json!({"names": ["alpha__echo"]})).await;
    assert!(gone.is_err_and(|e| e.message.contains("unknown tool")), "describe_tools is search mode's");
    hub.shutdown().await;
}

#[tokio::test]
async fn the_owners_use_lifts_a_tool_over_an_equal_match() {
    use_real_keeper();
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_providers(r, &[("alpha", None), ("beta", None)]);
    let hub = hub_with(r, &scan(r, None), butler_mcp::Settings::default()).await;
    let main = View::Main;
    let search = || async {
        let found = call_on(&hub, &main, FIND_TOOLS, json!({"query": "echoes text"})).await;
        names_in(&found.expect("answered"))
    };
    assert_eq!(search().await[..2], ["alpha__echo", "beta__echo"], "equal matches keep the list's order");
    let before = hub.activity().newest();
    for _ in 0..3 {
        let entry = butler_mcp::activity::Entry {
            seq: 0,
            at: String::new(),
            endpoint: "main".to_owned(),
            token: None,
            revision: "2025-11-25".to_owned(),
            session: None,
            method: "tools/call".to_owned(),
            name: Some("beta__echo".to_owned()),
            provider: Some("beta".to_owned()),
            ms: 1.0,
            outcome: "ok".to_owned(),
            code: None,
            request_bytes: 0,
            response_bytes: 0,
            dropped_before: 0,
            request: None,
            response: None,
            parent: None,
        };
        hub.activity().record(entry);
    }
    let log = Arc::clone(&hub);
    crate::until("the calls to be logged", move || log.activity().newest() >= before + 3).await;
    assert_eq!(search().await[..2], ["beta__echo", "alpha__echo"], "the tool the owner uses comes first");
    hub.shutdown().await;
}
