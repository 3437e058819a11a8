//! The MCP hub in-process: a [`Hub`] (with [`NoHostTools`] standing in for the binary's
//! faculty tools)
//! reconciled from scanned temp instances whose providers are `tests/providers/fake_mcp.py`,
//! run under the real keeper and called as the HTTP layer calls them. Covered: colliding
//! tool names are told apart by namespace, and a taken namespace is a conflict settled
//! exactly as [`names::settle`] settles it (scan order, incumbents first); two sessions'
//! calls with the same request id, and their progress, stay apart; a cancellation reaches
//! the provider, for the right call; a crash is an `isError` result that costs only its
//! provider, which comes back by itself.
//!
//! Real time: these providers are real processes, whose pipes a paused clock would not
//! wait for (the restart rule itself runs on the paused clock in `butler-mcp`'s provider
//! tests). Each test shuts its hub down at the end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use butler_catalog::Catalog;
use butler_catalog::names::{self, Conflict};
use butler_mcp::quarantine::Kind;
use butler_mcp::tool_source::{Scope, ToolSource};
use butler_mcp::{Answer, Asker, Hub, View};
use butler_process::HostEnv;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use crate::{scan, until, use_real_keeper, within, write_manifest};

/// The tools of `fake_mcp.py` that can be public, in its order (it also lists `bad name!`
/// and a 70-character name, which cannot).
const PUBLIC_TOOLS: [&str; 6] = ["echo", "crash", "hang", "progress", "env", "deaf"];

/// The python interpreter itself (not a version manager's shim, which a provider's
/// scrubbed environment may not satisfy, and which costs a start each time).
fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = std::process::Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 runs (the fake provider needs it)");
        String::from_utf8(out.stdout).expect("a UTF-8 path").trim().to_owned()
    })
}

/// Where provider `id` of the instance at `root` logs its starts, hangs and cancellations.
fn log_of(root: &Path, id: &str) -> PathBuf {
    root.join(format!("{id}.log"))
}

/// The environment variable only provider `id` gets, to tell which provider answered.
fn marker(id: &str) -> String {
    format!("ONLY_{}", id.to_uppercase().replace('-', "_"))
}

/// A tool manifest whose `mcp` block runs `fake_mcp.py`, logging to [`log_of`], with
/// `namespace` if given (else the id's).
fn provider(root: &Path, id: &str, namespace: Option<&str>) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/providers/fake_mcp.py");
    let log = log_of(root, id).display().to_string();
    let mut mcp = json!({
        "transport": "stdio",
        "command": [python(), script],
        "env": {"FAKE_MCP_LOG": log, marker(id): "1"},
        "timeoutSec": 120,
    });
    if let Some(namespace) = namespace {
        mcp["namespace"] = json!(namespace);
    }
    json!({"schemaVersion": 1, "kind": "tool", "id": id, "name": id, "mcp": mcp})
}

/// Writes a [`provider`] per `(id, namespace)` into the instance at `root`.
pub(crate) fn write_providers(root: &Path, providers: &[(&str, Option<&str>)]) {
    for (id, namespace) in providers {
        write_manifest(root, &format!("tools/{id}"), &provider(root, id, *namespace));
    }
}

/// A hub for the instance at `root` (state under `root/state`), reconciled with
/// `catalog`.
async fn hub(root: &Path, catalog: &Catalog) -> Arc<Hub> {
    hub_with(root, catalog, butler_mcp::Settings::default()).await
}

/// [`hub`] with `settings`.
pub(crate) async fn hub_with(root: &Path, catalog: &Catalog, settings: butler_mcp::Settings) -> Arc<Hub> {
    let state = root.join("state");
    let hub = Hub::new(HostEnv::default(), Arc::new(NoHostTools), &state, settings);
    hub.reconcile(catalog).await;
    hub
}

/// The host's own tools as a host without faculties has them: none, and no compiled
/// context (what the binary's faculty tools are for a runtime with no faculties).
pub(crate) struct NoHostTools;

impl ToolSource for NoHostTools {
    fn settle(&self) -> BoxFuture<'_, ()> {
        async {}.boxed()
    }

    fn list(&self, _: Scope) -> Vec<Value> {
        Vec::new()
    }

    fn has(&self, _: Scope, _: &str) -> bool {
        false
    }

    fn call<'a>(
        &'a self,
        _: Scope,
        _: &'a str,
        name: &'a str,
        _: Value,
        _: butler_mcp::code_mode::InnerCalls,
    ) -> BoxFuture<'a, Value> {
        async move { butler_mcp::tool_source::error_result(format!("no tool `{name}`")) }.boxed()
    }

    fn context(&self) -> BoxFuture<'_, String> {
        async { "No faculty provides a compiled context.".to_owned() }.boxed()
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        // Nothing ever changes: the sender is gone, so a watcher stops at once.
        tokio::sync::watch::channel(0).1
    }
}

/// `(id, namespace)` of every provider of `catalog`, in scan order: what the hub settles.
fn wanted(catalog: &Catalog) -> Vec<(String, String)> {
    catalog
        .extensions
        .iter()
        .filter_map(|e| e.manifest.mcp.as_ref().map(|mcp| (e.id().to_owned(), mcp.effective_namespace(e.id()))))
        .collect()
}

/// The lines provider `id` logged so far.
fn log_lines(root: &Path, id: &str) -> Vec<String> {
    std::fs::read_to_string(log_of(root, id)).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// Waits until provider `id` has logged `count` lines starting with `prefix`; returns
/// the rest of each such line.
async fn logged(root: &Path, id: &str, prefix: &str, count: usize) -> Vec<String> {
    let (log, want) = (log_of(root, id), prefix.to_owned());
    let found = move || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines().filter_map(|l| l.strip_prefix(want.as_str()).map(str::to_owned)).collect::<Vec<_>>()
    };
    let seen = found.clone();
    until(&format!("{id} to log {count} `{prefix}` lines"), move || seen().len() >= count).await;
    found()
}

/// The first text item of a `tools/call` result.
pub(crate) fn text_of(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// `tools/call` of `name` with `arguments` as request `id` of `session`; the call must
/// be answered (a provider's failure is an `isError` result, still an answer).
async fn call(hub: &Hub, session: &str, id: Value, name: &str, arguments: Value) -> Value {
    call_answer(hub, session, id, name, arguments).await.into_value()
}

/// [`call`]'s answer as the hub passes it on: read, or as its provider wrote it.
async fn call_answer(hub: &Hub, session: &str, id: Value, name: &str, arguments: Value) -> Answer {
    let params = json!({"name": name, "arguments": arguments});
    within(&format!("{name} to answer"), hub.call_tool(&View::Main, session, &id, params, None, &Asker::hub()))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

/// Which providers' [`marker`]s the environment of whoever answers `<namespace>__env`
/// holds: who the public name routes to.
async fn routed_to(hub: &Hub, namespace: &str) -> Vec<String> {
    let result = call(hub, "routing", json!(1), &format!("{namespace}__env"), json!({})).await;
    let names: Vec<String> = serde_json::from_str(&text_of(&result)).expect("env answers a JSON list");
    names.into_iter().filter(|n| n.starts_with("ONLY_")).collect()
}

/// The public tool names `tools/list` shows, but `butler__find_tools`, which the main
/// endpoint lists after them all (checked here).
async fn tool_names(hub: &Hub) -> Vec<String> {
    let mut names: Vec<String> = within("tools/list", hub.list_tools(&View::Main, &Asker::hub()))
        .await
        .iter()
        .map(|t| t["name"].as_str().expect("a tool has a name").to_owned())
        .collect();
    assert_eq!(names.pop().as_deref(), Some(butler_mcp::exposure::FIND_TOOLS), "the search tool comes last");
    names
}

/// The hub's status of provider `id`.
fn provider_status(hub: &Hub, id: &str) -> Value {
    hub.status().providers.into_iter().find(|p| p.status.id == id).map_or(Value::Null, |p| json!(p.status))
}

/// Whether process `pid` is gone (or a zombie, dead but not yet reaped).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(true)
}

/// A conflict, as [`names::settle`] reports it.
fn conflict(id: &str, namespace: &str, held_by: &str) -> Conflict {
    Conflict { id: id.to_owned(), namespace: namespace.to_owned(), held_by: held_by.to_owned() }
}

#[tokio::test]
async fn colliding_names_are_namespaced_and_a_taken_namespace_is_settled_as_names_settles_it() {
    use_real_keeper();
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    // Every provider offers `echo`, `hang`, …; `zeta` asks for the namespace `my-tools`
    // derives from its id.
    write_providers(r, &[("alpha", None), ("beta", None), ("my-tools", None), ("zeta", Some("my_tools"))]);
    let catalog = scan(r, None);
    assert_eq!(catalog.extensions.len(), 4, "{:?}", catalog.diagnostics);
    let hub = hub(r, &catalog).await;

    let (accepted, conflicts) = names::settle(&wanted(&catalog), &BTreeMap::new());
    assert_eq!(accepted, ["alpha", "beta", "my-tools"]);
    assert_eq!(conflicts, [conflict("zeta", "my_tools", "my-tools")]);
    assert_eq!(hub.status().conflicts, conflicts, "the hub reports what settle decides");

    let expected: Vec<String> =
        ["alpha", "beta", "my_tools"].iter().flat_map(|ns| PUBLIC_TOOLS.map(|t| format!("{ns}__{t}"))).collect();
    assert_eq!(tool_names(&hub).await, expected, "each provider's tools under its namespace, in scan order");
    for (namespace, id) in [("alpha", "alpha"), ("beta", "beta"), ("my_tools", "my-tools")] {
        assert_eq!(routed_to(&hub, namespace).await, [marker(id)], "{namespace}__env");
    }
    assert!(!log_of(r, "zeta").exists(), "a provider left out is never started");
    let alpha = provider_status(&hub, "alpha");
    let rejected: Vec<&str> =
        alpha["rejected"].as_array().expect("rejected").iter().filter_map(|t| t["tool"].as_str()).collect();
    assert_eq!(rejected, ["bad name!", "x".repeat(70).as_str()], "{alpha}");
    let registered: BTreeMap<String, String> =
        hub.status().providers.into_iter().map(|p| (p.status.namespace, p.status.id)).collect();
    assert_eq!(registered.len(), 3, "{registered:?}");

    // A newcomer that sorts first asks for `alpha`: fresh, it would win; against the
    // incumbent, it is left out.
    write_providers(r, &[("aaa", Some("alpha"))]);
    let next = scan(r, Some(&catalog));
    assert!(names::settle(&wanted(&next), &BTreeMap::new()).0.contains(&"aaa".to_owned()));
    hub.reconcile(&next).await;
    let (accepted, conflicts) = names::settle(&wanted(&next), &registered);
    assert_eq!(accepted, ["alpha", "beta", "my-tools"]);
    assert_eq!(conflicts, [conflict("aaa", "alpha", "alpha"), conflict("zeta", "my_tools", "my-tools")]);
    assert_eq!(hub.status().conflicts, conflicts);
    assert_eq!(routed_to(&hub, "alpha").await, [marker("alpha")]);
    assert!(!log_of(r, "aaa").exists(), "the newcomer left out is never started");

    // The incumbent goes: the namespace is free for the newcomer, and the old process stops.
    let alpha_pid: u32 = logged(r, "alpha", "started ", 1).await[0].parse().expect("a pid");
    std::fs::remove_dir_all(r.join("tools/alpha")).expect("remove alpha");
    let last = scan(r, Some(&next));
    hub.reconcile(&last).await;
    assert_eq!(hub.status().conflicts, [conflict("zeta", "my_tools", "my-tools")]);
    assert_eq!(routed_to(&hub, "alpha").await, [marker("aaa")]);
    until("the removed provider to stop", move || gone(alpha_pid)).await;
    hub.shutdown().await;
}

/// `progress` called as request `id` of `session` with a client token of its own, by a
/// client that `takes` progress or not: the answer's text and the progress notifications
/// its sink got.
async fn progress(hub: &Hub, session: &str, id: Value, takes: bool) -> (String, Vec<Value>) {
    let (sink, mut got) = butler_mcp::upcall::channel(takes);
    let params = json!({"name": "alpha__progress", "arguments": {}, "_meta": {"progressToken": "mine"}});
    let result =
        hub.call_tool(&View::Main, session, &id, params, Some(sink), &Asker::hub()).await.expect("progress answers");
    let result = result.into_value();
    let mut notifications = Vec::new();
    while let Ok(upcall) = got.try_recv() {
        match upcall {
            butler_mcp::upcall::Upcall::Progress(n) => notifications.push(n),
            butler_mcp::upcall::Upcall::Request(asked) => panic!("progress asks nothing: {asked:?}"),
            butler_mcp::upcall::Upcall::Log(message) => panic!("progress logs nothing: {message}"),
        }
    }
    (text_of(&result), notifications)
}

#[tokio::test]
async fn two_sessions_using_the_same_request_id_each_get_their_own_answer() {
    use_real_keeper();
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_providers(r, &[("alpha", None)]);
    let hub = hub(r, &scan(r, None)).await;
    let one = hub.open_session(&View::Main, "2025-06-18".to_owned(), json!({}));
    let two = hub.open_session(&View::Main, "2025-06-18".to_owned(), json!({}));

    // Session one's request 7 hangs on the provider; session two's request 7 is answered
    // meanwhile, on the same pipe.
    let hanging = tokio::spawn({
        let (hub, one) = (Arc::clone(&hub), one.clone());
        async move {
            hub.call_tool(
                &View::Main,
                &one,
                &json!(7),
                json!({"name": "alpha__hang", "arguments": {}}),
                None,
                &Asker::hub(),
            )
            .await
            .map(Answer::into_value)
        }
    });
    let hang_id = logged(r, "alpha", "hanging ", 1).await.remove(0);
    let echoed = call_answer(&hub, &two, json!(7), "alpha__echo", json!({"text": "two's seven"})).await;
    // A result the hub changes nothing in is passed on as its provider wrote it.
    assert!(matches!(echoed, Answer::Verbatim(_)), "{echoed:?}");
    assert_eq!(text_of(&echoed.into_value()), "two's seven");

    // Both sessions' request 8 at once.
    let (eight_one, eight_two) = tokio::join!(
        call(&hub, &one, json!(8), "alpha__echo", json!({"text": "one's eight"})),
        call(&hub, &two, json!(8), "alpha__echo", json!({"text": "two's eight"})),
    );
    assert_eq!((text_of(&eight_one).as_str(), text_of(&eight_two).as_str()), ("one's eight", "two's eight"));

    // And request 9 at once, with the same client progress token.
    let ((text_one, progress_one), (text_two, progress_two)) = within("two progress calls", async {
        tokio::join!(progress(&hub, &one, json!(9), true), progress(&hub, &two, json!(9), true))
    })
    .await;
    assert_eq!((text_one.as_str(), text_two.as_str()), ("done", "done"));
    for got in [&progress_one, &progress_two] {
        let steps: Vec<&Value> = got.iter().map(|n| &n["progress"]).collect();
        assert_eq!(steps, [&json!(1), &json!(2), &json!(3)], "each call gets its own three steps: {got:?}");
    }
    assert_ne!(progress_one[0]["progressToken"], progress_two[0]["progressToken"], "the hub's tokens differ");
    // A client that does not take progress: its provider is given no token at all.
    let (text, none) = within("a call without progress", progress(&hub, &one, json!(10), false)).await;
    assert_eq!((text.as_str(), none.as_slice()), ("done, no token given", &[][..]));

    // Session one's 7 still waits; cancelling it ends it.
    assert!(!hanging.is_finished(), "session two's answer did not end session one's call");
    hub.cancel(&one, &json!(7), Some("one cancels".to_owned())).await;
    let ended = within("the cancelled hang", hanging).await.expect("the task").expect("an answer");
    assert_eq!(ended["isError"], true, "{ended}");
    assert_eq!(logged(r, "alpha", "cancelled ", 1).await, [format!("{hang_id} one cancels")]);
    hub.shutdown().await;
}

#[tokio::test]
async fn a_cancellation_reaches_the_provider_for_the_call_it_names() {
    use_real_keeper();
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_providers(r, &[("alpha", None)]);
    let hub = hub(r, &scan(r, None)).await;
    let hang = |session: &'static str| {
        let hub = Arc::clone(&hub);
        tokio::spawn(async move {
            hub.call_tool(
                &View::Main,
                session,
                &json!(5),
                json!({"name": "alpha__hang", "arguments": {}}),
                None,
                &Asker::hub(),
            )
            .await
            .map(Answer::into_value)
        })
    };
    // Both sessions' request 5 hangs; the provider knows them by ids of the hub's own.
    let first = hang("first");
    let first_id = logged(r, "alpha", "hanging ", 1).await.remove(0);
    let second = hang("second");
    let second_id = logged(r, "alpha", "hanging ", 2).await.remove(1);
    assert_ne!(first_id, second_id);

    // A request nobody made is nothing to cancel.
    hub.cancel("second", &json!(6), Some("not a request".to_owned())).await;
    hub.cancel("second", &json!(5), Some("second cancels".to_owned())).await;
    let ended = within("the second call", second).await.expect("the task").expect("an answer");
    assert_eq!(ended["isError"], true, "{ended}");
    assert!(text_of(&ended).contains("cancelled"), "{ended}");
    assert_eq!(logged(r, "alpha", "cancelled ", 1).await, [format!("{second_id} second cancels")]);
    assert!(!first.is_finished(), "the other session's request 5 was not cancelled");

    hub.cancel("first", &json!(5), None).await;
    let ended = within("the first call", first).await.expect("the task").expect("an answer");
    assert_eq!(ended["isError"], true, "{ended}");
    let cancelled = logged(r, "alpha", "cancelled ", 2).await;
    assert_eq!(cancelled, [format!("{second_id} second cancels"), format!("{first_id} ")], "in order, each once");
    // Cancelling again, or after the answer, reaches nobody.
    hub.cancel("first", &json!(5), Some("again".to_owned())).await;
    assert_eq!(
        text_of(&call(&hub, "first", json!(9), "alpha__echo", json!({"text": "still here"})).await),
        "still here"
    );
    assert_eq!(log_lines(r, "alpha").iter().filter(|l| l.starts_with("cancelled")).count(), 2);
    hub.shutdown().await;
}

#[tokio::test]
async fn a_crashing_provider_answers_is_error_costs_only_itself_and_comes_back() {
    use_real_keeper();
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_providers(r, &[("alpha", None), ("beta", None)]);
    let hub = hub(r, &scan(r, None)).await;
    assert_eq!(tool_names(&hub).await.len(), 2 * PUBLIC_TOOLS.len());

    let crashed = call(&hub, "s", json!(1), "alpha__crash", json!({})).await;
    assert_eq!(crashed["isError"], true, "{crashed}");
    assert!(text_of(&crashed).starts_with("alpha__crash: "), "{crashed}");
    assert_eq!(text_of(&call(&hub, "s", json!(2), "beta__echo", json!({"text": "unharmed"})).await), "unharmed");
    let alpha = provider_status(&hub, "alpha");
    assert_eq!(alpha["state"], "crashed", "{alpha}");
    assert_eq!(alpha["lastError"], "exited (exit code 3)", "{alpha}");

    // It is started again by itself (after `provider::RESTART_AFTER`), and answers.
    let watched = Arc::clone(&hub);
    until("alpha to be back", move || provider_status(&watched, "alpha")["state"] == "ready").await;
    assert_eq!(text_of(&call(&hub, "s", json!(3), "alpha__echo", json!({"text": "back"})).await), "back");
    assert_eq!(logged(r, "alpha", "started ", 2).await.len(), 2, "started twice");
    assert_eq!(logged(r, "beta", "started ", 1).await.len(), 1, "beta ran on undisturbed");
    hub.shutdown().await;
}

/// A list waits for a provider that never answers once per start of it, not once per
/// client: after a list answered without it, its status says so (and still `pending`), and
/// the lists of later clients — of any capabilities — answer without waiting for it again.
#[tokio::test]
async fn a_list_waits_for_a_silent_provider_once_per_start_not_once_per_client() {
    use_real_keeper();
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    let silent = json!({"schemaVersion": 1, "kind": "tool", "id": "mute", "name": "mute",
        "mcp": {"transport": "stdio", "command": [python(), "-c", "import time\ntime.sleep(600)"], "timeoutSec": 120}});
    write_manifest(r, "tools/mute", &silent);
    let hub = hub(r, &scan(r, None)).await;
    assert_eq!(provider_status(&hub, "mute")["missedListWait"], false);
    // The first list waits for it, and answers without it.
    assert!(!tool_names(&hub).await.iter().any(|n| n.starts_with("mute__")));
    let mute = provider_status(&hub, "mute");
    assert_eq!(
        (&mute["state"], &mute["pending"], &mute["missedListWait"]),
        (&json!("starting"), &json!(true), &json!(true)),
        "{mute}"
    );
    // Later clients' lists do not wait for it: a quarter of the wait is ample for a list
    // that waits for nothing, and far from the whole of it.
    let none = json!({});
    for client in [Asker::sessions_2025(&none, None), Asker::stateless_2026(&none, None), Asker::hub()] {
        let listed = tokio::time::timeout(butler_mcp::LIST_WAIT / 4, hub.list_tools(&View::Main, &client)).await;
        assert!(
            listed.is_ok_and(|tools| tools.len() == 1 && tools[0]["name"] == butler_mcp::exposure::FIND_TOOLS),
            "a later client's list waited for the silent provider again"
        );
        let mute = provider_status(&hub, "mute");
        assert_eq!(
            (&mute["state"], &mute["pending"], &mute["missedListWait"]),
            (&json!("starting"), &json!(true), &json!(true)),
            "{mute}"
        );
    }
    hub.shutdown().await;
}

/// A provider that never answers delays a list by
/// [`butler_mcp::LIST_WAIT`] at most. The list answers with what the others offer, the
/// silent one is still starting and marked pending in the status, and a later list finds
/// it no better and answers as soon.
#[tokio::test]
async fn a_provider_that_never_answers_does_not_hold_up_a_list() {
    use_real_keeper();
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_providers(r, &[("alpha", None)]);
    let silent = json!({"schemaVersion": 1, "kind": "tool", "id": "mute", "name": "mute",
        "mcp": {"transport": "stdio", "command": [python(), "-c", "import time\ntime.sleep(600)"], "timeoutSec": 120}});
    write_manifest(r, "tools/mute", &silent);
    let hub = hub(r, &scan(r, None)).await;
    // The first list starts both; alpha may take a while on a loaded machine, so lists are
    // asked until it is in — each answering while `mute` still says nothing (a list that
    // answered without alpha does not wait for it again: they are asked every 100 ms).
    let mut names = Vec::new();
    for _ in 0..400 {
        names = tool_names(&hub).await;
        let mute = provider_status(&hub, "mute");
        assert_eq!((&mute["state"], &mute["pending"]), (&json!("starting"), &json!(true)), "{mute}");
        if names.iter().any(|n| n.starts_with("alpha__")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(names.iter().filter(|n| n.starts_with("alpha__")).count(), PUBLIC_TOOLS.len(), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("mute__")), "{names:?}");
    assert_eq!(provider_status(&hub, "alpha")["pending"], false);
    hub.shutdown().await;
}

/// Reading the quarantine's queue (what `GET /mcp/quarantine`, `butler mcp held` and the
/// console's review queue read) starts no provider: one never listed stays idle, its
/// process never runs, and the queue holds nothing of it yet. A list then starts it, and
/// the queue shows what it holds, and the names that cannot be public are rejected.
#[tokio::test]
async fn reading_the_quarantine_queue_starts_no_provider() {
    use_real_keeper();
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_providers(r, &[("alpha", None)]);
    let settings = butler_mcp::Settings { quarantine: true, ..butler_mcp::Settings::default() };
    let hub = hub_with(r, &scan(r, None), settings).await;
    for _ in 0..3 {
        let report = hub.quarantine();
        assert!(report.enabled && report.held.is_empty(), "nothing is known of alpha yet");
    }
    // Long enough for a start the read had begun to reach the provider's log.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(provider_status(&hub, "alpha")["state"], "idle", "the queue read started alpha");
    assert!(log_lines(r, "alpha").is_empty(), "alpha ran: {:?}", log_lines(r, "alpha"));
    // A list starts it; its tools are held, and the queue says so.
    assert!(tool_names(&hub).await.is_empty(), "alpha's tools are held");
    let held_tools = |hub: &Hub| -> Vec<String> {
        hub.quarantine().held.into_iter().filter(|h| h.kind == Kind::Tool).map(|h| h.name).collect()
    };
    let queue = Arc::clone(&hub);
    until("alpha's tools in the queue", move || held_tools(&queue).len() == PUBLIC_TOOLS.len()).await;
    let held = held_tools(&hub);
    assert_eq!(held, PUBLIC_TOOLS, "the queue shows what the list found");
    // The names no client could call are not held for a review that could not make them
    // callable: they are rejected, as without the quarantine.
    let status = provider_status(&hub, "alpha");
    let rejected: Vec<&str> =
        status["rejected"].as_array().expect("rejected").iter().filter_map(|r| r["tool"].as_str()).collect();
    assert!(rejected.contains(&"bad name!") && rejected.iter().any(|r| r.len() == 70), "{status}");
    assert_eq!(rejected.len(), 2, "{status}");
    hub.shutdown().await;
}

/// The quarantine turned on and off while the hub runs (a root config edit): the tools a
/// client sees follow at once, and the pins to the 2025 handshake ask for a reconcile only
/// when they change.
#[tokio::test]
async fn the_quarantine_and_the_pins_are_retuned_while_the_hub_runs() {
    use_real_keeper();
    let dir = tempfile::tempdir().expect("temp dir");
    let r = dir.path();
    write_providers(r, &[("alpha", None)]);
    let hub = hub_with(r, &scan(r, None), butler_mcp::Settings::default()).await;
    assert_eq!(tool_names(&hub).await.len(), PUBLIC_TOOLS.len(), "no quarantine: alpha's tools are listed");

    let on = butler_mcp::Settings { quarantine: true, ..butler_mcp::Settings::default() };
    assert!(!hub.retune(&on), "the pins did not change");
    assert!(hub.quarantine().enabled);
    assert!(tool_names(&hub).await.is_empty(), "held from now on");

    let pinned = butler_mcp::Settings {
        legacy_providers: ["alpha".to_owned()].into_iter().collect(),
        ..butler_mcp::Settings::default()
    };
    assert!(hub.retune(&pinned), "a changed pin asks for a reconcile");
    assert!(!hub.quarantine().enabled);
    assert_eq!(tool_names(&hub).await.len(), PUBLIC_TOOLS.len(), "off again: listed again");
    assert!(!hub.retune(&pinned), "the same pins again: nothing to settle");
    hub.shutdown().await;
}
