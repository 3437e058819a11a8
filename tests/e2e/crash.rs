//! Crash consistency: the same instance is served, loaded and killed with SIGKILL again and
//! again, and every restart must find what the killed host acknowledged, once.
//!
//! `knowledge_loop::a_killed_host_leaves_no_torn_card_and_no_half_applied_candidate` kills
//! one host once, in the middle of a run of approvals. This loop does it [`ROUNDS`] times on
//! one instance, under a mix of load: two owner approvers, an agent observing, a
//! distilling agent claiming batches, reading evidence, submitting candidates and completing
//! batches, the console's layout being written, and MCP tool calls through the hub to a real
//! stdio provider (`tests/providers/fake_mcp.py`) — while a hosted service with a child
//! process runs. Each round is killed at a seeded moment ([`SEED`]: the same moments every
//! run) between [`KILL_AFTER_MS`]. Before the next host starts, no process of the killed one
//! (keepers, the provider, the service and its child) may remain; once it is ready:
//!
//! - every `.json`, `.jsonl` and `.md` file under `self/` and the state directory parses
//!   (card front matter included); temp files of cut writes may remain, named `.<name>…`;
//! - every approval answered 200 is applied exactly once: its candidate file says
//!   `approved` with the card it answered, that card exists with its title, no title exists
//!   twice, and a replay with the same idempotency key gets the same answer; an approval
//!   in flight at the kill is finished by its replay, also exactly once;
//! - every candidate whose submission was answered exists;
//! - every observation answered 202 is in the journal exactly once (one in flight at most
//!   once);
//! - the layout is the last one acknowledged, or the one in flight at the kill;
//! - the catalog lists the same extensions, without an error.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use serde_json::{Value, json};

use crate::stores::{self, front_matter};
use crate::util::{Butler, marked, marker, wait_until, write_manifest};

/// Times the host is started, loaded and killed.
const ROUNDS: usize = 30;
/// The seed of the kill moments.
const SEED: u64 = 0x0c2a_5eed_b17e_d00d;
/// The kill comes this long (ms) after the load started: at least the first, less than
/// the second.
const KILL_AFTER_MS: (u64, u64) = (30, 1300);
/// Any request of the load, and of the checks, that takes longer hangs: the faculty
/// deadline (30 s by default) plus one second.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(31);
/// How long a killed host's processes may take to be gone.
const ORPHAN_LIMIT: Duration = Duration::from_secs(10);
/// How long a restarted host may take to be ready.
const READY_LIMIT: Duration = Duration::from_secs(30);
/// Candidates submitted before the first round, so that the approvers never wait.
const SEEDED: usize = 200;
/// The built-in pipeline faculties.
const BUILTINS: [&str; 4] = ["journal", "distill", "validity", "cards"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// What the load sent and what the host acknowledged, across rounds.
#[derive(Default)]
struct Ledger {
    /// Approvals answered 200: candidate id → (the request's args, the answer's data, title).
    approved: BTreeMap<String, (Value, Value, String)>,
    /// Approvals acknowledged in the round that was just killed (replayed after restart).
    fresh: BTreeSet<String>,
    /// Approvals sent without an answer before the kill: candidate id → (args, title).
    in_flight: BTreeMap<String, (Value, String)>,
    /// Pending candidates to approve: (id, title).
    pool: Vec<(String, String)>,
    /// Every candidate whose submission was answered: id → title.
    submitted: BTreeMap<String, String>,
    /// Observation markers answered 202.
    observed: BTreeSet<String>,
    /// Observation markers sent without an answer.
    observing: BTreeSet<String>,
    /// The last layout acknowledged (or found after a restart).
    layout: Value,
    /// A layout write sent without an answer.
    layout_in_flight: Option<Value>,
    /// MCP calls answered correctly.
    mcp_calls: u64,
    /// Approvals in flight at the kills: (already applied when the host restarted, not).
    in_flight_seen: (usize, usize),
    /// Observations in flight at the kills: (in the journal after the restart, not).
    observing_seen: (usize, usize),
    /// Layout writes in flight at the kills: (found saved, not).
    layout_seen: (usize, usize),
    /// Requests of the load answered, all kinds.
    answered: u64,
    /// What went wrong before the kill (a failure of the test).
    failures: Vec<String>,
}

/// One round's load: what every load thread shares.
struct Load<'a> {
    client: Client,
    origin: String,
    token: String,
    round: usize,
    killing: AtomicBool,
    ledger: &'a Mutex<Ledger>,
    counter: std::sync::atomic::AtomicU64,
}

/// The answer to a request: status and body, or why there was none.
type Answer = Result<(u16, Value), String>;

impl Load<'_> {
    fn api(&self, path: &str) -> String {
        format!("{}/myspace-butler/api{path}", self.origin)
    }

    fn killing(&self) -> bool {
        self.killing.load(Ordering::SeqCst)
    }

    fn next(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed)
    }

    fn send(&self, request: reqwest::blocking::RequestBuilder) -> Answer {
        let response = request.send().map_err(|e| format!("{e:#}"))?;
        let status = response.status().as_u16();
        let text = response.text().map_err(|e| format!("{e:#}"))?;
        lock(self.ledger).answered += 1;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    fn post(&self, path: &str, body: &Value, owner: bool) -> Answer {
        let mut request =
            self.client.post(self.api(path)).header("content-type", "application/json").body(body.to_string());
        if owner {
            request = request.header("authorization", format!("Bearer {}", self.token));
        }
        self.send(request)
    }

    fn act(&self, action: &str, args: Value, owner: bool) -> Answer {
        self.post("/pipeline", &json!({"action": action, "args": args}), owner)
    }

    /// The data of a 200; `None` once the host is being killed (no answer is owed then);
    /// anything else before the kill is a failure.
    fn data(&self, what: &str, answer: &Answer) -> Option<Value> {
        match answer {
            Ok((200, body)) if body["ok"] == true => Some(body["data"].clone()),
            _ if self.killing() => None,
            Ok((status, body)) => self.fail(format!("{what}: {status} {body}")),
            Err(e) => self.fail(format!("{what}: no answer before the kill: {e}")),
        }
    }

    fn fail(&self, message: String) -> Option<Value> {
        let mut ledger = lock(self.ledger);
        if ledger.failures.len() < 20 {
            ledger.failures.push(format!("round {}: {message}", self.round));
        }
        None
    }

    /// Observes with a marker; the marker is acknowledged on 202.
    fn observe(&self, marker: &str) -> bool {
        lock(self.ledger).observing.insert(marker.to_owned());
        let body = json!({"source": "crash-agent", "type": "fact", "tags": ["crash"], "text": format!("[{marker}] a fact seen in round {}", self.round)});
        match self.post("/observe", &body, false) {
            Ok((202, _)) => {
                let mut ledger = lock(self.ledger);
                ledger.observing.remove(marker);
                ledger.observed.insert(marker.to_owned());
                true
            }
            _ if self.killing() => false,
            other => self.fail(format!("observe: {other:?}")).is_some(),
        }
    }

    fn observer(&self) {
        while !self.killing() {
            let marker = format!("r{}-o{}", self.round, self.next());
            if !self.observe(&marker) {
                return;
            }
        }
    }

    /// Claims a batch, reads the evidence, submits one or two candidates, completes.
    fn distiller(&self) {
        while !self.killing() {
            let marker = format!("r{}-d{}", self.round, self.next());
            if !self.observe(&marker) {
                return;
            }
            let Some(batch) =
                self.data("claim", &self.act("distill.claim", json!({"limit": 4, "leaseSeconds": 60}), false))
            else {
                return;
            };
            let Some(first) = batch["items"][0]["id"].as_str().map(str::to_owned) else { continue };
            let (id, lease) = (batch["batchId"].clone(), batch["lease"].clone());
            let evidence = json!({"batchId": id, "lease": lease, "itemId": first});
            if self.data("evidence", &self.act("distill.evidence", evidence, false)).is_none() {
                return;
            }
            let mut candidates = Vec::new();
            for _ in 0..1 + self.next() % 2 {
                let title = format!("Crash r{} n{}", self.round, self.next());
                let args = json!({"batchId": id, "lease": lease, "evidence": [first], "op": "create",
                    "card": {"kind": "knowledge", "title": title, "summary": format!("{title} in one line"),
                             "body": format!("Written by {title}."), "appliesTo": "this repo", "tags": ["crash"]}});
                let Some(submitted) = self.data("submit", &self.act("candidate.submit", args, false)) else { return };
                let candidate = submitted["id"].as_str().unwrap_or_default().to_owned();
                let mut ledger = lock(self.ledger);
                ledger.submitted.insert(candidate.clone(), title.clone());
                ledger.pool.push((candidate.clone(), title));
                drop(ledger);
                candidates.push(candidate);
            }
            let complete = json!({"batchId": id, "lease": lease, "candidates": candidates});
            if self.data("complete", &self.act("distill.complete", complete, false)).is_none() {
                return;
            }
        }
    }

    /// Approves pending candidates as the owner (prepare, then approve with a key).
    fn approver(&self) {
        while !self.killing() {
            let Some((id, title)) = lock(self.ledger).pool.pop() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let Some(prepared) = self.data("prepare", &self.act("review.prepare", json!({"id": id}), true)) else {
                lock(self.ledger).pool.push((id, title));
                return;
            };
            let args = json!({"id": id, "revision": prepared["revision"], "contentHash": prepared["contentHash"],
                              "token": prepared["token"], "idempotencyKey": format!("crash-{id}")});
            lock(self.ledger).in_flight.insert(id.clone(), (args.clone(), title.clone()));
            let Some(data) = self.data("approve", &self.act("review.approve", args.clone(), true)) else { return };
            let mut ledger = lock(self.ledger);
            ledger.in_flight.remove(&id);
            ledger.fresh.insert(id.clone());
            ledger.approved.insert(id, (args, data, title));
        }
    }

    /// Replaces the layout, one write at a time.
    fn layout_writer(&self) {
        while !self.killing() {
            let layout = json!({"version": 1, "order": {"tools": [format!("w-{}-{}", self.round, self.next())]},
                                "display": {"tools": {"mode": "all"}}});
            lock(self.ledger).layout_in_flight = Some(layout.clone());
            let request = self
                .client
                .put(self.api("/layout"))
                .header("content-type", "application/json")
                .body(layout.to_string());
            let answer = self.send(request);
            match &answer {
                Ok((200, body)) if *body == layout => {
                    let mut ledger = lock(self.ledger);
                    ledger.layout = layout;
                    ledger.layout_in_flight = None;
                }
                _ if self.killing() => return,
                other => {
                    self.fail(format!("layout: {other:?}"));
                    return;
                }
            }
        }
    }

    /// `tools/call fake__echo` through the hub, checking each answer.
    fn mcp_caller(&self) {
        let url = self.api("/mcp");
        let post = |body: Value, session: Option<&str>| {
            let mut request = self
                .client
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(body.to_string());
            if let Some(session) = session {
                request = request.header("mcp-session-id", session);
            }
            request.send()
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "crash", "version": "1"}}});
        let session = match post(init, None) {
            Ok(r) if r.status() == 200 => {
                r.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
            }
            _ if self.killing() => return,
            other => {
                self.fail(format!("mcp initialize: {:?}", other.map(|r| r.status())));
                return;
            }
        };
        let _ = post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), Some(&session));
        while !self.killing() {
            let n = self.next();
            let text = format!("echo r{} n{n}", self.round);
            let call = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                              "params": {"name": "fake__echo", "arguments": {"text": text}}});
            let answer = post(call, Some(&session)).and_then(reqwest::blocking::Response::json::<Value>);
            match answer {
                Ok(body) if body["result"]["content"][0]["text"] == text.as_str() => lock(self.ledger).mcp_calls += 1,
                _ if self.killing() => return,
                other => {
                    self.fail(format!("mcp call: {other:?}"));
                    return;
                }
            }
        }
    }
}

/// Submits `n` candidates (titles `Crash seed n…`) through the distill actions, ten to a
/// batch; the pending candidates as (id, title).
fn seed_candidates(butler: &Butler, n: usize) -> Vec<(String, String)> {
    let ok = |action: &str, args: Value| {
        let (status, body) = butler.post_json("/pipeline", &json!({"action": action, "args": args}), &[]);
        assert_eq!(status, 200, "{action}: {body}");
        body["data"].clone()
    };
    let mut seeded = Vec::new();
    for batch in 0..n.div_ceil(10) {
        let observed = butler.post_json(
            "/observe",
            &json!({"source": "crash-seed", "type": "fact", "text": format!("[seed-{batch}] a fact to distill")}),
            &[],
        );
        assert_eq!(observed.0, 202, "{}", observed.1);
        let claimed = ok("distill.claim", json!({"limit": 1}));
        let (id, lease, item) = (&claimed["batchId"], &claimed["lease"], &claimed["items"][0]["id"]);
        ok("distill.evidence", json!({"batchId": id, "lease": lease, "itemId": item}));
        let mut ids = Vec::new();
        for k in 0..10.min(n - seeded.len()) {
            let title = format!("Crash seed n{}", batch * 10 + k);
            let card = json!({"kind": "knowledge", "title": title, "summary": "seeded", "body": "Seeded.", "appliesTo": "this repo"});
            let submitted = ok(
                "candidate.submit",
                json!({"batchId": id, "lease": lease, "evidence": [item], "op": "create", "card": card}),
            );
            let candidate = submitted["id"].as_str().expect("candidate id").to_owned();
            ids.push(candidate.clone());
            seeded.push((candidate, title));
        }
        ok("distill.complete", json!({"batchId": id, "lease": lease, "candidates": ids}));
    }
    seeded
}

/// An instance with a warm compile cache, [`SEEDED`] pending candidates, the fake MCP
/// provider and a hosted service with a child, every process of theirs marked with
/// `marker`.
fn prepare(dir: &Path, marker: &str) -> (PathBuf, Vec<(String, String)>) {
    let first = Butler::start_logging(&dir.join("instance"), "info", &dir.join("host-prepare.log"));
    for id in BUILTINS {
        first.wait_optimized(id);
    }
    let seeded = seed_candidates(&first, SEEDED);
    let workdir = first.workdir.clone();
    let script = root().join("tests/providers/fake_mcp.py").display().to_string();
    let env = json!({"BUTLER_TEST_MARKER": marker, "FAKE_MCP_LOG": dir.join("fake.log").display().to_string()});
    write_manifest(
        &workdir,
        "tools/fake",
        &json!({"schemaVersion": 1, "kind": "tool", "id": "fake", "name": "Fake",
                "mcp": {"transport": "stdio", "command": ["python3", script], "env": env, "timeoutSec": 10}}),
    );
    // A new instance holds a provider's tools until the owner approves them: trust it.
    let token = format!("Bearer {}", first.owner_token());
    wait_until(READY_LIMIT, "the owner to trust the fake provider", || {
        let (status, _) = first.post_json(
            "/mcp/quarantine/approve",
            &json!({"provider": "fake", "tools": [], "trust": true}),
            &[("authorization", token.as_str())],
        );
        status == 200
    });
    assert!(first.stop().success());
    write_manifest(
        &workdir,
        "services/keeper",
        &json!({"schemaVersion": 1, "kind": "service", "id": "keeper", "name": "Keeper",
                "hosted": {"command": ["sh", "-c", "sleep 300 & wait"], "autoStart": true, "env": {"BUTLER_TEST_MARKER": marker}}}),
    );
    (workdir, seeded)
}

/// Waits until the host answers `/health` with every faculty ready and the built-ins are
/// listed ready.
fn wait_ready(butler: &Butler) -> Duration {
    wait_until(READY_LIMIT, "the restarted host to be ready", || {
        let Ok(response) = butler.get("/health").timeout(REQUEST_TIMEOUT).send() else { return false };
        let health: Value = response.json().unwrap_or(Value::Null);
        health["ok"] == true
            && health["faculties"]["ready"] == true
            && BUILTINS.iter().all(|id| butler.faculty(id).is_some_and(|f| f["state"] == "ready"))
    })
}

/// The cards of the store: title → ids (a title applied twice has two).
fn cards_by_title(workdir: &Path) -> BTreeMap<String, Vec<String>> {
    let mut cards: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for kind in ["rules", "knowledge"] {
        for entry in std::fs::read_dir(workdir.join("self").join(kind)).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(".md").filter(|_| !name.starts_with('.')) else { continue };
            let title = std::fs::read_to_string(entry.path())
                .ok()
                .and_then(|text| front_matter(&text).ok())
                .and_then(|fields| fields.get("title").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            cards.entry(title).or_default().push(id.to_owned());
        }
    }
    cards
}

/// Observation markers in the journal and how often each is there.
fn journal_markers(workdir: &Path) -> BTreeMap<String, usize> {
    let mut markers = BTreeMap::new();
    for entry in std::fs::read_dir(workdir.join("self/journal/spool")).into_iter().flatten().flatten() {
        for line in std::fs::read_to_string(entry.path()).unwrap_or_default().lines() {
            let Ok(observation) = serde_json::from_str::<Value>(line) else { continue };
            let marker = observation["text"].as_str().and_then(|t| t.strip_prefix('[')).and_then(|t| t.split_once(']'));
            if let Some((marker, _)) = marker {
                *markers.entry(marker.to_owned()).or_default() += 1;
            }
        }
    }
    markers
}

/// Everything that must hold once a host restarted after a kill. Failures are collected.
fn verify(butler: &Butler, ledger: &mut Ledger, expected_ids: &BTreeSet<String>, round: usize) -> Vec<String> {
    let mut failures = Vec::new();
    let workdir = &butler.workdir;
    failures.extend(stores::check(workdir, &["self", ".butler"]).torn);

    // Approvals in flight at the kill: the replay finishes them (or returns their answer).
    let client = butler_test_support::http::client().timeout(REQUEST_TIMEOUT).build().expect("client");
    let token = format!("Bearer {}", butler.owner_token());
    let act = |action: &str, args: &Value| -> (u16, Value) {
        let response = client
            .post(butler.api("/pipeline"))
            .header("content-type", "application/json")
            .header("authorization", &token)
            .body(json!({"action": action, "args": args}).to_string())
            .send();
        match response {
            Ok(r) => (r.status().as_u16(), r.json().unwrap_or(Value::Null)),
            Err(e) => (0, json!(format!("{e:#}"))),
        }
    };
    for (id, (args, title)) in std::mem::take(&mut ledger.in_flight) {
        let file = workdir.join(format!("self/candidates/{id}.json"));
        let before: Value =
            std::fs::read(&file).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or(Value::Null);
        if before["status"] == "approved" {
            ledger.in_flight_seen.0 += 1;
        } else {
            ledger.in_flight_seen.1 += 1;
        }
        let (status, body) = act("review.approve", &args);
        if status == 200 {
            ledger.approved.insert(id, (args, body["data"].clone(), title));
        } else {
            failures
                .push(format!("an approval in flight at the kill does not complete on replay: {id}: {status} {body}"));
        }
    }
    // Approvals acknowledged before the kill: the same answer again, never applied twice.
    for id in std::mem::take(&mut ledger.fresh) {
        let (args, data, _) = &ledger.approved[&id];
        let (status, body) = act("review.approve", args);
        if status != 200 || body["data"] != *data {
            failures.push(format!("the replay of acknowledged approval {id} answered {status} {body}, not {data}"));
        }
    }
    let cards = cards_by_title(workdir);
    for (title, ids) in cards.iter().filter(|(_, ids)| ids.len() > 1) {
        failures.push(format!("applied twice: the card `{title}` exists {} times: {ids:?}", ids.len()));
    }
    for (id, (_, data, title)) in &ledger.approved {
        let card = data["cardId"].as_str().unwrap_or_default();
        if cards.get(title).is_none_or(|ids| ids != &[card.to_owned()]) {
            failures.push(format!("approval of {id} lost: card `{card}` (`{title}`) is {:?}", cards.get(title)));
        }
        let file = workdir.join(format!("self/candidates/{id}.json"));
        let candidate: Value =
            std::fs::read(&file).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or(Value::Null);
        if candidate["status"] != "approved" || candidate["applied"]["cardId"] != card {
            failures.push(format!(
                "approval of {id} not recorded: status {} applied {}",
                candidate["status"], candidate["applied"]
            ));
        }
    }
    let approved_titles: BTreeSet<&String> = ledger.approved.values().map(|(_, _, t)| t).collect();
    let crash_cards = cards.keys().filter(|t| t.starts_with("Crash ")).count();
    if crash_cards != approved_titles.len() {
        failures.push(format!("{crash_cards} crash cards for {} approvals", approved_titles.len()));
    }
    for id in ledger.submitted.keys() {
        if !workdir.join(format!("self/candidates/{id}.json")).is_file() {
            failures.push(format!("submitted candidate {id} lost"));
        }
    }

    // Observations: acknowledged ones once, in-flight ones at most once.
    let markers = journal_markers(workdir);
    let lost: Vec<&String> = ledger.observed.iter().filter(|m| !markers.contains_key(*m)).collect();
    if !lost.is_empty() {
        failures.push(format!("{} acknowledged observations lost, e.g. {:?}", lost.len(), &lost[..lost.len().min(5)]));
    }
    let twice: Vec<(&String, &usize)> = markers.iter().filter(|(_, n)| **n > 1).collect();
    if !twice.is_empty() {
        failures.push(format!("observations recorded twice: {twice:?}"));
    }
    for marker in std::mem::take(&mut ledger.observing) {
        if markers.contains_key(&marker) {
            ledger.observing_seen.0 += 1;
            ledger.observed.insert(marker);
        } else {
            ledger.observing_seen.1 += 1;
        }
    }

    // The layout: the last acknowledged, or the one in flight.
    let layout: Value = client
        .get(butler.api("/layout"))
        .send()
        .ok()
        .and_then(|r| (r.status() == 200).then(|| r.json().ok()).flatten())
        .unwrap_or(Value::Null);
    let in_flight = ledger.layout_in_flight.take();
    if in_flight.is_some() {
        if in_flight.as_ref() == Some(&layout) {
            ledger.layout_seen.0 += 1;
        } else {
            ledger.layout_seen.1 += 1;
        }
    }
    if layout == ledger.layout || in_flight.as_ref() == Some(&layout) {
        ledger.layout = layout;
    } else {
        failures.push(format!("layout {layout} is neither the acknowledged {} nor {in_flight:?}", ledger.layout));
    }

    // The catalog: the same extensions, no error.
    let catalog = butler.catalog();
    let ids: BTreeSet<String> = catalog["extensions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["id"].as_str().map(str::to_owned))
        .collect();
    if &ids != expected_ids {
        failures.push(format!("the catalog changed: {ids:?}, expected {expected_ids:?}"));
    }
    if let Some(errors) = catalog["diagnostics"].as_array().filter(|d| d.iter().any(|d| d["severity"] == "error")) {
        failures.push(format!("catalog errors: {errors:?}"));
    }
    failures.into_iter().map(|f| format!("after round {}: {f}", round)).collect()
}

#[test]
fn thirty_sigkills_under_load_lose_nothing_acknowledged_and_apply_nothing_twice() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = marker("crash");
    let (workdir, seeded) = prepare(dir.path(), &marker);
    let submitted = seeded.iter().cloned().collect();
    let ledger = Mutex::new(Ledger { layout: json!({"version": 1}), pool: seeded, submitted, ..Ledger::default() });
    let mut rng = Rng(SEED);
    let mut expected_ids = BTreeSet::new();
    let (mut ready_max, mut orphans_max, mut marked_at_kill) = (Duration::ZERO, Duration::ZERO, Vec::new());
    let mut kills = Vec::new();
    let mut failures: Vec<String> = Vec::new();

    for round in 0..=ROUNDS {
        let log = dir.path().join(format!("host-{round}.log"));
        let mut butler = Butler::start_logging(&workdir, "info", &log);
        ready_max = ready_max.max(wait_ready(&butler));
        if round == 0 {
            expected_ids = butler.ids().into_iter().collect();
            for id in ["fake", "keeper", "journal", "distill", "validity", "cards"] {
                assert!(expected_ids.contains(id), "{id} registered: {expected_ids:?}");
            }
        } else {
            failures.extend(verify(&butler, &mut lock(&ledger), &expected_ids, round - 1));
            failures.append(&mut lock(&ledger).failures);
            if !failures.is_empty() {
                break;
            }
        }
        if round == ROUNDS {
            assert!(butler.stop().success(), "the last host exits cleanly");
            break;
        }

        let load = Load {
            client: butler_test_support::http::client().timeout(REQUEST_TIMEOUT).build().expect("client"),
            origin: butler.origin.clone(),
            token: butler.owner_token(),
            round,
            killing: AtomicBool::new(false),
            ledger: &ledger,
            counter: std::sync::atomic::AtomicU64::new(0),
        };
        let kill_after = Duration::from_millis(KILL_AFTER_MS.0 + rng.below(KILL_AFTER_MS.1 - KILL_AFTER_MS.0));
        kills.push(kill_after.as_millis());
        std::thread::scope(|scope| {
            scope.spawn(|| load.observer());
            scope.spawn(|| load.distiller());
            scope.spawn(|| load.approver());
            scope.spawn(|| load.approver());
            scope.spawn(|| load.layout_writer());
            scope.spawn(|| load.mcp_caller());
            std::thread::sleep(kill_after);
            marked_at_kill.push(marked(&marker).len());
            load.killing.store(true, Ordering::SeqCst);
            butler.kill();
        });
        let left =
            wait_until(ORPHAN_LIMIT, "every process of the killed host to be gone", || marked(&marker).is_empty());
        orphans_max = orphans_max.max(left);
    }

    let ledger = lock(&ledger);
    eprintln!(
        "crash: {ROUNDS} kills in {:.1} s (kill after ms: {kills:?}); marked processes at each kill: {marked_at_kill:?}; \
         slowest ready {ready_max:?}, slowest cleanup {orphans_max:?}; {} approvals, {} candidates, {} observations, \
         {} MCP calls acknowledged; {} requests answered; in flight at the kills (applied, not): approvals {:?}, \
         observations {:?}, layouts {:?}; temp files left: {:?}",
        started.elapsed().as_secs_f64(),
        ledger.approved.len(),
        ledger.submitted.len(),
        ledger.observed.len(),
        ledger.mcp_calls,
        ledger.answered,
        ledger.in_flight_seen,
        ledger.observing_seen,
        ledger.layout_seen,
        stores::check(&workdir, &["self", ".butler"]).temps
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The load really ran into the kills: approvals, observations and calls happened, and
    // most kills found the provider and the service running.
    assert!(ledger.approved.len() >= ROUNDS && ledger.observed.len() >= ROUNDS && ledger.mcp_calls >= ROUNDS as u64);
    assert!(marked_at_kill.iter().filter(|n| **n >= 4).count() >= ROUNDS / 2, "{marked_at_kill:?}");
    let (applied, not) = ledger.in_flight_seen;
    assert!(applied + not >= 3, "some kills caught an approval in flight: {applied} applied, {not} not");
}
