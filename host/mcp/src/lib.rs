//! The MCP hub: one MCP server for every stdio provider the catalog declares, plus the
//! tools the host runs itself (the faculties', reaching it through a [`ToolSource`]).
//!
//! - [`provider`]: one stdio provider — lazy start, id mapping, timeouts, crash restart;
//! - `tool_calls`: the provider tool calls in flight, so a client's cancellation reaches
//!   its provider, and those that ended cancelled;
//! - [`tool_source`]: the host's own tools (the binary's faculty tools) as a [`ToolSource`];
//! - [`framing`]: the JSON-RPC framing both ways, as pure functions;
//! - [`methods`]: the MCP method names, as constants in one place;
//! - [`packages`]: what the hub offers beside the catalog's providers (Suzu capability
//!   packages, ChatOS apps), by source, and the profiles they bring;
//! - [`quarantine`]: tool, prompt, resource and skill definitions held until the owner
//!   approves them, pinned by hash; [`review`]: what is held, and the owner's approvals;
//! - [`templates`]: which resource template a URI is one of;
//! - [`capability_sets`]: what each provider lists to clients of fewer capabilities than
//!   the hub declares to it;
//! - [`skills`]: the Skills extension — the providers' and packages' skills, their files
//!   read and checked against their entries;
//! - `registry`: the providers the hub has now, the namespaces refused, and the table
//!   public tool names route by, rebuilt when the routing epoch moves;
//! - [`sessions`]: the 2025-11-25 clients' sessions, bounded and ended when idle;
//! - [`subscriptions`]: resource subscriptions of sessions and `subscriptions/listen`
//!   streams, and when a provider is told to stop sending updates;
//! - [`view`]: what each endpoint offers — the main one, the restricted one, a profile;
//! - [`exposure`]: how an endpoint lists its tools — all of them, or only the search tools
//!   — and those tools, ranked by [`tool_search`];
//! - [`instructions`]: what an endpoint tells its clients of itself, its providers' words
//!   included;
//! - [`upcall`]: what a provider sends back during a call (progress, its requests for the
//!   client) on its way to the client that made the call; [`upcalls`]: those requests while
//!   they wait for a client's answer across its requests (asked and parked);
//! - public names and conflict settlement come from [`butler_catalog::names`].
//!
//! The hub knows no transport: it answers typed calls (list, call, read, cancel), keeps
//! the [`Session`]s and tells who listens when its lists change. The JSON-RPC methods and
//! Streamable HTTP live in the host above it, so the hub runs the same behind HTTP, the
//! local socket and in-process tests.
//!
//! The registry is derived, never edited: [`Hub::reconcile`] settles it on the providers of
//! each catalog snapshot and the packages. The hub forwards providers' JSON as it is, only renaming what it namespaces
//! and mapping ids and progress tokens.

pub mod activity;
pub mod answer;
pub mod capability_sets;
pub mod code_mode;
pub mod exposure;
pub mod framing;
pub mod host_env;
pub mod instructions;
pub mod methods;
pub mod packages;
pub mod provider;
pub mod quarantine;
mod registry;
pub mod review;
pub mod sessions;
pub mod skills;
pub mod subscriptions;
pub mod templates;
mod tool_calls;
pub mod tool_search;
pub mod tool_source;
pub mod upcall;
pub mod upcalls;
pub mod upstream;
pub mod view;

mod changes;
pub use answer::Answer;
pub use changes::Changed;
pub use packages::{Package, SKILL_PROMPT, Server};
pub use review::HeldItem;

use butler_catalog::names;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use butler_catalog::lock;
use butler_catalog::{Catalog, Follow, Kind};
use butler_process::HostEnv;
use capability_sets::{CapabilitySet, Listed, Narrowing};
use provider::{CallFailure, Provider, ProviderSpec, Rejected};
pub use tool_source::{Scope, ToolSource};
pub use upcall::Asker;
pub use view::{Exposure, Profile, ProfileSpec, Prompts, View};

pub use sessions::{MAX_SESSIONS, Session, SessionStream};

/// The approved definitions' file, in the hub's cache folder.
const PINS_FILE: &str = "pins.json";

/// `duration` in whole milliseconds.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// How the hub is set up (the root config's `mcp`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// A provider that ran this long without a call is stopped (`mcp.idleSec`).
    pub provider_idle: Duration,
    /// A session that sent nothing for this long, and has no notification stream open,
    /// ends; its client re-initializes on 404 (`mcp.sessionIdleSec`).
    pub session_idle: Duration,
    /// Whether providers' tools, prompts, resources and skills are held until the owner
    /// approves them (`mcp.quarantine`).
    pub quarantine: bool,
    /// Providers spoken to with the 2025 revisions' `initialize` at once, never asked
    /// `server/discover` (`mcp.legacyProviders`), by id — of any kind: an extension's, a
    /// package's (`suzu:<id>`, `uiapp:<pluginId>.<appId>`): for one that would speak
    /// 2026-07-28 but asks its clients for input the 2025 way, which that era does not
    /// allow.
    pub legacy_providers: std::collections::BTreeSet<String>,
    /// Whether the activity log keeps each request's params and answer, credentials
    /// redacted (`mcp.logPayloads`).
    pub log_payloads: bool,
    /// The runtime the providers are started on, whose thread then reads and writes their
    /// pipes: the one that serves the hub's connections, so that a call and its answer stay
    /// on one thread (`None`: the runtime `Hub::new` runs on).
    pub io: Option<tokio::runtime::Handle>,
    /// What connects the hub to remote servers (`None`: a remote server's provider cannot
    /// start, and says so).
    pub dialer: Option<Arc<dyn upstream::Dialer>>,
    /// How the main endpoint lists its tools (`mcp.exposure`).
    pub exposure: Exposure,
    /// Whether the main endpoint offers `butler__run_code` (`mcp.codeMode`).
    pub code_mode: bool,
    /// The host variables each provider's `headers` and `env` may read, by provider id
    /// (`mcp.allowEnv`).
    pub allow_env: host_env::AllowedEnv,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            provider_idle: Duration::from_secs(600),
            session_idle: Duration::from_secs(1800),
            quarantine: false,
            legacy_providers: std::collections::BTreeSet::new(),
            log_payloads: false,
            io: None,
            dialer: None,
            exposure: Exposure::All,
            code_mode: false,
            allow_env: host_env::AllowedEnv::default(),
        }
    }
}

pub use subscriptions::{Listening, MAX_SUBSCRIPTIONS};

pub use upcalls::PARKED_FOR;

/// The longest a list waits for providers that are starting to list for the first time
/// and for learning what they list to the client's capability set, both together: one
/// slow or hung provider delays a client's `tools/list` by this much at most, and once per
/// start of it: later lists answer without it at once until it has listed or starts again.
pub const LIST_WAIT: Duration = Duration::from_secs(2);

/// One list's wait for its providers: every wait it does ends by the same deadline,
/// [`LIST_WAIT`] after it began, so a list that waits for starts and then for learning
/// waits no longer than one that waits for either.
struct ListWait {
    deadline: tokio::time::Instant,
}

impl ListWait {
    /// A wait whose deadline is [`LIST_WAIT`] from now.
    fn start() -> Self {
        Self { deadline: tokio::time::Instant::now() + LIST_WAIT }
    }

    /// Waits for `done` until the deadline: whether it finished in time.
    async fn until_done(&self, done: impl std::future::Future) -> bool {
        tokio::time::timeout_at(self.deadline, done).await.is_ok()
    }
}

/// The compiled context, offered as a resource and a prompt.
const CONTEXT_URI: &str = "butler://context";
const CONTEXT_NAME: &str = "butler__context";

/// A JSON-RPC error to answer with.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// JSON-RPC code.
    pub code: i64,
    /// Message.
    pub message: String,
    /// Extra data (a provider's own error object passes through whole).
    pub data: Option<Value>,
}

impl RpcError {
    /// `-32602 Invalid params`.
    #[must_use]
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self { code: -32602, message: message.into(), data: None }
    }

    /// As a JSON-RPC error object.
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

/// What [`Hub::status`] reports.
#[derive(Debug, Clone)]
pub struct HubStatus {
    /// Every provider, in registry order.
    pub providers: Vec<ProviderStatus>,
    /// The providers left out because their namespace was taken.
    pub conflicts: Vec<names::Conflict>,
    /// The resource URIs more than one provider offers on the main endpoint.
    pub duplicate_uris: Vec<Value>,
    /// The names of the host's own tools on `/mcp`.
    pub host_tools: Vec<Value>,
    /// The names of the host's own tools on `/mcp/butler`.
    pub restricted_tools: Vec<Value>,
    /// How many sessions are open.
    pub sessions: usize,
}

/// One provider in [`HubStatus`].
#[derive(Debug, Clone)]
pub struct ProviderStatus {
    /// Its status (`lastError` says so when it cannot start at all).
    pub status: provider::Status,
    /// Its items held for the owner's review, by what clients would know them by.
    pub held: Vec<String>,
}

/// A log message a provider sent outside any call (`notifications/message`), for the
/// clients that take those ([`Hub::provider_logs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    /// The provider.
    pub provider: String,
    /// Its params, the `logger` prefixed with the provider's namespace.
    pub params: Value,
}

/// The most providers' log messages sent outside a call that wait for a slow listener;
/// beyond, it misses the oldest.
const LOGGED_QUEUE: usize = 256;

/// A resource a provider offers changed (and, in subscriptions, which provider's resource
/// a URI clients know is).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Updated {
    /// The provider.
    pub provider: String,
    /// The URI as the provider gives it.
    pub uri: String,
}

/// The maps looked up on every call (routes, sessions, calls in flight, a provider's
/// pending answers): hashed with foldhash, seeded at random, instead of SipHash — their
/// keys are the hub's own or bounded in number, and the hashing was a measurable share of
/// a call's work.
pub(crate) type FastMap<K, V> = foldhash::HashMap<K, V>;

/// A provider's resource as clients see it.
struct PublicResource {
    /// The URI clients know it by.
    uri: String,
    /// Its URI as the provider gives it.
    original: String,
    exposed: Exposed,
}

/// A public name and what it routes to.
struct Exposed {
    public: String,
    provider: Arc<Provider>,
    item: Value,
}

/// The hub.
pub struct Hub {
    /// The providers, the namespaces refused, the routing epoch and table.
    registry: registry::Registry,
    tools: Arc<dyn ToolSource>,
    host: HostEnv,
    cache_dir: PathBuf,
    logs_dir: PathBuf,
    changed: broadcast::Sender<Changed>,
    updated: broadcast::Sender<Updated>,
    /// Providers' log messages sent outside any call.
    logged: broadcast::Sender<Logged>,
    sessions: Arc<sessions::Sessions>,
    /// Provider tool calls in flight, and those that ended cancelled.
    tool_calls: tool_calls::ToolCalls,
    /// Providers' requests waiting for clients' answers: asked of 2025-11-25 clients, and
    /// calls parked for a 2026-07-28 client's next round.
    upcalls: upcalls::Upcalls,
    /// How many `subscriptions/listen` streams want each provider's resource.
    listening: subscriptions::Listeners,
    /// Reconciles one at a time; `true` once shut down (a late snapshot starts nothing).
    reconciling: tokio::sync::Mutex<bool>,
    /// A provider that ran this long without a call is stopped (`mcp.idleSec`), in ms.
    idle_ms: AtomicU64,
    /// Every request answered.
    activity: activity::ActivityLog,
    /// The approved definitions, when `mcp.quarantine` is on.
    pins: Mutex<Option<Arc<quarantine::Pins>>>,
    /// Providers never asked `server/discover` ([`Settings::legacy_providers`]).
    legacy_providers: Mutex<std::collections::BTreeSet<String>>,
    /// `mcp.allowEnv`, as the providers were last derived with it.
    allow_env: Mutex<host_env::AllowedEnv>,
    /// The variables each provider names that `mcp.allowEnv` does not allow, as last
    /// warned of (so a rescan that changed nothing says nothing).
    env_warned: Mutex<BTreeMap<String, std::collections::BTreeSet<String>>>,
    /// Those of them that named no provider when last reconciled (`None`: not yet).
    unmatched_pins: Mutex<Option<std::collections::BTreeSet<String>>>,
    /// [`Settings::log_payloads`].
    log_payloads: AtomicBool,
    /// Where providers are started ([`Settings::io`], [`Settings::dialer`]).
    io: provider::Io,
    /// The packages ([`Hub::set_packages`]) and the profiles they bring
    /// ([`Hub::set_package_profiles`]).
    packages: packages::Packages,
    /// Whether the main endpoint lists only the search tools ([`Settings::exposure`]).
    search_main: AtomicBool,
    /// Whether the main endpoint offers `butler__run_code` ([`Settings::code_mode`]).
    code_main: AtomicBool,
    /// The hub itself, lent to the host tools that call its tools ([`code_mode::InnerCalls`]).
    this: std::sync::Weak<Hub>,
    /// The endpoints' tools, indexed for `butler__find_tools`.
    indexes: exposure::Indexes,
}

/// An approval that could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    /// No provider has this id.
    #[error("no MCP provider `{0}` (see `butler mcp status`)")]
    Unknown(String),
    /// Quarantine is off: nothing is held.
    #[error("the quarantine is off (`mcp.quarantine` in the root config): nothing is held")]
    Off,
    /// The item is not held (approved already, or no such item).
    #[error("`{0}` is not held: it is approved already, or the provider offers no such item")]
    NotHeld(String),
    /// The item's definition changed since the owner looked at it.
    #[error("`{0}` changed since it was shown (its sha256 differs): look at it again before approving")]
    Stale(String),
    /// The pins could not be written.
    #[error("the approval could not be kept: {0}")]
    Failed(String),
}

/// What the owner can ask of one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderAction {
    /// Start it now (also after a stop, a crash or an idle stop).
    Start,
    /// Stop it and keep it stopped: calls are refused until it is started.
    Stop,
    /// Stop it and start it again.
    Restart,
}

/// A provider action that could not be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// No provider has this id.
    #[error("no MCP provider `{0}` (see `butler mcp status`)")]
    Unknown(String),
    /// It could not be started.
    #[error("the provider `{id}` could not be started: {why}")]
    Failed {
        /// The provider.
        id: String,
        /// Why.
        why: String,
    },
}

impl Hub {
    /// A hub with no providers yet; `state_dir` holds the list cache and provider logs, and
    /// a provider that ran `idle` without a call is stopped (see [`Self::stop_idle_providers`]).
    #[must_use]
    pub fn new(host: HostEnv, tools: Arc<dyn ToolSource>, state_dir: &Path, settings: Settings) -> Arc<Self> {
        let (changed, _) = broadcast::channel(16);
        let (updated, _) = broadcast::channel(64);
        let (logged, _) = broadcast::channel(LOGGED_QUEUE);
        Arc::new_cyclic(|this| Self {
            this: this.clone(),
            code_main: AtomicBool::new(settings.code_mode),
            registry: registry::Registry::default(),
            tools,
            host,
            cache_dir: state_dir.join("mcp"),
            logs_dir: state_dir.join("logs"),
            changed,
            updated,
            logged,
            sessions: sessions::Sessions::new(settings.session_idle),
            tool_calls: tool_calls::ToolCalls::default(),
            upcalls: upcalls::Upcalls::default(),
            listening: subscriptions::Listeners::default(),
            reconciling: tokio::sync::Mutex::new(false),
            idle_ms: AtomicU64::new(millis(settings.provider_idle)),
            activity: activity::ActivityLog::open(state_dir.join("logs").join("mcp-activity.jsonl")),
            pins: Mutex::new(
                settings.quarantine.then(|| Arc::new(quarantine::Pins::open(state_dir.join("mcp").join(PINS_FILE)))),
            ),
            legacy_providers: Mutex::new(settings.legacy_providers),
            allow_env: Mutex::new(settings.allow_env),
            env_warned: Mutex::new(BTreeMap::new()),
            unmatched_pins: Mutex::new(None),
            log_payloads: AtomicBool::new(settings.log_payloads),
            io: provider::Io {
                runtime: settings.io.unwrap_or_else(tokio::runtime::Handle::current),
                dialer: settings.dialer,
            },
            packages: packages::Packages::default(),
            search_main: AtomicBool::new(settings.exposure == Exposure::Search),
            indexes: exposure::Indexes::default(),
        })
    }

    /// The packages that come from `source` (the enabled capability packages, the apps of
    /// ChatOS plugins…). Their skills and prompts are offered at once (clients are told the
    /// lists changed); their MCP servers from the next reconcile on — settled after the
    /// catalog's providers, under the same names, quarantine and log. Whether they differ
    /// from those it had.
    pub fn set_packages(&self, source: &'static str, packages: Vec<Package>) -> bool {
        let changed = self.packages.set(source, packages);
        if changed {
            self.registry.bump();
            let _ = self.changed.send(Changed::ALL);
        }
        changed
    }

    /// Replaces the profiles the packages bring (a ChatOS app's own, say): each is served
    /// at `/mcp/p/<name>` unless the root config declares a profile of that name.
    pub fn set_package_profiles(&self, profiles: BTreeMap<String, Arc<Profile>>) {
        if self.packages.set_profiles(profiles) {
            self.registry.bump();
            let _ = self.changed.send(Changed::ALL);
        }
    }

    /// The profile a package brings under `name`.
    #[must_use]
    pub fn package_profile(&self, name: &str) -> Option<Arc<Profile>> {
        self.packages.profile(name)
    }

    /// The packages' own prompts `view` offers.
    fn package_prompts(&self, view: &View) -> Vec<butler_catalog::chatos::AppPrompt> {
        self.packages
            .all()
            .iter()
            .flat_map(|p| p.prompts.iter().filter(|prompt| view.offers_prompt(&p.id, &prompt.name)).cloned())
            .collect()
    }

    /// The enabled packages' skills `view` offers.
    fn skills(&self, view: &View) -> Vec<(String, butler_catalog::suzu::imports::Skill)> {
        if matches!(view, View::Restricted) {
            return Vec::new();
        }
        self.packages
            .all()
            .iter()
            .filter(|p| view.offers_provider(&p.id))
            .filter_map(|p| Some((p.namespace.clone(), p.skill.clone()?)))
            .collect()
    }

    /// A skill's prompt, as `prompts/list` shows it on `view`.
    fn skill_prompt(view: &View, namespace: &str, skill: &butler_catalog::suzu::imports::Skill) -> Value {
        let mut item = json!({"name": namespace, "title": skill.title});
        if let Some(description) = &skill.description {
            item["description"] = json!(description);
        }
        Self::shown(view, item, &label(namespace, SKILL_PROMPT))
    }

    /// Whether the activity log keeps requests' params and answers ([`Settings::log_payloads`]).
    #[must_use]
    pub fn log_payloads(&self) -> bool {
        self.log_payloads.load(Ordering::Relaxed)
    }

    /// The approved definitions, when the quarantine is on.
    pub(crate) fn pins(&self) -> Option<Arc<quarantine::Pins>> {
        lock(&self.pins).clone()
    }

    /// A provider that ran this long without a call is stopped.
    fn provider_idle(&self) -> Duration {
        Duration::from_millis(self.idle_ms.load(Ordering::Relaxed))
    }

    /// Takes the settings the owner may change while the hub runs — idle times, the
    /// quarantine, the pins to the 2025 handshake, the variables providers may read, payload
    /// logging — from `settings` (its `io` and `dialer` are the hub's for good). Clients are
    /// told the lists changed when the quarantine was turned on or off; providers whose pin
    /// or allowed variables changed are settled again with the next [`Self::reconcile`].
    /// Whether the pins or the allowed variables changed (so a reconcile is due).
    pub fn retune(&self, settings: &Settings) -> bool {
        self.idle_ms.store(millis(settings.provider_idle), Ordering::Relaxed);
        self.sessions.set_idle(settings.session_idle);
        self.log_payloads.store(settings.log_payloads, Ordering::Relaxed);
        let search = settings.exposure == Exposure::Search;
        let code = settings.code_mode;
        if self.search_main.swap(search, Ordering::Relaxed)
            != search | (self.code_main.swap(code, Ordering::Relaxed) != code)
        {
            let _ = self.changed.send(Changed::TOOLS);
        }
        let toggled = {
            let mut pins = lock(&self.pins);
            let toggled = pins.is_some() != settings.quarantine;
            if toggled {
                *pins = settings.quarantine.then(|| Arc::new(quarantine::Pins::open(self.cache_dir.join(PINS_FILE))));
            }
            toggled
        };
        if toggled {
            self.registry.bump();
            let _ = self.changed.send(Changed::ALL);
        }
        let repinned = {
            let mut legacy = lock(&self.legacy_providers);
            let changed = *legacy != settings.legacy_providers;
            legacy.clone_from(&settings.legacy_providers);
            changed
        };
        let reallowed = {
            let mut allow_env = lock(&self.allow_env);
            let changed = *allow_env != settings.allow_env;
            allow_env.clone_from(&settings.allow_env);
            changed
        };
        repinned || reallowed
    }

    /// Says which lists clients see may have changed, whenever they may have.
    #[must_use]
    pub fn changes(&self) -> broadcast::Receiver<Changed> {
        self.changed.subscribe()
    }

    fn providers(&self) -> Vec<Arc<Provider>> {
        self.registry.providers()
    }

    /// Derives the providers from `catalog`: new ones are registered (idle until needed),
    /// removed ones stopped, changed ones replaced (the old process stops once idle).
    pub async fn reconcile(&self, catalog: &Catalog) {
        let shut_down = self.reconciling.lock().await;
        if *shut_down {
            return;
        }
        let allowed = lock(&self.allow_env).clone();
        let specs: Vec<ProviderSpec> = [Kind::Tool, Kind::Service]
            .into_iter()
            .flat_map(|kind| catalog.of_kind(kind))
            .filter_map(|e| ProviderSpec::of(e, &self.host, &allowed))
            .collect();
        // `of_kind` visits tools then services; settle in scan order.
        let position = |id: &str| catalog.extensions.iter().position(|e| e.id() == id).unwrap_or(usize::MAX);
        let mut specs = specs;
        specs.sort_by_key(|s| position(&s.id));
        specs.extend(self.packages.all().iter().filter_map(|p| {
            let mut refused = std::collections::BTreeSet::new();
            let mut spec = match p.server.as_ref()? {
                Server::Stdio(mcp, dir) => {
                    ProviderSpec::of_mcp(&p.id, &allowed.expand_env(&p.id, mcp, &mut refused), dir, &self.host)
                }
                Server::Remote(remote, timeout) => {
                    let headers =
                        allowed.expand_headers(&p.id, remote.headers.iter().map(|(k, v)| (k, v)), &mut refused);
                    let remote = upstream::Remote { url: remote.url.clone(), headers };
                    ProviderSpec::of_remote(&p.id, &p.namespace, remote, *timeout)
                }
            };
            spec.env_not_allowed = refused;
            spec.call_meta = p.call_meta.clone().map(Arc::new);
            spec.on_main = p.on_main;
            Some(spec)
        }));
        // Every kind of provider is pinned the same way, by its id.
        let legacy = lock(&self.legacy_providers).clone();
        for spec in &mut specs {
            spec.probe = !legacy.contains(&spec.id);
        }
        self.warn_of_unmatched_pins(&specs);
        self.warn_of_variables_not_allowed(&specs);
        let changed = self.registry.settle(specs, |spec| {
            Provider::new(
                Arc::new(spec),
                &self.cache_dir,
                &self.logs_dir,
                (self.changed.clone(), self.updated.clone(), self.logged.clone()),
                self.registry.epoch_counter(),
                self.io.clone(),
            )
        });
        if changed {
            let _ = self.changed.send(Changed::ALL);
        }
    }

    /// Warns (in the host's log) of each provider that names host variables `mcp.allowEnv`
    /// does not allow, when that differs from what it last warned of.
    fn warn_of_variables_not_allowed(&self, specs: &[ProviderSpec]) {
        let now: BTreeMap<String, std::collections::BTreeSet<String>> = specs
            .iter()
            .filter(|s| !s.env_not_allowed.is_empty())
            .map(|s| (s.id.clone(), s.env_not_allowed.clone()))
            .collect();
        let mut warned = lock(&self.env_warned);
        for (id, names) in now.iter().filter(|(id, names)| warned.get(*id) != Some(*names)) {
            tracing::warn!(
                provider = %id,
                "its headers or environment read {} from the host's environment, which the root config's mcp.allowEnv does not give it: read as unset (list them under \"{id}\" in mcp.allowEnv if it should have them)",
                host_env::listed(names)
            );
        }
        *warned = now;
    }

    /// Warns (in the host's log) of the `mcp.legacyProviders` pins that name none of
    /// `specs`, when they differ from those it last warned of: at start, and after a
    /// rescan that changed them.
    fn warn_of_unmatched_pins(&self, specs: &[ProviderSpec]) {
        let unmatched: std::collections::BTreeSet<String> =
            lock(&self.legacy_providers).iter().filter(|id| !specs.iter().any(|s| s.id == **id)).cloned().collect();
        let mut warned = lock(&self.unmatched_pins);
        if warned.as_ref() == Some(&unmatched) {
            return;
        }
        if !unmatched.is_empty() {
            let named: Vec<&str> = unmatched.iter().map(String::as_str).collect();
            tracing::warn!(
                "mcp.legacyProviders names no provider: {} (an extension id, suzu:<id> for a capability package, uiapp:<pluginId>.<appId> for a ChatOS app; see `butler mcp status`)",
                named.join(", ")
            );
        } else if warned.is_some() {
            tracing::info!("every provider mcp.legacyProviders names is there now");
        }
        *warned = Some(unmatched);
    }

    /// Tells clients whenever the faculties' tools change (from now on, for as long as the
    /// hub lives).
    pub fn relay_faculty_changes(self: &Arc<Self>) {
        let mut faculty_tools = self.tools.changes();
        let watcher = Arc::downgrade(self);
        tokio::spawn(async move {
            while faculty_tools.changed().await.is_ok() {
                let Some(hub) = watcher.upgrade() else { break };
                hub.registry.bump();
                let _ = hub.changed.send(Changed::TOOLS);
            }
        });
    }

    /// Provider `id`'s remote server, if it is one (its URL and headers: never shown).
    #[must_use]
    pub fn remote(&self, id: &str) -> Option<upstream::Remote> {
        let provider = self.registry.find(id)?;
        provider.spec.transport.as_any().downcast_ref::<upstream::Remote>().cloned()
    }

    /// Provider `id`'s log (its stderr and the hub's notes about it).
    #[must_use]
    pub fn provider_log(&self, id: &str) -> Option<Arc<butler_process::logs::Log>> {
        self.registry.find(id).map(|p| Arc::clone(&p.log))
    }

    /// Changes whenever what the console shows of the hub may have: a provider's state,
    /// pid or last error, or any list or approval (the routing epoch) — not per call.
    #[must_use]
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        self.registry.epoch().hash(&mut hasher);
        for provider in self.providers() {
            let status = provider.status(Vec::new(), Vec::new());
            (status.id, serde_json::to_string(&status.state).unwrap_or_default(), status.pid, status.last_error)
                .hash(&mut hasher);
        }
        hasher.finish()
    }

    /// Says whenever a resource a provider offers changed.
    #[must_use]
    pub fn resource_updates(&self) -> broadcast::Receiver<Updated> {
        self.updated.subscribe()
    }

    /// Says each log message a provider sends outside any call (a listener that falls
    /// behind misses the oldest).
    #[must_use]
    pub fn provider_logs(&self) -> broadcast::Receiver<Logged> {
        self.logged.subscribe()
    }

    /// Whether session `id` gets `logged`: it set a log level (`logging/setLevel`) the
    /// message is at or above, and `view`, its endpoint, offers the provider.
    #[must_use]
    pub fn session_takes_log(&self, id: &str, view: &View, logged: &Logged) -> bool {
        let level = logged.params.get("level").and_then(Value::as_str).unwrap_or_default();
        let wanted = self.sessions.read(id, |s| s.log_level.clone());
        wanted.is_some_and(|wanted| upcall::passes(level, Some(&wanted)))
            && self.providers().iter().any(|p| p.spec.id == logged.provider && offers(view, &p.spec))
    }

    /// The activity log.
    #[must_use]
    pub fn activity(&self) -> &activity::ActivityLog {
        &self.activity
    }

    /// Who answers `method` for `name` (a tool or prompt name, a resource URI) on `view`:
    /// a provider's id, `host` for the host's own, `None` when nobody does (or the method
    /// names nothing).
    #[must_use]
    pub fn owner_of(&self, view: &View, method: &str, name: &str) -> Option<String> {
        let host = || Some("host".to_owned());
        match method {
            crate::methods::TOOLS_CALL if self.offers_host_tool(view, name) => host(),
            crate::methods::TOOLS_CALL => self.with_tool_route(view, name, |p, _| p.spec.id.clone()),
            crate::methods::PROMPTS_GET if name == CONTEXT_NAME && view.offers_context() => host(),
            crate::methods::RESOURCES_READ if name == CONTEXT_URI && view.offers_context() => host(),
            crate::methods::PROMPTS_GET => self.prompt_in(view, name).map(|e| e.provider.spec.id.clone()),
            crate::methods::SKILLS_GET | crate::methods::RESOURCES_DIRECTORY_READ => self.skill_owner(view, name),
            crate::methods::RESOURCES_READ => {
                self.skill_owner(view, name).or_else(|| self.resource_owner(view, name).map(|(p, _)| p.spec.id.clone()))
            }
            _ => None,
        }
    }

    /// Stops, from now on and for as long as the hub lives, every provider that ran its
    /// idle time without a call; it starts again on the next one.
    pub fn stop_idle_providers(self: &Arc<Self>) {
        let watcher = Arc::downgrade(self);
        tokio::spawn(async move {
            // The idle time may change while the hub runs: each round reads it anew.
            while let Some(every) = watcher.upgrade().map(|hub| hub.provider_idle() / 2) {
                tokio::time::sleep(every.clamp(Duration::from_millis(200), Duration::from_secs(30))).await;
                let Some(hub) = watcher.upgrade() else { break };
                hub.drop_expired_parked();
                let expired = hub.sessions.expire();
                if expired > 0 {
                    tracing::debug!(
                        "{expired} MCP sessions ended after {} s without a request",
                        hub.sessions.idle().as_secs()
                    );
                }
                for provider in hub.providers() {
                    provider.stop_if_idle(hub.provider_idle()).await;
                }
            }
        });
    }

    /// Starts, stops or restarts provider `id`; its status after (`None`: it went meanwhile).
    ///
    /// # Errors
    /// [`ActionError`].
    pub async fn act(&self, id: &str, action: ProviderAction) -> Result<Option<ProviderStatus>, ActionError> {
        let provider = self.registry.find(id).ok_or_else(|| ActionError::Unknown(id.to_owned()))?;
        if matches!(action, ProviderAction::Stop | ProviderAction::Restart) {
            provider.stop().await;
        }
        if matches!(action, ProviderAction::Start | ProviderAction::Restart) {
            provider.start().await.map_err(|why| ActionError::Failed { id: id.to_owned(), why: why.to_string() })?;
        }
        Ok(self.status().providers.into_iter().find(|p| p.status.id == id))
    }

    /// For a call of a name no known list has: starts, concurrently, the providers `view`
    /// offers (`None`: every provider) whose lists are not known yet (never run, no cache)
    /// and waits [`LIST_WAIT`] at most for them — also for one a list already answered
    /// without (a list waits for that once; a call names what it needs).
    async fn start_unlisted(&self, view: Option<&View>) {
        let providers: Vec<_> = self
            .providers()
            .into_iter()
            .filter(|p| !p.listed() && view.is_none_or(|view| offers(view, &p.spec)))
            .collect();
        for provider in &providers {
            provider.start_for_a_list();
        }
        let listed = futures_util::future::join_all(providers.iter().map(|p| p.wait_listed()));
        let _ = tokio::time::timeout(LIST_WAIT, listed).await;
    }

    /// Starts, concurrently, the providers `view` offers (`None`: every provider) whose
    /// lists are not known yet, and learns what those it offers list to clients of `set`
    /// where that is not known ([`capability_sets`]). The list waits [`LIST_WAIT`] at most
    /// in all — for the starts, then for the learning, within one deadline: a provider that is not ready
    /// by then is left out of this answer (its status says `pending`), its start goes on
    /// (bounded by [`provider::START_TIMEOUT`]), and what it lists later reaches clients as
    /// a `list_changed` notification. A list waits for a provider once per start of it (and
    /// per set it learns): one that a list answered without is not waited for again until
    /// it has listed or is started anew.
    async fn ready_lists(&self, view: Option<&View>, set: CapabilitySet) {
        let providers: Vec<_> = self
            .providers()
            .into_iter()
            .filter(|p| (!p.listed() || !p.knows(set)) && view.is_none_or(|view| offers(view, &p.spec)))
            .collect();
        if providers.is_empty() {
            return;
        }
        for provider in &providers {
            provider.prepare(set);
        }
        // First their starts, then what they list to `set`: [`LIST_WAIT`] for both together.
        let wait = ListWait::start();
        let starting: Vec<&Arc<Provider>> = providers.iter().filter(|p| !p.listed() && p.awaited(set)).collect();
        let started = futures_util::future::join_all(starting.iter().map(|p| p.wait_listed()));
        if !starting.is_empty() && !wait.until_done(started).await {
            Self::missed(&starting, set, "still starting");
        }
        if set == CapabilitySet::FULL {
            return;
        }
        let learning: Vec<&Arc<Provider>> =
            providers.iter().filter(|p| p.listed() && !p.knows(set) && p.awaited(set)).collect();
        for provider in &learning {
            provider.learn(set);
        }
        let learned = futures_util::future::join_all(learning.iter().map(|p| p.wait_learned(set)));
        if !learning.is_empty() && !wait.until_done(learned).await {
            Self::missed(&learning, set, "still learning what it lists to such a client");
        }
    }

    /// A list for clients of `set` answers without those of `providers` that are not
    /// ready: later ones do not wait for them again ([`Provider::missed_a_list`]).
    fn missed(providers: &[&Arc<Provider>], set: CapabilitySet, doing: &str) {
        let late: Vec<&&Arc<Provider>> = providers.iter().filter(|p| !p.listed() || !p.knows(set)).collect();
        for provider in &late {
            provider.missed_a_list(set);
        }
        let late: Vec<&str> = late.iter().map(|p| p.spec.id.as_str()).collect();
        tracing::info!(
            "a list answered without {} ({doing} after {} s; later lists do not wait for it again)",
            late.join(", "),
            LIST_WAIT.as_secs()
        );
    }

    /// What a client of `set` is shown of the lists of the providers `view` offers, once
    /// [`Self::ready_lists`] has learned what it can.
    async fn narrowing(&self, view: &View, set: CapabilitySet) -> Narrowing {
        self.ready_lists(Some(view), set).await;
        if set == CapabilitySet::FULL {
            return Narrowing::default();
        }
        Narrowing(
            self.providers()
                .into_iter()
                .filter(|p| offers(view, &p.spec))
                .map(|p| (p.spec.id.clone(), p.shown(set)))
                .collect(),
        )
    }

    /// Every provider item of one kind that takes part in `view`'s names ([`names_on`])
    /// under its public name, in provider order; names that are invalid or already taken
    /// are rejected.
    fn exposed(&self, kind: ItemKind, view: &View) -> (Vec<Exposed>, HashMap<String, Vec<Rejected>>) {
        let mut seen: HashSet<String> = self
            .tools
            .list(Scope::Main)
            .iter()
            .chain(&self.tools.list(Scope::Restricted))
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        seen.insert(CONTEXT_NAME.to_owned());
        seen.extend(exposure::SEARCH_TOOLS.map(str::to_owned));
        let mut exposed = Vec::new();
        let mut rejected: HashMap<String, Vec<Rejected>> = HashMap::new();
        for provider in self.providers().into_iter().filter(|p| names_on(view, kind, &p.spec)) {
            let lists = provider.lists();
            let items = match kind {
                ItemKind::Tool => lists.tools,
                ItemKind::Prompt => lists.prompts,
                ItemKind::Resource => lists.resources,
            };
            for item in items {
                let name = item.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                if matches!(kind, ItemKind::Resource) {
                    if !self.is_held(&provider.spec.id, kind.pinned(), &item) {
                        // A resource is known by its URI; its name is only a label.
                        let public = label(&provider.spec.namespace, &name);
                        exposed.push(Exposed { public, provider: Arc::clone(&provider), item });
                    }
                    continue;
                }
                // A name no client could call is rejected whether or not the item is held:
                // approving it would not make it callable.
                let outcome = names::public(&provider.spec.namespace, &name).map_err(|e| e.to_string());
                if outcome.is_ok() && self.is_held(&provider.spec.id, kind.pinned(), &item) {
                    continue;
                }
                let outcome = outcome.and_then(|public| {
                    if seen.insert(public.clone()) { Ok(public) } else { Err(format!("`{public}` is already taken")) }
                });
                match outcome {
                    Ok(public) => exposed.push(Exposed { public, provider: Arc::clone(&provider), item }),
                    Err(reason) => {
                        rejected.entry(provider.spec.id.clone()).or_default().push(Rejected { tool: name, reason })
                    }
                }
            }
        }
        (exposed, rejected)
    }

    /// The tool routing table, rebuilt only when providers or their lists changed.
    fn routes(&self) -> Arc<registry::Routes> {
        self.registry.routes(|| {
            self.exposed(ItemKind::Tool, &View::Main)
                .0
                .into_iter()
                .map(|e| {
                    let original = e.item.get("name").cloned().unwrap_or(Value::Null);
                    (e.public, (e.provider, original))
                })
                .collect()
        })
    }

    /// Whether `view` offers the faculties' tool `name`.
    fn offers_host_tool(&self, view: &View, name: &str) -> bool {
        let offered = if name == code_mode::RUN_CODE { self.code_mode(view) } else { view.offers_host_tool(name) };
        offered && self.tools.has(view.scope(), name)
    }

    /// The provider tool `view` offers as `name`, and the tool's own name.
    fn tool_route(&self, view: &View, name: &str) -> Option<(Arc<Provider>, Value)> {
        self.with_tool_route(view, name, |provider, original| (Arc::clone(provider), original.clone()))
    }

    /// `found` of the provider tool `view` offers as `name` and the tool's own name, when
    /// there is one (without cloning either).
    fn with_tool_route<R>(
        &self,
        view: &View,
        name: &str,
        found: impl FnOnce(&Arc<Provider>, &Value) -> R,
    ) -> Option<R> {
        let unprefixed = match view {
            View::Restricted => return None,
            View::Profile(profile) => !profile.spec.prefixed,
            View::Main => false,
        };
        if !unprefixed {
            // The main endpoint's table; a prefixed profile's too whenever the provider that
            // holds the name there is one it offers (the first of its providers to hold it).
            let routes = self.routes();
            if let Some((provider, original)) = routes.get(name)
                && (matches!(view, View::Main) || offers_tool(view, &provider.spec, name))
            {
                let offered = offers_tool(view, &provider.spec, name)
                    && (!view.filters_by_tags()
                        || provider
                            .lists()
                            .tools
                            .iter()
                            .any(|d| d.get("name") == Some(original) && view.offers_definition(d)));
                return offered.then(|| found(provider, original));
            }
            if matches!(view, View::Main) {
                return None;
            }
        }
        // A profile's names are its own, made from its providers only: a name a provider
        // outside it holds on the main endpoint may be one of its providers' here.
        self.exposed(ItemKind::Tool, view)
            .0
            .into_iter()
            .find(|e| {
                let original = e.item.get("name").and_then(Value::as_str).unwrap_or_default();
                view.name_for(&e.public, original) == name
                    && offers_tool(view, &e.provider.spec, &e.public)
                    && view.offers_definition(&e.item)
            })
            .map(|e| found(&e.provider, e.item.get("name").unwrap_or(&Value::Null)))
    }

    /// `item` (a provider's, public name `public`) under the name `view` shows it by.
    fn shown(view: &View, item: Value, public: &str) -> Value {
        let original = item.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let name = view.name_for(public, &original).to_owned();
        renamed(item, &name)
    }

    /// What `view` tells its clients of itself (`instructions`): `own`, the hub's words, then
    /// the instructions of the providers it offers, each under its namespace
    /// ([`instructions::merged`]); on a profile that is one provider under its own names,
    /// that provider's instructions alone (`own` when it gives none). Providers whose lists
    /// are not known yet are started first, and what they list to clients of `asker`'s
    /// capabilities learned, for [`LIST_WAIT`] at most (so that its lists answer at once).
    pub async fn instructions(&self, view: &View, own: &str, asker: &Asker<'_>) -> String {
        if matches!(view, View::Restricted) {
            return own.to_owned();
        }
        self.ready_lists(Some(view), CapabilitySet::of(&asker.capabilities())).await;
        let said: Vec<(String, String)> = self
            .providers()
            .iter()
            .filter(|p| offers(view, &p.spec))
            .filter_map(|p| Some((p, p.instructions()?)))
            // Held for the owner's review like the provider's tools (new, or changed since
            // approved): read by the model as much as a tool's description is.
            .filter(|(p, text)| {
                !self.is_held(&p.spec.id, quarantine::Kind::Instructions, &quarantine::instructions_item(text))
            })
            .map(|(p, text)| (p.spec.namespace.clone(), text))
            .collect();
        match view {
            View::Profile(profile) if !profile.spec.prefixed => {
                said.first().map_or_else(|| own.to_owned(), |(_, text)| instructions::alone(text))
            }
            _ => instructions::merged(own, &said),
        }
    }

    /// `tools/list` on `view` for `asker`: in search mode the search tools alone; otherwise
    /// the tools it offers ([`Self::offered_tools`]), then `butler__find_tools`.
    pub async fn list_tools(&self, view: &View, asker: &Asker<'_>) -> Vec<Value> {
        if self.exposure(view) == Exposure::Search {
            let mut tools = self.search_tools(view);
            if self.code_mode(view) {
                // Code mode beside search: a program calls what the search found.
                self.tools.settle().await;
                tools.extend(
                    self.tools.list(view.scope()).into_iter().filter(|t| t["name"] == code_mode::RUN_CODE).take(1),
                );
            }
            return tools;
        }
        let mut tools = self.offered_tools(view, asker).await;
        tools.extend(self.search_tools(view));
        tools
    }

    /// The tools `view` offers `asker`: the host's tools, then the providers', each under
    /// the name `view` shows it by (a provider is started only when its lists are not known
    /// yet), but those a provider lists only to clients more capable than `asker`.
    async fn offered_tools(&self, view: &View, asker: &Asker<'_>) -> Vec<Value> {
        self.tools.settle().await;
        let mut tools: Vec<Value> = self
            .tools
            .list(view.scope())
            .into_iter()
            .filter(|t| {
                t["name"].as_str().is_some_and(|name| match name {
                    code_mode::RUN_CODE => self.code_mode(view),
                    _ => view.offers_host_tool(name) && !exposure::SEARCH_TOOLS.contains(&name),
                })
            })
            .collect();
        if !matches!(view, View::Restricted) {
            let narrowing = self.narrowing(view, CapabilitySet::of(&asker.capabilities())).await;
            tools.extend(
                self.exposed(ItemKind::Tool, view)
                    .0
                    .into_iter()
                    .filter(|e| offers_tool(view, &e.provider.spec, &e.public) && view.offers_definition(&e.item))
                    .filter(|e| narrowing.shows(&e.provider.spec.id, Listed::Tool, &e.item))
                    .map(|e| Self::shown(view, e.item, &e.public)),
            );
        }
        tools
    }

    /// `tools/call`: a host tool, or the provider that owns the public name. Failures that
    /// are the provider's (crash, timeout) come back as `isError` results. A provider's
    /// result that the hub passes on unchanged is its text ([`Answer::Verbatim`]).
    ///
    /// # Errors
    /// An unknown tool, or a provider's own JSON-RPC error.
    pub async fn call_tool(
        &self,
        view: &View,
        session: &str,
        request_id: &Value,
        params: Value,
        upcalls: Option<upcall::Upcalls>,
        asker: &Asker<'_>,
    ) -> Result<Answer, RpcError> {
        self.call_tool_nested(view, session, request_id, params, upcalls, asker, code_mode::Nesting::client()).await
    }

    /// [`Self::call_tool`], made where `nesting` says (a client's own call, or a host tool's
    /// inner call).
    #[allow(clippy::too_many_arguments, reason = "call_tool's, and how deep it is")]
    pub(crate) async fn call_tool_nested(
        &self,
        view: &View,
        session: &str,
        request_id: &Value,
        params: Value,
        upcalls: Option<upcall::Upcalls>,
        asker: &Asker<'_>,
        nesting: code_mode::Nesting,
    ) -> Result<Answer, RpcError> {
        let params = self.unwrapped(view, params);
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        if self.offers_search_tool(view, &name) {
            return Ok(self.call_search_tool(view, &name, &params, asker).await);
        }
        let mut target = None;
        let mut host_tool = self.offers_host_tool(view, &name);
        if !host_tool {
            target = self.tool_route(view, &name);
            if target.is_none() {
                // Faculties still compiling may declare it.
                self.tools.settle().await;
                host_tool = self.offers_host_tool(view, &name);
            }
        }
        if host_tool {
            let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
            // A client's own call may be cancelled by the client (an inner call ends with
            // the call that made it).
            let in_flight = nesting.is_clients().then(|| self.tool_calls.begin_host(session, request_id.to_string()));
            let inner = self.inner_calls(view, session, &name, nesting);
            let budget = view.budget_key();
            let cancelled = async {
                match &in_flight {
                    Some(call) => call.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            // A cancelled call is dropped: the host tool stops as when its client goes away.
            return Ok(tokio::select! {
                answer = self.tools.call(view.scope(), &budget, &name, arguments, inner) => answer.into(),
                () = cancelled => {
                    Answer::Read(tool_source::error_result(format!("{name}: {}", CallFailure::Cancelled)))
                }
            });
        }
        let unknown = || RpcError::invalid_params(format!("unknown tool: {name}"));
        if matches!(view, View::Restricted) {
            return Err(unknown());
        }
        // A provider never started (and never cached) has no known tools yet: start them
        // and look again before calling the name unknown.
        let target = match target {
            Some(target) => target,
            None => {
                self.start_unlisted(Some(view)).await;
                match self.tool_route(view, &name) {
                    Some(target) => target,
                    None => match self.held_error(view, quarantine::Kind::Tool, &name) {
                        Some(held) => return Ok(Answer::Read(tool_source::error_result(held.message))),
                        None => return Err(unknown()),
                    },
                }
            }
        };
        let (provider, original) = target;
        let mut params = framing::tool_call_params(params, original);
        if let Some(meta) = &provider.spec.call_meta {
            let slot = &mut params["_meta"];
            if !slot.is_object() {
                *slot = json!({});
            }
            butler_catalog::chatos::merge(slot, Value::clone(meta));
        }
        let in_flight = self.tool_calls.begin(session, request_id.to_string());
        let reply = provider
            .call((crate::methods::TOOLS_CALL, params), upcalls, asker, |conn, id| in_flight.started(conn, id))
            .await;
        in_flight.answered(matches!(reply, Err(CallFailure::Cancelled)));
        match reply {
            Ok(result) => Ok(result),
            Err(CallFailure::Error(error)) => Err(provider_error(error)),
            Err(failure) => Ok(Answer::Read(tool_source::error_result(format!("{name}: {failure}")))),
        }
    }

    /// Whether the tool call `request_id` of `session` ended cancelled by its client (asked
    /// once: the answer is forgotten as it is given).
    pub fn was_cancelled(&self, session: &str, request_id: &str) -> bool {
        self.tool_calls.was_cancelled(session, request_id)
    }

    /// A client cancelled request `request_id` of `session`: stop the host tool's call, or
    /// forward it to the provider.
    pub async fn cancel(&self, session: &str, request_id: &Value, reason: Option<String>) {
        if self.tool_calls.cancel_host(session, &request_id.to_string()) {
            return;
        }
        if let Some((conn, id)) = self.tool_calls.take(session, &request_id.to_string()) {
            conn.cancel(id, reason).await;
        }
    }

    /// Waits (within the tool source's own deadline) while the host's tools are still being
    /// learned (faculties found in the instance still compiling), so what they declare is known.
    pub async fn settle(&self) {
        self.tools.settle().await;
    }

    /// The owner's compiled context, as the faculties compile it (what the hub offers as
    /// the `butler__context` prompt).
    pub async fn compiled_context(&self) -> String {
        self.tools.context().await
    }

    /// `prompts/list` for `asker`: the compiled context, then the providers' prompts (but
    /// those a provider lists only to clients more capable than `asker`).
    pub async fn list_prompts(&self, view: &View, asker: &Asker<'_>) -> Vec<Value> {
        let mut prompts = Vec::new();
        if view.offers_context() {
            prompts.push(
                json!({"name": CONTEXT_NAME, "description": "The owner's compiled context, as their faculties compile it."}),
            );
        }
        // The packages' own prompts (skills, apps' prompts) win a name over a provider's.
        let mut own: Vec<Value> =
            self.skills(view).iter().map(|(namespace, skill)| Self::skill_prompt(view, namespace, skill)).collect();
        if !matches!(view, View::Restricted) {
            own.extend(self.package_prompts(view).into_iter().map(|p| json!({"name": p.name, "title": p.title})));
            let narrowing = self.narrowing(view, CapabilitySet::of(&asker.capabilities())).await;
            let taken = |name: &str| own.iter().any(|s| s["name"] == name);
            prompts.extend(
                self.exposed(ItemKind::Prompt, view)
                    .0
                    .into_iter()
                    .filter(|e| offers_prompt(view, &e.provider.spec, &e.public))
                    .filter(|e| narrowing.shows(&e.provider.spec.id, Listed::Prompt, &e.item))
                    .map(|e| Self::shown(view, e.item, &e.public))
                    .filter(|item| !item["name"].as_str().is_some_and(taken)),
            );
        }
        prompts.extend(own);
        prompts
    }

    /// The provider prompt `view` offers as `name`.
    fn prompt_in(&self, view: &View, name: &str) -> Option<Exposed> {
        self.exposed(ItemKind::Prompt, view).0.into_iter().find(|e| {
            let original = e.item.get("name").and_then(Value::as_str).unwrap_or_default();
            offers_prompt(view, &e.provider.spec, &e.public) && view.name_for(&e.public, original) == name
        })
    }

    /// `prompts/get`.
    ///
    /// # Errors
    /// An unknown prompt, or the provider's error.
    pub async fn get_prompt(&self, view: &View, mut params: Value, asker: &Asker<'_>) -> Result<Value, RpcError> {
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        if name == CONTEXT_NAME && view.offers_context() {
            let text = self.tools.context().await;
            return Ok(
                json!({"description": "The owner's compiled context", "messages": [{"role": "user", "content": {"type": "text", "text": text}}]}),
            );
        }
        let skill = self
            .skills(view)
            .into_iter()
            .find(|(namespace, skill)| Self::skill_prompt(view, namespace, skill)["name"] == name.as_str());
        if let Some((_, skill)) = skill {
            return Ok(json!({"description": skill.description.unwrap_or(skill.title),
                             "messages": [{"role": "user", "content": {"type": "text", "text": skill.body}}]}));
        }
        if let Some(prompt) = self.package_prompts(view).into_iter().find(|p| p.name == name) {
            return Ok(json!({"description": prompt.title,
                             "messages": [{"role": "user", "content": {"type": "text", "text": prompt.text}}]}));
        }
        let target = self.prompt_in(view, &name).ok_or_else(|| {
            self.held_error(view, quarantine::Kind::Prompt, &name)
                .unwrap_or_else(|| RpcError::invalid_params(format!("unknown prompt: {name}")))
        })?;
        params["name"] = target.item.get("name").cloned().unwrap_or(Value::Null);
        forward(&target.provider, crate::methods::PROMPTS_GET, params, asker).await
    }

    /// `resources/list`: the compiled context, then the providers' resources (names
    /// namespaced; URIs as the provider gives them, but a URI an earlier provider of the
    /// same endpoint already offers becomes `butler://<namespace>/<uri>`), for `asker`: but
    /// those a provider lists only to clients more capable than it.
    pub async fn list_resources(&self, view: &View, asker: &Asker<'_>) -> Vec<Value> {
        let mut resources = Vec::new();
        if view.offers_context() {
            resources.push(
                json!({"uri": CONTEXT_URI, "name": CONTEXT_NAME, "title": "Compiled context", "mimeType": "text/markdown"}),
            );
        }
        if !matches!(view, View::Restricted) {
            let narrowing = self.narrowing(view, CapabilitySet::of(&asker.capabilities())).await;
            let shown =
                |r: &PublicResource| narrowing.shows(&r.exposed.provider.spec.id, Listed::Resource, &r.exposed.item);
            resources.extend(
                self.resources(view).0.into_iter().filter(|r| offers(view, &r.exposed.provider.spec) && shown(r)).map(
                    |r| {
                        let mut item = Self::shown(view, r.exposed.item, &r.exposed.public);
                        item["uri"] = json!(r.uri);
                        item
                    },
                ),
            );
        }
        resources.extend(self.skill_resources(view));
        resources
    }

    /// Every provider resource that takes part in `view`'s URIs under the URI its clients
    /// see, in provider order, and the URIs offered twice (`{"uri", "provider", "heldBy",
    /// "exposedAs"}`): a URI is renamed only when an earlier provider of the same endpoint
    /// (or the endpoint's compiled context) holds it.
    fn resources(&self, view: &View) -> (Vec<PublicResource>, Vec<Value>) {
        let mut held: HashMap<String, String> = HashMap::new();
        if view.offers_context() {
            held.insert(CONTEXT_URI.to_owned(), "host".to_owned());
        }
        let mut resources = Vec::new();
        let mut duplicates = Vec::new();
        for exposed in self.exposed(ItemKind::Resource, view).0 {
            let original = exposed.item.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
            let uri = match held.get(&original) {
                None => {
                    held.insert(original.clone(), exposed.provider.spec.id.clone());
                    original.clone()
                }
                Some(holder) => {
                    let uri = format!("butler://{}/{original}", exposed.provider.spec.namespace);
                    duplicates.push(json!({"uri": original, "provider": exposed.provider.spec.id,
                                           "heldBy": holder, "exposedAs": uri}));
                    uri
                }
            };
            resources.push(PublicResource { uri, original, exposed });
        }
        (resources, duplicates)
    }

    /// Who offers the resource clients know as `uri`, and its URI there: a listed
    /// resource, else the first provider with a template that describes it.
    fn resource_owner(&self, view: &View, uri: &str) -> Option<(Arc<Provider>, String)> {
        let offered = |p: &Arc<Provider>| offers(view, &p.spec);
        if let Some(found) = self.resources(view).0.into_iter().find(|r| r.uri == uri && offered(&r.exposed.provider)) {
            return Some((found.exposed.provider, found.original));
        }
        let described = |p: &Arc<Provider>| {
            offered(p)
                && self.approved_templates(p).iter().any(|t| {
                    t.get("uriTemplate")
                        .and_then(Value::as_str)
                        .is_some_and(|template| templates::matches(template, uri))
                })
        };
        self.providers().into_iter().find(described).map(|p| (p, uri.to_owned()))
    }

    /// `resources/templates/list`: every provider's templates, names namespaced (but those a
    /// provider lists only to clients more capable than `asker`).
    pub async fn list_resource_templates(&self, view: &View, asker: &Asker<'_>) -> Vec<Value> {
        if matches!(view, View::Restricted) {
            return Vec::new();
        }
        let narrowing = self.narrowing(view, CapabilitySet::of(&asker.capabilities())).await;
        let mut templates = Vec::new();
        for provider in self.providers().into_iter().filter(|p| offers(view, &p.spec)) {
            for template in self.approved_templates(&provider) {
                if !narrowing.shows(&provider.spec.id, Listed::Template, &template) {
                    continue;
                }
                let name = template.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                let public = label(&provider.spec.namespace, &name);
                templates.push(Self::shown(view, template, &public));
            }
        }
        templates
    }

    /// `resources/read`: the context, a provider's resource, or a URI one of its templates
    /// describes.
    ///
    /// # Errors
    /// An unknown resource (`-32002`), or the provider's error.
    pub async fn read_resource(&self, view: &View, mut params: Value, asker: &Asker<'_>) -> Result<Value, RpcError> {
        let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default().to_owned();
        if uri == CONTEXT_URI && view.offers_context() {
            return Ok(
                json!({"contents": [{"uri": CONTEXT_URI, "mimeType": "text/markdown", "text": self.tools.context().await}]}),
            );
        }
        if let Some(read) = self.read_skill(view, &uri, &params, asker).await {
            return read;
        }
        if let Some(held) = self.held_error(view, quarantine::Kind::Resource, &uri) {
            return Err(held);
        }
        let (provider, original) = self.resource_owner(view, &uri).ok_or_else(|| {
            self.held_error(view, quarantine::Kind::ResourceTemplate, &uri).unwrap_or_else(|| not_a_resource(&uri))
        })?;
        params["uri"] = json!(original);
        let mut result = forward(&provider, crate::methods::RESOURCES_READ, params, asker).await?;
        if original != uri
            && let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut)
        {
            for content in contents.iter_mut().filter(|c| c.get("uri").and_then(Value::as_str) == Some(&original)) {
                content["uri"] = json!(uri);
            }
        }
        Ok(result)
    }

    /// `completion/complete`: asked of the provider that owns the prompt or resource the
    /// reference names (the host's own prompt takes no arguments: nothing to complete).
    ///
    /// # Errors
    /// A reference to nothing this view offers (`-32602`), or the provider's error.
    pub async fn complete(&self, view: &View, mut params: Value, asker: &Asker<'_>) -> Result<Value, RpcError> {
        let reference = params.get("ref").cloned().unwrap_or(Value::Null);
        match self.completion_target(view, &reference)? {
            None => Ok(json!({"completion": {"values": [], "total": 0, "hasMore": false}})),
            Some((provider, reference)) => {
                params["ref"] = reference;
                forward(&provider, crate::methods::COMPLETION_COMPLETE, params, asker).await
            }
        }
    }

    /// Who answers `completion/complete` for `reference` on `view` (what the activity log
    /// names): a provider's id, `host` for the host's own prompt, `None` when nobody does.
    #[must_use]
    pub fn completion_owner(&self, view: &View, reference: &Value) -> Option<String> {
        match self.completion_target(view, reference).ok()? {
            None => Some("host".to_owned()),
            Some((provider, _)) => Some(provider.spec.id.clone()),
        }
    }

    /// The provider a completion of `reference` goes to on `view`, and the reference as
    /// that provider knows it; `None` for the host's own prompt.
    fn completion_target(&self, view: &View, reference: &Value) -> Result<Option<(Arc<Provider>, Value)>, RpcError> {
        let text = |key: &str| reference.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let unknown = |what: &str| RpcError::invalid_params(format!("completion/complete: unknown {what}"));
        let mut theirs = reference.clone();
        match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = text("name");
                if name == CONTEXT_NAME && view.offers_context() {
                    return Ok(None);
                }
                let target = self.prompt_in(view, &name).ok_or_else(|| unknown(&format!("prompt {name:?}")))?;
                theirs["name"] = target.item.get("name").cloned().unwrap_or(Value::Null);
                Ok(Some((target.provider, theirs)))
            }
            Some("ref/resource") => {
                let uri = text("uri");
                // A template by its `uriTemplate`, or a resource by the URI clients know.
                let template = self.providers().into_iter().find(|p| {
                    offers(view, &p.spec)
                        && self
                            .approved_templates(p)
                            .iter()
                            .any(|t| t.get("uriTemplate").and_then(Value::as_str) == Some(&uri))
                });
                let (owner, original) = match template {
                    Some(provider) => (provider, uri.clone()),
                    None => self.resource_owner(view, &uri).ok_or_else(|| unknown(&format!("resource {uri:?}")))?,
                };
                theirs["uri"] = json!(original);
                Ok(Some((owner, theirs)))
            }
            _ => Err(RpcError::invalid_params(
                "completion/complete: `ref` must be {\"type\": \"ref/prompt\", \"name\"} or {\"type\": \"ref/resource\", \"uri\"}",
            )),
        }
    }

    /// What `GET /mcp/status` reports: every provider's status with its held items, the
    /// namespace conflicts, the resource URIs two providers offer, the host's own tools and
    /// how many sessions are open. The host shapes it for HTTP.
    #[must_use]
    pub fn status(&self) -> HubStatus {
        let (tools, rejected) = self.exposed(ItemKind::Tool, &View::Main);
        let held = self.held_items(None);
        let conflicts = self.registry.conflicts();
        let providers = self
            .providers()
            .iter()
            .map(|p| {
                let names = tools.iter().filter(|e| Arc::ptr_eq(&e.provider, p)).map(|e| e.public.clone()).collect();
                let mut status = p.status(names, rejected.get(&p.spec.id).cloned().unwrap_or_default());
                if let Some(why) = p.spec.cannot_start() {
                    status.last_error = Some(format!("cannot start: {why}"));
                }
                let held = held.iter().filter(|h| h.provider == p.spec.id).map(|h| h.public.clone()).collect();
                ProviderStatus { status, held }
            })
            .collect();
        let names = |scope| self.tools.list(scope).into_iter().map(|t| t["name"].clone()).collect();
        HubStatus {
            providers,
            conflicts,
            duplicate_uris: self.resources(&View::Main).1,
            host_tools: names(Scope::Main),
            restricted_tools: names(Scope::Restricted),
            sessions: self.sessions.count(),
        }
    }

    /// Keeps a provider's request passed to the 2025-11-25 client of `session` until the
    /// client answers it; the id the request goes to the client under (see [`upcalls`]).
    pub fn ask(&self, session: &str, asked: upcall::Asked) -> String {
        self.upcalls.ask(session, asked)
    }

    /// The 2025-11-25 client of `session` answered request `id` the hub passed on: the
    /// answer goes to the provider that asked. Whether anyone was waiting for it.
    pub fn answered(&self, session: &str, id: &Value, reply: Result<Value, Value>) -> bool {
        self.upcalls.answered(session, id, reply)
    }

    /// Sets `parked` aside until the client's next round (at most [`PARKED_FOR`]); the id
    /// it is taken back with.
    pub fn park(&self, parked: upcall::Parked) -> String {
        self.upcalls.park(session_id(), parked, std::time::Instant::now())
    }

    /// Takes back the call parked under `id`, unless it expired.
    pub fn unpark(&self, id: &str) -> Option<upcall::Parked> {
        self.upcalls.unpark(id, std::time::Instant::now())
    }

    /// Drops the parked calls whose client did not come back in time.
    pub fn drop_expired_parked(&self) {
        self.upcalls.drop_expired(std::time::Instant::now());
    }

    /// Opens a session for a client that declared `capabilities`; returns its id (see
    /// [`sessions`]).
    pub fn open_session(&self, view: &View, version: String, capabilities: Value) -> String {
        let id = session_id();
        let session = Session {
            endpoint: view.endpoint(),
            version,
            capabilities,
            log_level: None,
            subscriptions: HashMap::new(),
        };
        self.sessions.open(id.clone(), session);
        id
    }

    /// Sets the least severe log level session `id` wants; whether it is open.
    pub fn set_log_level(&self, id: &str, level: &str) -> bool {
        self.sessions.update(id, |session| session.log_level = Some(level.to_owned()))
    }

    /// The session `id`, if it is open (and not idle past [`Settings::session_idle`]); it
    /// counts as used from now.
    #[must_use]
    pub fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.get(id)
    }

    /// Session `id` opened a notification stream: it does not expire while the returned
    /// guard lives.
    #[must_use]
    pub fn session_stream(&self, id: &str) -> SessionStream {
        self.sessions.stream(id)
    }

    /// Ends session `id`; whether it was open.
    pub fn close_session(&self, id: &str) -> bool {
        self.sessions.close(id)
    }

    /// Stops every provider (the host is shutting down).
    pub async fn shutdown(&self) {
        *self.reconciling.lock().await = true;
        let providers = self.registry.take_all();
        futures_util::future::join_all(providers.iter().map(|p| p.shutdown())).await;
    }
}

#[derive(Debug, Clone, Copy)]
enum ItemKind {
    Tool,
    Prompt,
    Resource,
}

impl ItemKind {
    /// The kind the quarantine pins it as.
    fn pinned(self) -> quarantine::Kind {
        match self {
            Self::Tool => quarantine::Kind::Tool,
            Self::Prompt => quarantine::Kind::Prompt,
            Self::Resource => quarantine::Kind::Resource,
        }
    }
}

/// `item` with its `name` replaced by the public one.
fn renamed(mut item: Value, public: &str) -> Value {
    item["name"] = json!(public);
    item
}

/// A provider's JSON-RPC error, passed through.
fn provider_error(error: Value) -> RpcError {
    RpcError {
        code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
        message: error.get("message").and_then(Value::as_str).unwrap_or("the provider returned an error").to_owned(),
        data: error.get("data").cloned(),
    }
}

/// The name a provider's resource or template is listed by: namespaced like a tool's, but
/// with no rule on its characters — the URI identifies it, the name only labels it.
fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn label(namespace: &str, name: &str) -> String {
    format!("{namespace}__{name}")
}

/// `-32002`: no resource has `uri`.
fn not_a_resource(uri: &str) -> RpcError {
    RpcError { code: -32002, message: format!("resource not found: {uri}"), data: Some(json!({"uri": uri})) }
}

/// Sends a non-tool request to a provider for `asker`; its failures become JSON-RPC errors.
async fn forward(provider: &Arc<Provider>, method: &str, params: Value, asker: &Asker<'_>) -> Result<Value, RpcError> {
    let mut params = framing::without_envelope(params);
    // No upcalls come back for these: a client's progress token would only be confused
    // with the hub's own tokens (the ids of its requests on that pipe).
    if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove("progressToken");
    }
    match provider.call((method, params), None, asker, |_, _| {}).await {
        Ok(result) => Ok(result.into_value()),
        Err(CallFailure::Error(error)) => Err(provider_error(error)),
        Err(failure) => Err(RpcError { code: -32603, message: failure.to_string(), data: None }),
    }
}

/// 128 random bits, hex: from `getrandom`, or `/dev/urandom` where that is missing.
fn session_id() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let filled =
        rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).is_ok_and(|n| n == bytes.len());
    if !filled {
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
        if let Err(e) = read {
            tracing::error!("no randomness for a session id: {e}");
        }
    }
    data_encoding::HEXLOWER.encode(&bytes)
}

/// Whether `view` offers provider `spec`'s prompts and resources: as the view says, and
/// one kept off the main endpoint ([`ProviderSpec::on_main`]) only on the others.
fn offers(view: &View, spec: &ProviderSpec) -> bool {
    view.offers_provider(&spec.id) && (spec.on_main || !matches!(view, View::Main))
}

/// Whether provider `spec`'s items of `kind` take part in the names `view` shows: on a
/// profile only those it may offer (its names are decided by its own providers), on the
/// main endpoint every provider's (the hub's renaming rules, as `/mcp/status` reports).
fn names_on(view: &View, kind: ItemKind, spec: &ProviderSpec) -> bool {
    match view {
        View::Profile(profile) => match kind {
            ItemKind::Prompt if profile.spec.prompts != Prompts::OfProviders => true,
            ItemKind::Tool | ItemKind::Prompt | ItemKind::Resource => offers(view, spec),
        },
        View::Main | View::Restricted => true,
    }
}

/// [`offers`], for the provider's tool whose public name is `public`.
fn offers_tool(view: &View, spec: &ProviderSpec, public: &str) -> bool {
    view.offers_tool(&spec.id, public) && (spec.on_main || !matches!(view, View::Main))
}

/// [`offers`], for the provider's prompt whose public name is `public`.
fn offers_prompt(view: &View, spec: &ProviderSpec, public: &str) -> bool {
    view.offers_prompt(&spec.id, public) && (spec.on_main || !matches!(view, View::Main))
}

impl Follow for Hub {
    async fn on_snapshot(self: Arc<Self>, snapshot: Arc<Catalog>) {
        self.reconcile(&snapshot).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list whose providers take nearly the whole wait to start, and then never tell
    /// what they list to the client's capability set, answers [`LIST_WAIT`] after it
    /// began — not [`LIST_WAIT`] later still (the learning has no deadline of its own).
    #[tokio::test(start_paused = true)]
    async fn a_list_waits_list_wait_in_all_for_starts_and_learning_together() {
        let began = tokio::time::Instant::now();
        let wait = ListWait::start();
        let almost = LIST_WAIT - Duration::from_millis(100);
        assert!(wait.until_done(tokio::time::sleep(almost)).await, "the starts end within the wait");
        assert!(!wait.until_done(std::future::pending::<()>()).await, "the learning never ends");
        assert_eq!(began.elapsed(), LIST_WAIT, "one deadline for both waits");
        let again = tokio::time::Instant::now();
        assert!(!wait.until_done(std::future::pending::<()>()).await);
        assert_eq!(again.elapsed(), Duration::ZERO, "a wait past the deadline returns at once");
    }
}
