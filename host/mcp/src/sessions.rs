//! The MCP sessions of 2025-11-25 clients: opened at `initialize`, each with what the client
//! declared, its log level and its resource subscriptions; at most [`MAX_SESSIONS`] (the
//! oldest goes), and one idle longer than the hub's `session_idle` with no notification
//! stream open ends. A 2026-07-28 client has no session (each request says what it needs).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use butler_catalog::lock;

use crate::{FastMap, Updated};

/// The most MCP sessions open at once; beyond, the oldest is ended.
pub const MAX_SESSIONS: usize = 1024;

/// One MCP session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The endpoint it came through ([`View::endpoint`](crate::View::endpoint)).
    pub endpoint: String,
    /// The protocol revision agreed at `initialize`.
    pub version: String,
    /// The capabilities the client declared at `initialize`.
    pub capabilities: Value,
    /// The least severe log level it wants (`logging/setLevel`); `None`: every level.
    pub log_level: Option<String>,
    /// The resources it subscribed to: the URI it knows each by, and the provider's
    /// resource that is (URIs are per endpoint).
    pub subscriptions: HashMap<String, Updated>,
}

#[derive(Default)]
struct Open {
    /// Shared with the requests that read them; changed copy-on-write.
    by_id: FastMap<String, Arc<Session>>,
    order: VecDeque<String>,
    /// When each session last sent a request, and how many notification streams it has open.
    seen: FastMap<String, (Instant, usize)>,
}

impl Open {
    fn forget(&mut self, id: &str) -> bool {
        self.order.retain(|s| s != id);
        self.seen.remove(id);
        self.by_id.remove(id).is_some()
    }

    /// Ends the sessions idle longer than `idle` with no stream open; how many.
    fn expire(&mut self, idle: Duration) -> usize {
        let gone: Vec<String> = self
            .seen
            .iter()
            .filter(|(_, (at, streams))| *streams == 0 && at.elapsed() >= idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            self.forget(id);
        }
        gone.len()
    }
}

/// The hub's open MCP sessions, each ended once idle past `idle` with no stream open.
pub(crate) struct Sessions {
    open: Mutex<Open>,
    /// How long a session without a request or an open stream lives, in ms.
    idle_ms: AtomicU64,
}

/// A session's notification stream, while it is open: the session does not expire.
pub struct SessionStream {
    sessions: Weak<Sessions>,
    id: String,
}

impl Drop for SessionStream {
    fn drop(&mut self) {
        if let Some(sessions) = self.sessions.upgrade()
            && let Some((at, streams)) = lock(&sessions.open).seen.get_mut(&self.id)
        {
            *streams = streams.saturating_sub(1);
            *at = Instant::now();
        }
    }
}

impl Sessions {
    /// No sessions yet; one idle longer than `idle` ends.
    pub(crate) fn new(idle: Duration) -> Arc<Self> {
        Arc::new(Self { open: Mutex::new(Open::default()), idle_ms: AtomicU64::new(crate::millis(idle)) })
    }

    /// How long a session may be idle.
    pub(crate) fn idle(&self) -> Duration {
        Duration::from_millis(self.idle_ms.load(Ordering::Relaxed))
    }

    /// From now on, a session idle longer than `idle` ends.
    pub(crate) fn set_idle(&self, idle: Duration) {
        self.idle_ms.store(crate::millis(idle), Ordering::Relaxed);
    }

    /// Opens a session with `id` (ending the idle ones, and the oldest when
    /// [`MAX_SESSIONS`] are open).
    pub(crate) fn open(&self, id: String, session: Session) {
        let mut open = lock(&self.open);
        open.expire(self.idle());
        if open.order.len() >= MAX_SESSIONS
            && let Some(oldest) = open.order.front().cloned()
        {
            open.forget(&oldest);
        }
        open.order.push_back(id.clone());
        open.seen.insert(id.clone(), (Instant::now(), 0));
        open.by_id.insert(id, Arc::new(session));
    }

    /// Session `id`, if open and not idle past its time; it counts as used from now.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        let mut open = lock(&self.open);
        let seen = open.seen.get_mut(id)?;
        if seen.1 == 0 && seen.0.elapsed() >= self.idle() {
            open.forget(id);
            return None;
        }
        seen.0 = Instant::now();
        open.by_id.get(id).cloned()
    }

    /// Changes session `id` with `change`; whether it is open.
    pub(crate) fn update(&self, id: &str, change: impl FnOnce(&mut Session)) -> bool {
        let mut open = lock(&self.open);
        let Some(session) = open.by_id.get_mut(id) else { return false };
        change(Arc::make_mut(session));
        true
    }

    /// What `read` finds in session `id`, if it is open (not counted as use).
    pub(crate) fn read<R>(&self, id: &str, read: impl FnOnce(&Session) -> Option<R>) -> Option<R> {
        lock(&self.open).by_id.get(id).and_then(|session| read(session))
    }

    /// Whether any open session subscribes to `resource`.
    pub(crate) fn any_subscribes_to(&self, resource: &Updated) -> bool {
        lock(&self.open).by_id.values().any(|s| s.subscriptions.values().any(|r| r == resource))
    }

    /// Session `id` opened a notification stream: it does not expire while the returned
    /// guard lives.
    pub(crate) fn stream(self: &Arc<Self>, id: &str) -> SessionStream {
        if let Some((_, streams)) = lock(&self.open).seen.get_mut(id) {
            *streams += 1;
        }
        SessionStream { sessions: Arc::downgrade(self), id: id.to_owned() }
    }

    /// Ends session `id`; whether it was open.
    pub(crate) fn close(&self, id: &str) -> bool {
        lock(&self.open).forget(id)
    }

    /// Ends the sessions idle past their time with no stream open; how many.
    pub(crate) fn expire(&self) -> usize {
        lock(&self.open).expire(self.idle())
    }

    /// How many are open.
    pub(crate) fn count(&self) -> usize {
        lock(&self.open).by_id.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session {
            endpoint: "main".to_owned(),
            version: "2025-11-25".to_owned(),
            capabilities: Value::Null,
            log_level: None,
            subscriptions: HashMap::new(),
        }
    }

    /// A session idle past its time ends — unless a notification stream of it is open,
    /// and then only once the stream has closed.
    #[test]
    fn an_idle_session_ends_unless_a_stream_of_it_is_open() {
        let idle = Duration::from_millis(50);
        let sessions = Sessions::new(idle);
        sessions.open("quiet".to_owned(), session());
        sessions.open("listening".to_owned(), session());
        let stream = sessions.stream("listening");
        assert_eq!(sessions.expire(), 0, "neither is idle yet");
        std::thread::sleep(idle);
        assert_eq!(sessions.expire(), 1);
        assert!(sessions.get("quiet").is_none(), "idle, no stream: ended");
        assert!(sessions.get("listening").is_some(), "its stream keeps it");
        drop(stream);
        assert!(sessions.get("listening").is_some(), "a stream that just closed counts as use");
        std::thread::sleep(idle);
        assert!(sessions.get("listening").is_none(), "idle once its stream closed");
        assert_eq!(sessions.count(), 0);
    }

    /// A session in use stays; past [`MAX_SESSIONS`], the oldest ends.
    #[test]
    fn the_oldest_session_ends_when_too_many_are_open() {
        let sessions = Sessions::new(Duration::from_secs(3600));
        for n in 0..=MAX_SESSIONS {
            sessions.open(format!("s{n}"), session());
        }
        assert_eq!(sessions.count(), MAX_SESSIONS);
        assert!(sessions.get("s0").is_none(), "the oldest ended");
        assert!(sessions.get("s1").is_some() && sessions.get(&format!("s{MAX_SESSIONS}")).is_some());
        assert!(sessions.close("s1") && !sessions.close("s1"), "closed once");
    }

    /// A change reaches the session (copy-on-write: a reader holding it keeps what it
    /// read), and what sessions subscribe to is known across them.
    #[test]
    fn a_change_reaches_the_session_and_subscriptions_are_seen_across_sessions() {
        let sessions = Sessions::new(Duration::from_secs(3600));
        sessions.open("a".to_owned(), session());
        let before = sessions.get("a").expect("open");
        let resource = Updated { provider: "fs".to_owned(), uri: "file:///a".to_owned() };
        assert!(!sessions.any_subscribes_to(&resource));
        assert!(sessions.update("a", |s| {
            s.log_level = Some("info".to_owned());
            s.subscriptions.insert("file:///a".to_owned(), resource.clone());
        }));
        assert!(!sessions.update("b", |_| {}), "no session b");
        assert_eq!(before.log_level, None, "a reader keeps what it read");
        assert_eq!(sessions.read("a", |s| s.log_level.clone()), Some("info".to_owned()));
        assert!(sessions.any_subscribes_to(&resource));
    }
}
