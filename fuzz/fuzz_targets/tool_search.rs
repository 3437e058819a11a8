//! The tool search (`butler_mcp::tool_search`): a client's `find_tools` request, and the
//! tool definitions a provider lists, both untrusted. Either JSON
//! (`{"query": "...", "tools": [...]}`, the seed corpus's form) or raw bytes: the first
//! line the request, the rest one tool's description.
//!
//! Properties: a search never panics; it returns at most `limit` matches, each a tool of
//! the list, none twice, best first, every score finite and above zero; the same request
//! gives the same answer; a request with nothing in it finds nothing.
#![no_main]

use butler_mcp::tool_search::Index;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// Tools of real servers, so that requests have something to meet.
fn known_tools() -> Vec<Value> {
    vec![
        json!({"name": "filesystem__read_file", "description": "Read the complete contents of a file.",
               "inputSchema": {"properties": {"path": {"description": "Path of the file"}}}}),
        json!({"name": "fetch__fetch", "description": "Fetches a URL from the internet.",
               "inputSchema": {"properties": {"url": {"description": "URL to fetch"}}}}),
        json!({"name": "github__create_issue", "title": "Create issue", "description": "Open a new issue."}),
        json!({"name": "notes__搜索笔记", "description": "在本地笔记中搜索关键词。"}),
        json!({"name": "linear__linear_create_issue", "description": "Create a Linear issue."}),
    ]
}

fn case(data: &[u8]) -> (String, Vec<Value>) {
    if let Ok(Value::Object(json)) = serde_json::from_slice::<Value>(data) {
        let query = json.get("query").and_then(Value::as_str).unwrap_or_default().to_owned();
        let mut tools = known_tools();
        if let Some(Value::Array(more)) = json.get("tools") {
            tools.extend(more.iter().take(16).cloned());
        }
        return (query, tools);
    }
    let text = String::from_utf8_lossy(data);
    let (query, description) = text.split_once('\n').unwrap_or((&text, ""));
    let mut tools = known_tools();
    tools.push(json!({"name": format!("fuzz__{}", query.chars().take(20).collect::<String>()),
                      "description": description,
                      "inputSchema": {"properties": {description: {"description": query}}}}));
    (query.to_owned(), tools)
}

fuzz_target!(|data: &[u8]| {
    let (query, tools) = case(data);
    let index = Index::new(&tools);
    assert_eq!(index.len(), tools.len());
    for limit in [0, 1, 5, 100] {
        let found = index.search(&query, limit, |i| 1.0 + (i % 3) as f64 * 0.1);
        assert!(found.len() <= limit.min(tools.len()), "{} matches for limit {limit}", found.len());
        let mut seen = std::collections::HashSet::new();
        for (i, m) in found.iter().enumerate() {
            assert!(m.index < tools.len() && seen.insert(m.index), "{found:?}");
            assert!(m.score.is_finite() && m.score > 0.0, "{found:?}");
            if let Some(next) = found.get(i + 1) {
                assert!(m.score >= next.score, "best first: {found:?}");
            }
        }
        assert_eq!(found, index.search(&query, limit, |i| 1.0 + (i % 3) as f64 * 0.1), "the same answer");
    }
    if query.chars().all(|c| !c.is_alphanumeric()) {
        assert!(index.search(&query, 5, |_| 1.0).is_empty(), "{query:?} has nothing in it");
    }
});
