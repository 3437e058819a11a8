//! How an endpoint lists its tools ([`Exposure`]), and the search tools the hub answers
//! itself: `butler__find_tools` (offered on every endpoint with providers), and in search
//! mode `butler__describe_tools` and `butler__call_tool`, which then stand in for the whole
//! list. Ranking is [`crate::tool_search`]'s; this module keeps one index per endpoint and
//! client capability set, built again when the routing epoch or the host's tools move, and
//! weighs matches by how often the owner's clients called each tool (the activity log).
//!
//! `butler__call_tool` is unwrapped into the call it carries before anything else reads the
//! request ([`Hub::unwrapped`]): the inner call then goes through every rule of a direct
//! call — the endpoint's choice of tools, the quarantine, timeouts, the activity log (under
//! the inner tool's name), what the provider asks of the client meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value, json};

use crate::capability_sets::CapabilitySet;
use crate::tool_search::Index;
use crate::tool_source::{data_result, error_result};
use crate::upcall::Asker;
use crate::view::{Exposure, ProfileSpec, View};
use crate::{Answer, Hub};

/// Finds tools by what they do.
pub const FIND_TOOLS: &str = "butler__find_tools";
/// Gives tools' full definitions (search mode).
pub const DESCRIBE_TOOLS: &str = "butler__describe_tools";
/// Calls a tool by name (search mode).
pub const CALL_TOOL: &str = "butler__call_tool";
/// The search tools, in the order they are listed.
pub const SEARCH_TOOLS: [&str; 3] = [FIND_TOOLS, DESCRIBE_TOOLS, CALL_TOOL];

/// How many matches `butler__find_tools` returns when not told.
pub const DEFAULT_LIMIT: u64 = 8;
/// The most matches one search returns, and the most names one description takes.
pub const MAX_RESULTS: u64 = 50;
/// How much a tool's past calls can raise its score at most (×1.25 for a tool called ~150
/// times among the entries the log keeps in memory): enough to break near ties between
/// matches, never enough to lift a poor match over a good one.
const PRIOR_CAP: f64 = 1.25;
/// Each call's share of that lift, on a log scale.
const PRIOR_WEIGHT: f64 = 0.05;
/// Endpoints whose index is kept; past it, all are dropped and built again as asked.
const KEPT_INDEXES: usize = 64;

/// One endpoint's tools and their index, for the state of the hub they were built at.
struct Indexed {
    key: Key,
    /// The profile they were built for, as declared then (an edit of the root config may
    /// change it under the same name).
    spec: Option<ProfileSpec>,
    tools: Vec<Value>,
    index: Index,
}

/// What an endpoint's tool list depends on besides the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    /// The routing epoch: providers, their lists, approvals.
    epoch: u64,
    /// The host's tools' change counter.
    host_tools: u64,
    /// What the client can do (providers may list less to less capable clients).
    set: CapabilitySet,
}

/// The indexes kept, by endpoint.
#[derive(Default)]
pub(crate) struct Indexes(Mutex<HashMap<String, Arc<Indexed>>>);

impl Indexes {
    fn get(&self, endpoint: &str, key: Key, spec: Option<&ProfileSpec>) -> Option<Arc<Indexed>> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.get(endpoint).filter(|indexed| indexed.key == key && indexed.spec.as_ref() == spec).cloned()
    }

    fn keep(&self, endpoint: String, indexed: Arc<Indexed>) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= KEPT_INDEXES && !kept.contains_key(&endpoint) {
            kept.clear();
        }
        kept.insert(endpoint, indexed);
    }
}

/// Arguments a search tool cannot take: what is wrong, for the model to read (an `isError`
/// result).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadArguments(String);

/// The definition of search tool `name` as an endpoint of `exposure` lists it.
fn definition(name: &str, exposure: Exposure) -> Value {
    let how_to_call = match exposure {
        Exposure::All => "Call a match by its name.",
        Exposure::Search => "Call a match with butler__call_tool (or by its name, where your client allows).",
    };
    match name {
        FIND_TOOLS => json!({
            "name": FIND_TOOLS,
            "title": "Find tools",
            "description": format!(
                "Search the tools this endpoint can call by what you want done, in plain words (any language). \
                 Returns the best matches, each with its name, description and input schema. {how_to_call}"
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What the tool should do, e.g. \"list open pull requests\"."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": format!("How many matches at most (default {DEFAULT_LIMIT}).")}
                },
                "required": ["query"]
            },
            "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
        }),
        DESCRIBE_TOOLS => json!({
            "name": DESCRIBE_TOOLS,
            "title": "Describe tools",
            "description": "The full definitions (input and output schemas, annotations) of tools named by butler__find_tools.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "names": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_RESULTS, "description": "Tool names."}
                },
                "required": ["names"]
            },
            "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
        }),
        _ => json!({
            "name": CALL_TOOL,
            "title": "Call a tool",
            "description": "Calls a tool found with butler__find_tools, with its arguments; the result is that tool's own.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name."},
                    "arguments": {"type": "object", "description": "Its arguments, as its input schema asks."}
                },
                "required": ["name"]
            }
        }),
    }
}

/// The call a `butler__call_tool` call's `params` carry: the inner tool's name and
/// arguments, with the rest of the outer call's `params` (its `_meta`, a retry's state).
///
/// # Errors
/// What is wrong with the arguments, for the model to read.
fn carried_call(params: &Value) -> Result<Value, BadArguments> {
    let arguments = params.get("arguments").unwrap_or(&Value::Null);
    let name = match arguments.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name,
        _ => return Err(BadArguments(format!("{CALL_TOOL}: `name` (a string) is the tool to call"))),
    };
    if name == CALL_TOOL {
        return Err(BadArguments(format!("{CALL_TOOL}: name the tool to call, not {CALL_TOOL} itself")));
    }
    let inner = arguments.get("arguments").cloned().unwrap_or_else(|| json!({}));
    if !inner.is_object() {
        return Err(BadArguments(format!("{CALL_TOOL}: `arguments` is an object (the tool's arguments)")));
    }
    // The rest (`_meta`, a retry's `requestState` and `inputResponses`) is the call's own.
    let mut call = params.as_object().cloned().unwrap_or_default();
    call.insert("name".to_owned(), Value::String(name.clone()));
    call.insert("arguments".to_owned(), inner);
    Ok(Value::Object(call))
}

/// The multiplier of a tool called `calls` times.
fn prior(calls: u32) -> f64 {
    (1.0 + PRIOR_WEIGHT * f64::from(calls).ln_1p()).min(PRIOR_CAP)
}

impl Hub {
    /// How `view` lists its tools: its profile's `exposure`, the root config's for the main
    /// endpoint; the restricted endpoint lists all (it has no providers).
    #[must_use]
    pub fn exposure(&self, view: &View) -> Exposure {
        match view {
            View::Main if self.search_main.load(std::sync::atomic::Ordering::Relaxed) => Exposure::Search,
            View::Profile(profile) => profile.spec.exposure,
            View::Main | View::Restricted => Exposure::All,
        }
    }

    /// Whether `view` offers the search tool `name` (see [`SEARCH_TOOLS`]).
    #[must_use]
    pub fn offers_search_tool(&self, view: &View, name: &str) -> bool {
        SEARCH_TOOLS.contains(&name)
            && view.offers_search_tool(name)
            && (name == FIND_TOOLS || self.exposure(view) == Exposure::Search)
    }

    /// The search tools `view` lists, as it lists them.
    pub(crate) fn search_tools(&self, view: &View) -> Vec<Value> {
        let exposure = self.exposure(view);
        SEARCH_TOOLS
            .into_iter()
            .filter(|name| self.offers_search_tool(view, name))
            .map(|name| definition(name, exposure))
            .collect()
    }

    /// A `tools/call`'s `params` as the hub answers them: a well-formed `butler__call_tool`
    /// call where `view` offers it becomes the call it carries (see the module's doc); any
    /// other is returned as it is.
    #[must_use]
    pub fn unwrapped(&self, view: &View, params: Value) -> Value {
        let wraps = params.get("name").and_then(Value::as_str) == Some(CALL_TOOL);
        if !wraps || !self.offers_search_tool(view, CALL_TOOL) {
            return params;
        }
        carried_call(&params).unwrap_or(params)
    }

    /// Answers search tool `name` (one `view` offers) for `asker`: a `tools/call` result;
    /// arguments the tool cannot take are an `isError` result saying why.
    pub(crate) async fn call_search_tool(&self, view: &View, name: &str, params: &Value, asker: &Asker<'_>) -> Answer {
        let arguments = params.get("arguments").unwrap_or(&Value::Null);
        let result = match name {
            FIND_TOOLS => self.find_tools(view, asker, arguments).await,
            DESCRIBE_TOOLS => self.describe_tools(view, asker, arguments).await,
            // A well-formed call was unwrapped before it got here: this one is not, and is
            // never answered as if it had been made.
            _ => Err(carried_call(params).err().unwrap_or_else(|| {
                BadArguments(format!("{CALL_TOOL}: this call could not be carried; call the tool by its name"))
            })),
        };
        Answer::Read(result.unwrap_or_else(|bad| error_result(bad.0)))
    }

    /// `view`'s tools for `asker`, indexed: kept from the last search while nothing they
    /// depend on moved.
    async fn indexed(&self, view: &View, asker: &Asker<'_>) -> Arc<Indexed> {
        let endpoint = view.endpoint();
        let key = Key {
            epoch: self.registry.epoch(),
            host_tools: *self.tools.changes().borrow(),
            set: CapabilitySet::of(&asker.capabilities()),
        };
        let spec = match view {
            View::Profile(profile) => Some(&profile.spec),
            View::Main | View::Restricted => None,
        };
        if let Some(indexed) = self.indexes.get(&endpoint, key, spec) {
            return indexed;
        }
        let tools = self.offered_tools(view, asker).await;
        let indexed = Arc::new(Indexed { key, spec: spec.cloned(), index: Index::new(&tools), tools });
        self.indexes.keep(endpoint, Arc::clone(&indexed));
        indexed
    }

    /// `butler__find_tools`.
    async fn find_tools(&self, view: &View, asker: &Asker<'_>, arguments: &Value) -> Result<Value, BadArguments> {
        let query = match arguments.get("query") {
            Some(Value::String(query)) if !query.trim().is_empty() => query,
            _ => return Err(BadArguments(format!("{FIND_TOOLS}: `query` (a string) says what the tool should do"))),
        };
        let limit = match arguments.get("limit") {
            None | Some(Value::Null) => DEFAULT_LIMIT,
            Some(limit) => limit.as_u64().filter(|limit| (1..=MAX_RESULTS).contains(limit)).ok_or_else(|| {
                BadArguments(format!("{FIND_TOOLS}: `limit` is a whole number from 1 to {MAX_RESULTS}"))
            })?,
        };
        let indexed = self.indexed(view, asker).await;
        let uses = self.activity.tool_uses();
        let named = |i: usize| indexed.tools[i].get("name").and_then(Value::as_str).unwrap_or_default();
        let found = indexed.index.search(query, usize::try_from(limit).unwrap_or(usize::MAX), |i| {
            prior(uses.get(named(i)).copied().unwrap_or(0))
        });
        let tools: Vec<Value> = found
            .iter()
            .map(|found| {
                let tool = &indexed.tools[found.index];
                let mut brief = Map::new();
                for field in ["name", "title", "description", "inputSchema"] {
                    if let Some(value) = tool.get(field) {
                        brief.insert(field.to_owned(), value.clone());
                    }
                }
                Value::Object(brief)
            })
            .collect();
        Ok(data_result(&json!({"tools": tools, "searched": indexed.tools.len()})))
    }

    /// `butler__describe_tools`.
    async fn describe_tools(&self, view: &View, asker: &Asker<'_>, arguments: &Value) -> Result<Value, BadArguments> {
        let wrong = || {
            BadArguments(format!(
                "{DESCRIBE_TOOLS}: `names` is a list of 1 to {MAX_RESULTS} tool names, each at most {} bytes",
                crate::activity::MAX_NAME
            ))
        };
        let names = arguments.get("names").and_then(Value::as_array).ok_or_else(wrong)?;
        if names.is_empty() || names.len() > usize::try_from(MAX_RESULTS).unwrap_or(usize::MAX) {
            return Err(wrong());
        }
        let names: Vec<&str> = names
            .iter()
            .map(|name| name.as_str().filter(|name| name.len() <= crate::activity::MAX_NAME))
            .collect::<Option<_>>()
            .ok_or_else(wrong)?;
        let indexed = self.indexed(view, asker).await;
        let mut tools = Vec::new();
        let mut unknown = Vec::new();
        let mut seen = std::collections::HashSet::new();
        // Each name once, in the order asked.
        for name in names.into_iter().filter(|name| seen.insert(*name)) {
            match indexed.tools.iter().find(|tool| tool.get("name").and_then(Value::as_str) == Some(name)) {
                Some(tool) => tools.push(tool.clone()),
                None => unknown.push(name),
            }
        }
        let mut described = json!({"tools": tools});
        if !unknown.is_empty() {
            described["unknown"] = json!(unknown);
        }
        Ok(data_result(&described))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_carried_call_keeps_its_arguments_and_meta_and_refuses_what_is_not_a_call() {
        let params = json!({"name": CALL_TOOL, "arguments": {"name": "fs__read", "arguments": {"path": "a"}}, "_meta": {"progressToken": 7}});
        assert_eq!(
            carried_call(&params),
            Ok(json!({"name": "fs__read", "arguments": {"path": "a"}, "_meta": {"progressToken": 7}}))
        );
        let bare = json!({"name": CALL_TOOL, "arguments": {"name": "fs__list"}});
        assert_eq!(
            carried_call(&bare),
            Ok(json!({"name": "fs__list", "arguments": {}})),
            "no arguments: an empty object"
        );
        for (arguments, why) in [
            (json!({}), "`name`"),
            (json!({"name": 3}), "`name`"),
            (json!({"name": CALL_TOOL, "arguments": {}}), "not butler__call_tool itself"),
            (json!({"name": "fs__read", "arguments": [1]}), "`arguments` is an object"),
        ] {
            let refused = carried_call(&json!({"name": CALL_TOOL, "arguments": arguments}));
            assert!(refused.as_ref().is_err_and(|e| e.0.contains(why)), "{arguments}: {refused:?}");
        }
    }

    #[test]
    fn use_lifts_a_score_a_little_and_never_past_the_cap() {
        assert!((prior(0) - 1.0).abs() < f64::EPSILON);
        assert!(prior(1) > 1.0 && prior(1) < 1.05);
        assert!(prior(10) > prior(1));
        assert!((prior(u32::MAX) - PRIOR_CAP).abs() < f64::EPSILON);
    }
}
