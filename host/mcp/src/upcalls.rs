//! The providers' requests for clients that wait for an answer across client requests:
//! the **asked** table (a 2025-11-25 client is sent the provider's request on its stream
//! and answers it with a request of its own, matched here by session and id) and the
//! **parked** table (a 2026-07-28 call set aside while its client answers the provider's
//! input requests on its next round, taken back by the id the client is given). Both are
//! bounded — the oldest goes when full — and a parked call expires after [`PARKED_FOR`].
//! What an upcall is, and whether a client can take it, is [`crate::upcall`]'s.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use butler_catalog::lock;

use crate::upcall;

/// The most providers' requests waiting for a 2025-11-25 client's answer, over all
/// sessions; beyond, the oldest is refused.
pub const MAX_ASKED: usize = 1024;

/// The most calls parked for their client's next round; beyond, the oldest is dropped
/// (which cancels it at its provider).
pub const MAX_PARKED: usize = 256;

/// How long a parked call waits for its client's next round. See [`MAX_PARKED`].
pub const PARKED_FOR: Duration = Duration::from_secs(300);

/// A client's request: (session, its id as JSON text).
type Key = (String, String);

/// Providers' requests waiting for 2025-11-25 clients' answers, oldest first.
#[derive(Default)]
struct Asked {
    waiting: HashMap<Key, upcall::Asked>,
    order: VecDeque<Key>,
    next: u64,
}

/// The asked and the parked upcalls of every session.
pub(crate) struct Upcalls<P = upcall::Parked> {
    asked: Mutex<Asked>,
    /// (id, until when, the call), oldest first.
    parked: Mutex<VecDeque<(String, Instant, P)>>,
}

impl<P> Default for Upcalls<P> {
    fn default() -> Self {
        Self { asked: Mutex::new(Asked::default()), parked: Mutex::new(VecDeque::new()) }
    }
}

impl<P> Upcalls<P> {
    /// Keeps `asked` until the client of `session` answers it; the id it goes to the
    /// client under. Requests whose provider stopped waiting go first; then, when
    /// [`MAX_ASKED`] wait, the oldest is refused.
    pub(crate) fn ask(&self, session: &str, asked: upcall::Asked) -> String {
        let mut table = lock(&self.asked);
        table.next += 1;
        let id = format!("butler-{}", table.next);
        let key = (session.to_owned(), id.clone());
        let Asked { waiting, order, .. } = &mut *table;
        order.retain(|key| waiting.get(key).is_some_and(|a| !a.abandoned()));
        waiting.retain(|_, a| !a.abandoned());
        if order.len() >= MAX_ASKED
            && let Some(oldest) = order.pop_front()
            && let Some(dropped) = waiting.remove(&oldest)
        {
            dropped.refuse(-32603, "too many requests wait for clients' answers; this one was dropped");
        }
        order.push_back(key.clone());
        waiting.insert(key, asked);
        id
    }

    /// The client of `session` answered request `id`: the answer goes to the provider that
    /// asked. Whether anyone was waiting for it (only the session it was asked of can
    /// answer it).
    pub(crate) fn answered(&self, session: &str, id: &Value, reply: Result<Value, Value>) -> bool {
        let Some(id) = id.as_str() else { return false };
        let key = (session.to_owned(), id.to_owned());
        let mut table = lock(&self.asked);
        table.order.retain(|k| *k != key);
        let Some(asked) = table.waiting.remove(&key) else { return false };
        drop(table);
        asked.answer(reply);
        true
    }

    /// Sets `parked` aside until `now` + [`PARKED_FOR`]; the id it is taken back with.
    pub(crate) fn park(&self, id: String, parked: P, now: Instant) -> String {
        let dropped = {
            let mut table = lock(&self.parked);
            let mut dropped = expired(&mut table, now);
            if table.len() >= MAX_PARKED {
                dropped.extend(table.pop_front().map(|(_, _, parked)| parked));
            }
            table.push_back((id.clone(), now + PARKED_FOR, parked));
            dropped
        };
        // Dropped outside the lock: dropping a call tells its provider to stop.
        drop(dropped);
        id
    }

    /// Takes back the call parked under `id`, unless it expired by `now`.
    pub(crate) fn unpark(&self, id: &str, now: Instant) -> Option<P> {
        let (found, dropped) = {
            let mut table = lock(&self.parked);
            let dropped = expired(&mut table, now);
            let at = table.iter().position(|(parked, ..)| parked == id);
            (at.and_then(|at| table.remove(at)).map(|(_, _, parked)| parked), dropped)
        };
        drop(dropped);
        found
    }

    /// Drops the parked calls expired by `now`.
    pub(crate) fn drop_expired(&self, now: Instant) {
        let dropped = expired(&mut lock(&self.parked), now);
        drop(dropped);
    }
}

/// Takes the calls expired by `now` out of `table`, for the caller to drop once it let the
/// lock go.
fn expired<P>(table: &mut VecDeque<(String, Instant, P)>, now: Instant) -> Vec<P> {
    let mut gone = Vec::new();
    while table.front().is_some_and(|(_, until, _)| *until <= now) {
        gone.extend(table.pop_front().map(|(_, _, parked)| parked));
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asked() -> (upcall::Asked, tokio::sync::oneshot::Receiver<Result<Value, Value>>) {
        upcall::Asked::new("roots/list".to_owned(), json!({}))
    }

    /// An answer reaches the provider that asked, only from the session it was asked of,
    /// and only once.
    #[test]
    fn an_answer_reaches_the_asker_only_from_its_own_session_and_once() {
        let upcalls: Upcalls<()> = Upcalls::default();
        let (request, mut answer) = asked();
        let id = upcalls.ask("a", request);
        assert!(!upcalls.answered("b", &json!(id), Ok(json!({"roots": []}))), "another session's answer");
        assert!(answer.try_recv().is_err(), "nothing reached the provider");
        assert!(upcalls.answered("a", &json!(id), Ok(json!({"roots": []}))));
        assert_eq!(answer.try_recv().expect("answered"), Ok(json!({"roots": []})));
        assert!(!upcalls.answered("a", &json!(id), Ok(json!({}))), "answered twice");
        assert!(!upcalls.answered("a", &json!(7), Ok(json!({}))), "an id the hub never gave");
    }

    /// Past [`MAX_ASKED`] waiting requests, the oldest is refused with an error, the rest
    /// still wait; a request whose provider stopped waiting makes room first.
    #[test]
    fn the_oldest_asked_request_is_refused_when_too_many_wait() {
        let upcalls: Upcalls<()> = Upcalls::default();
        let (first, mut refused) = asked();
        let first_id = upcalls.ask("s", first);
        let mut kept = Vec::new();
        for _ in 1..MAX_ASKED {
            let (request, answer) = asked();
            kept.push((upcalls.ask("s", request), answer));
        }
        assert!(refused.try_recv().is_err(), "none refused while there is room");
        let (last, _answer) = asked();
        upcalls.ask("s", last);
        let error = refused.try_recv().expect("the oldest is refused").expect_err("an error");
        assert_eq!(error["code"], -32603, "{error}");
        assert!(!upcalls.answered("s", &json!(first_id), Ok(json!({}))));
        let (id, mut answer) = kept.remove(0);
        assert!(upcalls.answered("s", &json!(id), Ok(json!(1))));
        assert_eq!(answer.try_recv().expect("answered"), Ok(json!(1)));
        // An abandoned request goes before the oldest live one.
        drop(kept.remove(0).1);
        let (another, _answer) = asked();
        upcalls.ask("s", another);
        let (id, mut answer) = kept.remove(0);
        assert!(upcalls.answered("s", &json!(id), Ok(json!(2))), "the oldest live one still waits");
        assert_eq!(answer.try_recv().expect("answered"), Ok(json!(2)));
    }

    /// A parked call is taken back once, by its id, until [`PARKED_FOR`] has passed; then
    /// it is gone.
    #[test]
    fn a_parked_call_is_taken_back_once_and_not_after_it_expired() {
        let upcalls: Upcalls<u32> = Upcalls::default();
        let now = Instant::now();
        upcalls.park("one".to_owned(), 1, now);
        upcalls.park("two".to_owned(), 2, now);
        assert_eq!(upcalls.unpark("one", now + PARKED_FOR / 2), Some(1));
        assert_eq!(upcalls.unpark("one", now + PARKED_FOR / 2), None, "taken back twice");
        assert_eq!(upcalls.unpark("two", now + PARKED_FOR), None, "expired");
        upcalls.park("three".to_owned(), 3, now);
        upcalls.drop_expired(now + PARKED_FOR);
        assert_eq!(upcalls.unpark("three", now), None, "dropped when expired");
    }

    /// Past [`MAX_PARKED`] parked calls, the oldest is dropped.
    #[test]
    fn the_oldest_parked_call_is_dropped_when_too_many_wait() {
        let upcalls: Upcalls<usize> = Upcalls::default();
        let now = Instant::now();
        for n in 0..=MAX_PARKED {
            upcalls.park(format!("p{n}"), n, now);
        }
        assert_eq!(upcalls.unpark("p0", now), None, "the oldest was dropped");
        assert_eq!(upcalls.unpark("p1", now), Some(1));
        assert_eq!(upcalls.unpark(&format!("p{MAX_PARKED}"), now), Some(MAX_PARKED));
    }
}
