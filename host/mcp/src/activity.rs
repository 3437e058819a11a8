//! The hub's activity log: one JSON line per MCP request it answered — when, through which
//! endpoint and session, the method, the tool, prompt or URI, the provider, how long it
//! took, the outcome and error code, and the request's and answer's sizes. Arguments and
//! results only where the owner asks for them (`mcp.logPayloads`): then each side, with
//! every credential redacted (by `butler_catalog::redact`, the host's one redactor; see
//! [`payload`]) and cut to [`MAX_PAYLOAD`] bytes.
//!
//! Append-only and bounded: `stateDir/logs/mcp-activity.jsonl`, moved to `….1` (the one
//! older file kept) once it passes [`MAX_FILE_BYTES`]. Records reach the file through a
//! bounded queue and one writer task, so a request never waits on the disk; the writer
//! gathers what arrives within [`GATHER`] into one write, and when the queue is full a
//! record is dropped and counted, and the next record written says how many were.
//! The writer numbers what it writes, so the files hold the entries in `seq` order.
//!
//! Reading costs what is asked, not what the files hold: the last 1,024 entries written
//! are also kept in memory, so following the log (`after=` the newest seq seen) reads no
//! file; a page memory cannot answer is read from the end of the files backwards, 64 KiB at
//! a time and only as far back as the page needs, on the blocking pool.
//! Starting, the writer reads only the last lines to learn where to number on from.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use butler_catalog::redact::redact_value;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// A file of the log is rotated beyond this size.
pub const MAX_FILE_BYTES: u64 = 4 << 20;
/// Records waiting for the writer, at most.
const QUEUE: usize = 1024;
/// How long the writer gathers records after the first before it writes them all.
const GATHER: std::time::Duration = std::time::Duration::from_millis(20);
/// The longest tool, prompt or resource name an entry keeps (bytes); a longer one is cut.
pub const MAX_NAME: usize = 1024;
/// The most entries one page returns.
pub const MAX_PAGE: usize = 500;
/// The entries last written that are kept in memory.
const RECENT: usize = 1024;
/// The files are read backwards this many bytes at a time.
const CHUNK: usize = 64 << 10;
/// A line longer than this is no entry: it is passed over without being kept.
const MAX_LINE: usize = 1 << 20;
/// Starting, the writer numbers on from the largest `seq` of this many last lines (one would
/// do for what it writes; a few guard against a file an older writer left slightly out of
/// order).
const TAIL_LINES: usize = 64;

/// One answered request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Its place in the log (increasing, also across restarts); given by the writer.
    #[serde(default)]
    pub seq: u64,
    /// When it was answered (RFC 3339, UTC).
    #[serde(default)]
    pub at: String,
    /// The endpoint: `main`, `butler` or `p/<profile>`.
    pub endpoint: String,
    /// The name of the profile token the request carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The protocol revision of the request.
    pub revision: String,
    /// The 2025-11-25 session it belongs to (2026-07-28 has none).
    pub session: Option<String>,
    /// The JSON-RPC method.
    pub method: String,
    /// The tool or prompt name, or the resource URI, when the method has one.
    pub name: Option<String>,
    /// Who answered: a provider's extension id, or `host`.
    pub provider: Option<String>,
    /// How long it took, in milliseconds.
    pub ms: f64,
    /// `ok`, `error` (a JSON-RPC error), `tool_error` (a tool result with `isError`),
    /// `input_required` (a round of a multi-round-trip call) or `cancelled` (its client
    /// cancelled it, or went away before its answer).
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
    /// The request's `params` ([`payload`]), with `mcp.logPayloads` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
    /// The answer's `result` or `error` ([`payload`]), with `mcp.logPayloads` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    /// For a call a host tool made on the endpoint its own call came through (a program's
    /// `tools.<ns>.<tool>()` in code mode): that tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// The most bytes of one side of a request kept with `mcp.logPayloads`; a longer one is
/// kept as the start of its JSON text and its size.
pub const MAX_PAYLOAD: usize = 4096;

/// One side of a request as `mcp.logPayloads` keeps it: every credential in it replaced by
/// `[redacted]` ([`redact_value`], the host's one redactor), and when its JSON is longer
/// than [`MAX_PAYLOAD`] bytes, `{"truncated": <the start of that JSON>, "bytes": <its
/// size>}`. Called only with `mcp.logPayloads` on: without it no request is redacted.
#[must_use]
pub fn payload(value: &Value) -> Value {
    let mut clean = value.clone();
    redact_value(&mut clean);
    let text = clean.to_string();
    if text.len() <= MAX_PAYLOAD {
        return clean;
    }
    let mut end = MAX_PAYLOAD;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    json!({"truncated": &text[..end], "bytes": text.len()})
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Which entries a page holds, and in which order.
///
/// Without `after` a page is newest first: the latest `limit` entries (before `before`, when
/// given); the next page asks `before` the last one's `seq`. With `after` it is oldest
/// first: the first `limit` entries after it (and before `before`, when given), so a
/// follower prints them in order and asks `after` the last one's `seq` next.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Only entries before this `seq` (the next page of an earlier one).
    pub before: Option<u64>,
    /// Only entries after this `seq`, oldest first (following the log).
    pub after: Option<u64>,
    /// Only entries whose `name` matches this glob (`*`, `?`, `[…]`).
    pub name: Option<globset::GlobMatcher>,
    /// Only entries of this JSON-RPC method.
    pub method: Option<String>,
    /// Only entries this provider answered (an extension id, or `host`).
    pub provider: Option<String>,
    /// Only entries with this outcome (one of [`OUTCOMES`]).
    pub outcome: Option<String>,
    /// Only entries through this endpoint (`main`, `butler`, `p/<profile>`).
    pub endpoint: Option<String>,
    /// At most this many ([`MAX_PAGE`] when larger, 1 when 0).
    pub limit: usize,
}

/// The outcomes an entry has (its `outcome`).
pub const OUTCOMES: [&str; 5] = ["ok", "error", "tool_error", "input_required", "cancelled"];

impl Query {
    /// Whether `entry` belongs in the page.
    fn admits(&self, entry: &Entry) -> bool {
        self.before.is_none_or(|before| entry.seq < before)
            && self.after.is_none_or(|after| entry.seq > after)
            && self.name.as_ref().is_none_or(|glob| entry.name.as_deref().is_some_and(|n| glob.is_match(n)))
            && self.method.as_ref().is_none_or(|method| entry.method == *method)
            && self.provider.as_ref().is_none_or(|provider| entry.provider.as_ref() == Some(provider))
            && self.outcome.as_ref().is_none_or(|outcome| entry.outcome == *outcome)
            && self.endpoint.as_ref().is_none_or(|endpoint| entry.endpoint == *endpoint)
    }
}

/// The activity log: takes records without waiting and hands them to its writer task.
pub struct ActivityLog {
    shared: Arc<Shared>,
    queue: mpsc::Sender<Entry>,
    dropped: AtomicU64,
}

/// What the log, its writer and its readers share.
struct Shared {
    path: PathBuf,
    /// Held by the writer while it appends (and rotates), and by a reader while it opens the
    /// files and takes their lengths: a reader sees both files as they were between two
    /// writes, never a line half written nor a rotation half done.
    files: Mutex<()>,
    recent: Mutex<Recent>,
}

/// Locks `mutex`, also one a panic left poisoned (what it guards stays consistent: every
/// change to it is one push or one assignment).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ActivityLog {
    /// The log at `path`, numbering on from what is already there; its writer task (which
    /// first reads the files' last lines to learn the last `seq`) runs until the log is
    /// dropped. Needs a Tokio runtime; does no I/O itself.
    #[must_use]
    pub fn open(path: PathBuf) -> Self {
        let shared = Arc::new(Shared { path, files: Mutex::new(()), recent: Mutex::new(Recent::default()) });
        let (queue, records) = mpsc::channel::<Entry>(QUEUE);
        tokio::spawn(write(Arc::clone(&shared), records));
        Self { shared, queue, dropped: AtomicU64::new(0) }
    }

    /// Records `entry` (its `at` is set here, its `seq` when it is written); never waits.
    pub fn record(&self, mut entry: Entry) {
        // A name is the client's (or a program's) to choose: a long one is cut, so that no
        // request can make an entry, a page or the file's rotation its own.
        for name in [&mut entry.name, &mut entry.parent].into_iter().flatten() {
            if name.len() > MAX_NAME {
                let cut = butler_catalog::text::clip(name, MAX_NAME);
                *name = cut;
            }
        }
        entry.seq = 0;
        entry.at = butler_catalog::time::rfc3339(butler_catalog::time::now_ms());
        entry.dropped_before = self.dropped.swap(0, Ordering::Relaxed);
        if let Err(mpsc::error::TrySendError::Full(entry) | mpsc::error::TrySendError::Closed(entry)) =
            self.queue.try_send(entry)
        {
            self.dropped.fetch_add(1 + entry.dropped_before, Ordering::Relaxed);
        }
    }

    /// The `seq` of the newest entry written, 0 before the first (or before the writer has
    /// learnt where the files end); from memory, so cheap enough to poll.
    #[must_use]
    pub fn newest(&self) -> u64 {
        let recent = lock(&self.shared.recent);
        recent.entries.back().map_or_else(|| recent.covers_from.map_or(0, |from| from.saturating_sub(1)), |e| e.seq)
    }

    /// How many times each tool was called with success, by the name it was called by,
    /// among the entries kept in memory (the latest ones): what a search weighs tools by.
    #[must_use]
    pub fn tool_uses(&self) -> std::collections::HashMap<String, u32> {
        let recent = lock(&self.shared.recent);
        let mut uses = std::collections::HashMap::new();
        for entry in recent.entries.iter().filter(|e| e.method == crate::methods::TOOLS_CALL && e.outcome == "ok") {
            if let Some(name) = &entry.name {
                *uses.entry(name.clone()).or_insert(0u32) += 1;
            }
        }
        uses
    }

    /// A page of entries: with `query.after` the oldest first, otherwise the newest first
    /// (see [`Query`]). From memory when the recent entries kept there decide the page (a
    /// follower's `after=` the newest seq it saw, a first page); otherwise read from the end
    /// of the files backwards on the blocking pool, as far back as the page needs.
    pub async fn page(&self, query: &Query) -> Vec<Entry> {
        let limit = query.limit.clamp(1, MAX_PAGE);
        let remembered = lock(&self.shared.recent).page(query, limit);
        if let Some(page) = remembered {
            return page;
        }
        let shared = Arc::clone(&self.shared);
        let query = query.clone();
        tokio::task::spawn_blocking(move || from_files(shared.newest_first(), &query, limit)).await.unwrap_or_default()
    }
}

/// The writer: learns the last `seq` from the files' tail, then numbers and appends what is
/// queued, as much as has queued at a time, keeping the last [`RECENT`] written in memory.
async fn write(shared: Arc<Shared>, mut records: mpsc::Receiver<Entry>) {
    let starting = Arc::clone(&shared);
    let mut last = match tokio::task::spawn_blocking(move || starting.recover()).await {
        Ok(last) => last,
        Err(e) => {
            tracing::warn!("cannot read the MCP activity log's last entry: {e}");
            0
        }
    };
    lock(&shared.recent).covers_from = Some(last + 1);
    // A write that failed may have left half a line, which the next one must not extend.
    let mut torn = false;
    while let Some(first) = records.recv().await {
        // What queues up within a moment goes in the same trip to the disk: a call
        // answered every few hundred microseconds then costs the host no wake-up, thread
        // hand-off or file operation of its own.
        tokio::time::sleep(GATHER).await;
        let mut drained = vec![first];
        while drained.len() < QUEUE
            && let Ok(entry) = records.try_recv()
        {
            drained.push(entry);
        }
        for entry in &mut drained {
            last += 1;
            entry.seq = last;
        }
        let writing = Arc::clone(&shared);
        let done = tokio::task::spawn_blocking(move || {
            let _files = lock(&writing.files);
            if torn {
                end_line(&writing.path);
            }
            let mut written = 0;
            let result = append(&writing.path, &drained, &mut written);
            drained.truncate(written);
            (drained, result)
        })
        .await;
        match done {
            Ok((written, result)) => {
                torn = result.is_err();
                if let Err(e) = result {
                    tracing::warn!("cannot write the MCP activity log: {e}");
                }
                let mut recent = lock(&shared.recent);
                written.into_iter().for_each(|entry| recent.push(entry));
            }
            Err(e) => {
                // What of these is in the file is not known: memory goes on from after it.
                torn = true;
                let mut recent = lock(&shared.recent);
                recent.entries.clear();
                recent.covers_from = Some(last + 1);
                tracing::warn!("cannot write the MCP activity log: {e}");
            }
        }
    }
}

impl Shared {
    /// The entries of both files, newest first, as they are now.
    fn newest_first(&self) -> NewestFirst {
        let _files = lock(&self.files);
        NewestFirst::open(&self.path, CHUNK)
    }

    /// The last `seq` written, from the last lines only; a torn last line (a crash while it
    /// was written) is ended first, so that what comes next starts a line of its own.
    fn recover(&self) -> u64 {
        let _files = lock(&self.files);
        end_line(&self.path);
        last_seq(&mut NewestFirst::open(&self.path, CHUNK))
    }
}

/// The entries last written, oldest first, and how far back they reach.
#[derive(Default)]
struct Recent {
    entries: VecDeque<Entry>,
    /// Every entry written with a `seq` at or above this is in `entries`; `None` until the
    /// writer has learnt the last `seq` of the files.
    covers_from: Option<u64>,
}

impl Recent {
    fn push(&mut self, entry: Entry) {
        self.entries.push_back(entry);
        if self.entries.len() > RECENT
            && let Some(gone) = self.entries.pop_front()
        {
            self.covers_from = Some(gone.seq + 1);
        }
    }

    /// The page, when what is kept decides it.
    fn page(&self, query: &Query, limit: usize) -> Option<Vec<Entry>> {
        let covers_from = self.covers_from?;
        if let Some(after) = query.after {
            // Everything after `after` is here when nothing between the two is missing.
            return (after.saturating_add(1) >= covers_from)
                .then(|| self.entries.iter().filter(|e| query.admits(e)).take(limit).cloned().collect());
        }
        let page: Vec<Entry> = self.entries.iter().rev().filter(|e| query.admits(e)).take(limit).cloned().collect();
        // Entries kept are the latest ones, with none missing between: a full page is the
        // page, and so is any when nothing older was ever written.
        (page.len() == limit || covers_from <= 1).then_some(page)
    }
}

/// A page from the files (see [`Query`] for which entries, in which order).
fn from_files(newest: NewestFirst, query: &Query, limit: usize) -> Vec<Entry> {
    let Some(after) = query.after else {
        return newest.filter(|e| query.admits(e)).take(limit).collect();
    };
    // Back to `after` (the files are in `seq` order), keeping the oldest `limit` passed.
    let mut page = VecDeque::with_capacity(limit);
    for entry in newest {
        if entry.seq <= after {
            break;
        }
        if query.admits(&entry) {
            if page.len() == limit {
                page.pop_back();
            }
            page.push_front(entry);
        }
    }
    page.into()
}

/// The largest `seq` of the last [`TAIL_LINES`] entries, 0 for none.
fn last_seq(newest: &mut NewestFirst) -> u64 {
    newest.by_ref().take(TAIL_LINES).map(|e| e.seq).max().unwrap_or(0)
}

/// The older file's path.
fn older(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// The entries of the current file from its end, then those of the older one from its end
/// (lines that do not read — a torn one, one too long — are passed over).
struct NewestFirst {
    /// The older file first: read from the back of this list.
    files: Vec<Backwards>,
    /// Bytes read from the files already done with.
    read_before: u64,
}

impl NewestFirst {
    /// Both files as long as they are now.
    fn open(path: &Path, chunk: usize) -> Self {
        let files = [older(path), path.to_owned()].iter().filter_map(|p| Backwards::open(p, chunk)).collect();
        Self { files, read_before: 0 }
    }

    /// The bytes read so far.
    #[cfg(test)]
    fn bytes_read(&self) -> u64 {
        self.read_before + self.files.iter().map(|f| f.read).sum::<u64>()
    }
}

impl Iterator for NewestFirst {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        while let Some(file) = self.files.last_mut() {
            match file.next_line() {
                Some(line) => {
                    if let Ok(entry) = serde_json::from_slice::<Entry>(&line) {
                        return Some(entry);
                    }
                }
                None => self.read_before += self.files.pop().map_or(0, |f| f.read),
            }
        }
        None
    }
}

/// One file's lines from its end backwards, read a chunk at a time.
struct Backwards {
    file: File,
    /// The bytes before this are not read yet (it starts at the length the file had when
    /// opened: what is appended since is not read).
    pos: u64,
    /// The bytes read from `pos` up to the last line not yet returned.
    pending: Vec<u8>,
    /// The end of a line longer than [`MAX_LINE`] has been dropped: drop the rest of it.
    skipping: bool,
    done: bool,
    chunk: usize,
    /// The bytes read so far.
    read: u64,
}

impl Backwards {
    fn open(path: &Path, chunk: usize) -> Option<Self> {
        let file = File::open(path).ok()?;
        let len = file.metadata().ok()?.len();
        Some(Self { file, pos: len, pending: Vec::new(), skipping: false, done: false, chunk: chunk.max(1), read: 0 })
    }

    /// The line before those returned so far (without its `\n`; the one after the file's
    /// last `\n` too, empty when the file ends with one), `None` at the file's start or on
    /// an error reading it.
    fn next_line(&mut self) -> Option<Vec<u8>> {
        while !self.done {
            if let Some(newline) = self.pending.iter().rposition(|&b| b == b'\n') {
                let line = self.pending.split_off(newline + 1);
                self.pending.truncate(newline);
                if std::mem::take(&mut self.skipping) {
                    continue;
                }
                return Some(line);
            }
            if self.pos == 0 {
                self.done = true;
                let line = std::mem::take(&mut self.pending);
                return (!self.skipping).then_some(line);
            }
            if self.pending.len() > MAX_LINE {
                self.pending.clear();
                self.skipping = true;
            }
            let from = self.pos.saturating_sub(u64::try_from(self.chunk).unwrap_or(u64::MAX));
            let Ok(size) = usize::try_from(self.pos - from) else { break };
            let mut chunk = vec![0; size];
            if self.file.seek(SeekFrom::Start(from)).and_then(|_| self.file.read_exact(&mut chunk)).is_err() {
                break;
            }
            self.read += self.pos - from;
            chunk.extend_from_slice(&self.pending);
            self.pending = chunk;
            self.pos = from;
        }
        self.done = true;
        None
    }
}

/// Ends the file's last line when a crash (or a failed write) left it without its `\n`, so
/// that the torn line stays one line that does not read, and the next one reads.
fn end_line(path: &Path) {
    let Ok(mut file) = std::fs::OpenOptions::new().read(true).append(true).open(path) else { return };
    let Ok(len) = file.metadata().map(|m| m.len()) else { return };
    let mut last = [0u8];
    if len > 0
        && file.seek(SeekFrom::Start(len - 1)).and_then(|_| file.read_exact(&mut last)).is_ok()
        && last[0] != b'\n'
        && let Err(e) = file.write_all(b"\n")
    {
        tracing::warn!("cannot end the MCP activity log's torn last line: {e}");
    }
}

/// Appends `entries` in one write per file, rotating first whenever the file is full;
/// `written` counts those surely written.
fn append(path: &Path, entries: &[Entry], written: &mut usize) -> std::io::Result<()> {
    fn open(path: &Path) -> std::io::Result<File> {
        butler_catalog::files::open_private_append(path)
    }
    if let Some(dir) = path.parent() {
        butler_catalog::files::create_private_dir(dir)?;
    }
    let mut file = open(path)?;
    let mut len = file.metadata()?.len();
    let mut lines = Vec::new();
    let mut pending = 0;
    for entry in entries {
        if len >= MAX_FILE_BYTES {
            file.write_all(&lines)?;
            *written += std::mem::take(&mut pending);
            lines.clear();
            drop(file);
            std::fs::rename(path, older(path))?;
            file = open(path)?;
            len = 0;
        }
        let before = lines.len();
        serde_json::to_writer(&mut lines, entry).map_err(std::io::Error::other)?;
        lines.push(b'\n');
        len += u64::try_from(lines.len() - before).unwrap_or(u64::MAX);
        pending += 1;
    }
    file.write_all(&lines)?;
    *written += pending;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use butler_catalog::redact::REDACTED;

    fn entry(name: &str) -> Entry {
        Entry {
            seq: 0,
            at: String::new(),
            endpoint: "main".into(),
            token: None,
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
            request: None,
            response: None,
            parent: None,
        }
    }

    #[test]
    fn credentials_are_redacted_wherever_they_are() {
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        let params = json!({
            "name": "fs__read",
            "arguments": {"path": "/notes", "api_key": "sk-live-1", "nested": [{"Authorization": "x"}, "Bearer abc"],
                          "accessToken": {"deep": 1}, "hint": "bmt_0123abcd", "jwt": jwt, "count": 3,
                          "session_id": "s-4711", "tokens": ["t-1", "t-2"]},
        });
        let kept = payload(&params);
        let arguments = &kept["arguments"];
        assert_eq!(arguments["path"], "/notes");
        assert_eq!(arguments["count"], 3);
        assert_eq!(arguments["nested"][1], "Bearer [redacted]", "the scheme is kept");
        assert_eq!(arguments["hint"], "bmt_[redacted]", "the prefix is kept");
        for redacted in [
            &arguments["api_key"],
            &arguments["nested"][0]["Authorization"],
            &arguments["accessToken"],
            &arguments["jwt"],
            &arguments["session_id"],
            &arguments["tokens"],
        ] {
            assert_eq!(redacted, REDACTED, "{kept}");
        }
        let text = kept.to_string();
        for secret in ["sk-live-1", "abc", "deep", "0123abcd", "dozjg", "s-4711", "t-1"] {
            assert!(!text.contains(secret), "{secret}: {kept}");
        }
    }

    /// The secrets the collector always caught and the activity log's own redactor once let
    /// through, in an argument's free text and in the answer: neither side keeps one.
    #[test]
    fn log_payloads_drop_every_planted_secret() {
        let github = concat!("gh", "p_UxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B2");
        let butler = concat!("bmt_", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
        let planted = [
            (format!("Authorization: Bearer {github}"), github),
            (
                "curl -H 'Authorization: Bearer xEuhnbzs0z-1wNiMg9aW37k5wCnHDepQHgI3HLBk' https://api.example.com"
                    .into(),
                "xEuhnbzs0z",
            ),
            (format!("my butler token is {butler}"), "9f86d081884c"),
            (format!("GITHUB_TOKEN={github}"), "UxbvJDCTbyvH"),
            ("DATABASE_URL=postgres://app:s3cr3t-db-pass@db.example.com:5432/prod".into(), "s3cr3t-db-pass"),
        ];
        for (text, secret) in &planted {
            let request = json!({"name": "notes__add", "arguments": {"text": format!("note this: {text}. Thanks")}});
            let response = json!({"content": [{"type": "text", "text": text}], "isError": false});
            for side in [payload(&request), payload(&response)] {
                let kept = side.to_string();
                assert!(!kept.contains(secret), "{secret} was kept: {kept}");
                assert!(kept.contains(REDACTED), "{kept}");
            }
            assert!(payload(&request).to_string().contains("note this:"), "the words around it are kept");
        }
    }

    #[test]
    fn a_long_payload_keeps_its_start_and_its_size() {
        assert_eq!(payload(&json!({"a": 1})), json!({"a": 1}));
        let long = json!({"text": "é".repeat(MAX_PAYLOAD)});
        let kept = payload(&long);
        let start = kept["truncated"].as_str().expect("the start");
        assert!(start.len() <= MAX_PAYLOAD && start.starts_with("{\"text\":\"é"), "{start}");
        assert_eq!(kept["bytes"].as_u64(), Some(long.to_string().len() as u64));
    }

    /// Entries `seqs`, named `n{seq}`, appended to `path` as the writer would.
    fn write_seqs(path: &Path, seqs: impl IntoIterator<Item = u64>) {
        let entries: Vec<Entry> = seqs.into_iter().map(|seq| Entry { seq, ..entry(&format!("n{seq}")) }).collect();
        let mut written = 0;
        append(path, &entries, &mut written).expect("append");
        assert_eq!(written, entries.len());
    }

    fn seqs(entries: &[Entry]) -> Vec<u64> {
        entries.iter().map(|e| e.seq).collect()
    }

    fn query(after: Option<u64>, before: Option<u64>, limit: usize) -> Query {
        Query { after, before, limit, ..Query::default() }
    }

    /// Waits until the writer has written and remembered up to `seq`. Asked of memory, not
    /// of a page: a page may already read `seq` from the files in the moment between the
    /// writer's append and its keeping the entries in memory.
    async fn written(log: &ActivityLog, seq: u64) {
        for _ in 0..250 {
            if log.newest() >= seq {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the writer never wrote seq {seq}");
    }

    #[test]
    fn lines_read_backwards_across_chunk_boundaries() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("lines");
        let lines: Vec<String> = (0..200).map(|i| "x".repeat(i % 23)).collect();
        std::fs::write(&path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).expect("write");
        for chunk in [1, 2, 7, 64, 1000, 1 << 20] {
            let mut file = Backwards::open(&path, chunk).expect("open");
            let mut read = Vec::new();
            while let Some(line) = file.next_line() {
                read.push(String::from_utf8(line).expect("utf-8"));
            }
            // The empty line after the last `\n` first, then every line, last to first.
            assert_eq!(read.first().map(String::as_str), Some(""), "chunk {chunk}");
            let mut expected = lines.clone();
            expected.reverse();
            assert_eq!(read[1..], expected[..], "chunk {chunk}");
            assert_eq!(file.read, std::fs::metadata(&path).expect("len").len(), "each byte read once");
        }
    }

    #[test]
    fn a_line_longer_than_the_bound_is_passed_over() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        write_seqs(&path, 1..=2);
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(&vec![b'y'; 3 * MAX_LINE]).expect("long");
        file.write_all(b"\n").expect("newline");
        drop(file);
        write_seqs(&path, 3..=3);
        assert_eq!(seqs(&NewestFirst::open(&path, CHUNK).collect::<Vec<_>>()), [3, 2, 1]);
    }

    #[test]
    fn newest_first_crosses_chunks_and_the_rotation() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        // About 200 bytes a line: both files span several chunks.
        write_seqs(&older(&path), 1..=800);
        write_seqs(&path, 801..=1500);
        assert!(std::fs::metadata(&path).expect("len").len() > 2 * CHUNK as u64);
        let all: Vec<Entry> = NewestFirst::open(&path, CHUNK).collect();
        assert_eq!(seqs(&all), (1..=1500).rev().collect::<Vec<_>>());
        assert_eq!(all[0], Entry { seq: 1500, ..entry("n1500") }, "entries read back whole");
        // A page across the rotation: the current file's oldest, then the older's newest.
        let page = from_files(NewestFirst::open(&path, CHUNK), &query(None, Some(803), 5), 5);
        assert_eq!(seqs(&page), [802, 801, 800, 799, 798]);
        // The newest page reads a chunk, not the files.
        let mut newest = NewestFirst::open(&path, CHUNK);
        assert_eq!(seqs(&newest.by_ref().take(10).collect::<Vec<_>>()), (1491..=1500).rev().collect::<Vec<_>>());
        assert_eq!(newest.bytes_read(), CHUNK as u64);
        // After, from the files: oldest first, across the rotation.
        let page = from_files(NewestFirst::open(&path, CHUNK), &query(Some(797), None, 6), 6);
        assert_eq!(seqs(&page), [798, 799, 800, 801, 802, 803]);
        let page = from_files(NewestFirst::open(&path, CHUNK), &query(Some(1497), None, 10), 10);
        assert_eq!(seqs(&page), [1498, 1499, 1500]);
    }

    #[test]
    fn the_log_rotates_within_its_bound() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        let big = Entry { name: Some("x".repeat(4096)), ..entry("big") };
        let lines = 3 * MAX_FILE_BYTES / 4096;
        for drained in (1..=lines).collect::<Vec<_>>().chunks(100) {
            let entries: Vec<Entry> = drained.iter().map(|&seq| Entry { seq, ..big.clone() }).collect();
            append(&path, &entries, &mut 0).expect("append");
        }
        let sizes: u64 = [older(&path), path.clone()].iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum();
        assert!(sizes <= 2 * MAX_FILE_BYTES + 8192, "two files at most: {sizes}");
        let kept: Vec<u64> = NewestFirst::open(&path, CHUNK).map(|e| e.seq).collect();
        assert_eq!(kept.first(), Some(&lines), "the newest entries are kept");
        assert!(kept.last().is_some_and(|&seq| seq > 1), "the oldest went with the rotation");
        assert!(kept.windows(2).all(|w| w[0] == w[1] + 1), "none missing between");
    }

    #[tokio::test]
    async fn a_torn_last_line_is_passed_over_and_ended_before_the_next() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        write_seqs(&path, 1..=3);
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(br#"{"seq":4,"at":"2026-01-01T00:00:00Z","endpo"#).expect("torn");
        drop(file);
        assert_eq!(seqs(&NewestFirst::open(&path, CHUNK).collect::<Vec<_>>()), [3, 2, 1]);

        let log = ActivityLog::open(path.clone());
        log.record(entry("after-the-crash"));
        written(&log, 4).await;
        let from_disk: Vec<Entry> = NewestFirst::open(&path, CHUNK).collect();
        assert_eq!(seqs(&from_disk), [4, 3, 2, 1], "numbered on, and the new line reads");
        assert_eq!(from_disk[0].name.as_deref(), Some("after-the-crash"));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains("\"endpo\n{"), "the torn line was ended, not extended: {text}");
    }

    #[tokio::test]
    async fn the_last_seq_is_learnt_from_the_tail_only() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        write_seqs(&older(&path), 1..=3000);
        write_seqs(&path, 3001..=9000);
        let len = std::fs::metadata(&path).expect("len").len();
        assert!(len > 16 * CHUNK as u64, "{len}");
        let shared = Shared { path: path.clone(), files: Mutex::new(()), recent: Mutex::new(Recent::default()) };
        let mut tail = NewestFirst::open(&path, CHUNK);
        assert_eq!(last_seq(&mut tail), 9000);
        assert_eq!(tail.bytes_read(), CHUNK as u64, "one chunk of {len} bytes");
        assert_eq!(shared.recover(), 9000);
        // Just rotated: the older file's tail.
        std::fs::rename(&path, older(&path)).expect("rotate");
        std::fs::write(&path, "").expect("empty");
        assert_eq!(shared.recover(), 9000);

        let log = ActivityLog::open(path.clone());
        log.record(entry("next"));
        written(&log, 9001).await;
        assert_eq!(seqs(&log.page(&query(None, None, 2)).await), [9001, 9000]);
    }

    #[tokio::test]
    async fn after_is_oldest_first_and_served_from_memory() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        write_seqs(&path, 1..=10);
        let log = ActivityLog::open(path.clone());
        for name in ["a", "b", "c", "d"] {
            log.record(entry(name));
        }
        written(&log, 14).await;
        // Behind what memory holds: from the files, oldest first.
        assert_eq!(seqs(&log.page(&query(Some(5), None, 100)).await), [6, 7, 8, 9, 10, 11, 12, 13, 14]);
        assert_eq!(seqs(&log.page(&query(Some(5), None, 3)).await), [6, 7, 8], "the first ones, to page on");
        // With the files gone, what memory holds still answers, and only that.
        std::fs::remove_file(&path).expect("remove");
        let page = log.page(&query(Some(10), None, 100)).await;
        assert_eq!(seqs(&page), [11, 12, 13, 14]);
        assert_eq!(page.iter().map(|e| e.name.as_deref().unwrap_or("")).collect::<Vec<_>>(), ["a", "b", "c", "d"]);
        assert_eq!(seqs(&log.page(&query(Some(11), None, 2)).await), [12, 13]);
        assert_eq!(seqs(&log.page(&query(Some(11), Some(14), 100)).await), [12, 13]);
        assert!(log.page(&query(Some(14), None, 100)).await.is_empty(), "nothing new");
        assert!(log.page(&query(Some(5), None, 100)).await.is_empty(), "that came from the files");
    }

    #[test]
    fn memory_keeps_the_last_entries_and_knows_how_far_back() {
        let mut recent = Recent { covers_from: Some(1), ..Recent::default() };
        for seq in 1..=RECENT as u64 + 100 {
            recent.push(Entry { seq, ..entry("x") });
        }
        assert_eq!(recent.entries.len(), RECENT);
        assert_eq!(recent.covers_from, Some(101));
        assert_eq!(recent.page(&query(Some(99), None, 10), 10), None, "100 is gone: the files answer");
        assert_eq!(recent.page(&query(Some(100), None, 3), 3).as_deref().map(seqs), Some(vec![101, 102, 103]));
        let newest = recent.page(&query(None, None, 2), 2);
        assert_eq!(newest.as_deref().map(seqs), Some(vec![RECENT as u64 + 100, RECENT as u64 + 99]));
        assert_eq!(recent.page(&query(None, Some(150), 100), 100), None, "not a full page: the files answer");
        assert_eq!(recent.page(&query(None, Some(150), 49), 49).as_deref().map(<[Entry]>::len), Some(49));
        assert_eq!(Recent::default().page(&query(Some(0), None, 1), 1), None, "nothing known before the writer starts");
    }

    #[tokio::test]
    async fn before_pages_newest_first_through_memory_and_the_files() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        write_seqs(&older(&path), 1..=600);
        write_seqs(&path, 601..=1200);
        let log = ActivityLog::open(path.clone());
        for _ in 0..30 {
            log.record(entry("new"));
        }
        written(&log, 1230).await;
        let mut pages = Vec::new();
        let mut before = None;
        loop {
            let page = log.page(&query(None, before, MAX_PAGE)).await;
            before = page.last().map(|e| e.seq);
            if page.is_empty() {
                break;
            }
            pages.push(seqs(&page));
        }
        assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [500, 500, 230]);
        assert_eq!(pages.concat(), (1..=1230).rev().collect::<Vec<_>>());
        assert_eq!(seqs(&log.page(&query(None, Some(1229), 3)).await), [1228, 1227, 1226], "from memory");
    }

    #[tokio::test]
    async fn entries_are_recorded_numbered_and_filtered() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        let log = ActivityLog::open(path.clone());
        for name in ["fake__echo", "fake__hang", "time__now"] {
            log.record(entry(name));
        }
        written(&log, 3).await;
        // The HTTP route awaits a page on any worker.
        fn sendable<T: Send>(_: &T) {}
        sendable(&log.page(&Query::default()));
        let glob = |g: &str| Some(globset::Glob::new(g).expect("glob").compile_matcher());
        let names = |page: &[Entry]| page.iter().filter_map(|e| e.name.clone()).collect::<Vec<_>>();
        assert_eq!(seqs(&log.page(&query(None, None, 10)).await), [3, 2, 1]);
        let fake = log.page(&Query { name: glob("fake__*"), limit: 10, ..Query::default() }).await;
        assert_eq!(names(&fake), ["fake__hang", "fake__echo"]);
        let after = log.page(&Query { name: glob("*_[eh]*"), after: Some(1), limit: 10, ..Query::default() }).await;
        assert_eq!(names(&after), ["fake__hang"]);
        assert_eq!(seqs(&log.page(&query(None, Some(3), 1)).await), [2]);
        // Reopened, the same from the files, and it numbers on.
        drop(log);
        let reopened = ActivityLog::open(path);
        let from_files = reopened.page(&Query { name: glob("*o[uw]"), limit: 10, ..Query::default() }).await;
        assert_eq!(names(&from_files), ["time__now"]);
        let none = reopened.page(&Query { name: glob("nothing*"), limit: 10, ..Query::default() }).await;
        assert!(none.is_empty());
        reopened.record(entry("again"));
        written(&reopened, 4).await;
        assert_eq!(names(&reopened.page(&query(Some(2), None, 10)).await), ["time__now", "again"]);
    }

    /// Entries that differ in method, provider, outcome and endpoint, named `n{seq}`.
    fn varied() -> Vec<Entry> {
        let e = |name: &str, method: &str, provider: Option<&str>, outcome: &str, endpoint: &str| Entry {
            method: method.into(),
            provider: provider.map(Into::into),
            outcome: outcome.into(),
            code: (outcome == "error").then_some(-32602),
            endpoint: endpoint.into(),
            ..entry(name)
        };
        vec![
            e("n1", "tools/call", Some("fake"), "ok", "main"),
            e("n2", "tools/call", Some("fake"), "error", "main"),
            e("n3", "tools/list", Some("host"), "ok", "butler"),
            e("n4", "tools/call", Some("time"), "tool_error", "p/work"),
            e("n5", "prompts/get", Some("fake"), "input_required", "p/work"),
            e("n6", "tools/call", None, "error", "main"),
            e("n7", "tools/call", Some("fake"), "error", "p/work"),
        ]
    }

    #[test]
    fn each_filter_admits_only_its_exact_value_and_they_combine() {
        let mut entries: Vec<Entry> = varied().into_iter().zip(1..).map(|(e, seq)| Entry { seq, ..e }).collect();
        let cancelled = Entry {
            seq: 8,
            method: "resources/read".into(),
            provider: Some("time".into()),
            outcome: "cancelled".into(),
            endpoint: "butler".into(),
            ..entry("n8")
        };
        entries.push(cancelled);
        let admitted = |query: Query| entries.iter().filter(|e| query.admits(e)).map(|e| e.seq).collect::<Vec<_>>();
        let by = |f: fn(&mut Query)| {
            let mut query = Query { limit: 10, ..Query::default() };
            f(&mut query);
            admitted(query)
        };
        assert_eq!(by(|q| q.method = Some("tools/call".into())), [1, 2, 4, 6, 7]);
        assert_eq!(by(|q| q.method = Some("tools".into())), [0u64; 0], "exact, not a prefix");
        assert_eq!(by(|q| q.provider = Some("fake".into())), [1, 2, 5, 7]);
        assert_eq!(by(|q| q.provider = Some("host".into())), [3], "none answered is no provider");
        assert_eq!(by(|q| q.outcome = Some("error".into())), [2, 6, 7]);
        assert_eq!(by(|q| q.outcome = Some("tool_error".into())), [4]);
        assert_eq!(by(|q| q.outcome = Some("input_required".into())), [5]);
        assert_eq!(by(|q| q.outcome = Some("cancelled".into())), [8]);
        assert_eq!(by(|q| q.endpoint = Some("p/work".into())), [4, 5, 7]);
        assert_eq!(by(|q| q.endpoint = Some("p".into())), [0u64; 0]);
        // Together, and with the name glob and the seq bounds.
        let all = |q: &mut Query| {
            q.method = Some("tools/call".into());
            q.provider = Some("fake".into());
            q.outcome = Some("error".into());
        };
        assert_eq!(by(all), [2, 7]);
        assert_eq!(
            by(|q| {
                q.outcome = Some("error".into());
                q.endpoint = Some("main".into());
                q.name = Some(globset::Glob::new("n[2-9]").expect("glob").compile_matcher());
            }),
            [2, 6]
        );
        assert_eq!(
            by(|q| {
                q.outcome = Some("error".into());
                q.before = Some(7);
                q.after = Some(2);
            }),
            [6]
        );
        assert!(OUTCOMES.iter().all(|o| entries.iter().any(|e| e.outcome == *o)), "every outcome is covered");
    }

    #[tokio::test]
    async fn filtered_pages_come_from_memory_and_the_files_alike() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join("activity.jsonl");
        // Older entries on disk only: seqs 1..=7, then 7 more recorded (8..=14).
        let on_disk: Vec<Entry> = varied().into_iter().zip(1..).map(|(e, seq)| Entry { seq, ..e }).collect();
        append(&path, &on_disk, &mut 0).expect("append");
        let log = ActivityLog::open(path.clone());
        assert_eq!(log.newest(), 0, "nothing known before the writer starts, or nothing written");
        for e in varied() {
            log.record(e);
        }
        written(&log, 14).await;
        assert_eq!(log.newest(), 14);
        let errors =
            |after, before, limit| Query { outcome: Some("error".into()), after, before, limit, ..Query::default() };
        // Newest first: the memory's three, then the files'.
        assert_eq!(seqs(&log.page(&errors(None, None, 10)).await), [14, 13, 9, 7, 6, 2]);
        assert_eq!(seqs(&log.page(&errors(None, None, 2)).await), [14, 13]);
        assert_eq!(seqs(&log.page(&errors(None, Some(13), 2)).await), [9, 7], "across memory and the files");
        // Following: oldest first, from memory and from the files.
        assert_eq!(seqs(&log.page(&errors(Some(9), None, 10)).await), [13, 14]);
        assert_eq!(seqs(&log.page(&errors(Some(1), Some(14), 10)).await), [2, 6, 7, 9, 13]);
        let work =
            Query { endpoint: Some("p/work".into()), method: Some("tools/call".into()), limit: 10, ..Query::default() };
        assert_eq!(seqs(&log.page(&work).await), [14, 11, 7, 4]);
        let host = Query { provider: Some("host".into()), limit: 10, ..Query::default() };
        assert_eq!(seqs(&log.page(&host).await), [10, 3]);
        let none = Query { method: Some("resources/read".into()), limit: 10, ..Query::default() };
        assert!(log.page(&none).await.is_empty());
        log.record(entry("later"));
        written(&log, 15).await;
        assert_eq!(log.newest(), 15, "the newest entry, whatever it matches");
    }
}
