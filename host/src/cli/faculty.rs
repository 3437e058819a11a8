//! `butler faculty call|report|new`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use include_dir::{Dir, include_dir};
use serde_json::{Value, json};

use super::client::Client;

static WIT: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../wit");
const KIT_LIB: &str = include_str!("../../../faculties/kit/src/lib.rs");
const KIT_CARGO: &str = include_str!("../../templates/faculty/kit-Cargo.toml.tmpl");
const CARGO: &str = include_str!("../../templates/faculty/Cargo.toml.tmpl");
const LIB: &str = include_str!("../../templates/faculty/lib.rs.tmpl");
const README: &str = include_str!("../../templates/faculty/README.md.tmpl");

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
    /// Create a new Rust faculty project (the guest kit and WIT included).
    New {
        /// Faculty id: lowercase letters, digits and `-`, starting with a letter.
        name: String,
        /// Where to create it [default: ./NAME]
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
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
            println!("{data:#}");
        }
        Command::Report { id, report, workdir } => {
            let data = Client::connect(workdir)?.get(&format!("/faculties/{id}/reports/{report}"))?;
            println!("{data:#}");
        }
        Command::Upgrade { apply, workdir } => upgrade(workdir, apply)?,
        Command::New { name, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            scaffold(&name, &dir)?;
            println!("created the faculty `{name}` in {}", dir.display());
            println!("build it:  cd {} && cargo build --release --target wasm32-wasip2", dir.display());
            println!(
                "install:   cp target/wasm32-wasip2/release/{}.wasm <instance>/faculties/{name}.wasm",
                name.replace('-', "_")
            );
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
        println!("{id:<10} {what}");
    }
    if apply {
        builtins::apply(&instance, &plan)?;
    } else if plan.iter().any(|(_, a)| matches!(a, Action::Install | Action::Upgrade)) {
        println!("dry run: nothing changed; run with --apply to do it");
    }
    Ok(())
}

fn scaffold(name: &str, dir: &Path) -> anyhow::Result<()> {
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.len() <= 64;
    if !valid {
        bail!("`{name}` is not a valid faculty id: use lowercase letters, digits and `-`, starting with a letter");
    }
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("{} already exists and is not empty", dir.display());
    }
    let type_name: String = name
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect();
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{type}}", &type_name)
            .replace("{{title}}", &type_name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{version}}", butler_host::VERSION)
    };
    let write = |rel: &str, text: &str| -> anyhow::Result<()> {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write("Cargo.toml", &fill(CARGO))?;
    write("src/lib.rs", &fill(LIB))?;
    write("README.md", &fill(README))?;
    write(".gitignore", "/target\n")?;
    write("vendor/kit/Cargo.toml", &fill(KIT_CARGO))?;
    write("vendor/kit/src/lib.rs", KIT_LIB)?;
    for file in all_files(&WIT) {
        let text = file.contents_utf8().context("WIT files are UTF-8")?;
        write(&format!("wit/{}", file.path().display()), text)?;
    }
    Ok(())
}

fn all_files<'a>(dir: &'a Dir<'a>) -> Vec<&'a include_dir::File<'a>> {
    let mut files: Vec<_> = dir.files().collect();
    for sub in dir.dirs() {
        files.extend(all_files(sub));
    }
    files
}
