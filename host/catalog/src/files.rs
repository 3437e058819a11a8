//! Files the host writes for itself: atomically (a temp file renamed over the target, so
//! a reader sees the old or the new file, never half of one), owner-only when they are the
//! host's state (folders 0700, files 0600, whatever the process umask), the tightening of
//! state an older host left readable by others, and the sweep of temp files a killed
//! writer left behind.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of a folder of the host's state: the owner's alone.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode of a file of the host's state: the owner reads and writes it, nobody else.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Writes `bytes` to `path` atomically: a temp file in the same folder, flushed, then
/// renamed over the target, so readers see the old or the new file, never half of one.
/// The file gets the process umask's mode: this is for the instance's own files, meant to
/// be shared (the skeleton, built-in components); the host's state goes through
/// [`write_private`].
///
/// # Errors
/// The I/O error of whichever step failed (the temp file is removed).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_through_temp(path, bytes, None)
}

/// [`write_atomic`] for the host's state: the file is 0600 from its first byte, whatever
/// the umask.
///
/// # Errors
/// The I/O error of whichever step failed (the temp file is removed).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_through_temp(path, bytes, Some(PRIVATE_FILE_MODE))
}

/// Creates folder `path` and its missing parents, each created one 0700 (an existing one is
/// left as it is: [`tighten`] is for those).
///
/// # Errors
/// The I/O error of the folder that could not be made.
pub fn create_private_dir(path: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(PRIVATE_DIR_MODE).create(path)
}

/// Opens `path` for appending, creating it 0600 when it is missing (a log of the host's).
///
/// # Errors
/// The I/O error of the open.
pub fn open_private_append(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().create(true).append(true).mode(PRIVATE_FILE_MODE).open(path)
}

fn write_through_temp(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    use std::io::Write;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(temp_name(name));
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        if let Some(mode) = mode {
            options.mode(mode);
        }
        let mut file = options.open(&tmp)?;
        if let Some(mode) = mode {
            // A leftover temp file of the same name keeps its old mode through the open.
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
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

/// Most entries [`tighten`] looks at: a state folder holds far fewer; a walk that gets this
/// far stops and says so.
const TIGHTEN_MAX_ENTRIES: usize = 200_000;
/// The deepest folder [`tighten`] descends into, below its root.
const TIGHTEN_MAX_DEPTH: usize = 32;

/// What [`tighten`] changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tightened {
    /// Files whose group and other bits were cleared.
    pub files: usize,
    /// Folders whose group and other bits were cleared.
    pub folders: usize,
    /// Files or folders open to others that could not be changed (not the owner's, say).
    pub failed: usize,
    /// Whether the walk stopped at its bounds before it saw everything.
    pub cut_short: bool,
}

impl Tightened {
    /// One line saying what changed under `root`, when anything did or could not.
    #[must_use]
    pub fn summary(&self, root: &Path) -> Option<String> {
        if self.files == 0 && self.folders == 0 && self.failed == 0 && !self.cut_short {
            return None;
        }
        let count = |n: usize, word: &str| if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") };
        let mut line = format!(
            "tightened {} and {} under {} to owner-only",
            count(self.files, "file"),
            count(self.folders, "folder"),
            root.display()
        );
        if self.failed > 0 {
            line.push_str(&format!("; {} open to others could not be changed", self.failed));
        }
        if self.cut_short {
            line.push_str(&format!("; stopped after {TIGHTEN_MAX_ENTRIES} entries or {TIGHTEN_MAX_DEPTH} levels"));
        }
        Some(line)
    }
}

/// Clears the group and other bits of every folder and regular file under `root` (itself
/// included) that has any: what an older host, or the umask, left readable by other users
/// of the machine. Symbolic links are never followed (an entry found open is opened with
/// `O_NOFOLLOW` and changed through that handle, so a link swapped in meanwhile is not
/// followed either) and other kinds of file are left alone. Bounded: at most
/// [`TIGHTEN_MAX_ENTRIES`] entries, [`TIGHTEN_MAX_DEPTH`] levels; an entry already
/// owner-only costs one `lstat`.
#[must_use]
pub fn tighten(root: &Path) -> Tightened {
    let mut done = Tightened::default();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((path, depth)) = stack.pop() {
        seen += 1;
        if seen > TIGHTEN_MAX_ENTRIES {
            done.cut_short = true;
            break;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        let kind = meta.file_type();
        if !kind.is_dir() && !kind.is_file() {
            continue;
        }
        if meta.permissions().mode() & 0o077 != 0 {
            match make_owner_only(&path, kind.is_dir()) {
                Ok(true) if kind.is_dir() => done.folders += 1,
                Ok(true) => done.files += 1,
                Ok(false) => {}
                Err(_) => done.failed += 1,
            }
        }
        if kind.is_dir() {
            if depth >= TIGHTEN_MAX_DEPTH {
                done.cut_short = true;
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&path) else { continue };
            stack.extend(entries.map_while(Result::ok).map(|e| (e.path(), depth + 1)));
        }
    }
    done
}

/// Clears the group and other bits of the folder (`dir`) or regular file at `path`, through
/// a handle opened without following a link; `Ok(false)` when what is there now is not of
/// that kind or is already owner-only.
fn make_owner_only(path: &Path, dir: bool) -> std::io::Result<bool> {
    use rustix::fs::{FileType, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let fd = rustix::fs::open(path, flags, Mode::empty())?;
    let stat = rustix::fs::fstat(&fd)?;
    let want = if dir { FileType::Directory } else { FileType::RegularFile };
    let mode = stat.st_mode & 0o7777;
    if FileType::from_raw_mode(stat.st_mode) != want || mode & 0o077 == 0 {
        return Ok(false);
    }
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & !0o077))?;
    Ok(true)
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

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).expect("stat").permissions().mode() & 0o7777
    }

    #[test]
    fn private_files_and_folders_are_the_owners_alone_whatever_was_there() {
        let dir = tempfile::tempdir().expect("temp");
        let folder = dir.path().join("a/b");
        create_private_dir(&folder).expect("mkdir");
        assert_eq!(mode_of(&dir.path().join("a")), 0o700, "a missing parent is made private too");
        assert_eq!(mode_of(&folder), 0o700);
        let file = folder.join("state.json");
        std::fs::write(&file, b"old").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        // A temp file of the same name, readable by others, left by an earlier process.
        let stale = folder.join(temp_name("state.json"));
        std::fs::write(&stale, b"half").expect("write");
        std::fs::set_permissions(&stale, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        write_private(&file, b"new").expect("write");
        assert_eq!(std::fs::read(&file).expect("read"), b"new");
        assert_eq!(mode_of(&file), 0o600);
        let log = folder.join("host.log");
        drop(open_private_append(&log).expect("open"));
        assert_eq!(mode_of(&log), 0o600);
        write_atomic(&folder.join("shared.json"), b"{}").expect("write");
        assert_ne!(mode_of(&folder.join("shared.json")) & 0o600, 0, "a shared file is written as usual");
    }

    #[test]
    fn tightening_clears_what_others_could_read_and_follows_no_link() {
        let dir = tempfile::tempdir().expect("temp");
        let state = dir.path().join("state");
        let logs = state.join("logs");
        std::fs::create_dir_all(&logs).expect("mkdir");
        let outside = dir.path().join("outside.md");
        std::fs::write(&outside, b"shared").expect("write");
        std::fs::write(state.join("layout.json"), b"{}").expect("write");
        std::fs::write(logs.join("tool.log"), b"x").expect("write");
        std::fs::write(logs.join("private.log"), b"x").expect("write");
        std::os::unix::fs::symlink(&outside, state.join("link.md")).expect("symlink");
        std::os::unix::fs::symlink(dir.path(), logs.join("up")).expect("symlink");
        for (path, mode) in [
            (&state, 0o755),
            (&logs, 0o775),
            (&state.join("layout.json"), 0o644),
            (&logs.join("tool.log"), 0o664),
            (&logs.join("private.log"), 0o600),
            (&outside, 0o644),
            (&dir.path().to_path_buf(), 0o755),
        ] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        let done = tighten(&state);
        assert_eq!(done, Tightened { files: 2, folders: 2, failed: 0, cut_short: false });
        assert_eq!(
            done.summary(&state).as_deref(),
            Some(format!("tightened 2 files and 2 folders under {} to owner-only", state.display()).as_str())
        );
        assert_eq!(mode_of(&state), 0o700);
        assert_eq!(mode_of(&logs), 0o700);
        assert_eq!(mode_of(&state.join("layout.json")), 0o600);
        assert_eq!(mode_of(&logs.join("tool.log")), 0o600);
        assert_eq!(mode_of(&outside), 0o644, "a link's target outside is not touched");
        assert_eq!(mode_of(dir.path()), 0o755, "nor a linked folder");
        assert_eq!(tighten(&state), Tightened::default(), "nothing left to change");
        assert_eq!(Tightened::default().summary(&state), None);
    }
}
