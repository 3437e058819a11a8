//! The console's login: one-time login links and the session cookie they set.
//!
//! Loopback is not the owner, and headers any client can send prove nothing; the console's
//! owner actions need a secret only the owner's browser holds. `butler serve` prints a
//! one-time login link (`butler console` asks the running host for another); visiting it
//! sets the session cookie — `HttpOnly` (no script reads it), `SameSite=Strict` (no other
//! site's page sends it), scoped to `/myspace-butler` and named after this host's port —
//! and the link is spent. Sessions are kept hashed in `<stateDir>/sessions.json` (0600) so
//! a restart does not log the owner out; they expire after [`SESSION_TTL`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::lock;

/// A login link works once, within this time.
pub const LINK_TTL: Duration = Duration::from_secs(15 * 60);
/// A session lasts this long.
pub const SESSION_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
/// Unspent links kept at once; older ones are dropped first.
const MAX_LINKS: usize = 16;
/// Sessions kept at once; the oldest is dropped first.
const MAX_SESSIONS: usize = 32;
/// The file sessions are kept in.
const FILE: &str = "sessions.json";

/// Login links and sessions of one host.
pub struct Sessions {
    path: PathBuf,
    /// Hash of each unspent link token → when it expires (unix seconds).
    links: Mutex<HashMap<String, u64>>,
    /// Hash of each session id → when it expires (unix seconds).
    sessions: Mutex<HashMap<String, u64>>,
}

impl Sessions {
    /// The sessions kept under `state_dir` (none if the file is missing or unreadable).
    #[must_use]
    pub fn load(state_dir: &Path) -> Self {
        let path = state_dir.join(FILE);
        let now = now();
        let sessions: HashMap<String, u64> = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .map(|all: HashMap<String, u64>| all.into_iter().filter(|(_, expires)| *expires > now).collect())
            .unwrap_or_default();
        Self { path, links: Mutex::new(HashMap::new()), sessions: Mutex::new(sessions) }
    }

    /// A new one-time login token (the caller makes it a URL); `None` when no randomness
    /// could be had.
    #[must_use]
    pub fn new_link(&self) -> Option<String> {
        let token = crate::instance::owner::random_secret().ok()?;
        insert_bounded(&mut lock(&self.links), hash(&token), LINK_TTL, MAX_LINKS);
        Some(token)
    }

    /// Spends login token `token`: a new session id when it was valid and unspent.
    #[must_use]
    pub fn redeem(&self, token: &str) -> Option<String> {
        let expires = lock(&self.links).remove(&hash(token))?;
        if expires <= now() {
            return None;
        }
        let session = crate::instance::owner::random_secret().ok()?;
        insert_bounded(&mut lock(&self.sessions), hash(&session), SESSION_TTL, MAX_SESSIONS);
        self.save();
        Some(session)
    }

    /// Whether `session` is a live session id.
    #[must_use]
    pub fn is_valid(&self, session: &str) -> bool {
        lock(&self.sessions).get(&hash(session)).is_some_and(|expires| *expires > now())
    }

    fn save(&self) {
        let bytes = match serde_json::to_vec(&*lock(&self.sessions)) {
            Ok(bytes) => bytes,
            Err(_) => return,
        };
        if let Err(e) = crate::instance::write_private(&self.path, &bytes) {
            tracing::warn!(file = %self.path.display(), "cannot keep the console sessions: {e}");
        }
    }
}

/// Inserts `key`, valid for `ttl`, into `map` after dropping what expired and, while
/// `max` are kept, the entry that expires first.
fn insert_bounded(map: &mut HashMap<String, u64>, key: String, ttl: Duration, max: usize) {
    let now = now();
    map.retain(|_, expires| *expires > now);
    while map.len() >= max {
        let Some(oldest) = map.iter().min_by_key(|(_, e)| **e).map(|(k, _)| k.clone()) else { break };
        map.remove(&oldest);
    }
    map.insert(key, now + ttl.as_secs());
}

/// The session cookie's name for the host on `port` (cookies are not scoped by port, so
/// two hosts on one machine must not share a name).
#[must_use]
pub fn cookie_name(port: u16) -> String {
    format!("butler_session_{port}")
}

/// The `Set-Cookie` value that starts `session`.
#[must_use]
pub fn set_cookie(port: u16, session: &str) -> String {
    format!(
        "{}={session}; HttpOnly; SameSite=Strict; Path=/myspace-butler; Max-Age={}",
        cookie_name(port),
        SESSION_TTL.as_secs()
    )
}

/// The session id in a `Cookie` header, if this host's cookie is there.
#[must_use]
pub fn session_from_cookies(port: u16, header: &str) -> Option<&str> {
    let name = cookie_name(port);
    header.split(';').map(str::trim).find_map(|pair| pair.strip_prefix(name.as_str())?.strip_prefix('='))
}

fn hash(token: &str) -> String {
    data_encoding::HEXLOWER.encode(&Sha256::digest(token.as_bytes()))
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_works_once_and_its_session_survives_a_restart() {
        let dir = tempfile::tempdir().expect("temp");
        let sessions = Sessions::load(dir.path());
        let link = sessions.new_link().expect("randomness");
        let session = sessions.redeem(&link).expect("a fresh link logs in");
        assert!(sessions.redeem(&link).is_none(), "a spent link does not work again");
        assert!(sessions.redeem("not-a-link").is_none());
        assert!(sessions.is_valid(&session));
        assert!(!sessions.is_valid(&link), "a link is not a session");
        let restarted = Sessions::load(dir.path());
        assert!(restarted.is_valid(&session), "kept across a restart");
        let kept = std::fs::read_to_string(dir.path().join(FILE)).expect("file");
        assert!(!kept.contains(&session), "kept hashed, never as is");
    }

    #[test]
    fn links_and_sessions_are_bounded() {
        let dir = tempfile::tempdir().expect("temp");
        let sessions = Sessions::load(dir.path());
        let links: Vec<String> = (0..MAX_LINKS + 5).map(|_| sessions.new_link().expect("randomness")).collect();
        assert_eq!(lock(&sessions.links).len(), MAX_LINKS);
        for link in links.iter().rev().take(MAX_SESSIONS.min(MAX_LINKS)) {
            let _ = sessions.redeem(link);
        }
        assert!(lock(&sessions.sessions).len() <= MAX_SESSIONS);
    }

    #[test]
    fn only_this_hosts_cookie_is_read() {
        let header = "butler_session_1=aaa; butler_session_19387=bbb; other=ccc";
        assert_eq!(session_from_cookies(19387, header), Some("bbb"));
        assert_eq!(session_from_cookies(1, header), Some("aaa"));
        assert_eq!(session_from_cookies(2, header), None);
        assert_eq!(session_from_cookies(193, "butler_session_19387=bbb"), None, "not a prefix match");
    }
}
