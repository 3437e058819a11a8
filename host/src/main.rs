//! `butler`: the command-line entry point. Parses arguments and hands over to `cli`.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
