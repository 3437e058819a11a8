//! The owner gate: who the caller of a request is. A request is the owner's when it
//! carries the local owner token (`Authorization: Bearer …`, what the CLI sends), or when it
//! is the console of a logged-in owner: this host's session cookie ([`super::session`]),
//! our own `Origin`, `Sec-Fetch-Site: same-origin`, and `X-Butler-Review: 1` (a header no
//! cross-site form or simple request can add). Headers alone prove nothing: any local
//! process can send them. The owner token over the host's local socket also makes the
//! caller the operator (the CLI's operator commands). Nothing reachable from MCP or from a
//! faculty's `host.call` passes.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, COOKIE, ORIGIN};
use axum::http::request::Parts;

use super::AppState;
use super::connection::Transport;
use super::gate::{GateConfig, is_own_origin};
use super::session::{Sessions, session_from_cookies};
use crate::instance::owner::same_secret;

/// The header the console sets on owner actions.
pub const REVIEW_HEADER: &str = "x-butler-review";

/// Who is calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caller {
    /// The owner (token, or the logged-in console).
    pub owner: bool,
    /// The operator (the owner token over the local socket).
    pub operator: bool,
}

impl Caller {
    /// A top-level faculty call made by this caller.
    #[must_use]
    pub fn context(self) -> butler_faculty::CallContext {
        if self.operator {
            butler_faculty::CallContext::operator().by("operator")
        } else if self.owner {
            butler_faculty::CallContext::top(true).by("owner")
        } else {
            butler_faculty::CallContext::top(false)
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let local = parts.extensions.get::<Transport>() == Some(&Transport::Local);
        Ok(caller(&parts.headers, local, state.gate, &state.owner_token, &state.sessions))
    }
}

/// The caller these headers (over this transport) prove.
#[must_use]
pub fn caller(headers: &HeaderMap, local: bool, gate: GateConfig, token: &str, sessions: &Sessions) -> Caller {
    if has_token(headers, token) {
        return Caller { owner: true, operator: local };
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let console = header(ORIGIN.as_str()).is_some_and(|o| is_own_origin(gate, o))
        && header("sec-fetch-site") == Some("same-origin")
        && header(REVIEW_HEADER) == Some("1")
        && headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|cookies| session_from_cookies(gate.port, cookies))
            .any(|session| sessions.is_valid(session));
    Caller { owner: console, operator: false }
}

/// Whether the request carries the owner token.
#[must_use]
pub fn has_token(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| same_secret(given.trim(), token))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GATE: GateConfig = GateConfig { port: 19387 };
    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, v.parse().expect("value"));
        }
        map
    }

    fn logged_in() -> (tempfile::TempDir, Sessions, String) {
        let dir = tempfile::tempdir().expect("temp");
        let sessions = Sessions::load(dir.path());
        let link = sessions.new_link().expect("randomness");
        let session = sessions.redeem(&link).expect("session");
        (dir, sessions, format!("butler_session_19387={session}"))
    }

    #[test]
    fn the_console_needs_its_session_and_every_same_origin_signal() {
        let (_dir, sessions, cookie) = logged_in();
        let owner = |pairs: &[(&'static str, &str)]| caller(&headers(pairs), false, GATE, TOKEN, &sessions).owner;
        let own = ("origin", "http://127.0.0.1:19387");
        let same = ("sec-fetch-site", "same-origin");
        let review = ("x-butler-review", "1");
        let session = ("cookie", cookie.as_str());
        assert!(owner(&[own, same, review, session]));
        assert!(!owner(&[own, same, review]), "the three headers alone are what curl can send: refused");
        assert!(!owner(&[own, same, review, ("cookie", "butler_session_19387=forged")]));
        assert!(!owner(&[own, same, review, ("cookie", &cookie.replace("19387", "19388"))]), "another host's cookie");
        assert!(!owner(&[same, review, session]), "no Origin");
        assert!(!owner(&[own, review, session]), "no Sec-Fetch-Site");
        assert!(!owner(&[own, same, session]), "no X-Butler-Review");
        assert!(!owner(&[("origin", "http://evil.example"), same, review, session]));
        assert!(!owner(&[own, ("sec-fetch-site", "same-site"), review, session]));
        assert!(!owner(&[own, same, ("x-butler-review", "true"), session]));
        assert!(owner(&[own, same, review, ("cookie", "a=b"), session]), "the session in a second Cookie header");
    }

    #[test]
    fn the_token_makes_the_owner_and_over_the_local_socket_the_operator() {
        let dir = tempfile::tempdir().expect("temp");
        let sessions = Sessions::load(dir.path());
        let bearer = format!("Bearer {TOKEN}");
        let with_token = headers(&[("authorization", &bearer)]);
        assert_eq!(caller(&with_token, false, GATE, TOKEN, &sessions), Caller { owner: true, operator: false });
        assert_eq!(caller(&with_token, true, GATE, TOKEN, &sessions), Caller { owner: true, operator: true });
        assert_eq!(
            caller(&headers(&[("authorization", "Bearer nope")]), true, GATE, TOKEN, &sessions),
            Caller::default()
        );
        assert_eq!(caller(&headers(&[("authorization", TOKEN)]), true, GATE, TOKEN, &sessions), Caller::default());
        assert_eq!(
            caller(&HeaderMap::new(), true, GATE, TOKEN, &sessions),
            Caller::default(),
            "the socket alone is not the owner"
        );
    }
}
