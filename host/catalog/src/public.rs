//! The public view of the catalog: the only shape of an extension that leaves the host.
//!
//! Built field by field from an allow-list, so nothing that runs (`hosted.command`,
//! `exec` vectors, `mcp.command`), no environment value and no health probe ever appears
//! in it, whatever a manifest adds in the future.

use serde::Serialize;

use super::manifest::{Action, CommandArg, Confirm, Effect, PanelSize, ReportDoor, ReportShape, Risk};
use super::{Catalog, Diagnostic, Extension, Icon};

/// URL prefix of the host API.
pub const API_PREFIX: &str = "/myspace-butler/api";

/// `GET /catalog`.
#[derive(Debug, Serialize)]
pub struct PublicCatalog<'a> {
    /// Registered extensions in scan order.
    pub extensions: Vec<PublicExtension<'a>>,
    /// What is wrong with each manifest that was rejected or registered with a warning.
    pub diagnostics: &'a [Diagnostic],
    /// The apps of the ChatOS UI Apps plugins found, in scan order.
    pub apps: Vec<PublicApp<'a>>,
}

/// One app of a ChatOS UI Apps plugin, as clients see it (`GET /apps` has the rest).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicApp<'a> {
    /// The plugin's id.
    pub plugin_id: &'a str,
    /// The app's id.
    pub app_id: &'a str,
    /// The app's name, as its plugin declares it.
    pub name: &'a str,
    /// The app's description, as its plugin declares it (may be empty).
    pub description: &'a str,
}

impl<'a> PublicCatalog<'a> {
    /// The public view of a snapshot.
    #[must_use]
    pub fn of(catalog: &'a Catalog) -> Self {
        Self {
            extensions: catalog.extensions.iter().map(|e| PublicExtension::of(e)).collect(),
            diagnostics: &catalog.diagnostics,
            apps: catalog
                .plugins
                .iter()
                .flat_map(|p| {
                    p.apps.iter().map(|a| PublicApp {
                        plugin_id: &p.id,
                        app_id: &a.id,
                        name: &a.name,
                        description: &a.description,
                    })
                })
                .collect(),
        }
    }
}

/// One extension, as clients see it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicExtension<'a> {
    /// The manifest's `id`, unique in the catalog; the path segment of its API routes.
    pub id: &'a str,
    /// `tool`, `service` or `faculty`.
    pub kind: &'static str,
    /// The manifest's `name`, shown in the console.
    pub name: &'a str,
    /// The manifest's `description`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<&'a str>,
    /// Icon (tools and services).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icon: Option<PublicIcon<'a>>,
    /// The manifest's `version` (default 1).
    pub version: u32,
    /// The manifest's `frequency`: `low` puts it in the console's folded low-frequency area.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency: Option<&'a str>,
    /// `hosted.group`: the console group it is listed under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<&'a str>,
    /// Extension directory relative to the instance root.
    pub dir: &'a str,
    /// Whether the host runs a process for it.
    pub hosted: bool,
    /// Whether it starts with the host.
    pub auto_start: bool,
    /// Port of the hosted process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Entry URL (`http://127.0.0.1:{port}` when only a port is given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Local path for the open button.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_path: Option<&'a str>,
    /// The manifest's `panelUrl`: the page the console's panel embeds (tools only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub panel_url: Option<&'a str>,
    /// The manifest's `panelSize` (tools only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub panel_size: Option<PanelSize>,
    /// The manifest's `actions`: buttons on the tool's console row (tools only).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub actions: &'a [Action],
    /// Faculty commands (without what they run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<PublicCommand<'a>>,
    /// Faculty reports (without what they run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reports: Vec<PublicReport<'a>>,
    /// Delegations (without instructions).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub delegations: Vec<PublicDelegation<'a>>,
    /// MCP namespace, when the extension is an MCP provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_namespace: Option<String>,
}

impl<'a> PublicExtension<'a> {
    /// The public view of one extension.
    #[must_use]
    pub fn of(ext: &'a Extension) -> Self {
        let m = &ext.manifest;
        let hosted = m.hosted.as_ref();
        Self {
            id: &m.id,
            kind: m.kind.as_str(),
            name: &m.name,
            description: m.description.as_deref(),
            icon: (m.kind != super::Kind::Faculty).then(|| PublicIcon::of(ext)),
            version: m.version,
            frequency: m.frequency.as_deref(),
            group: hosted.and_then(|h| h.group.as_deref()),
            dir: &ext.display_dir,
            hosted: hosted.is_some(),
            auto_start: hosted.is_some_and(|h| h.auto_start),
            port: hosted.and_then(|h| h.port),
            url: hosted.and_then(|h| h.url.clone().or_else(|| h.port.map(|p| format!("http://127.0.0.1:{p}")))),
            open_path: hosted.and_then(|h| h.open_path.as_deref()),
            panel_url: m.panel_url.as_deref(),
            panel_size: m.panel_size,
            actions: &m.actions,
            commands: m
                .commands
                .iter()
                .map(|c| PublicCommand {
                    id: &c.id,
                    description: c.description.as_deref(),
                    effect: c.effect,
                    args: &c.args,
                    input: c.input.as_ref(),
                    confirm: c.confirm.as_ref(),
                    owner: c.owner,
                    operator: c.operator,
                })
                .collect(),
            reports: m
                .reports
                .iter()
                .map(|r| PublicReport { id: &r.id, name: &r.name, shape: r.shape, provides: r.provides })
                .collect(),
            delegations: m
                .delegations
                .iter()
                .map(|d| PublicDelegation { id: &d.id, risk: d.risk, timeout_sec: d.timeout_sec })
                .collect(),
            mcp_namespace: m.mcp.as_ref().map(|mcp| mcp.effective_namespace(&m.id)),
        }
    }
}

/// How the console shows an icon.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum PublicIcon<'a> {
    /// An image the host serves at `url`.
    Image {
        /// Where to fetch it.
        url: String,
    },
    /// An external or data URL.
    Url {
        /// As the manifest wrote it (`http(s)://` or `data:image/`).
        url: &'a str,
    },
    /// Emoji or short text.
    Text {
        /// The manifest's icon text, cut to 8 characters.
        text: &'a str,
    },
    /// A letter derived from the name.
    Letter {
        /// The name's first letter or digit, upper-cased (`?` when it has none).
        text: &'a str,
    },
}

impl<'a> PublicIcon<'a> {
    fn of(ext: &'a Extension) -> Self {
        match &ext.icon {
            Icon::Image { .. } => Self::Image { url: format!("{API_PREFIX}/extensions/{}/icon", ext.id()) },
            Icon::Url(url) => Self::Url { url },
            Icon::Text(text) => Self::Text { text },
            Icon::Letter(text) => Self::Letter { text },
        }
    }
}

/// A faculty command without what it runs.
#[derive(Debug, Serialize)]
pub struct PublicCommand<'a> {
    /// Its `id`, unique in the faculty; callers name the command by it.
    pub id: &'a str,
    /// The manifest's `description` of it, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<&'a str>,
    /// `read`, `write` or `external`.
    pub effect: Effect,
    /// The manifest's `args`: the arguments callers may pass, with their patterns.
    pub args: &'a [CommandArg],
    /// Its input schema, when declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<&'a serde_json::Value>,
    /// Its confirming step, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirm: Option<&'a Confirm>,
    /// Only the owner may run it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub owner: bool,
    /// Only the operator (the CLI) may run it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub operator: bool,
}

/// A faculty report without what it runs.
#[derive(Debug, Serialize)]
pub struct PublicReport<'a> {
    /// Its `id`, unique in the faculty.
    pub id: &'a str,
    /// Its `name`, shown as the report's title.
    pub name: &'a str,
    /// The shape its output has.
    pub shape: ReportShape,
    /// What the host offers through it (`context`, `review-queue`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provides: Option<ReportDoor>,
}

/// A delegation without its instructions.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PublicDelegation<'a> {
    /// Its `id`, unique in the extension (called as `<extensionId>/<id>`).
    pub id: &'a str,
    /// Whether its result is adopted at once or waits for the owner.
    pub risk: Risk,
    /// Seconds a session may take on it.
    pub timeout_sec: u32,
}
