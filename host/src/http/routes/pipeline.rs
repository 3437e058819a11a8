//! `POST /pipeline` and `POST /observe`: the card pipeline's doors.
//! Routing and gating only — the faculties do the work.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::http::error::ObjectBody;
use crate::http::owner::Caller;
use crate::http::{ApiError, AppState};
use crate::pipeline::observations;
use butler_faculty::CallContext;

/// `{"action": "<prefix>.<verb>", "args": {…}}` → `{"ok":true,"data":…}`.
///
/// # Errors
/// The envelope: `unknown_action` 404, `invalid_args` 400, `owner_required` 403, and
/// whatever the faculty answered.
pub async fn pipeline(
    State(state): State<AppState>,
    caller: Caller,
    ObjectBody(mut body): ObjectBody,
) -> Result<Json<Value>, ApiError> {
    let action = match body.remove("action") {
        Some(Value::String(action)) => action,
        _ => {
            return Err(ApiError::bad_request(
                "invalid_args",
                "the body needs a string `action`, `<prefix>.<verb>` (the prefixes are in GET /faculties)",
            ));
        }
    };
    let args = match body.remove("args") {
        None | Some(Value::Null) => json!({}),
        Some(args @ Value::Object(_)) => args,
        Some(_) => return Err(ApiError::bad_request("invalid_args", "`args` must be a JSON object")),
    };
    if let Some(extra) = body.keys().next() {
        return Err(ApiError::bad_request(
            "invalid_args",
            format!("unknown field `{extra}` (the body is {{\"action\", \"args\"}})"),
        ));
    }
    let context = caller.context().until(state.pipeline.deadline(&action));
    let data = run(&state, action, args, context).await?;
    Ok(Json(json!({"ok": true, "data": data})))
}

/// `{source, type?, tags?, text, ref?}` → 202 `{"queued":true}` through the command that
/// takes observations.
///
/// # Errors
/// 400 `invalid_observation`; 503 `busy` / 504 `timeout` / 503 `shutting_down` (try
/// again), 503 `not_served` (no faculty takes observations); 502 `intake_failed` when the
/// command could not record it.
pub async fn observe(
    State(state): State<AppState>,
    ObjectBody(body): ObjectBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let observation = Value::Object(body);
    let context = CallContext::top(false).until(observations::deadline(&state.faculties));
    let runtime = std::sync::Arc::clone(&state.faculties);
    let taken = state
        .faculties
        .blocking(context.deadline(), move || observations::take(&runtime, &observation, &context))
        .await
        .map_err(ApiError::from);
    match taken {
        Ok(_) => Ok((StatusCode::ACCEPTED, Json(json!({"queued": true})))),
        Err(e) if e.code.starts_with("invalid_") => {
            Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_observation", e.message))
        }
        // Worth retrying: the journal is busy, ran out of time, or the host is stopping.
        Err(e) if matches!(e.code.as_ref(), "busy" | "timeout" | "shutting_down" | "not_served") => Err(e),
        Err(e) => Err(ApiError::new(StatusCode::BAD_GATEWAY, "intake_failed", e.message)),
    }
}

async fn run(state: &AppState, action: String, args: Value, context: CallContext) -> Result<Value, ApiError> {
    state.pipeline.call_awaited(action, args, context).await.map_err(ApiError::from)
}
