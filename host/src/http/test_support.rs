//! What the HTTP modules' unit tests share: header maps and a logged-in console session.

use axum::http::HeaderMap;

use super::console_session::ConsoleSessions;

/// A header map of `pairs`, a name repeated when it is given twice.
pub fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.append(*k, v.parse().expect("header value"));
    }
    map
}

/// Sessions kept in a temp folder with one login: the folder, the sessions, the `Cookie`
/// header value for port 19387 and the session's proof.
pub fn logged_in() -> (tempfile::TempDir, ConsoleSessions, String, String) {
    let dir = tempfile::tempdir().expect("temp");
    let sessions = ConsoleSessions::load(dir.path());
    let link = sessions.new_link().expect("randomness");
    let login = sessions.redeem(&link, "test").expect("session");
    (dir, sessions, format!("butler_session_19387={}", login.session), login.proof)
}
