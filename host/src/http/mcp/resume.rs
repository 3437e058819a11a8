//! Resumable SSE streams of the 2025 revisions (2025-03-26 to 2025-11-25): every event of
//! a session's `GET` stream and of a `POST`'s streamed answer gets an id, the events are
//! kept in a bounded replay window, and a client that lost the connection resumes the stream
//! with a `GET` carrying `Last-Event-ID`, getting what it missed once and in order.
//!
//! This module owns the window ([`Streams`]) and the two ends of a stream: the producer,
//! a task that keeps recording a stream's messages while no connection is attached (for at
//! most [`DETACHED_FOR`]), and the follower, the SSE body of one connection, which replays
//! from a cursor and then follows.
//!
//! Event ids are `<stream>-<n>`: `<stream>` is 128 random bits given to one stream of one
//! session, `<n>` counts its events (the priming event, with empty data, is 0). An id is
//! looked up only among the streams of the session the request names, so one client's
//! `Last-Event-ID` opens nothing of another's. An id this session's streams do not know is
//! refused (400); one whose following events were dropped from the window is refused with
//! 410 Gone, saying so — never a resumed stream with a silent gap.
//!
//! 2026-07-28 removes resumability (no event ids, no `Last-Event-ID`; closing a stream
//! cancels its request), so its streams are not kept here.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use tokio::sync::watch;

/// The most events one stream keeps for replay.
pub const EVENTS_PER_STREAM: usize = 256;
/// The most bytes of messages one stream keeps for replay.
pub const BYTES_PER_STREAM: usize = 1024 * 1024;
/// The most events all streams keep together.
pub const EVENTS_IN_TOTAL: usize = 8192;
/// The most bytes all streams keep together.
pub const BYTES_IN_TOTAL: usize = 16 * 1024 * 1024;
/// The most streams kept (their events, or only that they were there); the oldest go first.
pub const STREAMS_IN_TOTAL: usize = 1024;
/// How long a stream's producer keeps recording with no connection attached, for the
/// client to come back; then the stream ends (a call still running is dropped, which tells
/// its provider to stop).
pub const DETACHED_FOR: Duration = Duration::from_secs(120);
/// What a client is told to wait before reconnecting (the SSE `retry` field), in ms.
pub const RETRY_MS: u64 = 1000;
/// How often a waiting end looks again whether it should stop.
const RECHECK: Duration = Duration::from_secs(5);

/// The replay window of every resumable stream of the process. Stream ids are random and
/// each is bound to its session's id, itself random, so hubs sharing a process never meet.
pub static STREAMS: LazyLock<Streams> = LazyLock::new(Streams::default);

/// The replay window: each stream's last events, within the bounds above.
#[derive(Default)]
pub struct Streams {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    logs: HashMap<String, Log>,
    /// Stream ids, oldest first.
    order: VecDeque<String>,
    events: usize,
    bytes: usize,
    /// Each session's `GET` stream: a new one ends the one before.
    listeners: HashMap<String, String>,
}

struct Log {
    session: String,
    /// Kept events, oldest first: (n, JSON text).
    events: VecDeque<(u64, Arc<str>)>,
    bytes: usize,
    /// The number the next event gets.
    next: u64,
    /// The highest number dropped from the window (0: none).
    dropped_through: u64,
    /// No more events will come.
    ended: bool,
    /// Which connection follows it (each attach takes the next one).
    attached: u64,
    /// Whether a connection is attached now, or since when none is.
    detached_since: Option<Instant>,
    /// Tells followers something changed.
    wake: watch::Sender<()>,
}

/// Why a `Last-Event-ID` cannot resume a stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The id names no stream of this session (never one, someone else's, or forgotten).
    Unknown,
    /// Events after the id were dropped from the window: resuming would leave a gap.
    Gone {
        /// The first event the window still has.
        oldest: u64,
    },
}

/// What a following connection gets: the events after its cursor, whether more may come,
/// and a receiver to wait for them with.
type Next = (Vec<(u64, Arc<str>)>, bool, watch::Receiver<()>);

/// Where a connection follows a stream from.
struct Cursor {
    stream: String,
    after: u64,
    attachment: u64,
    /// A new stream: the connection opens with the priming event.
    fresh: bool,
}

fn lock(streams: &Streams) -> std::sync::MutexGuard<'_, Inner> {
    streams.inner.lock().unwrap_or_else(PoisonError::into_inner)
}

/// 128 random bits in hex; `None` when the kernel gives no randomness (no stream is made
/// resumable with a guessable id).
fn stream_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    let filled =
        rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).is_ok_and(|n| n == bytes.len());
    filled.then(|| data_encoding::HEXLOWER.encode(&bytes))
}

/// The event id of event `n` of `stream`.
fn event_id(stream: &str, n: u64) -> String {
    format!("{stream}-{n}")
}

impl Streams {
    /// A new stream of `session`, attached to the connection opening it; `listener`: it is
    /// the session's `GET` stream (ending the one before).
    fn open(&self, session: &str, listener: bool) -> Option<Cursor> {
        let stream = stream_id()?;
        let mut inner = lock(self);
        while inner.order.len() >= STREAMS_IN_TOTAL {
            inner.forget_oldest();
        }
        if listener && let Some(before) = inner.listeners.insert(session.to_owned(), stream.clone()) {
            inner.end(&before);
        }
        let (wake, _) = watch::channel(());
        let log = Log {
            session: session.to_owned(),
            events: VecDeque::new(),
            bytes: 0,
            next: 1,
            dropped_through: 0,
            ended: false,
            attached: 1,
            detached_since: None,
            wake,
        };
        inner.logs.insert(stream.clone(), log);
        inner.order.push_back(stream.clone());
        Some(Cursor { stream, after: 0, attachment: 1, fresh: true })
    }

    /// Attaches a new connection of `session` after the event `last_event_id` names: the
    /// connection before (if any) stops following.
    fn resume(&self, session: &str, last_event_id: &str) -> Result<Cursor, Refusal> {
        let (stream, n) = last_event_id.rsplit_once('-').ok_or(Refusal::Unknown)?;
        let after: u64 = n.parse().map_err(|_| Refusal::Unknown)?;
        let mut inner = lock(self);
        let log = inner.logs.get_mut(stream).filter(|log| log.session == session).ok_or(Refusal::Unknown)?;
        if after >= log.next {
            return Err(Refusal::Unknown);
        }
        if after < log.dropped_through {
            return Err(Refusal::Gone { oldest: log.dropped_through + 1 });
        }
        log.attached += 1;
        log.detached_since = None;
        log.wake.send_replace(());
        Ok(Cursor { stream: stream.to_owned(), after, attachment: log.attached, fresh: false })
    }

    /// Records `message` as the next event of `stream`; `false` when the stream is no longer
    /// kept or was ended (its producer stops).
    fn append(&self, stream: &str, message: String) -> bool {
        let mut inner = lock(self);
        let size = message.len();
        let Some(log) = inner.logs.get_mut(stream).filter(|log| !log.ended) else {
            return false;
        };
        log.events.push_back((log.next, message.into()));
        log.next += 1;
        log.bytes += size;
        let mut dropped = (0, 0);
        while log.events.len() > EVENTS_PER_STREAM || (log.bytes > BYTES_PER_STREAM && log.events.len() > 1) {
            if let Some((n, text)) = log.events.pop_front() {
                log.dropped_through = n;
                log.bytes -= text.len();
                dropped = (dropped.0 + 1, dropped.1 + text.len());
            }
        }
        log.wake.send_replace(());
        inner.events = inner.events + 1 - dropped.0;
        inner.bytes = inner.bytes + size - dropped.1;
        inner.trim(stream);
        true
    }

    /// No more events come on `stream`.
    fn end(&self, stream: &str) {
        lock(self).end(stream);
    }

    /// Forgets every stream of `session` (it ended).
    pub fn forget_session(&self, session: &str) {
        let mut inner = lock(self);
        let gone: Vec<String> =
            inner.logs.iter().filter(|(_, log)| log.session == session).map(|(id, _)| id.clone()).collect();
        for stream in gone {
            inner.forget(&stream);
        }
        inner.listeners.remove(session);
    }

    /// The events of `cursor`'s stream after its position, whether more may come, and a
    /// receiver to wait for them with; `None` when this connection no longer follows it.
    fn next(&self, cursor: &Cursor) -> Option<Next> {
        let inner = lock(self);
        let log = inner.logs.get(&cursor.stream).filter(|log| log.attached == cursor.attachment)?;
        // Dropped while this connection lagged behind: it ends, and its client's resume
        // with the last id it got is told of the gap.
        if cursor.after < log.dropped_through {
            return None;
        }
        let events: Vec<_> = log.events.iter().filter(|(n, _)| *n > cursor.after).cloned().collect();
        Some((events, !log.ended, log.wake.subscribe()))
    }

    /// The connection following with `attachment` let go of `stream`.
    fn detach(&self, stream: &str, attachment: u64) {
        if let Some(log) = lock(self).logs.get_mut(stream).filter(|log| log.attached == attachment) {
            log.detached_since = Some(Instant::now());
        }
    }

    /// Whether `stream`'s producer should go on: it is kept, not ended, and a connection
    /// follows it or left less than [`DETACHED_FOR`] ago.
    fn wanted(&self, stream: &str) -> bool {
        lock(self)
            .logs
            .get(stream)
            .is_some_and(|log| !log.ended && log.detached_since.is_none_or(|since| since.elapsed() < DETACHED_FOR))
    }
}

impl Inner {
    fn end(&mut self, stream: &str) {
        if let Some(log) = self.logs.get_mut(stream) {
            log.ended = true;
            log.wake.send_replace(());
        }
    }

    fn forget(&mut self, stream: &str) {
        if let Some(log) = self.logs.remove(stream) {
            self.events -= log.events.len();
            self.bytes -= log.bytes;
            self.order.retain(|s| s != stream);
            if self.listeners.get(&log.session).is_some_and(|s| s == stream) {
                self.listeners.remove(&log.session);
            }
        }
    }

    fn forget_oldest(&mut self) {
        if let Some(oldest) = self.order.front().cloned() {
            self.forget(&oldest);
        }
    }

    /// Drops the oldest events of the other streams (oldest stream first) until the totals
    /// fit; `keep` (the one just written) loses its own only by its own bounds.
    fn trim(&mut self, keep: &str) {
        let mut index = 0;
        while (self.events > EVENTS_IN_TOTAL || self.bytes > BYTES_IN_TOTAL) && index < self.order.len() {
            let stream = self.order[index].clone();
            index += 1;
            if stream == keep {
                continue;
            }
            let Some(log) = self.logs.get_mut(&stream) else { continue };
            while (self.events > EVENTS_IN_TOTAL || self.bytes > BYTES_IN_TOTAL)
                && let Some((n, text)) = log.events.pop_front()
            {
                log.dropped_through = n;
                log.bytes -= text.len();
                self.events -= 1;
                self.bytes -= text.len();
            }
            log.wake.send_replace(());
        }
    }
}

/// Keeps the stream's producer told whether a connection follows, while it lives.
struct Attached {
    stream: String,
    attachment: u64,
    /// The session's guard against expiring, while a connection is open.
    _open: Option<butler_mcp::SessionStream>,
}

impl Drop for Attached {
    fn drop(&mut self) {
        STREAMS.detach(&self.stream, self.attachment);
    }
}

/// The SSE body of one connection following `cursor`: the priming event (a fresh stream's),
/// then each event after the cursor, replayed and then as it comes, each with its id.
fn follow(cursor: Cursor, open: Option<butler_mcp::SessionStream>) -> impl Stream<Item = Result<Event, Infallible>> {
    let priming = cursor
        .fresh
        .then(|| Event::default().id(event_id(&cursor.stream, 0)).retry(Duration::from_millis(RETRY_MS)).data(""));
    let attached = Attached { stream: cursor.stream.clone(), attachment: cursor.attachment, _open: open };
    let start = (cursor, VecDeque::<(u64, Arc<str>)>::new(), attached);
    let events = futures_util::stream::unfold(start, |(mut cursor, mut ready, attached)| async move {
        loop {
            if let Some((n, text)) = ready.pop_front() {
                cursor.after = n;
                let event = Event::default().id(event_id(&cursor.stream, n)).event("message").data(&*text);
                return Some((Ok(event), (cursor, ready, attached)));
            }
            let (events, more, mut wake) = STREAMS.next(&cursor)?;
            if !events.is_empty() {
                ready.extend(events);
                continue;
            }
            if !more {
                return None;
            }
            // Woken by a new event, an end, another connection taking over; or looks again.
            let _ = tokio::time::timeout(RECHECK, wake.changed()).await;
        }
    });
    futures_util::stream::iter(priming.map(Ok)).chain(events)
}

/// The SSE response of a connection following `cursor`.
fn response(cursor: Cursor, open: Option<butler_mcp::SessionStream>) -> Response {
    let mut response = Sse::new(follow(cursor, open)).keep_alive(KeepAlive::default()).into_response();
    response.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A new resumable stream of `session` carrying what `messages` yields (each one JSON-RPC
/// message's text), recorded by a task of its own so that what comes while the client is
/// away is replayed when it resumes; `listener`: it is the session's `GET` stream. `None`
/// when no stream id can be made.
pub fn serve(
    session: &str,
    listener: bool,
    messages: impl Stream<Item = String> + Send + 'static,
    open: Option<butler_mcp::SessionStream>,
) -> Option<Response> {
    let cursor = STREAMS.open(session, listener)?;
    let stream = cursor.stream.clone();
    tokio::spawn(async move {
        let mut messages = std::pin::pin!(messages);
        loop {
            match tokio::time::timeout(RECHECK, messages.next()).await {
                Ok(Some(message)) => {
                    if !STREAMS.append(&stream, message) {
                        break;
                    }
                }
                Ok(None) => break,
                Err(_) if !STREAMS.wanted(&stream) => break,
                Err(_) => {}
            }
        }
        STREAMS.end(&stream);
    });
    Some(response(cursor, open))
}

/// A `GET` of `session` with `Last-Event-ID: last_event_id`: the stream it names, from
/// after that event — or the refusal saying why not.
pub fn resume(session: &str, last_event_id: &str, open: butler_mcp::SessionStream) -> Response {
    match STREAMS.resume(session, last_event_id) {
        Ok(cursor) => response(cursor, Some(open)),
        Err(Refusal::Unknown) => super::rpc_error(
            StatusCode::BAD_REQUEST,
            serde_json::Value::Null,
            -32000,
            format!(
                "Bad Request: Last-Event-ID {:?} names no event of this session's streams (or of one no longer kept): open a new stream with a GET without it",
                butler_catalog::text::clip(last_event_id, 80)
            ),
        ),
        Err(Refusal::Gone { oldest }) => super::rpc_error(
            StatusCode::GONE,
            serde_json::Value::Null,
            -32000,
            format!(
                "Gone: the events after Last-Event-ID {:?} are no longer kept (the window keeps the last {EVENTS_PER_STREAM} events or {} KiB of a stream; this one keeps from event {oldest}), so the stream cannot resume without a gap: open a new stream with a GET without it, and list again what you follow",
                butler_catalog::text::clip(last_event_id, 80),
                BYTES_PER_STREAM / 1024
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(streams: &Streams, cursor: &Cursor) -> Vec<u64> {
        streams.next(cursor).map(|(events, _, _)| events.iter().map(|(n, _)| *n).collect()).unwrap_or_default()
    }

    #[test]
    fn an_id_resumes_only_its_own_sessions_stream_after_it() {
        let streams = Streams::default();
        let Some(cursor) = streams.open("session-a", true) else { panic!("randomness") };
        for n in 1..=3 {
            assert!(streams.append(&cursor.stream, format!("{{\"n\":{n}}}")));
        }
        let id = event_id(&cursor.stream, 1);
        let resumed = streams.resume("session-a", &id).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(messages(&streams, &resumed), [2, 3]);
        // The connection before no longer follows.
        assert!(streams.next(&cursor).is_none());
        for foreign in [id.as_str(), "0123-1", "nonsense", &event_id(&cursor.stream, 9)] {
            let session = if foreign == id { "session-b" } else { "session-a" };
            assert_eq!(streams.resume(session, foreign).err(), Some(Refusal::Unknown), "{foreign} from {session}");
        }
    }

    #[test]
    fn past_the_window_a_resume_is_refused_rather_than_gapped() {
        let streams = Streams::default();
        let Some(cursor) = streams.open("s", false) else { panic!("randomness") };
        for n in 0..EVENTS_PER_STREAM + 10 {
            assert!(streams.append(&cursor.stream, n.to_string()));
        }
        let early = streams.resume("s", &event_id(&cursor.stream, 3));
        assert_eq!(early.err(), Some(Refusal::Gone { oldest: 11 }));
        let Ok(late) = streams.resume("s", &event_id(&cursor.stream, 10)) else { panic!("in the window") };
        assert_eq!(messages(&streams, &late).len(), EVENTS_PER_STREAM);
        // The totals are bounded too, and what was dropped says so.
        let inner = lock(&streams);
        assert_eq!((inner.events, inner.logs.len()), (EVENTS_PER_STREAM, 1));
    }

    #[test]
    fn the_totals_drop_the_oldest_streams_events_first() {
        let streams = Streams::default();
        let big = "x".repeat(BYTES_PER_STREAM / 2);
        let opened: Vec<Cursor> = (0..40).filter_map(|n| streams.open(&format!("s{n}"), false)).collect();
        for cursor in &opened {
            assert!(streams.append(&cursor.stream, big.clone()));
        }
        let inner = lock(&streams);
        assert!(inner.bytes <= BYTES_IN_TOTAL, "{}", inner.bytes);
        drop(inner);
        let first = &opened[0];
        let session = "s0";
        assert!(matches!(streams.resume(session, &event_id(&first.stream, 0)), Err(Refusal::Gone { .. })));
        let last = &opened[39];
        assert!(streams.resume("s39", &event_id(&last.stream, 0)).is_ok());
    }
}
