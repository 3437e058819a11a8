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
    let items: Vec<Item<'_>> =
        snapshot.of_kind(kind).map(|e| Item { extension: PublicExtension::of(e), state: run_state }).collect();
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

/// `{"faculties":[…], "runtime":{…}}` — registered faculties with their run state
/// (`ready`, `failed` with the reason, or `registered` until the runtime has them).
pub async fn faculties(State(state): State<AppState>) -> Json<Value> {
    let snapshot = state.catalog.current();
    let faculties: Vec<Value> = snapshot
        .of_kind(Kind::Faculty)
        .map(|e| {
            let mut item = json!(PublicExtension::of(e));
            let status = state.faculties.status(e.id());
            if let (Some(object), Some(Value::Object(status))) = (item.as_object_mut(), status.map(|s| json!(s))) {
                object.extend(status);
            } else if let Some(object) = item.as_object_mut() {
                object.insert("state".into(), json!("registered"));
            }
            item
        })
        .collect();
    Json(json!({ "faculties": faculties, "runtime": state.faculties.stats() }))
}
