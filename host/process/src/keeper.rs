//! The keeper: why nothing the host starts can outlive it.
//!
//! Every process the host starts runs under a keeper — the same `butler` binary, run as
//! `butler keep --host-pid PID -- PROGRAM ARGS…`. The keeper is the leader of the item's
//! process group and spawns the program in that group, sharing its stdio. It then:
//! - marks itself a **child subreaper**, so anything the program starts and abandons —
//!   even a grandchild that left the group with `setsid` — is re-parented to the keeper
//!   instead of to init, and stays findable as a descendant;
//! - watches the **host** through a pidfd: when the host is gone, however it died (a
//!   clean exit, Ctrl-C, `SIGKILL`), the keeper stops everything below it. A parent-death
//!   signal alone would not do: it reaches only direct children, and it fires when the
//!   spawning *thread* exits, which in a thread pool happens at any time;
//! - on `SIGTERM` (the host's stop, sent to the whole group) or when the program exits,
//!   sends `SIGTERM` to every remaining descendant, waits [`STOP_GRACE`], then `SIGKILL`s
//!   what is left, reaps, and exits with the program's status (`128 + N` when the program
//!   was killed by signal N, as shells report it).
//!
//! A descendant counts as running while any of its threads runs: one whose main thread
//! ended (`pthread_exit` from `main`) shows as a zombie in `/proc` yet runs on, and is
//! signalled like any other (a signal to its pid reaches the whole thread group). The
//! keeper exits only when `/proc` shows nothing running below it **and** `wait` finds no
//! child left — such a half-ended leader stays an unreapable child until its last thread
//! ends. Every step has a deadline: [`STOP_GRACE`] from `SIGTERM` to `SIGKILL`, then
//! [`KILL_WAIT`] of `SIGKILL` repeated to anything still found, after which the keeper
//! gives up (what is left is stuck in the kernel with `SIGKILL` pending) and exits.
//!
//! The host's side is [`spawn_kept`]; a stop is `SIGTERM` to the group with the host's own
//! backstop if the keeper does not finish in time: `SIGKILL` to every descendant of the
//! keeper, then to its group ([`tree::kill_tree`]), so a stuck keeper does not hand its
//! orphans to init.

use std::process::{ExitCode, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitOptions};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;

use super::launch::Launch;
use super::tree;

/// How long a stopping process has between `SIGTERM` and `SIGKILL`: enough for a server to
/// finish its in-flight requests and flush what it writes, short enough that a stop or
/// restart button answers within a few seconds.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// How much longer than the keeper's own grace the host waits before it kills the group
/// itself (a keeper that does not finish is stuck, or starved on a loaded machine).
const BACKSTOP_MARGIN: Duration = Duration::from_secs(3);

/// How long the keeper waits, after its `SIGKILL`, for everything below it to be reaped
/// before it gives up and exits (a process stuck in an uninterruptible sleep dies only when
/// it leaves it). Shorter than [`BACKSTOP_MARGIN`], so the keeper ends before the host's
/// backstop.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// While descendants are still dying, how often the keeper looks whether they are gone.
const SETTLE_POLL: Duration = Duration::from_millis(20);

/// How often the keeper checks its parent when the kernel has no pidfds (before Linux 5.3).
const PARENT_POLL: Duration = Duration::from_millis(250);

/// The name the keeper shows in `ps` (`argv[0]`).
const KEEPER_ARG0: &str = "butler";

/// A process started under a keeper.
#[derive(Debug)]
pub struct Kept {
    /// The keeper, leader of the item's process group.
    pub child: tokio::process::Child,
    /// The group id (the keeper's pid).
    pub group: u32,
}

/// What the started process's stdin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// `/dev/null` (hosted tools and services).
    Null,
    /// A pipe the host writes (stdio MCP providers).
    Piped,
}

/// Starts `launch` under a keeper in a new process group, stdout and stderr piped.
///
/// # Errors
/// When the keeper itself cannot be started; a program that cannot be started makes the
/// keeper print why and exit with 127 (not found) or 126.
pub fn spawn_kept(launch: &Launch, input: Input) -> std::io::Result<Kept> {
    let mut command = tokio::process::Command::from(command(&launch.argv));
    if !launch.inherit_env {
        command.env_clear();
    }
    command
        .current_dir(&launch.cwd)
        .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(match input {
            Input::Null => Stdio::null(),
            Input::Piped => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
    let child = command.spawn()?;
    let group = child.id().ok_or_else(|| std::io::Error::other("the keeper exited before it could be tracked"))?;
    Ok(Kept { child, group })
}

/// The program that runs `keep` when it is not this process's own executable, set once by
/// [`use_keeper`].
static KEEPER_PROGRAM: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Makes every child of this process run under `butler` at `program` rather than under
/// this process's own executable — for a process that is not `butler` itself but hosts
/// its parts (a test that builds the supervisor or the MCP hub in-process). Only the first
/// call counts; it returns whether it was that one.
pub fn use_keeper(program: std::path::PathBuf) -> bool {
    KEEPER_PROGRAM.set(program).is_ok()
}

/// `butler keep --host-pid <this process> -- ARGV…`, in a new process group: the command
/// that runs `argv` under a keeper. The keeper is this same binary (`/proc/self/exe`,
/// which still works if the file was replaced since it started), unless [`use_keeper`]
/// named another.
#[must_use]
pub fn command(argv: &[String]) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let program = KEEPER_PROGRAM.get().map_or_else(|| std::path::Path::new("/proc/self/exe"), |p| p.as_path());
    let mut command = std::process::Command::new(program);
    command
        .arg0(KEEPER_ARG0)
        .arg("keep")
        .arg("--host-pid")
        .arg(std::process::id().to_string())
        .arg("--")
        .args(argv)
        .process_group(0);
    command
}

impl Kept {
    /// Copies the process's stderr — and its stdout too, unless the caller reads that
    /// itself (`with_stdout` false) — line by line into `log` until it closes; returns the
    /// copying tasks.
    pub fn log_output(
        &mut self,
        log: &std::sync::Arc<super::logs::Log>,
        with_stdout: bool,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        use super::logs::Stream;
        let mut tasks = Vec::new();
        if with_stdout && let Some(stdout) = self.child.stdout.take() {
            tasks.push(tokio::spawn(std::sync::Arc::clone(log).capture(Stream::Stdout, stdout)));
        }
        if let Some(stderr) = self.child.stderr.take() {
            tasks.push(tokio::spawn(std::sync::Arc::clone(log).capture(Stream::Stderr, stderr)));
        }
        tasks
    }

    /// Stops the group: `SIGTERM` to every member (the keeper passes it on to descendants
    /// that left the group), then — if the keeper has not finished after [`STOP_GRACE`]
    /// and a margin — `SIGKILL` to the keeper's whole tree. Returns the keeper's exit
    /// status.
    pub async fn stop(&mut self) -> Option<std::process::ExitStatus> {
        tree::signal_group(self.group, Signal::TERM);
        let status = match tokio::time::timeout(STOP_GRACE + BACKSTOP_MARGIN, self.child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                tree::kill_tree(self.group);
                self.child.wait().await.ok()
            }
        };
        // The keeper is gone; whatever is left in its group has no one to stop it but us.
        // A SIGKILLed process takes a moment to die: answer once the whole group is gone.
        if tree::group_alive(self.group) {
            tree::signal_group(self.group, Signal::KILL);
        }
        let deadline = tokio::time::Instant::now() + BACKSTOP_MARGIN;
        while tree::group_alive(self.group) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(SETTLE_POLL).await;
        }
        status
    }
}

/// The last step of a clean shutdown: every process still below the host (a keeper whose
/// item was not stopped, whatever the reason) gets `SIGTERM` — a keeper passes it on and
/// stops its whole subtree — then, after [`STOP_GRACE`] and a margin, `SIGKILL` with its
/// group. Returns how many there were; normally none.
pub async fn stop_all_below_host() -> usize {
    let me = rustix::process::getpid();
    let found = tree::descendants(me);
    if found.is_empty() {
        return 0;
    }
    for pid in &found {
        let raw = pid.as_raw_nonzero().get();
        let cmdline = std::fs::read(format!("/proc/{raw}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{raw}/stat")).unwrap_or_default();
        tracing::warn!(
            pid = raw,
            stat = stat.trim(),
            "still running at exit: {}",
            String::from_utf8_lossy(&cmdline).replace('\0', " ")
        );
    }
    tree::signal_all(&found, Signal::TERM);
    let deadline = tokio::time::Instant::now() + STOP_GRACE + BACKSTOP_MARGIN;
    while !tree::descendants(me).is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(SETTLE_POLL).await;
    }
    for pid in tree::descendants(me) {
        if let Ok(raw) = u32::try_from(pid.as_raw_nonzero().get()) {
            tree::signal_group(raw, Signal::KILL);
        }
        let _ = rustix::process::kill_process(pid, Signal::KILL);
    }
    let deadline = tokio::time::Instant::now() + BACKSTOP_MARGIN;
    while !tree::descendants(me).is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(SETTLE_POLL).await;
    }
    found.len()
}

/// The keeper's main: runs `argv` and guards it until it and everything it started are
/// gone. `host` is the pid of the host that started the keeper.
#[must_use]
pub fn run(host: u32, argv: &[String]) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("butler keep: cannot start: {e}");
            return ExitCode::from(125);
        }
    };
    runtime.block_on(keep(host, argv))
}

async fn keep(host: u32, argv: &[String]) -> ExitCode {
    let me = rustix::process::getpid();
    if let Err(e) = rustix::process::set_child_subreaper(Some(me)) {
        eprintln!("butler keep: cannot become a child subreaper ({e}); abandoned grandchildren may escape");
    }
    // Watch the host before anything else, and make sure it is the host being watched:
    // if it died already, our parent is no longer its pid.
    let host_gone = HostWatch::open(host);
    if !parent_is(host) {
        return ExitCode::from(125);
    }
    let (Ok(mut term), Ok(mut int), Ok(mut hup), Ok(mut chld)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
        signal(SignalKind::child()),
    ) else {
        eprintln!("butler keep: cannot install signal handlers");
        return ExitCode::from(125);
    };
    let Some((program, args)) = argv.split_first() else {
        eprintln!("butler keep: nothing to run");
        return ExitCode::from(125);
    };
    let main = match std::process::Command::new(program).args(args).spawn() {
        Ok(child) => Pid::from_child(&child),
        Err(e) => {
            eprintln!("butler: cannot start `{program}`: {e}");
            return ExitCode::from(if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 });
        }
    };

    let mut exit: Option<u8> = None;
    let mut stopping = Stopping::No;
    let mut host_watch = host_gone;
    let mut host_alive = true;
    loop {
        let polling = exit.is_some() || matches!(stopping, Stopping::Killed { .. });
        tokio::select! {
            _ = term.recv() => stopping.begin(me),
            _ = int.recv() => stopping.begin(me),
            _ = hup.recv() => stopping.begin(me),
            () = host_watch.gone(), if host_alive => {
                host_alive = false;
                stopping.begin(me);
            }
            _ = chld.recv() => {}
            () = sleep_until(stopping.kill_at()) => {}
            () = tokio::time::sleep(SETTLE_POLL), if polling => {}
        }
        stopping.kill_when_due(me);
        let children_left = reap(main, &mut exit);
        if let Some(code) = exit {
            if !children_left && tree::descendants(me).is_empty() {
                return ExitCode::from(code);
            }
            // The program is gone but left processes behind: they go too.
            stopping.begin(me);
        }
        if stopping.given_up() {
            let left = tree::descendants(me).len();
            eprintln!(
                "butler keep: {left} process(es) below the keeper still not reaped {KILL_WAIT:?} after SIGKILL; \
                 leaving them to the system, SIGKILL pending"
            );
            return ExitCode::from(exit.unwrap_or(128 + 9));
        }
    }
}

/// How far the keeper is in stopping everything below it. Each step has a deadline, so
/// the keeper ends even if something below it never does.
#[derive(Debug, Clone, Copy)]
enum Stopping {
    /// Nobody asked for a stop and the program still runs.
    No,
    /// Every descendant got `SIGTERM`; what is left at `kill_at` gets `SIGKILL`.
    Terminated { kill_at: Instant },
    /// Every descendant got `SIGKILL` — and anything found later gets it too, on every
    /// turn — until all is reaped or `give_up_at` passes.
    Killed { give_up_at: Instant },
}

impl Stopping {
    /// `SIGTERM` to every descendant and the `SIGKILL` deadline, unless the stop began
    /// already.
    fn begin(&mut self, me: Pid) {
        if matches!(self, Self::No) {
            tree::signal_all(&tree::descendants(me), Signal::TERM);
            *self = Self::Terminated { kill_at: Instant::now() + STOP_GRACE };
        }
    }

    /// When the next `SIGKILL` is due while the stop is in its grace.
    fn kill_at(self) -> Option<Instant> {
        match self {
            Self::Terminated { kill_at } => Some(kill_at),
            Self::No | Self::Killed { .. } => None,
        }
    }

    /// `SIGKILL` to every descendant once the grace is over, and again on every turn after.
    fn kill_when_due(&mut self, me: Pid) {
        let now = Instant::now();
        match *self {
            Self::Terminated { kill_at } if now >= kill_at => {
                tree::signal_all(&tree::descendants(me), Signal::KILL);
                *self = Self::Killed { give_up_at: now + KILL_WAIT };
            }
            Self::Killed { .. } => tree::signal_all(&tree::descendants(me), Signal::KILL),
            Self::No | Self::Terminated { .. } => {}
        }
    }

    /// Whether everything got `SIGKILL` long enough ago that waiting longer is pointless:
    /// what is still there is stuck in the kernel and dies when it leaves it.
    fn given_up(self) -> bool {
        matches!(self, Self::Killed { give_up_at } if Instant::now() >= give_up_at)
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `__WALL`: wait for every kind of child, those that report their end with a signal other
/// than `SIGCHLD` ("clone" children) included.
const WAIT_ALL: u32 = 0x4000_0000;

/// Reaps every exited child — re-parented orphans included, whatever their process group
/// (a bare `waitpid(0, …)` would see only the keeper's own group) — noting the main
/// program's exit as a shell would report it. Returns whether children are left: a child
/// that has not exited yet, or a thread-group leader whose main thread ended while other
/// threads still run (not reapable until the last one ends).
fn reap(main: Pid, exit: &mut Option<u8>) -> bool {
    let options = WaitOptions::NOHANG | WaitOptions::from_bits_retain(WAIT_ALL);
    loop {
        match rustix::process::wait(options) {
            Ok(Some((pid, status))) => {
                if pid == main {
                    let code = status
                        .exit_status()
                        .or_else(|| status.terminating_signal().map(|signal| 128 + signal))
                        .unwrap_or(1);
                    *exit = Some(u8::try_from(code & 0xff).unwrap_or(1));
                }
            }
            Ok(None) => return true,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

fn parent_is(host: u32) -> bool {
    rustix::process::getppid().is_some_and(|p| u32::try_from(p.as_raw_nonzero().get()).ok() == Some(host))
}

/// Resolves when the host process is gone: its pidfd turning readable (watched by a small
/// thread blocked in `poll`), or — on kernels without pidfds — a changed parent pid.
enum HostWatch {
    Pidfd(tokio::sync::oneshot::Receiver<()>),
    Poll(u32),
}

impl HostWatch {
    fn open(host: u32) -> Self {
        let pidfd = i32::try_from(host)
            .ok()
            .and_then(Pid::from_raw)
            .and_then(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok());
        let Some(pidfd) = pidfd else { return Self::Poll(host) };
        let (gone, watch) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new().name("host-watch".into()).stack_size(64 * 1024).spawn(move || {
            let mut fds = [rustix::event::PollFd::new(&pidfd, rustix::event::PollFlags::IN)];
            while let Err(rustix::io::Errno::INTR) = rustix::event::poll(&mut fds, None) {}
            let _ = gone.send(());
        });
        if spawned.is_err() {
            return Self::Poll(host);
        }
        Self::Pidfd(watch)
    }

    async fn gone(&mut self) {
        match self {
            Self::Pidfd(watch) => {
                let _ = watch.await;
            }
            Self::Poll(host) => {
                while parent_is(*host) {
                    tokio::time::sleep(PARENT_POLL).await;
                }
            }
        }
    }
}
