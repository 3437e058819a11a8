//! Faculty commands and reports over HTTP.

use axum::Json;
use axum::extract::State;
use serde_json::{Map, Value, json};

use super::extract::ApiPath;
use crate::http::error::ObjectBody;
use crate::http::owner::Caller;
use crate::http::{ApiError, AppState};
use butler_faculty::CallContext;

/// `POST /faculties/{id}/commands/{cmd}` with `{"args": {…}}` (or no body) →
/// `{"ok":true,"data":…}`.
///
/// # Errors
/// The error envelope with the call's code (`invalid_args`, `timeout`, `trap`, …).
pub async fn command(
    State(state): State<AppState>,
    ApiPath((id, command)): ApiPath<(String, String)>,
    caller: Caller,
    ObjectBody(mut body): ObjectBody,
) -> Result<Json<Value>, ApiError> {
    let args = match body.remove("args") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args,
        Some(_) => return Err(ApiError::bad_request("invalid_args", "`args` must be a JSON object")),
    };
    if let Some(extra) = body.keys().next() {
        return Err(ApiError::bad_request(
            "invalid_args",
            format!("unknown field `{extra}` (the body is {{\"args\": {{…}}}})"),
        ));
    }
    let context = caller.context().until(state.faculties.deadline_for(&id));
    let data = state.faculties.invoke_awaited(id, command, args, context).await?;
    Ok(Json(json!({"ok": true, "data": data})))
}

/// `GET /faculties/{id}/reports/{report}` → the report object, checked against its shape.
///
/// # Errors
/// The error envelope (`unknown_report`, `invalid_report`, …).
pub async fn report(
    State(state): State<AppState>,
    ApiPath((id, report)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let context = CallContext::top(false).until(state.faculties.deadline_for(&id));
    let runtime = state.faculties.clone();
    let deadline = context.deadline();
    let data = state.faculties.blocking(deadline, move || runtime.report(&id, &report, &context)).await?;
    Ok(Json(data))
}
