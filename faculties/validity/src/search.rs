//! `glob` and `grep`: read-only searches of the validity root, for the agents the host
//! drives (offered to them as the tools `butler__glob` and `butler__grep`).
//!
//! Both walk the root under the rules of [`files`](crate::files): what a check may not look
//! at, a search never lists, never reads and never mentions (see that module's doc). They
//! return paths relative to the root, as reached.
//!
//! - `glob {pattern, path?, limit?}` → `{paths, truncated}`: the regular files whose path
//!   below `path` (default: the root) matches the glob `pattern`, sorted.
//! - `grep {pattern, path?, glob?, ignoreCase?, limit?}` → `{matches: [{path, line, text}],
//!   truncated, filesSearched}`: the lines matching the regular expression `pattern`, in
//!   the UTF-8 files under `path` (a folder or one file) that `glob` lets through.
//!
//! **Globs** are translated here into a regular expression for the `regex` crate grep needs
//! anyway (`globset` would work in the sandbox too, but it turns on `regex`'s every search
//! engine and doubles the component's size): `*` and `?` stay within one folder, `**` as a
//! whole segment spans folders (`**/` also none), `[abc]`, `[a-z]`, `[!a]` are classes,
//! `{a,b}` alternatives, `\` escapes. A grep `glob` without `/` is matched against the file
//! name alone, as ripgrep does (`*.rs` is every Rust file); with one, against the path below
//! `path`.
//!
//! **Bounds**: a walk's own (`files::MAX_ENTRIES`, `files::MAX_DEPTH`), a limit of results,
//! and for grep [`MAX_SEARCHED`] bytes of files read in all; files larger than the quote
//! checks read ([`MAX_READ`](crate::MAX_READ)) and files that are not UTF-8 text are not
//! searched. When a bound or the limit stops a search early, `truncated` says so.

use std::ops::ControlFlow;

use butler_faculty_kit::{Failure, Outcome, Value, clip, json};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;

use crate::files::{Found, Root, Start};

/// Paths `glob` returns when the caller gives no limit, and at most.
const GLOB_LIMIT: (u64, u64) = (200, 1000);
/// Matching lines `grep` returns when the caller gives no limit, and at most.
const GREP_LIMIT: (u64, u64) = (100, 500);
/// A matching line is cut to this many characters.
const MAX_LINE: usize = 300;
/// Bytes one `grep` reads at most, all files together.
pub const MAX_SEARCHED: u64 = 64 * 1024 * 1024;
/// Characters a pattern (or a path) has at most.
const MAX_PATTERN: usize = 1000;
/// Bytes a compiled pattern takes at most (the `regex` crate's own default is 10 MiB).
const MAX_COMPILED: usize = 2 * 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GlobArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    limit: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct GrepArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    glob: Option<String>,
    #[serde(default)]
    ignore_case: Option<bool>,
    #[serde(default)]
    limit: Option<u64>,
}

/// `glob {pattern, path?, limit?}` in `root`.
pub fn glob(root: &Root, input: Value) -> Outcome {
    let args: GlobArgs = butler_store::args::parse(input)?;
    let limit = limit(args.limit, GLOB_LIMIT)?;
    let pattern = args.pattern.strip_prefix("./").unwrap_or(&args.pattern);
    let matcher = Glob::new(pattern).map_err(|e| Failure::new("invalid_pattern", format!("pattern: {e}")))?;
    let folder = folder(args.path.as_deref())?;
    let start = start(root, &folder, args.path.as_deref(), false)?;
    if start.is_file() {
        return Err(Failure::invalid_args("path: names a file; glob searches a folder"));
    }
    // The pattern's literal leading folders are where the walk starts (missing or refused:
    // then nothing matches), and a pattern without `**` says how deep to go.
    let (prefix, depth) = literal_prefix(pattern);
    let Ok(start) =
        (if prefix.is_empty() { Ok(start) } else { root.search_start(&[&folder[..], &prefix].concat(), prefix.len()) })
    else {
        return Ok(json!({"paths": [], "truncated": false}));
    };
    let mut paths = Vec::new();
    let mut truncated = root.search(&start, depth.unwrap_or(usize::MAX), &mut |found: Found| {
        if !matcher.matches(&found.below) {
            return ControlFlow::Continue(());
        }
        paths.push(found.path);
        if paths.len() > limit { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    });
    if paths.len() > limit {
        paths.truncate(limit);
        truncated = true;
    }
    paths.sort_unstable();
    Ok(json!({"paths": paths, "truncated": truncated}))
}

/// `grep {pattern, path?, glob?, ignoreCase?, limit?}` in `root`.
pub fn grep(root: &Root, input: Value) -> Outcome {
    let args: GrepArgs = butler_store::args::parse(input)?;
    let limit = limit(args.limit, GREP_LIMIT)?;
    if args.pattern.is_empty() || args.pattern.chars().count() > MAX_PATTERN {
        return Err(Failure::invalid_args(format!("pattern: must be 1 to {MAX_PATTERN} characters")));
    }
    let regex = RegexBuilder::new(&args.pattern)
        .case_insensitive(args.ignore_case.unwrap_or(false))
        .multi_line(true)
        .crlf(true)
        .size_limit(MAX_COMPILED)
        .build()
        .map_err(|e| Failure::new("invalid_pattern", format!("pattern: {e}")))?;
    let filter = match args.glob.as_deref() {
        Some(glob) => {
            let glob = glob.strip_prefix("./").unwrap_or(glob);
            let matcher = Glob::new(glob).map_err(|e| Failure::new("invalid_pattern", format!("glob: {e}")))?;
            Some((matcher, !glob.contains('/')))
        }
        None => None,
    };
    let folder = folder(args.path.as_deref())?;
    let start = start(root, &folder, args.path.as_deref(), true)?;

    let mut matches: Vec<(String, usize, String)> = Vec::new();
    let mut searched = 0_u64;
    let mut files = 0_usize;
    let mut over = false;
    let mut bytes = Vec::new();
    let mut truncated = root.search(&start, usize::MAX, &mut |found: Found| {
        if let Some((matcher, by_name)) = &filter {
            let name = found.below.rsplit('/').next().unwrap_or_default();
            if !matcher.matches(if *by_name { name } else { &found.below }) {
                return ControlFlow::Continue(());
            }
        }
        if found.size > crate::MAX_READ {
            return ControlFlow::Continue(());
        }
        if searched + found.size > MAX_SEARCHED {
            over = true;
            return ControlFlow::Break(());
        }
        if root.read_found(&found, crate::MAX_READ, &mut bytes).is_err() {
            return ControlFlow::Continue(());
        }
        searched += bytes.len() as u64;
        // Binary: not UTF-8, or UTF-8 with NUL bytes (UTF-16 text, some data formats).
        let Ok(text) = std::str::from_utf8(&bytes) else { return ControlFlow::Continue(()) };
        if memchr::memchr(0, bytes.as_slice()).is_some() {
            return ControlFlow::Continue(());
        }
        files += 1;
        for_each_matching_line(&regex, text, |line, content| {
            matches.push((found.path.clone(), line, clip(content, MAX_LINE)));
            if matches.len() > limit { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        })
    });
    truncated |= over;
    if matches.len() > limit {
        matches.truncate(limit);
        truncated = true;
    }
    matches.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let matches: Vec<Value> =
        matches.into_iter().map(|(path, line, text)| json!({"path": path, "line": line, "text": text})).collect();
    Ok(json!({"matches": matches, "truncated": truncated, "filesSearched": files}))
}

/// Calls `each` with the number (from 1) and text (without its line break) of every line
/// of `text` in which `regex` matches — a line once, however often it matches; a match
/// across lines counts for the line it starts on — until it breaks.
fn for_each_matching_line(
    regex: &Regex,
    text: &str,
    mut each: impl FnMut(usize, &str) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let bytes = text.as_bytes();
    let (mut at, mut line, mut counted) = (0, 1, 0);
    // Past the last line break there is a line only if it has text.
    while at < text.len() {
        let Some(found) = regex.find_at(text, at) else { break };
        if found.start() >= text.len() {
            break;
        }
        let start = memchr::memrchr(b'\n', &bytes[..found.start()]).map_or(0, |i| i + 1);
        let end = memchr::memchr(b'\n', &bytes[found.start()..]).map_or(text.len(), |i| found.start() + i);
        line += memchr::memchr_iter(b'\n', &bytes[counted..start]).count();
        counted = start;
        let content = &text[start..end];
        each(line, content.strip_suffix('\r').unwrap_or(content))?;
        at = end + 1;
    }
    ControlFlow::Continue(())
}

/// The limit asked for, defaulted and bounded: `(default, most)`.
fn limit(asked: Option<u64>, (default, most): (u64, u64)) -> Result<usize, Failure> {
    let limit = asked.unwrap_or(default);
    if !(1..=most).contains(&limit) {
        return Err(Failure::invalid_args(format!("limit: must be 1 to {most}")));
    }
    usize::try_from(limit).map_err(|_| Failure::invalid_args("limit: out of range"))
}

/// The segments of a caller's `path`, spelling checked as check paths are: relative,
/// without `..` or hidden segments (`.` and empty segments are dropped; none: the root).
fn folder(path: Option<&str>) -> Result<Vec<&str>, Failure> {
    let Some(path) = path else { return Ok(Vec::new()) };
    let bad = |why: &str| Err(Failure::invalid_args(format!("path `{}`: {why}", clip(path, 80))));
    if path.chars().count() > MAX_PATTERN {
        return bad("too long");
    }
    if path.starts_with('/') {
        return bad("must be relative to the validity root (as the paths searches return), not absolute");
    }
    if path.contains('\\') || path.contains('\0') {
        return bad("must not contain backslashes or NUL");
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
    if segments.contains(&"..") {
        return bad("must not contain `..`: searches stay inside the validity root");
    }
    if segments.iter().any(|s| s.starts_with('.')) {
        return bad("hidden files and folders (names starting with `.`) are never searched");
    }
    Ok(segments)
}

/// Where a search starts; one failure for every place it cannot (see
/// [`Root::search_start`]).
fn start(root: &Root, folder: &[&str], path: Option<&str>, file_too: bool) -> Result<Start, Failure> {
    root.search_start(folder, 0).map_err(|_| {
        let what = if file_too { "folder or file" } else { "folder" };
        Failure::not_found(format!("path: no {what} `{}` to search in the validity root", clip(path.unwrap_or(""), 80)))
    })
}

/// The literal folders a glob starts with (none: it starts with a wildcard), and how many
/// folders deep below them it can match (`None`: any depth, or not worked out).
fn literal_prefix(pattern: &str) -> (Vec<&str>, Option<usize>) {
    let segments: Vec<&str> = pattern.split('/').collect();
    // The folders: every segment but the last (the file's name).
    let folders = &segments[..segments.len() - 1];
    let literal = folders
        .iter()
        .take_while(|s| !s.is_empty() && !s.starts_with('.') && !s.contains(['*', '?', '[', '{', '\\']))
        .count();
    // Only `**` spans folders; braces and classes might hold a `/` (not worked out).
    let fixed = !segments[literal..].iter().any(|s| s.contains("**") || s.contains(['[', '{', '\\']));
    (folders[..literal].to_vec(), fixed.then_some(folders.len() - literal))
}

/// A glob pattern over `/`-separated relative paths (see the module doc).
#[derive(Debug)]
pub struct Glob(Regex);

impl Glob {
    /// Compiles `pattern`.
    ///
    /// # Errors
    /// What is wrong with it, in words.
    pub fn new(pattern: &str) -> Result<Self, String> {
        if pattern.is_empty() || pattern.chars().count() > MAX_PATTERN {
            return Err(format!("must be 1 to {MAX_PATTERN} characters"));
        }
        if pattern.starts_with('/') {
            return Err("must be relative (to `path`, default the validity root), not absolute".to_owned());
        }
        let regex = translate(pattern)?;
        RegexBuilder::new(&regex).size_limit(MAX_COMPILED).build().map(Self).map_err(|e| e.to_string())
    }

    /// Whether `path` matches.
    #[must_use]
    pub fn matches(&self, path: &str) -> bool {
        self.0.is_match(path)
    }
}

/// The regular expression of a glob.
fn translate(glob: &str) -> Result<String, String> {
    let chars: Vec<char> = glob.chars().collect();
    let mut out = String::from("(?s)^");
    let mut braces = 0_usize;
    let mut i = 0;
    // Where a segment starts or ends: the pattern's ends, `/`, and inside braces `{`, `,`, `}`.
    let starts_segment =
        |i: usize, braces: usize| i == 0 || chars[i - 1] == '/' || (braces > 0 && matches!(chars[i - 1], '{' | ','));
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                let next = chars.get(i + 2).copied();
                let ends_segment = next.is_none_or(|n| n == '/' || (braces > 0 && matches!(n, ',' | '}')));
                if starts_segment(i, braces) && ends_segment {
                    if next == Some('/') {
                        // `**/`: any folders, or none.
                        out.push_str("(?:[^/]*/)*");
                        i += 3;
                    } else {
                        // `**` at the end of the pattern (or of an alternative): anything below.
                        out.push_str(".*");
                        i += 2;
                    }
                } else {
                    out.push_str("[^/]*");
                    i += 2;
                }
            }
            '*' => {
                out.push_str("[^/]*");
                i += 1;
            }
            '?' => {
                out.push_str("[^/]");
                i += 1;
            }
            '[' => i = class(&chars, i + 1, &mut out)?,
            '{' => {
                braces += 1;
                out.push_str("(?:");
                i += 1;
            }
            ',' if braces > 0 => {
                out.push('|');
                i += 1;
            }
            '}' if braces > 0 => {
                braces -= 1;
                out.push(')');
                i += 1;
            }
            '\\' => {
                let Some(&next) = chars.get(i + 1) else { return Err("ends with a lone `\\`".to_owned()) };
                literal(next, &mut out);
                i += 2;
            }
            _ => {
                literal(c, &mut out);
                i += 1;
            }
        }
    }
    if braces > 0 {
        return Err("a `{` is not closed".to_owned());
    }
    out.push('$');
    Ok(out)
}

/// A character class from just after its `[`; the index after its `]`.
fn class(chars: &[char], mut i: usize, out: &mut String) -> Result<usize, String> {
    let negated = matches!(chars.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut items = String::new();
    let mut first = true;
    loop {
        let Some(&c) = chars.get(i) else { return Err("a `[` is not closed".to_owned()) };
        // A `]` first is a member, not the end.
        if c == ']' && !first {
            i += 1;
            break;
        }
        first = false;
        match (chars.get(i + 1), chars.get(i + 2)) {
            (Some('-'), Some(&high)) if high != ']' => {
                if high < c {
                    return Err(format!("the range `{c}-{high}` is backwards"));
                }
                literal(c, &mut items);
                items.push('-');
                literal(high, &mut items);
                i += 3;
            }
            _ => {
                literal(c, &mut items);
                i += 1;
            }
        }
    }
    // A negated class never matches `/` (it stays within one folder, like `?`).
    out.push_str(if negated { "[^/" } else { "[" });
    out.push_str(&items);
    out.push(']');
    Ok(i)
}

/// `c`, matched literally (escaped if it means anything to a regular expression, in a class too).
fn literal(c: char, out: &mut String) {
    if c.is_alphanumeric() || c == '_' || c == '/' || c == ' ' {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:x}}}", u32::from(c)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::{MAX_DEPTH, MAX_ENTRIES};
    use std::os::unix::fs::symlink;

    /// `<tmp>/root` (the validity root, internals `state` and manifests `butler.json`) and
    /// `<tmp>/outside` beside it.
    fn tree() -> (tempfile::TempDir, Root) {
        let tmp = tempfile::tempdir().expect("temp");
        let base = tmp.path().join("root");
        let write = |path: &str, text: &[u8]| {
            let path = base.join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        write("docs/a.md", b"# Title\nhello world\nHELLO again\nbye\n");
        write("docs/b.txt", b"nothing here\n");
        write("docs/deep/c.md", b"deep hello");
        write("docs/deep/deeper/d.rs", b"fn main() {}\n");
        write("src/main.rs", b"fn main() {\n    println!(\"hello\");\n}\n");
        write("src/lib.rs", b"//! lib\n");
        write("notes/orig.md", b"hello hard link\n");
        write("notes/crlf.txt", b"one\r\nhello two\r\n");
        write("notes/bin.dat", b"hello\xff\xfe binary\n");
        write("notes/nul.txt", b"hello\0nul\n");
        write(".hidden/secret.md", b"hello secret\n");
        write("docs/.env", b"hello env\n");
        write("state/owner-token", b"hello token\n");
        write("state/note.md", b"hello state\n");
        write("tools/x/butler.json", b"{\"hello\": 1}\n");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("o.md"), "hello outside\n").expect("write");
        std::fs::hard_link(base.join("notes/orig.md"), tmp.path().join("outside/hard.md")).expect("hard link");
        let link = |target: &str, at: &str| symlink(target, base.join(at)).expect("symlink");
        link("deep/c.md", "docs/link.md");
        link("../../outside", "docs/out");
        link("../../outside/o.md", "docs/out.md");
        link(outside.to_str().expect("utf-8"), "docs/abs");
        link("../state/owner-token", "docs/tok.md");
        link("../state", "docs/state-dir");
        link("../.hidden/secret.md", "docs/hid.md");
        link("../.hidden", "docs/hid-dir");
        link("../tools/x/butler.json", "docs/man.md");
        link("..", "docs/deep/up");
        link("nowhere.md", "docs/dangling.md");
        let root = Root::for_tests(&base, &["state"], &["butler.json"]);
        (tmp, root)
    }

    fn paths(answer: &Value) -> Vec<&str> {
        answer["paths"].as_array().expect("paths").iter().map(|p| p.as_str().expect("str")).collect()
    }

    fn glob_paths(root: &Root, args: Value) -> Vec<String> {
        let answer = glob(root, args).expect("glob");
        assert_eq!(answer["truncated"], json!(false), "{answer}");
        paths(&answer).into_iter().map(str::to_owned).collect()
    }

    fn lines(answer: &Value) -> Vec<(String, u64, String)> {
        answer["matches"]
            .as_array()
            .expect("matches")
            .iter()
            .map(|m| {
                let text = |k: &str| m[k].as_str().expect(k).to_owned();
                (text("path"), m["line"].as_u64().expect("line"), text("text"))
            })
            .collect()
    }

    fn owned(list: &[(&str, u64, &str)]) -> Vec<(String, u64, String)> {
        list.iter().map(|(p, l, t)| ((*p).to_owned(), *l, (*t).to_owned())).collect()
    }

    #[test]
    fn glob_patterns() {
        let (_tmp, root) = tree();
        // Everything a search may see: no hidden, internal, manifest, hard-linked or
        // outside file; links inside the root by the name they have; the loop `up` entered
        // once (it resolves to `docs`, an ancestor of `docs/deep`: not entered again).
        assert_eq!(
            glob_paths(&root, json!({"pattern": "**"})),
            [
                "docs/a.md",
                "docs/b.txt",
                "docs/deep/c.md",
                "docs/deep/deeper/d.rs",
                "docs/link.md",
                "notes/bin.dat",
                "notes/crlf.txt",
                "notes/nul.txt",
                "src/lib.rs",
                "src/main.rs",
            ]
        );
        assert_eq!(glob_paths(&root, json!({"pattern": "**/*.md"})), ["docs/a.md", "docs/deep/c.md", "docs/link.md"]);
        assert_eq!(glob_paths(&root, json!({"pattern": "src/*.rs"})), ["src/lib.rs", "src/main.rs"]);
        assert_eq!(glob_paths(&root, json!({"pattern": "./src/m*.rs"})), ["src/main.rs"]);
        assert_eq!(glob_paths(&root, json!({"pattern": "*/*.rs"})), ["src/lib.rs", "src/main.rs"]);
        assert_eq!(glob_paths(&root, json!({"pattern": "**/*.{rs,txt}"})).len(), 6);
        assert_eq!(
            glob_paths(&root, json!({"pattern": "{src,docs/deep}/**/*.rs"})),
            ["docs/deep/deeper/d.rs", "src/lib.rs", "src/main.rs"]
        );
        assert_eq!(glob_paths(&root, json!({"pattern": "docs/?.*"})), ["docs/a.md", "docs/b.txt"]);
        assert_eq!(glob_paths(&root, json!({"pattern": "docs/[!a].*"})), ["docs/b.txt"]);
        assert_eq!(glob_paths(&root, json!({"pattern": "docs/[a-b].md"})), ["docs/a.md"]);
        assert_eq!(glob_paths(&root, json!({"pattern": "docs/**"})).len(), 5);
        // `*` stays in its folder; `**/` may be no folder at all.
        assert!(glob_paths(&root, json!({"pattern": "*.md"})).is_empty());
        assert_eq!(glob_paths(&root, json!({"pattern": "docs/**/a.md"})), ["docs/a.md"]);
        // Literal folders that are missing, hidden or internal: nothing, not a failure.
        for pattern in ["nope/*.md", ".hidden/*.md", "state/*", "state/**", "docs/state-dir/*", "docs/hid-dir/*"] {
            assert!(glob_paths(&root, json!({"pattern": pattern})).is_empty(), "{pattern}");
        }
    }

    #[test]
    fn glob_from_a_folder() {
        let (_tmp, root) = tree();
        assert_eq!(glob_paths(&root, json!({"pattern": "*.md", "path": "docs"})), ["docs/a.md", "docs/link.md"]);
        // `up` leads to `docs`, above the start: entered (once — its `deep` is the start).
        assert_eq!(
            glob_paths(&root, json!({"pattern": "**/*.md", "path": "./docs/deep/"})),
            ["docs/deep/c.md", "docs/deep/up/a.md", "docs/deep/up/link.md"]
        );
        assert_eq!(glob_paths(&root, json!({"pattern": "*", "path": "docs/deep/up/deep"})), ["docs/deep/up/deep/c.md"]);
        assert_eq!(glob_paths(&root, json!({"pattern": "**/*.rs", "path": ""})).len(), 3);
        // Spellings that leave the root or name hidden places: clear failures.
        for bad in ["..", "docs/../..", "docs/..", "/etc", "/validity/docs", ".hidden", "docs/.env", "a\\b"] {
            let failure = glob(&root, json!({"pattern": "*", "path": bad})).expect_err(bad);
            assert_eq!(failure.code, "invalid_args", "{bad}: {}", failure.message);
        }
        // Missing, a file, internal, through a link to an internal or hidden folder, or out
        // of the root: one answer, which says nothing of what is there.
        for missing in
            ["nope", "state", "docs/state-dir", "docs/hid-dir", "docs/out", "docs/abs", "tools/x/butler.json"]
        {
            let failure = glob(&root, json!({"pattern": "*", "path": missing})).expect_err(missing);
            assert_eq!(failure.code, "not_found", "{missing}");
            assert_eq!(failure.message, format!("path: no folder `{missing}` to search in the validity root"));
        }
        assert_eq!(glob(&root, json!({"pattern": "*", "path": "docs/a.md"})).expect_err("file").code, "invalid_args");
    }

    #[test]
    fn glob_arguments_and_limits() {
        let (_tmp, root) = tree();
        let answer = glob(&root, json!({"pattern": "**", "limit": 3})).expect("glob");
        assert_eq!(answer["truncated"], json!(true));
        // The first three the walk met (folders in name order), sorted.
        assert_eq!(paths(&answer), ["docs/a.md", "docs/b.txt", "docs/deep/c.md"]);
        let exact = glob(&root, json!({"pattern": "src/*", "limit": 2})).expect("glob");
        assert_eq!((paths(&exact).len(), &exact["truncated"]), (2, &json!(false)));
        for bad in [
            json!({"pattern": "*", "limit": 0}),
            json!({"pattern": "*", "limit": 1001}),
            json!({"pattern": ""}),
            json!({"pattern": "/abs/*"}),
            json!({"pattern": "a[b"}),
            json!({"pattern": "{a,b"}),
            json!({"pattern": "[z-a]"}),
            json!({"pattern": "*", "extra": 1}),
            json!({}),
        ] {
            let failure = glob(&root, bad.clone()).expect_err(&bad.to_string());
            assert!(matches!(failure.code.as_str(), "invalid_args" | "invalid_pattern"), "{bad}: {}", failure.code);
        }
        assert!(glob(&root, json!({"pattern": "*", "limit": 1000})).is_ok());
    }

    #[test]
    fn grep_lines() {
        let (_tmp, root) = tree();
        let answer = grep(&root, json!({"pattern": "hello"})).expect("grep");
        assert_eq!(
            lines(&answer),
            owned(&[
                ("docs/a.md", 2, "hello world"),
                ("docs/deep/c.md", 1, "deep hello"),
                ("docs/link.md", 1, "deep hello"),
                ("notes/crlf.txt", 2, "hello two"),
                ("src/main.rs", 2, "    println!(\"hello\");"),
            ])
        );
        assert_eq!(answer["truncated"], json!(false));
        // Every UTF-8 file without NUL: not bin.dat, nul.txt.
        assert_eq!(answer["filesSearched"], json!(8));

        let folded = grep(&root, json!({"pattern": "^hello", "ignoreCase": true, "path": "docs"})).expect("grep");
        assert_eq!(lines(&folded), owned(&[("docs/a.md", 2, "hello world"), ("docs/a.md", 3, "HELLO again")]));
        assert_eq!(folded["filesSearched"], json!(5));
        // One file as `path`; `$` before a CRLF line break.
        let one = grep(&root, json!({"pattern": "two$", "path": "notes/crlf.txt"})).expect("grep");
        assert_eq!((lines(&one), &one["filesSearched"]), (owned(&[("notes/crlf.txt", 2, "hello two")]), &json!(1)));
        for refused in ["notes/orig.md", "docs/tok.md", "docs/man.md", "docs/hid.md", "docs/out.md"] {
            let failure = grep(&root, json!({"pattern": "hello", "path": refused})).expect_err(refused);
            assert_eq!(failure.code, "not_found", "{refused}");
        }
    }

    #[test]
    fn grep_filters_and_failures() {
        let (_tmp, root) = tree();
        // A glob without `/` is matched against the name, at any depth.
        let md = grep(&root, json!({"pattern": "hello", "glob": "*.md"})).expect("grep");
        assert_eq!(md["filesSearched"], json!(3));
        assert_eq!(lines(&md).len(), 3);
        let below = grep(&root, json!({"pattern": "fn", "glob": "deep/**", "path": "docs"})).expect("grep");
        assert_eq!(lines(&below), owned(&[("docs/deep/deeper/d.rs", 1, "fn main() {}")]));
        let rust = grep(&root, json!({"pattern": "fn", "glob": "src/*.{rs,toml}"})).expect("grep");
        assert_eq!(lines(&rust), owned(&[("src/main.rs", 1, "fn main() {")]));

        let failure = grep(&root, json!({"pattern": "hel(lo"})).expect_err("invalid");
        assert_eq!(failure.code, "invalid_pattern");
        assert!(
            failure.message.starts_with("pattern: regex parse error") && failure.message.contains("unclosed group")
        );
        assert_eq!(grep(&root, json!({"pattern": "x", "glob": "[a"})).expect_err("glob").code, "invalid_pattern");
        for bad in [
            json!({"pattern": ""}),
            json!({"pattern": "x", "limit": 501}),
            json!({"pattern": "x", "path": "../root"}),
            json!({"pattern": "x", "ignoreCase": "yes"}),
        ] {
            assert_eq!(grep(&root, bad.clone()).expect_err(&bad.to_string()).code, "invalid_args", "{bad}");
        }
    }

    #[test]
    fn grep_limits_and_large_files() {
        let (tmp, root) = tree();
        let limited = grep(&root, json!({"pattern": "hello", "limit": 2})).expect("grep");
        assert_eq!(limited["truncated"], json!(true));
        assert_eq!(lines(&limited), owned(&[("docs/a.md", 2, "hello world"), ("docs/deep/c.md", 1, "deep hello")]));
        let exact = grep(&root, json!({"pattern": "hello", "limit": 5})).expect("grep");
        assert_eq!((lines(&exact).len(), &exact["truncated"]), (5, &json!(false)));

        // Long lines are cut; files over MAX_READ are not searched.
        let base = tmp.path().join("root");
        std::fs::write(base.join("long.txt"), format!("needle {}\n", "x".repeat(1000))).expect("write");
        let mut big = vec![b'a'; usize::try_from(crate::MAX_READ).expect("size")];
        big.extend_from_slice(b"\nneedle\n");
        std::fs::write(base.join("big.txt"), big).expect("write");
        let answer = grep(&root, json!({"pattern": "needle"})).expect("grep");
        let found = lines(&answer);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].0.as_str(), found[0].1), ("long.txt", 1));
        assert_eq!(found[0].2.chars().count(), MAX_LINE + 1);
        assert!(found[0].2.starts_with("needle xxx") && found[0].2.ends_with('…'));
    }

    #[test]
    fn walks_are_bounded() {
        let tmp = tempfile::tempdir().expect("temp");
        let mut deep = tmp.path().to_path_buf();
        for _ in 0..=MAX_DEPTH {
            deep.push("d");
            std::fs::create_dir(&deep).expect("mkdir");
            std::fs::write(deep.join("f.txt"), "x").expect("write");
        }
        let root = Root::for_tests(tmp.path(), &[], &[]);
        let answer = glob(&root, json!({"pattern": "**/f.txt", "limit": 1000})).expect("glob");
        assert_eq!(answer["truncated"], json!(true));
        // Folders 1 to 64 below the root are listed, the 65th is not.
        assert_eq!(paths(&answer).len(), MAX_DEPTH);
        // A pattern that cannot match that deep does not reach the bound.
        let shallow = glob(&root, json!({"pattern": "d/d/f.txt"})).expect("glob");
        assert_eq!((paths(&shallow), &shallow["truncated"]), (vec!["d/d/f.txt"], &json!(false)));

        let wide = tempfile::tempdir().expect("temp");
        std::fs::create_dir(wide.path().join("many")).expect("mkdir");
        for i in 0..MAX_ENTRIES {
            std::fs::write(wide.path().join(format!("many/{i:05}")), "").expect("write");
        }
        std::fs::write(wide.path().join("z.txt"), "").expect("write");
        let root = Root::for_tests(wide.path(), &[], &[]);
        let answer = glob(&root, json!({"pattern": "**/z.txt"})).expect("glob");
        // The root's two entries and 19 998 of `many`'s are listed; `z.txt` still counts.
        assert_eq!((paths(&answer), &answer["truncated"]), (vec!["z.txt"], &json!(true)));
        let answer = glob(&root, json!({"pattern": "many/*", "limit": 1000})).expect("glob");
        assert_eq!((paths(&answer).len(), &answer["truncated"]), (1000, &json!(true)));
        let answer = glob(&root, json!({"pattern": "z.txt"})).expect("glob");
        assert_eq!((paths(&answer), &answer["truncated"]), (vec!["z.txt"], &json!(false)));
        // Exactly MAX_ENTRIES entries (the root's two and the 19 998 left): not truncated.
        std::fs::remove_file(wide.path().join("many/00000")).expect("rm");
        std::fs::remove_file(wide.path().join("many/00001")).expect("rm");
        let answer = glob(&root, json!({"pattern": "**/z.txt"})).expect("glob");
        assert_eq!((paths(&answer), &answer["truncated"]), (vec!["z.txt"], &json!(false)));
    }

    #[test]
    fn globs_translate() {
        let yes = |glob: &str, path: &str| Glob::new(glob).expect(glob).matches(path);
        assert!(yes("**", "a/b/c"));
        assert!(yes("**/*.md", "a.md") && yes("**/*.md", "a/b/c.md") && !yes("**/*.md", "a.mdx"));
        assert!(yes("a/**", "a/b") && yes("a/**", "a/b/c") && !yes("a/**", "ab/c"));
        assert!(yes("a/**/b", "a/b") && yes("a/**/b", "a/x/y/b") && !yes("a/**/b", "a/xb"));
        assert!(!yes("*.md", "a/b.md") && !yes("?.md", "/.md") && yes("?.md", "é.md"));
        assert!(yes("a**b", "axxb") && !yes("a**b", "a/b"));
        assert!(yes("{a,b/c}.rs", "b/c.rs") && yes("x{,y}", "x") && yes("{**/,}z", "q/r/z"));
        assert!(yes("[]a].md", "].md") && yes("[!a-c]", "d") && !yes("[!a-c]", "b") && !yes("[!a]", "/"));
        assert!(yes("a+(b).$^|", "a+(b).$^|") && !yes("a.b", "axb"));
        assert!(yes(r"\*\{x\}", "*{x}") && !yes(r"\*", "a"));
        assert!(yes("a,b}", "a,b}") && yes("sp ace/ü.txt", "sp ace/ü.txt"));
        for bad in ["", "/a", "[ab", "{a", "[b-a]", "a\\"] {
            assert!(Glob::new(bad).is_err(), "{bad}");
        }
        assert_eq!(literal_prefix("src/*.rs"), (vec!["src"], Some(0)));
        assert_eq!(literal_prefix("src/a/**/*.rs"), (vec!["src", "a"], None));
        assert_eq!(literal_prefix("*/x/*.rs"), (vec![], Some(2)));
        assert_eq!(literal_prefix("a/{b,c/d}/e"), (vec!["a"], None));
        assert_eq!(literal_prefix(".git/x/y"), (vec![], Some(2)));
        assert_eq!(literal_prefix("x"), (vec![], Some(0)));
    }

    #[test]
    fn matching_lines() {
        let all = |pattern: &str, text: &str| {
            let regex = RegexBuilder::new(pattern).multi_line(true).crlf(true).build().expect("regex");
            let mut out = Vec::new();
            let _ = for_each_matching_line(&regex, text, |n, line| {
                out.push((n, line.to_owned()));
                ControlFlow::Continue(())
            });
            out
        };
        assert_eq!(all("a", "a a\nb\na"), [(1, "a a".to_owned()), (3, "a".to_owned())]);
        assert_eq!(all("^b", "ab\nb\r\n\nb"), [(2, "b".to_owned()), (4, "b".to_owned())]);
        assert_eq!(all("", "x\ny\n"), [(1, "x".to_owned()), (2, "y".to_owned())]);
        assert_eq!(all("^$", "x\n\ny"), [(2, String::new())]);
        assert_eq!(all("x\ny", "0\nx\ny\n"), [(2, "x".to_owned())]);
        assert!(all("z", "").is_empty() && all("", "").is_empty());
    }
}
