//! The host is crates in layers, and the `butler-host` crate's own modules are layers
//! too: each uses only what lies below it, and inside a crate or a module the parts use
//! one another without cycles — so each part can be changed and tested alone. Crates are
//! read off `cargo tree`; modules off the source: every `crate::<module>` a file's code
//! names (comments and doc links aside), and every `super::<part>` inside a module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The host's crates, bottom to top, with their folders under `host/`: each may depend
/// only on crates before it.
const CRATES: &[(&str, &str)] = &[
    ("butler-catalog", "catalog"),
    ("butler-process", "process"),
    ("butler-faculty", "faculty"),
    ("butler-mcp", "mcp"),
    ("butler-host", ""),
];

/// The `butler-host` crate's modules, bottom to top. The first layer holds what `lib.rs`
/// re-exports of the shared helpers.
const LAYERS: &[&[&str]] = &[
    &["json", "redact", "text", "time", "validation", "lock", "VERSION"],
    &["catalog"],
    &["instance"],
    &["supervise"],
    &["hub_tools"],
    &["pipeline", "mcp_servers", "packages", "upstream", "chatos_backends", "notify", "collector"],
    &["agents"],
    &["http"],
    &["host"],
];

/// The `src` folder of each crate, by name.
fn crate_sources() -> Vec<(&'static str, PathBuf)> {
    let host = Path::new(env!("CARGO_MANIFEST_DIR"));
    CRATES.iter().map(|(name, dir)| (*name, host.join(dir).join("src"))).collect()
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Each `.rs` file under `dir`, with its code lines (comment lines and trailing comments
/// dropped; a file's unit tests after `#[cfg(test)]` kept).
fn sources(dir: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir").map_while(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read source");
                let lines = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.starts_with("//"))
                    .map(|l| l.split(" // ").next().unwrap_or(l).to_owned())
                    .collect();
                out.push((path, lines));
            }
        }
    }
    out
}

/// The top-level module a file of `src` belongs to (`supervise` for `src/supervise/item.rs`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    Some(first.trim_end_matches(".rs").to_owned())
}

#[test]
fn each_module_uses_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let names = regex::Regex::new(r"\bcrate::([A-Za-z_]+)").expect("regex");
    let mut wrong = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (file, lines) in sources(&src) {
        let Some(module) = module_of(&src, &file) else { continue };
        if matches!(module.as_str(), "lib" | "main" | "cli") {
            continue; // the crate root, and the binary on top of everything
        }
        let own = layer_of(&module).unwrap_or_else(|| panic!("module `{module}` is in no layer: add it to LAYERS"));
        seen.insert(module.clone());
        for line in &lines {
            for used in names.captures_iter(line) {
                let used = &used[1];
                if used == module {
                    continue;
                }
                let layer =
                    layer_of(used).unwrap_or_else(|| panic!("`crate::{used}` is in no layer: add it to LAYERS"));
                // Within the bottom layer, helpers may use each other (the cycle check
                // below covers them); anywhere else only what lies below.
                if layer >= own && !(own == 0 && layer == 0) {
                    wrong.insert(format!("{module} (layer {own}) uses {used} (layer {layer}) in {}", file.display()));
                }
            }
        }
    }
    assert!(seen.len() >= 5, "the modules were found: {seen:?}");
    assert!(wrong.is_empty(), "uses against the layers:\n{}", wrong.into_iter().collect::<Vec<_>>().join("\n"));
}

/// Part → the parts it uses, for every library crate (its top-level files and folders
/// are its parts) and every module of `butler-host`.
fn part_graphs() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let sibling_of_part = regex::Regex::new(r"\b(crate|super)::(super::)?([a-z_]+)").expect("regex");
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (krate, src) in crate_sources() {
        let library = krate != "butler-host";
        for (file, lines) in sources(&src) {
            let relative = file.strip_prefix(&src).expect("under src");
            let path: Vec<&str> = relative.iter().filter_map(|c| c.to_str()).collect();
            // In a library crate, `run.rs` is part `run` and `wit/v0_1_0.rs` belongs to
            // part `wit`. In `butler-host`, `supervise/item.rs` is part `item` of module
            // `supervise`; `supervise/mod.rs` is the module itself.
            let parts: &[&str] = if library { &path } else { path.get(1..).unwrap_or_default() };
            let unit = if library { krate.to_owned() } else { format!("{krate}::{}", path[0].trim_end_matches(".rs")) };
            let (name, depth) = match parts {
                [file] => (file.trim_end_matches(".rs").to_owned(), 1),
                [sub, _, ..] => ((*sub).to_owned(), 2),
                _ => continue,
            };
            if name == "mod" || name == "lib" || name == "main" {
                continue;
            }
            let uses = graphs.entry(unit).or_default().entry(name.clone()).or_default();
            for line in &lines {
                for found in sibling_of_part.captures_iter(line) {
                    // From a part, `super::x` is its sibling `x`; from a part's own
                    // sub-file, `super::super::x` is. In a library crate, `crate::x` is
                    // always a part.
                    let sibling = match &found[1] {
                        "crate" => library && found.get(2).is_none(),
                        _ => found.get(2).is_some() == (depth == 2),
                    };
                    let used = &found[3];
                    if sibling && used != name && used != "super" {
                        uses.insert(used.to_owned());
                    }
                }
            }
        }
    }
    graphs
}

#[test]
fn the_parts_of_each_crate_and_module_use_one_another_without_cycles() {
    let graphs = part_graphs();
    let mut cycles = Vec::new();
    for (unit, graph) in &graphs {
        for start in graph.keys() {
            // Is `start` reachable from what it uses?
            let mut stack: Vec<&String> = graph[start].iter().collect();
            let mut visited = BTreeSet::new();
            while let Some(next) = stack.pop() {
                if next == start {
                    cycles.push(format!("{unit}: `{start}` reaches itself"));
                    break;
                }
                if visited.insert(next.clone()) {
                    stack.extend(graph.get(next).into_iter().flatten());
                }
            }
        }
    }
    for krate in ["butler-catalog", "butler-process", "butler-faculty", "butler-mcp", "butler-host::http"] {
        assert!(graphs.get(krate).is_some_and(|g| g.len() >= 3), "the parts of {krate} were found: {graphs:?}");
    }
    assert!(cycles.is_empty(), "cycles between the parts of a crate or module:\n{}", cycles.join("\n"));
}

/// The host knows no pipeline: the words of the card pipeline appear in none of the host's
/// code (its comments, its unit tests and the web console aside) — what a card, a
/// candidate or a lease is lives in the faculties and their manifests.
#[test]
fn the_host_code_names_no_pipeline_concept() {
    let word = regex::Regex::new(r"(?i)\b(cards?|candidates?|leases?|batch(es)?|journals?|distill\w*|validity)\b")
        .expect("regex");
    let host = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut files = 0;
    for (_, src) in crate_sources() {
        for (file, lines) in sources(&src) {
            files += 1;
            let code = lines.iter().take_while(|l| l.as_str() != "#[cfg(test)]");
            for line in code.filter(|l| word.is_match(l)) {
                found.push(format!("{}: {line}", file.strip_prefix(host).unwrap_or(&file).display()));
            }
        }
    }
    assert!(files > 60, "the host's sources were found ({files} files)");
    assert!(found.is_empty(), "pipeline words in the host's code:\n{}", found.join("\n"));
}

/// What `cargo tree` says crate `name` depends on (normal dependencies, transitively).
fn dependencies_of(name: &str) -> BTreeSet<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "-p", name, "-e", "normal", "--prefix", "none", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    let crates: BTreeSet<String> =
        tree.lines().filter_map(|l| l.split_whitespace().next()).filter(|c| *c != name).map(str::to_owned).collect();
    assert!(!crates.is_empty(), "cargo tree listed nothing for {name}");
    crates
}

/// Each crate depends only on the host's crates below it, and each part of the host is
/// built without what it has no business with: the manifests without an async runtime,
/// the faculty runtime and the MCP hub without an HTTP stack, nothing but the binary with
/// the file watcher.
#[test]
fn the_crates_form_layers_and_carry_only_what_they_need() {
    let heavy: &[(&str, &[&str])] = &[
        ("butler-catalog", &["tokio", "axum", "hyper", "wasmtime", "notify"]),
        ("butler-process", &["axum", "hyper", "wasmtime", "notify"]),
        ("butler-faculty", &["axum", "hyper", "notify"]),
        ("butler-mcp", &["axum", "hyper", "notify"]),
    ];
    for (at, (name, _)) in CRATES.iter().enumerate() {
        let deps = dependencies_of(name);
        for (above, _) in &CRATES[at..] {
            assert!(!deps.contains(*above), "{name} depends on {above}, which is not below it");
        }
        if *name == "butler-host" {
            for (below, _) in &CRATES[..at] {
                assert!(deps.contains(*below), "butler-host does not use {below}: is it still a layer?");
            }
        }
        if let Some((_, avoid)) = heavy.iter().find(|(n, _)| n == name) {
            for crate_name in *avoid {
                assert!(!deps.contains(*crate_name), "{name} depends on {crate_name}:\n{deps:?}");
            }
        }
    }
    assert!(dependencies_of("butler-faculty").contains("wasmtime"), "the faculty runtime runs on wasmtime");
}

/// The names in the first cell of each table row of a Markdown document, written as code
/// (`` | `a`, `b` | … `` names `a` and `b`).
fn first_cell_names(doc: &str) -> BTreeSet<String> {
    let code = regex::Regex::new(r"`([^`]+)`").expect("regex");
    doc.lines()
        .filter_map(|line| line.strip_prefix('|')?.split('|').next())
        .flat_map(|cell| code.captures_iter(cell).map(|c| c[1].to_owned()).collect::<Vec<_>>())
        .collect()
}

/// The package names of the workspace's members, as `cargo metadata` reads them.
fn workspace_crates() -> BTreeSet<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .map(str::to_owned)
        .collect()
}

/// `docs/architecture.md` is the map of the code: every crate of the workspace and every
/// module of `butler-host` that `LAYERS` knows (and `cli` on top) is a row of one of its
/// tables, and its modules table names no module the code no longer has.
#[test]
fn the_architecture_doc_names_every_crate_and_module() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md"))
        .expect("read docs/architecture.md");
    let named = first_cell_names(&doc);
    let crates = workspace_crates();
    for (name, _) in CRATES {
        assert!(crates.contains(*name), "cargo metadata lists the host's crates: {crates:?}");
    }
    let modules: Vec<&str> = LAYERS.iter().flat_map(|layer| layer.iter().copied()).chain(["cli"]).collect();
    let missing: Vec<&str> = crates
        .iter()
        .map(String::as_str)
        .chain(modules.iter().copied())
        .filter(|name| !named.contains(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md has no table row for these crates or modules (add them where they belong): {missing:?}"
    );
    let table = doc
        .split("## The modules of `butler-host`")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a section on the modules of butler-host");
    let stale: Vec<String> =
        first_cell_names(table).into_iter().filter(|name| !modules.contains(&name.as_str())).collect();
    assert!(stale.is_empty(), "docs/architecture.md names modules LAYERS does not know: {stale:?}");
}

/// Library crates whose `Result<_, String>`s another change is still turning into typed
/// errors: each must still have one (so the entry is dropped once it has none).
const STRING_ERRORS_ALLOWED_FOR_NOW: &[&str] = &[];

/// Each `Result<…, String>` in `code`: the text of the type, found by reading the
/// generic arguments with their nesting (`Result<Vec<u8>, String>` is one;
/// `Result<String, Error>` and `Result<(A, B), (C, String)>` are not).
fn string_results(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (start, _) in code.match_indices("Result<") {
        if code[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue; // `IoResult<` and the like
        }
        let args_start = start + "Result<".len();
        let (mut depth, mut last_comma, mut end) = (0_i32, None, None);
        for (i, c) in code[args_start..].char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' if depth == 0 => {
                    end = Some(args_start + i);
                    break;
                }
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => last_comma = Some(args_start + i),
                _ => {}
            }
        }
        if let (Some(comma), Some(end)) = (last_comma, end)
            && code[comma + 1..end].trim() == "String"
        {
            found.push(code[start..=end].to_owned());
        }
    }
    found
}

#[test]
fn the_string_result_finder_reads_nested_types() {
    let found = string_results(
        "fn a() -> Result<Vec<u8>, String> {} fn b() -> Result<String, Error> {} \
         fn c() -> Result<(A, Option<String>), (&'static str, String)> {} \
         fn d() -> Option<Result<PathBuf, String>> {} fn e() -> io::IoResult<u8, String> {} \
         static K: Mutex<HashMap<String, Result<(), String>>> = x;",
    );
    assert_eq!(found, ["Result<Vec<u8>, String>", "Result<PathBuf, String>", "Result<(), String>"]);
}

/// Library crates say what went wrong with typed errors (`thiserror`), not strings: no
/// `Result<_, String>` in their code, tests included.
#[test]
fn the_library_crates_return_no_string_errors() {
    let mut offenders = BTreeMap::new();
    for (krate, src) in crate_sources().into_iter().filter(|(name, _)| *name != "butler-host") {
        for (file, lines) in sources(&src) {
            let found = string_results(&lines.join("\n"));
            if !found.is_empty() {
                offenders.entry(krate).or_insert_with(Vec::new).push(format!("{}: {found:?}", file.display()));
            }
        }
    }
    for allowed in STRING_ERRORS_ALLOWED_FOR_NOW {
        assert!(
            offenders.remove(allowed).is_some(),
            "`{allowed}` has no `Result<_, String>` left: drop it from STRING_ERRORS_ALLOWED_FOR_NOW"
        );
    }
    assert!(
        offenders.is_empty(),
        "library crates return `Result<_, String>` (use a thiserror type):\n{}",
        offenders.values().flatten().cloned().collect::<Vec<_>>().join("\n")
    );
}
