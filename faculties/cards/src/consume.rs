//! Consumption: `cards.search` and `cards.read`. Agents see only active,
//! unsuspended cards, and only what a card says — never evidence, hashes, checks, review
//! metadata or paths.

use butler_faculty_kit::{Failure, Kind, Outcome, Value, clip, json};
use butler_store::card::{Card, Status};
use butler_store::index::{Entry, Index, Mark};
use butler_store::verdict;
use serde::Deserialize;

use crate::pipeline;

/// Longest query accepted, in characters.
pub const MAX_QUERY: usize = 200;
/// Results when the caller gives no limit.
pub const DEFAULT_LIMIT: u64 = 20;
/// Most results one search returns.
pub const MAX_LIMIT: u64 = 100;

/// `cards.search` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SearchArgs {
    query: String,
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    include_inactive: bool,
}

/// `cards.read` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReadArgs {
    id: String,
}

/// The lowercase search terms of `query`, after checking its length.
///
/// # Errors
/// `invalid_args` for an empty, blank or oversized query.
pub fn terms(query: &str) -> Result<Vec<String>, Failure> {
    let chars = query.chars().count();
    if !(1..=MAX_QUERY).contains(&chars) {
        return Err(Failure::invalid_args(format!("query must be 1 to {MAX_QUERY} characters")));
    }
    let terms: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    if terms.is_empty() {
        return Err(Failure::invalid_args("query must contain a search term"));
    }
    Ok(terms)
}

/// The result limit, defaulted and bounded.
///
/// # Errors
/// `invalid_args` outside `1..=100`.
pub fn limit(requested: Option<u64>) -> Result<usize, Failure> {
    let limit = requested.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Failure::invalid_args(format!("limit must be 1 to {MAX_LIMIT}")));
    }
    usize::try_from(limit).map_err(|_| Failure::invalid_args("limit is out of range"))
}

/// The searchable text of a card, lowercased, by field: what the card says, never its
/// evidence or metadata.
struct Fields {
    title: String,
    summary: String,
    rest: Vec<String>,
}

impl Fields {
    fn of(card: &Card) -> Self {
        let c = &card.content;
        let mut rest = vec![c.applies_to.to_lowercase(), c.body.to_lowercase()];
        rest.extend(c.tags.iter().map(|t| t.to_lowercase()));
        Self { title: c.title.to_lowercase(), summary: c.summary.to_lowercase(), rest }
    }

    /// Where the card matches `terms`: `None` unless every term occurs in some field;
    /// otherwise its rank — 0 when a term is in the title, 1 when one is in the summary,
    /// 2 otherwise.
    fn rank(&self, terms: &[String]) -> Option<u8> {
        let anywhere =
            |t: &str| self.title.contains(t) || self.summary.contains(t) || self.rest.iter().any(|f| f.contains(t));
        if !terms.iter().all(|t| anywhere(t)) {
            return None;
        }
        if terms.iter().any(|t| self.title.contains(t.as_str())) {
            Some(0)
        } else if terms.iter().any(|t| self.summary.contains(t.as_str())) {
            Some(1)
        } else {
            Some(2)
        }
    }
}

/// The cards matching `terms`, ranked: title matches, then summary matches, then the
/// rest; by id within a rank.
#[must_use]
pub fn ranked(cards: Vec<Card>, terms: &[String]) -> Vec<Card> {
    let mut hits: Vec<(u8, Card)> =
        cards.into_iter().filter_map(|card| Fields::of(&card).rank(terms).map(|rank| (rank, card))).collect();
    hits.sort_by(|(ra, a), (rb, b)| ra.cmp(rb).then_with(|| a.id.cmp(&b.id)));
    hits.into_iter().map(|(_, card)| card).collect()
}

/// The index entries matching `terms`, ranked as [`ranked`] ranks cards.
fn ranked_entries<'a>(index: &'a Index, terms: &[String]) -> Vec<&'a Entry> {
    let finders: Vec<memchr::memmem::Finder<'_>> = terms.iter().map(memchr::memmem::Finder::new).collect();
    let mut hits: Vec<(u8, &Entry)> = index
        .entries()
        .iter()
        .filter_map(|entry| {
            let [title, summary, rest] = index.searchable(entry);
            let is_in = |f: &memchr::memmem::Finder<'_>, field: &str| f.find(field.as_bytes()).is_some();
            let mut rank = 2;
            for finder in &finders {
                if is_in(finder, title) {
                    rank = 0;
                } else if is_in(finder, summary) {
                    rank = rank.min(1);
                } else if !is_in(finder, rest) {
                    return None;
                }
            }
            Some((rank, entry))
        })
        .collect();
    hits.sort_by(|(ra, a), (rb, b)| ra.cmp(rb).then_with(|| a.id.cmp(&b.id)));
    hits.into_iter().map(|(_, entry)| entry).collect()
}

/// `cards.search`, on the card index (a cache of the card files, checked before use).
///
/// # Errors
/// `invalid_args`; store errors.
pub fn search(args: SearchArgs) -> Outcome {
    let terms = terms(&args.query)?;
    let limit = limit(args.limit)?;
    // Only the index lines of cards holding a word that contains a term are read (see
    // `butler_store::tokens`): a term holds no whitespace, so it matches inside one word.
    let index = Index::matching(&terms)?;
    match search_in(&index, &terms, limit, args.include_inactive, true)? {
        Some(cards) => Ok(json!({ "cards": cards })),
        // A card about to be returned was edited behind the index's back: compare every
        // card file and search again.
        None => {
            let index = Index::swept()?;
            let cards = search_in(&index, &terms, limit, args.include_inactive, false)?.unwrap_or_default();
            Ok(json!({ "cards": cards }))
        }
    }
}

/// The search on `index`; `None` when a card it would return (or pass over) changed since
/// the index recorded it (`verify`: compare their files' stamps; an index just swept was
/// built from the files as they are, even where their stamps are too recent to record).
/// The hits it would return are refreshed first; those past the limit are not
/// looked at (a refresh that suspends one of the first may return fewer than `limit`
/// cards, as it may when no more match).
fn search_in(
    index: &Index,
    terms: &[String],
    limit: usize,
    include_inactive: bool,
    verify: bool,
) -> Result<Option<Vec<Value>>, Failure> {
    let shown = |entry: &Entry, suspended: bool| include_inactive || (entry.status == Status::Active && !suspended);
    let hits = ranked_entries(index, terms);
    let mut considered = 0;
    let mut expected = 0;
    for entry in &hits {
        if expected >= limit {
            break;
        }
        if verify && !index.file_holds(entry) {
            return Ok(None);
        }
        considered += 1;
        expected += usize::from(shown(entry, entry.verdict.as_ref().is_some_and(Mark::holds)));
    }
    let hits = &hits[..considered];
    let stale: Vec<&str> = hits
        .iter()
        .filter(|e| e.status == Status::Active && (index.has_checks(e) || e.verdict.is_some()))
        .map(|e| e.id.as_str())
        .collect();
    // A refresh that moved cards in or out: their verdicts are read again (the index was
    // read before it).
    let moved = !stale.is_empty() && pipeline::refresh_validity(&stale);
    let mut cards = Vec::new();
    for entry in hits {
        let suspended = if moved && stale.contains(&entry.id.as_str()) {
            verdict::Verdict::load(&entry.id)?
                .is_some_and(|v| Mark::of(&v, entry.revision, &entry.content_hash).holds())
        } else {
            entry.verdict.as_ref().is_some_and(Mark::holds)
        };
        if !shown(entry, suspended) || cards.len() >= limit {
            continue;
        }
        let mut item = index.display(entry);
        if include_inactive && let Some(fields) = item.as_object_mut() {
            fields.insert("status".to_owned(), json!(entry.status));
            // A held card says why, as in `cards.list`: its verdict file holds the reasons.
            let verdict = if suspended { verdict::Verdict::load(&entry.id)? } else { None };
            if let Some(verdict) = verdict {
                fields.insert("suspended".to_owned(), crate::list::held_because(&verdict));
            }
        }
        cards.push(item);
    }
    Ok(Some(cards))
}

/// `cards.read`.
///
/// # Errors
/// `not_found`, `card_unavailable`; store errors.
pub fn read(args: &ReadArgs) -> Outcome {
    let missing = || Failure::not_found(format!("no card `{}`", clip(&args.id, 80)));
    let card = Card::load(&args.id)?.ok_or_else(missing)?;
    let unavailable =
        || Failure::of_kind(Kind::NotFound, "card_unavailable", format!("card `{}` is archived or suspended", card.id));
    if card.status != Status::Active {
        return Err(unavailable());
    }
    if needs_refresh(&card)? {
        pipeline::refresh_validity(&[card.id.as_str()]);
    }
    if verdict::is_suspended(&card)? {
        return Err(unavailable());
    }
    Ok(json!({ "card": reading(&card) }))
}

/// Whether a card's validity can have changed: it has checks, or a verdict (a conflict, or
/// one left from checks since removed). A card with neither is always valid, and skipping
/// its refresh saves a nested call that takes the store's write lock.
///
/// # Errors
/// Store errors reading the verdict.
pub(crate) fn needs_refresh(card: &Card) -> Result<bool, Failure> {
    Ok(!card.checks.is_empty() || verdict::Verdict::load(&card.id)?.is_some())
}

/// What a consumer reads of a card.
fn reading(card: &Card) -> Value {
    let c = &card.content;
    json!({
        "id": card.id,
        "kind": c.kind,
        "title": c.title,
        "summary": c.summary,
        "body": c.body,
        "appliesTo": c.applies_to,
        "tags": c.tags,
        "revision": card.revision,
        "related": c.related,
    })
}

#[cfg(test)]
mod tests {
    use butler_store::card::{Content, Kind};

    use super::*;

    fn card(id: &str, title: &str, summary: &str, body: &str, tags: &[&str]) -> Card {
        let content = Content {
            kind: Kind::Knowledge,
            title: title.into(),
            summary: summary.into(),
            body: body.into(),
            applies_to: String::new(),
            tags: tags.iter().map(|&t| t.to_owned()).collect(),
            related: vec![],
        };
        Card {
            id: id.into(),
            content_hash: content.hash(),
            content,
            status: Status::Active,
            revision: 1,
            scope: "local".into(),
            checks: vec![],
            evidence: vec!["cargo-evidence".into()],
            created_at: String::new(),
            updated_at: String::new(),
            extra: serde_json::Map::new(),
        }
    }

    fn ids(cards: &[Card]) -> Vec<&str> {
        cards.iter().map(|c| c.id.as_str()).collect()
    }

    #[test]
    fn ranks_title_then_summary_then_rest_by_id() {
        let cards = vec![
            card("d-body", "Other", "nothing", "use Cargo here", &[]),
            card("c-summary", "Other", "about cargo", "text", &[]),
            card("b-title", "Cargo tips", "s", "b", &[]),
            card("a-tag", "Other", "s", "b", &["cargo"]),
            card("e-none", "Other", "s", "b", &[]),
            card("a-title", "CARGO", "s", "b", &[]),
        ];
        let terms = terms("cargo").expect("valid");
        assert_eq!(ids(&ranked(cards, &terms)), ["a-title", "b-title", "c-summary", "a-tag", "d-body"]);
    }

    #[test]
    fn every_term_must_match_somewhere_but_not_in_evidence() {
        let cards = vec![
            card("both", "Run tests", "with cargo", "b", &[]),
            card("one", "Run tests", "s", "b", &[]),
            card("split", "Cargo", "s", "tests are run", &[]),
        ];
        let terms = terms("  TESTS   cargo ").expect("valid");
        assert_eq!(ids(&ranked(cards, &terms)), ["both", "split"]);
        // Evidence ids and metadata are not searched.
        assert!(ranked(vec![card("x", "t", "s", "b", &[])], &["evidence".to_owned()]).is_empty());
    }

    #[test]
    fn query_and_limit_bounds() {
        assert_eq!(terms("").map_err(|f| f.code), Err("invalid_args".into()));
        assert_eq!(terms("   ").map_err(|f| f.code), Err("invalid_args".into()));
        assert!(terms(&"x".repeat(MAX_QUERY)).is_ok());
        assert!(terms(&"x".repeat(MAX_QUERY + 1)).is_err());
        assert_eq!(limit(None).ok(), Some(20));
        assert_eq!(limit(Some(100)).ok(), Some(100));
        assert!(limit(Some(0)).is_err());
        assert!(limit(Some(101)).is_err());
    }

    #[test]
    fn unknown_fields_are_refused() {
        let parsed = butler_store::args::parse_text::<SearchArgs>(r#"{"query":"x","evil":1}"#);
        assert_eq!(parsed.map(|_| ()).map_err(|f| f.code), Err("invalid_args".into()));
        let parsed = butler_store::args::parse_text::<SearchArgs>(r#"{"query":"x","includeInactive":true}"#);
        assert!(parsed.is_ok_and(|a| a.include_inactive));
    }
}
