//! The hub's activity log: one JSON line per MCP request it answered — when, through which
//! endpoint and session, the method, the tool, prompt or URI, the provider, how long it
//! took, the outcome and error code, and the request's and answer's sizes. Never
//! arguments or results, so never a credential either.
//!
//! Append-only and bounded: `stateDir/logs/mcp-activity.jsonl`, moved to `….1` (the one
//! older file kept) once it passes [`MAX_FILE_BYTES`]. Records reach the file through a
//! bounded queue and one writer task, so a request never waits on the disk; when the queue
//! is full a record is dropped and counted, and the next record written says how many were.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// A file of the log is rotated beyond this size.
pub const MAX_FILE_BYTES: u64 = 4 << 20;
/// Records waiting for the writer, at most.
const QUEUE: usize = 1024;
/// The most entries one page returns.
pub const MAX_PAGE: usize = 500;

/// One answered request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Its place in the log (increasing, also across restarts).
    #[serde(default)]
    pub seq: u64,
    /// When it was answered (RFC 3339, UTC).
    #[serde(default)]
    pub at: String,
    /// The endpoint: `main` or `butler`.
    pub endpoint: String,
    /// The protocol revision of the request.
    pub revision: String,
    /// The legacy session it belongs to (2026-07-28 has none).
    pub session: Option<String>,
    /// The JSON-RPC method.
    pub method: String,
    /// The tool or prompt name, or the resource URI, when the method has one.
    pub name: Option<String>,
    /// Who answered: a provider's extension id, or `host`.
    pub provider: Option<String>,
    /// How long it took, in milliseconds.
    pub ms: f64,
    /// `ok`, `error` (a JSON-RPC error) or `tool_error` (a tool result with `isError`).
    pub outcome: String,
    /// The JSON-RPC error code, for `error`.
    pub code: Option<i64>,
    /// The request's size in bytes.
    pub request_bytes: usize,
    /// The answer's size in bytes.
    pub response_bytes: usize,
    /// Records dropped just before this one because the queue was full.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_before: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Which entries a page holds.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Only entries before this `seq` (the next page of an earlier one).
    pub before: Option<u64>,
    /// Only entries after this `seq` (following the log).
    pub after: Option<u64>,
    /// Only entries whose `name` matches this glob (`*`, `?`, `[…]`).
    pub name: Option<globset::GlobMatcher>,
    /// At most this many ([`MAX_PAGE`] when larger).
    pub limit: usize,
}

/// The log.
pub struct ActivityLog {
    path: PathBuf,
    queue: mpsc::Sender<Entry>,
    next_seq: Arc<AtomicU64>,
    dropped: AtomicU64,
}

impl ActivityLog {
    /// The log at `path`, numbering on from what is already there; its writer task runs
    /// until the log is dropped.
    #[must_use]
    pub fn open(path: PathBuf) -> Self {
        let last = read_all(&path).last().map_or(0, |e| e.seq);
        let (queue, mut records) = mpsc::channel::<Entry>(QUEUE);
        let file = path.clone();
        tokio::spawn(async move {
            while let Some(first) = records.recv().await {
                // What queued up meanwhile goes in the same trip to the disk.
                let mut queued = vec![first];
                while queued.len() < QUEUE
                    && let Ok(entry) = records.try_recv()
                {
                    queued.push(entry);
                }
                let file = file.clone();
                let written =
                    tokio::task::spawn_blocking(move || queued.iter().try_for_each(|e| append(&file, e))).await;
                if let Ok(Err(e)) = written {
                    tracing::warn!("cannot write the MCP activity log: {e}");
                }
            }
        });
        Self { path, queue, next_seq: Arc::new(AtomicU64::new(last + 1)), dropped: AtomicU64::new(0) }
    }

    /// Records `entry` (its `seq` and `at` are set here); never waits.
    pub fn record(&self, mut entry: Entry) {
        entry.seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        entry.at = butler_catalog::time::rfc3339(butler_catalog::time::now_ms());
        entry.dropped_before = self.dropped.swap(0, Ordering::Relaxed);
        if let Err(mpsc::error::TrySendError::Full(entry) | mpsc::error::TrySendError::Closed(entry)) =
            self.queue.try_send(entry)
        {
            self.dropped.fetch_add(1 + entry.dropped_before, Ordering::Relaxed);
        }
    }

    /// A page of entries, newest first.
    #[must_use]
    pub fn page(&self, query: &Query) -> Vec<Entry> {
        let limit = query.limit.clamp(1, MAX_PAGE);
        let mut entries = read_all(&self.path);
        entries.retain(|e| {
            query.before.is_none_or(|before| e.seq < before)
                && query.after.is_none_or(|after| e.seq > after)
                && query.name.as_ref().is_none_or(|glob| e.name.as_deref().is_some_and(|n| glob.is_match(n)))
        });
        entries.into_iter().rev().take(limit).collect()
    }
}

/// The older file's path.
fn older(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// Every entry of both files, oldest first (lines that do not read are skipped).
fn read_all(path: &Path) -> Vec<Entry> {
    let mut entries = Vec::new();
    for file in [older(path), path.to_owned()] {
        let Ok(opened) = std::fs::File::open(&file) else { continue };
        for line in BufReader::new(opened).lines().map_while(Result::ok) {
            if let Ok(entry) = serde_json::from_str::<Entry>(&line) {
                entries.push(entry);
            }
        }
    }
    entries
}

/// Appends one line, rotating first when the file is full.
fn append(path: &Path, entry: &Entry) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= MAX_FILE_BYTES) {
        std::fs::rename(path, older(path))?;
    }
    let mut line = serde_json::to_vec(entry).map_err(std::io::Error::other)?;
    line.push(b'\n');
    std::fs::OpenOptions::new().create(true).append(true).open(path)?.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Entry {
        Entry {
            seq: 0,
            at: String::new(),
            endpoint: "main".into(),
            revision: "2026-07-28".into(),
            session: None,
            method: "tools/call".into(),
            name: Some(name.into()),
            provider: Some("fake".into()),
            ms: 1.5,
            outcome: "ok".into(),
            code: None,
            request_bytes: 10,
            response_bytes: 20,
            dropped_before: 0,
        }
    }

    #[test]
    fn the_log_rotates_within_its_bound_and_pages_newest_first() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        let big = Entry { name: Some("x".repeat(4096)), ..entry("big") };
        let lines = usize::try_from(3 * MAX_FILE_BYTES / 4096).expect("fits");
        for seq in 1..=lines {
            append(&path, &Entry { seq: seq as u64, ..big.clone() }).expect("append");
        }
        let sizes: u64 = [older(&path), path.clone()].iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum();
        assert!(sizes <= 2 * MAX_FILE_BYTES + 8192, "two files at most: {sizes}");
        let kept = read_all(&path);
        assert_eq!(kept.last().map(|e| e.seq), Some(lines as u64), "the newest entries are kept");
        assert!(kept.first().is_some_and(|e| e.seq > 1), "the oldest went with the rotation");
    }

    #[tokio::test]
    async fn entries_are_recorded_numbered_and_filtered() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        let log = ActivityLog::open(path.clone());
        for name in ["fake__echo", "fake__hang", "time__now"] {
            log.record(entry(name));
        }
        for _ in 0..100 {
            if read_all(&path).len() == 3 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let all = log.page(&Query { limit: 10, ..Query::default() });
        assert_eq!(all.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 2, 1]);
        let glob = globset::Glob::new("fake__*").expect("glob").compile_matcher();
        let fake = log.page(&Query { name: Some(glob), limit: 10, ..Query::default() });
        assert_eq!(fake.len(), 2);
        assert_eq!(log.page(&Query { before: Some(3), limit: 1, ..Query::default() })[0].seq, 2);
        assert_eq!(log.page(&Query { after: Some(2), limit: 10, ..Query::default() }).len(), 1);
        // Reopened, it numbers on.
        drop(log);
        let reopened = ActivityLog::open(path);
        assert_eq!(reopened.next_seq.load(Ordering::Relaxed), 4);
    }
}
