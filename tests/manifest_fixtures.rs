//! Manifest validation as fixture files: every `tests/fixtures/manifests/<case>.json` is
//! validated the way `butler check` does, and the rendered outcome must equal
//! `<case>.expected` next to it. Run with `BLESS=1` to (re)write the expected files, then
//! read the diff: the expected files are the specification of our diagnostics.

use std::path::{Path, PathBuf};

use butler_host::catalog::{Severity, check_extension};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/manifests")
}

/// The outcome in the `.expected` format: a verdict line, then one line per problem.
fn render(path: &Path) -> String {
    let (manifest, diagnostics) = check_extension(path, None);
    let mut out = String::new();
    let rejected = diagnostics.iter().any(|d| d.severity == Severity::Error);
    match (&manifest, rejected) {
        (Some(m), false) => out.push_str(&format!("registered {} `{}`\n", m.kind.as_str(), m.id)),
        _ => out.push_str("rejected\n"),
    }
    for d in &diagnostics {
        for e in &d.errors {
            let severity = d.severity.as_str();
            let at = if e.pointer.is_empty() { "(root)" } else { &e.pointer };
            out.push_str(&format!("{severity} {at}: {}\n", e.message));
        }
    }
    out
}

#[test]
fn every_fixture_matches_its_expected_diagnostics() {
    let bless = std::env::var_os("BLESS").is_some();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixture folder exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 20, "expected the full fixture set, found {}", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let actual = render(case);
        let expected_path = case.with_extension("expected");
        if bless {
            std::fs::write(&expected_path, &actual).expect("write expected file");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|_| format!("<missing {}>", expected_path.display()));
        if actual != expected {
            failures.push(format!(
                "{}\n--- expected\n{expected}--- actual\n{actual}",
                case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
            ));
        }
    }
    assert!(failures.is_empty(), "{} fixture(s) differ:\n\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_expected_file_has_a_fixture() {
    for entry in std::fs::read_dir(fixtures()).expect("fixture folder exists").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "expected") {
            assert!(path.with_extension("json").exists(), "orphan expected file {}", path.display());
        }
    }
}
