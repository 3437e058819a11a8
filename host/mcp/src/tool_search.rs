//! Finding tools by what they do, for endpoints with more tools than a model should read:
//! BM25 over each tool's name, title, description and its parameters' names and
//! descriptions, with the owner's own use of each tool as a prior.
//!
//! Text is cut into terms the same way for tools and queries: identifiers split at `_`,
//! `-`, `.`, `/` and case changes (`readFile`, `read_file` and `read-file` are the same two
//! words), Latin words lower-cased and stemmed (English Snowball: `files` and `file` meet),
//! and runs of CJK characters (Chinese, Japanese kana, Korean) cut into single characters and
//! overlapping pairs — the usual way a search engine without a dictionary reads them, so
//! `读取文件` meets `读取本地文件` on `读取` and `文件`. Fields weigh differently: a term in
//! the name counts three times, in the title twice.
//!
//! A request's addresses are read as what they name: a URL or a site as `url`, a file
//! path as `file` ([`things_named`]). A provider the request names (`… in Linear`) counts
//! a little more ([`NAMED_PROVIDER_WEIGHT`]).
//!
//! A request is read as the things it asks for ([`Concept`]s): each of its words with the
//! words [`lexicon`] relates to it, each Chinese word of the lexicon with its English
//! translations. A tool scores for a thing by the best term it has of it, so a tool that
//! says one thing in three words does not outrank one that says two of the things asked.
//!
//! The index (an inverted index: term → the tools it occurs in) is built once per tool list
//! ([`Index::new`]); a search touches only the tools that share a term with the request.

mod lexicon;

use std::collections::HashMap;
use std::sync::LazyLock;

use serde_json::Value;

/// BM25's term-frequency saturation.
const K1: f64 = 2.0;
/// BM25's length normalisation: half of it, since a long description mostly says more
/// about one tool, not about many.
const B: f64 = 0.5;
/// How many times a term of the tool's name counts.
const NAME_WEIGHT: u32 = 3;
/// How many times a term of the tool's title counts.
const TITLE_WEIGHT: u32 = 2;
/// The most bytes of a definition's text that are read (a description can be long).
const MAX_TEXT: usize = 8 * 1024;
/// The most bytes of a request that are read: a sentence or two says what a tool should
/// do, and each word costs a look in every tool.
const MAX_QUERY: usize = 1024;
/// How much a word a request's English words bring in through [`lexicon`] counts, against
/// 1 for the request's own words: a synonym, weaker than what was said.
const RELATED_WEIGHT: f64 = 0.4;
/// How much the terms of a [`Concept`] count beside the best one a tool has: a little, so
/// that a tool saying a thing in several words leads one saying it once, without
/// outranking one that says more of the things asked.
const OTHER_TERMS_WEIGHT: f64 = 0.2;
/// How much a word its Chinese words bring in counts: a translation, the only way a
/// Chinese request meets an English description, nearly as strong as what was said.
const TRANSLATED_WEIGHT: f64 = 0.8;

/// How much more a tool of a provider the request names counts ("… in Linear", "Redis
/// 现在…"): the provider's name is already a term of each of its tools' names, so a little
/// more, enough that its tools lead others that say the same things.
const NAMED_PROVIDER_WEIGHT: f64 = 1.3;

/// [`lexicon`], ready for requests: each group's English words stemmed, and where each
/// word of a request leads.
struct Lexicon {
    /// The stemmed English words of each group.
    english: Vec<Vec<String>>,
    /// Stemmed English word → the groups it is in.
    by_word: HashMap<String, Vec<usize>>,
    /// Chinese word → the groups it is in.
    /// First character → the Chinese words starting with it, each with the groups it is in.
    chinese: HashMap<char, Vec<(&'static str, Vec<usize>)>>,
    /// Stemmed stop words.
    stop: Vec<String>,
}

static LEXICON: LazyLock<Lexicon> = LazyLock::new(|| {
    let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
    let stem = |word: &str| stemmer.stem(&word.to_lowercase()).into_owned();
    let mut lexicon = Lexicon {
        english: Vec::new(),
        by_word: HashMap::new(),
        chinese: HashMap::new(),
        stop: lexicon::STOP_WORDS.iter().map(|w| stem(w)).collect(),
    };
    for (group, words) in lexicon::GROUPS.iter().enumerate() {
        let mut english = Vec::new();
        for word in *words {
            if word.chars().any(is_cjk) {
                let first = word.chars().next().unwrap_or_default();
                let words = lexicon.chinese.entry(first).or_default();
                match words.iter_mut().find(|(known, _)| known == word) {
                    Some((_, groups)) => groups.push(group),
                    None => words.push((word, vec![group])),
                }
            } else if word.contains(' ') {
                english.extend(word.split(' ').map(stem));
            } else {
                let stemmed = stem(word);
                lexicon.by_word.entry(stemmed.clone()).or_default().push(group);
                english.push(stemmed);
            }
        }
        lexicon.english.push(english);
    }
    lexicon
});

/// One thing a request asks for, and the terms any of which says it: a word of the
/// request with the [`lexicon`] words it leads to, or a Chinese word's translations. A tool
/// scores for a concept by the best of its terms, and the others at [`OTHER_TERMS_WEIGHT`]:
/// a tool that says "create" and "new" says one thing twice, and should not outrank one
/// that says both things asked.
type Concept = Vec<(String, f64)>;

/// What `query` (its addresses already named, [`things_named`]), whose terms are `said`,
/// asks for: each English
/// word (but stop words) at 1 with the English words of its [`lexicon`] groups at
/// [`RELATED_WEIGHT`]; each Chinese word of the lexicon (the longest at each place, so
/// `文件夹` is a folder and not a file) with its groups' English words at
/// [`TRANSLATED_WEIGHT`]; each CJK term of the request alone at 1 (for tools described in
/// Chinese).
fn concepts(query: &str, said: &[String]) -> Vec<Concept> {
    let lexicon = &*LEXICON;
    let mut concepts: Vec<Concept> = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let expand = |concept: &mut Concept, groups: &[usize], weight: f64| {
        for &group in groups {
            for word in &lexicon.english[group] {
                match concept.iter_mut().find(|(term, _)| term == word) {
                    Some((_, kept)) => *kept = kept.max(weight),
                    None => concept.push((word.clone(), weight)),
                }
            }
        }
    };
    // Each concept made of English words so far, by its words' groups: words of the same
    // groups (`make` and `new`) say one thing.
    let mut by_groups: Vec<(&[usize], usize)> = Vec::new();
    for term in said {
        if lexicon.stop.contains(term) || !seen.insert(term.clone()) {
            continue;
        }
        let term = term.clone();
        if term.chars().any(is_cjk) {
            concepts.push(vec![(term, 1.0)]);
            continue;
        }
        let groups = lexicon.by_word.get(&term).map(Vec::as_slice).unwrap_or_default();
        if let Some(&(_, same)) = by_groups.iter().find(|(g, _)| !groups.is_empty() && *g == groups) {
            let concept = &mut concepts[same];
            match concept.iter_mut().find(|(t, _)| *t == term) {
                Some((_, kept)) => *kept = 1.0,
                None => concept.push((term, 1.0)),
            }
            continue;
        }
        let mut concept = vec![(term.clone(), 1.0)];
        expand(&mut concept, groups, RELATED_WEIGHT);
        by_groups.push((groups, concepts.len()));
        concepts.push(concept);
    }
    for (_, groups) in chinese_words(query) {
        let mut concept = Vec::new();
        expand(&mut concept, groups, TRANSLATED_WEIGHT);
        concepts.push(concept);
    }
    concepts
}

/// File extensions a request's file names end with: `notes.txt` is a file, while
/// `example.com` is a site.
const FILE_EXTENSIONS: &[&str] = &[
    "txt", "md", "markdown", "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "csv", "tsv", "json", "yaml", "yml",
    "toml", "ini", "cfg", "conf", "env", "log", "xml", "html", "htm", "css", "js", "ts", "tsx", "jsx", "py", "rs",
    "go", "java", "c", "h", "cpp", "rb", "php", "sh", "sql", "db", "sqlite", "png", "jpg", "jpeg", "gif", "svg",
    "webp", "mp3", "mp4", "wav", "zip", "tar", "gz", "epub", "rtf", "odt",
];

/// Top-level domains a request's bare site names end with (`docs.python.org`).
const SITE_DOMAINS: &[&str] = &[
    "com", "org", "net", "io", "dev", "ai", "app", "co", "cn", "uk", "de", "jp", "fr", "edu", "gov", "info", "me",
    "tv", "xyz", "site", "tech", "so", "cc",
];

/// `query` with each address and file path in it replaced by the kind of thing it names:
/// a URL or a site (`https://…`, `example.com`) by `url`, an e-mail address by `email`, a file (`notes.txt`,
/// `~/.bashrc`, `src/main.rs`) by `file` and its extension, another path (`/var/log`) by
/// `path` and its folders' names. A tool says it takes a URL or a file; the words inside
/// an address (`post` in `/post/42`, `docs` in `docs.python.org`) say nothing about what
/// is asked.
fn things_named(query: &str) -> String {
    let mut named = String::with_capacity(query.len());
    let mut rest = query;
    while let Some(start) = rest.find(|c: char| is_address_char(c)) {
        named.push_str(&rest[..start]);
        let token = &rest[start..];
        let end = token.find(|c: char| !is_address_char(c)).unwrap_or(token.len());
        let (word, after) = token.split_at(end);
        let trimmed = word.trim_end_matches(['.', ';', ':', '!', '?', '\'']);
        match kind_of_address(trimmed) {
            Some(kind) => {
                named.push(' ');
                named.push_str(&kind);
                named.push(' ');
                named.push_str(&word[trimmed.len()..]);
            }
            None => named.push_str(word),
        }
        rest = after;
    }
    named.push_str(rest);
    named
}

/// A character of a word that may be an address: anything printable but spaces, CJK and
/// brackets.
fn is_address_char(c: char) -> bool {
    c.is_ascii_graphic() && !matches!(c, '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '"' | '`' | ',')
}

/// What `word` names, when it is an address: `url`, `email`, `file <extension>` or
/// `path <folders>`; `None` for an ordinary word (`readFile`, `v2.0`, `e.g`, `and/or`).
fn kind_of_address(word: &str) -> Option<String> {
    let lower = word.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("www.") {
        return Some("url".to_owned());
    }
    if let Some((user, domain)) = lower.split_once('@')
        && !user.is_empty()
        && !lower.contains('/')
        && domain.rsplit_once('.').is_some_and(|(name, top)| !name.is_empty() && top.len() >= 2)
    {
        return Some("email".to_owned());
    }
    let is_path = lower.contains('/') || lower.starts_with('~');
    let last = lower.rsplit('/').next().unwrap_or_default();
    if let Some((stem, ext)) = last.rsplit_once('.')
        && !ext.is_empty()
        && ext.bytes().all(|b| b.is_ascii_alphanumeric())
    {
        // `Next.js`, `Node.js`: a library, by the way they are written.
        let library = ext == "js" && !is_path && word.starts_with(|c: char| c.is_ascii_uppercase());
        if FILE_EXTENSIONS.contains(&ext) && (is_path || !stem.is_empty()) && !library {
            return Some(format!("file {ext}"));
        }
        if !is_path && SITE_DOMAINS.contains(&ext) && stem.split('.').all(|label| !label.is_empty()) {
            return Some("url".to_owned());
        }
        if is_path && stem.is_empty() {
            // A dotfile: `~/.bashrc`.
            return Some("file".to_owned());
        }
    }
    // `acme/widgets` is as likely a repository as a folder: its words say more.
    let rooted = lower.starts_with(['/', '~', '.']) || lower.matches('/').count() > 1;
    if is_path && rooted && lower.bytes().any(|b| b.is_ascii_alphanumeric()) {
        // Its folders' names may say what it holds (`/aws/lambda/checkout`, `/var/log`).
        return Some(format!("path {}", lower.replace(['/', '~', '.'], " ")));
    }
    None
}

/// The [`lexicon`]'s Chinese words in `text`, leftmost-longest (a word inside a longer one
/// that matched is not read again), each with the groups it is in.
fn chinese_words(text: &str) -> Vec<(&'static str, &'static [usize])> {
    let lexicon = &*LEXICON;
    let mut found: Vec<(&'static str, &'static [usize])> = Vec::new();
    let mut at = 0;
    while let Some(first) = text[at..].chars().next() {
        let rest = &text[at..];
        let longest = lexicon
            .chinese
            .get(&first)
            .into_iter()
            .flatten()
            .filter(|(word, _)| rest.starts_with(word))
            .max_by_key(|(word, _)| word.len());
        match longest {
            Some((word, groups)) => {
                found.push((word, groups));
                at += word.len();
            }
            None => at += first.len_utf8(),
        }
    }
    found
}

/// A search index over one list of tools.
#[derive(Debug, Default)]
pub struct Index {
    /// Term → the tools it occurs in: (position, how often, weighted by field).
    postings: HashMap<String, Vec<(u32, u32)>>,
    /// Each tool's length: the sum of its terms' weighted counts.
    lengths: Vec<u32>,
    /// The providers the tools come from: the first term of a namespace (`github` of
    /// `github__create_issue`), each once.
    providers: Vec<String>,
    /// Each tool's provider, by its place in `providers`, when its name has a namespace.
    provider_of: Vec<Option<u32>>,
    avgdl: f64,
}

/// One match: the tool's position in the list the index was built from, and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Match {
    /// Its position in the list.
    pub index: usize,
    /// Its score (higher is better; comparable within one search only).
    pub score: f64,
}

impl Index {
    /// The index of `tools`, each a tool definition as `tools/list` gives it (`name`,
    /// `title`, `description`, `inputSchema`).
    #[must_use]
    pub fn new(tools: &[Value]) -> Self {
        let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
        let mut postings: HashMap<String, Vec<(u32, u32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(tools.len());
        let mut providers: Vec<String> = Vec::new();
        let mut place_of_provider: HashMap<String, u32> = HashMap::new();
        let mut provider_of = Vec::with_capacity(tools.len());
        for (position, tool) in tools.iter().enumerate() {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            let provider =
                name.split_once("__").and_then(|(namespace, _)| terms_of(namespace, &stemmer).into_iter().next());
            provider_of.push(provider.map(|provider| {
                *place_of_provider.entry(provider).or_insert_with_key(|provider| {
                    providers.push(provider.clone());
                    u32::try_from(providers.len() - 1).unwrap_or(u32::MAX)
                })
            }));
            let mut terms: HashMap<String, u32> = HashMap::new();
            let mut add = |text: &str, weight: u32| {
                for term in terms_of(clip(text, MAX_TEXT), &stemmer) {
                    *terms.entry(term).or_default() += weight;
                }
            };
            let text = |key: &str| tool.get(key).and_then(Value::as_str).unwrap_or_default();
            add(text("name"), NAME_WEIGHT);
            add(text("title"), TITLE_WEIGHT);
            add(text("description"), 1);
            if let Some(properties) = tool.pointer("/inputSchema/properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    add(name, 1);
                    add(property.get("description").and_then(Value::as_str).unwrap_or_default(), 1);
                }
            }
            lengths.push(terms.values().sum());
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            for (term, count) in terms {
                postings.entry(term).or_default().push((position, count));
            }
        }
        let total: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
        #[allow(clippy::cast_precision_loss)]
        let avgdl = if lengths.is_empty() { 0.0 } else { total as f64 / lengths.len() as f64 };
        Self { postings, lengths, providers, provider_of, avgdl }
    }

    /// How many tools it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether it holds none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The best `limit` matches for `query`, best first, each tool's score multiplied by
    /// `prior` of its position (1.0: no opinion); tools that share no term with the query
    /// are left out. Ties keep the list's order.
    #[must_use]
    pub fn search(&self, query: &str, limit: usize, prior: impl Fn(usize) -> f64) -> Vec<Match> {
        let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
        #[allow(clippy::cast_precision_loss)]
        let n = self.lengths.len() as f64;
        let mut scores = vec![0.0; self.lengths.len()];
        // Per tool, within the concept being scored: its best term's score, and the sum.
        let mut best = vec![0.0; self.lengths.len()];
        let mut sum = vec![0.0; self.lengths.len()];
        let mut touched: Vec<usize> = Vec::new();
        let query = things_named(clip(query, MAX_QUERY));
        let said = terms_of(&query, &stemmer);
        let named: Vec<bool> = self.providers.iter().map(|provider| said.contains(provider)).collect();
        for concept in concepts(&query, &said) {
            for (term, weight) in &concept {
                let Some(postings) = self.postings.get(term) else { continue };
                #[allow(clippy::cast_precision_loss)]
                let df = postings.len() as f64;
                let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                for &(doc, tf) in postings {
                    let doc = doc as usize;
                    let tf = f64::from(tf);
                    let norm = K1 * (1.0 - B + B * f64::from(self.lengths[doc]) / self.avgdl.max(1.0));
                    let score = weight * idf * tf * (K1 + 1.0) / (tf + norm);
                    if sum[doc] == 0.0 {
                        touched.push(doc);
                    }
                    sum[doc] += score;
                    if score > best[doc] {
                        best[doc] = score;
                    }
                }
            }
            for doc in touched.drain(..) {
                scores[doc] += best[doc] + OTHER_TERMS_WEIGHT * (sum[doc] - best[doc]);
                best[doc] = 0.0;
                sum[doc] = 0.0;
            }
        }
        let mut matches: Vec<Match> = scores
            .iter()
            .enumerate()
            .filter(|(_, score)| **score > 0.0)
            .map(|(index, score)| {
                let named = self.provider_of[index].is_some_and(|at| named.get(at as usize) == Some(&true));
                Match { index, score: score * prior(index) * if named { NAMED_PROVIDER_WEIGHT } else { 1.0 } }
            })
            .collect();
        matches.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
        matches.truncate(limit);
        matches
    }
}

/// The first `max` bytes of `text` (at a character boundary).
fn clip(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// Whether `c` is written without spaces between words (CJK ideographs, kana, hangul).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF // hiragana, katakana
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xAC00..=0xD7AF // hangul syllables
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0x20000..=0x2FA1F) // CJK extensions B–F, compatibility supplement
}

/// The terms of `text`: Latin words (identifiers split, lower-cased, stemmed) and CJK
/// characters and overlapping pairs.
fn terms_of(text: &str, stemmer: &rust_stemmers::Stemmer) -> Vec<String> {
    let mut terms = Vec::new();
    let mut word = String::new();
    let mut cjk: Vec<char> = Vec::new();
    let mut previous: Option<char> = None;
    let flush_word = |word: &mut String, terms: &mut Vec<String>| {
        if !word.is_empty() {
            let lower = word.to_lowercase();
            terms.push(stemmer.stem(&lower).into_owned());
            word.clear();
        }
    };
    let flush_cjk = |cjk: &mut Vec<char>, terms: &mut Vec<String>| {
        for (i, c) in cjk.iter().enumerate() {
            terms.push(c.to_string());
            if let Some(next) = cjk.get(i + 1) {
                terms.push([*c, *next].iter().collect());
            }
        }
        cjk.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush_word(&mut word, &mut terms);
            cjk.push(c);
        } else if c.is_alphanumeric() {
            flush_cjk(&mut cjk, &mut terms);
            // A case change inside an identifier starts a word: `readFile`, `HTTPServer`.
            let boundary = previous.is_some_and(|p| p.is_lowercase() || p.is_numeric()) && c.is_uppercase();
            if boundary {
                flush_word(&mut word, &mut terms);
            }
            word.push(c);
        } else {
            flush_word(&mut word, &mut terms);
            flush_cjk(&mut cjk, &mut terms);
        }
        previous = Some(c);
    }
    flush_word(&mut word, &mut terms);
    flush_cjk(&mut cjk, &mut terms);
    terms
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tools() -> Vec<Value> {
        vec![
            json!({"name": "files__read_file", "description": "Read the complete contents of a file from the file system.",
                   "inputSchema": {"properties": {"path": {"description": "Path of the file"}}}}),
            json!({"name": "files__write_file", "description": "Create a new file or overwrite an existing one.",
                   "inputSchema": {"properties": {"path": {}, "content": {"description": "Text to write"}}}}),
            json!({"name": "github__createIssue", "title": "Create issue", "description": "Open a new issue in a repository."}),
            json!({"name": "github__list_pull_requests", "description": "List pull requests of a repository."}),
            json!({"name": "notes__搜索笔记", "description": "在本地笔记中搜索关键词，返回匹配的段落。"}),
            json!({"name": "notes__读取笔记", "description": "读取一篇笔记的全文。"}),
            json!({"name": "time__get_current_time", "description": "Get the current time in a time zone."}),
        ]
    }

    fn names(index: &Index, tools: &[Value], query: &str) -> Vec<String> {
        index
            .search(query, 3, |_| 1.0)
            .iter()
            .map(|m| tools[m.index]["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    #[test]
    fn identifiers_are_words_and_english_is_stemmed() {
        let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
        assert_eq!(
            terms_of("readFile read_file read-file", &stemmer),
            ["read", "file", "read", "file", "read", "file"]
        );
        assert_eq!(terms_of("Files HTTPServer v2Api", &stemmer), ["file", "httpserver", "v2", "api"]);
        assert_eq!(terms_of("读取文件", &stemmer), ["读", "读取", "取", "取文", "文", "文件", "件"]);
        assert_eq!(terms_of("open文件now", &stemmer), ["open", "文", "文件", "件", "now"]);
    }

    #[test]
    fn plain_requests_in_english_and_chinese_find_the_tool() {
        let tools = tools();
        let index = Index::new(&tools);
        assert_eq!(index.len(), 7);
        assert_eq!(names(&index, &tools, "read a file")[0], "files__read_file");
        assert_eq!(names(&index, &tools, "open an issue on github")[0], "github__createIssue");
        assert_eq!(names(&index, &tools, "what time is it")[0], "time__get_current_time");
        assert_eq!(names(&index, &tools, "pull requests")[0], "github__list_pull_requests");
        assert_eq!(names(&index, &tools, "搜索我的笔记")[0], "notes__搜索笔记");
        assert_eq!(names(&index, &tools, "读取笔记全文")[0], "notes__读取笔记");
        assert!(index.search("", 5, |_| 1.0).is_empty(), "no terms, no match");
        assert!(index.search("zebra quantum", 5, |_| 1.0).is_empty(), "nothing shared, nothing found");
    }

    #[test]
    fn each_thing_asked_counts_once_and_chinese_words_are_read_whole() {
        let mut tools = tools();
        tools.push(json!({"name": "disk__create_file", "description": "Create a new file: make, add or write a new document."}));
        tools.push(json!({"name": "disk__create_directory", "description": "Create a directory."}));
        let index = Index::new(&tools);
        // `新建` is create/new/make/add, `文件夹` a folder (not `文件`, a file): the tool that
        // says "create" and the folder wins over the one saying "create" four ways.
        assert_eq!(names(&index, &tools, "新建一个文件夹")[0], "disk__create_directory");
        assert_eq!(names(&index, &tools, "create a new directory")[0], "disk__create_directory");
        let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
        let words: Vec<&str> = chinese_words("新建一个文件夹").iter().map(|(word, _)| *word).collect();
        assert_eq!(words, ["新建", "文件夹"]);
        // `make` and `new` are words of one group: one thing asked, the folder the other.
        let request = "make a new folder";
        let asked = concepts(request, &terms_of(request, &stemmer));
        assert_eq!(asked.len(), 2, "{asked:?}");
        assert!(asked[0].contains(&("make".to_owned(), 1.0)) && asked[0].contains(&("new".to_owned(), 1.0)));
        assert_eq!(asked[1][0], ("folder".to_owned(), 1.0));
    }

    /// Everyday requests, in both languages, against tools described the way their servers
    /// describe them (a trial's requests that found nothing before their words were known).
    #[test]
    fn everyday_requests_find_everyday_tools() {
        let mut tools = tools();
        for (name, description) in [
            ("office__get_forecast", "Get the forecast for a city: temperature and conditions."),
            ("office__translate_text", "Translate text into a target language."),
            ("office__create_event", "Create a calendar event with a title, start and end."),
            ("crm__find_contact", "Find a contact by name; returns their email and phone."),
            ("office__convert_currency", "Convert an amount between currencies at today's rate."),
            ("office__add_todo", "Add a todo item with an optional due date."),
        ] {
            tools.push(json!({"name": name, "description": description}));
        }
        let index = Index::new(&tools);
        for (request, tool) in [
            ("明天北京天气怎么样", "office__get_forecast"),
            ("把这段话翻译成英文", "office__translate_text"),
            ("say this in Spanish: good morning", "office__translate_text"),
            ("帮我在日历上安排周五下午三点的会议", "office__create_event"),
            ("查一下李四的电话号码", "crm__find_contact"),
            ("how many yen is 100 dollars", "office__convert_currency"),
            ("remind me to buy milk", "office__add_todo"),
        ] {
            assert!(
                names(&index, &tools, request).iter().take(5).any(|n| n == tool),
                "{request}: {:?}",
                names(&index, &tools, request)
            );
        }
    }

    #[test]
    fn addresses_are_read_as_what_they_name() {
        for (request, named) in [
            ("pull the text of https://blog.example.com/post/42.", "pull the text of  url ."),
            ("open notes.txt, then ~/.bashrc", "open  file txt , then  file "),
            ("list /var/log/ and ~/code/webapp", "list  path  var log   and  path   code webapp "),
            ("访问bilibili.com然后截图", "访问 url 然后截图"),
            ("issue on acme/widgets about Next.js and v2.0", "issue on acme/widgets about Next.js and v2.0"),
            ("read_file e.g. readFile", "read_file e.g. readFile"),
            ("mail bob@example.com, cc @team", "mail  email , cc @team"),
        ] {
            assert_eq!(things_named(request), named, "{request}");
        }
        let tools = vec![
            json!({"name": "web__fetch", "description": "Fetch a URL and return its contents."}),
            json!({"name": "notion__post_page", "description": "Create a page (a post) in a workspace."}),
        ];
        let index = Index::new(&tools);
        // `post` inside the address said nothing: the URL is what the tool takes.
        assert_eq!(names(&index, &tools, "get https://blog.example.com/post/42")[0], "web__fetch");
    }

    #[test]
    fn a_provider_named_in_the_request_leads() {
        let tools = vec![
            json!({"name": "mongo__export", "description": "Export query results to a CSV file."}),
            json!({"name": "linear__create_issue", "description": "Create an issue for a CSV export bug."}),
        ];
        let index = Index::new(&tools);
        assert_eq!(names(&index, &tools, "csv export")[0], "mongo__export");
        assert_eq!(names(&index, &tools, "csv export in Linear")[0], "linear__create_issue");
    }

    #[test]
    fn the_prior_breaks_near_ties_and_the_limit_holds() {
        let tools = tools();
        let index = Index::new(&tools);
        let plain = index.search("file", 5, |_| 1.0);
        assert_eq!(plain.len(), 2);
        let used = |i: usize| if tools[i]["name"] == "files__write_file" { 2.0 } else { 1.0 };
        let preferred = index.search("file", 1, used);
        assert_eq!(preferred.len(), 1);
        assert_eq!(tools[preferred[0].index]["name"], "files__write_file");
        assert!(Index::new(&[]).search("file", 5, |_| 1.0).is_empty());
    }
}
