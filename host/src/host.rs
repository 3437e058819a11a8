//! The composition root: the one place the host is assembled from its instance. [`Host::new`]
//! builds every part — the faculty runtime and its pipeline router, the catalog loader,
//! supervision, the MCP hub, the app backends, the agents and their automations and
//! delegations, the session collector, the console's sessions — each given what it needs
//! when it is built, never afterwards; `butler serve`, the in-process tests and the benches
//! all build the host here. What is done about the process (the listener, the instance
//! lock, signals, the announcement) stays with `butler serve`.
//!
//! Two parts need each other. The faculty runtime dispatches `host.call` to the pipeline
//! router, which resolves actions through the runtime: the router is built inside the
//! runtime's constructor from a weak reference to it ([`butler_faculty::Wiring`]). The
//! runtime asks for a catalog rescan after each compile, and the catalog loader inspects
//! components with the runtime: the rescan channel is made first ([`rescan_channel`]) and
//! handed to both.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use butler_faculty::{Dispatch, FacultyRuntime, Setup, Wiring};
use butler_mcp::Hub;

use crate::agents::Agents;
use crate::agents::automations::{AutomationError, Automations};
use crate::agents::delegations::Delegations;
use crate::agents::runs::Runs;
use crate::catalog::loader::LoaderError;
use crate::catalog::{Rescan, rescan_channel, spawn_loader_with};
use crate::chatos_backends::Backends;
use crate::collector::Collector;
use crate::http::{self, API_PREFIX, AppState, GateConfig, Services};
use crate::instance::live::{Applied, LiveConfig};
use crate::instance::{Instance, owner};
use crate::packages::UiApps;
use crate::pipeline::{PipelineRouter, observations};
use crate::supervise::Supervisor;

/// The host could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The owner token could not be read or made.
    #[error("cannot create the owner token: {0}")]
    OwnerToken(#[source] std::io::Error),
    /// The faculty runtime's engine could not be built.
    #[error("cannot start the faculty runtime: {0:#}")]
    Faculties(wasmtime::Error),
    /// The catalog loader did not start.
    #[error(transparent)]
    Catalog(#[from] LoaderError),
    /// An MCP profile of the root config is declared wrongly.
    #[error("the root config: {0}")]
    Profiles(#[from] butler_mcp::view::ProfileError),
    /// The root config's automations do not read.
    #[error("the root config's automations: {0}")]
    Automations(#[from] AutomationError),
}

/// How the host is run, beyond its instance.
pub struct Options {
    /// Where the host listens: its origin (`http://ADDR:PORT`) and the gate's port. The
    /// hub refuses to dial it as an upstream.
    pub listening: SocketAddr,
    /// The runtime the hub starts providers on (`butler serve`'s hub thread); `None`: the
    /// current one.
    pub hub_io: Option<tokio::runtime::Handle>,
    /// When the host started (what `/health` counts uptime from).
    pub started: Instant,
}

/// The assembled host: every part, reachable by the HTTP handlers through [`Self::state`].
pub struct Host {
    state: AppState,
}

impl Host {
    /// Assembles the host of `instance` (opened, and locked by the caller when it serves
    /// it): starts the catalog loader and every reconciler following it, hands over what a
    /// previous host left (collector turns, missed automation runs).
    ///
    /// # Errors
    /// [`HostError`] when a part cannot be built.
    pub async fn new(instance: Instance, options: Options) -> Result<Self, HostError> {
        let Options { listening, hub_io, started } = options;
        let host_url = format!("http://{listening}");
        let state_dir = instance.state_dir();
        let owner_token = owner::ensure(&state_dir).map_err(HostError::OwnerToken)?;
        // Before the first scan, so that it finds them.
        install_wanted_builtins(&instance, &instance.config);

        let (rescan, rescans) = rescan_channel();
        let (faculties, pipeline) =
            faculties(instance.faculty_setup(&host_url), &instance.config.pipeline.routes, Some(rescan.clone()), false)
                .map_err(HostError::Faculties)?;
        let mut scan = instance.scan_config();
        scan.inspector = Some(faculties.inspector());
        scan.own_listeners = vec![listening];
        let catalog = spawn_loader_with(scan, (rescan, rescans)).await?;
        catalog.follow(Arc::clone(&faculties)).await;

        let supervisor = Supervisor::new(instance.host_env(&host_url), &state_dir);
        observations::spawn(Arc::clone(&faculties), &supervisor, &catalog).await;
        catalog.follow(Arc::clone(&supervisor)).await;

        // Before the hub: the faculties' `session-turns` tools hand their calls to it.
        let collector = Collector::new(&state_dir, instance.config.collector.clone(), Arc::clone(&faculties));
        // What a previous host left pending is handed over first.
        collector.spawn_delivery();
        let turns = Arc::clone(&collector) as Arc<dyn crate::hub_tools::TurnSink>;
        let host_tools = Arc::new(crate::hub_tools::FacultyTools::new(Arc::clone(&faculties), Some(turns)));
        let profiles = instance.config.mcp.checked_profiles()?;
        let config = LiveConfig::new(
            &instance.root.join(crate::catalog::scan::MANIFEST_FILE),
            Applied { config: instance.config.clone(), profiles },
        );
        let oauth = Arc::new(crate::upstream::oauth::broker::Broker::new(&state_dir));
        let settings = butler_mcp::Settings {
            io: hub_io,
            dialer: Some(Arc::new(
                crate::upstream::HttpDialer::new().refusing(listening).with_logins(Arc::clone(&oauth)),
            )),
            ..hub_settings(&instance.config.mcp)
        };
        let mcp = Hub::new(instance.host_env(&host_url), host_tools, &state_dir, settings);
        mcp.relay_faculty_changes();
        mcp.report_held();
        mcp.stop_idle_providers();
        let imports = Arc::new(butler_catalog::suzu::imports::Imports::open(
            state_dir.join(butler_catalog::suzu::imports::IMPORTS_DIR),
        ));
        // Before the first snapshot is followed: the enabled packages' servers join with it.
        mcp.set_packages(crate::packages::CAPABILITIES, crate::packages::enabled(&imports));
        catalog.follow(Arc::new(UiApps::new(Arc::clone(&mcp), &state_dir, &instance.root))).await;
        let backends = Arc::new(Backends::new(instance.host_env(&host_url), &state_dir, &instance.root));
        catalog.follow(Arc::clone(&backends)).await;

        let instance = Arc::new(instance);
        let notifier = crate::notify::spawn(
            Arc::clone(&config),
            instance.host_env(&host_url),
            Arc::clone(&instance),
            Arc::clone(&faculties),
            Arc::clone(&mcp),
        );
        let agents = Arc::new(Agents::new(
            instance.config.agent.command.clone(),
            instance.host_env(&host_url),
            (instance.root.clone(), state_dir.clone()),
            format!("{host_url}{API_PREFIX}"),
            instance.config.inject.clone(),
            Arc::clone(&mcp),
        ));
        let automations = Automations::open(
            &state_dir,
            instance.config.automations.clone(),
            instance.config.agent.timeout_sec.map(Duration::from_secs),
            Arc::clone(&agents),
        )?;
        // A run missed while the host was down runs now, once.
        automations.spawn();
        let runs = Arc::new(Runs::open(&state_dir));
        let told = notifier.clone();
        oauth.notify_with(Box::new(move |message| told.tell(message)));
        let delegations = Arc::new(Delegations::new(Arc::clone(&agents), runs, notifier));
        let state = AppState::new(Services {
            catalog,
            instance: Arc::clone(&instance),
            faculties,
            pipeline,
            supervisor,
            mcp,
            oauth,
            config: Arc::clone(&config),
            tokens: Arc::new(crate::instance::tokens::Tokens::new(&state_dir)),
            owner_token: owner_token.into(),
            console_sessions: Arc::new(http::console_session::ConsoleSessions::load(&state_dir)),
            imports,
            backends,
            agents,
            automations,
            collector,
            delegations,
            origin: host_url.into(),
            gate: GateConfig { port: listening.port() },
            started,
        });
        config.watch();
        follow_config(&config, &state);
        Ok(Self { state })
    }

    /// What the handlers reach: every part of the host.
    #[must_use]
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The whole HTTP application (see [`http::router`]), as `butler serve` serves it.
    pub fn router(&self) -> Router {
        http::router(self.state.clone(), self.state.gate)
    }

    /// Stops what the host runs, in parallel: hosted processes, MCP providers, app
    /// backends, agent sessions; faculty calls in flight get `drain` to finish, then are
    /// abandoned.
    pub async fn stop(&self, drain: Duration) {
        let s = &self.state;
        tokio::join!(
            s.supervisor.shutdown(),
            s.mcp.shutdown(),
            s.backends.shutdown(),
            s.agents.shutdown(),
            s.faculties.drain(drain)
        );
    }

    /// After the server finished: stops what may have started since [`Self::stop`] (a
    /// hosted process, a provider), and abandons any faculty call still running.
    pub async fn finish(&self) {
        self.state.supervisor.shutdown().await;
        self.state.mcp.shutdown().await;
        self.state.faculties.drain(Duration::ZERO).await;
    }
}

/// The faculty runtime for `setup` and the pipeline router behind its `host.call`
/// (`routes`: the root config's `pipeline.routes`), wired to each other; after each
/// background compile the runtime asks `rescan` for a rescan. `on_caller_thread`:
/// components compile on the caller's thread (one-shot checks and benches, where waiting
/// is the point).
///
/// # Errors
/// When the runtime's engine cannot be built.
pub fn faculties(
    setup: Setup,
    routes: &std::collections::BTreeMap<String, String>,
    rescan: Option<Rescan>,
    on_caller_thread: bool,
) -> wasmtime::Result<(Arc<FacultyRuntime>, Arc<PipelineRouter>)> {
    let (made, router) = std::sync::mpsc::sync_channel(1);
    let routes = routes.clone();
    let dispatch = move |runtime| {
        let pipeline = Arc::new(PipelineRouter::new(&routes, runtime));
        let _ = made.send(Arc::clone(&pipeline));
        pipeline as Arc<dyn Dispatch>
    };
    let wiring = Wiring {
        on_compiled: rescan.map(|rescan| Box::new(move || rescan.request()) as _),
        dispatch: Some(Box::new(dispatch)),
        on_caller_thread,
    };
    let runtime = FacultyRuntime::wired(setup, wiring)?;
    // The constructor called `dispatch`, which sent the router before returning.
    let pipeline = router.try_recv().map_err(|_| wasmtime::Error::msg("the faculty runtime built no router"))?;
    Ok((runtime, pipeline))
}

/// The hub's settings in the root config's `mcp` (what the host gives it besides: none).
fn hub_settings(mcp: &crate::instance::config::McpConfig) -> butler_mcp::Settings {
    butler_mcp::Settings {
        provider_idle: Duration::from_secs(mcp.idle_sec),
        session_idle: Duration::from_secs(mcp.session_idle_sec),
        quarantine: mcp.quarantine,
        legacy_providers: mcp.legacy_providers.clone(),
        log_payloads: mcp.log_payloads,
        exposure: mcp.exposure,
        code_mode: mcp.code_mode,
        allow_env: butler_mcp::host_env::AllowedEnv::new(mcp.allow_env.clone()),
        ..butler_mcp::Settings::default()
    }
}

/// Applies each root config that comes into force to the parts that take it live: the hub
/// (and its providers settled again when their pins changed), the agent, what its sessions
/// are told, the automations (time zone, schedules, how long a run may take), the collector,
/// the pipeline's routes, the faculties' settings
/// and grants (and the keys granted to them). The HTTP handlers read the profiles and `mcp.auth`,
/// the notifier its command, from the config in force each time.
fn follow_config(config: &LiveConfig, state: &AppState) {
    let mut changes = config.subscribe();
    let (hub, catalog) = (Arc::clone(&state.mcp), state.catalog.clone());
    let (agents, collector, automations) =
        (Arc::clone(&state.agents), Arc::clone(&state.collector), Arc::clone(&state.automations));
    let (faculties, pipeline) = (Arc::clone(&state.faculties), Arc::clone(&state.pipeline));
    let instance = Arc::clone(&state.instance);
    let started = config.current();
    tokio::spawn(async move {
        // What the faculties were last given: their sandboxes are made anew only when it changes.
        let mut sandboxed = faculty_inputs(&started.config);
        while changes.changed().await.is_ok() {
            let applied = changes.borrow_and_update().clone();
            let config = &applied.config;
            // The catalog's watcher registers what it installs.
            install_wanted_builtins(&instance, config);
            if hub.retune(&hub_settings(&config.mcp)) {
                hub.reconcile(&catalog.current()).await;
            }
            agents.retune(config.agent.command.clone(), config.inject.clone());
            automations.retune(config.automations.clone(), config.agent.timeout_sec.map(Duration::from_secs));
            collector.retune(config.collector.clone());
            pipeline.retune(config.pipeline.routes.clone());
            let given = faculty_inputs(config);
            if given != sandboxed {
                sandboxed = given;
                let (runtime, settings, raw) = (Arc::clone(&faculties), config.faculties.clone(), config.raw.clone());
                if tokio::task::spawn_blocking(move || runtime.retune(settings, raw)).await.is_err() {
                    tracing::error!("root config: retuning the faculties panicked");
                }
            }
        }
    });
}

/// Installs the on-demand built-ins `config` turns on that the instance lacks: `code` when
/// code mode is on for the main endpoint or a profile.
fn install_wanted_builtins(instance: &Instance, config: &crate::instance::RootConfig) {
    let code_mode = config.mcp.code_mode || config.mcp.profiles.values().any(|p| p.code_mode);
    if !code_mode {
        return;
    }
    match crate::instance::builtins::install_on_demand(instance, "code") {
        Ok(true) => tracing::info!("code mode is on: installed the built-in faculty `code`"),
        Ok(false) => {}
        Err(e) => tracing::warn!("code mode is on, but the built-in faculty `code` could not be installed: {e}"),
    }
}

/// What a faculty's sandbox is made of in `config`: the faculties' settings, and the value
/// of every root config key granted to one.
fn faculty_inputs(
    config: &crate::instance::RootConfig,
) -> (std::collections::BTreeMap<String, crate::instance::config::FacultySettings>, Vec<Option<serde_json::Value>>) {
    let granted = config.faculties.values().flat_map(|s| &s.config).map(|key| config.raw.get(key).cloned()).collect();
    (config.faculties.clone(), granted)
}
