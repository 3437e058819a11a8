//! The card index (`self/build/cards.index`) is a cache: whatever happens to it or to the
//! card files behind its back — a card added, removed or edited in place by the owner, the
//! index corrupted or deleted — search, read and refresh answer from the card files as they
//! are.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::Butler;

fn started() -> (Butler, tempfile::TempDir) {
    let (butler, dir) = Butler::start_fresh();
    for id in ["journal", "distill", "validity", "cards"] {
        butler.wait_ready(id);
    }
    (butler, dir)
}

fn ok(butler: &Butler, action: &str, args: Value) -> Value {
    let (status, body) = butler.post_json("/pipeline", &json!({"action": action, "args": args}), &[]);
    assert_eq!((status, &body["ok"]), (200, &json!(true)), "{action}: {body}");
    body["data"].clone()
}

/// The ids a search returns.
fn search(butler: &Butler, query: &str) -> Vec<String> {
    let found = ok(butler, "cards.search", json!({"query": query}));
    found["cards"].as_array().expect("cards").iter().map(|c| c["id"].as_str().expect("id").to_owned()).collect()
}

/// A card file as the owner might write it by hand.
fn card(id: &str, title: &str, status: &str, body: &str) -> String {
    format!(
        "---\nid: \"{id}\"\nkind: \"knowledge\"\ntitle: \"{title}\"\nsummary: \"About {id}\"\nstatus: \"{status}\"\nrevision: 1\n---\n\n{body}\n"
    )
}

fn write_card(workdir: &Path, id: &str, text: &str) {
    let dir = workdir.join("self/knowledge");
    std::fs::create_dir_all(&dir).expect("knowledge folder");
    std::fs::write(dir.join(format!("{id}.md")), text).expect("write card");
}

fn index_file(workdir: &Path) -> std::path::PathBuf {
    workdir.join("self/build/cards.index")
}

fn tokens_file(workdir: &Path) -> std::path::PathBuf {
    workdir.join("self/build/cards.tokens")
}

#[test]
fn search_follows_cards_added_removed_and_edited_in_place() {
    let (butler, _dir) = started();
    let w = butler.workdir.clone();
    write_card(&w, "alpha", &card("alpha", "Alpha osprey", "active", "Nests near water."));
    write_card(&w, "beta", &card("beta", "Beta heron", "active", "Wades in the osprey's river."));
    assert_eq!(search(&butler, "osprey"), ["alpha", "beta"], "title match first");
    assert!(index_file(&w).is_file(), "a search writes the index");
    assert!(tokens_file(&w).is_file(), "and the token file");
    // Through the token file, a term still matches anywhere inside a word, punctuation
    // included, and every term of a query must match.
    assert_eq!(search(&butler, "osprey"), ["alpha", "beta"]);
    assert_eq!(search(&butler, "prey's"), ["beta"]);
    assert_eq!(search(&butler, "SPREY WATER"), ["alpha"]);
    assert_eq!(search(&butler, "osprey river."), ["beta"]);
    assert!(search(&butler, "osprey heron-less").is_empty());

    // Added.
    write_card(&w, "gamma", &card("gamma", "Gamma", "active", "An osprey too."));
    assert_eq!(search(&butler, "osprey"), ["alpha", "beta", "gamma"]);

    // Removed.
    std::fs::remove_file(w.join("self/knowledge/beta.md")).expect("remove");
    assert_eq!(search(&butler, "osprey"), ["alpha", "gamma"]);

    // Edited in place (the folder does not change): new words are found, old ones gone, and
    // a card archived by hand leaves the results.
    write_card(&w, "alpha", &card("alpha", "Alpha kite", "active", "Hovers over fields."));
    assert_eq!(search(&butler, "osprey"), ["gamma"]);
    assert_eq!(search(&butler, "kite"), ["alpha"]);
    let found = ok(&butler, "cards.search", json!({"query": "kite"}));
    assert_eq!(found["cards"][0]["title"], "Alpha kite", "{found}");
    write_card(&w, "gamma", &card("gamma", "Gamma", "archived", "An osprey too."));
    assert!(search(&butler, "osprey").is_empty());
    let found = ok(&butler, "cards.search", json!({"query": "osprey", "includeInactive": true}));
    assert_eq!(found["cards"][0]["status"], "archived", "{found}");

    // A card that did not match and now does, edited in place while nothing else changes:
    // found once the index compares every card file again (at most `index::SWEEP` later).
    write_card(&w, "gamma", &card("gamma", "Gamma", "active", "An osprey and a harrier."));
    crate::util::wait_until(Duration::from_secs(30), "the edited card found", || {
        search(&butler, "harrier") == ["gamma"]
    });

    // The index again, for a read of every card: it never holds more than the files say.
    assert_eq!(ok(&butler, "cards.read", json!({"id": "alpha"}))["card"]["title"], "Alpha kite");
}

#[test]
fn a_corrupt_or_deleted_index_is_rebuilt_from_the_card_files() {
    let (butler, _dir) = started();
    let w = butler.workdir.clone();
    std::fs::create_dir_all(w.join("docs")).expect("docs");
    std::fs::write(w.join("docs/nest.md"), "The nest is on the cliff.").expect("doc");
    write_card(&w, "alpha", &card("alpha", "Alpha osprey", "active", "Nests near water."));
    let checked = card("beta", "Beta osprey", "active", "Checked.").replace(
        "revision: 1\n",
        "revision: 1\nchecks: [{\"type\":\"quote\",\"path\":\"docs/nest.md\",\"text\":\"on the cliff\"}]\n",
    );
    write_card(&w, "beta", &checked);
    assert_eq!(search(&butler, "osprey"), ["alpha", "beta"]);

    for garbage in [&b"not an index\n"[..], b"butler-card-index 1 - - - -\nalpha\tbroken\n", b"", &[0xff, 0xfe, 0]] {
        std::fs::write(index_file(&w), garbage).expect("corrupt the index");
        assert_eq!(search(&butler, "osprey"), ["alpha", "beta"], "after {garbage:?}");
    }
    // The token file too: garbage, cut short, or left from another index.
    let tokens = std::fs::read(tokens_file(&w)).expect("token file");
    for garbage in [&b"garbage"[..], &tokens[..tokens.len() - 1], b""] {
        std::fs::write(tokens_file(&w), garbage).expect("corrupt the token file");
        assert_eq!(search(&butler, "osprey"), ["alpha", "beta"], "after {garbage:?}");
        assert_eq!(search(&butler, "nests"), ["alpha"], "after {garbage:?}");
    }
    std::fs::remove_file(tokens_file(&w)).expect("delete the token file");
    assert_eq!(search(&butler, "checked"), ["beta"]);
    assert!(tokens_file(&w).is_file(), "written again");
    write_card(&w, "gamma", &card("gamma", "Gamma osprey", "active", "New."));
    assert_eq!(search(&butler, "osprey"), ["alpha", "beta", "gamma"], "a token file of an older index is not used");
    std::fs::write(tokens_file(&w), &tokens).expect("an old token file back");
    assert_eq!(search(&butler, "osprey"), ["alpha", "beta", "gamma"], "nor one put back");
    std::fs::remove_file(w.join("self/knowledge/gamma.md")).expect("remove");

    std::fs::remove_file(index_file(&w)).expect("delete the index");
    assert_eq!(ok(&butler, "validity.refresh", json!({})), json!({"checked": 1, "suspended": 0, "restored": 0}));

    // A verdict change goes through the index too: the quote goes away, the card is held.
    std::fs::write(w.join("docs/nest.md"), "The nest is gone.").expect("edit doc");
    std::fs::write(index_file(&w), "garbage").expect("corrupt the index");
    assert_eq!(ok(&butler, "validity.refresh", json!({})), json!({"checked": 1, "suspended": 1, "restored": 0}));
    assert_eq!(search(&butler, "osprey"), ["alpha"]);
    // Unchanged: nothing moves, nothing is written.
    let verdict = w.join("self/validity/beta.json");
    let before = std::fs::read(&verdict).expect("verdict");
    assert_eq!(ok(&butler, "validity.refresh", json!({})), json!({"checked": 1, "suspended": 0, "restored": 0}));
    assert_eq!(std::fs::read(&verdict).expect("verdict"), before);
    std::fs::remove_file(index_file(&w)).expect("delete the index");
    assert_eq!(search(&butler, "osprey"), ["alpha"], "the verdict is read back from its file");
    let context = std::fs::read_to_string(w.join("self/build/context.md")).expect("context");
    assert!(context.contains("alpha") && !context.contains("beta"), "{context}");
}

#[test]
fn the_library_lists_cards_by_kind_with_why_a_card_is_held() {
    let (butler, _dir) = started();
    let w = butler.workdir.clone();
    write_card(&w, "alpha", &card("alpha", "Alpha", "active", "Plain."));
    write_card(&w, "beta", &card("beta", "Beta", "archived", "Old."));
    let checked = card("gamma", "Gamma", "active", "Checked.")
        .replace("revision: 1\n", "revision: 1\nchecks: [{\"type\":\"path\",\"path\":\"docs/gone.md\"}]\n");
    write_card(&w, "gamma", &checked);
    let rules = w.join("self/rules");
    std::fs::create_dir_all(&rules).expect("rules folder");
    std::fs::write(
        rules.join("rule-one.md"),
        card("rule-one", "Rule one", "active", "Do it.").replace("knowledge", "rule"),
    )
    .expect("rule");
    let ids = |listed: &Value| -> Vec<String> {
        listed["cards"].as_array().expect("cards").iter().map(|c| c["id"].as_str().expect("id").to_owned()).collect()
    };

    // Every card, no query needed; the held one says which check failed, the archived one
    // is marked, and no body or evidence is in it.
    let all = ok(&butler, "cards.list", json!({"includeInactive": true}));
    assert_eq!(ids(&all), ["alpha", "beta", "gamma", "rule-one"], "{all}");
    assert_eq!(all["total"], 4, "{all}");
    let by_id = |id: &str| all["cards"].as_array().and_then(|c| c.iter().find(|c| c["id"] == id).cloned());
    let gamma = by_id("gamma").expect("gamma");
    assert_eq!(gamma["status"], "active", "{gamma}");
    let reasons = gamma["suspended"]["reasons"].as_array().expect("reasons");
    assert!(reasons.iter().any(|r| r.as_str().is_some_and(|r| r.contains("docs/gone.md"))), "{gamma}");
    let beta = by_id("beta").expect("beta");
    assert_eq!((beta["status"].as_str(), beta.get("suspended")), (Some("archived"), None), "{beta}");
    let alpha = by_id("alpha").expect("alpha");
    assert_eq!(
        (alpha["kind"].as_str(), alpha["title"].as_str(), alpha["revision"].as_u64()),
        (Some("knowledge"), Some("Alpha"), Some(1))
    );
    assert!(alpha.get("body").is_none() && alpha.get("evidence").is_none(), "{alpha}");
    // A search says why the same way; one without includeInactive does not find it.
    let found = ok(&butler, "cards.search", json!({"query": "gamma", "includeInactive": true}));
    assert_eq!(found["cards"][0]["suspended"], gamma["suspended"], "{found}");
    let found = ok(&butler, "cards.search", json!({"query": "alpha", "includeInactive": true}));
    assert_eq!((found["cards"][0]["status"].as_str(), found["cards"][0].get("suspended")), (Some("active"), None));
    assert_eq!(ok(&butler, "cards.search", json!({"query": "gamma"}))["cards"], json!([]));

    // By default only what consumers see; by kind; paged.
    assert_eq!(ids(&ok(&butler, "cards.list", json!({}))), ["alpha", "rule-one"]);
    assert_eq!(ids(&ok(&butler, "cards.list", json!({"kind": "rule"}))), ["rule-one"]);
    let knowledge =
        ok(&butler, "cards.list", json!({"kind": "knowledge", "includeInactive": true, "limit": 1, "offset": 1}));
    assert_eq!((ids(&knowledge), &knowledge["total"]), (vec!["beta".to_owned()], &json!(3)), "{knowledge}");

    // Arguments are checked.
    for bad in [json!({"kind": "nope"}), json!({"limit": 0}), json!({"query": "x"})] {
        let (status, body) = butler.post_json("/pipeline", &json!({"action": "cards.list", "args": bad}), &[]);
        assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_args")), "{bad}: {body}");
    }

    // The file comes back: the card is listed as valid again.
    std::fs::create_dir_all(w.join("docs")).expect("docs");
    std::fs::write(w.join("docs/gone.md"), "back").expect("doc");
    let listed = ok(&butler, "cards.list", json!({"kind": "knowledge", "includeInactive": true}));
    assert_eq!(listed["cards"][2]["id"], "gamma", "{listed}");
    assert_eq!(listed["cards"][2].get("suspended"), None, "{listed}");
    assert_eq!(ids(&ok(&butler, "cards.list", json!({"kind": "knowledge"}))), ["alpha", "gamma"]);
}
