//! The example faculties in other languages, built from source by the test suite
//! (`scripts/build-example-guests`: componentize-py and componentize-js, pinned in
//! `tests/tools/`) and called through the host like any faculty.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::json;

use crate::util::{Butler, assert_error, instance_with_config, wait_until};

/// Builds the Python and JavaScript examples once per test run.
fn example_guests() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            let status = std::process::Command::new("bash")
                .arg(root.join("scripts/build-example-guests"))
                .status()
                .expect("run scripts/build-example-guests (needs python3, node and npm)");
            assert!(status.success(), "scripts/build-example-guests failed");
            root.join("target/example-guests")
        })
        .clone()
}

#[test]
fn python_and_javascript_faculties_run_through_the_host() {
    let guests = example_guests();
    let dir = instance_with_config(&json!({}));
    for name in ["py-words.wasm", "js-greeter.wasm"] {
        std::fs::copy(guests.join(name), dir.path().join("faculties").join(name)).expect("install example");
    }
    let butler = Butler::start(dir.path());
    // Language runtimes are big components: the first compile takes seconds (unoptimized
    // test builds take longer); the host serves meanwhile and lists them as pending.
    let (status, catalog) = butler.get_json("/catalog");
    assert_eq!(status, 200, "the host answers while components compile: {catalog}");
    for id in ["py-words", "js-greeter"] {
        butler.wait_ready_within(id, Duration::from_secs(180));
    }

    // Python: JSON input, writes to /data, typed failures, a status report.
    let (status, body) = butler.command("py-words", "count", &json!({"text": "the cat and the hat and the bat"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["words"], 8);
    assert_eq!(body["data"]["top"][0], json!(["the", 3]));
    let (status, body) = butler.command("py-words", "remember", &json!({"key": "motto", "text": "measure twice"}));
    assert_eq!(status, 200, "{body}");
    assert!(dir.path().join(".butler/faculties/py-words/memory.json").is_file(), "written to its own /data");
    let (_, body) = butler.command("py-words", "recall", &json!({"key": "motto"}));
    assert_eq!(body["data"]["text"], "measure twice");
    // The faculty's failure, kind `not-found`: 404.
    let (status, body) = butler.command("py-words", "recall", &json!({"key": "unknown"}));
    assert_error(status, &body, 404, "not_found");
    // The host checks the input against the command's `input` schema before the call.
    let (status, body) = butler.command("py-words", "recall", &json!({"key": "Bad Key"}));
    assert_error(status, &body, 400, "invalid_args");
    let (status, body) = butler.command("py-words", "recall", &json!({"key": "motto", "extra": 1}));
    assert_error(status, &body, 400, "invalid_args");
    let (status, report) = butler.get_json("/faculties/py-words/reports/summary");
    assert_eq!(status, 200, "{report}");
    assert!(report["summary"].as_str().is_some_and(|s| s.contains('1')), "{report}");
    // The status comes from the failure's kind, whatever its code's spelling suggests: a
    // damaged memory file is `invalid_json` of kind `failed` (422, not the 400 of
    // `invalid_*`), one it cannot read is `io_error` of kind `unavailable` (503, not 422).
    let memory = dir.path().join(".butler/faculties/py-words/memory.json");
    std::fs::write(&memory, "not json").expect("damage memory.json");
    let (status, body) = butler.command("py-words", "recall", &json!({"key": "motto"}));
    assert_error(status, &body, 422, "invalid_json");
    std::fs::remove_file(&memory).expect("remove memory.json");
    std::fs::create_dir(&memory).expect("a folder in memory.json's place");
    let (status, body) = butler.command("py-words", "recall", &json!({"key": "motto"}));
    assert_error(status, &body, 503, "io_error");

    // JavaScript: the host clock, a template written through the WASI filesystem.
    let (status, body) = butler.command("js-greeter", "greet", &json!({"name": "Ada"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["greeting"], "Hello, Ada!");
    assert!(body["data"]["at"].as_u64().is_some_and(|at| at > 1_700_000_000_000), "{body}");
    let (status, body) = butler.command("js-greeter", "greet", &json!({"name": "4da"}));
    assert_error(status, &body, 400, "invalid_args");
    // The schema lets it through; the guest refuses it (kind `invalid-input`).
    let (status, body) = butler.command("js-greeter", "set-template", &json!({"template": "Welcome back."}));
    assert_error(status, &body, 400, "invalid_args");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("{name}")), "{body}");
    let (status, body) = butler.command("js-greeter", "set-template", &json!({"template": "Welcome back, {name}."}));
    assert_eq!(status, 200, "{body}");
    let (_, body) = butler.command("js-greeter", "greet", &json!({"name": "Ada"}));
    assert_eq!(body["data"]["greeting"], "Welcome back, Ada.");
    let (status, report) = butler.get_json("/faculties/js-greeter/reports/about");
    assert_eq!(status, 200, "{report}");
    assert!(report["markdown"].as_str().is_some());
    let (_, list) = butler.get_json("/faculties");
    let runtimes: Vec<_> =
        list["faculties"].as_array().expect("faculties").iter().map(|f| (f["id"].clone(), f["wit"].clone())).collect();
    for id in ["py-words", "js-greeter"] {
        assert!(runtimes.contains(&(json!(id), json!("0.2.0"))), "{runtimes:?}");
    }
}

/// The big component of the report (the 18 MB Python one) dropped into a running host: it
/// is listed pending in `/catalog` at once, a call made right after the drop waits for its
/// compile and is served, and the journal records the faculty as added.
#[test]
fn a_big_component_dropped_in_is_pending_at_once_and_a_call_right_after_the_drop_is_served() {
    let guests = example_guests();
    let (butler, _dir) =
        Butler::fresh_with_config(|config| config["faculties"]["py-words"] = json!({"timeoutMs": 150_000}));
    butler.wait_ready("journal");
    let drop = butler.workdir.join("faculties/py-words.wasm");
    std::fs::copy(guests.join("py-words.wasm"), &drop).expect("drop the component in");

    // Compiling takes seconds: the host lists it pending meanwhile, from the drop on.
    let (status, catalog) = butler.get_json("/catalog");
    assert_eq!(status, 200, "{catalog}");
    let listed =
        catalog["diagnostics"].as_array().into_iter().flatten().find(|d| d["path"] == "faculties/py-words.wasm");
    assert_eq!(listed.map(|d| &d["severity"]), Some(&json!("pending")), "{catalog}");

    // A call made now waits for the compile (within its deadline) instead of a 404.
    let response = butler
        .request(reqwest::Method::POST, &butler.api("/faculties/py-words/commands/count"))
        .timeout(Duration::from_secs(180))
        .json(&json!({"args": {"text": "the cat and the hat"}}))
        .send()
        .expect("the call");
    let (status, body) = crate::util::json_of(response);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["words"], 5);

    let spool = butler.workdir.join("self/journal/spool");
    wait_until(Duration::from_secs(60), "the journal to record the faculty as added", || {
        std::fs::read_dir(&spool).into_iter().flatten().flatten().any(|entry| {
            std::fs::read_to_string(entry.path()).is_ok_and(|text| {
                text.lines().any(|line| {
                    serde_json::from_str::<serde_json::Value>(line).is_ok_and(|o| {
                        o["ref"] == "butler://catalog:py-words"
                            && o["text"] == "faculty py-words was added (faculties/py-words.wasm)"
                    })
                })
            })
        })
    });
}

/// `butler faculty new --lang python|js` makes a project that builds with the command it
/// prints, on the suite's pinned toolchains (linked in where the printed toolchain step
/// would install them), and runs through the host; `butler faculty wit` writes the WIT.
#[test]
fn python_and_javascript_skeletons_build_with_the_printed_command_and_run() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tools = example_guests().parent().expect("target").join("test-tools");
    let projects = tempfile::tempdir().expect("temp");
    let dir = instance_with_config(&json!({}));
    for (name, lang, toolchain) in [
        ("hello-py", "python", [(".venv", tools.join("venv"))]),
        ("hello-js", "js", [("node_modules", tools.join("js/node_modules"))]),
    ] {
        let project = projects.path().join(name);
        let output = crate::util::butler_command(projects.path())
            .args(["faculty", "new", name, "--lang", lang, "--dir"])
            .arg(&project)
            .output()
            .expect("butler faculty new");
        let out = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{out}{}", String::from_utf8_lossy(&output.stderr));
        let build = out.lines().find_map(|l| l.strip_prefix("build it:")).expect("a build line").trim();
        let install = out.lines().find_map(|l| l.strip_prefix("install:")).expect("an install line").trim();
        for (link, target) in toolchain {
            std::os::unix::fs::symlink(target, project.join(link)).expect("link the pinned toolchain");
        }
        let status = std::process::Command::new("sh").args(["-c", build]).status().expect("build");
        assert!(status.success(), "{lang}: `{build}` failed");
        let install = install.replace("<instance>", dir.path().to_str().expect("utf8"));
        let status = std::process::Command::new("sh").args(["-c", &install]).status().expect("install");
        assert!(status.success(), "{lang}: `{install}` failed");
    }
    let butler = Butler::start(dir.path());
    for name in ["hello-py", "hello-js"] {
        butler.wait_ready_within(name, Duration::from_secs(180));
        let (status, body) = butler.command(name, "greet", &json!({"who": "Ada"}));
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["data"]["greeting"], "Hello, Ada!", "{name}");
        let (status, body) = butler.command(name, "greet", &json!({"who": 5}));
        assert_error(status, &body, 400, "invalid_args");
        let (status, body) = butler.command(name, "nothing", &json!({}));
        assert_eq!(status, 404, "{name}: {body}");
        let (status, report) = butler.get_json(&format!("/faculties/{name}/reports/status"));
        assert_eq!((status, &report["status"]), (200, &json!("ok")), "{name}: {report}");
    }

    // The WIT, for a project started elsewhere: the same files as this repository's.
    let wit = projects.path().join("elsewhere/wit");
    let output = crate::util::butler_command(projects.path()).args(["faculty", "wit"]).arg(&wit).output().expect("wit");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    for version in ["0.1.0", "0.2.0"] {
        let file = format!("butler-faculty@{version}/faculty.wit");
        assert_eq!(
            std::fs::read(wit.join(&file)).expect("written"),
            std::fs::read(root.join("wit").join(&file)).expect("ours"),
            "{file}"
        );
    }
}
