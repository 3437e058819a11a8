//! `GET /health`: liveness and what instance is served.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::http::AppState;

/// `{"ok":true, "version", "workdir", "uptimeSec", "catalogGeneration", "faculties":
/// {"ready", "pending"}}` — `faculties.ready` is false while any faculty found is still
/// being compiled (`pending` names them); calls to those wait for them meanwhile.
pub async fn health(State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "ok": true,
        "version": env!("CARGO_PKG_VERSION"),
        "workdir": state.instance.root,
        "uptimeSec": state.started.elapsed().as_secs(),
        "catalogGeneration": state.catalog.current().generation,
        "faculties": state.faculties.readiness(),
    }))
}
