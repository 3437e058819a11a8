//! Automations: jobs the host's own scheduler runs as agent sessions, on cron schedules in
//! a time zone (the root config's `automations.timeZone`, default the system's local zone:
//! [`local_time_zone`]).
//!
//! `POST /automations` registers the host's jobs — those the faculties' manifests declare
//! (`automations[]`; the built-in distill faculty declares the hourly distill job) —
//! idempotently by title: a job registered as it is stays (its history
//! too), a changed one is replaced, titles without the [`SUFFIX`] (the owner's own jobs)
//! are never touched, and the retired ones ([`RETIRED`]) are removed. The jobs live in
//! `<stateDir>/automations.json` (atomic writes).
//!
//! A job is due when its schedule's next time after its last run (or its registration)
//! has come: so a run missed while the host was down runs once at start. Runs of a job
//! never overlap. Each runs as an agent session with the distilling agent's tool set (the
//! restricted endpoint's) and ends by submitting `{outcome, summary}`; the outcome, the
//! session (its log is `logs/agent-<session>.log`) and any error stay on the job.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_catalog::lock;
use butler_catalog::{Catalog, Kind};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{Agents, Purpose, Task, Tools};
pub use crate::instance::config::AutomationsConfig;

/// What marks a job as the host's own.
pub const SUFFIX: &str = " · Butler";
/// The host's jobs of earlier versions, removed at registration.
pub const RETIRED: &[&str] = &["日报 · Butler", "周报 · Butler", "周检 · Butler"];
/// The time zone when the root config names none and the system's cannot be told.
pub const FALLBACK_TIME_ZONE: &str = "UTC";
/// The file under the state directory.
pub const FILE: &str = "automations.json";
/// How long a run's session may take when `agent.timeoutSec` says nothing.
pub const DEFAULT_RUN_LIMIT: Duration = Duration::from_secs(900);
/// The longest the scheduler sleeps before it looks again.
const TICK: Duration = Duration::from_secs(60);

/// What an automation's session submits.
fn result_schema() -> Value {
    json!({
        "type": "object",
        "required": ["outcome", "summary"],
        "properties": {
            "outcome": {"type": "string", "enum": ["done", "nothing", "failed"]},
            "summary": {"type": "string", "maxLength": 2000},
        }
    })
}

/// One job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    /// Its title (unique).
    pub title: String,
    /// A cron expression: five fields, or six with seconds first.
    pub schedule: String,
    /// The time zone it is read in.
    pub time_zone: String,
    /// What its agent is told.
    pub instructions: String,
    /// When it was registered (or last replaced).
    pub registered_at: String,
    /// How its last run went (none before it first runs).
    #[serde(default)]
    pub last: Option<LastRun>,
}

/// A job's last run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastRun {
    /// When it started.
    pub started_at: String,
    /// When it ended.
    pub ended_at: Option<String>,
    /// `running`, `ok` or `failed`.
    pub outcome: String,
    /// Its agent session (its log: `logs/agent-<session>.log`).
    pub session: Option<String>,
    /// What the agent submitted.
    pub result: Option<Value>,
    /// Why it failed.
    pub error: Option<String>,
}

/// What a registration did, by title.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Registered {
    /// New jobs.
    pub added: Vec<String>,
    /// Jobs whose definition changed.
    pub replaced: Vec<String>,
    /// Jobs already registered as they are.
    pub kept: Vec<String>,
    /// Retired jobs removed.
    pub removed: Vec<String>,
}

/// Why the automations could not be set up or changed.
#[derive(Debug, thiserror::Error)]
pub enum AutomationError {
    /// The root config's time zone or a schedule is wrong.
    #[error("{0}")]
    Config(String),
    /// The file could not be written.
    #[error("the automations could not be saved: {0}")]
    Io(#[from] std::io::Error),
}

/// The scheduler and its jobs.
pub struct Automations {
    path: PathBuf,
    agents: Arc<Agents>,
    /// The root config's `automations`, and the zone the host's jobs are read in
    /// (`automations.timeZone`, else the local one); changed live ([`Self::retune`]).
    settings: Mutex<(AutomationsConfig, String)>,
    /// How long a run's agent session may take (`agent.timeoutSec`, changed live).
    run_limit_ms: std::sync::atomic::AtomicU64,
    jobs: Mutex<Vec<Job>>,
    running: Mutex<HashSet<String>>,
    changed: Notify,
}

impl Automations {
    /// How long a run's agent session may take.
    fn run_limit(&self) -> Duration {
        Duration::from_millis(self.run_limit_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// From the next run on, a run's agent session may take `limit` (none: the default),
    /// and host jobs registered from then on take `config`'s time zone and schedules (the
    /// jobs registered before keep theirs until registered again). `config` is one the
    /// root config's checks let through ([`AutomationsConfig::problems`]).
    pub fn retune(&self, config: AutomationsConfig, limit: Option<Duration>) {
        self.run_limit_ms.store(millis(limit.unwrap_or(DEFAULT_RUN_LIMIT)), std::sync::atomic::Ordering::Relaxed);
        let zone = zone_of(&config);
        *lock(&self.settings) = (config, zone);
    }
    /// The jobs of the instance whose state directory is `state_dir`, run by `agents`; a run
    /// a stopped host left running is marked failed.
    ///
    /// # Errors
    /// A time zone or schedule in `config` that does not read; a jobs file that does not
    /// read (refused, not overwritten).
    pub fn open(
        state_dir: &Path,
        config: AutomationsConfig,
        run_limit: Option<Duration>,
        agents: Arc<Agents>,
    ) -> Result<Arc<Self>, AutomationError> {
        if let Some(problem) = config.problems().into_iter().next() {
            return Err(AutomationError::Config(format!("{}: {}", problem.pointer, problem.message)));
        }
        let zone = zone_of(&config);
        let path = state_dir.join(FILE);
        let mut jobs = read_jobs(&path)?;
        let mut interrupted = false;
        for job in &mut jobs {
            if let Some(last) = job.last.as_mut().filter(|l| l.outcome == "running") {
                last.outcome = "failed".to_owned();
                last.error = Some("the host stopped while it ran".to_owned());
                interrupted = true;
            }
        }
        let automations = Arc::new(Self {
            path,
            agents,
            settings: Mutex::new((config, zone)),
            run_limit_ms: std::sync::atomic::AtomicU64::new(millis(run_limit.unwrap_or(DEFAULT_RUN_LIMIT))),
            jobs: Mutex::new(jobs),
            running: Mutex::default(),
            changed: Notify::new(),
        });
        if interrupted {
            automations.save()?;
        }
        Ok(automations)
    }

    /// The host's jobs as they should be now: those the registered faculties of `catalog`
    /// declare (the first of a title wins), each with the root config's schedule for it
    /// when it names one.
    fn host_jobs(&self, catalog: &Catalog) -> Vec<Job> {
        let (config, time_zone) = lock(&self.settings).clone();
        let mut jobs: Vec<Job> = Vec::new();
        for declared in catalog.of_kind(Kind::Faculty).flat_map(|ext| ext.manifest.automations.iter()) {
            if jobs.iter().any(|j| j.title == declared.title) || !declared.title.ends_with(SUFFIX) {
                continue;
            }
            let schedule = config.schedules.get(&declared.title).unwrap_or(&declared.schedule);
            if let Err(e) = cron(schedule) {
                tracing::warn!(job = declared.title, "automations: not registered: {e}");
                continue;
            }
            jobs.push(Job {
                title: declared.title.clone(),
                schedule: schedule.clone(),
                time_zone: time_zone.clone(),
                instructions: declared.instructions.clone(),
                registered_at: now(),
                last: None,
            });
        }
        jobs
    }

    /// Registers the jobs the faculties of `catalog` declare (see the module's doc).
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn register(&self, catalog: &Catalog) -> Result<Registered, AutomationError> {
        let mut done = Registered::default();
        {
            let mut jobs = lock(&self.jobs);
            jobs.retain(|job| {
                let retired = RETIRED.contains(&job.title.as_str());
                if retired {
                    done.removed.push(job.title.clone());
                }
                !retired
            });
            for wanted in self.host_jobs(catalog) {
                match jobs.iter_mut().find(|job| job.title == wanted.title) {
                    Some(job) if same_definition(job, &wanted) => done.kept.push(wanted.title.clone()),
                    Some(job) => {
                        done.replaced.push(wanted.title.clone());
                        *job = Job { last: job.last.take(), ..wanted };
                    }
                    None => {
                        done.added.push(wanted.title.clone());
                        jobs.push(wanted);
                    }
                }
            }
        }
        self.save()?;
        self.changed.notify_one();
        Ok(done)
    }

    /// The time zone the host's jobs are read in: `automations.timeZone`, else the
    /// system's ([`local_time_zone`]).
    #[must_use]
    pub fn time_zone(&self) -> String {
        lock(&self.settings).1.clone()
    }

    /// Every job with its next run.
    #[must_use]
    pub fn list(&self) -> Vec<Value> {
        let running = lock(&self.running).clone();
        lock(&self.jobs)
            .iter()
            .map(|job| {
                let mut shown = serde_json::to_value(job).unwrap_or_default();
                shown["hostJob"] = json!(job.title.ends_with(SUFFIX));
                shown["running"] = json!(running.contains(&job.title));
                shown["nextRun"] = json!(next_run(job).map(|t| t.to_rfc3339()));
                if let Some(session) = job.last.as_ref().and_then(|l| l.session.as_ref()) {
                    shown["log"] = json!(format!("logs/agent-{session}.log"));
                }
                shown
            })
            .collect()
    }

    fn save(&self) -> Result<(), AutomationError> {
        let text = serde_json::to_vec_pretty(&json!({"jobs": *lock(&self.jobs)})).map_err(std::io::Error::other)?;
        butler_catalog::files::write_private(&self.path, &text)?;
        Ok(())
    }

    /// Runs due jobs from now on, for as long as the host runs.
    pub fn spawn(self: &Arc<Self>) {
        let automations = Arc::clone(self);
        tokio::spawn(async move {
            let mut told_unavailable = false;
            loop {
                let now = Utc::now();
                let jobs = lock(&automations.jobs).clone();
                let mut wake = now + chrono::Duration::from_std(TICK).unwrap_or_default();
                for job in jobs {
                    if lock(&automations.running).contains(&job.title) {
                        continue;
                    }
                    let Some(next) = next_run(&job) else { continue };
                    if next > now {
                        wake = wake.min(next);
                    } else if automations.agents.available() {
                        automations.start(job);
                    } else if !told_unavailable {
                        told_unavailable = true;
                        tracing::warn!(
                            job = job.title,
                            "automations: a job is due, but no agent is configured (`agent.command`)"
                        );
                    }
                }
                let sleep = (wake - Utc::now()).to_std().unwrap_or_default().min(TICK);
                let _ = tokio::time::timeout(sleep, automations.changed.notified()).await;
            }
        });
    }

    /// Starts a run of `job` on its own task.
    fn start(self: &Arc<Self>, job: Job) {
        lock(&self.running).insert(job.title.clone());
        let started = LastRun {
            started_at: now(),
            ended_at: None,
            outcome: "running".to_owned(),
            session: None,
            result: None,
            error: None,
        };
        self.set_last(&job.title, started.clone());
        let automations = Arc::clone(self);
        tokio::spawn(async move {
            let task = Task {
                purpose: Purpose::Automation,
                label: job.title.clone(),
                instructions: job.instructions.clone(),
                input: json!({"title": job.title, "startedAt": started.started_at}),
                tools: Tools::Restricted,
                result: Some(result_schema()),
                timeout: automations.run_limit(),
            };
            let ended = automations.agents.run(task).await;
            let mut last = LastRun { ended_at: Some(now()), session: Some(ended.session), ..started };
            match ended.outcome {
                Ok(result) => {
                    last.outcome = if result["outcome"] == "failed" { "failed" } else { "ok" }.to_owned();
                    last.result = Some(result);
                }
                Err(error) => {
                    last.outcome = "failed".to_owned();
                    last.error = Some(error.to_string());
                }
            }
            tracing::info!(job = job.title, outcome = last.outcome, "automations: a run ended");
            automations.set_last(&job.title, last);
            lock(&automations.running).remove(&job.title);
            automations.changed.notify_one();
        });
    }

    fn set_last(&self, title: &str, last: LastRun) {
        if let Some(job) = lock(&self.jobs).iter_mut().find(|j| j.title == title) {
            job.last = Some(last);
        }
        if let Err(e) = self.save() {
            tracing::warn!("automations: {e}");
        }
    }
}

/// The jobs saved at `path` (none when there is no file). A file that does not read is
/// refused, never overwritten: the owner's jobs are in it.
fn read_jobs(path: &Path) -> Result<Vec<Job>, AutomationError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(AutomationError::Io(e)),
    };
    #[derive(Deserialize)]
    struct Saved {
        jobs: Vec<Job>,
    }
    serde_json::from_slice::<Saved>(&bytes).map(|saved| saved.jobs).map_err(|e| {
        AutomationError::Config(format!(
            "{} does not read ({e}); fix or remove it (it holds the registered jobs)",
            path.display()
        ))
    })
}

fn same_definition(a: &Job, b: &Job) -> bool {
    (&a.schedule, &a.time_zone, &a.instructions) == (&b.schedule, &b.time_zone, &b.instructions)
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The system's local time zone as an IANA name: `TZ` when it names one (`Europe/Berlin`, or
/// `:Europe/Berlin`), else the zone `/etc/localtime` links to (or `/etc/timezone` names);
/// [`FALLBACK_TIME_ZONE`], with a note in the log, when neither does.
#[must_use]
pub fn local_time_zone() -> String {
    let tz = std::env::var("TZ").ok();
    let (zone, note) = local_zone_of(tz.as_deref(), || iana_time_zone::get_timezone().ok());
    if let Some(note) = note {
        tracing::info!("automations: {note}; set automations.timeZone in the root config to choose one");
    }
    zone
}

/// The zone `config` names, else the system's.
fn zone_of(config: &AutomationsConfig) -> String {
    config.time_zone.clone().unwrap_or_else(local_time_zone)
}

/// [`local_time_zone`] from `TZ` and what the system says: the zone, and a note when it is
/// the fallback.
fn local_zone_of(tz: Option<&str>, system: impl FnOnce() -> Option<String>) -> (String, Option<String>) {
    let named = |name: &str| Tz::from_str(name).is_ok().then(|| name.to_owned());
    if let Some(zone) = tz.map(|t| t.trim_start_matches(':')).filter(|t| !t.is_empty()).and_then(named) {
        return (zone, None);
    }
    match system() {
        Some(zone) if named(&zone).is_some() => (zone, None),
        other => {
            let what = match (tz.filter(|t| !t.is_empty()), other) {
                (Some(tz), _) => format!("TZ={tz} is not an IANA time zone and the system names none"),
                (None, Some(zone)) => format!("the system's time zone `{zone}` is not an IANA name"),
                (None, None) => "the system's time zone cannot be told (no TZ, no /etc/localtime link)".to_owned(),
            };
            (FALLBACK_TIME_ZONE.to_owned(), Some(format!("{what}: schedules are read in {FALLBACK_TIME_ZONE}")))
        }
    }
}

fn time_zone(name: &str) -> Result<Tz, AutomationError> {
    Tz::from_str(name).map_err(|_| {
        AutomationError::Config(format!("`{name}` is not a time zone (an IANA name, such as Asia/Shanghai)"))
    })
}

fn cron(schedule: &str) -> Result<Cron, BadSchedule> {
    crate::instance::config::cron(schedule).map_err(|error| BadSchedule { schedule: schedule.to_owned(), error })
}

/// A schedule that is not a cron expression.
#[derive(Debug, thiserror::Error)]
#[error("`{schedule}` is not a cron schedule: {error}")]
struct BadSchedule {
    schedule: String,
    error: croner::errors::CronError,
}

/// When `job` runs next: its schedule's first time after its last run began (or, never
/// run, after it was registered) — in the past when a run is due.
fn next_run(job: &Job) -> Option<DateTime<Utc>> {
    let tz = time_zone(&job.time_zone).ok()?;
    let schedule = cron(&job.schedule).ok()?;
    let since = job.last.as_ref().map_or(job.registered_at.as_str(), |l| l.started_at.as_str());
    let since = DateTime::parse_from_rfc3339(since).ok()?.with_timezone(&tz);
    schedule.find_next_occurrence(&since, false).ok().map(|t| t.with_timezone(&Utc))
}

/// `duration` in whole milliseconds.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(schedule: &str, since: &str, last: Option<&str>) -> Job {
        Job {
            title: "t · Butler".into(),
            schedule: schedule.into(),
            time_zone: "Asia/Shanghai".into(),
            instructions: "i".into(),
            registered_at: since.into(),
            last: last.map(|started| LastRun {
                started_at: started.into(),
                ended_at: None,
                outcome: "ok".into(),
                session: None,
                result: None,
                error: None,
            }),
        }
    }

    #[test]
    fn the_next_run_follows_the_last_in_the_jobs_time_zone() {
        let at = |t: &str| DateTime::parse_from_rfc3339(t).expect("time").with_timezone(&Utc);
        // Hourly: after a run at 10:00:05 UTC, the next is at 11:00.
        let hourly = job("0 * * * *", "2026-12-01T00:00:00Z", Some("2026-12-03T10:00:05Z"));
        assert_eq!(next_run(&hourly), Some(at("2026-12-03T11:00:00Z")));
        // 09:00 in Shanghai is 01:00 UTC.
        let daily = job("0 9 * * *", "2026-12-03T00:30:00Z", None);
        assert_eq!(next_run(&daily), Some(at("2026-12-03T01:00:00Z")), "missed: due at once");
        // Six fields: seconds first.
        let quick = job("*/5 * * * * *", "2026-12-03T10:29:58Z", None);
        assert_eq!(next_run(&quick), Some(at("2026-12-03T10:30:00Z")));
        assert!(cron("every hour").is_err() && time_zone("Mars/Base").is_err());
    }

    #[test]
    fn the_default_time_zone_is_the_systems_local_one() {
        let system = |zone: &'static str| move || Some(zone.to_owned());
        let none = || None;
        // TZ names the zone (with or without the leading colon), before /etc/localtime.
        assert_eq!(local_zone_of(Some("Europe/Berlin"), system("Asia/Tokyo")), ("Europe/Berlin".to_owned(), None));
        assert_eq!(local_zone_of(Some(":America/New_York"), none).0, "America/New_York");
        // No TZ, or one that is no IANA name (a POSIX rule): the system's zone.
        assert_eq!(local_zone_of(None, system("Asia/Tokyo")), ("Asia/Tokyo".to_owned(), None));
        assert_eq!(local_zone_of(Some("CET-1CEST"), system("Europe/Paris")).0, "Europe/Paris");
        assert_eq!(local_zone_of(Some(""), system("Etc/UTC")).0, "Etc/UTC");
        // Nothing to go by: UTC, with a note saying why.
        let (zone, note) = local_zone_of(None, none);
        assert_eq!(zone, "UTC");
        assert!(note.is_some_and(|n| n.contains("cannot be told") && n.contains("UTC")));
        let (zone, note) = local_zone_of(None, system("Not/AZone"));
        assert_eq!(zone, "UTC");
        assert!(note.is_some_and(|n| n.contains("Not/AZone")));
        assert_eq!(local_zone_of(Some("Mars/Base"), none).0, "UTC");
    }

    #[test]
    fn a_jobs_file_that_does_not_read_is_refused_not_overwritten() {
        let dir = tempfile::tempdir().expect("temp");
        let path = dir.path().join(FILE);
        assert_eq!(read_jobs(&path).expect("no file: no jobs"), Vec::new());
        std::fs::write(&path, "{\"jobs\": [truncated").expect("write");
        assert!(matches!(read_jobs(&path), Err(AutomationError::Config(_))));
        assert_eq!(std::fs::read_to_string(&path).expect("kept"), "{\"jobs\": [truncated");
    }
}
