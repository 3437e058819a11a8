//! A concurrency torture test of the card pipeline against the real binary.
//!
//! Sixteen client threads fire a seeded random mix of every pipeline action for
//! [`LOAD`] — observations, claims, submissions, completions, review decisions (including
//! bursts of identical concurrent approvals and replays), searches, reads, listings,
//! validity refreshes, commits and context builds — while a crash-looping hosted tool
//! makes the host record its own L0 observations, the CLI runs `butler validity refresh`
//! now and then, and a checked file comes and goes. Every request has a client-side
//! deadline of the faculty deadline plus one second: a request that outlives it is *hung*
//! and fails the test (the host must never deadlock, whatever the interleaving). At the end
//! the test checks that nothing leaked and nothing was lost: no call slot is still taken,
//! every approval was applied exactly once, every store file parses, every accepted
//! observation is in the journal, and the host still answers and exits cleanly.
//!
//! The test is bounded: a deadlocked host makes it fail within about two minutes of the
//! start of the load, never hang.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Barrier, Mutex, MutexGuard, mpsc};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{Value, json};

use crate::stores::{self, front_matter};
use crate::util::{Butler, butler_command, write_manifest};

/// How long the clients fire requests.
const LOAD: Duration = Duration::from_secs(60);
/// Client threads firing requests.
const CLIENTS: usize = 16;
/// Threads sending one identical approval at once in a burst.
const BURST: usize = 4;
/// The seed of every client's random choices (each thread derives its own from it).
const SEED: u64 = 0x7bd5_3a91_c0de_2b17;
/// The faculty deadline (`faculties.<id>.timeoutMs`) set for the four built-ins.
const DEADLINE_MS: u64 = 10_000;
/// A request that takes longer than this is hung: the faculty deadline plus one second.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(DEADLINE_MS + 1000);
/// A CLI run makes a few requests; one that takes longer than this is hung.
const CLI_TIMEOUT: Duration = Duration::from_millis(2 * (DEADLINE_MS + 1000));
/// How often the CLI refresh runs.
const CLI_EVERY: Duration = Duration::from_secs(4);
/// How often the checked file `docs/flicker.md` appears or disappears.
const FLICKER_EVERY: Duration = Duration::from_millis(1500);
/// How long the runtime may take to report idle once the load stopped.
const IDLE_WAIT: Duration = Duration::from_secs(15);
/// The built-in pipeline faculties.
const BUILTINS: [&str; 4] = ["journal", "distill", "validity", "cards"];
/// The text the steady quote checks look for in `docs/torture.md`.
const STEADY_QUOTE: &str = "torture steady text";
/// Failure messages kept word for word (the rest are only counted).
const MAX_FAILURE_MESSAGES: usize = 60;

/// The whole torture: prepare and start the host, seed it, run the load, check what must
/// hold afterwards, print the summary, and fail with every failure found (hung requests
/// first among them).
#[test]
fn torture_mixed_pipeline_load_never_hangs_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let workdir = prepare_instance(dir.path());
    let butler = Butler::start(&workdir);
    for id in BUILTINS {
        butler.wait_ready_within(id, Duration::from_secs(120));
        let faculty = butler.faculty(id).expect("listed");
        assert_eq!(faculty["timeoutMs"], DEADLINE_MS, "the root config's deadline applies: {faculty}");
    }
    let client = butler_test_support::http::client().timeout(REQUEST_TIMEOUT).build().expect("HTTP client");
    let ctx = Arc::new(Ctx {
        client,
        origin: butler.origin.clone(),
        token: butler.owner_token(),
        workdir: butler.workdir.clone(),
        scratch: dir.path().to_owned(),
        pools: Mutex::new(Pools::default()),
        stats: Mutex::new(Stats::default()),
        failures: Mutex::new(Failures::default()),
        stop_at: Mutex::new(Instant::now() + LOAD),
        started: Instant::now(),
    });

    ctx.seed();
    let load_started = Instant::now();
    *lock(&ctx.stop_at) = load_started + LOAD;
    let finished = run_load(&ctx);
    let load_took = load_started.elapsed();
    if finished.len() < CLIENTS + 2 {
        ctx.fail(format!(
            "only {} of {} load threads finished in time (a request without an answer holds the rest)",
            finished.len(),
            CLIENTS + 2
        ));
    }

    // What must hold once the load stopped.
    let idle = ctx.check_idle();
    ctx.check_approvals();
    let files = ctx.check_store_files();
    let journal = ctx.check_journal();
    let health = ctx.request("health", ctx.client.get(ctx.api("/health")));
    if !health.is_status(200) {
        ctx.fail(format!("/health after the load: {}", health.describe()));
    }
    let status = butler.stop();
    if !status.success() {
        ctx.fail(format!("the host did not exit cleanly on SIGTERM within 10 s: {status}"));
    }

    ctx.print_summary(load_took, &[idle, files, journal]);
    let failures = lock(&ctx.failures);
    assert!(failures.count == 0, "{}", failures.report());
}

// ---------------------------------------------------------------------------------------
// The instance

/// Writes an instance under `dir` before the host first starts: the skeleton's root config
/// with a [`DEADLINE_MS`] deadline for the built-ins, a crash-looping hosted tool, the files
/// the checks look at; then installs the built-in faculties with `butler faculty upgrade`
/// (a root config that already exists is never overwritten, nor are the built-ins installed
/// into it by `serve`).
fn prepare_instance(dir: &Path) -> PathBuf {
    let workdir = dir.join("instance");
    for sub in ["tools", "services", "faculties", "self", "docs", ".butler"] {
        std::fs::create_dir_all(workdir.join(sub)).expect("mkdir");
    }
    let mut config: Value =
        serde_json::from_str(include_str!("../../skeleton/butler.json")).expect("the skeleton config is JSON");
    for id in BUILTINS {
        config["faculties"][id]["timeoutMs"] = json!(DEADLINE_MS);
    }
    std::fs::write(workdir.join("butler.json"), serde_json::to_vec_pretty(&config).expect("json")).expect("config");
    write_manifest(
        &workdir,
        "tools/crashy",
        &json!({"schemaVersion": 1, "kind": "tool", "id": "crashy", "name": "Crashy",
                "hosted": {"command": ["sh", "-c", "exit 3"], "autoStart": true, "restart": "on-failure"}}),
    );
    std::fs::write(workdir.join("docs/torture.md"), format!("The checks read this file.\n{STEADY_QUOTE}\n"))
        .expect("write docs/torture.md");
    std::fs::write(workdir.join("docs/flicker.md"), "now you see me\n").expect("write docs/flicker.md");

    let home = tempfile::tempdir().expect("home");
    let output = butler_command(home.path())
        .args(["faculty", "upgrade", "--apply", "--workdir"])
        .arg(&workdir)
        .output()
        .expect("run butler faculty upgrade");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.matches("installed").count() == BUILTINS.len(),
        "installing the built-ins: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    workdir
}

/// Starts the client threads, the CLI thread and the flicker thread; returns the names of
/// those that finished by the end of the load plus one request deadline (and a margin).
/// Threads still running then are left behind (detached), never waited for without bound.
fn run_load(ctx: &Arc<Ctx>) -> Vec<String> {
    let (done, finished) = mpsc::channel::<String>();
    let spawn = |name: String, body: Box<dyn FnOnce(&Ctx) + Send>| {
        let (ctx, done) = (Arc::clone(ctx), done.clone());
        std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                body(&ctx);
                let _ = done.send(name);
            })
            .expect("spawn a load thread");
    };
    for thread in 0..CLIENTS {
        spawn(format!("client-{thread}"), Box::new(move |ctx: &Ctx| ctx.client_loop(thread)));
    }
    spawn("cli".to_owned(), Box::new(Ctx::cli_loop));
    spawn("flicker".to_owned(), Box::new(Ctx::flicker_loop));
    drop(done);

    let stop_at = *lock(&ctx.stop_at);
    let give_up = stop_at + CLI_TIMEOUT.max(REQUEST_TIMEOUT) + Duration::from_secs(10);
    let mut names = Vec::new();
    let mut next_progress = Instant::now() + Duration::from_secs(10);
    while names.len() < CLIENTS + 2 {
        let now = Instant::now();
        if now >= give_up {
            break;
        }
        match finished.recv_timeout(give_up.min(next_progress).saturating_duration_since(now)) {
            Ok(name) => names.push(name),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if Instant::now() >= next_progress {
            let stats = lock(&ctx.stats);
            eprintln!("torture: {} requests so far, {} hung", stats.requests(), stats.hung);
            next_progress += Duration::from_secs(10);
        }
    }
    names
}

// ---------------------------------------------------------------------------------------
// Shared state

/// Locks a mutex, poisoned or not (a panicking client thread must not hide the report).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Everything the load threads share.
struct Ctx {
    client: Client,
    origin: String,
    token: String,
    workdir: PathBuf,
    /// Where the CLI runs write their output.
    scratch: PathBuf,
    pools: Mutex<Pools>,
    stats: Mutex<Stats>,
    failures: Mutex<Failures>,
    /// When the load stops.
    stop_at: Mutex<Instant>,
    /// When the first request was sent (the times in failure messages count from it).
    started: Instant,
}

/// A leased batch the clients know of.
#[derive(Debug, Clone)]
struct Batch {
    id: String,
    lease: String,
    items: Vec<String>,
    /// Candidates submitted in it and answered 200.
    candidates: Vec<String>,
}

/// A submitted candidate.
#[derive(Debug, Clone)]
struct Candidate {
    id: String,
    title: String,
    revision: Value,
    content_hash: Value,
}

/// A candidate with a review token.
#[derive(Debug, Clone)]
struct Prepared {
    candidate: Candidate,
    token: Value,
}

/// A candidate some approval of which answered 200.
#[derive(Debug, Clone)]
struct Approval {
    prepared: Prepared,
    /// The key of the first approval that answered 200.
    key: String,
    /// Every 200 answer's `data` for this candidate (first approvals and replays).
    answers: Vec<Value>,
}

/// What the clients pass to each other: batches, candidates, cards, markers.
#[derive(Default)]
struct Pools {
    batches: Vec<Batch>,
    pending: Vec<Candidate>,
    prepared: Vec<Prepared>,
    /// Candidate id → approval.
    approvals: BTreeMap<String, Approval>,
    /// Candidate id → title, of rejections that answered 200.
    rejections: BTreeMap<String, String>,
    /// Ids of approved cards.
    cards: Vec<String>,
    /// Markers of observations answered 202 (`/observe`) or 200 (`journal.intake`).
    observed: Vec<String>,
}

/// Counts per action.
#[derive(Default)]
struct ActionStats {
    /// `200`, `202`, `409 stale_candidate`, `hung`, `broken`, `exit 0`…
    statuses: BTreeMap<String, u64>,
    latencies_ms: Vec<u64>,
}

/// Counts of everything sent.
#[derive(Default)]
struct Stats {
    actions: BTreeMap<String, ActionStats>,
    hung: u64,
}

impl Stats {
    fn requests(&self) -> u64 {
        self.actions.values().map(|a| a.statuses.values().sum::<u64>()).sum()
    }
}

/// Failures, counted; the first [`MAX_FAILURE_MESSAGES`] kept word for word.
#[derive(Default)]
struct Failures {
    count: usize,
    messages: Vec<String>,
    /// Failures by kind.
    kinds: BTreeMap<String, usize>,
}

impl Failures {
    fn report(&self) -> String {
        let kinds: Vec<String> = self.kinds.iter().map(|(k, n)| format!("  {n} × {k}")).collect();
        let mut out = format!("{} failures:\n{}\nfirst ones:\n", self.count, kinds.join("\n"));
        for message in &self.messages {
            out.push_str("  - ");
            out.push_str(message);
            out.push('\n');
        }
        out
    }
}

/// Who a request claims to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// An agent: no owner signal.
    Agent,
    /// The owner, the CLI's way: `Authorization: Bearer <owner token>`.
    Token,
}

/// What became of one request.
#[derive(Debug)]
enum Outcome {
    /// A JSON answer.
    Answer { status: u16, body: Value },
    /// No answer within [`REQUEST_TIMEOUT`].
    Hung,
    /// A transport failure or a body that is not JSON.
    Broken(String),
}

impl Outcome {
    fn is_status(&self, expected: u16) -> bool {
        matches!(self, Self::Answer { status, .. } if *status == expected)
    }

    /// The `data` of a `200 {"ok":true,"data"}` answer.
    fn data(&self) -> Option<&Value> {
        match self {
            Self::Answer { status: 200, body } if body["ok"] == true => body.get("data"),
            _ => None,
        }
    }

    /// The error code of an error envelope.
    fn code(&self) -> Option<&str> {
        match self {
            Self::Answer { body, .. } => body["error"]["code"].as_str(),
            _ => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Answer { status, body } => format!("{status} {}", clip(&body.to_string(), 300)),
            Self::Hung => format!("no answer within {REQUEST_TIMEOUT:?}"),
            Self::Broken(why) => why.clone(),
        }
    }
}

/// At most `max` characters of `text`.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

/// A tiny deterministic generator (xorshift64*), one per thread.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Everything a client can do.
#[derive(Debug, Clone, Copy)]
enum Act {
    Observe,
    Intake,
    Claim,
    Evidence,
    Submit,
    Complete,
    ReviewList,
    Prepare,
    Approve,
    Burst,
    ApproveAgain,
    Reject,
    Search,
    Read,
    List,
    Refresh,
    ValidityCards,
    Check,
    Commit,
    ContextBuild,
}

/// The mix: each action with its weight. Observations and approvals are frequent, since
/// their races are what deadlocked.
const MIX: &[(Act, usize)] = &[
    (Act::Observe, 14),
    (Act::Intake, 3),
    (Act::Claim, 5),
    (Act::Evidence, 2),
    (Act::Submit, 10),
    (Act::Complete, 4),
    (Act::ReviewList, 2),
    (Act::Prepare, 8),
    (Act::Approve, 8),
    (Act::Burst, 2),
    (Act::ApproveAgain, 2),
    (Act::Reject, 2),
    (Act::Search, 8),
    (Act::Read, 5),
    (Act::List, 4),
    (Act::Refresh, 4),
    (Act::ValidityCards, 2),
    (Act::Check, 2),
    (Act::Commit, 2),
    (Act::ContextBuild, 4),
];

fn pick_act(rng: &mut Rng) -> Act {
    let total: usize = MIX.iter().map(|(_, w)| w).sum();
    let mut roll = rng.below(total);
    for (act, weight) in MIX {
        if roll < *weight {
            return *act;
        }
        roll -= weight;
    }
    Act::Observe
}

/// Search terms: words of the cards, words of nothing, and one so common it reads the index.
const QUERIES: &[&str] = &["torture", "steady", "card", "body", "torture card", "zzz-nothing", "e"];

// ---------------------------------------------------------------------------------------
// Requests

impl Ctx {
    fn api(&self, path: &str) -> String {
        format!("{}/myspace-butler/api{path}", self.origin)
    }

    fn stopped(&self) -> bool {
        Instant::now() >= *lock(&self.stop_at)
    }

    fn pools(&self) -> MutexGuard<'_, Pools> {
        lock(&self.pools)
    }

    /// Records a failure.
    fn fail(&self, message: String) {
        let mut failures = lock(&self.failures);
        failures.count += 1;
        // `<problem>: <label> after …` counts by problem and label, the rest by problem.
        let kind = match message.split_once(" after ") {
            Some((kind, _)) => kind,
            None => message.split(':').next().unwrap_or_default(),
        };
        let kind: String = kind.chars().take(80).collect();
        *failures.kinds.entry(kind).or_default() += 1;
        if failures.messages.len() < MAX_FAILURE_MESSAGES {
            failures.messages.push(message);
        }
    }

    /// Sends `request`, times it, records it under `label`, and checks the answer is an
    /// acceptable, well-formed JSON envelope.
    fn request(&self, label: &str, request: RequestBuilder) -> Outcome {
        let started = Instant::now();
        let outcome = match request.send() {
            Err(e) if e.is_timeout() => Outcome::Hung,
            Err(e) => Outcome::Broken(format!("transport error: {e}")),
            Ok(response) => {
                let status = response.status().as_u16();
                match response.text() {
                    Err(e) if e.is_timeout() => Outcome::Hung,
                    Err(e) => Outcome::Broken(format!("reading the body of a {status}: {e}")),
                    Ok(text) => match serde_json::from_str::<Value>(&text) {
                        Ok(body) => Outcome::Answer { status, body },
                        Err(_) => Outcome::Broken(format!("not JSON (status {status}): {}", clip(&text, 200))),
                    },
                }
            }
        };
        let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let key = match &outcome {
            Outcome::Answer { status, .. } if (200..300).contains(status) => status.to_string(),
            Outcome::Answer { status, .. } => format!("{status} {}", outcome.code().unwrap_or("?")),
            Outcome::Hung => "hung".to_owned(),
            Outcome::Broken(_) => "broken".to_owned(),
        };
        {
            let mut stats = lock(&self.stats);
            if matches!(outcome, Outcome::Hung) {
                stats.hung += 1;
            }
            let action = stats.actions.entry(label.to_owned()).or_default();
            *action.statuses.entry(key).or_default() += 1;
            action.latencies_ms.push(elapsed);
        }
        if let Some(problem) = unacceptable(label, &outcome) {
            let sent = started.duration_since(self.started).as_secs_f64();
            self.fail(format!("{problem}: {label} after {elapsed} ms (sent at {sent:.1} s): {}", outcome.describe()));
        }
        outcome
    }

    /// `POST /pipeline {action, args}` as `caller`.
    fn pipeline(&self, label: &str, action: &str, args: &Value, caller: Caller) -> Outcome {
        let mut request = self
            .client
            .post(self.api("/pipeline"))
            .header("content-type", "application/json")
            .body(json!({"action": action, "args": args}).to_string());
        request = match caller {
            Caller::Agent => request,
            Caller::Token => request.header("authorization", format!("Bearer {}", self.token)),
        };
        let outcome = self.request(label, request);
        if caller == Caller::Token && outcome.code() == Some("owner_required") {
            self.fail(format!("owner token refused: {label}: {}", outcome.describe()));
        }
        outcome
    }

    /// A pipeline action under its own name.
    fn act(&self, action: &str, args: &Value, caller: Caller) -> Outcome {
        self.pipeline(action, action, args, caller)
    }
}

/// Why an outcome is not acceptable, if it is not: hung, broken, not the envelope, or a
/// server error other than `busy` (503), `timeout` (504) and, for `/observe`, the journal's
/// `intake_failed` (502).
fn unacceptable(label: &str, outcome: &Outcome) -> Option<&'static str> {
    let (status, body) = match outcome {
        Outcome::Hung => return Some("hung request"),
        Outcome::Broken(_) => return Some("broken request"),
        Outcome::Answer { status, body } => (*status, body),
    };
    let code = body["error"]["code"].as_str();
    let well_formed = match status {
        202 if label == "observe" => *body == json!({"queued": true}),
        200..=299 if label == "health" || label == "faculties" => body.is_object(),
        200..=299 => body["ok"] == true && body.get("data").is_some(),
        _ => body["ok"] == false && code.is_some() && body["error"]["message"].is_string(),
    };
    if !well_formed {
        return Some("malformed envelope");
    }
    match (status, code) {
        (200..=499, _) | (503, Some("busy")) | (504, Some("timeout")) => None,
        (502, Some("intake_failed")) if label == "observe" => None,
        _ => Some("server error"),
    }
}

// ---------------------------------------------------------------------------------------
// The clients

impl Ctx {
    /// Puts a few observations and candidates in place so that every action has something
    /// to work on from the first second: observations, one claimed batch with candidates,
    /// some prepared, one approved. It stops at the first hung request (already a
    /// failure), so that a host deadlocked by then costs one request deadline, not one per
    /// step.
    fn seed(&self) {
        let hung = || lock(&self.stats).hung > 0;
        for n in 0..8 {
            if hung() {
                return;
            }
            self.observe(CLIENTS, n);
        }
        if hung() {
            return;
        }
        let Some(mut batch) = self.claim(50) else {
            if !hung() {
                self.fail("seeding: the first claim returned no batch".to_owned());
            }
            return;
        };
        let mut rng = Rng::new(SEED);
        for n in 0..6 {
            if hung() {
                return;
            }
            self.submit(&mut batch, CLIENTS, 100 + n, &mut rng);
        }
        if hung() {
            return;
        }
        self.complete(batch);
        for _ in 0..4 {
            if let Some(candidate) = self.take_pending(&mut rng).filter(|_| !hung()) {
                self.prepare(candidate);
            }
        }
        if let Some(prepared) = self.take_prepared(&mut rng).filter(|_| !hung()) {
            self.approve(prepared, "seed-approve");
        }
    }

    /// One client: random actions until the load stops.
    fn client_loop(&self, thread: usize) {
        let factor = u64::try_from(thread + 1).unwrap_or(1);
        let mut rng = Rng::new(SEED ^ factor.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut n = 0;
        while !self.stopped() {
            n += 1;
            self.run(pick_act(&mut rng), thread, n, &mut rng);
            std::thread::sleep(Duration::from_millis(u64::try_from(rng.below(5)).unwrap_or(0)));
        }
    }

    /// Runs `act`; an action with nothing to act on does what would give it something.
    fn run(&self, act: Act, thread: usize, n: usize, rng: &mut Rng) {
        match act {
            Act::Observe => self.observe(thread, n),
            Act::Intake => self.intake(thread, n),
            Act::Claim => self.claim_and_keep(rng),
            Act::Evidence => match self.any_batch(rng) {
                Some(batch) => {
                    let item = rng.pick(&batch.items).clone();
                    self.act(
                        "distill.evidence",
                        &json!({"batchId": batch.id, "lease": batch.lease, "itemId": item}),
                        Caller::Agent,
                    );
                }
                None => self.claim_and_keep(rng),
            },
            Act::Submit => match self.take_batch(rng) {
                Some(mut batch) => {
                    self.submit(&mut batch, thread, n, rng);
                    self.pools().batches.push(batch);
                }
                None => self.claim_and_keep(rng),
            },
            Act::Complete => match self.take_batch(rng) {
                Some(batch) => self.complete(batch),
                None => self.claim_and_keep(rng),
            },
            Act::ReviewList => {
                self.act("review.list", &json!({}), Caller::Agent);
            }
            Act::Prepare => self.prepare_or_submit(thread, n, rng),
            Act::Approve => match self.take_prepared(rng) {
                Some(prepared) => self.approve(prepared, &format!("approve-{thread}-{n}")),
                None => self.prepare_or_submit(thread, n, rng),
            },
            Act::Burst => match self.take_prepared(rng) {
                Some(prepared) => self.burst(prepared, &format!("burst-{thread}-{n}")),
                None => self.prepare_or_submit(thread, n, rng),
            },
            Act::ApproveAgain => self.approve_again(thread, n, rng),
            Act::Reject => match self.take_prepared(rng) {
                Some(prepared) => self.reject(prepared, &format!("reject-{thread}-{n}")),
                None => self.prepare_or_submit(thread, n, rng),
            },
            Act::Search => {
                let args = json!({"query": rng.pick(QUERIES), "limit": 10, "includeInactive": rng.chance(30)});
                self.act("cards.search", &args, Caller::Agent);
            }
            Act::Read => {
                let id = self.any_card(rng).unwrap_or_else(|| "no-such-card".to_owned());
                self.act("cards.read", &json!({"id": id}), Caller::Agent);
            }
            Act::List => {
                let mut args = json!({"includeInactive": rng.chance(50), "limit": 20, "offset": rng.below(10)});
                if rng.chance(30) {
                    args["kind"] = json!("knowledge");
                }
                self.act("cards.list", &args, Caller::Agent);
            }
            Act::Refresh => {
                let args = match self.any_card(rng) {
                    Some(id) if rng.chance(50) => json!({"ids": [id]}),
                    _ => json!({}),
                };
                self.act("validity.refresh", &args, Caller::Agent);
            }
            Act::ValidityCards => {
                self.act("validity.cards", &json!({}), Caller::Agent);
            }
            Act::Check => {
                let path = if rng.chance(50) { "docs/torture.md" } else { "docs/flicker.md" };
                self.act("validity.check", &json!({"checks": [{"type": "path", "path": path}]}), Caller::Agent);
            }
            Act::Commit => {
                let ids: Vec<String> = self.any_card(rng).into_iter().collect();
                self.act("validity.commit", &json!({"ids": ids}), Caller::Agent);
            }
            Act::ContextBuild => {
                let args = if rng.chance(20) { json!({"maxChars": 5000}) } else { json!({}) };
                self.act("context.build", &args, Caller::Agent);
            }
        }
    }

    /// `POST /observe` with a unique marker; a 202 is remembered.
    fn observe(&self, thread: usize, n: usize) {
        let marker = format!("torture-obs-{thread}-{n}");
        let body = json!({"source": "torture-agent", "type": "fact", "tags": ["torture"],
                          "text": format!("[{marker}] the agent saw something worth a card")});
        let request =
            self.client.post(self.api("/observe")).header("content-type", "application/json").body(body.to_string());
        if self.request("observe", request).is_status(202) {
            self.pools().observed.push(marker);
        }
    }

    /// `journal.intake` through the pipeline with a unique marker; a 200 is remembered.
    fn intake(&self, thread: usize, n: usize) {
        let marker = format!("torture-intake-{thread}-{n}");
        let args =
            json!({"source": "torture-agent", "type": "note", "text": format!("[{marker}] through the pipeline")});
        if self.act("journal.intake", &args, Caller::Agent).data().is_some() {
            self.pools().observed.push(marker);
        }
    }

    /// `distill.claim`: the batch, if one was leased.
    fn claim(&self, limit: usize) -> Option<Batch> {
        let outcome = self.act("distill.claim", &json!({"limit": limit, "leaseSeconds": 600}), Caller::Agent);
        let data = outcome.data()?;
        let id = data["batchId"].as_str()?.to_owned();
        let lease = data["lease"].as_str()?.to_owned();
        let items: Vec<String> =
            data["items"].as_array()?.iter().filter_map(|i| i["id"].as_str().map(str::to_owned)).collect();
        (!items.is_empty()).then_some(Batch { id, lease, items, candidates: Vec::new() })
    }

    fn claim_and_keep(&self, rng: &mut Rng) {
        if let Some(batch) = self.claim(1 + rng.below(8)) {
            self.pools().batches.push(batch);
        }
    }

    /// `candidate.submit` of a new knowledge card citing one item of `batch`, with checks
    /// on a steady file, on the flickering one, or none.
    fn submit(&self, batch: &mut Batch, thread: usize, n: usize, rng: &mut Rng) {
        let title = format!("Torture card {thread}-{n}");
        let mut args = json!({
            "batchId": batch.id, "lease": batch.lease, "op": "create",
            "card": {"kind": "knowledge", "title": title, "summary": format!("{title} in one line"),
                     "body": format!("torture steady body {thread}-{n}"), "appliesTo": "the torture test",
                     "tags": ["torture"]},
            "evidence": [rng.pick(&batch.items)],
        });
        match rng.below(3) {
            0 => {
                args["checks"] = json!([{"type": "path", "path": "docs/torture.md"},
                                        {"type": "quote", "path": "docs/torture.md", "text": STEADY_QUOTE}]);
            }
            1 => args["checks"] = json!([{"type": "path", "path": "docs/flicker.md"}]),
            _ => {}
        }
        let outcome = self.act("candidate.submit", &args, Caller::Agent);
        let Some(data) = outcome.data() else { return };
        let Some(id) = data["id"].as_str() else {
            self.fail(format!("candidate.submit: answer without an id: {data}"));
            return;
        };
        batch.candidates.push(id.to_owned());
        let candidate = Candidate {
            id: id.to_owned(),
            title,
            revision: data["revision"].clone(),
            content_hash: data["contentHash"].clone(),
        };
        self.pools().pending.push(candidate);
    }

    /// `distill.complete` with exactly the candidates the batch got (or a zero reason).
    fn complete(&self, batch: Batch) {
        let zero = if batch.candidates.is_empty() { json!("nothing new in the torture") } else { Value::Null };
        self.act(
            "distill.complete",
            &json!({"batchId": batch.id, "lease": batch.lease, "candidates": batch.candidates, "zeroReason": zero}),
            Caller::Agent,
        );
    }

    fn prepare_or_submit(&self, thread: usize, n: usize, rng: &mut Rng) {
        match self.take_pending(rng) {
            Some(candidate) => self.prepare(candidate),
            None => self.run(Act::Submit, thread, n, rng),
        }
    }

    /// `review.prepare`; the token is kept for a decision.
    fn prepare(&self, candidate: Candidate) {
        let outcome = self.act("review.prepare", &json!({"id": candidate.id}), Caller::Token);
        let Some(data) = outcome.data() else { return };
        let candidate =
            Candidate { revision: data["revision"].clone(), content_hash: data["contentHash"].clone(), ..candidate };
        self.pools().prepared.push(Prepared { candidate, token: data["token"].clone() });
    }

    fn approve_args(prepared: &Prepared, key: &str) -> Value {
        let c = &prepared.candidate;
        json!({"id": c.id, "revision": c.revision, "contentHash": c.content_hash, "token": prepared.token,
               "idempotencyKey": key})
    }

    /// Records a 200 answer to an approval of `prepared` under `key`.
    fn approved(&self, prepared: &Prepared, key: &str, data: &Value) {
        let mut pools = self.pools();
        if let Some(card) = data["cardId"].as_str() {
            pools.cards.push(card.to_owned());
        }
        pools
            .approvals
            .entry(prepared.candidate.id.clone())
            .or_insert_with(|| Approval { prepared: prepared.clone(), key: key.to_owned(), answers: Vec::new() })
            .answers
            .push(data.clone());
    }

    /// `review.approve` under a fresh key.
    fn approve(&self, prepared: Prepared, key: &str) {
        let outcome = self.act("review.approve", &Self::approve_args(&prepared, key), Caller::Token);
        if let Some(data) = outcome.data() {
            self.approved(&prepared, key, data);
        }
    }

    /// [`BURST`] identical approvals (same token, same key) sent at the same instant: all
    /// that answer must answer the same, and one card results.
    fn burst(&self, prepared: Prepared, key: &str) {
        let args = Self::approve_args(&prepared, key);
        let barrier = Barrier::new(BURST);
        let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
            let calls: Vec<_> = (0..BURST)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        self.pipeline("review.approve (burst)", "review.approve", &args, Caller::Token)
                    })
                })
                .collect();
            calls.into_iter().map(|c| c.join().unwrap_or(Outcome::Broken("a burst thread panicked".into()))).collect()
        });
        let answers: Vec<&Value> = outcomes.iter().filter_map(Outcome::data).collect();
        for data in &answers {
            self.approved(&prepared, key, data);
        }
        if answers.windows(2).any(|w| w[0] != w[1]) {
            self.fail(format!("identical approvals answered differently: {} got {answers:?}", prepared.candidate.id));
        }
        let refused: Vec<String> = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Answer { status: 400..=499, .. }))
            .map(Outcome::describe)
            .collect();
        if !answers.is_empty() && !refused.is_empty() {
            self.fail(format!(
                "identical concurrent approval refused while its twin succeeded: {}: {refused:?}",
                prepared.candidate.id
            ));
        }
    }

    /// Approves an approved candidate again: with its first key (a replay, which must give
    /// the first answer) or with a new one (which must never apply a second time).
    fn approve_again(&self, thread: usize, n: usize, rng: &mut Rng) {
        let approval = {
            let pools = self.pools();
            if pools.approvals.is_empty() {
                None
            } else {
                pools.approvals.values().nth(rng.below(pools.approvals.len())).cloned()
            }
        };
        let Some(approval) = approval else { return self.observe(thread, n) };
        let replay = rng.chance(50);
        let key = if replay { approval.key.clone() } else { format!("again-{thread}-{n}") };
        let label = if replay { "review.approve (replay)" } else { "review.approve (new key)" };
        let outcome =
            self.pipeline(label, "review.approve", &Self::approve_args(&approval.prepared, &key), Caller::Token);
        match (outcome.data(), replay) {
            (Some(data), true) => {
                if approval.answers.first() != Some(data) {
                    self.fail(format!(
                        "a replayed approval did not get the first answer: {}: {data} vs {:?}",
                        approval.prepared.candidate.id, approval.answers
                    ));
                }
                self.approved(&approval.prepared, &key, data);
            }
            (Some(data), false) => self.fail(format!(
                "an approved candidate was approved again under a new key: {}: {data}",
                approval.prepared.candidate.id
            )),
            (None, _) => {}
        }
    }

    /// `review.reject` with a reason; a 200 is remembered.
    fn reject(&self, prepared: Prepared, key: &str) {
        let mut args = Self::approve_args(&prepared, key);
        args["reason"] = json!("rejected by the torture test");
        if self.act("review.reject", &args, Caller::Token).data().is_some() {
            let c = prepared.candidate;
            self.pools().rejections.insert(c.id, c.title);
        }
    }

    fn take_batch(&self, rng: &mut Rng) -> Option<Batch> {
        let mut pools = self.pools();
        let len = pools.batches.len();
        (len > 0).then(|| pools.batches.swap_remove(rng.below(len)))
    }

    fn any_batch(&self, rng: &mut Rng) -> Option<Batch> {
        let pools = self.pools();
        (!pools.batches.is_empty()).then(|| rng.pick(&pools.batches).clone())
    }

    fn take_pending(&self, rng: &mut Rng) -> Option<Candidate> {
        let mut pools = self.pools();
        let len = pools.pending.len();
        (len > 0).then(|| pools.pending.swap_remove(rng.below(len)))
    }

    fn take_prepared(&self, rng: &mut Rng) -> Option<Prepared> {
        let mut pools = self.pools();
        let len = pools.prepared.len();
        (len > 0).then(|| pools.prepared.swap_remove(rng.below(len)))
    }

    fn any_card(&self, rng: &mut Rng) -> Option<String> {
        let pools = self.pools();
        (!pools.cards.is_empty()).then(|| rng.pick(&pools.cards).clone())
    }

    /// Runs `butler validity refresh` every [`CLI_EVERY`] until the load stops.
    fn cli_loop(&self) {
        let home = tempfile::tempdir().expect("home for the CLI");
        let mut run = 0;
        while !self.stopped() {
            run += 1;
            self.cli_refresh(home.path(), run);
            let wake = Instant::now() + CLI_EVERY;
            while Instant::now() < wake && !self.stopped() {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// One `butler validity refresh --workdir <instance>`, killed if it outlives
    /// [`CLI_TIMEOUT`].
    fn cli_refresh(&self, home: &Path, run: usize) {
        const LABEL: &str = "cli: butler validity refresh";
        let err_path = self.scratch.join(format!("cli-{run}.err"));
        let err = std::fs::File::create(&err_path).expect("CLI stderr file");
        let started = Instant::now();
        let spawned = butler_command(home)
            .args(["validity", "refresh", "--workdir"])
            .arg(&self.workdir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => return self.fail(format!("cli: cannot run butler: {e}")),
        };
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if started.elapsed() > CLI_TIMEOUT => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => {
                    self.fail(format!("cli: waiting for butler: {e}"));
                    break None;
                }
            }
        };
        let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        let key = match status {
            None => "hung".to_owned(),
            Some(s) => format!("exit {}", s.code().map_or_else(|| "signal".to_owned(), |c| c.to_string())),
        };
        {
            let mut stats = lock(&self.stats);
            if status.is_none() {
                stats.hung += 1;
            }
            let action = stats.actions.entry(LABEL.to_owned()).or_default();
            *action.statuses.entry(key.clone()).or_default() += 1;
            action.latencies_ms.push(elapsed);
        }
        let acceptable = match status {
            Some(s) if s.success() => true,
            // A late or busy host is an answer too; anything else is a failure.
            Some(s) if s.code() == Some(1) => stderr.contains("timeout:") || stderr.contains("busy:"),
            _ => false,
        };
        if !acceptable {
            let what = if status.is_none() { "hung request" } else { "cli failure" };
            let sent = started.duration_since(self.started).as_secs_f64();
            self.fail(format!(
                "{what}: {LABEL} ({key}) after {elapsed} ms (started at {sent:.1} s): {}",
                clip(stderr.trim(), 300)
            ));
        }
    }

    /// Makes `docs/flicker.md` disappear and come back every [`FLICKER_EVERY`], so that
    /// refreshes suspend and restore cards (and write verdicts and the context) under the
    /// load; leaves it in place.
    fn flicker_loop(&self) {
        let path = self.workdir.join("docs/flicker.md");
        let mut present = true;
        while !self.stopped() {
            std::thread::sleep(FLICKER_EVERY);
            present = !present;
            let result = if present { std::fs::write(&path, "now you see me\n") } else { std::fs::remove_file(&path) };
            if let Err(e) = result {
                self.fail(format!("flicker: {}: {e}", path.display()));
            }
        }
        if !present && let Err(e) = std::fs::write(&path, "now you see me\n") {
            self.fail(format!("flicker: {}: {e}", path.display()));
        }
    }
}

// ---------------------------------------------------------------------------------------
// The checks after the load

impl Ctx {
    /// No call slot leaked: the runtime reports nothing in flight (`runtime.inFlight` and
    /// each faculty's `calls.inFlight`, when the host reports them) within [`IDLE_WAIT`];
    /// a host that does not report them must answer [`CLIENTS`] concurrent searches, each
    /// within its deadline.
    fn check_idle(&self) -> String {
        let deadline = Instant::now() + IDLE_WAIT;
        loop {
            let outcome = self.request("faculties", self.client.get(self.api("/faculties")));
            let Outcome::Answer { status: 200, body } = &outcome else {
                self.fail(format!("idle check: GET /faculties: {}", outcome.describe()));
                return "idle: GET /faculties failed".to_owned();
            };
            let Some(in_flight) = body["runtime"]["inFlight"].as_u64() else {
                return self.check_slots_available();
            };
            let busy: Vec<String> = body["faculties"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter(|f| f["calls"]["inFlight"].as_u64().is_some_and(|n| n > 0))
                .map(|f| format!("{}={}", f["id"], f["calls"]["inFlight"]))
                .collect();
            if in_flight == 0 && busy.is_empty() {
                return "idle: runtime.inFlight is 0".to_owned();
            }
            if Instant::now() >= deadline {
                self.fail(format!(
                    "leaked call slots: {IDLE_WAIT:?} after the load, runtime.inFlight = {in_flight}, faculties {busy:?}"
                ));
                return format!("idle: NOT idle (inFlight {in_flight})");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The fallback of [`Self::check_idle`]: [`CLIENTS`] concurrent `cards.search` calls.
    fn check_slots_available(&self) -> String {
        let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
            let calls: Vec<_> = (0..CLIENTS)
                .map(|_| {
                    scope.spawn(|| {
                        self.pipeline(
                            "cards.search (after)",
                            "cards.search",
                            &json!({"query": "torture"}),
                            Caller::Agent,
                        )
                    })
                })
                .collect();
            calls.into_iter().map(|c| c.join().unwrap_or(Outcome::Broken("a search thread panicked".into()))).collect()
        });
        let answered = outcomes.iter().filter(|o| o.data().is_some()).count();
        if answered < CLIENTS {
            let others: Vec<String> = outcomes.iter().filter(|o| o.data().is_none()).map(Outcome::describe).collect();
            self.fail(format!(
                "leaked call slots: after the load only {answered} of {CLIENTS} concurrent searches answered 200: {:?}",
                others.iter().take(3).collect::<Vec<_>>()
            ));
        }
        format!("idle: no inFlight counter; {answered}/{CLIENTS} concurrent searches answered")
    }

    /// Every approval was applied exactly once: each candidate approved with a 200 has the
    /// same answer every time, is `approved` in its file with that card, and that card
    /// exists once; no card title exists twice (a second apply would write `<id>-2`); a
    /// rejected candidate has no card.
    fn check_approvals(&self) {
        let pools = self.pools();
        let cards = read_cards(&self.workdir.join("self"));
        let mut by_title: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (id, title) in &cards {
            by_title.entry(title.clone()).or_default().push(id.clone());
        }
        for (title, ids) in by_title.iter().filter(|(_, ids)| ids.len() > 1) {
            self.fail(format!("applied twice: the card `{title}` exists {} times: {ids:?}", ids.len()));
        }
        for (id, approval) in &pools.approvals {
            let first = &approval.answers[0];
            if approval.answers.iter().any(|a| a != first) {
                self.fail(format!("approvals of {id} answered differently: {:?}", approval.answers));
            }
            let card_id = first["cardId"].as_str().unwrap_or_default();
            let title = &approval.prepared.candidate.title;
            if cards.get(card_id) != Some(title) {
                self.fail(format!(
                    "approved but not applied: {id} answered card `{card_id}`, which {}",
                    cards.get(card_id).map_or_else(|| "does not exist".to_owned(), |t| format!("is titled `{t}`"))
                ));
            }
            let file = self.workdir.join(format!("self/candidates/{id}.json"));
            let candidate: Value =
                std::fs::read(&file).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).unwrap_or(Value::Null);
            if candidate["status"] != "approved" || candidate["applied"]["cardId"] != card_id {
                self.fail(format!(
                    "approval not recorded: {id} answered card `{card_id}` but its file says status {} applied {}",
                    candidate["status"], candidate["applied"]
                ));
            }
        }
        for (id, title) in &pools.rejections {
            if let Some(ids) = by_title.get(title) {
                self.fail(format!("rejected but applied: {id} (`{title}`) has cards {ids:?}"));
            }
            if pools.approvals.contains_key(id) {
                self.fail(format!("decided twice: {id} was both approved and rejected"));
            }
        }
    }

    /// Every `.json` file of the store (and of the faculties' own data) parses, every
    /// `.jsonl` line parses, every `.md` is UTF-8 and not empty, and every card's front
    /// matter is `key: <JSON>` lines the pipeline writes.
    fn check_store_files(&self) -> String {
        let checked = stores::check(&self.workdir, &["self", ".butler/faculties"]);
        for torn in checked.torn {
            self.fail(torn);
        }
        format!(
            "files: {} checked, {} temp files left: {:?}",
            checked.files,
            checked.temps.len(),
            clip(&checked.temps.join(", "), 300)
        )
    }

    /// Every observation answered 202 (or `journal.intake` 200) is in the spool exactly
    /// once, and the host's own L0 observations of the crashing tool are there too.
    fn check_journal(&self) -> String {
        let mut markers: BTreeMap<String, usize> = BTreeMap::new();
        let mut host_observations = 0;
        let spool = self.workdir.join("self/journal/spool");
        for entry in std::fs::read_dir(&spool).into_iter().flatten().flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            for observation in text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
                if observation["source"] == "butler" && observation["ref"] == "butler://tool:crashy" {
                    host_observations += 1;
                }
                let marker = observation["text"]
                    .as_str()
                    .and_then(|t| t.strip_prefix('['))
                    .and_then(|t| t.split_once(']'))
                    .map(|(m, _)| m.to_owned());
                if let Some(marker) = marker {
                    *markers.entry(marker).or_default() += 1;
                }
            }
        }
        let observed = self.pools().observed.clone();
        let missing: Vec<&String> = observed.iter().filter(|m| !markers.contains_key(*m)).collect();
        if !missing.is_empty() {
            self.fail(format!(
                "lost observations: {} of {} accepted ones are not in the journal, e.g. {:?}",
                missing.len(),
                observed.len(),
                missing.iter().take(5).collect::<Vec<_>>()
            ));
        }
        let twice: Vec<(&String, &usize)> = markers.iter().filter(|(_, n)| **n > 1).collect();
        if !twice.is_empty() {
            self.fail(format!("duplicated observations: {:?}", twice.iter().take(5).collect::<Vec<_>>()));
        }
        if host_observations == 0 {
            self.fail("no L0 observation: the host recorded none of the crashing tool's exits".to_owned());
        }
        format!(
            "journal: {} accepted observations all checked, {} in the spool, {host_observations} L0 of the crashing tool",
            observed.len(),
            markers.values().sum::<usize>()
        )
    }

    /// The summary: requests per action, counts of every status, p99 latencies.
    fn print_summary(&self, load_took: Duration, notes: &[String]) {
        let stats = lock(&self.stats);
        let mut all_latencies = Vec::new();
        let mut all_statuses: BTreeMap<&str, u64> = BTreeMap::new();
        eprintln!("torture: per action (count, statuses, p99):");
        for (label, action) in &stats.actions {
            let mut latencies = action.latencies_ms.clone();
            all_latencies.extend_from_slice(&latencies);
            for (status, n) in &action.statuses {
                *all_statuses.entry(status).or_default() += n;
            }
            let statuses: Vec<String> = action.statuses.iter().map(|(s, n)| format!("{s}={n}")).collect();
            eprintln!(
                "torture:   {label:<32} n={:<6} p99={:>6} ms  {}",
                latencies.len(),
                p99(&mut latencies),
                statuses.join(" ")
            );
        }
        let statuses: Vec<String> = all_statuses.iter().map(|(s, n)| format!("{s}={n}")).collect();
        let pools = self.pools();
        eprintln!(
            "torture: SUMMARY {} requests in {:.1} s, {} hung, p99 {} ms, max {} ms | statuses: {} | approved {} candidates \
             ({} cards), rejected {}, {} observations accepted | {} | {} failures",
            stats.requests(),
            load_took.as_secs_f64(),
            stats.hung,
            p99(&mut all_latencies),
            all_latencies.iter().max().copied().unwrap_or(0),
            statuses.join(" "),
            pools.approvals.len(),
            pools.cards.iter().collect::<BTreeSet<_>>().len(),
            pools.rejections.len(),
            pools.observed.len(),
            notes.join(" | "),
            lock(&self.failures).count
        );
    }
}

/// The 99th percentile of `latencies` (sorts them), 0 for none.
fn p99(latencies: &mut [u64]) -> u64 {
    latencies.sort_unstable();
    let n = latencies.len();
    if n == 0 { 0 } else { latencies[(n * 99).div_ceil(100).saturating_sub(1).min(n - 1)] }
}

/// The cards of the store: id → title.
fn read_cards(self_root: &Path) -> BTreeMap<String, String> {
    let mut cards = BTreeMap::new();
    for kind in ["rules", "knowledge"] {
        for entry in std::fs::read_dir(self_root.join(kind)).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(".md").filter(|_| !name.starts_with('.')) else { continue };
            let title = std::fs::read_to_string(entry.path())
                .ok()
                .and_then(|text| front_matter(&text).ok())
                .and_then(|fields| fields.get("title").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            cards.insert(id.to_owned(), title);
        }
    }
    cards
}
