//! The host's state and the journal are the owner's alone: whatever the umask, another
//! user of the machine reads nothing the host keeps there, an older instance's state is
//! made owner-only at start, and `butler check` warns about an instance others can write to.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::gate::as_another_user;
use crate::util::{Butler, butler_command, instance_with_config, wait_until, write_manifest};

const LIMIT: Duration = Duration::from_secs(30);

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).expect("stat").permissions().mode() & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Every folder and file under `root` (itself included, links not followed) that its
/// group or others may use, with its mode.
fn open_to_others(root: &Path) -> Vec<(PathBuf, u32)> {
    let mut open = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).expect("stat");
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            open.push((path.clone(), mode));
        }
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).expect("list").map(|e| e.expect("entry").path()));
        }
    }
    open
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).map(|e| e.filter_map(Result::ok).map(|e| e.path()).collect()).unwrap_or_default()
}

/// Even under umask 000, where every file the old host made was 0666 and every folder
/// 0777: the state folder holds nothing its group or others may use, the journal's
/// folders are the owner's, and the user `nobody` reads none of it.
#[test]
fn what_the_host_keeps_is_the_owners_alone_whatever_the_umask() {
    let dir = tempfile::tempdir().expect("temp");
    // A parent anyone may traverse, as a home folder often is.
    set_mode(dir.path(), 0o755);
    let workdir = dir.path().join("instance");
    let log = dir.path().join("host.log");
    let butler = Butler::start_with_umask(&workdir, 0o000, &log);
    let state = butler.workdir.join(".butler");
    butler.wait_ready("journal");

    // A hosted tool's log.
    let tool = json!({"schemaVersion": 1, "kind": "tool", "id": "talker", "name": "Talker",
        "hosted": {"command": ["sh", "-c", "echo hello from the tool; exec sleep 1000"], "autoStart": true}});
    write_manifest(&butler.workdir, "tools/talker", &tool);
    let tool_log = state.join("logs/talker.log");
    wait_until(LIMIT, "the tool's log", || {
        std::fs::read_to_string(&tool_log).is_ok_and(|t| t.contains("hello from the tool"))
    });
    // An observation in the journal's spool.
    let (status, body) = butler.post_json("/observe", &json!({"source": "me", "text": "a private note"}), &[]);
    assert_eq!(status, 202, "{body}");
    let spool = butler.workdir.join("self/journal/spool");
    wait_until(LIMIT, "the observation in the spool", || {
        files_under(&spool).iter().any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("a private note")))
    });
    // A session turn: collected in the state folder, then stored by the journal.
    let turn = json!({"id": "t-private", "workspace": "home", "messages": [{"role": "user", "content": "my diary"}]});
    let (status, body) = butler.post_json("/sessions/turns", &turn, &[]);
    assert_eq!(status, 202, "{body}");
    let (_, flushed) = butler.post_json("/sessions/flush", &json!({}), &[]);
    assert_eq!(flushed["pending"], 0, "{flushed}");
    let stored = butler.workdir.join("self/journal/sessions/t-private.json");
    assert!(stored.is_file(), "the journal stored the turn");
    // An MCP request, in the activity log.
    crate::mcp_stateless::ask(&butler, "/mcp", &crate::mcp_stateless::request(1, "tools/list", json!({})));
    let activity = state.join("logs/mcp-activity.jsonl");
    wait_until(LIMIT, "the MCP activity log", || std::fs::metadata(&activity).is_ok_and(|m| m.len() > 0));

    assert_eq!(open_to_others(&state), Vec::new(), "the state folder is open to others");
    // The journal's private folders; what the faculty makes in them gets the umask (WASI
    // lets it choose no mode), out of others' reach.
    for folder in ["self/journal", "self/sessions"] {
        assert_eq!(mode_of(&butler.workdir.join(folder)), 0o700, "{folder}");
    }
    let secrets: Vec<PathBuf> = vec![
        state.join("owner-token"),
        tool_log.clone(),
        activity.clone(),
        files_under(&spool).into_iter().next().expect("a spool file"),
        stored.clone(),
        files_under(&butler.workdir.join("self/sessions")).into_iter().next().expect("a session line file"),
    ];
    let script = format!(
        "import os\nfor p in {:?}:\n    try:\n        open(p).read()\n        print('READ', p)\n    except OSError as e:\n        print('DENIED', p, e.errno)\n",
        secrets.iter().map(|p| p.display().to_string()).collect::<Vec<_>>()
    );
    if let Some(out) = as_another_user(&script) {
        assert!(!out.contains("READ"), "another user read the owner's files:\n{out}");
        assert_eq!(out.matches("DENIED").count(), secrets.len(), "{out}");
    }
    assert!(butler.stop().success());

    // The journal's files the faculty wrote (WASI lets it choose no mode) are made
    // owner-only when the host loads it next.
    let again = Butler::start(&workdir);
    again.wait_ready("journal");
    for folder in ["self/journal", "self/sessions"] {
        assert_eq!(open_to_others(&again.workdir.join(folder)), Vec::new(), "{folder}");
    }
    assert_eq!(mode_of(&stored), 0o600);
}

/// An instance an older host left open to others (a 0755 state folder, a 0644 file, a
/// 0755 folder in it, a readable owner token) is made owner-only as the host starts, with
/// one line saying so; a link in it is not followed.
#[test]
fn an_older_instances_state_is_made_owner_only_at_start() {
    let dir = instance_with_config(&json!({}));
    let state = dir.path().join(".butler");
    let old = state.join("old");
    std::fs::create_dir_all(&old).expect("mkdir");
    std::fs::write(old.join("turn.json"), "{}").expect("write");
    std::fs::write(state.join("owner-token"), "ab".repeat(32)).expect("write");
    let outside = dir.path().join("shared.md");
    std::fs::write(&outside, "shared").expect("write");
    std::os::unix::fs::symlink(&outside, state.join("link.md")).expect("symlink");
    for (path, mode) in
        [(&state, 0o755), (&old, 0o755), (&old.join("turn.json"), 0o644), (&state.join("owner-token"), 0o644)]
    {
        set_mode(path, mode);
    }
    set_mode(&outside, 0o644);
    let log = dir.path().join("host.log");
    let butler = Butler::start_logging(dir.path(), "info", &log);
    let state = std::fs::canonicalize(&state).expect("canonical");
    assert_eq!(mode_of(&state), 0o700);
    assert_eq!(mode_of(&state.join("old")), 0o700);
    assert_eq!(mode_of(&state.join("old/turn.json")), 0o600);
    assert_eq!(mode_of(&state.join("owner-token")), 0o600);
    assert_eq!(mode_of(&outside), 0o644, "the link was not followed");
    assert!(butler.stop().success());
    let text = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("to owner-only")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains(&format!("tightened 2 files and 2 folders under {} to owner-only", state.display())),
        "{text}"
    );
}

/// `butler check` warns, without failing, about an instance folder other users may write
/// to: the root or a scan root.
#[test]
fn check_warns_about_an_instance_others_can_write_to() {
    let dir = instance_with_config(&json!({}));
    set_mode(dir.path(), 0o755);
    for root in ["tools", "services", "faculties"] {
        set_mode(&dir.path().join(root), 0o755);
    }
    let home = tempfile::tempdir().expect("home");
    let check = || {
        let output = butler_command(home.path()).arg("check").arg(dir.path()).output().expect("run butler");
        (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let (code, out) = check();
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("other users"), "{out}");

    set_mode(&dir.path().join("tools"), 0o777);
    set_mode(dir.path(), 0o775);
    let (code, out) = check();
    assert_eq!(code, Some(0), "a warning, not a rejection: {out}");
    assert!(out.contains("tools — warning"), "{out}");
    assert!(out.contains(". — warning"), "{out}");
    assert!(out.contains("other users of the machine can write to this folder (mode 0777)"), "{out}");
    assert!(out.contains("(mode 0775)"), "{out}");
    assert!(!out.contains("services — warning"), "{out}");
}
