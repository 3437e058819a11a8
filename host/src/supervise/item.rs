//! One supervised item: a task that owns its process and is the only code that starts,
//! stops or restarts it. Requests arrive as messages, so concurrent start/stop/restart on
//! one item are serialized; the exit, restart timer and health probe are the other
//! events it waits on.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::health::Outcome;
use super::policy::{self, Backoff};
use super::{Event, Spec};
use crate::catalog::Kind;
use crate::catalog::manifest::RestartPolicy;
use crate::lock;
use crate::time::now_ms;
use butler_process::logs::Log;
use butler_process::{Kept, keeper};

/// Before its first healthy answer, a starting item is probed this often, so it shows
/// healthy soon after it is.
const STARTING_PROBE_EVERY: Duration = Duration::from_millis(250);

/// The first probe, this long after the start: most servers are listening by then.
const FIRST_PROBE_AFTER: Duration = Duration::from_millis(100);

/// Failed probes count as "still starting" for this long after a start: servers that load
/// a model or migrate a database take tens of seconds, and are not unhealthy meanwhile.
const STARTUP_WINDOW: Duration = Duration::from_secs(30);

/// After the process exits, how long its output pipes may still deliver the last lines.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);

/// An item's run state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Not running.
    Stopped,
    /// Started; its health probe has not answered healthy yet.
    Starting,
    /// Running, with no health probe.
    Running,
    /// Running; the last probe succeeded.
    Healthy,
    /// Running; the last probe failed.
    Unhealthy,
    /// Between two runs: the last one is being stopped for a restart (by hand, or with a
    /// changed `hosted` block), or it ended and the next one's program is not running yet.
    Restarting,
    /// A stop was asked, or the program exited and what it left behind is being stopped;
    /// it is `stopped`, `backoff` or `crashed` next.
    Stopping,
    /// Exited; restarts at `nextRestartAt`.
    Backoff,
    /// Exited with a failure and is not restarted (policy, or it could not be started).
    Crashed,
}

/// How the last run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Exit {
    /// Exit code (`128 + N` when killed by signal N).
    pub code: i32,
    /// When, ms since the epoch.
    pub at: u64,
    /// Whether Butler stopped it (stop, restart, removal, shutdown).
    pub requested: bool,
}

/// The last probe's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthView {
    /// Whether the probe passed (a 2xx answer, exit 0, or the port taking a connection).
    pub ok: bool,
    /// What the probe saw (`HTTP 200`, `exit 1: …`, the probe command's last output line).
    pub detail: String,
    /// When, ms since the epoch.
    pub at: u64,
}

/// One ended run, for the restart history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// When it started, ms since the epoch (unknown for a run that never got going).
    pub started_at: Option<u64>,
    /// How it ended.
    pub exit: Exit,
}

/// How many ended runs an item remembers.
pub const HISTORY: usize = 20;

/// What the API shows about an item.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Where it is in its run (`stopped`, `starting`, `running`, …).
    pub state: State,
    /// The program's pid while it runs.
    pub pid: Option<u32>,
    /// Its process group (the keeper's pid).
    pub pgid: Option<u32>,
    /// When the current run started, ms since the epoch.
    pub started_at: Option<u64>,
    /// How long it has been running, in ms.
    pub uptime_ms: Option<u64>,
    /// Automatic restarts since it was last started by hand (or by the host).
    pub restarts: u32,
    /// How the last run ended.
    pub last_exit: Option<Exit>,
    /// When the next automatic restart happens (state `backoff`), ms since the epoch.
    pub next_restart_at: Option<u64>,
    /// Its `hosted` block changed and it is being restarted with the new one.
    pub restart_pending: bool,
    /// The last health probe.
    pub health: Option<HealthView>,
    /// Why it could not be started.
    pub error: Option<String>,
    /// The restart policy in effect.
    pub restart: RestartPolicy,
    /// While it runs: the CPU share of the program and its descendants since the previous
    /// status was read (since it started, the first time), percent of one core.
    pub cpu_percent: Option<f64>,
    /// While it runs: the resident memory of the program and its descendants, bytes.
    pub rss_bytes: Option<u64>,
}

/// What the item task keeps and the API reads.
#[derive(Debug)]
struct Record {
    status: Status,
    since: Option<std::time::Instant>,
    /// A restart is under way: set when it is asked for (or an automatic one begins),
    /// cleared once the new run's program has a pid or the run ends otherwise.
    restarting: bool,
    /// The last [`HISTORY`] ended runs, oldest first.
    history: std::collections::VecDeque<Run>,
}

/// Requests to an item task.
enum Msg {
    Start(oneshot::Sender<()>),
    Stop(oneshot::Sender<()>),
    Restart(oneshot::Sender<()>),
    Update(Arc<Spec>),
    Remove(oneshot::Sender<()>),
}

/// The handle the supervisor keeps for an item.
pub struct Item {
    /// The extension's kind.
    pub kind: Kind,
    /// The spec it runs now.
    spec: Mutex<Arc<Spec>>,
    record: Arc<Mutex<Record>>,
    /// The last reading of what the running program uses, for the next CPU share.
    usage: Mutex<Option<Reading>>,
    /// Its process's output and the supervisor's notes on it, as the API and console read
    /// them.
    pub log: Arc<Log>,
    tx: mpsc::Sender<Msg>,
}

/// The last reading of what an item's program uses.
#[derive(Debug, Clone, Copy)]
struct Reading {
    pid: u32,
    usage: butler_process::usage::Usage,
    percent: Option<f64>,
}

/// The item's task is gone (the host is shutting down, or it was removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the item is being removed")]
pub struct Gone;

impl Item {
    /// Starts the task for `spec`; nothing runs until a start.
    pub fn spawn(spec: Arc<Spec>, log_path: PathBuf, events: broadcast::Sender<Event>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(16);
        let record = Arc::new(Mutex::new(Record {
            status: Status {
                state: State::Stopped,
                pid: None,
                pgid: None,
                started_at: None,
                uptime_ms: None,
                restarts: 0,
                last_exit: None,
                next_restart_at: None,
                restart_pending: false,
                health: None,
                error: None,
                restart: spec.restart,
                cpu_percent: None,
                rss_bytes: None,
            },
            since: None,
            restarting: false,
            history: std::collections::VecDeque::new(),
        }));
        let log = Arc::new(Log::new(log_path));
        let task = Task {
            spec: Arc::clone(&spec),
            record: Arc::clone(&record),
            log: Arc::clone(&log),
            events,
            backoff: Backoff::default(),
        };
        tokio::spawn(task.run(rx));
        Arc::new(Self { kind: spec.kind, spec: Mutex::new(spec), record, usage: Mutex::new(None), log, tx })
    }

    /// The item's status now. While a run is under way its state says what is really
    /// happening: `restarting` until the new program runs, `restarting` or `stopping` once
    /// the program has exited and the keeper is still winding down — never `running`
    /// without a program.
    #[must_use]
    pub fn status(&self) -> Status {
        let mut record = lock(&self.record);
        find_program(&mut record);
        let mut status = record.status.clone();
        let live = matches!(status.state, State::Starting | State::Running | State::Healthy | State::Unhealthy);
        if record.restarting {
            status.state = State::Restarting;
        } else if live
            && let (Some(pid), Some(group)) = (status.pid, status.pgid)
            && !butler_process::tree::is_child(group, pid)
        {
            // The program ended; the keeper is stopping what it left and reports next.
            status.state = if status.restart == RestartPolicy::Never { State::Stopping } else { State::Restarting };
            status.pid = None;
        }
        status.uptime_ms = record.since.map(|s| u64::try_from(s.elapsed().as_millis()).unwrap_or(u64::MAX));
        drop(record);
        if let Some((pid, now)) = status.pid.and_then(|pid| Some((pid, butler_process::usage::of_tree(pid)?))) {
            let mut last = lock(&self.usage);
            let earlier = last.filter(|reading| reading.pid == pid);
            let measured = earlier.and_then(|reading| now.cpu_percent_since(&reading.usage));
            // Readings too close together keep the share measured last; the first reading
            // of a run (or one with none before it) is its share since it started.
            let percent = measured.or(earlier.and_then(|reading| reading.percent)).or_else(|| {
                status.uptime_ms.filter(|ms| *ms > 0).map(|ms| (now.cpu_ms as f64 / ms as f64 * 1000.0).round() / 10.0)
            });
            if measured.is_some() || earlier.is_none() {
                *last = Some(Reading { pid, usage: now, percent });
            }
            status.cpu_percent = percent;
            status.rss_bytes = Some(now.rss_bytes);
        }
        status
    }

    /// Its last [`HISTORY`] ended runs, oldest first.
    #[must_use]
    pub fn history(&self) -> Vec<Run> {
        lock(&self.record).history.iter().cloned().collect()
    }

    /// The spec it runs.
    #[must_use]
    pub fn spec(&self) -> Arc<Spec> {
        Arc::clone(&lock(&self.spec))
    }

    /// Starts it (nothing if it runs; at once if it waits in backoff).
    ///
    /// # Errors
    /// [`Gone`] if the item is being removed.
    pub async fn start(&self) -> Result<(), Gone> {
        self.ask(Msg::Start).await
    }

    /// Stops it and keeps it stopped.
    ///
    /// # Errors
    /// [`Gone`] if the item is being removed.
    pub async fn stop(&self) -> Result<(), Gone> {
        self.ask(Msg::Stop).await
    }

    /// Stops it if it runs, then starts it.
    ///
    /// # Errors
    /// [`Gone`] if the item is being removed.
    pub async fn restart(&self) -> Result<(), Gone> {
        self.ask(Msg::Restart).await
    }

    /// Runs `spec` from now on; a running process is restarted with it.
    pub async fn update(&self, spec: Arc<Spec>) {
        *lock(&self.spec) = Arc::clone(&spec);
        let _ = self.tx.send(Msg::Update(spec)).await;
    }

    /// Stops it for good and ends its task.
    pub async fn remove(&self) {
        let _ = self.ask(Msg::Remove).await;
    }

    async fn ask(&self, msg: impl FnOnce(oneshot::Sender<()>) -> Msg) -> Result<(), Gone> {
        let (reply, done) = oneshot::channel();
        self.tx.send(msg(reply)).await.map_err(|_| Gone)?;
        done.await.map_err(|_| Gone)
    }
}

/// Notes the pid of the run's program once the keeper has started it (the keeper's first
/// child); a restart under way is over then.
fn find_program(record: &mut Record) {
    if record.status.pid.is_none()
        && let Some(group) = record.status.pgid
    {
        record.status.pid = butler_process::tree::first_child(group);
        if record.status.pid.is_some() {
            record.restarting = false;
        }
    }
}

/// How often a new run is looked at until its program has a pid.
const PROGRAM_POLL: Duration = Duration::from_millis(5);

/// How long a new run is looked at for its program's pid (then `status` keeps looking).
const PROGRAM_WAIT: Duration = Duration::from_secs(5);

/// Records the pid of the program the keeper `group` starts, as soon as it has one: the
/// pid of the program itself, not of what it may leave behind once it ends.
async fn watch_program(record: Arc<Mutex<Record>>, group: u32) {
    let deadline = Instant::now() + PROGRAM_WAIT;
    while Instant::now() < deadline {
        {
            let mut record = lock(&record);
            if record.status.pgid != Some(group) || record.status.pid.is_some() {
                return;
            }
            find_program(&mut record);
            if record.status.pid.is_some() {
                return;
            }
        }
        tokio::time::sleep(PROGRAM_POLL).await;
    }
}

/// A process the task runs.
struct Running {
    kept: Kept,
    since: Instant,
    readers: Vec<JoinHandle<()>>,
}

type ProbeRun = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// The item's task.
struct Task {
    spec: Arc<Spec>,
    record: Arc<Mutex<Record>>,
    log: Arc<Log>,
    events: broadcast::Sender<Event>,
    backoff: Backoff,
}

impl Task {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let mut running: Option<Running> = None;
        let mut restart_at: Option<Instant> = None;
        let mut probe_at: Option<Instant> = None;
        let mut probing: Option<ProbeRun> = None;
        loop {
            tokio::select! {
                msg = rx.recv() => {
                    let Some(msg) = msg else {
                        self.stop(&mut running).await;
                        return;
                    };
                    // Any request ends the current probe; all but an update end a pending
                    // restart too (an update retries a waiting item at once, below).
                    let waiting = restart_at.take().is_some();
                    probing = None;
                    probe_at = None;
                    match msg {
                        Msg::Start(reply) => {
                            if running.is_none() {
                                self.manual_start();
                                running = self.spawn();
                            }
                            let _ = reply.send(());
                        }
                        Msg::Stop(reply) => {
                            self.between_runs(&running, State::Stopping);
                            self.stop(&mut running).await;
                            let _ = reply.send(());
                        }
                        Msg::Restart(reply) => {
                            self.between_runs(&running, State::Restarting);
                            self.stop(&mut running).await;
                            self.manual_start();
                            running = self.spawn();
                            let _ = reply.send(());
                        }
                        Msg::Update(spec) => {
                            self.spec = spec;
                            lock(&self.record).status.restart = self.spec.restart;
                            if running.is_some() {
                                lock(&self.record).status.restart_pending = true;
                                self.between_runs(&running, State::Restarting);
                                self.log.note("its hosted block changed: restarting with the new one");
                                self.stop(&mut running).await;
                                running = self.spawn();
                                lock(&self.record).status.restart_pending = false;
                            } else if waiting {
                                self.log.note("its hosted block changed: retrying now instead of after the backoff");
                                running = self.spawn();
                            }
                        }
                        Msg::Remove(reply) => {
                            self.between_runs(&running, State::Stopping);
                            self.stop(&mut running).await;
                            let _ = reply.send(());
                            return;
                        }
                    }
                    if running.is_some() {
                        probe_at = Some(Instant::now() + FIRST_PROBE_AFTER);
                    }
                }
                status = exited(&mut running) => {
                    if let Some(process) = running.take() {
                        probing = None;
                        probe_at = None;
                        restart_at = self.exited(process, status).await;
                    }
                }
                () = sleep_until(restart_at) => {
                    restart_at = None;
                    let restarts = {
                        let mut record = lock(&self.record);
                        record.restarting = true;
                        record.status.restarts += 1;
                        record.status.restarts
                    };
                    running = self.spawn();
                    if running.is_some() {
                        probe_at = Some(Instant::now() + FIRST_PROBE_AFTER);
                        let restarted = Event::Restarted { kind: self.spec.kind, id: self.spec.id.clone(), restarts };
                        let _ = self.events.send(restarted);
                    }
                }
                () = sleep_until(probe_at), if probing.is_none() && running.is_some() => {
                    probe_at = None;
                    if let Some((probe, _)) = self.spec.probe.as_ref().ok().and_then(Option::as_ref) {
                        let probe = probe.clone();
                        probing = Some(Box::pin(async move { probe.run().await }));
                    }
                }
                outcome = poll_probe(&mut probing) => {
                    probing = None;
                    probe_at = Some(Instant::now() + self.probed(outcome));
                }
            }
        }
    }

    /// A stop (`Stopping`) or a restart (`Restarting`) begins: what the status says until
    /// the process is gone (and, for a restart, until the new one runs).
    fn between_runs(&self, running: &Option<Running>, state: State) {
        let mut record = lock(&self.record);
        record.restarting = state == State::Restarting;
        if running.is_some() {
            record.status.state = state;
        }
    }

    /// A start asked for by the owner or the host: past failures are forgotten.
    fn manual_start(&mut self) {
        self.backoff.reset();
        let mut record = lock(&self.record);
        record.status.restarts = 0;
        record.status.next_restart_at = None;
    }

    /// Starts the process; on failure the item is `crashed` with the reason.
    fn spawn(&self) -> Option<Running> {
        let result = match &self.spec.launch {
            Ok(launch) => keeper::spawn_kept(launch, keeper::Input::Null)
                .map(|kept| (kept, launch.argv.join(" ")))
                .map_err(|e| format!("cannot start `{}`: {e}", launch.program())),
            Err(e) => Err(format!("cannot start: {e}")),
        };
        let mut record = lock(&self.record);
        let status = &mut record.status;
        status.next_restart_at = None;
        status.health = None;
        status.pid = None;
        match result {
            Ok((mut kept, command)) => {
                let readers = kept.log_output(&self.log, true);
                status.state = if matches!(self.spec.probe, Ok(Some(_))) { State::Starting } else { State::Running };
                status.pgid = Some(kept.group);
                status.started_at = Some(now_ms());
                status.error = None;
                record.since = Some(std::time::Instant::now());
                drop(record);
                tokio::spawn(watch_program(Arc::clone(&self.record), kept.group));
                self.log.note(format!("started: {command}"));
                Some(Running { kept, since: Instant::now(), readers })
            }
            Err(message) => {
                record.restarting = false;
                let status = &mut record.status;
                status.state = State::Crashed;
                status.error = Some(message.clone());
                status.pgid = None;
                status.started_at = None;
                record.since = None;
                drop(record);
                self.log.note(message);
                None
            }
        }
    }

    /// Stops the process if one runs; the item is `stopped` either way.
    async fn stop(&self, running: &mut Option<Running>) {
        if let Some(mut process) = running.take() {
            self.log.note("stopping: SIGTERM to its process group");
            let status = process.kept.stop().await;
            drain(process.readers).await;
            let code = exit_code(status);
            self.log.note(format!("stopped (exit code {code})"));
            self.ended(State::Stopped, Exit { code, at: now_ms(), requested: true }, None);
        } else {
            let mut record = lock(&self.record);
            record.status.state = State::Stopped;
            record.status.next_restart_at = None;
        }
    }

    /// The process exited on its own: apply the restart policy. Returns when to restart.
    async fn exited(&mut self, process: Running, status: Option<std::process::ExitStatus>) -> Option<Instant> {
        drain(process.readers).await;
        let code = exit_code(status);
        let failed = code != 0;
        let delay = policy::restarts(self.spec.restart, failed).then(|| self.backoff.next(process.since.elapsed()));
        let state = match (delay, failed) {
            (Some(_), _) => State::Backoff,
            (None, true) => State::Crashed,
            (None, false) => State::Stopped,
        };
        let next = delay.map(|d| now_ms() + u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.log.note(match delay {
            Some(d) => format!("exited with code {code}; restarting in {} ms", d.as_millis()),
            None => format!("exited with code {code}"),
        });
        self.ended(state, Exit { code, at: now_ms(), requested: false }, next);
        if failed {
            let _ = self.events.send(Event::Failed {
                kind: self.spec.kind,
                id: self.spec.id.clone(),
                code,
                restart_in: delay,
            });
        }
        delay.map(|d| Instant::now() + d)
    }

    fn ended(&self, state: State, exit: Exit, next_restart_at: Option<u64>) {
        let mut record = lock(&self.record);
        let run = Run { started_at: record.status.started_at, exit: exit.clone() };
        if record.history.len() == HISTORY {
            record.history.pop_front();
        }
        record.history.push_back(run);
        // A stop that is part of a restart keeps saying `restarting`; any other end is final.
        if !(exit.requested && state == State::Stopped) {
            record.restarting = false;
        }
        let status = &mut record.status;
        status.state = state;
        status.last_exit = Some(exit);
        status.next_restart_at = next_restart_at;
        status.pid = None;
        status.pgid = None;
        status.started_at = None;
        status.health = None;
        record.since = None;
    }

    /// Records a probe's answer; returns when to probe next.
    fn probed(&self, outcome: Outcome) -> Duration {
        let interval =
            self.spec.probe.as_ref().ok().and_then(Option::as_ref).map_or(super::health::DEFAULT_INTERVAL, |p| p.1);
        let mut record = lock(&self.record);
        let young = record.since.is_some_and(|s| s.elapsed() < STARTUP_WINDOW);
        let starting = record.status.state == State::Starting;
        let state = match (outcome.ok, starting && young) {
            (true, _) => State::Healthy,
            (false, true) => State::Starting,
            (false, false) => State::Unhealthy,
        };
        if record.status.state != state && state != State::Starting {
            let text = format!("health: {} ({})", if outcome.ok { "healthy" } else { "unhealthy" }, outcome.detail);
            drop(record);
            self.log.note(text);
            record = lock(&self.record);
        }
        record.status.state = state;
        record.status.health = Some(HealthView { ok: outcome.ok, detail: outcome.detail, at: now_ms() });
        if state == State::Starting { STARTING_PROBE_EVERY.min(interval) } else { interval }
    }
}

/// Waits for the running process's exit; never resolves when nothing runs.
async fn exited(running: &mut Option<Running>) -> Option<std::process::ExitStatus> {
    match running {
        Some(process) => process.kept.child.wait().await.ok(),
        None => std::future::pending().await,
    }
}

async fn poll_probe(probing: &mut Option<ProbeRun>) -> Outcome {
    match probing {
        Some(run) => run.await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Lets the output readers deliver the last lines.
async fn drain(readers: Vec<JoinHandle<()>>) {
    for reader in readers {
        let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, reader).await;
    }
}

/// The keeper's exit code (it reports the program's; `128 + N` for a signal).
fn exit_code(status: Option<std::process::ExitStatus>) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.map_or(-1, |s| s.code().or_else(|| s.signal().map(|n| 128 + n)).unwrap_or(-1))
}
