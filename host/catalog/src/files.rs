//! Files the host writes for itself: atomically (a temp file renamed over the target, so
//! a reader sees the old or the new file, never half of one), and the sweep of temp files
//! a killed writer left behind.

/// Writes `bytes` to `path` atomically: a temp file in the same folder, flushed, then
/// renamed over the target, so readers see the old or the new file, never half of one.
///
/// # Errors
/// The I/O error of whichever step failed (the temp file is removed).
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(temp_name(name));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The temp file [`write_atomic`] writes `name` through: `.<name>.tmp-<pid>-<n>`.
fn temp_name(name: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(".{name}.tmp-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Whether `name` is one of [`write_atomic`]'s temp files.
fn is_temp_name(name: &str) -> bool {
    name.starts_with('.')
        && name.rsplit_once(".tmp-").is_some_and(|(_, tail)| {
            tail.split_once('-').is_some_and(|(pid, n)| {
                !pid.is_empty() && !n.is_empty() && pid.chars().chain(n.chars()).all(|c| c.is_ascii_digit())
            })
        })
}

/// Removes the temp files a killed process left in `dir` (not its subfolders) — the
/// host calls it at start, under the instance lock. A temp file younger than a minute is
/// left alone: it may be another process's write in progress (`butler check` filling the
/// compile cache).
pub fn sweep_temps(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    entries
        .map_while(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(is_temp_name))
        .filter(|e| e.metadata().is_ok_and(|m| m.is_file() && m.modified().is_ok_and(|t| t < minute_ago)))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_writers_old_temp_files_are_swept_and_nothing_else() {
        let dir = tempfile::tempdir().expect("temp");
        let stale = dir.path().join(temp_name("layout.json"));
        std::fs::write(&stale, b"half").expect("write");
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        std::fs::File::options().write(true).open(&stale).and_then(|f| f.set_modified(old)).expect("age it");
        let fresh = dir.path().join(temp_name("sessions.json"));
        std::fs::write(&fresh, b"in progress").expect("write");
        for other in ["layout.json", ".hidden", ".x.tmp-abc-1", ".x.tmp-1-"] {
            std::fs::write(dir.path().join(other), b"keep").expect("write");
            std::fs::File::options()
                .write(true)
                .open(dir.path().join(other))
                .and_then(|f| f.set_modified(old))
                .expect("age");
        }
        assert_eq!(sweep_temps(dir.path()), 1);
        assert!(!stale.exists() && fresh.exists());
        assert!(dir.path().join(".x.tmp-abc-1").exists() && dir.path().join("layout.json").exists());
    }
}
