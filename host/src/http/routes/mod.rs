//! The API routes, one file per area. Each path here is mounted under both
//! `/myspace-butler/api` and the legacy `/myspace-butler` (see `docs/http-api.md`).

mod boards;
mod catalog;
mod events;
mod faculties;
mod health;
mod layout;
pub mod login;
mod pipeline;
mod supervise;

use axum::routing::{MethodRouter, get, post};

use crate::mcp::endpoint as mcp;

use super::AppState;

/// Every API route as (path, handlers).
pub fn api() -> Vec<(&'static str, MethodRouter<AppState>)> {
    vec![
        ("/health", get(health::health)),
        ("/login", get(login::login)),
        ("/console/links", post(login::new_link)),
        ("/events", get(events::events)),
        ("/catalog", get(catalog::catalog)),
        ("/extensions/{id}/icon", get(catalog::icon)),
        ("/overview", get(boards::overview)),
        ("/services", get(boards::services)),
        ("/tools/{id}/log", get(supervise::tool_log)),
        ("/tools/{id}/{action}", post(supervise::tool_action)),
        ("/services/{id}/log", get(supervise::service_log)),
        ("/services/{id}/{action}", post(supervise::service_action)),
        ("/faculties", get(boards::faculties)),
        ("/faculties/{id}/commands/{command}", post(faculties::command)),
        ("/faculties/{id}/reports/{report}", get(faculties::report)),
        ("/layout", get(layout::get_layout).put(layout::put_layout)),
        ("/pipeline", post(pipeline::pipeline)),
        ("/observe", post(pipeline::observe)),
        ("/mcp", post(mcp::post_main).get(mcp::get_main).delete(mcp::delete_main)),
        ("/mcp/butler", post(mcp::post_distill).get(mcp::get_distill).delete(mcp::delete_distill)),
        ("/mcp/status", get(mcp::status)),
    ]
}
