//! The web console: one page at `/myspace-butler/` and its assets under
//! `/myspace-butler/assets/`, embedded in the binary from `assets/` so the host is the only
//! server and the console works offline.
//!
//! The page is static HTML plus a small amount of our own JavaScript (ES modules, no build
//! step) that reads the same API any client uses. Everything an extension supplies (names,
//! descriptions, report Markdown, panel URLs) is put on the page with DOM APIs as text,
//! never as markup, and the Content-Security-Policy below forbids inline and foreign script
//! as a second line of defence.

use std::hash::{DefaultHasher, Hash, Hasher};

use axum::Router;
use axum::extract::Path;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use include_dir::{Dir, include_dir};

use crate::http::ApiError;

static ASSETS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/src/http/console/assets");

/// Where the page is served.
pub const PAGE_PATH: &str = "/myspace-butler/";

/// The page's policy: scripts and styles only from the host itself (no inline script, no
/// `eval`); images may be extension icons (`data:` or an `http(s)` URL); the console talks
/// to its own API and, for `post` actions, to tools on this machine; panels are `http(s)`
/// iframes; nothing may frame the console.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: http: https:; \
connect-src 'self' http://127.0.0.1:* http://localhost:*; frame-src http: https:; \
base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The console's routes (the page, its redirect and the assets), for the host's router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/myspace-butler", get(|| async { Redirect::to(PAGE_PATH) }))
        .route(PAGE_PATH, get(page))
        .route("/myspace-butler/assets/{file}", get(asset))
}

async fn page(headers: HeaderMap) -> Response {
    match ASSETS.get_file("index.html") {
        Some(file) => serve("index.html", file.contents(), &headers),
        None => ApiError::internal("the console page is missing from this build").into_response(),
    }
}

async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    // Only plain file names: `{file}` is one segment, and no asset lives in a folder.
    let found = content_type(&file).and_then(|_| ASSETS.get_file(&file)).filter(|_| !file.contains(['/', '\\']));
    match found {
        Some(asset) => serve(&file, asset.contents(), &headers),
        None => ApiError::not_found(
            "unknown_asset",
            format!("the console has no asset `{}`", crate::text::clip(&file, 100)),
        )
        .into_response(),
    }
}

/// The asset with its type, the security headers and an `ETag`, or 304 when the browser
/// has it already (assets are revalidated on every load, so a new build is seen at once).
fn serve(name: &str, contents: &'static [u8], request: &HeaderMap) -> Response {
    let mut hasher = DefaultHasher::new();
    contents.hash(&mut hasher);
    let etag = format!("\"{:016x}\"", hasher.finish());
    let fresh = request.get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v == etag);
    let mut response =
        if fresh { StatusCode::NOT_MODIFIED.into_response() } else { (StatusCode::OK, contents).into_response() };
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type(name).unwrap_or("application/octet-stream")));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(ETAG, value);
    }
    for (name, value) in security_headers() {
        headers.insert(name, value);
    }
    response
}

/// The headers every console response carries.
#[must_use]
pub fn security_headers() -> [(HeaderName, HeaderValue); 4] {
    [
        (HeaderName::from_static("content-security-policy"), HeaderValue::from_static(CSP)),
        (HeaderName::from_static("x-content-type-options"), HeaderValue::from_static("nosniff")),
        (HeaderName::from_static("referrer-policy"), HeaderValue::from_static("no-referrer")),
        (HeaderName::from_static("x-frame-options"), HeaderValue::from_static("DENY")),
    ]
}

/// The type of an asset by its extension; `None` for kinds the console does not ship.
fn content_type(name: &str) -> Option<&'static str> {
    let (_, ext) = name.rsplit_once('.')?;
    Some(match ext {
        "html" => "text/html; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "json" => "application/json",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_has_a_type_and_no_inline_script() {
        assert!(ASSETS.get_file("index.html").is_some());
        for file in ASSETS.files() {
            let name = file.path().to_string_lossy();
            assert!(content_type(&name).is_some(), "{name} has no content type");
            if name.ends_with(".html") {
                let text = file.contents_utf8().unwrap_or_default();
                for opening in text.match_indices("<script").map(|(i, _)| &text[i..]) {
                    let tag = opening.split('>').next().unwrap_or_default();
                    assert!(tag.contains(" src="), "{name}: inline script `{tag}` would be refused by the CSP");
                }
                let handler = text.split(" on").skip(1).find(|rest| {
                    let name_len = rest.chars().take_while(char::is_ascii_lowercase).count();
                    name_len > 0 && rest[name_len..].starts_with('=')
                });
                assert!(handler.is_none(), "{name}: inline event handlers would be refused by the CSP");
            }
        }
    }

    #[test]
    fn the_policy_forbids_inline_script_and_framing() {
        assert!(CSP.contains("script-src 'self';"));
        assert!(!CSP.contains("unsafe"));
        assert!(CSP.contains("frame-ancestors 'none'"));
    }
}
