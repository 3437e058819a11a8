//! What the registered faculties declare to the rest of the host, read off their
//! manifests: the pipeline action prefixes each serves (`serves`), the commands each
//! offers to the hub's clients as MCP tools (`commands[].mcp`), which command and
//! report stand behind the host's fixed doors (`takes: "observations"`, `provides:
//! "context"`), and what the change feed watches for a report (`reports[].watch`). The host names no action and no tool of its own: routing, the hub's
//! faculty tools and those doors are built from this.
//!
//! Ties go to the faculty the catalog lists first (scan order), as for every other name
//! in the catalog; a prefix or tool name taken by an earlier faculty is logged and not
//! registered for the later one.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use butler_catalog::manifest::{CommandDoor, CommandTool, ReportDoor, ToolEndpoint};
use butler_catalog::validation::SchemaValidator;
use butler_catalog::{Catalog, Extension, Kind};

/// One command offered as an MCP tool.
pub struct Offer {
    /// Its public name, `<namespace>__<tool>`.
    pub public: String,
    /// The faculty and command it runs.
    pub faculty: String,
    /// The command's id within that faculty.
    pub command: String,
    /// For the model.
    pub description: String,
    /// The hub endpoints that offer it.
    pub endpoints: Vec<ToolEndpoint>,
    /// The tool's input schema, as listed.
    pub schema: Value,
    /// The same, compiled: arguments are checked before the command runs.
    pub validator: SchemaValidator,
    /// Arguments set whatever the caller sent.
    pub set: Map<String, Value>,
    /// Arguments filled when the caller left them out.
    pub default: Map<String, Value>,
    /// What the command takes on the host's behalf, when it is one of the host's doors:
    /// a call goes through the host's own path to it (see `TurnSink` in the binary's `hub_tools` module).
    pub takes: Option<CommandDoor>,
    /// The command takes its arguments as one JSON document (a 0.2.0 command, or one whose
    /// `stdin` argument is named `args`); otherwise each argument is one declared `args`
    /// entry, as text.
    pub json_input: bool,
    /// The argument that shortens a call's deadline, in seconds (`mcp.timeoutArg`).
    pub timeout_arg: Option<String>,
}

/// Everything the registered faculties declare.
#[derive(Default)]
pub struct Declared {
    /// Action prefix → the faculty serving it.
    pub serving: BTreeMap<String, String>,
    /// The offered tools, in catalog order.
    pub offers: Vec<Arc<Offer>>,
    /// The command that takes observations: (faculty, command).
    pub observations: Option<(String, String)>,
    /// The command that takes session turns: (faculty, command).
    pub session_turns: Option<(String, String)>,
    /// The report that provides the compiled context: (faculty, report).
    pub context: Option<(String, String)>,
    /// The report of what awaits the owner's review: (faculty, report).
    pub review_queue: Option<(String, String)>,
    /// Reports that declare what they `watch`: (faculty, report, paths as declared).
    pub watched: Vec<(String, String, Vec<String>)>,
}

impl Declared {
    /// Reads the declarations of every registered faculty of `catalog`.
    #[must_use]
    pub fn from_catalog(catalog: &Catalog) -> Self {
        let mut declared = Self::default();
        let mut names = HashSet::new();
        for ext in catalog.of_kind(Kind::Faculty) {
            let id = ext.id();
            for prefix in &ext.manifest.serves {
                if let Some(holder) = declared.serving.get(prefix) {
                    tracing::warn!(faculty = id, "the action prefix `{prefix}` is served by `{holder}`, listed first");
                } else {
                    declared.serving.insert(prefix.clone(), id.to_owned());
                }
            }
            for command in &ext.manifest.commands {
                if command.takes == Some(CommandDoor::Observations) && declared.observations.is_none() {
                    declared.observations = Some((id.to_owned(), command.id.clone()));
                }
                if command.takes == Some(CommandDoor::SessionTurns) && declared.session_turns.is_none() {
                    declared.session_turns = Some((id.to_owned(), command.id.clone()));
                }
            }
            for report in &ext.manifest.reports {
                if report.provides == Some(ReportDoor::Context) && declared.context.is_none() {
                    declared.context = Some((id.to_owned(), report.id.clone()));
                }
                if report.provides == Some(ReportDoor::ReviewQueue) && declared.review_queue.is_none() {
                    declared.review_queue = Some((id.to_owned(), report.id.clone()));
                }
                if !report.watch.is_empty() {
                    declared.watched.push((id.to_owned(), report.id.clone(), report.watch.clone()));
                }
            }
            for command in &ext.manifest.commands {
                let Some(tool) = &command.mcp else { continue };
                match offer(ext, &command.id, command.description.as_deref(), tool) {
                    Ok(offer) if names.insert(offer.public.clone()) => declared.offers.push(Arc::new(offer)),
                    Ok(offer) => tracing::warn!(faculty = id, "the tool name `{}` is already taken", offer.public),
                    Err(reason) => {
                        tracing::warn!(faculty = id, command = command.id, "not offered as a tool: {reason}")
                    }
                }
            }
        }
        declared
    }

    /// The tool called `public` on `endpoint`.
    #[must_use]
    pub fn offer(&self, endpoint: ToolEndpoint, public: &str) -> Option<&Arc<Offer>> {
        self.offers.iter().find(|o| o.public == public && o.endpoints.contains(&endpoint))
    }
}

/// Why a command's `mcp` block is not offered as a tool (logged, never shown to callers).
#[derive(Debug, thiserror::Error)]
enum NotOffered {
    #[error("no such command")]
    NoSuchCommand,
    #[error(transparent)]
    Name(#[from] butler_catalog::names::NameError),
    #[error(transparent)]
    Schema(#[from] butler_catalog::validation::DeclaredSchemaError),
}

fn offer(ext: &Extension, command: &str, description: Option<&str>, tool: &CommandTool) -> Result<Offer, NotOffered> {
    let id = ext.id();
    let declared = ext.manifest.commands.iter().find(|c| c.id == command).ok_or(NotOffered::NoSuchCommand)?;
    let public = butler_catalog::names::public(&tool.effective_namespace(id), &tool.tool)?;
    let json_input = declared.args.is_empty() || declared.args.iter().any(|a| a.stdin && a.name == "args");
    let schema = match tool.input.as_ref().or(declared.input.as_ref()) {
        Some(schema) => schema.clone(),
        None if json_input => json!({"type": "object"}),
        None => schema_of_args(&declared.args),
    };
    let validator = SchemaValidator::from_declared(&schema)?;
    Ok(Offer {
        public,
        faculty: id.to_owned(),
        command: command.to_owned(),
        description: tool.description.clone().or_else(|| description.map(str::to_owned)).unwrap_or_default(),
        endpoints: tool.endpoints.clone(),
        takes: declared.takes,
        schema,
        validator,
        set: tool.set.clone(),
        default: tool.default.clone(),
        json_input,
        timeout_arg: tool.timeout_arg.clone(),
    })
}

/// The input schema of a command's declared arguments: each a string. Their patterns are
/// the host's to check (when the command runs), not the client's: they are in the
/// `regex` crate's syntax, which a client's JSON Schema validator need not speak.
fn schema_of_args(args: &[butler_catalog::manifest::CommandArg]) -> Value {
    let properties: Map<String, Value> = args.iter().map(|a| (a.name.clone(), json!({"type": "string"}))).collect();
    let required: Vec<&str> = args.iter().filter(|a| a.required).map(|a| a.name.as_str()).collect();
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}
