//! `butler faculty call|report|upgrade|new|wit`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::client::Client;
use super::scaffold::{self, Lang};

/// `butler faculty …`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run a faculty command on the running host: `butler faculty call notes add --args '{"text":"hi"}'`.
    Call {
        /// Faculty id.
        id: String,
        /// Command id.
        command: String,
        /// The arguments, as a JSON object.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        args: String,
        /// Instance directory [default: the one `serve` uses]
        #[arg(long, env = butler_host::instance::WORKDIR_ENV, value_name = "DIR")]
        workdir: Option<PathBuf>,
    },
    /// Render a faculty report from the running host.
    Report {
        /// Faculty id.
        id: String,
        /// Report id.
        report: String,
        /// Instance directory [default: the one `serve` uses]
        #[arg(long, env = butler_host::instance::WORKDIR_ENV, value_name = "DIR")]
        workdir: Option<PathBuf>,
    },
    /// Bring the instance's built-in faculties up to date with this host (dry run unless
    /// --apply); faculties the owner modified are left alone.
    Upgrade {
        /// Carry out the plan.
        #[arg(long)]
        apply: bool,
        /// Instance directory [default: the one `serve` uses]
        #[arg(long, env = butler_host::instance::WORKDIR_ENV, value_name = "DIR")]
        workdir: Option<PathBuf>,
    },
    /// Create a new faculty project that builds as it is (the WIT included; for Rust, the
    /// guest kit too) and print how to build and install it.
    New {
        /// Faculty id: lowercase letters, digits and `-`, starting with a letter.
        name: String,
        /// The language to write it in.
        #[arg(long, value_enum, default_value = "rust")]
        lang: Lang,
        /// Where to create it [default: ./NAME]
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Write the WIT faculties build against (every version this host serves, with the
    /// WASI interfaces they use) into DIR.
    Wit {
        /// Where to write it.
        #[arg(default_value = "wit")]
        dir: PathBuf,
        /// Replace files that differ from this host's.
        #[arg(long)]
        force: bool,
    },
}

/// Runs a `faculty` subcommand.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Call { id, command, args, workdir } => {
            let args: Value = butler_host::json::parse(&args).context("--args must be a JSON object")?;
            if !args.is_object() {
                bail!("--args must be a JSON object, like '{{\"text\": \"hello\"}}'");
            }
            let data = Client::connect(workdir)?
                .post(&format!("/faculties/{id}/commands/{command}"), &json!({"args": args}))?;
            outln!("{data:#}");
        }
        Command::Report { id, report, workdir } => {
            let data = Client::connect(workdir)?.get(&format!("/faculties/{id}/reports/{report}"))?;
            outln!("{data:#}");
        }
        Command::Upgrade { apply, workdir } => upgrade(workdir, apply)?,
        Command::New { name, lang, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            // Where the built component goes: the default instance's faculties folder, when
            // there is one to name.
            let faculties = super::settings::Settings::load()
                .ok()
                .and_then(|settings| super::settings::workdir(None, &settings).ok())
                .and_then(|workdir| butler_host::instance::Instance::open(&workdir).ok())
                .map(|instance| butler_host::instance::builtins::faculties_dir(&instance));
            let steps = scaffold::new_project(&name, lang, &dir, faculties.as_deref())?;
            outln!("created the faculty `{name}` in {}", dir.display());
            for step in steps {
                outln!("{step}");
            }
        }
        Command::Wit { dir, force } => {
            let written = scaffold::write_wit(&dir, force)?;
            outln!("{}: {} files written, the rest already up to date", dir.display(), written.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn upgrade(workdir: Option<PathBuf>, apply: bool) -> anyhow::Result<()> {
    use butler_host::instance::builtins::{self, Action};
    let workdir = super::settings::workdir(workdir, &super::settings::Settings::load()?)?;
    let instance = butler_host::instance::Instance::open(&workdir)?;
    let plan = builtins::plan(&instance)?;
    for (id, action) in &plan {
        let what = match action {
            Action::Install => {
                if apply {
                    "installed"
                } else {
                    "would install (missing)"
                }
            }
            Action::UpToDate => "up to date",
            Action::Upgrade => {
                if apply {
                    "upgraded"
                } else {
                    "would upgrade"
                }
            }
            Action::KeepModified => "modified by you: left alone (delete it and run again to take this host's version)",
        };
        outln!("{id:<10} {what}");
    }
    if apply {
        builtins::apply(&instance, &plan)?;
    } else if plan.iter().any(|(_, a)| matches!(a, Action::Install | Action::Upgrade)) {
        outln!("dry run: nothing changed; run with --apply to do it");
    }
    Ok(())
}
