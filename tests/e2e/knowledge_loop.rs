//! The owner's knowledge loop end to end over HTTP against the real binary and the real
//! built-in faculties: observe → claim → evidence → submit → complete → review → approve
//! → search/read, with validity checks, conflicts, idempotency, leases and crash safety.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{Butler, assert_error, write_manifest};

/// Calls a pipeline action; `owner` makes it an owner action of the logged-in console.
fn act(butler: &Butler, action: &str, args: Value, owner: bool) -> (u16, Value) {
    let owned = if owner { butler.console_owner_headers() } else { Vec::new() };
    let headers: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
    butler.post_json("/pipeline", &json!({"action": action, "args": args}), &headers)
}

/// The data of a successful action.
fn ok(butler: &Butler, action: &str, args: Value, owner: bool) -> Value {
    let (status, body) = act(butler, action, args, owner);
    assert_eq!(status, 200, "{action}: {body}");
    assert_eq!(body["ok"], true, "{action}: {body}");
    body["data"].clone()
}

fn observe(butler: &Butler, text: &str) {
    let (status, body) = butler.post_json(
        "/observe",
        &json!({"source": "test-agent", "type": "fact", "tags": ["t"], "text": text}),
        &[],
    );
    assert_eq!((status, &body), (202, &json!({"queued": true})));
}

fn started() -> (Butler, tempfile::TempDir) {
    let (butler, dir) = Butler::start_fresh();
    for id in ["journal", "distill", "validity", "cards"] {
        butler.wait_ready(id);
    }
    (butler, dir)
}

/// Claims a batch, submits `cards` (each `(card, checks, op, target, conflict)`), completes.
fn distill(butler: &Butler, submissions: &[Value]) -> Vec<Value> {
    let batch = ok(butler, "distill.claim", json!({"limit": 50}), false);
    let (batch_id, lease) = (batch["batchId"].clone(), batch["lease"].clone());
    let items: Vec<String> =
        batch["items"].as_array().expect("items").iter().map(|i| i["id"].as_str().expect("id").to_owned()).collect();
    assert!(!items.is_empty(), "{batch}");
    let item = ok(butler, "distill.evidence", json!({"batchId": batch_id, "lease": lease, "itemId": items[0]}), false);
    assert_eq!(item["item"]["id"], items[0].as_str());
    let mut results = Vec::new();
    for submission in submissions {
        let mut args = submission.clone();
        args["batchId"] = batch_id.clone();
        args["lease"] = lease.clone();
        args["evidence"] = json!([items[0]]);
        results.push(ok(butler, "candidate.submit", args, false));
    }
    let ids: Vec<Value> = results.iter().map(|r| r["id"].clone()).collect();
    let done = ok(
        butler,
        "distill.complete",
        json!({"batchId": batch_id, "lease": lease, "candidates": ids, "zeroReason": if ids.is_empty() { json!("nothing new") } else { Value::Null }}),
        false,
    );
    assert_eq!(done["covered"].as_u64(), Some(items.len() as u64));
    results
}

fn decide(butler: &Butler, verb: &str, candidate: &Value, key: &str) -> (u16, Value) {
    let id = candidate["id"].clone();
    let prepared = ok(butler, "review.prepare", json!({"id": id}), true);
    let mut args = json!({"id": id, "revision": prepared["revision"], "contentHash": prepared["contentHash"], "token": prepared["token"], "idempotencyKey": key});
    if verb == "reject" {
        args["reason"] = json!("not true any more");
    }
    act(butler, &format!("review.{verb}"), args, true)
}

fn knowledge(title: &str, body: &str) -> Value {
    json!({"kind": "knowledge", "title": title, "summary": format!("{title} in one line"), "body": body, "appliesTo": "this repo", "tags": ["loop"]})
}

#[test]
fn the_whole_loop_from_observation_to_a_searchable_card() {
    let (butler, _dir) = started();
    let w = butler.workdir.clone();
    std::fs::create_dir_all(w.join("docs")).expect("mkdir");
    std::fs::write(w.join("docs/build.md"), "Build with   cargo build --release\nand test.").expect("write");
    observe(&butler, "The release build command is cargo build --release.");

    let submitted = distill(
        &butler,
        &[json!({"op": "create", "card": knowledge("Release builds", "Use `cargo build --release`."),
                 "checks": [{"type": "path", "path": "docs/build.md"}, {"type": "quote", "path": "docs/build.md", "text": "cargo build\n--release"}]})],
    );
    let candidate = &submitted[0];
    assert!(
        candidate["id"].is_string() && candidate["revision"] == 1 && candidate["contentHash"].is_string(),
        "{candidate}"
    );

    let list = ok(&butler, "review.list", json!({}), false);
    let listed = &list["candidates"][0];
    assert_eq!(listed["status"], "pending");
    assert_eq!(listed["card"]["title"], "Release builds");
    assert!(!list.to_string().contains("\"lease\""), "no lease token outside claim: {list}");

    let prepared = ok(&butler, "review.prepare", json!({"id": candidate["id"]}), true);
    let approve = json!({"id": candidate["id"], "revision": prepared["revision"], "contentHash": prepared["contentHash"],
                         "token": prepared["token"], "idempotencyKey": "loop-approve-1"});
    let (status, approved) = act(&butler, "review.approve", approve.clone(), true);
    assert_eq!(status, 200, "{approved}");
    let card_id = approved["data"]["cardId"].as_str().expect("card id").to_owned();
    assert_eq!(approved["data"]["revision"], 1);
    let file = w.join(format!("self/knowledge/{card_id}.md"));
    let text = std::fs::read_to_string(&file).expect("card file");
    assert!(
        text.starts_with("---\n") && text.contains("title: \"Release builds\"") && text.contains("status: \"active\""),
        "{text}"
    );

    let found = ok(&butler, "cards.search", json!({"query": "release"}), false);
    assert_eq!(found["cards"][0]["id"], card_id.as_str());
    assert_eq!(
        found["cards"][0].as_object().expect("entry").keys().cloned().collect::<Vec<_>>().len(),
        7,
        "index fields only: {found}"
    );
    let read = ok(&butler, "cards.read", json!({"id": card_id}), false);
    assert_eq!(read["card"]["body"], "Use `cargo build --release`.");
    for hidden in ["evidence", "contentHash", "checks", "path"] {
        assert!(read["card"].get(hidden).is_none(), "{hidden} must not reach consumers: {read}");
    }
    let context = std::fs::read_to_string(w.join("self/build/context.md")).expect("context built on approval");
    assert!(context.contains(&card_id) && !context.contains("Use `cargo build"), "index lines only: {context}");

    // A replay returns the first answer; the decided candidate is stale for anything else.
    let (status, replay) = act(&butler, "review.approve", approve, true);
    assert_eq!((status, &replay["data"]), (200, &approved["data"]));
    let (status, body) = act(&butler, "review.prepare", json!({"id": candidate["id"]}), true);
    assert_error(status, &body, 409, "stale_candidate");

    // Validity: delete the file → suspended; restore → back. The card file never changes.
    let bytes = std::fs::read(&file).expect("read card");
    std::fs::rename(w.join("docs/build.md"), w.join("docs/build.bak")).expect("move away");
    let (status, body) = act(&butler, "cards.read", json!({"id": card_id}), false);
    assert_error(status, &body, 404, "card_unavailable");
    assert!(
        ok(&butler, "cards.search", json!({"query": "release"}), false)["cards"].as_array().expect("cards").is_empty()
    );
    std::fs::rename(w.join("docs/build.bak"), w.join("docs/build.md")).expect("restore");
    ok(&butler, "cards.read", json!({"id": card_id}), false);
    // Edit the quoted text away → suspended again; put it back → restored.
    std::fs::write(w.join("docs/build.md"), "Build with make.").expect("edit");
    let refreshed = ok(&butler, "validity.refresh", json!({}), false);
    assert_eq!(refreshed["suspended"], 1, "{refreshed}");
    let (status, body) = act(&butler, "cards.read", json!({"id": card_id}), false);
    assert_error(status, &body, 404, "card_unavailable");
    std::fs::write(w.join("docs/build.md"), "Build:\n cargo   build --release").expect("edit back");
    let refreshed = ok(&butler, "validity.refresh", json!({}), false);
    assert_eq!(refreshed["restored"], 1, "{refreshed}");
    assert_eq!(std::fs::read(&file).expect("read card"), bytes, "validity never rewrites the card file");
}

#[test]
fn check_paths_cannot_escape_the_validity_root() {
    let (butler, dir) = started();
    let w = butler.workdir.clone();
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.txt"), "outside").expect("write");
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), w.join("link-out")).expect("symlink");
    std::os::unix::fs::symlink(w.join("link-out"), w.join("chain")).expect("symlink chain");
    std::fs::create_dir_all(w.join("a-dir")).expect("mkdir");
    let _ = dir;
    for (path, code) in [("../x", "invalid_check"), ("/etc/passwd", "invalid_check"), ("docs/../../x", "invalid_check")]
    {
        let (status, body) = act(&butler, "validity.check", json!({"checks": [{"type": "path", "path": path}]}), true);
        assert_error(status, &body, 400, code);
    }
    for path in ["link-out", "chain", "a-dir", "missing.txt"] {
        let result = ok(&butler, "validity.check", json!({"checks": [{"type": "path", "path": path}]}), true);
        assert_eq!(result["ok"], false, "{path}: {result}");
    }
    let result = ok(
        &butler,
        "validity.check",
        json!({"checks": [{"type": "quote", "path": "link-out", "text": "outside"}]}),
        true,
    );
    assert_eq!(result["ok"], false, "a symlink leaving the root is not followed: {result}");
}

#[test]
fn conflicts_suspend_the_target_until_the_owner_decides() {
    let (butler, _dir) = started();
    observe(&butler, "A fact worth a card.");
    let created = distill(&butler, &[json!({"op": "create", "card": knowledge("Fact card", "The fact.")})]);
    let (status, approved) = decide(&butler, "approve", &created[0], "conflict-create");
    assert_eq!(status, 200, "{approved}");
    let target = approved["data"]["cardId"].clone();

    observe(&butler, "That fact turned out wrong.");
    let revision = distill(
        &butler,
        &[
            json!({"op": "revise", "target": target, "card": knowledge("Fact card", "The corrected fact."), "conflict": {"reason": "contradicted"}}),
        ],
    );
    let (status, body) = act(&butler, "cards.read", json!({"id": target}), false);
    assert_error(status, &body, 404, "card_unavailable");
    let (status, _) = decide(&butler, "reject", &revision[0], "conflict-reject");
    assert_eq!(status, 200);
    let read = ok(&butler, "cards.read", json!({"id": target}), false);
    assert_eq!(read["card"]["body"], "The fact.", "released on rejection");

    observe(&butler, "Really wrong this time.");
    let revision = distill(
        &butler,
        &[
            json!({"op": "revise", "target": target, "card": knowledge("Fact card", "The corrected fact."), "conflict": {"reason": "contradicted"}}),
        ],
    );
    assert_eq!(act(&butler, "cards.read", json!({"id": target}), false).0, 404);
    let (status, approved) = decide(&butler, "approve", &revision[0], "conflict-approve");
    assert_eq!(status, 200, "{approved}");
    let read = ok(&butler, "cards.read", json!({"id": target}), false);
    assert_eq!(
        (&read["card"]["body"], &read["card"]["revision"]),
        (&json!("The corrected fact."), &json!(2)),
        "released by the approved revision"
    );
}

#[test]
fn twelve_concurrent_approvals_with_one_key_make_exactly_one_card() {
    let (butler, _dir) = started();
    observe(&butler, "Concurrency matters.");
    let submitted =
        distill(&butler, &[json!({"op": "create", "card": knowledge("Concurrent approvals", "One card only.")})]);
    let id = submitted[0]["id"].clone();
    let prepared = ok(&butler, "review.prepare", json!({"id": id}), true);
    let args = json!({"id": id, "revision": prepared["revision"], "contentHash": prepared["contentHash"], "token": prepared["token"], "idempotencyKey": "same-key"});
    let answers: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let calls: Vec<_> =
            (0..12).map(|_| scope.spawn(|| act(&butler, "review.approve", args.clone(), true))).collect();
        calls.into_iter().map(|c| c.join().expect("join")).collect()
    });
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["data"], answers[0].1["data"], "every replay gets the first answer");
    }
    let cards = std::fs::read_dir(butler.workdir.join("self/knowledge")).expect("knowledge").count();
    assert_eq!(cards, 1, "exactly one card file");
}

#[test]
fn leases_expire() {
    let (butler, _dir) = started();
    observe(&butler, "Something to distill.");
    let batch = ok(&butler, "distill.claim", json!({"leaseSeconds": 1}), false);
    std::thread::sleep(Duration::from_millis(1500));
    let item = batch["items"][0]["id"].clone();
    let (status, body) = act(
        &butler,
        "distill.evidence",
        json!({"batchId": batch["batchId"], "lease": batch["lease"], "itemId": item}),
        false,
    );
    assert_error(status, &body, 409, "lease_expired");
    let (status, body) = act(
        &butler,
        "candidate.submit",
        json!({"batchId": batch["batchId"], "lease": batch["lease"], "op": "create", "card": knowledge("Late", "Too late."), "evidence": [item]}),
        false,
    );
    assert_error(status, &body, 409, "lease_expired");
    // The items are claimable again.
    let again = ok(&butler, "distill.claim", json!({}), false);
    assert_eq!(again["items"][0]["id"], item);
}

#[test]
fn observations_are_validated_exactly() {
    let (butler, _dir) = started();
    for bad in [
        json!({"source": "Bad Source", "text": "x"}),
        json!({"source": "ok", "text": ""}),
        json!({"source": "ok", "text": "x".repeat(2001)}),
        json!({"source": "ok", "type": "gossip", "text": "x"}),
        json!({"source": "ok", "text": "x", "tags": ["a,b"]}),
        json!({"source": "ok", "text": "x", "tags": (0..33).map(|i| i.to_string()).collect::<Vec<_>>()}),
        json!({"source": "ok", "text": "x", "ref": "r".repeat(501)}),
        json!({"text": "x"}),
    ] {
        let (status, body) = butler.post_json("/observe", &bad, &[]);
        assert_error(status, &body, 400, "invalid_observation");
    }
    observe(&butler, "fine");
    let spool = std::fs::read_dir(butler.workdir.join("self/journal/spool")).expect("spool").count();
    assert_eq!(spool, 1);
}

#[test]
fn a_killed_host_leaves_no_torn_card_and_no_half_applied_candidate() {
    let (butler, dir) = started();
    for i in 0..8 {
        observe(&butler, &format!("fact number {i}"));
    }
    let submissions: Vec<Value> = (0..8)
        .map(|i| json!({"op": "create", "card": knowledge(&format!("Card {i}"), &format!("Body {i}"))}))
        .collect();
    let candidates = distill(&butler, &submissions);
    let workdir = butler.workdir.clone();
    // Approve in a loop on another thread and kill the host with SIGKILL in the middle.
    std::thread::scope(|scope| {
        let approving = scope.spawn(|| {
            for (i, candidate) in candidates.iter().enumerate() {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    decide(&butler, "approve", candidate, &format!("crash-{i}"))
                }));
            }
        });
        std::thread::sleep(Duration::from_millis(150));
        let pid = std::fs::read_to_string(workdir.join(".butler/host.json")).expect("host.json");
        let pid: Value = serde_json::from_str(&pid).expect("json");
        let status =
            std::process::Command::new("kill").arg("-KILL").arg(pid["pid"].to_string()).status().expect("kill");
        assert!(status.success());
        let _ = approving.join();
    });
    // A write cut short by the kill may leave its temp file; the store never reads one.
    assert_store_consistent(&workdir, Temps::Allowed);
    // A restarted host finishes or keeps each candidate; the store stays consistent.
    drop(butler);
    let butler = Butler::start(&workdir);
    butler.wait_ready("cards");
    for (i, candidate) in candidates.iter().enumerate() {
        let (status, prepared) = act(&butler, "review.prepare", json!({"id": candidate["id"]}), true);
        if status == 409 {
            continue; // decided before the kill
        }
        assert_eq!(status, 200, "{prepared}");
        let p = &prepared["data"];
        let args = json!({"id": candidate["id"], "revision": p["revision"], "contentHash": p["contentHash"], "token": p["token"], "idempotencyKey": format!("crash-{i}")});
        let (status, body) = act(&butler, "review.approve", args, true);
        assert_eq!(status, 200, "an interrupted or untouched approval completes: {body}");
    }
    // Finishing every approval rewrote each file a temp could belong to, through that temp.
    assert_store_consistent(&workdir, Temps::None);
    drop(dir);
}

/// Whether a write's temp file (`.<name>.tmp`) may lie beside the store's files.
#[derive(Clone, Copy, PartialEq)]
enum Temps {
    Allowed,
    None,
}

/// True for a temp file; fails when temps are not allowed.
fn is_temp(name: &str, temps: Temps) -> bool {
    let temp = name.starts_with('.') && name.ends_with(".tmp");
    assert!(!temp || temps == Temps::Allowed, "a temp file was left behind: {name}");
    temp
}

/// Every card file parses and every approved candidate's card exists at its revision.
fn assert_store_consistent(workdir: &Path, temps: Temps) {
    let knowledge = workdir.join("self/knowledge");
    let mut card_ids = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&knowledge) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_temp(&name, temps) {
                continue;
            }
            let text = std::fs::read_to_string(entry.path()).expect("card readable");
            assert!(text.starts_with("---\n") && text.matches("\n---\n").count() >= 1, "torn card {name}: {text}");
            card_ids.push(name.trim_end_matches(".md").to_owned());
        }
    }
    for entry in std::fs::read_dir(workdir.join("self/candidates")).expect("candidates").flatten() {
        if is_temp(&entry.file_name().to_string_lossy(), temps) {
            continue;
        }
        let candidate: Value =
            serde_json::from_slice(&std::fs::read(entry.path()).expect("read")).expect("candidate parses");
        if candidate["status"] == "approved" {
            let card = candidate["applied"]["cardId"].as_str().expect("applied card id");
            assert!(card_ids.iter().any(|c| c == card), "approved candidate without its card: {candidate}");
        }
    }
}

fn cli(workdir: &Path, args: &[&str]) -> (i32, String, String) {
    let home = tempfile::tempdir().expect("home");
    let output =
        crate::util::butler_command(home.path()).args(args).arg("--workdir").arg(workdir).output().expect("run butler");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_cli_reviews_and_sets_checks_as_the_owner() {
    let (butler, _dir) = started();
    let w = butler.workdir.clone();
    let (code, out, err) =
        cli(&w, &["pipeline", "journal.intake", "--args", r#"{"source":"cli","text":"from the terminal"}"#]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"id\""), "{out}");
    let submitted = distill(
        &butler,
        &[
            json!({"op": "create", "card": knowledge("CLI card", "Made from the terminal.")}),
            json!({"op": "create", "card": knowledge("Rejected card", "Not wanted.")}),
        ],
    );

    let (code, out, err) = cli(&w, &["review", "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("pending") && out.contains("CLI card") && out.contains("Rejected card"), "{out}");
    // `review approve` runs the confirming `review.prepare` first and carries its token.
    let (code, out, err) = cli(&w, &["review", "approve", submitted[0]["id"].as_str().expect("id")]);
    assert_eq!(code, 0, "{err}");
    let approved: Value = serde_json::from_str(&out).expect("the answer as JSON");
    assert_eq!(approved["revision"], 1, "{out}");
    let (code, out, err) =
        cli(&w, &["review", "reject", submitted[1]["id"].as_str().expect("id"), "--reason", "duplicate"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).expect("JSON")["status"], "rejected", "{out}");
    let (code, _, err) = cli(&w, &["review", "approve", submitted[1]["id"].as_str().expect("id")]);
    assert_eq!(code, 1);
    assert!(err.contains("stale_candidate"), "{err}");

    let card = ok(&butler, "cards.search", json!({"query": "terminal"}), false)["cards"][0].clone();
    std::fs::write(w.join("notes.md"), "made from the terminal").expect("write");
    let checks = r#"[{"type":"quote","path":"notes.md","text":"from the   terminal"}]"#;
    let (code, out, err) =
        cli(&w, &["validity", "set-checks", card["id"].as_str().expect("id"), "--revision", "1", "--checks", checks]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("notes.md"), "{out}");
    let (code, _, err) =
        cli(&w, &["validity", "set-checks", card["id"].as_str().expect("id"), "--revision", "7", "--checks", checks]);
    assert_eq!(code, 1);
    assert!(err.contains("stale_revision"), "{err}");
    std::fs::remove_file(w.join("notes.md")).expect("rm");
    let (code, out, err) = cli(&w, &["validity", "refresh"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).expect("JSON")["suspended"], 1, "{out}");
    // A word that is neither a subcommand nor a served prefix says so.
    let (code, _, err) = cli(&w, &["reveiw", "list"]);
    assert_eq!(code, 1);
    assert!(err.contains("neither a butler command") && err.contains("review"), "{err}");
    // The HTTP pipeline never runs the operator command, even with the owner token.
    let token = format!("Bearer {}", butler.owner_token());
    let (status, body) = butler.post_json(
        "/pipeline",
        &json!({"action": "validity.set-checks", "args": {}}),
        &[("authorization", &token)],
    );
    assert_error(status, &body, 403, "operator_only");
}

/// The compiled context keeps to the owner's `inject.maxChars` from the root config — in the
/// rebuilds that follow an approval or a rejection too, not only when a caller passes a
/// limit — and the profile is never cut.
#[test]
fn the_context_keeps_to_inject_max_chars_from_the_root_config() {
    const MAX: usize = 400;
    let (butler, _dir) = started();
    let workdir = butler.workdir.clone();
    butler.stop();
    let config_path = workdir.join("butler.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&config_path).expect("config")).expect("json");
    config["inject"] = json!({"maxChars": MAX});
    std::fs::write(&config_path, serde_json::to_vec_pretty(&config).expect("json")).expect("write config");
    let profile = |body: &str| {
        format!(
            "---\nid: \"profile\"\nkind: \"profile\"\ntitle: \"Owner\"\nsummary: \"Who I am\"\nstatus: \"active\"\nrevision: 1\n---\n\n{body}\n"
        )
    };
    let short_profile = "I like short answers.";
    std::fs::write(workdir.join("self/profile.md"), profile(short_profile)).expect("profile");
    let butler = Butler::start(&workdir);
    for id in ["journal", "distill", "validity", "cards"] {
        butler.wait_ready(id);
    }
    let context = || std::fs::read_to_string(workdir.join("self/build/context.md")).expect("context");

    observe(&butler, "Nine facts about this repo.");
    let submissions: Vec<Value> =
        (0..9).map(|i| json!({"op": "create", "card": knowledge(&format!("Fact number {i}"), "Body text.")})).collect();
    let candidates = distill(&butler, &submissions);
    for (i, candidate) in candidates[..8].iter().enumerate() {
        let (status, body) = decide(&butler, "approve", candidate, &format!("approve-{i}"));
        assert_eq!(status, 200, "{body}");
    }
    // Rebuilt after the approvals: within the limit, the rest noted.
    let text = context();
    assert!(text.chars().count() <= MAX, "{} chars: {text}", text.chars().count());
    assert!(text.contains(short_profile) && text.contains("more cards not shown)"), "{text}");

    // A caller's limit holds for its own build only; the next rebuild (after a rejection)
    // is back to the owner's.
    let all = ok(&butler, "context.build", json!({"maxChars": 100_000}), false);
    assert_eq!((&all["cards"], &all["omitted"]), (&json!(8), &json!(0)), "{all}");
    let (status, body) = decide(&butler, "reject", &candidates[8], "reject-8");
    assert_eq!(status, 200, "{body}");
    let text = context();
    assert!(text.chars().count() <= MAX && text.contains("more cards not shown)"), "{text}");

    // A profile longer than the limit is kept whole; no card fits beside it.
    let long_profile = "I like short answers and small commits. ".repeat(20);
    std::fs::write(workdir.join("self/profile.md"), profile(&long_profile)).expect("profile");
    let built = ok(&butler, "context.build", json!({}), false);
    assert_eq!((&built["cards"], &built["omitted"]), (&json!(0), &json!(8)), "{built}");
    let text = context();
    assert!(text.contains(long_profile.trim()) && text.contains("(8 more cards not shown)"), "{text}");
}

/// A revision records the revision of the card it revises; once another revision of that
/// card is approved, approving it would undo that one unseen, so it is `stale_candidate`.
#[test]
fn a_revision_of_a_card_revised_since_is_stale() {
    let (butler, _dir) = started();
    observe(&butler, "A fact worth a card.");
    let created = distill(&butler, &[json!({"op": "create", "card": knowledge("Base card", "Version one.")})]);
    let (status, approved) = decide(&butler, "approve", &created[0], "base-create");
    assert_eq!(status, 200, "{approved}");
    let target = approved["data"]["cardId"].clone();

    observe(&butler, "Two takes on the same card.");
    let revisions = distill(
        &butler,
        &[
            json!({"op": "revise", "target": target, "card": knowledge("Base card", "Version two, first take.")}),
            json!({"op": "revise", "target": target, "card": knowledge("Base card", "Version two, second take.")}),
        ],
    );
    let listed = ok(&butler, "review.list", json!({}), false);
    let bases: Vec<&Value> = listed["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .filter(|c| c["op"] == "revise")
        .map(|c| &c["baseRevision"])
        .collect();
    assert_eq!(bases, [&json!(1), &json!(1)], "{listed}");

    let (status, body) = decide(&butler, "approve", &revisions[0], "first-take");
    assert_eq!(status, 200, "{body}");
    let (status, body) = decide(&butler, "approve", &revisions[1], "second-take");
    assert_error(status, &body, 409, "stale_candidate");
    let read = ok(&butler, "cards.read", json!({"id": target}), false);
    assert_eq!((&read["card"]["body"], &read["card"]["revision"]), (&json!("Version two, first take."), &json!(2)));
    // The owner can still turn it down.
    let (status, body) = decide(&butler, "reject", &revisions[1], "second-take-rejected");
    assert_eq!(status, 200, "{body}");
}

/// A check that does not pass tells the caller what a file does not hold, so `candidate.submit`
/// declares `failureLimit`: ten `checks_failed` a minute per caller, then `too_many_failures`
/// (429) whatever the next submission holds, through any door; other callers are not held
/// back, and each counted failure is in the host log with its caller.
#[test]
fn failed_checks_are_limited_per_caller_and_recorded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("host.log");
    let butler = Butler::start_logging(&dir.path().join("instance"), "warn", &log);
    for id in ["journal", "distill", "validity", "cards"] {
        butler.wait_ready(id);
    }
    std::fs::create_dir_all(butler.workdir.join("docs")).expect("mkdir");
    std::fs::write(butler.workdir.join("docs/notes.md"), "the build uses cargo").expect("write");
    observe(&butler, "the build uses cargo");
    let batch = ok(&butler, "distill.claim", json!({"limit": 50}), false);
    let item = batch["items"][0]["id"].clone();
    let submit = |text: &str, owner: bool| {
        act(
            &butler,
            "candidate.submit",
            json!({"batchId": batch["batchId"], "lease": batch["lease"], "op": "create",
                "card": knowledge("Build tool", "The build uses cargo."), "evidence": [item],
                "checks": [{"type": "quote", "path": "docs/notes.md", "text": text}]}),
            owner,
        )
    };
    for guess in 0..10 {
        let (status, body) = submit(&format!("guess {guess}"), false);
        assert_error(status, &body, 422, "checks_failed");
    }
    // The eleventh is refused before it runs: even a submission that would pass.
    let (status, body) = submit("uses cargo", false);
    assert_error(status, &body, 429, "too_many_failures");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("try again in"), "{body}");
    // Another door buys no other budget: the distill tool on `/mcp/butler`, which any local
    // process may open, counts against the same anonymous caller.
    let mut door = crate::mcp::Client::connect(&butler, "/mcp/butler");
    let through_mcp = door.call(
        "butler__candidate_submit",
        json!({"batchId": batch["batchId"], "lease": batch["lease"], "op": "create",
            "card": knowledge("Build tool", "The build uses cargo."), "evidence": [item],
            "checks": [{"type": "quote", "path": "docs/notes.md", "text": "guess over mcp"}]}),
    );
    assert_eq!(through_mcp["isError"], true, "{through_mcp}");
    assert!(crate::mcp::text_of(&through_mcp).contains("too_many_failures"), "{through_mcp}");
    // The owner is another caller.
    let (status, body) = submit("guess owner", true);
    assert_error(status, &body, 422, "checks_failed");
    let text = std::fs::read_to_string(&log).expect("log");
    let recorded = text.lines().filter(|l| l.contains("a counted failure") && l.contains("anonymous")).count();
    assert_eq!(recorded, 10, "{text}");
    assert!(text.lines().any(|l| l.contains("a counted failure") && l.contains("caller=\"owner\"")), "{text}");
}

/// A claim takes only the sources and types it lists; without lists, those the root config
/// names (`distill.sources` / `distill.types`, granted to the faculty in a new instance).
#[test]
fn a_claim_takes_only_the_sources_and_types_asked_for_or_configured() {
    let (first, dir) = started();
    let workdir = first.workdir.clone();
    assert!(first.stop().success());
    let path = workdir.join("butler.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&path).expect("config")).expect("json");
    assert_eq!(config["faculties"]["distill"]["config"], json!(["distill"]), "a new instance grants the key");
    config["distill"] = json!({"types": ["fact", "decision"]});
    std::fs::write(&path, config.to_string()).expect("write config");
    let butler = Butler::start(&workdir);
    for id in ["journal", "distill", "validity", "cards"] {
        butler.wait_ready(id);
    }
    let post = |source: &str, kind: &str, text: &str| {
        let (status, body) = butler.post_json("/observe", &json!({"source": source, "type": kind, "text": text}), &[]);
        assert_eq!(status, 202, "{body}");
    };
    post("test-agent", "fact", "A fact from the agent.");
    post("test-agent", "error", "An error from the agent.");
    post("other", "decision", "A decision elsewhere.");
    let texts = |batch: &Value| -> Vec<String> {
        batch["items"].as_array().into_iter().flatten().filter_map(|i| i["text"].as_str()).map(str::to_owned).collect()
    };
    // The caller's lists.
    let errors = ok(&butler, "distill.claim", json!({"sources": ["test-agent"], "types": ["error"]}), false);
    assert_eq!(texts(&errors), ["An error from the agent."]);
    // The root config's default: facts and decisions, from any source.
    let rest = ok(&butler, "distill.claim", json!({}), false);
    assert_eq!(texts(&rest), ["A fact from the agent.", "A decision elsewhere."]);
    let (status, body) = act(&butler, "distill.claim", json!({"types": []}), false);
    assert_error(status, &body, 400, "invalid_args");
    drop(dir);
}

/// The owner's notification command hears of new candidates once per burst (count and
/// titles) and of MCP tools held for approval; what was there at start is not news, and a
/// command that fails is logged without stopping the next message.
#[test]
fn the_notification_command_is_told_of_a_burst_of_candidates_and_of_held_tools() {
    let out = tempfile::tempdir().expect("dir");
    let received = out.path().join("received.jsonl");
    let failing = out.path().join("failed-once");
    // Fails the first time (exit 3, nothing kept), then appends each message it reads.
    let script = format!(
        "if [ ! -e '{f}' ]; then : > '{f}'; cat > /dev/null; exit 3; fi; cat >> '{r}'",
        f = failing.display(),
        r = received.display()
    );
    let (butler, _dir) = Butler::fresh_with_config(|config| {
        config["notification"] = json!({"command": ["sh", "-c", script]});
        config["mcp"]["quarantine"] = json!(true);
    });
    for id in ["journal", "distill", "validity", "cards"] {
        butler.wait_ready(id);
    }
    // A provider whose tools are held: the first message (the command fails it).
    let log = out.path().join("fake.log");
    write_manifest(&butler.workdir, "tools/fake", &crate::mcp::fake("fake", &log, json!({})));
    // A client's list starts the provider, whose tools are then held (reading the
    // quarantine's queue would start nothing).
    let client = crate::mcp::Client::connect(&butler, "/mcp");
    let lines = |_: &Butler| -> Vec<Value> {
        let _ = client.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}), &[]);
        std::fs::read_to_string(&received)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    butler_test_support::wait_until(Duration::from_secs(60), "the failed first notification", || {
        let _ = lines(&butler);
        failing.exists()
    });

    observe(&butler, "Two things worth cards.");
    distill(
        &butler,
        &[
            json!({"op": "create", "card": knowledge("First card", "One.")}),
            json!({"op": "create", "card": knowledge("Second card", "Two.")}),
        ],
    );
    let mut messages = Vec::new();
    butler_test_support::wait_until(Duration::from_secs(60), "the review notification", || {
        messages = lines(&butler);
        messages.iter().any(|m| m["kind"] == "review")
    });
    let reviews: Vec<&Value> = messages.iter().filter(|m| m["kind"] == "review").collect();
    assert_eq!(reviews.len(), 1, "one message for the burst: {messages:?}");
    assert_eq!((&reviews[0]["count"], &reviews[0]["new"]), (&json!(2), &json!(2)), "{messages:?}");
    assert_eq!(reviews[0]["titles"], json!(["First card", "Second card"]));
    // The log says what became of each (written once the command has exited).
    let log = butler.workdir.join(".butler/logs/notifications.log");
    let mut notes = String::new();
    butler_test_support::wait_until(Duration::from_secs(30), "the log of the sent review", || {
        notes = std::fs::read_to_string(&log).unwrap_or_default();
        notes.contains("review: sent")
    });
    assert!(notes.contains("quarantine: the notification command failed (exit status: 3)"), "{notes}");
}

/// A batch whose lease was lost (its agent crashed) is listed among the open batches and
/// released by the owner: its items can be claimed again at once, and its lease is dead.
#[test]
fn the_owner_releases_a_batch_whose_lease_was_lost() {
    let (butler, _dir) = started();
    observe(&butler, "Held by an agent that crashed.");
    let lost = ok(&butler, "distill.claim", json!({}), false);
    let batch_id = lost["batchId"].clone();
    let nothing = ok(&butler, "distill.claim", json!({}), false);
    assert!(nothing["batchId"].is_null(), "the item is held: {nothing}");

    let open = ok(&butler, "distill.batches", json!({}), false);
    assert_eq!(open["batches"][0]["batchId"], batch_id, "{open}");
    assert_eq!(open["batches"][0]["items"], 1);
    assert!(!open.to_string().contains(lost["lease"].as_str().unwrap_or("?")), "no lease is listed");

    let (status, body) = act(&butler, "distill.release", json!({"batchId": batch_id}), false);
    assert_error(status, &body, 403, "owner_required");
    let released = ok(&butler, "distill.release", json!({"batchId": batch_id}), true);
    assert_eq!((&released["released"], &released["items"]), (&batch_id, &json!(1)));
    let (status, body) = act(&butler, "distill.release", json!({"batchId": batch_id}), true);
    assert_error(status, &body, 409, "batch_not_active");
    assert_eq!(ok(&butler, "distill.batches", json!({}), false)["batches"], json!([]));

    let again = ok(&butler, "distill.claim", json!({}), false);
    assert_eq!(again["items"][0]["id"], lost["items"][0]["id"], "free at once");
    let (status, body) = act(
        &butler,
        "distill.evidence",
        json!({"batchId": batch_id, "lease": lost["lease"], "itemId": lost["items"][0]["id"]}),
        false,
    );
    assert_error(status, &body, 403, "lease_invalid");
}

/// The owner's own edit and archive of a card from the library: owner only, against the
/// card's current revision and hash (409 otherwise, nothing written), a replay answered once,
/// and the history saying who wrote each revision.
#[test]
fn the_owner_edits_and_archives_a_card_under_the_revision_rule() {
    let (butler, _dir) = started();
    std::fs::create_dir_all(butler.workdir.join("docs")).expect("mkdir");
    std::fs::write(butler.workdir.join("docs/build.md"), "Build with cargo.\n").expect("doc");
    observe(&butler, "Builds use cargo.");
    let created = distill(
        &butler,
        &[json!({"op": "create", "card": knowledge("Builds", "Use cargo."),
                 "checks": [{"type": "quote", "path": "docs/build.md", "text": "cargo"}]})],
    );
    let (status, approved) = decide(&butler, "approve", &created[0], "builds-create");
    assert_eq!(status, 200, "{approved}");
    let id = approved["data"]["cardId"].clone();

    // Only the owner inspects a card: its evidence quotes the journal.
    let (status, body) = act(&butler, "cards.inspect", json!({"id": id}), false);
    assert_error(status, &body, 403, "owner_required");
    let (status, body) = act(&butler, "cards.inspect", json!({"id": "no-such-card"}), true);
    assert_error(status, &body, 404, "not_found");
    let inspected = ok(&butler, "cards.inspect", json!({"id": id}), true);
    assert_eq!((&inspected["card"]["revision"], &inspected["card"]["body"]), (&json!(1), &json!("Use cargo.")));
    assert_eq!(inspected["checks"][0]["ok"], true, "{inspected}");
    assert_eq!(inspected["evidence"][0]["text"], "Builds use cargo.", "{inspected}");
    assert_eq!(inspected["history"][0]["byOwner"], false, "{inspected}");
    let hash = inspected["card"]["contentHash"].clone();

    let edit = json!({"id": id, "revision": 1, "contentHash": hash,
                      "card": knowledge("Builds", "Use cargo, always with --locked."), "idempotencyKey": "edit-1"});
    let with = |field: &str, value: Value| {
        let mut args = edit.clone();
        args[field] = value;
        args
    };
    let (status, body) = act(&butler, "cards.edit", edit.clone(), false);
    assert_error(status, &body, 403, "owner_required");
    let (status, body) = act(&butler, "cards.edit", with("revision", json!(0)), true);
    assert_error(status, &body, 409, "stale_card");
    let (status, body) = act(&butler, "cards.edit", with("contentHash", json!("0".repeat(64))), true);
    assert_error(status, &body, 409, "stale_card");
    let (status, body) = act(
        &butler,
        "cards.edit",
        with("card", json!({"kind": "rule", "title": "Builds", "summary": "s", "body": "b"})),
        true,
    );
    assert_error(status, &body, 400, "invalid_args");
    let (status, body) = act(&butler, "cards.edit", with("card", knowledge("Builds", "Use cargo.")), true);
    assert_error(status, &body, 400, "invalid_args");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("changes nothing")), "{body}");
    let read = ok(&butler, "cards.read", json!({"id": id}), false);
    assert_eq!(read["card"]["revision"], 1, "nothing refused was written: {read}");

    let first = ok(&butler, "cards.edit", edit.clone(), true);
    assert_eq!((&first["cardId"], &first["revision"]), (&id, &json!(2)), "{first}");
    assert_eq!(ok(&butler, "cards.edit", edit.clone(), true), first, "a replay answers the first answer");
    let (status, body) = act(&butler, "cards.edit", with("card", knowledge("Builds", "Something else.")), true);
    assert_error(status, &body, 400, "invalid_args");
    let (status, body) = act(&butler, "cards.edit", with("idempotencyKey", json!("edit-2")), true);
    assert_error(status, &body, 409, "stale_card");
    let read = ok(&butler, "cards.read", json!({"id": id}), false);
    assert_eq!(
        (&read["card"]["revision"], &read["card"]["body"]),
        (&json!(2), &json!("Use cargo, always with --locked."))
    );

    let archive = json!({"id": id, "revision": 1, "contentHash": hash, "idempotencyKey": "archive-1"});
    let (status, body) = act(&butler, "cards.archive", archive, true);
    assert_error(status, &body, 409, "stale_card");
    let archive = json!({"id": id, "revision": 2, "contentHash": first["contentHash"], "idempotencyKey": "archive-2"});
    let (status, body) = act(&butler, "cards.archive", archive.clone(), false);
    assert_error(status, &body, 403, "owner_required");
    let archived = ok(&butler, "cards.archive", archive, true);
    assert_eq!((&archived["revision"], &archived["contentHash"]), (&json!(3), &first["contentHash"]), "{archived}");
    let (status, body) = act(&butler, "cards.read", json!({"id": id}), false);
    assert_error(status, &body, 404, "card_unavailable");
    let edit_archived = json!({"id": id, "revision": 3, "contentHash": first["contentHash"],
                               "card": knowledge("Builds", "Back again."), "idempotencyKey": "edit-3"});
    let (status, body) = act(&butler, "cards.edit", edit_archived, true);
    assert_error(status, &body, 409, "stale_card");

    let inspected = ok(&butler, "cards.inspect", json!({"id": id}), true);
    assert_eq!((&inspected["card"]["status"], &inspected["card"]["revision"]), (&json!("archived"), &json!(3)));
    let history: Vec<(Value, Value, Value)> = inspected["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|h| (h["op"].clone(), h["revision"].clone(), h["byOwner"].clone()))
        .collect();
    assert_eq!(
        history,
        [
            (json!("create"), json!(1), json!(false)),
            (json!("revise"), json!(2), json!(true)),
            (json!("archive"), json!(3), json!(true))
        ],
        "{inspected}"
    );
    assert_eq!(inspected["checks"][0]["ok"], true, "the checks stay with the card: {inspected}");
    assert_eq!(inspected["evidence"][0]["text"], "Builds use cargo.", "{inspected}");
    let listed = ok(&butler, "review.list", json!({}), false);
    let by_owner = listed["candidates"].as_array().expect("candidates").iter().filter(|c| c["byOwner"] == true).count();
    assert_eq!(by_owner, 2, "{listed}");
    let file = std::fs::read_to_string(butler.workdir.join(format!("self/knowledge/{}.md", id.as_str().expect("id"))))
        .expect("card file");
    assert!(file.contains("revision: 3") && file.contains("archived") && file.contains("--locked"), "{file}");
}
