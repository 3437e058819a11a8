//! From a manifest's `command`, `cwd` and `env` to what is executed.
//!
//! - A string command runs through the owner's login shell, `$SHELL -lic`, so it sees the
//!   same `PATH` as their terminal; with no `$SHELL`, `/bin/sh -c`.
//! - An argv vector is executed directly. `argv[0]` of `python` or `bun` becomes the
//!   instance's configured interpreter; a relative `argv[0]` with a `/` (`./run.sh`,
//!   `bin/server`), and an interpreter's relative script argument, resolve against the
//!   manifest directory.
//! - The working directory defaults to the manifest directory (relative `cwd` is resolved
//!   against it); `env` is merged over the host's environment, and the host adds its own
//!   `BUTLER_*` variables last.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use butler_catalog::manifest::CommandLine;

/// The commands whose `argv[0]` is replaced by a configured interpreter.
const INTERPRETED: [&str; 2] = ["python", "bun"];

/// What every process the host starts sees, whatever its manifest says: the instance's
/// interpreters and the `BUTLER_*` variables.
#[derive(Debug, Clone, Default)]
pub struct HostEnv {
    interpreters: Vec<(String, String)>,
    vars: Vec<(String, String)>,
}

impl HostEnv {
    /// An environment of configured `interpreters` (`("python", "/usr/bin/python3")`)
    /// and the host's `vars`, set last on every process.
    #[must_use]
    pub fn new(interpreters: Vec<(String, String)>, vars: Vec<(String, String)>) -> Self {
        Self { interpreters, vars }
    }

    /// The configured interpreter for `name` (`python`, `bun`), if any.
    #[must_use]
    pub fn interpreter(&self, name: &str) -> Option<&str> {
        self.interpreters.iter().find(|(n, _)| n == name).map(|(_, path)| path.as_str())
    }

    /// The host's own variables (`BUTLER_HOST_URL`, its legacy alias, `BUTLER_WORKDIR`,
    /// and one per instance folder, like `BUTLER_SELF_ROOT`).
    #[must_use]
    pub fn vars(&self) -> &[(String, String)] {
        &self.vars
    }

    /// `argv` with `argv[0]` resolved: a configured interpreter for `python`/`bun`, a
    /// relative path with a `/` against `dir`; an interpreter's relative script argument
    /// against `dir` too, when that file exists there.
    #[must_use]
    pub fn resolve_argv(&self, dir: &Path, argv: &[String]) -> Vec<String> {
        let mut argv = argv.to_vec();
        let Some(first) = argv.first().cloned() else { return argv };
        let interpreted = INTERPRETED.contains(&first.as_str());
        if let Some(interpreter) = self.interpreter(&first) {
            argv[0] = interpreter.to_owned();
        } else if first.contains('/') && Path::new(&first).is_relative() {
            argv[0] = dir.join(&first).display().to_string();
        }
        if interpreted && let Some(script) = argv.get_mut(1) {
            let beside = dir.join(script.as_str());
            if !script.starts_with('-') && Path::new(script.as_str()).is_relative() && beside.is_file() {
                *script = beside.display().to_string();
            }
        }
        argv
    }
}

/// A process ready to be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Program and arguments, resolved.
    pub argv: Vec<String>,
    /// Working directory (absolute).
    pub cwd: PathBuf,
    /// Variables set over the host's environment, in order (later wins).
    pub env: Vec<(String, String)>,
    /// Whether the process starts from the host's environment (`false`: from `env` alone).
    pub inherit_env: bool,
}

/// The host's variables a process with a scrubbed environment still sees: enough to find
/// programs, a home, a locale and a temporary folder — none of the tokens and keys the
/// rest of the host's environment may hold.
pub const SAFE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "TERM",
    "SHELL",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
];

/// A command that cannot be started as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// An empty command line.
    #[error("the command is empty")]
    EmptyCommand,
    /// The working directory is missing.
    #[error("working directory {0} does not exist")]
    MissingCwd(PathBuf),
}

impl Launch {
    /// The launch of `command` for the extension in `dir`, with the manifest's `cwd` and
    /// `env`.
    ///
    /// # Errors
    /// [`LaunchError`] for an empty command or a missing working directory.
    pub fn of(
        command: &CommandLine,
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
        dir: &Path,
        host: &HostEnv,
    ) -> Result<Self, LaunchError> {
        let argv = match command {
            CommandLine::Shell(line) if line.trim().is_empty() => return Err(LaunchError::EmptyCommand),
            CommandLine::Shell(line) => shell_argv(line),
            CommandLine::Argv(argv) if argv.is_empty() => return Err(LaunchError::EmptyCommand),
            CommandLine::Argv(argv) => host.resolve_argv(dir, argv),
        };
        Self::with_argv(argv, cwd, env, dir, host)
    }

    /// A launch of an already-split `argv` (a health probe's `exec`), resolved like a
    /// manifest's argv command.
    ///
    /// # Errors
    /// As [`Launch::of`].
    pub fn argv(
        argv: &[String],
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
        dir: &Path,
        host: &HostEnv,
    ) -> Result<Self, LaunchError> {
        if argv.is_empty() {
            return Err(LaunchError::EmptyCommand);
        }
        Self::with_argv(host.resolve_argv(dir, argv), cwd, env, dir, host)
    }

    fn with_argv(
        argv: Vec<String>,
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
        dir: &Path,
        host: &HostEnv,
    ) -> Result<Self, LaunchError> {
        let cwd = cwd.map_or_else(|| dir.to_path_buf(), |c| dir.join(c));
        if !cwd.is_dir() {
            return Err(LaunchError::MissingCwd(cwd));
        }
        let env = env.iter().map(|(k, v)| (k.clone(), v.clone())).chain(host.vars().iter().cloned()).collect();
        Ok(Self { argv, cwd, env, inherit_env: true })
    }

    /// The same launch with a scrubbed environment: [`SAFE_ENV`] from the host, then this
    /// launch's variables, then `extra`.
    #[must_use]
    pub fn scrubbed(mut self, extra: &[(&str, &str)]) -> Self {
        let safe = SAFE_ENV.iter().filter_map(|k| Some(((*k).to_owned(), std::env::var(k).ok()?)));
        let extra = extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        self.env = safe.chain(self.env).chain(extra).collect();
        self.inherit_env = false;
        self
    }

    /// The program's name, for messages.
    #[must_use]
    pub fn program(&self) -> &str {
        self.argv.first().map_or("", String::as_str)
    }
}

/// `$SHELL -lic LINE`, or `/bin/sh -c LINE` when no shell is set.
fn shell_argv(line: &str) -> Vec<String> {
    match std::env::var("SHELL") {
        Ok(shell) if !shell.trim().is_empty() => vec![shell, "-lic".to_owned(), line.to_owned()],
        _ => vec!["/bin/sh".to_owned(), "-c".to_owned(), line.to_owned()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostEnv {
        HostEnv {
            interpreters: vec![("python".into(), "/opt/py/bin/python3".into())],
            vars: vec![("BUTLER_HOST_URL".into(), "http://127.0.0.1:1".into())],
        }
    }

    fn argv(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn interpreters_and_relative_paths_resolve_against_the_manifest_dir() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("server.py"), "").expect("write");
        let d = dir.path();
        let host = host();
        assert_eq!(
            host.resolve_argv(d, &argv(&["python", "server.py", "--port", "1"])),
            argv(&["/opt/py/bin/python3", &d.join("server.py").display().to_string(), "--port", "1"])
        );
        // bun is not configured: left to PATH, but its script still resolves.
        std::fs::write(d.join("app.ts"), "").expect("write");
        assert_eq!(
            host.resolve_argv(d, &argv(&["bun", "app.ts"])),
            argv(&["bun", &d.join("app.ts").display().to_string()])
        );
        // A script that is not there, or a flag, is left alone.
        assert_eq!(
            host.resolve_argv(d, &argv(&["python", "-m", "http.server"])),
            argv(&["/opt/py/bin/python3", "-m", "http.server"])
        );
        assert_eq!(host.resolve_argv(d, &argv(&["python", "nope.py"])), argv(&["/opt/py/bin/python3", "nope.py"]));
        assert_eq!(host.resolve_argv(d, &argv(&["./run.sh", "x.py"]))[0], d.join("./run.sh").display().to_string());
        assert_eq!(host.resolve_argv(d, &argv(&["sleep", "1"])), argv(&["sleep", "1"]));
        assert_eq!(host.resolve_argv(d, &argv(&["/bin/echo"])), argv(&["/bin/echo"]));
    }

    #[test]
    fn cwd_defaults_to_the_manifest_dir_and_must_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("work")).expect("mkdir");
        let env = BTreeMap::from([("A".to_owned(), "1".to_owned()), ("BUTLER_HOST_URL".to_owned(), "mine".to_owned())]);
        let command = CommandLine::Argv(argv(&["true"]));
        let launch = Launch::of(&command, None, &env, dir.path(), &host()).expect("launch");
        assert_eq!(launch.cwd, dir.path());
        // The host's variables come last, so a manifest cannot redirect BUTLER_HOST_URL.
        assert_eq!(launch.env.last(), Some(&("BUTLER_HOST_URL".to_owned(), "http://127.0.0.1:1".to_owned())));
        let launch = Launch::of(&command, Some("work"), &env, dir.path(), &host()).expect("launch");
        assert_eq!(launch.cwd, dir.path().join("work"));
        let missing = Launch::of(&command, Some("gone"), &env, dir.path(), &host());
        assert_eq!(missing, Err(LaunchError::MissingCwd(dir.path().join("gone"))));
        let empty = Launch::of(&CommandLine::Shell("  ".into()), None, &env, dir.path(), &host());
        assert_eq!(empty, Err(LaunchError::EmptyCommand));
    }
}
