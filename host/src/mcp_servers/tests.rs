use std::os::unix::fs::PermissionsExt;

use super::*;

fn instance() -> (tempfile::TempDir, Instance) {
    let dir = tempfile::tempdir().expect("temp");
    std::fs::write(dir.path().join("butler.json"), "{}").expect("root config");
    let instance = Instance::open(dir.path()).expect("instance");
    (dir, instance)
}

fn remote(name: &str, url: &str, headers: &[(&str, &str)]) -> NewServer {
    let headers = headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    NewServer { name: name.to_owned(), reach: Reach::Http { url: url.to_owned(), headers }, timeout_sec: None }
}

fn scanned(instance: &Instance) -> butler_catalog::Catalog {
    butler_catalog::scan::scan(&instance.scan_config(), None)
}

#[test]
fn an_added_remote_server_is_an_extension_the_scan_registers_and_is_private_with_headers() {
    let (_dir, instance) = instance();
    let server = remote("linear", "https://mcp.linear.app/mcp", &[("Authorization", "Bearer ${LINEAR_TOKEN}")]);
    let file = add(&instance, &server).expect("added");
    assert_eq!(file, instance.root.join("tools/linear/butler.json"));
    let mode = std::fs::metadata(&file).expect("written").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "a manifest with headers may hold a token");

    let catalog = scanned(&instance);
    assert!(catalog.diagnostics.is_empty(), "{:?}", catalog.diagnostics);
    let ext = catalog.extensions.iter().find(|e| e.id() == "linear").expect("registered");
    let mcp = ext.manifest.mcp.as_ref().expect("an mcp block");
    assert_eq!(mcp.remote_url(), Some("https://mcp.linear.app/mcp"));
    assert_eq!(mcp.headers.get("Authorization").map(String::as_str), Some("Bearer ${LINEAR_TOKEN}"));
}

#[test]
fn an_added_command_runs_as_a_stdio_server_with_its_environment() {
    let (_dir, instance) = instance();
    let env = [("API_KEY".to_owned(), "k".to_owned())].into_iter().collect();
    let server = NewServer {
        name: "files-2".to_owned(),
        reach: Reach::Stdio { command: vec!["npx".into(), "-y".into(), "server-filesystem".into()], env },
        timeout_sec: Some(30),
    };
    add(&instance, &server).expect("added");
    let catalog = scanned(&instance);
    let mcp = catalog.extensions.iter().find(|e| e.id() == "files-2").and_then(|e| e.manifest.mcp.clone());
    let mcp = mcp.expect("registered with an mcp block");
    assert_eq!(mcp.command, ["npx", "-y", "server-filesystem"]);
    assert_eq!(mcp.env.get("API_KEY").map(String::as_str), Some("k"));
    assert_eq!((mcp.timeout_sec, mcp.effective_namespace("files-2").as_str()), (30, "files_2"));
}

#[test]
fn what_the_scan_would_reject_is_refused_before_anything_is_written() {
    let (_dir, instance) = instance();
    let cases = [
        (remote("plain", "http://example.com/mcp", &[]), "/mcp/url"),
        (remote("badheader", "https://example.com/mcp", &[("X Bad", "v")]), "/mcp/headers/X Bad"),
        (remote("crlf", "https://example.com/mcp", &[("X-A", "v\r\nInjected: 1")]), "/mcp/headers/X-A"),
        (remote("butler", "https://example.com/mcp", &[]), "/id"),
    ];
    for (server, pointer) in cases {
        match add(&instance, &server) {
            Err(ServerError::Invalid(problems)) => {
                assert!(problems.iter().any(|p| p.starts_with(pointer)), "{pointer} in {problems:?}");
            }
            other => panic!("{} was not refused: {other:?}", server.name),
        }
        assert!(!folder(&instance, &server.name).exists(), "nothing written for {}", server.name);
    }
    for name in ["../escape", "Upper", "", "a-name-far-too-long-for-a-namespace"] {
        let refused = add(&instance, &remote(name, "https://example.com/mcp", &[]));
        assert!(matches!(refused, Err(ServerError::Invalid(_))), "{name}: {refused:?}");
    }
    assert!(!instance.root.join("escape").exists());
}

#[test]
fn a_name_in_use_is_refused_and_the_existing_folder_is_kept() {
    let (_dir, instance) = instance();
    add(&instance, &remote("notion", "https://mcp.notion.com/mcp", &[])).expect("first");
    let again = add(&instance, &remote("notion", "https://other.example/mcp", &[]));
    assert!(matches!(again, Err(ServerError::Exists { .. })), "{again:?}");
    let kept = std::fs::read_to_string(instance.root.join("tools/notion/butler.json")).expect("kept");
    assert!(kept.contains("mcp.notion.com"), "{kept}");
}

#[test]
fn remove_takes_away_what_add_wrote_and_leaves_anything_else_to_the_owner() {
    let (_dir, instance) = instance();
    add(&instance, &remote("sentry", "https://mcp.sentry.dev/mcp", &[])).expect("added");
    assert_eq!(remove(&instance, "sentry").expect("removed"), folder(&instance, "sentry"));
    assert!(!folder(&instance, "sentry").exists());
    assert!(matches!(remove(&instance, "sentry"), Err(ServerError::NotFound { .. })));
    assert!(matches!(remove(&instance, "../tools"), Err(ServerError::NotFound { .. })));

    // A folder with more than the manifest, or a manifest that is more than a server: kept.
    add(&instance, &remote("kept", "https://example.com/mcp", &[])).expect("added");
    std::fs::write(folder(&instance, "kept").join("notes.md"), "mine").expect("note");
    assert!(matches!(remove(&instance, "kept"), Err(ServerError::NotOurs { .. })));
    assert!(folder(&instance, "kept").join("notes.md").exists());
    let hosted = folder(&instance, "hosted");
    std::fs::create_dir_all(&hosted).expect("mkdir");
    let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": "hosted", "name": "h",
        "hosted": {"command": ["x"]}, "mcp": {"transport": "stdio", "command": ["x"]}});
    std::fs::write(hosted.join("butler.json"), manifest.to_string()).expect("manifest");
    assert!(matches!(remove(&instance, "hosted"), Err(ServerError::NotOurs { .. })));
    assert!(hosted.join("butler.json").exists());

    // A link in place of the folder: what it points at is left alone.
    let elsewhere = tempfile::tempdir().expect("elsewhere");
    add(&instance, &remote("target", "https://example.com/mcp", &[])).expect("added");
    std::fs::rename(folder(&instance, "target"), elsewhere.path().join("target")).expect("move");
    std::os::unix::fs::symlink(elsewhere.path().join("target"), folder(&instance, "linked")).expect("link");
    assert!(matches!(remove(&instance, "linked"), Err(ServerError::NotOurs { .. })));
    assert!(elsewhere.path().join("target/butler.json").exists(), "the link's target is kept");
}

#[test]
fn pairs_split_at_the_first_equals_or_colon() {
    assert_eq!(pair("Authorization: Bearer a=b").ok(), Some(("Authorization".into(), "Bearer a=b".into())));
    assert_eq!(pair("PATH=/a:/b").ok(), Some(("PATH".into(), "/a:/b".into())));
    assert!(pair("novalue").is_err());
    assert!(pair("=v").is_err());
}

#[test]
fn an_import_adds_what_maps_skips_the_rest_and_adds_nothing_twice() {
    let (dir, instance) = instance();
    let config = dir.path().join("mcp.json");
    let servers = json!({"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
        "Time": {"command": "uvx", "args": ["other"]},
        "remote": {"url": "https://mcp.example.com/mcp"},
        "plain": {"url": "http://example.com/mcp"},
        "ws": {"type": "websocket", "url": "wss://x"},
    }});
    std::fs::write(&config, servers.to_string()).expect("config");
    let (_, entries) = client_config::read(&config).expect("read");

    let planned = import(&instance, &entries, true);
    assert!(matches!(&planned[0], Imported::Added(name, _) if name == "time"), "{planned:?}");
    assert!(matches!(&planned[1], Imported::Skipped(why) if why.contains("earlier server")), "{planned:?}");
    assert!(matches!(&planned[3], Imported::Skipped(why) if why.contains("/mcp/url")), "{planned:?}");
    assert!(!folder(&instance, "time").exists(), "a dry run writes nothing");

    let done = import(&instance, &entries, false);
    let added: Vec<&str> =
        done.iter().filter_map(|i| if let Imported::Added(name, _) = i { Some(name.as_str()) } else { None }).collect();
    assert_eq!(added, ["time", "remote"]);
    assert!(scanned(&instance).extensions.iter().any(|e| e.id() == "remote"));
    let again = import(&instance, &entries, false);
    assert!(again.iter().all(|i| matches!(i, Imported::Skipped(_))), "nothing twice: {again:?}");
    assert!(matches!(&again[0], Imported::Skipped(why) if why.contains("already there")), "{again:?}");
    assert_eq!(std::fs::read_to_string(&config).expect("kept"), servers.to_string(), "the client's file is untouched");
}

#[test]
fn variables_are_given_and_taken_back_per_server_keeping_the_file_private_and_valid() {
    let (dir, instance) = instance();
    let config = dir.path().join("butler.json");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let given = allow_variables(&instance, "docs", &["DOCS_TOKEN".to_owned()]).expect("given");
    assert_eq!(given, ["DOCS_TOKEN"]);
    assert!(allow_variables(&instance, "docs", &["DOCS_TOKEN".to_owned()]).expect("again").is_empty(), "once");
    let read = || -> Value { serde_json::from_slice(&std::fs::read(&config).expect("read")).expect("JSON") };
    assert_eq!(read()["mcp"]["allowEnv"], json!({"docs": ["DOCS_TOKEN"]}));
    assert_eq!(std::fs::metadata(&config).expect("there").permissions().mode() & 0o777, 0o600, "kept private");

    // An edit the host would refuse (more variables than a server may be given) is not
    // written: the file stays as it was.
    let many: Vec<String> = (0..70).map(|n| format!("V{n}")).collect();
    let before = std::fs::read(&config).expect("read");
    let refused = allow_variables(&instance, "docs", &many).expect_err("over the schema's limit");
    assert!(refused.to_string().contains("allowEnv"), "{refused}");
    assert_eq!(std::fs::read(&config).expect("read"), before);

    assert_eq!(disallow_variables(&instance, "docs").expect("taken back"), ["DOCS_TOKEN"]);
    assert_eq!(read()["mcp"]["allowEnv"], json!({}));
    assert!(disallow_variables(&instance, "docs").expect("nothing left").is_empty());
}
