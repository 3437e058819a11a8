//! Hosted tools and services: `POST /{tools|services}/{id}/{start|stop|restart}`, the log
//! stream `GET /{tools|services}/{id}/log` (server-sent events: the backlog, then live
//! lines), and the owner's `POST /{tools|services}/{id}/details` (what runs, where, and the
//! restart history).

use std::convert::Infallible;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::extract::ApiPath;
use crate::catalog::Kind;
use crate::http::{ApiError, AppState};
use crate::supervise::{Action, Item, SuperviseError};
use butler_process::logs::LogLine;

/// `POST /tools/{id}/{action}`.
pub async fn tool_action(
    State(state): State<AppState>,
    ApiPath((id, action)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    act(&state, Kind::Tool, &id, &action).await
}

/// `POST /services/{id}/{action}`.
pub async fn service_action(
    State(state): State<AppState>,
    ApiPath((id, action)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    act(&state, Kind::Service, &id, &action).await
}

/// `GET /tools/{id}/log`.
pub async fn tool_log(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>> + use<>>, ApiError> {
    log(&state, Kind::Tool, &id)
}

/// `GET /services/{id}/log`.
pub async fn service_log(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>> + use<>>, ApiError> {
    log(&state, Kind::Service, &id)
}

/// `POST /tools/{id}/details`.
pub async fn tool_details(
    State(state): State<AppState>,
    caller: crate::http::owner::Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    details(&state, &caller, Kind::Tool, &id)
}

/// `POST /services/{id}/details`.
pub async fn service_details(
    State(state): State<AppState>,
    caller: crate::http::owner::Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    details(&state, &caller, Kind::Service, &id)
}

/// What runs and where — the command line and working directory as resolved (never the
/// environment, which may hold secrets), the port, pid and process group, the last health
/// probe — and the last ended runs. The owner's only: what runs is not public.
fn details(
    state: &AppState,
    caller: &crate::http::owner::Caller,
    kind: Kind,
    id: &str,
) -> Result<Json<Value>, ApiError> {
    caller
        .must_be_owner(|| "what an item runs is the owner's to see: use the console, or the owner token".to_owned())?;
    let item = find(state, kind, id)?;
    let spec = item.spec();
    let status = item.status();
    let (command, cwd, launch_error) = match &spec.launch {
        Ok(launch) => (json!(launch.argv), json!(launch.cwd.display().to_string()), Value::Null),
        Err(e) => (Value::Null, Value::Null, json!(e.to_string())),
    };
    Ok(Json(json!({
        "id": id,
        "command": command,
        "cwd": cwd,
        "launchError": launch_error,
        "port": spec.port(),
        "pid": status.pid,
        "pgid": status.pgid,
        "health": status.health,
        "restart": status.restart,
        "history": item.history(),
    })))
}

async fn act(state: &AppState, kind: Kind, id: &str, action: &str) -> Result<Json<Value>, ApiError> {
    let action = match action {
        "start" => Action::Start,
        "stop" => Action::Stop,
        "restart" => Action::Restart,
        other => {
            return Err(ApiError::not_found(
                "unknown_action",
                format!("no action `{other}` on a {}: use start, stop or restart", kind.as_str()),
            ));
        }
    };
    let item = find(state, kind, id)?;
    let status = state.supervisor.act(&item, id, action).await?;
    Ok(Json(json!({"ok": true, "data": {"id": id, "status": status}})))
}

fn find(state: &AppState, kind: Kind, id: &str) -> Result<std::sync::Arc<Item>, ApiError> {
    Ok(state.supervisor.item(&state.catalog.current(), kind, id)?)
}

/// The log as SSE: `log` events (`id` = the line's `seq`, data `{seq, at, stream, text}`),
/// one `live` event when the backlog is sent, and `skipped` (`{"lines": N}`) if this client
/// fell so far behind that lines were dropped for it.
fn log(
    state: &AppState,
    kind: Kind,
    id: &str,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>> + use<>>, ApiError> {
    let item = find(state, kind, id)?;
    Ok(log_events(&item.log))
}

/// A log as SSE, as [`log`] describes (also an MCP provider's).
pub(super) fn log_events(
    log: &butler_process::logs::Log,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<>> {
    let follow = log.follow();
    let start = (follow.backlog.into_iter(), follow.live, true);
    let stream = futures_util::stream::unfold(start, |(mut backlog, mut live, mut pending_live)| async move {
        if let Some(line) = backlog.next() {
            return Some((Ok(line_event(&line)), (backlog, live, pending_live)));
        }
        if pending_live {
            pending_live = false;
            return Some((Ok(Event::default().event("live").data("{}")), (backlog, live, pending_live)));
        }
        let event = match live.recv().await {
            Ok(line) => line_event(&line),
            Err(RecvError::Lagged(n)) => Event::default().event("skipped").data(json!({"lines": n}).to_string()),
            Err(RecvError::Closed) => return None,
        };
        Some((Ok(event), (backlog, live, pending_live)))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

fn line_event(line: &LogLine) -> Event {
    Event::default().event("log").id(line.seq.to_string()).data(serde_json::to_string(line).unwrap_or_default())
}

impl From<SuperviseError> for ApiError {
    fn from(error: SuperviseError) -> Self {
        let code = error.code();
        Self::new(super::super::error::status_for(code), code, error.to_string())
    }
}
