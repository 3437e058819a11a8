//! One package per rule, made of real files in a temporary folder, each with the report
//! it must get.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{MAX_DEPTH, MAX_FILE_BYTES, MAX_FILES, Rule, inspect};

/// A package folder with `manifest` written as its `suzu-capability.json`.
fn package(manifest: &Value) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(super::MANIFEST_FILE);
    std::fs::write(&path, manifest.to_string()).expect("manifest");
    (dir, path)
}

fn write(root: &Path, relative: &str, bytes: &[u8]) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
}

fn manifest(adapters: &Value) -> Value {
    json!({"schemaVersion": 1, "id": "example.local-weather", "name": "本地天气", "version": "1.0.0", "adapters": adapters})
}

/// A package whose skill is the directory `skill` with a good SKILL.md.
fn skill_package() -> (tempfile::TempDir, PathBuf) {
    let (dir, path) = package(&manifest(&json!({"skill": {"directory": "skill"}})));
    write(dir.path(), "skill/SKILL.md", b"---\nname: weather\ndescription: Local weather\n---\nSay the weather.\n");
    (dir, path)
}

/// The problems of the package at `manifest`: (file, rule, pointer).
fn problems(manifest: &Path) -> Vec<(String, Rule, Option<String>)> {
    inspect(manifest).problems.into_iter().map(|p| (p.file, p.rule, p.pointer)).collect()
}

fn at(file: &str, rule: Rule) -> (String, Rule, Option<String>) {
    (file.to_owned(), rule, None)
}

fn field(pointer: &str, rule: Rule) -> (String, Rule, Option<String>) {
    (super::MANIFEST_FILE.to_owned(), rule, Some(pointer.to_owned()))
}

#[test]
fn a_good_package_passes_and_says_what_it_is() {
    let adapters = json!({
        "skill": {"directory": "skill"},
        "mcp": {"transport": "stdio", "command": "node", "args": ["./server.mjs"], "env": {"CACHE": "${CACHE_DIR:-./cache}"}},
        "cli": {"command": "local-weather", "args": ["--json"]},
    });
    let (dir, path) = package(&manifest(&adapters));
    write(dir.path(), "skill/SKILL.md", b"---\nname: weather\n---\nbody\n");
    write(dir.path(), "skill/scripts/format-result.mjs", b"export {}\n");
    write(dir.path(), "skill/assets/icon.bin", &[0xff, 0x00, 0xfe]);
    // `server.mjs` would leave a mark if anything ran it.
    write(dir.path(), "server.mjs", b"require('fs').writeFileSync('ran', '')\n");
    let report = inspect(&path);
    assert_eq!(report.problems, [], "{report:?}");
    let package = report.package.expect("the package");
    assert_eq!(
        (package.id.as_str(), package.name.as_str(), package.version.as_str()),
        ("example.local-weather", "本地天气", "1.0.0")
    );
    assert_eq!(package.adapters, ["skill", "mcp (stdio)", "cli"]);
    let skill = package.skill.expect("the skill");
    assert_eq!(skill.files, ["SKILL.md", "assets/icon.bin", "scripts/format-result.mjs"]);
    assert_eq!(skill.bytes, 27 + 10 + 3);
    assert!(!dir.path().join("ran").exists(), "nothing in a package runs");
}

#[test]
fn a_file_skill_is_one_skill_md() {
    let (dir, path) = package(&manifest(&json!({"skill": {"file": "docs/SKILL.md"}})));
    write(dir.path(), "docs/SKILL.md", b"# Weather\n");
    let report = inspect(&path);
    assert_eq!(report.problems, []);
    assert_eq!(
        report.package.and_then(|p| p.skill).map(|s| (s.form, s.files)),
        Some(("file", vec!["SKILL.md".to_owned()]))
    );
    for (bytes, rule) in
        [(&b""[..], Rule::SkillMdEmpty), (&b" \n"[..], Rule::SkillMdEmpty), (&b"\xff\xfe"[..], Rule::SkillMdNotUtf8)]
    {
        write(dir.path(), "docs/SKILL.md", bytes);
        assert_eq!(problems(&path), [at("docs/SKILL.md", rule)]);
    }
}

#[test]
fn unknown_fields_and_wrong_shapes_are_refused_with_their_pointer() {
    let mut document = manifest(&json!({"skill": {"directory": "skill", "extra": 1}, "mcp": {"transport": "pipe"}}));
    document["homepage"] = json!("https://example.test");
    document["description"] = json!("x".repeat(2001));
    let (dir, path) = package(&document);
    write(dir.path(), "skill/SKILL.md", b"ok\n");
    let got = problems(&path);
    for pointer in ["/homepage", "/adapters/skill/extra", "/adapters/mcp/transport", "/description"] {
        assert!(got.contains(&field(pointer, Rule::Schema)), "{pointer}: {got:?}");
    }
    let report = inspect(&path);
    assert!(report.problems.iter().any(|p| p.message.contains("unknown field `homepage`")), "{report:?}");
}

#[test]
fn a_package_needs_a_skill_or_an_mcp_adapter() {
    let (_dir, path) = package(&manifest(&json!({"cli": {"command": "x"}})));
    assert_eq!(problems(&path), [field("/adapters", Rule::NoAdapter)]);
}

#[test]
fn a_skill_is_exactly_one_form() {
    for skill in [json!({"directory": "skill", "file": "SKILL.md"}), json!({})] {
        let (dir, path) = package(&manifest(&json!({"skill": skill})));
        write(dir.path(), "skill/SKILL.md", b"ok\n");
        write(dir.path(), "SKILL.md", b"ok\n");
        assert_eq!(problems(&path), [field("/adapters/skill", Rule::SkillForm)], "{skill}");
    }
}

#[test]
fn package_paths_are_relative_with_slashes_and_stay_inside() {
    for bad in ["/etc", "skill\\sub", "../skill", "skill/../../x"] {
        let (_dir, path) = package(&manifest(&json!({"skill": {"directory": bad}})));
        assert_eq!(problems(&path), [field("/adapters/skill/directory", Rule::PathForm)], "{bad}");
    }
    let (_dir, path) = package(&manifest(&json!({"mcp": {"transport": "stdio", "command": "./../bin/server"}})));
    assert_eq!(problems(&path), [field("/adapters/mcp/command", Rule::PathForm)]);
}

#[test]
fn a_skill_holds_only_real_directories_and_regular_files() {
    let (dir, path) = skill_package();
    let root = dir.path();
    std::os::unix::fs::symlink("/etc/passwd", root.join("skill/passwd")).expect("symlink");
    std::os::unix::fs::symlink("SKILL.md", root.join("skill/inside")).expect("symlink");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("skill/pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        0,
    )
    .expect("a FIFO");
    assert_eq!(
        problems(&path),
        [at("skill/inside", Rule::Symlink), at("skill/passwd", Rule::Symlink), at("skill/pipe", Rule::SpecialFile)]
    );

    // The skill's own directory a link (to a good one): refused too.
    let (dir, path) = package(&manifest(&json!({"skill": {"directory": "linked"}})));
    write(dir.path(), "real/SKILL.md", b"ok\n");
    std::os::unix::fs::symlink("real", dir.path().join("linked")).expect("symlink");
    assert_eq!(problems(&path), [at("linked", Rule::Symlink)]);
}

#[test]
fn what_the_manifest_names_must_be_there_and_of_the_right_type() {
    let (dir, path) = package(&manifest(&json!({"skill": {"directory": "skill"}})));
    assert_eq!(problems(&path), [at("skill", Rule::Missing)]);
    write(dir.path(), "skill", b"a file");
    assert_eq!(problems(&path), [at("skill", Rule::WrongType)]);
    std::fs::remove_file(dir.path().join("skill")).expect("rm");
    std::fs::create_dir(dir.path().join("skill")).expect("mkdir");
    assert_eq!(problems(&path), [at("skill/SKILL.md", Rule::SkillMdMissing)]);

    let (dir, path) = package(&manifest(
        &json!({"mcp": {"transport": "stdio", "command": "node", "args": ["./server.mjs", "--port", "./data/"]}}),
    ));
    assert_eq!(problems(&path), [at("server.mjs", Rule::Missing), at("data", Rule::Missing)]);
    write(dir.path(), "server.mjs", b"");
    std::fs::create_dir(dir.path().join("data")).expect("mkdir");
    assert_eq!(problems(&path), []);
}

#[test]
fn at_most_sixteen_levels_of_directories() {
    let (dir, path) = skill_package();
    let levels = |n: usize| (1..=n).map(|i| format!("d{i}")).collect::<Vec<_>>().join("/");
    write(dir.path(), &format!("skill/{}/leaf.txt", levels(MAX_DEPTH)), b"deep");
    assert_eq!(problems(&path), []);
    write(dir.path(), &format!("skill/{}/leaf.txt", levels(MAX_DEPTH + 1)), b"deeper");
    assert_eq!(problems(&path), [at(&format!("skill/{}", levels(MAX_DEPTH + 1)), Rule::TooDeep)]);
}

#[test]
fn at_most_256_files() {
    let (dir, path) = skill_package();
    for i in 1..MAX_FILES {
        write(dir.path(), &format!("skill/files/{i:03}.txt"), b"x");
    }
    assert_eq!(problems(&path), [], "SKILL.md and 255 more: 256 files");
    write(dir.path(), "skill/files/one-more.txt", b"x");
    assert_eq!(problems(&path), [at("skill", Rule::TooManyFiles)]);
}

#[test]
fn at_most_1_mib_a_file_and_8_mib_in_all() {
    let (dir, path) = skill_package();
    let mib = usize::try_from(MAX_FILE_BYTES).expect("fits");
    write(dir.path(), "skill/assets/exactly.bin", &vec![7; mib]);
    assert_eq!(problems(&path), []);
    write(dir.path(), "skill/assets/over.bin", &vec![7; mib + 1]);
    assert_eq!(problems(&path), [at("skill/assets/over.bin", Rule::FileTooLarge)]);
    std::fs::remove_file(dir.path().join("skill/assets/over.bin")).expect("rm");

    // 1 MiB eight times, SKILL.md besides: more than 8 MiB in all.
    for i in 1..8 {
        write(dir.path(), &format!("skill/assets/{i}.bin"), &vec![7; mib]);
    }
    assert_eq!(problems(&path), [at("skill", Rule::SkillTooLarge)]);

    // SKILL.md itself too large: said once, as the file it is.
    let (dir, path) = skill_package();
    write(dir.path(), "skill/SKILL.md", &vec![b'a'; mib + 1]);
    assert_eq!(problems(&path), [at("skill/SKILL.md", Rule::FileTooLarge)]);
}

#[test]
fn the_mcp_adapter_takes_its_transports_fields_and_safe_urls() {
    let http = |fields: Value| {
        let mut mcp = json!({"transport": "http"});
        mcp.as_object_mut().expect("object").extend(fields.as_object().expect("object").clone());
        package(&manifest(&json!({"mcp": mcp})))
    };
    for url in ["https://example.test/mcp", "http://127.0.0.1:8080/mcp", "http://localhost/mcp", "http://[::1]:9/mcp"] {
        let (_dir, path) = http(json!({"url": url, "headers": {"Authorization": "Bearer ${TOKEN}"}}));
        assert_eq!(problems(&path), [], "{url}");
    }
    for url in [
        "http://example.test/mcp",
        "http://127.0.0.1.example.test/mcp",
        "ftp://127.0.0.1/x",
        "example.test/mcp",
        "https:///mcp",
    ] {
        let (_dir, path) = http(json!({"url": url}));
        assert_eq!(problems(&path), [field("/adapters/mcp/url", Rule::UrlNotAllowed)], "{url}");
    }
    let (_dir, path) = http(json!({"command": "node"}));
    assert_eq!(
        problems(&path),
        [field("/adapters/mcp", Rule::TransportFields), field("/adapters/mcp/command", Rule::TransportFields)]
    );
    let (_dir, path) = package(&manifest(&json!({"mcp": {"transport": "stdio", "url": "https://example.test"}})));
    assert_eq!(
        problems(&path),
        [field("/adapters/mcp", Rule::TransportFields), field("/adapters/mcp/url", Rule::TransportFields)]
    );
}

#[test]
fn a_manifest_that_does_not_read_says_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(super::MANIFEST_FILE);
    assert_eq!(problems(&path), [field("", Rule::Unreadable)]);
    std::fs::write(&path, r#"{"id": "a", "id": "b"}"#).expect("write");
    let report = inspect(&path);
    assert_eq!(report.problems.iter().map(|p| p.rule).collect::<Vec<_>>(), [Rule::Unreadable]);
    assert!(report.problems[0].message.contains("written twice"), "{report:?}");
    assert!(report.package.is_none());
}
