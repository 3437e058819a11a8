//! The command line a new owner reaches for in the first hour: the short form's help
//! generated from the faculties' declarations, `butler ps` for MCP providers and for a
//! tool between two runs, `butler observe`, and the git `post-commit` hook.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Butler, butler_command, instance_with_config, wait_until, write_manifest};

/// `butler ARGS… [--workdir DIR]` with a settings home of its own: status, stdout, stderr.
fn butler(workdir: &Path, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let home = tempfile::tempdir().expect("home");
    let mut command = butler_command(home.path());
    command.args(args).arg("--workdir").arg(workdir).stdout(Stdio::piped()).stderr(Stdio::piped());
    command.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = command.spawn().expect("run butler");
    if let Some(text) = stdin {
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), text.as_bytes()).expect("write stdin");
    }
    let output = child.wait_with_output().expect("butler ends");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The declaration of `command` of faculty `faculty`, as `GET /faculties` lists it.
fn declared(host: &Butler, faculty: &str, command: &str) -> Value {
    let listing = host.faculties();
    let faculty = listing["faculties"].as_array().expect("faculties").iter().find(|f| f["id"] == faculty).cloned();
    let commands = faculty.expect("the faculty is listed")["commands"].as_array().cloned().unwrap_or_default();
    commands.into_iter().find(|c| c["id"] == command).unwrap_or_else(|| panic!("no command {command}"))
}

/// The line of `text` whose first word is `word`.
fn line_of<'a>(text: &'a str, word: &str) -> &'a str {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(word))
        .unwrap_or_else(|| panic!("no `{word}` in:\n{text}"))
}

#[test]
fn the_short_forms_help_comes_from_what_the_faculties_declare() {
    let dir = tempfile::tempdir().expect("temp");
    let workdir = dir.path().join("instance");
    // No host yet: the help says so, and how to start one.
    drop(Butler::start(&workdir));
    let (code, _, err) = butler(&workdir, &["review", "--help"], None);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no butler host is running") && err.contains("butler serve"), "{err}");

    let host = Butler::start(&workdir);
    host.wait_all_ready(&["cards", "distill"], Duration::from_secs(120));
    let list = declared(&host, "cards", "review-list");
    let approve = declared(&host, "cards", "review-approve");
    for args in [&["review", "--help"][..], &["review", "-h"], &["help", "review"]] {
        let (code, out, err) = butler(&workdir, args, None);
        assert_eq!(code, 0, "{args:?}: {err}");
        // Each verb of the prefix, with the description its command declares.
        let about = |c: &Value| c["description"].as_str().expect("a description").to_owned();
        assert!(line_of(&out, "list").contains(&about(&list)), "{args:?}: {out}");
        assert!(line_of(&out, "approve").contains(&about(&approve)), "{args:?}: {out}");
        assert!(out.contains("reject") && out.contains("prepare"), "{args:?}: {out}");
        let other = out.lines().any(|l| l.split_whitespace().next() == Some("search"));
        assert!(!other, "a verb of another prefix (`cards search`): {out}");
    }
    // A verb's arguments: each property of its input schema, with type and whether required.
    for args in [&["review", "approve", "--help"][..], &["review", "approve", "-h"], &["help", "review", "approve"]] {
        let (code, out, err) = butler(&workdir, args, None);
        assert_eq!(code, 0, "{args:?}: {err}");
        let required = approve["input"]["required"].as_array().expect("required");
        assert!(required.iter().any(|r| r == "contentHash"), "{approve}");
        let hash = line_of(&out, "--content-hash");
        assert!(hash.contains("string") && hash.contains("required"), "{out}");
        let revision = line_of(&out, "--revision");
        assert!(revision.contains("integer") && revision.contains("required"), "{out}");
        assert!(out.contains("review prepare"), "the confirm step it declares: {out}");
    }
    // `--help` after a verb is help, not an argument waiting for its value.
    let (code, out, err) = butler(&workdir, &["review", "list", "--help"], None);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Arguments: none."), "{out}");
    // Any faculty's prefix: distill's optional arguments.
    let claim = declared(&host, "distill", "claim");
    assert!(claim["input"]["properties"]["limit"].is_object(), "{claim}");
    let (code, out, err) = butler(&workdir, &["distill", "claim", "--help"], None);
    assert_eq!(code, 0, "{err}");
    let limit = line_of(&out, "--limit");
    assert!(limit.contains("integer") && limit.contains("optional"), "{out}");
    // Unknown verbs and prefixes say what there is.
    let (code, _, err) = butler(&workdir, &["review", "nope", "--help"], None);
    assert_eq!(code, 1);
    assert!(err.contains("no verb `nope`") && err.contains("approve"), "{err}");
    let (code, _, err) = butler(&workdir, &["help", "nosuch"], None);
    assert_eq!(code, 1);
    assert!(err.contains("`nosuch` is neither a butler command") && err.contains("review"), "{err}");
    // `butler help` alone, and for a command of its own, is clap's.
    let home = tempfile::tempdir().expect("home");
    let output = butler_command(home.path()).arg("help").output().expect("help");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && out.contains("Commands:") && out.contains("serve"), "{out}");
    let output = butler_command(home.path()).args(["help", "ps"]).output().expect("help ps");
    assert!(output.status.success() && String::from_utf8_lossy(&output.stdout).contains("--json"));
}

/// A status of item `id` of kind `kind` (`tools`, from `/overview`).
fn tool_status(host: &Butler, id: &str) -> Value {
    let (_, overview) = host.get_json("/overview");
    overview["tools"].as_array().into_iter().flatten().find(|t| t["id"] == id).cloned().unwrap_or(Value::Null)
}

const LIVE: [&str; 4] = ["starting", "running", "healthy", "unhealthy"];

/// Samples `id`'s state for `within`, until `until` holds; every sample, in order.
fn sample(host: &Butler, id: &str, within: Duration, until: impl Fn(&Value) -> bool) -> Vec<Value> {
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < within {
        let status = tool_status(host, id);
        let done = until(&status);
        seen.push(status);
        if done {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    seen
}

#[test]
fn ps_shows_a_providers_uptime_and_what_a_tool_between_two_runs_is_doing() {
    let dir = instance_with_config(&json!({}));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let provider = root.join("tests/providers/fake_mcp.py").display().to_string();
    let log = dir.path().join("fake.log").display().to_string();
    write_manifest(
        dir.path(),
        "tools/fake",
        &json!({"schemaVersion": 1, "kind": "tool", "id": "fake", "name": "Fake",
                "mcp": {"transport": "stdio", "command": ["python3", provider], "env": {"FAKE_MCP_LOG": log}}}),
    );
    // Ignores SIGTERM: a restart waits out the keeper's grace before SIGKILL.
    write_manifest(
        dir.path(),
        "tools/stubborn",
        &json!({"schemaVersion": 1, "kind": "tool", "id": "stubborn", "name": "Stubborn",
                "hosted": {"command": ["sh", "-c", "trap '' TERM; while :; do sleep 1; done"], "autoStart": true}}),
    );
    // Exits with a failure after leaving behind a child that ignores SIGTERM: the keeper
    // stops what it left for its grace before the host hears of the exit.
    write_manifest(
        dir.path(),
        "tools/leaver",
        &json!({"schemaVersion": 1, "kind": "tool", "id": "leaver", "name": "Leaver",
                "hosted": {"command": ["sh", "-c", "(trap '' TERM; exec sleep 60) & sleep 1; exit 3"], "autoStart": true}}),
    );
    let host = Butler::start(dir.path());
    let workdir = dir.path();
    wait_until(Duration::from_secs(30), "stubborn runs", || tool_status(&host, "stubborn")["pid"].is_u64());

    // An MCP provider that runs shows how long it has.
    let (code, out, err) = butler(workdir, &["start", "fake"], None);
    assert_eq!(code, 0, "{out}{err}");
    std::thread::sleep(Duration::from_millis(1100));
    let (code, out, err) = butler(workdir, &["ps"], None);
    assert_eq!(code, 0, "{err}");
    let row: Vec<&str> = line_of(&out, "fake").split_whitespace().collect();
    assert_eq!((row[1], row[2]), ("mcp", "ready"), "{out}");
    assert!(row[3].parse::<u32>().is_ok(), "a pid: {out}");
    assert!(row[4].ends_with('s') && row[4] != "0s", "an uptime of a second or more: {out}");
    let (_, out, _) = butler(workdir, &["ps", "--json"], None);
    let rows: Value = serde_json::from_str(&out).expect("json");
    let fake = rows.as_array().expect("rows").iter().find(|r| r["id"] == "fake").expect("fake").clone();
    assert!(fake["status"]["uptimeMs"].as_u64().is_some_and(|ms| ms >= 1000), "{fake}");
    assert!(fake["status"]["startedAt"].is_u64(), "{fake}");

    // A program that exited while the keeper stops what it left: restarting, no pid. Watched
    // from a run's start to its backoff.
    wait_until(Duration::from_secs(30), "a run of leaver", || {
        let status = tool_status(&host, "leaver");
        LIVE.contains(&status["state"].as_str().unwrap_or_default()) && status["pid"].is_u64()
    });
    let seen = sample(&host, "leaver", Duration::from_secs(20), |s| s["state"] == "backoff");
    assert_eq!(seen.last().map(|s| &s["state"]), Some(&json!("backoff")), "{seen:#?}");
    let winding = seen.iter().filter(|s| s["state"] == "restarting").count();
    assert!(winding >= 5, "the keeper's grace shows as restarting: {seen:#?}");
    let wrong: Vec<&Value> =
        seen.iter().filter(|s| LIVE.contains(&s["state"].as_str().unwrap_or_default()) && s["pid"].is_null()).collect();
    assert!(wrong.is_empty(), "a live state without a program: {wrong:#?}");

    // A restart by hand of a program that ignores SIGTERM: restarting until the new one runs.
    let old_pid = tool_status(&host, "stubborn")["pid"].clone();
    let restart = {
        let workdir = workdir.to_path_buf();
        std::thread::spawn(move || butler(&workdir, &["restart", "stubborn"], None))
    };
    let seen = sample(&host, "stubborn", Duration::from_secs(20), |s| s["pid"].is_u64() && s["pid"] != old_pid);
    let (code, out, err) = restart.join().expect("restart");
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("stubborn: running (pid "), "{out}");
    let restarting = seen.iter().filter(|s| s["state"] == "restarting").count();
    assert!(restarting >= 5, "the stop's grace shows as restarting: {seen:#?}");
    // From the moment the restart shows, until the new program runs.
    let wrong: Vec<&Value> = seen
        .iter()
        .skip_while(|s| s["state"] != "restarting")
        .filter(|s| s["state"] == "running" && (s["pid"].is_null() || s["pid"] == old_pid))
        .collect();
    assert!(wrong.is_empty(), "running, but not the new program: {wrong:#?}");
    let (_, out, _) = butler(workdir, &["ps"], None);
    assert!(line_of(&out, "stubborn").contains(" running "), "{out}");
}

/// The journal's spool lines of the instance at `workdir`.
fn journal(workdir: &Path) -> Vec<Value> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(workdir.join("self/journal/spool")).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        lines.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
    }
    lines
}

#[test]
fn observe_records_what_post_observe_records_and_refuses_what_it_refuses() {
    let (host, _dir) = Butler::start_fresh();
    host.wait_ready("journal");
    let workdir = host.workdir.clone();
    let args = ["observe", "--source", "e2e", "--type", "decision", "--tag", "a", "--tag", "b", "--ref", "docs/x.md"];
    let (code, out, err) = butler(&workdir, &[&args[..], &["Builds use --release."]].concat(), None);
    assert_eq!((code, out.trim()), (0, "queued"), "{err}");
    let (code, _, err) = butler(&workdir, &["observe", "--source", "e2e", "-"], Some("from a pipe\n"));
    assert_eq!(code, 0, "{err}");
    wait_until(Duration::from_secs(10), "both recorded", || journal(&workdir).len() >= 2);
    let lines = journal(&workdir);
    let first = lines.iter().find(|l| l["text"] == "Builds use --release.").expect("the first");
    assert_eq!(
        (&first["source"], &first["type"], &first["tags"], &first["ref"]),
        (&json!("e2e"), &json!("decision"), &json!(["a", "b"]), &json!("docs/x.md")),
        "{first}"
    );
    let piped = lines.iter().find(|l| l["text"] == "from a pipe").expect("stdin, without its line end");
    assert_eq!(piped["type"], "note", "{piped}");

    // Refused as the route refuses it, with its code and message.
    for (flags, body) in [
        (vec!["--source", "Not Valid", "x"], json!({"source": "Not Valid", "text": "x"})),
        (vec!["--type", "rumour", "x"], json!({"source": "cli", "type": "rumour", "text": "x"})),
        (vec!["--source", "e2e", "-"], json!({"source": "e2e", "text": ""})),
    ] {
        let (status, answer) = host.post_json("/observe", &body, &[]);
        assert_eq!(status, 400, "{answer}");
        let message = answer["error"]["message"].as_str().expect("message");
        let (code, _, err) = butler(&workdir, &[&["observe"][..], &flags].concat(), Some(""));
        assert_eq!(code, 1, "{flags:?}");
        assert!(err.contains("invalid_observation") && err.contains(message), "{flags:?}: {err} / {message}");
    }
    assert_eq!(journal(&workdir).len(), 2, "nothing refused was recorded");
}

/// `git ARGS…` in `repo`; its output, or a panic with what it said.
fn git(repo: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_AUTHOR_NAME", "E2E")
        .env("GIT_AUTHOR_EMAIL", "e2e@example.invalid")
        .env("GIT_COMMITTER_NAME", "E2E")
        .env("GIT_COMMITTER_EMAIL", "e2e@example.invalid")
        .output()
        .expect("git");
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// A commit of one new file; how long `git commit` took, and what it printed.
fn commit(repo: &Path, file: &str, subject: &str) -> (Duration, String) {
    std::fs::write(repo.join(file), subject).expect("file");
    git(repo, &["add", file]);
    let started = Instant::now();
    let output = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["commit", "-q", "-m", subject])
        .env("GIT_AUTHOR_NAME", "E2E")
        .env("GIT_AUTHOR_EMAIL", "e2e@example.invalid")
        .env("GIT_COMMITTER_NAME", "E2E")
        .env("GIT_COMMITTER_EMAIL", "e2e@example.invalid")
        .output()
        .expect("git commit");
    let took = started.elapsed();
    assert!(output.status.success(), "the commit failed: {}", String::from_utf8_lossy(&output.stderr));
    (took, format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)))
}

#[test]
fn the_git_hook_records_each_commit_and_keeps_the_hook_it_found() {
    let (host, dir) = Butler::start_fresh();
    host.wait_ready("journal");
    let workdir = host.workdir.clone();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).expect("repo");
    git(&repo, &["init", "-q", "-b", "main"]);
    let hooks = repo.join(".git/hooks");
    let existing = "#!/bin/sh\necho ran >> \"$(git rev-parse --git-dir)/existing-hook.log\"\n";
    std::fs::write(hooks.join("post-commit"), existing).expect("hook");
    std::fs::set_permissions(hooks.join("post-commit"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");

    let (code, out, err) = butler(&workdir, &["hook", "git", "install", repo.to_str().expect("utf8")], None);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("post-commit"), "{out}");
    let (_, printed) = commit(&repo, "notes.txt", "Add the release notes");
    assert!(printed.is_empty(), "the hook says nothing: {printed}");
    let sha = git(&repo, &["rev-parse", "HEAD"]);
    let short = git(&repo, &["rev-parse", "--short", "HEAD"]);
    let top = git(&repo, &["rev-parse", "--show-toplevel"]);
    wait_until(Duration::from_secs(20), "the commit recorded", || {
        journal(&workdir).iter().any(|l| l["source"] == "git")
    });
    let recorded = journal(&workdir).into_iter().find(|l| l["source"] == "git").expect("recorded");
    assert_eq!(recorded["type"], "milestone", "{recorded}");
    assert_eq!(recorded["ref"], format!("git://{top}#{sha}"), "{recorded}");
    let text = recorded["text"].as_str().expect("text");
    for part in ["Add the release notes", &short, "main", "notes.txt"] {
        assert!(text.contains(part), "`{part}` in {text:?}");
    }
    let ran = std::fs::read_to_string(repo.join(".git/existing-hook.log")).expect("the existing hook ran");
    assert_eq!(ran, "ran\n");

    // Many changed paths: the first ones named, the rest counted, within the journal's limit.
    for n in 0..30 {
        std::fs::write(repo.join(format!("file-{n:02}.txt")), "x").expect("file");
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "Thirty files"]);
    wait_until(Duration::from_secs(20), "the second commit recorded", || {
        journal(&workdir).iter().any(|l| l["text"].as_str().is_some_and(|t| t.starts_with("Thirty files")))
    });
    let lines = journal(&workdir);
    let text = lines.iter().find_map(|l| l["text"].as_str().filter(|t| t.starts_with("Thirty files"))).expect("text");
    assert!(text.contains("file-00.txt") && !text.contains("file-29.txt") && text.contains("and 10 more"), "{text}");

    // No host: the commit succeeds at once, silently, and the existing hook still runs.
    assert!(host.stop().success());
    let (took, printed) = commit(&repo, "late.txt", "Commit while the host is down");
    assert!(took < Duration::from_secs(2), "the commit took {took:?}");
    assert!(printed.is_empty(), "{printed}");
    assert_eq!(std::fs::read_to_string(repo.join(".git/existing-hook.log")).expect("log"), "ran\nran\nran\n");

    // Uninstalled: the hook that was there is back, as it was.
    let (code, _, err) = butler(&workdir, &["hook", "git", "uninstall", repo.to_str().expect("utf8")], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string(hooks.join("post-commit")).expect("hook"), existing);
    let left: Vec<String> = std::fs::read_dir(&hooks)
        .expect("hooks")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("post-commit"))
        .collect();
    assert_eq!(left, ["post-commit"]);
}

#[test]
fn the_git_hook_goes_where_core_hooks_path_says_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("temp");
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).expect("repo");
    git(&repo, &["init", "-q"]);
    git(&repo, &["config", "core.hooksPath", "shared-hooks"]);
    let workdir = dir.path().join("no-host");
    let (code, _, err) = butler(&workdir, &["hook", "git", "install", repo.to_str().expect("utf8")], None);
    assert_eq!(code, 0, "{err}");
    let hook = repo.join("shared-hooks/post-commit");
    assert!(hook.is_file(), "installed where core.hooksPath points");
    assert!(!repo.join(".git/hooks/post-commit").exists());
    // No instance and no host at all: the commit is as quick and quiet as without a hook.
    let (took, printed) = commit(&repo, "a.txt", "First");
    assert!(took < Duration::from_secs(2) && printed.is_empty(), "{took:?}: {printed}");
    let (code, _, err) = butler(&workdir, &["hook", "git", "uninstall", repo.to_str().expect("utf8")], None);
    assert_eq!(code, 0, "{err}");
    assert!(!hook.exists(), "no hook was there before: none after");
    let (code, _, err) = butler(&workdir, &["hook", "git", "uninstall", repo.to_str().expect("utf8")], None);
    assert_eq!(code, 1);
    assert!(err.contains("no Butler hook"), "{err}");
}
