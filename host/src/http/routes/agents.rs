//! `POST /delegations`, and the runs that record them: `GET /runs`, `GET /runs/{id}`,
//! `POST /runs/{id}/steps/{index}/{confirm|reject}` ([`crate::agents`]). Deciding a step is
//! the owner's alone (the console, or the owner token) — never anything arriving over MCP.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::extract::ApiPath;
use crate::agents::AgentError;
use crate::agents::delegations::DelegationError;
use crate::agents::runs::{Decision, RunError};
use crate::http::error::ObjectBody;
use crate::http::owner::Caller;
use crate::http::{ApiError, ApiJson, AppState};

/// What `POST /delegations` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegateRequest {
    /// The extension that declares the delegation.
    extension: String,
    /// The delegation's id.
    id: String,
    /// The data the agent judges (given to it as data, apart from the instructions).
    #[serde(default)]
    input: Value,
}

/// `POST /delegations`: runs the delegation to its result, `{ok, run, result}`.
///
/// # Errors
/// 404 `unknown_extension` / `unknown_delegation`; 503 `agent_unavailable` / `agent_busy`;
/// 504 `delegation_timeout`; 502 `agent_failed` / `agent_exited`; 409 `delegation_rejected`;
/// 504 `confirmation_pending` when the owner did not decide within the wait.
pub async fn delegate(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<DelegateRequest>,
) -> Result<Json<Value>, ApiError> {
    let catalog = state.catalog.current();
    match state.delegations.delegate(&catalog, &request.extension, &request.id, request.input).await {
        Ok(done) => Ok(Json(json!({"ok": true, "run": done.run, "result": done.result}))),
        Err(error) => Err(delegation_error(&error)),
    }
}

fn delegation_error(error: &DelegationError) -> ApiError {
    let (status, code, run) = match error {
        DelegationError::UnknownExtension(_) => (StatusCode::NOT_FOUND, "unknown_extension", None),
        DelegationError::UnknownDelegation { .. } => (StatusCode::NOT_FOUND, "unknown_delegation", None),
        DelegationError::NotStarted(agent) => (StatusCode::SERVICE_UNAVAILABLE, agent.code(), None),
        DelegationError::Agent { run, error } => {
            let status = match error {
                AgentError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
                AgentError::Unavailable | AgentError::Busy | AgentError::Stopping => StatusCode::SERVICE_UNAVAILABLE,
                AgentError::Start(_) | AgentError::Exited(_) => StatusCode::BAD_GATEWAY,
            };
            (status, error.code(), Some(run))
        }
        DelegationError::Rejected { run, .. } => (StatusCode::CONFLICT, "delegation_rejected", Some(run)),
        DelegationError::StillPending { run } => (StatusCode::GATEWAY_TIMEOUT, "confirmation_pending", Some(run)),
        DelegationError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal", None),
    };
    let mut api = ApiError::new(status, code, error.to_string());
    if let Some(run) = run {
        api.details = Some(Box::new(json!({"run": run})));
    }
    api
}

/// `GET /runs`: every run, newest first, without results.
pub async fn list(State(state): State<AppState>) -> Json<Value> {
    let runs: Vec<Value> = state
        .delegations
        .runs()
        .all()
        .into_iter()
        .map(|run| {
            json!({"id": run.id, "extension": run.extension, "delegation": run.delegation, "status": run.status,
                   "createdAt": run.created_at, "updatedAt": run.updated_at})
        })
        .collect();
    Json(json!({"runs": runs}))
}

/// `GET /runs/{id}`: the run with its steps, results and timestamps.
///
/// # Errors
/// 404 `unknown_run`.
pub async fn get(State(state): State<AppState>, ApiPath(id): ApiPath<String>) -> Result<Json<Value>, ApiError> {
    let run = state.delegations.runs().get(&id).ok_or_else(|| unknown_run(&id))?;
    Ok(Json(serde_json::to_value(run).unwrap_or_default()))
}

fn unknown_run(id: &str) -> ApiError {
    ApiError::not_found("unknown_run", format!("no run `{}`", butler_catalog::text::clip(id, 80)))
}

/// `POST /runs/{id}/steps/{index}/{confirm|reject}`: the owner's decision on a step awaiting
/// confirmation; the blocked caller gets the result, or `409 delegation_rejected`.
///
/// # Errors
/// 403 `owner_required`; 404 `unknown_run` / `unknown_decision`; 409 `not_pending`; 400 on
/// a bad body (empty, or `{"reason": "…"}`).
pub async fn decide(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((id, index, decision)): ApiPath<(String, usize, String)>,
    ObjectBody(body): ObjectBody,
) -> Result<Json<Value>, ApiError> {
    caller.must_be_owner(|| {
        "confirming or rejecting a delegation's result is the owner's decision: use the console, or the owner token"
            .to_owned()
    })?;
    // `{"reason": "…"}`, optional: why (a rejection's reason, shown to the caller).
    let reason = match body.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) => Some(butler_catalog::text::clip(reason, 2000)),
        Some(_) => return Err(ApiError::bad_request("invalid_body", "`reason` is a string")),
    };
    let decision = match decision.as_str() {
        "confirm" => Decision::Confirmed,
        "reject" => Decision::Rejected(reason),
        other => {
            return Err(ApiError::not_found(
                "unknown_decision",
                format!("`{}` is not a decision: confirm or reject", butler_catalog::text::clip(other, 40)),
            ));
        }
    };
    match state.delegations.runs().decide(&id, index, &decision) {
        Ok(run) => Ok(Json(json!({"ok": true, "run": run}))),
        Err(RunError::Unknown(_)) => Err(unknown_run(&id)),
        Err(error @ RunError::NotPending { .. }) => {
            Err(ApiError::new(StatusCode::CONFLICT, "not_pending", error.to_string()))
        }
        Err(error @ RunError::Io(_)) => Err(ApiError::internal(error.to_string())),
    }
}
