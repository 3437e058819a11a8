//! What the runtime tells about its calls: per-faculty counters for `GET /faculties`
//! (calls, failures by code, in flight, p50 and max duration, lock waits), and one debug
//! line per call — nested ones included — under the faculty's own log target
//! (`faculty::<id>`, e.g. `RUST_LOG=faculty::journal=debug`).
//!
//! Log lines go through the `log` facade because `tracing` only takes targets known at
//! compile time; the host's subscriber turns them into ordinary events.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::Serialize;

/// Durations kept per faculty for the p50: the most recent calls.
const RECENT_CALLS: usize = 512;

/// The log target of faculty `id`.
#[must_use]
pub fn target(id: &str) -> String {
    format!("faculty::{id}")
}

/// Writes `message` at `level` under faculty `id`'s target.
pub fn emit(level: log::Level, id: &str, message: &str) {
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
    /// A call started.
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
