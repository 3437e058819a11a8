//! `docs/http-api.md` is kept true: every documented route exists on a live host, and
//! every route the host registers is documented.

use std::path::Path;

use reqwest::Method;

use crate::util::{Butler, json_of};

fn documented_routes() -> Vec<(Method, String)> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/http-api.md"))
        .expect("read the API reference");
    let section = doc.split("## Routes").nth(1).expect("a Routes section");
    section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let method = Method::from_bytes(cells.get(1)?.as_bytes()).ok()?;
            let path = cells.get(2)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((method, path.to_owned()))
        })
        .collect()
}

#[test]
fn every_documented_route_exists_and_every_route_is_documented() {
    let documented = documented_routes();
    assert!(documented.len() >= 8, "{documented:?}");
    let registered: Vec<&str> = butler_host::http::routes::api().into_iter().map(|(path, _)| path).collect();
    for path in &registered {
        assert!(documented.iter().any(|(_, p)| p == path), "route {path} is not in docs/http-api.md");
    }
    let (butler, _dir) = Butler::start_fresh();
    for (method, path) in &documented {
        assert!(
            registered.contains(&path.as_str()),
            "docs/http-api.md lists {method} {path}, which the host does not register"
        );
        let concrete = path.replace("{id}", "no-such-id");
        let response = butler
            .request(method.clone(), &butler.api(&concrete))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .expect("request");
        // An event stream that answered is a route that exists (its body never ends).
        let streaming = response.headers().get("content-type").is_some_and(|v| v == "text/event-stream");
        if streaming && response.status() == 200 {
            continue;
        }
        let (status, body) = json_of(response);
        let code = body["error"]["code"].as_str().unwrap_or_default();
        assert!(code != "unknown_route" && code != "method_not_allowed", "{method} {path}: {status} {body}");
    }
}

/// The repository stands alone: no comment, doc or message names a file outside it, or
/// a section of a specification it does not contain (spec ids, section signs).
#[test]
fn no_reference_points_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let section = regex::Regex::new("(^|[^A-Za-z0-9])S-[A-Z]{1,2}[0-9]|\u{a7}").expect("regex");
    let outside = [concat!("../", "shared"), concat!("SPEC", ".md"), concat!("seeds", "/0")];
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").map_while(Result::ok) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                // Built and installed things, and the WASI interfaces vendored verbatim.
                if !name.starts_with('.') && !matches!(name.as_str(), "target" | "node_modules" | "deps") {
                    dirs.push(path);
                }
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else { continue }; // binary
            for (n, line) in text.lines().enumerate() {
                if section.is_match(line) || outside.iter().any(|o| line.contains(o)) {
                    found.push(format!(
                        "{}:{}: {}",
                        path.strip_prefix(&root).unwrap_or(&path).display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(found.is_empty(), "references to things outside the repository:\n{}", found.join("\n"));
}
