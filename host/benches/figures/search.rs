//! B19: the tool search over the corpus of real tool definitions
//! (`tests/fixtures/tool-search`: 38 servers from npm and PyPI as they listed their tools,
//! and labelled requests in English and Chinese), each server served by
//! `tests/providers/corpus_server.py` behind a real host: how well `butler__find_tools`
//! finds the tools a request needs (recall@5, beside plain word overlap as the baseline),
//! what search mode saves of the list a model reads (tokens, counted with OpenAI's
//! `o200k_base` encoding, beside the whole list), and what a search costs (p50, beside
//! `tools/list` of the same endpoint).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::mcp::{Session, in_turns};
use super::{Host, line_in, line_us, note, percentiles};

/// `tests/fixtures/tool-search`.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tool-search")
}

/// The corpus's servers: (namespace, file).
fn corpus() -> Vec<(String, PathBuf)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures().join("corpus"))
        .expect("the corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let corpus: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("JSON");
            (corpus["namespace"].as_str().expect("a namespace").to_owned(), file)
        })
        .collect()
}

/// One labelled request.
struct Query {
    text: String,
    chinese: bool,
    relevant: Vec<String>,
}

/// The labelled requests of `file` in the fixtures (none when it is absent).
fn queries(file: &str) -> Vec<Query> {
    let Ok(text) = std::fs::read(fixtures().join(file)) else { return Vec::new() };
    let all: Vec<Value> = serde_json::from_slice(&text).expect("JSON");
    all.iter()
        .map(|q| Query {
            text: q["query"].as_str().expect("a query").to_owned(),
            chinese: q["lang"] == "zh",
            relevant: q["relevant"]
                .as_array()
                .expect("labels")
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        })
        .collect()
}

/// The share of `relevant` (at most 5 of them) among `found`.
fn recall(found: &[String], relevant: &[String]) -> f64 {
    let hits = relevant.iter().filter(|r| found.contains(r)).count();
    #[allow(clippy::cast_precision_loss)]
    let share = hits as f64 / relevant.len().clamp(1, 5) as f64;
    share
}

/// The baseline ranking: the tools that share the most lower-cased words (split at
/// anything not alphanumeric) with the request, over their names and descriptions.
fn by_word_overlap(tools: &[Value], query: &str) -> Vec<String> {
    let words = |text: &str| -> HashSet<String> {
        text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
    };
    let asked = words(query);
    let mut scored: Vec<(usize, &str)> = tools
        .iter()
        .map(|t| {
            let name = t["name"].as_str().unwrap_or_default();
            let text = format!("{} {}", name.replace('_', " "), t["description"].as_str().unwrap_or_default());
            (words(&text).intersection(&asked).count(), name)
        })
        .filter(|(shared, _)| *shared > 0)
        .collect();
    scored.sort_by_key(|&(shared, _)| std::cmp::Reverse(shared));
    scored.into_iter().take(5).map(|(_, name)| name.to_owned()).collect()
}

/// The names in a search's answer.
fn found(answer: &Value) -> Vec<String> {
    answer["result"]["structuredContent"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// recall@5 of `butler__find_tools` on `session` over `queries`, overall and per language,
/// beside plain word overlap over `searched` (the endpoint's tools); `set` names the set.
fn recall_figures(session: &mut Session, searched: &[Value], queries: &[Query], set: &str) {
    if queries.is_empty() {
        return;
    }
    let (mut hub, mut baseline) = ([0.0, 0.0], [0.0, 0.0]);
    let (mut any, mut counts) = ([0usize; 2], [0usize; 2]);
    for query in queries {
        let (answer, _) = session.request(
            "tools/call",
            &json!({"name": "butler__find_tools", "arguments": {"query": query.text, "limit": 5}}),
        );
        let names = found(&answer);
        let lang = usize::from(query.chinese);
        hub[lang] += recall(&names, &query.relevant);
        baseline[lang] += recall(&by_word_overlap(searched, &query.text), &query.relevant);
        any[lang] += usize::from(query.relevant.iter().any(|r| names.contains(r)));
        counts[lang] += 1;
    }
    #[allow(clippy::cast_precision_loss)]
    let mean = |sums: [f64; 2], langs: &[usize]| {
        langs.iter().map(|&l| sums[l]).sum::<f64>() / langs.iter().map(|&l| counts[l]).sum::<usize>().max(1) as f64
    };
    let n = queries.len();
    line_in(
        &format!(
            "B19 recall@5 of butler__find_tools, {n} requests{set} over {} tools (baseline = plain word overlap)",
            searched.len()
        ),
        mean(hub, &[0, 1]),
        mean(baseline, &[0, 1]),
        "",
    );
    for (lang, name) in [(0, "English"), (1, "Chinese")] {
        line_in(
            &format!("B19 recall@5, the {} {name} requests{set} (baseline = plain word overlap)", counts[lang]),
            mean(hub, &[lang]),
            mean(baseline, &[lang]),
            "",
        );
    }
    #[allow(clippy::cast_precision_loss)]
    let share = |k: usize| any[k] as f64 / counts[k].max(1) as f64;
    note(&format!(
        "B19{set}: a request finds at least one of its tools among the first 5: English {:.0} %, Chinese {:.0} % (target recall@5 ≥ 0.9)",
        100.0 * share(0),
        100.0 * share(1)
    ));
}

/// B19.
pub fn b19_tool_search() {
    const RUNS: usize = 400;
    let servers = corpus();
    let labelled = queries("queries.json");
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path().join("instance");
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::write(
        root.join("butler.json"),
        json!({"mcp": {"profiles": {"search": {"exposure": "search"}}}}).to_string(),
    )
    .expect("root config");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/providers/corpus_server.py");
    let mut expected = 0;
    for (namespace, file) in &servers {
        let corpus: Value = serde_json::from_slice(&std::fs::read(file).expect("read")).expect("JSON");
        expected += corpus["tools"].as_array().map_or(0, Vec::len);
        let id = namespace.replace('_', "-");
        let ext = root.join("tools").join(&id);
        std::fs::create_dir_all(&ext).expect("mkdir");
        let command = json!(["python3", script.display().to_string(), file.display().to_string()]);
        let manifest = json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id,
                              "mcp": {"transport": "stdio", "command": command, "namespace": namespace}});
        std::fs::write(ext.join("butler.json"), manifest.to_string()).expect("manifest");
    }
    let host = Host::start_quiet(&root);
    let mut main = Session::open_at(host.authority(), "/myspace-butler/api/mcp");
    let started = Instant::now();
    let tools = loop {
        let (listed, _) = main.request("tools/list", &json!({}));
        let tools = listed["result"]["tools"].as_array().cloned().unwrap_or_default();
        // Every corpus tool, and butler__find_tools.
        if tools.len() > expected || started.elapsed() > Duration::from_secs(60) {
            break tools;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(tools.len() > expected, "{} of the corpus's {expected} tools listed within a minute", tools.len() - 1);
    let searched = &tools[..tools.len() - 1];

    recall_figures(&mut main, searched, &labelled, "");
    // Requests written afterwards by someone who saw the corpus but neither the ranking nor
    // the requests above: what the ranking does with requests it was not shaped on.
    recall_figures(&mut main, searched, &queries("queries-heldout.json"), ", held out");

    // Tokens a model reads.
    let bpe = tiktoken_rs::o200k_base().expect("the o200k_base encoding");
    let tokens = |value: &Value| bpe.encode_ordinary(&value.to_string()).len();
    let mut profile = Session::open_at(host.authority(), "/myspace-butler/api/mcp/p/search");
    let (listed, _) = profile.request("tools/list", &json!({}));
    let search_tokens = tokens(&listed["result"]["tools"]);
    let all_tokens = tokens(&Value::Array(searched.to_vec()));
    #[allow(clippy::cast_precision_loss)]
    line_in(
        &format!("B19 tools/list tokens in search mode (baseline = the {} tools listed)", searched.len()),
        search_tokens as f64,
        all_tokens as f64,
        "tokens",
    );
    #[allow(clippy::cast_precision_loss)]
    let saved = 100.0 * (1.0 - search_tokens as f64 / all_tokens as f64);
    note(&format!(
        "B19: search mode lists {search_tokens} tokens instead of {all_tokens}: {saved:.1} % fewer (target ≥ 95 %)"
    ));

    // What a search's answer costs a model that reads its text (five matches with their
    // schemas), beside the same matches indented as `to_string_pretty` writes them.
    let (mut text_tokens, mut indented_tokens) = (0, 0);
    for query in &labelled {
        let arguments = json!({"query": query.text});
        let (found, _) = main.request("tools/call", &json!({"name": "butler__find_tools", "arguments": arguments}));
        let text = found["result"]["content"][0]["text"].as_str().unwrap_or_default();
        text_tokens += bpe.encode_ordinary(text).len();
        let indented = serde_json::to_string_pretty(&found["result"]["structuredContent"]).unwrap_or_default();
        indented_tokens += bpe.encode_ordinary(&indented).len();
    }
    note(&format!(
        "B19: a butler__find_tools answer is {} tokens as text on average ({} indented)",
        text_tokens / labelled.len().max(1),
        indented_tokens / labelled.len().max(1)
    ));

    // What a search costs.
    let mut next = 0;
    let [list, search] = in_turns::<2>(RUNS, 50, |kind| {
        if kind == 0 {
            main.request("tools/list", &json!({}));
        } else {
            next = (next + 1) % labelled.len();
            let arguments = json!({"query": labelled[next].text});
            main.request("tools/call", &json!({"name": "butler__find_tools", "arguments": arguments}));
        }
    });
    let (list50, _) = percentiles(list);
    let (search50, search99) = percentiles(search);
    line_us(
        &format!(
            "B19 butler__find_tools over {} tools (p50; baseline = tools/list of the same endpoint)",
            searched.len()
        ),
        search50,
        list50,
    );
    note(&format!("B19: butler__find_tools p99 {:.0} µs (target p50 ≤ 1 ms)", search99.as_secs_f64() * 1e6));
}
