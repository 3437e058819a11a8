//! The requests of an OAuth login, following the rules of [`super`]: the protected
//! resource's metadata (RFC 9728) and its authorization server's (RFC 8414, then OpenID
//! discovery) — or, for a server of the 2025-03-26 revision that has neither, its own
//! origin's metadata and then the default endpoints —, dynamic client registration
//! (RFC 7591), and the token endpoint's two grants (`authorization_code` with the PKCE
//! verifier, `refresh_token`), each authenticated as the client's method says.
//!
//! Every request has [`REQUEST_TIMEOUT`], follows no redirect, and reads at most
//! [`MAX_BODY`] of its answer. Errors name the endpoint without its query and what the
//! server said (`error`, its description clipped), never a token or a secret.

use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Challenge, ClientAuth, basic_credentials};
use butler_mcp::upstream::shown_url;

/// How long one request of a login may take, answer included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// The largest answer read (metadata, a registration, tokens).
pub const MAX_BODY: usize = 256 * 1024;
/// The name the host registers as.
pub const CLIENT_NAME: &str = "Butler host";

/// Why a step of a login failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// A request could not be sent or answered.
    #[error("cannot reach {endpoint}: {why}")]
    Unreachable {
        /// The endpoint, as shown.
        endpoint: String,
        /// Why.
        why: String,
    },
    /// The server refused (its status, and its `error` and description when it gave them).
    #[error("{endpoint} answered HTTP {status}{said}")]
    Refused {
        /// The endpoint, as shown.
        endpoint: String,
        /// The status.
        status: u16,
        /// `: <error> (<description>)`, or nothing.
        said: String,
    },
    /// The answer is not what the step expects.
    #[error("{endpoint} answered something that is not {expected}")]
    Unexpected {
        /// The endpoint, as shown.
        endpoint: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The protected resource's metadata names a resource that is not this server.
    #[error(
        "the server's metadata names another resource ({resource}): refused, a token for it could be used elsewhere"
    )]
    ResourceMismatch {
        /// The resource it names, as shown.
        resource: String,
    },
    /// The authorization server does not do PKCE with S256.
    #[error("the authorization server {0} does not support PKCE with S256, which MCP requires")]
    NoPkce(String),
    /// No client: the server registers none and none was given.
    #[error(
        "the authorization server {0} registers no clients by itself: add the server again with the client it gave you (`butler mcp add NAME URL --client-id ID [--client-secret SECRET]`)"
    )]
    NoClient(String),
    /// An endpoint is not a URL.
    #[error("{0}")]
    NotAUrl(#[from] super::NotAUrl),
    /// The authorization server's metadata says it is another issuer than the one it was
    /// looked up as (RFC 8414, section 3.3): it could claim to be anyone.
    #[error(
        "the authorization server's metadata at {looked_up} says its issuer is {claimed}: refused, an authorization server names itself"
    )]
    IssuerMismatch {
        /// The issuer it was looked up as, as shown.
        looked_up: String,
        /// The issuer its metadata claims, as written (clipped to 200 characters).
        claimed: String,
    },
    /// An endpoint of the authorization server is not one the host sends a code, a secret
    /// or the owner's browser to.
    #[error("the authorization server's {which} is refused: {why}")]
    EndpointNotAllowed {
        /// Which endpoint (`token_endpoint`, …).
        which: &'static str,
        /// Why (it names the URL, clipped).
        why: butler_catalog::suzu::UrlNotAllowed,
    },
}

/// What a login learnt of the server and its authorization server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The protected resource, as its metadata names it (else the server's URL).
    pub resource: String,
    /// The scopes the resource supports, when its metadata lists them.
    pub scopes_supported: Option<Vec<String>>,
    /// The authorization server.
    pub server: AuthorizationServer,
}

/// An authorization server's metadata (the fields a login uses).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AuthorizationServer {
    /// Its issuer.
    pub issuer: String,
    /// Where the owner authorizes.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens become tokens.
    pub token_endpoint: String,
    /// Where clients register, if they can.
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// How clients may authenticate at the token endpoint.
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// The PKCE methods it supports.
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// Where tokens are revoked (RFC 7009).
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
}

/// The protected resource's metadata (the fields a login uses).
#[derive(Debug, Deserialize)]
struct ResourceMetadata {
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Option<Vec<String>>,
}

/// A client the authorization server registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// Its id.
    pub client_id: String,
    /// Its secret, when it was given one.
    pub client_secret: Option<String>,
    /// The token endpoint method the registration answered.
    pub method: Option<String>,
}

/// Tokens the token endpoint gave.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct Tokens {
    /// The access token.
    pub access_token: String,
    /// Its type (`Bearer`).
    #[serde(default)]
    pub token_type: Option<String>,
    /// Seconds until it expires.
    #[serde(default)]
    pub expires_in: Option<u64>,
    /// A refresh token.
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// The scopes granted, when they differ or the server says.
    #[serde(default)]
    pub scope: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("expires_in", &self.expires_in)
            .field("refreshable", &self.refresh_token.is_some())
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The client a token request authenticates as.
#[derive(Debug, Clone, Copy)]
pub struct ClientCredentials<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its secret, if it has one.
    pub secret: Option<&'a str>,
    /// How it authenticates.
    pub auth: ClientAuth,
}

/// A token request's grant.
#[derive(Debug, Clone, Copy)]
pub enum Grant<'a> {
    /// The code the owner's authorization gave, with the PKCE verifier and the redirect URI
    /// the authorization request named.
    Code {
        /// The code.
        code: &'a str,
        /// The PKCE verifier.
        verifier: &'a str,
        /// The redirect URI.
        redirect_uri: &'a str,
    },
    /// A refresh token.
    Refresh(&'a str),
}

/// Makes the requests of logins; one HTTP client for all of them.
#[derive(Debug, Clone)]
pub struct Requests {
    client: reqwest::Client,
}

impl Requests {
    /// Requests on `client` (no redirects: the caller built it so).
    #[must_use]
    pub fn new(client: reqwest::Client) -> Self {
        Self { client }
    }

    /// Discovers the authorization server of the MCP server at `server`, from the
    /// challenge of its last refusal when there was one.
    ///
    /// # Errors
    /// [`FlowError`] when the metadata found is unusable, or none is found and the
    /// server's origin answers nothing a login can use.
    pub async fn discover(&self, server: &Url, challenge: Option<&Challenge>) -> Result<Discovered, FlowError> {
        let mut metadata = None;
        for url in super::resource_metadata_urls(server, challenge) {
            if let Some(found) = self.get_json::<ResourceMetadata>(&url).await? {
                metadata = Some(found);
                break;
            }
        }
        let Some(metadata) = metadata.filter(|m| !m.authorization_servers.is_empty()) else {
            return self.discover_2025_03_26(server).await;
        };
        let resource = metadata.resource.unwrap_or_else(|| server.to_string());
        if !super::resource_holds(&resource, server) {
            return Err(FlowError::ResourceMismatch { resource: shown_url(&resource) });
        }
        let issuer = &metadata.authorization_servers[0];
        let issuer_url = Url::parse(issuer).map_err(|_| super::NotAUrl(shown_url(issuer)))?;
        let mut found = None;
        for url in super::authorization_server_metadata_urls(&issuer_url) {
            if let Some(server) = self.get_json::<AuthorizationServer>(&url).await? {
                found = Some(server);
                break;
            }
        }
        let server_metadata = found.ok_or_else(|| FlowError::Unexpected {
            endpoint: shown_url(issuer),
            expected: "authorization server metadata at its well-known addresses",
        })?;
        check_server(&server_metadata, issuer)?;
        Ok(Discovered { resource, scopes_supported: metadata.scopes_supported, server: server_metadata })
    }

    /// A server of the 2025-03-26 revision: the authorization server is its origin, with
    /// its metadata at the origin's well-known address, else `/authorize`, `/token` and
    /// `/register` there.
    async fn discover_2025_03_26(&self, server: &Url) -> Result<Discovered, FlowError> {
        let origin = server.origin().ascii_serialization();
        let metadata =
            self.get_json::<AuthorizationServer>(&format!("{origin}/.well-known/oauth-authorization-server")).await?;
        let server_metadata = match metadata {
            Some(found) => {
                check_server(&found, &origin)?;
                found
            }
            None => AuthorizationServer {
                issuer: origin.clone(),
                authorization_endpoint: format!("{origin}/authorize"),
                token_endpoint: format!("{origin}/token"),
                registration_endpoint: Some(format!("{origin}/register")),
                token_endpoint_auth_methods_supported: None,
                code_challenge_methods_supported: None,
                revocation_endpoint: None,
            },
        };
        Ok(Discovered { resource: server.to_string(), scopes_supported: None, server: server_metadata })
    }

    /// Registers the host as a public client of `server`, sending the owner back to
    /// `redirect_uri` (RFC 7591).
    ///
    /// # Errors
    /// [`FlowError::NoClient`] when it has no registration endpoint; else why it refused.
    pub async fn register(
        &self,
        server: &AuthorizationServer,
        redirect_uri: &str,
        scope: Option<&str>,
    ) -> Result<Registered, FlowError> {
        let endpoint =
            server.registration_endpoint.as_deref().ok_or_else(|| FlowError::NoClient(shown_url(&server.issuer)))?;
        let mut body = json!({
            "client_name": CLIENT_NAME,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "native",
        });
        if let Some(scope) = scope {
            body["scope"] = json!(scope);
        }
        let request = self.client.post(endpoint).json(&body);
        let answer: Value = self.send(endpoint, request, "a client registration").await?;
        let text = |key: &str| answer.get(key).and_then(Value::as_str).map(str::to_owned);
        let client_id = text("client_id")
            .ok_or(FlowError::Unexpected { endpoint: shown_url(endpoint), expected: "a client registration" })?;
        Ok(Registered { client_id, client_secret: text("client_secret"), method: text("token_endpoint_auth_method") })
    }

    /// Asks `endpoint` for tokens: `grant`, as `client`, for `resource`.
    ///
    /// # Errors
    /// [`FlowError`]: the server refused (an `invalid_grant` refresh token, mostly).
    pub async fn token(
        &self,
        endpoint: &str,
        client: ClientCredentials<'_>,
        grant: Grant<'_>,
        resource: &str,
    ) -> Result<Tokens, FlowError> {
        let mut form: Vec<(&str, &str)> = match grant {
            Grant::Code { code, verifier, redirect_uri } => vec![
                ("grant_type", "authorization_code"),
                ("code", code),
                ("code_verifier", verifier),
                ("redirect_uri", redirect_uri),
            ],
            Grant::Refresh(token) => vec![("grant_type", "refresh_token"), ("refresh_token", token)],
        };
        form.push(("resource", resource));
        let request = authenticated(self.client.post(endpoint), &mut form, client)
            .ok_or(FlowError::Unexpected { endpoint: shown_url(endpoint), expected: "a client id" })?;
        let tokens: Tokens = self.send(endpoint, request.form(&form), "tokens").await?;
        if tokens.token_type.as_deref().is_some_and(|t| !t.eq_ignore_ascii_case("bearer")) {
            return Err(FlowError::Unexpected { endpoint: shown_url(endpoint), expected: "a bearer token" });
        }
        Ok(tokens)
    }

    /// Revokes `token` at `endpoint` (RFC 7009), best effort: what it answers is not
    /// waited on beyond [`REQUEST_TIMEOUT`], and a refusal changes nothing here.
    pub async fn revoke(&self, endpoint: &str, client: ClientCredentials<'_>, token: &str, hint: &str) {
        let mut form = vec![("token", token), ("token_type_hint", hint)];
        if let Some(request) = authenticated(self.client.post(endpoint), &mut form, client) {
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, request.form(&form).send()).await;
        }
    }

    /// What the MCP server at `server` says when asked without a token: the challenge of
    /// its `401` (an `initialize`, the first thing a client sends), `None` when it answers
    /// otherwise or not at all.
    pub async fn probe(&self, server: &Url) -> Option<Challenge> {
        let initialize = json!({
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")},
            },
        });
        let request = self
            .client
            .post(server.clone())
            .header(reqwest::header::ACCEPT, "application/json, text/event-stream")
            .header(super::super::HOP_HEADER, super::super::hop_mark())
            .json(&initialize);
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, request.send()).await.ok()?.ok()?;
        if answer.status() != reqwest::StatusCode::UNAUTHORIZED {
            return None;
        }
        answer
            .headers()
            .get_all(reqwest::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(super::parse_challenge)
    }

    /// `GET`s `url` as JSON: `None` when it is not there (any 4xx) or not that JSON, an
    /// error when it cannot be reached or fails (5xx).
    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<Option<T>, FlowError> {
        let request = self.client.get(url).header(reqwest::header::ACCEPT, "application/json");
        match self.answer(url, request).await? {
            (status, _) if status.is_client_error() => Ok(None),
            (status, body) if status.is_success() => Ok(serde_json::from_slice(&body).ok()),
            (status, body) => Err(refused(url, status, &body)),
        }
    }

    /// Sends `request` to `endpoint` and reads its answer as `expected`.
    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        endpoint: &str,
        request: reqwest::RequestBuilder,
        expected: &'static str,
    ) -> Result<T, FlowError> {
        let (status, body) = self.answer(endpoint, request.header(reqwest::header::ACCEPT, "application/json")).await?;
        if !status.is_success() {
            return Err(refused(endpoint, status, &body));
        }
        serde_json::from_slice(&body).map_err(|_| FlowError::Unexpected { endpoint: shown_url(endpoint), expected })
    }

    /// The status and (bounded) body of `request`'s answer, within [`REQUEST_TIMEOUT`].
    async fn answer(
        &self,
        endpoint: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, Vec<u8>), FlowError> {
        let unreachable = |why: String| FlowError::Unreachable { endpoint: shown_url(endpoint), why };
        let exchange = async {
            let mut answer = request.send().await.map_err(|e| unreachable(super::super::cause(e)))?;
            let status = answer.status();
            let mut body = Vec::new();
            while let Some(chunk) = answer.chunk().await.map_err(|e| unreachable(super::super::cause(e)))? {
                if body.len() + chunk.len() > MAX_BODY {
                    return Err(unreachable(format!("its answer is larger than {} KiB", MAX_BODY / 1024)));
                }
                body.extend_from_slice(&chunk);
            }
            Ok((status, body))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| unreachable(format!("no answer within {} s", REQUEST_TIMEOUT.as_secs())))?
    }
}

/// `request` authenticated as `client` at the token endpoint: `Authorization: Basic`
/// (marked sensitive), or its id (and secret) added to `form`; `None` when the id and
/// secret make no header.
fn authenticated<'a>(
    request: reqwest::RequestBuilder,
    form: &mut Vec<(&'a str, &'a str)>,
    client: ClientCredentials<'a>,
) -> Option<reqwest::RequestBuilder> {
    match (client.auth, client.secret) {
        (ClientAuth::Basic, Some(secret)) => {
            let mut value = reqwest::header::HeaderValue::from_str(&basic_credentials(client.id, secret)).ok()?;
            value.set_sensitive(true);
            return Some(request.header(reqwest::header::AUTHORIZATION, value));
        }
        (ClientAuth::Post, Some(secret)) => form.extend([("client_id", client.id), ("client_secret", secret)]),
        _ => form.push(("client_id", client.id)),
    }
    Some(request)
}

/// Authorization server metadata the host may use, looked up as issuer `looked_up`: its
/// `issuer` is that one (RFC 8414, section 3.3; a trailing `/` aside, as servers differ on it), its
/// endpoints are `https://` (or `http://` to this machine) as a server's own URL must be,
/// and it does PKCE with S256 — metadata that lists the methods must list it.
pub(super) fn check_server(server: &AuthorizationServer, looked_up: &str) -> Result<(), FlowError> {
    if server.issuer.trim_end_matches('/') != looked_up.trim_end_matches('/') {
        // The claim as written (clipped): shown as a URL is shown, without its user, query or
        // fragment, it could read as the very issuer it differs from.
        let claimed = butler_catalog::text::clip(&server.issuer, 200).to_string();
        return Err(FlowError::IssuerMismatch { looked_up: shown_url(looked_up), claimed });
    }
    let endpoints = [
        ("authorization_endpoint", Some(&server.authorization_endpoint)),
        ("token_endpoint", Some(&server.token_endpoint)),
        ("registration_endpoint", server.registration_endpoint.as_ref()),
        ("revocation_endpoint", server.revocation_endpoint.as_ref()),
    ];
    for (which, url) in endpoints {
        if let Some(url) = url {
            butler_catalog::suzu::allowed_url(url).map_err(|why| FlowError::EndpointNotAllowed { which, why })?;
        }
    }
    match &server.code_challenge_methods_supported {
        Some(methods) if !methods.iter().any(|m| m == "S256") => Err(FlowError::NoPkce(shown_url(&server.issuer))),
        _ => Ok(()),
    }
}

/// A refusal, with the OAuth `error` and its description when the body gives them.
fn refused(endpoint: &str, status: reqwest::StatusCode, body: &[u8]) -> FlowError {
    let said = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        let error = v.get("error")?.as_str()?.to_owned();
        let clip = |t: &str| butler_catalog::text::clip(t, 200).to_string();
        Some(match v.get("error_description").and_then(Value::as_str) {
            Some(description) => format!(": {} ({})", clip(&error), clip(description)),
            None => format!(": {}", clip(&error)),
        })
    });
    FlowError::Refused { endpoint: shown_url(endpoint), status: status.as_u16(), said: said.unwrap_or_default() }
}
