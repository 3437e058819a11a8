//! The per-kind lists: `GET /overview` (tools), `GET /services`, `GET /faculties`.
//!
//! Each item is the public extension view plus its run state. Until a subsystem runs an
//! item, its state is `stopped` (tools, services) or `registered` (faculties).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::{Value, json};

use crate::catalog::Kind;
use crate::catalog::public::PublicExtension;
use crate::http::AppState;

#[derive(Serialize)]
struct Item<'a> {
    #[serde(flatten)]
    extension: PublicExtension<'a>,
    state: &'static str,
}

fn items(state: &AppState, kind: Kind, run_state: &'static str) -> Value {
    let snapshot = state.catalog.current();
    let items: Vec<Item<'_>> = snapshot
        .of_kind(kind)
        .map(|e| Item {
            extension: PublicExtension::of(e),
            state: run_state,
        })
        .collect();
    json!(items)
}

/// `{"tools":[…]}`.
pub async fn overview(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "tools": items(&state, Kind::Tool, "stopped") }))
}

/// `{"services":[…]}`.
pub async fn services(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "services": items(&state, Kind::Service, "stopped") }))
}

/// `{"faculties":[…]}` — registered faculties, even before they can run.
pub async fn faculties(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "faculties": items(&state, Kind::Faculty, "registered") }))
}
