//! Maps an action to a faculty command and runs it through the faculty runtime.
//!
//! A faculty declares the action prefixes it serves (`serves` in its manifest); the root
//! config's `pipeline.routes` maps a prefix to a faculty id over those. The command is
//! `<verb>` when the prefix is the faculty's own id, otherwise `<prefix>-<verb>`
//! (`cards.search` → `cards`/`search`; `review.prepare` → `cards`/`review-prepare`). The
//! action's `args` reach the command as JSON text on its `stdin: true` argument. This router
//! is also what faculties reach through `host.call`. Who may run a command is the
//! command's own property (`owner`, `operator` in its manifest), enforced by the faculty
//! runtime whatever route led to it.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Instant;

use serde_json::Value;

use butler_faculty::{CallContext, CallError, Dispatch, Dispatched, FacultyRuntime};

/// Maps a `<prefix>.<verb>` action to the faculty and command that serve it — the prefixes
/// the faculties declare (`serves`), with the root config's `pipeline` overrides over them —
/// and is the [`Dispatch`] through which faculties call one another.
pub struct PipelineRouter {
    /// The root config's overrides (`pipeline.routes`, changed live: [`Self::retune`]).
    configured: std::sync::RwLock<Arc<BTreeMap<String, String>>>,
    runtime: Weak<FacultyRuntime>,
}

impl PipelineRouter {
    /// A router over what `runtime`'s faculties declare, with `configured` over it (weak:
    /// the runtime dispatches `host.call` to this router, see [`butler_faculty::Wiring`]).
    #[must_use]
    pub fn new(configured: &BTreeMap<String, String>, runtime: Weak<FacultyRuntime>) -> Self {
        Self { configured: std::sync::RwLock::new(Arc::new(configured.clone())), runtime }
    }

    /// From the next action on, `configured` is routed over the declarations.
    pub fn retune(&self, configured: BTreeMap<String, String>) {
        *self.configured.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(configured);
    }

    fn configured(&self) -> Arc<BTreeMap<String, String>> {
        Arc::clone(&self.configured.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// The faculty and command serving `action`; a prefix no registered faculty declares
    /// is waited for until `deadline` while faculties are still being compiled.
    ///
    /// # Errors
    /// [`CallError::UnknownAction`] for a malformed action or an unrouted prefix.
    pub fn resolve_by(&self, action: &str, deadline: Instant) -> Result<(String, String), CallError> {
        let unknown = || CallError::UnknownAction(action.chars().take(100).collect());
        if !crate::catalog::is_action(action) {
            return Err(unknown());
        }
        let (prefix, verb) = action.split_once('.').ok_or_else(unknown)?;
        let faculty = match self.configured().get(prefix) {
            Some(faculty) => faculty.clone(),
            None => self.runtime.upgrade().and_then(|r| r.serving(prefix, deadline)).ok_or_else(unknown)?,
        };
        let command = command_of(prefix, verb, &faculty);
        Ok((faculty, command))
    }

    /// Every routed prefix and the faculty serving it: the declarations with the root
    /// config's overrides over them.
    #[must_use]
    pub fn routes(&self) -> BTreeMap<String, String> {
        let mut routes = self.runtime.upgrade().map(|r| r.declared().serving.clone()).unwrap_or_default();
        routes.extend(self.configured().as_ref().clone());
        routes
    }

    /// [`Self::resolve_by`] without waiting.
    ///
    /// # Errors
    /// As [`Self::resolve_by`].
    pub fn resolve(&self, action: &str) -> Result<(String, String), CallError> {
        self.resolve_by(action, Instant::now())
    }

    /// The deadline of a call of `action` that starts now: the routed faculty's
    /// `timeoutMs` from now (the default when `action` is not routed yet).
    #[must_use]
    pub fn deadline(&self, action: &str) -> Instant {
        match (self.resolve(action), self.runtime.upgrade()) {
            (Ok((faculty, _)), Some(runtime)) => runtime.deadline_for(&faculty),
            _ => Instant::now() + std::time::Duration::from_millis(butler_faculty::DEFAULT_TIMEOUT_MS),
        }
    }

    /// Runs `action`.
    ///
    /// # Errors
    /// [`CallError`]; an unknown command of a routed faculty is `unknown_action` too.
    pub fn call(&self, action: &str, args: &Value, context: &CallContext) -> Result<Value, CallError> {
        let deadline = context.deadline().unwrap_or_else(|| self.deadline(action));
        let (faculty, command) = self.resolve_by(action, deadline)?;
        let runtime = self.runtime.upgrade().ok_or_else(|| CallError::UnknownAction(action.to_owned()))?;
        runtime.invoke_json(&faculty, &command, args, context).map_err(|e| as_action(e, action))
    }

    /// Runs `action` from async code: a routed action through
    /// [`FacultyRuntime::invoke_json_awaited`] (a read runs on the calling task), one that
    /// is not routed yet — its faculty may still be compiling — as [`Self::call`] on a
    /// blocking thread, which waits for it (a nested one in its caller's slot).
    ///
    /// # Errors
    /// As [`Self::call`].
    pub async fn call_awaited(
        self: &Arc<Self>,
        action: String,
        args: Value,
        context: CallContext,
    ) -> Result<Value, CallError> {
        let runtime = self.runtime.upgrade().ok_or_else(|| CallError::UnknownAction(action.clone()))?;
        match self.resolve(&action) {
            Ok((faculty, command)) => {
                runtime.invoke_json_awaited(faculty, command, args, context).await.map_err(|e| as_action(e, &action))
            }
            Err(_) => {
                let (router, called) = (Arc::clone(self), context.clone());
                runtime.blocking_for(&called, move || router.call(&action, &args, &context)).await
            }
        }
    }
}

/// A failure of the command serving `action`, as the action's: an unknown command of a
/// routed faculty is an unknown action.
fn as_action(error: CallError, action: &str) -> CallError {
    match error {
        CallError::UnknownCommand { .. } | CallError::UnknownFaculty(_) => CallError::UnknownAction(action.to_owned()),
        other => other,
    }
}

/// The command of `faculty` that serves `<prefix>.<verb>`: `<verb>` when the prefix is
/// the faculty's own id, otherwise `<prefix>-<verb>`.
#[must_use]
pub fn command_of(prefix: &str, verb: &str, faculty: &str) -> String {
    if prefix == faculty { verb.to_owned() } else { format!("{prefix}-{verb}") }
}

impl Dispatch for PipelineRouter {
    fn dispatch(&self, action: &str, args: Value, context: &CallContext) -> Result<Value, CallError> {
        self.call(action, &args, context)
    }

    fn dispatch_awaited(self: Arc<Self>, action: String, args: Value, context: CallContext) -> Dispatched {
        Box::pin(async move { self.call_awaited(action, args, context).await })
    }

    fn resolve(&self, action: &str) -> Option<(String, String)> {
        PipelineRouter::resolve(self, action).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_verb_or_prefix_verb_and_malformed_actions_are_unknown() {
        let configured: BTreeMap<String, String> =
            [("cards", "cards"), ("review", "cards"), ("context", "journal")].map(|(p, f)| (p.into(), f.into())).into();
        let router = PipelineRouter::new(&configured, Weak::new());
        assert_eq!(router.resolve("cards.search").expect("routed"), ("cards".into(), "search".into()));
        assert_eq!(router.resolve("review.prepare").expect("routed"), ("cards".into(), "review-prepare".into()));
        assert_eq!(router.resolve("context.build").expect("routed"), ("journal".into(), "context-build".into()));
        for bad in ["cards", "nobody.search", "cards.", ".search", "Cards.search", "cards.search.x", "cards.sea rch"] {
            assert_eq!(router.resolve(bad).expect_err(bad).code(), "unknown_action", "{bad}");
        }
    }
}
