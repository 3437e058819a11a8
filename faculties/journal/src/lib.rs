//! The `journal` faculty: observations the owner's agents report, and the compiled context.
//!
//! Its manifest is `manifest.json` beside this crate (the source of `describe()`). Every
//! command takes its arguments as JSON on standard input (the pipeline's `args`).
//!
//! - `intake {source, type?, tags?, text, ref?}` appends an observation to the spool;
//! - `turns {id, at, messages, workspace?, preset?, subagent?, source?}` stores one session
//!   turn the host's collector took (redacted there): its transcript as a `session` line of
//!   `sessions/<day>.jsonl`, where the distiller reads evidence, and the whole turn as
//!   `journal/sessions/<id>.json` — once: a turn already stored is acknowledged again, not
//!   written twice;
//! - `context-build {maxChars?}` compiles `build/context.md`, by default within the
//!   root config's `inject.maxChars`;
//! - report `recent`: the latest observations.

use butler_faculty_kit::{Faculty, Failure, Outcome, Value, faculty, host, json};
use butler_store::card::{Card, Kind, Status};
use butler_store::journal::Observation;
use serde::Deserialize;

/// Where the compiled context goes, relative to the store.
const CONTEXT: &str = "build/context.md";
/// `inject.maxChars` when nobody said otherwise.
const DEFAULT_MAX_CHARS: usize = 8000;
/// Bounds of `maxChars`.
const MAX_CHARS_RANGE: std::ops::RangeInclusive<usize> = 200..=1_000_000;
/// The environment variable the host puts the root config keys granted to this faculty in
/// (`faculties.journal.config: ["inject"]`).
const CONFIG_ENV: &str = "BUTLER_CONFIG";
/// Observations the `recent` report shows.
const RECENT: usize = 20;
/// Characters of an observation's text in the `recent` report.
const PREVIEW: usize = 200;

struct Journal;

impl Faculty for Journal {
    fn describe() -> Value {
        serde_json::from_str(include_str!("../manifest.json")).unwrap_or_default()
    }

    fn invoke(command: &str, input: Value) -> Outcome {
        match command {
            "intake" => intake(input),
            "turns" => turns(input),
            "context-build" => context_build(input),
            other => Err(Failure::unknown_command(other)),
        }
    }

    fn report(id: &str) -> Outcome {
        match id {
            "recent" => recent(),
            "context" => context_report(),
            other => Err(Failure::unknown_report(other)),
        }
    }
}

faculty!(Journal);

// ---------------------------------------------------------------------------------------
// intake

/// `journal.intake` arguments (the same fields as `POST /observe`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct IntakeArgs {
    source: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    tags: Option<Vec<String>>,
    text: String,
    #[serde(default)]
    r#ref: Option<String>,
}

/// Builds the observation `args` describe, checked by the observation rules (before it gets an id).
fn observation(args: IntakeArgs, id: String, at: String) -> Result<Observation, Failure> {
    let observation = Observation {
        id,
        at,
        source: args.source,
        kind: args.kind.unwrap_or_else(|| "note".to_owned()),
        tags: args.tags.unwrap_or_default(),
        text: args.text,
        r#ref: args.r#ref,
    };
    observation.validate()?;
    Ok(observation)
}

fn parse_intake(input: Value) -> Result<IntakeArgs, Failure> {
    butler_store::args::parse::<IntakeArgs>(input).map_err(|f| Failure::new("invalid_observation", f.message))
}

fn intake(input: Value) -> Outcome {
    let args = parse_intake(input)?;
    // Validate before spending an id on it: the id and time are filled in afterwards.
    let mut observation = observation(args, String::new(), String::new())?;
    observation.id = butler_store::ids::new_id("obs", &observation.text);
    observation.at = butler_store::time::now();
    observation.append()?;
    Ok(json!({"id": observation.id, "at": observation.at}))
}

// ---------------------------------------------------------------------------------------
// turns

/// Where stored turns go, relative to the store.
const SESSIONS: &str = "journal/sessions";
/// The most messages in one turn.
const MAX_MESSAGES: usize = 200;

/// One message of a turn.
#[derive(Debug, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Message {
    role: String,
    content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    partial: bool,
}

/// `journal.turns` arguments: one turn, as the host's collector hands it over.
#[derive(Debug, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Turn {
    id: String,
    at: String,
    messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    workspace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    preset: Option<String>,
    #[serde(default)]
    subagent: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

fn parse_turn(input: Value) -> Result<Turn, Failure> {
    let turn = butler_store::args::parse::<Turn>(input).map_err(|f| Failure::new("invalid_turn", f.message))?;
    let bad = |message: &str| Err(Failure::new("invalid_turn", message.to_owned()));
    if turn.id.is_empty()
        || turn.id.len() > 128
        || !turn.id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        || turn.id.starts_with('.')
    {
        return bad("id is 1 to 128 of A-Z, a-z, 0-9, `-`, `_` and `.`, not starting with `.`");
    }
    if turn.at.len() > 64 || butler_store::journal::day_of(&turn.at).is_none() {
        return bad("at is an RFC 3339 time, like 2026-12-03T10:00:00Z");
    }
    if turn.messages.is_empty() || turn.messages.len() > MAX_MESSAGES {
        return bad("messages holds 1 to 200 messages");
    }
    if let Some(message) =
        turn.messages.iter().find(|m| !["user", "assistant", "tool", "system"].contains(&m.role.as_str()))
    {
        return Err(Failure::new(
            "invalid_turn",
            format!(
                "a message's role is user, assistant, tool or system, not `{}`",
                butler_faculty_kit::clip(&message.role, 40)
            ),
        ));
    }
    Ok(turn)
}

fn turns(input: Value) -> Outcome {
    let turn = parse_turn(input)?;
    let path = butler_store::path(&format!("{SESSIONS}/{}.json", turn.id));
    // Once: a turn handed over again (the host replays what it has not seen acknowledged)
    // is acknowledged, not stored twice.
    if path.exists() {
        return Ok(json!({"id": turn.id, "stored": false, "duplicate": true}));
    }
    // First the distiller's line, then the whole turn: a turn cut off between the two is
    // handed over again, and the distiller keeps the first of two lines with one id.
    session_line(&turn).append_to(SESSION_LINES)?;
    butler_store::write_json(&path, &turn)?;
    Ok(json!({"id": turn.id, "stored": true}))
}

/// Where the distiller reads session turns: `sessions/<day>.jsonl`, observation lines.
const SESSION_LINES: &str = "sessions";
/// The most characters of a turn's transcript in its line.
const TRANSCRIPT_CHARS: usize = 8000;

/// The turn as the distiller reads it: an observation of type `session` whose text is the
/// transcript (`role: content` per message), cut to [`TRANSCRIPT_CHARS`].
fn session_line(turn: &Turn) -> Observation {
    use std::fmt::Write as _;
    let mut text = String::new();
    for message in &turn.messages {
        let who = message.name.as_ref().map_or_else(|| message.role.clone(), |n| format!("{} ({n})", message.role));
        let _ = writeln!(text, "{who}: {}", message.content);
    }
    let clipped = butler_faculty_kit::clip(text.trim_end(), TRANSCRIPT_CHARS);
    let source: String = turn
        .source
        .as_deref()
        .unwrap_or("session")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .take(64)
        .collect();
    Observation {
        id: turn.id.clone(),
        at: turn.at.clone(),
        source,
        kind: "session".to_owned(),
        tags: turn.workspace.iter().map(|w| format!("workspace:{w}")).collect(),
        text: clipped,
        r#ref: None,
    }
}

// ---------------------------------------------------------------------------------------
// context-build

/// `context.build` arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ContextArgs {
    #[serde(default)]
    max_chars: Option<usize>,
}

/// One card's line in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    kind: Kind,
    id: String,
    title: String,
    summary: String,
}

impl Entry {
    fn line(&self) -> String {
        format!("- {} — {}: {}", self.id, one_line(&self.title), one_line(&self.summary))
    }
}

/// The compiled context and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Compiled {
    text: String,
    cards: usize,
    omitted: usize,
}

/// Runs of whitespace (newlines included) become one space, so every card stays one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn note(omitted: usize) -> String {
    format!("\n({omitted} more cards not shown)\n")
}

fn heading(kind: Kind) -> &'static str {
    match kind {
        Kind::Rule => "\n## Rules\n\n",
        Kind::Knowledge | Kind::Profile => "\n## Knowledge\n\n",
    }
}

/// Compiles the profile (never truncated) and the index lines (rules, then knowledge, each
/// by id) into at most `max_chars` characters when the profile leaves room: cards are added
/// in order until the next one (and the note saying how many were left out) would not fit.
fn compile(profile: Option<&str>, mut entries: Vec<Entry>, max_chars: usize) -> Compiled {
    entries.sort_by(|a, b| (a.kind != Kind::Rule, &a.id).cmp(&(b.kind != Kind::Rule, &b.id)));
    let mut text = String::from("# Context\n");
    if let Some(profile) = profile.map(str::trim).filter(|p| !p.is_empty()) {
        text.push_str("\n## Owner profile\n\n");
        text.push_str(profile);
        text.push('\n');
    }
    let mut chars = text.chars().count();
    let total = entries.len();
    let mut cards = 0;
    let mut last_kind = None;
    for (i, entry) in entries.iter().enumerate() {
        let mut piece = String::new();
        if last_kind != Some(entry.kind) {
            piece.push_str(heading(entry.kind));
        }
        piece.push_str(&entry.line());
        piece.push('\n');
        let after = total - i - 1;
        let reserve = if after > 0 { note(after).chars().count() } else { 0 };
        let len = piece.chars().count();
        if chars + len + reserve > max_chars {
            break;
        }
        text.push_str(&piece);
        chars += len;
        cards += 1;
        last_kind = Some(entry.kind);
    }
    let omitted = total - cards;
    if omitted > 0 {
        text.push_str(&note(omitted));
    }
    if total == 0 && profile.is_none_or(|p| p.trim().is_empty()) {
        text.push_str("\nNo profile or cards yet.\n");
    }
    Compiled { text, cards, omitted }
}

/// The profile's body: the profile card's body, or the whole file when it has no front
/// matter (written by hand). An archived profile is left out.
fn profile_body() -> Result<Option<String>, Failure> {
    let path = butler_store::path("profile.md");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Failure::io(&path, &e)),
    };
    match Card::parse(&text, "profile", Kind::Profile) {
        Ok(card) if card.status == Status::Archived => Ok(None),
        Ok(card) => Ok(Some(card.content.body)),
        Err(_) if !text.trim_start().starts_with("---") => Ok(Some(text)),
        Err(f) => {
            host::warn(&format!("profile left out of the context: {}", f.message));
            Ok(None)
        }
    }
}

/// The active, unsuspended rule and knowledge cards, from the card index (a verdict that
/// cannot be read keeps its card out rather than let it in unchecked).
fn index_entries() -> Result<Vec<Entry>, Failure> {
    let index = butler_store::index::Index::current()?;
    let mut entries = Vec::new();
    for entry in index.entries() {
        if entry.status != Status::Active
            || entry.kind == Kind::Profile
            || entry.verdict.as_ref().is_some_and(butler_store::index::Mark::holds)
        {
            continue;
        }
        let shown = index.display(entry);
        let text = |key: &str| shown.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        entries.push(Entry { kind: entry.kind, id: entry.id.clone(), title: text("title"), summary: text("summary") });
    }
    Ok(entries)
}

/// The `maxChars` to use: the caller's, else the owner's `inject.maxChars` from the root
/// config (granted to this faculty as [`CONFIG_ENV`]), else the default. The automatic
/// rebuilds (after an approval, a rejection or a refresh) pass none, so they follow the
/// owner's setting.
fn max_chars(given: Option<usize>) -> Result<usize, Failure> {
    if let Some(max) = given {
        if !MAX_CHARS_RANGE.contains(&max) {
            return Err(Failure::invalid_args(format!(
                "maxChars must be between {} and {}",
                MAX_CHARS_RANGE.start(),
                MAX_CHARS_RANGE.end()
            )));
        }
        return Ok(max);
    }
    Ok(configured_max_chars(std::env::var(CONFIG_ENV).ok().as_deref()))
}

/// `inject.maxChars` of the granted root config (`config`: its JSON text), or the default
/// when it is not set or not usable (the host validated it against the schema already).
fn configured_max_chars(config: Option<&str>) -> usize {
    let Some(config) = config else { return DEFAULT_MAX_CHARS };
    let set = serde_json::from_str::<Value>(config)
        .ok()
        .and_then(|c| c.pointer("/inject/maxChars").and_then(Value::as_u64))
        .and_then(|max| usize::try_from(max).ok());
    match set {
        Some(max) if MAX_CHARS_RANGE.contains(&max) => max,
        Some(max) => {
            host::warn(&format!("inject.maxChars {max} is out of range; using {DEFAULT_MAX_CHARS}"));
            DEFAULT_MAX_CHARS
        }
        None => DEFAULT_MAX_CHARS,
    }
}

fn context_build(input: Value) -> Outcome {
    let args: ContextArgs = butler_store::args::parse(input)?;
    let max = max_chars(args.max_chars)?;
    let profile = profile_body()?;
    let compiled = compile(profile.as_deref(), index_entries()?, max);
    let path = butler_store::path(CONTEXT);
    let changed = match std::fs::read(&path) {
        Ok(old) => old != compiled.text.as_bytes(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(Failure::io(&path, &e)),
    };
    if changed {
        butler_store::write(&path, compiled.text.as_bytes())?;
    }
    Ok(json!({
        "path": CONTEXT,
        "chars": compiled.text.chars().count(),
        "cards": compiled.cards,
        "omitted": compiled.omitted,
        "changed": changed,
    }))
}

// ---------------------------------------------------------------------------------------
// recent

/// The latest `limit` observations, newest first: spool files are read from the newest day
/// back, only as far as needed.
fn latest(limit: usize) -> Result<Vec<Observation>, Failure> {
    let files = butler_store::journal::jsonl_files(&butler_store::path("journal/spool"))?;
    let mut out = Vec::new();
    for file in files.iter().rev() {
        let text = std::fs::read_to_string(file).map_err(|e| Failure::io(file, &e))?;
        out.extend(newest_first(&text).take(limit - out.len()));
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

/// The observations of one spool file, last line first; torn or foreign lines skipped.
fn newest_first(text: &str) -> impl Iterator<Item = Observation> + '_ {
    text.lines().rev().filter_map(|line| serde_json::from_str::<Observation>(line).ok())
}

fn recent_item(observation: &Observation) -> Value {
    json!({
        "title": format!("{} from {}", observation.kind, observation.source),
        "at": observation.at,
        "preview": observation.text.chars().take(PREVIEW).collect::<String>(),
    })
}

fn recent() -> Outcome {
    let items: Vec<Value> = latest(RECENT)?.iter().map(recent_item).collect();
    Ok(json!({"items": items}))
}

// ---------------------------------------------------------------------------------------
// the context report

/// The compiled context as a `markdown` report (the one the host offers its MCP clients as
/// the context resource: this report `provides` it).
fn context_report() -> Outcome {
    let path = butler_store::path(CONTEXT);
    match std::fs::read_to_string(&path) {
        Ok(markdown) => Ok(json!({"markdown": markdown})),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(json!({"markdown": "No context has been compiled yet (it is built when cards are approved)."}))
        }
        Err(e) => Err(Failure::io(&path, &e)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn max_chars_follows_the_granted_root_config() {
        assert_eq!(super::configured_max_chars(None), super::DEFAULT_MAX_CHARS);
        assert_eq!(super::configured_max_chars(Some(r#"{"inject":{"maxChars":300}}"#)), 300);
        assert_eq!(super::configured_max_chars(Some(r#"{"inject":{"enabled":true}}"#)), super::DEFAULT_MAX_CHARS);
        assert_eq!(super::configured_max_chars(Some("{}")), super::DEFAULT_MAX_CHARS);
        assert_eq!(super::max_chars(Some(250)).ok(), Some(250), "a caller's value wins");
        assert!(super::max_chars(Some(10)).is_err());
    }

    use super::*;

    fn entry(kind: Kind, id: &str) -> Entry {
        Entry { kind, id: id.into(), title: format!("Title {id}"), summary: "sum\nmary".into() }
    }

    #[test]
    fn a_turn_needs_an_id_fit_for_a_file_name_a_dated_time_and_known_roles() {
        let message = json!([{"role": "user", "content": "hi"}]);
        let at = "2026-12-03T10:00:00Z";
        for bad in [
            json!({"id": "../x", "at": at, "messages": message}),
            json!({"id": ".x", "at": at, "messages": message}),
            json!({"id": "x", "at": at, "messages": []}),
            json!({"id": "x", "at": at, "messages": [{"role": "robot", "content": "hi"}]}),
            json!({"id": "x", "at": at, "messages": message, "extra": 1}),
            // `at` names the day's file: never a path, never cut inside a character.
            json!({"id": "x", "at": "t", "messages": message}),
            json!({"id": "x", "at": "../../x/yy", "messages": message}),
            json!({"id": "x", "at": "2026-12-0é", "messages": message}),
            json!({"id": "x", "at": "éééééééééé", "messages": message}),
        ] {
            assert_eq!(parse_turn(bad.clone()).expect_err("refused").code, "invalid_turn", "{bad}");
        }
        let turn = parse_turn(json!({"id": "t-1.a", "at": at, "messages": message, "workspace": null})).expect("valid");
        assert_eq!((turn.id.as_str(), turn.messages.len()), ("t-1.a", 1));
    }

    #[test]
    fn intake_args_refuse_unknown_fields_and_wrong_types() {
        for bad in [
            r#"{"source":"me","text":"x","extra":1}"#,
            r#"{"source":"me","text":5}"#,
            r#"{"source":"me"}"#,
            r#"{"source":"me","text":"x","tags":"a,b"}"#,
            "[]",
        ] {
            let failure = parse_intake(serde_json::from_str(bad).expect("JSON")).expect_err(bad);
            assert_eq!(failure.code, "invalid_observation", "{bad}");
        }
        let args = parse_intake(json!({"source": "me", "text": "hi", "ref": "r", "type": null})).expect("parses");
        let obs = observation(args, "obs-1".into(), "2026-01-01T00:00:00.000Z".into()).expect("valid");
        assert_eq!(obs.kind, "note");
        assert_eq!(obs.r#ref.as_deref(), Some("r"));
    }

    #[test]
    fn intake_applies_the_observation_rules() {
        let check = |json: &str| {
            parse_intake(serde_json::from_str(json).expect("JSON"))
                .and_then(|a| observation(a, "obs-1".into(), "2026-01-01".into()))
        };
        assert!(check(r#"{"source":"Me","text":"x"}"#).is_err());
        assert!(check(r#"{"source":"me","text":"x","type":"gossip"}"#).is_err());
        assert!(check(r#"{"source":"me","text":"   "}"#).is_err());
        assert!(check(&format!(r#"{{"source":"me","text":"{}"}}"#, "a".repeat(2001))).is_err());
        assert!(check(&format!(r#"{{"source":"me","text":"{}"}}"#, "a".repeat(2000))).is_ok());
        assert!(check(r#"{"source":"me","text":"x","tags":["a,b"]}"#).is_err());
        assert!(check(&format!(r#"{{"source":"me","text":"x","ref":"{}"}}"#, "r".repeat(501))).is_err());
        let tags: Vec<String> = (0..33).map(|i| format!("\"t{i}\"")).collect();
        assert!(check(&format!(r#"{{"source":"me","text":"x","tags":[{}]}}"#, tags.join(","))).is_err());
        assert!(check(r#"{"source":"a-1","type":"decision","tags":["x"],"text":"ok","ref":"r"}"#).is_ok());
    }

    #[test]
    fn context_orders_rules_first_and_keeps_lines_single() {
        let compiled = compile(
            Some("I like Rust.\n"),
            vec![entry(Kind::Knowledge, "b"), entry(Kind::Rule, "z"), entry(Kind::Knowledge, "a")],
            8000,
        );
        assert_eq!(
            compiled.text,
            "# Context\n\n## Owner profile\n\nI like Rust.\n\n## Rules\n\n- z — Title z: sum mary\n\n## Knowledge\n\n\
             - a — Title a: sum mary\n- b — Title b: sum mary\n"
        );
        assert_eq!((compiled.cards, compiled.omitted), (3, 0));
        assert_eq!(compile(None, vec![], 8000).text, "# Context\n\nNo profile or cards yet.\n");
    }

    #[test]
    fn context_stops_before_max_chars_and_notes_the_rest() {
        let entries: Vec<Entry> = (0..50).map(|i| entry(Kind::Knowledge, &format!("card-{i:02}"))).collect();
        for max in [200, 333, 500, 1000] {
            let compiled = compile(Some("profile"), entries.clone(), max);
            assert!(compiled.text.chars().count() <= max, "{max}: {}", compiled.text.chars().count());
            assert_eq!(compiled.cards + compiled.omitted, 50);
            assert!(compiled.omitted > 0);
            assert!(compiled.text.ends_with(&format!("({} more cards not shown)\n", compiled.omitted)));
            // One more card would not have fitted.
            let bigger = compile(Some("profile"), entries.clone(), compiled.text.chars().count() + 5);
            assert!(bigger.cards <= compiled.cards + 1);
        }
        // Exactly at the limit everything fits; one character less leaves a card out.
        let all = compile(Some("profile"), entries.clone(), usize::MAX);
        let full = all.text.chars().count();
        assert_eq!(compile(Some("profile"), entries.clone(), full), all);
        let short = compile(Some("profile"), entries.clone(), full - 1);
        assert!(short.omitted >= 1 && short.text.chars().count() < full);
        // The profile is never truncated, even past maxChars.
        let long = "p".repeat(500);
        let compiled = compile(Some(&long), entries, 200);
        assert!(compiled.text.contains(&long));
        assert_eq!((compiled.cards, compiled.omitted), (0, 50));
    }

    #[test]
    fn recent_reads_newest_first_and_skips_torn_lines() {
        let line = |id: &str| {
            serde_json::to_string(&Observation {
                id: id.into(),
                at: "2026-01-01T00:00:00.000Z".into(),
                source: "me".into(),
                kind: "fact".into(),
                tags: vec![],
                text: "t".repeat(300),
                r#ref: None,
            })
            .expect("serializes")
        };
        let text = format!("{}\n{{torn\n{}\n", line("a"), line("b"));
        let ids: Vec<String> = newest_first(&text).map(|o| o.id).collect();
        assert_eq!(ids, ["b", "a"]);
        let item = recent_item(&newest_first(&text).next().expect("one"));
        assert_eq!(item["title"], "fact from me");
        assert_eq!(item["preview"].as_str().map(|p| p.chars().count()), Some(200));
    }
}
