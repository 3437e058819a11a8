//! What the hub offers beside the extensions' providers, as packages:
//!
//! - the enabled Suzu Lives capability packages: their MCP servers (`stdio` processes,
//!   `http` remote servers), their `env` and `headers` expanded from the host's
//!   environment when they are handed over — never written anywhere — and their skills
//!   offered over MCP as a prompt and read-only resources from the managed copy;
//! - the apps of the ChatOS UI Apps plugins in the catalog ([`UiApps`] follows it): each
//!   app's `ai.mcp` server under the provider id `uiapp:<pluginId>.<appId>`, every call to
//!   it carrying the app's `_meta`; its `ai.mcpPrompt` as prompts; and a profile of its
//!   own exposing what its `ai.mcpServers` and `ai.prompts` select.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use butler_catalog::chatos::{self, APP_PROVIDER, AppNames, Exposure, Plugin, Target};
use butler_catalog::manifest::Mcp;
use butler_catalog::suzu::imports::Imports;
use butler_catalog::{Catalog, Follow};
use butler_mcp::upstream::Remote;
use butler_mcp::{Hub, Package, Profile, ProfileSpec, Prompts, Server};

/// Where the enabled capability packages come from ([`Hub::set_packages`]).
pub const CAPABILITIES: &str = "capabilities";
/// Where the ChatOS apps come from ([`Hub::set_packages`]).
pub const UI_APPS: &str = "ui-apps";

fn default_timeout() -> Duration {
    Duration::from_secs(u64::from(Mcp::DEFAULT_TIMEOUT_SEC))
}

/// The enabled packages in `imports`, as the hub offers them (reads their records and
/// skills: call it off the async runtime's threads).
#[must_use]
pub fn enabled(imports: &Imports) -> Vec<Package> {
    imports
        .list()
        .into_iter()
        .filter(|record| record.enabled)
        .map(|record| {
            let stdio = record.stdio_server().map(|mcp| Server::Stdio(mcp, record.package_dir()));
            let remote =
                record.remote_server().map(|(url, headers)| Server::Remote(Remote { url, headers }, default_timeout()));
            Package {
                skill: imports.skill(&record),
                ..Package::new(record.provider_id(), record.namespace(), stdio.or(remote))
            }
        })
        .collect()
}

/// The ids of the providers the packages bring besides the extensions' — each ChatOS app's
/// server in `catalog` (`uiapp:<pluginId>.<appId>`), each enabled capability package's in
/// `imports` (`suzu:<id>`) — as the hub names them (what `mcp.legacyProviders` and the
/// profiles may name).
#[must_use]
pub fn provider_ids(catalog: &Catalog, imports: &Imports) -> Vec<String> {
    let apps = catalog.plugins.iter().flat_map(|plugin| {
        plugin.apps.iter().filter(|app| app.server.is_some()).map(|app| AppNames::of(plugin, app).provider)
    });
    let packages = imports
        .list()
        .into_iter()
        .filter(|record| record.enabled && (record.stdio_server().is_some() || record.remote_server().is_some()))
        .map(|record| record.provider_id());
    apps.chain(packages).collect()
}

/// Where a ChatOS app's data and the host's state are.
#[derive(Debug, Clone)]
pub struct AppPlaces {
    /// The host's state folder; each plugin's data folder is
    /// `<stateDir>/ui_apps/data/<pluginId>`.
    pub state_dir: PathBuf,
    /// The instance: both the apps' project root and their session root.
    pub instance_root: PathBuf,
}

impl AppPlaces {
    /// `plugin`'s places, its data folder created when it is missing.
    fn of(&self, plugin: &Plugin) -> chatos::Places {
        let data_dir = self.state_dir.join("ui_apps").join("data").join(&plugin.id);
        if let Err(e) = butler_catalog::files::create_private_dir(&data_dir) {
            tracing::warn!(plugin = %plugin.id, "cannot create the plugin's data folder {}: {e}", data_dir.display());
        }
        chatos::Places {
            data_dir,
            state_dir: self.state_dir.clone(),
            session_root: self.instance_root.clone(),
            project_root: self.instance_root.clone(),
        }
    }
}

/// The apps of the plugins in `catalog`, as the hub offers them, and each app's profile by
/// name (creates the plugins' data folders: call it off the async runtime's threads).
#[must_use]
pub fn chatos_apps(catalog: &Catalog, places: &AppPlaces) -> (Vec<Package>, BTreeMap<String, Arc<Profile>>) {
    let mut packages = Vec::new();
    let mut profiles = BTreeMap::new();
    for plugin in &catalog.plugins {
        let plugin_places = places.of(plugin);
        for app in &plugin.apps {
            let AppNames { provider: id, namespace, profile: normal } = AppNames::of(plugin, app);
            let server = app.server.as_ref().map(|s| match &s.target {
                Target::Command(argv) => Server::Stdio(stdio(argv, &namespace), plugin.dir.clone()),
                Target::Url(url, headers) => Server::Remote(
                    Remote { url: url.clone(), headers: headers.clone().into_iter().collect() },
                    default_timeout(),
                ),
            });
            let own_server = app.server.as_ref().is_some_and(|s| s.allow_sub);
            if let Some(profile) = app_profile(&normal, &id, &namespace, own_server, app) {
                profiles.entry(normal.clone()).or_insert(profile);
            }
            packages.push(Package {
                prompts: app.prompts.clone(),
                call_meta: app.server.as_ref().map(|_| chatos::call_meta(plugin, app, &plugin_places)),
                on_main: app.server.as_ref().is_none_or(|s| s.allow_main),
                ..Package::new(id, namespace, server)
            });
        }
    }
    (packages, profiles)
}

/// An app's stdio server as the hub runs it, in the plugin's folder.
fn stdio(argv: &[String], namespace: &str) -> Mcp {
    Mcp {
        transport: "stdio".to_owned(),
        command: argv.to_vec(),
        cwd: None,
        env: BTreeMap::new(),
        url: None,
        headers: std::collections::BTreeMap::new(),
        namespace: Some(namespace.to_owned()),
        timeout_sec: Mcp::DEFAULT_TIMEOUT_SEC,
    }
}

/// The profile `name` of `app` (provider `id`): its own server when `allowSub` lets it,
/// the servers its `ai.mcpServers` selects (a name is a provider id: an extension's id,
/// `suzu:<id>`, or another app's `<pluginId>.<appId>`), the prompts its `ai.prompts`
/// selects and its own. `None` when the name cannot be a profile's.
fn app_profile(name: &str, id: &str, namespace: &str, own_server: bool, app: &chatos::App) -> Option<Arc<Profile>> {
    let own = || own_server.then(|| id.to_owned());
    let (providers, exclude) = match &app.servers_exposed {
        Exposure::All => (None, if own_server { Vec::new() } else { vec![format!("{namespace}__*")] }),
        Exposure::Off => (Some(own().into_iter().collect()), Vec::new()),
        Exposure::Listed(names) => {
            let mut ids: Vec<String> = own().into_iter().collect();
            for listed in names {
                ids.extend([listed.clone(), format!("{APP_PROVIDER}{listed}"), format!("suzu:{listed}")]);
            }
            (Some(ids), Vec::new())
        }
    };
    let own_prompts = app.prompts.iter().map(|p| p.name.clone());
    let prompts = match &app.prompts_exposed {
        Exposure::All => Prompts::All,
        Exposure::Off => Prompts::Named(own_prompts.collect()),
        Exposure::Listed(names) => Prompts::Named(names.iter().cloned().chain(own_prompts).collect()),
    };
    let spec = ProfileSpec { providers, exclude, prefixed: true, prompts, ..ProfileSpec::default() };
    match Profile::new(name, spec) {
        Ok(profile) => Some(Arc::new(profile)),
        Err(e) => {
            tracing::warn!(app = %id, "this app has no profile of its own: {e}");
            None
        }
    }
}

/// Keeps the hub's ChatOS apps in line with the catalog, then reconciles the hub: what
/// follows the catalog for the hub.
pub struct UiApps {
    hub: Arc<Hub>,
    places: AppPlaces,
}

impl UiApps {
    /// Follows the catalog for `hub`.
    #[must_use]
    pub fn new(hub: Arc<Hub>, state_dir: &Path, instance_root: &Path) -> Self {
        Self { hub, places: AppPlaces { state_dir: state_dir.to_owned(), instance_root: instance_root.to_owned() } }
    }
}

impl Follow for UiApps {
    async fn on_snapshot(self: Arc<Self>, snapshot: Arc<Catalog>) {
        let (catalog, places) = (Arc::clone(&snapshot), self.places.clone());
        match tokio::task::spawn_blocking(move || chatos_apps(&catalog, &places)).await {
            Ok((packages, profiles)) => {
                self.hub.set_packages(UI_APPS, packages);
                self.hub.set_package_profiles(profiles);
            }
            Err(e) => tracing::error!("the ChatOS apps could not be read from the catalog: {e}"),
        }
        self.hub.reconcile(&snapshot).await;
    }
}
