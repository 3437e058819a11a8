//! The API routes, one file per area. Each path here is mounted under both
//! `/myspace-butler/api` and the legacy `/myspace-butler` (see `docs/http-api.md`).
//!
//! [`operations`] is the one table of what the API serves — a method on a path, and its
//! handler — and the router is built from it, so [`table`] is exactly what the router
//! answers. `docs/openapi.json` describes every entry (checked by the tests below).

mod agents;
mod apps;
mod automations;
mod boards;
mod capabilities;
mod catalog;
mod events;
mod extract;
mod faculties;
mod health;
mod hub;
mod layout;
pub mod login;
mod oauth;
mod pipeline;
mod settings;
mod supervise;
mod turns;

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter, on};

use crate::http::mcp;

use super::AppState;

/// One operation of the API: a method on a path (relative to the prefixes) and its handler.
pub struct Operation {
    /// The method (a `GET` also answers `HEAD`, without a body).
    pub method: Method,
    /// The path, with `{name}` for a path parameter.
    pub path: &'static str,
    handler: MethodRouter<AppState>,
}

/// `method` on `path`, answered by `handler` (the method is written once: it is both what
/// the router routes and what [`table`] lists).
fn op<H, T>(method: Method, path: &'static str, handler: H) -> Operation
where
    H: Handler<T, AppState>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone()).unwrap_or_else(|_| panic!("axum cannot route {method}"));
    Operation { method, path, handler: on(filter, handler) }
}

/// Every operation of the API, in the order the routes are documented.
pub fn operations() -> Vec<Operation> {
    use Method as M;
    vec![
        op(M::GET, "/health", health::health),
        op(M::GET, "/login", login::login),
        op(M::POST, "/console/links", login::new_link),
        op(M::POST, "/console/sessions", login::list_sessions),
        op(M::POST, "/console/sessions/{id}/end", login::end_session),
        op(M::POST, "/console/logout", login::logout),
        op(M::POST, "/console/logout-all", login::logout_all),
        op(M::GET, "/events", events::events),
        op(M::GET, "/catalog", catalog::catalog),
        op(M::GET, "/extensions/{id}/icon", catalog::icon),
        op(M::GET, "/overview", boards::overview),
        op(M::GET, "/services", boards::services),
        op(M::GET, "/quick-actions", boards::quick_actions),
        op(M::GET, "/tools/{id}/log", supervise::tool_log),
        op(M::POST, "/tools/{id}/details", supervise::tool_details),
        op(M::POST, "/tools/{id}/{action}", supervise::tool_action),
        op(M::GET, "/services/{id}/log", supervise::service_log),
        op(M::POST, "/services/{id}/details", supervise::service_details),
        op(M::POST, "/services/{id}/{action}", supervise::service_action),
        op(M::GET, "/faculties", boards::faculties),
        op(M::POST, "/faculties/{id}/commands/{command}", faculties::command),
        op(M::GET, "/faculties/{id}/reports/{report}", faculties::report),
        op(M::GET, "/capabilities", capabilities::list),
        op(M::POST, "/imports", capabilities::import),
        op(M::POST, "/capabilities/{id}/{action}", capabilities::action),
        op(M::GET, "/apps", apps::list),
        op(M::POST, "/apps/{plugin}/{app}/backend/{method}", apps::call),
        op(M::GET, "/layout", layout::get_layout),
        op(M::PUT, "/layout", layout::put_layout),
        op(M::GET, "/config", settings::get_config),
        op(M::POST, "/config/check", settings::check_config),
        op(M::PUT, "/config", settings::put_config),
        op(M::POST, "/delegations", agents::delegate),
        op(M::GET, "/runs", agents::list),
        op(M::GET, "/automations", automations::list),
        op(M::POST, "/automations", automations::register),
        op(M::GET, "/runs/{id}", agents::get),
        op(M::POST, "/runs/{id}/steps/{index}/{decision}", agents::decide),
        op(M::POST, "/pipeline", pipeline::pipeline),
        op(M::POST, "/observe", pipeline::observe),
        op(M::POST, "/sessions/turns", turns::turns),
        op(M::POST, "/sessions/flush", turns::flush),
        op(M::POST, "/mcp", mcp::endpoint),
        op(M::GET, "/mcp", mcp::endpoint),
        op(M::DELETE, "/mcp", mcp::endpoint),
        op(M::POST, "/mcp/butler", mcp::endpoint),
        op(M::GET, "/mcp/butler", mcp::endpoint),
        op(M::DELETE, "/mcp/butler", mcp::endpoint),
        op(M::POST, "/mcp/p/{name}", mcp::endpoint),
        op(M::GET, "/mcp/p/{name}", mcp::endpoint),
        op(M::DELETE, "/mcp/p/{name}", mcp::endpoint),
        op(M::POST, "/mcp/s/{session}", mcp::endpoint),
        op(M::GET, "/mcp/s/{session}", mcp::endpoint),
        op(M::DELETE, "/mcp/s/{session}", mcp::endpoint),
        op(M::GET, "/mcp/status", hub::status),
        op(M::POST, "/mcp/providers/{id}/login", oauth::begin),
        op(M::DELETE, "/mcp/providers/{id}/login", oauth::logout),
        op(M::GET, "/mcp/logins/{id}", oauth::outcome),
        op(M::GET, "/oauth/callback", oauth::callback),
        op(M::POST, "/mcp/providers/{id}/{action}", hub::action),
        op(M::GET, "/mcp/providers/{id}/log", hub::log),
        op(M::GET, "/mcp/activity", hub::activity),
        op(M::GET, "/mcp/quarantine", hub::quarantine),
        op(M::POST, "/mcp/quarantine/approve", hub::approve),
    ]
}

/// What the router serves: (method, path) of every operation.
#[must_use]
pub fn table() -> Vec<(Method, &'static str)> {
    operations().into_iter().map(|o| (o.method, o.path)).collect()
}

/// Every API route as (path, handlers): the operations, those of one path together.
pub fn api() -> Vec<(&'static str, MethodRouter<AppState>)> {
    let mut routes: Vec<(&'static str, MethodRouter<AppState>)> = Vec::new();
    for Operation { path, handler, .. } in operations() {
        match routes.iter().position(|(p, _)| *p == path) {
            Some(i) => {
                let (path, others) = routes.remove(i);
                routes.insert(i, (path, others.merge(handler)));
            }
            None => routes.push((path, handler)),
        }
    }
    routes
}

#[cfg(test)]
mod tests {
    //! `docs/openapi.json` against the table the router is built from (a live host is
    //! checked against it by `tests/e2e/openapi.rs`).

    use std::collections::BTreeSet;

    use serde_json::{Value, json};

    use super::table;
    use crate::instance::config::AuthMode;

    const OPENAPI: &str = include_str!("../../../../docs/openapi.json");
    const LAYOUT_SCHEMA: &str = include_str!("../../../../spec/layout.schema.json");
    const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

    fn document() -> Value {
        serde_json::from_str(OPENAPI).expect("docs/openapi.json is JSON")
    }

    /// Every (METHOD, path) the document describes.
    fn documented(doc: &Value) -> BTreeSet<(String, String)> {
        let paths = doc["paths"].as_object().expect("paths");
        paths
            .iter()
            .flat_map(|(path, item)| {
                let item = item.as_object().expect("a path item");
                METHODS.iter().filter(|m| item.contains_key(**m)).map(|m| (m.to_uppercase(), path.clone()))
            })
            .collect()
    }

    /// Each operation of the document with its path.
    fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in METHODS {
                if let Some(operation) = item.get(method) {
                    out.push((method.to_uppercase(), path.clone(), operation));
                }
            }
        }
        out
    }

    /// `value`, or what its `$ref` (a local one) points at.
    fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
        match value.get("$ref").and_then(Value::as_str) {
            Some(pointer) => doc.pointer(pointer.trim_start_matches('#')).unwrap_or_else(|| panic!("no {pointer}")),
            None => value,
        }
    }

    #[test]
    fn the_document_describes_every_operation_the_router_serves_and_no_other() {
        let doc = document();
        let documented = documented(&doc);
        let served: BTreeSet<(String, String)> =
            table().into_iter().map(|(method, path)| (method.to_string(), path.to_owned())).collect();
        let undocumented: Vec<_> = served.difference(&documented).collect();
        let gone: Vec<_> = documented.difference(&served).collect();
        assert!(undocumented.is_empty(), "served but not in docs/openapi.json: {undocumented:?}");
        assert!(gone.is_empty(), "in docs/openapi.json but not served: {gone:?}");
        assert_eq!(served.len(), table().len(), "an operation is listed twice in the route table");
    }

    #[test]
    fn the_document_names_both_prefixes_and_the_credentials_the_host_accepts() {
        let doc = document();
        assert_eq!(doc["openapi"], "3.1.0");
        let servers: Vec<&str> =
            doc["servers"].as_array().expect("servers").iter().filter_map(|s| s["url"].as_str()).collect();
        for prefix in [crate::http::API_PREFIX, crate::http::LEGACY_PREFIX] {
            assert!(servers.iter().any(|url| url.ends_with(prefix)), "no server for {prefix}: {servers:?}");
        }
        let schemes = &doc["components"]["securitySchemes"];
        // `owner::has_token`: `Authorization: Bearer <token>`.
        assert_eq!(schemes["ownerToken"]["type"], "http");
        assert_eq!(schemes["ownerToken"]["scheme"], "bearer");
        assert_eq!(schemes["consoleSession"]["in"], "cookie");
        assert_eq!(
            schemes["consoleSession"]["name"],
            crate::http::console_session::cookie_name(crate::http::DEFAULT_PORT).as_str()
        );
        assert_eq!(schemes["consoleReview"]["in"], "header");
        let review = schemes["consoleReview"]["name"].as_str().expect("a header name");
        assert!(review.eq_ignore_ascii_case(crate::http::owner::REVIEW_HEADER), "{review}");
        assert_eq!(schemes["consoleProof"]["in"], "header");
        let proof = schemes["consoleProof"]["name"].as_str().expect("a header name");
        assert!(proof.eq_ignore_ascii_case(crate::http::owner::PROOF_HEADER), "{proof}");
        assert_eq!(
            (&schemes["consoleProofQuery"]["in"], &schemes["consoleProofQuery"]["name"]),
            (&json!("query"), &json!("proof"))
        );
        // Wherever the owner is named, the console counts only with its review header; the
        // cookie counts only with its proof, in the query only where the host takes it there.
        for (method, path, operation) in operations(&doc) {
            let full = format!("{}{path}", crate::http::API_PREFIX);
            let query_proof = crate::http::credential::takes_proof_in_query(&method.parse().expect("a method"), &full);
            let requirements = operation["security"].as_array().expect("security");
            assert_eq!(
                requirements.iter().any(|r| r.get("consoleProofQuery").is_some()),
                query_proof,
                "{method} {path}: the proof in the query is documented exactly where it is taken"
            );
            for requirement in requirements {
                let requirement = requirement.as_object().expect("a security requirement");
                assert!(
                    requirement.contains_key("consoleSession") || !requirement.contains_key("consoleReview"),
                    "{method} {path}: the review header alone proves nothing"
                );
                assert_eq!(
                    requirement.contains_key("consoleSession"),
                    requirement.contains_key("consoleProof") || requirement.contains_key("consoleProofQuery"),
                    "{method} {path}: the session cookie counts only with its proof, and the proof only with it"
                );
                assert!(
                    !requirement.contains_key("consoleReview") || requirement.contains_key("consoleProof"),
                    "{method} {path}: the owner's console sends its proof in the header"
                );
                for name in requirement.keys() {
                    assert!(schemes.get(name).is_some(), "{method} {path}: no security scheme {name}");
                }
            }
        }
    }

    #[test]
    fn every_error_answer_is_the_envelope_and_the_gate_is_on_every_operation() {
        let doc = document();
        let envelope = "#/components/schemas/ErrorEnvelope";
        let json_rpc = "#/components/schemas/JsonRpcErrorResponse";
        for (method, path, operation) in operations(&doc) {
            let responses = operation["responses"].as_object().expect("responses");
            assert!(
                responses.keys().any(|status| status.starts_with('2') || status.starts_with('3')),
                "{method} {path}: no success answer"
            );
            // What the gate and the connection cap answer before any route runs.
            for status in ["400", "403", "431", "503"] {
                assert!(responses.contains_key(status), "{method} {path}: {status} (the gate) is not documented");
            }
            // A credential, where the connection must carry one (`credential::require`).
            let full = format!("{}{path}", crate::http::API_PREFIX);
            let needs = crate::http::credential::needs_credential(AuthMode::Token, false, &full);
            assert_eq!(responses.contains_key("401"), needs, "{method} {path}: 401 token_required");
            let security = operation["security"].as_array().expect("each operation says who may call it");
            // An agent session's endpoint takes its own token, and only that.
            let credential = if path.starts_with("/mcp/s/") { "agentSession" } else { "ownerToken" };
            assert_eq!(
                security.iter().any(|r| r == &json!({credential: []})),
                needs,
                "{method} {path}: the {credential} is the credential where one is needed"
            );
            // The MCP routes answer JSON-RPC errors (their clients read those); what is
            // refused before a request is read (`foreign_user`, the connection cap) is the
            // envelope there too.
            let mcp = path == "/mcp" || path.starts_with("/mcp/");
            for (status, response) in responses {
                assert_ne!(status, "default", "{method} {path}: list the statuses, not `default`");
                if !status.starts_with('4') && !status.starts_with('5') {
                    continue;
                }
                let response = resolve(&doc, response);
                let content = response["content"].as_object().expect("error content");
                // A spent login link and the OAuth callback are what a browser opens itself:
                // they may also be a page (`text/html`, when the browser asks for one); the
                // envelope stays.
                let types: Vec<_> = content.keys().map(String::as_str).collect();
                let page_too = (path == "/login" && status == "403")
                    || (path == "/oauth/callback" && matches!(status.as_str(), "400" | "502"));
                let expected: &[&str] =
                    if page_too { &["application/json", "text/html"] } else { &["application/json"] };
                assert_eq!(types, expected, "{method} {path} {status}");
                let schema = &content["application/json"]["schema"];
                let refs: Vec<&str> = match schema.get("anyOf") {
                    Some(any) => any.as_array().expect("anyOf").iter().filter_map(|s| s["$ref"].as_str()).collect(),
                    None => schema["$ref"].as_str().into_iter().collect(),
                };
                let allowed: &[&str] = if mcp { &[json_rpc, envelope] } else { &[envelope] };
                assert!(
                    !refs.is_empty() && refs.iter().all(|r| allowed.contains(r)),
                    "{method} {path} {status}: {schema} is not {allowed:?}"
                );
                assert!(mcp || refs == [envelope], "{method} {path} {status}: not the envelope");
            }
        }
    }

    #[test]
    fn path_parameters_are_declared_and_used() {
        let doc = document();
        for (method, path, operation) in operations(&doc) {
            let in_path: BTreeSet<&str> =
                path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).collect();
            let declared: BTreeSet<&str> = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| resolve(&doc, p))
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().expect("a name"))
                .collect();
            assert_eq!(in_path, declared, "{method} {path}");
        }
    }

    #[test]
    fn the_layout_schemas_are_spec_layout_schema() {
        let doc = document();
        let mut spec: Value = serde_json::from_str(LAYOUT_SCHEMA).expect("layout schema");
        let defs = spec.as_object_mut().and_then(|s| s.remove("$defs")).expect("$defs");
        let component = |name: &str| format!("Layout{}{}", name[..1].to_uppercase(), &name[1..]);
        let rename = |value: &Value| {
            let mut text = value.to_string();
            for name in defs.as_object().expect("defs").keys() {
                text = text
                    .replace(&format!("\"#/$defs/{name}\""), &format!("\"#/components/schemas/{}\"", component(name)));
            }
            serde_json::from_str::<Value>(&text).expect("json")
        };
        let mut layout = rename(&spec);
        if let Some(layout) = layout.as_object_mut() {
            layout.remove("$schema");
            layout.remove("$id");
        }
        let schemas = &doc["components"]["schemas"];
        assert_eq!(schemas["Layout"], layout, "docs/openapi.json's Layout is not spec/layout.schema.json");
        for (name, def) in defs.as_object().expect("defs") {
            assert_eq!(schemas[component(name)], rename(def), "{name}");
        }
    }
}
