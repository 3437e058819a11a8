//! Approved cards: `rules/<id>.md`, `knowledge/<id>.md` and `profile.md`, Markdown
//! with front matter. A card's id is its file name; ids are unique across kinds.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::check::Check;
use super::{Failure, frontmatter, ids};

/// Visibility words `scope` may hold; anything else is a legacy free-text scope, read as
/// `appliesTo`.
const SCOPES: &[&str] = &["local", "shared", "private", "public", "global"];

/// Kinds of card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A working rule the owner agreed to.
    Rule,
    /// A piece of knowledge.
    Knowledge,
    /// The owner profile (one card, `profile.md`).
    Profile,
}

impl Kind {
    /// `rule`, `knowledge`, `profile`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rule => "rule",
            Self::Knowledge => "knowledge",
            Self::Profile => "profile",
        }
    }
}

/// Approval state: only the owner changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// In use.
    Active,
    /// Retired.
    Archived,
}

/// What a card says: the part its content hash covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Content {
    /// Kind.
    pub kind: Kind,
    /// Title.
    pub title: String,
    /// One-line summary.
    pub summary: String,
    /// Markdown body.
    pub body: String,
    /// Where it applies.
    #[serde(default)]
    pub applies_to: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Related card ids.
    #[serde(default)]
    pub related: Vec<String>,
}

impl Content {
    /// SHA-256 of the core content, canonically encoded.
    #[must_use]
    pub fn hash(&self) -> String {
        let canonical =
            json!([self.kind.as_str(), self.title, self.summary, self.applies_to, self.tags, self.related, self.body]);
        ids::sha256_hex(canonical.to_string().as_bytes())
    }

    /// Refuses empty or oversized fields.
    ///
    /// # Errors
    /// `invalid_args` naming the field.
    pub fn validate(&self) -> Result<(), Failure> {
        let need = |field: &str, value: &str, max: usize| {
            if value.trim().is_empty() {
                Err(Failure::invalid_args(format!("card.{field} must not be empty")))
            } else if value.chars().count() > max {
                Err(Failure::invalid_args(format!("card.{field} is longer than {max} characters")))
            } else {
                Ok(())
            }
        };
        need("title", &self.title, 200)?;
        need("summary", &self.summary, 500)?;
        need("body", &self.body, 20_000)?;
        if self.applies_to.chars().count() > 500 {
            return Err(Failure::invalid_args("card.appliesTo is longer than 500 characters"));
        }
        if self.tags.len() > 32 || self.tags.iter().any(|t| t.trim().is_empty() || t.len() > 64 || t.contains(',')) {
            return Err(Failure::invalid_args(
                "card.tags: at most 32 non-empty tags of up to 64 characters, without commas",
            ));
        }
        if self.related.len() > 64 {
            return Err(Failure::invalid_args("card.related: at most 64 ids"));
        }
        Ok(())
    }
}

/// An approved card.
#[derive(Debug, Clone, PartialEq)]
pub struct Card {
    /// Id (the file name without `.md`; `profile` for the profile).
    pub id: String,
    /// What it says.
    pub content: Content,
    /// Approval state.
    pub status: Status,
    /// Increases with every approved change.
    pub revision: u64,
    /// Hash of `content` at this revision.
    pub content_hash: String,
    /// Visibility.
    pub scope: String,
    /// Deterministic checks.
    pub checks: Vec<Check>,
    /// Evidence refs (never shown to consumers).
    pub evidence: Vec<String>,
    /// Created.
    pub created_at: String,
    /// Last approved change.
    pub updated_at: String,
    /// Front matter fields this format does not know, kept as they were.
    pub extra: Map<String, Value>,
}

const KNOWN: &[&str] = &[
    "id",
    "kind",
    "title",
    "summary",
    "status",
    "revision",
    "contentHash",
    "scope",
    "appliesTo",
    "tags",
    "related",
    "checks",
    "evidence",
    "createdAt",
    "updatedAt",
];

impl Card {
    /// The file of card `id` of `kind`.
    #[must_use]
    pub fn path_of(kind: Kind, id: &str) -> PathBuf {
        match kind {
            Kind::Profile => super::path("profile.md"),
            Kind::Rule => super::path(&format!("rules/{id}.md")),
            Kind::Knowledge => super::path(&format!("knowledge/{id}.md")),
        }
    }

    /// This card's file.
    #[must_use]
    pub fn path(&self) -> PathBuf {
        Self::path_of(self.content.kind, &self.id)
    }

    /// Parses a card file. `fallback_id` is the file name, used when the front matter has
    /// no id; `fallback_kind` likewise comes from the folder.
    ///
    /// # Errors
    /// `store_corrupt` with the reason.
    pub fn parse(text: &str, fallback_id: &str, fallback_kind: Kind) -> Result<Self, Failure> {
        let corrupt = |why: String| Failure::new("store_corrupt", format!("card `{fallback_id}`: {why}"));
        let (mut fields, body) = frontmatter::split(text).map_err(corrupt)?;
        let text_of = |fields: &Map<String, Value>, key: &str| {
            fields.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let list_of = |fields: &Map<String, Value>, key: &str| -> Vec<String> {
            match fields.get(key) {
                Some(Value::Array(items)) => items.iter().filter_map(|i| i.as_str().map(str::to_owned)).collect(),
                Some(Value::String(s)) => {
                    s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
                }
                _ => Vec::new(),
            }
        };
        let kind = fields.get("kind").and_then(|k| serde_json::from_value(k.clone()).ok()).unwrap_or(fallback_kind);
        let mut scope = text_of(&fields, "scope");
        let mut applies_to = text_of(&fields, "appliesTo");
        if !scope.is_empty() && !SCOPES.contains(&scope.as_str()) {
            // A legacy card: `scope` held where the card applies.
            if applies_to.is_empty() {
                applies_to = scope;
            }
            scope = String::new();
        }
        let content = Content {
            kind,
            title: text_of(&fields, "title"),
            summary: text_of(&fields, "summary"),
            body: body.trim().to_owned(),
            applies_to,
            tags: list_of(&fields, "tags"),
            related: list_of(&fields, "related"),
        };
        let checks = match fields.get("checks") {
            Some(value @ Value::Array(_)) => {
                serde_json::from_value(value.clone()).map_err(|e| corrupt(format!("checks: {e}")))?
            }
            _ => Vec::new(),
        };
        let status = match text_of(&fields, "status").as_str() {
            "archived" => Status::Archived,
            _ => Status::Active,
        };
        let id = match text_of(&fields, "id") {
            id if !id.is_empty() => id,
            _ => fallback_id.to_owned(),
        };
        let revision = fields.get("revision").and_then(Value::as_u64).unwrap_or(1);
        let content_hash = match text_of(&fields, "contentHash") {
            hash if !hash.is_empty() => hash,
            _ => content.hash(),
        };
        let card = Self {
            id,
            status,
            revision,
            content_hash,
            scope: if scope.is_empty() { "local".to_owned() } else { scope },
            checks,
            evidence: list_of(&fields, "evidence"),
            created_at: text_of(&fields, "createdAt"),
            updated_at: text_of(&fields, "updatedAt"),
            content,
            extra: Map::new(),
        };
        fields.retain(|k, _| !KNOWN.contains(&k.as_str()));
        Ok(Self { extra: fields, ..card })
    }

    /// The card as a file.
    #[must_use]
    pub fn render(&self) -> String {
        let c = &self.content;
        let mut fields: Vec<(&str, Value)> = vec![
            ("id", json!(self.id)),
            ("kind", json!(c.kind.as_str())),
            ("title", json!(c.title)),
            ("summary", json!(c.summary)),
            ("status", json!(self.status)),
            ("revision", json!(self.revision)),
            ("contentHash", json!(self.content_hash)),
            ("scope", json!(self.scope)),
            ("appliesTo", json!(c.applies_to)),
            ("tags", json!(c.tags)),
            ("related", json!(c.related)),
            ("checks", json!(self.checks)),
            ("evidence", json!(self.evidence)),
            ("createdAt", json!(self.created_at)),
            ("updatedAt", json!(self.updated_at)),
        ];
        fields.extend(self.extra.iter().map(|(k, v)| (k.as_str(), v.clone())));
        frontmatter::render(&fields, &c.body)
    }

    /// Loads card `id` (rules, then knowledge, then the profile).
    ///
    /// # Errors
    /// `io_error` or `store_corrupt`.
    pub fn load(id: &str) -> Result<Option<Self>, Failure> {
        if !valid_id(id) {
            return Ok(None);
        }
        let kinds: &[Kind] = if id == "profile" { &[Kind::Profile] } else { &[Kind::Rule, Kind::Knowledge] };
        for kind in kinds {
            let path = Self::path_of(*kind, id);
            match std::fs::read_to_string(&path) {
                Ok(text) => return Self::parse(&text, id, *kind).map(Some),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Failure::io(&path, &e)),
            }
        }
        Ok(None)
    }

    /// Every card in the store, in id order. Files that do not parse are skipped (and
    /// logged): one bad hand edit must not hide every other card.
    ///
    /// # Errors
    /// `io_error` reading a folder.
    pub fn load_all() -> Result<Vec<Self>, Failure> {
        let mut cards = Vec::new();
        for (folder, kind) in [("rules", Kind::Rule), ("knowledge", Kind::Knowledge)] {
            let dir = super::path(folder);
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Failure::io(&dir, &e)),
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let Some(stem) =
                    path.file_stem().and_then(|s| s.to_str()).filter(|_| path.extension().is_some_and(|e| e == "md"))
                else {
                    continue;
                };
                match std::fs::read_to_string(&path)
                    .map_err(|e| Failure::io(&path, &e))
                    .and_then(|t| Self::parse(&t, stem, kind))
                {
                    Ok(card) => cards.push(card),
                    Err(f) => butler_faculty_kit::host::warn(&format!("skipping {}: {}", path.display(), f.message)),
                }
            }
        }
        if let Some(profile) = Self::load("profile")? {
            cards.push(profile);
        }
        cards.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(cards)
    }

    /// Writes the card file atomically.
    ///
    /// # Errors
    /// `io_error`.
    pub fn save(&self) -> Result<(), Failure> {
        super::write(&self.path(), self.render().as_bytes())
    }

    /// The index entry consumers see.
    #[must_use]
    pub fn index_entry(&self) -> Value {
        let c = &self.content;
        json!({"id": self.id, "kind": c.kind, "title": c.title, "summary": c.summary, "appliesTo": c.applies_to, "tags": c.tags, "revision": self.revision})
    }
}

/// Ids are file names: lowercase letters, digits and `-`.
#[must_use]
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A new id for a card titled `title`, not yet used by any card.
#[must_use]
pub fn fresh_id(title: &str) -> String {
    let base = ids::slug(title);
    let taken = |id: &str| {
        Card::path_of(Kind::Rule, id).exists() || Card::path_of(Kind::Knowledge, id).exists() || id == "profile"
    };
    if !taken(&base) {
        return base;
    }
    (2..).map(|n| format!("{base}-{n}")).find(|id| !taken(id)).unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card() -> Card {
        let content = Content {
            kind: Kind::Rule,
            title: "Run the tests: always".into(),
            summary: "Before a commit".into(),
            body: "Run `cargo test`.\n\n---\nstill body".into(),
            applies_to: "rust projects".into(),
            tags: vec!["testing".into()],
            related: vec![],
        };
        Card {
            id: "run-the-tests".into(),
            content_hash: content.hash(),
            content,
            status: Status::Active,
            revision: 3,
            scope: "local".into(),
            checks: vec![Check::Quote { path: "docs/a.md".into(), text: "cargo test".into() }],
            evidence: vec!["obs-1".into()],
            created_at: "2026-11-30T00:00:00.000Z".into(),
            updated_at: "2026-11-30T00:00:00.000Z".into(),
            extra: Map::new(),
        }
    }

    #[test]
    fn render_parse_round_trip() {
        let card = card();
        let parsed = Card::parse(&card.render(), "x", Kind::Knowledge).expect("parses");
        assert_eq!(parsed, card);
    }

    #[test]
    fn legacy_scope_becomes_applies_to_and_unknown_fields_survive() {
        let text = "---\ntitle: Old card\nsummary: s\nscope: when writing Go\nowner-note: keep me\n---\nbody";
        let card = Card::parse(text, "old", Kind::Knowledge).expect("parses");
        assert_eq!(card.content.applies_to, "when writing Go");
        assert_eq!(card.scope, "local");
        assert_eq!(card.extra["owner-note"], "keep me");
        assert!(card.render().contains("owner-note: \"keep me\""));
    }

    #[test]
    fn hash_covers_content_only() {
        let mut a = card();
        let b = card();
        a.revision = 9;
        assert_eq!(a.content.hash(), b.content.hash());
        a.content.body.push('!');
        assert_ne!(a.content.hash(), b.content.hash());
    }
}
