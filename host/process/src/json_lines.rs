//! One JSON-lines conversation with a child process (or any byte pipe): the host writes one
//! message a line to the child's stdin and reads one a line from its stdout. Shared by the
//! MCP hub's providers, the ChatOS app backends and the agent sessions, so every child is
//! held to the same rules:
//! - [`LineReader`]: a line longer than its cap is an error ([`ReadError::TooLong`]), never
//!   unbounded memory;
//! - [`LineWriter`]: a line is written whole within a deadline — a child that stopped
//!   reading fills the pipe, and then the writer fails instead of waiting — and a write its
//!   caller abandons halfway is finished on a task of its own, so the next line never lands
//!   inside it;
//! - [`Calls`]: request ids, the waiting map and the in-flight limit (one call too many
//!   fails at once, [`RpcError::Busy`]); a [`Call`] waits until its deadline
//!   ([`RpcError::Timeout`]), is forgotten when it is dropped (a cancelled call leaves
//!   nothing behind), and fails with the reason when the child closes ([`Calls::close`]:
//!   [`RpcError::Closed`]).
//!
//! What a line means is the caller's: it reads the lines, hands each answer to
//! [`Calls::answer`] under the id the answer names, and handles the child's own requests
//! and notifications itself (an MCP provider's sampling, elicitation and roots requests,
//! its list changes; nothing, for an app backend).
//!
//! Every deadline is on tokio's clock ([`tokio::time::Instant`]), so rules built on this
//! module run on a paused, hand-advanced clock in tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Why a call got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// As many calls as the limit allows already wait.
    #[error("{limit} calls are already waiting")]
    Busy {
        /// The in-flight limit.
        limit: usize,
    },
    /// No answer by the call's deadline.
    #[error("no answer within its deadline")]
    Timeout,
    /// The child closed its side (it exited, or broke a rule): why.
    #[error("{0}")]
    Closed(String),
}

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The line is longer than the reader's cap (its newline included).
    #[error("a line longer than {limit} bytes")]
    TooLong {
        /// The reader's cap, in bytes.
        limit: usize,
    },
    /// Reading from the pipe failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Why a line could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The child took nothing (or not all of it) within the limit.
    #[error("it read nothing for {} s", .0.as_secs())]
    TimedOut(Duration),
    /// The pipe failed (the child is gone).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads a child's output one line at a time, at most `limit` bytes a line.
pub struct LineReader<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
    limit: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Lines of at most `limit` bytes (newline included) from `reader`, buffered by
    /// `buffer` bytes.
    pub fn new(reader: R, limit: usize, buffer: usize) -> Self {
        Self { reader: BufReader::with_capacity(buffer, reader), line: Vec::new(), limit }
    }

    /// The next line, its newline included (the last line before the end may have none);
    /// `None` at the end of the output.
    ///
    /// # Errors
    /// [`ReadError::TooLong`] for a line over the cap (what was read of it is dropped; the
    /// conversation cannot go on), or the pipe's error.
    pub async fn next_line(&mut self) -> Result<Option<&[u8]>, ReadError> {
        self.line.clear();
        let limit = u64::try_from(self.limit).unwrap_or(u64::MAX);
        let read = (&mut self.reader).take(limit).read_until(b'\n', &mut self.line).await?;
        if read == 0 {
            return Ok(None);
        }
        if self.line.last() != Some(&b'\n') && self.line.len() >= self.limit {
            self.line = Vec::new();
            return Err(ReadError::TooLong { limit: self.limit });
        }
        Ok(Some(&self.line))
    }
}

/// Writes whole lines to a child's input, one writer at a time.
pub struct LineWriter<W> {
    pipe: Arc<tokio::sync::Mutex<W>>,
}

impl<W> Clone for LineWriter<W> {
    fn clone(&self) -> Self {
        Self { pipe: Arc::clone(&self.pipe) }
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> LineWriter<W> {
    /// Lines written to `pipe`.
    pub fn new(pipe: W) -> Self {
        Self { pipe: Arc::new(tokio::sync::Mutex::new(pipe)) }
    }

    /// Writes `line` (its newline included) within `limit`, whole: a write abandoned
    /// halfway (its future dropped, a timeout) is finished on a task of its own.
    ///
    /// The common case, a free pipe that takes the line at once, sets no timer: a timer is
    /// registered with the runtime's clock and removed again, on every call.
    ///
    /// # Errors
    /// [`WriteError::TimedOut`] when the pipe was not free, or did not take the line,
    /// within `limit`; the pipe's error.
    pub async fn write_line(&self, line: Vec<u8>, limit: Duration) -> Result<(), WriteError> {
        let deadline = Instant::now() + limit;
        let pipe = match Arc::clone(&self.pipe).try_lock_owned() {
            Ok(pipe) => pipe,
            Err(_) => tokio::time::timeout_at(deadline, Arc::clone(&self.pipe).lock_owned())
                .await
                .map_err(|_| WriteError::TimedOut(limit))?,
        };
        let mut writing = Writing { pipe: Some(pipe), line, written: 0 };
        let mut finish = std::pin::pin!(writing.finish());
        let first =
            std::future::poll_fn(|cx| std::task::Poll::Ready(std::future::Future::poll(finish.as_mut(), cx))).await;
        if let std::task::Poll::Ready(written) = first {
            return written.map_err(WriteError::Io);
        }
        tokio::time::timeout_at(deadline, finish)
            .await
            .map_err(|_| WriteError::TimedOut(limit))?
            .map_err(WriteError::Io)
    }

    /// Shuts the pipe down (the child reads its end of input), within `limit`.
    ///
    /// # Errors
    /// As [`Self::write_line`].
    pub async fn close(&self, limit: Duration) -> Result<(), WriteError> {
        let deadline = Instant::now() + limit;
        let mut pipe =
            tokio::time::timeout_at(deadline, self.pipe.lock()).await.map_err(|_| WriteError::TimedOut(limit))?;
        tokio::time::timeout_at(deadline, pipe.shutdown())
            .await
            .map_err(|_| WriteError::TimedOut(limit))?
            .map_err(WriteError::Io)
    }
}

/// A line being written, with the pipe held: dropped before the line is whole, it finishes
/// the line in a task of its own (still holding the pipe).
struct Writing<W: AsyncWrite + Send + Unpin + 'static> {
    pipe: Option<tokio::sync::OwnedMutexGuard<W>>,
    line: Vec<u8>,
    written: usize,
}

impl<W: AsyncWrite + Send + Unpin + 'static> Writing<W> {
    async fn finish(&mut self) -> std::io::Result<()> {
        let Some(pipe) = self.pipe.as_mut() else { return Ok(()) };
        while self.written < self.line.len() {
            match pipe.write(&self.line[self.written..]).await? {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                n => self.written += n,
            }
        }
        Ok(())
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> Drop for Writing<W> {
    fn drop(&mut self) {
        if self.written == 0 || self.written >= self.line.len() {
            return;
        }
        if let (Some(mut pipe), Ok(runtime)) = (self.pipe.take(), tokio::runtime::Handle::try_current()) {
            let rest = self.line.split_off(self.written);
            runtime.spawn(async move {
                let _ = pipe.write_all(&rest).await;
            });
        }
    }
}

/// The calls waiting on one child: ids, the waiting map, the in-flight limit. `T` is what
/// an answer is made into; `M` is what the caller keeps beside each waiting call (read when
/// its answer is made: [`Calls::answer`]).
pub struct Calls<T, M = ()> {
    state: Mutex<Waiting<T, M>>,
    next: AtomicU64,
    limit: usize,
}

struct Waiting<T, M> {
    calls: foldhash::HashMap<u64, (M, oneshot::Sender<T>)>,
    /// Set when the child closed: why.
    closed: Option<String>,
}

impl<T, M> Calls<T, M> {
    /// No call waiting yet; at most `limit` at once; ids from 1.
    #[must_use]
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(Waiting { calls: foldhash::HashMap::default(), closed: None }),
            next: AtomicU64::new(1),
            limit,
        })
    }

    fn state(&self) -> MutexGuard<'_, Waiting<T, M>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh id, for a request nobody waits on (its answer finds no call and is dropped).
    pub fn take_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// A call under a fresh id, `meta` kept beside it until it is answered or forgotten.
    ///
    /// # Errors
    /// [`RpcError::Busy`] when `limit` calls already wait; [`RpcError::Closed`] when the
    /// child has closed.
    pub fn begin(self: &Arc<Self>, meta: M) -> Result<Call<T, M>, RpcError> {
        let (answer, answered) = oneshot::channel();
        let id = {
            let mut state = self.state();
            if let Some(why) = &state.closed {
                return Err(RpcError::Closed(why.clone()));
            }
            if state.calls.len() >= self.limit {
                return Err(RpcError::Busy { limit: self.limit });
            }
            let id = self.take_id();
            state.calls.insert(id, (meta, answer));
            id
        };
        Ok(Call { id, answered, calls: Arc::clone(self) })
    }

    /// Hands the answer to call `id`, made by `make` from what was kept beside it; false
    /// when no call waits under `id` (answered, forgotten, never asked).
    pub fn answer(&self, id: u64, make: impl FnOnce(&M) -> T) -> bool {
        let waiting = self.state().calls.remove(&id);
        match waiting {
            Some((meta, answer)) => answer.send(make(&meta)).is_ok(),
            None => false,
        }
    }

    /// Forgets call `id` (its waiter then fails as closed: see [`Call::wait_until`]).
    pub fn forget(&self, id: u64) {
        let forgotten = self.state().calls.remove(&id);
        drop(forgotten);
    }

    /// Whether no call waits.
    pub fn is_empty(&self) -> bool {
        self.state().calls.is_empty()
    }

    /// How many calls wait.
    pub fn len(&self) -> usize {
        self.state().calls.len()
    }

    /// The child closed: every waiting call fails with `why`, and so does every later one.
    pub fn close(&self, why: &str) {
        let failed = {
            let mut state = self.state();
            state.closed.get_or_insert_with(|| why.to_owned());
            std::mem::take(&mut state.calls)
        };
        // The senders go outside the lock: a waiter woken by it takes the lock to read why.
        drop(failed);
    }

    fn closed(&self) -> String {
        self.state().closed.clone().unwrap_or_else(|| "the call was forgotten".to_owned())
    }
}

/// One waiting call; dropped, it is forgotten (its answer, if one comes, is dropped).
pub struct Call<T, M = ()> {
    id: u64,
    answered: oneshot::Receiver<T>,
    calls: Arc<Calls<T, M>>,
}

impl<T, M> Call<T, M> {
    /// Its id, which the request carries.
    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Its answer, by `deadline` at the latest.
    ///
    /// # Errors
    /// [`RpcError::Timeout`] past the deadline; [`RpcError::Closed`] when the child closed
    /// (or the call was forgotten) first.
    pub async fn wait_until(mut self, deadline: Instant) -> Result<T, RpcError> {
        match tokio::time::timeout_at(deadline, &mut self.answered).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(RpcError::Closed(self.calls.closed())),
            Err(_) => Err(RpcError::Timeout),
        }
    }
}

impl<T, M> Drop for Call<T, M> {
    fn drop(&mut self) {
        // Answered or not, it waits no more.
        self.calls.forget(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_line_over_the_cap_is_an_error_and_one_at_the_cap_is_not() {
        let (mut child, host) = tokio::io::duplex(64);
        let mut reader = LineReader::new(host, 8, 4);
        tokio::spawn(async move {
            child.write_all(b"1234567\nabcdefghijkl\n").await.expect("write");
        });
        assert_eq!(reader.next_line().await.expect("a line").expect("not the end"), b"1234567\n");
        assert!(matches!(reader.next_line().await, Err(ReadError::TooLong { limit: 8 })));
    }

    #[tokio::test]
    async fn a_huge_line_costs_no_more_than_the_cap() {
        let (mut child, host) = tokio::io::duplex(1 << 16);
        let mut reader = LineReader::new(host, 1024, 256);
        let writer = tokio::spawn(async move {
            // 1 MiB without a newline: the reader gives up at the cap, holding no more.
            let _ = child.write_all(&vec![b'x'; 1 << 20]).await;
        });
        assert!(matches!(reader.next_line().await, Err(ReadError::TooLong { .. })));
        assert!(reader.line.capacity() <= 1024, "held {} bytes", reader.line.capacity());
        writer.abort();
    }

    #[tokio::test]
    async fn one_call_over_the_limit_fails_at_once_and_a_dropped_call_frees_its_place() {
        let calls: Arc<Calls<u32>> = Calls::new(2);
        let first = calls.begin(()).expect("first");
        let second = calls.begin(()).expect("second");
        assert_eq!(calls.begin(()).err(), Some(RpcError::Busy { limit: 2 }));
        assert_ne!(first.id(), second.id());
        let forgotten = first.id();
        drop(first);
        assert_eq!(calls.len(), 1, "a dropped call is out of the map");
        assert!(!calls.answer(forgotten, |()| 1), "its late answer finds nobody");
        let third = calls.begin(()).expect("a place is free again");
        assert!(calls.answer(third.id(), |()| 7));
        assert_eq!(third.wait_until(Instant::now() + Duration::from_secs(1)).await, Ok(7));
        drop(second);
        assert!(calls.is_empty());
    }

    #[tokio::test]
    async fn the_answer_is_made_from_what_was_kept_beside_the_call() {
        let calls: Arc<Calls<String, bool>> = Calls::new(4);
        let verbatim = calls.begin(true).expect("call");
        let read = calls.begin(false).expect("call");
        calls.answer(verbatim.id(), |kept| format!("verbatim {kept}"));
        calls.answer(read.id(), |kept| format!("verbatim {kept}"));
        let deadline = Instant::now() + Duration::from_secs(1);
        assert_eq!(verbatim.wait_until(deadline).await.as_deref(), Ok("verbatim true"));
        assert_eq!(read.wait_until(deadline).await.as_deref(), Ok("verbatim false"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_times_out_at_its_deadline_on_tokios_clock() {
        let calls: Arc<Calls<u32>> = Calls::new(4);
        let call = calls.begin(()).expect("call");
        let id = call.id();
        let began = Instant::now();
        let waiting = tokio::spawn(call.wait_until(began + Duration::from_secs(60)));
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(!waiting.is_finished(), "not before its deadline");
        assert_eq!(waiting.await.expect("joined"), Err(RpcError::Timeout));
        assert_eq!(began.elapsed(), Duration::from_secs(60), "the paused clock moved, not the real one");
        assert!(!calls.answer(id, |()| 1), "a call that timed out is forgotten");
    }

    #[tokio::test]
    async fn when_the_child_closes_every_waiter_fails_with_the_reason() {
        let calls: Arc<Calls<u32>> = Calls::new(4);
        let deadline = Instant::now() + Duration::from_secs(5);
        let one = tokio::spawn(calls.begin(()).expect("call").wait_until(deadline));
        let two = tokio::spawn(calls.begin(()).expect("call").wait_until(deadline));
        calls.close("exit code 3");
        let why = RpcError::Closed("exit code 3".to_owned());
        assert_eq!(one.await.expect("joined"), Err(why.clone()));
        assert_eq!(two.await.expect("joined"), Err(why.clone()));
        assert_eq!(calls.begin(()).err(), Some(why), "and so does every later call");
    }

    #[tokio::test]
    async fn a_line_abandoned_halfway_is_finished_before_the_next() {
        let (host, mut child) = tokio::io::duplex(8);
        let writer = LineWriter::new(host);
        let long = [vec![b'a'; 20], vec![b'\n']].concat();
        // The pipe takes 8 bytes, then the write waits for the child: abandoned there.
        let abandoned = writer.write_line(long.clone(), Duration::from_secs(60));
        assert!(tokio::time::timeout(Duration::from_millis(50), abandoned).await.is_err());
        let next = tokio::spawn({
            let writer = writer.clone();
            async move { writer.write_line(b"next\n".to_vec(), Duration::from_secs(60)).await }
        });
        let mut read = LineReader::new(&mut child, 64, 64);
        assert_eq!(read.next_line().await.expect("read").expect("a line"), &long[..]);
        assert_eq!(read.next_line().await.expect("read").expect("a line"), b"next\n");
        next.await.expect("joined").expect("written");
    }

    #[tokio::test(start_paused = true)]
    async fn a_child_that_reads_nothing_fails_the_write_at_its_limit() {
        let (host, _child) = tokio::io::duplex(4);
        let writer = LineWriter::new(host);
        let written = writer.write_line(b"more than four bytes\n".to_vec(), Duration::from_secs(10)).await;
        assert!(matches!(written, Err(WriteError::TimedOut(limit)) if limit == Duration::from_secs(10)));
    }

    /// A real child: `sh` answering `{"id":N}` lines with `{"id":N,"ok":true}`, then one
    /// that exits while a call waits.
    #[tokio::test]
    async fn a_real_child_is_answered_by_id_and_its_exit_fails_the_call_in_flight() {
        let script = r#"while IFS= read -r line; do
            case "$line" in
              *exit*) exit 3 ;;
              *) id=${line#*\"id\":}; id=${id%%[,\}]*}; printf '{"id":%s,"ok":true}\n' "$id" ;;
            esac
        done"#;
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sh runs");
        let writer = LineWriter::new(child.stdin.take().expect("stdin"));
        let mut reader = LineReader::new(child.stdout.take().expect("stdout"), 1024, 1024);
        let calls: Arc<Calls<String>> = Calls::new(8);
        let reading = tokio::spawn({
            let calls = Arc::clone(&calls);
            async move {
                while let Ok(Some(line)) = reader.next_line().await {
                    let text = String::from_utf8_lossy(line).into_owned();
                    let id = text.split("\"id\":").nth(1).and_then(|rest| rest.split(',').next());
                    if let Some(id) = id.and_then(|id| id.parse().ok()) {
                        calls.answer(id, |()| text.trim_end().to_owned());
                    }
                }
                calls.close("its output ended");
            }
        });
        let limit = Duration::from_secs(30);
        for _ in 0..3 {
            let call = calls.begin(()).expect("call");
            writer.write_line(format!("{{\"id\":{}}}\n", call.id()).into_bytes(), limit).await.expect("written");
            let id = call.id();
            assert_eq!(call.wait_until(Instant::now() + limit).await, Ok(format!("{{\"id\":{id},\"ok\":true}}")));
        }
        let last = calls.begin(()).expect("call");
        writer.write_line(b"{\"exit\":1}\n".to_vec(), limit).await.expect("written");
        assert_eq!(last.wait_until(Instant::now() + limit).await, Err(RpcError::Closed("its output ended".to_owned())));
        reading.await.expect("joined");
        assert_eq!(child.wait().await.expect("waited").code(), Some(3));
    }
}
