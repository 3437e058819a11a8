//! Imports of real package folders into a temporary instance: what is recorded and copied,
//! what is refused, and what an update reports.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{ImportError, Imports, Outcome, RECORD_FILE, SKILL_DIR};

struct Fixture {
    _dir: tempfile::TempDir,
    package: PathBuf,
    imports: Imports,
}

fn write(root: &Path, relative: &str, bytes: &[u8]) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
}

fn manifest(version: &str, adapters: &Value) -> Value {
    json!({"schemaVersion": 1, "id": "example.weather", "name": "Weather", "version": version, "adapters": adapters})
}

fn write_manifest(package: &Path, manifest: &Value) {
    write(package, super::MANIFEST_FILE, manifest.to_string().as_bytes());
}

/// A package with a directory skill (SKILL.md, a script and a binary asset) and a stdio
/// MCP server, and an empty instance to import it into.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let package = dir.path().join("weather");
    let adapters = json!({
        "skill": {"directory": "skill"},
        "mcp": {"transport": "stdio", "command": "node", "args": ["./server.mjs"],
                "env": {"TOKEN": "${WEATHER_TOKEN:-none}"}},
    });
    write_manifest(&package, &manifest("1.0.0", &adapters));
    write(&package, "skill/SKILL.md", b"---\nname: weather\n---\nSay the weather.\n");
    write(&package, "skill/scripts/run.sh", b"#!/bin/sh\ntouch ran\n");
    write(&package, "skill/assets/icon.bin", &[0xff, 0x00, 0xfe, 0x0a]);
    write(&package, "server.mjs", b"require('fs').writeFileSync('ran', '')\n");
    let imports = Imports::open(dir.path().join("instance/capabilities"));
    Fixture { _dir: dir, package, imports }
}

#[test]
fn an_import_records_the_package_disabled_and_copies_its_skill_byte_for_byte() {
    let f = fixture();
    let imported = f.imports.import(&f.package, false).expect("imported");
    assert_eq!(imported.outcome, Outcome::Imported);
    let record = imported.record;
    assert_eq!((record.id.as_str(), record.version.as_str(), record.enabled), ("example.weather", "1.0.0", false));
    assert_eq!(record.source, f.package.join(super::MANIFEST_FILE));
    assert_eq!(record.adapters(), ["skill", "mcp (stdio)"]);
    let paths: Vec<&str> = record.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["SKILL.md", "assets/icon.bin", "scripts/run.sh"]);
    let copy = f.imports.skill_dir("example.weather");
    for file in ["SKILL.md", "assets/icon.bin", "scripts/run.sh"] {
        let copied = std::fs::read(copy.join(file)).expect("copied");
        assert_eq!(copied, std::fs::read(f.package.join("skill").join(file)).expect("source"), "{file}");
    }
    assert_eq!(f.imports.list(), std::slice::from_ref(&record));
    assert_eq!(f.imports.get("example.weather"), Some(record));
    assert!(!f.package.join("ran").exists() && !f.package.join("skill/ran").exists(), "nothing in a package runs");
}

#[test]
fn a_file_skill_becomes_the_copys_skill_md() {
    let f = fixture();
    write_manifest(&f.package, &manifest("1.0.0", &json!({"skill": {"file": "docs/guide.md"}})));
    write(&f.package, "docs/guide.md", b"# Weather guide\n");
    let record = f.imports.import(&f.package.join(super::MANIFEST_FILE), false).expect("imported").record;
    assert_eq!(record.files.len(), 1);
    assert_eq!(record.files[0].path, "SKILL.md");
    let copy = f.imports.skill_dir("example.weather");
    assert_eq!(std::fs::read(copy.join("SKILL.md")).expect("copy"), b"# Weather guide\n");
}

#[test]
fn a_package_that_fails_a_check_leaves_nothing_behind() {
    let f = fixture();
    std::os::unix::fs::symlink("/etc/passwd", f.package.join("skill/passwd")).expect("symlink");
    let Err(ImportError::Invalid(report)) = f.imports.import(&f.package, false) else {
        panic!("a symlink in the skill is refused");
    };
    assert!(report.problems.iter().any(|p| p.file == "skill/passwd"), "{report:?}");
    assert_eq!(f.imports.list(), []);
    assert!(!f.imports.root.join("example.weather").exists());
}

#[test]
fn a_later_change_to_the_source_does_not_leak_in_until_an_update_says_what_differs() {
    let f = fixture();
    f.imports.import(&f.package, false).expect("imported");
    f.imports.enable("example.weather").expect("enabled");
    write(&f.package, "skill/SKILL.md", b"---\nname: weather\n---\nSay the weather, twice.\n");
    write(&f.package, "skill/references/api.md", b"the API\n");
    std::fs::remove_file(f.package.join("skill/scripts/run.sh")).expect("rm");
    let adapters = json!({
        "skill": {"directory": "skill"},
        "mcp": {"transport": "stdio", "command": "node", "args": ["./server.mjs", "--v2"],
                "env": {"TOKEN": "secret-value-123"}},
    });
    write_manifest(&f.package, &manifest("1.1.0", &adapters));
    let copy = f.imports.skill_dir("example.weather");
    assert_eq!(std::fs::read(copy.join("SKILL.md")).expect("copy"), b"---\nname: weather\n---\nSay the weather.\n");

    let Err(ImportError::Exists { differences, .. }) = f.imports.import(&f.package, false) else {
        panic!("an id imported already is replaced only by an update");
    };
    let expected = [
        "/adapters/mcp/args: [\"./server.mjs\"] → [\"./server.mjs\",\"--v2\"]",
        "/adapters/mcp/env/TOKEN: changed (value not shown)",
        "/version: \"1.0.0\" → \"1.1.0\"",
        "skill file changed: SKILL.md (39 → 46 bytes)",
        "skill file added: references/api.md (8 bytes)",
        "skill file removed: scripts/run.sh",
    ];
    assert_eq!(differences, expected);
    assert!(!differences.join(" ").contains("secret-value-123"), "an env value may be a token");

    let updated = f.imports.import(&f.package, true).expect("updated");
    assert_eq!(updated.outcome, Outcome::Updated);
    assert_eq!(updated.differences, expected);
    assert!(updated.record.enabled, "an update keeps the package enabled");
    assert_eq!(
        std::fs::read(copy.join("SKILL.md")).expect("copy"),
        b"---\nname: weather\n---\nSay the weather, twice.\n"
    );
    assert!(copy.join("references/api.md").exists() && !copy.join("scripts/run.sh").exists());
    let again = f.imports.import(&f.package, true).expect("nothing to update");
    assert_eq!((again.outcome, again.differences.len()), (Outcome::Unchanged, 0));
    let leftovers: Vec<_> = std::fs::read_dir(&f.imports.root).expect("root").map_while(Result::ok).collect();
    assert_eq!(leftovers.len(), 1, "no staging folder is left behind: {leftovers:?}");
}

#[test]
fn an_enabled_packages_adapter_kind_changes_only_after_it_is_disabled() {
    let f = fixture();
    f.imports.import(&f.package, false).expect("imported");
    f.imports.enable("example.weather").expect("enabled");
    let remote =
        json!({"skill": {"directory": "skill"}, "mcp": {"transport": "http", "url": "https://example.com/mcp"}});
    write_manifest(&f.package, &manifest("2.0.0", &remote));
    let refused = f.imports.import(&f.package, true).expect_err("disable first");
    assert!(matches!(refused, ImportError::DisableFirst { .. }), "{refused}");
    assert!(refused.to_string().contains("MCP transport from stdio to http"), "{refused}");
    assert_eq!(f.imports.get("example.weather").expect("kept").version, "1.0.0");
    f.imports.disable("example.weather").expect("disabled");
    let updated = f.imports.import(&f.package, true).expect("updated once disabled");
    assert_eq!((updated.record.version.as_str(), updated.record.enabled), ("2.0.0", false));
}

#[test]
fn disable_keeps_the_record_and_remove_needs_it_disabled() {
    let f = fixture();
    f.imports.import(&f.package, false).expect("imported");
    assert!(f.imports.enable("example.weather").expect("enabled").enabled);
    assert!(f.imports.enable("example.weather").expect("enabled again").enabled, "enable is idempotent");
    assert!(matches!(f.imports.remove("example.weather"), Err(ImportError::Enabled(_))));
    assert!(!f.imports.disable("example.weather").expect("disabled").enabled);
    assert!(f.imports.get("example.weather").is_some(), "disable keeps the record");
    assert!(f.imports.skill_dir("example.weather").join("SKILL.md").exists(), "and the copy");
    f.imports.remove("example.weather").expect("removed");
    assert_eq!(f.imports.list(), []);
    assert!(!f.imports.root.join("example.weather").exists());
    for step in [Imports::enable, Imports::disable, Imports::remove] {
        assert!(matches!(step(&f.imports, "example.weather"), Err(ImportError::Unknown(_))));
    }
}

#[test]
fn ids_that_are_no_package_id_name_no_folder() {
    let f = fixture();
    f.imports.import(&f.package, false).expect("imported");
    for id in ["..", ".", "../capabilities/example.weather", "", ".staging-x", "example.weather/skill"] {
        assert!(f.imports.get(id).is_none(), "{id:?}");
        assert!(matches!(f.imports.enable(id), Err(ImportError::Unknown(_))), "{id:?}");
    }
}

#[test]
fn a_record_not_written_by_the_host_is_not_listed() {
    let f = fixture();
    f.imports.import(&f.package, false).expect("imported");
    let record = f.imports.root.join("example.weather").join(RECORD_FILE);
    let mut doctored: Value = serde_json::from_slice(&std::fs::read(&record).expect("record")).expect("json");
    doctored["id"] = json!("other.id");
    std::fs::write(&record, doctored.to_string()).expect("write");
    assert_eq!(f.imports.list(), [], "a record whose id is not its folder's is nobody's");
}

#[test]
fn a_staging_folder_a_killed_host_left_is_swept_at_open() {
    let f = fixture();
    let leftover = f.imports.root.join(".staging-example.weather-1-0");
    std::fs::create_dir_all(leftover.join(SKILL_DIR)).expect("leftover");
    let reopened = Imports::open(f.imports.root.clone());
    assert!(!leftover.exists());
    assert_eq!(reopened.list(), []);
}

#[test]
fn env_values_expand_from_the_hosts_environment_as_a_shell_would() {
    let var = |name: &str| match name {
        "HOME_DIR" => Some("/home/me".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    };
    let cases = [
        ("${HOME_DIR}/cache", "/home/me/cache"),
        ("${UNSET}", ""),
        ("${UNSET:-./cache}", "./cache"),
        ("${EMPTY:-fallback}", "fallback"),
        ("${EMPTY}", ""),
        ("${HOME_DIR:-x}", "/home/me"),
        ("a ${HOME_DIR} b ${UNSET:-c} d", "a /home/me b c d"),
        ("$HOME_DIR and ${1BAD} and ${}", "$HOME_DIR and ${1BAD} and ${}"),
        ("unterminated ${HOME_DIR", "unterminated ${HOME_DIR"),
        ("${HOME_DIR:-}", "/home/me"),
        ("no variables", "no variables"),
    ];
    for (text, expected) in cases {
        assert_eq!(super::expand(text, var), expected, "{text:?}");
    }
}

#[test]
fn a_stdio_server_runs_from_the_package_folder_under_a_normalized_namespace() {
    let f = fixture();
    let record = f.imports.import(&f.package, false).expect("imported").record;
    assert_eq!(record.provider_id(), "suzu:example.weather");
    assert_eq!(record.namespace(), "example_weather");
    let server = record.stdio_server().expect("stdio");
    assert_eq!(server.command, ["node".to_owned(), f.package.join("server.mjs").display().to_string()]);
    assert_eq!(
        server.env.get("TOKEN").map(String::as_str),
        Some("${WEATHER_TOKEN:-none}"),
        "left for the hub to expand from the variables the owner allows"
    );
    assert_eq!(server.namespace.as_deref(), Some("example_weather"));

    let mut odd = record.clone();
    for (id, namespace) in [("__A.B__", "a_b"), ("...", "package"), (&*"x".repeat(100), &*"x".repeat(32))] {
        odd.id = id.to_owned();
        assert_eq!(odd.namespace(), namespace, "{id}");
    }
    odd.manifest["adapters"]["mcp"] = json!({"transport": "http", "url": "https://example.com/mcp"});
    assert!(odd.stdio_server().is_none());
}

#[test]
fn front_matter_gives_the_skills_name_and_description_and_the_rest_is_its_body() {
    let (fields, body) =
        super::front_matter("---\nname: weather\ndescription: \"Local: weather\"\nlong: >\n  folded\n---\n# Body\n");
    assert_eq!(
        fields,
        [("name".to_owned(), "weather".to_owned()), ("description".to_owned(), "Local: weather".to_owned())]
    );
    assert_eq!(body, "# Body\n");
    assert_eq!(super::front_matter("# No front matter\n"), (Vec::new(), "# No front matter\n"));
    assert_eq!(
        super::front_matter("---\nname: x\nno end\n"),
        (Vec::new(), "---\nname: x\nno end\n"),
        "unterminated: all body"
    );
}

#[test]
fn an_enabled_skill_is_offered_from_the_copy_with_uris_and_mime_types() {
    let f = fixture();
    write(&f.package, "skill/references/a b.md", b"# ref\n");
    let record = f.imports.import(&f.package, false).expect("imported").record;
    let skill = f.imports.skill(&record).expect("a skill");
    assert_eq!((skill.title.as_str(), skill.description.as_deref()), ("weather", None));
    assert_eq!(skill.body, "Say the weather.\n");
    let files: Vec<(&str, &str)> = skill.files.iter().map(|f| (f.path.as_str(), f.mime.as_str())).collect();
    assert_eq!(
        files,
        [
            ("SKILL.md", "text/markdown"),
            ("assets/icon.bin", "application/octet-stream"),
            ("references/a b.md", "text/markdown"),
            ("scripts/run.sh", "application/x-sh"),
        ]
    );
    assert_eq!(skill.uri("references/a b.md"), "skill://example.weather/references/a%20b.md");
    assert_eq!(
        skill.file_of("skill://example.weather/references/a%20b.md").map(|f| f.path.as_str()),
        Some("references/a b.md")
    );
    assert!(skill.file_of("skill://example.weather/../capability.json").is_none());
    assert!(skill.file_of("skill://example.weather/references/a b.md").is_none(), "only the URI as listed");
    // The source changing does not change what is offered.
    write(&f.package, "skill/SKILL.md", b"---\nname: other\n---\nChanged.\n");
    assert_eq!(f.imports.skill(&record).expect("a skill").body, "Say the weather.\n");
}

#[test]
fn a_skill_whose_front_matter_names_and_describes_it_has_its_name_in_its_uris() {
    let f = fixture();
    write(
        &f.package,
        "skill/SKILL.md",
        b"---\nname: weather\ndescription: Says the weather\nmetadata:\n  version: \"2\"\n---\nSay it.\n",
    );
    let record = f.imports.import(&f.package, false).expect("imported").record;
    let skill = f.imports.skill(&record).expect("a skill");
    assert_eq!(
        skill.frontmatter,
        Some(serde_json::json!({"name": "weather", "description": "Says the weather", "metadata": {"version": "2"}}))
    );
    assert_eq!(skill.root(), "skill://example.weather/weather");
    assert_eq!(skill.uri("SKILL.md"), "skill://example.weather/weather/SKILL.md");
    let listed = skill.files.iter().find(|file| file.path == "SKILL.md").expect("listed");
    assert_eq!(listed.bytes, 85);
    assert_eq!(listed.sha256.len(), 64);
    // Reachable by the URI it had before too; nothing outside it either way.
    assert!(skill.file_of("skill://example.weather/weather/SKILL.md").is_some());
    assert!(skill.file_of("skill://example.weather/SKILL.md").is_some());
    assert!(skill.file_of("skill://example.weather/weather/../SKILL.md").is_none());

    // A name outside the Agent Skills rules (or no description) keeps the plain URIs.
    for name in ["Weather", "-weather", "wea--ther", "weather-", ""] {
        let text = format!("---\nname: \"{name}\"\ndescription: d\n---\n");
        assert_eq!(super::skill_frontmatter(&text), None, "{name}");
    }
    assert_eq!(super::skill_frontmatter("---\nname: weather\n---\n"), None, "no description");
    let plain = super::Skill { frontmatter: None, ..skill };
    assert_eq!(plain.uri("SKILL.md"), "skill://example.weather/SKILL.md");
    assert!(!super::is_skill_name(&"a".repeat(65)) && super::is_skill_name(&"a".repeat(64)));
    assert_eq!(super::front_matter_json("---\n- a list\n---\n"), None, "a mapping only");
}

#[test]
fn an_instance_holds_a_bounded_number_of_packages() {
    let f = fixture();
    let imports = Imports::open_with_limit(f.imports.root.clone(), 1);
    imports.import(&f.package, false).expect("the first");
    let mut other = manifest("1.0.0", &json!({"skill": {"directory": "skill"}}));
    other["id"] = json!("example.other");
    write_manifest(&f.package, &other);
    let refused = imports.import(&f.package, false).expect_err("one too many");
    assert!(matches!(refused, ImportError::Full(1)), "{refused}");
    assert_eq!(imports.list().len(), 1);
    imports.remove("example.weather").expect("removed");
    imports.import(&f.package, false).expect("room again");
}
