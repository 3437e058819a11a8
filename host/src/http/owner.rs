//! The owner gate: who the caller of a request is. A request is the owner's when it
//! carries the local owner token (`Authorization: Bearer …`, what the CLI sends), or when it
//! is the console of a logged-in owner: this host's session cookie together with that
//! session's proof in `X-Butler-Proof` ([`super::session`]), our own `Origin`,
//! `Sec-Fetch-Site: same-origin`, and `X-Butler-Review: 1` (a header no cross-site form or
//! simple request can add). Headers alone prove nothing: any local process can send them;
//! nor does the cookie, which a page on another loopback port can be sent (cookies are not
//! scoped by port). The proof is what only the console's own page holds. The owner token
//! over the host's local socket also makes the caller the operator (the CLI's operator
//! commands). Nothing reachable from MCP or from a faculty's `host.call` passes.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, COOKIE, ORIGIN};
use axum::http::request::Parts;

use super::AppState;
use super::connection::Transport;
use super::console_session::{ConsoleSessions, session_from_cookies};
use super::gate::{GateConfig, is_own_origin};
use crate::instance::owner::same_secret;

/// The header the console sets on owner actions.
pub const REVIEW_HEADER: &str = "x-butler-review";
/// The header the console sends its session's proof in, on every request.
pub const PROOF_HEADER: &str = "x-butler-proof";

/// Who is calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caller {
    /// The owner (token, or the logged-in console).
    pub owner: bool,
    /// The operator (the owner token over the local socket).
    pub operator: bool,
}

impl Caller {
    /// Nothing for the owner; for anyone else 403 `owner_required`, saying `refusal`: what
    /// is the owner's, and where the owner does it.
    ///
    /// # Errors
    /// The 403, for a caller who is not the owner.
    pub fn must_be_owner(self, refusal: impl FnOnce() -> String) -> Result<(), crate::http::ApiError> {
        if self.owner { Ok(()) } else { Err(crate::http::ApiError::forbidden("owner_required", refusal())) }
    }

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
        Ok(caller(&parts.headers, local, state.gate, &state.owner_token, &state.console_sessions))
    }
}

/// The caller these headers (over this transport) prove.
#[must_use]
pub fn caller(headers: &HeaderMap, local: bool, gate: GateConfig, token: &str, sessions: &ConsoleSessions) -> Caller {
    if has_token(headers, token) {
        return Caller { owner: true, operator: local };
    }
    Caller { owner: console_session(headers, gate, sessions).is_some(), operator: false }
}

/// The public id of the console session these headers prove, when they are the logged-in
/// console's: our own `Origin`, `Sec-Fetch-Site: same-origin`, `X-Butler-Review: 1`, and
/// this host's session cookie with that session's proof.
#[must_use]
pub fn console_session(headers: &HeaderMap, gate: GateConfig, sessions: &ConsoleSessions) -> Option<String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let same_origin = header(ORIGIN.as_str()).is_some_and(|o| is_own_origin(gate, o))
        && header("sec-fetch-site") == Some("same-origin")
        && header(REVIEW_HEADER) == Some("1");
    if !same_origin {
        return None;
    }
    session_with_proof(headers, gate.port, header(PROOF_HEADER)?, sessions)
}

/// The public id of the live session whose cookie (on `port`) is among `headers` and
/// whose proof is `proof`.
#[must_use]
pub fn session_with_proof(headers: &HeaderMap, port: u16, proof: &str, sessions: &ConsoleSessions) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|cookies| session_from_cookies(port, cookies))
        .find_map(|session| sessions.check(session, proof))
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
    use crate::http::test_support::{headers, logged_in};

    const GATE: GateConfig = GateConfig { port: 19387 };
    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn the_console_needs_its_session_its_proof_and_every_same_origin_signal() {
        let (_dir, sessions, cookie, proof) = logged_in();
        let owner = |pairs: &[(&'static str, &str)]| caller(&headers(pairs), false, GATE, TOKEN, &sessions).owner;
        let own = ("origin", "http://127.0.0.1:19387");
        let same = ("sec-fetch-site", "same-origin");
        let review = ("x-butler-review", "1");
        let session = ("cookie", cookie.as_str());
        let proven = ("x-butler-proof", proof.as_str());
        assert!(owner(&[own, same, review, session, proven]));
        assert!(!owner(&[own, same, review, proven]), "the proof without the cookie");
        assert!(!owner(&[own, same, review]), "the three headers alone are what curl can send: refused");
        assert!(!owner(&[own, same, review, ("cookie", "butler_session_19387=forged"), proven]));
        let elsewhere = cookie.replace("19387", "19388");
        assert!(!owner(&[own, same, review, ("cookie", &elsewhere), proven]), "another host's cookie");
        assert!(!owner(&[same, review, session, proven]), "no Origin");
        assert!(!owner(&[own, review, session, proven]), "no Sec-Fetch-Site");
        assert!(!owner(&[own, same, session, proven]), "no X-Butler-Review");
        assert!(!owner(&[("origin", "http://evil.example"), same, review, session, proven]));
        assert!(!owner(&[own, ("sec-fetch-site", "same-site"), review, session, proven]));
        assert!(!owner(&[own, same, ("x-butler-review", "true"), session, proven]));
        assert!(
            owner(&[own, same, review, ("cookie", "a=b"), session, proven]),
            "the session in a second Cookie header"
        );
    }

    /// What a page on another loopback port can be sent (the cookie), with every header
    /// anyone can forge, is not the owner.
    #[test]
    fn a_taken_cookie_with_every_forgeable_header_is_not_the_owner() {
        let (_dir, sessions, cookie, proof) = logged_in();
        let link = sessions.new_link().expect("randomness");
        let other = sessions.redeem(&link, "test").expect("a second session");
        let owner = |pairs: &[(&'static str, &str)]| caller(&headers(pairs), false, GATE, TOKEN, &sessions).owner;
        let forged = [
            ("origin", "http://127.0.0.1:19387"),
            ("sec-fetch-site", "same-origin"),
            ("x-butler-review", "1"),
            ("cookie", cookie.as_str()),
        ];
        assert!(!owner(&forged), "the cookie and every forgeable header");
        let guesses = [String::new(), "1".into(), cookie.clone(), proof.to_uppercase(), format!("{proof} ")];
        for guess in &guesses {
            let mut with = forged.to_vec();
            with.push(("x-butler-proof", guess.as_str()));
            assert!(!owner(&with), "proof {guess:?}");
        }
        let mut with = forged.to_vec();
        with.push(("x-butler-proof", other.proof.as_str()));
        assert!(!owner(&with), "another session's proof");
        let other_cookie = format!("butler_session_19387={}", other.session);
        let mut with = forged.to_vec();
        with.push(("x-butler-proof", &proof));
        with[3] = ("cookie", &other_cookie);
        assert!(!owner(&with), "the proof with another session's cookie");
    }

    #[test]
    fn the_token_makes_the_owner_and_over_the_local_socket_the_operator() {
        let dir = tempfile::tempdir().expect("temp");
        let sessions = ConsoleSessions::load(dir.path());
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
