//! `GET /events`: what changed, as server-sent events, so the console refreshes a view
//! when something it shows changed instead of polling every route.
//!
//! The stream sends one `change` event at once and another whenever one of its parts
//! changes: `catalog` (the catalog generation), `supervised` (a fingerprint of every
//! hosted item's state, pid, restarts and pending restart), `mcp` (a fingerprint of the
//! MCP providers' states and of every list or approval change), `mcpActivity` (the `seq` of
//! the newest entry of the hub's activity log), `runs` (a count of the delegation runs'
//! changes), `layout` (the modification time of
//! `stateDir/layout.json`) and one `report:<faculty>/<report>` per report that
//! declares what it `watch`es (the latest modification time among those paths). The
//! host compares them every [`CHECK_INTERVAL`] — in memory and a few `stat`s, so an idle
//! console costs next to nothing and sends nothing but keep-alives.

use std::convert::Infallible;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde_json::{Value, json};

use crate::catalog::Kind;
use crate::http::AppState;

/// How often the parts are compared: live enough for a person watching a board, and a
/// handful of hash computations per second at most.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// `GET /events`.
pub async fn events(State(state): State<AppState>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = futures_util::stream::unfold((state, None::<Value>), |(state, last)| async move {
        loop {
            if last.is_some() {
                tokio::time::sleep(CHECK_INTERVAL).await;
            }
            let now = parts(&state);
            if last.as_ref() != Some(&now) {
                let event = Event::default().event("change").data(now.to_string());
                return Some((Ok(event), (state, Some(now))));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

fn parts(state: &AppState) -> Value {
    let catalog = state.catalog.current();
    let mut hasher = DefaultHasher::new();
    for kind in [Kind::Tool, Kind::Service] {
        for extension in catalog.of_kind(kind) {
            extension.id().hash(&mut hasher);
            if let Some(status) = state.supervisor.status(extension.id()) {
                json!({"state": status.state, "pid": status.pid, "restarts": status.restarts,
                       "next": status.next_restart_at, "pending": status.restart_pending,
                       "health": status.health.as_ref().map(|h| h.ok), "error": status.error})
                .to_string()
                .hash(&mut hasher);
            }
        }
    }
    let mut parts = json!({
        "catalog": catalog.generation,
        "supervised": format!("{:016x}", hasher.finish()),
        "layout": modified(&state.instance.state_dir().join(super::layout::LAYOUT_FILE)),
        "mcp": format!("{:016x}", state.mcp.fingerprint()),
        "mcpActivity": state.mcp.activity().newest(),
        "runs": state.delegations.runs().generation(),
    });
    let folders = state.instance.folders();
    for (faculty, report, paths) in &state.faculties.declared().watched {
        let latest = paths
            .iter()
            .map(|p| modified(&state.instance.path(&butler_faculty::expand_folders(&folders, p))))
            .max()
            .unwrap_or(0);
        parts[format!("report:{faculty}/{report}")] = json!(latest);
    }
    parts
}

/// Modification time in milliseconds, 0 when the file is missing.
fn modified(path: &Path) -> u64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
