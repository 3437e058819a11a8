//! The MCP hub, on request: its status (`GET /mcp/status`), its providers started, stopped or restarted (`POST
//! /mcp/providers/{id}/{start|stop|restart}`), its activity log (`GET /mcp/activity`), and
//! the quarantine of what providers give models to read (`GET /mcp/quarantine`, and the
//! owner's `POST /mcp/quarantine/approve`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use serde::Deserialize;

use super::extract::{ApiPath, ApiQuery};
use crate::http::owner::Caller;
use crate::http::{ApiError, ApiJson, AppState};
use butler_mcp::activity::{MAX_PAGE, OUTCOMES, Query};
use butler_mcp::quarantine::Kind;
use butler_mcp::review::Chosen;
use butler_mcp::{ActionError, ApprovalError, ProviderAction};

/// `POST /mcp/providers/{id}/{start|stop|restart}`: the provider's status after.
pub async fn action(
    State(state): State<AppState>,
    ApiPath((id, action)): ApiPath<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let action = match action.as_str() {
        "start" => ProviderAction::Start,
        "stop" => ProviderAction::Stop,
        "restart" => ProviderAction::Restart,
        other => {
            return Err(ApiError::not_found(
                "unknown_action",
                format!("no action `{other}` on an MCP provider: use start, stop or restart"),
            ));
        }
    };
    match state.mcp.act(&id, action).await {
        Ok(status) => {
            let status = status.map_or(Value::Null, provider_json);
            Ok(Json(json!({"ok": true, "data": {"id": id, "status": status}})))
        }
        Err(error @ ActionError::Unknown(_)) => Err(ApiError::not_found("unknown_provider", error.to_string())),
        Err(error @ ActionError::Failed { .. }) => {
            Err(ApiError::new(StatusCode::BAD_GATEWAY, "provider_failed", error.to_string()))
        }
    }
}

/// `GET /mcp/activity`'s query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActivityQuery {
    /// At most this many entries (default 50, at most 500).
    limit: Option<usize>,
    /// Only entries older than this `seq` (the next page).
    before: Option<u64>,
    /// Only entries newer than this `seq`, oldest first (following the log).
    after: Option<u64>,
    /// Only entries whose tool, prompt or URI matches this glob.
    name: Option<String>,
    /// Only entries of this JSON-RPC method.
    method: Option<String>,
    /// Only entries this provider answered (an extension id, or `host`).
    provider: Option<String>,
    /// Only entries with this outcome: `ok`, `error`, `tool_error`, `input_required` or
    /// `cancelled`.
    outcome: Option<String>,
    /// Only entries through this endpoint: `main`, `butler` or `p/<profile>`.
    endpoint: Option<String>,
}

/// `GET /mcp/activity`: entries newest first (oldest first with `after`), and the `seq` to
/// ask `before` (with `after`: `after`) for the next page; `name` (a glob), `method`,
/// `provider`, `outcome` and `endpoint` keep to the entries that match them all.
///
/// # Errors
/// 400 `invalid_query`: `name` is not a glob, or `outcome` is not one an entry has.
pub async fn activity(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ActivityQuery>,
) -> Result<Json<Value>, ApiError> {
    let name = query
        .name
        .map(|glob| {
            globset::Glob::new(&glob).map(|g| g.compile_matcher()).map_err(|e| {
                ApiError::bad_request("invalid_query", format!("`name` is not a glob ({e}): use *, ? and [...]"))
            })
        })
        .transpose()?;
    if let Some(outcome) = query.outcome.as_deref().filter(|o| !OUTCOMES.contains(o)) {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!(
                "`outcome` is not one an entry has (`{}`): use {}",
                crate::text::clip(outcome, 100),
                OUTCOMES.join(", ")
            ),
        ));
    }
    let limit = query.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let filter = Query {
        before: query.before,
        after: query.after,
        name,
        method: query.method,
        provider: query.provider,
        outcome: query.outcome,
        endpoint: query.endpoint,
        limit,
    };
    let entries = state.mcp.activity().page(&filter).await;
    let next = (entries.len() == limit).then(|| entries.last().map(|e| e.seq)).flatten();
    Ok(Json(json!({"entries": entries, "next": next})))
}

/// `GET /mcp/providers/{id}/log`: the provider's stderr and the hub's notes about it, as
/// the hosted items' logs are served (backlog, `live`, then each line).
///
/// # Errors
/// 404 `unknown_provider`.
pub async fn log(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let log = state.mcp.provider_log(&id).ok_or_else(|| {
        ApiError::not_found("unknown_provider", format!("no MCP provider `{id}` (see `butler mcp status`)"))
    })?;
    Ok(super::supervise::log_events(&log).into_response())
}

/// `GET /mcp/status`: `{"providers": [each provider's status, with its "held" items],
/// "conflicts", "duplicateUris", "host": {"tools", "restrictedTools"}, "sessions"}`.
pub async fn status(State(state): State<AppState>) -> Json<Value> {
    let mut status = status_json(state.mcp.status());
    if let Some(providers) = status["providers"].as_array_mut() {
        for provider in providers {
            if provider["url"].is_string()
                && let Some(id) = provider["id"].as_str()
            {
                provider["login"] = state.oauth.status(id);
            }
        }
    }
    Json(status)
}

/// The JSON of `GET /mcp/status`.
fn status_json(status: butler_mcp::HubStatus) -> Value {
    let providers: Vec<Value> = status.providers.into_iter().map(provider_json).collect();
    json!({
        "providers": providers,
        "conflicts": status.conflicts,
        "duplicateUris": status.duplicate_uris,
        "host": {"tools": status.host_tools, "restrictedTools": status.restricted_tools},
        "sessions": status.sessions,
    })
}

/// One provider's status, as `GET /mcp/status` and the provider actions show it.
fn provider_json(provider: butler_mcp::ProviderStatus) -> Value {
    let mut shaped = json!(provider.status);
    shaped["held"] = json!(provider.held);
    shaped
}

/// `GET /mcp/quarantine`: `{"enabled", "trusted": [ids], "held": [{"provider", "kind",
/// "name", "tool" (tools only), "public", "reason": "new"|"changed", "sha256",
/// "definition", "approved": {"sha256", "definition", "approved"} or null}]}`.
pub async fn quarantine(State(state): State<AppState>) -> Json<Value> {
    let report = state.mcp.quarantine();
    let held: Vec<Value> = report.held.into_iter().map(held_item).collect();
    Json(json!({"enabled": report.enabled, "held": held, "trusted": report.trusted}))
}

/// One held item of `GET /mcp/quarantine`.
fn held_item(item: butler_mcp::HeldItem) -> Value {
    let (reason, approved) = match item.held {
        butler_mcp::quarantine::Held::New => ("new", Value::Null),
        butler_mcp::quarantine::Held::Changed(pin) => ("changed", json!(pin)),
    };
    let mut shaped = json!({"provider": item.provider, "kind": item.kind.as_str(), "name": item.name,
        "public": item.public, "reason": reason,
        "sha256": butler_mcp::quarantine::fingerprint(&item.definition), "definition": item.definition,
        "approved": approved});
    if item.kind == Kind::Tool {
        shaped["tool"] = shaped["name"].clone();
    }
    shaped
}

/// One tool to approve: its own name and, if the owner was shown it, its sha256.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolApproval {
    name: String,
    sha256: Option<String>,
}

/// One item of any kind to approve: its kind (`tool`, `prompt`, `resource`,
/// `resourceTemplate`, `skill`, `instructions`), its own key (a name, a URI, a `uriTemplate`;
/// `instructions` for a provider's instructions) and, if the
/// owner was shown it, its sha256.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemApproval {
    kind: String,
    name: String,
    sha256: Option<String>,
}

/// `POST /mcp/quarantine/approve`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    provider: String,
    /// Absent (and `items` too): every held item of the provider (none when `trust` is
    /// given). `null` is refused, never read as "all".
    #[serde(default, deserialize_with = "present")]
    tools: Option<Option<Vec<ToolApproval>>>,
    /// Items of any kind, beside `tools`. `null` is refused as for `tools`.
    #[serde(default, deserialize_with = "present")]
    items: Option<Option<Vec<ItemApproval>>>,
    /// Every held item the provider offers, whatever the rest says of trust (not with
    /// `tools` or `items`).
    #[serde(default)]
    all: bool,
    /// Trust the provider wholesale (`true`), or no longer (`false`).
    trust: Option<bool>,
}

/// `POST /mcp/quarantine/approve {"provider", "tools"?: [{"name", "sha256"?}], "items"?:
/// [{"kind", "name", "sha256"?}], "all"?, "trust"?}`: the owner approves held items
/// (pinning their definitions) — those named, or with `all` every one the provider
/// offers — or trusts a provider.
///
/// # Errors
/// 403 `owner_required` for anyone but the owner; 404 `unknown_provider`; 409
/// `quarantine_off`, `not_held` or `stale` (the definition changed since it was shown);
/// 500 `approval_failed`.
pub async fn approve(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Value>, ApiError> {
    caller.must_be_owner(|| {
        "approving what providers offer needs the owner (the console's review queue, or `butler mcp approve`)"
            .to_owned()
    })?;
    let approval = approval_of(body)?;
    let chosen = chosen_of(&approval)?;
    let done = if approval.all {
        state.mcp.approve_all(&approval.provider, approval.trust).await
    } else {
        state.mcp.approve(&approval.provider, chosen.as_deref(), approval.trust).await
    };
    match done {
        Ok(done) => Ok(Json(json!({"ok": true, "data": done}))),
        Err(error @ ApprovalError::Unknown(_)) => Err(ApiError::not_found("unknown_provider", error.to_string())),
        Err(error @ ApprovalError::Off) => {
            Err(ApiError::new(StatusCode::CONFLICT, "quarantine_off", error.to_string()))
        }
        Err(error @ ApprovalError::NotHeld(_)) => {
            Err(ApiError::new(StatusCode::CONFLICT, "not_held", error.to_string()))
        }
        Err(error @ ApprovalError::Stale(_)) => Err(ApiError::new(StatusCode::CONFLICT, "stale", error.to_string())),
        Err(error @ ApprovalError::Failed(_)) => Err(ApiError::internal(error.to_string())),
    }
}

/// The items an approval names (`None`: it names none — all, or trust alone).
fn chosen_of(approval: &Approval) -> Result<Option<Vec<Chosen>>, ApiError> {
    let invalid = |why: &str| ApiError::bad_request("invalid_body", why.to_owned());
    if matches!(approval.tools, Some(None)) || matches!(approval.items, Some(None)) {
        return Err(invalid(
            "`tools` is a list of {\"name\", \"sha256\"?} and `items` of {\"kind\", \"name\", \"sha256\"?}; leave both out (or send `\"all\": true`) to approve everything held",
        ));
    }
    if approval.all && (approval.tools.is_some() || approval.items.is_some()) {
        return Err(invalid("`all` approves everything held: name no `tools` or `items` with it"));
    }
    if approval.tools.is_none() && approval.items.is_none() {
        return Ok(None);
    }
    let mut chosen: Vec<Chosen> = Vec::new();
    for tool in approval.tools.iter().flatten().flatten() {
        chosen.push((Kind::Tool, tool.name.clone(), tool.sha256.clone()));
    }
    for item in approval.items.iter().flatten().flatten() {
        let kind = Kind::parse(&item.kind).ok_or_else(|| {
            invalid(
                "an item's `kind` is one of `tool`, `prompt`, `resource`, `resourceTemplate`, `skill`, `instructions`",
            )
        })?;
        chosen.push((kind, item.name.clone(), item.sha256.clone()));
    }
    Ok(Some(chosen))
}

/// The approval a body asks for, read strictly: an object (serde would also read a struct
/// from an array), each tool named once, each `sha256` 64 lowercase hex digits.
fn approval_of(body: Value) -> Result<Approval, ApiError> {
    let invalid = |why: String| ApiError::bad_request("invalid_body", why);
    if !body.is_object() {
        return Err(invalid("the body is an object: {\"provider\", \"tools\"?, \"trust\"?}".to_owned()));
    }
    let approval: Approval = serde_json::from_value(body).map_err(|e| invalid(format!("the body: {e}")))?;
    let mut named = std::collections::BTreeSet::new();
    let tools = approval.tools.iter().flatten().flatten().map(|t| ("tool", &t.name, &t.sha256));
    let items = approval.items.iter().flatten().flatten().map(|i| (i.kind.as_str(), &i.name, &i.sha256));
    for (kind, name, sha256) in tools.chain(items) {
        if !named.insert((kind, name.as_str())) {
            return Err(invalid(format!("`{name}` is named twice")));
        }
        if let Some(sha) = sha256
            && !(sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        {
            return Err(invalid(format!("`{name}`: `sha256` is 64 lowercase hex digits, as the quarantine shows it")));
        }
    }
    Ok(approval)
}

/// A field that is present, even as `null` (`Some(None)`), as opposed to absent (`None`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}
