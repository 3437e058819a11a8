//! `GET /automations` and `POST /automations`: the host's scheduled jobs
//! ([`crate::agents::automations`]), and registering the host's own.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::http::owner::Caller;
use crate::http::{ApiError, AppState};

/// `GET /automations`: `{timeZone, agent, jobs: [{title, schedule, timeZone, instructions,
/// registeredAt, last, nextRun, running, hostJob, log?}]}`.
pub async fn list(State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "timeZone": state.automations.time_zone(),
        "agent": state.agents.available(),
        "jobs": state.automations.list(),
    }))
}

/// `POST /automations`: registers the host's jobs → `{ok, added, replaced, kept, removed}`.
///
/// # Errors
/// 403 `owner_required`; 503 `agent_unavailable` (no `agent.command`: nothing would run
/// them); 500 when the jobs cannot be saved.
pub async fn register(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.must_be_owner(|| {
        "registering automations schedules runs of the owner's agent: use the console, or the owner token".to_owned()
    })?;
    if !state.agents.available() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            crate::agents::AgentError::Unavailable.code(),
            crate::agents::AgentError::Unavailable.to_string(),
        ));
    }
    // The jobs are the faculties' declarations: wait for faculties still being compiled.
    state.mcp.settle().await;
    let done = state.automations.register(&state.catalog.current()).map_err(|e| ApiError::internal(e.to_string()))?;
    let mut answer = serde_json::to_value(done).unwrap_or_default();
    answer["ok"] = json!(true);
    Ok(Json(answer))
}
