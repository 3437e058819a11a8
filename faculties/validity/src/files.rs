//! The two file system questions checks ask of the validity root — what is at a path, and
//! what a file holds — and the rules that keep the answers from being an oracle.
//!
//! **No oracle.** A quote check confirms text in a file; it must never confirm text in the
//! host's secrets. So a checked path is first resolved here, one segment at a time with
//! every symlink followed (never out of the root), and the **resolved** path is refused
//! when it names a hidden file or folder, anything inside the instance's internals (the
//! state directory with the owner token; the host says where in `BUTLER_INTERNAL`), or a
//! file named like an extension manifest; a regular file with more than one hard link is
//! refused too (its other names may be such places). Spelling is not enough: a link that
//! stays inside the root can still point at the owner token.
//!
//! **Searches** (`glob`, `grep`) walk folders under the same rules.
//! [`Root::search_start`](crate::files::Root::search_start) resolves where a search starts
//! (refused, missing and not-a-folder are one answer), and
//! [`Root::search`](crate::files::Root::search) lists folders depth first in name order,
//! resolving every entry as a checked path is resolved. An entry the rules refuse — a
//! hidden name (never even looked at), a resolved path that is hidden, internal or a
//! manifest, a file with other hard links, a link that leaves the root or cannot be
//! resolved — is skipped without a word: a search says nothing of what it may not see, not
//! even that it is there. A folder that resolves to one of the folders being walked (a link
//! loop) is not entered again. A walk lists at most
//! [`MAX_ENTRIES`](crate::files::MAX_ENTRIES) entries and descends at most
//! [`MAX_DEPTH`](crate::files::MAX_DEPTH) folders; past either it stops and says it was
//! truncated.
//!
//! **Few calls.** In the WebAssembly sandbox each call crosses into the host, so the root's
//! preopened directory is asked directly through WASI (one `stat-at` without following per
//! segment, cached per folder for the life of a [`Root`](crate::files::Root); `readlink-at`
//! for links; one `open-at` and `read` at an offset; `open-at` and `read-directory` to list
//! a folder, whose listing is trusted only to say which entries are folders — every other
//! entry is looked at with `stat-at`). Elsewhere (unit tests on the build machine) the
//! standard library answers.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::ops::ControlFlow;

/// What is at a path: its type and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A regular file of this many bytes.
    File(u64),
    /// A directory.
    Dir,
    /// Anything else (a device, a socket…).
    Other,
}

/// One segment as the file system reports it, links not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    File { size: u64, links: u64 },
    Dir,
    Link,
    Other,
}

/// What a folder's listing says an entry is, links not followed. Only a folder is taken at
/// the listing's word; anything else is looked at (`stat`) before it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed {
    Dir,
    Other,
}

/// Why a path is not checked at all (its error's inner value).
#[derive(Debug)]
pub struct Refused(pub &'static str);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Refused {}

fn refused(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, Refused(why))
}

/// Symlinks followed in one path at most (as the kernel's own limit).
const MAX_LINKS: usize = 40;
/// Folder entries one search lists at most (hidden and refused ones included).
pub const MAX_ENTRIES: usize = 20_000;
/// Folders one search descends at most, below the folder it starts from.
pub const MAX_DEPTH: usize = 64;
/// The environment variable in which the host names the instance's internals under this
/// faculty's grants: `{"paths": ["/validity/.butler"], "names": ["butler.json"]}`.
pub const INTERNAL_ENV: &str = "BUTLER_INTERNAL";

/// What the host said is internal, relative to the root.
#[derive(Debug, Default, Clone)]
struct Internal {
    paths: Vec<String>,
    names: Vec<String>,
}

impl Internal {
    fn from_env(guest_root: &str) -> Self {
        std::env::var(INTERNAL_ENV).map(|text| Self::parse(&text, guest_root)).unwrap_or_default()
    }

    /// The host's `{"paths", "names"}`, with paths made relative to `guest_root` (paths
    /// under other grants are not this root's business).
    fn parse(text: &str, guest_root: &str) -> Self {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else { return Self::default() };
        let list = |key: &str| -> Vec<String> {
            value
                .get(key)
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str())
                .map(str::to_owned)
                .collect()
        };
        let prefix = format!("{}/", guest_root.trim_end_matches('/'));
        Self {
            paths: list("paths").iter().filter_map(|p| p.strip_prefix(&prefix)).map(str::to_owned).collect(),
            names: list("names"),
        }
    }

    /// Why the resolved `path` (segments from the root) is not checked, if it is not.
    fn refuses(&self, segments: &[String]) -> Option<&'static str> {
        if segments.iter().any(|s| s.starts_with('.')) {
            return Some("it resolves to a hidden file or folder");
        }
        let joined = segments.join("/");
        if self.paths.iter().any(|p| joined == *p || joined.starts_with(&format!("{p}/"))) {
            return Some("it resolves into the host's own state");
        }
        if segments.last().is_some_and(|name| self.names.contains(name)) {
            return Some("it resolves to an extension manifest");
        }
        None
    }
}

#[cfg(target_os = "wasi")]
mod imp {
    use std::io;

    use wasip2::filesystem::preopens::get_directories;
    use wasip2::filesystem::types::{Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags};

    use super::{Listed, Node};

    /// The validity root, as its preopened directory.
    pub struct Dir(Descriptor);

    impl Dir {
        pub fn open(guest: &str) -> Option<Self> {
            get_directories().into_iter().find(|(_, path)| path == guest).map(|(dir, _)| Self(dir))
        }

        pub fn node(&self, relative: &str) -> io::Result<Node> {
            let stat = self.0.stat_at(PathFlags::empty(), relative).map_err(error)?;
            Ok(match stat.type_ {
                DescriptorType::RegularFile => Node::File { size: stat.size, links: stat.link_count },
                DescriptorType::Directory => Node::Dir,
                DescriptorType::SymbolicLink => Node::Link,
                _ => Node::Other,
            })
        }

        pub fn link_target(&self, relative: &str) -> io::Result<String> {
            self.0.readlink_at(relative).map_err(error)
        }

        pub fn read(&self, relative: &str, len: u64, out: &mut Vec<u8>) -> io::Result<()> {
            out.clear();
            let file = self
                .0
                .open_at(PathFlags::empty(), relative, OpenFlags::empty(), DescriptorFlags::READ)
                .map_err(error)?;
            while (out.len() as u64) < len {
                let (chunk, end) = file.read(len - out.len() as u64, out.len() as u64).map_err(error)?;
                out.extend_from_slice(&chunk);
                if end || chunk.is_empty() {
                    break;
                }
            }
            Ok(())
        }

        /// At most `max` entries of the folder at `relative` (`""`: the root), in the order
        /// the file system gives them.
        pub fn read_dir(&self, relative: &str, max: usize) -> io::Result<Vec<(String, Listed)>> {
            let opened;
            let dir = if relative.is_empty() {
                &self.0
            } else {
                // Not following a link at the end: `relative` is resolved, so a link there
                // now was put there since, and is not listed.
                opened = self
                    .0
                    .open_at(PathFlags::empty(), relative, OpenFlags::DIRECTORY, DescriptorFlags::READ)
                    .map_err(error)?;
                &opened
            };
            // Declared after `opened`, so dropped before it (a stream is its folder's child).
            let stream = dir.read_directory().map_err(error)?;
            let mut out = Vec::new();
            while out.len() < max {
                let Some(entry) = stream.read_directory_entry().map_err(error)? else { break };
                let listed = if matches!(entry.type_, DescriptorType::Directory) { Listed::Dir } else { Listed::Other };
                out.push((entry.name, listed));
            }
            Ok(out)
        }
    }

    /// The `std::io` error a WASI error code stands for (as the standard library maps them,
    /// for the kinds the checks tell apart).
    fn error(code: ErrorCode) -> io::Error {
        let kind = match code {
            ErrorCode::NoEntry => io::ErrorKind::NotFound,
            ErrorCode::NotDirectory => io::ErrorKind::NotADirectory,
            ErrorCode::NotPermitted | ErrorCode::Access => io::ErrorKind::PermissionDenied,
            ErrorCode::IsDirectory => io::ErrorKind::IsADirectory,
            ErrorCode::Interrupted => io::ErrorKind::Interrupted,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, format!("{code:?}"))
    }
}

#[cfg(not(target_os = "wasi"))]
mod imp {
    use std::io::{self, Read};
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;

    use super::{Listed, Node};

    /// The validity root, as a path.
    pub struct Dir(PathBuf);

    impl Dir {
        pub fn open(guest: &str) -> Option<Self> {
            Some(Self(PathBuf::from(guest)))
        }

        pub fn node(&self, relative: &str) -> io::Result<Node> {
            let meta = std::fs::symlink_metadata(self.0.join(relative))?;
            let kind = meta.file_type();
            Ok(if kind.is_symlink() {
                Node::Link
            } else if kind.is_file() {
                Node::File { size: meta.len(), links: meta.nlink() }
            } else if kind.is_dir() {
                Node::Dir
            } else {
                Node::Other
            })
        }

        pub fn link_target(&self, relative: &str) -> io::Result<String> {
            Ok(std::fs::read_link(self.0.join(relative))?.to_string_lossy().into_owned())
        }

        pub fn read(&self, relative: &str, len: u64, out: &mut Vec<u8>) -> io::Result<()> {
            out.clear();
            std::fs::File::open(self.0.join(relative))?.take(len).read_to_end(out).map(|_| ())
        }

        /// At most `max` entries of the folder at `relative` (`""`: the root); names that
        /// are not UTF-8 are left out (the sandbox has none).
        pub fn read_dir(&self, relative: &str, max: usize) -> io::Result<Vec<(String, Listed)>> {
            let mut out = Vec::new();
            for entry in std::fs::read_dir(self.0.join(relative))? {
                if out.len() >= max {
                    break;
                }
                let entry = entry?;
                let Ok(name) = entry.file_name().into_string() else { continue };
                let listed = if entry.file_type()?.is_dir() { Listed::Dir } else { Listed::Other };
                out.push((name, listed));
            }
            Ok(out)
        }
    }
}

/// The validity root.
pub struct Root {
    dir: imp::Dir,
    internal: Internal,
    /// Folders resolved so far: their spelling → their resolved segments.
    folders: RefCell<HashMap<String, Vec<String>>>,
}

impl Root {
    /// The directory preopened at `guest`; `None` when there is none.
    #[must_use]
    pub fn open(guest: &str) -> Option<Self> {
        let dir = imp::Dir::open(guest)?;
        Some(Self { dir, internal: Internal::from_env(guest), folders: RefCell::new(HashMap::new()) })
    }

    /// What is at `relative`, resolved (see the module doc).
    ///
    /// # Errors
    /// As the file system answers (`NotFound`, …); `PermissionDenied` for a path that
    /// leaves the root or that these rules refuse (a [`Refused`] inside).
    pub fn entry(&self, relative: &str) -> io::Result<Entry> {
        let (_, node) = self.resolve(relative)?;
        Ok(match node {
            Node::File { size, .. } => Entry::File(size),
            Node::Dir => Entry::Dir,
            Node::Link | Node::Other => Entry::Other,
        })
    }

    /// Reads at most `len` bytes from the start of the file at `relative` into `out`.
    ///
    /// # Errors
    /// As [`Root::entry`].
    pub fn read(&self, relative: &str, len: u64, out: &mut Vec<u8>) -> io::Result<()> {
        let (resolved, _) = self.resolve(relative)?;
        self.dir.read(&resolved, len, out)
    }

    /// Where a search starts: the folder (or regular file) at `segments`, as a caller spelled
    /// them (checked already: no `..`, `.`, empty or hidden segment). The last `below` of
    /// them are below the caller's own folder (a pattern's literal folders): found paths are
    /// given relative to that folder too.
    ///
    /// # Errors
    /// `NotFound` for everything a search cannot start from: missing, neither a folder nor
    /// a regular file, refused by the rules (by its spelling or where it resolves), or a
    /// link that leaves the root — one answer, so that the failure is no oracle.
    pub fn search_start(&self, segments: &[&str], below: usize) -> io::Result<Start> {
        let not_found = || io::Error::new(io::ErrorKind::NotFound, "nothing to search there");
        let spelled: Vec<String> = segments.iter().map(|s| (*s).to_owned()).collect();
        if self.internal.refuses(&spelled).is_some() {
            return Err(not_found());
        }
        let mut resolved = Vec::new();
        let (_, node) = self.walk(&mut resolved, spelled.clone()).map_err(|_| not_found())?;
        if self.internal.refuses(&resolved).is_some() {
            return Err(not_found());
        }
        let file = match node {
            Node::Dir => None,
            Node::File { size, links: 1 } => Some(size),
            _ => return Err(not_found()),
        };
        let below = spelled[spelled.len() - below.min(spelled.len())..].join("/");
        Ok(Start { spelled: spelled.join("/"), below, resolved, file })
    }

    /// Walks the folder `start` names (see the module doc), depth first in name order,
    /// handing `visit` each regular file the rules let a search see, until it breaks.
    /// Folders deeper than `depth` (and [`MAX_DEPTH`]) below the start are not entered.
    /// A `start` that is a file is the one file visited. Whether a bound
    /// ([`MAX_ENTRIES`], [`MAX_DEPTH`]) cut the walk short.
    pub fn search(&self, start: &Start, depth: usize, visit: &mut dyn FnMut(Found) -> ControlFlow<()>) -> bool {
        if let Some(size) = start.file {
            let name = start.spelled.rsplit('/').next().unwrap_or_default();
            let below = if start.below.is_empty() { name.to_owned() } else { start.below.clone() };
            let _ = visit(Found { path: start.spelled.clone(), below, size, resolved: start.resolved.join("/") });
            return false;
        }
        let mut walker = Walker { root: self, visit, entries: 0, truncated: false, depth, ancestors: Vec::new() };
        let _ = walker.folder(&start.resolved, &start.spelled, &start.below, 0);
        walker.truncated
    }

    /// Reads the file a search found (at most its size when found, `len` at most) into `out`.
    ///
    /// # Errors
    /// As the file system answers.
    pub fn read_found(&self, found: &Found, len: u64, out: &mut Vec<u8>) -> io::Result<()> {
        self.dir.read(&found.resolved, found.size.min(len), out)
    }

    /// The path with every link followed, and what is there; refused as the module says.
    fn resolve(&self, relative: &str) -> io::Result<(String, Node)> {
        let (folder, name) = relative.rsplit_once('/').map_or(("", relative), |(f, n)| (f, n));
        let mut segments = self.resolve_folder(folder)?;
        let (resolved, node) = self.walk(&mut segments, vec![name.to_owned()])?;
        if let Some(why) = self.internal.refuses(&segments) {
            return Err(refused(why));
        }
        if let Node::File { links, .. } = node
            && links > 1
        {
            return Err(refused("the file has other hard links"));
        }
        Ok((resolved, node))
    }

    fn resolve_folder(&self, folder: &str) -> io::Result<Vec<String>> {
        if folder.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(known) = self.folders.borrow().get(folder) {
            return Ok(known.clone());
        }
        let mut segments = Vec::new();
        let (_, node) = self.walk(&mut segments, folder.split('/').map(str::to_owned).collect())?;
        if node != Node::Dir {
            return Err(io::Error::new(io::ErrorKind::NotADirectory, "not a directory"));
        }
        self.folders.borrow_mut().insert(folder.to_owned(), segments.clone());
        Ok(segments)
    }

    /// Appends `rest` to the resolved `segments`, following links; the resolved path and
    /// what its last segment is.
    fn walk(&self, segments: &mut Vec<String>, rest: Vec<String>) -> io::Result<(String, Node)> {
        let mut pending: std::collections::VecDeque<String> = rest.into();
        let mut links = 0;
        let mut node = Node::Dir;
        while let Some(segment) = pending.pop_front() {
            match segment.as_str() {
                "" | "." => continue,
                ".." => {
                    if segments.pop().is_none() {
                        return Err(io::Error::new(io::ErrorKind::PermissionDenied, "leaves the root"));
                    }
                    node = Node::Dir;
                    continue;
                }
                _ => {}
            }
            segments.push(segment);
            let here = segments.join("/");
            node = self.dir.node(&here)?;
            if node == Node::Link {
                links += 1;
                if links > MAX_LINKS {
                    return Err(io::Error::other("too many levels of symbolic links"));
                }
                let target = self.dir.link_target(&here)?;
                if target.starts_with('/') {
                    return Err(io::Error::new(io::ErrorKind::PermissionDenied, "a link out of the root"));
                }
                segments.pop();
                for part in target.split('/').rev() {
                    pending.push_front(part.to_owned());
                }
            } else if node != Node::Dir && !pending.is_empty() {
                return Err(io::Error::new(io::ErrorKind::NotADirectory, "not a directory"));
            }
        }
        Ok((segments.join("/"), node))
    }
}

/// Where a search starts ([`Root::search_start`]).
#[derive(Debug)]
pub struct Start {
    /// Its path from the root, as spelled.
    spelled: String,
    /// The part of `spelled` below the caller's folder.
    below: String,
    /// Its resolved segments.
    resolved: Vec<String>,
    /// The size of the regular file it is; `None` for a folder.
    file: Option<u64>,
}

impl Start {
    /// Whether it is a regular file rather than a folder.
    #[must_use]
    pub fn is_file(&self) -> bool {
        self.file.is_some()
    }
}

/// A regular file a search may look at.
#[derive(Debug)]
pub struct Found {
    /// Its path from the root, as reached (links keep the name they have in their folder).
    pub path: String,
    /// Its path below the caller's folder (what a search's pattern is matched against).
    pub below: String,
    /// Its size when found.
    pub size: u64,
    /// Its path with every link followed.
    resolved: String,
}

/// One search's walk.
struct Walker<'a, 'v> {
    root: &'a Root,
    visit: &'v mut dyn FnMut(Found) -> ControlFlow<()>,
    /// Entries listed so far.
    entries: usize,
    /// Whether a bound cut the walk short.
    truncated: bool,
    /// Folders entered at most below the start (the caller's bound).
    depth: usize,
    /// The resolved paths of the folders being walked, outermost first.
    ancestors: Vec<String>,
}

impl Walker<'_, '_> {
    /// Visits what is in the folder `resolved` (reached as `spelled`, `below` the caller's
    /// folder), `level` folders below the start.
    fn folder(&mut self, resolved: &[String], spelled: &str, below: &str, level: usize) -> ControlFlow<()> {
        // Out of entries: the folder is not listed (nor asked whether it is empty); the
        // files already listed are still visited.
        let left = MAX_ENTRIES - self.entries;
        if left == 0 {
            self.truncated = true;
            return ControlFlow::Continue(());
        }
        let here = resolved.join("/");
        // A folder that cannot be listed (gone since, or not permitted) is skipped.
        let Ok(mut listing) = self.root.dir.read_dir(&here, left + 1) else { return ControlFlow::Continue(()) };
        if listing.len() > left {
            self.truncated = true;
            listing.truncate(left);
        }
        self.entries += listing.len();
        listing.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        self.ancestors.push(here);
        let flow = self.entries_of(listing, resolved, spelled, below, level);
        self.ancestors.pop();
        flow
    }

    fn entries_of(
        &mut self,
        listing: Vec<(String, Listed)>,
        resolved: &[String],
        spelled: &str,
        below: &str,
        level: usize,
    ) -> ControlFlow<()> {
        let join =
            |folder: &str, name: &str| if folder.is_empty() { name.to_owned() } else { format!("{folder}/{name}") };
        for (name, listed) in listing {
            // Hidden names are not even looked at.
            if name.starts_with('.') {
                continue;
            }
            let path = join(spelled, &name);
            let mut segments = resolved.to_vec();
            let node = if listed == Listed::Dir {
                segments.push(name.clone());
                Node::Dir
            } else {
                match self.root.walk(&mut segments, vec![name.clone()]) {
                    Ok((_, node)) => node,
                    Err(_) => continue,
                }
            };
            let internal = &self.root.internal;
            if internal.refuses(&segments).is_some()
                || internal.refuses(&path.split('/').map(str::to_owned).collect::<Vec<_>>()).is_some()
            {
                continue;
            }
            match node {
                Node::File { size, links: 1 } => {
                    let found = Found { path, below: join(below, &name), size, resolved: segments.join("/") };
                    (self.visit)(found)?;
                }
                Node::Dir => {
                    if level >= self.depth.min(MAX_DEPTH) {
                        self.truncated |= level >= MAX_DEPTH;
                        continue;
                    }
                    // A link back to a folder being walked would walk it again, forever.
                    let there = segments.join("/");
                    if self.ancestors.contains(&there) {
                        continue;
                    }
                    self.folder(&segments, &path, &join(below, &name), level + 1)?;
                }
                // Files with other hard links, and anything else.
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
impl Root {
    /// The folder at `base` as the validity root, with these internals (relative paths and
    /// manifest names).
    pub(crate) fn for_tests(base: &std::path::Path, paths: &[&str], names: &[&str]) -> Self {
        let internal = Internal {
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            names: names.iter().map(|n| (*n).to_owned()).collect(),
        };
        let dir = imp::Dir::open(base.to_str().expect("utf-8 temp path")).expect("dir");
        Self { dir, internal, folders: RefCell::new(HashMap::new()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn root_with(internal: Internal) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().expect("temp");
        let base = dir.path();
        std::fs::create_dir_all(base.join("docs/deep")).expect("mkdir");
        std::fs::create_dir_all(base.join(".butler")).expect("mkdir");
        std::fs::create_dir_all(base.join("state")).expect("mkdir");
        std::fs::create_dir_all(base.join("tools/x")).expect("mkdir");
        std::fs::write(base.join(".butler/owner-token"), "secret").expect("write");
        std::fs::write(base.join("state/owner-token"), "secret").expect("write");
        std::fs::write(base.join("tools/x/butler.json"), "{}").expect("write");
        std::fs::write(base.join("docs/a.md"), "hello").expect("write");
        std::fs::write(base.join("docs/deep/b.md"), "deep").expect("write");
        let root = Root {
            dir: imp::Dir::open(base.to_str().expect("utf-8")).expect("dir"),
            internal,
            folders: RefCell::new(HashMap::new()),
        };
        (dir, root)
    }

    fn is_refused(result: io::Result<Entry>) -> bool {
        result.is_err_and(|e| e.get_ref().is_some_and(|inner| inner.is::<Refused>()))
    }

    #[test]
    fn ordinary_paths_and_links_inside_resolve() {
        let (dir, root) = root_with(Internal::default());
        symlink("deep/b.md", dir.path().join("docs/link.md")).expect("link");
        symlink("docs/deep", dir.path().join("dlink")).expect("link");
        assert_eq!(root.entry("docs/a.md").expect("file"), Entry::File(5));
        assert_eq!(root.entry("docs/link.md").expect("via a link"), Entry::File(4));
        assert_eq!(root.entry("dlink/b.md").expect("via a folder link"), Entry::File(4));
        assert_eq!(root.entry("docs").expect("dir"), Entry::Dir);
        assert_eq!(root.entry("docs/nope.md").expect_err("missing").kind(), io::ErrorKind::NotFound);
        let mut out = Vec::new();
        root.read("docs/link.md", 10, &mut out).expect("read through the link");
        assert_eq!(out, b"deep");
    }

    #[test]
    fn every_road_to_the_internals_is_refused() {
        let internal = Internal { paths: vec!["state".into()], names: vec!["butler.json".into()] };
        let (dir, root) = root_with(internal);
        let base = dir.path();
        symlink("../.butler/owner-token", base.join("docs/tok-link.md")).expect("link");
        symlink("../state/owner-token", base.join("docs/state-link.md")).expect("link");
        symlink("../state", base.join("docs/state-dir")).expect("link");
        symlink("chain-2.md", base.join("docs/chain-1.md")).expect("link");
        symlink("tok-link.md", base.join("docs/chain-2.md")).expect("link");
        symlink("../tools/x/butler.json", base.join("docs/manifest.md")).expect("link");
        std::fs::hard_link(base.join("state/owner-token"), base.join("docs/hard.md")).expect("hard link");
        symlink("/etc/passwd", base.join("docs/passwd.md")).expect("link");
        symlink("../../outside", base.join("docs/out.md")).expect("link");
        for path in [
            "docs/tok-link.md",
            "docs/state-link.md",
            "docs/state-dir/owner-token",
            "docs/chain-1.md",
            "docs/manifest.md",
            "docs/hard.md",
            "state/owner-token",
            "tools/x/butler.json",
        ] {
            assert!(is_refused(root.entry(path)), "{path}");
            let mut out = Vec::new();
            assert!(root.read(path, 100, &mut out).is_err() && out.is_empty(), "{path}: nothing read");
        }
        for path in ["docs/passwd.md", "docs/out.md"] {
            assert_eq!(root.entry(path).expect_err(path).kind(), io::ErrorKind::PermissionDenied, "{path}");
        }
    }

    #[test]
    fn the_host_names_internals_by_guest_path() {
        let text = r#"{"paths": ["/validity/.butler", "/validity/state", "/elsewhere/x"], "names": ["butler.json"]}"#;
        let internal = Internal::parse(text, "/validity");
        assert_eq!(internal.paths, vec![".butler".to_owned(), "state".to_owned()]);
        assert_eq!(internal.names, vec!["butler.json".to_owned()]);
        assert!(Internal::parse("not json", "/validity").paths.is_empty());
    }
}
