//! The wall clock faculties read through `host.now-ms` (leases, token expiry, timestamps
//! they write): the system's, or — for a test of time-dependent rules — one the caller
//! moves by hand.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Milliseconds since the Unix epoch, as faculties see them.
#[derive(Clone)]
pub struct Clock(Source);

#[derive(Clone)]
enum Source {
    System,
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// The system's wall clock.
    #[must_use]
    pub fn system() -> Self {
        Self(Source::System)
    }

    /// A clock that stands at `start_ms` until [`Self::advance`] or [`Self::set`] moves it.
    #[must_use]
    pub fn manual(start_ms: u64) -> Self {
        Self(Source::Manual(Arc::new(AtomicU64::new(start_ms))))
    }

    /// Now, in milliseconds since the epoch.
    #[must_use]
    pub fn now_ms(&self) -> u64 {
        match &self.0 {
            Source::System => butler_catalog::time::now_ms(),
            Source::Manual(at) => at.load(Ordering::Acquire),
        }
    }

    /// Moves a manual clock forward by `ms` (a system clock is not moved).
    pub fn advance(&self, ms: u64) {
        if let Source::Manual(at) = &self.0 {
            at.fetch_add(ms, Ordering::AcqRel);
        }
    }

    /// Sets a manual clock to `ms` (a system clock is not moved).
    pub fn set(&self, ms: u64) {
        if let Source::Manual(at) = &self.0 {
            at.store(ms, Ordering::Release);
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

/// Two clocks are equal when they are the same clock (the system's, or one manual clock
/// and its copies).
impl PartialEq for Clock {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Source::System, Source::System) => true,
            (Source::Manual(a), Source::Manual(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Clock {}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Source::System => f.write_str("Clock::system"),
            Source::Manual(at) => write!(f, "Clock::manual({})", at.load(Ordering::Acquire)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_by_hand_and_its_copies_share_it() {
        let clock = Clock::manual(1_000);
        let copy = clock.clone();
        assert_eq!(clock.now_ms(), 1_000);
        copy.advance(250);
        assert_eq!(clock.now_ms(), 1_250);
        clock.set(5);
        assert_eq!(copy.now_ms(), 5);
        assert_eq!(clock, copy);
        assert_ne!(clock, Clock::manual(5), "another manual clock is another clock");
        let system = Clock::system();
        system.advance(1_000_000);
        let now = butler_catalog::time::now_ms();
        assert!(system.now_ms().abs_diff(now) < 60_000, "the system clock is not moved by hand");
    }
}
