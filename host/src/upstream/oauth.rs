//! OAuth 2.1 for remote MCP servers, as the MCP authorization specification asks of a
//! client — the rules, apart from the requests that follow them: what a server's
//! `WWW-Authenticate` challenge says; where its protected resource metadata (RFC 9728) and
//! its authorization server's metadata (RFC 8414, then OpenID discovery) are looked for, in
//! order; whether the metadata's `resource` belongs to the server; which scopes to ask for
//! (the challenge's, else all the server supports, else none) and, on `insufficient_scope`,
//! the union with those granted; PKCE with S256; how the client authenticates at the token
//! endpoint (`client_secret_basic`, `client_secret_post`, `none`); and the authorization
//! request's URL with its `resource` (RFC 8707) and `state`.
//!
//! Nothing here sends a request, so each rule is checked on its own. The requests that
//! follow them are [`requests`]; the logins while the host runs (what needs the owner,
//! logins under way, bearer tokens and their refresh) are [`broker`]'s; what is kept of
//! them on disk, 0600, is [`logins`]'.

pub mod broker;
pub mod logins;
pub mod requests;

use base64::Engine as _;
use reqwest::Url;
use sha2::{Digest, Sha256};

/// What a `401` or `403` answer's `WWW-Authenticate: Bearer …` says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected resource metadata is (RFC 9728).
    pub resource_metadata: Option<String>,
    /// `scope`: what the request needs, space-separated.
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
}

impl Challenge {
    /// Whether the token lacks a scope (a step-up is due), not validity.
    #[must_use]
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The `Bearer` challenge among `header`'s (a header may carry several schemes), its
/// auth-params read as HTTP writes them (`name=token` or `name="quoted \" string"`,
/// comma-separated); `None` without a `Bearer` challenge.
#[must_use]
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let start = find_scheme(header, "bearer")?;
    let mut rest = header[start + "bearer".len()..].trim_start();
    let mut challenge = Challenge::default();
    while !rest.is_empty() {
        let Some((name, after)) = rest.split_once('=') else { break };
        let name = name.trim().trim_start_matches(',').trim();
        if name.contains(char::is_whitespace) {
            break; // the next scheme's name: this challenge ended
        }
        let after = after.trim_start();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('"') {
            unquote(quoted)
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        match name.to_ascii_lowercase().as_str() {
            "resource_metadata" => challenge.resource_metadata = Some(value),
            "scope" => challenge.scope = Some(value),
            "error" => challenge.error = Some(value),
            _ => {}
        }
        rest = remaining.trim_start().trim_start_matches(',').trim_start();
    }
    Some(challenge)
}

/// Where scheme `name` (lower case) begins in `header`, as a whole word.
fn find_scheme(header: &str, name: &str) -> Option<usize> {
    let lower = header.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(name).map(|i| i + from) {
        let before = lower[..at].trim_end();
        let after = lower[at + name.len()..].chars().next();
        if (before.is_empty() || before.ends_with(',')) && after.is_none_or(char::is_whitespace) {
            return Some(at);
        }
        from = at + name.len();
    }
    None
}

/// A quoted string's value (its opening quote already taken) and what follows its closing
/// quote.
fn unquote(quoted: &str) -> (String, &str) {
    let mut value = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    value.push(escaped);
                }
            }
            '"' => return (value, &quoted[i + 1..]),
            c => value.push(c),
        }
    }
    (value, "")
}

/// The URLs the protected resource metadata of the server at `server` is looked for at, in
/// order: the challenge's `resource_metadata` alone when it names one; else the path-based
/// well-known URL, then the root one (RFC 9728).
#[must_use]
pub fn resource_metadata_urls(server: &Url, challenge: Option<&Challenge>) -> Vec<String> {
    if let Some(named) = challenge.and_then(|c| c.resource_metadata.clone()) {
        return vec![named];
    }
    let origin = origin(server);
    let path = server.path().trim_end_matches('/');
    let root = format!("{origin}/.well-known/oauth-protected-resource");
    if path.is_empty() { vec![root] } else { vec![format!("{root}{path}"), root] }
}

/// The URLs an authorization server's metadata is looked for at, for its `issuer`, in
/// order: RFC 8414's (the issuer's path after the well-known name), then OpenID
/// Connect discovery's — both ways for an issuer with a path.
#[must_use]
pub fn authorization_server_metadata_urls(issuer: &Url) -> Vec<String> {
    let origin = origin(issuer);
    let path = issuer.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    }
}

/// `scheme://host[:port]` of `url`.
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// Whether the metadata's `resource` is the server at `server` or holds it: the same
/// origin, and a path that is the server's or a parent of it (a server may not send the
/// client's tokens' audience elsewhere).
#[must_use]
pub fn resource_holds(resource: &str, server: &Url) -> bool {
    let Ok(resource_url) = Url::parse(resource) else { return false };
    if resource_url.fragment().is_some() || resource_url.origin() != server.origin() {
        return false;
    }
    let theirs = resource_url.path().trim_end_matches('/');
    let ours = server.path().trim_end_matches('/');
    ours == theirs || ours.starts_with(&format!("{theirs}/")) || theirs.is_empty()
}

/// The `scope` of an authorization request: the challenge's, else every scope the
/// resource supports, else none (the parameter is left out).
#[must_use]
pub fn scope_to_request(challenged: Option<&str>, supported: Option<&[String]>) -> Option<String> {
    if let Some(scope) = challenged.map(str::trim).filter(|s| !s.is_empty()) {
        return Some(scope.to_owned());
    }
    let supported = supported?.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect::<Vec<_>>();
    (!supported.is_empty()).then(|| supported.join(" "))
}

/// The scopes to ask for after an `insufficient_scope`: those granted and those the
/// challenge names, each once, in that order.
#[must_use]
pub fn stepped_up(granted: &str, challenged: &str) -> String {
    let mut scopes: Vec<&str> = Vec::new();
    for scope in granted.split_whitespace().chain(challenged.split_whitespace()) {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    scopes.join(" ")
}

/// The most authorization requests one login makes, step-ups included.
pub const MAX_AUTHORIZATIONS: usize = 3;

/// A PKCE pair (RFC 7636): the verifier the token request sends, and its S256 challenge
/// the authorization request sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pkce {
    /// 64 characters of the unreserved set, from 32 random bytes.
    pub verifier: String,
    /// `BASE64URL(SHA256(verifier))`, unpadded.
    pub challenge: String,
}

impl Pkce {
    /// A fresh pair.
    ///
    /// # Errors
    /// When the system's randomness cannot be read.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self::of(crate::instance::owner::random_secret()?))
    }

    /// The pair for `verifier`.
    #[must_use]
    pub fn of(verifier: String) -> Self {
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        Self { verifier, challenge }
    }
}

/// How the client authenticates at the token endpoint (its registration metadata's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ClientAuth {
    /// `client_secret_basic`: `Authorization: Basic` with the form-encoded id and secret.
    #[serde(rename = "client_secret_basic")]
    Basic,
    /// `client_secret_post`: `client_id` and `client_secret` in the form.
    #[serde(rename = "client_secret_post")]
    Post,
    /// `none`: `client_id` in the form, no secret (a public client).
    #[serde(rename = "none")]
    None,
}

impl ClientAuth {
    /// The method for a client with (or without) a secret: the one its registration
    /// answered, else Basic unless the server lists only `client_secret_post`.
    #[must_use]
    pub fn choose(registered: Option<&str>, supported: Option<&[String]>, has_secret: bool) -> Self {
        match registered {
            Some("client_secret_basic") if has_secret => return Self::Basic,
            Some("client_secret_post") if has_secret => return Self::Post,
            Some("none") => return Self::None,
            _ => {}
        }
        if !has_secret {
            return Self::None;
        }
        let lists = |method: &str| supported.is_some_and(|s| s.iter().any(|m| m == method));
        if lists("client_secret_post") && !lists("client_secret_basic") { Self::Post } else { Self::Basic }
    }
}

/// The `Authorization` header value of `client_secret_basic`: the id and secret each
/// form-encoded first (RFC 6749), joined by `:`, in Base64.
#[must_use]
pub fn basic_credentials(client_id: &str, secret: &str) -> String {
    let encoded = |text: &str| percent_encoding::utf8_percent_encode(text, FORM).to_string();
    let pair = format!("{}:{}", encoded(client_id), encoded(secret));
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))
}

/// What `application/x-www-form-urlencoded` leaves as it is: letters, digits and `*-._`.
const FORM: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'*').remove(b'-').remove(b'.').remove(b'_');

/// What an authorization request asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizationRequest<'a> {
    /// The client's id.
    pub client_id: &'a str,
    /// Where the server sends the owner back: the host's loopback callback.
    pub redirect_uri: &'a str,
    /// Ties the answer to this request.
    pub state: &'a str,
    /// The PKCE challenge (S256).
    pub code_challenge: &'a str,
    /// The protected resource, as its metadata names it (RFC 8707): kept as written.
    pub resource: &'a str,
    /// The scopes, when any are asked for.
    pub scope: Option<&'a str>,
}

/// An endpoint that is not a URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a URL")]
pub struct NotAUrl(pub String);

/// The authorization endpoint's URL with `request`'s parameters added to its own.
///
/// # Errors
/// [`NotAUrl`] when `endpoint` is not one.
pub fn authorization_url(endpoint: &str, request: &AuthorizationRequest<'_>) -> Result<String, NotAUrl> {
    let mut url = Url::parse(endpoint).map_err(|_| NotAUrl(butler_mcp::upstream::shown_url(endpoint)))?;
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", request.client_id)
            .append_pair("redirect_uri", request.redirect_uri)
            .append_pair("state", request.state)
            .append_pair("code_challenge", request.code_challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", request.resource);
        if let Some(scope) = request.scope {
            query.append_pair("scope", scope);
        }
    }
    Ok(url.into())
}

#[cfg(test)]
mod tests;
