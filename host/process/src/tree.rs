//! A process's descendants, read from `/proc`, and signalling them.
//!
//! A process group is not enough to find everything a child started: a grandchild can
//! call `setsid` and leave the group. Descendants by parent link can still be found —
//! and with the keeper marked as a child subreaper, orphans are re-parented to it instead
//! of to init, so they stay in its tree.

use std::collections::HashMap;

use rustix::process::{Pid, Signal};

/// Every live descendant of `root` (children, their children, …), `root` excluded.
///
/// Zombies are walked through but not returned: a process whose main thread has exited
/// shows as a zombie while its other threads run on, and its children are still its own —
/// skipping it would hide them.
#[must_use]
pub fn descendants(root: Pid) -> Vec<Pid> {
    let mut children: HashMap<i32, Vec<(i32, bool)>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if let Some((state, parent, _)) = stat_fields(pid) {
            let live = state != "Z" && state != "X";
            children.entry(parent).or_default().push((pid, live));
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![root.as_raw_nonzero().get()];
    while let Some(pid) = queue.pop() {
        for &(child, live) in children.get(&pid).map_or(&[][..], Vec::as_slice) {
            if live && let Some(child) = Pid::from_raw(child) {
                found.push(child);
            }
            queue.push(child);
        }
    }
    found
}

/// The fields of `/proc/<pid>/stat` after the command name: `state ppid pgrp …` (field 3
/// onwards in proc(5)'s numbering).
pub(crate) fn stat_after_comm(pid: i64) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state …` — comm may hold spaces and parentheses: split after the last `)`.
    Some(stat.get(stat.rfind(')')? + 1..)?.to_owned())
}

/// State, parent pid and process group of `pid`.
fn stat_fields(pid: i32) -> Option<(String, i32, i32)> {
    let rest = stat_after_comm(pid.into())?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.to_owned();
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    Some((state, parent, group))
}

/// Sends `signal` to each of `pids`, ignoring the ones that are already gone.
pub fn signal_all(pids: &[Pid], signal: Signal) {
    for &pid in pids {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Sends `signal` to the process group led by `pid` (ignoring a group that is gone).
pub fn signal_group(pid: u32, signal: Signal) {
    if let Some(group) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process_group(group, signal);
    }
}

/// The first child of `pid` (the program a keeper runs), from
/// `/proc/<pid>/task/<pid>/children`.
#[must_use]
pub fn first_child(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_ascii_whitespace().next()?.parse().ok()
}

/// Whether any process (zombies aside) is still in the group led by `pid`.
#[must_use]
pub fn group_alive(pid: u32) -> bool {
    let Some(group) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { return false };
    if rustix::process::test_kill_process_group(group).is_err() {
        return false;
    }
    // Zombies still count for kill(0); look for a live member.
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    entries.flatten().any(|entry| {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { return false };
        stat_fields(pid)
            .is_some_and(|(state, _, pgrp)| state != "Z" && state != "X" && pgrp == group.as_raw_nonzero().get())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_children_and_grandchildren() {
        // sh → sleep (child) and sh → sh → sleep (grandchild).
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30 & /bin/sh -c 'sleep 30 & wait' & wait"])
            .spawn()
            .expect("spawn sh");
        let me = rustix::process::getpid();
        let shell = Pid::from_raw(i32::try_from(child.id()).expect("pid")).expect("pid");
        let mut found = Vec::new();
        for _ in 0..200 {
            found = descendants(shell);
            if found.len() >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(found.len(), 3, "sleep, inner sh and its sleep: {found:?}");
        assert!(descendants(me).contains(&shell));
        assert!(descendants(me).iter().any(|p| found.contains(p)), "grandchildren are descendants of this test too");
        signal_all(&found, Signal::KILL);
        let _ = child.kill();
        let _ = child.wait();
    }
}
