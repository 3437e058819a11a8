//! The faculties' tools: the commands faculties offer to the hub's clients
//! (`commands[].mcp` in their manifests), each checked against the input schema it declares
//! before it runs. The built-in faculties offer theirs in the reserved `butler` namespace —
//! the consumer tools on both endpoints, the distilling agent's on `/mcp/butler` only. No
//! manifest can offer a tool to the owner: nothing arriving over MCP is the owner, so a
//! command that needs the owner fails with `owner_required` whatever offers it.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use butler_catalog::manifest::ToolEndpoint;
use butler_faculty::declared::Offer;
use butler_faculty::{CallContext, FacultyRuntime};

/// Which endpoint a session came through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    /// `/mcp`: every provider, plus the faculties' tools offered there.
    #[default]
    Main,
    /// `/mcp/butler`, the restricted endpoint: only the faculties' tools offered there, no
    /// providers.
    Restricted,
    /// `/mcp/s/<session>`, an agent session the host drives for a delegation: the tools
    /// offered on `/mcp`, and those offered to agents only.
    Agent,
}

impl Scope {
    /// The faculty tool endpoints whose tools this scope offers.
    fn endpoints(self) -> &'static [ToolEndpoint] {
        match self {
            Self::Main => &[ToolEndpoint::Main],
            Self::Restricted => &[ToolEndpoint::Butler],
            Self::Agent => &[ToolEndpoint::Main, ToolEndpoint::Agents],
        }
    }
}

/// The longest a list or call waits for faculties still being compiled.
pub const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(15);

/// The host's own path to a faculty command that is one of its doors: a tool offered for
/// such a command hands its arguments here instead of running the command (the session
/// collector, for `takes: "session-turns"`: it redacts and stores the turn before the
/// command sees it).
pub trait Door: Send + Sync {
    /// Takes one call's arguments: what to answer, or why not.
    ///
    /// # Errors
    /// Why the arguments were not taken, for the model.
    fn take(&self, arguments: Map<String, Value>) -> Result<Value, String>;
}

/// The faculties' tools and how to run them.
pub struct HostTools {
    runtime: Arc<FacultyRuntime>,
    turns: Option<Arc<dyn Door>>,
}

impl HostTools {
    /// The tools the faculties of `runtime` offer, as they come and go; tools of a
    /// `session-turns` command hand their calls to `turns` (none: such a tool says this
    /// host collects no session turns).
    #[must_use]
    pub fn new(runtime: Arc<FacultyRuntime>, turns: Option<Arc<dyn Door>>) -> Self {
        Self { runtime, turns }
    }

    /// Waits (at most [`SETTLE_LIMIT`]) while faculties are still being compiled, so that a
    /// client that lists or calls at the host's start sees the tools they will offer.
    pub async fn settle(&self) {
        let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
        let mut reconciles = self.runtime.reconciles();
        while !self.runtime.readiness().ready {
            // Woken by the next reconcile; the deadline bounds the wait either way.
            match tokio::time::timeout_at(deadline, reconciles.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return,
            }
        }
    }

    /// The owner's compiled context: the `markdown` of the report that `provides` it.
    pub async fn context(&self) -> String {
        self.settle().await;
        let Some((faculty, report)) = self.runtime.declared().context.clone() else {
            return "No faculty provides a compiled context.".to_owned();
        };
        let runtime = Arc::clone(&self.runtime);
        let context = CallContext::top(false).until(runtime.deadline_for(&faculty));
        let deadline = context.deadline();
        match self.runtime.blocking(deadline, move || runtime.report(&faculty, &report, &context)).await {
            Ok(data) => data["markdown"].as_str().unwrap_or_default().to_owned(),
            Err(e) => format!("The compiled context could not be read ({}): {e}", e.code()),
        }
    }

    /// Tells when the offered tools change.
    #[must_use]
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.runtime.declared_changes()
    }

    /// The `tools/list` entries for `scope`.
    #[must_use]
    pub fn list(&self, scope: Scope) -> Vec<Value> {
        let endpoints = scope.endpoints();
        self.runtime
            .declared()
            .offers
            .iter()
            .filter(|o| o.endpoints.iter().any(|e| endpoints.contains(e)))
            .map(|o| json!({"name": o.public, "description": o.description, "inputSchema": o.schema}))
            .collect()
    }

    /// Whether `name` is a faculty tool in `scope`.
    #[must_use]
    pub fn has(&self, scope: Scope, name: &str) -> bool {
        let declared = self.runtime.declared();
        scope.endpoints().iter().any(|endpoint| declared.offer(*endpoint, name).is_some())
    }

    /// Runs faculty tool `name` for `caller` (the key its failures are counted under, see
    /// [`View::budget_key`](crate::View::budget_key)): a `tools/call` result (failures are
    /// `isError` results, so the model can read and correct them).
    pub async fn call(&self, scope: Scope, caller: &str, name: &str, arguments: Value) -> Value {
        let declared = self.runtime.declared();
        let Some(offer) = scope.endpoints().iter().find_map(|endpoint| declared.offer(*endpoint, name)).cloned() else {
            return error_result(format!("no tool `{name}`"));
        };
        let arguments = if arguments.is_null() { json!({}) } else { arguments };
        if let Some(problems) = offer.validator.describe_errors(&arguments) {
            return error_result(format!("invalid_args: {problems}"));
        }
        let Value::Object(mut args) = arguments else { return error_result("arguments must be an object".to_owned()) };
        for (key, value) in &offer.default {
            args.entry(key.clone()).or_insert_with(|| value.clone());
        }
        args.extend(offer.set.clone());
        if offer.takes == Some(butler_catalog::manifest::CommandDoor::SessionTurns) {
            let Some(door) = self.turns.clone() else {
                return error_result(format!("{name}: this host collects no session turns"));
            };
            return match tokio::task::spawn_blocking(move || door.take(args)).await {
                Ok(Ok(data)) => json!({
                    "content": [{"type": "text", "text": serde_json::to_string_pretty(&data).unwrap_or_default()}],
                    "structuredContent": data,
                }),
                Ok(Err(why)) => error_result(format!("{name}: {why}")),
                Err(e) => error_result(format!("{name}: {e}")),
            };
        }
        let runtime = Arc::clone(&self.runtime);
        let context = CallContext::top(false).by(caller).until(runtime.deadline_for(&offer.faculty));
        let deadline = context.deadline();
        let outcome = self.runtime.blocking(deadline, move || run(&runtime, &offer, args, &context)).await;
        match outcome {
            Ok(data) => json!({
                "content": [{"type": "text", "text": serde_json::to_string_pretty(&data).unwrap_or_default()}],
                "structuredContent": data,
            }),
            Err(e) => error_result(format!("{}: {e}", e.code())),
        }
    }
}

/// Runs the offered command with `args`: as one JSON document, or as its declared text
/// arguments.
fn run(
    runtime: &FacultyRuntime,
    offer: &Offer,
    args: Map<String, Value>,
    context: &CallContext,
) -> Result<Value, butler_faculty::CallError> {
    if offer.json_input {
        return runtime.invoke_json(&offer.faculty, &offer.command, &Value::Object(args), context);
    }
    let text: Map<String, Value> = args
        .into_iter()
        .map(|(key, value)| match value {
            Value::String(_) => (key, value),
            other => (key, Value::String(other.to_string())),
        })
        .collect();
    runtime.invoke(&offer.faculty, &offer.command, &text, context)
}

/// A `tools/call` result that reports a failure.
#[must_use]
pub fn error_result(message: String) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}
