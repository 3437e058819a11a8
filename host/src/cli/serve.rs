//! `butler serve`: bind, open (or create) and lock the instance, assemble the host
//! ([`butler_host::host::Host`]), serve HTTP until SIGINT/SIGTERM, then stop every hosted
//! process.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use butler_host::host::{Host, Options};
use butler_host::http::{self, API_PREFIX, DEFAULT_PORT};
use butler_host::instance::{HostLock, Instance};

use super::settings::{self, Settings};

/// `butler serve` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Instance directory [default: ~/.dsh/butler]
    #[arg(long, env = butler_host::instance::WORKDIR_ENV, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// Port to listen on (0 picks a free one) [default: 19387]
    #[arg(long, env = "BUTLER_PORT")]
    port: Option<u16>,
    /// Loopback address to listen on [default: 127.0.0.1]
    #[arg(long, env = "BUTLER_BIND", value_name = "ADDR")]
    bind: Option<IpAddr>,
}

/// At shutdown, how long faculty calls in flight may take to finish before they are
/// abandoned (their guests interrupted).
const CALL_DRAIN: Duration = Duration::from_secs(5);
/// After the drain, how long open connections get to finish their answers (an open event
/// or log stream is closed then).
const CONNECTION_GRACE: Duration = Duration::from_secs(2);
/// After `serve` returned, how long the async runtime waits for blocking threads (a native
/// faculty call being killed) before the process exits anyway.
const RUNTIME_GRACE: Duration = Duration::from_secs(1);

/// Runs the host.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let settings = Settings::load()?;
    settings::init_logging(&settings);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let hub = HubRuntime::start()?;
    let outcome = runtime.block_on(serve(args, settings, hub.handle.clone()));
    hub.stop();
    // Dropping the runtime would wait for every blocking thread, a stuck one included.
    runtime.shutdown_timeout(RUNTIME_GRACE);
    outcome?;
    Ok(ExitCode::SUCCESS)
}

/// How often the hub's runtime wakes when it has nothing else to do. Each request on a
/// kept-alive connection arms a timer seconds ahead (its header timeout), and tokio's timer
/// wakes its own driver — an eventfd write, then one more `epoll_wait` — whenever a timer is
/// armed earlier than the wake the driver planned when it last slept, which without a tick
/// is the far end of a call's timeout: two syscalls more on every call. With a tick the
/// planned wake is never further than this, so no such timer ever moves it.
const HUB_TICK: Duration = Duration::from_secs(1);

/// The MCP hub's runtime: one thread that serves the connections of the hub's clients and
/// starts the providers, so reads and writes their pipes too. A call and its provider's
/// answer then stay on that thread — no wake-up of another thread, no hand-off between
/// them — while the host's other work keeps the multi-threaded runtime.
struct HubRuntime {
    handle: tokio::runtime::Handle,
    stop: tokio::sync::oneshot::Sender<()>,
    stopped: std::sync::mpsc::Receiver<()>,
}

impl HubRuntime {
    fn start() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("butler-hub")
            .build()
            .context("cannot start the hub's runtime")?;
        let handle = runtime.handle().clone();
        let (stop, stopping) = tokio::sync::oneshot::channel::<()>();
        let (done, stopped) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("butler-hub".into())
            .spawn(move || {
                runtime.block_on(async {
                    let mut tick = tokio::time::interval(HUB_TICK);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    tokio::pin!(stopping);
                    loop {
                        tokio::select! {
                            _ = &mut stopping => break,
                            _ = tick.tick() => {}
                        }
                    }
                });
                runtime.shutdown_timeout(RUNTIME_GRACE);
                let _ = done.send(());
            })
            .context("cannot start the hub's thread")?;
        Ok(Self { handle, stop, stopped })
    }

    /// Ends the runtime (its tasks are dropped, its blocking threads get [`RUNTIME_GRACE`]);
    /// waits for that a little longer than the grace, never more.
    fn stop(self) {
        let _ = self.stop.send(());
        if self.stopped.recv_timeout(RUNTIME_GRACE * 2).is_err() {
            tracing::warn!("the hub's thread did not stop in time");
        }
    }
}

/// Raises the soft limit on open files to the hard limit: every connection, provider pipe
/// and log file is one, and the connection cap is kept well below it.
fn raise_file_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        if let Err(e) = setrlimit(Resource::Nofile, limit) {
            tracing::debug!("cannot raise the open-file limit: {e}");
        }
    }
}

async fn serve(args: Args, settings: Settings, hub_io: tokio::runtime::Handle) -> anyhow::Result<()> {
    let started = Instant::now();
    raise_file_limit();
    // Refused before anything is created: a wrong address leaves no instance behind.
    let addr = args.bind.or(settings.bind).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    if !addr.is_loopback() {
        return Err(http::BindError::NotLoopback(addr).into());
    }
    let workdir = settings::workdir(args.workdir, &settings)?;
    // A port that is taken leaves no instance behind either.
    let port = args.port.or(settings.port).unwrap_or(DEFAULT_PORT);
    let listener = http::bind(addr, port).await?;
    let (instance, created) = Instance::open_or_create(&workdir)?;
    if created {
        tracing::info!(workdir = %instance.root.display(), "created a new instance from the skeleton");
    }
    // Before anything is started or written: one host per instance.
    let host_lock = HostLock::claim(&instance.root, &instance.state_dir())?;
    // The host's state is the owner's alone, also what an older host wrote.
    if let Some(line) = instance.tighten_state() {
        tracing::info!("{line}");
    }
    // What a killed host was writing when it died, never renamed into place.
    let state_dir = instance.state_dir();
    for dir in [
        state_dir.clone(),
        state_dir.join("mcp"),
        state_dir.join("cache/components"),
        state_dir.join(butler_host::collector::PENDING_DIR),
        state_dir.join(butler_host::agents::runs::RUNS_DIR),
    ] {
        let swept = butler_host::instance::sweep_temps(&dir);
        if swept > 0 {
            tracing::info!(dir = %dir.display(), "removed {swept} temp files a previous host left");
        }
    }
    let local = listener.local_addr().context("cannot read the listening address")?;
    let host_url = format!("http://{local}");
    let host = Host::new(instance, Options { listening: local, hub_io: Some(hub_io.clone()), started }).await?;
    let state = host.state().clone();
    let local_socket = http::bind_local(&state.instance.state_dir());
    let login = state.console_sessions.new_link().map(|t| http::routes::login::login_url(&host_url, &t));
    let host_file = host_lock.publish(&host_url)?;

    let shutdown = shutdown_signal()?;
    // One write: a reader that takes the first line and closes the pipe (`| head -1`)
    // cannot make a later line fail.
    let console = login.map_or_else(
        || format!("{host_url}{} (run `butler console` for a login link)", butler_host::http::console::PAGE_PATH),
        |url| format!("{url} (a one-time login link; `butler console` makes another)"),
    );
    let announcement = format!(
        "butler {} listening on {host_url}{API_PREFIX}/ (instance {})\n  console: {console}\n  MCP for your AI clients: {host_url}{API_PREFIX}/mcp\n",
        butler_host::VERSION,
        state.instance.root.display(),
    );
    let mut out = std::io::stdout().lock();
    out.write_all(announcement.as_bytes())?;
    out.flush()?;
    drop(out);

    // Stop the hosted processes before the server finishes: their log streams end with
    // them, so no open SSE connection holds up the graceful shutdown. Faculty calls get
    // the drain window, then are abandoned, so a stuck call cannot hold the exit.
    let host = Arc::new(host);
    let stopping = Arc::clone(&host);
    let shutdown = async move {
        shutdown.await;
        stopping.stop(CALL_DRAIN).await;
    };
    let served = http::serve(listener, local_socket, (state, Some(hub_io)), shutdown, CONNECTION_GRACE).await;
    served?;
    host.finish().await;
    // A safety net under the supervisor: nothing the host started outlives a clean exit.
    let stray = butler_process::keeper::stop_all_below_host().await;
    if stray > 0 {
        tracing::warn!("stopped {stray} process(es) still running below the host at exit");
    }
    drop(host_file);
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed here, before the host
/// announces itself, so a signal sent right after the URL is printed still shuts the host
/// down gracefully instead of killing it.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down");
    })
}
