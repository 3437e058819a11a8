//! What there is to distill: observations from the journal spool and session turns from
//! `sessions/*.jsonl` (the same line format), minus what is covered or leased.

use std::collections::BTreeSet;

use butler_faculty_kit::Failure;
use butler_store::journal::Observation;

use crate::batch::{Item, ItemKind};

/// Every observation and session turn on file, oldest first (ties keep file order); an id
/// seen twice keeps its first item.
///
/// # Errors
/// `io_error`.
pub fn all() -> Result<Vec<Item>, Failure> {
    let observations = Observation::all()?.into_iter().map(|o| Item::from_observation(o, ItemKind::Observation));
    let sessions = read_jsonl_dir(&butler_store::path("sessions"))?
        .into_iter()
        .map(|o| Item::from_observation(o, ItemKind::Session));
    Ok(merge(observations.chain(sessions)))
}

/// Sorts by time (stable) and drops repeated ids.
fn merge(items: impl Iterator<Item = Item>) -> Vec<Item> {
    let mut seen = BTreeSet::new();
    let mut items: Vec<Item> = items.filter(|i| seen.insert(i.id.clone())).collect();
    items.sort_by(|a, b| a.at.cmp(&b.at));
    items
}

pub use butler_store::journal::read_jsonl_dir;

/// The items neither covered nor `held` by another batch.
#[must_use]
pub fn uncovered(items: Vec<Item>, covered: &BTreeSet<String>, held: &BTreeSet<String>) -> Vec<Item> {
    items.into_iter().filter(|i| !covered.contains(&i.id) && !held.contains(&i.id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, at: &str, kind: ItemKind) -> Item {
        Item {
            id: id.into(),
            kind,
            at: at.into(),
            source: "s".into(),
            kind_of: "note".into(),
            tags: vec![],
            text: "t".into(),
            r#ref: None,
        }
    }

    #[test]
    fn merge_orders_by_time_and_drops_repeats() {
        let merged = merge(
            vec![
                item("b", "2026-11-30T02:00:00.000Z", ItemKind::Observation),
                item("a", "2026-11-30T01:00:00.000Z", ItemKind::Observation),
                item("c", "2026-11-30T01:30:00.000Z", ItemKind::Session),
                item("a", "2026-11-30T00:00:00.000Z", ItemKind::Session),
            ]
            .into_iter(),
        );
        let ids: Vec<_> = merged.iter().map(|i| (i.id.as_str(), i.kind)).collect();
        assert_eq!(ids, [("a", ItemKind::Observation), ("c", ItemKind::Session), ("b", ItemKind::Observation)]);
    }

    #[test]
    fn uncovered_excludes_covered_and_held() {
        let items = vec![
            item("a", "1", ItemKind::Observation),
            item("b", "2", ItemKind::Observation),
            item("c", "3", ItemKind::Session),
        ];
        let covered = BTreeSet::from(["a".to_owned()]);
        let held = BTreeSet::from(["c".to_owned()]);
        let left: Vec<_> = uncovered(items, &covered, &held).into_iter().map(|i| i.id).collect();
        assert_eq!(left, ["b"]);
    }

    #[test]
    fn session_files_are_read_line_by_line() {
        let dir = std::env::temp_dir().join(format!("distill-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let line = |id: &str| {
            format!(r#"{{"id":"{id}","at":"2026-11-30T00:00:00.000Z","source":"claude","type":"session","text":"hi"}}"#)
        };
        std::fs::write(dir.join("b.jsonl"), format!("{}\nnot json\n", line("t2"))).expect("write");
        std::fs::write(dir.join("a.jsonl"), format!("{}\n{{\"torn\":", line("t1"))).expect("write");
        std::fs::write(dir.join("c.txt"), line("t3")).expect("write");
        let ids: Vec<_> = read_jsonl_dir(&dir).expect("reads").into_iter().map(|o| o.id).collect();
        assert_eq!(ids, ["t1", "t2"]);
        assert!(read_jsonl_dir(&dir.join("missing")).expect("missing is empty").is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
