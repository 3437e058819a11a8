//! The root config edited while the host runs: an `mcp` edit is in force within 2 s (a new
//! profile answers, the quarantine turns off), an invalid edit keeps the last good config
//! and shows every problem with its pointer in `/catalog`, and a field that needs a restart
//! says so there; the collector follows an edit too.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_stateless::{headers_for, post, request};
use crate::util::{Butler, wait_until};

/// Within the 2 s the issue allows an edit to apply.
const APPLIES: Duration = Duration::from_secs(2);

fn edit(butler: &Butler, change: impl FnOnce(&mut Value)) {
    let path = butler.workdir.join("butler.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("config")).expect("JSON");
    change(&mut config);
    std::fs::write(&path, serde_json::to_vec_pretty(&config).expect("json")).expect("write");
}

fn root_config_problems(butler: &Butler) -> Vec<(String, String, String)> {
    let (_, catalog) = butler.get_json("/catalog");
    let diagnostics = catalog["diagnostics"].as_array().cloned().unwrap_or_default();
    diagnostics
        .iter()
        .filter(|d| d["path"] == "butler.json")
        .flat_map(|d| {
            let severity = d["severity"].as_str().unwrap_or_default().to_owned();
            d["errors"].as_array().cloned().unwrap_or_default().into_iter().map(move |e| {
                (
                    severity.clone(),
                    e["pointer"].as_str().unwrap_or_default().to_owned(),
                    e["message"].as_str().unwrap_or_default().to_owned(),
                )
            })
        })
        .collect()
}

#[test]
fn root_config_edits_apply_live_and_invalid_ones_are_kept_out_with_their_pointers() {
    let (butler, _dir) = Butler::start_fresh();
    // Read now: the test moves `stateDir` in the file later (the host keeps it where it was).
    let owner_token = butler.owner_token();
    let list = request(1, "tools/list", json!({}));
    let (status, _) = post(&butler, "/mcp/p/live", &list, &headers_for(&list));
    assert_eq!(status, 404, "no such profile yet");
    let (_, quarantine) = butler.get_json("/mcp/quarantine");
    assert_eq!(quarantine["enabled"], true, "a fresh instance holds new tools");

    edit(&butler, |config| {
        config["mcp"]["profiles"] = json!({"live": {"providers": [], "hostTools": true}});
        config["mcp"]["quarantine"] = json!(false);
    });
    wait_until(APPLIES, "the new profile answering", || {
        post(&butler, "/mcp/p/live", &list, &headers_for(&list)).0 == 200
    });
    wait_until(APPLIES, "the quarantine off in the same edit", || {
        butler.get_json("/mcp/quarantine").1["enabled"] == false
    });

    // Invalid: kept out, every problem shown with its pointer; the profile still answers.
    edit(&butler, |config| {
        config["mcp"]["idleSec"] = json!("later");
        config["mcp"]["quarantine"] = json!("no");
    });
    wait_until(APPLIES, "the invalid edit's problems in /catalog", || root_config_problems(&butler).len() >= 2);
    let problems = root_config_problems(&butler);
    for pointer in ["/mcp/idleSec", "/mcp/quarantine"] {
        assert!(problems.iter().any(|(s, p, _)| s == "error" && p == pointer), "{pointer} in {problems:?}");
    }
    assert_eq!(post(&butler, "/mcp/p/live", &list, &headers_for(&list)).0, 200, "the last good config stays");
    // The owner's CLI still reaches the running host, saying why the file is not used.
    let (code, out) = crate::capabilities::cli(&butler, &["mcp", "status"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("is invalid") && out.contains("last good config"), "{out}");

    // Fixed, with a field that needs a restart changed beside it.
    edit(&butler, |config| {
        config["mcp"]["idleSec"] = json!(120);
        config["mcp"]["quarantine"] = json!(true);
        config["stateDir"] = json!(".moved");
    });
    wait_until(APPLIES, "the quarantine back on", || butler.get_json("/mcp/quarantine").1["enabled"] == true);
    let problems = root_config_problems(&butler);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!((problems[0].0.as_str(), problems[0].1.as_str()), ("warning", "/stateDir"));
    assert!(problems[0].2.contains("restarts"), "{problems:?}");
    assert!(!butler.workdir.join(".moved").exists(), "the running host keeps its state where it was");

    // A file that is not JSON: the Settings view is given its text to mend, not a blank.
    let path = butler.workdir.join("butler.json");
    let good = std::fs::read_to_string(&path).expect("config");
    std::fs::write(&path, "{ \"mcp\": ").expect("write");
    wait_until(APPLIES, "the broken file in /catalog", || {
        root_config_problems(&butler).iter().any(|(s, _, m)| s == "error" && m.starts_with("not JSON"))
    });
    let (_, config) = butler.get_json("/config");
    assert_eq!((config["text"].as_str(), &config["document"]), (Some("{ \"mcp\": "), &Value::Null), "{config}");
    std::fs::write(&path, good).expect("write");

    // A save from an editor that read an older revision is refused: an edit made by hand
    // meanwhile is never overwritten unseen.
    let (_, opened) = butler.get_json("/config");
    let revision = opened["revision"].as_str().expect("a revision").to_owned();
    let mut by_hand: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("config")).expect("JSON");
    by_hand["mcp"]["idleSec"] = json!(77);
    std::fs::write(&path, by_hand.to_string()).expect("write");
    let put = |document: &Value, revision: &str| {
        let response = butler
            .request(reqwest::Method::PUT, &butler.api("/config"))
            .bearer_auth(&owner_token)
            .header("content-type", "application/json")
            .header("if-match", format!("\"{revision}\""))
            .body(document.to_string())
            .send()
            .expect("PUT /config");
        let status = response.status().as_u16();
        (status, response.json::<Value>().unwrap_or(Value::Null))
    };
    let stale = opened["document"].clone();
    let (status, answer) = put(&stale, &revision);
    assert_eq!((status, &answer["error"]["code"]), (409, &json!("config_changed")), "{answer}");
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("config")).expect("JSON");
    assert_eq!(kept["mcp"]["idleSec"], 77, "the edit made by hand is kept");
    let (_, fresh) = butler.get_json("/config");
    let (status, answer) = put(&kept, fresh["revision"].as_str().expect("a revision"));
    assert_eq!(status, 200, "the current revision saves: {answer}");

    // The collector follows too: turned off, the next turn is skipped and says why.
    let turn = json!({"id": "t-live", "workspace": "home", "messages": [{"role": "user", "content": "hello"}]});
    edit(&butler, |config| config["collector"] = json!({"enabled": false}));
    wait_until(APPLIES, "the collector off", || {
        let (_, answer) = butler.post_json("/sessions/turns", &turn, &[]);
        answer["skipped"].as_str().is_some_and(|why| why.contains("collector.enabled"))
    });
}
