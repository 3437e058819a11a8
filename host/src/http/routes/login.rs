//! The console's login and its sessions ([`crate::http::console_session`]): `GET /login?t=…`
//! spends a one-time link, sets the session cookie and hands the page its proof;
//! `POST /console/links` (owner token) makes a new link, for `butler console`. The owner
//! lists the open sessions (`POST /console/sessions`) and ends one
//! (`POST /console/sessions/{id}/end`), the console its own (`POST /console/logout`), and
//! `butler console --logout-all` every one (`POST /console/logout-all`).

use axum::Json;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, LOCATION, SET_COOKIE, USER_AGENT};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::extract::{ApiPath, ApiQuery};
use crate::http::owner::{Caller, console_session};
use crate::http::{ApiError, AppState};

/// The query of a login link.
#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    t: Option<String>,
}

/// The path of the login page (under the console's prefix, outside the API's).
pub const LOGIN_PATH: &str = "/myspace-butler/login";

/// The login URL for token `token` on the host at `origin` (`http://127.0.0.1:PORT`).
#[must_use]
pub fn login_url(origin: &str, token: &str) -> String {
    format!("{origin}{LOGIN_PATH}?t={token}")
}

/// `GET /login?t=TOKEN` → 303 to the console with the session cookie set and the
/// session's proof in the fragment (`/myspace-butler/#proof=…`): the page keeps it, and the
/// fragment is never sent to a server.
///
/// A spent, expired or unknown link is 403: a browser's page load (its `Accept` names
/// `text/html`) gets a page saying so and how to get a new link; anyone else the envelope.
///
/// # Errors
/// 403 `login_link_invalid` for a spent, expired or unknown link; 400 `invalid_query` for a
/// query that is not one (`t` given twice).
pub async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<LoginQuery>,
) -> Result<Response, ApiError> {
    let agent = headers.get(USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let Some(login) = query.t.as_deref().and_then(|t| state.console_sessions.redeem(t, agent)) else {
        if crate::http::console::wants_page(&headers) {
            return Ok(crate::http::console::refused_login_page(StatusCode::FORBIDDEN, &headers));
        }
        return Err(ApiError::forbidden(
            "login_link_invalid",
            "this login link was already used, has expired or is not one; run `butler console` for a new one",
        ));
    };
    let cookie = HeaderValue::from_str(&crate::http::console_session::set_cookie(state.gate.port, &login.session))
        .map_err(|e| ApiError::internal(format!("cannot set the session cookie: {e}")))?;
    let to = format!("{}#proof={}", crate::http::console::PAGE_PATH, login.proof);
    let location = HeaderValue::from_str(&to).map_err(|e| ApiError::internal(format!("cannot redirect: {e}")))?;
    let mut response = StatusCode::SEE_OTHER.into_response();
    response.headers_mut().insert(SET_COOKIE, cookie);
    response.headers_mut().insert(LOCATION, location);
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `POST /console/links` (owner token) → `{"ok":true,"data":{"url"}}`: a new one-time
/// login link.
///
/// # Errors
/// 403 `owner_required` without the owner token.
pub async fn new_link(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    if !caller.owner {
        return Err(ApiError::forbidden("owner_required", "a login link is given to the owner only (the CLI's token)"));
    }
    let token = state
        .console_sessions
        .new_link()
        .ok_or_else(|| ApiError::internal("cannot read randomness for a login link"))?;
    let url = login_url(&state.origin, &token);
    Ok(Json(
        json!({"ok": true, "data": {"url": url, "expiresInSec": crate::http::console_session::LINK_TTL.as_secs()}}),
    ))
}

/// 403 `owner_required` unless `caller` is the owner.
pub(super) fn owner_only(caller: Caller, what: &str) -> Result<(), ApiError> {
    caller.must_be_owner(|| format!("{what} is the owner's (the owner token, or the logged-in console)"))
}

/// `POST /console/sessions` (owner) → `{"ok":true,"data":{"sessions":[{"id","createdAt",
/// "lastUsedAt","expiresAt","agent","current"}]}}`, the most recently used first;
/// `current` marks the session making the request. A POST: the console proves the owner
/// only on requests that carry its `Origin`.
///
/// # Errors
/// 403 `owner_required`.
pub async fn list_sessions(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    owner_only(caller, "the list of console sessions")?;
    let current = console_session(&headers, state.gate, &state.console_sessions);
    let at = |secs: u64| crate::time::rfc3339(secs.saturating_mul(1000));
    let sessions: Vec<Value> = state
        .console_sessions
        .list()
        .into_iter()
        .map(|s| {
            json!({"id": s.id, "createdAt": at(s.created), "lastUsedAt": at(s.last_used),
                   "expiresAt": at(s.expires), "agent": s.agent, "current": current.as_deref() == Some(s.id.as_str())})
        })
        .collect();
    Ok(Json(json!({"ok": true, "data": {"sessions": sessions}})))
}

/// `POST /console/sessions/{id}/end` (owner) → `{"ok":true,"data":{"ended":true}}`: that
/// session is logged out.
///
/// # Errors
/// 403 `owner_required`; 404 `unknown_session` (none open with that id).
pub async fn end_session(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    owner_only(caller, "ending a console session")?;
    if !state.console_sessions.end(&id) {
        return Err(ApiError::not_found(
            "unknown_session",
            format!("no open console session `{}`", crate::text::clip(&id, 40)),
        ));
    }
    Ok(Json(json!({"ok": true, "data": {"ended": true}})))
}

/// `POST /console/logout` (the console) → `{"ok":true,"data":{"ended":true}}`: ends the
/// session making the request and clears its cookie.
///
/// # Errors
/// 403 `owner_required` unless the request is the logged-in console's.
pub async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let id = console_session(&headers, state.gate, &state.console_sessions).ok_or_else(|| {
        ApiError::forbidden("owner_required", "logging out ends the console's own session: send its cookie and proof")
    })?;
    let ended = state.console_sessions.end(&id);
    let cookie = HeaderValue::from_str(&crate::http::console_session::clear_cookie(state.gate.port))
        .map_err(|e| ApiError::internal(format!("cannot clear the session cookie: {e}")))?;
    let mut response = Json(json!({"ok": true, "data": {"ended": ended}})).into_response();
    response.headers_mut().insert(SET_COOKIE, cookie);
    Ok(response)
}

/// `POST /console/logout-all` (owner) → `{"ok":true,"data":{"ended":N}}`: every console
/// session ends (what `butler console --logout-all` asks).
///
/// # Errors
/// 403 `owner_required`.
pub async fn logout_all(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    owner_only(caller, "ending every console session")?;
    let ended = state.console_sessions.end_all();
    Ok(Json(json!({"ok": true, "data": {"ended": ended}})))
}
