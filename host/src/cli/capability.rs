//! `butler import PATH` and `butler capability list|enable|disable|remove`: the Suzu Lives
//! capability packages imported into the running host's instance, as its owner
//! (`POST /imports`, `GET /capabilities`, `POST /capabilities/ID/ACTION`). Imported is not
//! enabled: each is its own step.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use super::Target;
use super::check::problem_line;
use super::client::{Client, json_answer};

/// `butler import PATH [--update]`.
#[derive(Debug, clap::Args)]
pub struct Import {
    /// The package: its `suzu-capability.json`, or its folder
    path: PathBuf,
    /// Replace the package imported earlier under the same id (after the same checks), and
    /// say what differs
    #[arg(long)]
    update: bool,
    /// Print the host's answer as JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    target: Target,
}

/// `butler capability …`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List the imported packages, enabled or not
    List {
        /// Print the host's answer as JSON
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Enable an imported package
    Enable(Step),
    /// Disable a package, keeping its record and its copy
    Disable(Step),
    /// Remove a disabled package: its record and its copy
    Remove(Step),
}

/// A step on one package.
#[derive(Debug, clap::Args)]
pub struct Step {
    /// The package's id
    id: String,
    #[command(flatten)]
    target: Target,
}

/// Runs `butler import`.
pub fn import(args: Import) -> anyhow::Result<ExitCode> {
    let path = std::path::absolute(&args.path).with_context(|| format!("cannot resolve {}", args.path.display()))?;
    let client = Client::connect(args.target.workdir)?;
    let (status, answer) = client.post_answer("/imports", &json!({"path": path, "update": args.update}))?;
    let ok = answer["ok"] == true;
    if args.json {
        outln!("{answer:#}");
    } else if ok {
        out!("{}", render_imported(&answer["data"]));
    } else {
        out!("{}", render_refusal(&path, status, &answer["error"]));
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Runs `butler capability …`.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    let (step, Step { id, target }) = match command {
        Command::List { json, target } => {
            let answer = Client::connect(target.workdir)?.get("/capabilities")?;
            if json {
                outln!("{answer:#}");
            } else {
                out!("{}", render_list(&answer));
            }
            return Ok(ExitCode::SUCCESS);
        }
        Command::Enable(step) => ("enable", step),
        Command::Disable(step) => ("disable", step),
        Command::Remove(step) => ("remove", step),
    };
    let path = format!("/capabilities/{}/{step}", utf8_percent_encode(&id));
    let (status, answer) = Client::connect(target.workdir)?.post_answer(&path, &json!({}))?;
    let record = json_answer(status, answer)?;
    let done = match step {
        "enable" => "enabled",
        "disable" => "disabled (its record and copy are kept)",
        _ => "removed",
    };
    outln!("{} {} — {done}", text(&record, "id"), text(&record, "version"));
    Ok(ExitCode::SUCCESS)
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// An id in a URL path (ids are letters, digits, `.`, `_`, `-`; anything else is escaped
/// so it reaches the host as written and is refused there).
fn utf8_percent_encode(id: &str) -> String {
    percent_encoding::utf8_percent_encode(id, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// `ID VERSION — NAME`, where it came from, its adapters and skill, and whether enabled.
fn describe(record: &Value) -> String {
    let files = record["files"].as_array().map_or(0, Vec::len);
    let bytes: u64 = record["files"].as_array().into_iter().flatten().filter_map(|f| f["bytes"].as_u64()).sum();
    let adapters: Vec<&str> = record["adapters"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let mut out = format!(
        "{} {} — {} ({})\n  from {}\n  adapters: {}",
        text(record, "id"),
        text(record, "version"),
        text(record, "name"),
        if record["enabled"] == true { "enabled" } else { "not enabled" },
        text(record, "source"),
        adapters.join(", "),
    );
    if files > 0 {
        out.push_str(&format!("; skill copied: {files} file(s), {bytes} bytes"));
    }
    out.push('\n');
    out
}

fn render_imported(data: &Value) -> String {
    let record = &data["record"];
    let differences: Vec<&str> =
        data["differences"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let mut out = match text(data, "outcome") {
        "unchanged" => "nothing to update: the source is as imported\n".to_owned(),
        outcome => format!("{outcome} "),
    };
    out.push_str(&describe(record));
    for difference in &differences {
        out.push_str(&format!("  differs: {difference}\n"));
    }
    if record["enabled"] != true {
        out.push_str(&format!("enable it with `butler capability enable {}`\n", text(record, "id")));
    }
    out
}

fn render_refusal(path: &std::path::Path, status: u16, error: &Value) -> String {
    let details = &error["details"];
    let mut out = match text(error, "code") {
        "package_invalid" => format!("{} — rejected, nothing was imported\n", path.display()),
        code => format!("butler: {code}: {} (HTTP {status})\n", text(error, "message")),
    };
    for problem in details["problems"].as_array().into_iter().flatten() {
        out.push_str(&problem_line(problem));
    }
    let differences = details["differences"].as_array().into_iter().flatten().filter_map(Value::as_str);
    for difference in differences {
        out.push_str(&format!("  differs: {difference}\n"));
    }
    if text(error, "code") == "already_imported" && details["differences"].as_array().is_some_and(|d| !d.is_empty()) {
        out.push_str("take these changes with `butler import --update PATH`\n");
    }
    out
}

fn render_list(answer: &Value) -> String {
    let records = answer["capabilities"].as_array().map(Vec::as_slice).unwrap_or_default();
    if records.is_empty() {
        return "no capability package is imported (`butler import PATH` imports one)\n".to_owned();
    }
    records.iter().map(describe).collect()
}
