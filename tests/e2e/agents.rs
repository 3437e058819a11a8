//! The agent backend and delegations, end to end with a scripted agent on the official
//! Python SDK (`tests/providers/scripted_agent.py`): the agent reads its task on stdin,
//! connects to its session's own MCP endpoint with the session's token, and follows the
//! script the test puts in the delegation's input.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::Butler;

/// A tool extension whose MCP server is the test's fake provider, with three delegations.
pub(crate) fn write_judge(workdir: &Path) {
    let log = workdir.join("fake.log");
    let mut manifest = crate::mcp::fake("judge", &log, json!({}));
    let result = json!({
        "type": "object",
        "required": ["verdict", "score"],
        "properties": {
            "verdict": {"type": "string", "enum": ["keep", "drop"], "description": "what to do"},
            "score": {"type": "integer", "minimum": 0, "maximum": 10},
            "note": {"type": "string", "maxLength": 20},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
        }
    });
    manifest["delegations"] = json!([
        {"id": "rate", "instructions": "Rate the input.", "risk": "auto", "result": result,
         "tools": ["judge__echo"], "timeoutSec": 60},
        {"id": "approve", "instructions": "Propose a verdict.", "risk": "confirm", "result": result, "timeoutSec": 60},
        {"id": "quick", "instructions": "Be quick.", "risk": "auto", "result": result, "timeoutSec": 10},
    ]);
    let dir = workdir.join("tools/judge");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("butler.json"), manifest.to_string()).expect("manifest");
}

pub(crate) fn agent_command() -> Value {
    let python = crate::mcp::tools().join("mcp-venv/bin/python");
    json!([python, crate::mcp::root().join("tests/providers/scripted_agent.py")])
}

pub(crate) fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(90), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(crate) fn delegate(butler: &Butler, id: &str, script: Value) -> (u16, Value) {
    butler.post_json("/delegations", &json!({"extension": "judge", "id": id, "input": {"script": script}}), &[])
}

/// The lines the agent of `run` printed (its session's log).
fn agent_log(butler: &Butler, run: &str) -> String {
    let (_, run) = butler.get_json(&format!("/runs/{run}"));
    let session = run["steps"][0]["session"].as_str().unwrap_or_else(|| panic!("a session: {run}"));
    std::fs::read_to_string(butler.workdir.join(format!(".butler/logs/agent-{session}.log"))).expect("agent log")
}

fn line<'a>(log: &'a str, prefix: &str) -> &'a str {
    log.lines().find(|l| l.contains(prefix)).unwrap_or_else(|| panic!("no `{prefix}` line in:\n{log}"))
}

#[test]
fn without_an_agent_delegations_are_unavailable_and_the_rest_works() {
    let dir = crate::mcp::instance();
    write_judge(dir.path());
    let butler = Butler::start(dir.path());
    wait_for("the extension", || butler.ids().contains(&"judge".to_owned()));
    let (status, body) = delegate(&butler, "rate", json!([]));
    crate::util::assert_error(status, &body, 503, "agent_unavailable");
    let (status, body) = butler.post_json("/delegations", &json!({"extension": "nope", "id": "rate"}), &[]);
    crate::util::assert_error(status, &body, 404, "unknown_extension");
    let (status, body) = butler.post_json("/delegations", &json!({"extension": "judge", "id": "nope"}), &[]);
    crate::util::assert_error(status, &body, 404, "unknown_delegation");
    let (status, runs) = butler.get_json("/runs");
    assert_eq!((status, runs["runs"].as_array().map(Vec::len)), (200, Some(0)), "{runs}");
    assert_eq!(butler.get_json("/health").0, 200, "the rest of the host is unaffected");
}

#[test]
fn delegations_run_as_agent_sessions_with_only_their_tools() {
    let (butler, _dir) = Butler::fresh_with_config(|config| {
        config["agent"] = json!({"command": agent_command()});
        config["mcp"]["quarantine"] = json!(false);
    });
    write_judge(&butler.workdir);
    wait_for("the extension", || butler.ids().contains(&"judge".to_owned()));

    // Auto: the agent lists its tools, uses the one it may, is refused the others, corrects
    // a submission that breaks every rule, and its result reaches the caller.
    let bad = json!({"verdict": "maybe", "score": 11, "note": "x".repeat(21), "tags": ["a", "b", "c"]});
    let (status, body) = delegate(
        &butler,
        "rate",
        json!([
            {"token": true},
            {"list": true},
            {"call": "judge__echo", "arguments": {"text": "hello"}},
            {"call": "judge__env"},
            {"call": "butler__search", "arguments": {"query": "x"}},
            {"http": ["POST", "/runs/any/steps/0/confirm", {}]},
            {"submit": bad},
            {"submit": {"score": -1, "verdict": 3}},
            {"submit": {"verdict": "keep", "score": 7, "tags": ["a"]}},
        ]),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"], json!({"verdict": "keep", "score": 7, "tags": ["a"]}));
    let run = body["run"].as_str().expect("run id").to_owned();
    let log = agent_log(&butler, &run);
    assert_eq!(line(&log, "TOOLS").split("TOOLS ").nth(1), Some("butler_delegation_submit,judge__echo"));
    assert!(line(&log, "CALLED judge__echo").contains("hello"), "{log}");
    for refused in ["judge__env", "butler__search"] {
        let said = log.lines().find(|l| l.contains(&format!(" {refused}"))).expect("the call's line");
        assert!(said.contains("unknown tool") || said.contains("\"isError\": true"), "{refused} refused: {said}");
    }
    assert!(
        line(&log, "HTTP").contains("HTTP 403 {\"ok\":false,\"error\":{\"code\":\"owner_required\""),
        "a session's token is not the owner's: {log}"
    );
    let first = log.lines().find(|l| l.contains("SUBMITTED")).expect("first submission");
    for violation in [
        "/verdict: must be one of",
        "/score: must be at most 10",
        "/note: must be at most 20 characters long",
        "/tags: must have at most 2 items",
    ] {
        assert!(first.contains(violation), "{violation} in {first}");
    }
    assert!(first.contains("\"isError\": true"), "{first}");
    let second = log.lines().filter(|l| l.contains("SUBMITTED")).nth(1).expect("second submission");
    for violation in ["/verdict: must be of type string", "/score: must be at least 0"] {
        assert!(second.contains(violation), "{violation} in {second}");
    }
    let accepted = log.lines().filter(|l| l.contains("SUBMITTED")).nth(2).expect("third submission");
    assert!(accepted.contains("\"isError\": false") && accepted.contains("Result accepted"), "{accepted}");
    let (_, recorded) = butler.get_json(&format!("/runs/{run}"));
    assert_eq!((&recorded["status"], &recorded["steps"][0]["status"]), (&json!("completed"), &json!("completed")));
    assert_eq!(recorded["steps"][0]["result"]["score"], 7);
    assert!(log.contains("\"input\": {\"script\""), "the input arrives as data, apart: {log}");

    // The session's token opens its endpoint only while it runs; the owner's never does.
    let task = line(&log, "TASK");
    assert!(task.contains(&format!("/mcp/s/{}", recorded["steps"][0]["session"].as_str().expect("session"))), "{task}");
    let token = line(&log, "TOKEN").rsplit(' ').next().expect("token").to_owned();
    assert!(!task.contains(&token), "the task's line shows no token");
    let session = recorded["steps"][0]["session"].as_str().expect("session");
    let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    for bearer in [token.clone(), butler.owner_token()] {
        let auth = format!("Bearer {bearer}");
        let (status, answer) = butler.raw(
            "POST",
            &format!("/mcp/s/{session}"),
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("authorization", &auth),
            ],
            list,
        );
        assert_eq!(status, 404, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("no such agent session"), "{answer}");
    }

    // An agent that exits without submitting; one that calls no tool at all.
    let (status, body) = delegate(&butler, "rate", json!([{"exit": 3}]));
    crate::util::assert_error(status, &body, 502, "agent_exited");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("exit status: 3"), "{body}");
    let failed = body["error"]["details"]["run"].as_str().expect("the run");
    assert_eq!(butler.get_json(&format!("/runs/{failed}")).1["status"], "failed");

    // A timeout stops the agent's whole process group, its child too.
    let (status, body) = delegate(&butler, "quick", json!([{"child": true}, {"sleep": 600}]));
    crate::util::assert_error(status, &body, 504, "delegation_timeout");
    let run = body["error"]["details"]["run"].as_str().expect("the run").to_owned();
    let log = agent_log(&butler, &run);
    let child: u32 = line(&log, "CHILD").rsplit(' ').next().and_then(|p| p.trim().parse().ok()).expect("pid");
    assert!(!Path::new(&format!("/proc/{child}")).exists(), "the agent's child {child} was stopped");
}

#[test]
fn a_confirm_delegation_waits_for_the_owner() {
    let notes = tempfile::tempdir().expect("temp");
    let told = notes.path().join("told.jsonl");
    let (butler, _dir) = Butler::fresh_with_config(|config| {
        config["agent"] = json!({"command": agent_command()});
        config["mcp"]["quarantine"] = json!(false);
        config["notification"] = json!({"command": ["sh", "-c", format!("cat >> '{}'", told.display())]});
    });
    write_judge(&butler.workdir);
    wait_for("the extension", || butler.ids().contains(&"judge".to_owned()));
    let butler = std::sync::Arc::new(butler);
    let pending = |butler: &Butler| -> Option<String> {
        let (_, runs) = butler.get_json("/runs");
        runs["runs"].as_array()?.iter().find(|r| r["status"] == "awaiting_confirmation")?["id"].as_str().map(Into::into)
    };
    // What the default tools search: the validity root, never its hidden or internal parts.
    let root = &butler.workdir;
    std::fs::create_dir_all(root.join("notes")).expect("notes");
    std::fs::create_dir_all(root.join(".private")).expect("hidden");
    std::fs::write(root.join("notes/plan.md"), "# Plan\nMARK-4711 is here\n").expect("note");
    std::fs::write(root.join(".private/keys.md"), "MARK-4711 hidden\n").expect("hidden note");
    std::fs::write(root.join(".butler/leak.txt"), "MARK-4711 internal\n").expect("internal");
    let submit = json!([
        {"list": true},
        {"call": "butler__grep", "arguments": {"pattern": "MARK-\\d+"}},
        {"call": "butler__glob", "arguments": {"pattern": "**/*.md"}},
        {"submit": {"verdict": "drop", "score": 2}},
    ]);

    for (decision, reason) in [("confirm", None), ("reject", Some("not now"))] {
        let caller = {
            let (butler, submit) = (std::sync::Arc::clone(&butler), submit.clone());
            std::thread::spawn(move || delegate(&butler, "approve", submit))
        };
        let mut run = None;
        wait_for("a step awaiting confirmation", || {
            run = pending(&butler);
            run.is_some()
        });
        let run = run.expect("pending run");
        // The owner is told, through the notification command.
        wait_for("the confirmation's notification", || {
            std::fs::read_to_string(&told)
                .is_ok_and(|t| t.contains(&format!("\"run\":\"{run}\"")) && t.contains("\"kind\":\"confirm\""))
        });
        let path = format!("/runs/{run}/steps/0/{decision}");
        let body = reason.map_or_else(|| json!({}), |r| json!({"reason": r}));
        // Nobody but the owner decides: not a plain local request, not the console's headers
        // without its session (nor an agent with its session's token, above).
        let (status, refused) = butler.post_json(&path, &body, &[]);
        crate::util::assert_error(status, &refused, 403, "owner_required");
        let forged = [("origin", butler.origin.as_str()), ("sec-fetch-site", "same-origin"), ("x-butler-review", "1")];
        let (status, refused) = butler.post_json(&path, &body, &forged);
        crate::util::assert_error(status, &refused, 403, "owner_required");
        assert!(!caller.is_finished(), "the caller still waits");
        let token = format!("Bearer {}", butler.owner_token());
        let (status, decided) = butler.post_json(&path, &body, &[("authorization", &token)]);
        assert_eq!(status, 200, "{decided}");
        let (status, again) = butler.post_json(&path, &body, &[("authorization", &token)]);
        crate::util::assert_error(status, &again, 409, "not_pending");
        let (status, answer) = caller.join().expect("caller");
        match decision {
            "confirm" => {
                assert_eq!(status, 200, "{answer}");
                assert_eq!(answer["result"], json!({"verdict": "drop", "score": 2}));
            }
            _ => {
                crate::util::assert_error(status, &answer, 409, "delegation_rejected");
                assert!(answer["error"]["message"].as_str().unwrap_or_default().contains("not now"), "{answer}");
            }
        }
        // The default tools: read-only search of the validity root, and nothing else.
        let log = agent_log(&butler, &run);
        assert_eq!(
            line(&log, "TOOLS").split("TOOLS ").nth(1),
            Some("butler__glob,butler__grep,butler_delegation_submit")
        );
        let grep = line(&log, "CALLED butler__grep");
        assert!(grep.contains("notes/plan.md") && grep.contains("MARK-4711 is here"), "{grep}");
        assert!(!grep.contains("hidden") && !grep.contains("internal"), "{grep}");
        let glob = line(&log, "CALLED butler__glob");
        assert!(glob.contains("notes/plan.md") && !glob.contains("keys.md"), "{glob}");
    }
    let cookie = butler.console_owner_headers();
    let headers: Vec<(&str, &str)> = cookie.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, body) = butler.post_json("/runs/nope/steps/0/confirm", &json!({}), &headers);
    crate::util::assert_error(status, &body, 404, "unknown_run");
}

/// Without `automations.timeZone`, schedules are read in the system's local zone (here
/// the one `TZ` names); the root config's zone wins over it.
#[test]
fn the_automation_time_zone_is_the_systems_unless_the_config_names_one() {
    let dir = tempfile::tempdir().expect("temp");
    let workdir = dir.path().join("instance");
    let local = [("TZ", "America/Sao_Paulo")];
    let butler = Butler::start_with_env(&workdir, &[], &local);
    let (status, listed) = butler.get_json("/automations");
    assert_eq!((status, &listed["timeZone"]), (200, &json!("America/Sao_Paulo")), "{listed}");
    assert!(butler.stop().success());

    let path = workdir.join("butler.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("config")).expect("JSON");
    config["automations"] = json!({"timeZone": "Europe/Berlin"});
    std::fs::write(&path, serde_json::to_vec_pretty(&config).expect("json")).expect("config");
    let butler = Butler::start_with_env(&workdir, &[], &local);
    let (_, listed) = butler.get_json("/automations");
    assert_eq!(listed["timeZone"], "Europe/Berlin", "{listed}");
}

/// The hourly distill job: registered idempotently by title, replaced when it changed, the
/// owner's own jobs untouched and the retired ones removed; run by the host's scheduler as
/// an agent session that completes a batch.
#[test]
fn the_distill_automation_is_registered_once_and_runs_on_its_schedule() {
    const TITLE: &str = "蒸馏 · Butler";
    let (butler, _dir) = Butler::fresh_with_config(|config| {
        config["agent"] = json!({"command": agent_command()});
        config["automations"] = json!({"timeZone": "Asia/Shanghai", "schedules": {TITLE: "0 0 1 1 *"}});
    });
    let token = format!("Bearer {}", butler.owner_token());
    let owner = [("authorization", token.as_str())];
    let (status, body) = butler.post_json("/automations", &json!({}), &[]);
    crate::util::assert_error(status, &body, 403, "owner_required");
    let (status, body) = butler.post_json("/automations", &json!({}), &owner);
    assert_eq!((status, &body["added"]), (200, &json!([TITLE])), "{body}");
    let (_, body) = butler.post_json("/automations", &json!({}), &owner);
    assert_eq!((&body["kept"], &body["added"]), (&json!([TITLE]), &json!([])), "registered twice: one job");
    let (_, listed) = butler.get_json("/automations");
    assert_eq!(listed["timeZone"], "Asia/Shanghai");
    let jobs = listed["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 1, "{listed}");
    assert!(jobs[0]["nextRun"].as_str().is_some_and(|t| t.contains("-01-01T") || t.contains("-12-31T")), "{listed}");

    // The owner's own job and a retired one beside it; the schedule changes to every 2 s.
    let workdir = butler.workdir.clone();
    assert!(butler.stop().success());
    let file = workdir.join(".butler/automations.json");
    let mut saved: Value = serde_json::from_slice(&std::fs::read(&file).expect("jobs")).expect("JSON");
    let other = |title: &str| {
        json!({"title": title, "schedule": "0 0 1 1 *", "timeZone": "UTC", "instructions": "x",
                                      "registeredAt": "2026-12-01T00:00:00.000Z"})
    };
    saved["jobs"].as_array_mut().expect("jobs").extend([other("Morning notes"), other("日报 · Butler")]);
    std::fs::write(&file, saved.to_string()).expect("write");
    let config_path = workdir.join("butler.json");
    let mut config: Value = serde_json::from_slice(&std::fs::read(&config_path).expect("config")).expect("JSON");
    config["automations"]["schedules"][TITLE] = json!("*/2 * * * * *");
    std::fs::write(&config_path, config.to_string()).expect("config");
    let butler = Butler::start(&workdir);
    let (status, _) = butler.post_json("/observe", &json!({"source": "test", "text": "we chose sqlite"}), &[]);
    assert_eq!(status, 202);
    let token = format!("Bearer {}", butler.owner_token());
    let (_, body) = butler.post_json("/automations", &json!({}), &[("authorization", &token)]);
    assert_eq!((&body["replaced"], &body["removed"]), (&json!([TITLE]), &json!(["日报 · Butler"])), "{body}");
    let titles = || -> Vec<String> {
        let (_, listed) = butler.get_json("/automations");
        listed["jobs"].as_array().into_iter().flatten().filter_map(|j| j["title"].as_str().map(Into::into)).collect()
    };
    assert_eq!(titles(), [TITLE, "Morning notes"], "the owner's job is never touched");

    // It runs: its agent claims the batch and completes it. The job keeps only its last
    // run, and a run every 2 s that finds nothing left may already have replaced the one
    // that did the work; each run's session log stays.
    let logs = workdir.join(".butler/logs");
    let mut log = String::new();
    wait_for("a run that completed a batch", || {
        let sessions = std::fs::read_dir(&logs).into_iter().flatten().filter_map(Result::ok);
        let agent_logs = sessions.filter(|e| e.file_name().to_string_lossy().starts_with("agent-"));
        let done = agent_logs
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .find(|l| l.contains("COMPLETED") && l.contains("SUBMITTED"));
        done.map(|found| log = found).is_some()
    });
    // The job keeps what its agent submitted: "done" for that run, "nothing" for a later one.
    wait_for("a last run with the agent's outcome", || {
        let (_, listed) = butler.get_json("/automations");
        let last = &listed["jobs"][0]["last"];
        last["outcome"] == "ok" && ["done", "nothing"].iter().any(|o| last["result"]["outcome"] == *o)
    });
    assert!(line(&log, "CLAIMED").contains("\"items\": 1"), "{log}");
    assert!(line(&log, "COMPLETED").contains("\"isError\": false"), "{log}");
    assert!(log.contains("\"purpose\": \"automation\""), "{log}");
}
