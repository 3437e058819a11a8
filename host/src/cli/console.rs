//! `butler console`: a new one-time login link for the web console of the running host,
//! printed and, with `--open`, opened in the default browser; `--logout-all` ends every
//! console session instead.

use std::process::ExitCode;

use anyhow::Context;

use super::Target;
use super::client::Client;

/// `butler console` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: Target,
    /// Open the link in the default browser (`xdg-open`).
    #[arg(long, conflicts_with = "logout_all")]
    open: bool,
    /// End every console session (each browser must log in again) instead of making a link.
    #[arg(long)]
    logout_all: bool,
}

/// Prints (and opens) a login link, or ends every session.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = Client::connect(args.target.workdir)?;
    if args.logout_all {
        let data = client.post("/console/logout-all", &serde_json::json!({}))?;
        let ended = data["ended"].as_u64().context("the host answered without a count")?;
        outln!("ended {ended} console session{}", if ended == 1 { "" } else { "s" });
        return Ok(ExitCode::SUCCESS);
    }
    let data = client.post("/console/links", &serde_json::json!({}))?;
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
