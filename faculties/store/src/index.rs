//! The card index: a derived cache, `build/cards.index`, holding what search, refresh and
//! the context need of every card — id, kind, status, revision, content hash, checks, the
//! verdict that applies to it and its lowercased searchable text (title, summary,
//! `appliesTo`, tags, body; never evidence or metadata) — in one file, so that a search
//! reads one file instead of every card and verdict.
//!
//! Card and verdict files stay the source of truth. The index is checked before every use
//! and repaired from them when it does not match; a missing, corrupt or unreadable index
//! is rebuilt, and losing it never loses anything.
//!
//! # How it is checked
//! The index records a *stamp* (modification time in nanoseconds and size) of each card
//! folder (`rules/`, `knowledge/`), of the verdict folder (`validity/`), of `profile.md`,
//! and of every card file and verdict file it was built from.
//! - Every use compares the folder stamps: a file created, removed or renamed into a folder
//!   (every write of the faculties is a temp file + rename) changes its folder's stamp; then
//!   the folder is listed, every card file's stamp compared, and only the files whose stamp
//!   differs are read again.
//! - An owner editing a card in place (most editors write in place) changes the file's
//!   stamp but not its folder's. Comparing every file's stamp on every use costs too much
//!   for large stores, so it is done at most every [`SWEEP`]; in between, a search compares
//!   the stamps of the cards it returns and sweeps at once when one changed
//!   ([`Index::swept`]).
//!
//! Verdict files are written only by the faculties, always by rename, so the verdict folder's
//! stamp covers them; their own stamps are compared only once that folder changed.
//!
//! File systems keep modification times at a coarse clock tick: a change made in the same
//! tick as the index read a file would leave the stamp as it was. So a stamp younger than
//! [`RACY`] when the index is built is recorded as unknown, and that file (or folder) is
//! looked at again next time — as Git does with "racily clean" entries.
//!
//! Readers rebuild the index without the store's write lock: it is written to a temp file
//! of its own and renamed into place, so concurrent rebuilds never tear it, and a rebuild
//! that lost a race to a newer one only leaves stamps that the next use finds stale.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::card::{Card, Kind, Status};
use super::verdict::{State, Verdict};
use super::{Failure, path, tokens};

/// Where the index lives, relative to the store.
pub const FILE: &str = "build/cards.index";
/// The first word of the header; the number is the format version.
const MAGIC: &str = "butler-card-index 3";
/// A stamp this close to the time the index was built may not show a change made in the
/// same clock tick (a few milliseconds on common file systems), so it is not trusted. A
/// quarter of a second is far above any tick and costs only a re-check shortly after a
/// write.
pub const RACY: Duration = Duration::from_millis(250);
/// How long the index is used on the strength of its folder stamps alone before every
/// card file's stamp is compared again. Comparing them costs a `stat` per card (~9 µs in
/// the sandbox: ~90 ms for 10,000 cards), too much for every search; so a card edited in
/// place by hand starts matching searches at most this long after the edit. (A search also
/// compares the files of the cards it is about to return, so an edit never makes it show
/// what a card no longer says.)
pub const SWEEP: Duration = Duration::from_secs(2);
/// The card folders and their kinds.
const FOLDERS: [(&str, Kind); 2] = [("rules", Kind::Rule), ("knowledge", Kind::Knowledge)];
/// The verdict folder.
const VERDICTS: &str = "validity";
/// The profile card.
const PROFILE: &str = "profile.md";
/// What a search reads first of the index: its header line (about 100 bytes).
const HEADER_READ: u64 = 512;

/// Modification time (ns since the epoch) and size of a file or folder, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// It did not exist.
    Missing,
    /// It existed, but was changed too recently to trust (see [`RACY`]).
    Unknown,
    /// Modified at this time, with this size.
    At(u64, u64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        let nanos = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_nanos()).ok());
        match nanos {
            Some(nanos) => Self::At(nanos, meta.len()),
            None => Self::Unknown,
        }
    }

    /// The stamp of `path` now.
    fn now(path: &Path) -> Self {
        match std::fs::metadata(path) {
            Ok(meta) => Self::of(&meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::Missing,
            Err(_) => Self::Unknown,
        }
    }

    /// The stamp to record, given when the build started: a recent one is not trusted.
    fn recorded(self, started: u64) -> Self {
        match self {
            Self::At(nanos, _) if nanos.saturating_add(nanos_of(RACY)) >= started => Self::Unknown,
            other => other,
        }
    }

    /// Whether a recorded stamp still describes `now`.
    fn holds(self, now: Self) -> bool {
        self != Self::Unknown && self == now
    }

    fn render(self) -> String {
        match self {
            Self::Missing => "-".to_owned(),
            Self::Unknown => "?".to_owned(),
            Self::At(nanos, size) => format!("{nanos}:{size}"),
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "-" => Some(Self::Missing),
            "?" => Some(Self::Unknown),
            _ => {
                let (nanos, size) = text.split_once(':')?;
                Some(Self::At(nanos.parse().ok()?, size.parse().ok()?))
            }
        }
    }
}

fn nanos_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn now_nanos() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, nanos_of)
}

/// What the index knows of a card's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// The verdict was computed for the card's current revision and content hash.
    pub applies: bool,
    /// What the checks said.
    pub state: State,
    /// A conflict holds the card.
    pub conflict: bool,
    /// Why checks failed.
    pub reasons: Vec<String>,
}

impl Mark {
    /// The mark of `verdict` for a card at `revision` / `content_hash`.
    #[must_use]
    pub fn of(verdict: &Verdict, revision: u64, content_hash: &str) -> Self {
        Self {
            applies: verdict.revision == revision && verdict.content_hash == content_hash,
            state: verdict.state,
            conflict: verdict.conflict.is_some(),
            reasons: verdict.reasons.clone(),
        }
    }

    /// Whether it keeps the card from consumers (as [`super::verdict::is_suspended`]).
    #[must_use]
    pub fn holds(&self) -> bool {
        self.conflict || (self.applies && self.state == State::Suspended)
    }
}

/// One card in the index. Text fields are ranges into the index's text.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its line in the index text (without the line break).
    line: Range<usize>,
    /// The card file, relative to the store.
    file: String,
    file_stamp: Stamp,
    /// Card id.
    pub id: String,
    /// Kind.
    pub kind: Kind,
    /// Approval state.
    pub status: Status,
    /// Revision.
    pub revision: u64,
    /// Content hash.
    pub content_hash: String,
    verdict_stamp: Stamp,
    /// The stored verdict, if any.
    pub verdict: Option<Mark>,
    checks: Range<usize>,
    display: Range<usize>,
    title: Range<usize>,
    summary: Range<usize>,
    rest: Range<usize>,
}

/// The index, loaded and checked against the store (or the lines of it a search read).
#[derive(Debug, Default)]
pub struct Index {
    text: String,
    entries: Vec<Entry>,
    /// The generation of its body (see [`super::tokens`]).
    generation: u64,
    /// Where its body starts in `text` (after the header line).
    body: usize,
}

/// Why a search could not use the token file.
#[derive(Debug, Clone, Copy)]
enum Miss {
    /// The stored index does not match the store, or does not read.
    Index,
    /// The token file could not answer.
    Tokens(tokens::Miss),
}

impl Index {
    /// The index as the store is now: the stored one when it still matches, else repaired
    /// (only what changed is read again) and stored again.
    ///
    /// # Errors
    /// `io_error` reading a card folder. A missing or corrupt index is rebuilt, not an
    /// error; an index that cannot be written is logged and used anyway.
    pub fn current() -> Result<Self, Failure> {
        Self::load(false)
    }

    /// The index with every card file's stamp compared now (see [`SWEEP`]): for a caller
    /// that found a card file changed behind the index's back.
    ///
    /// # Errors
    /// As [`Index::current`].
    pub fn swept() -> Result<Self, Failure> {
        Self::load(true)
    }

    fn load(sweep: bool) -> Result<Self, Failure> {
        let stored =
            std::fs::read(path(FILE)).ok().and_then(|bytes| Stored::parse(String::from_utf8(bytes).ok()?).ok());
        let started = now_nanos();
        let now = Header::now();
        let stored = match stored {
            Some(stored)
                if !sweep
                    && stored.header.holds(&now)
                    && started.saturating_sub(stored.header.swept) < nanos_of(SWEEP) =>
            {
                return Ok(stored.index);
            }
            other => other,
        };
        let built = build(stored.as_ref(), &now, started)?;
        if let Err(f) = built.save() {
            butler_faculty_kit::host::warn(&format!("card index not written: {}", f.message));
        }
        Ok(built.index)
    }

    /// The index of the cards whose line holds every one of `terms` (lowercase search terms
    /// without whitespace: every card they can match is among them). When the stored index
    /// still matches the store, only the lines the token file names are read (see
    /// [`super::tokens`]); otherwise the whole index is checked and repaired as by
    /// [`Index::current`], and a token file that was not of it is written again.
    ///
    /// # Errors
    /// As [`Index::current`].
    pub fn matching(terms: &[String]) -> Result<Self, Failure> {
        let miss = match Self::through_tokens(terms) {
            Ok(index) => return Ok(index.only_holding(terms)),
            Err(miss) => miss,
        };
        let index = Self::current()?;
        let write_tokens = match miss {
            Miss::Index => tokens::stored_generation() != Some(index.generation),
            Miss::Tokens(tokens::Miss::Unusable) => true,
            Miss::Tokens(tokens::Miss::Broad) => false,
        };
        if write_tokens && let Err(f) = tokens::save(&index.tokens()) {
            butler_faculty_kit::host::warn(&format!("card token file not written: {}", f.message));
        }
        Ok(index.only_holding(terms))
    }

    /// The lines of the stored index that the token file names for `terms`, when the index
    /// still matches the store and the token file is of it.
    fn through_tokens(terms: &[String]) -> Result<Self, Miss> {
        let mut file = std::fs::File::open(path(FILE)).map_err(|_| Miss::Index)?;
        let size = file.metadata().map_err(|_| Miss::Index)?.len();
        let mut head = Vec::new();
        (&mut file).take(HEADER_READ).read_to_end(&mut head).map_err(|_| Miss::Index)?;
        let header_end = memchr::memchr(b'\n', &head).ok_or(Miss::Index)?;
        let header = std::str::from_utf8(&head[..header_end]).ok().and_then(Header::parse).ok_or(Miss::Index)?;
        let body_at = header_end as u64 + 1;
        let started = now_nanos();
        if body_at + header.body as u64 != size
            || !header.holds(&Header::now())
            || started.saturating_sub(header.swept) >= nanos_of(SWEEP)
        {
            return Err(Miss::Index);
        }
        let spans = tokens::candidates(header.generation, header.body as u64, terms).map_err(Miss::Tokens)?;
        let ranges: Vec<Range<u64>> = spans.iter().map(|s| body_at + s.start..body_at + s.start + s.len + 1).collect();
        let lines = tokens::read_ranges(&mut file, &ranges).map_err(|_| Miss::Tokens(tokens::Miss::Unusable))?;
        let mut text = String::new();
        let mut entries = Vec::with_capacity(lines.len());
        for line in lines {
            // A span that is not one whole line: the token file does not describe this index.
            let line = match line.split_last() {
                Some((b'\n', line)) => std::str::from_utf8(line).map_err(|_| Miss::Tokens(tokens::Miss::Unusable))?,
                _ => return Err(Miss::Tokens(tokens::Miss::Unusable)),
            };
            let start = text.len();
            text.push_str(line);
            let entry = parse_entry(&text, start..text.len()).ok_or(Miss::Tokens(tokens::Miss::Unusable))?;
            text.push('\n');
            entries.push(entry);
        }
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(Self { text, entries, generation: header.generation, body: 0 })
    }

    /// The token file of this index.
    fn tokens(&self) -> Vec<u8> {
        let body_at = self.body;
        tokens::encode(
            self.generation,
            self.entries.iter().map(|e| {
                let span = tokens::Span { start: (e.line.start - body_at) as u64, len: e.line.len() as u64 };
                (span, self.searchable(e))
            }),
        )
    }

    fn only_holding(mut self, terms: &[String]) -> Self {
        let finders: Vec<_> = terms.iter().map(memchr::memmem::Finder::new).collect();
        let text = &self.text;
        self.entries.retain(|e| finders.iter().all(|f| f.find(&text.as_bytes()[e.line.clone()]).is_some()));
        self
    }

    /// Whether `entry`'s card file is as the index recorded it (one `stat`).
    #[must_use]
    pub fn file_holds(&self, entry: &Entry) -> bool {
        entry.file_stamp.holds(Stamp::now(&path(&entry.file)))
    }

    /// Every card, in id order.
    #[must_use]
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The card's checks as JSON text (`[]` when none).
    #[must_use]
    pub fn checks_json(&self, entry: &Entry) -> &str {
        &self.text[entry.checks.clone()]
    }

    /// Whether the card has checks.
    #[must_use]
    pub fn has_checks(&self, entry: &Entry) -> bool {
        self.checks_json(entry) != "[]"
    }

    /// The index entry consumers see, as [`Card::index_entry`] gives it.
    #[must_use]
    pub fn display(&self, entry: &Entry) -> Value {
        serde_json::from_str(&self.text[entry.display.clone()]).unwrap_or(Value::Null)
    }

    /// Lowercased title, summary, and the rest (`appliesTo`, body, tags), each with every
    /// whitespace character turned into a space.
    #[must_use]
    pub fn searchable(&self, entry: &Entry) -> [&str; 3] {
        [&self.text[entry.title.clone()], &self.text[entry.summary.clone()], &self.text[entry.rest.clone()]]
    }
}

/// Stamps of the folders and the profile file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    folders: [Stamp; 2],
    verdicts: Stamp,
    profile: Stamp,
    /// When every card file's stamp was last compared (ns since the epoch).
    swept: u64,
    /// Drawn anew whenever a build changes the body (see [`super::tokens`]).
    generation: u64,
    /// Bytes after the header line: an index cut short or grown is corrupt.
    body: usize,
}

impl Header {
    fn now() -> Self {
        Self {
            folders: FOLDERS.map(|(folder, _)| Stamp::now(&path(folder))),
            verdicts: Stamp::now(&path(VERDICTS)),
            profile: Stamp::now(&path(PROFILE)),
            swept: 0,
            generation: 0,
            body: 0,
        }
    }

    fn holds(&self, now: &Self) -> bool {
        self.folders.iter().zip(&now.folders).all(|(a, b)| a.holds(*b))
            && self.verdicts.holds(now.verdicts)
            && self.profile.holds(now.profile)
    }

    /// The header to record for an index whose build (which compared every card file)
    /// started at `started`.
    fn recorded(&self, started: u64) -> Self {
        Self {
            folders: self.folders.map(|s| s.recorded(started)),
            verdicts: self.verdicts.recorded(started),
            profile: self.profile.recorded(started),
            swept: started,
            generation: self.generation,
            body: self.body,
        }
    }

    fn render(&self) -> String {
        format!(
            "{MAGIC} {} {} {} {} {} {:016x} {}\n",
            self.folders[0].render(),
            self.folders[1].render(),
            self.verdicts.render(),
            self.profile.render(),
            self.swept,
            self.generation,
            self.body
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix(MAGIC)?.strip_prefix(' ')?;
        let (rest, body) = rest.rsplit_once(' ')?;
        let (rest, generation) = rest.rsplit_once(' ')?;
        let (stamps, swept) = rest.rsplit_once(' ')?;
        let stamps: Vec<Stamp> = stamps.split(' ').map(Stamp::parse).collect::<Option<_>>()?;
        let (swept, body) = (swept.parse().ok()?, body.parse().ok()?);
        let generation = u64::from_str_radix(generation, 16).ok()?;
        match stamps[..] {
            [rules, knowledge, verdicts, profile] => {
                Some(Self { folders: [rules, knowledge], verdicts, profile, swept, generation, body })
            }
            _ => None,
        }
    }
}

/// The index as stored.
struct Stored {
    header: Header,
    index: Index,
}

/// Why a stored index was not usable (it is rebuilt).
#[derive(Debug)]
struct Corrupt;

impl Stored {
    /// The header and where the body starts, if the header reads and the body has the
    /// length it records.
    fn header(text: &str) -> Result<(Header, usize), Corrupt> {
        let header_end = text.find('\n').ok_or(Corrupt)?;
        let header = Header::parse(&text[..header_end]).ok_or(Corrupt)?;
        if text.len() - header_end - 1 != header.body {
            return Err(Corrupt);
        }
        Ok((header, header_end + 1))
    }

    fn parse(text: String) -> Result<Self, Corrupt> {
        let (header, body) = Self::header(&text)?;
        let header_end = body - 1;
        let mut entries = Vec::new();
        let mut start = header_end + 1;
        while start < text.len() {
            let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
            entries.push(parse_entry(&text, start..end).ok_or(Corrupt)?);
            start = end + 1;
        }
        let generation = header.generation;
        Ok(Self { header, index: Index { text, entries, generation, body } })
    }
}

/// Fields of an entry line, tab-separated.
const FIELDS: usize = 15;

fn parse_entry(text: &str, line: Range<usize>) -> Option<Entry> {
    let mut ranges: [Range<usize>; FIELDS] = std::array::from_fn(|_| 0..0);
    let mut at = line.start;
    for (i, range) in ranges.iter_mut().enumerate() {
        let end = if i + 1 == FIELDS { line.end } else { text[at..line.end].find('\t').map(|j| at + j)? };
        *range = at..end;
        at = end + 1;
    }
    let field = |i: usize| &text[ranges[i].clone()];
    let kind = match field(3) {
        "rule" => Kind::Rule,
        "knowledge" => Kind::Knowledge,
        "profile" => Kind::Profile,
        _ => return None,
    };
    let status = match field(4) {
        "active" => Status::Active,
        "archived" => Status::Archived,
        _ => return None,
    };
    let verdict = match field(8).as_bytes() {
        [b'-'] => None,
        [applies, state, conflict] => Some(Mark {
            applies: *applies == b'1',
            state: if *state == b's' { State::Suspended } else { State::Valid },
            conflict: *conflict == b'1',
            reasons: match field(9) {
                "[]" => Vec::new(),
                json => serde_json::from_str(json).ok()?,
            },
        }),
        _ => return None,
    };
    Some(Entry {
        line,
        file: unescape(field(0)),
        file_stamp: Stamp::parse(field(1))?,
        id: unescape(field(2)),
        kind,
        status,
        revision: field(5).parse().ok()?,
        content_hash: unescape(field(6)),
        verdict_stamp: Stamp::parse(field(7))?,
        verdict,
        checks: ranges[10].clone(),
        display: ranges[11].clone(),
        title: ranges[12].clone(),
        summary: ranges[13].clone(),
        rest: ranges[14].clone(),
    })
}

/// Escapes a text field so it holds no tab or line break.
fn escape(text: &str) -> String {
    if !text.contains(['\\', '\t', '\n', '\r']) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(text: &str) -> String {
    if !text.contains('\\') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// Lowercased, with every whitespace character a space (search terms hold no whitespace,
/// so what they match is unchanged).
fn searchable(text: &str) -> String {
    text.to_lowercase().chars().map(|c| if c.is_whitespace() { ' ' } else { c }).collect()
}

/// One line of the index, from a card as parsed.
fn line_of(file: &str, file_stamp: Stamp, card: &Card, verdict_stamp: Stamp, verdict: Option<&Mark>) -> String {
    let c = &card.content;
    let mark = verdict.map_or_else(
        || "-\t[]".to_owned(),
        |m| {
            format!(
                "{}{}{}\t{}",
                u8::from(m.applies),
                if m.state == State::Suspended { 's' } else { 'v' },
                u8::from(m.conflict),
                Value::from(m.reasons.clone())
            )
        },
    );
    let checks = serde_json::to_string(&card.checks).unwrap_or_else(|_| "[]".to_owned());
    let mut rest = searchable(&c.applies_to);
    rest.push(' ');
    rest.push_str(&searchable(&c.body));
    for tag in &c.tags {
        rest.push(' ');
        rest.push_str(&searchable(tag));
    }
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{mark}\t{checks}\t{}\t{}\t{}\t{rest}\n",
        escape(file),
        file_stamp.render(),
        escape(&card.id),
        c.kind.as_str(),
        if card.status == Status::Archived { "archived" } else { "active" },
        card.revision,
        escape(&card.content_hash),
        verdict_stamp.render(),
        card.index_entry(),
        searchable(&c.title),
        searchable(&c.summary),
    )
}

/// An index built (or repaired).
struct Built {
    index: Index,
}

impl Built {
    /// Writes the index (its text starts with the header).
    fn save(&self) -> Result<(), Failure> {
        write_unique(&path(FILE), self.index.text.as_bytes())
    }
}

/// A card file found in a folder, with what the previous index said of it.
struct Found {
    file: String,
    kind: Kind,
    previous: Option<usize>,
}

/// Builds the index, reusing from `stored` every line whose card file (and verdict) did not
/// change.
fn build(stored: Option<&Stored>, now: &Header, started: u64) -> Result<Built, Failure> {
    let by_file: HashMap<&str, usize> = stored
        .map(|s| s.index.entries.iter().enumerate().map(|(i, e)| (e.file.as_str(), i)).collect())
        .unwrap_or_default();
    let mut found = Vec::new();
    for (folder, kind) in FOLDERS {
        let dir = path(folder);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Failure::io(&dir, &e)),
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|n| n.ends_with(".md") && n.len() > 3) else { continue };
            let file = format!("{folder}/{name}");
            let previous = by_file.get(file.as_str()).copied();
            found.push(Found { file, kind, previous });
        }
    }
    if now.profile != Stamp::Missing {
        found.push(Found { file: PROFILE.to_owned(), kind: Kind::Profile, previous: by_file.get(PROFILE).copied() });
    }
    let verdicts_unchanged = stored.is_some_and(|s| s.header.verdicts.holds(now.verdicts));
    let verdict_files: Option<HashSet<String>> =
        if verdicts_unchanged { None } else { Some(list_names(&path(VERDICTS), ".json")?) };

    let mut lines: Vec<(String, String)> = Vec::with_capacity(found.len());
    for f in found {
        let old = f.previous.and_then(|i| stored.map(|s| (&s.index, &s.index.entries[i])));
        let file_stamp = Stamp::now(&path(&f.file));
        if file_stamp == Stamp::Missing {
            continue;
        }
        // The card file as it was, with its verdict as it was, when nothing says otherwise.
        if let Some((index, old)) = old
            && old.file_stamp.holds(file_stamp)
        {
            let verdict_same = match &verdict_files {
                None => true,
                Some(names) => {
                    let stamp = if names.contains(&format!("{}.json", old.id)) {
                        Stamp::now(&verdict_path(&old.id))
                    } else {
                        Stamp::Missing
                    };
                    old.verdict_stamp.holds(stamp)
                }
            };
            if verdict_same {
                lines.push((old.id.clone(), format!("{}\n", &index.text[old.line.clone()])));
                continue;
            }
        }
        let Some((card, stamp)) = read_card(&f.file, f.kind) else { continue };
        let (verdict_stamp, mark) = read_mark(&card, verdict_files.as_ref());
        lines.push((
            card.id.clone(),
            line_of(&f.file, stamp.recorded(started), &card, verdict_stamp.recorded(started), mark.as_ref()),
        ));
    }
    lines.sort_by(|a, b| a.0.cmp(&b.0));
    let text: String = lines.into_iter().map(|(_, line)| line).collect();
    // The same body keeps its generation, so its token file stays usable.
    let generation = stored
        .filter(|s| s.index.text.get(s.index.body..) == Some(text.as_str()))
        .map_or_else(|| nonce() | 1, |s| s.index.generation);
    let header = Header { body: text.len(), generation, ..now.recorded(started) };
    let parsed = Stored::parse(format!("{}{text}", header.render())).map_err(|Corrupt| {
        Failure::new("store_corrupt", "the card index just built does not read back (a bug)".to_owned())
    })?;
    Ok(Built { index: parsed.index })
}

fn verdict_path(id: &str) -> PathBuf {
    path(&format!("{VERDICTS}/{id}.json"))
}

/// Reads a card file, with the stamp of what was read (taken from the open handle before
/// reading). Unreadable or unparsable files are skipped and logged, as
/// [`Card::load_all`] does: one bad hand edit must not hide every other card.
fn read_card(file: &str, kind: Kind) -> Option<(Card, Stamp)> {
    let full = path(file);
    let stem = file.rsplit('/').next().and_then(|n| n.strip_suffix(".md")).unwrap_or(file);
    let result = std::fs::File::open(&full)
        .and_then(|mut handle| {
            let stamp = Stamp::of(&handle.metadata()?);
            let mut text = String::new();
            handle.read_to_string(&mut text)?;
            Ok((text, stamp))
        })
        .map_err(|e| Failure::io(&full, &e))
        .and_then(|(text, stamp)| Card::parse(&text, stem, kind).map(|card| (card, stamp)));
    match result {
        Ok(found) => Some(found),
        Err(f) => {
            butler_faculty_kit::host::warn(&format!("skipping {}: {}", full.display(), f.message));
            None
        }
    }
}

/// The verdict of `card`, with the stamp of its file. `names`: the verdict files there are
/// (`None`: unknown, look).
fn read_mark(card: &Card, names: Option<&HashSet<String>>) -> (Stamp, Option<Mark>) {
    if names.is_some_and(|n| !n.contains(&format!("{}.json", card.id))) {
        return (Stamp::Missing, None);
    }
    let file = verdict_path(&card.id);
    let read = std::fs::File::open(&file).and_then(|mut handle| {
        let stamp = Stamp::of(&handle.metadata()?);
        let mut bytes = Vec::new();
        handle.read_to_end(&mut bytes)?;
        Ok((bytes, stamp))
    });
    match read {
        Ok((bytes, stamp)) => match serde_json::from_slice::<Verdict>(&bytes) {
            Ok(v) => (stamp, Some(Mark::of(&v, card.revision, &card.content_hash))),
            // An unreadable verdict keeps the card out rather than let it in unchecked;
            // its stamp is not trusted, so it is read again next time.
            Err(e) => {
                butler_faculty_kit::host::warn(&format!("verdict of {}: {e}", card.id));
                let mark = Mark { applies: true, state: State::Suspended, conflict: false, reasons: Vec::new() };
                (Stamp::Unknown, Some(mark))
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Stamp::Missing, None),
        Err(e) => {
            butler_faculty_kit::host::warn(&format!("verdict of {}: {e}", card.id));
            let mark = Mark { applies: true, state: State::Suspended, conflict: false, reasons: Vec::new() };
            (Stamp::Unknown, Some(mark))
        }
    }
}

/// The names in a folder ending with `suffix`; a missing folder has none.
fn list_names(dir: &Path, suffix: &str) -> Result<HashSet<String>, Failure> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.ends_with(suffix))
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HashSet::new()),
        Err(e) => Err(Failure::io(dir, &e)),
    }
}

/// A number no other call is likely to draw (random keys, and the time).
fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(now_nanos());
    hasher.finish()
}

/// Writes `bytes` to `path` through a temp file of this call's own (concurrent readers may
/// rebuild the index at once) and a rename.
pub(crate) fn write_unique(target: &Path, bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let Some(parent) = target.parent() else {
        return Err(Failure::of_kind(
            butler_faculty_kit::Kind::Internal,
            "io_error",
            format!("{}: no parent folder", target.display()),
        ));
    };
    std::fs::create_dir_all(parent).map_err(|e| Failure::io(parent, &e))?;
    let nonce = nonce();
    let name = target.file_name().and_then(|n| n.to_str()).unwrap_or("index");
    let tmp = parent.join(format!(".{name}.{nonce:016x}.tmp"));
    let result = std::fs::File::create(&tmp)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, target));
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Failure::io(target, &e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_recent_ones_are_not_trusted() {
        for stamp in [Stamp::Missing, Stamp::Unknown, Stamp::At(1_700_000_000_000_000_000, 42)] {
            assert_eq!(Stamp::parse(&stamp.render()), Some(stamp));
        }
        let started = 10 * nanos_of(RACY);
        assert_eq!(Stamp::At(started, 1).recorded(started), Stamp::Unknown);
        assert_eq!(Stamp::At(started - nanos_of(RACY) + 1, 1).recorded(started), Stamp::Unknown);
        assert_eq!(Stamp::At(1, 1).recorded(started), Stamp::At(1, 1));
        assert!(!Stamp::Unknown.holds(Stamp::Unknown));
        assert!(Stamp::Missing.holds(Stamp::Missing));
    }

    #[test]
    fn escaping_round_trips() {
        for text in ["plain", "tab\there", "line\nbreak\r", "back\\slash\\t", "\\"] {
            let escaped = escape(text);
            assert!(!escaped.contains(['\t', '\n', '\r']));
            assert_eq!(unescape(&escaped), text);
        }
    }

    #[test]
    fn searchable_text_keeps_what_terms_match() {
        assert_eq!(searchable("Run\tCARGO\ntest"), "run cargo test");
    }

    #[test]
    fn corrupt_text_is_refused() {
        for text in [
            "",
            "nonsense\n",
            "butler-card-index 3 - - - 0 1 0\n",
            "butler-card-index 2 - - - - 0 0\n",
            "butler-card-index 3 - - - - 0 1 0\nshort\tline\n",
            "butler-card-index 3 - - - - 0 1 11\nshort\tline\n",
            "butler-card-index 3 - - - - 0 1 5\n",
            "butler-card-index 3 - - - - 0 x 0\n",
        ] {
            assert!(Stored::parse(text.to_owned()).is_err(), "{text:?}");
        }
        assert!(Stored::parse("butler-card-index 3 - - - ? 12 00000000000000ff 0\n".to_owned()).is_ok());
    }

    #[test]
    fn lines_read_back() {
        let text = "---\nid: \"a\\tb\"\ntitle: \"Kestrel  Notes\"\nsummary: s\ntags: [\"Birds\"]\nchecks: [{\"type\":\"path\",\"path\":\"docs/a.md\"}]\n---\nBody\twith tab";
        let card = Card::parse(text, "a", Kind::Knowledge).expect("card");
        let mark = Mark { applies: true, state: State::Suspended, conflict: false, reasons: vec!["x: gone".into()] };
        let line = line_of("knowledge/a.md", Stamp::At(5, 6), &card, Stamp::Missing, Some(&mark));
        let header = Header {
            folders: [Stamp::Missing; 2],
            verdicts: Stamp::Missing,
            profile: Stamp::Missing,
            swept: 1,
            generation: 9,
            body: line.len(),
        };
        let stored = Stored::parse(format!("{}{line}", header.render())).map_err(|_| "corrupt").expect("parses");
        let index = stored.index;
        let entry = &index.entries()[0];
        assert_eq!(
            (entry.id.as_str(), entry.file.as_str(), entry.file_stamp),
            (card.id.as_str(), "knowledge/a.md", Stamp::At(5, 6))
        );
        assert_eq!(entry.verdict.as_ref(), Some(&mark));
        assert!(mark.holds() && index.has_checks(entry));
        assert_eq!(index.display(entry), card.index_entry());
        assert_eq!(index.searchable(entry), ["kestrel  notes", "s", " body with tab birds"]);
    }
}
