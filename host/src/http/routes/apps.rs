//! `GET /apps` and `POST /apps/{plugin}/{app}/backend/{method}`: the ChatOS UI Apps plugins
//! the catalog found, with what each app offers agents, and calls to a plugin's backend
//! ([`crate::chatos_backends`]). A backend runs the plugin's code with the owner's rights, so
//! calling it is the owner's alone.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use butler_catalog::chatos::{AppNames, Target};
use serde_json::{Value, json};

use crate::chatos_backends::CallError;
use crate::http::owner::Caller;
use crate::http::{ApiError, ApiJson, AppState};

/// Every plugin, its backend's state, and its apps with their server, prompts and profile.
pub async fn list(State(state): State<AppState>) -> Json<Value> {
    let backends = &state.backends;
    let plugins: Vec<Value> = backends
        .plugins()
        .iter()
        .map(|plugin| {
            let display =
                |p: &std::path::Path| p.strip_prefix(&state.instance.root).unwrap_or(p).to_string_lossy().into_owned();
            let backend = plugin.backend.as_ref().map(|entry| {
                let mut shown = json!({"entry": entry.as_ref().map(|e| display(e)).ok()});
                match backends.unavailable(plugin) {
                    Some(why) => {
                        shown["state"] = json!("unavailable");
                        shown["reason"] = json!(why);
                    }
                    None => shown["state"] = json!("available"),
                }
                shown
            });
            let apps: Vec<Value> = plugin
                .apps
                .iter()
                .map(|app| {
                    let names = AppNames::of(plugin, app);
                    let server = app.server.as_ref().map(|server| {
                        let (transport, url) = match &server.target {
                            Target::Command(_) => ("stdio", None),
                            Target::Url(url, _) => ("http", Some(butler_mcp::upstream::shown_url(url))),
                        };
                        json!({"provider": names.provider, "namespace": names.namespace, "transport": transport,
                               "url": url, "allowMain": server.allow_main, "allowSub": server.allow_sub})
                    });
                    let prompts: Vec<&str> = app.prompts.iter().map(|p| p.name.as_str()).collect();
                    json!({"id": app.id, "name": app.name, "description": app.description, "server": server,
                           "prompts": prompts, "profile": format!("/mcp/p/{}", names.profile)})
                })
                .collect();
            json!({"id": plugin.id, "name": plugin.name, "version": plugin.version,
                   "description": plugin.description, "dir": display(&plugin.dir), "backend": backend, "apps": apps})
        })
        .collect();
    Json(json!({"plugins": plugins}))
}

/// `POST /apps/{plugin}/{app}/backend/{method}` with the method's params as the JSON body:
/// `{ok: true, data}` with what the method returned, or `{ok: false, message}` with what it
/// threw (both 200: the backend answered).
///
/// # Errors
/// 403 `owner_required`; 404 `unknown_app`; 503 `backend_unavailable` (none declared, a bad
/// entry, no Node); 429 `backend_busy`; 504 `backend_timeout`; 502 `backend_failed` (it
/// could not start, or exited during the call).
pub async fn call(
    State(state): State<AppState>,
    caller: Caller,
    Path((plugin, app, method)): Path<(String, String, String)>,
    ApiJson(params): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    caller.must_be_owner(|| {
        "calling an app's backend runs the plugin's code: it needs the owner (the console, or the owner token)"
            .to_owned()
    })?;
    match state.backends.call(&plugin, &app, &method, params).await {
        Ok(Ok(data)) => Ok(Json(json!({"ok": true, "data": data}))),
        Ok(Err(thrown)) => Ok(Json(json!({"ok": false, "message": thrown.0}))),
        Err(error) => {
            let (status, code) = match &error {
                CallError::Unknown(_) => (StatusCode::NOT_FOUND, "unknown_app"),
                CallError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "backend_unavailable"),
                CallError::Busy => (StatusCode::TOO_MANY_REQUESTS, "backend_busy"),
                CallError::Timeout => (StatusCode::GATEWAY_TIMEOUT, "backend_timeout"),
                CallError::Failed(_) => (StatusCode::BAD_GATEWAY, "backend_failed"),
            };
            Err(ApiError::new(status, code, error.to_string()))
        }
    }
}
