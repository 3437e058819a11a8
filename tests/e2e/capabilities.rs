//! Suzu Lives capability packages imported into a running host: `butler import` and
//! `butler capability`, `POST /imports` and `POST /capabilities/{id}/{action}` — checked,
//! recorded and copied but not enabled, enabled only by the owner, and nothing of a
//! package run or its secrets shown.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::{Butler, assert_error, butler_command};

/// A package folder: a directory skill, and a stdio MCP server whose `env` holds a literal
/// token and whose script would leave a mark if anything ran it.
fn package(dir: &Path) -> PathBuf {
    let package = dir.join("weather");
    std::fs::create_dir_all(package.join("skill/scripts")).expect("mkdir");
    let manifest = json!({"schemaVersion": 1, "id": "example.weather", "name": "Weather", "version": "1.0.0",
        "adapters": {"skill": {"directory": "skill"},
                     "mcp": {"transport": "stdio", "command": "sh", "args": ["./server.sh"],
                             "env": {"TOKEN": "literal-secret-4711"}}}});
    std::fs::write(package.join("suzu-capability.json"), manifest.to_string()).expect("manifest");
    std::fs::write(package.join("skill/SKILL.md"), "---\nname: weather\n---\nSay the weather.\n").expect("skill");
    std::fs::write(package.join("skill/scripts/run.sh"), "touch ran\n").expect("script");
    std::fs::write(package.join("server.sh"), "touch ran\n").expect("server");
    package
}

/// Runs the CLI against `butler`'s instance: exit code and stdout.
pub(crate) fn cli(butler: &Butler, args: &[&str]) -> (i32, String) {
    let home = tempfile::tempdir().expect("home");
    let output = butler_command(home.path()).env("BUTLER_WORKDIR", &butler.workdir).args(args).output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), format!("{}{stderr}", String::from_utf8_lossy(&output.stdout)))
}

#[test]
fn an_imported_package_is_recorded_not_enabled_until_the_owner_enables_it() {
    let (butler, dir) = Butler::start_fresh();
    let package = package(dir.path());
    let (code, out) = cli(&butler, &["import", package.to_str().expect("utf8")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("imported example.weather 1.0.0 — Weather (not enabled)"), "{out}");
    assert!(out.contains("butler capability enable example.weather"), "{out}");

    let (status, listed) = butler.get_json("/capabilities");
    assert_eq!(status, 200);
    let record = &listed["capabilities"][0];
    assert_eq!((record["id"].as_str(), record["enabled"].as_bool()), (Some("example.weather"), Some(false)));
    assert_eq!(record["adapters"], json!(["skill", "mcp (stdio)"]));
    assert_eq!(
        (&record["provider"], &record["prompt"]),
        (&json!("suzu:example.weather"), &json!("example_weather__skill"))
    );
    assert!(!listed.to_string().contains("literal-secret-4711"), "the manifest's env values are not shown: {listed}");
    let copy = butler.workdir.join(".butler/capabilities/example.weather/skill/scripts/run.sh");
    assert_eq!(std::fs::read(&copy).expect("the managed copy"), b"touch ran\n");

    // Anyone but the owner: refused, and nothing changes.
    let (status, body) = butler.post_json("/capabilities/example.weather/enable", &json!({}), &[]);
    assert_error(status, &body, 403, "owner_required");
    let (status, body) = butler.post_json("/imports", &json!({"path": package, "update": true}), &[]);
    assert_error(status, &body, 403, "owner_required");
    assert_eq!(butler.get_json("/capabilities").1["capabilities"][0]["enabled"], false);

    let (code, out) = cli(&butler, &["capability", "enable", "example.weather"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(butler.get_json("/capabilities").1["capabilities"][0]["enabled"], true);
    let (code, out) = cli(&butler, &["capability", "remove", "example.weather"]);
    assert_eq!(code, 1, "an enabled package is not removed: {out}");
    assert!(out.contains("capability_enabled"), "{out}");
    assert_eq!(cli(&butler, &["capability", "disable", "example.weather"]).0, 0);
    assert_eq!(cli(&butler, &["capability", "remove", "example.weather"]).0, 0);
    let (code, out) = cli(&butler, &["capability", "list"]);
    assert_eq!(code, 0);
    assert!(out.contains("no capability package is imported"), "{out}");
    assert!(!package.join("ran").exists() && !butler.workdir.join("ran").exists(), "nothing in a package runs");
}

#[test]
fn an_import_reports_every_problem_and_what_an_update_would_change() {
    let (butler, dir) = Butler::start_fresh();
    let package = package(dir.path());
    let path = package.to_str().expect("utf8");
    assert_eq!(cli(&butler, &["import", path]).0, 0);
    std::fs::write(package.join("skill/SKILL.md"), "---\nname: weather\n---\nSay it twice.\n").expect("edit");
    let (code, out) = cli(&butler, &["import", path]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("differs: skill file changed: SKILL.md"), "{out}");
    assert!(out.contains("butler import --update PATH"), "{out}");
    let copy = butler.workdir.join(".butler/capabilities/example.weather/skill/SKILL.md");
    assert!(std::fs::read_to_string(&copy).expect("copy").contains("Say the weather."), "nothing leaked in");
    let (code, out) = cli(&butler, &["import", "--update", path]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("updated example.weather"), "{out}");
    assert!(std::fs::read_to_string(&copy).expect("copy").contains("Say it twice."));

    std::os::unix::fs::symlink("/etc/passwd", package.join("skill/passwd")).expect("symlink");
    let (code, out) = cli(&butler, &["import", "--update", "--json", path]);
    assert_eq!(code, 1, "{out}");
    let answer: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(answer["error"]["code"], "package_invalid");
    assert_eq!(answer["error"]["details"]["problems"][0]["file"], "skill/passwd");
    assert_eq!(answer["error"]["details"]["problems"][0]["rule"], "symlink");
    assert!(!butler.workdir.join(".butler/capabilities/example.weather/skill/passwd").exists());

    let token = butler.owner_token();
    let owner = [("authorization", format!("Bearer {token}"))];
    let owner: Vec<(&str, &str)> = owner.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, body) = butler.post_json("/imports", &json!({"path": "weather"}), &owner);
    assert_error(status, &body, 400, "invalid_path");
    let (status, body) = butler.post_json("/imports", &json!({"path": path, "force": true}), &owner);
    assert_eq!(status, 400, "an unknown field is refused: {body}");
    let (status, body) = butler.post_json("/capabilities/example.weather/launch", &json!({}), &owner);
    assert_error(status, &body, 404, "unknown_action");
    let (status, body) = butler.post_json("/capabilities/..%2F..%2Fetc/enable", &json!({}), &owner);
    assert_error(status, &body, 404, "unknown_capability");
}

#[test]
fn an_enabled_packages_stdio_server_joins_the_hub_and_leaves_it_when_disabled() {
    use crate::mcp_stateless::{ask, request};
    let (butler, dir) = Butler::start_fresh();
    let package = dir.path().join("echoes");
    std::fs::create_dir_all(&package).expect("mkdir");
    let providers = crate::mcp::root().join("tests/providers");
    std::fs::copy(providers.join("fake_mcp.py"), package.join("server.py")).expect("server");
    std::fs::copy(providers.join("stdio_provider.py"), package.join("stdio_provider.py")).expect("its module");
    let manifest = json!({"schemaVersion": 1, "id": "Example.Echoes", "name": "Echoes", "version": "1.0.0",
        "adapters": {"mcp": {"transport": "stdio", "command": "python3", "args": ["./server.py"],
                             "env": {"FAKE_MCP_LOG": "${ECHOES_LOG_DIR:-.}/calls.log"}}}});
    std::fs::write(package.join("suzu-capability.json"), manifest.to_string()).expect("manifest");
    assert_eq!(cli(&butler, &["import", package.to_str().expect("utf8")]).0, 0);

    let tools = |butler: &Butler| -> Vec<String> {
        let listed = ask(butler, "/mcp", &request(1, "tools/list", json!({})));
        let tools = listed["result"]["tools"].as_array().cloned().unwrap_or_default();
        tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
    };
    assert!(!tools(&butler).iter().any(|t| t.starts_with("example_echoes__")), "imported is not enabled");

    assert_eq!(cli(&butler, &["capability", "enable", "Example.Echoes"]).0, 0);
    // Quarantine (on in a fresh instance) holds its tools as it holds any provider's.
    assert!(!tools(&butler).iter().any(|t| t.starts_with("example_echoes__")), "held for review");
    let (code, out) = cli(&butler, &["mcp", "held"]);
    assert!(code == 0 && out.contains("suzu:Example.Echoes") && out.contains("echo"), "{out}");
    let (code, out) = cli(&butler, &["mcp", "approve", "suzu:Example.Echoes"]);
    assert_eq!(code, 0, "{out}");
    assert!(tools(&butler).contains(&"example_echoes__echo".to_owned()), "{:?}", tools(&butler));
    let call = request(2, "tools/call", json!({"name": "example_echoes__echo", "arguments": {"text": "hi"}}));
    let answer = ask(&butler, "/mcp", &call);
    assert_eq!(answer["result"]["content"][0]["text"], "hi", "{answer}");
    // `${ECHOES_LOG_DIR:-.}` took its default, and `.` is the package's folder.
    let log = std::fs::read_to_string(package.join("calls.log")).expect("its log, where its env said");
    assert!(log.contains("started"), "{log}");
    let (_, status) = butler.get_json("/mcp/status");
    let provider = status["providers"].as_array().into_iter().flatten().find(|p| p["id"] == "suzu:Example.Echoes");
    assert_eq!(provider.map(|p| p["namespace"].clone()), Some(json!("example_echoes")), "{status}");

    assert_eq!(cli(&butler, &["capability", "disable", "Example.Echoes"]).0, 0);
    assert!(!tools(&butler).iter().any(|t| t.starts_with("example_echoes__")), "disabled: gone from the hub");
    drop(butler);

    // Enabled packages' servers join with the first snapshot after a restart.
    let workdir = dir.path().join("instance");
    let butler = Butler::start(&workdir);
    assert_eq!(cli(&butler, &["capability", "enable", "Example.Echoes"]).0, 0);
    drop(butler);
    let butler = Butler::start(&workdir);
    assert!(tools(&butler).contains(&"example_echoes__echo".to_owned()), "after a restart");
}

#[test]
fn an_enabled_skill_is_a_prompt_and_read_only_resources_where_its_package_is_offered() {
    use crate::mcp_stateless::{ask, request};
    let (butler, dir) = Butler::fresh_with_config(|config| {
        config["mcp"]["profiles"] = json!({
            "weather": {"providers": ["suzu:example.weather"]},
            "other": {"providers": ["nobody"]},
        });
    });
    let package = package(dir.path());
    std::fs::write(
        package.join("skill/SKILL.md"),
        "---\nname: weather\ndescription: Says the weather\n---\nSay the weather.\n",
    )
    .expect("skill");
    std::fs::write(package.join("skill/assets.bin"), [0xffu8, 0x00, 0x41]).expect("binary");
    assert_eq!(cli(&butler, &["import", package.to_str().expect("utf8")]).0, 0);
    let prompts = |path: &str| ask(&butler, path, &request(1, "prompts/list", json!({})))["result"]["prompts"].clone();
    assert!(!prompts("/mcp").to_string().contains("example_weather__skill"), "imported is not enabled");
    assert_eq!(cli(&butler, &["capability", "enable", "example.weather"]).0, 0);

    let listed = prompts("/mcp");
    let prompt = listed.as_array().into_iter().flatten().find(|p| p["name"] == "example_weather__skill");
    let prompt = prompt.unwrap_or_else(|| panic!("the skill's prompt: {listed}"));
    assert_eq!((&prompt["title"], &prompt["description"]), (&json!("weather"), &json!("Says the weather")));
    let got = ask(&butler, "/mcp", &request(2, "prompts/get", json!({"name": "example_weather__skill"})));
    assert_eq!(got["result"]["messages"][0]["content"]["text"], "Say the weather.\n", "{got}");

    // Its files, under a URI that ends in the skill's name (the Skills extension's rule).
    let resources = ask(&butler, "/mcp", &request(3, "resources/list", json!({})))["result"]["resources"].clone();
    let uris: Vec<&str> = resources.as_array().into_iter().flatten().filter_map(|r| r["uri"].as_str()).collect();
    for uri in [
        "skill://example.weather/weather/SKILL.md",
        "skill://example.weather/weather/assets.bin",
        "skill://example.weather/weather/scripts/run.sh",
    ] {
        assert!(uris.contains(&uri), "{uri} in {resources}");
    }
    let manifest =
        resources.as_array().into_iter().flatten().find(|r| r["uri"] == "skill://example.weather/weather/SKILL.md");
    assert_eq!(
        manifest.map(|r| (r["name"].clone(), r["description"].clone())),
        Some((json!("weather"), json!("Says the weather")))
    );
    let read = |uri: &str| ask(&butler, "/mcp", &request(4, "resources/read", json!({"uri": uri})));
    // And under the URI it had before, still.
    for uri in ["skill://example.weather/weather/SKILL.md", "skill://example.weather/SKILL.md"] {
        let text = read(uri);
        assert_eq!(text["result"]["contents"][0]["mimeType"], "text/markdown");
        assert!(
            text["result"]["contents"][0]["text"].as_str().is_some_and(|t| t.contains("Say the weather.")),
            "{text}"
        );
    }
    let binary = read("skill://example.weather/weather/assets.bin");
    assert_eq!(binary["result"]["contents"][0]["blob"], "/wBB", "{binary}");
    let outside = read("skill://example.weather/../capability.json");
    assert!(outside["error"].is_object(), "only the skill's own files: {outside}");

    // The Skills extension: the entry, with the front matter and each file's digest and size.
    let listed = ask(&butler, "/mcp", &request(5, "skills/list", json!({})))["result"].clone();
    let entry = listed["skills"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["uri"] == "skill://example.weather/weather/SKILL.md");
    let entry = entry.unwrap_or_else(|| panic!("the package's skill: {listed}")).clone();
    assert_eq!(entry["frontmatter"], json!({"name": "weather", "description": "Says the weather"}));
    let files = entry["resources"].as_array().cloned().unwrap_or_default();
    let binary = files.iter().find(|f| f["uri"] == "skill://example.weather/weather/assets.bin").expect("listed");
    assert_eq!(binary["size"], 3);
    let digest = <sha2::Sha256 as sha2::Digest>::digest([0xffu8, 0x00, 0x41]);
    assert_eq!(binary["digest"], format!("sha256:{}", data_encoding::HEXLOWER.encode(&digest)));
    let got =
        ask(&butler, "/mcp", &request(6, "skills/get", json!({"uri": "skill://example.weather/weather/SKILL.md"})));
    assert_eq!(got["result"]["skill"], entry, "{got}");
    let folder = ask(
        &butler,
        "/mcp",
        &request(7, "resources/directory/read", json!({"uri": "skill://example.weather/weather"})),
    );
    let children: Vec<(&str, &str)> = folder["result"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| (r["name"].as_str().unwrap_or_default(), r["mimeType"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(
        children,
        [("SKILL.md", "text/markdown"), ("assets.bin", "application/octet-stream"), ("scripts", "inode/directory")]
    );

    // A copy changed behind the host's back is not served as the skill.
    let copy = butler.workdir.join(".butler/capabilities/example.weather/skill/assets.bin");
    std::fs::write(&copy, [0xffu8, 0x00, 0x42]).expect("tamper with the copy");
    let refused = read("skill://example.weather/weather/assets.bin");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("changed since it was imported"), "{refused}");

    // A profile offers the skill only when it offers the package.
    assert!(prompts("/mcp/p/weather").to_string().contains("example_weather__skill"));
    assert!(!prompts("/mcp/p/other").to_string().contains("example_weather__skill"));
    let skills = |path: &str| ask(&butler, path, &request(8, "skills/list", json!({})))["result"]["skills"].clone();
    assert_eq!(skills("/mcp/p/weather").as_array().map(Vec::len), Some(1));
    assert_eq!(skills("/mcp/p/other"), json!([]));
}

/// A remote MCP server a test runs (`tests/providers/remote_server.py` on the Python SDK),
/// stopped when dropped.
pub(crate) struct RemoteServer {
    child: std::process::Child,
    pub(crate) url: String,
}

impl RemoteServer {
    pub(crate) fn start(args: &[&str]) -> Self {
        use std::io::BufRead;
        let python = crate::mcp::tools().join("mcp-venv/bin/python");
        let mut child = std::process::Command::new(python)
            .arg(crate::mcp::root().join("tests/providers/remote_server.py"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the remote server");
        let stdout = child.stdout.take().expect("its stdout");
        let mut url = String::new();
        std::io::BufReader::new(stdout).read_line(&mut url).expect("its URL");
        assert!(url.starts_with("http://127.0.0.1:"), "the server printed its URL: {url:?}");
        Self { child, url: url.trim().to_owned() }
    }
}

impl Drop for RemoteServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Imports and enables a package whose MCP server is the remote one at `url`, and approves
/// its tools; the import's output.
fn enable_remote(butler: &Butler, dir: &Path, id: &str, url: &str, headers: &Value) -> String {
    let package = dir.join(id);
    std::fs::create_dir_all(&package).expect("mkdir");
    let manifest = json!({"schemaVersion": 1, "id": id, "name": id, "version": "1.0.0",
        "adapters": {"mcp": {"transport": "http", "url": url, "headers": headers}}});
    std::fs::write(package.join("suzu-capability.json"), manifest.to_string()).expect("manifest");
    let (code, out) = cli(butler, &["import", package.to_str().expect("utf8")]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(cli(butler, &["capability", "enable", id]).0, 0);
    // Listing the held tools starts the provider; approving lets its tools through.
    let _ = cli(butler, &["mcp", "held"]);
    let (_, approved) = cli(butler, &["mcp", "approve", &format!("suzu:{id}")]);
    out + &approved
}

/// The text of a tool call's first content item (or the whole answer, to show).
pub(crate) fn call_text(butler: &Butler, tool: &str, arguments: Value) -> Result<String, Value> {
    use crate::mcp_stateless::{ask, request};
    let answer = ask(butler, "/mcp", &request(7, "tools/call", json!({"name": tool, "arguments": arguments})));
    match answer["result"]["content"][0]["text"].as_str() {
        Some(text) if answer["result"]["isError"] != json!(true) => Ok(text.to_owned()),
        _ => Err(answer),
    }
}

#[test]
fn an_enabled_packages_http_server_joins_the_hub_over_either_transport_and_its_token_is_never_shown() {
    let token = "tok-remote-5d81c";
    let streamable = RemoteServer::start(&["--token", token]);
    let older = RemoteServer::start(&["--sse"]);
    // The owner gives the package's server the variable its header names (mcp.allowEnv).
    let allow = |config: &mut Value| config["mcp"]["allowEnv"] = json!({"suzu:remote.streamable": ["REMOTE_TOKEN"]});
    let (butler, dir) = Butler::fresh_with_config_and_env(allow, &[("REMOTE_TOKEN", token)]);
    let workdir = butler.workdir.clone();
    let bearer = json!({"Authorization": "Bearer ${REMOTE_TOKEN}"});
    enable_remote(&butler, dir.path(), "remote.streamable", &streamable.url, &bearer);
    enable_remote(&butler, dir.path(), "remote.sse", &older.url, &json!({}));
    let wrong = json!({"Authorization": "Bearer ${UNSET_REMOTE_TOKEN:-not-the-token}"});
    enable_remote(&butler, dir.path(), "remote.wrong", &streamable.url, &wrong);

    // Streamable HTTP, with the header expanded from the host's environment.
    let seen = call_text(&butler, "remote_streamable__whoami", json!({})).expect("whoami over Streamable HTTP");
    let seen: Value = serde_json::from_str(&seen).expect("JSON");
    assert_eq!((&seen["auth"], &seen["transport"]), (&json!("Bearer"), &json!("streamable-http")), "{seen}");
    assert_eq!(call_text(&butler, "remote_streamable__echo", json!({"text": "over http"})), Ok("over http".to_owned()));
    // The older HTTP+SSE transport, found when a POST to its stream's URL is refused.
    assert_eq!(call_text(&butler, "remote_sse__echo", json!({"text": "over sse"})), Ok("over sse".to_owned()));
    let seen = call_text(&butler, "remote_sse__whoami", json!({})).expect("whoami over SSE");
    assert!(seen.contains("\"transport\": \"sse\""), "{seen}");

    // A server of 2026-07-28 (the conformance suite's fixtures, served over HTTP) is spoken
    // to statelessly, as a stdio one of that revision is.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let python = crate::mcp::tools().join("mcp-venv/bin/python");
    let mut modern = std::process::Command::new(python)
        .arg(crate::mcp::root().join("tests/providers/conformance_server.py"))
        .args(["--http", &port.to_string()])
        .spawn()
        .expect("the conformance server");
    let modern_url = format!("http://127.0.0.1:{port}/mcp");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "the conformance server did not listen");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    enable_remote(&butler, dir.path(), "remote.modern", &modern_url, &json!({}));
    let simple = call_text(&butler, "remote_modern__test_simple_text", json!({}));
    let (_, status) = butler.get_json("/mcp/status");
    let _ = modern.kill();
    let _ = modern.wait();
    assert_eq!(simple, Ok("This is a simple text response for testing.".to_owned()));
    let providers = status["providers"].as_array().cloned().unwrap_or_default();
    let spoken = providers.iter().find(|p| p["id"] == "suzu:remote.modern").map(|p| p["protocol"].clone());
    assert_eq!(spoken, Some(json!("2026-07-28")), "{status}");

    // A wrong token: the server refuses it, and the status says so — without the token.
    let (_, status) = butler.get_json("/mcp/status");
    let providers = status["providers"].as_array().cloned().unwrap_or_default();
    let of = |id: &str| providers.iter().find(|p| p["id"] == id).cloned().unwrap_or_else(|| panic!("{id} in {status}"));
    let refused = of("suzu:remote.wrong");
    let error = refused["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("401") && error.contains("headers"), "{refused}");
    assert_eq!(of("suzu:remote.streamable")["url"], json!(streamable.url), "the status names the server");

    // The token is in no answer, nor in any file of the instance (the providers' logs, the
    // activity log, the package records among them).
    let mut shown = vec![status.to_string(), butler.get_json("/capabilities").1.to_string()];
    shown.push(cli(&butler, &["mcp", "status"]).1);
    shown.push(cli(&butler, &["capability", "list"]).1);
    for text in &shown {
        assert!(!text.contains(token) && !text.contains("not-the-token"), "a token is shown: {text}");
    }
    let mut folders = vec![workdir.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("read dir").map_while(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let text = String::from_utf8_lossy(&bytes);
                assert!(!text.contains(token), "the token is written in {}", path.display());
            }
        }
    }
}

#[test]
fn a_remote_server_that_goes_away_fails_calls_clearly_and_is_reconnected_when_it_is_back() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let port = port.to_string();
    let server = RemoteServer::start(&["--port", &port]);
    let (butler, dir) = Butler::start_fresh();
    enable_remote(&butler, dir.path(), "remote.flaky", &server.url, &json!({}));
    assert_eq!(call_text(&butler, "remote_flaky__echo", json!({"text": "one"})), Ok("one".to_owned()));

    drop(server);
    let failed = call_text(&butler, "remote_flaky__echo", json!({"text": "two"})).expect_err("the server is gone");
    let why = failed.to_string();
    assert!(why.contains("127.0.0.1") || why.contains("session"), "the failure says why: {why}");

    let _server = RemoteServer::start(&["--port", &port]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        match call_text(&butler, "remote_flaky__echo", json!({"text": "three"})) {
            Ok(text) => {
                assert_eq!(text, "three");
                break;
            }
            Err(answer) => assert!(std::time::Instant::now() < deadline, "not reconnected: {answer}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}
