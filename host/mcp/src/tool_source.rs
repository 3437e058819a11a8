//! Tool sources beside the providers: the [`ToolSource`] trait through which the binary
//! hands the hub tools it runs itself (the faculties' commands offered over MCP, in the
//! reserved `butler` namespace), and the `tools/call` result a failure becomes. The hub knows nothing of what runs such a
//! tool: it lists them, asks whether a name is one, calls it, and reads the compiled
//! context through this trait — so `butler-mcp` builds without the faculty runtime.

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

pub use crate::view::Scope;

/// Tools the host runs itself, offered beside the providers' (the binary implements it
/// over the faculty runtime). Lists are cheap and synchronous; waiting is done once, in
/// [`Self::settle`], before a list or call that needs the tools to be known.
pub trait ToolSource: Send + Sync {
    /// Waits (with a deadline of its own) while the tools are still being learned, so that
    /// a client that lists or calls at the host's start sees the tools they will offer.
    fn settle(&self) -> BoxFuture<'_, ()>;

    /// The `tools/list` entries offered in `scope`, with their public names.
    fn list(&self, scope: Scope) -> Vec<Value>;

    /// Whether `name` is one of the tools offered in `scope`.
    fn has(&self, scope: Scope, name: &str) -> bool;

    /// Runs tool `name` for `caller` (the key its failures are counted under, see
    /// [`View::budget_key`](crate::View::budget_key)): a `tools/call` result; failures are
    /// `isError` results (see [`error_result`]), so the model can read and correct them.
    /// `inner` is the endpoint the call came through, lent to the tool for its own calls of
    /// that endpoint's tools (see [`crate::code_mode`]).
    fn call<'a>(
        &'a self,
        scope: Scope,
        caller: &'a str,
        name: &'a str,
        arguments: Value,
        inner: crate::code_mode::InnerCalls,
    ) -> BoxFuture<'a, Value>;

    /// The owner's compiled context as markdown (or a sentence saying why there is none),
    /// served as the `butler://context` resource and prompt.
    fn context(&self) -> BoxFuture<'_, String>;

    /// Ticks whenever the offered tools change.
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;
}

/// A `tools/call` result that reports a failure.
#[must_use]
pub fn error_result(message: String) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

/// A `tools/call` result carrying `data` both as structured content and, for clients that
/// read only text, as compact JSON text: a model reads every byte of it, and indentation
/// would cost it tokens (a search's answer, a program's result) for nothing.
#[must_use]
pub fn data_result(data: &Value) -> Value {
    json!({
        "content": [{"type": "text", "text": data.to_string()}],
        "structuredContent": data,
    })
}
