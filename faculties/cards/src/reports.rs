//! Reports: the review queue (`status` shape) and the card library (`list` shape).

use butler_faculty_kit::{Outcome, json};
use butler_store::candidate::{Candidate, Status as CandidateStatus};
use butler_store::card::{Card, Status as CardStatus};

/// Most cards the library report lists.
pub const LIBRARY_SIZE: usize = 50;

/// `queue`: how many candidates await the owner, one item each.
///
/// # Errors
/// Store errors.
pub fn queue() -> Outcome {
    let waiting: Vec<Candidate> = Candidate::list()?
        .into_iter()
        .filter(|c| matches!(c.status, CandidateStatus::Pending | CandidateStatus::Applying))
        .collect();
    let items: Vec<_> = waiting.iter().map(|c| json!({ "title": c.card.title })).collect();
    Ok(json!({
        "status": if waiting.is_empty() { "ok" } else { "attention" },
        "summary": summary(waiting.len()),
        "items": items,
    }))
}

/// `N candidates awaiting review`.
#[must_use]
pub fn summary(count: usize) -> String {
    let noun = if count == 1 { "candidate" } else { "candidates" };
    format!("{count} {noun} awaiting review")
}

/// `library`: active cards, most recently approved first.
///
/// # Errors
/// Store errors.
pub fn library() -> Outcome {
    let mut cards: Vec<Card> = Card::load_all()?.into_iter().filter(|c| c.status == CardStatus::Active).collect();
    newest_first(&mut cards);
    let items: Vec<_> = cards
        .iter()
        .take(LIBRARY_SIZE)
        .map(|c| {
            let mut item = json!({ "title": c.content.title, "preview": c.content.summary });
            if let (Some(fields), false) = (item.as_object_mut(), c.updated_at.is_empty()) {
                fields.insert("at".to_owned(), json!(c.updated_at));
            }
            item
        })
        .collect();
    Ok(json!({ "items": items }))
}

/// Sorts by `updatedAt`, newest first (RFC 3339 in UTC sorts as text), then by id.
pub fn newest_first(cards: &mut [Card]) {
    cards.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| a.id.cmp(&b.id)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        assert_eq!(summary(0), "0 candidates awaiting review");
        assert_eq!(summary(1), "1 candidate awaiting review");
        assert_eq!(summary(12), "12 candidates awaiting review");
    }
}
