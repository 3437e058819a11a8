//! Host settings from `$XDG_CONFIG_HOME/butler/butler.toml`. Flags and environment
//! variables win over it; it wins over the built-in defaults.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;

/// What the settings file may set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Default instance directory.
    pub workdir: Option<PathBuf>,
    /// Default port.
    pub port: Option<u16>,
    /// Default bind address.
    pub bind: Option<IpAddr>,
    /// Default log filter (`RUST_LOG` syntax).
    pub log: Option<String>,
}

impl Settings {
    /// Reads the settings file if there is one.
    pub fn load() -> anyhow::Result<Self> {
        let Some(path) = path() else {
            return Ok(Self::default());
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read settings {}", path.display()));
            }
        };
        toml::from_str(&text).with_context(|| format!("invalid settings file {}", path.display()))
    }
}

fn path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::home_dir().map(|h| h.join(".config")))?;
    Some(base.join("butler").join("butler.toml"))
}

/// The host's own lines at `info`; the file watcher's warnings about watches it could not
/// remove as folders went away (a normal end of a watch, at every shutdown) are not shown.
const DEFAULT_LOG: &str = "info,notify=error";

/// Starts `tracing` on stderr: `RUST_LOG` if set, else the settings' `log`, else `info`
/// ([`DEFAULT_LOG`]).
pub fn init_logging(settings: &Settings) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .ok()
        .or_else(|| settings.log.as_deref().and_then(|l| tracing_subscriber::EnvFilter::try_new(l).ok()))
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(DEFAULT_LOG));
    // Colours only for a person at a terminal, and never when they asked for none.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colour).init();
}

/// The instance directory: flag or `BUTLER_WORKDIR` (clap merges those), then settings,
/// then `~/.dsh/butler`.
pub fn workdir(flag: Option<PathBuf>, settings: &Settings) -> anyhow::Result<PathBuf> {
    flag.or_else(|| settings.workdir.clone())
        .or_else(butler_host::instance::Instance::default_workdir)
        .context("cannot find a home directory for the default instance; pass --workdir DIR")
}
