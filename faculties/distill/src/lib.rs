//! The `distill` faculty: turns observations into candidate cards: batches with leases, candidates, completion.
//!
//! Its manifest is `manifest.json` beside this crate (the source of `describe()`). Every
//! command takes its arguments as JSON on standard input (the pipeline's `args`).

use butler_faculty_kit::{Args, Failure, Faculty, Outcome, Value, faculty};

struct Distill;

impl Faculty for Distill {
    fn describe() -> Value {
        serde_json::from_str(include_str!("../manifest.json")).unwrap_or_default()
    }

    fn invoke(command: &str, _args: Args, _stdin: Option<String>) -> Outcome {
        Err(Failure::unknown_command(command))
    }
}

faculty!(Distill);
