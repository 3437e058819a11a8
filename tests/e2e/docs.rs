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

/// The sections of a Markdown document: each heading's text and the lines under it, up to
/// the next heading.
fn sections(doc: &str) -> Vec<(&str, String)> {
    let mut sections: Vec<(&str, String)> = Vec::new();
    for line in doc.lines() {
        if line.starts_with('#') {
            sections.push((line.trim_start_matches('#').trim(), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    sections
}

/// `node`, or what its local `$ref` points at.
fn resolved<'a>(node: &'a serde_json::Value, root: &'a serde_json::Value) -> &'a serde_json::Value {
    node.get("$ref")
        .and_then(serde_json::Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|pointer| root.pointer(pointer))
        .unwrap_or(node)
}

/// Every (object, field) pair of a schema: the object named as a reader finds it
/// (`hosted`, `commands[].mcp`, `mcp.profiles.*`; `""` for the top level), with the
/// fields its `oneOf`/`anyOf` branches add.
fn schema_fields(node: &serde_json::Value, root: &serde_json::Value, key: &str, out: &mut Vec<(String, String)>) {
    let node = resolved(node, root);
    let mut properties: Vec<(&String, &serde_json::Value)> = Vec::new();
    let branches = ["oneOf", "anyOf"].iter().filter_map(|k| node.get(*k)?.as_array()).flatten();
    for object in std::iter::once(node).chain(branches) {
        for (name, child) in object.get("properties").and_then(serde_json::Value::as_object).into_iter().flatten() {
            if !properties.iter().any(|(known, _)| *known == name) {
                properties.push((name, child));
            }
        }
    }
    let prefix = if key.is_empty() { String::new() } else { format!("{key}.") };
    for (name, child) in properties {
        out.push((key.to_owned(), name.clone()));
        let child = resolved(child, root);
        if let Some(items) = child.get("items") {
            schema_fields(items, root, &format!("{prefix}{name}[]"), out);
        } else if let Some(values) = child.get("additionalProperties").filter(|v| v.is_object()) {
            schema_fields(child, root, &format!("{prefix}{name}"), out);
            schema_fields(values, root, &format!("{prefix}{name}.*"), out);
        } else {
            schema_fields(child, root, &format!("{prefix}{name}"), out);
        }
    }
}

/// What of `schema` the reference `doc` leaves out: each object needs a section whose
/// heading names it (`` ### `hosted` ``; "Top-level fields" for the top level) with a table
/// row per field (`` | `command` | ``).
fn undocumented(schema: &str, doc: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(schema)).expect("read schema")).expect("schema");
    let text = std::fs::read_to_string(root.join(doc)).expect("read doc");
    let sections = sections(&text);
    let mut fields = Vec::new();
    schema_fields(&schema, &schema, "", &mut fields);
    assert!(fields.len() > 20, "{fields:?}");
    fields
        .into_iter()
        .filter(|(object, field)| {
            let heading = if object.is_empty() { "Top-level fields".to_owned() } else { format!("`{object}`") };
            let row = format!("| `{field}` |");
            !sections.iter().any(|(title, body)| *title == heading && body.lines().any(|line| line.starts_with(&row)))
        })
        .map(|(object, field)| {
            format!("{doc}: `{field}` of {}", if object.is_empty() { "the top level" } else { &object })
        })
        .collect()
}

#[test]
fn every_manifest_field_is_documented() {
    let missing = undocumented("spec/butler.schema.json", "docs/manifest.md");
    assert!(missing.is_empty(), "fields the reference leaves out:\n{}", missing.join("\n"));
}

/// The reference's example manifests are valid as they stand: no error, no warning.
#[test]
fn the_manifest_reference_examples_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("docs/manifest.md")).expect("read doc");
    let examples: Vec<&str> = text
        .split("```json\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .filter(|block| block.contains("\"schemaVersion\""))
        .collect();
    let mut kinds = Vec::new();
    for example in examples {
        let dir = tempfile::tempdir().expect("tempdir");
        let (manifest, diagnostics) =
            butler_catalog::scan::check_manifest_bytes(example.as_bytes(), dir.path(), "butler.json");
        assert!(diagnostics.is_empty(), "{diagnostics:?} in\n{example}");
        kinds.push(manifest.expect("registered").kind);
    }
    use butler_catalog::manifest::Kind;
    assert_eq!(kinds, [Kind::Tool, Kind::Service, Kind::Faculty], "an example per kind");
}

#[test]
fn every_root_config_field_is_documented() {
    let missing = undocumented("spec/instance.schema.json", "docs/config.md");
    assert!(missing.is_empty(), "fields the reference leaves out:\n{}", missing.join("\n"));
}

/// `docs/pipeline.md` documents every pipeline action of the built-in faculties: a
/// ``### `prefix.verb` `` section for each command an action reaches, and none for an
/// action that reaches no command.
#[test]
fn every_pipeline_action_is_documented() {
    use std::collections::{BTreeMap, BTreeSet};
    use std::time::{Duration, Instant};

    use butler_host::pipeline::router::command_of;

    const BUILT_IN: [&str; 4] = ["journal", "distill", "cards", "validity"];
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/pipeline.md"))
        .expect("read the pipeline guide");
    let documented: BTreeSet<&str> = doc
        .lines()
        .filter_map(|line| line.strip_prefix("### `")?.strip_suffix('`'))
        .filter(|name| name.contains('.'))
        .collect();

    let (butler, _dir) = Butler::start_fresh();
    // The built-ins are compiled in the background for a moment after the start; a faculty
    // is listed once its component describes itself.
    let deadline = Instant::now() + Duration::from_secs(60);
    let listing = loop {
        let (status, body) = butler.get_json("/faculties");
        let listed = |id: &str| {
            status == 200
                && body["faculties"].as_array().is_some_and(|all| {
                    all.iter().any(|f| f["id"] == id && f["commands"].as_array().is_some_and(|c| !c.is_empty()))
                })
                && body["routes"].as_object().is_some_and(|routes| routes.values().any(|f| f == id))
        };
        if BUILT_IN.iter().all(|id| listed(id)) {
            break body;
        }
        assert!(Instant::now() < deadline, "the built-in faculties were not all listed within 60 s: {status} {body}");
        std::thread::sleep(Duration::from_millis(100));
    };

    // prefix → faculty, and each built-in faculty's commands.
    let routes: BTreeMap<&str, &str> = listing["routes"]
        .as_object()
        .expect("routes")
        .iter()
        .map(|(prefix, faculty)| (prefix.as_str(), faculty.as_str().expect("a faculty id")))
        .collect();
    let commands: BTreeMap<&str, Vec<&str>> = listing["faculties"]
        .as_array()
        .expect("faculties")
        .iter()
        .filter_map(|f| Some((f["id"].as_str().filter(|id| BUILT_IN.contains(id))?, &f["commands"])))
        .map(|(id, list)| {
            let ids = list.as_array().expect("commands").iter().map(|c| c["id"].as_str().expect("command id"));
            (id, ids.collect())
        })
        .collect();

    // The router runs command `<verb>` for an action under the faculty's own prefix and
    // `<prefix>-<verb>` under another; a command is documented once, under the other
    // prefix when its id starts with one (`review-list` is `review.list`), else under the
    // faculty's own.
    let mut actions = BTreeSet::new();
    for (faculty, ids) in &commands {
        let prefixes: Vec<&str> = routes.iter().filter(|(_, f)| *f == faculty).map(|(p, _)| *p).collect();
        for command in ids {
            let other = prefixes
                .iter()
                .filter(|p| *p != faculty)
                .find_map(|p| Some((*p, command.strip_prefix(&format!("{p}-"))?.to_owned())));
            let own = || prefixes.contains(faculty).then(|| (*faculty, (*command).to_owned()));
            let Some((prefix, verb)) = other.or_else(own) else { continue };
            assert_eq!(command_of(prefix, &verb, faculty), *command, "the router's mapping");
            actions.insert(format!("{prefix}.{verb}"));
        }
    }
    assert!(actions.len() >= 20, "{actions:?}");

    let missing: Vec<&String> = actions.iter().filter(|a| !documented.contains(a.as_str())).collect();
    // A heading not among them names no action, or an alias (`cards.review-list`).
    let stale: Vec<String> = documented
        .iter()
        .filter(|name| !actions.contains(**name))
        .map(|name| {
            let reaches = name.split_once('.').is_some_and(|(prefix, verb)| {
                routes.get(prefix).is_some_and(|f| {
                    commands.get(f).is_some_and(|ids| ids.contains(&command_of(prefix, verb, f).as_str()))
                })
            });
            format!("{name} ({})", if reaches { "an alias of another action" } else { "no such action" })
        })
        .collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/pipeline.md is out of date.\nactions without a ### `prefix.verb` section: {missing:?}\n\
         sections to remove: {stale:?}"
    );
}

/// The README is a front page: short enough to read through, its first two shell blocks
/// the two set-up commands exactly as `.ci/run` takes and runs them, and every page it
/// links to there.
#[test]
fn the_readme_is_a_front_page_whose_links_and_commands_hold() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("read README.md");
    let lines = readme.lines().count();
    assert!(lines <= 160, "README.md has {lines} lines: move the reference into docs/ and keep it at most 160");
    let shell: Vec<&str> =
        readme.split("```sh\n").skip(1).filter_map(|block| block.split("\n```").next()).take(2).collect();
    assert_eq!(
        shell,
        ["cargo run --release -p butler-host -- serve", "scripts/test"],
        "the README's first two shell blocks are the set-up commands .ci/run runs as written"
    );
    let link = regex::Regex::new(r"\]\(((?:docs|spec|wit)/[^)#]+)").expect("regex");
    let targets: Vec<&str> = link.captures_iter(&readme).filter_map(|c| c.get(1)).map(|m| m.as_str()).collect();
    assert!(targets.len() >= 10, "the feature table links to docs/: {targets:?}");
    let broken: Vec<&&str> = targets.iter().filter(|t| !root.join(t).is_file()).collect();
    assert!(broken.is_empty(), "README.md links to pages that do not exist: {broken:?}");
}
