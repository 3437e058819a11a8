//! The tool calls in flight, by client request, so a client's cancellation reaches what
//! works on it — the provider, or the host tool's call, which is stopped as if its client
//! went away; and the calls that ended cancelled, until the activity log asks. A call that
//! is dropped before its answer (its client went away: a closed connection or stream is how
//! a 2026-07-28 client cancels) tells its provider to stop.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use butler_catalog::lock;

use crate::FastMap;
use crate::provider::Conn;

/// The most cancelled calls remembered for the activity log at once; beyond, the oldest
/// are forgotten.
pub(crate) const MAX_CANCELLED: usize = 256;

/// A client's request: (session, its id as JSON text).
type Key = (String, String);

/// The calls in flight and the calls that ended cancelled.
#[derive(Default)]
pub(crate) struct ToolCalls {
    /// Each call's connection and the id the provider knows it by, once it was sent.
    in_flight: Mutex<FastMap<Key, (Arc<Conn>, u64)>>,
    /// Each host tool call's cancel signal.
    host_in_flight: Mutex<FastMap<Key, Arc<tokio::sync::Notify>>>,
    cancelled: Mutex<VecDeque<Key>>,
}

impl ToolCalls {
    /// A call of `session`'s request `request_id` (its id as JSON text) begins.
    pub(crate) fn begin(&self, session: &str, request_id: String) -> InFlight<'_> {
        InFlight { calls: self, key: (session.to_owned(), request_id), answered: false }
    }

    /// A host tool's call of `session`'s request `request_id` begins: a client's
    /// cancellation of it ([`Self::cancel_host`]) ends [`HostInFlight::cancelled`].
    pub(crate) fn begin_host(&self, session: &str, request_id: String) -> HostInFlight<'_> {
        let key = (session.to_owned(), request_id);
        let signal = Arc::new(tokio::sync::Notify::new());
        lock(&self.host_in_flight).insert(key.clone(), Arc::clone(&signal));
        HostInFlight { calls: self, key, signal }
    }

    /// A client cancels `session`'s request `request_id`: if a host tool works on it, it is
    /// told (and the call remembered as cancelled); whether one did.
    pub(crate) fn cancel_host(&self, session: &str, request_id: &str) -> bool {
        let key = (session.to_owned(), request_id.to_owned());
        let Some(signal) = lock(&self.host_in_flight).remove(&key) else { return false };
        signal.notify_one();
        self.remember_cancelled(key);
        true
    }

    /// The call of `session`'s request `request_id` the client cancels: its connection and
    /// its id there, if it was sent and is not answered yet.
    pub(crate) fn take(&self, session: &str, request_id: &str) -> Option<(Arc<Conn>, u64)> {
        lock(&self.in_flight).remove(&(session.to_owned(), request_id.to_owned()))
    }

    /// Whether the call of `session`'s request `request_id` ended cancelled by its client
    /// (asked once: the answer is forgotten as it is given).
    pub(crate) fn was_cancelled(&self, session: &str, request_id: &str) -> bool {
        let mut cancelled = lock(&self.cancelled);
        let at = cancelled.iter().position(|(s, id)| s == session && id == request_id);
        at.and_then(|at| cancelled.remove(at)).is_some()
    }

    fn remember_cancelled(&self, key: Key) {
        let mut cancelled = lock(&self.cancelled);
        if cancelled.len() >= MAX_CANCELLED {
            cancelled.pop_front();
        }
        cancelled.push_back(key);
    }
}

/// A client's tool call while a provider works on it ([`ToolCalls::begin`]). Dropped
/// before [`InFlight::answered`], it tells the provider to stop.
pub(crate) struct InFlight<'a> {
    calls: &'a ToolCalls,
    key: Key,
    answered: bool,
}

impl InFlight<'_> {
    /// The call was sent on `conn` under `id`: from now on a cancellation reaches it.
    pub(crate) fn started(&self, conn: Arc<Conn>, id: u64) {
        lock(&self.calls.in_flight).insert(self.key.clone(), (conn, id));
    }

    /// The call has its answer; `cancelled` when the answer is that its client cancelled
    /// it (remembered for [`ToolCalls::was_cancelled`]).
    pub(crate) fn answered(mut self, cancelled: bool) {
        self.answered = true;
        if cancelled {
            self.calls.remember_cancelled(self.key.clone());
        }
    }
}

/// A host tool's call in flight ([`ToolCalls::begin_host`]).
pub(crate) struct HostInFlight<'a> {
    calls: &'a ToolCalls,
    key: Key,
    signal: Arc<tokio::sync::Notify>,
}

impl HostInFlight<'_> {
    /// Ends when the client cancels the call.
    pub(crate) async fn cancelled(&self) {
        self.signal.notified().await;
    }
}

impl Drop for HostInFlight<'_> {
    fn drop(&mut self) {
        lock(&self.calls.host_in_flight).remove(&self.key);
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let entry = lock(&self.calls.in_flight).remove(&self.key);
        if let Some((conn, id)) = entry
            && !self.answered
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move { conn.cancel(id, Some("the client went away".to_owned())).await });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cancelled call is told once, per session and request id, and only the last
    /// [`MAX_CANCELLED`] are remembered; a call that was never sent has nothing to cancel.
    #[test]
    fn cancelled_calls_are_told_once_and_remembered_within_a_bound() {
        let calls = ToolCalls::default();
        calls.begin("s1", "1".into()).answered(true);
        calls.begin("s2", "1".into()).answered(false);
        assert!(!calls.was_cancelled("s2", "1"), "answered, not cancelled");
        assert!(!calls.was_cancelled("s1", "2"), "another request");
        assert!(calls.was_cancelled("s1", "1"));
        assert!(!calls.was_cancelled("s1", "1"), "told once");

        for n in 0..=MAX_CANCELLED {
            calls.begin("s", n.to_string()).answered(true);
        }
        assert!(!calls.was_cancelled("s", "0"), "the oldest beyond the bound is forgotten");
        assert!(calls.was_cancelled("s", &MAX_CANCELLED.to_string()));

        let pending = calls.begin("s", "7".into());
        assert!(calls.take("s", "7").is_none(), "not sent yet: nothing to cancel");
        drop(pending);
        assert!(calls.take("s", "7").is_none());
    }

    /// A host tool's call is told of its cancellation even before it waits for it, once;
    /// one that ended has nothing to cancel.
    #[tokio::test]
    async fn a_host_tools_call_is_told_it_was_cancelled() {
        let calls = ToolCalls::default();
        let call = calls.begin_host("s", "9".into());
        assert!(!calls.cancel_host("s", "8"), "another request");
        assert!(calls.cancel_host("s", "9"));
        tokio::time::timeout(std::time::Duration::from_secs(5), call.cancelled()).await.expect("told");
        assert!(!calls.cancel_host("s", "9"), "told once");
        assert!(calls.was_cancelled("s", "9"), "remembered for the activity log");
        drop(call);
        let ended = calls.begin_host("s", "10".into());
        drop(ended);
        assert!(!calls.cancel_host("s", "10"), "ended: nothing to cancel");
    }
}
