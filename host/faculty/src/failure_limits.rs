//! Per-caller limits on a command's declared failures (`commands[].failureLimit` in a
//! faculty manifest): a command whose failures tell the caller something — a check that
//! did not pass says what a file does not contain — declares those failure codes and how
//! many a caller may get a minute. Past that, the caller's calls of the command are
//! refused (`too_many_failures`, 429) until the minute since its oldest counted failure
//! has passed; every counted failure is recorded in the host log with the caller.
//!
//! The host knows nothing of what the codes mean: it counts codes the manifest names.
//! Callers are keyed by who they proved to be, not by the door they came through: the
//! owner (`owner`, `operator`), an agent session the host drives (`agent:<id>`), a
//! profile's token (`profile:<name>`), the host's own collector. Every caller that proves
//! nothing — an HTTP request without the owner's credential, an MCP client of `/mcp`,
//! `/mcp/butler` or an open profile — shares the one key [`ANONYMOUS`], so a caller cannot
//! multiply its budget by switching doors, and cannot spend an agent's. Nested calls
//! (`host.call`) count against their top-level caller. At most [`MAX_CALLERS`] callers are
//! tracked at once (the ones with no failure in the last minute go first).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use butler_catalog::lock;

/// The key every caller that proved nothing is counted under.
pub const ANONYMOUS: &str = "anonymous";

/// The window failures are counted in.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Callers tracked at once, at most.
pub const MAX_CALLERS: usize = 4096;

/// A command's declared limit, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureLimit {
    /// The failure codes counted.
    pub codes: Vec<String>,
    /// How many a caller may get in [`WINDOW`].
    pub per_minute: u32,
}

/// The failures counted, per (faculty, command, caller).
#[derive(Debug, Default)]
pub struct FailureCounts {
    recent: Mutex<HashMap<(String, String, String), VecDeque<Instant>>>,
}

impl FailureCounts {
    /// `Err(seconds to wait)` when `caller` has used up its failures of this command.
    pub fn admit(
        &self,
        faculty: &str,
        command: &str,
        caller: &str,
        limit: &FailureLimit,
        now: Instant,
    ) -> Result<(), u64> {
        let mut recent = lock(&self.recent);
        let key = (faculty.to_owned(), command.to_owned(), caller.to_owned());
        let Some(times) = recent.get_mut(&key) else { return Ok(()) };
        while times.front().is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW) {
            times.pop_front();
        }
        if times.len() < limit.per_minute as usize {
            return Ok(());
        }
        let oldest = times.front().copied().unwrap_or(now);
        Err((WINDOW.saturating_sub(now.saturating_duration_since(oldest))).as_secs().max(1))
    }

    /// Counts a failure with `code` when the limit names it; returns the caller's count in
    /// the window when it was counted.
    pub fn record(
        &self,
        (faculty, command, caller): (&str, &str, &str),
        limit: &FailureLimit,
        code: &str,
        now: Instant,
    ) -> Option<usize> {
        if !limit.codes.iter().any(|c| c == code) {
            return None;
        }
        let mut recent = lock(&self.recent);
        if recent.len() >= MAX_CALLERS {
            recent.retain(|_, times| times.back().is_some_and(|t| now.saturating_duration_since(*t) < WINDOW));
            if recent.len() >= MAX_CALLERS
                && let Some(key) = recent.iter().min_by_key(|(_, times)| times.back().copied()).map(|(k, _)| k.clone())
            {
                recent.remove(&key);
            }
        }
        let times = recent.entry((faculty.to_owned(), command.to_owned(), caller.to_owned())).or_default();
        while times.front().is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW) {
            times.pop_front();
        }
        times.push_back(now);
        // Never more kept than the limit needs.
        while times.len() > limit.per_minute.max(1) as usize {
            times.pop_front();
        }
        Some(times.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(n: u32) -> FailureLimit {
        FailureLimit { codes: vec!["checks_failed".to_owned()], per_minute: n }
    }

    #[test]
    fn a_caller_past_its_failures_waits_and_others_do_not() {
        let counts = FailureCounts::default();
        let t0 = Instant::now();
        let limit = limit(3);
        for i in 0..3 {
            assert_eq!(counts.admit("distill", "submit", "mcp:a", &limit, t0), Ok(()), "failure {i}");
            assert_eq!(counts.record(("distill", "submit", "mcp:a"), &limit, "checks_failed", t0), Some(i + 1));
        }
        assert_eq!(counts.admit("distill", "submit", "mcp:a", &limit, t0), Err(60));
        assert_eq!(counts.admit("distill", "submit", "mcp:b", &limit, t0), Ok(()), "another caller");
        assert_eq!(counts.admit("distill", "other", "mcp:a", &limit, t0), Ok(()), "another command");
        assert_eq!(counts.admit("distill", "submit", "mcp:a", &limit, t0 + Duration::from_secs(45)), Err(15));
        assert_eq!(counts.admit("distill", "submit", "mcp:a", &limit, t0 + WINDOW), Ok(()), "the minute passed");
    }

    #[test]
    fn only_the_declared_codes_count_and_the_callers_tracked_are_bounded() {
        let counts = FailureCounts::default();
        let now = Instant::now();
        let limit = limit(1);
        assert_eq!(counts.record(("f", "c", "x"), &limit, "invalid_args", now), None);
        assert_eq!(counts.admit("f", "c", "x", &limit, now), Ok(()));
        for i in 0..MAX_CALLERS + 10 {
            counts.record(("f", "c", &format!("caller-{i}")), &limit, "checks_failed", now);
        }
        assert!(lock(&counts.recent).len() <= MAX_CALLERS);
    }
}
