//! The faculty runtime from outside: drop-in components, arguments, sandbox, failures,
//! concurrency, effects, the compile cache, and faculties composing through the host.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{Butler, assert_error, guests, instance_with_config, wait_until};

/// The probe's short deadline in milliseconds, which the deadline tests run into.
const PROBE_DEADLINE_MS: u64 = 1500;

/// Root config for these tests: a short deadline and small memory for the probe, a
/// read-only `/self` grant, and a pipeline route to the probe.
fn config() -> Value {
    config_with_deadline(PROBE_DEADLINE_MS)
}

/// [`config`] with the probe's deadline `ms`: tests of concurrency wait in the call slots
/// and the store lock inside it, which a loaded machine stretches past the short one.
fn config_with_deadline(ms: u64) -> Value {
    json!({
        "faculties": {
            "probe": {"timeoutMs": ms, "memoryMb": 32, "grants": [{"dir": "${selfRoot}", "as": "/self", "write": false}]},
            "notes": {"timeoutMs": 5000}
        },
        "pipeline": {"routes": {"probe": "probe", "notes": "notes"}}
    })
}

fn install(workdir: &Path, component: &str, name: &str) {
    std::fs::copy(component, workdir.join("faculties").join(name)).expect("copy component");
}

fn with_probe() -> (Butler, tempfile::TempDir) {
    with_probe_deadline(PROBE_DEADLINE_MS)
}

fn with_probe_deadline(ms: u64) -> (Butler, tempfile::TempDir) {
    let dir = instance_with_config(&config_with_deadline(ms));
    install(dir.path(), guests::PROBE, "probe.wasm");
    let butler = Butler::start(dir.path());
    butler.wait_ready("probe");
    (butler, dir)
}

#[test]
fn components_are_dropped_in_replaced_and_removed_while_serving() {
    let dir = instance_with_config(&config());
    let butler = Butler::start(dir.path());
    let faculties = dir.path().join("faculties");

    install(dir.path(), guests::NOTES, "notes.wasm");
    let listed = butler.wait_ready("notes");
    eprintln!("dropped-in component callable after {listed:?}");
    let (status, body) = butler.command("notes", "add", &json!({"text": "first note", "tag": "a"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["count"], 1);
    let (_, body) = butler.command("notes", "list", &json!({}));
    assert_eq!(body["data"]["notes"][0]["text"], "first note");
    let (status, report) = butler.get_json("/faculties/notes/reports/recent");
    assert_eq!((status, &report["items"][0]["title"]), (200, &json!("first note")));

    // Replace the file with other code: the old faculty goes, the new one answers.
    std::fs::copy(guests::PROBE, faculties.join("notes.wasm")).expect("replace");
    butler.wait_ready("probe");
    wait_until(Duration::from_secs(10), "notes unloaded", || butler.faculty("notes").is_none());
    let (status, body) = butler.command("notes", "list", &json!({}));
    assert_error(status, &body, 404, "unknown_faculty");

    // Remove it: gone.
    std::fs::remove_file(faculties.join("notes.wasm")).expect("rm");
    wait_until(Duration::from_secs(10), "probe unloaded", || butler.faculty("probe").is_none());
    let (status, body) = butler.command("probe", "ok", &json!({}));
    assert_error(status, &body, 404, "unknown_faculty");

    // A folder faculty whose commands run a plain WASI command component.
    let folder = faculties.join("echo");
    std::fs::create_dir_all(&folder).expect("mkdir");
    std::fs::copy(guests::COMMAND, folder.join("echo.wasm")).expect("copy");
    std::fs::write(
        folder.join("butler.json"),
        json!({"schemaVersion": 1, "kind": "faculty", "id": "echo", "name": "Echo",
               "commands": [{"id": "say", "exec": ["echo.wasm", "echo"], "args": [{"name": "word", "pattern": "[a-z]+", "positional": true}, {"name": "body", "pattern": "(?s).*", "stdin": true}]},
                            {"id": "quit", "exec": ["echo.wasm", "exit"]},
                            {"id": "babble", "exec": ["echo.wasm", "garbage"]}],
               "reports": [{"id": "state", "name": "State", "exec": ["echo.wasm", "report"]}]})
        .to_string(),
    )
    .expect("manifest");
    butler.wait_ready("echo");
    let (status, body) = butler.command("echo", "say", &json!({"word": "hi", "body": "from stdin"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["argv"], json!(["echo.wasm", "echo", "hi"]));
    assert_eq!(body["data"]["stdin"], "from stdin");
    assert_eq!(body["data"]["env"], 0, "no inherited environment");
    assert_eq!(butler.faculty("echo").expect("listed")["runtime"], "command");
    let (status, body) = butler.command("echo", "quit", &json!({}));
    assert_error(status, &body, 502, "command_failed");
    assert!(
        body["error"]["message"].as_str().expect("message").contains("exiting with 3 on purpose"),
        "stderr kept: {body}"
    );
    let (status, body) = butler.command("echo", "babble", &json!({}));
    assert_error(status, &body, 502, "invalid_output");
    let (status, body) = butler.get_json("/faculties/echo/reports/state");
    assert_eq!((status, &body["summary"]), (200, &json!("command report")), "{body}");
}

/// A broken component dropped in while the host runs: the call made right after the drop
/// fails with why it cannot load (503 `faculty_unavailable`), not with "no such faculty";
/// a name with no component behind it still answers 404.
#[test]
fn a_call_right_after_a_broken_component_is_dropped_gets_its_compile_error() {
    let dir = instance_with_config(&config());
    let butler = Butler::start(dir.path());
    // A component's header, then garbage: only the compile can tell.
    std::fs::write(dir.path().join("faculties/broken.wasm"), b"\0asm\x0d\x00\x01\x00not a component at all")
        .expect("drop a broken component");
    let (status, body) = butler.command("broken", "run", &json!({}));
    assert_error(status, &body, 503, "faculty_unavailable");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("faculty `broken`") && message.contains("does not compile"), "{body}");
    let (status, body) = butler.command("nothing-here", "run", &json!({}));
    assert_error(status, &body, 404, "unknown_faculty");
}

#[test]
fn every_argument_rule_is_enforced() {
    let (butler, _dir) = with_probe();
    let (status, body) = butler.command(
        "probe",
        "args",
        &json!({"text": "-starts with a dash, fine on stdin", "count": 3, "mode": "fast", "first": "abc"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"]["args"],
        json!(["abc", "--mode", "fast", "--count", "3"]),
        "declaration order, positional values bare"
    );
    assert_eq!(body["data"]["stdin"], "-starts with a dash, fine on stdin");

    for (args, needle) in [
        (json!({}), "missing required argument `first`"),
        (json!({"first": "abc", "other": "x"}), "unknown argument `other`"),
        (json!({"first": "ABC"}), "does not match"),
        (json!({"first": "abc", "mode": "fast slow"}), "does not match"),
        (json!({"first": "abc", "mode": "fastx"}), "does not match"),
        (json!({"first": "-rf"}), "must not start with `-`"),
        (json!({"first": "abc", "count": "-1"}), "must not start with `-`"),
        (json!({"first": {"nested": 1}}), "must be a string"),
    ] {
        let (status, body) = butler.command("probe", "args", &args);
        assert_error(status, &body, 400, "invalid_args");
        assert!(body["error"]["message"].as_str().expect("message").contains(needle), "{args}: {body}");
    }
    let (status, body) = butler.post_json("/faculties/probe/commands/args", &json!({"args": ["abc"]}), &[]);
    assert_error(status, &body, 400, "invalid_args");
    let (status, body) = butler.post_json("/faculties/probe/commands/args", &json!({"args": {}, "extra": 1}), &[]);
    assert_error(status, &body, 400, "invalid_args");
    let post = |content_type: Option<&str>, body: &'static str| {
        let mut request = butler.request(reqwest::Method::POST, &butler.api("/faculties/probe/commands/ok"));
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        crate::util::json_of(request.body(body).send().expect("post"))
    };
    let (status, body) = post(Some("application/json"), "{not json");
    assert_error(status, &body, 400, "invalid_json");
    // A body not sent as JSON is refused, on every door that takes JSON.
    let (status, body) = post(None, r#"{"args": {}}"#);
    assert_error(status, &body, 415, "unsupported_media_type");
    let (status, body) = post(Some("text/plain"), r#"{"args": {}}"#);
    assert_error(status, &body, 415, "unsupported_media_type");
    for path in ["/pipeline", "/observe"] {
        let response = butler
            .request(reqwest::Method::POST, &butler.api(path))
            .header("content-type", "text/plain")
            .body(r#"{"source": "x", "text": "y"}"#)
            .send()
            .expect("post");
        let (status, body) = crate::util::json_of(response);
        assert_error(status, &body, 415, "unsupported_media_type");
    }
    let (status, body) = butler.command("probe", "nope", &json!({}));
    assert_error(status, &body, 404, "unknown_command");
    let (status, body) = butler.command("nobody", "ok", &json!({}));
    assert_error(status, &body, 404, "unknown_faculty");
    // No body at all is an empty argument object.
    let response =
        butler.request(reqwest::Method::POST, &butler.api("/faculties/probe/commands/ok")).send().expect("post");
    assert_eq!(crate::util::json_of(response).0, 200);
}

#[test]
fn the_sandbox_holds_against_real_escape_attempts() {
    let (butler, dir) = with_probe();
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.txt"), "outside secret").expect("write");
    std::fs::write(dir.path().join("self/card.md"), "inside the store").expect("write");
    let data = dir.path().join(".butler/faculties/probe");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::write(data.join("mine.txt"), "my own data").expect("write");
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), data.join("link-out")).expect("symlink");
    std::os::unix::fs::symlink(data.join("link-out"), data.join("chain")).expect("symlink chain");
    std::os::unix::fs::symlink("mine.txt", data.join("link-in")).expect("symlink inside");

    let read = |path: &str| {
        let (status, body) = butler.command("probe", "read", &json!({"path": path}));
        assert_eq!(status, 200, "{path}: {body}");
        body["data"].clone()
    };
    assert_eq!(read("/data/mine.txt")["text"], "my own data");
    assert_eq!(read("/data/link-in")["text"], "my own data", "a link that stays inside works");
    assert_eq!(read("/self/card.md")["text"], "inside the store");
    let secret = outside.path().join("secret.txt");
    for escape in [
        "/etc/passwd",
        secret.to_str().expect("utf8"),
        "/data/../../../../etc/passwd",
        "/self/../../etc/passwd",
        "/self/../.butler/owner-token",
        "../etc/passwd",
        "/data/link-out",
        "/data/chain",
    ] {
        let result = read(escape);
        assert_eq!(result["read"], false, "{escape} must not be readable: {result}");
        assert!(
            !result.to_string().contains("outside secret") && !result.to_string().contains("root:"),
            "{escape}: {result}"
        );
    }
    // /self is granted read-only here.
    let (status, body) = butler.command("probe", "write", &json!({"name": "x.txt", "body": "y"}));
    assert_eq!(status, 200, "{body}");
    assert!(data.join("x.txt").is_file(), "writes land in /data");
    // No environment, no arguments, no network.
    let (_, body) = butler.command("probe", "env", &json!({}));
    assert_eq!(body["data"]["env"], json!([]), "{body}");
    let (_, body) = butler.command("probe", "net", &json!({}));
    assert_eq!(body["data"]["connected"], false, "{body}");
}

/// Context switches so far of the host's deadline tickers (the `faculty-epoch` threads).
fn ticker_switches(pid: u32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the host's threads");
    let mut switches = 0;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "faculty-epoch" {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        switches += status
            .lines()
            .filter(|l| l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    switches
}

/// The deadline tickers run only while a guest does: an idle host is not woken by them
/// (each ticks every 20 ms while a call runs), and a call that spins is still stopped at
/// its deadline.
#[test]
fn the_deadline_tickers_sleep_while_no_guest_runs() {
    let (butler, _dir) = with_probe();
    butler.wait_compiled();
    let (status, body) = butler.command("probe", "ok", &json!({}));
    assert_eq!(status, 200, "{body}");

    let idle = ticker_switches(butler.pid());
    std::thread::sleep(Duration::from_secs(2));
    let idled = ticker_switches(butler.pid()) - idle;
    // Ticking, the two tickers would switch 200 times in these 2 s.
    assert!(idled < 10, "the tickers woke {idled} times while no guest ran");

    let spinning = ticker_switches(butler.pid());
    let (status, body) = butler.command("probe", "spin", &json!({}));
    assert_error(status, &body, 504, "timeout");
    let spun = ticker_switches(butler.pid()) - spinning;
    assert!(spun >= 20, "the tickers switched only {spun} times during a 1.5 s spin");
}

#[test]
fn a_misbehaving_call_fails_alone_with_the_right_error() {
    let (butler, _dir) = with_probe();
    std::thread::scope(|scope| {
        let spinning = scope.spawn(|| butler.command("probe", "spin", &json!({})));
        // While one call spins to its deadline, others run normally.
        for _ in 0..5 {
            let (status, body) = butler.command("probe", "ok", &json!({}));
            assert_eq!((status, &body["data"]["ok"]), (200, &json!(true)), "{body}");
        }
        let (status, body) = spinning.join().expect("join");
        assert_error(status, &body, 504, "timeout");
    });
    let (status, body) = butler.command("probe", "hog", &json!({}));
    assert_error(status, &body, 502, "memory_limit");
    let (status, body) = butler.command("probe", "trap", &json!({}));
    assert_error(status, &body, 502, "trap");
    assert!(
        body["error"]["message"].as_str().expect("message").contains("trapped on purpose"),
        "the guest's panic message is kept: {body}"
    );
    let (status, body) = butler.command("probe", "garbage", &json!({}));
    assert_error(status, &body, 502, "invalid_output");
    let (status, body) = butler.command("probe", "fail", &json!({}));
    assert_error(status, &body, 422, "probe_failed");
    assert!(body["error"]["message"].as_str().expect("message").contains("faculty `probe`"), "attributed: {body}");
    let (status, _) = butler.command("probe", "ok", &json!({}));
    assert_eq!(status, 200, "still healthy after all that");
}

#[test]
fn sixty_four_concurrent_calls_all_succeed() {
    let (butler, _dir) = with_probe_deadline(10_000);
    std::thread::scope(|scope| {
        let calls: Vec<_> =
            (0..64).map(|_| scope.spawn(|| butler.command("probe", "sleep", &json!({"ms": "20"})))).collect();
        for call in calls {
            let (status, body) = call.join().expect("join");
            assert_eq!(status, 200, "{body}");
            assert_eq!(body["data"]["slept"], 20);
        }
    });
}

/// A read starts on the request's own task, and so do the `host.call`s it makes; one that
/// outlasts an epoch tick moves to a blocking thread and ends there. More reads than there
/// are call slots — a third running for several ticks, a third making a nested call, a
/// third a nested call of an action nothing serves, which runs on a blocking thread in its
/// caller's slot — all finish with their own answers.
#[test]
fn reads_beyond_the_call_slots_that_run_long_or_call_nested_all_finish() {
    let (butler, _dir) = with_probe_deadline(10_000);
    let calls = butler_faculty::MAX_CONCURRENT_CALLS + 8;
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..calls)
            .map(|n| {
                let butler = &butler;
                scope.spawn(move || {
                    let action = |action: &str| json!({"action": action, "args": "{}"});
                    match n % 3 {
                        0 => (n, butler.command("probe", "sleep", &json!({"ms": "150"}))),
                        1 => (n, butler.command("probe", "call", &action("probe.ok"))),
                        _ => (n, butler.command("probe", "call", &action("nobody.here"))),
                    }
                })
            })
            .collect();
        for call in calls {
            let (n, (status, body)) = call.join().expect("join");
            assert_eq!(status, 200, "{body}");
            match n % 3 {
                0 => assert_eq!(body["data"]["slept"], 150, "{body}"),
                1 => assert_eq!(body["data"]["data"], r#"{"ok":true}"#, "{body}"),
                _ => assert_eq!(body["data"]["code"], "unknown_action", "{body}"),
            }
        }
    });
}

#[test]
fn reads_run_in_parallel_and_writes_one_at_a_time() {
    let (butler, _dir) = with_probe_deadline(10_000);
    let pair = |command: &str| {
        std::thread::scope(|scope| {
            let a = scope.spawn(|| butler.command("probe", command, &json!({"ms": "400"})));
            let b = scope.spawn(|| butler.command("probe", command, &json!({"ms": "400"})));
            let interval = |(status, body): (u16, Value)| {
                assert_eq!(status, 200, "{body}");
                (body["data"]["start"].as_u64().expect("start"), body["data"]["end"].as_u64().expect("end"))
            };
            (interval(a.join().expect("a")), interval(b.join().expect("b")))
        })
    };
    let ((a0, a1), (b0, b1)) = pair("hold-write");
    assert!(a1 <= b0 || b1 <= a0, "writes overlapped: {a0}-{a1} and {b0}-{b1}");
    // Reads may overlap; retry a few times in case the machine serialised them by chance.
    let overlapped = (0..5).any(|_| {
        let ((a0, a1), (b0, b1)) = pair("hold-read");
        a0 < b1 && b0 < a1
    });
    assert!(overlapped, "two reads never ran at the same time");
}

#[test]
fn reports_are_checked_against_their_shape() {
    let (butler, _dir) = with_probe();
    let (status, body) = butler.get_json("/faculties/probe/reports/health");
    assert_eq!((status, &body["status"]), (200, &json!("ok")), "{body}");
    let (status, body) = butler.get_json("/faculties/probe/reports/bad-shape");
    assert_error(status, &body, 502, "invalid_report");
    let (status, body) = butler.get_json("/faculties/probe/reports/notes");
    assert_eq!(status, 200);
    assert!(body["markdown"].as_str().is_some());
    let (status, body) = butler.get_json("/faculties/probe/reports/nope");
    assert_error(status, &body, 404, "unknown_report");
}

#[test]
fn external_commands_need_the_owner() {
    let (butler, _dir) = with_probe();
    let own = butler.origin.clone();
    let path = "/faculties/probe/commands/danger";
    let (status, body) = butler.post_json(path, &json!({}), &[]);
    assert_error(status, &body, 403, "owner_required");
    let (status, body) = butler.post_json(path, &json!({}), &[("origin", &own)]);
    assert_error(status, &body, 403, "owner_required");
    let (status, body) = butler.post_json(path, &json!({}), &[("origin", &own), ("sec-fetch-site", "same-origin")]);
    assert_error(status, &body, 403, "owner_required");
    let (status, body) = butler.post_json(path, &json!({}), &[("authorization", "Bearer 0000")]);
    assert_error(status, &body, 403, "owner_required");
    // The console's three headers are what any local process can send: refused without
    // the session; with the logged-in console's cookie, allowed.
    let (status, body) = butler.post_json(
        path,
        &json!({}),
        &[("origin", &own), ("sec-fetch-site", "same-origin"), ("x-butler-review", "1")],
    );
    assert_error(status, &body, 403, "owner_required");
    let owned = butler.console_owner_headers();
    let headers: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, _) = butler.post_json(path, &json!({}), &headers);
    assert_eq!(status, 200);
    let token = format!("Bearer {}", butler.owner_token());
    let (status, _) = butler.post_json(path, &json!({}), &[("authorization", &token)]);
    assert_eq!(status, 200);
    // A faculty calling it through the host is never the owner.
    let (status, body) = butler.command("probe", "call", &json!({"action": "probe.danger", "args": "{}"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["code"], "owner_required", "{body}");
}

#[test]
fn faculties_compose_through_the_host() {
    let (butler, dir) = with_probe();
    install(dir.path(), guests::NOTES, "notes.wasm");
    butler.wait_ready("notes");
    let (status, body) = butler.command("probe", "call", &json!({"action": "probe.ok", "args": "{}"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], json!({"ok": true, "data": "{\"ok\":true}"}));
    let (_, body) = butler.command("probe", "call", &json!({"action": "nobody.anything", "args": "{}"}));
    assert_eq!(body["data"]["code"], "unknown_action", "{body}");
    let (_, body) = butler.command("probe", "call", &json!({"action": "probe.ok", "args": "{not json"}));
    assert_eq!(body["data"]["code"], "invalid_json", "{body}");
}

#[test]
fn broken_components_are_catalog_diagnostics() {
    let dir = instance_with_config(&config());
    let faculties = dir.path().join("faculties");
    std::fs::write(faculties.join("text.wasm"), "this is not wasm").expect("write");
    std::fs::write(faculties.join("core.wasm"), b"\0asm\x01\0\0\0").expect("write");
    std::fs::copy(guests::COMMAND, faculties.join("bare-command.wasm")).expect("copy");
    std::fs::copy(guests::FUTURE, faculties.join("future.wasm")).expect("copy");
    std::fs::create_dir_all(faculties.join("missing")).expect("mkdir");
    std::fs::write(
        faculties.join("missing/butler.json"),
        json!({"schemaVersion":1,"kind":"faculty","id":"missing","name":"Missing","commands":[{"id":"x","exec":["gone.wasm"]}]}).to_string(),
    )
    .expect("write");
    std::fs::create_dir_all(faculties.join("escape")).expect("mkdir");
    std::fs::write(
        faculties.join("escape/butler.json"),
        json!({"schemaVersion":1,"kind":"faculty","id":"escape","name":"Escape","commands":[{"id":"x","exec":["../probe.wasm"]}]}).to_string(),
    )
    .expect("write");
    install(dir.path(), guests::PROBE, "probe.wasm");
    let butler = Butler::start(dir.path());
    butler.wait_ready("probe");
    butler.wait_compiled();
    let catalog = butler.catalog();
    let message = |path: &str| {
        catalog["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .find(|d| d["path"] == path)
            .unwrap_or_else(|| panic!("a diagnostic for {path}: {catalog}"))["errors"][0]["message"]
            .as_str()
            .expect("message")
            .to_owned()
    };
    assert!(message("faculties/text.wasm").contains("not a WebAssembly file"));
    assert!(message("faculties/core.wasm").contains("core WebAssembly module"));
    assert!(message("faculties/bare-command.wasm").contains("must be a faculty component"));
    let future = message("faculties/future.wasm");
    assert!(
        future.contains("butler:faculty@9.0.0") && future.contains("@0.1.0"),
        "names required and supported versions: {future}"
    );
    assert!(message("faculties/missing/butler.json").contains("cannot load the component"));
    assert!(!catalog.to_string().contains("gone.wasm"), "exec paths never appear in the public catalog");
    assert!(message("faculties/escape/butler.json").contains("inside the faculty folder"));
    assert_eq!(butler.ids(), vec!["probe".to_owned()]);

    // `butler check` reports the same, compiling inline.
    let (code, out, _) = cli(&["check", dir.path().to_str().expect("utf8")]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("faculties/core.wasm — rejected") && out.contains("core WebAssembly module"), "{out}");
    assert!(out.contains("1 extension valid, 6 rejected") && out.contains("(probe)"), "{out}");

    // Each file on its own, as a newcomer checks one before dropping it in: the host's
    // message, word for word; a good component passes.
    for path in [
        "faculties/text.wasm",
        "faculties/core.wasm",
        "faculties/bare-command.wasm",
        "faculties/future.wasm",
        "faculties/missing/butler.json",
        "faculties/missing",
        "faculties/escape",
    ] {
        let (code, out, err) = cli(&["check", dir.path().join(path).to_str().expect("utf8")]);
        assert_eq!(code, 1, "{path}: {out}{err}");
        let host_path = if path.ends_with(".wasm") || path.ends_with(".json") {
            path.to_owned()
        } else {
            format!("{path}/butler.json")
        };
        assert!(
            out.contains(&message(&host_path)),
            "{path}: the host says `{}`; check says {out}",
            message(&host_path)
        );
    }
    let probe = dir.path().join("faculties/probe.wasm");
    let (code, out, err) = cli(&["check", probe.to_str().expect("utf8")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 extension valid") && out.contains("faculty `probe`"), "{out}");
    let (code, out, err) =
        cli(&["check", "--workdir", dir.path().to_str().expect("utf8"), probe.to_str().expect("utf8")]);
    assert_eq!(code, 0, "with the instance's settings: {out}{err}");
}

#[test]
fn a_restart_reuses_the_compile_cache() {
    let dir = instance_with_config(&config());
    install(dir.path(), guests::PROBE, "probe.wasm");
    install(dir.path(), guests::NOTES, "notes.wasm");
    let butler = Butler::start(dir.path());
    butler.wait_optimized("probe");
    butler.wait_optimized("notes");
    let (_, first) = butler.get_json("/faculties");
    assert!(first["runtime"]["compiles"].as_u64() >= Some(2), "{first}");
    assert!(butler.stop().success());

    let butler = Butler::start(dir.path());
    butler.wait_ready("notes");
    let (_, second) = butler.get_json("/faculties");
    assert_eq!(second["runtime"]["compiles"], 0, "nothing recompiled: {second}");
    assert!(second["runtime"]["cacheHits"].as_u64() >= Some(2), "{second}");
    let (status, _) = butler.command("probe", "ok", &json!({}));
    assert_eq!(status, 200);
}

#[test]
fn native_commands_run_as_processes_with_a_deadline() {
    let dir = instance_with_config(&json!({"faculties": {"legacy": {"timeoutMs": 5000}}}));
    let folder = dir.path().join("faculties/legacy");
    std::fs::create_dir_all(&folder).expect("mkdir");
    std::fs::write(folder.join("run.sh"), "#!/bin/sh\ncase \"$1\" in\n  ok) read line; printf '{\"got\":\"%s\",\"arg\":\"%s\",\"url\":\"%s\"}' \"$line\" \"$2\" \"$BUTLER_HOST_URL\";;\n  fail) echo 'broken on purpose' >&2; exit 4;;\n  slow) sleep 30 & sleep 30;;\nesac\n").expect("script");
    let chmod = std::process::Command::new("chmod").arg("+x").arg(folder.join("run.sh")).status().expect("chmod");
    assert!(chmod.success());
    std::fs::write(
        folder.join("butler.json"),
        json!({"schemaVersion":1,"kind":"faculty","id":"legacy","name":"Legacy","commands":[
            {"id":"ok","exec":["./run.sh","ok"],"args":[{"name":"word","pattern":"[a-z]+","positional":true},{"name":"line","pattern":".*","stdin":true}]},
            {"id":"fail","exec":["./run.sh","fail"]},
            {"id":"slow","exec":["./run.sh","slow"]}]})
        .to_string(),
    )
    .expect("manifest");
    let butler = Butler::start(dir.path());
    butler.wait_ready("legacy");
    let (status, body) = butler.command("legacy", "ok", &json!({"word": "abc", "line": "hello"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], json!({"got": "hello", "arg": "abc", "url": butler.origin}));
    let (status, body) = butler.command("legacy", "fail", &json!({}));
    assert_error(status, &body, 502, "command_failed");
    assert!(body["error"]["message"].as_str().expect("message").contains("broken on purpose"));
    let started = std::time::Instant::now();
    let (status, body) = butler.command("legacy", "slow", &json!({}));
    assert_error(status, &body, 504, "timeout");
    assert!(started.elapsed() < Duration::from_secs(20), "the whole process group was killed");
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let home = tempfile::tempdir().expect("home");
    let output = crate::util::butler_command(home.path()).args(args).output().expect("run butler");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_cli_calls_faculties_on_the_running_host() {
    let (butler, dir) = with_probe();
    let workdir = dir.path().to_str().expect("utf8");
    let (code, out, err) =
        cli(&["faculty", "call", "probe", "args", "--args", r#"{"first":"abc","mode":"slow"}"#, "--workdir", workdir]);
    assert_eq!(code, 0, "{err}");
    let data: Value = serde_json::from_str(&out).expect("JSON on stdout");
    assert_eq!(data["args"], json!(["abc", "--mode", "slow"]));
    let (code, _, err) = cli(&["faculty", "call", "probe", "danger", "--workdir", workdir]);
    assert_eq!(code, 0, "the CLI is the owner (token file): {err}");
    let (code, _, err) =
        cli(&["faculty", "call", "probe", "args", "--args", r#"{"first":"-x"}"#, "--workdir", workdir]);
    assert_eq!(code, 1);
    assert!(err.contains("invalid_args") && err.contains("must not start with `-`"), "{err}");
    let (code, _, err) = cli(&["faculty", "call", "probe", "args", "--args", "[1]", "--workdir", workdir]);
    assert_eq!(code, 1);
    assert!(err.contains("--args must be a JSON object"), "{err}");
    let (code, out, err) = cli(&["faculty", "report", "probe", "health", "--workdir", workdir]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("all good"), "{out}");
    assert!(butler.stop().success());
    let (code, _, err) = cli(&["faculty", "call", "probe", "ok", "--workdir", workdir]);
    assert_eq!(code, 1);
    assert!(err.contains("no butler host is running"), "{err}");
}

#[test]
fn a_scaffolded_faculty_builds_and_runs() {
    let projects = tempfile::tempdir().expect("temp");
    let project = projects.path().join("hello-world");
    let (code, out, err) = cli(&["faculty", "new", "hello-world", "--dir", project.to_str().expect("utf8")]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cargo build --release --target wasm32-wasip2"), "{out}");
    let (code, _, err) = cli(&["faculty", "new", "Bad_Name"]);
    assert_eq!(code, 1);
    assert!(err.contains("not a valid faculty id"), "{err}");
    let (code, _, err) = cli(&["faculty", "new", "hello-world", "--dir", project.to_str().expect("utf8")]);
    assert_eq!(code, 1, "never overwrites");
    assert!(err.contains("already exists"), "{err}");

    // Build it the way its README says (sharing one target dir across test runs).
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/scaffold-test");
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("cargo build");
    assert!(status.success(), "the scaffold builds");
    let dir = instance_with_config(&json!({}));
    install(
        dir.path(),
        target.join("wasm32-wasip2/release/hello_world.wasm").to_str().expect("utf8"),
        "hello-world.wasm",
    );
    let butler = Butler::start(dir.path());
    butler.wait_ready("hello-world");
    let (status, body) = butler.command("hello-world", "greet", &json!({"who": "Ada"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["greeting"], "Hello, Ada!");
    // It targets butler:faculty@0.2.0: the host checks its declared input schema.
    assert_eq!(butler.faculty("hello-world").expect("listed")["wit"], "0.2.0");
    let (status, body) = butler.command("hello-world", "greet", &json!({"who": 5}));
    assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_args")), "{body}");
    let (status, body) = butler.get_json("/faculties/hello-world/reports/status");
    assert_eq!((status, &body["status"]), (200, &json!("ok")));
}

#[test]
fn a_grant_or_a_route_changed_in_the_root_config_holds_from_the_next_call() {
    let (butler, dir) = with_probe();
    std::fs::write(dir.path().join("self/card.md"), "inside the store").expect("write");
    let read = || {
        let (status, body) = butler.command("probe", "read", &json!({"path": "/self/card.md"}));
        assert_eq!(status, 200, "{body}");
        body["data"].clone()
    };
    assert_eq!(read()["text"], "inside the store");
    let path = dir.path().join("butler.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("config")).expect("JSON");
    config["faculties"]["probe"]["grants"] = json!([]);
    std::fs::write(&path, config.to_string()).expect("write");
    wait_until(Duration::from_secs(2), "the grant gone", || read()["read"] == false);
    config["faculties"]["probe"]["grants"] = json!([{"dir": "${selfRoot}", "as": "/self", "write": false}]);
    std::fs::write(&path, config.to_string()).expect("write");
    wait_until(Duration::from_secs(2), "the grant back", || read()["text"] == "inside the store");

    // The root config's pipeline routes hold from the next action on: the probe's prefix
    // (routed by the config alone: the bare component declares none) taken out, put back.
    let action = || butler.command("probe", "call", &json!({"action": "probe.ok", "args": "{}"})).1;
    assert_eq!(action()["data"]["ok"], true);
    let routes = config["pipeline"]["routes"].clone();
    config["pipeline"]["routes"] = json!({});
    std::fs::write(&path, config.to_string()).expect("write");
    wait_until(Duration::from_secs(2), "the route gone", || action()["data"]["code"] == "unknown_action");
    config["pipeline"]["routes"] = routes;
    std::fs::write(&path, config.to_string()).expect("write");
    wait_until(Duration::from_secs(2), "the route back", || action()["data"]["ok"] == true);
}
