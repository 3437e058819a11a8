//! OAuth logins to the hub's remote servers: the owner begins one (`POST
//! /mcp/providers/{id}/login`, what `butler mcp login` and the console's Connect button
//! send), follows its URL in a browser, and the authorization server sends the browser
//! back to the host's loopback callback (`GET /oauth/callback`, the one route here that
//! needs no credential: it does nothing without the `state` of a login under way); `GET
//! /mcp/logins/{id}` says how the login went, and `DELETE /mcp/providers/{id}/login`
//! forgets the tokens.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::extract::{ApiPath, ApiQuery};
use super::login::owner_only;
use crate::http::owner::Caller;
use crate::http::{API_PREFIX, ApiError, AppState};
use crate::upstream::oauth::broker::{BrokerError, CALLBACK_PATH, Outcome};
use butler_mcp::ProviderAction;

/// How long beginning a login may take (discovery and registration: several requests,
/// each with its own limit).
const BEGIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// `POST /mcp/providers/{id}/login`: `{"login": id, "url": the authorization URL}`.
///
/// # Errors
/// 403 `owner_required`; 404 `unknown_provider` (no provider, or not a remote server);
/// 502 `login_failed` when discovery or registration failed; 504 `login_timeout` past
/// [`BEGIN_TIMEOUT`]; 429 `too_many_logins`.
pub async fn begin(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    owner_only(caller, "logging in to an MCP server")?;
    let remote = state.mcp.remote(&id).ok_or_else(|| {
        ApiError::not_found(
            "unknown_provider",
            format!("no remote MCP server `{}` (see `butler mcp status`)", crate::text::clip(&id, 100)),
        )
    })?;
    if remote.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("authorization")) {
        return Err(ApiError::bad_request(
            "static_credentials",
            format!(
                "`{id}` sends an Authorization header of its own (its manifest's `headers`): remove it to log in instead"
            ),
        ));
    }
    let redirect_uri = format!("{}{API_PREFIX}{CALLBACK_PATH}", state.origin);
    let begun = tokio::time::timeout(BEGIN_TIMEOUT, state.oauth.begin(&id, &remote.url, &redirect_uri)).await;
    let Ok(begun) = begun else {
        return Err(ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "login_timeout",
            format!(
                "discovering `{id}`'s authorization server took longer than {} s: try again, or check the server's address",
                BEGIN_TIMEOUT.as_secs()
            ),
        ));
    };
    match begun {
        Ok(begun) => Ok(Json(json!({"ok": true, "data": {"login": begun.id, "url": begun.url}}))),
        Err(BrokerError::Busy) => {
            Err(ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_logins", BrokerError::Busy.to_string()))
        }
        Err(error @ BrokerError::TooManyAuthorizations { .. }) => {
            Err(ApiError::new(StatusCode::CONFLICT, "too_many_authorizations", error.to_string()))
        }
        Err(error) => Err(ApiError::new(StatusCode::BAD_GATEWAY, "login_failed", error.to_string())),
    }
}

/// `GET /mcp/logins/{id}`: `{"state": "waiting"|"done"|"failed", "reason"}` — read as
/// the status is (the console reads it with a plain `GET`, which carries no `Origin` for
/// the owner gate); the id is known only to whoever began the login, and the outcome holds
/// no secret.
///
/// # Errors
/// 404 `unknown_login` (never begun, or long ago).
pub async fn outcome(State(state): State<AppState>, ApiPath(id): ApiPath<String>) -> Result<Json<Value>, ApiError> {
    let shown = match state.oauth.outcome(&id) {
        Some(Outcome::Waiting) => json!({"state": "waiting"}),
        Some(Outcome::Done) => json!({"state": "done"}),
        Some(Outcome::Failed(reason)) => json!({"state": "failed", "reason": reason}),
        None => return Err(ApiError::not_found("unknown_login", "no such login (they are kept 10 minutes)")),
    };
    Ok(Json(json!({"ok": true, "data": shown})))
}

/// `DELETE /mcp/providers/{id}/login`: forgets the server's tokens (revoking them where
/// the authorization server can), and restarts it: `{"forgotten": whether it had a login}`.
///
/// # Errors
/// 403 `owner_required`; 500 `store_failed` when the file cannot be removed.
pub async fn logout(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    owner_only(caller, "logging out of an MCP server")?;
    let forgotten = state
        .oauth
        .logout(&id)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "store_failed", e.to_string()))?;
    if state.mcp.remote(&id).is_some() {
        // It connects again without the tokens (and says it needs a login); whether it
        // does is its status's business, not this answer's.
        let _ = state.mcp.act(&id, ProviderAction::Restart).await;
    }
    Ok(Json(json!({"ok": true, "data": {"forgotten": forgotten}})))
}

/// The callback's query: what the authorization server sends back (RFC 6749 4.1.2).
#[derive(Debug, Deserialize)]
pub struct Callback {
    state: Option<String>,
    code: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    /// RFC 9207's issuer (not checked: the state ties the answer to its login).
    #[allow(dead_code)]
    iss: Option<String>,
}

/// `GET /oauth/callback`: finishes the login whose `state` it names, then reconnects its
/// server. A browser (its `Accept` names `text/html`) gets a page that says how it went;
/// anyone else `{"ok": true, "data": {"server"}}` or the envelope.
pub async fn callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<Callback>,
) -> Result<Response, ApiError> {
    let page = crate::http::console::wants_page(&headers);
    let Some(login_state) = query.state.as_deref() else {
        let error =
            ApiError::bad_request("not_a_login", "this address only takes the answer to a login the host began");
        return if page { Ok(shown(StatusCode::BAD_REQUEST, "Not a login", &error.message)) } else { Err(error) };
    };
    let error = query.error.as_deref().map(|e| match query.error_description.as_deref() {
        Some(description) => format!("{e} ({description})"),
        None => e.to_owned(),
    });
    let refused = match state.oauth.complete(login_state, query.code.as_deref(), error.as_deref()).await {
        Ok(server) => {
            let hub = std::sync::Arc::clone(&state.mcp);
            let id = server.clone();
            tokio::spawn(async move {
                let _ = hub.act(&id, ProviderAction::Restart).await;
            });
            if page {
                let text = format!("Butler is logged in to {server}. You can close this tab.");
                return Ok(shown(StatusCode::OK, "Logged in", &text));
            }
            return Ok(Json(json!({"ok": true, "data": {"server": server}})).into_response());
        }
        Err(error @ BrokerError::UnknownState) => ApiError::bad_request("unknown_login", error.to_string()),
        Err(error) => ApiError::new(StatusCode::BAD_GATEWAY, "login_failed", error.to_string()),
    };
    if page { Ok(shown(refused.status, "Login failed", &refused.message)) } else { Err(refused) }
}

/// A small page for the browser: `text`, escaped; nothing loaded, no script.
fn shown(status: StatusCode, title: &str, text: &str) -> Response {
    let escape = |t: &str| t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head><body><h1>{title}</h1><p>{}</p></body></html>",
        escape(text),
        title = escape(title)
    );
    let mut response = (status, Html(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
    for (name, value) in crate::http::console::security_headers() {
        headers.insert(name, value);
    }
    response
}
