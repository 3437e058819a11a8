//! An item's log: stdout and stderr split into lines, kept in a bounded ring for
//! late subscribers, appended to a size-capped rotating file in `stateDir/logs/`, and
//! broadcast to live followers.
//!
//! Memory stays bounded whatever the item prints: the ring holds at most [`RING_LINES`]
//! lines and [`RING_BYTES`] of text (lines are cut at [`MAX_LINE_BYTES`]), and a follower
//! that cannot keep up skips lines (it is told how many) instead of queueing them — so
//! sixty-four items flooding their output at once hold a few tens of MiB, not gigabytes.
//!
//! A log made with [`Log::redacting`] puts every line through the host's one credential
//! redactor (`butler_catalog::redact`) before it is kept anywhere: for output that carries
//! what clients send (an agent's transcript, the notification command's). Other logs keep
//! lines as printed, so an item flooding its output costs no regex per line.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::broadcast;

/// Lines kept in memory per item: a screenful of context several times over.
pub const RING_LINES: usize = 1000;

/// Text kept in memory per item, at most (the oldest lines go first).
pub const RING_BYTES: usize = 256 * 1024;

/// A longer line is cut into pieces of this size, so one runaway line cannot hold memory.
pub const MAX_LINE_BYTES: usize = 16 * 1024;

/// The log file is rotated (to `<id>.log.1`, replacing the previous one) past this size,
/// so an item's logs never take more than twice this on disk.
pub const FILE_CAP_BYTES: u64 = 4 * 1024 * 1024;

/// Lines a live follower may fall behind before it skips.
const FOLLOW_BUFFER: usize = 256;

/// The read buffer of each captured pipe.
const READ_BUFFER: usize = 16 * 1024;

/// Where a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    /// The process's standard output.
    Stdout,
    /// The process's standard error.
    Stderr,
    /// The host, about the process (started, exited, restarting in …).
    Butler,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
            Self::Butler => "butler",
        }
    }
}

/// One line of an item's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// Position in the item's log since the host started (1, 2, …).
    pub seq: u64,
    /// When it was read, ms since the Unix epoch.
    pub at: u64,
    /// Where it came from: the program's stdout or stderr, or the host about the program.
    pub stream: Stream,
    /// The text, without the line break (invalid UTF-8 replaced).
    pub text: String,
}

/// An item's log.
#[derive(Debug)]
pub struct Log {
    inner: Mutex<Inner>,
    live: broadcast::Sender<Arc<LogLine>>,
    /// Every line is redacted before it is kept ([`Log::redacting`]).
    redacting: bool,
}

#[derive(Debug)]
struct Inner {
    ring: VecDeque<Arc<LogLine>>,
    /// The text bytes the ring holds.
    ring_bytes: usize,
    next_seq: u64,
    file: LogFile,
}

/// A subscription: the lines so far, then the live ones (no gap, no repeat).
#[derive(Debug)]
pub struct Follow {
    /// The ring's lines at the moment of subscribing.
    pub backlog: Vec<Arc<LogLine>>,
    /// Every later line.
    pub live: broadcast::Receiver<Arc<LogLine>>,
}

impl Log {
    /// A log writing to `path` (its folder is created on the first line).
    ///
    /// The ring starts with the newest lines the file kept from earlier runs (a host that
    /// restarted still shows what its items printed before), bounded like every line after.
    #[must_use]
    pub fn new(path: PathBuf) -> Self {
        let (live, _) = broadcast::channel(FOLLOW_BUFFER);
        let mut inner = Inner { ring: VecDeque::new(), ring_bytes: 0, next_seq: 1, file: LogFile::new(path) };
        for (at, stream, text) in kept_lines(&inner.file.path) {
            inner.keep(Arc::new(LogLine { seq: inner.next_seq, at, stream, text }));
        }
        Self { inner: Mutex::new(inner), live, redacting: false }
    }

    /// A log writing to `path` whose every line has its credentials redacted
    /// (`butler_catalog::redact::redact_text`) before the ring, the file or a follower sees it.
    #[must_use]
    pub fn redacting(path: PathBuf) -> Self {
        Self { redacting: true, ..Self::new(path) }
    }

    /// Appends one line (redacted first, for a [`Log::redacting`] log).
    pub fn push(&self, stream: Stream, text: String) {
        let clean = match self.redacting.then(|| butler_catalog::redact::redact_text(&text).0) {
            Some(Cow::Owned(clean)) => Some(clean),
            _ => None,
        };
        let text = clean.unwrap_or(text);
        let at = butler_catalog::time::now_ms();
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let line = Arc::new(LogLine { seq: inner.next_seq, at, stream, text });
        inner.file.append(&line);
        inner.keep(Arc::clone(&line));
        // Sent under the lock, so a subscriber sees each line either in its backlog or live.
        let _ = self.live.send(line);
    }

    /// A note from the host about the process.
    pub fn note(&self, text: impl Into<String>) {
        self.push(Stream::Butler, text.into());
    }

    /// Writes buffered lines to the file (after each burst of output).
    pub fn flush(&self) {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).file.flush();
    }

    /// The backlog and a live subscription.
    #[must_use]
    pub fn follow(&self) -> Follow {
        let inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Follow { backlog: inner.ring.iter().cloned().collect(), live: self.live.subscribe() }
    }

    /// Reads `pipe` to its end, one line at a time, into this log.
    pub async fn capture(self: Arc<Self>, stream: Stream, mut pipe: impl AsyncRead + Unpin) {
        let mut buf = vec![0u8; READ_BUFFER];
        let mut pending: Vec<u8> = Vec::new();
        loop {
            let n = match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut chunk = &buf[..n];
            while let Some(end) = chunk.iter().position(|&b| b == b'\n') {
                self.extend_capped(stream, &mut pending, &chunk[..end]);
                self.push_bytes(stream, &pending);
                pending.clear();
                chunk = &chunk[end + 1..];
            }
            self.extend_capped(stream, &mut pending, chunk);
            self.flush();
        }
        if !pending.is_empty() {
            self.push_bytes(stream, &pending);
        }
        self.flush();
    }

    /// Adds `bytes` to the unfinished line, sending out [`MAX_LINE_BYTES`] pieces of it
    /// while it is longer than that.
    fn extend_capped(&self, stream: Stream, pending: &mut Vec<u8>, bytes: &[u8]) {
        pending.extend_from_slice(bytes);
        if pending.len() > MAX_LINE_BYTES {
            let mut rest = pending.as_slice();
            while rest.len() > MAX_LINE_BYTES {
                self.push_bytes(stream, &rest[..MAX_LINE_BYTES]);
                rest = &rest[MAX_LINE_BYTES..];
            }
            *pending = rest.to_vec();
        }
    }

    fn push_bytes(&self, stream: Stream, bytes: &[u8]) {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        self.push(stream, String::from_utf8_lossy(bytes).into_owned());
    }
}

impl Inner {
    /// Adds `line` to the ring, dropping the oldest past the ring's bounds.
    fn keep(&mut self, line: Arc<LogLine>) {
        self.next_seq = line.seq + 1;
        self.ring_bytes += line.text.len();
        self.ring.push_back(line);
        while self.ring.len() > RING_LINES || (self.ring_bytes > RING_BYTES && self.ring.len() > 1) {
            if let Some(old) = self.ring.pop_front() {
                self.ring_bytes -= old.text.len();
            }
        }
    }
}

/// The newest lines of the log file at `path` — what fits in the ring, read from the last
/// [`RING_BYTES`] of the file — as the file writes them (`<time> <stream> <text>`); a line
/// in another shape (cut by the read's start, or from another version) is passed over.
fn kept_lines(path: &std::path::Path) -> Vec<(u64, Stream, String)> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = File::open(path) else { return Vec::new() };
    let size = file.metadata().map_or(0, |m| m.len());
    let start = size.saturating_sub(RING_BYTES as u64);
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.take(RING_BYTES as u64).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    // A read that starts mid-file starts mid-line: its first line is not whole.
    let whole = if start > 0 { text.split_once('\n').map_or("", |(_, rest)| rest) } else { &text };
    whole
        .lines()
        .filter_map(|line| {
            let (at, rest) = line.split_once(' ')?;
            let (stream, text) = rest.split_once(' ').unwrap_or((rest, ""));
            let stream = match stream {
                "stdout" => Stream::Stdout,
                "stderr" => Stream::Stderr,
                "butler" => Stream::Butler,
                _ => return None,
            };
            Some((butler_catalog::time::parse_rfc3339(at)?, stream, text.to_owned()))
        })
        .collect()
}

/// The size-capped file: `<id>.log`, rotated to `<id>.log.1`. A write failure (a full
/// disk) is reported once and never stops the in-memory log.
#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    file: Option<std::io::BufWriter<File>>,
    size: u64,
    failed: bool,
}

impl LogFile {
    fn new(path: PathBuf) -> Self {
        Self { path, file: None, size: 0, failed: false }
    }

    fn append(&mut self, line: &LogLine) {
        if self.failed {
            return;
        }
        if let Err(e) = self.try_append(line) {
            tracing::warn!(path = %self.path.display(), "cannot write the log file: {e}");
            self.failed = true;
            self.file = None;
        }
    }

    fn try_append(&mut self, line: &LogLine) -> std::io::Result<()> {
        if self.file.is_none() || self.size >= FILE_CAP_BYTES {
            self.open()?;
        }
        let text = format!("{} {} {}\n", butler_catalog::time::rfc3339(line.at), line.stream.as_str(), line.text);
        if let Some(file) = self.file.as_mut() {
            file.write_all(text.as_bytes())?;
        }
        self.size += text.len() as u64;
        Ok(())
    }

    /// Opens the file for appending, rotating it first if it is full.
    fn open(&mut self) -> std::io::Result<()> {
        if let Some(mut file) = self.file.take() {
            file.flush()?;
        }
        if let Some(dir) = self.path.parent() {
            butler_catalog::files::create_private_dir(dir)?;
        }
        let size = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if size >= FILE_CAP_BYTES {
            let mut rotated = self.path.clone().into_os_string();
            rotated.push(".1");
            std::fs::rename(&self.path, rotated)?;
        }
        let file = butler_catalog::files::open_private_append(&self.path)?;
        self.size = file.metadata()?.len();
        self.file = Some(std::io::BufWriter::new(file));
        Ok(())
    }

    fn flush(&mut self) {
        if let Some(file) = self.file.as_mut()
            && let Err(e) = file.flush()
        {
            tracing::warn!(path = %self.path.display(), "cannot write the log file: {e}");
            self.failed = true;
            self.file = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn splits_lines_caps_them_and_keeps_a_bounded_ring() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Arc::new(Log::new(dir.path().join("logs/x.log")));
        let long = "y".repeat(MAX_LINE_BYTES + 10);
        let early = log.follow();
        Arc::clone(&log).capture(Stream::Stdout, format!("one\r\ntwo\n{long}\n").as_bytes()).await;
        // The early subscriber sees the first lines live, cut where they were too long.
        let mut live = early.live;
        let first: Vec<String> = (0..4).map(|_| live.try_recv().expect("line").text.clone()).collect();
        assert_eq!(first[..2], ["one".to_owned(), "two".to_owned()]);
        assert_eq!(first[2].len(), MAX_LINE_BYTES);
        assert_eq!(first[3], "y".repeat(10));
        let mut input = Vec::new();
        for i in 0..RING_LINES {
            input.extend_from_slice(format!("line {i}\n").as_bytes());
        }
        input.extend_from_slice(b"no newline at the end");
        Arc::clone(&log).capture(Stream::Stdout, &input[..]).await;

        let follow = log.follow();
        assert_eq!(follow.backlog.len(), RING_LINES, "the ring is bounded");
        assert_eq!(follow.backlog.last().map(|l| l.text.as_str()), Some("no newline at the end"));
        // A follower that fell behind skips, and is told how many lines it missed.
        assert!(matches!(live.try_recv(), Err(broadcast::error::TryRecvError::Lagged(_))));
        let file = std::fs::read_to_string(dir.path().join("logs/x.log")).expect("log file");
        assert_eq!(file.lines().count(), RING_LINES + 5);
        assert!(file.lines().next().is_some_and(|l| l.ends_with(" stdout one")), "{file:.80}");
    }

    #[tokio::test]
    async fn a_new_log_starts_with_what_the_file_kept_from_earlier_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("logs/x.log");
        let earlier = Arc::new(Log::new(path.clone()));
        Arc::clone(&earlier).capture(Stream::Stdout, &b"before the restart\n"[..]).await;
        earlier.note("exited with code 3");
        Arc::clone(&earlier).capture(Stream::Stderr, &b"oops\n"[..]).await;
        earlier.flush();
        drop(earlier);
        let log = Log::new(path.clone());
        let kept: Vec<(u64, Stream, String)> =
            log.follow().backlog.iter().map(|l| (l.seq, l.stream, l.text.clone())).collect();
        assert_eq!(
            kept,
            [
                (1, Stream::Stdout, "before the restart".to_owned()),
                (2, Stream::Butler, "exited with code 3".to_owned()),
                (3, Stream::Stderr, "oops".to_owned()),
            ]
        );
        log.note("started");
        assert_eq!(log.follow().backlog.last().map(|l| l.seq), Some(4), "new lines come after the kept ones");
        // A big file: only its newest lines, within the ring's bounds, the cut line passed over.
        let line = "w".repeat(1000);
        let mut big = String::new();
        for i in 0..2000 {
            big.push_str(&format!("2026-12-05T10:00:00.000Z stdout {i} {line}\n"));
        }
        std::fs::write(&path, big).expect("write");
        let backlog = Log::new(path).follow().backlog;
        assert!(backlog.iter().map(|l| l.text.len()).sum::<usize>() <= RING_BYTES);
        assert!(backlog.last().is_some_and(|l| l.text.starts_with("1999 ")), "the newest is kept");
        assert!(backlog.iter().all(|l| l.text.ends_with(&line)), "no cut line");
    }

    #[tokio::test]
    async fn the_ring_holds_a_bounded_number_of_bytes_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Arc::new(Log::new(dir.path().join("x.log")));
        let line = "z".repeat(MAX_LINE_BYTES - 1);
        let input: String = (0..RING_LINES).map(|_| format!("{line}\n")).collect();
        Arc::clone(&log).capture(Stream::Stdout, input.as_bytes()).await;
        let backlog = log.follow().backlog;
        let held: usize = backlog.iter().map(|l| l.text.len()).sum();
        assert!(held <= RING_BYTES, "{held} bytes held");
        assert_eq!(backlog.len(), RING_BYTES / line.len(), "as many whole lines as fit");
        assert_eq!(backlog.last().map(|l| l.seq), Some(RING_LINES as u64), "the newest are kept");
    }

    #[tokio::test]
    async fn a_redacting_log_keeps_no_credential_anywhere() {
        let dir = tempfile::tempdir().expect("tempdir");
        let printed = concat!(
            "calling with Authorization: Bearer xEuhnbzs0z-1wNiMg9aW37k5wCnHDepQHgI3HLBk\n",
            "{\"mcp\": {\"token\": \"9f86d081884c7d659a2feaa0c55ad015\"}}\n",
            "the answer is 42\n"
        );
        let log = Arc::new(Log::redacting(dir.path().join("agent.log")));
        let early = log.follow();
        Arc::clone(&log).capture(Stream::Stdout, printed.as_bytes()).await;
        log.note(concat!("started: tool --api-key 'gh", "p_UxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B2'"));
        log.flush();
        let mut live = early.live;
        let followed: Vec<String> = (0..4).map(|_| live.try_recv().expect("line").text.clone()).collect();
        let backlog: Vec<String> = log.follow().backlog.iter().map(|l| l.text.clone()).collect();
        let file = std::fs::read_to_string(dir.path().join("agent.log")).expect("log file");
        for kept in [followed.join("\n"), backlog.join("\n"), file] {
            for secret in ["xEuhnbzs0z", "9f86d081884c", "UxbvJDCTbyvH"] {
                assert!(!kept.contains(secret), "{secret} kept: {kept}");
            }
            assert!(kept.contains("Authorization: Bearer [redacted]") && kept.contains("the answer is 42"), "{kept}");
        }
        // A plain log keeps what was printed.
        let plain = Log::new(dir.path().join("plain.log"));
        plain.push(Stream::Stdout, "password=hunter2".to_owned());
        assert_eq!(plain.follow().backlog[0].text, "password=hunter2");
    }

    #[test]
    fn rotates_the_file_past_its_cap() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.log");
        std::fs::write(&path, vec![b'a'; usize::try_from(FILE_CAP_BYTES).expect("fits")]).expect("write");
        let log = Log::new(path.clone());
        log.note("after rotation");
        log.flush();
        let rotated = std::fs::metadata(dir.path().join("x.log.1")).expect("rotated").len();
        assert_eq!(rotated, FILE_CAP_BYTES);
        assert!(std::fs::read_to_string(&path).expect("new file").ends_with("butler after rotation\n"));
    }
}
