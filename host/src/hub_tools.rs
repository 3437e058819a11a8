//! The faculties' tools as one of the hub's tool sources: the commands faculties offer to
//! the hub's clients (`commands[].mcp` in their manifests), each checked against the input
//! schema it declares before it runs. The built-in faculties offer theirs in the reserved
//! `butler` namespace — the consumer tools on both endpoints, the distilling agent's on
//! `/mcp/butler` only. No manifest can offer a tool to the owner: nothing arriving over MCP
//! is the owner, so a command that needs the owner fails with `owner_required` whatever
//! offers it. [`FacultyTools`] implements `butler_mcp`'s `ToolSource` over the faculty
//! runtime, so the hub itself never needs one.

use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};

use butler_faculty::declared::Offer;
use butler_faculty::hub::{HubAccess, HubCallError, HubCalls};
use butler_faculty::{CallContext, FacultyRuntime};
use butler_mcp::code_mode::{InnerCallError, InnerCalls};
use butler_mcp::tool_source::{Scope, ToolSource, data_result, error_result};

/// The longest a list or call waits for faculties still being compiled.
pub const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Where a tool of a `takes: "session-turns"` command hands its arguments instead of
/// running the command: the session collector, which redacts and stores the turn before
/// the command sees it.
pub trait TurnSink: Send + Sync {
    /// Takes one call's arguments: what to answer, or why not.
    ///
    /// # Errors
    /// Why the arguments were not taken, for the model.
    fn take(&self, arguments: Map<String, Value>) -> Result<Value, NotTaken>;
}

/// Why a [`TurnSink`] did not take a call's arguments (the sink's own error); its text is
/// for the model.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct NotTaken(pub Box<dyn std::error::Error + Send + Sync>);

/// The faculties' tools and how to run them.
pub struct FacultyTools {
    runtime: Arc<FacultyRuntime>,
    turns: Option<Arc<dyn TurnSink>>,
}

impl FacultyTools {
    /// The tools the faculties of `runtime` offer, as they come and go; `turns` takes the
    /// calls of `session-turns` tools (without one, such a call says no turns are
    /// collected).
    #[must_use]
    pub fn new(runtime: Arc<FacultyRuntime>, turns: Option<Arc<dyn TurnSink>>) -> Self {
        Self { runtime, turns }
    }

    /// Waits (at most [`SETTLE_LIMIT`]) while faculties are still being compiled.
    async fn settled(&self) {
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
    async fn compiled(&self) -> String {
        self.settled().await;
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

    async fn run_tool(&self, scope: Scope, caller: &str, name: &str, arguments: Value, inner: InnerCalls) -> Value {
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
            let Some(sink) = self.turns.clone() else {
                return error_result(format!("{name}: this host collects no session turns"));
            };
            return match tokio::task::spawn_blocking(move || sink.take(args)).await {
                Ok(Ok(data)) => data_result(&data),
                Ok(Err(why)) => error_result(format!("{name}: {why}")),
                Err(e) => error_result(format!("{name}: {e}")),
            };
        }
        let runtime = Arc::clone(&self.runtime);
        let mut context = CallContext::top(false).by(caller).until(runtime.deadline_for(&offer.faculty));
        let callers_deadline = inner.deadline();
        if let Some(deadline) = callers_deadline {
            // Called by another tool's program: it ends when that call must.
            context = context.until(deadline);
        }
        if let Some(seconds) = offer.timeout_arg.as_ref().and_then(|arg| args.get(arg)).and_then(Value::as_f64) {
            // The caller's own deadline, within the faculty's.
            let asked = std::time::Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(std::time::Duration::MAX);
            if let Some(at) = std::time::Instant::now().checked_add(asked) {
                context = context.until(at);
            }
        }
        // A client that goes away (its request dropped) stops the call, not only its wait.
        let stopping = StopOnDrop(Arc::new(std::sync::atomic::AtomicBool::new(false)));
        let context = context
            .through(HubAccess(Arc::new(HubBridge { inner, io: tokio::runtime::Handle::current() })))
            .cancelled_by(Arc::clone(&stopping.0));
        let deadline = context.deadline();
        let called = move || run(&runtime, &offer, args, &context);
        let done = if callers_deadline.is_some() {
            // A running call's program waits for it, in its slot.
            self.runtime.blocking_in_callers_slot(called).await
        } else {
            self.runtime.blocking(deadline, called).await
        };
        match done {
            Ok(data) => data_result(&data),
            Err(e) => error_result(format!("{}: {e}", e.code())),
        }
    }
}

impl ToolSource for FacultyTools {
    fn settle(&self) -> BoxFuture<'_, ()> {
        self.settled().boxed()
    }

    fn list(&self, scope: Scope) -> Vec<Value> {
        let endpoints = scope.endpoints();
        self.runtime
            .declared()
            .offers
            .iter()
            .filter(|o| o.endpoints.iter().any(|e| endpoints.contains(e)))
            .map(|o| json!({"name": o.public, "description": o.description, "inputSchema": o.schema}))
            .collect()
    }

    fn has(&self, scope: Scope, name: &str) -> bool {
        let declared = self.runtime.declared();
        scope.endpoints().iter().any(|endpoint| declared.offer(*endpoint, name).is_some())
    }

    fn call<'a>(
        &'a self,
        scope: Scope,
        caller: &'a str,
        name: &'a str,
        arguments: Value,
        inner: InnerCalls,
    ) -> BoxFuture<'a, Value> {
        self.run_tool(scope, caller, name, arguments, inner).boxed()
    }

    fn context(&self) -> BoxFuture<'_, String> {
        self.compiled().boxed()
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.runtime.declared_changes()
    }
}

/// Sets its flag when dropped: held across a faculty tool's call, it tells the faculty
/// runtime to stop the call once nobody waits for it.
struct StopOnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// The endpoint a faculty tool's call came through, as the faculty runtime calls it: from
/// the call's blocking thread, each call waited for on the hub's runtime until the
/// faculty call's deadline.
struct HubBridge {
    inner: InnerCalls,
    io: tokio::runtime::Handle,
}

impl HubBridge {
    fn wait<T>(
        &self,
        deadline: std::time::Instant,
        work: impl std::future::Future<Output = Result<T, InnerCallError>>,
    ) -> Result<T, HubCallError> {
        let bounded = tokio::time::timeout_at(deadline.into(), work);
        match self.io.block_on(bounded) {
            Ok(Ok(done)) => Ok(done),
            Ok(Err(InnerCallError::NotOffered(why))) => Err(HubCallError::NotOffered(why)),
            Ok(Err(InnerCallError::Limit(why))) => Err(HubCallError::Limit(why)),
            Ok(Err(InnerCallError::Failed(why))) => Err(HubCallError::Failed(why)),
            Err(_elapsed) => {
                Err(HubCallError::Limit("deadline: the call's time ran out during a tool call".to_owned()))
            }
        }
    }
}

impl HubCalls for HubBridge {
    fn list(&self, deadline: std::time::Instant) -> Result<Vec<Value>, HubCallError> {
        self.wait(deadline, self.inner.list())
    }

    fn call(&self, name: &str, arguments: Value, deadline: std::time::Instant) -> Result<String, HubCallError> {
        self.wait(deadline, self.inner.call(name, arguments, deadline))
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

#[cfg(test)]
mod tests {
    /// The hub's callers that prove nothing and the HTTP routes' anonymous callers share
    /// one failure budget only while both crates name it alike.
    #[test]
    fn the_hub_and_the_faculty_runtime_count_anonymous_callers_under_one_key() {
        assert_eq!(butler_mcp::view::ANONYMOUS, butler_faculty::failure_limits::ANONYMOUS);
    }
}
