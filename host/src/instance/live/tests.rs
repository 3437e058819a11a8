use serde_json::json;

use super::*;

fn started(config: &Value) -> (tempfile::TempDir, PathBuf, Arc<LiveConfig>) {
    let dir = tempfile::tempdir().expect("temp");
    let path = dir.path().join("butler.json");
    std::fs::write(&path, config.to_string()).expect("write");
    let applied = Applied::of(RootConfig::load(&path).expect("a valid config")).expect("profiles");
    let live = LiveConfig::new(&path, applied);
    (dir, path, live)
}

fn edit(path: &Path, config: &str) {
    std::fs::write(path, config).expect("write");
}

fn pointers(live: &LiveConfig) -> Vec<(Severity, String)> {
    live.diagnostics().into_iter().flat_map(|d| d.errors.into_iter().map(move |e| (d.severity, e.pointer))).collect()
}

#[test]
fn an_edit_of_the_mcp_block_comes_into_force_and_followers_hear_of_it() {
    let (_dir, path, live) = started(&json!({"mcp": {"quarantine": true}}));
    let followed = live.subscribe();
    assert!(!live.check(), "an unchanged file changes nothing");
    edit(
        &path,
        &json!({"mcp": {"quarantine": false, "idleSec": 30, "profiles": {"docs": {"providers": ["a"]}}}}).to_string(),
    );
    assert!(live.check());
    let now = live.current();
    assert!(!now.config.mcp.quarantine);
    assert_eq!(now.config.mcp.idle_sec, 30);
    assert!(now.profiles.contains_key("docs"), "profiles are checked anew");
    assert!(followed.has_changed().expect("open"), "a follower is told");
    assert!(live.diagnostics().is_empty());
}

#[test]
fn an_invalid_edit_keeps_the_last_good_config_and_says_where_until_it_is_fixed() {
    let (_dir, path, live) = started(&json!({"mcp": {"idleSec": 60}}));
    edit(&path, &json!({"mcp": {"idleSec": "soon", "quarantine": 3}}).to_string());
    assert!(!live.check());
    assert_eq!(live.current().config.mcp.idle_sec, 60, "the last good config stays");
    let found = pointers(&live);
    assert!(found.contains(&(Severity::Error, "/mcp/idleSec".to_owned())), "{found:?}");
    assert!(found.contains(&(Severity::Error, "/mcp/quarantine".to_owned())), "every problem: {found:?}");

    edit(&path, "{ \"mcp\": ");
    assert!(!live.check());
    assert!(live.diagnostics()[0].errors[0].message.starts_with("not JSON"), "{:?}", live.diagnostics());

    // What the schema allows but the host's own rules refuse is kept out too.
    edit(
        &path,
        &json!({"automations": {"timeZone": "Mars/Olympus", "schedules": {"a · Butler": "61 * * * *"}}}).to_string(),
    );
    assert!(!live.check());
    let found = pointers(&live);
    assert!(found.contains(&(Severity::Error, "/automations/timeZone".to_owned())), "{found:?}");
    assert!(found.contains(&(Severity::Error, "/automations/schedules/a · Butler".to_owned())), "{found:?}");
    // A profile the schema allows but the hub cannot build is refused too.
    edit(&path, &json!({"mcp": {"profiles": {"bad": {"include": ["["]}}}}).to_string());
    assert!(!live.check());
    assert_eq!(pointers(&live), [(Severity::Error, "/mcp/profiles".to_owned())]);

    edit(&path, &json!({"mcp": {"idleSec": 90}}).to_string());
    assert!(live.check());
    assert_eq!(live.current().config.mcp.idle_sec, 90);
    assert!(live.diagnostics().is_empty(), "fixed: nothing to show");
}

#[test]
fn fields_that_need_a_restart_keep_their_running_value_and_say_so() {
    let (_dir, path, live) = started(&json!({"stateDir": ".butler", "mcp": {"logPayloads": false}}));
    let edited = json!({"stateDir": ".elsewhere", "python": "/usr/bin/python3", "mcp": {"logPayloads": true},
                        "agent": {"command": ["my-agent"], "timeoutSec": 60}, "collector": {"enabled": false}});
    edit(&path, &edited.to_string());
    assert!(live.check(), "the live part of the edit applies");
    let now = live.current();
    assert!(now.config.mcp.log_payloads);
    assert_eq!(now.config.agent.timeout_sec, Some(60), "the agent applies live");
    assert!(now.config.agent.command.is_some());
    assert!(!now.config.collector.enabled, "the collector too");
    assert!(now.config.python.is_none(), "the interpreters wait");
    assert_eq!(now.config.state_dir, ".butler", "the state folder waits for a restart");
    assert_eq!(now.config.raw.get("stateDir"), Some(&json!(".butler")));
    let found = live.diagnostics();
    let said: Vec<(&str, &str)> =
        found.iter().flat_map(|d| d.errors.iter().map(|e| (e.pointer.as_str(), e.message.as_str()))).collect();
    assert!(found.iter().all(|d| d.severity == Severity::Warning), "{found:?}");
    assert!(said.iter().any(|(p, m)| *p == "/stateDir" && m.contains("until it restarts")), "{said:?}");
    assert!(said.iter().any(|(p, m)| *p == "/python" && m.contains("not yet applied live")), "{said:?}");
    assert_eq!(said.len(), 2, "only those two wait: {said:?}");

    edit(&path, &json!({"stateDir": ".butler", "mcp": {"logPayloads": true}}).to_string());
    assert!(live.check());
    assert!(live.current().config.agent.command.is_none(), "removed live as well");
    assert!(live.diagnostics().is_empty(), "undone: nothing waits");
}

#[test]
fn a_file_too_large_or_gone_is_an_error_and_changes_nothing() {
    let (_dir, path, live) = started(&json!({"mcp": {}}));
    let huge = format!(
        "{{\"pad\": \"{}\"}}",
        "x".repeat(usize::try_from(super::super::config::MAX_CONFIG_BYTES).unwrap_or(0))
    );
    edit(&path, &huge);
    assert!(!live.check());
    assert!(live.diagnostics()[0].errors[0].message.contains("larger than"), "{:?}", live.diagnostics());
    std::fs::remove_file(&path).expect("rm");
    assert!(!live.check());
    assert_eq!(live.diagnostics()[0].severity, Severity::Error);
    // A FIFO in its place: refused at once, never waited on for a writer.
    rustix::fs::mkfifoat(rustix::fs::CWD, &path, rustix::fs::Mode::from_raw_mode(0o600)).expect("mkfifo");
    assert!(!live.check());
    assert!(live.diagnostics()[0].errors[0].message.contains("cannot be read"), "{:?}", live.diagnostics());
    assert_eq!(live.current().config.raw.get("mcp"), Some(&json!({})), "the last good config stays");
}

#[test]
fn a_key_granted_to_a_faculty_applies_live_and_one_nothing_reads_changes_quietly() {
    let (_dir, path, live) =
        started(&json!({"faculties": {"notes": {"config": ["notesConfig"]}}, "notesConfig": 1, "other": 1}));
    edit(
        &path,
        &json!({"faculties": {"notes": {"config": ["notesConfig"]}}, "notesConfig": 2, "other": 2}).to_string(),
    );
    assert!(live.check());
    let now = live.current();
    assert_eq!(now.config.raw.get("notesConfig"), Some(&json!(2)), "granted: the faculty sees it at once");
    assert_eq!(now.config.raw.get("other"), Some(&json!(2)), "read by nothing: nothing waits for it");
    assert!(live.diagnostics().is_empty(), "{:?}", live.diagnostics());
}
