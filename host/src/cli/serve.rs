//! `butler serve`: open (or create) the instance, start the catalog loader, serve HTTP
//! until SIGINT/SIGTERM.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use butler_host::catalog::spawn_loader;
use butler_host::http::{self, API_PREFIX, AppState, DEFAULT_PORT};
use butler_host::instance::Instance;

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

/// Runs the host.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let settings = Settings::load()?;
    settings::init_logging(&settings);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args, settings))?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(args: Args, settings: Settings) -> anyhow::Result<()> {
    let started = Instant::now();
    let workdir = settings::workdir(args.workdir, &settings)?;
    let (instance, created) = Instance::open_or_create(&workdir)?;
    if created {
        tracing::info!(workdir = %instance.root.display(), "created a new instance from the skeleton");
    }
    let addr = args
        .bind
        .or(settings.bind)
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let port = args.port.or(settings.port).unwrap_or(DEFAULT_PORT);
    let listener = http::bind(addr, port).await?;
    let local = listener
        .local_addr()
        .context("cannot read the listening address")?;
    let catalog = spawn_loader(instance.scan_config()).await?;
    let state = AppState {
        catalog,
        instance: Arc::new(instance),
        started,
    };

    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "butler {} listening on http://{local}{API_PREFIX}/ (instance {})",
        butler_host::VERSION,
        state.instance.root.display()
    )?;
    out.flush()?;
    drop(out);

    http::serve(listener, state, shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sig) => {
                sig.recv().await;
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}
