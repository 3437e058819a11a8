//! Running one operation: a fresh store per call from the pre-linked component, the
//! deadline and memory cap armed, and every way it can end turned into either JSON data
//! or a [`CallError`] for this call only.

use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmtime::{Engine, Store, Trap};

use super::components::Prepared;
use super::engine::{Abandoned, Armed, Cancelled, Ticks, arm, trap_summary};
use super::hub::Grant;
use super::sandbox::{CallState, MAX_STDOUT_BYTES, Sandbox};
use super::wit::{FacultyPre, GuestFailure, Op};
use super::{CallContext, CallError, Dispatch};
use butler_catalog::text::clip;

/// What to run in a component.
pub(super) enum Call {
    /// An export of a `butler:faculty` component.
    Guest(Op),
    /// `wasi:cli/run` of a plain command, with its argv and standard input.
    Command {
        /// argv, `argv[0]` included.
        argv: Vec<String>,
        /// Standard input.
        stdin: Option<String>,
    },
}

/// Where one call stands in its tree, and when it must stop.
pub(super) struct Frame<'a> {
    /// The call's context (owner, held stores, depth).
    pub context: &'a CallContext,
    /// `faculty/command`, the parent of its nested calls.
    pub caller: String,
    /// When the call tree must be done.
    pub deadline: Instant,
    /// Set when the runtime abandons every call (shutdown).
    pub stop: Arc<AtomicBool>,
    /// What `host.call` goes through.
    pub dispatch: Option<Arc<dyn Dispatch>>,
    /// The hub tools the command declares it may call (`hubTools`), if any.
    pub hub_tools: Option<globset::GlobSet>,
    /// The memory the calls running share.
    pub memory: Arc<crate::sandbox::SharedMemory>,
}

/// Runs `call` in a fresh instance of `prepared`.
pub(super) fn component(
    engine: &Engine,
    sandbox: &Sandbox,
    prepared: &Prepared,
    call: &Call,
    frame: &Frame<'_>,
) -> Result<Value, CallError> {
    let (argv, stdin): (&[String], Option<&str>) = match call {
        Call::Guest(_) => (&[], None),
        Call::Command { argv, stdin } => (argv, stdin.as_deref()),
    };
    let mut fresh = Fresh::new(engine, sandbox, argv, stdin, frame, Ticks::Continue)?;
    let store = &mut fresh.store;
    let outcome = match (prepared, call) {
        (Prepared::Faculty(pre), Call::Guest(op)) => pre.run(store, op).map(|r| r.map(Some)),
        (Prepared::Command(pre), Call::Command { .. }) => pre
            .instantiate(&mut *store)
            .and_then(|command| command.wasi_cli_run().call_run(&mut *store))
            .map(|status| match status {
                Ok(()) => Ok(None),
                Err(()) => {
                    Err(GuestFailure::untyped("command_failed".to_owned(), "exited with a failure status".to_owned()))
                }
            }),
        _ => {
            return Err(CallError::Unavailable {
                faculty: sandbox.faculty.clone(),
                reason: "the call does not fit the component's kind".to_owned(),
            });
        }
    };
    fresh.finish(sandbox, matches!(prepared, Prepared::Command(_)), outcome, frame)
}

/// Runs operation `op` of the faculty `pre` in a fresh instance on the calling async task
/// (see [`crate::wit::FacultyPre::run_awaited`]), with the same deadline, caps and
/// outcomes as [`component`].
pub(super) async fn component_awaited(
    engine: &Engine,
    sandbox: &Sandbox,
    pre: &FacultyPre,
    op: &Op,
    frame: &Frame<'_>,
) -> Result<Value, CallError> {
    let mut fresh = Fresh::new(engine, sandbox, &[], None, frame, Ticks::Yield)?;
    let outcome = pre.run_awaited(&mut fresh.store, op).await.map(|r| r.map(Some));
    fresh.finish(sandbox, false, outcome, frame)
}

/// A fresh store for one call, armed against its deadline.
struct Fresh {
    store: Store<CallState>,
    started: Instant,
    _ticking: Armed,
}

impl Fresh {
    fn new(
        engine: &Engine,
        sandbox: &Sandbox,
        argv: &[String],
        stdin: Option<&str>,
        frame: &Frame<'_>,
        ticks: Ticks,
    ) -> Result<Self, CallError> {
        let state =
            CallState::new(sandbox, argv, stdin, frame.dispatch.clone(), frame.context.clone(), frame.caller.clone())
                .map_err(|e| CallError::Unavailable {
                    faculty: sandbox.faculty.clone(),
                    reason: format!("cannot prepare the sandbox: {e:#}"),
                })?
                .with_hub(
                    frame
                        .hub_tools
                        .clone()
                        .map(|allowed| Grant::new(frame.context.hub.clone(), allowed, frame.deadline)),
                );
        let started = Instant::now();
        let mut store = Store::new(engine, state);
        store.data_mut().limits.share(Arc::clone(&frame.memory));
        store.limiter(|s| &mut s.limits);
        let ticking = arm(&mut store, frame.deadline, Arc::clone(&frame.stop), frame.context.cancel.clone(), ticks);
        Ok(Self { store, started, _ticking: ticking })
    }

    /// The call's result from how the guest ended (`Some(text)`: what it returned; `None`:
    /// a command, whose answer is its stdout), its stdout and stderr.
    fn finish(
        self,
        sandbox: &Sandbox,
        command: bool,
        outcome: wasmtime::Result<Result<Option<String>, GuestFailure>>,
        frame: &Frame<'_>,
    ) -> Result<Value, CallError> {
        let faculty = sandbox.faculty.clone();
        let stderr = String::from_utf8_lossy(&self.store.data().stderr.contents()).into_owned();
        log_stderr(&faculty, &stderr);
        let stdout = self.store.data().stdout.contents();

        let text = match outcome {
            Ok(Ok(Some(text))) => text,
            Ok(Ok(None)) => String::from_utf8_lossy(&stdout).into_owned(),
            Ok(Err(failure)) if failure.code == "command_failed" && command => {
                return Err(CallError::CommandFailed { faculty, message: with_tail(failure.message, &stderr) });
            }
            Ok(Err(failure)) => return Err(CallError::guest(&faculty, failure)),
            Err(error) => {
                if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
                    if exit.0 == 0 {
                        String::from_utf8_lossy(&stdout).into_owned()
                    } else {
                        return Err(CallError::CommandFailed {
                            faculty,
                            message: with_tail(format!("exited with status {}", exit.0), &stderr),
                        });
                    }
                } else {
                    // What the call had, the part spent waiting for its turn included.
                    let budget = frame.deadline.saturating_duration_since(frame.context.since.unwrap_or(self.started));
                    return Err(classify(sandbox, budget, &error, &self.store.data().limits, &stderr, &frame.memory));
                }
            }
        };
        parse_output(&faculty, &text)
    }
}

/// Runs a native (non-wasm) faculty command: the compatibility path for existing
/// faculties. Own process group, deadline, capped output.
pub(super) fn native(
    sandbox: &Sandbox,
    argv: &[String],
    cwd: &std::path::Path,
    env: &[(String, String)],
    stdin: Option<&str>,
    frame: &Frame<'_>,
) -> Result<Value, CallError> {
    let faculty = sandbox.faculty.clone();
    let Some(program) = argv.first() else {
        return Err(CallError::Unavailable { faculty, reason: "empty exec".to_owned() });
    };
    // Under a keeper, in its own process group: a host killed mid-call leaves nothing behind.
    let mut child = butler_process::keeper::command(argv)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().chain(&sandbox.env).map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CallError::CommandFailed {
            faculty: faculty.clone(),
            message: format!("cannot start `{program}`: {e}"),
        })?;
    let input = stdin.unwrap_or_default().as_bytes().to_vec();
    let mut child_stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(pipe) = child_stdin.as_mut() {
            let _ = pipe.write_all(&input);
        }
    });
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(MAX_STDOUT_BYTES as u64).read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if frame.stop.load(Ordering::Acquire) => {
                kill_group(child.id());
                let _ = child.wait();
                return Err(CallError::ShuttingDown);
            }
            Ok(None) if frame.context.cancel.as_ref().is_some_and(|cancel| cancel.load(Ordering::Acquire)) => {
                kill_group(child.id());
                let _ = child.wait();
                return Err(CallError::Cancelled { faculty });
            }
            Ok(None) if Instant::now() >= frame.deadline => {
                kill_group(child.id());
                let _ = child.wait();
                let had = frame.deadline.saturating_duration_since(frame.context.since.unwrap_or(started));
                let ms = nearest_ms(had);
                return Err(CallError::Timeout { faculty, ms });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(CallError::CommandFailed { faculty, message: e.to_string() }),
        }
    };
    let _ = writer.join();
    let stdout = out.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    log_stderr(&faculty, &stderr);
    if !status.success() {
        let how =
            status.code().map_or_else(|| "was killed by a signal".to_owned(), |c| format!("exited with status {c}"));
        return Err(CallError::CommandFailed { faculty, message: with_tail(how, &stderr) });
    }
    parse_output(&faculty, &String::from_utf8_lossy(&stdout))
}

/// The keeper leads the call's process group; kill the whole group (grandchildren too).
fn kill_group(pid: u32) {
    butler_process::tree::signal_group(pid, rustix::process::Signal::KILL);
}

fn parse_output(faculty: &str, text: &str) -> Result<Value, CallError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(CallError::InvalidOutput {
            faculty: faculty.to_owned(),
            message: "printed nothing; a command must print one JSON value".to_owned(),
        });
    }
    serde_json::from_str(trimmed).map_err(|e| CallError::InvalidOutput {
        faculty: faculty.to_owned(),
        message: format!("output is not one JSON value ({e}): {}", clip(trimmed, 200)),
    })
}

/// `time` to the nearest millisecond: a timeout of 30 s set a few microseconds before the
/// call counted from is said as 30000 ms, not 29999.
fn nearest_ms(time: Duration) -> u64 {
    u64::try_from(time.as_micros().saturating_add(500) / 1000).unwrap_or(u64::MAX)
}

/// Shutdown, deadline (`budget` is the time the call had), memory cap, or another trap.
fn classify(
    sandbox: &Sandbox,
    budget: Duration,
    error: &wasmtime::Error,
    limits: &crate::sandbox::Limits,
    stderr: &str,
    shared: &crate::sandbox::SharedMemory,
) -> CallError {
    let faculty = sandbox.faculty.as_str();
    if error.downcast_ref::<Abandoned>().is_some() {
        return CallError::ShuttingDown;
    }
    if error.downcast_ref::<Cancelled>().is_some() {
        return CallError::Cancelled { faculty: faculty.to_owned() };
    }
    if matches!(error.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        let ms = nearest_ms(budget);
        return CallError::Timeout { faculty: faculty.to_owned(), ms };
    }
    if limits.hit {
        return CallError::MemoryLimit { faculty: faculty.to_owned(), mb: sandbox.memory_mb };
    }
    if limits.shared_hit {
        return CallError::MemoryBusy { faculty: faculty.to_owned(), mb: shared.cap_mb() };
    }
    if matches!(error.downcast_ref::<Trap>(), Some(Trap::AllocationTooLarge)) {
        return CallError::Busy { faculty: faculty.to_owned() };
    }
    CallError::Trap { faculty: faculty.to_owned(), message: with_tail(trap_summary(error), stderr) }
}

/// `message`, plus the last meaningful line the guest wrote on stderr (for a Rust guest,
/// its panic message; the standard "run with RUST_BACKTRACE" hint is skipped).
fn with_tail(message: String, stderr: &str) -> String {
    let meaningful = |l: &&str| !l.trim().is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE");
    match stderr.lines().rev().find(meaningful) {
        Some(last) => format!("{message}; stderr: {}", clip(last.trim(), 200)),
        None => message,
    }
}

fn log_stderr(faculty: &str, stderr: &str) {
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        super::stats::emit(log::Level::Info, faculty, &format!("stderr: {line}"));
    }
}
