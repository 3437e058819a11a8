//! A process's descendants, read from `/proc`, and signalling them.
//!
//! A process group is not enough to find everything a child started: a grandchild can
//! call `setsid` and leave the group. Descendants by parent link can still be found —
//! and with the keeper marked as a child subreaper, orphans are re-parented to it instead
//! of to init, so they stay in its tree. A process counts as running while any of its
//! threads does, whatever `/proc/<pid>/stat` says of its main thread.

use std::collections::{HashMap, HashSet};

use rustix::process::{Pid, Signal};

/// Every descendant of `root` (children, their children, …) that still runs, `root`
/// excluded.
///
/// A process runs while any of its threads does. Its main thread may have ended — a
/// `pthread_exit` from `main` — and then `/proc/<pid>/stat` says `Z` while the other
/// threads run on: such a process is returned (a signal to its pid reaches the whole
/// thread group, and `SIGKILL` ends every thread). Real zombies are walked through but not
/// returned: their children are still theirs until they are reaped.
#[must_use]
pub fn descendants(root: Pid) -> Vec<Pid> {
    let mut children: HashMap<i32, Vec<(i32, bool)>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if let Some((state, parent, _)) = stat_fields(pid) {
            children.entry(parent).or_default().push((pid, runs(pid, &state)));
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![root.as_raw_nonzero().get()];
    while let Some(pid) = queue.pop() {
        for &(child, runs) in children.get(&pid).map_or(&[][..], Vec::as_slice) {
            if runs && let Some(child) = Pid::from_raw(child) {
                found.push(child);
            }
            queue.push(child);
        }
    }
    found
}

/// Whether the process `pid`, whose `/proc/<pid>/stat` state is `state`, still has a
/// thread that runs: its main thread, or — when that one has ended (`Z`) — any other.
fn runs(pid: i32, state: &str) -> bool {
    if !is_dead(state) {
        return true;
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().any(|task| {
        let Some(tid) = task.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { return false };
        tid != pid && task_state(pid, tid).is_some_and(|state| !is_dead(&state))
    })
}

/// `Z` (zombie) or `X` (dead): a thread that has ended.
fn is_dead(state: &str) -> bool {
    state == "Z" || state == "X"
}

/// The state of thread `tid` of process `pid`, from `/proc/<pid>/task/<tid>/stat`.
fn task_state(pid: i32, tid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    Some(stat.get(stat.rfind(')')? + 1..)?.split_ascii_whitespace().next()?.to_owned())
}

/// `SIGKILL` to every descendant of `keeper`, then to its process group: a keeper that did
/// not finish a stop in time ends with its whole tree, not only its group. The descendants
/// go first, while the keeper — a child subreaper — still holds the orphans among them; a
/// new scan follows as long as it finds a process not yet signalled (one forked before its
/// parent's `SIGKILL` landed), a bounded number of times.
pub fn kill_tree(keeper: u32) {
    const MAX_SCANS: usize = 50;
    let Some(root) = i32::try_from(keeper).ok().and_then(Pid::from_raw) else { return };
    let mut signalled = HashSet::new();
    for _ in 0..MAX_SCANS {
        let new: Vec<Pid> = descendants(root).into_iter().filter(|pid| !signalled.contains(pid)).collect();
        if new.is_empty() {
            break;
        }
        signal_all(&new, Signal::KILL);
        signalled.extend(new);
    }
    signal_group(keeper, Signal::KILL);
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

/// Whether `pid` is still a child of `parent` (not yet reaped by it).
#[must_use]
pub fn is_child(parent: u32, pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .is_ok_and(|children| children.split_ascii_whitespace().any(|child| child.parse() == Ok(pid)))
}

/// Whether any process (zombies aside) is still in the group led by `pid`.
#[must_use]
pub fn group_alive(pid: u32) -> bool {
    let Some(group) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { return false };
    if rustix::process::test_kill_process_group(group).is_err() {
        return false;
    }
    // Zombies still count for kill(0); look for a member that runs.
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    entries.flatten().any(|entry| {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { return false };
        stat_fields(pid).is_some_and(|(state, _, pgrp)| pgrp == group.as_raw_nonzero().get() && runs(pid, &state))
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

    /// Python whose main thread ends with `pthread_exit` while a worker thread runs on.
    const MAIN_THREAD_ENDS: &str = "import ctypes, threading, time\n\
        threading.Thread(target=lambda: time.sleep(300)).start()\n\
        ctypes.CDLL(None).pthread_exit(None)\n";

    fn pid_of(child: &std::process::Child) -> Pid {
        Pid::from_raw(i32::try_from(child.id()).expect("pid")).expect("pid")
    }

    /// The `/proc/<pid>/stat` state of `pid`.
    fn state(pid: Pid) -> Option<String> {
        stat_fields(pid.as_raw_nonzero().get()).map(|(state, _, _)| state)
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn a_process_whose_main_thread_ended_is_found_and_killed_while_a_thread_runs() {
        let mut child =
            std::process::Command::new("python3").args(["-c", MAIN_THREAD_ENDS]).spawn().expect("spawn python3");
        let pid = pid_of(&child);
        wait_for("the main thread to end", || state(pid).as_deref() == Some("Z"));
        let me = rustix::process::getpid();
        let found = descendants(me);
        // Before the verdict, make sure nothing is left behind whatever it is.
        let _ = rustix::process::kill_process(pid, Signal::KILL);
        let status = child.wait().expect("wait");
        assert!(found.contains(&pid), "a zombie leader with a running thread runs: {found:?}");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "SIGKILL to the pid ended the worker thread too: {status:?}"
        );
        assert!(!descendants(me).contains(&pid), "reaped, it is no descendant");
    }

    #[test]
    fn a_real_zombie_is_no_descendant() {
        let mut child = std::process::Command::new("true").spawn().expect("spawn true");
        let pid = pid_of(&child);
        wait_for("true to exit", || state(pid).as_deref() == Some("Z"));
        let found = descendants(rustix::process::getpid());
        let _ = child.wait();
        assert!(!found.contains(&pid), "{found:?}");
    }

    #[test]
    fn kill_tree_ends_descendants_that_left_the_group() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().expect("temp");
        let pid_file = dir.path().join("escaped");
        // A shell leading its own group, with a grandchild in a new session that writes its
        // pid and sleeps, and a child that moved to a process group of its own.
        let script = format!(
            "setsid sh -c 'echo $$ > {file}.tmp; mv {file}.tmp {file}; exec sleep 300' & \
             python3 -c 'import os, time; os.setpgid(0, 0); time.sleep(300)' & wait",
            file = pid_file.display()
        );
        let mut child =
            std::process::Command::new("/bin/sh").args(["-c", &script]).process_group(0).spawn().expect("spawn sh");
        let shell = pid_of(&child);
        wait_for("the grandchild's pid file", || pid_file.exists());
        wait_for("both below the shell", || descendants(shell).len() >= 2);
        let below = descendants(shell);
        kill_tree(child.id());
        let _ = child.wait();
        wait_for("every process below the shell to end", || {
            below.iter().all(|&pid| state(pid).is_none_or(|s| is_dead(&s)))
        });
    }
}
