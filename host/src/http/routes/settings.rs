//! `GET /config`, `POST /config/check`, `PUT /config`: the instance's root config as the
//! console's Settings view edits it — checking and saving are the owner's alone (the seed:
//! config editing only for trusted local callers), checked exactly as the running host checks an edit of the file
//! (`instance::live`), written whole and brought into force at once.

use axum::Json;
use axum::extract::State;
use axum::http::header::IF_MATCH;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::http::owner::Caller;
use crate::http::{ApiError, ApiJson, AppState};
use crate::instance::live::{RESTART_FIELDS, ReplaceError, STARTUP_FIELDS, Verdict, live_fields};

fn owner_only(caller: Caller) -> Result<(), ApiError> {
    caller
        .must_be_owner(|| "the root config is the owner's: the console's Settings view, or the file itself".to_owned())
}

/// The file's text and document, what is wrong with it or waits for a restart, and which
/// fields apply live and which always need a restart. Any caller the gate lets through may
/// read it, as it may read the file (the console reads it with a plain `GET`, which
/// carries no `Origin` for the owner gate); changing it is the owner's.
pub async fn get_config(State(state): State<AppState>) -> Json<Value> {
    let live = std::sync::Arc::clone(&state.config);
    let file = tokio::task::spawn_blocking(move || live.file()).await.ok();
    let (text, document, revision) = file.map(|f| (f.text, f.document, Some(f.revision))).unwrap_or_default();
    Json(json!({
        "document": document,
        "text": text,
        "revision": revision,
        "diagnostics": state.config.diagnostics(),
        "liveFields": live_fields(&state.config.current().config),
        "restartFields": RESTART_FIELDS.iter().chain(STARTUP_FIELDS).collect::<Vec<_>>(),
    }))
}

/// What saving `document` would come to: every problem with its pointer, and the changed
/// fields that would wait for a restart. Nothing is written.
///
/// # Errors
/// 403 `owner_required`.
pub async fn check_config(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(document): ApiJson<Value>,
) -> Result<Json<Verdict>, ApiError> {
    owner_only(caller)?;
    Ok(Json(state.config.judge(&document)))
}

/// Replaces the root config with `document` and brings it into force — with `If-Match:
/// "<revision>"` (what `GET /config` gave), only while the file is still that revision;
/// answers with the verdict (the fields that wait for a restart).
///
/// # Errors
/// 403 `owner_required`; 400 `invalid_config` with every problem in `details.problems`
/// (nothing is written); 409 `config_changed` when the file is no longer the `If-Match`
/// revision (nothing is written); 500 `config_write_failed`.
pub async fn put_config(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(document): ApiJson<Value>,
) -> Result<Json<Verdict>, ApiError> {
    owner_only(caller)?;
    let revision = headers.get(IF_MATCH).and_then(|v| v.to_str().ok()).map(|v| v.trim().trim_matches('"').to_owned());
    let live = std::sync::Arc::clone(&state.config);
    let failed = |e: String| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "config_write_failed", e);
    let verdict = match tokio::task::spawn_blocking(move || live.replace(&document, revision.as_deref())).await {
        Err(e) => return Err(failed(e.to_string())),
        Ok(Err(ReplaceError::Changed)) => {
            return Err(ApiError::new(StatusCode::CONFLICT, "config_changed", ReplaceError::Changed.to_string()));
        }
        Ok(Err(ReplaceError::Io(e))) => return Err(failed(e.to_string())),
        Ok(Ok(verdict)) => verdict,
    };
    if let Some(first) = verdict.problems.first() {
        let at = if first.pointer.is_empty() { "(root)" } else { &first.pointer };
        let more = match verdict.problems.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return Err(ApiError {
            details: Some(Box::new(json!({"problems": verdict.problems}))),
            ..ApiError::bad_request("invalid_config", format!("{at}: {}{more}; nothing was saved", first.message))
        });
    }
    Ok(Json(verdict))
}
