//! The faculty runtime in process: no binary, no HTTP — a [`Setup`] built by hand in a
//! temporary directory, the catalog scanned with the runtime as its component inspector,
//! and calls made directly, the way `butler serve` and `butler check` wire it.
//!
//! The guests are the committed WIT 0.1.0 builds of the built-in faculties
//! (`tests/fixtures/wit-0.1-builtins`), as bare self-describing components or inside
//! folder faculties whose manifests declare their own rules. The suite covers:
//! - [`registration`]: scanning and reconciling, readiness, real calls and where they
//!   write, declarations, replaced and removed components, broken ones;
//! - [`refusals`]: how a call that does not run (or fails) is classified, and which
//!   refusals come before the guest is instantiated;
//! - [`locks`]: the store-lock discipline at the runtime level — concurrent writers,
//!   waiting and giving up at the deadline, stores shared across faculties, nested calls
//!   and declared callees, failing fast instead of waiting backwards;
//! - [`compiling`]: the compile cache and background compiles;
//! - [`shutdown`]: `abandon`, the call slots, `drain`, and the `Follow` impl;
//! - [`known_gaps`]: rules the runtime does not keep today, ignored (they fail).
//!
//! A call is held mid-run by a [`Gate`] (a named pipe where the journal opens its
//! profile), and a test knows the call holds its stores when a probing write is refused
//! for them; so every rule about calls in flight is shown by what happens, never by how
//! long something took. Deadlines are short only where the call is meant to give up.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use butler_catalog::Severity;
use butler_faculty::{
    CallContext, CallError, FacultyRuntime, MAX_CALL_DEPTH, MAX_CONCURRENT_CALLS, Runtime, Setup, Wiring,
};
use serde_json::{Value, json};

use support::{
    Gate, Instance, LIVENESS, Latch, Route, Spawned, ended_at_gate, grant, in_flight, observation, pipeline_settings,
    self_grant, wait_until, within,
};

/// The journal's own store (`/data`), relative to the instance root.
const JOURNAL_DATA: &str = ".butler/faculties/journal";

/// An instance with the journal alone, allowed to write `/self`.
fn journal_only() -> (Instance, Arc<FacultyRuntime>) {
    let instance = Instance::new();
    instance.install("journal");
    let runtime = instance.start(&json!({"journal": self_grant(true)}));
    (instance, runtime)
}

/// A top-level call by someone who is not the owner, with a deadline only the liveness
/// guard could reach.
fn far() -> CallContext {
    CallContext::top(false).until(Instant::now() + LIVENESS)
}

/// Starts `journal.context-build` on its own thread, to be parked in a gate at `gate` (the
/// profile it opens first), and returns once the call holds the journal's stores: once a
/// journal write is refused for want of them. The probing write could not succeed anyway
/// (its observation is invalid), so it writes nothing whenever it gets to run.
fn park_context_build(runtime: &Arc<FacultyRuntime>, gate: &std::path::Path) -> (Gate, Spawned) {
    let gate = Gate::at(gate);
    let parked =
        Spawned::call(runtime, |rt| rt.invoke_json("journal", "context-build", &json!({}), &CallContext::top(false)));
    wait_held(runtime);
    (gate, parked)
}

/// Returns once another call holds the journal's stores (see [`park_context_build`]).
fn wait_held(runtime: &FacultyRuntime) {
    let probe = json!({"source": "Not Valid", "text": "probe"});
    wait_until("a call holds the journal's stores", || {
        matches!(runtime.invoke_json("journal", "intake", &probe, &within(20)), Err(CallError::LockTimeout { .. }))
    });
}

/// Faculty `id`'s failures with `code` so far.
fn failures(runtime: &FacultyRuntime, id: &str, code: &str) -> u64 {
    runtime.status(id).and_then(|s| s.calls.failures.get(code).copied()).unwrap_or(0)
}

/// A background runtime over a cold cache: the first scan finds the journal pending.
fn compiling_journal() -> (Instance, Arc<FacultyRuntime>, butler_catalog::Catalog) {
    let instance = Instance::new();
    instance.install("journal");
    let runtime = FacultyRuntime::new(instance.setup(&json!({"journal": self_grant(true)}))).expect("runtime");
    let catalog = instance.scan(&runtime, None);
    let (severity, _) = Instance::diagnostic(&catalog, "faculties/journal.wasm").expect("a diagnostic");
    assert_eq!(severity, Severity::Pending);
    runtime.reconcile(&catalog);
    (instance, runtime, catalog)
}

mod registration {
    use super::*;

    #[test]
    fn the_fixtures_register_and_serve_real_calls() {
        let instance = Instance::new();
        for id in support::FIXTURES {
            instance.install(id);
        }
        let runtime = instance.start(&pipeline_settings());
        assert_eq!(runtime.readiness().pending, Vec::<String>::new());
        for id in support::FIXTURES {
            let status = runtime.status(id).unwrap_or_else(|| panic!("{id} registered"));
            assert_eq!(
                (status.state, status.wit.as_deref(), status.runtime),
                ("ready", Some("0.1.0"), Some(Runtime::Component)),
                "{id}"
            );
            assert_eq!(status.preopens, ["/data", "/self"], "{id}: its own /data and the grant");
            assert_eq!(status.calls.total, 0, "{id}");
        }
        let stats = runtime.stats();
        assert_eq!((stats.compiles, stats.cache_hits), (0, 4), "all four loaded from the compile cache");

        let written =
            runtime.invoke_json("journal", "intake", &observation("first"), &CallContext::top(false)).expect("intake");
        assert!(written["id"].as_str().is_some_and(|id| id.starts_with("obs-")), "{written}");
        // A 0.1.0 command takes its JSON on its stdin argument: `invoke` with that argument
        // spelled out is the same call.
        let args = json!({"args": observation("second").to_string()});
        runtime
            .invoke("journal", "intake", args.as_object().expect("object"), &CallContext::top(false))
            .expect("intake");
        assert_eq!(instance.spooled_texts("self"), ["first", "second"], "written under the granted /self");
        assert!(instance.path(JOURNAL_DATA).is_dir(), "its own /data exists");

        let recent = runtime.report("journal", "recent", &CallContext::top(false)).expect("recent");
        let previews: Vec<&str> =
            recent["items"].as_array().expect("items").iter().filter_map(|i| i["preview"].as_str()).collect();
        assert_eq!(previews, ["second", "first"], "newest first: {recent}");

        std::fs::write(instance.path("self/profile.md"), "I keep my notes short.").expect("a profile");
        let built =
            runtime.invoke_json("journal", "context-build", &json!({}), &CallContext::top(false)).expect("build");
        assert_eq!(built["path"], "build/context.md", "{built}");
        let compiled = std::fs::read_to_string(instance.path("self/build/context.md")).expect("compiled context");
        assert!(compiled.contains("I keep my notes short."), "{compiled}");
        let report = runtime.report("journal", "context", &CallContext::top(false)).expect("context");
        assert_eq!(report["markdown"], compiled.as_str());

        let cards = runtime.invoke_json("validity", "cards", &json!({}), &CallContext::top(false)).expect("cards");
        assert_eq!(cards, json!({"ids": []}));
        let status = runtime.status("journal").expect("journal");
        assert_eq!((status.calls.total, status.calls.in_flight), (5, 0));
        assert!(status.calls.failures.is_empty(), "{:?}", status.calls.failures);
    }

    #[test]
    fn declarations_follow_the_catalog_and_change_only_when_it_does() {
        let instance = Instance::new();
        for id in ["journal", "validity"] {
            instance.install(id);
        }
        let runtime = instance.runtime(&pipeline_settings());
        let mut changes = runtime.declared_changes();
        let mut reconciles = runtime.reconciles();
        let catalog = instance.scan(&runtime, None);
        runtime.reconcile(&catalog);
        assert!(changes.has_changed().expect("open"), "the first faculties change the declarations");
        changes.mark_unchanged();
        reconciles.mark_unchanged();

        let declared = runtime.declared();
        let serving: Vec<(&str, &str)> = declared.serving.iter().map(|(p, f)| (p.as_str(), f.as_str())).collect();
        assert_eq!(serving, [("context", "journal"), ("journal", "journal"), ("validity", "validity")]);
        assert_eq!(declared.observations, Some(("journal".to_owned(), "intake".to_owned())));
        assert_eq!(declared.context, Some(("journal".to_owned(), "context".to_owned())));
        assert_eq!(runtime.serving("validity", Instant::now()).as_deref(), Some("validity"));
        assert_eq!(runtime.serving("cards", Instant::now()), None, "nobody serves it, and nothing is compiling");

        runtime.reconcile(&instance.scan(&runtime, Some(&catalog)));
        assert!(reconciles.has_changed().expect("open"), "every reconcile is announced");
        assert!(!changes.has_changed().expect("open"), "the same catalog declares the same");

        std::fs::remove_file(instance.path("faculties/validity.wasm")).expect("remove validity");
        runtime.reconcile(&instance.scan(&runtime, Some(&catalog)));
        assert!(changes.has_changed().expect("open"));
        assert!(!runtime.declared().serving.contains_key("validity"));
        assert!(runtime.status("validity").is_none());
    }

    #[test]
    fn replaced_and_removed_components_follow_the_scan() {
        let (instance, runtime) = journal_only();
        runtime.invoke_json("journal", "intake", &observation("before"), &CallContext::top(false)).expect("intake");

        // Other code under the same file name: it is whatever it describes itself as.
        instance.install_as("validity", "journal.wasm");
        let catalog = instance.scan(&runtime, None);
        runtime.reconcile(&catalog);
        assert!(runtime.status("journal").is_none(), "the journal is gone");
        assert_eq!(runtime.status("validity").map(|s| s.state), Some("ready"));
        let gone = runtime.invoke_json("journal", "intake", &observation("after"), &CallContext::top(false));
        assert_eq!(gone, Err(CallError::UnknownFaculty("journal".to_owned())));
        assert_eq!(gone.expect_err("refused").code(), "unknown_faculty");

        std::fs::remove_file(instance.path("faculties/journal.wasm")).expect("remove");
        runtime.reconcile(&instance.scan(&runtime, Some(&catalog)));
        assert!(runtime.status("validity").is_none());
        assert!(runtime.readiness().ready, "nothing left, nothing pending");
        assert_eq!(instance.spooled_texts("self"), ["before"], "the owner's data stays");
    }

    #[test]
    fn a_call_in_flight_finishes_on_the_code_it_started_with() {
        let (instance, runtime) = journal_only();
        let (gate, parked) = park_context_build(&runtime, &instance.path("self/profile.md"));

        std::fs::remove_file(instance.path("faculties/journal.wasm")).expect("remove the journal");
        runtime.reconcile(&instance.scan(&runtime, None));
        assert!(runtime.status("journal").is_none(), "unloaded for new calls");
        let refused = runtime.invoke_json("journal", "intake", &observation("late"), &CallContext::top(false));
        assert_eq!(refused, Err(CallError::UnknownFaculty("journal".to_owned())));

        // Released, the old instance runs to its own end: the journal's answer to a profile
        // it cannot read (see `Gate`), not an unavailable faculty.
        gate.release();
        let outcome = parked.outcome();
        assert!(ended_at_gate(&outcome, "profile.md"), "{outcome:?}");
    }

    #[test]
    fn broken_components_are_diagnosed_and_break_nothing_else() {
        let instance = Instance::new();
        instance.install("journal");
        let faculties = instance.path("faculties");
        std::fs::write(faculties.join("garbage.wasm"), b"these bytes are not WebAssembly at all").expect("garbage");
        std::fs::write(faculties.join("core.wasm"), b"\0asm\x01\0\0\0").expect("a core module");
        std::fs::write(faculties.join("empty.wasm"), b"").expect("an empty file");
        let journal = std::fs::read(support::fixture("journal")).expect("fixture");
        std::fs::write(faculties.join("truncated.wasm"), &journal[..journal.len() / 3]).expect("truncated");
        std::fs::create_dir_all(faculties.join("hollow")).expect("a folder");
        std::fs::write(
            faculties.join("hollow/butler.json"),
            json!({"schemaVersion": 1, "kind": "faculty", "id": "hollow", "name": "Hollow",
                   "commands": [{"id": "go", "exec": ["missing.wasm"], "effect": "read"}]})
            .to_string(),
        )
        .expect("a manifest naming a missing component");

        let runtime = instance.runtime(&json!({"journal": self_grant(true)}));
        let catalog = instance.scan(&runtime, None);
        runtime.reconcile(&catalog);
        for (display, needle) in [
            ("faculties/garbage.wasm", "not a WebAssembly file"),
            ("faculties/empty.wasm", "not a WebAssembly file"),
            ("faculties/core.wasm", "a core WebAssembly module, not a component"),
            ("faculties/truncated.wasm", "does not compile"),
            ("faculties/hollow/butler.json", "/commands/0/exec/0: cannot load the component it names"),
        ] {
            let (severity, message) = Instance::diagnostic(&catalog, display)
                .unwrap_or_else(|| panic!("{display}: {:#?}", catalog.diagnostics));
            assert_eq!(severity, Severity::Error, "{display}");
            assert!(message.contains(needle), "{display}: {message}");
        }
        assert_eq!(catalog.diagnostics.len(), 5, "{:#?}", catalog.diagnostics);
        assert_eq!(catalog.extensions.iter().map(|e| e.id()).collect::<Vec<_>>(), ["journal"]);
        assert!(runtime.readiness().ready, "a broken component is not pending: {:?}", runtime.readiness());
        for id in ["garbage", "core", "empty", "truncated", "hollow"] {
            assert!(runtime.status(id).is_none(), "{id}");
        }
        runtime.invoke_json("journal", "intake", &observation("still fine"), &CallContext::top(false)).expect("intake");
        assert_eq!(instance.spooled_texts("self"), ["still fine"]);
    }
}

mod refusals {
    use super::*;

    #[test]
    fn unknown_faculties_commands_and_reports_are_told_apart() {
        let (_instance, runtime) = journal_only();
        let top = CallContext::top(false);
        for (error, code) in [
            (runtime.invoke_json("nobody", "intake", &json!({}), &top), "unknown_faculty"),
            (runtime.report("nobody", "recent", &top), "unknown_faculty"),
            (runtime.invoke_json("journal", "shred", &json!({}), &top), "unknown_command"),
            (runtime.report("journal", "gossip", &top), "unknown_report"),
        ] {
            assert_eq!(error.expect_err(code).code(), code);
        }
        assert_eq!(
            runtime.invoke_json("journal", "shred", &json!({}), &top),
            Err(CallError::UnknownCommand { faculty: "journal".to_owned(), command: "shred".to_owned() })
        );
        assert_eq!(runtime.status("journal").expect("journal").calls.total, 0, "no refusal ran the guest");
    }

    #[test]
    fn arguments_and_declared_input_are_checked_before_the_guest_runs() {
        let instance = Instance::new();
        instance.install("distill");
        instance.install("journal");
        let runtime = instance.start(&pipeline_settings());
        let top = CallContext::top(false);

        let unknown = runtime.invoke("journal", "intake", json!({"text": "x"}).as_object().expect("object"), &top);
        let Err(CallError::InvalidArgs { faculty, message }) = unknown else { panic!("{unknown:?}") };
        assert_eq!(faculty, "journal");
        assert!(message.contains("unknown argument `text`"), "{message}");
        let nested =
            runtime.invoke("journal", "intake", json!({"args": {"text": "x"}}).as_object().expect("object"), &top);
        assert!(
            matches!(&nested, Err(CallError::InvalidArgs { message, .. }) if message.contains("must be a string")),
            "{nested:?}"
        );

        // distill's `evidence` declares an input schema: it is checked on the JSON its stdin
        // argument carries, and a call that does not fit never starts.
        let missing = runtime.invoke_json("distill", "evidence", &json!({}), &top);
        assert!(
            matches!(&missing, Err(CallError::InvalidArgs { message, .. }) if message.contains("invalid input") && message.contains("batchId")),
            "{missing:?}"
        );
        let text =
            runtime.invoke("distill", "evidence", json!({"args": "{not json"}).as_object().expect("object"), &top);
        assert!(
            matches!(&text, Err(CallError::InvalidArgs { message, .. }) if message.contains("not JSON")),
            "{text:?}"
        );
        assert_eq!(missing.expect_err("refused").code(), "invalid_args");
        for id in ["journal", "distill"] {
            assert_eq!(runtime.status(id).expect("registered").calls.total, 0, "{id}: no instance was made");
        }

        // What passes the host's rules but not the faculty's own is the faculty's failure,
        // with its code.
        let refused = runtime.invoke_json("journal", "intake", &json!({"source": "Not Lowercase", "text": "x"}), &top);
        let Err(CallError::Guest { failure, .. }) = &refused else { panic!("{refused:?}") };
        assert_eq!((failure.code.as_str(), failure.typed), ("invalid_observation", false));
        assert_eq!(refused.as_ref().expect_err("failed").code(), "invalid_observation");
        let status = runtime.status("journal").expect("journal");
        assert_eq!((status.calls.total, status.calls.failures.get("invalid_observation")), (1, Some(&1)));
        assert!(instance.spool("self").is_empty(), "nothing was written");
    }

    #[test]
    fn owner_operator_and_private_gates_hold_before_the_guest_runs() {
        let instance = Instance::new();
        for id in ["validity", "cards"] {
            instance.install(id);
        }
        let runtime = instance.start(&pipeline_settings());
        let anyone = CallContext::top(false);
        let owner = CallContext::top(true);
        let from_a_faculty = anyone.nested("test/caller").expect("one level deep");
        let checks = json!({"checks": []});

        // `validity.check` is private: the owner and other faculties, no anonymous caller.
        let refused = runtime.invoke_json("validity", "check", &checks, &anyone);
        assert_eq!(
            refused,
            Err(CallError::OwnerRequired { faculty: "validity".to_owned(), command: "check".to_owned() })
        );
        for context in [&owner, &from_a_faculty] {
            let ok = runtime.invoke_json("validity", "check", &checks, context).expect("check");
            assert_eq!(ok["ok"], true, "{ok}");
        }

        // `validity.set-checks` is the operator's: not even the owner over HTTP.
        let set = json!({"id": "no-such-card", "revision": 1, "checks": []});
        let refused = runtime.invoke_json("validity", "set-checks", &set, &owner).expect_err("operator only");
        assert_eq!(refused.code(), "operator_only");
        let ran = runtime.invoke_json("validity", "set-checks", &set, &CallContext::operator());
        assert!(
            matches!(ran, Err(CallError::Guest { .. })),
            "the operator reaches the guest (which knows no such card): {ran:?}"
        );

        // `cards.review-prepare` is the owner's on every path: a nested call never is.
        let prepare = json!({"id": "no-such-candidate"});
        for context in [&anyone, &from_a_faculty] {
            let refused = runtime.invoke_json("cards", "review-prepare", &prepare, context).expect_err("owner only");
            assert_eq!(refused.code(), "owner_required");
        }
        let ran = runtime.invoke_json("cards", "review-prepare", &prepare, &owner);
        assert!(matches!(ran, Err(CallError::Guest { .. })), "the owner reaches the guest: {ran:?}");
        assert_eq!(runtime.status("cards").expect("cards").calls.total, 1, "only the owner's call ran");
        assert_eq!(runtime.status("validity").expect("validity").calls.total, 3);
    }

    #[test]
    fn a_folder_faculty_declares_its_own_rules_over_a_component() {
        let instance = Instance::new();
        instance.install_folder(
            "gated",
            "journal",
            &json!({
                "schemaVersion": 1, "kind": "faculty", "id": "gated", "name": "Gated journal",
                "commands": [
                    {"id": "intake", "exec": ["journal.wasm"], "effect": "write",
                     "args": [{"name": "args", "pattern": "(?s).*", "stdin": true}],
                     "input": {"type": "object", "required": ["source", "text"],
                               "properties": {"source": {"type": "string"}, "text": {"type": "string", "maxLength": 20}}},
                     "failureLimit": {"codes": ["invalid_observation"], "perMinute": 2}},
                    {"id": "shred", "exec": ["journal.wasm"], "effect": "write"}
                ],
                "reports": [{"id": "recent", "name": "Recent", "exec": ["journal.wasm"], "shape": "markdown"}]
            }),
        );
        let runtime = instance.start(&json!({"gated": self_grant(true)}));
        assert_eq!(runtime.status("gated").and_then(|s| s.wit), Some("0.1.0".to_owned()));

        // The declared schema, before the guest.
        let long = runtime.invoke_json(
            "gated",
            "intake",
            &observation("far longer than twenty characters"),
            &CallContext::top(false),
        );
        assert!(
            matches!(&long, Err(CallError::InvalidArgs { message, .. }) if message.contains("invalid input")),
            "{long:?}"
        );
        // A command without a stdin argument takes no JSON; with none, it reaches the guest,
        // whose own answer to a command it does not know is its failure, not the host's.
        let extra = runtime.invoke_json("gated", "shred", &json!({"all": true}), &CallContext::top(false));
        assert!(
            matches!(&extra, Err(CallError::InvalidArgs { message, .. }) if message.contains("takes no arguments")),
            "{extra:?}"
        );
        let unknown = runtime.invoke_json("gated", "shred", &json!({}), &CallContext::top(false));
        assert!(
            matches!(&unknown, Err(CallError::Guest { failure, .. }) if failure.code == "unknown_command"),
            "{unknown:?}"
        );
        // A report that does not have its declared shape is refused.
        let report = runtime.report("gated", "recent", &CallContext::top(false));
        assert!(matches!(&report, Err(CallError::InvalidReport { report, .. }) if report == "recent"), "{report:?}");

        // The failure limit: two counted failures a minute for each caller, then refused
        // even with a valid input; other callers are not affected.
        let bad = json!({"source": "BAD", "text": "x"});
        for _ in 0..2 {
            let failed =
                runtime.invoke_json("gated", "intake", &bad, &CallContext::top(false).by("mcp:a")).expect_err("bad");
            assert_eq!(failed.code(), "invalid_observation");
        }
        let limited =
            runtime.invoke_json("gated", "intake", &observation("valid"), &CallContext::top(false).by("mcp:a"));
        let Err(CallError::TooManyFailures { limit, retry_after, .. }) = &limited else { panic!("{limited:?}") };
        assert_eq!(*limit, 2);
        assert!((1..=60).contains(retry_after), "{retry_after}");
        assert_eq!(limited.as_ref().expect_err("limited").code(), "too_many_failures");
        runtime
            .invoke_json("gated", "intake", &observation("from b"), &CallContext::top(false).by("mcp:b"))
            .expect("b");
        runtime.invoke_json("gated", "intake", &observation("anonymous"), &CallContext::top(false)).expect("anonymous");
        assert_eq!(instance.spooled_texts("self"), ["from b", "anonymous"]);
    }

    #[test]
    fn the_sandbox_follows_the_settings() {
        let instance = Instance::new();
        for id in ["journal", "distill", "validity"] {
            instance.install(id);
        }
        let runtime = instance.start(&json!({
            "journal": {"timeoutMs": 1234, "grants": [{"dir": "${selfRoot}", "as": "/self", "write": false}]},
            "distill": {"memoryMb": 100_000},
            "validity": {"memoryMb": 1}
        }));
        let journal = runtime.status("journal").expect("journal");
        assert_eq!(
            (journal.timeout_ms, journal.memory_mb, journal.preopens.clone()),
            (1234, 64, vec!["/data".to_owned(), "/self".to_owned()])
        );
        assert_eq!(runtime.status("distill").expect("distill").memory_mb, 1024, "capped at the engine's maximum");

        // One MiB is less than the guest's own linear memory: it cannot even start.
        let capped = runtime.report("validity", "summary", &CallContext::top(false));
        assert_eq!(capped, Err(CallError::MemoryLimit { faculty: "validity".to_owned(), mb: 1 }));
        assert_eq!(capped.expect_err("capped").code(), "memory_limit");

        // A read-only grant is seen, and cannot be written.
        let refused = runtime.invoke_json("journal", "intake", &observation("nowhere"), &CallContext::top(false));
        assert!(matches!(&refused, Err(CallError::Guest { failure, .. }) if failure.code == "io_error"), "{refused:?}");
        let recent = runtime.report("journal", "recent", &CallContext::top(false)).expect("reading works");
        assert_eq!(recent, json!({"items": []}));
        assert!(!instance.path("self/journal").exists(), "nothing written");
    }

    #[test]
    fn nested_contexts_keep_the_deadline_and_are_bounded_in_depth() {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut context = CallContext::top(true).until(deadline);
        assert_eq!(
            context.clone().until(deadline + Duration::from_secs(1)).deadline(),
            Some(deadline),
            "only ever earlier"
        );
        for level in 0..MAX_CALL_DEPTH {
            context = context.nested(&format!("test/level-{level}")).expect("within the depth");
            assert!(!context.owner, "a nested call never passes as the owner");
            assert_eq!(context.deadline(), Some(deadline));
        }
        assert_eq!(context.nested("test/too-deep").err(), Some(CallError::CallDepth));
        assert_eq!(CallError::CallDepth.code(), "call_depth_exceeded");
    }

    #[test]
    fn a_faculty_calling_itself_is_cut_off_at_the_depth_limit() {
        let instance = Instance::new();
        instance.install("distill");
        // distill.claim calls validity.refresh first thing; route it back to claim.
        let (runtime, router) =
            instance.start_routed(&pipeline_settings(), vec![Route::to("validity.refresh", "distill", "claim")], false);
        let claimed = runtime.invoke_json("distill", "claim", &json!({}), &CallContext::top(true)).expect("claim");
        assert_eq!(claimed["batchId"], Value::Null, "{claimed}");
        let routed = router.routed();
        assert_eq!(routed.len(), usize::from(MAX_CALL_DEPTH), "one routed call a level: {routed:#?}");
        assert!(routed.iter().all(|r| r.result.is_ok() && !r.owner), "{routed:#?}");
        assert_eq!(runtime.status("distill").expect("distill").calls.total, u64::from(MAX_CALL_DEPTH) + 1);
    }
}

mod locks {
    use super::*;

    /// distill.claim calls `validity.refresh` first thing (and goes on if it fails); these
    /// tests route that call to a journal write, with a valid observation.
    fn to_the_journal() -> Vec<Route> {
        vec![Route::to("validity.refresh", "journal", "intake").with(observation("from a nested call"))]
    }

    #[test]
    fn concurrent_writers_of_one_store_all_complete() {
        let (instance, runtime) = journal_only();
        let writers: Vec<Spawned> = (0..6)
            .map(|writer| {
                Spawned::call(&runtime, move |rt| {
                    for n in 0..4 {
                        let text = format!("writer {writer} note {n}");
                        rt.invoke_json("journal", "intake", &observation(&text), &CallContext::top(false))?;
                        rt.report("journal", "recent", &CallContext::top(false))?;
                    }
                    Ok(Value::Null)
                })
            })
            .collect();
        for writer in writers {
            writer.outcome().expect("every call completed");
        }
        let mut texts = instance.spooled_texts("self");
        texts.sort();
        let mut expected: Vec<String> =
            (0..6).flat_map(|w| (0..4).map(move |n| format!("writer {w} note {n}"))).collect();
        expected.sort();
        assert_eq!(texts, expected, "every observation written once, whole");
        let ids: std::collections::BTreeSet<String> =
            instance.spool("self").iter().filter_map(|o| o["id"].as_str().map(str::to_owned)).collect();
        assert_eq!(ids.len(), 24);
        let status = runtime.status("journal").expect("journal");
        assert_eq!((status.calls.total, status.calls.in_flight), (48, 0));
        assert!(status.calls.failures.is_empty(), "{:?}", status.calls.failures);
    }

    #[test]
    fn a_write_waits_for_its_store_until_its_deadline() {
        let instance = Instance::new();
        for id in ["journal", "validity", "distill"] {
            instance.install(id);
        }
        // distill gets no /self: its only store is its own /data.
        let runtime = instance.start(&json!({"journal": self_grant(true), "validity": self_grant(true)}));
        let (gate, parked) = park_context_build(&runtime, &instance.path("self/profile.md"));
        let timeouts = failures(&runtime, "journal", "timeout");

        let waited = runtime.invoke_json("journal", "intake", &observation("too late"), &within(150));
        let Err(CallError::LockTimeout { store, .. }) = &waited else { panic!("{waited:?}") };
        assert_eq!(store, JOURNAL_DATA, "the first store the journal takes, in the global order");
        assert_eq!(waited.as_ref().expect_err("timed out").code(), "timeout");
        assert_eq!(failures(&runtime, "journal", "timeout"), timeouts + 1);
        // A granted folder is one store, whoever writes it.
        let other = runtime.invoke_json("validity", "commit", &json!({"ids": []}), &within(150));
        assert!(matches!(&other, Err(CallError::LockTimeout { store, .. }) if store == "self"), "{other:?}");
        // What does not write those stores runs meanwhile.
        let recent = runtime.report("journal", "recent", &CallContext::top(false)).expect("a report takes no store");
        assert_eq!(recent, json!({"items": []}));
        let checked = runtime.invoke_json("validity", "check", &json!({"checks": []}), &CallContext::top(true));
        assert_eq!(checked.expect("a read command takes no store"), json!({"ok": true, "results": []}));
        let claimed = runtime.invoke_json("distill", "claim", &json!({}), &far());
        assert!(
            !matches!(claimed, Err(CallError::LockTimeout { .. } | CallError::StoreBusy { .. })),
            "a write of other stores is not held up: {claimed:?}"
        );
        assert_eq!(runtime.status("distill").expect("distill").calls.total, 1);

        gate.release();
        assert!(ended_at_gate(&parked.outcome(), "profile.md"));
        runtime
            .invoke_json("journal", "intake", &observation("in time"), &CallContext::top(false))
            .expect("free again");
        assert_eq!(instance.spooled_texts("self"), ["in time"], "the call that gave up wrote nothing");
    }

    #[test]
    fn a_waiting_write_goes_on_once_the_store_is_free() {
        let (instance, runtime) = journal_only();
        let (gate, parked) = park_context_build(&runtime, &instance.path("self/profile.md"));
        let waiting = Spawned::call(&runtime, |rt| {
            rt.invoke_json("journal", "intake", &observation("waited"), &CallContext::top(false))
        });
        wait_until("the second call started", || in_flight(&runtime, "journal") == 2);
        wait_held(&runtime);
        assert!(instance.spool("self").is_empty(), "it waits rather than writes");

        gate.release();
        assert!(ended_at_gate(&parked.outcome(), "profile.md"));
        waiting.outcome().expect("the waiter went on");
        assert_eq!(instance.spooled_texts("self"), ["waited"]);
        assert_eq!(in_flight(&runtime, "journal"), 0);
    }

    #[test]
    fn a_nested_call_never_waits_for_what_its_own_tree_holds() {
        let instance = Instance::new();
        for id in ["journal", "distill"] {
            instance.install(id);
        }
        // distill.claim holds /self (and its /data) while it runs; the journal's intake it
        // calls wants /self too.
        let (runtime, router) = instance.start_routed(&pipeline_settings(), to_the_journal(), false);
        // Earlier than the default timeout (30 s from the call's start), so it is the tree's.
        let deadline = Instant::now() + Duration::from_secs(20);
        let top = CallContext::top(true).until(deadline);
        let claimed = runtime.invoke_json("distill", "claim", &json!({}), &top).expect("claim");
        assert_eq!(
            claimed["items"][0]["text"], "from a nested call",
            "claim reads what its nested call wrote: {claimed}"
        );
        let routed = router.routed();
        assert_eq!(routed.len(), 1, "{routed:#?}");
        assert_eq!(routed[0].action, "validity.refresh");
        assert!(routed[0].result.is_ok(), "{routed:#?}");
        assert_eq!(
            (routed[0].deadline, routed[0].owner),
            (Some(deadline), false),
            "the tree's deadline, not the owner"
        );
        assert_eq!(instance.spooled_texts("self"), ["from a nested call"]);
    }

    #[test]
    fn declared_callees_stores_are_taken_before_the_guest_runs() {
        let instance = Instance::new();
        for id in ["journal", "distill"] {
            instance.install(id);
        }
        // distill.claim declares `calls: ["validity.refresh"]`, routed to the journal, and
        // this router tells the runtime so.
        let (runtime, router) = instance.start_routed(&pipeline_settings(), to_the_journal(), true);
        let (gate, parked) = park_context_build(&runtime, &instance.path("self/profile.md"));

        let blocked = runtime.invoke_json("distill", "claim", &json!({}), &within(150));
        let Err(CallError::LockTimeout { faculty, store, .. }) = &blocked else { panic!("{blocked:?}") };
        assert_eq!((faculty.as_str(), store.as_str()), ("distill", JOURNAL_DATA), "its callee's store, up front");
        assert!(router.routed().is_empty(), "the guest never ran");
        assert_eq!(runtime.status("distill").expect("distill").calls.failures.get("timeout"), Some(&1));

        gate.release();
        assert!(ended_at_gate(&parked.outcome(), "profile.md"));
        runtime.invoke_json("distill", "claim", &json!({}), &CallContext::top(false)).expect("claim");
        let routed = router.routed();
        assert_eq!(routed.len(), 1);
        assert!(routed[0].result.is_ok(), "its nested call had its stores already: {routed:#?}");
        assert_eq!(instance.spooled_texts("self"), ["from a nested call"]);
    }

    #[test]
    fn an_undeclared_nested_call_fails_fast_instead_of_waiting_backwards() {
        let instance = Instance::new();
        for id in ["journal", "distill"] {
            instance.install(id);
        }
        std::fs::create_dir_all(instance.path("other")).expect("another folder");
        // The journal writes `other/`, distill writes `self/`. The global order:
        // .butler/faculties/distill < .butler/faculties/journal < other < self.
        let (runtime, router) = instance.start_routed(
            &json!({"journal": grant("other", true), "distill": self_grant(true)}),
            to_the_journal(),
            false,
        );
        let (gate, parked) = park_context_build(&runtime, &instance.path("other/profile.md"));

        // claim holds `self`; the journal's /data sorts before it and is held by the parked
        // call, so waiting for it could close a cycle: the nested call is refused at once,
        // not at the tree's (distant) deadline.
        let claimed = runtime.invoke_json("distill", "claim", &json!({}), &far());
        assert!(claimed.is_ok(), "claim goes on without its nested call: {claimed:?}");
        let routed = router.routed();
        assert_eq!(routed.len(), 1, "{routed:#?}");
        let Err(error) = &routed[0].result else { panic!("{routed:#?}") };
        assert_eq!(error, &CallError::StoreBusy { faculty: "journal".to_owned(), store: JOURNAL_DATA.to_owned() });
        assert_eq!((error.code(), error.failure().code.as_str()), ("busy", "busy"), "and the guest is told `busy`");

        gate.release();
        assert!(ended_at_gate(&parked.outcome(), "profile.md"));
        runtime.invoke_json("distill", "claim", &json!({}), &CallContext::top(false)).expect("claim");
        let routed = router.routed();
        assert!(routed[1].result.is_ok(), "{routed:#?}");
        assert_eq!(instance.spooled_texts("other"), ["from a nested call"]);
    }

    #[test]
    fn an_undeclared_nested_call_may_wait_forward() {
        let instance = Instance::new();
        for id in ["journal", "distill"] {
            instance.install(id);
        }
        // distill writes only its /data, which sorts before every store the journal takes:
        // its nested call may wait for them.
        let (runtime, router) = instance.start_routed(&json!({"journal": self_grant(true)}), to_the_journal(), false);
        let (gate, parked) = park_context_build(&runtime, &instance.path("self/profile.md"));

        let claim =
            Spawned::call(&runtime, |rt| rt.invoke_json("distill", "claim", &json!({}), &CallContext::top(false)));
        wait_until("the nested call started", || in_flight(&runtime, "journal") == 2);
        wait_held(&runtime);
        assert!(router.routed().is_empty(), "still waiting");
        gate.release();
        assert!(ended_at_gate(&parked.outcome(), "profile.md"));
        claim.outcome().expect("claim");
        let routed = router.routed();
        assert_eq!(routed.len(), 1);
        assert!(routed[0].result.is_ok(), "the nested call got the store once it was free: {routed:#?}");
        assert_eq!(instance.spooled_texts("self"), ["from a nested call"]);
    }
}

mod compiling {
    use super::*;

    #[test]
    fn compiled_code_is_cached_for_the_next_runtime() {
        let instance = Instance::new();
        instance.install("journal");
        let setup = instance.setup(&json!({"journal": self_grant(true)}));
        let first = FacultyRuntime::for_check(setup.clone()).expect("runtime");
        first.reconcile(&instance.scan(&first, None));
        assert_eq!((first.stats().compiles, first.stats().cache_hits), (1, 0), "a cold cache compiles");
        let cached = std::fs::read_dir(instance.path(".butler/cache/components")).expect("the cache").count();
        assert_eq!(cached, 1);

        let second = FacultyRuntime::for_check(setup).expect("runtime");
        second.reconcile(&instance.scan(&second, None));
        assert_eq!((second.stats().compiles, second.stats().cache_hits), (0, 1), "a warm cache loads");
        second.invoke_json("journal", "intake", &observation("cached"), &CallContext::top(false)).expect("intake");
        assert_eq!(instance.spooled_texts("self"), ["cached"]);
    }

    #[test]
    fn a_call_waits_for_a_compiling_faculty_until_its_deadline() {
        let (_instance, runtime, _catalog) = compiling_journal();
        let readiness = runtime.readiness();
        assert!(!readiness.ready);
        assert_eq!(readiness.pending, ["journal"], "named by its file until it describes itself");
        assert!(runtime.status("journal").is_none());
        // No reconcile comes before the deadline, so the faculty stays unknown to the call.
        let early = runtime.invoke_json("journal", "intake", &observation("early"), &within(50));
        assert!(matches!(early, Err(CallError::NotReady { ref faculty, .. }) if faculty == "journal"), "{early:?}");
        assert_eq!(early.expect_err("not ready").code(), "timeout");
        assert_eq!(runtime.serving("journal", Instant::now() + Duration::from_millis(50)), None);
        let unknown = runtime.invoke_json("nobody", "intake", &json!({}), &within(60_000));
        assert_eq!(unknown, Err(CallError::UnknownFaculty("nobody".to_owned())), "only the pending wait");
    }

    #[test]
    fn a_call_waiting_for_a_compiling_faculty_is_served_once_it_registers() {
        let instance = Instance::new();
        instance.install("journal");
        let (compiled_tx, compiled) = std::sync::mpsc::channel();
        let on_compiled = move || {
            let _ = compiled_tx.send(());
        };
        let wiring = Wiring { on_compiled: Some(Box::new(on_compiled)), ..Wiring::default() };
        let runtime =
            FacultyRuntime::wired(instance.setup(&json!({"journal": self_grant(true)})), wiring).expect("runtime");
        let mut catalog = instance.scan(&runtime, None);
        runtime.reconcile(&catalog);
        assert!(!runtime.readiness().ready);
        let waiting = Spawned::call(&runtime, |rt| {
            rt.invoke_json("journal", "intake", &observation("waited"), &CallContext::top(false))
        });

        // Every finished compile (the quick one, then the optimized one) means a rescan,
        // as the host does.
        loop {
            compiled.recv_timeout(LIVENESS).expect("a compile finished");
            catalog = instance.scan(&runtime, Some(&catalog));
            runtime.reconcile(&catalog);
            if runtime.status("journal").is_some_and(|s| s.optimized == Some(true)) {
                break;
            }
        }
        let written = waiting.outcome().expect("served once registered");
        assert!(written["id"].is_string(), "{written}");
        assert!(runtime.readiness().ready);
        assert_eq!(runtime.stats().compiles, 1, "only the optimized compile counts (it is the one cached)");
        assert_eq!(instance.spooled_texts("self"), ["waited"]);
    }

    /// A component dropped into a scan root after the last scan: a call made before any
    /// scan judged it waits for one instead of answering "no such faculty".
    #[test]
    fn a_call_for_a_component_dropped_since_the_last_scan_waits_for_the_scan() {
        let instance = Instance::new();
        let runtime = instance.runtime(&json!({"journal": self_grant(true)}));
        let empty = instance.scan(&runtime, None);
        runtime.reconcile(&empty);
        instance.install("journal");

        // No scan has seen it: the call waits — here until its short deadline.
        let early = runtime.invoke_json("journal", "intake", &observation("early"), &within(50));
        assert!(matches!(early, Err(CallError::NotReady { ref faculty, .. }) if faculty == "journal"), "{early:?}");
        let waiting = Spawned::call(&runtime, |rt| rt.invoke_json("journal", "intake", &observation("waited"), &far()));
        let catalog = instance.scan(&runtime, Some(&empty));
        runtime.reconcile(&catalog);
        let written = waiting.outcome().expect("served once a scan registered it");
        assert!(written["id"].is_string(), "{written}");
        assert_eq!(instance.spooled_texts("self"), ["waited"]);
        // No such file, no wait: unknown at once.
        let unknown = runtime.invoke_json("nobody", "intake", &json!({}), &far());
        assert_eq!(unknown, Err(CallError::UnknownFaculty("nobody".to_owned())));
    }

    /// A component that does not compile fails the call waiting for it with the reason,
    /// not with "no such faculty"; so does every call after.
    #[test]
    fn a_call_waiting_for_a_component_that_does_not_compile_gets_the_compile_error() {
        let instance = Instance::new();
        let (compiled_tx, compiled) = std::sync::mpsc::channel();
        let on_compiled = move || {
            let _ = compiled_tx.send(());
        };
        let wiring = Wiring { on_compiled: Some(Box::new(on_compiled)), ..Wiring::default() };
        let runtime = FacultyRuntime::wired(instance.setup(&json!({})), wiring).expect("runtime");
        let empty = instance.scan(&runtime, None);
        runtime.reconcile(&empty);
        // A component's header, then garbage: only the compile can tell.
        std::fs::write(instance.path("faculties/broken.wasm"), b"\0asm\x0d\x00\x01\x00not a component at all")
            .expect("drop a broken component");
        let early = runtime.invoke_json("broken", "run", &json!({}), &within(50));
        assert!(matches!(early, Err(CallError::NotReady { .. })), "dropped, not scanned yet: it waits: {early:?}");

        let waiting = Spawned::call(&runtime, |rt| rt.invoke_json("broken", "run", &json!({}), &far()));
        let catalog = instance.scan(&runtime, Some(&empty));
        let (severity, _) = Instance::diagnostic(&catalog, "faculties/broken.wasm").expect("a diagnostic");
        assert_eq!(severity, Severity::Pending, "compiling in the background");
        runtime.reconcile(&catalog);
        assert_eq!(runtime.readiness().pending, ["broken"]);
        compiled.recv_timeout(LIVENESS).expect("the compile ended");
        let catalog = instance.scan(&runtime, Some(&catalog));
        let (severity, why) = Instance::diagnostic(&catalog, "faculties/broken.wasm").expect("a diagnostic");
        assert_eq!(severity, Severity::Error, "{why}");
        runtime.reconcile(&catalog);

        let failed = waiting.outcome().expect_err("it does not compile");
        assert_eq!(failed.code(), "faculty_unavailable", "{failed:?}");
        assert!(failed.to_string().contains("does not compile"), "{failed}");
        let again = runtime.invoke_json("broken", "run", &json!({}), &far()).expect_err("still broken");
        assert_eq!(again, failed);
    }
}

mod shutdown {
    use super::*;

    #[test]
    fn abandon_ends_lock_waits_and_refuses_new_writes() {
        let (instance, runtime) = journal_only();
        let (gate, parked) = park_context_build(&runtime, &instance.path("self/profile.md"));
        let waiting = Spawned::call(&runtime, |rt| {
            rt.invoke_json("journal", "intake", &observation("never"), &CallContext::top(false))
        });
        wait_until("the second call is waiting", || in_flight(&runtime, "journal") == 2);

        runtime.abandon();
        assert_eq!(waiting.outcome(), Err(CallError::ShuttingDown), "the wait ended, long before its deadline");
        let refused = runtime.invoke_json("journal", "intake", &observation("after"), &CallContext::top(false));
        assert_eq!(refused, Err(CallError::ShuttingDown));
        assert_eq!(CallError::ShuttingDown.code(), "shutting_down");

        // The parked guest is interrupted at its first epoch check once its open returns —
        // unless it ends within the current epoch tick: either end is right; it must end.
        gate.release();
        let parked = parked.outcome();
        assert!(ended_at_gate(&parked, "profile.md") || parked == Err(CallError::ShuttingDown), "{parked:?}");
        assert!(instance.spool("self").is_empty(), "neither the waiter nor the late call wrote");
    }

    #[test]
    fn abandon_ends_waits_for_a_compiling_faculty() {
        let (_instance, runtime, _catalog) = compiling_journal();
        runtime.abandon();
        assert_eq!(runtime.invoke_json("journal", "intake", &observation("x"), &far()), Err(CallError::ShuttingDown));
        assert_eq!(runtime.serving("journal", Instant::now() + LIVENESS), None, "the declarations wait ends too");
    }

    /// The calls running share a memory cap beside their own: a call that would take
    /// more than is left fails `busy`, saying so; what a call took is given back.
    #[test]
    fn the_calls_running_share_a_memory_cap() {
        let instance = Instance::new();
        instance.install("journal");
        let tight = instance.start_sharing(&json!({"journal": self_grant(true)}), 1);
        let refused = tight.invoke_json("journal", "context-build", &json!({}), &far());
        let Err(error @ CallError::MemoryBusy { mb: 1, .. }) = &refused else { panic!("{refused:?}") };
        assert_eq!(error.code(), "busy");
        assert!(error.to_string().contains("the 1 MiB of memory the faculty calls running share"), "{error}");

        assert_eq!(tight.stats().memory_kib, 0, "the refused call gave back what it took");
        let roomy = instance.start_sharing(&json!({"journal": self_grant(true)}), 256);
        assert_eq!(roomy.stats().memory_cap_mb, 256);
        let built = roomy.invoke_json("journal", "context-build", &json!({}), &far());
        assert!(built.is_ok(), "{built:?}");
        assert_eq!(roomy.stats().memory_kib, 0, "a call gives back what it took");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn call_slots_bound_the_calls_at_once() {
        let runtime = FacultyRuntime::for_check(Setup::default()).expect("runtime");
        let latch = Arc::new(Latch::default());
        let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
        let calls: Vec<_> = (0..MAX_CONCURRENT_CALLS)
            .map(|n| {
                let (runtime, latch, started_tx) = (Arc::clone(&runtime), Arc::clone(&latch), started_tx.clone());
                tokio::spawn(async move {
                    runtime
                        .blocking(Some(Instant::now() + LIVENESS), move || {
                            let _ = started_tx.send(());
                            latch.wait();
                            Ok(json!(n))
                        })
                        .await
                })
            })
            .collect();
        for _ in 0..MAX_CONCURRENT_CALLS {
            tokio::time::timeout(LIVENESS, started.recv()).await.expect("a call started").expect("open");
        }
        assert_eq!(runtime.stats().in_flight, MAX_CONCURRENT_CALLS);
        let over = runtime.blocking(Some(Instant::now() + Duration::from_millis(50)), || Ok(Value::Null)).await;
        assert!(matches!(over, Err(CallError::SlotsBusy { .. })), "{over:?}");
        assert_eq!(over.expect_err("busy").code(), "busy");
        // A call a running call waits for (a tool its program calls) runs in that call's
        // slot: every slot taken by callers does not stop it.
        let inner = runtime.blocking_in_callers_slot(|| Ok(json!("inner"))).await;
        assert_eq!(inner, Ok(json!("inner")));
        assert_eq!(runtime.stats().in_flight, MAX_CONCURRENT_CALLS, "it took no slot");

        latch.open();
        for (n, call) in calls.into_iter().enumerate() {
            assert_eq!(call.await.expect("joined"), Ok(json!(n)));
        }
        assert_eq!(runtime.stats().in_flight, 0);
        assert_eq!(runtime.blocking(None, || Ok(json!("free"))).await, Ok(json!("free")));
        let panicked = runtime.blocking(None, || panic!("a host defect")).await;
        assert!(matches!(panicked, Err(CallError::Internal(_))), "{panicked:?}");
        assert_eq!(runtime.stats().in_flight, 0, "the panicked call gave its slot back");
        let panicked = runtime.blocking_in_callers_slot(|| panic!("a host defect")).await;
        assert!(matches!(panicked, Err(CallError::Internal(_))), "{panicked:?}");
        runtime.abandon();
        let stopped = runtime.blocking_in_callers_slot(|| Ok(Value::Null)).await;
        assert_eq!(stopped, Err(CallError::ShuttingDown), "none after shutdown");
    }

    /// A call answers from either kind of tokio runtime the host runs: a multi-thread one
    /// (the HTTP routes') and a current-thread one (the hub's), awaited from a spawned
    /// task and from the runtime's own `block_on`; a panic is `internal` and gives its
    /// slot back.
    #[test]
    fn a_call_answers_from_either_kind_of_runtime() {
        let runtime = FacultyRuntime::for_check(Setup::default()).expect("runtime");
        for mut builder in [tokio::runtime::Builder::new_multi_thread(), tokio::runtime::Builder::new_current_thread()]
        {
            let tokio = builder.enable_all().build().expect("tokio runtime");
            let flavor = tokio.handle().runtime_flavor();
            let (answer, panicked) = tokio.block_on(async {
                let spawned = tokio::spawn({
                    let runtime = Arc::clone(&runtime);
                    async move { runtime.blocking(None, || Ok(json!("answered"))).await }
                });
                let answer = spawned.await.expect("joined");
                (answer, runtime.blocking(None, || panic!("a host defect")).await)
            });
            assert_eq!(answer, Ok(json!("answered")), "{flavor:?}");
            assert!(
                matches!(&panicked, Err(CallError::Internal(why)) if why.contains("panicked")),
                "{flavor:?}: {panicked:?}"
            );
            assert_eq!(runtime.stats().in_flight, 0, "{flavor:?}: the slots are given back");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn drain_lets_calls_in_flight_finish_then_refuses_new_ones() {
        let (instance, runtime) = journal_only();
        let gate = Gate::at(&instance.path("self/profile.md"));
        let call = {
            let runtime = Arc::clone(&runtime);
            tokio::spawn(async move {
                let inner = Arc::clone(&runtime);
                runtime
                    .blocking(None, move || {
                        inner.invoke_json("journal", "context-build", &json!({}), &CallContext::top(false))
                    })
                    .await
            })
        };
        let held = Arc::clone(&runtime);
        tokio::task::spawn_blocking(move || wait_held(&held)).await.expect("the call is parked");
        let drain = {
            let runtime = Arc::clone(&runtime);
            tokio::spawn(async move { runtime.drain(LIVENESS).await })
        };
        // Draining takes every free slot and waits for the rest.
        let give_up = Instant::now() + LIVENESS;
        while runtime.stats().in_flight < MAX_CONCURRENT_CALLS {
            assert!(Instant::now() < give_up, "drain never started waiting");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert!(!drain.is_finished(), "drain waits for the call in flight");
        // The guest's own end, not `shutting_down`: it was not abandoned.
        tokio::task::spawn_blocking(move || gate.release()).await.expect("released");
        let outcome = call.await.expect("joined");
        assert!(ended_at_gate(&outcome, "profile.md"), "{outcome:?}");
        drain.await.expect("drained");
        assert_eq!(runtime.blocking(None, || Ok(Value::Null)).await, Err(CallError::ShuttingDown));
        assert_eq!(runtime.stats().in_flight, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_runtime_follows_catalog_snapshots() {
        use butler_catalog::Follow;
        let instance = Instance::new();
        instance.install("journal");
        let runtime = instance.runtime(&json!({"journal": self_grant(true)}));
        let catalog = Arc::new(instance.scan(&runtime, None));
        Arc::clone(&runtime).on_snapshot(catalog).await;
        assert_eq!(runtime.status("journal").map(|s| s.state), Some("ready"));
        Arc::clone(&runtime).on_snapshot(Arc::new(butler_catalog::Catalog::default())).await;
        assert!(runtime.status("journal").is_none(), "an empty snapshot unloads it");
    }
}

/// Rules this suite found broken, kept as they were mended.
mod found {
    use super::*;

    #[test]
    fn an_uncontended_call_is_not_counted_as_a_lock_wait() {
        let (_instance, runtime) = journal_only();
        runtime.invoke_json("journal", "intake", &observation("alone"), &CallContext::top(false)).expect("intake");
        let calls = runtime.status("journal").expect("journal").calls;
        assert_eq!(calls.lock_waits, 0, "`lockWaits`: calls that had to wait for a store another call held: {calls:?}");
    }

    #[test]
    fn abandon_refuses_every_new_call() {
        let (_instance, runtime) = journal_only();
        runtime.abandon();
        for attempt in 0..20 {
            let report = runtime.report("journal", "recent", &CallContext::top(false));
            assert_eq!(report, Err(CallError::ShuttingDown), "attempt {attempt}");
        }
    }
}

/// A rule the runtime does not keep today: the test fails, and is ignored so the suite
/// stays green (`cargo test -p butler-faculty -- --ignored` runs it).
mod known_gaps {
    use super::*;

    #[test]
    #[ignore = "runtime gap: a guest blocked in a host file operation is not stopped by its deadline (epoch interruption only fires in guest code); it holds its stores until the operation returns"]
    fn a_deadline_ends_a_call_whose_guest_is_blocked_in_a_file_open() {
        let instance = Instance::new();
        instance.install("journal");
        let runtime = instance.start(
            &json!({"journal": {"timeoutMs": 200, "grants": [{"dir": "${selfRoot}", "as": "/self", "write": true}]}}),
        );
        let gate = Gate::at(&instance.path("self/profile.md"));
        let parked = Spawned::call(&runtime, |rt| {
            rt.invoke_json("journal", "context-build", &json!({}), &CallContext::top(false))
        });
        // Fifty times its deadline: a liveness guard, not a measurement.
        let ended = parked.outcome_within(Duration::from_secs(10));
        drop(gate);
        assert!(
            matches!(ended, Some(Err(CallError::Timeout { .. }))),
            "a 200 ms call parked in a file open must end with `timeout`: {ended:?}"
        );
    }
}
