//! The host's modules form layers: each uses only the ones below it, and inside a module
//! its parts use one another without cycles — so that each layer can become a crate of
//! its own and be tested alone. Read off the source: every `crate::<module>` a file's code
//! names (comments and doc links aside), and every `super::<part>` inside a module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bottom to top. The first layer holds the small shared helpers of `lib.rs` and its
/// single-file modules.
const LAYERS: &[&[&str]] = &[
    &["json", "text", "time", "validation", "lock", "VERSION"],
    &["catalog"],
    &["instance"],
    &["process"],
    &["supervise"],
    &["faculty"],
    &["pipeline"],
    &["mcp"],
    &["http"],
];

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

/// The top-level module a file of `src` belongs to (`faculty` for `src/faculty/run.rs`).
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
    assert!(seen.len() >= 8, "the modules were found: {seen:?}");
    assert!(wrong.is_empty(), "uses against the layers:\n{}", wrong.into_iter().collect::<Vec<_>>().join("\n"));
}

#[test]
fn the_parts_of_each_module_use_one_another_without_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let part = regex::Regex::new(r"\bsuper::(super::)?([a-z_]+)").expect("regex");
    // module → part → the parts it uses
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (file, lines) in sources(&src) {
        let Some(module) = module_of(&src, &file) else { continue };
        let relative = file.strip_prefix(&src).expect("under src");
        let parts: Vec<&str> = relative.iter().filter_map(|c| c.to_str()).collect();
        // `faculty/run.rs` is part `run`; `faculty/wit/v0_1_0.rs` belongs to part `wit`;
        // `faculty/mod.rs` is the module itself.
        let (name, depth) = match parts.as_slice() {
            [_, file] => (file.trim_end_matches(".rs").to_owned(), 1),
            [_, sub, _, ..] => ((*sub).to_owned(), 2),
            _ => continue,
        };
        if name == "mod" {
            continue;
        }
        let uses = graphs.entry(module).or_default().entry(name.clone()).or_default();
        for line in &lines {
            for found in part.captures_iter(line) {
                // `super::x` from a part is its sibling `x`; from a part's own sub-file,
                // `super::super::x` is.
                let sibling = found.get(1).is_some() == (depth == 2);
                let used = &found[2];
                if sibling && used != name && used != "super" {
                    uses.insert(used.to_owned());
                }
            }
        }
    }
    let mut cycles = Vec::new();
    for (module, graph) in &graphs {
        for start in graph.keys() {
            // Is `start` reachable from what it uses?
            let mut stack: Vec<&String> = graph[start].iter().collect();
            let mut visited = BTreeSet::new();
            while let Some(next) = stack.pop() {
                if next == start {
                    cycles.push(format!("{module}: `{start}` reaches itself"));
                    break;
                }
                if visited.insert(next.clone()) {
                    stack.extend(graph.get(next).into_iter().flatten());
                }
            }
        }
    }
    assert!(graphs.len() >= 8, "the modules were found: {:?}", graphs.keys());
    assert!(cycles.is_empty(), "cycles between the parts of a module:\n{}", cycles.join("\n"));
}

/// The host knows no pipeline: the words of the card pipeline appear in none of the host's
/// code (its comments, its unit tests and the web console aside) — what a card, a
/// candidate or a lease is lives in the faculties and their manifests.
#[test]
fn the_host_code_names_no_pipeline_concept() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let word = regex::Regex::new(r"(?i)\b(cards?|candidates?|leases?|batch(es)?|journals?|distill\w*|validity)\b")
        .expect("regex");
    let mut found = Vec::new();
    for (file, lines) in sources(&src) {
        let code = lines.iter().take_while(|l| l.as_str() != "#[cfg(test)]");
        for line in code.filter(|l| word.is_match(l)) {
            found.push(format!("{}: {line}", file.strip_prefix(&src).unwrap_or(&file).display()));
        }
    }
    assert!(found.is_empty(), "pipeline words in the host's code:\n{}", found.join("\n"));
}

/// The manifest/catalog crate stands alone: types, validation and the scan, built and
/// tested without the host, and without an async runtime, an HTTP stack or WebAssembly.
#[test]
fn the_catalog_crate_needs_no_async_runtime_http_or_wasm() {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "-p", "butler-catalog", "-e", "normal", "--prefix", "none", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    let crates: BTreeSet<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(crates.contains("butler-catalog") && crates.contains("jsonschema"), "{tree}");
    for heavy in ["tokio", "axum", "hyper", "wasmtime", "notify", "butler-host"] {
        assert!(!crates.contains(heavy), "butler-catalog depends on {heavy}:\n{tree}");
    }
}
