//! The request gate, applied to every route before anything else runs.
//!
//! - `Host` must name a loopback address or `localhost` — a DNS-rebinding page reaches us
//!   with its own domain in `Host`, so this refuses it.
//! - A present `Origin` must be the host's own origin (loopback name, our port, `http`).
//! - `Sec-Fetch-Site: cross-site | same-site` is refused, whatever else the request says —
//!   except on the OAuth callback, where the authorization server's page sends the
//!   owner's browser back (a top-level navigation, which carries no `Origin`).
//! - A request that carries this host's own hop mark ([`crate::upstream::HOP_HEADER`]) came
//!   from its own hub through a provider URL that reaches the host itself: `508
//!   request_loop`.
//!
//! Requests without `Origin` (local SDKs, the CLI, curl) pass. Refusals are 403 with the
//! error envelope (a JSON-RPC error on the MCP routes); so is a head larger than
//! [`super::framing::MAX_HEAD_BYTES`] (431).

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderName, Uri};
use axum::middleware::Next;
use axum::response::Response;

use super::error::ApiError;
use crate::text::clip;

/// `Sec-Fetch-Site`, named once (a name given as text is parsed on every lookup).
const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");

/// What the gate needs to know about the listener.
#[derive(Debug, Clone, Copy)]
pub struct GateConfig {
    /// The port the host listens on (its origin's port).
    pub port: u16,
}

/// The middleware.
///
/// # Errors
/// [`ApiError`] 403 when a rule refuses the request.
pub async fn gate(State(config): State<GateConfig>, request: Request, next: Next) -> Response {
    match refusal(config, request.uri(), request.headers()) {
        None => next.run(request).await,
        Some(refusal) => refusal,
    }
}

/// The gate's answer to a request for `uri` with `headers`, when it refuses it: the error
/// envelope, or a JSON-RPC error on the MCP routes.
#[must_use]
pub fn refusal(config: GateConfig, uri: &Uri, headers: &HeaderMap) -> Option<Response> {
    let refusal = admit(config, uri, headers).err()?;
    Some(super::framing::refusal_for(uri.path(), refusal))
}

fn admit(config: GateConfig, uri: &Uri, headers: &HeaderMap) -> Result<(), ApiError> {
    if uri.scheme().is_some() || uri.authority().is_some() {
        return Err(ApiError::bad_request(
            "invalid_request_target",
            "requests name a path (`GET /myspace-butler/…`), not a full URL",
        ));
    }
    // hyper's own limit on the head is approximate (a head read in one go can pass it).
    // The target is a path and query (a scheme or authority was refused above).
    let target = uri.path_and_query().map_or(1, |target| target.as_str().len());
    let head = target + headers.iter().map(|(name, value)| name.as_str().len() + value.len() + 4).sum::<usize>();
    if head > super::framing::MAX_HEAD_BYTES {
        return Err(ApiError::new(
            axum::http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            super::framing::HEAD_TOO_LARGE.as_str(),
        ));
    }
    let callback = [super::API_PREFIX, super::LEGACY_PREFIX]
        .iter()
        .any(|prefix| uri.path().strip_prefix(prefix) == Some(crate::upstream::oauth::broker::CALLBACK_PATH));
    check_site(config, headers, !callback)
}

/// The gate's decision for a set of request headers.
///
/// # Errors
/// [`ApiError`] 403 naming the rule that refused.
pub fn check(config: GateConfig, headers: &HeaderMap) -> Result<(), ApiError> {
    check_site(config, headers, true)
}

/// [`check`], refusing requests from other sites only when `same_site_only`.
fn check_site(config: GateConfig, headers: &HeaderMap, same_site_only: bool) -> Result<(), ApiError> {
    for name in [HOST, ORIGIN, SEC_FETCH_SITE] {
        if headers.get_all(&name).iter().count() > 1 {
            return Err(ApiError::bad_request(
                "duplicate_header",
                format!("the request has more than one `{name}` header"),
            ));
        }
    }
    if headers.get(crate::upstream::HOP_HEADER).is_some_and(|mark| mark == crate::upstream::hop_mark()) {
        return Err(ApiError::new(
            axum::http::StatusCode::LOOP_DETECTED,
            "request_loop",
            "this request came from this host's own MCP hub: a provider's URL points at the host itself, which the hub refuses to call",
        ));
    }
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(|| ApiError::forbidden("host_not_allowed", "the request has no readable Host header"))?;
    if split_authority(host).is_none_or(|(name, _)| !is_loopback_name(name)) {
        return Err(ApiError::forbidden(
            "host_not_allowed",
            format!(
                "Host `{}` is not a loopback address; Butler only answers requests addressed to this machine",
                clip(host, 100)
            ),
        ));
    }
    if let Some(site) = headers.get(SEC_FETCH_SITE).and_then(|v| v.to_str().ok())
        && same_site_only
        && (site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site"))
    {
        return Err(ApiError::forbidden(
            "cross_site_request",
            format!("requests from other sites are refused (Sec-Fetch-Site: {})", clip(site, 100)),
        ));
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !is_own_origin(config, origin) {
            return Err(ApiError::forbidden(
                "origin_not_allowed",
                format!("Origin `{}` is not this host's origin", clip(origin, 100)),
            ));
        }
    }
    Ok(())
}

/// Whether `origin` is `http://<loopback name>:<our port>`.
#[must_use]
pub fn is_own_origin(config: GateConfig, origin: &str) -> bool {
    let Some(authority) = origin.strip_prefix("http://") else {
        return false;
    };
    match split_authority(authority) {
        Some((name, Some(port))) => is_loopback_name(name) && port == config.port,
        Some((name, None)) => is_loopback_name(name) && config.port == 80,
        None => false,
    }
}

/// `name[:port]` or `[v6][:port]` → (name, port). `None` for anything else (paths,
/// user-info, bad ports).
fn split_authority(authority: &str) -> Option<(&str, Option<u16>)> {
    if authority.is_empty() || authority.contains(['/', '@', ' ', '?', '#']) {
        return None;
    }
    let (name, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        match after {
            "" => (v6, None),
            _ => (v6, Some(after.strip_prefix(':')?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (authority, None),
        }
    };
    // Canonical decimal only: `+19387` and `019387` parse as numbers but are not how a
    // browser writes our port.
    let port = match port {
        Some(p) if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || (p.len() > 1 && p.starts_with('0')) => {
            return None;
        }
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((name, port))
}

/// `localhost`, `*.localhost` never resolves off-machine (RFC 6761) but we keep to the
/// plain name; IPv4 127/8 and `::1`.
fn is_loopback_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::test_support::headers;

    const CONFIG: GateConfig = GateConfig { port: 19387 };

    #[test]
    fn ports_are_canonical_and_headers_single() {
        let config = GateConfig { port: 19387 };
        assert!(is_own_origin(config, "http://127.0.0.1:19387"));
        for origin in
            ["http://127.0.0.1:+19387", "http://127.0.0.1:019387", "http://127.0.0.1:19387 ", "http://127.0.0.1:"]
        {
            assert!(!is_own_origin(config, origin), "{origin}");
        }
        let mut map = HeaderMap::new();
        map.append(HOST, "127.0.0.1:19387".parse().expect("value"));
        assert!(check(config, &map).is_ok());
        map.append(HOST, "evil.example".parse().expect("value"));
        assert_eq!(check(config, &map).expect_err("two Hosts").code, "duplicate_header");
        let mut map = headers(&[("host", "localhost:19387"), ("sec-fetch-site", "same-origin")]);
        map.append("sec-fetch-site", "cross-site".parse().expect("value"));
        assert_eq!(check(config, &map).expect_err("two Sec-Fetch-Site").code, "duplicate_header");
    }

    #[test]
    fn only_the_oauth_callback_takes_another_sites_navigation_and_nothing_else_is_relaxed() {
        let navigation = headers(&[("host", "127.0.0.1:19387"), ("sec-fetch-site", "cross-site")]);
        for callback in ["/myspace-butler/api/oauth/callback?state=x&code=y", "/myspace-butler/oauth/callback"] {
            let uri: Uri = callback.parse().expect("uri");
            assert!(admit(CONFIG, &uri, &navigation).is_ok(), "{callback}");
        }
        for other in [
            "/myspace-butler/api/mcp/status",
            "/myspace-butler/api/oauth/callback/x",
            "/myspace-butler/api/oauth/callbackx",
            "/oauth/callback",
        ] {
            let uri: Uri = other.parse().expect("uri");
            assert_eq!(admit(CONFIG, &uri, &navigation).expect_err(other).code, "cross_site_request", "{other}");
        }
        // The rest of the gate still holds on the callback: a foreign Host, a foreign Origin.
        let uri: Uri = "/myspace-butler/api/oauth/callback".parse().expect("uri");
        let rebinding = headers(&[("host", "evil.example"), ("sec-fetch-site", "cross-site")]);
        assert_eq!(admit(CONFIG, &uri, &rebinding).expect_err("rebinding").code, "host_not_allowed");
        let posted = headers(&[("host", "127.0.0.1:19387"), ("origin", "https://evil.example")]);
        assert_eq!(admit(CONFIG, &uri, &posted).expect_err("origin").code, "origin_not_allowed");
    }

    #[test]
    fn hosts() {
        for ok in ["127.0.0.1:19387", "localhost:19387", "[::1]:19387", "127.8.9.1", "LOCALHOST", "localhost.:1"] {
            assert!(check(CONFIG, &headers(&[("host", ok)])).is_ok(), "{ok}");
        }
        for bad in [
            "evil.com",
            "evil.com:19387",
            "127.0.0.1.evil.com",
            "localhost.evil.com",
            "10.0.0.1:19387",
            "",
            "[::1",
            "127.0.0.1:99999",
            "u@127.0.0.1",
        ] {
            let err = check(CONFIG, &headers(&[("host", bad)])).expect_err(bad);
            assert_eq!(err.code, "host_not_allowed", "{bad}");
        }
        assert!(check(CONFIG, &HeaderMap::new()).is_err());
    }

    #[test]
    fn origins() {
        for ok in ["http://127.0.0.1:19387", "http://localhost:19387", "http://[::1]:19387"] {
            assert!(check(CONFIG, &headers(&[("host", "127.0.0.1:19387"), ("origin", ok)])).is_ok(), "{ok}");
        }
        for bad in [
            "http://evil.com",
            "http://127.0.0.1:1",
            "https://127.0.0.1:19387",
            "null",
            "http://127.0.0.1:19387/x",
            "http://localhost",
        ] {
            let err = check(CONFIG, &headers(&[("host", "127.0.0.1:19387"), ("origin", bad)])).expect_err(bad);
            assert_eq!(err.code, "origin_not_allowed", "{bad}");
        }
    }

    #[test]
    fn fetch_site() {
        for bad in ["cross-site", "same-site", "Cross-Site"] {
            let err = check(CONFIG, &headers(&[("host", "localhost:19387"), ("sec-fetch-site", bad)])).expect_err(bad);
            assert_eq!(err.code, "cross_site_request");
        }
        for ok in ["same-origin", "none"] {
            assert!(check(CONFIG, &headers(&[("host", "localhost:19387"), ("sec-fetch-site", ok)])).is_ok());
        }
    }

    #[test]
    fn a_request_with_this_hosts_own_hop_mark_is_a_loop() {
        let mark = crate::upstream::hop_mark();
        let looped = headers(&[("host", "localhost:19387"), (crate::upstream::HOP_HEADER, mark)]);
        let err = check(CONFIG, &looped).expect_err("our own mark");
        assert_eq!((err.status, err.code.as_ref()), (axum::http::StatusCode::LOOP_DETECTED, "request_loop"));
        let other = headers(&[("host", "localhost:19387"), (crate::upstream::HOP_HEADER, "another-host")]);
        assert!(check(CONFIG, &other).is_ok(), "another host's hub may call this one");
    }
}
