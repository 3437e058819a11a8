//! When a request must prove it is the owner's before any route runs.
//!
//! On Linux the listener knows the user behind each connection ([`super::peer`]) and
//! refuses other users' outright, so a connection it could verify as the owner's user
//! needs nothing more for reads and MCP. A connection whose user the kernel could **not**
//! say — or every connection, when the root config sets `"mcp": {"auth": "token"}` — must
//! carry a credential on every API route and on `/mcp`: the owner token
//! (`Authorization: Bearer …`, what the CLI and `butler mcp stdio` send, and what an MCP
//! client is configured with), the console's session cookie, or — on a profile's endpoint
//! `/mcp/p/<name>` only — a token made for that profile, and on a running agent session's
//! endpoint `/mcp/s/<id>` only, that session's token (which the endpoint itself requires). Refusals are `401 token_required`
//! with `WWW-Authenticate: Bearer` (a JSON-RPC error on the MCP routes). The login route, which
//! redeems a one-time link, and the console's static page and assets need none.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use super::owner::has_token;
use super::session::session_from_cookies;

pub use crate::instance::config::AuthMode;

pub use super::connection::PeerVerified;

/// The middleware.
pub async fn require(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let verified = request.extensions().get::<PeerVerified>().is_some_and(|v| v.0);
    match refusal(&state, verified, request.uri().path(), request.headers()) {
        None => next.run(request).await,
        Some(refusal) => refusal,
    }
}

/// The answer to a request for `path` with `headers`, over a connection whose user was
/// `verified` or not, when it must carry a credential and carries none: `401
/// token_required` (a JSON-RPC error on the MCP routes).
#[must_use]
pub fn refusal(state: &AppState, verified: bool, path: &str, headers: &HeaderMap) -> Option<Response> {
    if !needs_credential(state.auth, verified, path) || has_credential(state, path, headers) {
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
    let mut response =
        if super::framing::is_mcp(path) { super::framing::json_rpc_error(&refusal) } else { refusal.into_response() };
    response
        .headers_mut()
        .insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static(r#"Bearer realm="butler""#));
    Some(response)
}

/// The profile whose endpoint `path` is (`…/mcp/p/<name>`), if it is one.
fn profile_of(path: &str) -> Option<&str> {
    endpoint_of(path, "/mcp/p/")
}

/// The agent session whose endpoint `path` is (`…/mcp/s/<id>`), if it is one.
fn session_of(path: &str) -> Option<&str> {
    endpoint_of(path, "/mcp/s/")
}

fn endpoint_of<'a>(path: &'a str, under: &str) -> Option<&'a str> {
    [super::API_PREFIX, super::LEGACY_PREFIX]
        .iter()
        .find_map(|prefix| path.strip_prefix(prefix))
        .and_then(|rest| rest.strip_prefix(under))
        .filter(|name| !name.is_empty() && !name.contains('/'))
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
        Some(rest) => !matches!(rest, "" | "/" | "/login") && !rest.starts_with("/assets/"),
        None => false,
    }
}

fn has_credential(state: &AppState, path: &str, headers: &HeaderMap) -> bool {
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
        || headers
            .get_all(axum::http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|cookies| session_from_cookies(state.gate.port, cookies))
            .any(|session| state.sessions.is_valid(session))
}

#[cfg(test)]
mod tests {
    use super::*;

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
