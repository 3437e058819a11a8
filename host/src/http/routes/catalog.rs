//! `GET /catalog` (the public catalog with diagnostics — the root config's first) and
//! extension icons.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use axum::response::{IntoResponse, Response};

use super::extract::ApiPath;
use crate::catalog::icon::{self, Icon};
use crate::catalog::public::PublicCatalog;
use crate::http::{ApiError, AppState};

/// The public catalog, with the components dropped into a scan root that no scan has
/// judged yet listed as pending (the loader announces them a moment later).
pub async fn catalog(State(state): State<AppState>) -> Response {
    let snapshot = state.catalog.current();
    let (config, judged) = (state.instance.scan_config(), Arc::clone(&snapshot));
    let dropped = tokio::task::spawn_blocking(move || butler_catalog::scan::unjudged_components(&config, &judged))
        .await
        .unwrap_or_default();
    let root_config = state.config.diagnostics();
    let diagnostics: Vec<_> =
        root_config.into_iter().chain(snapshot.diagnostics.iter().cloned()).chain(dropped).collect();
    Json(PublicCatalog { diagnostics: &diagnostics, ..PublicCatalog::of(&snapshot) }).into_response()
}

/// An extension's image icon. SVGs are served under a CSP that forbids scripts, so an
/// icon can never run code in the console's origin.
///
/// # Errors
/// 404 `unknown_extension` or `no_icon`; 404 `icon_unavailable` when the file can no
/// longer be read.
pub async fn icon(State(state): State<AppState>, ApiPath(id): ApiPath<String>) -> Result<Response, ApiError> {
    let snapshot = state.catalog.current();
    let ext =
        snapshot.get(&id).ok_or_else(|| ApiError::not_found("unknown_extension", format!("no extension `{id}`")))?;
    let Icon::Image { source, media_type } = &ext.icon else {
        return Err(ApiError::not_found("no_icon", format!("extension `{id}` has no image icon")));
    };
    let (source, media_type) = (source.clone(), *media_type);
    let bytes = tokio::task::spawn_blocking(move || icon::read(&source))
        .await
        .map_err(|e| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))?
        .map_err(|why| ApiError::not_found("icon_unavailable", format!("icon of `{id}`: {why}")))?;
    Ok((
        [
            (CONTENT_TYPE, media_type),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'; sandbox"),
            (CACHE_CONTROL, "no-cache"),
        ],
        bytes,
    )
        .into_response())
}
