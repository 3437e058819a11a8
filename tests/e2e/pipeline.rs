//! The card pipeline's host side: built-ins in new instances, `faculty upgrade`, the
//! `/pipeline` and `/observe` doors, and the owner gate on review decisions.

use serde_json::{Value, json};

use crate::util::{Butler, assert_error, butler_command};

fn pipeline(butler: &Butler, action: &str, args: Value, headers: &[(&str, &str)]) -> (u16, Value) {
    butler.post_json("/pipeline", &json!({"action": action, "args": args}), headers)
}

#[test]
fn a_new_instance_gets_the_built_in_faculties_and_upgrade_respects_the_owner() {
    let (butler, _dir) = Butler::start_fresh();
    for id in ["journal", "distill", "validity", "cards"] {
        butler.wait_ready(id);
        let faculty = butler.faculty(id).expect("listed");
        assert!(faculty["preopens"].as_array().expect("preopens").contains(&json!("/self")), "{faculty}");
    }
    let validity = butler.faculty("validity").expect("listed");
    assert!(validity["preopens"].as_array().expect("preopens").contains(&json!("/validity")), "{validity}");
    let workdir = butler.workdir.clone();
    assert!(butler.stop().success());

    let home = tempfile::tempdir().expect("home");
    let upgrade = |apply: bool| {
        let mut cmd = butler_command(home.path());
        cmd.args(["faculty", "upgrade", "--workdir"]).arg(&workdir);
        if apply {
            cmd.arg("--apply");
        }
        let out = cmd.output().expect("run");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = upgrade(false);
    assert_eq!(out.matches("up to date").count(), 4, "{out}");

    let faculties = workdir.join("faculties");
    std::fs::write(faculties.join("cards.wasm"), b"owner's own build").expect("modify");
    std::fs::remove_file(faculties.join("journal.wasm")).expect("remove");
    let out = upgrade(false);
    assert!(out.contains("journal    would install") && out.contains("cards      modified by you"), "{out}");
    assert!(out.contains("dry run"), "{out}");
    assert!(!faculties.join("journal.wasm").exists(), "a dry run changes nothing");
    let out = upgrade(true);
    assert!(out.contains("journal    installed"), "{out}");
    assert!(faculties.join("journal.wasm").exists());
    assert_eq!(std::fs::read(faculties.join("cards.wasm")).expect("read"), b"owner's own build", "never overwritten");

    // A file the host installed and nobody touched is upgraded: simulate an older install.
    let old = b"an older built-in";
    std::fs::write(faculties.join("distill.wasm"), old).expect("write");
    let record_path = workdir.join(".butler/builtins.json");
    let mut record: Value = serde_json::from_slice(&std::fs::read(&record_path).expect("record")).expect("json");
    record["distill"] = json!(sha256(old));
    std::fs::write(&record_path, record.to_string()).expect("write record");
    let out = upgrade(true);
    assert!(out.contains("distill    upgraded"), "{out}");
    assert_ne!(std::fs::read(faculties.join("distill.wasm")).expect("read"), old);
}

fn sha256(bytes: &[u8]) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(bytes)?;
            child.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().expect("hash").to_owned()
}

#[test]
fn the_pipeline_door_validates_routes_and_gates() {
    let (butler, _dir) = Butler::start_fresh();
    butler.wait_ready("cards");
    butler.wait_ready("validity");
    for (body, code, status) in [
        (json!({}), "invalid_args", 400),
        (json!({"action": 5}), "invalid_args", 400),
        (json!({"action": "cards.search", "args": [1]}), "invalid_args", 400),
        (json!({"action": "cards.search", "extra": 1}), "invalid_args", 400),
        (json!({"action": "nobody.search"}), "unknown_action", 404),
        (json!({"action": "cards.no-such-verb"}), "unknown_action", 404),
        (json!({"action": "cards"}), "unknown_action", 404),
        (json!({"action": "../cards.search"}), "unknown_action", 404),
    ] {
        let (got, answer) = butler.post_json("/pipeline", &body, &[]);
        assert_error(got, &answer, status, code);
    }
    // Operator commands never go through the HTTP pipeline, not even for the owner.
    let token = format!("Bearer {}", butler.owner_token());
    let (status, body) = pipeline(
        &butler,
        "validity.set-checks",
        json!({"id": "x", "revision": 1, "checks": []}),
        &[("authorization", &token)],
    );
    assert_error(status, &body, 403, "operator_only");

    // Review decisions need the owner: every partial signal is refused.
    let own = butler.origin.clone();
    let forged_cookie = format!("butler_session_{}={}", butler.port, "0".repeat(64));
    for headers in [
        vec![],
        vec![("origin", own.as_str())],
        vec![("origin", own.as_str()), ("sec-fetch-site", "same-origin")],
        vec![("origin", own.as_str()), ("x-butler-review", "1")],
        vec![("sec-fetch-site", "same-origin"), ("x-butler-review", "1")],
        // Every header the console sends, without its session: what curl can forge.
        vec![("origin", own.as_str()), ("sec-fetch-site", "same-origin"), ("x-butler-review", "1")],
        vec![
            ("origin", own.as_str()),
            ("sec-fetch-site", "same-origin"),
            ("x-butler-review", "1"),
            ("cookie", &forged_cookie),
        ],
        vec![("authorization", "Bearer not-the-token")],
    ] {
        for action in ["review.prepare", "review.approve", "review.reject"] {
            let (status, body) = pipeline(&butler, action, json!({"id": "cand-x"}), &headers);
            assert_error(status, &body, 403, "owner_required");
        }
    }
    // A cross-site page cannot even reach the gate.
    let (status, body) = pipeline(
        &butler,
        "review.approve",
        json!({}),
        &[("origin", "http://evil.example"), ("sec-fetch-site", "cross-site"), ("x-butler-review", "1")],
    );
    assert_eq!(status, 403, "{body}");
    // The owner command route is gated the same way.
    let (status, body) =
        butler.post_json("/faculties/cards/commands/review-prepare", &json!({"args": {"args": "{}"}}), &[]);
    assert_error(status, &body, 403, "owner_required");
}

/// A command's declared `input` schema is the host's to check, on every path, before the
/// command runs — and only after the owner gate, so a stranger learns nothing from it.
#[test]
fn a_commands_declared_input_is_checked_before_it_runs() {
    let (butler, _dir) = Butler::start_fresh();
    butler.wait_ready("cards");
    let token = format!("Bearer {}", butler.owner_token());
    let owner = [("authorization", token.as_str())];
    let calls = |butler: &Butler| butler.faculty("cards").expect("listed")["calls"]["total"].as_u64().unwrap_or(0);
    let before = calls(&butler);
    for (action, args, names) in [
        ("review.prepare", json!({"id": 5}), "/id"),
        ("review.approve", json!({"id": "cand-x"}), "revision"),
        ("cards.search", json!({"query": "x", "includeInactive": "yes"}), "/includeInactive"),
        ("cards.read", json!({"id": "x", "extra": 1}), "extra"),
    ] {
        let (status, body) = pipeline(&butler, action, args, &owner);
        assert_error(status, &body, 400, "invalid_args");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("invalid input") && message.contains(names), "{action}: {message}");
    }
    // The faculty route checks the same schema.
    let (status, body) =
        butler.post_json("/faculties/cards/commands/read", &json!({"args": {"args": r#"{"id": ["x"]}"#}}), &owner);
    assert_error(status, &body, 400, "invalid_args");
    assert_eq!(calls(&butler), before, "nothing ran: the host refused every call itself");
    // A stranger gets the owner gate's answer, whatever the input.
    let (status, body) = pipeline(&butler, "review.prepare", json!({"id": 5}), &[]);
    assert_error(status, &body, 403, "owner_required");
    // Valid input runs.
    let (status, body) = pipeline(&butler, "cards.search", json!({"query": "x", "includeInactive": true}), &owner);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn who_may_run_a_command_is_the_commands_own_property_whatever_the_routes_say() {
    // Routes remapped: `review.*` and `validity.*` now point at the journal. The cards
    // faculty's owner commands stay owner-only on their direct route, and the operator
    // command stays refused on every HTTP path, token or not.
    let (butler, _dir) = Butler::fresh_with_config(|config| {
        config["pipeline"] = json!({"routes": {"review": "journal", "validity": "journal"}});
    });
    butler.wait_ready("cards");
    butler.wait_ready("validity");
    for command in ["review-prepare", "review-approve", "review-reject"] {
        let (status, body) =
            butler.post_json(&format!("/faculties/cards/commands/{command}"), &json!({"args": {"args": "{}"}}), &[]);
        assert_error(status, &body, 403, "owner_required");
    }
    let token = format!("Bearer {}", butler.owner_token());
    let set_checks = json!({"args": {"args": "{\"id\":\"x\",\"revision\":1,\"checks\":[]}"}});
    for headers in [vec![], vec![("authorization", token.as_str())]] {
        let (status, body) = butler.post_json("/faculties/validity/commands/set-checks", &set_checks, &headers);
        assert_error(status, &body, 403, "operator_only");
    }
}

/// An instance made before `butler:faculty@0.2.0`: its built-ins on disk are the 0.1.0
/// components an earlier host installed (kept in `tests/fixtures/wit-0.1-builtins`). The
/// pipeline keeps working on them, and `butler faculty upgrade --apply` moves them to
/// 0.2.0 with the owner's data as it was.
#[test]
fn an_instance_of_wit_0_1_built_ins_keeps_working_and_upgrades_to_0_2() {
    const IDS: [&str; 4] = ["journal", "distill", "validity", "cards"];
    let (butler, _dir) = Butler::start_fresh();
    for id in IDS {
        butler.wait_ready(id);
    }
    let workdir = butler.workdir.clone();
    assert!(butler.stop().success());
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/wit-0.1-builtins");
    let mut record = json!({});
    for id in IDS {
        let bytes = std::fs::read(fixtures.join(format!("{id}.wasm"))).expect("fixture");
        std::fs::write(workdir.join(format!("faculties/{id}.wasm")), &bytes).expect("install the old built-in");
        record[id] = json!(sha256(&bytes));
    }
    std::fs::write(workdir.join(".butler/builtins.json"), record.to_string()).expect("the old host's record");

    let butler = Butler::start(&workdir);
    let token = format!("Bearer {}", butler.owner_token());
    let owner = [("authorization", token.as_str())];
    for id in IDS {
        butler.wait_ready(id);
        assert_eq!(butler.faculty(id).expect("listed")["wit"], "0.1.0", "{id}");
    }
    let (status, body) = butler.post_json("/observe", &json!({"source": "me", "text": "kept across the upgrade"}), &[]);
    assert_eq!(status, 202, "{body}");
    for (action, args) in [
        ("cards.search", json!({"query": "anything"})),
        ("review.list", json!({})),
        ("validity.refresh", json!({})),
        ("distill.claim", json!({})),
    ] {
        let (status, body) = pipeline(&butler, action, args, &owner);
        assert_eq!(status, 200, "{action} on 0.1.0: {body}");
    }
    assert!(butler.stop().success());

    let home = tempfile::tempdir().expect("home");
    let out = butler_command(home.path())
        .args(["faculty", "upgrade", "--apply", "--workdir"])
        .arg(&workdir)
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.matches("upgraded").count(), 4, "{text}");

    let butler = Butler::start(&workdir);
    let token = format!("Bearer {}", butler.owner_token());
    let owner = [("authorization", token.as_str())];
    for id in IDS {
        butler.wait_ready(id);
        assert_eq!(butler.faculty(id).expect("listed")["wit"], "0.2.0", "{id}");
    }
    let (status, recent) = butler.get_json("/faculties/journal/reports/recent");
    assert_eq!(status, 200, "{recent}");
    assert!(
        recent.to_string().contains("kept across the upgrade"),
        "the 0.1.0 journal's data is read by 0.2.0: {recent}"
    );
    let (status, body) = pipeline(&butler, "cards.search", json!({"query": "anything"}), &owner);
    assert_eq!(status, 200, "{body}");
    let (status, body) = pipeline(&butler, "cards.search", json!({"query": 5}), &owner);
    assert_error(status, &body, 400, "invalid_args");
}
