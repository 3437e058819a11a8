//! `butler keep` (hidden): the keeper every hosted process runs under. Started by the host
//! itself, never by hand; see `butler_process::keeper`.

use std::process::ExitCode;

/// `butler keep` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The host process this keeper answers to.
    #[arg(long)]
    host_pid: u32,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    argv: Vec<String>,
}

/// Runs the keeper.
pub fn run(args: &Args) -> ExitCode {
    butler_process::keeper::run(args.host_pid, &args.argv)
}
