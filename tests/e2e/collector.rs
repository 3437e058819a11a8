//! The session collector: turns are redacted, stored durably before they are answered,
//! handed to the journal once, and replayed after the host was killed.

use std::path::Path;

use serde_json::{Value, json};

use crate::agents::wait_for;
use crate::util::Butler;

fn stored(workdir: &Path, id: &str) -> Option<Value> {
    let text = std::fs::read_to_string(workdir.join(format!("self/journal/sessions/{id}.json"))).ok()?;
    serde_json::from_str(&text).ok()
}

fn pending(workdir: &Path) -> usize {
    std::fs::read_dir(workdir.join(".butler/collector-pending"))
        .map(|entries| {
            entries.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().ends_with(".json")).count()
        })
        .unwrap_or(0)
}

fn turn(id: &str, text: &str) -> Value {
    json!({"id": id, "workspace": "home", "messages": [{"role": "user", "content": text}]})
}

#[test]
fn turns_are_redacted_filtered_and_stored_once() {
    let (butler, _dir) = Butler::fresh_with_config(|config| config["collector"] = json!({"debounceMs": 0}));
    let secrets = [
        concat!("sk-proj-", "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
        concat!("ghp_", "16C7e42F292c6912E7710c838347Ae178B4a"),
        "hunter2-is-my-password",
        "s3cr3t-db-pass",
        concat!("AKIA", "IOSFODNN7EXAMPLE"),
        "nested-key-in-an-object",
    ];
    let long = "x".repeat(20_000);
    let body = json!({"id": "t-redact", "workspace": "home", "messages": [
        {"role": "user", "content": format!("my key is {} and `export GITHUB_TOKEN={}`", secrets[0], secrets[1])},
        {"role": "assistant", "content": format!("set password={} then connect to postgres://app:{}@db.local/x", secrets[2], secrets[3])},
        {"role": "tool", "name": "shell", "content": {"stdout": format!("aws_access_key_id = {}", secrets[4]),
                                                "api_key": {"value": secrets[5]}}},
        {"role": "tool", "content": long},
    ]});
    let (status, answer) = butler.post_json("/sessions/turns", &body, &[]);
    assert_eq!(status, 202, "{answer}");
    assert!(answer["redacted"].as_u64() >= Some(6), "{answer}");
    let (_, flushed) = butler.post_json("/sessions/flush", &json!({}), &[]);
    assert_eq!(flushed["pending"], 0, "{flushed}");
    let kept = stored(&butler.workdir, "t-redact").expect("the turn is in the journal");
    let text = kept.to_string();
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} was stored: {text}");
    }
    assert!(text.contains("[redacted]") && text.contains("db.local"), "{text}");
    assert_eq!(kept["messages"][3]["partial"], true);
    // The distiller's evidence: the transcript as a `session` line.
    let lines: String = std::fs::read_dir(butler.workdir.join("self/sessions"))
        .expect("session lines")
        .filter_map(Result::ok)
        .map(|e| std::fs::read_to_string(e.path()).expect("read"))
        .collect();
    let line: Value =
        lines.lines().find(|l| l.contains("t-redact")).map(|l| serde_json::from_str(l).expect("JSON")).expect("a line");
    assert_eq!((&line["type"], &line["tags"]), (&json!("session"), &json!(["workspace:home"])), "{line}");
    assert!(line["text"].as_str().is_some_and(|t| t.starts_with("user: my key is sk-proj-[redacted]")), "{line}");
    assert_eq!(kept["messages"][3]["content"].as_str().map(str::len), Some(16_000));
    let everywhere = std::process::Command::new("grep").args(["-r", "-l", secrets[2]]).arg(&butler.workdir).output();
    assert!(everywhere.expect("grep").stdout.is_empty(), "the password is nowhere in the instance");

    // The same turn again is stored once.
    let (status, _) = butler.post_json("/sessions/turns", &body, &[]);
    assert_eq!(status, 202);
    butler.post_json("/sessions/flush", &json!({}), &[]);
    assert_eq!(stored(&butler.workdir, "t-redact"), Some(kept), "not stored twice");
    let again: String = std::fs::read_dir(butler.workdir.join("self/sessions"))
        .expect("session lines")
        .filter_map(Result::ok)
        .map(|e| std::fs::read_to_string(e.path()).expect("read"))
        .collect();
    assert_eq!(again.matches("t-redact").count(), 1, "one line");

    // The config's filters; bad turns.
    for (extra, why) in
        [(json!({"preset": "butler"}), "excludePresets"), (json!({"subagent": true}), "includeSubagents")]
    {
        let mut skipped = turn("t-skip", "hello");
        skipped.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        let (status, answer) = butler.post_json("/sessions/turns", &skipped, &[]);
        assert_eq!((status, &answer["queued"]), (200, &json!(false)), "{answer}");
        assert!(answer["skipped"].as_str().unwrap_or_default().contains(why), "{answer}");
    }
    for bad in [
        json!({"messages": []}),
        json!({"messages": [{"role": "user"}]}),
        json!({"id": "../x", "messages": [{"role": "user", "content": "x"}]}),
    ] {
        let (status, answer) = butler.post_json("/sessions/turns", &bad, &[]);
        crate::util::assert_error(status, &answer, 400, "invalid_turn");
    }
    let (status, answer) = butler.raw("POST", "/sessions/turns", &[], turn("t", "x").to_string().as_bytes());
    crate::util::assert_error(status, &answer, 415, "unsupported_media_type");
    assert!(stored(&butler.workdir, "t-skip").is_none());
}

#[test]
fn pending_turns_survive_a_killed_host_none_lost_none_duplicated() {
    // Turns wait long before they are handed over: the host is killed with them pending.
    let (mut butler, _dir) = Butler::fresh_with_config(|config| config["collector"] = json!({"debounceMs": 600_000}));
    let workdir = butler.workdir.clone();
    assert_eq!(butler.post_json("/sessions/turns", &turn("t0", "first"), &[]).0, 202);
    assert_eq!(butler.post_json("/sessions/flush", &json!({}), &[]).1["pending"], 0);
    let first = stored(&workdir, "t0").expect("t0 stored");
    for id in ["t1", "t2", "t3"] {
        assert_eq!(butler.post_json("/sessions/turns", &turn(id, id), &[]).0, 202);
    }
    assert_eq!(pending(&workdir), 3, "answered only once stored durably");
    // As if the last host died after the journal took t0 but before it removed the file.
    std::fs::write(workdir.join(".butler/collector-pending/t0.json"), first.to_string()).expect("write");
    butler.kill();

    let butler = Butler::start(&workdir);
    wait_for("the pending turns replayed at start", || pending(&workdir) == 0);
    for id in ["t1", "t2", "t3"] {
        assert_eq!(stored(&workdir, id).expect(id)["messages"][0]["content"], id);
    }
    assert_eq!(stored(&workdir, "t0"), Some(first), "t0 is stored once, unchanged");
    let files = std::fs::read_dir(workdir.join("self/journal/sessions")).expect("sessions").count();
    assert_eq!(files, 4, "none lost, none duplicated");
    drop(butler);
}
