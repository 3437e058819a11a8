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
    let (first, _dir) = Butler::start_fresh();
    let workdir = first.workdir.clone();
    assert!(first.stop().success());
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(workdir.join("butler.json")).expect("config")).expect("json");
    config["stateDir"] = json!("state");
    std::fs::write(workdir.join("butler.json"), serde_json::to_vec_pretty(&config).expect("json")).expect("config");
    let butler = Butler::start(&workdir);
    butler.wait_ready("validity");
    assert!(workdir.join("state/owner-token").is_file(), "the token lives in the visible state dir");
    with_secret_tool(&workdir);
    let paths = plant_attacks(&workdir, "state");
    assert_no_oracle(&butler, &paths);
}
