//! The token file: a derived cache of the card index, `build/cards.tokens`, mapping every
//! word of the cards' searchable text to the index lines of the cards that hold it, so that
//! a search reads a few kilobytes instead of the whole index.
//!
//! A word here is what lies between spaces in the index's searchable text (lowercased, every
//! whitespace character a space). A search term holds no whitespace, so wherever it occurs
//! in a card's text it occurs inside one word: the cards holding a word that contains the
//! term are every card the term can match. The search still decides on the index lines
//! themselves, so the token file only narrows which lines are read.
//!
//! # Format
//! A header line `butler-card-tokens 1 <generation> <vocabulary bytes> <postings bytes>`,
//! then the vocabulary — one line per word, sorted: `word\t<offset>\t<length>` locating its
//! postings — then the postings: for each card holding the word, where its line lies in
//! the index body (varints: start as the difference from the previous start, then length).
//!
//! # How it is checked
//! The index header carries a *generation*: a number drawn anew whenever a build changes the
//! index body, and kept when a build writes the same body again. The token file records the
//! generation it was made from; a token file of another generation, cut short or grown, or
//! missing, is not used (the index is read instead) and is written again from the index.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;

use super::{Failure, path};

/// Where the token file lives, relative to the store.
pub const FILE: &str = "build/cards.tokens";
/// The first words of the header; the number is the format version.
const MAGIC: &str = "butler-card-tokens 1";
/// Ranges of a file closer than this are read in one read: one read of a gap costs less
/// than another call through the sandbox (~10 µs) up to about this size.
const GAP: u64 = 16 * 1024;
/// What is read first of a file whose header gives the rest: the header and, in most stores,
/// the whole vocabulary.
const FIRST_READ: u64 = 64 * 1024;

/// A card's line in the index body (without its line break).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    /// Byte offset from the start of the body.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
}

impl Span {
    /// As a range of the body.
    #[must_use]
    pub fn range(self) -> Range<u64> {
        self.start..self.start + self.len
    }
}

/// Why the token file could not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// Missing, of another generation, or not readable as a token file: write it again.
    Unusable,
    /// A term is in so many words that reading their cards costs about as much as reading
    /// the whole index.
    Broad,
}

/// The token file of an index body: `lines` are its cards' lines (spans into the body, with
/// the searchable text of each: the words are what lies between spaces).
#[must_use]
pub fn encode<'a>(generation: u64, lines: impl IntoIterator<Item = (Span, [&'a str; 3])>) -> Vec<u8> {
    let mut words: HashMap<&str, Vec<Span>> = HashMap::new();
    for (span, fields) in lines {
        for word in fields.iter().flat_map(|f| f.split(' ')).filter(|w| !w.is_empty()) {
            let postings = words.entry(word).or_default();
            if postings.last() != Some(&span) {
                postings.push(span);
            }
        }
    }
    let mut sorted: Vec<(&str, Vec<Span>)> = words.into_iter().collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut vocabulary = String::new();
    let mut postings = Vec::new();
    for (word, mut spans) in sorted {
        spans.sort_unstable();
        let at = postings.len();
        let mut previous = 0;
        for span in spans {
            push_varint(&mut postings, span.start - previous);
            push_varint(&mut postings, span.len);
            previous = span.start;
        }
        vocabulary.push_str(&format!("{word}\t{at}\t{}\n", postings.len() - at));
    }
    let mut out = format!("{MAGIC} {generation:016x} {} {}\n", vocabulary.len(), postings.len()).into_bytes();
    out.extend_from_slice(vocabulary.as_bytes());
    out.extend_from_slice(&postings);
    out
}

/// Writes the token file.
///
/// # Errors
/// `io_error`.
pub fn save(bytes: &[u8]) -> Result<(), Failure> {
    super::index::write_unique(&path(FILE), bytes)
}

/// The generation of the stored token file, if it reads as one whole.
#[must_use]
pub fn stored_generation() -> Option<u64> {
    Opened::open().ok().map(|o| o.generation)
}

/// The cards a search for `terms` can match, as spans of the index body of `generation`
/// (`body`: its length in bytes), sorted: those holding a word that contains the most
/// selective term.
///
/// # Errors
/// [`Miss`] when the token file cannot tell.
pub fn candidates(generation: u64, body: u64, terms: &[String]) -> Result<Vec<Span>, Miss> {
    let mut opened = Opened::open()?;
    if opened.generation != generation {
        return Err(Miss::Unusable);
    }
    let mut best: Option<Vec<Range<u64>>> = None;
    for term in terms {
        let found = opened.words_holding(term)?;
        if best.as_ref().is_none_or(|b| total(b) > total(&found)) {
            best = Some(found);
        }
    }
    let Some(ranges) = best else { return Ok(Vec::new()) };
    // Past this, reading the postings and then the lines they name costs more than reading
    // the index once.
    if total(&ranges) > body / 8 {
        return Err(Miss::Broad);
    }
    let mut spans = Vec::new();
    for bytes in opened.read_postings(&ranges)? {
        decode(&bytes, &mut spans).ok_or(Miss::Unusable)?;
    }
    spans.sort_unstable();
    spans.dedup();
    Ok(spans)
}

fn total(ranges: &[Range<u64>]) -> u64 {
    ranges.iter().map(|r| r.end - r.start).sum()
}

/// A token file opened, its header and vocabulary read.
struct Opened {
    file: File,
    generation: u64,
    vocabulary: Vec<u8>,
    /// Where the postings start in the file.
    postings_at: u64,
    postings_len: u64,
    /// What was read past the vocabulary with it (the start of the postings).
    read_ahead: Vec<u8>,
}

impl Opened {
    fn open() -> Result<Self, Miss> {
        let mut file = File::open(path(FILE)).map_err(|_| Miss::Unusable)?;
        let size = file.metadata().map_err(|_| Miss::Unusable)?.len();
        let mut first = Vec::new();
        (&mut file).take(FIRST_READ).read_to_end(&mut first).map_err(|_| Miss::Unusable)?;
        let header_end = memchr::memchr(b'\n', &first).ok_or(Miss::Unusable)?;
        let header = std::str::from_utf8(&first[..header_end]).map_err(|_| Miss::Unusable)?;
        let (generation, vocabulary_len, postings_len) = parse_header(header).ok_or(Miss::Unusable)?;
        let vocabulary_at = header_end as u64 + 1;
        let postings_at = vocabulary_at.checked_add(vocabulary_len).ok_or(Miss::Unusable)?;
        if postings_at.checked_add(postings_len) != Some(size) {
            return Err(Miss::Unusable);
        }
        let (vocabulary, read_ahead) = if postings_at <= first.len() as u64 {
            let split = usize::try_from(postings_at).map_err(|_| Miss::Unusable)?;
            let read_ahead = first.split_off(split);
            (first.split_off(header_end + 1), read_ahead)
        } else {
            let mut vocabulary = first.split_off(header_end + 1);
            let rest = postings_at - first.len() as u64 - vocabulary.len() as u64;
            (&mut file).take(rest).read_to_end(&mut vocabulary).map_err(|_| Miss::Unusable)?;
            if vocabulary.len() as u64 != vocabulary_len {
                return Err(Miss::Unusable);
            }
            (vocabulary, Vec::new())
        };
        Ok(Self { file, generation, vocabulary, postings_at, postings_len, read_ahead })
    }

    /// The postings (ranges of the postings section) of every word that contains `term`.
    fn words_holding(&self, term: &str) -> Result<Vec<Range<u64>>, Miss> {
        let bytes = &self.vocabulary;
        let mut found = Vec::new();
        let mut next_line = 0;
        for at in memchr::memmem::find_iter(bytes, term.as_bytes()) {
            if at < next_line {
                continue;
            }
            let start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |i| i + 1);
            let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i);
            next_line = end + 1;
            let line = std::str::from_utf8(&bytes[start..end]).map_err(|_| Miss::Unusable)?;
            let mut fields = line.split('\t');
            let (Some(word), Some(offset), Some(len), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(Miss::Unusable);
            };
            // A hit in the numbers, not the word: the word may still hold the term further on.
            if !word.contains(term) {
                continue;
            }
            let offset: u64 = offset.parse().map_err(|_| Miss::Unusable)?;
            let len: u64 = len.parse().map_err(|_| Miss::Unusable)?;
            if offset.checked_add(len).is_none_or(|end| end > self.postings_len) {
                return Err(Miss::Unusable);
            }
            found.push(offset..offset + len);
        }
        Ok(found)
    }

    /// The bytes of each range of the postings section.
    fn read_postings(&mut self, ranges: &[Range<u64>]) -> Result<Vec<Vec<u8>>, Miss> {
        let mut sorted = ranges.to_vec();
        sorted.sort_unstable_by_key(|r| r.start);
        let ahead = self.read_ahead.len() as u64;
        if sorted.iter().all(|r| r.end <= ahead) {
            return Ok(sorted.iter().map(|r| self.read_ahead[to_usize(r.start)..to_usize(r.end)].to_vec()).collect());
        }
        let in_file: Vec<Range<u64>> =
            sorted.iter().map(|r| self.postings_at + r.start..self.postings_at + r.end).collect();
        read_ranges(&mut self.file, &in_file).map_err(|_| Miss::Unusable)
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn parse_header(line: &str) -> Option<(u64, u64, u64)> {
    let mut words = line.strip_prefix(MAGIC)?.strip_prefix(' ')?.split(' ');
    let generation = u64::from_str_radix(words.next()?, 16).ok()?;
    let vocabulary = words.next()?.parse().ok()?;
    let postings = words.next()?.parse().ok()?;
    words.next().is_none().then_some((generation, vocabulary, postings))
}

/// Reads each of `ranges` (sorted by start, not overlapping) of `file`; ranges less than
/// [`GAP`] apart are read in one read.
///
/// # Errors
/// The file's, or `UnexpectedEof` when a range lies past its end.
pub fn read_ranges(file: &mut File, ranges: &[Range<u64>]) -> std::io::Result<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(ranges.len());
    let mut i = 0;
    while i < ranges.len() {
        let start = ranges[i].start;
        let mut j = i + 1;
        while j < ranges.len() && ranges[j].start.saturating_sub(ranges[j - 1].end) < GAP {
            j += 1;
        }
        let end = ranges[i..j].iter().map(|r| r.end).max().unwrap_or(start);
        file.seek(SeekFrom::Start(start))?;
        let mut chunk = vec![0; to_usize(end - start)];
        file.read_exact(&mut chunk)?;
        for r in &ranges[i..j] {
            out.push(chunk[to_usize(r.start - start)..to_usize(r.end - start)].to_vec());
        }
        i = j;
    }
    Ok(out)
}

fn push_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        #[allow(clippy::cast_possible_truncation)]
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    #[allow(clippy::cast_possible_truncation)]
    out.push(n as u8);
}

/// Decodes postings into `spans`; `None` when they do not read as whole postings.
fn decode(mut bytes: &[u8], spans: &mut Vec<Span>) -> Option<()> {
    let mut previous: u64 = 0;
    while !bytes.is_empty() {
        let start = previous.checked_add(varint(&mut bytes)?)?;
        let len = varint(&mut bytes)?;
        spans.push(Span { start, len });
        previous = start;
    }
    Some(())
}

fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut n: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        n |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_round_trip() {
        let spans = [Span { start: 0, len: 5 }, Span { start: 6, len: 300 }, Span { start: 1 << 40, len: 1 }];
        let mut bytes = Vec::new();
        let mut previous = 0;
        for s in spans {
            push_varint(&mut bytes, s.start - previous);
            push_varint(&mut bytes, s.len);
            previous = s.start;
        }
        let mut read = Vec::new();
        assert_eq!(decode(&bytes, &mut read), Some(()));
        assert_eq!(read, spans);
        assert_eq!(decode(&bytes[..bytes.len() - 1], &mut Vec::new()), None, "cut short");
    }

    #[test]
    fn encoded_files_have_a_vocabulary_of_words() {
        let a = Span { start: 0, len: 10 };
        let b = Span { start: 11, len: 20 };
        let bytes = encode(7, [(a, ["kestrel notes", "s", " body  body"]), (b, ["other", "", "`kestrel,"])]);
        let text = String::from_utf8_lossy(&bytes);
        let (header, rest) = text.split_once('\n').expect("header");
        let (generation, vocabulary, postings) = parse_header(header).expect("header reads");
        assert_eq!(generation, 7);
        assert_eq!(vocabulary + postings, rest.len() as u64);
        let words: Vec<&str> =
            rest[..to_usize(vocabulary)].lines().map(|l| l.split('\t').next().unwrap_or("")).collect();
        assert_eq!(words, ["`kestrel,", "body", "kestrel", "notes", "other", "s"]);
    }
}
