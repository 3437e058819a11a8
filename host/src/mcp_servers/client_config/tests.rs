use serde_json::json;

use super::*;

fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp");
    let path = dir.path().join("config.json");
    std::fs::write(&path, text).expect("write");
    (dir, path)
}

fn entries(text: &str) -> Vec<Entry> {
    let (_dir, path) = file(text);
    read(&path).expect("a client's config").1
}

fn added(entry: &Entry) -> &NewServer {
    entry.outcome.as_ref().unwrap_or_else(|why| panic!("{} was skipped: {why}", entry.name))
}

fn map_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn claude_desktop_and_cursor_servers_map_to_commands_and_urls() {
    let found = entries(
        &json!({"mcpServers": {
            "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me"]},
            "GitHub Tools": {"command": "docker", "args": ["run", "-i", "ghcr.io/github/github-mcp-server"],
                             "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x", "LIMIT": 5}},
            "linear": {"url": "https://mcp.linear.app/mcp", "headers": {"Authorization": "Bearer abc"}},
        }})
        .to_string(),
    );
    let names: Vec<&str> = found.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["filesystem", "GitHub Tools", "linear"], "the file's order");
    let files = added(&found[0]);
    assert_eq!(files.name, "filesystem");
    assert_eq!(
        files.reach,
        Reach::Stdio {
            command: vec![
                "npx".into(),
                "-y".into(),
                "@modelcontextprotocol/server-filesystem".into(),
                "/home/me".into()
            ],
            env: BTreeMap::new()
        }
    );
    let github = added(&found[1]);
    assert_eq!(github.name, "github-tools");
    let Reach::Stdio { env, .. } = &github.reach else { panic!("stdio: {github:?}") };
    assert_eq!(env, &map_of(&[("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_x"), ("LIMIT", "5")]));
    let linear = added(&found[2]);
    assert_eq!(
        linear.reach,
        Reach::Http { url: "https://mcp.linear.app/mcp".into(), headers: map_of(&[("Authorization", "Bearer abc")]) }
    );
}

#[test]
fn vs_code_files_with_comments_types_and_variables_are_read() {
    let text = r#"{
      // VS Code writes comments and trailing commas
      "inputs": [{"type": "promptString", "id": "token", "password": true}],
      "servers": {
        "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"X-Key": "${env:DOCS_KEY}"},},
        "asks": {"type": "http", "url": "https://asks.example/mcp", "headers": {"Authorization": "Bearer ${input:token}"}},
        "here": {"type": "stdio", "command": "node", "args": ["${workspaceFolder}/server.js"]},
        "old": {"type": "sse", "url": "https://old.example/sse"},
        "pipe": {"type": "websocket", "url": "wss://x.example"},
        "fromfile": {"type": "stdio", "command": "x", "envFile": "${workspaceFolder}/.env"},
        "wsenv": {"type": "stdio", "command": "x", "env": {"ROOT": "${workspaceFolder}"}},
      },
    }"#;
    let found = entries(text);
    let by = |name: &str| found.iter().find(|e| e.name == name).unwrap_or_else(|| panic!("{name} in {found:?}"));
    assert_eq!(
        added(by("docs")).reach,
        Reach::Http { url: "https://docs.example/mcp".into(), headers: map_of(&[("X-Key", "${DOCS_KEY}")]) },
        "`${{env:VAR}}` is the host's `${{VAR}}`"
    );
    assert_eq!(added(by("old")).reach, Reach::Http { url: "https://old.example/sse".into(), headers: BTreeMap::new() });
    let skipped = |name: &str| by(name).outcome.clone().err().unwrap_or_else(|| panic!("{name} is skipped")).0;
    assert!(skipped("asks").contains("${input:token}"), "{}", skipped("asks"));
    assert!(skipped("here").contains("variable"), "{}", skipped("here"));
    assert!(skipped("pipe").contains("websocket"), "{}", skipped("pipe"));
    assert!(skipped("fromfile").contains("envFile"), "{}", skipped("fromfile"));
    assert!(skipped("wsenv").contains("${workspaceFolder}"), "not an environment variable: {}", skipped("wsenv"));
}

#[test]
fn claude_code_projects_windsurf_urls_and_settings_files_are_found() {
    let found = entries(
        &json!({
            "mcpServers": {"user-one": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}},
            "projects": {"/home/me/app": {"mcpServers": {
                "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp"},
                "user-one": {"command": "other"},
            }}},
        })
        .to_string(),
    );
    let names: Vec<&str> = found.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["user-one", "sentry"], "a name seen twice is kept once, the user's own first");
    assert_eq!(
        added(&found[0]).reach,
        Reach::Stdio { command: vec!["uvx".into(), "mcp-server-time".into()], env: BTreeMap::new() }
    );

    let windsurf = entries(&json!({"mcpServers": {"ctx": {"serverUrl": "https://ctx.example/mcp"}, "off": {"command": "x", "disabled": true}}}).to_string());
    assert_eq!(
        added(&windsurf[0]).reach,
        Reach::Http { url: "https://ctx.example/mcp".into(), headers: BTreeMap::new() }
    );
    assert_eq!(windsurf[1].outcome, Err(Skipped("disabled in the client".into())));

    let settings = entries(r#"{"editor.fontSize": 13, "mcp": {"servers": {"t": {"command": "uvx", "args": ["t"]}}}}"#);
    assert_eq!(settings.len(), 1);
}

#[test]
fn files_that_are_not_a_clients_config_say_why() {
    let (_dir, path) = file(r#"{"name": "not a client config"}"#);
    assert!(matches!(read(&path), Err(ConfigError::NoServers { .. })));
    let (_dir, path) = file("{ broken");
    let Err(ConfigError::Parse { message, .. }) = read(&path) else { panic!("a parse error") };
    assert!(message.contains("line"), "{message}");
    assert!(matches!(read(Path::new("/nonexistent/config.json")), Err(ConfigError::Read { .. })));
    let (_dir, path) = file(&" ".repeat(usize::try_from(MAX_FILE).expect("fits") + 1));
    assert!(matches!(read(&path), Err(ConfigError::TooLarge { .. })));
}

#[test]
fn names_become_server_names() {
    for (given, expected) in [
        ("GitHub Tools", "github-tools"),
        ("my_server.v2", "my-server-v2"),
        ("1password", "mcp-1password"),
        ("天气", "mcp"),
        ("--a--b--", "a-b"),
        ("a-very-long-server-name-for-sure-too-long", "a-very-long-server-name"),
    ] {
        assert_eq!(server_name(given), expected, "{given}");
        assert!(server_name(given).len() <= MAX_NAME);
    }
}

/// A name with nothing to keep in ASCII (a Chinese user's `天气`) is named after what the
/// server runs or where it is, so that two of them do not both become `mcp`.
#[test]
fn names_without_ascii_are_named_after_the_server() {
    let found = entries(
        &json!({"mcpServers": {
            "高德地图": {"command": "npx", "args": ["-y", "@amap/amap-maps-mcp-server@0.0.8"]},
            "天气": {"url": "https://www.weather.example.cn/mcp"},
            "文件": {"command": "/usr/local/bin/files-server.py", "args": ["--root", "/home/me"]},
            "容器": {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"]},
            "模块": {"command": "python3", "args": ["-m", "notes_server"]},
            "日历": {"command": "npx", "args": ["-y", "--", "-"]},
            "Café": {"command": "npx", "args": ["cafe-mcp"]},
        }})
        .to_string(),
    );
    let names: Vec<&str> = found.iter().map(|e| added(e).name.as_str()).collect();
    assert_eq!(
        names,
        [
            "amap-maps-mcp-server",
            "weather-example-cn",
            "files-server",
            "github-mcp-server",
            "notes-server",
            "npx",
            "caf"
        ]
    );
}

#[test]
fn the_hub_entry_is_written_in_the_clients_own_shape() {
    let url = "http://127.0.0.1:19387/myspace-butler/api/mcp";
    let desktop = Client::of(Path::new("/x/claude_desktop_config.json"), &json!({"mcpServers": {}}));
    assert_eq!(desktop, Client::ClaudeDesktop);
    assert_eq!(
        desktop.hub_entry(url, "butler", false),
        json!({"mcpServers": {"butler": {"command": "butler", "args": ["mcp", "stdio"]}}}),
        "Claude Desktop starts its servers as commands"
    );
    let vscode = Client::of(Path::new("/w/.vscode/mcp.json"), &json!({"servers": {}}));
    assert_eq!(vscode.hub_entry(url, "butler", false), json!({"servers": {"butler": {"type": "http", "url": url}}}));
    assert_eq!(
        vscode.hub_entry(url, "butler", true),
        json!({"servers": {"butler": {"type": "stdio", "command": "butler", "args": ["mcp", "stdio"]}}})
    );
    let windsurf = Client::of(Path::new("/h/.codeium/windsurf/mcp_config.json"), &json!({"mcpServers": {}}));
    assert_eq!(windsurf.hub_entry(url, "butler", false), json!({"mcpServers": {"butler": {"serverUrl": url}}}));
    let cursor = Client::of(Path::new("/h/.cursor/mcp.json"), &json!({"mcpServers": {}}));
    assert_eq!(cursor.hub_entry(url, "butler", false), json!({"mcpServers": {"butler": {"type": "http", "url": url}}}));
}

#[test]
fn a_file_of_too_many_servers_adds_only_the_first_ones() {
    let servers: serde_json::Map<String, serde_json::Value> =
        (0..MAX_SERVERS + 3).map(|i| (format!("s{i}"), json!({"command": "x"}))).collect();
    let found = entries(&json!({"mcpServers": servers}).to_string());
    assert_eq!(found.len(), MAX_SERVERS + 3, "every entry is named");
    assert!(found[..MAX_SERVERS].iter().all(|e| e.outcome.is_ok()));
    assert!(found[MAX_SERVERS..].iter().all(|e| e.outcome.as_ref().is_err_and(|s| s.0.contains("more than"))));
}
