//! When a request must prove it is the owner's before any route runs.
//!
//! On Linux the listener knows the user behind each connection ([`super::peer`]) and
//! refuses other users' outright, so a connection it could verify as the owner's user
//! needs nothing more for reads and MCP. A connection whose user the kernel could **not**
//! say — or every connection, when the root config sets `"mcp": {"auth": "token"}` — must
//! carry a credential on every API route and on `/mcp`: the owner token
//! (`Authorization: Bearer …`, what the CLI and `butler mcp stdio` send, and what an MCP
//! client is configured with), the console's session cookie **with** that session's proof
//! (`X-Butler-Proof`; see [`super::session`] — the cookie alone is nothing, since a page on
//! another loopback port can be sent it), or — on a profile's endpoint `/mcp/p/<name>`
//! only — a token made for that profile, and on a running agent session's endpoint
//! `/mcp/s/<id>` only, that session's token (which the endpoint itself requires). Refusals
//! are `401 token_required` with `WWW-Authenticate: Bearer` (a JSON-RPC error on the MCP
//! routes). The login route, which redeems a one-time link, the OAuth callback (which
//! acts only on the secret `state` of a login the owner began), and the console's static
//! page and assets need none.
//!
//! What the console loads without `fetch` cannot send a header: its event streams
//! (`EventSource` on `GET /events` and the `GET …/log` streams) and extension icons (`<img>`
//! on `GET /extensions/{id}/icon`). On those GET routes only ([`takes_proof_in_query`]) the
//! proof may come as the query parameter `proof` instead. Making them `fetch`-based
//! instead would mean parsing server-sent events by hand (losing the browser's reconnect)
//! and icons as `blob:` URLs the page's policy would have to allow. The query is safe
//! enough there: the routes only read, the proof in a query still needs the cookie, it is
//! never the owner (owner actions read the header only), and the console's addresses leave
//! the page nowhere (`Referrer-Policy: no-referrer`, and the host logs no request target).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;
use super::error::ApiError;
use super::mcp::McpUrl;
use super::owner::{PROOF_HEADER, has_token, session_with_proof};

pub use crate::instance::config::AuthMode;

pub use super::connection::PeerVerified;

/// The middleware.
pub async fn require(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let verified = request.extensions().get::<PeerVerified>().is_some_and(|v| v.0);
    match refusal(&state, verified, request.method(), request.uri(), request.headers()) {
        None => next.run(request).await,
        Some(refusal) => refusal,
    }
}

/// The answer to a `method` request for `uri` with `headers`, over a connection whose user
/// was `verified` or not, when it must carry a credential and carries none: `401
/// token_required` (a JSON-RPC error on the MCP routes).
#[must_use]
pub fn refusal(state: &AppState, verified: bool, method: &Method, uri: &Uri, headers: &HeaderMap) -> Option<Response> {
    let path = uri.path();
    if !needs_credential(state.config.current().config.mcp.auth, verified, path)
        || has_credential(state, method, uri, headers)
    {
        return None;
    }
    let refusal = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "token_required",
        if verified {
            "this host asks every client for a credential (`mcp.auth` is \"token\"): send the owner token as `Authorization: Bearer <token>` (it is in the state directory's `owner-token`), or use `butler mcp stdio`"
        } else {
            "the host could not verify which user this connection belongs to, so it asks for a credential: send the owner token as `Authorization: Bearer <token>` (it is in the state directory's `owner-token`), or use `butler mcp stdio`"
        },
    );
    let mut response = super::framing::refusal_for(path, refusal);
    response
        .headers_mut()
        .insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static(r#"Bearer realm="butler""#));
    Some(response)
}

/// The profile whose endpoint `path` is (`…/mcp/p/<name>`), if it is one.
fn profile_of(path: &str) -> Option<&str> {
    match McpUrl::of(path)? {
        McpUrl::Profile(name) => Some(name),
        _ => None,
    }
}

/// The agent session whose endpoint `path` is (`…/mcp/s/<id>`), if it is one.
fn session_of(path: &str) -> Option<&str> {
    match McpUrl::of(path)? {
        McpUrl::AgentSession(id) => Some(id),
        _ => None,
    }
}

/// Whether a request for `path` must carry a credential.
#[must_use]
pub fn needs_credential(mode: AuthMode, peer_verified: bool, path: &str) -> bool {
    if peer_verified && mode == AuthMode::Peer {
        return false;
    }
    let api = [super::API_PREFIX, super::LEGACY_PREFIX]
        .iter()
        .filter_map(|prefix| path.strip_prefix(prefix))
        .find(|rest| rest.is_empty() || rest.starts_with('/'));
    match api {
        // The console's page and assets are the same for everyone; logging in needs the link.
        // Nor does the OAuth callback: it acts only on a login's secret `state`.
        Some(rest) => !matches!(rest, "" | "/" | "/login" | "/oauth/callback") && !rest.starts_with("/assets/"),
        None => false,
    }
}

/// Whether a `method` request for `uri` may carry the console's proof in its query (what
/// the console loads without `fetch`: its event streams and extension icons).
#[must_use]
pub fn takes_proof_in_query(method: &Method, path: &str) -> bool {
    if method != Method::GET && method != Method::HEAD {
        return false;
    }
    let Some(rest) = [super::API_PREFIX, super::LEGACY_PREFIX].iter().find_map(|prefix| path.strip_prefix(prefix))
    else {
        return false;
    };
    let segments: Vec<&str> = rest.split('/').skip(1).collect();
    matches!(
        segments.as_slice(),
        ["events"] | ["tools" | "services", _, "log"] | ["mcp", "providers", _, "log"] | ["extensions", _, "icon"]
    ) && segments.iter().all(|s| !s.is_empty())
}

/// The `proof` query parameter, when the query has it exactly once.
fn proof_in_query(uri: &Uri) -> Option<&str> {
    let mut found = uri.query()?.split('&').filter_map(|pair| pair.strip_prefix("proof="));
    let proof = found.next()?;
    found.next().is_none().then_some(proof)
}

fn has_credential(state: &AppState, method: &Method, uri: &Uri, headers: &HeaderMap) -> bool {
    let path = uri.path();
    let profile_token = || {
        profile_of(path).is_some_and(|profile| {
            super::mcp::bearer(headers)
                .and_then(|given| state.tokens.check(given))
                .is_some_and(|t| t.profile == profile)
        })
    };
    // An agent session's token opens its own endpoint, and nothing else.
    let session_token = || {
        session_of(path)
            .and_then(|id| state.agents.session(id))
            .is_some_and(|session| super::mcp::bearer(headers).is_some_and(|given| session.accepts(given)))
    };
    has_token(headers, &state.owner_token)
        || profile_token()
        || session_token()
        || console_credential(&state.console_sessions, state.gate.port, method, uri, headers)
}

/// Whether the request carries a console session's cookie together with its proof (the
/// header, or on [`takes_proof_in_query`] routes the query parameter).
#[must_use]
pub fn console_credential(
    sessions: &super::console_session::ConsoleSessions,
    port: u16,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> bool {
    let proof = headers
        .get(PROOF_HEADER)
        .and_then(|v| v.to_str().ok())
        .or_else(|| proof_in_query(uri).filter(|_| takes_proof_in_query(method, uri.path())));
    proof.is_some_and(|proof| session_with_proof(headers, port, proof, sessions).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::test_support::{headers, logged_in};

    #[test]
    fn only_a_verified_peer_in_peer_mode_goes_without() {
        for path in [
            "/myspace-butler/api/health",
            "/myspace-butler/api/mcp",
            "/myspace-butler/mcp",
            "/myspace-butler/api/console/links",
        ] {
            assert!(!needs_credential(AuthMode::Peer, true, path), "{path}");
            assert!(needs_credential(AuthMode::Peer, false, path), "{path}");
            assert!(needs_credential(AuthMode::Token, true, path), "{path}");
        }
    }

    #[test]
    fn the_login_link_and_the_console_page_need_none() {
        for path in [
            "/myspace-butler/api/login",
            "/myspace-butler/login",
            "/myspace-butler/",
            "/myspace-butler/assets/app.js",
            "/myspace-butler",
            "/",
        ] {
            assert!(!needs_credential(AuthMode::Token, false, path), "{path}");
        }
        assert!(needs_credential(AuthMode::Token, false, "/myspace-butler/api/loginx"));
    }

    /// The cookie a page on another loopback port can be sent, with every header anyone
    /// can forge, is no credential; with its session's proof it is.
    #[test]
    fn the_cookie_counts_only_with_its_sessions_proof() {
        let (_dir, sessions, cookie, proof) = logged_in();
        let link = sessions.new_link().expect("randomness");
        let other = sessions.redeem(&link, "test").expect("a second session");
        let catalog: Uri = "/myspace-butler/api/catalog".parse().expect("uri");
        let has = |pairs: &[(&'static str, &str)], method: &Method, uri: &Uri| {
            console_credential(&sessions, 19387, method, uri, &headers(pairs))
        };
        let forged = [
            ("cookie", cookie.as_str()),
            ("origin", "http://127.0.0.1:19387"),
            ("sec-fetch-site", "same-origin"),
            ("x-butler-review", "1"),
        ];
        assert!(!has(&forged, &Method::GET, &catalog), "the cookie and every forgeable header");
        let mut proven = forged.to_vec();
        proven.push(("x-butler-proof", &proof));
        assert!(has(&proven, &Method::GET, &catalog));
        assert!(!has(&proven[1..], &Method::GET, &catalog), "the proof without the cookie");
        let mut wrong = forged.to_vec();
        wrong.push(("x-butler-proof", &other.proof));
        assert!(!has(&wrong, &Method::GET, &catalog), "another session's proof");
        // In the query: only on what the console loads without fetch, only as a GET.
        for target in [
            "/myspace-butler/api/events",
            "/myspace-butler/events",
            "/myspace-butler/api/tools/t/log",
            "/myspace-butler/api/services/s/log",
            "/myspace-butler/api/mcp/providers/p/log",
            "/myspace-butler/api/extensions/x/icon",
        ] {
            let uri: Uri = format!("{target}?proof={proof}").parse().expect("uri");
            assert!(has(&forged, &Method::GET, &uri), "{target}");
            assert!(!has(&forged, &Method::POST, &uri), "POST {target}");
            assert!(!has(&forged[1..], &Method::GET, &uri), "{target} without the cookie");
            let twice: Uri = format!("{target}?proof={proof}&proof={proof}").parse().expect("uri");
            assert!(!has(&forged, &Method::GET, &twice), "{target}: given twice");
            let theirs: Uri = format!("{target}?proof={}", other.proof).parse().expect("uri");
            assert!(!has(&forged, &Method::GET, &theirs), "{target}: another session's proof");
        }
        for target in ["/myspace-butler/api/catalog", "/myspace-butler/api/mcp", "/myspace-butler/api/tools/t/start"] {
            let uri: Uri = format!("{target}?proof={proof}").parse().expect("uri");
            assert!(!has(&forged, &Method::GET, &uri), "{target} takes the proof in its header only");
        }
    }

    #[test]
    fn a_profile_token_counts_only_on_its_profiles_endpoint() {
        assert_eq!(profile_of("/myspace-butler/api/mcp/p/fs"), Some("fs"));
        assert_eq!(profile_of("/myspace-butler/api/mcp/p/fs/x"), None);
        assert_eq!(profile_of("/myspace-butler/api/mcp/p/"), None);
        assert_eq!(profile_of("/myspace-butler/api/mcp"), None);
        assert_eq!(profile_of("/myspace-butler/api/extensions"), None);
        assert_eq!(session_of("/myspace-butler/api/mcp/s/abc"), Some("abc"));
        assert_eq!(session_of("/myspace-butler/api/mcp/p/abc"), None);
        assert_eq!(session_of("/myspace-butler/api/mcp/s/abc/x"), None);
    }
}
