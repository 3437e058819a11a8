//! The pipeline's time-dependent rules on a hand-moved clock: the built-in faculties
//! compiled into a runtime in this process, whose `host.now-ms` is a
//! [`Clock::manual`] — so a 15-minute lease or a 10-minute review token expires in a
//! microsecond of the test's time, at exactly the millisecond the rule says.

use std::sync::Arc;

use butler_faculty::{CallContext, CallError, Clock, FacultyRuntime};
use butler_host::catalog::scan;
use butler_host::instance::Instance;
use butler_host::pipeline::PipelineRouter;
use serde_json::{Value, json};

/// Where the manual clock starts: 2027-01-15, any fixed instant would do.
const START_MS: u64 = 1_800_000_000_000;

/// The built-in faculties of a fresh instance, routed as the host routes them, reading
/// time from [`Self::clock`].
struct Pipeline {
    router: Arc<PipelineRouter>,
    clock: Clock,
    _runtime: Arc<FacultyRuntime>,
    _dir: tempfile::TempDir,
}

impl Pipeline {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp");
        let (instance, created) = Instance::open_or_create(dir.path()).expect("a new instance");
        assert!(created);
        let clock = Clock::manual(START_MS);
        let mut setup = instance.faculty_setup("http://127.0.0.1:9");
        setup.clock = clock.clone();
        // Compiles on this thread: every faculty the scan finds is ready once it returns.
        // Built as the host builds it, with the router behind `host.call`.
        let (runtime, router) =
            butler_host::host::faculties(setup, &instance.config.pipeline.routes, None, true).expect("runtime");
        let mut config = instance.scan_config();
        config.inspector = Some(runtime.inspector());
        runtime.reconcile(&scan(&config, None));
        for id in ["journal", "distill", "validity", "cards"] {
            assert_eq!(runtime.status(id).map(|s| s.state), Some("ready"), "faculty {id}");
        }
        Self { router, clock, _runtime: runtime, _dir: dir }
    }

    /// Runs `action` as an agent (`owner: false`) or the owner would.
    fn call(&self, action: &str, args: &Value, owner: bool) -> Result<Value, CallError> {
        self.router.call(action, args, &CallContext::top(owner))
    }

    /// [`Self::call`] that must succeed.
    fn ok(&self, action: &str, args: &Value, owner: bool) -> Value {
        self.call(action, args, owner).unwrap_or_else(|e| panic!("{action}: {} ({e})", e.code()))
    }

    /// The code of a call that must fail.
    fn failure(&self, action: &str, args: &Value, owner: bool) -> String {
        match self.call(action, args, owner) {
            Ok(value) => panic!("{action} succeeded: {value}"),
            Err(e) => e.code().to_owned(),
        }
    }
}

/// The ids of a claimed batch's items.
fn item_ids(batch: &Value) -> Vec<String> {
    batch["items"].as_array().expect("items").iter().map(|i| i["id"].as_str().expect("id").to_owned()).collect()
}

#[test]
fn a_lease_holds_to_its_last_millisecond_then_its_items_can_be_claimed_again() {
    let pipeline = Pipeline::new();
    pipeline.ok("journal.intake", &json!({"source": "test", "text": "the build needs python 3.12"}), false);
    let batch = pipeline.ok("distill.claim", &json!({"limit": 10, "leaseSeconds": 60}), false);
    let items = item_ids(&batch);
    assert!(!items.is_empty(), "{batch}");
    let evidence = json!({"batchId": batch["batchId"], "lease": batch["lease"], "itemId": items[0]});

    // While the lease holds, nobody else is handed its items.
    let other = pipeline.ok("distill.claim", &json!({"limit": 10}), false);
    assert_eq!(other["batchId"], Value::Null, "held items are not claimed twice: {other}");

    pipeline.clock.advance(59_999);
    pipeline.ok("distill.evidence", &evidence, false);
    pipeline.clock.advance(1);
    assert_eq!(pipeline.failure("distill.evidence", &evidence, false), "lease_expired");
    let done = json!({"batchId": batch["batchId"], "lease": batch["lease"], "candidates": [], "zeroReason": "late"});
    assert_eq!(pipeline.failure("distill.complete", &done, false), "lease_expired");

    let again = pipeline.ok("distill.claim", &json!({"limit": 10}), false);
    assert_ne!(again["batchId"], batch["batchId"]);
    assert_eq!(item_ids(&again), items, "an expired lease gives its items back");
}

#[test]
fn a_review_token_expires_after_ten_minutes_of_the_faculties_clock() {
    let pipeline = Pipeline::new();
    pipeline.ok("journal.intake", &json!({"source": "test", "text": "deploys go through the staging host"}), false);
    let batch = pipeline.ok("distill.claim", &json!({"limit": 10}), false);
    let card = json!({"kind": "knowledge", "title": "Staging first", "summary": "Deploys go through staging",
                      "body": "Every deploy goes through the staging host first.", "appliesTo": "this repo"});
    let submitted = pipeline.ok(
        "candidate.submit",
        &json!({"batchId": batch["batchId"], "lease": batch["lease"], "op": "create", "card": card,
                "evidence": [item_ids(&batch)[0]]}),
        false,
    );
    let id = submitted["id"].clone();
    let decide = |prepared: &Value, key: &str| {
        json!({"id": id, "revision": prepared["revision"], "contentHash": prepared["contentHash"],
               "token": prepared["token"], "idempotencyKey": key})
    };

    let stale = pipeline.ok("review.prepare", &json!({"id": id}), true);
    pipeline.clock.advance(10 * 60 * 1000);
    assert_eq!(pipeline.failure("review.approve", &decide(&stale, "late"), true), "token_invalid");

    let fresh = pipeline.ok("review.prepare", &json!({"id": id}), true);
    pipeline.clock.advance(10 * 60 * 1000 - 1);
    let approved = pipeline.ok("review.approve", &decide(&fresh, "in-time"), true);
    assert!(approved["cardId"].as_str().is_some_and(|c| !c.is_empty()), "{approved}");
}
