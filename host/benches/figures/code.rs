//! B20: code mode. `butler__run_code` runs a program in the built-in `code` faculty (Boa in a
//! fresh WebAssembly instance per run) whose tool calls go through the hub to a real provider
//! (npm's `server-filesystem`, installed by `scripts/install-mcp-test-tools` as for the
//! tests): what a run adds to the one `tools/call` it makes (beside that call made
//! directly), what a run that calls nothing costs once the engine is compiled and warm
//! (beside `ping`), and a task of three steps — list a folder, keep its Markdown files, read
//! them — done by one run or by a client's own round trips: the bytes the client receives
//! and the round trips it makes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::mcp::{Session, in_turns};
use super::{Host, line_in, line_us, note, percentiles};

/// Markdown files in the folder (beside as many other files).
const MARKDOWN: usize = 8;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `server-filesystem`'s entry point, installed (or found up to date) by the project script.
fn filesystem_server() -> PathBuf {
    let status = Command::new("bash")
        .arg(root().join("scripts/install-mcp-test-tools"))
        .stdout(Stdio::null())
        .status()
        .expect("run scripts/install-mcp-test-tools");
    assert!(status.success(), "scripts/install-mcp-test-tools failed");
    root().join("target/test-tools/mcp-js/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
}

/// A `tools/call` of `tool` on `session`: the answer and its size in bytes.
fn call(session: &mut Session, tool: &str, arguments: &Value) -> (Value, usize) {
    let (answer, bytes) = session.request("tools/call", &json!({"name": tool, "arguments": arguments}));
    assert!(answer.get("error").is_none() && answer["result"]["isError"] != true, "{tool}: {answer}");
    (answer, bytes)
}

/// B20.
pub fn b20_code_mode() {
    const RUNS: usize = 300;
    let dir = tempfile::tempdir().expect("temp");
    let instance = dir.path().join("instance");
    let notes = dir.path().join("notes");
    std::fs::create_dir_all(instance.join("tools/files")).expect("mkdir");
    std::fs::create_dir_all(&notes).expect("mkdir");
    for i in 0..MARKDOWN {
        let body = format!("# Note {i}\n\n{}", "A line of what the note says, as notes go.\n".repeat(40));
        std::fs::write(notes.join(format!("note-{i}.md")), body).expect("note");
        std::fs::write(notes.join(format!("data-{i}.csv")), "a,b\n1,2\n".repeat(100)).expect("data");
    }
    let notes = std::fs::canonicalize(&notes).expect("notes").display().to_string();
    std::fs::write(instance.join("butler.json"), json!({"mcp": {"codeMode": true}}).to_string()).expect("config");
    let command = json!(["node", filesystem_server().display().to_string(), notes]);
    let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": "files", "name": "files",
                          "mcp": {"transport": "stdio", "command": command}});
    std::fs::write(instance.join("tools/files/butler.json"), manifest.to_string()).expect("manifest");
    let host = Host::start_quiet(&instance);
    // Measured on the optimized code, as a host that has run a while serves it.
    host.wait_optimized("code");
    let mut session = Session::open_at(host.authority(), "/myspace-butler/api/mcp");
    let first = format!("{notes}/note-0.md");
    let read = json!({"path": first});
    call(&mut session, "files__read_text_file", &read);

    let one_call = json!({"code": format!("return await tools.files.read_text_file({{path: {first:?}}});")});
    let no_call = json!({"code": "return 1 + 1;"});
    let [ping, direct, code_one, code_none] = in_turns::<4>(RUNS, 30, |kind| match kind {
        0 => {
            session.request("ping", &json!({}));
        }
        1 => {
            call(&mut session, "files__read_text_file", &read);
        }
        2 => {
            call(&mut session, "butler__run_code", &one_call);
        }
        _ => {
            call(&mut session, "butler__run_code", &no_call);
        }
    });
    let ((ping50, _), (direct50, _)) = (percentiles(ping), percentiles(direct));
    let ((one50, one99), (none50, none99)) = (percentiles(code_one), percentiles(code_none));
    line_us(
        "B20 butler__run_code of a program that calls one tool (p50; baseline = the same tools/call made directly)",
        one50,
        direct50,
    );
    line_us("B20 butler__run_code of a program that calls no tool (p50; baseline = ping)", none50, ping50);
    note(&format!(
        "B20: a run adds {:.2} ms to the one call it makes (target ≤ 10 ms; p99 of the run {:.2} ms); a run that calls \
         nothing takes {:.2} ms over a ping (target ≤ 2 ms; p99 {:.2} ms). Each run is a fresh instance of the \
         compiled component (code compiled once and cached on disk; instances from wasmtime's pooling allocator) \
         and a fresh Boa context",
        one50.saturating_sub(direct50).as_secs_f64() * 1e3,
        one99.as_secs_f64() * 1e3,
        none50.saturating_sub(ping50).as_secs_f64() * 1e3,
        none99.as_secs_f64() * 1e3,
    ));

    // The task of three steps, both ways.
    let program = format!(
        r#"const listing = await tools.files.list_directory({{path: {notes:?}}});
        const names = listing.content.split("\n").filter(l => l.startsWith("[FILE]") && l.endsWith(".md")).map(l => l.slice(7));
        const firsts = [];
        for (const name of names) {{
            const text = await tools.files.read_text_file({{path: {notes:?} + "/" + name}});
            firsts.push({{name, first: String(text.content ?? text).split("\n")[0]}});
        }}
        return firsts;"#
    );
    let (answer, code_bytes) = call(&mut session, "butler__run_code", &json!({"code": program}));
    let by_code = answer["result"]["structuredContent"]["result"].as_array().map_or(0, Vec::len);
    assert_eq!(by_code, MARKDOWN, "{answer}");
    let (listing, mut client_bytes) = call(&mut session, "files__list_directory", &json!({"path": notes}));
    let text = listing["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let markdown: Vec<&str> =
        text.lines().filter_map(|l| l.strip_prefix("[FILE] ")).filter(|n| n.ends_with(".md")).collect();
    assert_eq!(markdown.len(), MARKDOWN, "{text}");
    for name in &markdown {
        client_bytes += call(&mut session, "files__read_text_file", &json!({"path": format!("{notes}/{name}")})).1;
    }
    #[allow(clippy::cast_precision_loss)]
    {
        line_in(
            "B20 list, filter, read: bytes the client receives, one run_code (baseline = the client's own calls)",
            code_bytes as f64,
            client_bytes as f64,
            "bytes",
        );
        line_in(
            "B20 list, filter, read: client round trips, one run_code (baseline = the client's own calls)",
            1.0,
            (1 + markdown.len()) as f64,
            "round trips",
        );
    }
}
