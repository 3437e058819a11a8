//! The two file system questions checks ask of the validity root — what is at a path, and
//! what a file holds — asked with as few calls through the sandbox as possible.
//!
//! In the WebAssembly sandbox each call crosses into the host, and the standard library's
//! file API spends several on one operation (its `metadata` asks for a metadata hash as well
//! as the stat; its reads go through a stream it opens and drops), so there they are asked
//! of the root's preopened directory directly through WASI: one `stat-at`; one `open-at` and
//! one `read` at an offset. Elsewhere (unit tests on the build machine) the standard library
//! answers.

use std::io;

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

#[cfg(target_os = "wasi")]
mod imp {
    use std::io;

    use wasip2::filesystem::preopens::get_directories;
    use wasip2::filesystem::types::{Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags};

    use super::Entry;

    /// The validity root, as its preopened directory.
    pub struct Root(Descriptor);

    impl Root {
        pub fn open(guest: &str) -> Option<Self> {
            get_directories().into_iter().find(|(_, path)| path == guest).map(|(dir, _)| Self(dir))
        }

        pub fn entry(&self, relative: &str) -> io::Result<Entry> {
            let stat = self.0.stat_at(PathFlags::SYMLINK_FOLLOW, relative).map_err(error)?;
            Ok(match stat.type_ {
                DescriptorType::RegularFile => Entry::File(stat.size),
                DescriptorType::Directory => Entry::Dir,
                _ => Entry::Other,
            })
        }

        pub fn read(&self, relative: &str, len: u64, out: &mut Vec<u8>) -> io::Result<()> {
            out.clear();
            let file = self
                .0
                .open_at(PathFlags::SYMLINK_FOLLOW, relative, OpenFlags::empty(), DescriptorFlags::READ)
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
    use std::path::PathBuf;

    use super::Entry;

    /// The validity root, as a path.
    pub struct Root(PathBuf);

    impl Root {
        pub fn open(guest: &str) -> Option<Self> {
            Some(Self(PathBuf::from(guest)))
        }

        pub fn entry(&self, relative: &str) -> io::Result<Entry> {
            let meta = std::fs::metadata(self.0.join(relative))?;
            Ok(if meta.is_file() {
                Entry::File(meta.len())
            } else if meta.is_dir() {
                Entry::Dir
            } else {
                Entry::Other
            })
        }

        pub fn read(&self, relative: &str, len: u64, out: &mut Vec<u8>) -> io::Result<()> {
            out.clear();
            std::fs::File::open(self.0.join(relative))?.take(len).read_to_end(out).map(|_| ())
        }
    }
}

/// The validity root.
pub struct Root(imp::Root);

impl Root {
    /// The directory preopened at `guest`; `None` when there is none.
    #[must_use]
    pub fn open(guest: &str) -> Option<Self> {
        imp::Root::open(guest).map(Self)
    }

    /// What is at `relative` (symlinks followed, never out of the root).
    ///
    /// # Errors
    /// As the file system answers: `NotFound`, `PermissionDenied` for a path that leaves
    /// the root, …
    pub fn entry(&self, relative: &str) -> io::Result<Entry> {
        self.0.entry(relative)
    }

    /// Reads at most `len` bytes from the start of the file at `relative` into `out`.
    ///
    /// # Errors
    /// As [`Root::entry`].
    pub fn read(&self, relative: &str, len: u64, out: &mut Vec<u8>) -> io::Result<()> {
        self.0.read(relative, len, out)
    }
}
