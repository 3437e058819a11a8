//! The hub's tools, for faculty commands that declare them (`commands[].hubTools`): the
//! [`HubCalls`] trait through which the binary lends a call the endpoint it came through,
//! and the [`Grant`] one call's sandbox checks every `butler:hub/tools` call against — the
//! declared globs, a budget of calls, the call's deadline. The faculty runtime knows
//! nothing of MCP: what a tool is and who may call it is the hub's, behind the trait.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::Value;

/// The most hub tool calls one command call may make; the next one fails with
/// [`HubCallError::Limit`] (a program calling tools in a loop ends, not the host).
pub const MAX_HUB_CALLS: u32 = 200;
/// The longest tool name a call may ask for (no tool's public name comes near it).
pub const MAX_NAME: usize = 1024;

/// The tools of the endpoint a command was called through, as the binary's hub offers them.
/// Both methods block the calling thread (a faculty call's own blocking thread) until the
/// answer or `deadline`, whichever is first.
pub trait HubCalls: Send + Sync {
    /// The endpoint's tools, as `tools/list` entries.
    ///
    /// # Errors
    /// Why they could not be listed.
    fn list(&self, deadline: Instant) -> Result<Vec<Value>, HubCallError>;

    /// Calls tool `name` with `arguments` (an object): its `tools/call` result as JSON
    /// text, `isError` results included.
    ///
    /// # Errors
    /// Why the call was not made.
    fn call(&self, name: &str, arguments: Value, deadline: Instant) -> Result<String, HubCallError>;
}

/// A [`HubCalls`] carried by a [`CallContext`](crate::CallContext).
#[derive(Clone)]
pub struct HubAccess(pub Arc<dyn HubCalls>);

impl fmt::Debug for HubAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HubAccess")
    }
}

/// Why a hub tool call was not made (the tool did not run).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubCallError {
    /// The command did not declare the name in `hubTools`.
    #[error("`{0}` is not among the hub tools this command declares (`hubTools`)")]
    NotDeclared(String),
    /// The endpoint does not offer it, or there is no endpoint.
    #[error("{0}")]
    NotOffered(String),
    /// The arguments are not a JSON object.
    #[error("{0}")]
    InvalidArguments(String),
    /// A limit: the call budget, the deadline.
    #[error("{0}")]
    Limit(String),
    /// The hub could not make it.
    #[error("{0}")]
    Failed(String),
}

/// The compiled `hubTools` globs of a command.
///
/// # Errors
/// The first pattern that is not a glob (the manifest rules refuse it before this).
pub fn globs(patterns: &[String]) -> Result<Option<GlobSet>, globset::Error> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        set.add(Glob::new(pattern)?);
    }
    set.build().map(Some)
}

/// What one command call may do with the hub: set when its command declares `hubTools`.
pub struct Grant {
    hub: Option<HubAccess>,
    allowed: GlobSet,
    made: u32,
    deadline: Instant,
}

impl Grant {
    /// The grant of a call whose command declares `allowed`, made through `hub` (none: not
    /// called through an endpoint), ending at `deadline`.
    #[must_use]
    pub fn new(hub: Option<HubAccess>, allowed: GlobSet, deadline: Instant) -> Self {
        Self { hub, allowed, made: 0, deadline }
    }

    fn hub(&self) -> Result<&HubAccess, HubCallError> {
        self.hub.as_ref().ok_or_else(|| {
            HubCallError::NotOffered(
                "this call did not come through a hub endpoint (only a call made as an MCP tool may call hub tools)"
                    .to_owned(),
            )
        })
    }

    /// `list-tools`: the endpoint's tools the command declared, as a JSON array.
    ///
    /// # Errors
    /// No endpoint, or the hub's reason.
    pub fn list(&self) -> Result<String, HubCallError> {
        let tools = self.hub()?.0.list(self.deadline)?;
        Ok(self.declared(tools))
    }

    /// [`Self::list`] from an async task: the hub is asked on a blocking thread.
    ///
    /// # Errors
    /// As [`Self::list`].
    pub async fn list_awaited(&self) -> Result<String, HubCallError> {
        let hub = self.hub()?.clone();
        let deadline = self.deadline;
        let tools = off_the_task(move || hub.0.list(deadline)).await?;
        Ok(self.declared(tools))
    }

    fn declared(&self, tools: Vec<Value>) -> String {
        let declared: Vec<Value> = tools
            .into_iter()
            .filter(|tool| tool.get("name").and_then(Value::as_str).is_some_and(|name| self.allowed.is_match(name)))
            .collect();
        Value::Array(declared).to_string()
    }

    /// `call-tool`: checks the name against the declared globs and the budget, then calls.
    ///
    /// # Errors
    /// Not declared, not offered, bad arguments, past a limit, or the hub's reason.
    pub fn call(&mut self, name: &str, arguments: &str) -> Result<String, HubCallError> {
        let (hub, arguments) = self.admit(name, arguments)?;
        hub.0.call(name, arguments, self.deadline)
    }

    /// [`Self::call`] from an async task: the hub is called on a blocking thread.
    ///
    /// # Errors
    /// As [`Self::call`].
    pub async fn call_awaited(&mut self, name: &str, arguments: &str) -> Result<String, HubCallError> {
        let (hub, arguments) = self.admit(name, arguments)?;
        let (name, deadline) = (name.to_owned(), self.deadline);
        off_the_task(move || hub.0.call(&name, arguments, deadline)).await
    }

    /// The checks before a call, counted against the budget: the hub to call and the
    /// arguments as an object.
    fn admit(&mut self, name: &str, arguments: &str) -> Result<(HubAccess, Value), HubCallError> {
        if name.len() > MAX_NAME {
            return Err(HubCallError::NotOffered(format!("no tool has a name of {} bytes", name.len())));
        }
        if !self.allowed.is_match(name) {
            return Err(HubCallError::NotDeclared(name.to_owned()));
        }
        let hub = self.hub()?.clone();
        if self.made >= MAX_HUB_CALLS {
            return Err(HubCallError::Limit(format!(
                "call budget: one run of a command may make at most {MAX_HUB_CALLS} hub tool calls, and this one has made them all"
            )));
        }
        if Instant::now() >= self.deadline {
            return Err(HubCallError::Limit("deadline: the call's time is up".to_owned()));
        }
        let arguments = match serde_json::from_str::<Value>(arguments) {
            Ok(Value::Object(map)) => Value::Object(map),
            Ok(_) => return Err(HubCallError::InvalidArguments("arguments must be a JSON object".to_owned())),
            Err(e) => return Err(HubCallError::InvalidArguments(format!("arguments are not JSON: {e}"))),
        };
        self.made += 1;
        Ok((hub, arguments))
    }
}

/// Runs `call` (which blocks: the hub's answer is awaited on its own runtime) on a
/// blocking thread, for a guest running on an async task.
async fn off_the_task<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, HubCallError> + Send + 'static,
) -> Result<T, HubCallError> {
    tokio::task::spawn_blocking(call)
        .await
        .unwrap_or_else(|e| Err(HubCallError::Failed(format!("the hub call panicked: {e}"))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    /// Records the calls it is asked to make and answers each with its name.
    #[derive(Default)]
    struct Echo(Mutex<Vec<String>>);

    impl HubCalls for Echo {
        fn list(&self, _deadline: Instant) -> Result<Vec<Value>, HubCallError> {
            Ok(vec![serde_json::json!({"name": "time__now"}), serde_json::json!({"name": "files__delete"})])
        }

        fn call(&self, name: &str, _arguments: Value, _deadline: Instant) -> Result<String, HubCallError> {
            self.0.lock().expect("lock").push(name.to_owned());
            Ok(serde_json::json!({"content": [{"type": "text", "text": name}]}).to_string())
        }
    }

    fn grant(echo: &Arc<Echo>, patterns: &[&str], deadline: Instant) -> Grant {
        let patterns: Vec<String> = patterns.iter().map(|p| (*p).to_owned()).collect();
        let allowed = globs(&patterns).expect("globs").expect("some");
        Grant::new(Some(HubAccess(Arc::clone(echo) as Arc<dyn HubCalls>)), allowed, deadline)
    }

    #[test]
    fn only_declared_tools_are_listed_or_called() {
        let echo = Arc::new(Echo::default());
        let mut grant = grant(&echo, &["time__*"], Instant::now() + Duration::from_secs(60));
        assert_eq!(grant.list().expect("list"), r#"[{"name":"time__now"}]"#);
        assert!(grant.call("time__now", "{}").is_ok());
        assert_eq!(grant.call("files__delete", "{}"), Err(HubCallError::NotDeclared("files__delete".to_owned())));
        assert_eq!(*echo.0.lock().expect("lock"), ["time__now"], "a refused call never reaches the hub");
    }

    #[test]
    fn calls_end_at_the_budget_and_the_deadline_and_need_object_arguments() {
        let echo = Arc::new(Echo::default());
        let mut grant = grant(&echo, &["*"], Instant::now() + Duration::from_secs(60));
        assert!(matches!(grant.call("time__now", "[1]"), Err(HubCallError::InvalidArguments(_))));
        assert!(matches!(grant.call("time__now", "{"), Err(HubCallError::InvalidArguments(_))));
        for _ in 0..MAX_HUB_CALLS {
            grant.call("time__now", "{}").expect("within the budget");
        }
        let over = grant.call("time__now", "{}").expect_err("past the budget");
        assert!(over.to_string().starts_with("call budget"), "{over}");
        assert_eq!(echo.0.lock().expect("lock").len(), MAX_HUB_CALLS as usize);

        let mut late = self::grant(&echo, &["*"], Instant::now());
        assert!(matches!(late.call("time__now", "{}"), Err(HubCallError::Limit(why)) if why.starts_with("deadline")));
    }

    #[test]
    fn without_an_endpoint_nothing_is_called() {
        let allowed = globs(&["*".to_owned()]).expect("globs").expect("some");
        let mut grant = Grant::new(None, allowed, Instant::now() + Duration::from_secs(60));
        assert!(matches!(grant.call("time__now", "{}"), Err(HubCallError::NotOffered(_))));
        assert!(matches!(grant.list(), Err(HubCallError::NotOffered(_))));
    }
}
