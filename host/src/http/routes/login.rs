//! The console's login: `GET /login?t=…` spends a one-time link and sets the session
//! cookie; `POST /console/links` (owner token) makes a new link, for `butler console`.

use axum::Json;
use axum::extract::State;
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::extract::ApiQuery;
use crate::http::owner::Caller;
use crate::http::session;
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

/// `GET /login?t=TOKEN` → 303 to the console with the session cookie set.
///
/// # Errors
/// 403 `login_link_invalid` for a spent, expired or unknown link; 400 `invalid_query` for a
/// query that is not one (`t` given twice).
pub async fn login(State(state): State<AppState>, ApiQuery(query): ApiQuery<LoginQuery>) -> Result<Response, ApiError> {
    let session = query.t.as_deref().and_then(|t| state.sessions.redeem(t)).ok_or_else(|| {
        ApiError::forbidden(
            "login_link_invalid",
            "this login link was already used, has expired or is not one; run `butler console` for a new one",
        )
    })?;
    let cookie = HeaderValue::from_str(&session::set_cookie(state.gate.port, &session))
        .map_err(|e| ApiError::internal(format!("cannot set the session cookie: {e}")))?;
    let mut response = StatusCode::SEE_OTHER.into_response();
    response.headers_mut().insert(SET_COOKIE, cookie);
    response.headers_mut().insert(LOCATION, HeaderValue::from_static(crate::http::console::PAGE_PATH));
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
    let token =
        state.sessions.new_link().ok_or_else(|| ApiError::internal("cannot read randomness for a login link"))?;
    let url = login_url(&state.origin, &token);
    Ok(Json(json!({"ok": true, "data": {"url": url, "expiresInSec": session::LINK_TTL.as_secs()}})))
}
