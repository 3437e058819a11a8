//! When an exited item comes back: the restart policy and the backoff between
//! attempts.

use std::time::Duration;

use crate::catalog::Kind;
use crate::catalog::manifest::RestartPolicy;

/// The first restart delay: long enough that a program failing at once does not spin a
/// core, short enough that a transient failure is barely noticed.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);

/// The longest delay: a broken item is retried once every half minute, so it comes back
/// on its own soon after whatever it needs (a port, a network, a file) is back, without
/// filling its log with attempts.
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// A run this long counts as stable and resets the delay to [`BACKOFF_BASE`]: start-up
/// failures (a bad config, a port in use) show within seconds, so a process that survived
/// ten has started, and its next failure is a new incident rather than part of a loop.
pub const STABLE_RUN: Duration = Duration::from_secs(10);

/// The policy that applies to an item: the manifest's, or its kind's default (tools
/// `on-failure`, services `never`).
#[must_use]
pub fn effective(kind: Kind, configured: Option<RestartPolicy>) -> RestartPolicy {
    configured.unwrap_or(match kind {
        Kind::Tool => RestartPolicy::OnFailure,
        Kind::Service | Kind::Faculty => RestartPolicy::Never,
    })
}

/// Whether `policy` restarts after an exit that `failed` (non-zero status or a signal).
#[must_use]
pub fn restarts(policy: RestartPolicy, failed: bool) -> bool {
    match policy {
        RestartPolicy::Never => false,
        RestartPolicy::OnFailure => failed,
        RestartPolicy::Always => true,
    }
}

/// Exponential backoff: base, 2×, 4×, … up to the cap; reset after a stable run.
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    attempts: u32,
}

impl Backoff {
    /// The delay before the next restart, after a run that lasted `ran_for`.
    pub fn next(&mut self, ran_for: Duration) -> Duration {
        if ran_for >= STABLE_RUN {
            self.attempts = 0;
        }
        let delay = BACKOFF_BASE.saturating_mul(2u32.saturating_pow(self.attempts.min(16))).min(BACKOFF_CAP);
        self.attempts = self.attempts.saturating_add(1);
        delay
    }

    /// Forgets past failures (a manual start).
    pub fn reset(&mut self) {
        self.attempts = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_per_kind() {
        assert_eq!(effective(Kind::Tool, None), RestartPolicy::OnFailure);
        assert_eq!(effective(Kind::Service, None), RestartPolicy::Never);
        assert_eq!(effective(Kind::Service, Some(RestartPolicy::Always)), RestartPolicy::Always);
        assert!(restarts(RestartPolicy::OnFailure, true));
        assert!(!restarts(RestartPolicy::OnFailure, false));
        assert!(restarts(RestartPolicy::Always, false));
        assert!(!restarts(RestartPolicy::Never, true));
    }

    #[test]
    fn grows_to_the_cap_and_resets_after_a_stable_run() {
        let mut backoff = Backoff::default();
        let quick = Duration::from_millis(50);
        let delays: Vec<u64> = (0..7).map(|_| backoff.next(quick).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(backoff.next(STABLE_RUN), BACKOFF_BASE);
        assert_eq!(backoff.next(quick), BACKOFF_BASE * 2);
        backoff.reset();
        assert_eq!(backoff.next(quick), BACKOFF_BASE);
        // Many failures do not overflow.
        for _ in 0..100 {
            backoff.next(quick);
        }
        assert_eq!(backoff.next(quick), BACKOFF_CAP);
    }
}
