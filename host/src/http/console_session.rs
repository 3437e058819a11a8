//! The console's login: one-time login links, and the sessions they open — each a cookie
//! plus a proof, both needed.
//!
//! Loopback is not the owner, and headers any client can send prove nothing; the console's
//! owner actions need a secret only the console's own page holds. `butler serve` prints a
//! one-time login link (`butler console` asks the running host for another); visiting it
//! spends the link and opens a session with two secrets:
//!
//! - the **session cookie** — `HttpOnly`, `SameSite=Strict`, scoped to `/myspace-butler`
//!   and named after this host's port. Browsers do not scope cookies by port, so a page
//!   another user serves on another loopback port receives it with any request the owner's
//!   browser makes there under `/myspace-butler/`: the cookie alone therefore grants
//!   nothing;
//! - the **proof** — handed to the page once, in the fragment of the address the login
//!   redirects to (`/myspace-butler/#proof=…`; a fragment is never sent to any server).
//!   The console keeps it in `localStorage`, which is scoped to its origin and so to this
//!   host's port, and sends it as `X-Butler-Proof` on every request (see
//!   [`super::owner`], [`super::credential`]). No request that carries only the cookie
//!   can obtain it: it is stored hashed, and no route answers it.
//!
//! Sessions are kept hashed in `<stateDir>/sessions.json` (0600) so a restart does not log
//! the owner out. A session ends when it has not been used for [`IDLE_TTL`], at the latest
//! [`SESSION_TTL`] after its login, or when the owner ends it: the console's "Log out" and
//! its list of open sessions, or `butler console --logout-all`. A sessions file from a
//! build without proofs is not read: its sessions could not prove anything.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::instance::owner::same_secret;
use crate::lock;

/// A login link works once, within this time.
pub const LINK_TTL: Duration = Duration::from_secs(15 * 60);
/// A session not used for this long ends.
pub const IDLE_TTL: Duration = Duration::from_secs(12 * 3600);
/// A session ends this long after its login, however much it is used.
pub const SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// A session's last use is kept to this many seconds (each use does not write the file).
const TOUCH_EVERY_SECS: u64 = 60;
/// Unspent links kept at once; older ones are dropped first.
const MAX_LINKS: usize = 16;
/// Sessions kept at once; the one that expires first is dropped first.
const MAX_SESSIONS: usize = 32;
/// The file sessions are kept in.
const FILE: &str = "sessions.json";
/// The version of that file's shape.
const FILE_VERSION: u32 = 2;
/// Hex digits of a session's public id (a prefix of its stored hash).
const ID_LEN: usize = 16;

/// One open session, as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Record {
    /// Hash of the session's proof.
    proof: String,
    /// When it was opened (unix seconds).
    created: u64,
    /// When it was last used (unix seconds, to [`TOUCH_EVERY_SECS`]).
    last_used: u64,
    /// The browser that opened it, shortened.
    agent: String,
}

impl Record {
    fn expires(&self) -> u64 {
        (self.created + SESSION_TTL.as_secs()).min(self.last_used + IDLE_TTL.as_secs())
    }
}

/// `sessions.json`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Kept {
    version: u32,
    /// Hash of each session id → the session.
    sessions: HashMap<String, Record>,
}

/// The two secrets of a new session: the cookie's value and the page's proof.
#[derive(Debug, Clone)]
pub struct Login {
    /// The session id (the cookie's value).
    pub session: String,
    /// The proof the console's page keeps and sends.
    pub proof: String,
}

/// An open session, as the owner is shown it (never a secret or a hash of one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    /// Its public id (what ends it).
    pub id: String,
    /// When it was opened (unix seconds).
    pub created: u64,
    /// When it was last used (unix seconds, to the minute).
    pub last_used: u64,
    /// When it ends unless used again (unix seconds).
    pub expires: u64,
    /// The browser that opened it, shortened.
    pub agent: String,
}

/// Login links and sessions of one host.
pub struct ConsoleSessions {
    path: PathBuf,
    /// Hash of each unspent link token → when it expires (unix seconds).
    links: Mutex<HashMap<String, u64>>,
    /// Hash of each session id → the session, and a count of changes (what [`Self::save`]
    /// orders writes by).
    sessions: Mutex<(HashMap<String, Record>, u64)>,
    /// The change count last written to the file: an older snapshot is never written over
    /// a newer one (an ended session must not come back from a save that raced it).
    written: Mutex<u64>,
}

impl ConsoleSessions {
    /// The sessions kept under `state_dir` (none if the file is missing, unreadable or of
    /// an older shape).
    #[must_use]
    pub fn load(state_dir: &Path) -> Self {
        let path = state_dir.join(FILE);
        let now = now();
        let sessions: HashMap<String, Record> = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Kept>(&bytes).ok())
            .filter(|kept| kept.version == FILE_VERSION)
            .map(|kept| kept.sessions.into_iter().filter(|(_, s)| s.expires() > now).collect())
            .unwrap_or_default();
        Self { path, links: Mutex::new(HashMap::new()), sessions: Mutex::new((sessions, 0)), written: Mutex::new(0) }
    }

    /// A new one-time login token (the caller makes it a URL); `None` when no randomness
    /// could be had.
    #[must_use]
    pub fn new_link(&self) -> Option<String> {
        let token = crate::instance::owner::random_secret().ok()?;
        let now = now();
        let mut links = lock(&self.links);
        links.retain(|_, expires| *expires > now);
        while links.len() >= MAX_LINKS {
            let Some(oldest) = links.iter().min_by_key(|(_, e)| **e).map(|(k, _)| k.clone()) else { break };
            links.remove(&oldest);
        }
        links.insert(hash(&token), now + LINK_TTL.as_secs());
        Some(token)
    }

    /// Spends login token `token` for the browser that says it is `user_agent`: a new
    /// session's secrets when the link was valid and unspent.
    #[must_use]
    pub fn redeem(&self, token: &str, user_agent: &str) -> Option<Login> {
        let expires = lock(&self.links).remove(&hash(token))?;
        let now = now();
        if expires <= now {
            return None;
        }
        let login = Login {
            session: crate::instance::owner::random_secret().ok()?,
            proof: crate::instance::owner::random_secret().ok()?,
        };
        let record = Record { proof: hash(&login.proof), created: now, last_used: now, agent: short_agent(user_agent) };
        {
            let mut guard = lock(&self.sessions);
            let (sessions, changes) = &mut *guard;
            sessions.retain(|_, s| s.expires() > now);
            while sessions.len() >= MAX_SESSIONS {
                let Some(first) = sessions.iter().min_by_key(|(_, s)| s.expires()).map(|(k, _)| k.clone()) else {
                    break;
                };
                sessions.remove(&first);
            }
            sessions.insert(hash(&login.session), record);
            *changes += 1;
        }
        self.save();
        Some(login)
    }

    /// The public id of the live session whose id is `session` and whose proof is `proof`
    /// — both must match — and the session counts as used now. `None` otherwise.
    #[must_use]
    pub fn check(&self, session: &str, proof: &str) -> Option<String> {
        self.check_at(session, proof, now())
    }

    fn check_at(&self, session: &str, proof: &str, now: u64) -> Option<String> {
        let key = hash(session);
        let touched = {
            let mut guard = lock(&self.sessions);
            let (sessions, changes) = &mut *guard;
            let record = sessions.get_mut(&key).filter(|s| s.expires() > now)?;
            if !same_secret(&hash(proof), &record.proof) {
                return None;
            }
            let stale = now.saturating_sub(record.last_used) >= TOUCH_EVERY_SECS;
            if stale {
                record.last_used = now;
                *changes += 1;
            }
            stale
        };
        if touched {
            self.save();
        }
        Some(public_id(&key))
    }

    /// The open sessions, the most recently used first.
    #[must_use]
    pub fn list(&self) -> Vec<SessionInfo> {
        let now = now();
        let mut all: Vec<SessionInfo> = lock(&self.sessions)
            .0
            .iter()
            .filter(|(_, s)| s.expires() > now)
            .map(|(key, s)| SessionInfo {
                id: public_id(key),
                created: s.created,
                last_used: s.last_used,
                expires: s.expires(),
                agent: s.agent.clone(),
            })
            .collect();
        all.sort_by(|a, b| b.last_used.cmp(&a.last_used).then_with(|| a.id.cmp(&b.id)));
        all
    }

    /// Ends the session whose public id is `id`; whether there was one.
    #[must_use]
    pub fn end(&self, id: &str) -> bool {
        let ended = {
            let mut guard = lock(&self.sessions);
            let (sessions, changes) = &mut *guard;
            let before = sessions.len();
            sessions.retain(|key, _| public_id(key) != id);
            let ended = sessions.len() != before;
            *changes += u64::from(ended);
            ended
        };
        if ended {
            self.save();
        }
        ended
    }

    /// Ends every session; how many were open.
    pub fn end_all(&self) -> usize {
        let now = now();
        let ended = {
            let mut guard = lock(&self.sessions);
            let (sessions, changes) = &mut *guard;
            let live = sessions.values().filter(|s| s.expires() > now).count();
            sessions.clear();
            *changes += 1;
            live
        };
        self.save();
        ended
    }

    /// Writes the sessions as they are now, unless a newer state was written already.
    fn save(&self) {
        let (snapshot, changes) = {
            let guard = lock(&self.sessions);
            (Kept { version: FILE_VERSION, sessions: guard.0.clone() }, guard.1)
        };
        let bytes = match serde_json::to_vec(&snapshot) {
            Ok(bytes) => bytes,
            Err(_) => return,
        };
        // Held across the write only: it takes no other lock.
        let mut written = lock(&self.written);
        if *written >= changes {
            return;
        }
        match crate::instance::write_private(&self.path, &bytes) {
            Ok(()) => *written = changes,
            Err(e) => tracing::warn!(file = %self.path.display(), "cannot keep the console sessions: {e}"),
        }
    }
}

/// The public id of the session kept under `key`.
fn public_id(key: &str) -> String {
    key.chars().take(ID_LEN).collect()
}

/// A browser's `User-Agent` shortened to its browser and system (`Chrome 131 · Linux`),
/// or its first characters when neither is recognised.
#[must_use]
pub fn short_agent(user_agent: &str) -> String {
    let version = |marker: &str| {
        user_agent
            .split(marker)
            .nth(1)
            .map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next().unwrap_or_default().to_owned())
    };
    let browser = [("Edg/", "Edge"), ("OPR/", "Opera"), ("Firefox/", "Firefox"), ("Chrome/", "Chrome")]
        .iter()
        .find_map(|(marker, name)| version(marker).map(|v| format!("{name} {v}")))
        .or_else(|| {
            user_agent.contains("Safari/").then(|| format!("Safari {}", version("Version/").unwrap_or_default()))
        })
        .map(|b| b.trim_end().to_owned());
    let system = [
        ("Android", "Android"),
        ("iPhone", "iOS"),
        ("iPad", "iPadOS"),
        ("Windows", "Windows"),
        ("Mac OS X", "macOS"),
        ("CrOS", "ChromeOS"),
        ("Linux", "Linux"),
    ]
    .iter()
    .find(|(marker, _)| user_agent.contains(marker))
    .map(|(_, name)| *name);
    match (browser, system) {
        (Some(browser), Some(system)) => format!("{browser} · {system}"),
        (Some(browser), None) => browser,
        (None, Some(system)) => system.to_owned(),
        (None, None) if user_agent.trim().is_empty() => "unknown".to_owned(),
        (None, None) => crate::text::clip(user_agent.trim(), 40),
    }
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

/// The `Set-Cookie` value that makes the browser drop this host's session cookie.
#[must_use]
pub fn clear_cookie(port: u16) -> String {
    format!("{}=; HttpOnly; SameSite=Strict; Path=/myspace-butler; Max-Age=0", cookie_name(port))
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

    const CHROME: &str =
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

    fn logged_in() -> (tempfile::TempDir, ConsoleSessions, Login) {
        let dir = tempfile::tempdir().expect("temp");
        let sessions = ConsoleSessions::load(dir.path());
        let link = sessions.new_link().expect("randomness");
        let login = sessions.redeem(&link, CHROME).expect("a fresh link logs in");
        (dir, sessions, login)
    }

    #[test]
    fn a_link_works_once_and_its_session_survives_a_restart() {
        let (dir, sessions, login) = logged_in();
        assert!(sessions.check(&login.session, &login.proof).is_some());
        let link = sessions.new_link().expect("randomness");
        assert!(sessions.redeem(&link, "").is_some());
        assert!(sessions.redeem(&link, "").is_none(), "a spent link does not work again");
        assert!(sessions.redeem("not-a-link", "").is_none());
        assert!(sessions.check(&link, &login.proof).is_none(), "a link is not a session");
        let restarted = ConsoleSessions::load(dir.path());
        assert!(restarted.check(&login.session, &login.proof).is_some(), "kept across a restart");
        let kept = std::fs::read_to_string(dir.path().join(FILE)).expect("file");
        assert!(!kept.contains(&login.session) && !kept.contains(&login.proof), "kept hashed, never as is");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(FILE)).expect("file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn the_cookie_alone_or_the_proof_alone_or_another_sessions_proof_is_nothing() {
        let (_dir, sessions, login) = logged_in();
        let link = sessions.new_link().expect("randomness");
        let other = sessions.redeem(&link, CHROME).expect("a second session");
        assert!(sessions.check(&login.session, "").is_none(), "the cookie without a proof");
        assert!(sessions.check(&login.session, &login.session).is_none(), "the cookie as its own proof");
        assert!(sessions.check("", &login.proof).is_none(), "the proof without the cookie");
        assert!(sessions.check(&login.proof, &login.proof).is_none(), "the proof as the cookie");
        assert!(sessions.check(&login.session, &other.proof).is_none(), "another session's proof");
        assert!(sessions.check(&other.session, &login.proof).is_none(), "another session's proof");
        assert_ne!(sessions.check(&login.session, &login.proof), sessions.check(&other.session, &other.proof));
    }

    #[test]
    fn an_idle_session_ends_and_so_does_an_old_one_however_used() {
        let (dir, sessions, login) = logged_in();
        let start = lock(&sessions.sessions).0.values().next().map(|s| s.created).expect("a session");
        let idle = IDLE_TTL.as_secs();
        assert!(sessions.check_at(&login.session, &login.proof, start + idle + 1).is_none(), "idle too long");
        // Used in time, it lives on from its last use; never past its absolute end.
        let mut at = start;
        while at + idle - 60 < start + SESSION_TTL.as_secs() {
            at += idle - 60;
            assert!(sessions.check_at(&login.session, &login.proof, at).is_some(), "used after {}s", at - start);
        }
        assert!(sessions.check_at(&login.session, &login.proof, start + SESSION_TTL.as_secs()).is_none());
        // The last use is kept: a restart still knows when the session was last used.
        let restarted = ConsoleSessions::load(dir.path());
        assert_eq!(lock(&restarted.sessions).0.values().next().map(|s| s.last_used), Some(at));
    }

    #[test]
    fn sessions_are_listed_and_ended_one_or_all() {
        let (dir, sessions, login) = logged_in();
        let link = sessions.new_link().expect("randomness");
        let other = sessions.redeem(&link, "curl/8.0").expect("a second session");
        let listed = sessions.list();
        assert_eq!(listed.len(), 2);
        let mine = sessions.check(&login.session, &login.proof).expect("live");
        let theirs = sessions.check(&other.session, &other.proof).expect("live");
        let shown = serde_json::to_string(&listed).expect("json");
        assert!(!shown.contains(&login.session) && !shown.contains(&login.proof), "{shown}");
        assert!(!shown.contains(&hash(&login.session)), "not even the stored hash: {shown}");
        assert!(listed.iter().any(|s| s.id == mine && s.agent == "Chrome 131 · Linux"), "{listed:?}");
        assert!(sessions.end(&theirs));
        assert!(!sessions.end(&theirs), "already ended");
        assert!(sessions.check(&other.session, &other.proof).is_none());
        assert!(sessions.check(&login.session, &login.proof).is_some(), "the other one stays");
        assert!(ConsoleSessions::load(dir.path()).check(&other.session, &other.proof).is_none(), "ended on disk too");
        assert_eq!(sessions.end_all(), 1);
        assert!(sessions.check(&login.session, &login.proof).is_none());
        assert!(ConsoleSessions::load(dir.path()).list().is_empty(), "ended on disk too");
    }

    #[test]
    fn a_sessions_file_without_proofs_is_not_read() {
        let dir = tempfile::tempdir().expect("temp");
        let old = format!("{{\"{}\": {}}}", hash("old-session"), now() + 3600);
        std::fs::write(dir.path().join(FILE), old).expect("write");
        assert!(ConsoleSessions::load(dir.path()).list().is_empty());
    }

    #[test]
    fn links_and_sessions_are_bounded() {
        let dir = tempfile::tempdir().expect("temp");
        let sessions = ConsoleSessions::load(dir.path());
        let links: Vec<String> = (0..MAX_LINKS + 5).map(|_| sessions.new_link().expect("randomness")).collect();
        assert_eq!(lock(&sessions.links).len(), MAX_LINKS);
        for _ in 0..3 {
            for link in links.iter().rev().take(MAX_LINKS) {
                let _ = sessions.redeem(link, "");
            }
        }
        for _ in 0..MAX_SESSIONS + 3 {
            let link = sessions.new_link().expect("randomness");
            let _ = sessions.redeem(&link, "");
        }
        assert_eq!(lock(&sessions.sessions).0.len(), MAX_SESSIONS);
    }

    #[test]
    fn only_this_hosts_cookie_is_read() {
        let header = "butler_session_1=aaa; butler_session_19387=bbb; other=ccc";
        assert_eq!(session_from_cookies(19387, header), Some("bbb"));
        assert_eq!(session_from_cookies(1, header), Some("aaa"));
        assert_eq!(session_from_cookies(2, header), None);
        assert_eq!(session_from_cookies(193, "butler_session_19387=bbb"), None, "not a prefix match");
    }

    #[test]
    fn user_agents_are_shortened() {
        assert_eq!(short_agent(CHROME), "Chrome 131 · Linux");
        assert_eq!(
            short_agent("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0"),
            "Firefox 133 · Windows"
        );
        assert_eq!(
            short_agent(
                "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15"
            ),
            "Safari 18 · macOS"
        );
        assert_eq!(short_agent(""), "unknown");
        assert_eq!(short_agent("curl/8.0"), "curl/8.0");
        assert!(short_agent(&"x".repeat(500)).chars().count() <= 41);
    }
}
