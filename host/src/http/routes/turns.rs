//! `POST /sessions/turns` and `POST /sessions/flush`: the owner's session turns, taken by
//! the collector ([`crate::collector`]) — redacted, stored durably, then handed to the
//! journal.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::collector::{CollectError, Collected};
use crate::http::error::ObjectBody;
use crate::http::{ApiError, AppState};

/// `POST /sessions/turns {id?, messages: [{role, content, name?}], workspace?, preset?,
/// subagent?, source?}`: 202 `{ok, queued: true, id, redacted}` once stored durably; 200
/// `{ok, queued: false, skipped}` when the `collector` config leaves it out.
///
/// # Errors
/// 400 `invalid_turn`; 503 `collector_full` / `collector_unavailable` (not collected).
pub async fn turns(
    State(state): State<AppState>,
    ObjectBody(body): ObjectBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let collector = std::sync::Arc::clone(&state.collector);
    // The write is synced to disk: off the async workers.
    let taken = tokio::task::spawn_blocking(move || collector.collect(body))
        .await
        .map_err(|e| ApiError::internal(format!("the collector failed: {e}")))?;
    match taken {
        Ok(Collected::Queued { id, redacted }) => {
            Ok((StatusCode::ACCEPTED, Json(json!({"ok": true, "queued": true, "id": id, "redacted": redacted}))))
        }
        Ok(Collected::Skipped(why)) => Ok((StatusCode::OK, Json(json!({"ok": true, "queued": false, "skipped": why})))),
        Err(error @ CollectError::Invalid(_)) => Err(ApiError::bad_request("invalid_turn", error.to_string())),
        Err(error @ CollectError::Full) => {
            Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "collector_full", error.to_string()))
        }
        Err(error @ CollectError::Persist(_)) => {
            Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "collector_unavailable", error.to_string()))
        }
    }
}

/// `POST /sessions/flush`: hands the pending turns to the journal now, waits for the pass
/// (at most 10 s) → `{ok, pending}`: how many still wait.
pub async fn flush(State(state): State<AppState>) -> Json<Value> {
    let pending = state.collector.flush().await;
    Json(json!({"ok": true, "pending": pending}))
}
