//! `GET /capabilities`, `POST /imports`, `POST /capabilities/{id}/{action}`: the Suzu Lives
//! capability packages imported into the instance ([`butler_catalog::suzu::imports`]). Importing
//! reads files the owner names, and enabling decides what agents get: both are the owner's
//! alone. The file work runs on the blocking pool, within [`STEP_TIMEOUT`]. After each step
//! the hub is handed the enabled packages' MCP servers ([`crate::packages`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use butler_catalog::suzu::imports::{ImportError, Imports, Record};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::owner::Caller;
use crate::http::{ApiError, ApiJson, AppState};

/// How long one step on the imported packages may take (a skill is at most 8 MiB).
pub const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// A package as the API shows it: its record, and the adapters it declares.
fn shown(record: &Record) -> Value {
    let mut item = json!(record);
    item["adapters"] = json!(record.adapters());
    // What agents get once it is enabled: its server's provider id, its skill's prompt.
    let adapters = record.adapters();
    item["provider"] = json!(adapters.iter().any(|a| a.starts_with("mcp")).then(|| record.provider_id()));
    item["prompt"] = json!(adapters.iter().any(|a| a == "skill").then(|| format!(
        "{}__{}",
        record.namespace(),
        butler_mcp::SKILL_PROMPT
    )));
    if let Some(object) = item.as_object_mut() {
        // The manifest may hold literal header or env values (tokens): the API shows the
        // adapters' kinds, and the files, never the manifest.
        object.remove("manifest");
    }
    item
}

/// Every imported package, by id.
pub async fn list(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let records = step(&state, |imports| Ok(imports.list())).await?;
    Ok(Json(json!({"capabilities": records.iter().map(shown).collect::<Vec<_>>()})))
}

/// What `POST /imports` takes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportBody {
    /// The package's `suzu-capability.json`, or its folder: an absolute path.
    path: String,
    /// Replace an earlier import of the same id.
    #[serde(default)]
    update: bool,
}

/// `POST /imports {"path", "update"?}`: runs the static checks on the package and, when it
/// passes, records it — disabled.
///
/// # Errors
/// 403 `owner_required`; 400 `invalid_path`; 422 `package_invalid` (every problem in
/// `details.problems`); 409 `already_imported` (what differs in `details.differences`) or
/// `disable_first`; 500 `import_failed`.
pub async fn import(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<ImportBody>,
) -> Result<Json<Value>, ApiError> {
    owner_only(caller, "importing a capability package")?;
    let path = PathBuf::from(&body.path);
    if !path.is_absolute() {
        return Err(ApiError::bad_request(
            "invalid_path",
            "`path` is the absolute path of a package's suzu-capability.json or of its folder",
        ));
    }
    let imported = step(&state, move |imports| imports.import(&path, body.update)).await?;
    if imported.record.enabled {
        serve_enabled(&state).await?;
    }
    let mut data = json!(imported);
    data["record"] = shown(&imported.record);
    Ok(Json(json!({"ok": true, "data": data})))
}

/// `POST /capabilities/{id}/enable|disable|remove`.
///
/// # Errors
/// 403 `owner_required`; 404 `unknown_action` or `unknown_capability`; 409
/// `capability_enabled` (remove a disabled package only); 500 `import_failed`.
pub async fn action(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, action)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let step_of: fn(&Imports, &str) -> Result<Record, ImportError> = match action.as_str() {
        "enable" => Imports::enable,
        "disable" => Imports::disable,
        "remove" => Imports::remove,
        _ => {
            return Err(ApiError::not_found(
                "unknown_action",
                format!(
                    "no action `{}` on a capability package (enable, disable, remove)",
                    crate::text::clip(&action, 40)
                ),
            ));
        }
    };
    owner_only(caller, "changing a capability package")?;
    let record = step(&state, move |imports| step_of(imports, &id)).await?;
    serve_enabled(&state).await?;
    let mut data = shown(&record);
    if action == "remove" {
        data["removed"] = json!(true);
    }
    Ok(Json(json!({"ok": true, "data": data})))
}

/// Hands the enabled packages' MCP servers to the hub, which settles them at once.
async fn serve_enabled(state: &AppState) -> Result<(), ApiError> {
    let servers = step(state, |imports| Ok(crate::packages::enabled(imports))).await?;
    if state.mcp.set_packages(crate::packages::CAPABILITIES, servers) {
        state.mcp.reconcile(&state.catalog.current()).await;
    }
    Ok(())
}

fn owner_only(caller: Caller, what: &str) -> Result<(), ApiError> {
    caller.must_be_owner(|| format!("{what} needs the owner (the console, or `butler import` / `butler capability`)"))
}

/// Runs `work` on the imported packages on the blocking pool, within [`STEP_TIMEOUT`].
async fn step<T: Send + 'static>(
    state: &AppState,
    work: impl FnOnce(&Imports) -> Result<T, ImportError> + Send + 'static,
) -> Result<T, ApiError> {
    let imports: Arc<Imports> = Arc::clone(&state.imports);
    let running = tokio::task::spawn_blocking(move || work(&imports));
    match tokio::time::timeout(STEP_TIMEOUT, running).await {
        Err(_) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "import_timeout",
            format!("the step took more than {} s (is the package on a stalled file system?)", STEP_TIMEOUT.as_secs()),
        )),
        Ok(Err(e)) => Err(ApiError::internal(format!("the step failed: {e}"))),
        Ok(Ok(result)) => result.map_err(refusal),
    }
}

fn refusal(error: ImportError) -> ApiError {
    let message = error.to_string();
    match error {
        ImportError::Invalid(report) => ApiError {
            details: Some(Box::new(json!({"manifest": report.manifest, "problems": report.problems}))),
            ..ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "package_invalid", message)
        },
        ImportError::Exists { differences, .. } => ApiError {
            details: Some(Box::new(json!({"differences": differences}))),
            ..ApiError::new(StatusCode::CONFLICT, "already_imported", message)
        },
        ImportError::DisableFirst { .. } => ApiError::new(StatusCode::CONFLICT, "disable_first", message),
        ImportError::Enabled(_) => ApiError::new(StatusCode::CONFLICT, "capability_enabled", message),
        ImportError::Unknown(_) => ApiError::not_found("unknown_capability", message),
        ImportError::Changed(_) => ApiError::new(StatusCode::CONFLICT, "package_changed", message),
        ImportError::Full(_) => ApiError::new(StatusCode::CONFLICT, "too_many_packages", message),
        ImportError::Io(_) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "import_failed", message),
    }
}
