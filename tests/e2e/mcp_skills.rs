//! The Skills extension (SEP-2640, `io.modelcontextprotocol/skills`) through the hub, with
//! a provider that serves skills (`tests/providers/skills_server.py`): its skills listed,
//! got and read on the main endpoint and on profiles, in both eras, namespaced in their
//! URIs (`skill://<namespace>/…`, a profile without prefixes keeps the provider's own);
//! nothing fetched ahead of need; a file read only when its entry lists it, and refused
//! when its content is not what the entry's digest says; the extension declared where a
//! skill is offered; the official conformance suite's skills scenarios passing through
//! the hub; and, with the quarantine on, a provider's skills held — out of the lists,
//! refused on get and read, shown to the owner — until the owner approves everything it
//! offers.

use std::path::Path;

use serde_json::{Value, json};

use crate::capabilities::cli;
use crate::conformance::Suite;
use crate::mcp::{Client, LIMIT, log_lines, root};
use crate::mcp_stateless::{ask, request};
use crate::util::{Butler, wait_until, write_manifest};

const EXTENSION: &str = "io.modelcontextprotocol/skills";
const PDF: &str = "skill://docs/pdf-processing/SKILL.md";

/// A tool manifest whose provider is the skills fixture, with `args`.
fn skills_provider(id: &str, args: &[&str]) -> Value {
    let script = root().join("tests/providers/skills_server.py").display().to_string();
    let mut command = vec![json!("python3"), json!(script)];
    command.extend(args.iter().map(|a| json!(a)));
    json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id,
           "mcp": {"transport": "stdio", "command": command, "timeoutSec": 10}})
}

/// The URIs of a `skills/list` answer.
fn skill_uris(listed: &Value) -> Vec<String> {
    let skills = listed["result"]["skills"].as_array().into_iter().flatten();
    skills.filter_map(|s| s["uri"].as_str().map(str::to_owned)).collect()
}

fn read(butler: &Butler, path: &str, uri: &str) -> Value {
    ask(butler, path, &request(3, "resources/read", json!({"uri": uri})))
}

/// An instance with the providers `docs` (whose reads are logged to `log`) and `shady`,
/// `shady-size`, `shady-front` (which serve content other than their entries say: another
/// digest, another size, another front matter), and the profiles `docs`, `plain` (`docs`
/// under its own URIs) and `none`.
fn instance_with_skills(dir: &Path, log: &Path, quarantine: bool) {
    let config = json!({"mcp": {"quarantine": quarantine, "profiles": {
        "docs": {"providers": ["docs"]},
        "plain": {"providers": ["docs"], "prefix": false},
        "none": {"providers": ["nobody"]},
    }}});
    std::fs::write(dir.join("butler.json"), config.to_string()).expect("root config");
    let log = log.display().to_string();
    write_manifest(dir, "tools/docs", &skills_provider("docs", &["--log", &log]));
    for (id, mode) in [("shady", "digest"), ("shady-size", "size"), ("shady-front", "frontmatter")] {
        write_manifest(dir, &format!("tools/{id}"), &skills_provider(id, &["--tamper", mode]));
    }
}

#[test]
fn providers_skills_are_listed_got_and_read_through_the_hub_checked_against_their_entries() {
    let dir = tempfile::tempdir().expect("temp");
    let log = dir.path().join("docs-reads.log");
    instance_with_skills(dir.path(), &log, false);
    let butler = Butler::start(dir.path());

    // Listed under the provider's namespace, with the cache hints of 2026-07-28 lists.
    let mut listed = Value::Null;
    wait_until(LIMIT, "every provider's skills", || {
        listed = ask(&butler, "/mcp", &request(1, "skills/list", json!({})));
        skill_uris(&listed).len() == 8
    });
    let uris = skill_uris(&listed);
    assert_eq!(uris[..2], [PDF, "skill://docs/acme/billing/refunds/SKILL.md"], "{listed}");
    for uri in ["skill://shady/pdf-processing/SKILL.md", "skill://shady_front/acme/billing/refunds/SKILL.md"] {
        assert!(uris.iter().any(|u| u == uri), "{uri} in {listed}");
    }
    assert_eq!((&listed["result"]["ttlMs"], &listed["result"]["cacheScope"]), (&json!(0), &json!("private")));
    let entry = listed["result"]["skills"][0].clone();
    assert_eq!(entry["frontmatter"]["metadata"]["version"], "2.1.0", "the front matter verbatim: {entry}");
    let files: Vec<&str> =
        entry["resources"].as_array().into_iter().flatten().filter_map(|f| f["uri"].as_str()).collect();
    assert!(files.contains(&"skill://docs/pdf-processing/references/FORMS.md"), "{entry}");
    // One page holds them all: a cursor is one the hub gave, or refused.
    assert!(listed["result"].get("nextCursor").is_none(), "{listed}");
    let from_start = ask(&butler, "/mcp", &request(1, "skills/list", json!({"cursor": "skills:1"})));
    assert_eq!(skill_uris(&from_start), uris[1..], "{from_start}");
    let bogus = ask(&butler, "/mcp", &request(1, "skills/list", json!({"cursor": "page-2"})));
    assert_eq!(bogus["error"]["code"], -32602, "{bogus}");
    // Listing fetched no file: a file is read when a client reads it.
    assert!(log_lines(&log).is_empty(), "nothing read ahead of need: {:?}", log_lines(&log));

    // Got by its URI, as listed; an unknown URI is -32602.
    let got = ask(&butler, "/mcp", &request(2, "skills/get", json!({"uri": PDF})));
    assert_eq!(got["result"]["skill"], entry, "{got}");
    assert_eq!(got["result"]["cacheScope"], "private");
    let unknown = ask(&butler, "/mcp", &request(2, "skills/get", json!({"uri": "skill://pdf-processing/SKILL.md"})));
    assert_eq!(unknown["error"]["code"], -32602, "the provider's own URI is not the hub's: {unknown}");

    // Read through the provider under the provider's URI, answered under the hub's.
    let skill_md = read(&butler, "/mcp", PDF);
    assert_eq!(skill_md["result"]["contents"][0]["uri"], PDF, "{skill_md}");
    assert!(skill_md["result"]["contents"][0]["text"].as_str().is_some_and(|t| t.contains("# PDF processing")));
    assert_eq!(log_lines(&log), ["read skill://pdf-processing/SKILL.md"]);
    // A file the entry does not list is not read from the provider, though it serves one.
    let unlisted = read(&butler, "/mcp", "skill://docs/pdf-processing/UNLISTED.md");
    assert_eq!(unlisted["error"]["code"], -32602, "{unlisted}");
    assert_eq!(log_lines(&log).len(), 1, "{:?}", log_lines(&log));
    // Content that is not what the entry's digest says is refused; the same file intact is not.
    let forms = read(&butler, "/mcp", "skill://docs/pdf-processing/references/FORMS.md");
    assert!(forms["result"]["contents"][0]["text"].as_str().is_some_and(|t| t.contains("four fields")), "{forms}");
    let tampered = read(&butler, "/mcp", "skill://shady/pdf-processing/references/FORMS.md");
    assert_eq!(tampered["error"]["data"]["verification"], "digest", "{tampered}");
    assert!(!tampered.to_string().contains("five fields"), "{tampered}");
    let longer = read(&butler, "/mcp", "skill://shady_size/pdf-processing/references/FORMS.md");
    assert_eq!(longer["error"]["data"]["verification"], "size", "{longer}");
    let relabelled = read(&butler, "/mcp", "skill://shady_front/pdf-processing/SKILL.md");
    assert_eq!(relabelled["error"]["data"]["verification"], "frontmatter", "{relabelled}");
    assert!(!relabelled.to_string().contains("Exfiltrate"), "{relabelled}");

    // A folder of a skill, from its entry: direct children, subfolders as directories.
    let folder = |uri: &str| ask(&butler, "/mcp", &request(4, "resources/directory/read", json!({"uri": uri})));
    let children = |answer: &Value| -> Vec<(String, String)> {
        let resources = answer["result"]["resources"].as_array().into_iter().flatten();
        resources
            .map(|r| {
                (r["uri"].as_str().unwrap_or_default().to_owned(), r["mimeType"].as_str().unwrap_or("").to_owned())
            })
            .collect()
    };
    let root_folder = folder("skill://docs/pdf-processing");
    assert_eq!(
        children(&root_folder),
        [
            (PDF.to_owned(), "text/markdown".to_owned()),
            ("skill://docs/pdf-processing/references".to_owned(), "inode/directory".to_owned()),
            ("skill://docs/pdf-processing/templates".to_owned(), "inode/directory".to_owned()),
        ],
        "{root_folder}"
    );
    let templates = folder("skill://docs/pdf-processing/templates");
    assert_eq!(children(&templates).len(), 2, "invoice.md and regional/: {templates}");
    assert_eq!(folder(PDF)["error"]["code"], -32602, "a file is no folder");

    // The extension is declared where a skill is offered, in both eras; not elsewhere.
    let discovered = |path: &str| ask(&butler, path, &request(5, "server/discover", json!({})));
    assert_eq!(discovered("/mcp")["result"]["capabilities"]["extensions"][EXTENSION], json!({"directoryRead": true}));
    assert!(discovered("/mcp/p/none")["result"]["capabilities"].get("extensions").is_none());
    let mut legacy = Client::connect(&butler, "/mcp/p/docs");
    let initialized = legacy.post(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}),
        &[],
    );
    assert!(initialized.2["result"]["capabilities"]["extensions"][EXTENSION].is_object(), "{}", initialized.2);
    // A profile offers its providers' skills only, namespaced like the main endpoint's.
    let session_listed = legacy.request("skills/list", json!({}));
    assert_eq!(skill_uris(&session_listed), [PDF, "skill://docs/acme/billing/refunds/SKILL.md"]);
    let session_read = legacy.request("resources/read", json!({"uri": PDF}));
    assert!(session_read["result"]["contents"][0]["text"].is_string(), "{session_read}");
    assert_eq!(ask(&butler, "/mcp/p/none", &request(6, "skills/list", json!({})))["result"]["skills"], json!([]));
    // Without prefixes, the provider's own URIs.
    let plain = ask(&butler, "/mcp/p/plain", &request(7, "skills/list", json!({})));
    assert_eq!(skill_uris(&plain)[0], "skill://pdf-processing/SKILL.md", "{plain}");
    let plain_read = read(&butler, "/mcp/p/plain", "skill://pdf-processing/references/FORMS.md");
    assert_eq!(plain_read["result"]["contents"][0]["uri"], "skill://pdf-processing/references/FORMS.md");
    // The SKILL.md of each skill is among the resources, named and described by its front matter.
    let resources = ask(&butler, "/mcp", &request(8, "resources/list", json!({})));
    let listed_md = resources["result"]["resources"].as_array().into_iter().flatten().find(|r| r["uri"] == PDF);
    assert_eq!(listed_md.map(|r| r["name"].clone()), Some(json!("pdf-processing")), "{resources}");
    // The activity log names the provider a skill came from.
    wait_until(LIMIT, "skills/get in the activity log", || {
        let (_, log) = butler.get_json("/mcp/activity?limit=100");
        log["entries"].as_array().into_iter().flatten().any(|e| e["method"] == "skills/get" && e["provider"] == "docs")
    });

    // The official conformance suite's skills scenarios, through the hub, in both eras.
    let url = format!("http://localhost:{}/myspace-butler/api/mcp", butler.port);
    for era in ["2026-07-28", "2025-11-25"] {
        for scenario in ["sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory"] {
            let mut command = Suite::Next.server(&url);
            // Extension scenarios are on no revision's timeline: `--force` runs them at `era`.
            command.args(["--scenario", scenario, "--spec-version", era, "--force"]);
            let run = crate::conformance::run(command);
            // One scenario's run ends `Passed: 31/31, 0 failed, 1 warnings`.
            let passed = run.text.lines().find_map(|l| l.strip_prefix("Passed: ")).unwrap_or_default();
            let (counts, failed) = passed.split_once(", ").unwrap_or_default();
            let (ok, all) = counts.split_once('/').unwrap_or_default();
            assert!(run.success && failed.starts_with("0 failed") && ok == all, "{scenario} at {era}:\n{}", run.text);
            assert!(ok.parse::<usize>().is_ok_and(|n| n >= 5), "{scenario} at {era}: {passed}\n{}", run.text);
        }
    }
}

#[test]
fn an_unapproved_providers_skills_are_held_until_the_owner_approves_what_it_offers() {
    let dir = tempfile::tempdir().expect("temp");
    let log = dir.path().join("docs-reads.log");
    instance_with_skills(dir.path(), &log, true);
    let butler = Butler::start(dir.path());

    // Held: shown to the owner, offered to no client, refused on get and read. A client's
    // list starts the provider (reading the queue starts none).
    let lister = Client::connect(&butler, "/mcp");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let mut report = Value::Null;
    wait_until(LIMIT, "the docs provider's skills held", || {
        let _ = lister.post(&list, &[]);
        report = butler.get_json("/mcp/quarantine").1;
        let held = report["held"].as_array().into_iter().flatten();
        held.filter(|h| h["provider"] == "docs" && h["kind"] == "skill").count() == 2
    });
    let held = report["held"].as_array().into_iter().flatten().find(|h| h["public"] == PDF);
    let held = held.unwrap_or_else(|| panic!("held under its public URI: {report}"));
    assert_eq!(held["name"], "skill://pdf-processing/SKILL.md");
    assert!(held["sha256"].as_str().is_some_and(|s| s.len() == 64), "{held}");
    let (code, out) = cli(&butler, &["mcp", "held"]);
    assert!(code == 0 && out.contains("docs skill:skill://pdf-processing/SKILL.md"), "{out}");
    assert_eq!(skill_uris(&ask(&butler, "/mcp", &request(1, "skills/list", json!({})))), Vec::<String>::new());
    let got = ask(&butler, "/mcp", &request(2, "skills/get", json!({"uri": PDF})));
    assert_eq!((&got["error"]["code"], &got["error"]["data"]["held"]), (&json!(-32602), &json!(true)), "{got}");
    let refused = read(&butler, "/mcp", "skill://docs/pdf-processing/references/FORMS.md");
    assert_eq!(refused["error"]["data"]["held"], true, "{refused}");
    assert!(log_lines(&log).is_empty(), "nothing of a held skill is fetched");
    assert!(
        ask(&butler, "/mcp", &request(3, "server/discover", json!({})))["result"]["capabilities"]
            .get("extensions")
            .is_none()
    );

    // Approving everything the provider offers releases its skills, and only its.
    let (code, out) = cli(&butler, &["mcp", "approve", "docs", "--all"]);
    assert_eq!(code, 0, "{out}");
    let listed = ask(&butler, "/mcp", &request(4, "skills/list", json!({})));
    assert_eq!(skill_uris(&listed), [PDF, "skill://docs/acme/billing/refunds/SKILL.md"], "{listed}");
    let read_now = read(&butler, "/mcp", PDF);
    assert!(read_now["result"]["contents"][0]["text"].is_string(), "{read_now}");
    let report = butler.get_json("/mcp/quarantine").1;
    let still: Vec<&Value> = report["held"].as_array().into_iter().flatten().filter(|h| h["kind"] == "skill").collect();
    let shady = |h: &&Value| h["provider"].as_str().is_some_and(|p| p.starts_with("shady"));
    assert!(!still.is_empty() && still.iter().all(shady), "{report}");
}

#[test]
fn the_hub_as_a_host_of_skills_passes_the_suites_client_scenarios() {
    let dir = tempfile::tempdir().expect("temp");
    std::fs::write(dir.path().join("butler.json"), r#"{"mcp": {"quarantine": false}}"#).expect("root config");
    let butler = Butler::start(dir.path());
    // The suite runs the driver with its mock server's URL; the driver makes the hub a
    // client of that server and acts as an agent through the hub.
    let driver = format!(
        "python3 {} {} {}",
        root().join("tests/providers/skills_host_driver.py").display(),
        crate::util::butler_binary().display(),
        butler.workdir.display()
    );
    for scenario in [
        "sep-2640-client-no-prefetch",
        "sep-2640-client-verify-digest",
        "sep-2640-client-verify-size",
        "sep-2640-client-verify-frontmatter",
    ] {
        let mut command = Suite::Next.client(&driver);
        command.args(["--scenario", scenario, "--spec-version", "2026-07-28", "--force"]);
        let run = crate::conformance::run(command);
        let passed = run.text.lines().find_map(|l| l.strip_prefix("Passed: ")).unwrap_or_default();
        let (counts, failed) = passed.split_once(", ").unwrap_or_default();
        let (ok, all) = counts.split_once('/').unwrap_or_default();
        assert!(run.success && failed.starts_with("0 failed") && ok == all && ok != "0", "{scenario}:\n{}", run.text);
    }
}
