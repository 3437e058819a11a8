//! The `validity` faculty: path and quote checks that suspend cards whose evidence went away, and restore them when it returns.
//!
//! Its manifest is `manifest.json` beside this crate (the source of `describe()`). Every
//! command takes its arguments as JSON on standard input (the pipeline's `args`).

use butler_faculty_kit::{Args, Failure, Faculty, Outcome, Value, faculty};

struct Validity;

impl Faculty for Validity {
    fn describe() -> Value {
        serde_json::from_str(include_str!("../manifest.json")).unwrap_or_default()
    }

    fn invoke(command: &str, _args: Args, _stdin: Option<String>) -> Outcome {
        Err(Failure::unknown_command(command))
    }
}

faculty!(Validity);
