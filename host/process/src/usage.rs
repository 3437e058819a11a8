//! What a process and its descendants use — CPU time and resident memory — read from
//! `/proc`, and the CPU share between two readings: what `butler ps` and the console show.

use std::time::Instant;

/// The most processes one reading walks (a fork bomb is not read to the end).
const MAX_PROCESSES: usize = 4096;

/// One reading of a process tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// CPU time (user and system) of every live process of the tree, ms.
    pub cpu_ms: u64,
    /// Resident memory of every process of the tree, bytes.
    pub rss_bytes: u64,
    /// When it was read.
    pub at: Instant,
}

impl Usage {
    /// The CPU share, in percent of one core, between `earlier` and this reading (`None`
    /// when they are too close to tell, under 100 ms apart).
    #[must_use]
    pub fn cpu_percent_since(&self, earlier: &Self) -> Option<f64> {
        let wall = self.at.checked_duration_since(earlier.at)?.as_secs_f64();
        if wall < 0.1 {
            return None;
        }
        let busy = self.cpu_ms.saturating_sub(earlier.cpu_ms) as f64 / 1000.0;
        Some((busy / wall * 1000.0).round() / 10.0)
    }
}

/// The usage of `pid` and its descendants, `None` when `pid` is gone.
#[must_use]
pub fn of_tree(pid: u32) -> Option<Usage> {
    let ticks = rustix::param::clock_ticks_per_second().max(1);
    let page = rustix::param::page_size() as u64;
    let at = Instant::now();
    let (mut ticks_used, mut pages) = read_stat(pid)?;
    let mut queue = children(pid);
    let mut seen = 1;
    while let Some(child) = queue.pop() {
        if seen >= MAX_PROCESSES {
            break;
        }
        seen += 1;
        if let Some((used, resident)) = read_stat(child) {
            ticks_used += used;
            pages += resident;
            queue.extend(children(child));
        }
    }
    Some(Usage { cpu_ms: ticks_used * 1000 / ticks, rss_bytes: pages * page, at })
}

/// `utime + stime` (clock ticks) and `rss` (pages) of `pid`.
fn read_stat(pid: u32) -> Option<(u64, u64)> {
    let stat = crate::tree::stat_after_comm(pid.into())?;
    let fields: Vec<&str> = stat.split_ascii_whitespace().collect();
    let number = |index: usize| fields.get(index).and_then(|f| f.parse::<u64>().ok());
    // After `)`: state is field 0, utime 11, stime 12, rss 21 (proc(5): fields 3, 14, 15, 24).
    Some((number(11)? + number(12)?, number(21)?))
}

/// The children of every thread of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| list.split_ascii_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_child_counts_in_its_parents_tree() {
        // sh → a child that spins, in a group of their own, stopped together at the end.
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sh -c 'while :; do :; done' & wait"])
            .process_group(0)
            .spawn()
            .expect("spawn");
        std::thread::sleep(std::time::Duration::from_millis(100));
        let first = of_tree(child.id()).expect("running");
        std::thread::sleep(std::time::Duration::from_millis(400));
        let second = of_tree(child.id()).expect("running");
        crate::tree::signal_group(child.id(), rustix::process::Signal::KILL);
        let _ = child.wait();
        assert!(second.rss_bytes > 0, "{second:?}");
        let percent = second.cpu_percent_since(&first).expect("far enough apart");
        assert!(percent > 10.0, "a spinning child is busy: {percent}%");
        assert!(of_tree(child.id()).is_none(), "gone");
    }

    #[test]
    fn readings_too_close_tell_nothing() {
        let now = Instant::now();
        let a = Usage { cpu_ms: 0, rss_bytes: 0, at: now };
        let b = Usage { cpu_ms: 5, rss_bytes: 0, at: now + std::time::Duration::from_millis(50) };
        assert_eq!(b.cpu_percent_since(&a), None);
        let c = Usage { cpu_ms: 500, rss_bytes: 0, at: now + std::time::Duration::from_secs(1) };
        assert_eq!(c.cpu_percent_since(&a), Some(50.0));
    }
}
