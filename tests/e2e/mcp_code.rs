//! Code mode with real providers: `butler__run_code` runs a JavaScript program in the
//! built-in `code` faculty (a WebAssembly component) that calls the endpoint's tools —
//! `server-filesystem` from npm, `mcp-server-time` from PyPI — and returns one value; each
//! way a program can go wrong fails that call alone, with its reason.

use serde_json::{Value, json};

use crate::mcp::{Client, LIMIT, tools};
use crate::mcp_search::{stdio, three_providers};
use crate::util::{Butler, wait_until, write_manifest};

const RUN_CODE: &str = "butler__run_code";

/// Runs `code` (with `extra` arguments) and returns the `tools/call` result.
fn run(client: &mut Client, code: &str, extra: Value) -> Value {
    let mut arguments = json!({"code": code});
    if let (Some(arguments), Some(extra)) = (arguments.as_object_mut(), extra.as_object()) {
        arguments.extend(extra.clone());
    }
    client.call(RUN_CODE, arguments)
}

/// The text of a failed run (asserting it failed).
fn failure_of(result: &Value) -> String {
    assert_eq!(result["isError"], true, "expected a failure: {result}");
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_program_calls_two_real_providers_tools_and_returns_one_value() {
    let dir = three_providers(&json!({"mcp": {"profiles": {
        "coder": {"codeMode": true, "exposure": "search"},
        "clock": {"codeMode": true, "providers": ["clock"]},
    }}}));
    let notes = dir.path().join("notes").display().to_string();
    let butler = Butler::start(dir.path());

    // Offered only where code mode is on: beside the search tools on `coder`, not on `/mcp`.
    let mut coder = Client::connect(&butler, "/mcp/p/coder");
    wait_until(LIMIT, "the code faculty is installed and listed", || coder.tool_names().iter().any(|n| n == RUN_CODE));
    assert_eq!(
        coder.tool_names(),
        ["butler__find_tools", "butler__describe_tools", "butler__call_tool", RUN_CODE],
        "search mode lists the search tools, then code mode's"
    );
    let mut main = Client::connect(&butler, "/mcp");
    assert!(!main.tool_names().iter().any(|n| n == RUN_CODE), "code mode is off on /mcp");
    let refused = main.request("tools/call", json!({"name": RUN_CODE, "arguments": {"code": "return 1"}}));
    assert_eq!(refused["error"]["code"], -32602, "not callable where it is not offered: {refused}");

    // One program: list a folder, read each file, ask the time; one value comes back.
    let program = format!(
        r#"
        const listing = await tools.files.list_directory({{path: {notes:?}}});
        const names = String(listing.content ?? listing).split("\n")
            .filter(line => line.startsWith("[FILE]")).map(line => line.slice(7));
        const texts = [];
        for (const name of names) {{
            const file = await tools.files.read_text_file({{path: {notes:?} + "/" + name}});
            texts.push(String(file.content ?? file).trim());
        }}
        const now = await tools.time.get_current_time({{timezone: "UTC"}});
        console.log("read", names.length, "files");
        return {{files: names, texts, timezone: now.timezone, dated: typeof now.datetime === "string"}};
        "#
    );
    let result = run(&mut coder, &program, json!({}));
    assert!(result.get("isError").is_none(), "{result}");
    let data = &result["structuredContent"];
    assert_eq!(data["result"]["files"], json!(["todo.txt"]), "{result}");
    assert_eq!(data["result"]["texts"], json!(["water the plants"]));
    assert_eq!(data["result"]["timezone"], "UTC");
    assert_eq!(data["result"]["dated"], true);
    assert_eq!(data["logs"], json!(["read 1 files"]));

    // Each inner call is in the activity log under its parent, with its provider.
    let logged = || {
        let (status, page) = butler.get_json("/mcp/activity?limit=20");
        assert_eq!(status, 200, "{page}");
        page
    };
    wait_until(LIMIT, "the program's call logged", || {
        logged()["entries"].as_array().is_some_and(|e| e.iter().any(|e| e["name"] == RUN_CODE && e["outcome"] == "ok"))
    });
    let page = logged();
    let entries = page["entries"].as_array().expect("entries");
    for (tool, provider) in
        [("files__list_directory", "files"), ("files__read_text_file", "files"), ("time__get_current_time", "clock")]
    {
        let entry = entries.iter().find(|e| e["name"] == tool).unwrap_or_else(|| panic!("{tool} logged: {page}"));
        assert_eq!(entry["parent"], RUN_CODE, "{entry}");
        assert_eq!(entry["provider"], provider, "{entry}");
        assert_eq!(entry["endpoint"], "p/coder", "{entry}");
    }

    // A call the program's deadline cuts off is logged too, as cancelled.
    let long = "await tools.everything['trigger-long-running-operation']({duration: 30, steps: 30}); return 'done';";
    let text = failure_of(&run(&mut coder, long, json!({"timeoutSec": 1})));
    assert!(text.contains("timeout"), "{text}");
    wait_until(LIMIT, "the cut-off call logged", || {
        logged()["entries"].as_array().is_some_and(|e| {
            e.iter().any(|e| {
                e["name"] == "everything__trigger-long-running-operation"
                    && e["outcome"] == "cancelled"
                    && e["parent"] == RUN_CODE
            })
        })
    });

    // Carried by butler__call_tool, a run is still a run calling itself.
    let result = run(
        &mut coder,
        "try { await tools.butler.call_tool({name: 'butler__run_code', arguments: {code: 'return 1'}}); return 'ran'; } \
         catch (e) { return e.message; }",
        json!({}),
    );
    assert_eq!(result["structuredContent"]["result"], "`butler__run_code` cannot call itself", "{result}");

    // A profile's program reaches that profile's tools only.
    let mut clock = Client::connect(&butler, "/mcp/p/clock");
    let result = run(
        &mut clock,
        &format!(
            r#"const listed = (await tools.list()).map(t => t.name);
            try {{ await tools.files.list_directory({{path: {notes:?}}}); return "reached"; }}
            catch (e) {{ return {{listed, refused: e.message}}; }}"#
        ),
        json!({}),
    );
    let data = &result["structuredContent"]["result"];
    assert_eq!(data["listed"], json!(["time__get_current_time", "time__convert_time"]), "{result}");
    assert!(data["refused"].as_str().is_some_and(|m| m.contains("unknown tool: files__list_directory")), "{result}");
}

#[test]
fn every_way_a_program_goes_wrong_fails_that_call_alone_with_its_reason() {
    let dir = crate::mcp::instance();
    let config = json!({"mcp": {"codeMode": true}, "faculties": {"code": {"memoryMb": 32}}});
    std::fs::write(dir.path().join("butler.json"), config.to_string()).expect("root config");
    let time = tools().join("mcp-venv/bin/mcp-server-time").display().to_string();
    write_manifest(dir.path(), "tools/clock", &stdio("clock", json!([time]), Some("time")));
    let sampler = crate::mcp::root().join("tests/providers/sampling_provider.py").display().to_string();
    write_manifest(dir.path(), "tools/sampler", &stdio("sampler", json!(["python3", sampler]), None));
    let butler = Butler::start(dir.path());
    let mut client = Client::connect(&butler, "/mcp");
    wait_until(LIMIT, "the code faculty is listed", || client.tool_names().iter().any(|n| n == RUN_CODE));

    let cases: [(&str, &str, Value, &str); 16] = [
        ("a loop without end", "while (true) {}", json!({"timeoutSec": 1}), "timeout"),
        (
            "memory without bound",
            "const a = []; while (true) a.push('x'.repeat(4096) + a.length);",
            json!({}),
            "memory_limit",
        ),
        ("output without end", "while (true) console.log('flood');", json!({}), "output cap"),
        (
            "tool calls without end, the error caught",
            "try { while (true) await tools.time.get_current_time({timezone: 'UTC'}); } catch (e) {} return 'done';",
            json!({}),
            "call budget",
        ),
        ("a result too large", "return 'y'.repeat(1100000);", json!({}), "result_too_large"),
        ("a syntax error", "return (;", json!({}), "syntax_error: faculty `code`: SyntaxError: unexpected token ';'"),
        ("a syntax error's place, as the program counts it", "return (;", json!({}), "at line 1, col 9"),
        ("an uncaught error", "throw new TypeError('boom');", json!({}), "Uncaught TypeError: boom (line 1, column 7)"),
        ("an uncaught error's place", "const y = null;\n\nreturn y.z;", json!({}), "(line 3, column 10)"),
        ("a thrown object that is no Error", "throw {code: 42};", json!({}), r#"Uncaught {"code":42}"#),
        (
            "recursion without end",
            "function f(n) { return f(n + 1) + 1; } return f(0);",
            json!({}),
            "RuntimeLimitError",
        ),
        ("a promise never settled", "await new Promise(() => {});", json!({}), "never_settled"),
        ("a program cut short", "return 1 +", json!({}), "at the end of the program"),
        (
            "recursion through async functions without end",
            "async function f(n) { return await f(n + 1); } return await f(0);",
            json!({}),
            "RuntimeLimitError",
        ),
        ("a thrown string of any size, cut", "throw 'S'.repeat(100000);", json!({}), "(83616 more bytes)"),
        (
            "what it logged before it failed, kept",
            "console.log('step one', new Error('boom'), {o: 1}); throw new Error('later');",
            json!({}),
            "console:\nstep one Error: boom {\"o\":1}",
        ),
    ];
    for (what, code, extra, reason) in cases {
        let text = failure_of(&run(&mut client, code, extra));
        assert!(text.contains(reason), "{what}: expected {reason:?} in {text:?}");
        // That call alone failed: the next program runs.
        let next = run(&mut client, "return 6 * 7;", json!({}));
        assert_eq!(next["structuredContent"]["result"], 42, "after {what}: {next}");
    }

    // A client that goes away stops its program, not only its wait: the faculty's call
    // slot is free again long before the program's own deadline.
    let body = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                      "params": {"name": RUN_CODE, "arguments": {"code": "while (true) {}", "timeoutSec": 60}}})
    .to_string();
    let mut stream = std::net::TcpStream::connect(butler.authority()).expect("connect");
    let request = format!(
        "POST /myspace-butler/api/mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         Mcp-Session-Id: {}\r\nContent-Length: {}\r\n\r\n{body}",
        butler.authority(),
        client.session_id(),
        body.len()
    );
    std::io::Write::write_all(&mut stream, request.as_bytes()).expect("send");
    let in_flight = || butler.get_json("/faculties").1["runtime"]["inFlight"].as_u64();
    wait_until(LIMIT, "the program runs", || in_flight() == Some(1));
    let left = std::time::Instant::now();
    drop(stream);
    wait_until(LIMIT, "the program stopped", || in_flight() == Some(0));
    assert!(left.elapsed() < std::time::Duration::from_secs(10), "stopped after {:?}", left.elapsed());

    // So does a 2025 client's `notifications/cancelled` of the call, its connection open.
    let mut stream = std::net::TcpStream::connect(butler.authority()).expect("connect");
    std::io::Write::write_all(&mut stream, request.as_bytes()).expect("send");
    wait_until(LIMIT, "the program runs", || in_flight() == Some(1));
    let cancelled = std::time::Instant::now();
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 99, "reason": "changed my mind"}});
    assert_eq!(client.post(&cancel, &[]).0, 202);
    wait_until(LIMIT, "the cancelled program stopped", || in_flight() == Some(0));
    assert!(cancelled.elapsed() < std::time::Duration::from_secs(10), "stopped after {:?}", cancelled.elapsed());
    drop(stream);

    // A tool that needs the client is refused inside code mode, saying why; the program
    // sees the tool's error and may go on.
    let result = run(
        &mut client,
        "try { await tools.sampler.sample({prompt: 'hi'}); return 'sampled'; } catch (e) { return e.message; }",
        json!({}),
    );
    let said = result["structuredContent"]["result"].as_str().unwrap_or_default().to_owned();
    assert!(said.contains("sampling/createMessage") && said.contains("needs the client"), "{result}");

    // The result is JSON as JSON.stringify makes it; what it cannot hold is said.
    let result = run(&mut client, "return {at: new Date(0), f() {}, n: {toJSON: () => 'n'}};", json!({}));
    assert_eq!(result["structuredContent"]["result"], json!({"at": "1970-01-01T00:00:00.000Z", "n": "n"}), "{result}");
    let text = failure_of(&run(&mut client, "const a = {}; a.a = a; return a;", json!({})));
    assert!(text.contains("result_not_json"), "{text}");

    // A name no tool has is refused before it reaches the hub or its log.
    let result = run(
        &mut client,
        "try { await tools.call('a'.repeat(100000), {}); } catch (e) { return e.message; }",
        json!({}),
    );
    assert_eq!(result["structuredContent"]["result"], "no tool has a name of 100000 bytes", "{result}");

    // A program cannot run a program.
    let result = run(
        &mut client,
        "try { await tools.butler.run_code({code: 'return 1'}); return 'nested'; } catch (e) { return e.message; }",
        json!({}),
    );
    assert_eq!(result["structuredContent"]["result"], "`butler__run_code` cannot call itself", "{result}");

    // The log of a failed run's inner calls stops at the budget.
    let inner = || {
        let (_, page) = butler.get_json("/mcp/activity?limit=500&name=time__get_current_time");
        page["entries"].as_array().map_or(0, |e| e.iter().filter(|e| e["parent"] == RUN_CODE).count())
    };
    wait_until(LIMIT, "the budget's calls logged", || inner() >= 200);
    assert_eq!(inner(), 200, "the budget's calls were made and logged, no more");
}
