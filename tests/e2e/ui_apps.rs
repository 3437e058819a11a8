//! ChatOS UI Apps plugins in a scan root: each app's `ai.mcp` server joins the hub under
//! its derived name and carries its `_meta`, its `ai.mcpPrompt` becomes prompts, and its
//! exposure lists make a profile of its own.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::capabilities::cli;
use crate::mcp_stateless::{ask, request};
use crate::util::Butler;

const PLUGIN_ID: &str = "com.example.Desk";

/// A plugin in `tools/desk` with two apps whose servers are the test's stdio MCP server,
/// and an app whose entry is outside the plugin.
fn write_plugin(workdir: &Path) {
    let dir = workdir.join("tools/desk");
    std::fs::create_dir_all(dir.join("ui")).expect("plugin dir");
    std::fs::create_dir_all(dir.join("mcp")).expect("mcp dir");
    std::fs::write(dir.join("ui/index.mjs"), "export function mount() {}").expect("ui");
    std::fs::copy(crate::mcp::root().join("tests/providers/remote_server.py"), dir.join("mcp/server.py"))
        .expect("server");
    std::fs::write(dir.join("notes.zh.md"), "# 笔记\n需要记笔记时使用。\n").expect("prompt");
    std::fs::write(dir.join("board.yaml"), "mcpServers:\n  - com.example.Desk.notes\n").expect("ai config");
    let python = crate::mcp::tools().join("mcp-venv/bin/python");
    let server = |extra: Value| {
        let mut mcp = json!({"entry": "mcp/server.py", "command": python, "args": ["--stdio"]});
        merge(&mut mcp, extra);
        mcp
    };
    let manifest = json!({
        "manifestVersion": 1, "id": PLUGIN_ID, "name": "Desk", "version": "0.1.0",
        "apps": [
            {"id": "notes", "name": "Notes", "entry": {"type": "module", "path": "ui/index.mjs"},
             "ai": {"mcp": server(json!({"callMeta": {"cache": "$dataDir/cache", "workdir": "$pluginDir"}})),
                    "mcpPrompt": {"zh": "notes.zh.md", "en": {"content": "Use it to take notes."}},
                    "mcpServers": false}},
            {"id": "board", "name": "Board", "entry": "ui/index.mjs",
             "ai": {"mcp": server(json!({"allowMain": false})), "config": "board.yaml",
                    "mcpServers": true, "prompts": ["mcp_com_example_desk_notes__en"]}},
            {"id": "broken", "name": "Broken", "entry": "../outside.mjs"},
        ],
    });
    std::fs::write(dir.join("plugin.json"), manifest.to_string()).expect("plugin.json");
}

fn merge(base: &mut Value, over: Value) {
    if let (Some(base), Value::Object(over)) = (base.as_object_mut(), over) {
        base.extend(over);
    }
}

fn names(answer: &Value, list: &str) -> Vec<String> {
    answer["result"][list]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .map(str::to_owned)
        .collect()
}

fn call(butler: &Butler, path: &str, tool: &str) -> Value {
    let mut message = request(3, "tools/call", json!({"name": tool, "arguments": {}}));
    message["params"]["_meta"]["client.example/trace"] = json!("kept");
    let answer = ask(butler, path, &message);
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{tool}: {answer}"));
    serde_json::from_str(text).expect("whoami answers JSON")
}

#[test]
fn a_chatos_plugins_apps_join_the_hub_with_their_meta_prompts_and_profiles() {
    let (butler, _dir) = Butler::start_fresh();
    write_plugin(&butler.workdir);
    let workdir = butler.workdir.canonicalize().expect("workdir");
    let plugin_dir = workdir.join("tools/desk");
    let data_dir = workdir.join(".butler/ui_apps/data").join(PLUGIN_ID);

    // Found by the scan, held for the owner's review like any provider's tools until
    // approved: then the notes app's tools are on the main endpoint; the board's
    // (`allowMain: false`) are not.
    let mut tools = Vec::new();
    butler_test_support::wait_until(Duration::from_secs(60), "the plugin's tools", || {
        let _ = cli(&butler, &["mcp", "held"]);
        for app in ["notes", "board"] {
            let _ = cli(&butler, &["mcp", "approve", &format!("uiapp:{PLUGIN_ID}.{app}")]);
        }
        tools = names(&ask(&butler, "/mcp", &request(1, "tools/list", json!({}))), "tools");
        tools.iter().any(|t| t == "com_example_desk_notes__whoami")
    });
    assert!(!tools.iter().any(|t| t.starts_with("com_example_desk_board__")), "{tools:?}");

    // Every call carries the app's `_meta`, merged with the caller's own.
    let seen = call(&butler, "/mcp", "com_example_desk_notes__whoami");
    let meta = &seen["meta"];
    assert_eq!(meta["client.example/trace"], "kept", "{seen}");
    assert_eq!(meta["workdir"], json!(plugin_dir), "callMeta overrides the default workdir: {seen}");
    assert_eq!(meta["cache"], json!(format!("{}/cache", data_dir.display())), "{seen}");
    let ui_app = &meta["chatos"]["uiApp"];
    assert_eq!((&ui_app["pluginId"], &ui_app["appId"]), (&json!(PLUGIN_ID), &json!("notes")), "{seen}");
    assert_eq!(ui_app["dataDir"], json!(data_dir), "{seen}");
    assert!(data_dir.is_dir(), "the host made the data folder");

    // The notes app's prompt, in both languages, under the derived names.
    let prompts = names(&ask(&butler, "/mcp", &request(2, "prompts/list", json!({}))), "prompts");
    for name in ["mcp_com_example_desk_notes", "mcp_com_example_desk_notes__en"] {
        assert!(prompts.iter().any(|p| p == name), "{name} in {prompts:?}");
    }
    let got = ask(&butler, "/mcp", &request(4, "prompts/get", json!({"name": "mcp_com_example_desk_notes"})));
    assert_eq!(got["result"]["messages"][0]["content"]["text"], "# 笔记\n需要记笔记时使用。", "{got}");

    // The board's own profile: its server (on no main endpoint), the notes server its
    // config file exposes (inline `true` defers to the file), and the one prompt it lists.
    let board = "/mcp/p/com_example_desk_board";
    let board_tools = names(&ask(&butler, board, &request(5, "tools/list", json!({}))), "tools");
    assert!(board_tools.iter().any(|t| t == "com_example_desk_board__whoami"), "{board_tools:?}");
    assert!(board_tools.iter().any(|t| t == "com_example_desk_notes__whoami"), "{board_tools:?}");
    let seen = call(&butler, board, "com_example_desk_board__whoami");
    assert_eq!(seen["meta"]["chatos"]["uiApp"]["appId"], "board", "{seen}");
    assert_eq!(seen["meta"]["workdir"], json!(data_dir), "the default workdir is the data folder: {seen}");
    let board_prompts = names(&ask(&butler, board, &request(6, "prompts/list", json!({}))), "prompts");
    assert_eq!(board_prompts, ["mcp_com_example_desk_notes__en"]);

    // The notes profile exposes no other server (`mcpServers: false`) and only its own
    // prompts (`prompts` unset, no config file).
    let notes = "/mcp/p/com_example_desk_notes";
    let notes_tools = names(&ask(&butler, notes, &request(7, "tools/list", json!({}))), "tools");
    assert!(notes_tools.iter().all(|t| t.starts_with("com_example_desk_notes__")), "{notes_tools:?}");
    assert!(!notes_tools.is_empty());
    let mut notes_prompts = names(&ask(&butler, notes, &request(8, "prompts/list", json!({}))), "prompts");
    notes_prompts.sort();
    assert_eq!(notes_prompts, ["mcp_com_example_desk_notes", "mcp_com_example_desk_notes__en"]);

    // The app whose entry is outside the plugin is left out, and the catalog says why.
    let catalog = butler.catalog();
    let apps: Vec<(&str, &str, &str)> = catalog["apps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| Some((a["pluginId"].as_str()?, a["appId"].as_str()?, a["name"].as_str()?)))
        .collect();
    assert_eq!(apps, [(PLUGIN_ID, "notes", "Notes"), (PLUGIN_ID, "board", "Board")], "{catalog}");
    let diagnostics = catalog["diagnostics"].to_string();
    assert!(diagnostics.contains("tools/desk/plugin.json") && diagnostics.contains("/apps/2/entry"), "{catalog}");
    assert!(diagnostics.contains("must be within the plugin directory"), "{catalog}");
    let (_, status) = butler.get_json("/mcp/status");
    let ids: Vec<&str> =
        status["providers"].as_array().into_iter().flatten().filter_map(|p| p["id"].as_str()).collect();
    assert!(ids.contains(&"uiapp:com.example.Desk.notes") && !ids.iter().any(|i| i.contains("broken")), "{ids:?}");
}

/// A backend module whose methods answer with `generation`.
fn backend_module(generation: u32) -> String {
    format!(
        r#"import {{ writeFile }} from "node:fs/promises";
import {{ join }} from "node:path";
export async function createUiAppsBackend(ctx) {{
  return {{
    methods: {{
      async ping(params, ctx) {{
        const llm = await ctx.llm.complete({{ input: "hello" }}).then(() => "answered", (e) => `${{e.status}} ${{e.code}}`);
        return {{ pong: params.value, generation: {generation}, pluginId: ctx.pluginId, dataDir: ctx.dataDir, llm }};
      }},
      async fail() {{ throw new Error("it broke"); }},
      async chatty() {{ console.log("to stdout"); process.stdout.write("raw\n"); return "still answered"; }},
    }},
    async dispose() {{ await writeFile(join(ctx.dataDir, "disposed-{generation}"), "yes"); }},
  }};
}}
"#
    )
}

fn write_backend_plugin(root: &Path) -> std::path::PathBuf {
    let dir = root.join("tools/kanban");
    std::fs::create_dir_all(dir.join("backend")).expect("plugin dir");
    std::fs::write(dir.join("index.mjs"), "export function mount() {}").expect("ui");
    std::fs::write(dir.join("backend/index.mjs"), backend_module(1)).expect("backend");
    let manifest = json!({"id": "com.example.kanban", "name": "Kanban", "backend": {"entry": "backend/index.mjs"},
        "apps": [{"id": "board", "name": "Board", "entry": "index.mjs"}]});
    std::fs::write(dir.join("plugin.json"), manifest.to_string()).expect("plugin.json");
    dir.join("backend/index.mjs")
}

#[test]
fn a_plugins_backend_answers_the_owner_over_http_and_reloads_after_an_edit() {
    let (butler, _dir) = Butler::start_fresh();
    let entry = write_backend_plugin(&butler.workdir);
    let token = butler.owner_token();
    let owner = [("authorization", format!("Bearer {token}"))];
    let owner: Vec<(&str, &str)> = owner.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let path = |method: &str| format!("/apps/com.example.kanban/board/backend/{method}");

    // Listed, with its backend available.
    butler_test_support::wait_until(Duration::from_secs(30), "the plugin listed", || {
        butler.get_json("/apps").1["plugins"][0]["id"] == "com.example.kanban"
    });
    let (_, listed) = butler.get_json("/apps");
    assert_eq!(listed["plugins"][0]["backend"]["state"], "available", "{listed}");

    // Only the owner calls a backend.
    let (status, body) = butler.post_json(&path("ping"), &json!({"value": 1}), &[]);
    crate::util::assert_error(status, &body, 403, "owner_required");

    let (status, body) = butler.post_json(&path("ping"), &json!({"value": 7}), &owner);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ok"], true, "{body}");
    let data_dir = butler.workdir.canonicalize().expect("workdir").join(".butler/ui_apps/data/com.example.kanban");
    assert_eq!(body["data"]["pong"], 7);
    assert_eq!(body["data"]["generation"], 1);
    assert_eq!(body["data"]["pluginId"], "com.example.kanban");
    assert_eq!(body["data"]["llm"], "503 agent_unavailable", "no agent backend yet: {body}");
    assert!(
        body["data"]["dataDir"]
            .as_str()
            .is_some_and(|d| Path::new(d).ends_with(".butler/ui_apps/data/com.example.kanban"))
    );

    // What a method throws, an unknown method, and a backend writing to stdout.
    let (status, body) = butler.post_json(&path("fail"), &json!({}), &owner);
    assert_eq!((status, &body), (200, &json!({"ok": false, "message": "it broke"})));
    let (status, body) = butler.post_json(&path("nope"), &json!({}), &owner);
    assert_eq!((status, &body), (200, &json!({"ok": false, "message": "Method not found: nope"})));
    let (status, body) = butler.post_json(&path("chatty"), &json!({}), &owner);
    assert_eq!((status, &body), (200, &json!({"ok": true, "data": "still answered"})));
    let (status, body) = butler.post_json("/apps/com.example.kanban/nothing/backend/ping", &json!({}), &owner);
    crate::util::assert_error(status, &body, 404, "unknown_app");

    // An edit reloads the module, after the old instance's dispose().
    std::fs::write(&entry, backend_module(2)).expect("edit");
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options().write(true).open(&entry).and_then(|f| f.set_modified(later)).expect("mtime");
    let (status, body) = butler.post_json(&path("ping"), &json!({"value": 8}), &owner);
    assert_eq!((status, &body["data"]["generation"]), (200, &json!(2)), "{body}");
    assert!(data_dir.join("disposed-1").is_file(), "the old instance was disposed");
}

#[test]
fn without_node_a_backend_is_listed_with_the_reason_and_calls_say_so() {
    let dir = tempfile::tempdir().expect("dir");
    let workdir = dir.path().join("instance");
    let butler = Butler::start_with_env(&workdir, &[], &[("PATH", "/nonexistent")]);
    write_backend_plugin(&butler.workdir);
    butler_test_support::wait_until(Duration::from_secs(30), "the plugin listed", || {
        butler.get_json("/apps").1["plugins"][0]["id"] == "com.example.kanban"
    });
    let (_, listed) = butler.get_json("/apps");
    let backend = &listed["plugins"][0]["backend"];
    assert_eq!(backend["state"], "unavailable", "{listed}");
    assert!(backend["reason"].as_str().is_some_and(|r| r.contains("Node.js is not installed")), "{listed}");
    let token = butler.owner_token();
    let auth = format!("Bearer {token}");
    let (status, body) =
        butler.post_json("/apps/com.example.kanban/board/backend/ping", &json!({}), &[("authorization", &auth)]);
    crate::util::assert_error(status, &body, 503, "backend_unavailable");
}
