//! What the runtime tells about its calls: per-faculty counters for `GET /faculties`
//! (calls, failures by code, in flight, p50 and max duration, lock waits), and one debug
//! line per call — nested ones included — under the faculty's own log target
//! (`faculty::<id>`, e.g. `RUST_LOG=faculty::journal=debug`).
//!
//! Log lines go through the `log` facade because `tracing` only takes targets known at
//! compile time; the host's subscriber turns them into ordinary events. A faculty's own
//! lines (`host.log`, stderr) are bounded: each is cut at [`MAX_LOG_LINE`] bytes, and each
//! faculty may write [`LOG_LINES_PER_SECOND`] a second (bursts of [`LOG_BURST`]); what is
//! dropped is counted and said in the next line that passes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use butler_catalog::lock;

/// Durations kept per faculty for the p50: the most recent calls.
const RECENT_CALLS: usize = 512;
/// Longest log line a faculty may write; longer ones are cut (and marked).
pub const MAX_LOG_LINE: usize = 4096;
/// Lines a faculty may log per second, sustained.
pub const LOG_LINES_PER_SECOND: f64 = 100.0;
/// Lines a faculty may log in a burst.
pub const LOG_BURST: f64 = 1000.0;

/// The log target of faculty `id`.
#[must_use]
pub fn target(id: &str) -> String {
    format!("faculty::{id}")
}

/// A token bucket per faculty, and what it dropped since its last line.
struct Bucket {
    tokens: f64,
    at: Instant,
    dropped: u64,
}

static LOG_BUCKETS: LazyLock<Mutex<HashMap<String, Bucket>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Whether faculty `id` may log a line now; `Some(n)` lines were dropped before it.
fn admit(id: &str, now: Instant) -> Option<u64> {
    let mut buckets = lock(&LOG_BUCKETS);
    let bucket = buckets.entry(id.to_owned()).or_insert(Bucket { tokens: LOG_BURST, at: now, dropped: 0 });
    let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * LOG_LINES_PER_SECOND;
    bucket.tokens = (bucket.tokens + refill).min(LOG_BURST);
    bucket.at = now;
    if bucket.tokens < 1.0 {
        bucket.dropped += 1;
        return None;
    }
    bucket.tokens -= 1.0;
    Some(std::mem::take(&mut bucket.dropped))
}

/// Lines of faculty `id` dropped by the rate limit and not yet said.
#[must_use]
pub fn dropped_lines(id: &str) -> u64 {
    lock(&LOG_BUCKETS).get(id).map_or(0, |b| b.dropped)
}

/// Writes one of faculty `id`'s own lines at `level` under its target, within the bounds.
pub fn emit(level: log::Level, id: &str, message: &str) {
    let Some(dropped) = admit(id, Instant::now()) else { return };
    let target = target(id);
    if dropped > 0 {
        log::log!(target: target.as_str(), log::Level::Warn, "{dropped} log lines dropped: more than {LOG_LINES_PER_SECOND} a second");
    }
    if message.len() > MAX_LOG_LINE {
        let mut end = MAX_LOG_LINE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        log::log!(target: target.as_str(), level, "{}… ({} bytes cut)", &message[..end], message.len() - end);
    } else {
        log::log!(target: target.as_str(), level, "{message}");
    }
}

/// Writes the host's own line about faculty `id` (its calls), never rate-limited.
pub fn emit_host(level: log::Level, id: &str, message: &str) {
    let target = target(id);
    log::log!(target: target.as_str(), level, "{message}");
}

/// Counters of one faculty since start.
#[derive(Debug, Default)]
pub struct CallStats {
    total: u64,
    in_flight: u64,
    failures: BTreeMap<String, u64>,
    recent: VecDeque<Duration>,
    max: Duration,
    lock_waits: u64,
    lock_wait: Duration,
}

/// [`CallStats`] as `GET /faculties` shows them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallSummary {
    /// Calls started (nested ones included).
    pub total: u64,
    /// Calls running now.
    pub in_flight: u64,
    /// Failed calls, by error code.
    pub failures: BTreeMap<String, u64>,
    /// Median duration of the recent calls, in milliseconds.
    pub p50_ms: f64,
    /// Longest call since start, in milliseconds.
    pub max_ms: f64,
    /// Calls that had to wait for a store another call held.
    pub lock_waits: u64,
    /// Time spent in those waits, in milliseconds.
    pub lock_wait_ms: f64,
}

impl CallStats {
    /// Counts a call that started: one more in all and in flight.
    pub fn started(&mut self) {
        self.total += 1;
        self.in_flight += 1;
    }

    /// A call waited `waited` for its stores.
    pub fn waited(&mut self, waited: Duration) {
        if !waited.is_zero() {
            self.lock_waits += 1;
            self.lock_wait += waited;
        }
    }

    /// A call ended after `took`, failing with `failure` (a code) or not.
    pub fn ended(&mut self, took: Duration, failure: Option<&str>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(code) = failure {
            *self.failures.entry(code.to_owned()).or_default() += 1;
        }
        if self.recent.len() == RECENT_CALLS {
            self.recent.pop_front();
        }
        self.recent.push_back(took);
        self.max = self.max.max(took);
    }

    /// The summary shown over HTTP.
    #[must_use]
    pub fn summary(&self) -> CallSummary {
        let mut recent: Vec<Duration> = self.recent.iter().copied().collect();
        recent.sort_unstable();
        let p50 = recent.get(recent.len() / 2).copied().unwrap_or_default();
        CallSummary {
            total: self.total,
            in_flight: self.in_flight,
            failures: self.failures.clone(),
            p50_ms: ms(p50),
            max_ms: ms(self.max),
            lock_waits: self.lock_waits,
            lock_wait_ms: ms(self.lock_wait),
        }
    }
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_failures_by_code_and_takes_the_median() {
        let mut stats = CallStats::default();
        for (ms, failure) in [(1, None), (3, Some("timeout")), (2, None), (9, Some("timeout")), (5, Some("busy"))] {
            stats.started();
            stats.ended(Duration::from_millis(ms), failure);
        }
        stats.started();
        stats.waited(Duration::from_millis(4));
        stats.waited(Duration::ZERO);
        let summary = stats.summary();
        assert_eq!((summary.total, summary.in_flight), (6, 1));
        assert_eq!(summary.failures.get("timeout"), Some(&2));
        assert_eq!(summary.failures.get("busy"), Some(&1));
        assert!((summary.p50_ms - 3.0).abs() < 1e-9, "{summary:?}");
        assert!((summary.max_ms - 9.0).abs() < 1e-9, "{summary:?}");
        assert_eq!(summary.lock_waits, 1);
    }

    #[test]
    fn a_flooding_faculty_is_limited_and_told_what_it_lost() {
        let start = Instant::now();
        let id = "flood-test";
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let burst = LOG_BURST as u64;
        let passed = (0..burst + 500).filter(|_| admit(id, start).is_some()).count() as u64;
        assert_eq!(passed, burst, "a burst passes, the rest is dropped");
        assert_eq!(dropped_lines(id), 500);
        let later = start + Duration::from_millis(50);
        assert_eq!(admit(id, later), Some(500), "the next line that passes says how many were lost");
        assert_eq!(dropped_lines(id), 0);
    }

    #[test]
    fn keeps_only_recent_durations() {
        let mut stats = CallStats::default();
        for _ in 0..RECENT_CALLS * 2 {
            stats.started();
            stats.ended(Duration::from_millis(1), None);
        }
        assert_eq!(stats.recent.len(), RECENT_CALLS);
        assert_eq!(stats.summary().total, (RECENT_CALLS * 2) as u64);
    }
}
