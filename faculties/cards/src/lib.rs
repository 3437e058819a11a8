//! The `cards` faculty: the owner's approved cards — search and read for
//! agents, the review queue for the owner.
//!
//! Its manifest is `manifest.json` beside this crate (the source of `describe()`). Every
//! command takes its arguments as JSON on standard input (the pipeline's `args`).
//!
//! Files: `/self` is the owner's store (cards, candidates, verdicts — shared with the
//! journal, distill and validity faculties); `/data` is this faculty's own directory, which
//! keeps review tokens (hashed) and idempotency records.
//!
//! - [`consume`] — `search`, `read`;
//! - [`list`] — `list` (the owner's card library);
//! - [`inspect`] — `inspect` (one card of the library, with its checks, evidence and history);
//! - [`edit`] — `edit`, `archive` (the owner's own changes, approved as they are written);
//! - [`review`] — `review-list`, `review-prepare`, `review-approve`, `review-reject`;
//! - [`reports`] — `queue`, `library`;
//! - [`tokens`], [`idempotency`] — what the review keeps under `/data`;
//! - [`pipeline`] — calls into validity and the context builder.

pub mod consume;
pub mod edit;
pub mod idempotency;
pub mod inspect;
pub mod list;
pub mod pipeline;
pub mod reports;
pub mod review;
pub mod tokens;

use butler_faculty_kit::{Faculty, Failure, Outcome, Value, faculty};
use butler_store::args::parse;

struct Cards;

impl Faculty for Cards {
    fn describe() -> Value {
        serde_json::from_str(include_str!("../manifest.json")).unwrap_or_default()
    }

    fn invoke(command: &str, input: Value) -> Outcome {
        match command {
            "search" => consume::search(parse(input)?),
            "read" => consume::read(&parse(input)?),
            "list" => list::list(&parse(input)?),
            "inspect" => inspect::inspect(&parse(input)?),
            "edit" => edit::edit(&parse(input)?),
            "archive" => edit::archive(&parse(input)?),
            "review-list" => review::list(&parse(input)?),
            "review-prepare" => review::prepare(&parse(input)?),
            "review-approve" => review::approve(&parse(input)?),
            "review-reject" => review::reject(&parse(input)?),
            other => Err(Failure::unknown_command(other)),
        }
    }

    fn report(id: &str) -> Outcome {
        match id {
            "queue" => reports::queue(),
            "library" => reports::library(),
            other => Err(Failure::unknown_report(other)),
        }
    }
}

faculty!(Cards);
