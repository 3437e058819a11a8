//! `butler pipeline`, `butler review`, `butler validity`: the card pipeline from the
//! terminal, through the running host, as the owner (the owner token).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::client::Client;

/// Where the host is: the instance it serves.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// Instance directory [default: the one `serve` uses]
    #[arg(long, global = true, env = butler_host::instance::WORKDIR_ENV, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
}

/// `butler pipeline ACTION [--args JSON]`.
#[derive(Debug, clap::Args)]
pub struct Pipeline {
    /// The action, like `cards.search` or `journal.intake`.
    action: String,
    /// Its arguments, as a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
    #[command(flatten)]
    target: Target,
}

/// `butler review …`.
#[derive(Debug, clap::Args)]
pub struct Review {
    #[command(subcommand)]
    command: ReviewCommand,
    #[command(flatten)]
    target: Target,
}

#[derive(Debug, clap::Subcommand)]
enum ReviewCommand {
    /// The candidates awaiting review (and decided ones).
    List {
        /// Print the full JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a candidate.
    Approve {
        /// Candidate id.
        id: String,
    },
    /// Reject a candidate.
    Reject {
        /// Candidate id.
        id: String,
        /// Why (kept with the candidate).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// `butler validity …`.
#[derive(Debug, clap::Args)]
pub struct Validity {
    #[command(subcommand)]
    command: ValidityCommand,
    #[command(flatten)]
    target: Target,
}

#[derive(Debug, clap::Subcommand)]
enum ValidityCommand {
    /// Re-run every card's checks.
    Refresh,
    /// Set an existing card's checks (an operator command: only here, never over HTTP or MCP).
    SetChecks {
        /// Card id.
        id: String,
        /// The card's current revision.
        #[arg(long)]
        revision: u64,
        /// The checks, as a JSON array: `[{"type":"path","path":"docs/x.md"}]`.
        #[arg(long, value_name = "JSON")]
        checks: String,
    },
}

fn json_arg(text: &str, what: &str) -> anyhow::Result<Value> {
    butler_host::json::parse(text).with_context(|| format!("{what} must be JSON"))
}

/// Runs `butler pipeline`.
pub fn pipeline(command: Pipeline) -> anyhow::Result<ExitCode> {
    let args = json_arg(&command.args, "--args")?;
    if !args.is_object() {
        bail!("--args must be a JSON object, like '{{\"query\": \"tests\"}}'");
    }
    let data =
        Client::connect(command.target.workdir)?.post("/pipeline", &json!({"action": command.action, "args": args}))?;
    println!("{data:#}");
    Ok(ExitCode::SUCCESS)
}

/// Runs `butler review`.
pub fn review(command: Review) -> anyhow::Result<ExitCode> {
    let client = Client::connect(command.target.workdir)?;
    let action = |action: &str, args: Value| client.post("/pipeline", &json!({"action": action, "args": args}));
    match command.command {
        ReviewCommand::List { json } => {
            let data = action("review.list", json!({}))?;
            if json {
                println!("{data:#}");
            } else {
                print!("{}", render_list(&data));
            }
        }
        ReviewCommand::Approve { id } => {
            let prepared = action("review.prepare", json!({"id": id}))?;
            let result = action("review.approve", decision(&prepared, &id)?)?;
            println!(
                "approved {id}: card {} is at revision {}",
                result["cardId"].as_str().unwrap_or("?"),
                result["revision"].as_u64().unwrap_or(0)
            );
        }
        ReviewCommand::Reject { id, reason } => {
            let prepared = action("review.prepare", json!({"id": id}))?;
            let mut args = decision(&prepared, &id)?;
            if let (Some(reason), Some(map)) = (reason, args.as_object_mut()) {
                map.insert("reason".into(), json!(reason));
            }
            action("review.reject", args)?;
            println!("rejected {id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The approve/reject arguments for a prepared candidate, with a fresh idempotency key.
fn decision(prepared: &Value, id: &str) -> anyhow::Result<Value> {
    let field =
        |name: &str| prepared.get(name).cloned().with_context(|| format!("review.prepare did not return `{name}`"));
    let key = format!(
        "cli-{id}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
    );
    Ok(json!({
        "id": id,
        "revision": field("revision")?,
        "contentHash": field("contentHash")?,
        "token": field("token")?,
        "idempotencyKey": key,
    }))
}

fn render_list(data: &Value) -> String {
    let empty = Vec::new();
    let candidates = data["candidates"].as_array().unwrap_or(&empty);
    if candidates.is_empty() {
        return "no candidates\n".to_owned();
    }
    let mut out = String::new();
    for c in candidates {
        let target = c["target"].as_str().map(|t| format!(" → {t}")).unwrap_or_default();
        out.push_str(&format!(
            "{:<10} {:<8} {}{}  {}\n",
            c["status"].as_str().unwrap_or("?"),
            c["op"].as_str().unwrap_or("?"),
            c["id"].as_str().unwrap_or("?"),
            target,
            c["card"]["title"].as_str().unwrap_or_default()
        ));
    }
    out
}

/// Cards refreshed per request: small enough that the progress bar moves every second or
/// so on a large store, large enough that the per-request cost does not add up.
const REFRESH_CHUNK: usize = 200;

/// `butler validity refresh`: every card with checks, in parts, with a progress bar on a
/// terminal.
fn refresh(client: &Client) -> anyhow::Result<()> {
    use std::io::{IsTerminal, Write};
    let action = |action: &str, args: Value| client.post("/pipeline", &json!({"action": action, "args": args}));
    let listed = action("validity.cards", json!({}))?;
    let ids: Vec<&str> =
        listed["ids"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let bar = std::io::stderr().is_terminal() && ids.len() > REFRESH_CHUNK;
    let (mut checked, mut suspended, mut restored, mut done) = (0, 0, 0, 0);
    for part in ids.chunks(REFRESH_CHUNK) {
        let data = action("validity.refresh", json!({"ids": part}))?;
        if data["unavailable"] == true {
            if bar {
                eprintln!();
            }
            println!("the validity root is unavailable: every verdict is left as it was");
            return Ok(());
        }
        let count = |key: &str| data[key].as_u64().unwrap_or(0);
        (checked, suspended, restored) =
            (checked + count("checked"), suspended + count("suspended"), restored + count("restored"));
        done += part.len();
        if bar {
            let filled = done * 30 / ids.len();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r[{}{}] {done}/{} cards", "#".repeat(filled), "-".repeat(30 - filled), ids.len());
            let _ = err.flush();
        }
    }
    if bar {
        eprintln!();
    }
    println!("{checked} cards checked, {suspended} newly suspended, {restored} restored");
    Ok(())
}

/// Runs `butler validity`.
pub fn validity(command: Validity) -> anyhow::Result<ExitCode> {
    let client = Client::connect(command.target.workdir)?;
    match command.command {
        ValidityCommand::Refresh => refresh(&client)?,
        ValidityCommand::SetChecks { id, revision, checks } => {
            let checks = json_arg(&checks, "--checks")?;
            if !checks.is_array() {
                bail!("--checks must be a JSON array of checks");
            }
            let args = json!({"id": id, "revision": revision, "checks": checks});
            let data =
                client.post("/faculties/validity/commands/set-checks", &json!({"args": {"args": args.to_string()}}))?;
            println!("{data:#}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
