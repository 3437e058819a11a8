//! `butler observe [--source S] [--type T] [--tag X]… [--ref R] TEXT`: one observation for
//! the journal, sent to `POST /observe` of the running host over its local socket with the
//! owner's credential — the host validates it exactly as it validates any caller's, and
//! its refusal is printed as it gave it. `TEXT` `-` reads the text from standard input.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Map, Value, json};

use super::Target;
use super::client::{Client, json_answer};

/// The source an observation from the terminal names when `--source` is not given.
pub const DEFAULT_SOURCE: &str = "cli";

/// `butler observe` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What happened (1 to 2000 characters); `-` reads it from standard input.
    text: String,
    /// Who reports it: 1 to 64 of `a-z`, `0-9` and `-`.
    #[arg(long, default_value = DEFAULT_SOURCE, value_name = "S")]
    source: String,
    /// `note` (the journal's default), `decision`, `fact`, `milestone`, `error` or `session`.
    #[arg(long = "type", value_name = "T")]
    kind: Option<String>,
    /// A tag (repeat for more; at most 32).
    #[arg(long = "tag", value_name = "X")]
    tags: Vec<String>,
    /// Where it came from (at most 500 characters): a path, a URL, `git://…#sha`.
    #[arg(long = "ref", value_name = "R")]
    reference: Option<String>,
    #[command(flatten)]
    target: Target,
}

/// Sends the observation; prints `queued` once the host took it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let text = if args.text == "-" {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes).context("cannot read the text from standard input")?;
        // Whatever a pipe brings: a torn UTF-8 sequence becomes U+FFFD, the line ends of a
        // here-document or `echo` are not part of the text.
        String::from_utf8_lossy(&bytes).trim_end_matches(['\n', '\r']).to_owned()
    } else {
        args.text
    };
    let body = observation(args.source, args.kind, args.tags, text, args.reference);
    let client = Client::connect(args.target.workdir)?;
    let (status, answer) = client.post_answer("/observe", &body)?;
    json_answer(status, answer)?;
    outln!("queued");
    Ok(ExitCode::SUCCESS)
}

/// The body of `POST /observe`: only the fields given (the host fills in the rest).
fn observation(
    source: String,
    kind: Option<String>,
    tags: Vec<String>,
    text: String,
    reference: Option<String>,
) -> Value {
    let mut body = Map::new();
    body.insert("source".to_owned(), json!(source));
    if let Some(kind) = kind {
        body.insert("type".to_owned(), json!(kind));
    }
    if !tags.is_empty() {
        body.insert("tags".to_owned(), json!(tags));
    }
    body.insert("text".to_owned(), json!(text));
    if let Some(reference) = reference {
        body.insert("ref".to_owned(), json!(reference));
    }
    Value::Object(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_given_fields_are_sent() {
        let bare = observation("cli".into(), None, vec![], "hi".into(), None);
        assert_eq!(bare, json!({"source": "cli", "text": "hi"}));
        let full = observation("git".into(), Some("milestone".into()), vec!["a".into()], "t".into(), Some("r".into()));
        assert_eq!(full, json!({"source": "git", "type": "milestone", "tags": ["a"], "text": "t", "ref": "r"}));
    }
}
