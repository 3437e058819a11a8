//! The host's own tools in the reserved `butler` namespace, each one pipeline
//! action behind a JSON Schema that is checked before the action runs.
//!
//! The main endpoint offers the consumer tools; the restricted endpoint for the distilling
//! agent adds the distill tools. No endpoint offers an approval: review actions need the
//! owner, and nothing arriving over MCP is the owner.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::faculty::{CallContext, FacultyRuntime};
use crate::pipeline::PipelineRouter;
use crate::validation::SchemaValidator;

/// Which endpoint a session came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `/mcp`: every provider, plus the consumer tools.
    Main,
    /// `/mcp/butler`: the consumer tools plus the distill tools, no providers.
    Distill,
}

/// One host tool.
struct Tool {
    name: &'static str,
    action: &'static str,
    description: &'static str,
    schema: Value,
    scopes: &'static [Scope],
    /// Fills what the caller does not choose (e.g. the observation type of a session report).
    fixed: fn(&mut Map<String, Value>),
    validator: SchemaValidator,
}

fn nothing(_: &mut Map<String, Value>) {}

fn session_report(args: &mut Map<String, Value>) {
    args.insert("type".into(), json!("session"));
    args.entry("source").or_insert_with(|| json!("mcp-client"));
}

/// The host's tools and how to run them.
pub struct HostTools {
    tools: Vec<Tool>,
    pipeline: Arc<PipelineRouter>,
    runtime: Arc<FacultyRuntime>,
}

const BOTH: &[Scope] = &[Scope::Main, Scope::Distill];
const DISTILL: &[Scope] = &[Scope::Distill];

impl HostTools {
    /// The tools, their schemas compiled once.
    ///
    /// # Panics
    /// Never: the schemas are constants covered by the tests.
    #[must_use]
    #[allow(clippy::expect_used)]
    pub fn new(pipeline: Arc<PipelineRouter>, runtime: Arc<FacultyRuntime>) -> Self {
        let text = |max: u64| json!({"type": "string", "minLength": 1, "maxLength": max});
        let lease = json!({"batchId": text(200), "lease": text(200)});
        let with_lease = |extra: Value, required: &[&str]| {
            let mut properties = lease.clone();
            if let (Some(p), Some(e)) = (properties.as_object_mut(), extra.as_object()) {
                p.extend(e.clone());
            }
            let mut all = vec!["batchId", "lease"];
            all.extend_from_slice(required);
            json!({"type": "object", "properties": properties, "required": all, "additionalProperties": false})
        };
        let definitions = [
            (
                "butler__search",
                "cards.search",
                "Search the owner's approved knowledge cards (title, summary, appliesTo, tags, body). Returns index entries; read one with butler__read.",
                json!({"type": "object", "properties": {"query": text(500), "limit": {"type": "integer", "minimum": 1, "maximum": 100}}, "required": ["query"], "additionalProperties": false}),
                BOTH,
                nothing as fn(&mut Map<String, Value>),
            ),
            (
                "butler__read",
                "cards.read",
                "Read one active card by id: its body and the ids of related cards.",
                json!({"type": "object", "properties": {"id": text(200)}, "required": ["id"], "additionalProperties": false}),
                BOTH,
                nothing,
            ),
            (
                "butler__report_session",
                "journal.intake",
                "Report what happened in this session (decisions, facts, problems) to the owner's journal, as a session observation.",
                json!({"type": "object", "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": 2000},
                    "source": {"type": "string", "pattern": "^[a-z0-9-]{1,64}$"},
                    "tags": {"type": "array", "maxItems": 32, "items": {"type": "string", "minLength": 1, "maxLength": 64}},
                    "ref": {"type": "string", "maxLength": 500}
                }, "required": ["text"], "additionalProperties": false}),
                BOTH,
                session_report,
            ),
            (
                "butler__distill_claim",
                "distill.claim",
                "Claim a batch of observations to distill (a lease with an expiry).",
                json!({"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 200}}, "additionalProperties": false}),
                DISTILL,
                nothing,
            ),
            (
                "butler__distill_evidence",
                "distill.evidence",
                "Read one item of a claimed batch in full.",
                with_lease(json!({"itemId": text(200)}), &["itemId"]),
                DISTILL,
                nothing,
            ),
            (
                "butler__candidate_submit",
                "candidate.submit",
                "Submit a complete candidate card (create, revise or archive) with its evidence and optional path/quote checks, for the owner to review.",
                with_lease(
                    json!({
                        "op": {"enum": ["create", "revise", "archive"]},
                        "target": text(200),
                        "card": {"type": "object"},
                        "evidence": {"type": "array", "items": {"type": "string"}},
                        "checks": {"type": "array", "items": {"type": "object"}},
                        "conflict": {"type": "object"}
                    }),
                    &["op", "card", "evidence"],
                ),
                DISTILL,
                nothing,
            ),
            (
                "butler__distill_complete",
                "distill.complete",
                "Complete a claimed batch: the candidates submitted for it, or why it yielded none.",
                with_lease(
                    json!({"candidates": {"type": "array", "items": {"type": "string"}}, "zeroReason": text(2000)}),
                    &["candidates"],
                ),
                DISTILL,
                nothing,
            ),
        ];
        let tools = definitions
            .into_iter()
            .map(|(name, action, description, schema, scopes, fixed)| Tool {
                validator: SchemaValidator::compile(name, &schema.to_string())
                    .expect("the host tools' schemas compile"),
                name,
                action,
                description,
                schema,
                scopes,
                fixed,
            })
            .collect();
        Self { tools, pipeline, runtime }
    }

    /// The `tools/list` entries for `scope`.
    #[must_use]
    pub fn list(&self, scope: Scope) -> Vec<Value> {
        self.tools
            .iter()
            .filter(|t| t.scopes.contains(&scope))
            .map(|t| json!({"name": t.name, "description": t.description, "inputSchema": t.schema}))
            .collect()
    }

    /// Whether `name` is a host tool in `scope`.
    #[must_use]
    pub fn has(&self, scope: Scope, name: &str) -> bool {
        self.tools.iter().any(|t| t.name == name && t.scopes.contains(&scope))
    }

    /// Runs host tool `name`: a `tools/call` result (failures are `isError` results, so the
    /// model can read and correct them).
    pub async fn call(&self, scope: Scope, name: &str, arguments: Value) -> Value {
        let Some(tool) = self.tools.iter().find(|t| t.name == name && t.scopes.contains(&scope)) else {
            return error_result(format!("no tool `{name}`"));
        };
        let arguments = if arguments.is_null() { json!({}) } else { arguments };
        let problems = tool.validator.errors(&arguments);
        if !problems.is_empty() {
            let listed: Vec<String> = problems
                .iter()
                .map(|p| if p.pointer.is_empty() { p.message.clone() } else { format!("{}: {}", p.pointer, p.message) })
                .collect();
            return error_result(format!("invalid arguments: {}", listed.join("; ")));
        }
        let Value::Object(mut args) = arguments else { return error_result("arguments must be an object".to_owned()) };
        (tool.fixed)(&mut args);
        let (pipeline, action) = (Arc::clone(&self.pipeline), tool.action);
        let args = Value::Object(args);
        // One caller per endpoint, not per session: sessions cost nothing to open, so a
        // per-session limit would be no limit.
        let caller = if scope == Scope::Distill { "mcp/butler" } else { "mcp" };
        let context = CallContext::top(false).by(caller).until(pipeline.deadline(action));
        let deadline = context.deadline();
        let outcome = self.runtime.blocking(deadline, move || pipeline.call(action, &args, &context)).await;
        match outcome {
            Ok(data) => json!({
                "content": [{"type": "text", "text": serde_json::to_string_pretty(&data).unwrap_or_default()}],
                "structuredContent": data,
            }),
            Err(e) => error_result(format!("{}: {e}", e.code())),
        }
    }
}

/// A `tools/call` result that reports a failure.
#[must_use]
pub fn error_result(message: String) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}
