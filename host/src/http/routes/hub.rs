//! The MCP hub, on request: its providers started, stopped or restarted (`POST
//! /mcp/providers/{id}/{start|stop|restart}`) and its activity log (`GET /mcp/activity`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use serde::Deserialize;

use super::extract::{ApiPath, ApiQuery};
use crate::http::{ApiError, AppState};
use butler_mcp::activity::{MAX_PAGE, Query};
use butler_mcp::{ActionError, ProviderAction};

/// `POST /mcp/providers/{id}/{start|stop|restart}`: the provider's status after.
pub async fn action(
    State(state): State<AppState>,
    ApiPath((id, action)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let action = match action.as_str() {
        "start" => ProviderAction::Start,
        "stop" => ProviderAction::Stop,
        "restart" => ProviderAction::Restart,
        other => {
            return Err(ApiError::not_found(
                "unknown_action",
                format!("no action `{other}` on an MCP provider: use start, stop or restart"),
            ));
        }
    };
    match state.mcp.act(&id, action).await {
        Ok(status) => Ok(Json(json!({"ok": true, "data": {"id": id, "status": status}}))),
        Err(error @ ActionError::Unknown(_)) => Err(ApiError::not_found("unknown_provider", error.to_string())),
        Err(error @ ActionError::Failed { .. }) => {
            Err(ApiError::new(StatusCode::BAD_GATEWAY, "provider_failed", error.to_string()))
        }
    }
}

/// `GET /mcp/activity`'s query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActivityQuery {
    /// At most this many entries (default 50, at most 500).
    limit: Option<usize>,
    /// Only entries older than this `seq` (the next page).
    before: Option<u64>,
    /// Only entries newer than this `seq`, oldest first (following the log).
    after: Option<u64>,
    /// Only entries whose tool, prompt or URI matches this glob.
    name: Option<String>,
}

/// `GET /mcp/activity`: entries newest first (oldest first with `after`), and the `seq` to
/// ask `before` (with `after`: `after`) for the next page.
pub async fn activity(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ActivityQuery>,
) -> Result<Json<Value>, ApiError> {
    let name = query
        .name
        .map(|glob| {
            globset::Glob::new(&glob).map(|g| g.compile_matcher()).map_err(|e| {
                ApiError::bad_request("invalid_query", format!("`name` is not a glob ({e}): use *, ? and [...]"))
            })
        })
        .transpose()?;
    let limit = query.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let entries = state.mcp.activity().page(&Query { before: query.before, after: query.after, name, limit }).await;
    let next = (entries.len() == limit).then(|| entries.last().map(|e| e.seq)).flatten();
    Ok(Json(json!({"entries": entries, "next": next})))
}
