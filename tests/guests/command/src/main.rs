//! Test guest: a plain WASI command, the way any WASI language can write a faculty
//! without bindings. argv[1] picks the behaviour; stdin is echoed; stdout is JSON.

use std::io::{Read, Write};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut stdin = String::new();
    let _ = std::io::stdin().read_to_string(&mut stdin);
    let mode = args.get(1).map_or("echo", String::as_str);
    match mode {
        "garbage" => print!("not json at all"),
        "exit" => {
            eprintln!("exiting with 3 on purpose");
            std::process::exit(3);
        }
        "report" => print!("{}", serde_json::json!({"status": "ok", "summary": "command report"})),
        _ => {
            eprintln!("command guest ran");
            let out = serde_json::json!({"argv": args, "stdin": stdin, "env": std::env::vars().count()});
            let _ = std::io::stdout().write_all(out.to_string().as_bytes());
        }
    }
}
