//! Manifest bytes (`butler.json`) through the scan's validation: strict JSON, the schema,
//! the typed view and the semantic rules.
//!
//! Properties: an accepted manifest keeps every rule the rules module promises, and its
//! document re-serialised is accepted again as the same manifest with the same warnings;
//! a rejected one has one error diagnostic whose problems each point into the document,
//! in one line.
#![no_main]

use std::collections::HashSet;
use std::path::Path;

use butler_faculty::args::ArgSpec;
use butler_host::catalog::{Manifest, Severity, check_manifest_bytes, is_action};
use libfuzzer_sys::fuzz_target;

/// A folder that does not exist: image icons resolve to a letter, nothing is read.
const DIR: &str = "/nonexistent/butler-fuzz/extension";
const DISPLAY: &str = "tools/fuzzed/butler.json";

fuzz_target!(|data: &[u8]| check(data));

fn check(data: &[u8]) {
    let dir = Path::new(DIR);
    let (manifest, diagnostics) = check_manifest_bytes(data, dir, DISPLAY);
    match manifest {
        Some(manifest) => {
            assert!(diagnostics.iter().all(|d| d.severity == Severity::Warning), "{diagnostics:?}");
            for warning in diagnostics.iter().flat_map(|d| &d.errors) {
                assert!(!warning.message.contains('\n'), "a message is one line: {warning:?}");
            }
            keeps_the_rules(&manifest);
            let value = butler_host::json::parse_bytes(data, "butler.json").expect("an accepted manifest is JSON");
            for text in [serde_json::to_vec(&value), serde_json::to_vec_pretty(&value)] {
                let text = text.expect("a value serializes");
                let (again, warnings) = check_manifest_bytes(&text, dir, DISPLAY);
                assert_eq!(again.as_ref(), Some(&manifest), "re-serialised: {}", String::from_utf8_lossy(&text));
                assert_eq!(warnings, diagnostics, "re-serialised warnings");
            }
        }
        None => {
            assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
            let diagnostic = &diagnostics[0];
            assert_eq!(diagnostic.severity, Severity::Error, "{diagnostic:?}");
            assert_eq!(diagnostic.path, DISPLAY);
            assert!(!diagnostic.errors.is_empty(), "a rejection says why");
            let value = butler_host::json::parse_bytes(data, "butler.json").ok();
            for error in &diagnostic.errors {
                assert!(!error.message.trim().is_empty(), "{error:?}");
                assert!(!error.message.contains('\n'), "a message is one line: {error:?}");
                assert!(error.pointer.is_empty() || error.pointer.starts_with('/'), "{error:?}");
                if let Some(value) = &value {
                    assert!(value.pointer(&error.pointer).is_some(), "{error:?} points into the document");
                }
            }
        }
    }
}

/// What `catalog::rules` promises of every registered manifest.
fn keeps_the_rules(manifest: &Manifest) {
    assert_eq!(manifest.schema_version, 1);
    assert!(!manifest.id.is_empty());
    let unique = |ids: Vec<&str>| ids.len() == ids.iter().collect::<HashSet<_>>().len();
    assert!(unique(manifest.commands.iter().map(|c| c.id.as_str()).collect()));
    assert!(unique(manifest.reports.iter().map(|r| r.id.as_str()).collect()));
    assert!(unique(manifest.delegations.iter().map(|d| d.id.as_str()).collect()));
    for command in &manifest.commands {
        assert!(command.calls.iter().all(|c| is_action(c)), "{:?}", command.calls);
        assert!(unique(command.args.iter().map(|a| a.name.as_str()).collect()));
        assert!(command.args.iter().filter(|a| a.stdin).count() <= 1);
        for arg in &command.args {
            assert!(regex::Regex::new(&arg.pattern).is_ok(), "pattern {:?} compiles on its own", arg.pattern);
        }
        ArgSpec::compile(&command.args).expect("the declared arguments compile");
    }
    let envs = manifest.hosted.iter().map(|h| &h.env).chain(manifest.mcp.iter().map(|m| &m.env));
    for env in envs {
        for (key, value) in env {
            assert!(!key.is_empty() && !key.contains(['=', '\0']) && !value.contains('\0'), "{key:?}={value:?}");
        }
    }
    if let Some(mcp) = &manifest.mcp {
        assert_ne!(mcp.effective_namespace(&manifest.id), "butler");
    }
}
