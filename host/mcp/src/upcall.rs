//! What a provider sends back during one call, on its way to the client that made the call:
//! progress, and the provider's own requests to the client (`sampling/createMessage`,
//! `elicitation/create`, `roots/list`) with the way their answers go back to it.
//!
//! The hub gives each call that can take them a bounded [`channel`]; the provider's reader
//! never waits on it (a full channel drops progress and refuses a request), so a client that
//! reads slowly slows nobody but itself.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::RpcError;

/// How many upcalls of one call may wait for its client; beyond, progress is dropped and
/// requests are refused.
pub const QUEUE: usize = 64;

/// The client capability a provider's request needs, by method: `None` for a method no
/// client is asked for.
#[must_use]
pub fn capability_of(method: &str) -> Option<&'static str> {
    match method {
        crate::methods::SAMPLING_CREATE_MESSAGE => Some("sampling"),
        crate::methods::ELICITATION_CREATE => Some("elicitation"),
        crate::methods::ROOTS_LIST => Some("roots"),
        _ => None,
    }
}

/// The names of the client capabilities the hub can route to a client: the keys of
/// [`routed_capabilities`].
const ROUTED: [&str; 3] = ["sampling", "elicitation", "roots"];

/// The client capabilities the hub declares to providers: exactly what it can route to a
/// client (each checked again against the calling client's own).
#[must_use]
pub fn routed_capabilities() -> Value {
    json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}})
}

/// The client a request is forwarded for, as a provider of 2026-07-28 hears of it in each
/// request's envelope, and how that provider's multi-round-trip requests are settled.
#[derive(Debug, Clone, PartialEq)]
pub struct Asker<'a> {
    /// The capabilities the client declared (the hub's own for [`Asker::hub`]).
    declared: Cow<'a, Value>,
    /// The least severe log level the client wants (`None`: the provider sends no log
    /// messages).
    pub log_level: Option<&'a str>,
    /// Whether the client speaks 2026-07-28 itself (stateless, no session): then a provider's
    /// `InputRequiredResult` goes to it as it is, and its retry back; otherwise the hub
    /// asks it each input request as the provider's own request (see [`Upcall::Request`])
    /// and retries the call with the answers.
    pub stateless_2026: bool,
}

impl Asker<'static> {
    /// The hub itself (its own lists): every capability it routes, no log messages.
    #[must_use]
    pub fn hub() -> Self {
        Self { declared: Cow::Owned(routed_capabilities()), log_level: None, stateless_2026: false }
    }
}

impl<'a> Asker<'a> {
    /// A client of 2026-07-28 that declared `capabilities` in its request.
    #[must_use]
    pub fn stateless_2026(capabilities: &'a Value, log_level: Option<&'a str>) -> Self {
        Self { declared: Cow::Borrowed(capabilities), log_level, stateless_2026: true }
    }

    /// A client of the 2025 revisions that declared `capabilities` at `initialize`.
    #[must_use]
    pub fn sessions_2025(capabilities: &'a Value, log_level: Option<&'a str>) -> Self {
        Self { declared: Cow::Borrowed(capabilities), log_level, stateless_2026: false }
    }

    /// The client capabilities a provider is told of: a 2026-07-28 client's as it declared
    /// them; of a 2025 client's, only those the hub can route to it. Built only when a
    /// provider of 2026-07-28 is sent a request (the others never hear of them), not on
    /// every call.
    #[must_use]
    pub fn capabilities(&self) -> Value {
        if self.stateless_2026 {
            return Value::clone(&self.declared);
        }
        let routed = |name: &str| ROUTED.contains(&name);
        let capabilities: serde_json::Map<String, Value> = self
            .declared
            .as_object()
            .map(|declared| {
                declared
                    .iter()
                    .filter(|(name, value)| routed(name) && value.is_object())
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Value::Object(capabilities)
    }
}

/// Why a client cannot take a provider's request; its text goes to the provider.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CannotTake {
    /// The method is none the hub passes to clients.
    #[error("`{0}` is not a request the hub passes to clients")]
    NotPassed(String),
    /// The client did not declare the capability the method needs.
    #[error("the client that made this call did not declare the `{0}` capability")]
    Undeclared(&'static str),
    /// The client takes elicitation, but not in this mode.
    #[error("the client that made this call does not take elicitation in `{0}` mode")]
    ElicitationMode(String),
}

/// Whether a client that declared `capabilities` can take `method` with `params` (for
/// elicitation, its mode: `elicitation: {}` means form only); `Err` says why not.
///
/// # Errors
/// The reason, for the provider.
pub fn client_can_take(capabilities: &Value, method: &str, params: &Value) -> Result<(), CannotTake> {
    let Some(capability) = capability_of(method) else {
        return Err(CannotTake::NotPassed(method.to_owned()));
    };
    let declared = capabilities.get(capability).filter(|c| c.is_object());
    let Some(declared) = declared else {
        return Err(CannotTake::Undeclared(capability));
    };
    if capability == "elicitation" {
        let mode = params.get("mode").and_then(Value::as_str).unwrap_or("form");
        let modes: Vec<&str> = ["form", "url"].into_iter().filter(|m| declared.get(*m).is_some()).collect();
        let allowed = if modes.is_empty() { mode == "form" } else { modes.contains(&mode) };
        if !allowed {
            return Err(CannotTake::ElicitationMode(mode.to_owned()));
        }
    }
    Ok(())
}

/// The logging levels, least severe first (RFC 5424, as MCP names them).
pub const LEVELS: &[&str] = &["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// Whether a message at `level` passes a client's minimum `at_least` (`None`: everything
/// passes). An unknown level passes, so nothing is lost to a misspelling.
#[must_use]
pub fn passes(level: &str, at_least: Option<&str>) -> bool {
    let rank = |name: &str| LEVELS.iter().position(|l| *l == name);
    match (rank(level), at_least.and_then(rank)) {
        (Some(level), Some(minimum)) => level >= minimum,
        _ => true,
    }
}

/// One thing a provider sent back during a call.
#[derive(Debug)]
pub enum Upcall {
    /// `notifications/progress` params, under the hub's own progress token.
    Progress(Value),
    /// `notifications/message` params (a log message), its `logger` prefixed with the
    /// provider's namespace.
    Log(Value),
    /// A request of the provider's for the client.
    Request(Asked),
}

/// A provider's request for the client, and where its answer goes.
#[derive(Debug)]
pub struct Asked {
    /// The MCP method asked ([`crate::methods::SAMPLING_CREATE_MESSAGE`], …).
    pub method: String,
    /// Its params, as the provider sent them.
    pub params: Value,
    reply: oneshot::Sender<Result<Value, Value>>,
}

impl Asked {
    /// A request and the receiver its answer arrives on (`Err`: a JSON-RPC error object).
    #[must_use]
    pub fn new(method: String, params: Value) -> (Self, oneshot::Receiver<Result<Value, Value>>) {
        let (reply, answer) = oneshot::channel();
        (Self { method, params, reply }, answer)
    }

    /// Answers the provider with the client's result, or its JSON-RPC error object.
    pub fn answer(self, reply: Result<Value, Value>) {
        let _ = self.reply.send(reply);
    }

    /// Refuses the request: the provider gets a JSON-RPC error saying why.
    pub fn refuse(self, code: i64, why: impl Into<String>) {
        self.answer(Err(json!({"code": code, "message": why.into()})));
    }

    /// Whether the provider stopped waiting (its call ended or timed out).
    #[must_use]
    pub fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

/// Where a call's upcalls go.
#[derive(Debug, Clone)]
pub struct Upcalls {
    /// Boxed: a channel allocates its slots in blocks of 32 at once, and a block of
    /// `Upcall`s (a few KiB, made for every call) took the allocator's slow path.
    sender: mpsc::Sender<Box<Upcall>>,
    parked: Arc<AtomicBool>,
    /// Whether the call's client takes progress (it sent a token, and can be sent
    /// notifications before the answer).
    progress: bool,
}

impl Upcalls {
    /// Whether the call's client takes progress: only then is the provider given a progress
    /// token (a token makes it send notifications nobody would read).
    #[must_use]
    pub fn wants_progress(&self) -> bool {
        self.progress
    }

    /// Sends `upcall` unless the call's queue is full (or its call is gone).
    ///
    /// # Errors
    /// The queue is full, or the call ended.
    pub fn try_send(&self, upcall: Upcall) -> Result<(), mpsc::error::TrySendError<Upcall>> {
        self.sender.try_send(Box::new(upcall)).map_err(|refused| match refused {
            mpsc::error::TrySendError::Full(upcall) => mpsc::error::TrySendError::Full(*upcall),
            mpsc::error::TrySendError::Closed(upcall) => mpsc::error::TrySendError::Closed(*upcall),
        })
    }

    /// Sends `upcall`, waiting for room in the call's queue.
    ///
    /// # Errors
    /// The call ended and nobody reads its upcalls: `upcall` comes back in the error.
    pub async fn send(&self, upcall: Upcall) -> Result<(), mpsc::error::SendError<Upcall>> {
        self.sender.send(Box::new(upcall)).await.map_err(|refused| mpsc::error::SendError(*refused.0))
    }

    /// Whether its call ended.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Whether its call is parked: set aside for its client's retry, which may never come
    /// (a provider's request is given to it only when no call that runs could take it).
    #[must_use]
    pub fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Acquire)
    }
}

/// The receiving end of a call's upcalls.
#[derive(Debug)]
pub struct Inbox {
    receiver: mpsc::Receiver<Box<Upcall>>,
    parked: Arc<AtomicBool>,
}

impl Inbox {
    /// The next upcall, when one comes (`None`: no sender is left).
    pub async fn recv(&mut self) -> Option<Upcall> {
        self.receiver.recv().await.map(|upcall| *upcall)
    }

    /// The next upcall, if one waits.
    ///
    /// # Errors
    /// None waits.
    pub fn try_recv(&mut self) -> Result<Upcall, mpsc::error::TryRecvError> {
        self.receiver.try_recv().map(|upcall| *upcall)
    }

    /// Marks the call parked (set aside for its client's retry) or taken up again.
    pub fn set_parked(&self, parked: bool) {
        self.parked.store(parked, Ordering::Release);
    }
}

/// A call's upcall channel, [`QUEUE`] deep, for a client that takes progress or not.
#[must_use]
pub fn channel(progress: bool) -> (Upcalls, Inbox) {
    let (sender, receiver) = mpsc::channel(QUEUE);
    let parked = Arc::new(AtomicBool::new(false));
    (Upcalls { sender, parked: Arc::clone(&parked), progress }, Inbox { receiver, parked })
}

/// A call's result, to come.
pub type Calling = Pin<Box<dyn Future<Output = Result<crate::Answer, RpcError>> + Send>>;

/// A call in flight, and what its provider sends back meanwhile.
pub struct Call {
    /// Its result, once the provider answers (or the call fails).
    pub calling: Calling,
    /// The requests its provider sends for the client meanwhile (sampling, elicitation,
    /// roots).
    pub upcalls: Inbox,
}

/// What a call gave next.
pub enum Next {
    /// Its result (the call is over).
    Done(Result<crate::Answer, RpcError>),
    /// An upcall (the call goes on).
    Upcall(Upcall),
}

impl Call {
    /// Waits for the next upcall or the result, upcalls first: progress sent just before
    /// the result comes before it.
    pub async fn next(&mut self) -> Next {
        tokio::select! {
            biased;
            Some(upcall) = self.upcalls.recv() => Next::Upcall(upcall),
            result = &mut self.calling => Next::Done(result),
        }
    }
}

/// A call set aside while its client answers the provider's requests on a later request of
/// its own (the multi-round-trip requests of 2026-07-28).
pub struct Parked {
    /// The call, still in flight.
    pub call: Call,
    /// The provider's requests the client was asked, by the key it was asked under.
    pub waiting: BTreeMap<String, Asked>,
    /// The method and the name (tool) of the request that made the call: a retry must repeat
    /// them.
    pub method: String,
    /// See `method`.
    pub name: String,
    /// Keys given so far (each request gets a new one).
    pub keys: u64,
}

impl Parked {
    /// Asks the client `asked` too; the key it goes under.
    pub fn wait_for(&mut self, asked: Asked) -> String {
        self.keys += 1;
        let key = format!("butler-{}", self.keys);
        self.waiting.insert(key.clone(), asked);
        key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reaches_only_a_client_that_declared_its_capability() {
        let none = json!({});
        assert!(client_can_take(&none, "sampling/createMessage", &json!({})).is_err());
        assert!(client_can_take(&json!({"sampling": {}}), "sampling/createMessage", &json!({})).is_ok());
        assert!(client_can_take(&json!({"roots": {"listChanged": true}}), "roots/list", &json!({})).is_ok());
        assert!(client_can_take(&json!({"roots": true}), "roots/list", &json!({})).is_err(), "not an object");
        let form_only = json!({"elicitation": {}});
        assert!(client_can_take(&form_only, "elicitation/create", &json!({"message": "?"})).is_ok());
        assert!(client_can_take(&form_only, "elicitation/create", &json!({"mode": "url"})).is_err());
        let url_only = json!({"elicitation": {"url": {}}});
        assert!(client_can_take(&url_only, "elicitation/create", &json!({"mode": "url"})).is_ok());
        assert!(client_can_take(&url_only, "elicitation/create", &json!({})).is_err());
        assert!(client_can_take(&json!({"sampling": {}}), "tools/call", &json!({})).is_err());
    }

    #[test]
    fn a_2025_client_is_described_by_what_the_hub_can_route_to_it() {
        let declared =
            json!({"sampling": {}, "roots": {"listChanged": true}, "experimental": {"x": {}}, "elicitation": true});
        let asker = Asker::sessions_2025(&declared, Some("info"));
        assert_eq!(asker.capabilities(), json!({"sampling": {}, "roots": {"listChanged": true}}));
        assert!(!asker.stateless_2026);
        assert_eq!(Asker::sessions_2025(&json!(null), None).capabilities(), json!({}));
        // A 2026-07-28 client's are passed on as it declared them.
        assert_eq!(Asker::stateless_2026(&declared, None).capabilities(), declared);
        // Every capability the hub routes is kept, and only those.
        let routed = routed_capabilities();
        assert_eq!(Asker::sessions_2025(&routed, None).capabilities(), routed);
        assert_eq!(Asker::hub().capabilities(), routed);
        let names: Vec<&str> = routed.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
        assert_eq!(names, ROUTED);
    }

    #[test]
    fn log_messages_pass_at_or_above_the_level_asked_for() {
        assert!(passes("info", None));
        assert!(passes("error", Some("warning")) && passes("warning", Some("warning")));
        assert!(!passes("info", Some("warning")) && !passes("debug", Some("info")));
        assert!(passes("loud", Some("error")), "an unknown level is not lost");
    }

    #[tokio::test]
    async fn an_answer_or_a_refusal_reaches_the_provider() {
        let (asked, answer) = Asked::new("roots/list".into(), json!({}));
        asked.answer(Ok(json!({"roots": []})));
        assert_eq!(answer.await.ok(), Some(Ok(json!({"roots": []}))));
        let (asked, answer) = Asked::new("roots/list".into(), json!({}));
        asked.refuse(-32601, "no");
        assert_eq!(answer.await.ok(), Some(Err(json!({"code": -32601, "message": "no"}))));
        let (asked, answer) = Asked::new("roots/list".into(), json!({}));
        drop(answer);
        assert!(asked.abandoned());
    }
}
