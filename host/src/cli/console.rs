//! `butler console`: a new one-time login link for the web console of the running host,
//! printed and, with `--open`, opened in the default browser.

use std::process::ExitCode;

use anyhow::Context;

use super::client::Client;
use super::pipeline::Target;

/// `butler console` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: Target,
    /// Open the link in the default browser (`xdg-open`).
    #[arg(long)]
    open: bool,
}

/// Prints (and opens) a login link.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let data = Client::connect(args.target.workdir)?.post("/console/links", &serde_json::json!({}))?;
    let url = data["url"].as_str().context("the host answered without a link")?;
    outln!("{url}");
    eprintln!("(works once, within {} minutes)", data["expiresInSec"].as_u64().unwrap_or(900) / 60);
    if args.open {
        let opened = std::process::Command::new("xdg-open").arg(url).status();
        if !opened.is_ok_and(|s| s.success()) {
            eprintln!("butler: could not open a browser; open the link above yourself");
        }
    }
    Ok(ExitCode::SUCCESS)
}
