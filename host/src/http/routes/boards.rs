//! The per-kind lists: `GET /overview` (tools), `GET /services`, `GET /faculties`; and
//! `GET /quick-actions`, every tool's action in one list for launchers.
//!
//! Each item is the public extension view plus its run state: a hosted tool's or service's
//! supervision status (`state`, `pid`, `restarts`, `health`, …), `unmanaged` for one without
//! a `hosted` block, and a faculty's runtime state (`registered` until the runtime has it).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::{Value, json};

use crate::catalog::Kind;
use crate::catalog::public::PublicExtension;
use crate::http::{ApiError, AppState};
use crate::supervise::Status;

#[derive(Serialize)]
struct Item<'a> {
    #[serde(flatten)]
    extension: PublicExtension<'a>,
    #[serde(flatten)]
    run: Run,
}

/// A hosted item's status, or `unmanaged` for one without a `hosted` block (Butler does
/// not run it: it is a panel, a link, or a process someone else runs).
#[derive(Serialize)]
#[serde(untagged)]
enum Run {
    Supervised(Status),
    Unmanaged { state: &'static str },
}

fn items(state: &AppState, kind: Kind) -> Value {
    let snapshot = state.catalog.current();
    let items: Vec<Item<'_>> = snapshot
        .of_kind(kind)
        .map(|e| {
            let run = match (&e.manifest.hosted, state.supervisor.status(e.id())) {
                (Some(_), Some(status)) => Run::Supervised(status),
                // Registered a moment ago, not reconciled yet.
                (Some(_), None) => Run::Unmanaged { state: "stopped" },
                (None, _) => Run::Unmanaged { state: "unmanaged" },
            };
            Item { extension: PublicExtension::of(e), run }
        })
        .collect();
    json!(items)
}

/// `{"tools":[…]}`.
pub async fn overview(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "tools": items(&state, Kind::Tool) }))
}

/// `{"services":[…]}`.
pub async fn services(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "services": items(&state, Kind::Service) }))
}

/// `{"faculties":[…], "routes":{…}, "runtime":{…}}` — registered faculties with their run
/// state (`ready`, `failed` with the reason, or `registered` until the runtime has them),
/// and which faculty serves each pipeline action prefix.
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
    Json(json!({ "faculties": faculties, "routes": state.pipeline.routes(), "runtime": state.faculties.stats() }))
}

/// `{"actions":[{"extension","extensionName","label","title","mode","url"}]}`: every
/// tool's actions (only tools have actions), in the console's order of the tools board —
/// the order the owner saved in the layout, then scan order: what a launcher lists.
///
/// # Errors
/// 500 `layout_unreadable`.
pub async fn quick_actions(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let layout = super::layout::saved(&state).await?;
    let snapshot = state.catalog.current();
    let order: Vec<&str> =
        layout["order"]["tools"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let mut tools: Vec<_> = snapshot.of_kind(Kind::Tool).enumerate().collect();
    tools.sort_by_key(|(i, e)| order.iter().position(|id| *id == e.id()).unwrap_or(order.len() + i));
    let actions: Vec<Value> = tools
        .into_iter()
        .flat_map(|(_, tool)| {
            tool.manifest.actions.iter().map(move |action| {
                json!({
                    "extension": tool.id(), "extensionName": tool.manifest.name,
                    "label": action.label, "title": action.title.as_ref().unwrap_or(&action.label),
                    "mode": action.mode, "url": action.url,
                })
            })
        })
        .collect();
    Ok(Json(json!({"actions": actions})))
}
