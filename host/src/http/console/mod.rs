//! The web console: one page at `/myspace-butler/` and its assets under
//! `/myspace-butler/assets/`, embedded in the binary from `assets/` so the host is the only
//! server and the console works offline.
//!
//! The page is static HTML plus a small amount of our own JavaScript (ES modules, no build
//! step) that reads the same API any client uses. Everything an extension supplies (names,
//! descriptions, report Markdown, panel URLs) is put on the page with DOM APIs as text,
//! never as markup, and the Content-Security-Policy below forbids inline and foreign script
//! as a second line of defence.
//!
//! It also owns the page a browser is shown when a login link cannot be used
//! ([`refused_login_page`]): API clients get the error envelope instead.

use std::hash::{DefaultHasher, Hash, Hasher};

use axum::Router;
use axum::extract::Path;
use axum::http::header::{ACCEPT, ACCEPT_LANGUAGE, CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
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

/// Whether a request is a browser's page load (its `Accept` names `text/html`), as opposed to
/// an API client's, which gets the JSON envelope.
#[must_use]
pub fn wants_page(request: &HeaderMap) -> bool {
    request
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|range| range.split(';').next().is_some_and(|media| media.trim().eq_ignore_ascii_case("text/html")))
}

/// Whether the browser asks for Chinese before English (`Accept-Language`, in its order).
fn prefers_chinese(request: &HeaderMap) -> bool {
    let languages = request.get_all(ACCEPT_LANGUAGE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(','));
    for tag in languages.filter_map(|l| l.split(';').next()).map(|l| l.trim().to_ascii_lowercase()) {
        if tag.starts_with("zh") {
            return true;
        }
        if tag.starts_with("en") {
            return false;
        }
    }
    false
}

/// What the refused-login page says in one language: static text, nothing from the
/// request. The `lead`/`muted` lines hold markup of their own (`<strong>`, `<code>`, a link).
struct RefusedLogin {
    /// The `lang` attribute.
    lang: &'static str,
    title: &'static str,
    heading: &'static str,
    why: &'static str,
    new_link: &'static str,
    logged_in: &'static str,
}

const REFUSED_LOGIN_EN: RefusedLogin = RefusedLogin {
    lang: "en",
    title: "Login link not usable",
    heading: "This login link cannot be used",
    why: "A login link logs one browser in, once, within 15 minutes of being made. This one was already used, has expired, or is not a login link.",
    new_link: "<strong>For a new link,</strong> run <code>butler console</code> in a terminal on this machine (<code>butler console --open</code> opens it in your browser), then open the link it prints.",
    logged_in: r#"If this browser is already logged in, <a href="/myspace-butler/">open the console</a>."#,
};

const REFUSED_LOGIN_ZH: RefusedLogin = RefusedLogin {
    lang: "zh-CN",
    title: "登录链接不可用",
    heading: "这个登录链接不能再用了",
    why: "每个登录链接只能让一个浏览器登录一次，并且要在生成后 15 分钟内使用。这个链接已经用过、已经过期，或者不是登录链接。",
    new_link: "<strong>获取新链接：</strong>在这台电脑的终端里运行 <code>butler console</code>（<code>butler console --open</code> 会直接在浏览器里打开），然后打开它给出的链接。",
    logged_in: r#"如果这个浏览器已经登录，<a href="/myspace-butler/">打开控制台</a>。"#,
};

impl RefusedLogin {
    /// The page, one template for every language.
    fn html(&self) -> String {
        let Self { lang, title, heading, why, new_link, logged_in } = self;
        format!(
            r#"<!doctype html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{title} · Butler</title>
<link rel="icon" href="/myspace-butler/assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/myspace-butler/assets/style.css">
</head>
<body>
<main id="main" data-login="refused">
<h1>{heading}</h1>
<p>{why}</p>
<p>{new_link}</p>
<p class="muted">{logged_in}</p>
</main>
</body>
</html>
"#
        )
    }
}

/// The page a browser is shown for a login link that cannot be used (spent, expired or
/// not one): what happened and how to get a new link, with `status`, the console's
/// security headers and `no-store`.
#[must_use]
pub fn refused_login_page(status: StatusCode, request: &HeaderMap) -> Response {
    let page = if prefers_chinese(request) { &REFUSED_LOGIN_ZH } else { &REFUSED_LOGIN_EN }.html();
    let mut response = (status, page).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
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
    fn a_page_load_is_told_from_an_api_call_and_the_language_from_its_order() {
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.append(*name, HeaderValue::from_static(value));
            }
            headers
        };
        let browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        assert!(wants_page(&with(&[("accept", browser)])));
        assert!(wants_page(&with(&[("accept", "Text/HTML; q=0.5")])));
        for api in ["*/*", "application/json", "text/htmlx", "application/json, text/plain"] {
            assert!(!wants_page(&with(&[("accept", api)])), "{api}");
        }
        assert!(!wants_page(&HeaderMap::new()));
        assert!(prefers_chinese(&with(&[("accept-language", "zh-CN,zh;q=0.9,en;q=0.8")])));
        assert!(!prefers_chinese(&with(&[("accept-language", "en-US,zh-CN;q=0.5")])));
        assert!(prefers_chinese(&with(&[("accept-language", "fr, zh-TW")])));
        assert!(!prefers_chinese(&HeaderMap::new()));
    }

    #[test]
    fn the_refused_login_page_is_static_html_that_says_how_to_get_a_link() {
        for page in [REFUSED_LOGIN_EN.html(), REFUSED_LOGIN_ZH.html()] {
            assert!(page.contains("<code>butler console</code>"), "{page}");
            assert!(
                !page.contains("<script") && !page.contains("style="),
                "the CSP would refuse inline script or style"
            );
        }
    }

    #[test]
    fn the_policy_forbids_inline_script_and_framing() {
        assert!(CSP.contains("script-src 'self';"));
        assert!(!CSP.contains("unsafe"));
        assert!(CSP.contains("frame-ancestors 'none'"));
    }
}
