//! Test guest: a faculty that misbehaves on purpose, implemented on the raw bindings (so
//! it can also return what the kit would never produce, such as non-JSON data).
//!
//! Commands (all `exec: ["self"]`): `ok`, `fail`, `garbage`, `spin`, `hog`, `trap`,
//! `sleep <ms>`, `env`, `read <path>`, `write <name>`, `args …`, `call <action>`, `net`,
//! `danger` (external), `hold-read <ms>` / `hold-write <ms>` (report when they ran),
//! `log-flood <count>` (one line of 10,000 bytes, then `count` `host.log` lines as fast as
//! it can).

use std::io::Read;

#[allow(missing_docs, clippy::all, clippy::pedantic, unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "faculty",
        path: "../../../wit/butler-faculty@0.1.0",
    });
}

use bindings::butler::faculty::host;
use bindings::butler::faculty::types::{Failure, Level};
use bindings::exports::butler::faculty::guest::Guest;
use serde_json::json;

struct Probe;

fn fail(code: &str, message: &str) -> Failure {
    Failure { code: code.into(), message: message.into() }
}

fn describe_json() -> serde_json::Value {
    let cmd = |id: &str, effect: &str, args: serde_json::Value| json!({"id": id, "exec": ["self"], "effect": effect, "args": args});
    let path = json!([{"name": "path", "pattern": ".+", "positional": true, "required": true}]);
    json!({
        "schemaVersion": 1, "kind": "faculty", "id": "probe", "name": "Probe",
        "commands": [
            cmd("ok", "read", json!([])),
            cmd("fail", "read", json!([])),
            cmd("garbage", "read", json!([])),
            cmd("spin", "read", json!([])),
            cmd("hog", "read", json!([])),
            cmd("trap", "read", json!([])),
            cmd("sleep", "read", json!([{"name": "ms", "pattern": "[0-9]{1,5}", "positional": true, "required": true}])),
            cmd("env", "read", json!([])),
            cmd("read", "read", path.clone()),
            cmd("write", "write", json!([{"name": "name", "pattern": "[a-z0-9.-]{1,40}", "positional": true, "required": true},
                                         {"name": "body", "pattern": "(?s).*", "stdin": true}])),
            cmd("args", "read", json!([{"name": "first", "pattern": "[a-z]+", "positional": true, "required": true},
                                        {"name": "mode", "pattern": "fast|slow"},
                                        {"name": "count", "pattern": "[0-9]+"},
                                        {"name": "text", "pattern": "(?s).*", "stdin": true}])),
            cmd("call", "read", json!([{"name": "action", "pattern": "[a-z]+\\.[a-z-]+", "positional": true, "required": true},
                                        {"name": "args", "pattern": "(?s).*", "stdin": true}])),
            cmd("net", "read", json!([])),
            cmd("danger", "external", json!([])),
            cmd("hold-read", "read", json!([{"name": "ms", "pattern": "[0-9]{1,5}", "positional": true, "required": true}])),
            cmd("hold-write", "write", json!([{"name": "ms", "pattern": "[0-9]{1,5}", "positional": true, "required": true}])),
            cmd("log-flood", "read", json!([{"name": "count", "pattern": "[0-9]{1,7}", "positional": true, "required": true}]))
        ],
        "reports": [
            {"id": "health", "name": "Health", "exec": ["self"], "shape": "status"},
            {"id": "bad-shape", "name": "Bad shape", "exec": ["self"], "shape": "list"},
            {"id": "notes", "name": "Notes", "exec": ["self"], "shape": "markdown"}
        ]
    })
}

impl Guest for Probe {
    fn describe() -> String {
        describe_json().to_string()
    }

    fn invoke(command: String, args: Vec<String>, stdin: Option<String>) -> Result<String, Failure> {
        let first = args.first().cloned().unwrap_or_default();
        let data = match command.as_str() {
            "ok" | "danger" => json!({"ok": true}),
            "fail" => return Err(fail("probe_failed", "failed on purpose")),
            "garbage" => return Ok("this is not JSON {".into()),
            "spin" => loop {
                std::hint::spin_loop();
            },
            "hog" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![7u8; 1024 * 1024]);
                }
            }
            "trap" => panic!("trapped on purpose"),
            "sleep" | "hold-read" | "hold-write" => {
                let ms: u64 = first.parse().unwrap_or(0);
                let start = host::now_ms();
                while host::now_ms() < start + ms {
                    std::hint::spin_loop();
                }
                json!({"slept": ms, "start": start, "end": host::now_ms()})
            }
            "env" => json!({"env": std::env::vars().collect::<Vec<_>>(), "args": std::env::args().collect::<Vec<_>>()}),
            "read" => match std::fs::File::open(&first).and_then(|mut f| {
                let mut s = String::new();
                f.read_to_string(&mut s).map(|_| s)
            }) {
                Ok(text) => json!({"read": true, "text": text}),
                Err(e) => json!({"read": false, "error": e.to_string()}),
            },
            "write" => {
                let path = format!("/data/{first}");
                std::fs::write(&path, stdin.unwrap_or_default()).map_err(|e| fail("io_error", &e.to_string()))?;
                json!({"wrote": path})
            }
            "args" => json!({"args": args, "stdin": stdin}),
            "call" => {
                let result = host::call(&first, stdin.as_deref().unwrap_or("{}"));
                match result {
                    Ok(data) => json!({"ok": true, "data": data}),
                    Err(f) => json!({"ok": false, "code": f.code, "message": f.message}),
                }
            }
            "net" => match std::net::TcpStream::connect("127.0.0.1:9") {
                Ok(_) => json!({"connected": true}),
                Err(e) => json!({"connected": false, "error": e.to_string()}),
            },
            "log-flood" => {
                let count: u64 = first.parse().unwrap_or(0);
                let info = Level::Info;
                host::log(info, &"L".repeat(10_000));
                for i in 0..count {
                    host::log(info, &format!("flood line {i}"));
                }
                json!({"logged": count + 1})
            }
            other => return Err(fail("unknown_command", other)),
        };
        host::log(Level::Info, &format!("probe ran {command}"));
        Ok(data.to_string())
    }

    fn report(id: String) -> Result<String, Failure> {
        match id.as_str() {
            "health" => Ok(json!({"status": "ok", "summary": "all good", "items": [{"title": "x"}]}).to_string()),
            "bad-shape" => Ok(json!({"rows": []}).to_string()),
            "notes" => Ok(json!({"markdown": "# Notes\n<script>alert(1)</script>"}).to_string()),
            other => Err(fail("unknown_report", other)),
        }
    }
}

/// The generated export glue (unsafe by nature: it is the component ABI).
#[allow(unsafe_code)]
mod export {
    use crate::Probe;
    crate::bindings::export!(Probe with_types_in crate::bindings);
}
