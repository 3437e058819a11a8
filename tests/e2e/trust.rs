//! Trust, tried as an attacker would: no check is an oracle for a secret's contents.

use std::os::unix::fs::symlink;
use std::path::Path;

use serde_json::{Value, json};

use crate::util::{Butler, assert_error};

/// A quote check of `text` in `path` by the owner: its one result, or the refusal of a
/// path refused by its spelling alone (400, before anything is opened).
fn quote(butler: &Butler, path: &str, text: &str) -> Value {
    let token = format!("Bearer {}", butler.owner_token());
    let (status, body) = butler.post_json(
        "/pipeline",
        &json!({"action": "validity.check", "args": {"checks": [{"type": "quote", "path": path, "text": text}]}}),
        &[("authorization", &token)],
    );
    if status == 400 {
        assert_eq!(body["error"]["code"], "invalid_check", "{path}: {body}");
        return json!({"ok": false, "refused": body["error"]["message"]});
    }
    assert_eq!(status, 200, "{path}: {body}");
    body["data"]["results"][0].clone()
}

/// Plants every road to the secrets under `workdir` (whose state directory is `state`).
fn plant_attacks(workdir: &Path, state: &str) -> Vec<String> {
    let docs = workdir.join("docs");
    std::fs::create_dir_all(&docs).expect("mkdir");
    let token = format!("../{state}/owner-token");
    symlink(&token, docs.join("tok-link.md")).expect("link");
    symlink("tok-link.md", docs.join("chain-2.md")).expect("link");
    symlink("chain-2.md", docs.join("chain-1.md")).expect("link");
    symlink(format!("../{state}"), docs.join("state-dir")).expect("dir link");
    std::fs::hard_link(workdir.join(state).join("owner-token"), docs.join("hard.md")).expect("hard link");
    symlink("../tools/secret/butler.json", docs.join("manifest.md")).expect("link");
    vec![
        "docs/tok-link.md".into(),
        "docs/chain-1.md".into(),
        "docs/state-dir/owner-token".into(),
        "docs/hard.md".into(),
        "docs/manifest.md".into(),
        "tools/secret/butler.json".into(),
        format!("{state}/owner-token"),
    ]
}

fn with_secret_tool(workdir: &Path) {
    let dir = workdir.join("tools/secret");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": "secret", "name": "Secret",
        "hosted": {"command": ["sleep", "1000"], "env": {"API_KEY": "sk-live-0123456789abcdef"}}});
    std::fs::write(dir.join("butler.json"), manifest.to_string()).expect("manifest");
}

/// Asks every attack path whether it holds the secret's first bytes and whether it holds
/// something else: the answers must not differ, and must not pass.
fn assert_no_oracle(butler: &Butler, paths: &[String]) {
    let token = butler.owner_token();
    for path in paths {
        let secret =
            if path.contains("manifest") || path.contains("butler.json") { "sk-live-0123" } else { &token[..12] };
        let right = quote(butler, path, secret);
        let wrong = quote(butler, path, "zzzz-not-it");
        assert_eq!(right["ok"], false, "{path}: {right}");
        assert_eq!(right, wrong, "{path}: the answer depends on the file's contents");
        let reason = right["reason"].as_str().or_else(|| right["refused"].as_str()).unwrap_or_default();
        assert!(!reason.contains(secret), "{path}: the reason quotes the secret back: {reason}");
    }
}

#[test]
fn no_check_confirms_text_of_the_owner_token_or_a_manifest_by_any_road() {
    let (butler, _dir) = Butler::start_fresh();
    butler.wait_ready("validity");
    with_secret_tool(&butler.workdir);
    let paths = plant_attacks(&butler.workdir, ".butler");
    assert_no_oracle(&butler, &paths);
    // An ordinary file still checks.
    std::fs::write(butler.workdir.join("docs/real.md"), "the real text").expect("write");
    assert_eq!(quote(&butler, "docs/real.md", "real text")["ok"], true);
    assert_eq!(quote(&butler, "docs/real.md", "other text")["ok"], false);
    // And nobody without a credential may ask at all.
    let (status, body) = butler.post_json(
        "/pipeline",
        &json!({"action": "validity.check", "args": {"checks": [{"type": "path", "path": "docs/real.md"}]}}),
        &[],
    );
    assert_error(status, &body, 403, "owner_required");
}

#[test]
fn a_state_directory_that_is_not_hidden_is_refused_too() {
    let (butler, _dir) = Butler::fresh_with_config(|config| config["stateDir"] = json!("state"));
    let workdir = butler.workdir.clone();
    butler.wait_ready("validity");
    assert!(workdir.join("state/owner-token").is_file(), "the token lives in the visible state dir");
    with_secret_tool(&workdir);
    let paths = plant_attacks(&workdir, "state");
    assert_no_oracle(&butler, &paths);
}

/// The soft and hard open-file limits of process `pid`.
fn file_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("open files line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[3].to_owned(), fields[4].to_owned())
}

fn set_soft_file_limit(pid: u32, soft: &str, hard: &str) {
    let status = std::process::Command::new("prlimit")
        .args([format!("--pid={pid}"), format!("--nofile={soft}:{hard}")])
        .status()
        .expect("prlimit");
    assert!(status.success(), "prlimit");
}

#[test]
fn a_scan_that_cannot_read_unregisters_and_stops_nothing() {
    let dir = tempfile::tempdir().expect("temp");
    let workdir = dir.path().join("instance");
    let log = dir.path().join("host.log");
    // First start creates the instance; then a hosted service and a plain tool.
    let first = Butler::start(&workdir);
    assert!(first.stop().success());
    let service = json!({"schemaVersion": 1, "kind": "service", "id": "keeper", "name": "Keeper",
        "hosted": {"command": ["sleep", "1000"], "autoStart": true}});
    crate::util::write_manifest(&workdir, "services/keeper", &service);
    crate::util::write_manifest(&workdir, "tools/plain", &crate::util::tool("plain", "Plain"));
    let butler = Butler::start_logging(&workdir, "info", &log);
    butler.wait_ready("journal");
    crate::util::wait_until(std::time::Duration::from_secs(20), "the service runs", || {
        butler.get_json("/services").1["services"][0]["state"] == "running"
    });
    let pid_before = butler.get_json("/services").1["services"][0]["pid"].clone();
    let ids_before = butler.ids();

    // Fill the fd table (a soft limit below the descriptors already open: no new one can be
    // had), then make the catalog rescan.
    let pid = butler.pid();
    let (soft, hard) = file_limits(pid);
    set_soft_file_limit(pid, "3", &hard);
    std::fs::write(workdir.join("tools/plain/butler.json"), crate::util::tool("plain", "Plain again").to_string())
        .expect("touch a manifest");
    crate::util::write_manifest(&workdir, "tools/newcomer", &crate::util::tool("newcomer", "Newcomer"));
    std::thread::sleep(std::time::Duration::from_secs(5));
    set_soft_file_limit(pid, &soft, &hard);

    // Everything is still there, and the service was never stopped.
    crate::util::wait_until(std::time::Duration::from_secs(10), "the newcomer after the limit is back", || {
        butler.ids().contains(&"newcomer".to_owned())
    });
    let ids_after = butler.ids();
    for id in &ids_before {
        assert!(ids_after.contains(id), "{id} is still registered: {ids_after:?}");
    }
    let services = butler.get_json("/services").1;
    assert_eq!(services["services"][0]["state"], "running", "{services}");
    assert_eq!(services["services"][0]["pid"], pid_before, "never restarted: {services}");
    drop(butler);
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(!text.contains("catalog: unregistered"), "nothing was unregistered:\n{text}");
    assert!(
        text.contains("stay as they were") || text.contains("what was registered from it stays"),
        "the scan did hit the limit:\n{text}"
    );
}

#[test]
fn a_folder_that_vanished_is_unregistered_once_a_second_scan_agrees() {
    let (butler, _dir) = Butler::start_fresh();
    // The built-in faculties' first compile takes both cores for a while: the scans timed
    // below are measured after it, not beside it.
    butler.wait_compiled();
    crate::util::write_manifest(&butler.workdir, "tools/short", &crate::util::tool("short", "Short-lived"));
    crate::util::wait_until(std::time::Duration::from_secs(10), "registered", || {
        butler.ids().contains(&"short".to_owned())
    });
    std::fs::remove_dir_all(butler.workdir.join("tools/short")).expect("rm");
    let gone = crate::util::wait_until(std::time::Duration::from_secs(10), "unregistered", || {
        !butler.ids().contains(&"short".to_owned())
    });
    assert!(gone < crate::catalog::LIVE, "still within the live-catalog promise: {gone:?}");
}
