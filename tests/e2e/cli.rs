//! The command line: `--help`, `--version`, `check`, and `serve`'s refusals.

use std::net::TcpListener;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{Butler, butler_command, write_manifest};

fn run(args: &[&str]) -> (i32, String, String) {
    let home = tempfile::tempdir().expect("home");
    let output = butler_command(home.path()).args(args).output().expect("run butler");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn help_and_version() {
    let (code, out, _) = run(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), format!("butler {}", env!("CARGO_PKG_VERSION")));
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("serve") && out.contains("check"), "{out}");
    let (code, out, _) = run(&["serve", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("--workdir") && out.contains("--port") && out.contains("--bind"), "{out}");
}

#[test]
fn serve_refuses_a_non_loopback_bind_and_a_busy_port() {
    let dir = tempfile::tempdir().expect("temp");
    let workdir = dir.path().to_str().expect("utf8");
    for addr in ["0.0.0.0", "::", "192.168.1.10"] {
        let (code, _, err) = run(&["serve", "--workdir", workdir, "--port", "0", "--bind", addr]);
        assert_ne!(code, 0, "{addr}");
        assert!(err.contains("only binds loopback"), "{addr}: {err}");
        // Refused before anything is created: the folder is as empty as it was.
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read dir").map_while(Result::ok).collect();
        assert!(left.is_empty(), "{addr}: the refusal left {left:?}");
    }
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let fresh = dir.path().join("fresh");
    let (code, _, err) = run(&["serve", "--workdir", fresh.to_str().expect("utf8"), "--port", &port]);
    assert_ne!(code, 0);
    assert!(err.contains("already in use"), "{err}");
    assert!(!fresh.exists(), "a taken port leaves no instance behind");
}

#[test]
fn serve_refuses_an_invalid_instance_config_naming_file_field_and_reason() {
    let dir = tempfile::tempdir().expect("temp");
    std::fs::write(dir.path().join("butler.json"), r#"{"scanRoots": "tools", "inject": {"maxChars": 5}}"#)
        .expect("write");
    let (code, _, err) = run(&["serve", "--workdir", dir.path().to_str().expect("utf8"), "--port", "0"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("butler.json")
            && err.contains("/scanRoots: must be an array")
            && err.contains("/inject/maxChars: must be at least 200"),
        "{err}"
    );
    std::fs::write(dir.path().join("butler.json"), "{ not json").expect("write");
    let (code, _, err) = run(&["serve", "--workdir", dir.path().to_str().expect("utf8"), "--port", "0"]);
    assert_ne!(code, 0);
    assert!(err.contains("not valid JSON"), "{err}");
}

#[test]
fn check_explains_a_manifest_before_it_is_dropped_in() {
    let dir = tempfile::tempdir().expect("temp");
    write_manifest(dir.path(), "good", &json!({"schemaVersion":1,"kind":"tool","id":"good","name":"Good"}));
    write_manifest(
        dir.path(),
        "bad",
        &json!({"schemaVersion":1,"kind":"faculty","id":"bad","name":"Bad","icon":"x.png","mcp":{"transport":"stdio","command":["x"]}}),
    );
    let good = dir.path().join("good");
    let (code, out, _) = run(&["check", good.to_str().expect("utf8")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("1 extension valid") && out.contains("tool `good`"), "{out}");
    let bad = dir.path().join("bad/butler.json");
    let (code, out, _) = run(&["check", bad.to_str().expect("utf8")]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("rejected"), "{out}");
    assert!(out.contains("/icon: `icon` is not allowed for kind `faculty`"), "{out}");
    assert!(out.contains("/mcp: `mcp` is not allowed for kind `faculty`"), "{out}");
    let (code, out, _) = run(&["check", "--json", bad.to_str().expect("utf8")]);
    assert_eq!(code, 1);
    let parsed: Value = serde_json::from_str(&out).expect("json output");
    assert_eq!(parsed["ok"], false);
    assert_eq!(parsed["diagnostics"][0]["errors"].as_array().map(Vec::len), Some(2));
}

/// A Suzu Lives capability package's static checks, from the command line: its folder or
/// its manifest; a good package passes, a bad one lists each problem with its rule.
#[test]
fn check_runs_a_suzu_packages_static_checks() {
    let dir = tempfile::tempdir().expect("temp");
    let package = dir.path();
    let manifest = json!({"schemaVersion": 1, "id": "example.weather", "name": "Weather", "version": "1.0.0",
        "adapters": {"skill": {"directory": "skill"}, "mcp": {"transport": "stdio", "command": "node", "args": ["./server.mjs"]}}});
    std::fs::write(package.join("suzu-capability.json"), manifest.to_string()).expect("manifest");
    std::fs::create_dir(package.join("skill")).expect("mkdir");
    std::fs::write(package.join("skill/SKILL.md"), "---\nname: weather\n---\nSay it.\n").expect("skill");
    std::fs::write(package.join("server.mjs"), "").expect("server");
    let (code, out, _) = run(&["check", package.to_str().expect("utf8")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("example.weather 1.0.0 — Weather") && out.contains("passes the static checks"), "{out}");

    std::os::unix::fs::symlink("/etc/passwd", package.join("skill/passwd")).expect("symlink");
    std::fs::remove_file(package.join("server.mjs")).expect("rm");
    let path = package.join("suzu-capability.json");
    let (code, out, _) = run(&["check", path.to_str().expect("utf8")]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("skill/passwd: [symlink]") && out.contains("server.mjs: [missing]"), "{out}");
    let (code, out, _) = run(&["check", "--json", path.to_str().expect("utf8")]);
    assert_eq!(code, 1);
    let parsed: Value = serde_json::from_str(&out).expect("json output");
    let rules: Vec<&str> =
        parsed["report"]["problems"].as_array().expect("problems").iter().filter_map(|p| p["rule"].as_str()).collect();
    assert_eq!(rules, ["symlink", "missing"], "{parsed}");
    assert_eq!(parsed["report"]["manifest"], path.to_str().expect("utf8"));
}

#[test]
fn check_validates_a_whole_instance() {
    let dir = tempfile::tempdir().expect("temp");
    let workdir = dir.path().join("instance");
    drop(Butler::start(&workdir));
    let path = workdir.to_str().expect("utf8");
    let (code, out, _) = run(&["check", path]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("4 extensions valid") && out.contains("(cards, distill, journal, validity)"),
        "the built-in faculties: {out}"
    );
    write_manifest(&workdir, "tools/a", &json!({"schemaVersion":1,"kind":"tool","id":"a","name":"A"}));
    write_manifest(&workdir, "tools/b", &json!({"schemaVersion":1,"kind":"tool","id":"a","name":"B"}));
    let (code, out, _) = run(&["check", path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("tools/b/butler.json — rejected") && out.contains("already registered by tools/a/butler.json"),
        "{out}"
    );
    let (code, _, err) = run(&["check", dir.path().join("nowhere").to_str().expect("utf8")]);
    assert_ne!(code, 0);
    assert!(err.contains("not a Butler instance"), "{err}");

    // What the host checks of its root config only as it starts is checked too.
    std::fs::remove_dir_all(workdir.join("tools/b")).expect("remove");
    let config = json!({"mcp": {"profiles": {"both": {"prefix": false}}, "legacyProviders": ["gone"]}});
    std::fs::write(workdir.join("butler.json"), config.to_string()).expect("root config");
    let (code, out, _) = run(&["check", path]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("butler.json — rejected")
            && out.contains("/mcp/profiles/both: `prefix: false` needs exactly one provider"),
        "{out}"
    );
    assert!(out.contains("/mcp/legacyProviders: no provider `gone` is registered"), "{out}");

    // Two MCP servers claiming one namespace: the host leaves the later one out of the hub,
    // and says so in its catalog; `check` says the same, from --workdir too.
    std::fs::write(workdir.join("butler.json"), "{}").expect("root config");
    let server = json!({"transport": "stdio", "command": ["python3", "server.py"]});
    write_manifest(&workdir, "tools/a", &json!({"schemaVersion":1,"kind":"tool","id":"a","name":"A","mcp": server}));
    let mut named = server.clone();
    named["namespace"] = json!("a");
    write_manifest(&workdir, "tools/b", &json!({"schemaVersion":1,"kind":"tool","id":"b","name":"B","mcp": named}));
    let (code, out, _) = run(&["check", "--workdir", path]);
    assert_eq!(code, 0, "a warning, not a rejection: {out}");
    let expected = "/mcp/namespace: its MCP server would have the namespace `a`, which the extension `a` has";
    assert!(out.contains("tools/b/butler.json — warning") && out.contains(expected), "{out}");
    let butler = Butler::start(&workdir);
    let catalog = butler.catalog().to_string();
    assert!(catalog.contains("which the extension `a` has: it is left out of the hub"), "{catalog}");
}

#[test]
fn the_settings_file_sets_defaults_and_flags_win_over_it() {
    let home = tempfile::tempdir().expect("home");
    let dir = tempfile::tempdir().expect("temp");
    let from_settings = dir.path().join("from-settings");
    std::fs::create_dir_all(home.path().join("butler")).expect("mkdir");
    std::fs::write(
        home.path().join("butler/butler.toml"),
        format!("workdir = {:?}\nbind = \"0.0.0.0\"\n", from_settings.to_str().expect("utf8")),
    )
    .expect("write settings");
    // The settings' non-loopback bind is refused like the flag would be.
    let output = butler_command(home.path()).args(["serve", "--port", "0"]).output().expect("run");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("only binds loopback"));
    // The flag wins over the settings file, and the settings' workdir is used.
    let mut child = butler_command(home.path())
        .args(["serve", "--port", "0", "--bind", "127.0.0.1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().expect("stdout")), &mut line)
        .expect("line");
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("http://127.0.0.1:"), "{line}");
    assert!(from_settings.join("butler.json").is_file(), "instance created where the settings said");
    // A malformed settings file is a clear error, not a silent default.
    std::fs::write(home.path().join("butler/butler.toml"), "port = \"many\"\n").expect("write");
    let output = butler_command(home.path()).args(["serve", "--port", "0"]).output().expect("run");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("invalid settings file"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn serve_outlives_a_reader_that_stops_after_the_first_line() {
    let home = tempfile::tempdir().expect("home");
    let workdir = tempfile::tempdir().expect("workdir");
    let mut child = butler_command(home.path())
        .args(["serve", "--port", "0", "--workdir"])
        .arg(workdir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).expect("first line");
    // As `butler serve | head -1` does: the pipe closes after the first line.
    drop(stdout);
    let origin = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|rest| rest.split('/').next())
        .map(|authority| format!("http://{authority}"))
        .expect("a URL in the first line");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let health = butler_test_support::http::client()
        .build()
        .expect("client")
        .get(format!("{origin}/myspace-butler/api/health"))
        .send();
    let alive = child.try_wait().expect("try_wait").is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(alive, "the host exited once its stdout closed");
    assert_eq!(health.expect("health").status(), 200);
}

/// `butler … | head`: a reader that goes away ends the command quietly — no panic, no
/// error — whatever it was printing.
#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let dir = tempfile::tempdir().expect("temp");
    write_manifest(dir.path(), "good", &json!({"schemaVersion":1,"kind":"tool","id":"good","name":"Good"}));
    let good = dir.path().join("good");
    for args in [vec!["check", "--json", good.to_str().expect("utf8")], vec!["--help"], vec!["faculty", "--help"]] {
        let home = tempfile::tempdir().expect("home");
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader); // gone before the first write
        let output = butler_command(home.path()).args(&args).stdout(writer).output().expect("run butler");
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
        assert_eq!(output.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// The state of hosted tool `id`, from the running host.
fn tool_state(butler: &Butler, id: &str) -> String {
    let (_, overview) = butler.get_json("/overview");
    let tools = overview["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().find(|t| t["id"] == id).and_then(|t| t["state"].as_str()).unwrap_or("absent").to_owned()
}

/// pm2's habits: `ps` with what each process costs, `logs` (kept, stderr only, followed),
/// `start|stop|restart`, and a stop that outlives a host restart.
#[test]
fn ps_logs_start_stop_restart_like_pm2() {
    let dir = crate::util::instance_with_config(&json!({}));
    let workdir = dir.path().to_str().expect("utf8").to_owned();
    let script = "echo hello-out; echo hello-err >&2; exec sleep 600";
    write_manifest(
        dir.path(),
        "tools/echoer",
        &json!({"schemaVersion":1,"kind":"tool","id":"echoer","name":"Echoer",
                "hosted": {"command": ["sh", "-c", script], "autoStart": true}}),
    );
    let butler = Butler::start(dir.path());
    let running = |butler: &Butler| {
        crate::util::wait_until(Duration::from_secs(30), "echoer running", || {
            tool_state(butler, "echoer") == "running"
        });
    };
    running(&butler);
    let cli = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--workdir", &workdir]);
        run(&all)
    };

    let (code, out, err) = cli(&["ps"]);
    assert_eq!(code, 0, "{err}");
    let row = out.lines().find(|l| l.starts_with("echoer ")).unwrap_or_else(|| panic!("a row for echoer: {out}"));
    assert!(row.contains(" tool ") && row.contains(" running ") && row.contains(" MB"), "{out}");
    let (code, out, _) = cli(&["ps", "--json"]);
    assert_eq!(code, 0);
    let rows: Value = serde_json::from_str(&out).expect("json");
    let echoer = &rows.as_array().expect("rows")[0];
    assert_eq!((&echoer["id"], &echoer["kind"]), (&json!("echoer"), &json!("tool")), "{rows}");
    assert!(echoer["status"]["rssBytes"].as_u64().is_some_and(|b| b > 0), "{rows}");
    assert!(echoer["status"]["cpuPercent"].is_number(), "{rows}");

    crate::util::wait_until(Duration::from_secs(10), "both lines logged", || {
        let (_, out, _) = cli(&["logs", "echoer"]);
        out.contains("out    hello-out") && out.contains("err    hello-err")
    });
    let (code, out, _) = cli(&["logs", "echoer", "--stderr"]);
    assert_eq!(code, 0);
    assert!(out.contains("hello-err") && !out.contains("hello-out"), "{out}");

    // Following: a restart's new lines arrive on the open stream.
    let mut follow = butler_command(dir.path())
        .args(["logs", "echoer", "--follow", "--workdir", &workdir])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("follow");
    let stdout = follow.stdout.take().expect("stdout");
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let (code, out, err) = cli(&["restart", "echoer"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("echoer: running (pid "), "{out}");
    let mut seen = 0;
    while seen < 2 {
        let line = received.recv_timeout(Duration::from_secs(30)).expect("followed lines keep coming");
        seen += usize::from(line.contains("hello-out"));
    }
    let _ = follow.kill();
    let _ = follow.wait();

    // A stop by hand is remembered: the host starts again without it, until it is started.
    let (code, out, _) = cli(&["stop", "echoer"]);
    assert_eq!((code, out.trim()), (0, "echoer: stopped"));
    assert!(butler.stop().success());
    let butler = Butler::start(dir.path());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(tool_state(&butler, "echoer"), "stopped", "autoStart does not undo the owner's stop");
    let (code, out, _) = cli(&["start", "echoer"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("echoer: running (pid "), "{out}");
    assert!(butler.stop().success());
    let butler = Butler::start(dir.path());
    running(&butler);

    let (code, _, err) = cli(&["stop", "nosuch"]);
    assert_eq!(code, 1);
    assert!(err.contains("no hosted tool or service and no MCP provider `nosuch`"), "{err}");
    let (code, _, err) = cli(&["logs", "nosuch"]);
    assert_eq!(code, 1);
    assert!(err.contains("`nosuch`"), "{err}");
}

/// A new instance's first run and a Ctrl-C, with the default log level: the background
/// compile of the built-in faculties and the shutdown are normal, so no line is a warning.
#[test]
fn a_first_run_and_its_shutdown_print_no_warning() {
    let home = tempfile::tempdir().expect("home");
    let dir = tempfile::tempdir().expect("temp");
    let log = dir.path().join("serve.log");
    let mut serve = butler_command(home.path())
        .env_remove("RUST_LOG")
        .args(["serve", "--port", "0", "--workdir"])
        .arg(dir.path().join("instance"))
        .stderr(std::fs::File::create(&log).expect("log"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    crate::util::wait_until(Duration::from_secs(120), "the built-ins compiled", || {
        text().matches("faculty runtime: compiled").count() >= 4
    });
    let status = std::process::Command::new("kill").args(["-INT", &serve.id().to_string()]).status().expect("kill");
    assert!(status.success());
    assert!(serve.wait().expect("wait").success());
    let text = text();
    assert!(text.contains("stopped"), "{text}");
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains(" WARN ") || l.contains(" ERROR ")).collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
}
