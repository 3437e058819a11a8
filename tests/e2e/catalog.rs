//! The instance and the live catalog, through `butler serve` and `GET /catalog`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{Butler, assert_error, tool, wait_until, write_manifest};

/// Generous bound for "listed within 1 s" on a shared 2-core machine; the figure itself
/// is measured by the benchmarks, not here.
pub(crate) const LIVE: Duration = Duration::from_secs(5);

fn diagnostic_for<'a>(catalog: &'a Value, path: &str) -> Option<&'a Value> {
    catalog["diagnostics"].as_array()?.iter().find(|d| d["path"] == path)
}

#[test]
fn first_run_copies_the_skeleton_and_a_second_run_changes_nothing() {
    let dir = tempfile::tempdir().expect("temp");
    let workdir = dir.path().join("nested/instance");
    let butler = Butler::start(&workdir);
    for folder in ["tools", "services", "faculties", "self", ".butler"] {
        assert!(workdir.join(folder).is_dir(), "{folder} created");
    }
    let config: Value =
        serde_json::from_slice(&std::fs::read(workdir.join("butler.json")).expect("config")).expect("json");
    assert_eq!(config["scanRoots"], json!(["tools", "services", "faculties"]));
    assert!(butler.stop().success());

    // The owner edits the config (with a field the host does not know) and removes a file.
    let edited = br#"{"scanRoots": ["tools"], "ownerNote": "mine", "stateDir": ".state"}"#;
    std::fs::write(workdir.join("butler.json"), edited).expect("edit");
    std::fs::remove_file(workdir.join("README.md")).expect("rm");
    let butler = Butler::start(&workdir);
    assert_eq!(std::fs::read(workdir.join("butler.json")).expect("config"), edited, "never overwritten");
    assert!(!workdir.join("README.md").exists(), "an existing instance is not re-filled");
    assert!(workdir.join(".state").is_dir(), "the configured stateDir is used");
    let (status, health) = butler.get_json("/health");
    assert_eq!(status, 200);
    assert_eq!(health["ok"], true);
    assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn an_existing_folder_without_config_is_filled_without_touching_its_files() {
    let dir = tempfile::tempdir().expect("temp");
    std::fs::create_dir_all(dir.path().join("tools")).expect("mkdir");
    std::fs::write(dir.path().join("README.md"), "owner's own readme").expect("write");
    let _butler = Butler::start(dir.path());
    assert_eq!(std::fs::read_to_string(dir.path().join("README.md")).expect("read"), "owner's own readme");
    assert!(dir.path().join("butler.json").is_file());
    assert!(dir.path().join("services").is_dir());
}

#[test]
fn extensions_appear_change_and_vanish_live() {
    let (butler, _dir) = Butler::start_fresh();
    let w = butler.workdir.clone();
    write_manifest(
        &w,
        "services/keeper",
        &json!({"schemaVersion":1,"kind":"service","id":"keeper","name":"Keeper","hosted":{"command":"sleep 100"}}),
    );
    let elapsed = wait_until(LIVE, "new extension listed", || butler.ids().contains(&"keeper".to_owned()));
    eprintln!("new manifest listed after {elapsed:?}");

    write_manifest(&w, "tools/weather", &tool("weather", "Weather"));
    wait_until(LIVE, "weather listed", || butler.ids().contains(&"weather".to_owned()));

    write_manifest(&w, "tools/weather", &tool("weather", "Weather Now"));
    wait_until(LIVE, "rename seen", || {
        butler.catalog()["extensions"].as_array().expect("array").iter().any(|e| e["name"] == "Weather Now")
    });

    // Break it: it leaves the catalog with every error listed; the others keep working.
    write_manifest(
        &w,
        "tools/weather",
        &json!({"schemaVersion":1,"kind":"tool","id":"Weather","name":"","reports":[]}),
    );
    wait_until(LIVE, "broken manifest rejected", || !butler.ids().contains(&"weather".to_owned()));
    // The write is not atomic: a scan may first see the file empty, then its content.
    wait_until(LIVE, "the broken manifest's diagnostic", || {
        diagnostic_for(&butler.catalog(), "tools/weather/butler.json")
            .is_some_and(|d| d["errors"].as_array().is_some_and(|e| e.iter().any(|e| e["pointer"] == "/id")))
    });
    let catalog = butler.catalog();
    let diagnostic = diagnostic_for(&catalog, "tools/weather/butler.json").expect("diagnostic for the broken manifest");
    let pointers: Vec<&str> = diagnostic["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["pointer"].as_str().expect("pointer"))
        .collect();
    assert!(pointers.contains(&"/id") && pointers.contains(&"/name") && pointers.contains(&"/reports"), "{diagnostic}");
    assert!(butler.ids().contains(&"keeper".to_owned()));

    // Delete the folder: gone, and so is its diagnostic.
    std::fs::remove_dir_all(w.join("tools/weather")).expect("rm");
    wait_until(LIVE, "diagnostic cleared", || diagnostic_for(&butler.catalog(), "tools/weather/butler.json").is_none());
    std::fs::remove_dir_all(w.join("services/keeper")).expect("rm");
    wait_until(LIVE, "keeper unregistered", || !butler.ids().contains(&"keeper".to_owned()));
}

#[test]
fn duplicate_ids_first_scanned_wins_and_an_incumbent_is_never_displaced() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    std::fs::create_dir_all(&w).expect("mkdir");
    write_manifest(&w, "tools/m-second", &tool("dup", "Second"));
    write_manifest(&w, "tools/b-first", &tool("dup", "First"));
    write_manifest(
        &w,
        "services/a-svc",
        &json!({"schemaVersion":1,"kind":"service","id":"dup","name":"Service","hosted":{"command":["true"]}}),
    );
    let butler = Butler::start(&w);
    let catalog = butler.catalog();
    let registered: Vec<&Value> =
        catalog["extensions"].as_array().expect("array").iter().filter(|e| e["id"] == "dup").collect();
    assert_eq!(registered.len(), 1);
    assert_eq!(registered[0]["name"], "First", "scan-root order, then directory name");
    for loser in ["tools/m-second/butler.json", "services/a-svc/butler.json"] {
        let d = diagnostic_for(&catalog, loser).unwrap_or_else(|| panic!("diagnostic for {loser}"));
        let message = d["errors"][0]["message"].as_str().expect("message");
        assert!(message.contains("tools/b-first/butler.json"), "names the winner: {message}");
        assert_eq!(d["errors"][0]["pointer"], "/id");
    }

    // A newcomer that sorts earlier does not displace the registered one.
    write_manifest(&w, "tools/a-newcomer", &tool("dup", "Newcomer"));
    wait_until(LIVE, "newcomer diagnosed", || {
        diagnostic_for(&butler.catalog(), "tools/a-newcomer/butler.json").is_some()
    });
    let catalog = butler.catalog();
    let winner =
        catalog["extensions"].as_array().expect("array").iter().find(|e| e["id"] == "dup").expect("dup registered");
    assert_eq!(winner["name"], "First");
}

#[test]
fn nothing_that_runs_and_no_environment_value_is_ever_public() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    std::fs::create_dir_all(&w).expect("mkdir");
    write_manifest(
        &w,
        "tools/t",
        &json!({
            "schemaVersion":1,"kind":"tool","id":"t","name":"T",
            "hosted":{"command":["secret-binary-1","--token","secret-arg-2"],"env":{"API_KEY":"secret-env-3"},"cwd":"secret-cwd-4","port":4321},
            "health":{"exec":["secret-probe-5"]},
            "mcp":{"transport":"stdio","command":["secret-mcp-6"],"env":{"K":"secret-mcp-env-7"}},
            "delegations":[{"id":"d","instructions":"secret-instructions-8","risk":"auto","result":{"type":"object"}}]
        }),
    );
    write_manifest(
        &w,
        "services/s",
        &json!({"schemaVersion":1,"kind":"service","id":"s","name":"S","hosted":{"command":"secret-shell-9 --x"}}),
    );
    std::fs::create_dir_all(w.join("faculties/f")).expect("mkdir");
    for name in ["secret-exec-10.wasm", "secret-report-11.wasm"] {
        std::fs::copy(crate::util::guests::COMMAND, w.join("faculties/f").join(name)).expect("component");
    }
    write_manifest(
        &w,
        "faculties/f",
        &json!({
            "schemaVersion":1,"kind":"faculty","id":"f","name":"F",
            "commands":[{"id":"run","exec":["secret-exec-10.wasm"],"args":[{"name":"q","pattern":"[a-z]+"}]}],
            "reports":[{"id":"r","name":"R","exec":["secret-report-11.wasm"]}]
        }),
    );
    let butler = Butler::start(&w);
    butler.wait_ready("f");
    for path in ["/catalog", "/overview", "/services", "/faculties"] {
        let body = butler.get(path).send().expect("request").text().expect("text");
        assert!(!body.contains("secret"), "{path} leaks: {body}");
    }
    let f = butler.faculty("f").expect("faculty f listed");
    assert_eq!(f["commands"][0]["id"], "run", "commands are listed without what they run");
    assert_eq!(f["reports"][0]["shape"], "status");
    let (_, overview) = butler.get_json("/overview");
    assert_eq!(overview["tools"][0]["url"], "http://127.0.0.1:4321");
    assert_eq!(overview["tools"][0]["mcpNamespace"], "t");
}

#[test]
fn bad_files_are_diagnosed_and_never_crash_the_host() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    let tools = w.join("tools");
    std::fs::create_dir_all(&tools).expect("mkdir");
    write_manifest(&w, "tools/good", &tool("good", "Good"));
    let put = |name: &str, bytes: &[u8]| {
        std::fs::create_dir_all(tools.join(name)).expect("mkdir");
        std::fs::write(tools.join(name).join("butler.json"), bytes).expect("write");
    };
    put("not-json", b"{\"schemaVersion\": 1, \"kind\": ");
    put("not-utf8", b"{\"name\": \"\xff\xfe\"}");
    put("huge", &vec![b' '; 3 * 1024 * 1024]);
    std::fs::create_dir_all(tools.join("is-dir/butler.json")).expect("mkdir");
    std::fs::create_dir_all(tools.join("fifo")).expect("mkdir");
    let fifo = std::process::Command::new("mkfifo").arg(tools.join("fifo/butler.json")).status().expect("mkfifo");
    assert!(fifo.success());
    std::os::unix::fs::symlink("loop", tools.join("loop")).expect("symlink loop");
    std::os::unix::fs::symlink("b-cycle", tools.join("a-cycle")).expect("symlink");
    std::os::unix::fs::symlink("a-cycle", tools.join("b-cycle")).expect("symlink");
    std::os::unix::fs::symlink("..", tools.join("parent")).expect("symlink to parent");
    std::os::unix::fs::symlink("/nonexistent/x", tools.join("dangling")).expect("symlink");
    std::fs::write(tools.join("stray-file.txt"), "not an extension").expect("write");

    let mut butler = Butler::start(&w);
    let catalog = butler.catalog();
    // (The built-in faculties of the new instance may register meanwhile: look at tools.)
    let tools: Vec<&str> = catalog["extensions"]
        .as_array()
        .expect("extensions")
        .iter()
        .filter(|e| e["kind"] == "tool")
        .map(|e| e["id"].as_str().expect("id"))
        .collect();
    assert_eq!(tools, vec!["good"]);
    let message = |path: &str| {
        diagnostic_for(&catalog, path).unwrap_or_else(|| panic!("diagnostic for {path}: {catalog}"))
            ["errors"][0]["message"]
            .as_str()
            .expect("message")
            .to_owned()
    };
    assert!(message("tools/not-json/butler.json").contains("not valid JSON"));
    assert!(message("tools/not-utf8/butler.json").contains("not UTF-8"));
    assert!(message("tools/huge/butler.json").contains("larger than"));
    assert!(message("tools/is-dir/butler.json").contains("is a directory"));
    assert!(message("tools/fifo/butler.json").contains("not a regular file"));
    assert!(message("tools/loop").contains("symbolic links"), "{}", message("tools/loop"));
    assert!(
        diagnostic_for(&catalog, "tools/parent/butler.json").is_some(),
        "the root config read as a manifest is rejected, not fatal"
    );

    // Still serving, still live.
    write_manifest(&w, "tools/later", &tool("later", "Later"));
    wait_until(LIVE, "later listed", || butler.ids().contains(&"later".to_owned()));
    assert!(butler.is_running());
}

#[test]
fn icons_are_served_and_cannot_escape_the_extension_folder() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    std::fs::create_dir_all(&w).expect("mkdir");
    write_manifest(
        &w,
        "tools/pic",
        &json!({"schemaVersion":1,"kind":"tool","id":"pic","name":"Pic","icon":"img/icon.png"}),
    );
    std::fs::create_dir_all(w.join("tools/pic/img")).expect("mkdir");
    std::fs::write(w.join("tools/pic/img/icon.png"), b"\x89PNG fake").expect("write");
    write_manifest(
        &w,
        "tools/vector",
        &json!({"schemaVersion":1,"kind":"tool","id":"vector","name":"Vector","icon":"i.svg"}),
    );
    std::fs::write(
        w.join("tools/vector/i.svg"),
        b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>",
    )
    .expect("write");
    std::fs::write(w.join("secret.png"), b"outside").expect("write");
    write_manifest(
        &w,
        "tools/escape",
        &json!({"schemaVersion":1,"kind":"tool","id":"escape","name":"escape","icon":"../../secret.png"}),
    );
    write_manifest(
        &w,
        "tools/linked",
        &json!({"schemaVersion":1,"kind":"tool","id":"linked","name":"Linked","icon":"l.png"}),
    );
    std::os::unix::fs::symlink(w.join("secret.png"), w.join("tools/linked/l.png")).expect("symlink");
    write_manifest(
        &w,
        "tools/emoji",
        &json!({"schemaVersion":1,"kind":"tool","id":"emoji","name":"Emoji","icon":"🌤️"}),
    );
    let butler = Butler::start(&w);
    let catalog = butler.catalog();
    let icon_of = |id: &str| {
        catalog["extensions"].as_array().expect("array").iter().find(|e| e["id"] == id).expect("registered")["icon"]
            .clone()
    };
    assert_eq!(icon_of("pic"), json!({"type":"image","url":"/myspace-butler/api/extensions/pic/icon"}));
    assert_eq!(icon_of("emoji"), json!({"type":"text","text":"🌤️"}));
    assert_eq!(icon_of("escape"), json!({"type":"letter","text":"E"}));
    assert_eq!(icon_of("linked"), json!({"type":"letter","text":"L"}));
    for path in ["tools/escape/butler.json", "tools/linked/butler.json"] {
        let d = diagnostic_for(&catalog, path).expect("warning");
        assert_eq!(d["severity"], "warning");
        assert_eq!(d["errors"][0]["pointer"], "/icon");
    }

    let response = butler.get("/extensions/pic/icon").send().expect("icon");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "image/png");
    assert_eq!(response.bytes().expect("bytes").as_ref(), b"\x89PNG fake");
    let svg = butler.get("/extensions/vector/icon").send().expect("svg");
    assert_eq!(svg.headers()["content-type"], "image/svg+xml");
    let csp = svg.headers()["content-security-policy"].to_str().expect("csp");
    assert!(csp.contains("default-src 'none'") && csp.contains("sandbox"), "{csp}");

    // The link is swapped to point outside after the scan: the read still refuses it.
    std::fs::remove_file(w.join("tools/pic/img/icon.png")).expect("rm");
    std::os::unix::fs::symlink(w.join("secret.png"), w.join("tools/pic/img/icon.png")).expect("symlink");
    let (status, body) = crate::util::json_of(butler.get("/extensions/pic/icon").send().expect("icon"));
    assert_error(status, &body, 404, "icon_unavailable");
    let (status, body) = butler.get_json("/extensions/emoji/icon");
    assert_error(status, &body, 404, "no_icon");
    let (status, body) = butler.get_json("/extensions/nobody/icon");
    assert_error(status, &body, 404, "unknown_extension");
}

#[test]
fn boards_list_each_kind_with_its_state() {
    let dir = tempfile::tempdir().expect("temp");
    let w = dir.path().join("instance");
    std::fs::create_dir_all(&w).expect("mkdir");
    write_manifest(
        &w,
        "tools/a",
        &json!({"schemaVersion":1,"kind":"tool","id":"a","name":"A","frequency":"low","hosted":{"command":["true"],"group":"daily","autoStart":true}}),
    );
    write_manifest(
        &w,
        "services/b",
        &json!({"schemaVersion":1,"kind":"service","id":"b","name":"B","hosted":{"command":["true"]}}),
    );
    write_manifest(&w, "faculties/c", &json!({"schemaVersion":1,"kind":"faculty","id":"c","name":"C"}));
    let butler = Butler::start(&w);
    let (_, overview) = butler.get_json("/overview");
    assert_eq!(overview["tools"].as_array().expect("tools").len(), 1);
    let tool = &overview["tools"][0];
    assert_eq!(tool["id"], "a");
    // `true` starts with the host and exits 0: not a failure, so it is not restarted.
    wait_until(Duration::from_secs(30), "tool a to run and exit", || {
        let (_, overview) = butler.get_json("/overview");
        overview["tools"][0]["state"] == "stopped" && overview["tools"][0]["lastExit"]["code"] == 0
    });
    assert_eq!(
        (tool["group"].as_str(), tool["frequency"].as_str(), tool["autoStart"].as_bool()),
        (Some("daily"), Some("low"), Some(true))
    );
    let (_, services) = butler.get_json("/services");
    assert_eq!(services["services"][0]["id"], "b");
    let (_, faculties) = butler.get_json("/faculties");
    assert_eq!(faculties["faculties"][0]["id"], "c");
    assert_eq!(faculties["faculties"][0]["state"], "ready");
}

#[test]
fn layout_round_trips_and_rejects_bad_input_without_losing_the_saved_one() {
    let (butler, _dir) = Butler::start_fresh();
    let (status, layout) = butler.get_json("/layout");
    assert_eq!((status, layout), (200, json!({"version": 1})));
    let saved = json!({"version":1,"order":{"tools":["b","a"]},"display":{"tools":{"mode":"resident","stored":["c"]}},"legacyField":true});
    let put = |body: String| {
        crate::util::json_of(
            butler
                .request(reqwest::Method::PUT, &butler.api("/layout"))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .expect("put"),
        )
    };
    let (status, body) = put(saved.to_string());
    assert_eq!((status, &body), (200, &saved));
    let (status, body) = put(json!({"version":1,"display":{"tools":{"mode":"some"}}}).to_string());
    assert_error(status, &body, 400, "invalid_layout");
    assert!(body["error"]["message"].as_str().expect("message").contains("/display/tools/mode"), "{body}");
    let (status, body) = put("{\"version\": 1,".to_owned());
    assert_error(status, &body, 400, "invalid_json");
    // A key written twice: which one was meant? Refused, not guessed.
    let (status, body) = put(r#"{"version": 1, "order": {"tools": ["a"]}, "order": {"tools": ["b"]}}"#.to_owned());
    assert_error(status, &body, 400, "invalid_json");
    let oversized = format!("{{\"version\":1,\"pad\":\"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let (status, body) = butler.raw("PUT", "/layout", &[("content-type", "application/json")], oversized.as_bytes());
    assert_error(status, &body, 413, "payload_too_large");
    let (status, body) = crate::util::json_of(
        butler.request(reqwest::Method::PUT, &butler.api("/layout")).body(saved.to_string()).send().expect("put"),
    );
    assert_error(status, &body, 415, "unsupported_media_type");
    assert_eq!(butler.get_json("/layout"), (200, saved), "failed writes never touched the saved layout");
}

/// Every tool's actions in one list, in the order the console shows the tools board: as the
/// owner ordered it, then in scan order.
#[test]
fn quick_actions_list_every_action_in_the_consoles_order() {
    let (butler, _dir) = Butler::start_fresh();
    let with_actions = |id: &str, actions: Value| {
        let mut manifest = tool(id, &format!("Name of {id}"));
        manifest["actions"] = actions;
        manifest
    };
    let root = &butler.workdir;
    write_manifest(
        root,
        "tools/alpha",
        &with_actions("alpha", json!([{"label": "Open", "url": "http://127.0.0.1:9/a"}])),
    );
    write_manifest(
        root,
        "tools/beta",
        &with_actions(
            "beta",
            json!([
        {"label": "Run", "url": "http://127.0.0.1:9/run", "mode": "post"},
        {"label": "Docs", "title": "Beta docs", "url": "https://example.org/beta", "mode": "external"}]),
        ),
    );
    write_manifest(root, "tools/gamma", &tool("gamma", "Gamma without actions"));
    wait_until(Duration::from_secs(30), "the three registered", || {
        ["alpha", "beta", "gamma"].iter().all(|id| butler.ids().contains(&(*id).to_owned()))
    });
    let listed = |butler: &Butler| -> Vec<(String, String, String)> {
        let (status, body) = butler.get_json("/quick-actions");
        assert_eq!(status, 200, "{body}");
        body["actions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                (
                    a["extension"].as_str().unwrap_or_default().to_owned(),
                    a["label"].as_str().unwrap_or_default().to_owned(),
                    a["mode"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let row = |e: &str, l: &str, m: &str| (e.to_owned(), l.to_owned(), m.to_owned());
    assert_eq!(
        listed(&butler),
        [row("alpha", "Open", "panel"), row("beta", "Run", "post"), row("beta", "Docs", "external")]
    );
    let (_, body) = butler.get_json("/quick-actions");
    assert_eq!((&body["actions"][2]["title"], &body["actions"][0]["title"]), (&json!("Beta docs"), &json!("Open")));
    assert_eq!(body["actions"][0]["extensionName"], "Name of alpha");

    // The owner's order on the tools board: beta first.
    let layout = json!({"version": 1, "order": {"tools": ["beta", "gamma", "alpha"]}});
    let saved = butler
        .request(reqwest::Method::PUT, &butler.api("/layout"))
        .header("content-type", "application/json")
        .body(layout.to_string())
        .send()
        .expect("PUT /layout");
    assert_eq!(saved.status(), 200);
    assert_eq!(
        listed(&butler),
        [row("beta", "Run", "post"), row("beta", "Docs", "external"), row("alpha", "Open", "panel")]
    );
}
