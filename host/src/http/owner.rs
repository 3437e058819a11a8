//! The owner gate (S-H5), for approvals, confirmations, config edits and `external`
//! faculty commands. A request is the owner's when it carries the local owner token
//! (`Authorization: Bearer …`, what the CLI sends), or when it is the console itself: our
//! own `Origin`, `Sec-Fetch-Site: same-origin`, and `X-Butler-Review: 1` — a header no
//! cross-site form or simple request can add. Nothing reachable from MCP or from a
//! faculty's `host.call` passes it.

use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, ORIGIN};

use super::gate::{GateConfig, is_own_origin};
use crate::instance::owner::same_secret;

/// The header the console sets on owner actions.
pub const REVIEW_HEADER: &str = "x-butler-review";

/// Whether these headers pass the owner gate.
#[must_use]
pub fn is_owner(headers: &HeaderMap, gate: GateConfig, token: &str) -> bool {
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| same_secret(given.trim(), token));
    if bearer {
        return true;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    header(ORIGIN.as_str()).is_some_and(|o| is_own_origin(gate, o))
        && header("sec-fetch-site") == Some("same-origin")
        && header(REVIEW_HEADER) == Some("1")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GATE: GateConfig = GateConfig { port: 19387 };
    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().expect("value"));
        }
        map
    }

    #[test]
    fn console_needs_all_three_signals() {
        let own = ("origin", "http://127.0.0.1:19387");
        let same = ("sec-fetch-site", "same-origin");
        let review = ("x-butler-review", "1");
        assert!(is_owner(&headers(&[own, same, review]), GATE, TOKEN));
        assert!(!is_owner(&headers(&[same, review]), GATE, TOKEN), "no Origin");
        assert!(!is_owner(&headers(&[own, review]), GATE, TOKEN), "no Sec-Fetch-Site");
        assert!(!is_owner(&headers(&[own, same]), GATE, TOKEN), "no X-Butler-Review");
        assert!(!is_owner(&headers(&[("origin", "http://evil.example"), same, review]), GATE, TOKEN));
        assert!(!is_owner(&headers(&[own, ("sec-fetch-site", "same-site"), review]), GATE, TOKEN));
        assert!(!is_owner(&headers(&[own, same, ("x-butler-review", "true")]), GATE, TOKEN));
    }

    #[test]
    fn token() {
        assert!(is_owner(&headers(&[("authorization", &format!("Bearer {TOKEN}"))]), GATE, TOKEN));
        assert!(!is_owner(&headers(&[("authorization", "Bearer nope")]), GATE, TOKEN));
        assert!(!is_owner(&headers(&[("authorization", TOKEN)]), GATE, TOKEN));
        assert!(!is_owner(&HeaderMap::new(), GATE, TOKEN));
    }
}
