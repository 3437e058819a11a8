//! Code mode, the hub's side: where `butler__run_code` is offered (`codeMode` on the main
//! endpoint or a profile), and [`InnerCalls`] — the endpoint a host tool's call came
//! through, lent to the tool so that it may call that endpoint's tools itself (what a
//! program run by `butler__run_code` does with `await tools.<ns>.<tool>(args)`).
//!
//! An inner call is an ordinary `tools/call` on the same endpoint — its tools only,
//! quarantine, timeouts — with these differences: no client takes part (a provider's
//! requests for the client — sampling, elicitation, roots — are refused, saying why), it
//! is written to the activity log with the calling tool as its `parent`, and calls nest at
//! most [`MAX_NESTING`] deep (a host tool reached by an inner call makes none itself).
//! The runner of `butler__run_code` itself (a faculty, behind [`crate::ToolSource`]) is not
//! the hub's: the hub only decides where it is listed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use serde_json::{Value, json};

use crate::activity::Entry;
use crate::upcall::{self, Asker, Upcall};
use crate::view::View;
use crate::{Hub, methods};

/// The code-mode tool's public name (the built-in `code` faculty offers it; the hub lists
/// it only where code mode is on).
pub const RUN_CODE: &str = "butler__run_code";
/// How deep inner calls nest: a client's call of a host tool may call the endpoint's tools;
/// a host tool reached by such an inner call may not call any itself (no chain of tools
/// calling tools, however each is declared).
pub const MAX_NESTING: u8 = 1;
/// The JSON-RPC error code a provider's request for the client is refused with.
const NO_CLIENT: i64 = -32601;
/// The JSON-RPC code of an unknown tool.
const INVALID_PARAMS: i64 = -32602;

/// Numbers inner calls, for the hub's bookkeeping of calls in flight.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

impl Hub {
    /// Whether `view` offers `butler__run_code`: the main endpoint when `mcp.codeMode` is
    /// on, a profile whose `codeMode` is (whatever its `include` and `hostTools` say; its
    /// `exclude` may still name it); never the restricted endpoint.
    #[must_use]
    pub fn code_mode(&self, view: &View) -> bool {
        match view {
            View::Main => self.code_main.load(Ordering::Relaxed),
            View::Profile(profile) => profile.spec.code_mode && !profile.excludes(RUN_CODE),
            View::Restricted => false,
        }
    }

    /// The endpoint `view` of `session`, lent to host tool `parent`, called where `nesting`
    /// says.
    pub(crate) fn inner_calls(&self, view: &View, session: &str, parent: &str, nesting: Nesting) -> InnerCalls {
        InnerCalls {
            hub: self.this.clone(),
            view: view.clone(),
            session: session.to_owned(),
            parent: parent.to_owned(),
            nesting,
        }
    }
}

/// Where a tool call stands among inner calls: how deep (0: a client's own call), and the
/// deadline of the call that made it, which bounds it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nesting {
    depth: u8,
    deadline: Option<Instant>,
}

impl Nesting {
    /// A client's own call.
    #[must_use]
    pub fn client() -> Self {
        Self::default()
    }

    /// Whether this is a client's own call (not one a tool made).
    #[must_use]
    pub fn is_clients(self) -> bool {
        self.depth == 0
    }
}

/// The endpoint a host tool's call came through, for the tool to call that endpoint's
/// tools (see the module's doc).
#[derive(Debug, Clone)]
pub struct InnerCalls {
    hub: Weak<Hub>,
    view: View,
    session: String,
    parent: String,
    nesting: Nesting,
}

/// Why an inner call was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InnerCallError {
    /// The endpoint does not offer the tool (or the hub has stopped, or it is the calling
    /// tool itself).
    #[error("{0}")]
    NotOffered(String),
    /// Nested too deep.
    #[error("{0}")]
    Limit(String),
    /// The provider answered with a JSON-RPC error.
    #[error("{0}")]
    Failed(String),
}

impl InnerCalls {
    /// When the call these were lent to must be done, if it was itself an inner call: a
    /// host tool it reaches must end by then too.
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        self.nesting.deadline
    }

    fn hub(&self) -> Result<std::sync::Arc<Hub>, InnerCallError> {
        self.hub.upgrade().ok_or_else(|| InnerCallError::NotOffered("the hub has stopped".to_owned()))
    }

    /// The endpoint's tools, as it lists them to a client that declares no capabilities
    /// (the search tools and `butler__run_code` left out: a program calls tools directly).
    ///
    /// # Errors
    /// The hub has stopped.
    pub async fn list(&self) -> Result<Vec<Value>, InnerCallError> {
        let hub = self.hub()?;
        let declared = json!({});
        let asker = Asker::sessions_2025(&declared, None);
        let tools = hub.offered_tools(&self.view, &asker).await;
        Ok(tools.into_iter().filter(|t| t["name"].as_str().is_some_and(|name| name != self.parent)).collect())
    }

    /// Calls tool `name` with `arguments` on the endpoint, to end by `deadline`: its
    /// `tools/call` result as JSON text (written once: its size goes to the log), the
    /// tool's own failures as `isError` results. Recorded in the activity log under the
    /// calling tool.
    ///
    /// # Errors
    /// An unknown tool or the calling tool itself, nesting too deep, a provider's JSON-RPC
    /// error.
    pub async fn call(&self, name: &str, arguments: Value, deadline: Instant) -> Result<String, InnerCallError> {
        let hub = self.hub()?;
        // What is called, as the hub will call it: `butler__call_tool` carries another call.
        let params = hub.unwrapped(&self.view, json!({"name": name, "arguments": arguments}));
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        if name == self.parent {
            return Err(InnerCallError::NotOffered(format!("`{name}` cannot call itself")));
        }
        if self.nesting.depth >= MAX_NESTING {
            return Err(InnerCallError::Limit(format!(
                "`{}` was itself called by another tool, and may not call tools in turn",
                self.parent
            )));
        }
        let request_bytes = params.to_string().len();
        // Written when the call ends, or as `cancelled` if the program stops waiting for
        // it (its deadline passed, its client went away).
        let mut logged = InnerEntry {
            hub: Arc::clone(&hub),
            began: Instant::now(),
            entry: Some(Entry {
                seq: 0,
                at: String::new(),
                endpoint: self.view.endpoint(),
                token: None,
                revision: String::new(),
                session: (!self.session.is_empty()).then(|| self.session.clone()),
                method: methods::TOOLS_CALL.to_owned(),
                provider: hub.owner_of(&self.view, methods::TOOLS_CALL, &name),
                name: Some(name.clone()),
                ms: 0.0,
                outcome: "cancelled".to_owned(),
                code: None,
                request_bytes,
                response_bytes: 0,
                dropped_before: 0,
                request: None,
                response: None,
                parent: Some(self.parent.clone()),
            }),
        };
        let id = json!(format!("inner-{}", NEXT_CALL.fetch_add(1, Ordering::Relaxed)));
        let (upcalls, mut inbox) = upcall::channel(false);
        let declared = json!({});
        let asker = Asker::sessions_2025(&declared, None);
        let nesting = Nesting { depth: self.nesting.depth + 1, deadline: Some(deadline) };
        let call = hub.call_tool_nested(&self.view, &self.session, &id, params, Some(upcalls), &asker, nesting);
        tokio::pin!(call);
        let answer = loop {
            tokio::select! {
                answer = &mut call => break answer,
                Some(upcall) = inbox.recv() => {
                    if let Upcall::Request(asked) = upcall {
                        let why = format!(
                            "`{}` needs the client, and none takes part in a call made by `{}`",
                            asked.method, self.parent
                        );
                        asked.refuse(NO_CLIENT, why);
                    }
                }
            }
        };
        let (result, outcome, code) = match answer {
            Ok(answer) => {
                let result = answer.into_value();
                let outcome = if result["isError"] == true { "tool_error" } else { "ok" };
                (Ok(result.to_string()), outcome, None)
            }
            Err(error) => (Err(error.message), "error", Some(error.code)),
        };
        logged.ended(outcome, code, result.as_ref().map_or(0, String::len));
        result.map_err(|message| match code {
            Some(INVALID_PARAMS) => InnerCallError::NotOffered(message),
            _ => InnerCallError::Failed(message),
        })
    }
}

/// The activity-log line of one inner call ([`InnerCalls::call`]): written by
/// [`Self::ended`], or on drop as `cancelled` — the program stopped waiting for the call
/// (its deadline, its client gone), which is a call the owner should see too.
struct InnerEntry {
    hub: Arc<Hub>,
    began: Instant,
    entry: Option<Entry>,
}

impl InnerEntry {
    fn ended(&mut self, outcome: &str, code: Option<i64>, response_bytes: usize) {
        if let Some(entry) = &mut self.entry {
            entry.outcome = outcome.to_owned();
            entry.code = code;
            entry.response_bytes = response_bytes;
        }
    }
}

impl Drop for InnerEntry {
    fn drop(&mut self) {
        if let Some(mut entry) = self.entry.take() {
            entry.ms = self.began.elapsed().as_secs_f64() * 1000.0;
            self.hub.activity().record(entry);
        }
    }
}
