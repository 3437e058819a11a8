use super::*;
use serde_json::json;

fn plugin_dir(manifest: &Value, files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(MANIFEST_FILE), manifest.to_string()).expect("write manifest");
    for (path, text) in files {
        let file = dir.path().join(path);
        std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
        std::fs::write(file, text).expect("write file");
    }
    dir
}

fn app(id: &str, ai: Value) -> Value {
    json!({"id": id, "name": format!("App {id}"), "entry": {"type": "module", "path": "ui/index.mjs"}, "ai": ai})
}

const UI: (&str, &str) = ("ui/index.mjs", "export function mount() {}");

#[test]
fn normalize_replaces_each_character_and_trims_underscores() {
    assert_eq!(normalize("com.example.dbtools.db-client"), "com_example_dbtools_db-client");
    assert_eq!(normalize("  ..My App!! "), "my_app");
    assert_eq!(normalize("a..b"), "a__b", "one `_` per character, as the seed says");
    assert_eq!(normalize("中文"), "");
}

#[test]
fn the_exposure_precedence_is_the_seeds() {
    let list = |names: &[&str]| Choice::List(names.iter().map(|n| (*n).to_owned()).collect());
    let listed = |names: &[&str]| Exposure::Listed(names.iter().map(|n| (*n).to_owned()).collect());
    let (on, off) = (Choice::Flag(true), Choice::Flag(false));
    // Inline false forces off, whatever the file and the defaults say.
    assert_eq!(resolve_exposure(Some(&off), Some(&list(&["a"])), Some(&on)), Exposure::Off);
    // An inline list is used as is.
    assert_eq!(resolve_exposure(Some(&list(&["x"])), Some(&list(&["a"])), None), listed(&["x"]));
    // Inline true: the file, then the defaults, then everything.
    assert_eq!(resolve_exposure(Some(&on), Some(&list(&["a"])), Some(&list(&["d"]))), listed(&["a"]));
    assert_eq!(resolve_exposure(Some(&on), Some(&off), Some(&list(&["d"]))), Exposure::Off);
    assert_eq!(resolve_exposure(Some(&on), None, Some(&list(&["d"]))), listed(&["d"]));
    assert_eq!(resolve_exposure(Some(&on), None, Some(&off)), Exposure::Off);
    assert_eq!(resolve_exposure(Some(&on), None, None), Exposure::All);
    // Unset: only the file applies; the defaults never do.
    assert_eq!(resolve_exposure(None, Some(&list(&["a"])), Some(&on)), listed(&["a"]));
    assert_eq!(resolve_exposure(None, Some(&on), None), Exposure::All);
    assert_eq!(resolve_exposure(None, None, Some(&list(&["d"]))), Exposure::Off);
}

#[test]
fn a_plugin_reads_into_apps_servers_prompts_and_exposure() {
    let manifest = json!({
        "manifestVersion": 1, "id": "com.example.tools", "name": "Tools", "version": "1.2.0",
        "backend": {"entry": "backend/index.mjs"},
        "apps": [
            app("db", json!({
                "mcp": {"entry": "mcp/server.mjs", "args": ["--quiet"], "callMeta": {"cache": "$dataDir/cache"},
                        "allowMain": false},
                "mcpPrompt": {"title": "DB", "zh": "prompts/zh.md", "en": {"content": "  English  "}},
                "mcpServers": ["files", "files", " other "],
            })),
            app("remote", json!({
                "mcp": {"url": "https://example.com/mcp", "auth": {"token": "t0k"}},
                "config": "ai.yaml", "mcpServers": true, "prompts": true,
            })),
            // The bare-string forms of later ChatOS versions.
            {"id": "bare", "name": "Bare", "entry": "ui/index.mjs", "ai": "ai.json"},
        ],
    });
    let dir = plugin_dir(
        &manifest,
        &[
            UI,
            ("backend/index.mjs", "export function createUiAppsBackend() {}"),
            ("mcp/server.mjs", "// a server"),
            ("prompts/zh.md", "\n中文提示\n"),
            ("ai.yaml", "mcpServers:\n  - files\nprompts: false\n"),
            ("ai.json", r#"{"mcpPrompt": {"en": {"content": "from the file"}}, "prompts": ["p1"]}"#),
        ],
    );
    let plugin = read(dir.path()).expect("the plugin reads");
    assert!(plugin.problems.is_empty(), "{:?}", plugin.problems);
    assert_eq!((plugin.id.as_str(), plugin.version.as_str()), ("com.example.tools", "1.2.0"));
    assert_eq!(plugin.backend, Some(Ok(dir.path().join("backend/index.mjs"))));
    let [db, remote, bare] = &plugin.apps[..] else { panic!("three apps: {:?}", plugin.apps) };

    let server = db.server.as_ref().expect("db has a server");
    let entry = dir.path().join("mcp/server.mjs").to_string_lossy().into_owned();
    assert_eq!(server.target, Target::Command(vec!["node".into(), entry, "--quiet".into()]));
    assert!(!server.allow_main && server.allow_sub);
    assert_eq!(
        db.prompts,
        vec![
            AppPrompt { name: "mcp_com_example_tools_db".into(), title: "DB".into(), text: "中文提示".into() },
            AppPrompt { name: "mcp_com_example_tools_db__en".into(), title: "DB".into(), text: "English".into() },
        ]
    );
    assert_eq!(db.servers_exposed, Exposure::Listed(vec!["files".into(), "other".into()]));
    assert_eq!(db.prompts_exposed, Exposure::Off);

    let mut headers = BTreeMap::new();
    headers.insert("Authorization".to_owned(), "Bearer t0k".to_owned());
    assert_eq!(
        remote.server.as_ref().map(|s| &s.target),
        Some(&Target::Url("https://example.com/mcp".into(), headers))
    );
    assert_eq!(remote.servers_exposed, Exposure::Listed(vec!["files".into()]), "true takes the config file's list");
    assert_eq!(remote.prompts_exposed, Exposure::Off, "true takes the config file's false");

    assert_eq!(bare.prompts.len(), 1, "the config file's prompt counts: {:?}", bare.prompts);
    assert_eq!(bare.prompts[0].title, "Bare MCP Prompt");
    assert_eq!(bare.prompts_exposed, Exposure::Listed(vec!["p1".into()]), "unset lets the file apply");
    assert_eq!(bare.servers_exposed, Exposure::Off);
}

#[test]
fn call_meta_expands_variables_and_merges_over_the_hosts_own() {
    let manifest = json!({"id": "p", "name": "P", "apps": [app("a", json!({"mcp": {"url": "cmd://node x.mjs",
        "callMeta": {"workdir": "$projectRoot/work", "chatos": {"uiApp": {"extra": ["$appId"]}}, "$dataDir": 1}}}))]});
    let dir = plugin_dir(&manifest, &[UI]);
    let plugin = read(dir.path()).expect("reads");
    let places = Places {
        data_dir: "/s/ui_apps/data/p".into(),
        state_dir: "/s".into(),
        session_root: "/i".into(),
        project_root: "/i".into(),
    };
    let meta = call_meta(&plugin, &plugin.apps[0], &places);
    assert_eq!(meta["workdir"], "/i/work", "callMeta wins over the default workdir");
    assert_eq!(meta["chatos"]["uiApp"]["dataDir"], "/s/ui_apps/data/p");
    assert_eq!(meta["chatos"]["uiApp"]["appId"], "a");
    assert_eq!(meta["chatos"]["uiApp"]["extra"], json!(["a"]), "merged into the host's block");
    assert_eq!(meta["$dataDir"], 1, "keys are not expanded");
    assert_eq!(
        plugin.apps[0].server.as_ref().map(|s| &s.target),
        Some(&Target::Command(vec!["node".into(), "x.mjs".into()]))
    );
}

#[test]
fn schema_errors_refuse_the_plugin_with_a_pointer() {
    let cases = [
        (json!({"name": "no id"}), "/id"),
        (json!({"id": "../x", "name": "N"}), "/id"),
        (json!({"id": "p", "name": "N", "version": 1}), "/version"),
        (json!({"id": "p", "name": "N", "manifestVersion": 2}), "/manifestVersion"),
        (
            json!({"id": "p", "name": "N", "apps": [{"id": "a", "name": "A", "entry": {"type": "iframe", "path": "x"}}]}),
            "/apps/0/entry/type",
        ),
        (json!({"id": "p", "name": "N", "apps": [app("a", json!({"mcp": {"command": "node"}}))]}), "/apps/0/ai/mcp"),
        (json!({"id": "p", "name": "N", "apps": [app("a", json!({"mcpServers": []}))]}), "/apps/0/ai/mcpServers"),
        (
            json!({"id": "p", "name": "N", "apps": [app("a", json!({"mcpPrompt": {"title": "t"}}))]}),
            "/apps/0/ai/mcpPrompt",
        ),
    ];
    for (manifest, pointer) in cases {
        let dir = plugin_dir(&manifest, &[UI]);
        let refused = read(dir.path()).expect_err(&manifest.to_string());
        assert_eq!(refused.pointer, pointer, "{manifest}: {}", refused.message);
    }
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join(MANIFEST_FILE), vec![b' '; 256 * 1024 + 1]).expect("write");
    assert!(read(dir.path()).expect_err("too big").message.contains("larger than 256 KiB"));
}

#[test]
fn bad_paths_drop_only_what_they_belong_to() {
    let outside = tempfile::tempdir().expect("dir");
    std::fs::write(outside.path().join("secret.md"), "secret").expect("write");
    let manifest = json!({"id": "p", "name": "N", "backend": {"entry": "../backend.mjs"}, "apps": [
        {"id": "gone", "name": "G", "entry": "missing.mjs"},
        {"id": "escapes", "name": "E", "entry": "../../etc/passwd"},
        app("dup", json!({})),
        app("dup", json!({})),
        app("linked", json!({"mcpPrompt": "link.md", "mcp": {"entry": "not-there.mjs"}, "config": "nope.yaml"})),
        app("far", json!({"mcp": {"url": "http://example.com/mcp"}})),
    ]});
    let dir = plugin_dir(&manifest, &[UI]);
    std::os::unix::fs::symlink(outside.path().join("secret.md"), dir.path().join("link.md")).expect("symlink");
    let plugin = read(dir.path()).expect("the plugin itself reads");
    let ids: Vec<&str> = plugin.apps.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["dup", "linked", "far"]);
    assert!(matches!(&plugin.backend, Some(Err(why)) if why.to_string().contains("within the plugin directory")));
    let linked = &plugin.apps[1];
    assert!(linked.prompts.is_empty(), "a prompt linking outside is not read");
    assert!(linked.server.is_some(), "a missing entry file still makes the server (it fails when started)");
    assert!(plugin.apps[2].server.is_none(), "plain http to another machine is refused");
    let problems: Vec<String> = plugin.problems.iter().map(|p| format!("{} {}", p.pointer, p.message)).collect();
    let expect = [
        "/backend/entry backend.entry `../backend.mjs` must be within the plugin directory",
        "/apps/0/entry the entry does not exist",
        "/apps/1/entry the entry `../../etc/passwd` must be within",
        "/apps/3 duplicate app id `dup`",
        "/apps/4/ai/config the AI config file is ignored",
        "/apps/4/ai/mcp/entry the entry does not exist",
        "/apps/4/ai/mcpPrompt this prompt is left out: `link.md` must be within the plugin directory (it links outside)",
        "/apps/5/ai/mcp/url must be an `https://` URL",
    ];
    for (problem, expected) in problems.iter().zip(expect) {
        assert!(problem.starts_with(expected), "{problem:?} should start with {expected:?}");
    }
    assert_eq!(problems.len(), expect.len(), "{problems:#?}");
}

#[test]
fn a_scan_finds_plugins_beside_extensions_and_warns_of_a_namespace_taken() {
    let instance = tempfile::tempdir().expect("dir");
    let tools = instance.path().join("tools");
    std::fs::create_dir_all(tools.join("ext")).expect("mkdir");
    let extension = json!({"schemaVersion": 1, "kind": "tool", "id": "ext", "name": "Ext",
        "mcp": {"transport": "stdio", "command": ["node", "x.mjs"], "namespace": "p_a"}});
    std::fs::write(tools.join("ext/butler.json"), extension.to_string()).expect("extension");
    let manifest = json!({"id": "p", "name": "P", "apps": [
        app("a", json!({"mcp": {"url": "cmd://node a.mjs"}})),
        app("b", json!({"mcp": {"url": "cmd://node b.mjs"}})),
        app("c", json!({"mcp": {"url": "cmd://node c.mjs", "enabled": false}})),
    ]});
    install_plugin(&manifest, &tools.join("plugin"));
    let config = crate::ScanConfig {
        instance_root: instance.path().to_owned(),
        roots: vec![tools],
        inspector: None,
        own_listeners: Vec::new(),
    };
    let catalog = crate::scan(&config, None);
    assert_eq!(catalog.extensions.len(), 1, "{:?}", catalog.diagnostics);
    assert_eq!(catalog.plugins.len(), 1, "{:?}", catalog.diagnostics);
    assert!(catalog.plugins[0].apps[2].server.is_none(), "`enabled: false` keeps the server out");
    let warnings: Vec<String> = catalog.diagnostics.iter().flat_map(|d| &d.errors).map(|e| e.message.clone()).collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("`a`") && warnings[0].contains("`p_a`") && warnings[0].contains("`ext`"),
        "{warnings:?}"
    );
    assert_eq!(catalog.diagnostics[0].path, "tools/plugin/plugin.json");
}

/// A plugin of `manifest` (and one UI file) installed in the folder `at`.
fn install_plugin(manifest: &Value, at: &std::path::Path) {
    let plugin = plugin_dir(manifest, &[UI]);
    std::fs::create_dir_all(at.join("ui")).expect("mkdir");
    for file in [MANIFEST_FILE, "ui/index.mjs"] {
        std::fs::copy(plugin.path().join(file), at.join(file)).expect("copy");
    }
}

/// An app whose server is the host's own MCP endpoint would make the
/// hub list itself. The scan leaves that server out and says why; another URL stays.
#[test]
fn an_app_server_at_the_hosts_own_address_is_left_out_with_a_diagnostic() {
    let instance = tempfile::tempdir().expect("dir");
    let tools = instance.path().join("tools");
    let manifest = json!({"id": "loop", "name": "Loop", "apps": [
        app("self", json!({"mcp": {"url": "http://localhost:19387/myspace-butler/api/mcp"}})),
        app("other", json!({"mcp": {"url": "http://127.0.0.1:19388/mcp"}})),
    ]});
    install_plugin(&manifest, &tools.join("loop"));
    let config = crate::ScanConfig {
        instance_root: instance.path().to_owned(),
        roots: vec![tools],
        inspector: None,
        own_listeners: vec!["127.0.0.1:19387".parse().expect("address")],
    };
    let catalog = crate::scan(&config, None);
    assert_eq!(catalog.plugins.len(), 1, "{:?}", catalog.diagnostics);
    let apps = &catalog.plugins[0].apps;
    assert!(apps[0].server.is_none(), "the hub's own endpoint is no server of the hub's");
    assert!(apps[1].server.is_some(), "another port is another server");
    let problems: Vec<&crate::validation::SchemaError> = catalog.diagnostics.iter().flat_map(|d| &d.errors).collect();
    assert!(
        problems.iter().any(|p| p.pointer == "/apps/0/ai/mcp/url" && p.message.contains("this host's own address")),
        "{problems:?}"
    );
}
