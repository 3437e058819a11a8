//! The MCP hub's providers on request: `POST /mcp/providers/{id}/{start|stop|restart}`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::extract::ApiPath;
use crate::http::{ApiError, AppState};
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
