//! One agent session while it runs: its secret, what its MCP endpoint (`/mcp/s/<id>`)
//! offers, and its submit tool — the one way the agent hands its result back, checked
//! against the declared result schema before it is taken.

use std::sync::{Arc, Mutex};

use butler_catalog::lock;
use butler_catalog::result_schema;
use butler_mcp::View;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::instance::owner::same_secret;

/// The tool an agent session submits its result with.
pub const SUBMIT_TOOL: &str = "butler_delegation_submit";

/// The most violations one refused submission lists.
const MAX_VIOLATIONS: usize = 20;

/// An agent session, from its start until it ends.
pub struct AgentSession {
    /// Its id (the endpoint is `/mcp/s/<id>`).
    pub id: String,
    token: String,
    /// What its endpoint offers of the hub.
    pub view: View,
    /// The schema its submission must hold to (`None`: the session has no submit tool).
    result: Option<Value>,
    submitted: Mutex<Option<oneshot::Sender<Value>>>,
}

impl AgentSession {
    /// A session with its secret `token`, offering `view`; the receiver gets its accepted
    /// submission.
    #[must_use]
    pub fn new(id: String, token: String, view: View, result: Option<Value>) -> (Arc<Self>, oneshot::Receiver<Value>) {
        let (sender, receiver) = oneshot::channel();
        (Arc::new(Self { id, token, view, result, submitted: Mutex::new(Some(sender)) }), receiver)
    }

    /// Whether `given` is this session's token (compared in constant time).
    #[must_use]
    pub fn accepts(&self, given: &str) -> bool {
        same_secret(given, &self.token)
    }

    /// Whether `name` is the session's own tool (answered by [`AgentSession::call`], not the hub).
    #[must_use]
    pub fn owns_tool(&self, name: &str) -> bool {
        self.result.is_some() && name == SUBMIT_TOOL
    }

    /// The session's own tools, as `tools/list` shows them.
    #[must_use]
    pub fn tools(&self) -> Vec<Value> {
        let Some(result) = &self.result else { return Vec::new() };
        vec![json!({
            "name": SUBMIT_TOOL,
            "description": "Submit your result. This ends your task: call it once, when you are done. The arguments are the result itself and must hold to this tool's input schema; a submission that does not is refused with what is wrong, and you may correct it and call again.",
            "inputSchema": input_schema(result),
        })]
    }

    /// `tools/call` of the submit tool with `arguments`: the result is taken, or refused
    /// with every way it breaks the schema (an `isError` result the agent can act on).
    pub fn call(&self, arguments: Value) -> Value {
        let Some(schema) = &self.result else { return error(format!("no tool `{SUBMIT_TOOL}` in this session")) };
        let submitted = unwrapped(schema, arguments);
        let violations = result_schema::violations(schema, &submitted, MAX_VIOLATIONS);
        if !violations.is_empty() {
            return error(format!(
                "the result was not accepted; correct it and submit again:\n- {}",
                violations.join("\n- ")
            ));
        }
        let sender = lock(&self.submitted).take();
        match sender.map(|sender| sender.send(submitted)) {
            Some(Ok(())) => {
                json!({"content": [{"type": "text", "text": "Result accepted. Your task is done; you may exit."}]})
            }
            _ => error("a result was already submitted in this session".to_owned()),
        }
    }
}

/// What the submit tool takes: the result schema itself when the result is an object, else
/// an object with the result as its `result` property (a tool's input is always an object).
fn input_schema(result: &Value) -> Value {
    if is_object_schema(result) {
        let mut schema = result.clone();
        schema["type"] = json!("object");
        schema
    } else {
        json!({"type": "object", "required": ["result"], "properties": {"result": result}})
    }
}

fn is_object_schema(schema: &Value) -> bool {
    schema.get("type") == Some(&json!("object"))
}

/// The result in a submission's arguments (see [`input_schema`]).
fn unwrapped(schema: &Value, arguments: Value) -> Value {
    if is_object_schema(schema) {
        return if arguments.is_null() { json!({}) } else { arguments };
    }
    match arguments {
        Value::Object(mut fields) => fields.remove("result").unwrap_or(Value::Null),
        other => other,
    }
}

fn error(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_submission_is_taken_once() {
        let schema = json!({"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}});
        let (session, mut taken) = AgentSession::new("s".into(), "t".repeat(64), View::Main, Some(schema));
        let refused = session.call(json!({"ok": "yes"}));
        assert_eq!(refused["isError"], true);
        assert!(refused.to_string().contains("/ok: must be of type boolean, not string"), "{refused}");
        assert!(taken.try_recv().is_err(), "nothing taken yet");
        assert!(session.call(json!({"ok": true}))["isError"].is_null());
        assert_eq!(taken.try_recv().ok(), Some(json!({"ok": true})));
        assert_eq!(session.call(json!({"ok": true}))["isError"], true, "only once");
        assert!(session.accepts(&"t".repeat(64)) && !session.accepts("t"));
    }

    #[test]
    fn a_result_that_is_not_an_object_is_submitted_as_result() {
        let schema = json!({"type": "string", "enum": ["a", "b"]});
        let (session, mut taken) = AgentSession::new("s".into(), "t".into(), View::Main, Some(schema));
        assert_eq!(session.tools()[0]["inputSchema"]["required"], json!(["result"]));
        assert_eq!(session.call(json!({"result": "c"}))["isError"], true);
        assert!(session.call(json!({"result": "a"}))["isError"].is_null());
        assert_eq!(taken.try_recv().ok(), Some(json!("a")));
    }
}
