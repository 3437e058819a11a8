//! `cards.list`: every card by kind, for the owner's card library — built from the card
//! index (no bodies, no evidence), with each card's approval status and, when its verdict
//! holds it, why (which check failed, or the conflict).
//!
//! Unlike `cards.search` it needs no query. Like it, the cards on the returned page that
//! have checks (or a verdict) are refreshed first, so a reason shown is current.

use butler_faculty_kit::{Failure, Outcome, Value, clip, json};
use butler_store::card::{Kind, Status};
use butler_store::index::{Entry, Index, Mark};
use butler_store::verdict::Verdict;
use serde::Deserialize;

use crate::consume::limit;
use crate::pipeline;

/// `cards.list` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListArgs {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    include_inactive: bool,
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    offset: Option<u64>,
}

fn kind_of(name: &str) -> Result<Kind, Failure> {
    match name {
        "rule" => Ok(Kind::Rule),
        "knowledge" => Ok(Kind::Knowledge),
        "profile" => Ok(Kind::Profile),
        other => {
            Err(Failure::invalid_args(format!("kind must be rule, knowledge or profile, not `{}`", clip(other, 80))))
        }
    }
}

/// `cards.list`: `{cards: [{id, kind, title, summary, status, suspended?: {reasons}, revision}],
/// total}`, in id order; `total` counts every card the filter selects (before `offset` and
/// `limit`).
///
/// # Errors
/// `invalid_args`; store errors.
pub fn list(args: &ListArgs) -> Outcome {
    let kind = args.kind.as_deref().map(kind_of).transpose()?;
    let limit = limit(args.limit)?;
    let offset =
        usize::try_from(args.offset.unwrap_or(0)).map_err(|_| Failure::invalid_args("offset is out of range"))?;
    let index = Index::current()?;
    let held = |e: &Entry| e.verdict.as_ref().is_some_and(Mark::holds);
    let selected: Vec<&Entry> = index
        .entries()
        .iter()
        .filter(|e| kind.is_none_or(|k| e.kind == k))
        .filter(|e| args.include_inactive || (e.status == Status::Active && !held(e)))
        .collect();
    let total = selected.len();
    let page: Vec<&Entry> = selected.into_iter().skip(offset).take(limit).collect();
    let stale: Vec<&str> = page
        .iter()
        .filter(|e| e.status == Status::Active && (index.has_checks(e) || e.verdict.is_some()))
        .map(|e| e.id.as_str())
        .collect();
    let moved = !stale.is_empty() && pipeline::refresh_validity(&stale);
    let mut cards = Vec::with_capacity(page.len());
    for entry in page {
        // A refresh that moved cards: their verdicts are read again (the index was read
        // before it). A held card's reasons come from its verdict file.
        let verdict = if (moved && stale.contains(&entry.id.as_str())) || held(entry) {
            Verdict::load(&entry.id)?.filter(|v| Mark::of(v, entry.revision, &entry.content_hash).holds())
        } else {
            None
        };
        if verdict.is_some() && !args.include_inactive {
            continue;
        }
        cards.push(item(&index, entry, verdict.as_ref()));
    }
    Ok(json!({ "cards": cards, "total": total }))
}

/// What the library shows of one card.
fn item(index: &Index, entry: &Entry, held: Option<&Verdict>) -> Value {
    let display = index.display(entry);
    let field = |name: &str| display.get(name).cloned().unwrap_or_else(|| json!(""));
    let mut item = json!({
        "id": entry.id,
        "kind": entry.kind,
        "title": field("title"),
        "summary": field("summary"),
        "status": entry.status,
        "revision": entry.revision,
    });
    if let (Some(fields), Some(verdict)) = (item.as_object_mut(), held) {
        fields.insert("suspended".to_owned(), held_because(verdict));
    }
    item
}

/// `{reasons}` of a held card: each failed check, and the conflict holding it.
pub(crate) fn held_because(verdict: &Verdict) -> Value {
    let mut reasons = verdict.reasons.clone();
    if let Some(conflict) = &verdict.conflict {
        reasons.push(format!("conflict with candidate {}: {}", conflict.candidate, conflict.reason));
    }
    json!({ "reasons": reasons })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        let parse = |text: &str| butler_store::args::parse_text::<ListArgs>(text);
        assert!(parse("{}").is_ok());
        assert!(parse(r#"{"kind":"rule","includeInactive":true,"limit":5,"offset":10}"#).is_ok());
        assert_eq!(parse(r#"{"query":"x"}"#).map(|_| ()).map_err(|f| f.code), Err("invalid_args".into()));
        assert!(kind_of("rule").is_ok() && kind_of("profile").is_ok());
        assert_eq!(kind_of("<b>").map_err(|f| f.code), Err("invalid_args".into()));
    }
}
