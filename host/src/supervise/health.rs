//! Health probes: `health.url` (HTTP GET, 2xx healthy), `health.exec` (exit 0
//! healthy), or by default a TCP connect to `hosted.port`.

use std::time::Duration;

use crate::catalog::Extension;
use butler_process::{HostEnv, Launch, LaunchError, keeper};

/// Between probes of a healthy or unhealthy item, unless `health.intervalMs` says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(8000);

/// A probe that has not answered by then has failed: a health check is a quick question,
/// and a stuck one must not hide the next.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// How a running item is probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// GET this URL; 2xx is healthy.
    Url(String),
    /// Run this; exit 0 is healthy.
    Exec(Launch),
    /// Connect to this loopback port.
    Port(u16),
}

/// One probe's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Whether the probe passed (a 2xx answer, exit 0, or the port taking a connection).
    pub ok: bool,
    /// What was seen (`HTTP 200`, `exit 1: …`, `connection refused`).
    pub detail: String,
}

impl Outcome {
    fn ok(detail: impl Into<String>) -> Self {
        Self { ok: true, detail: detail.into() }
    }

    fn failed(detail: impl Into<String>) -> Self {
        Self { ok: false, detail: detail.into() }
    }
}

impl Probe {
    /// The probe of `extension`, if it has one, and its interval.
    ///
    /// # Errors
    /// When its `health.exec` cannot be launched.
    pub fn of(extension: &Extension, host: &HostEnv) -> Result<Option<(Self, Duration)>, LaunchError> {
        let manifest = &extension.manifest;
        let Some(hosted) = manifest.hosted.as_ref() else { return Ok(None) };
        let health = manifest.health.as_ref();
        let interval = health.and_then(|h| h.interval_ms).map_or(DEFAULT_INTERVAL, Duration::from_millis);
        let probe = match health {
            Some(h) if h.url.is_some() => h.url.clone().map(Self::Url),
            Some(h) if h.exec.is_some() => {
                let argv = h.exec.clone().unwrap_or_default();
                Some(Self::Exec(Launch::argv(&argv, hosted.cwd.as_deref(), &hosted.env, &extension.dir, host)?))
            }
            _ => hosted.port.map(Self::Port),
        };
        Ok(probe.map(|p| (p, interval)))
    }

    /// Runs the probe once, within [`PROBE_TIMEOUT`].
    pub async fn run(&self) -> Outcome {
        match tokio::time::timeout(PROBE_TIMEOUT, self.attempt()).await {
            Ok(outcome) => outcome,
            Err(_) => Outcome::failed(format!("no answer within {} s", PROBE_TIMEOUT.as_secs())),
        }
    }

    async fn attempt(&self) -> Outcome {
        match self {
            Self::Port(port) => match tokio::net::TcpStream::connect(("127.0.0.1", *port)).await {
                Ok(_) => Outcome::ok(format!("port {port} accepts connections")),
                Err(e) => Outcome::failed(format!("port {port}: {e}")),
            },
            Self::Url(url) => {
                let url = url.clone();
                tokio::task::spawn_blocking(move || get(&url))
                    .await
                    .unwrap_or_else(|e| Outcome::failed(format!("probe failed: {e}")))
            }
            Self::Exec(launch) => exec(launch).await,
        }
    }
}

fn get(url: &str) -> Outcome {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(PROBE_TIMEOUT))
        .max_redirects(0)
        .build()
        .into();
    match agent.get(url).call() {
        Ok(response) if response.status().is_success() => Outcome::ok(format!("HTTP {}", response.status().as_u16())),
        Ok(response) => Outcome::failed(format!("HTTP {}", response.status().as_u16())),
        Err(e) => Outcome::failed(format!("GET {url}: {e}")),
    }
}

/// Runs the probe command under a keeper (so a host killed mid-probe leaves nothing
/// behind); its output's last line becomes the detail. A probe that overruns is stopped by
/// dropping this future: the keeper's whole tree is killed.
async fn exec(launch: &Launch) -> Outcome {
    let mut kept = match keeper::spawn_kept(launch, keeper::Input::Null) {
        Ok(kept) => kept,
        Err(e) => return Outcome::failed(format!("cannot start `{}`: {e}", launch.program())),
    };
    let group = kept.group;
    let guard = GroupGuard(Some(group));
    let (out, err) = (kept.child.stdout.take(), kept.child.stderr.take());
    let (status, mut output, errors) = tokio::join!(kept.child.wait(), head(out), head(err));
    output.extend(errors);
    guard.disarm();
    let text = String::from_utf8_lossy(&output);
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default().trim().to_owned();
    match status {
        Ok(status) if status.success() => Outcome::ok(if last.is_empty() { "exit 0".to_owned() } else { last }),
        Ok(status) => {
            let code = status.code().map_or_else(|| "killed".to_owned(), |c| format!("exit {c}"));
            Outcome::failed(if last.is_empty() { code } else { format!("{code}: {last}") })
        }
        Err(e) => Outcome::failed(e.to_string()),
    }
}

/// The first 4 KiB of a probe's output.
async fn head(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    if let Some(pipe) = pipe {
        let _ = pipe.take(4096).read_to_end(&mut buf).await;
    }
    buf
}

/// Kills a probe's keeper and everything below it — processes that left its group
/// included — if the probe is abandoned (timed out) before it finished.
struct GroupGuard(Option<u32>);

impl GroupGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            butler_process::tree::kill_tree(group);
        }
    }
}
