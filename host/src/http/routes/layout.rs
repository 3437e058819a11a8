//! `GET|PUT /layout`: the console's display preferences in `stateDir/layout.json`
//! (version 1, `spec/layout.schema.json`). Reads of a missing file give the default;
//! writes are validated whole and replace the file atomically.

use std::sync::LazyLock;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::http::{ApiError, ApiJson, AppState};
use crate::instance::write_private;
use crate::validation::SchemaValidator;

/// The file under `stateDir`.
pub const LAYOUT_FILE: &str = "layout.json";

static LAYOUT_SCHEMA: LazyLock<SchemaValidator> = LazyLock::new(|| {
    SchemaValidator::compile("spec/layout.schema.json", include_str!("../../../../spec/layout.schema.json"))
        .expect("the bundled layout schema compiles (covered by the layout tests)")
});

/// The saved layout, or `{"version":1}` when none was saved.
///
/// # Errors
/// 500 `layout_unreadable` when the file exists but cannot be read or parsed.
pub async fn get_layout(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    saved(&state).await.map(Json)
}

/// The saved layout, or `{"version":1}` when none was saved (see [`get_layout`]).
///
/// # Errors
/// 500 `layout_unreadable`.
pub(super) async fn saved(state: &AppState) -> Result<Value, ApiError> {
    let path = state.instance.state_dir().join(LAYOUT_FILE);
    match tokio::fs::read(&path).await {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "layout_unreadable", format!("{}: {e}", path.display()))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({"version": 1})),
        Err(e) => Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "layout_unreadable", e.to_string())),
    }
}

/// Replaces the layout; answers with what was saved.
///
/// # Errors
/// 400 `invalid_layout` with every violation; 500 `layout_write_failed`.
pub async fn put_layout(
    State(state): State<AppState>,
    ApiJson(layout): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    let errors = LAYOUT_SCHEMA.errors(&layout);
    if let Some(first) = errors.first() {
        let at = if first.pointer.is_empty() { "(root)" } else { &first.pointer };
        let more = if errors.len() > 1 { format!(" (and {} more)", errors.len() - 1) } else { String::new() };
        return Err(ApiError::bad_request("invalid_layout", format!("{at}: {}{more}", first.message)));
    }
    let path = state.instance.state_dir().join(LAYOUT_FILE);
    let bytes = serde_json::to_vec_pretty(&layout)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "layout_write_failed", e.to_string()))?;
    tokio::task::spawn_blocking(move || write_private(&path, &bytes))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "layout_write_failed", e.to_string()))?
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "layout_write_failed", e.to_string()))?;
    Ok(Json(layout))
}
