//! Store locks: the one discipline that keeps concurrent faculty calls free of deadlock.
//!
//! A *store* is a directory a faculty may write (its `/data`, a writable grant); calls
//! that may write the same store run one at a time. A *call tree* is a top-level call and
//! every nested `host.call` it makes; the tree is the lock holder, so a nested call never
//! waits for a store its own tree holds.
//!
//! The rules, which together make a cycle of waits impossible:
//! 1. **One global order.** Stores are ordered by their canonical path, byte by byte.
//! 2. **Up front.** A call takes, before its guest runs, every store it and everything it
//!    declares it may call (`commands[].calls`, transitively) may write, in that order.
//! 3. **Waiting only forward.** A call may *wait* for a store only when every store its
//!    tree already holds sorts before it. Otherwise it *tries once*: if another tree holds
//!    the store, the call fails at once with `busy`, naming the store, and releases what
//!    it took. (Declared calls never get here: their stores were taken by rule 2.)
//! 4. **Bounded.** Every wait ends at the call's deadline (`timeout`, naming the store),
//!    or when the runtime shuts down.
//!
//! A waiting tree therefore only ever waits for a store that sorts after everything it
//! holds, so no chain of waiting trees can close into a cycle. This module takes no other
//! lock while a thread waits here: the registry mutex is only held to look a lock up.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use butler_catalog::lock;

/// How often a waiter re-checks whether the runtime is shutting down.
const SHUTDOWN_POLL: Duration = Duration::from_millis(50);

/// Identifies one call tree (a top-level call and its nested calls).
pub type TreeId = u64;

/// Why a store could not be taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockFailure {
    /// Held by another tree, and waiting would break the global order.
    Busy(PathBuf),
    /// Still held by another tree when the deadline passed.
    Timeout(PathBuf),
    /// The runtime is shutting down.
    ShuttingDown,
}

/// One store's lock: which tree holds it.
#[derive(Default)]
struct StoreLock {
    holder: Mutex<Option<TreeId>>,
    freed: Condvar,
}

/// Holds one store until dropped.
pub struct StoreGuard(Arc<StoreLock>);

impl Drop for StoreGuard {
    fn drop(&mut self) {
        *lock(&self.0.holder) = None;
        self.0.freed.notify_one();
    }
}

/// What a successful [`StoreLocks::acquire`] took, and how long it waited.
pub struct Acquired {
    /// Released when dropped.
    pub guards: Vec<StoreGuard>,
    /// The stores newly taken (not those the tree already held).
    pub taken: Vec<PathBuf>,
    /// Total time spent waiting for other trees.
    pub waited: Duration,
}

/// Every store lock of the runtime.
#[derive(Default)]
pub struct StoreLocks {
    locks: Mutex<HashMap<PathBuf, Arc<StoreLock>>>,
}

impl StoreLocks {
    /// Takes every store of `wanted` that `held` (what the tree holds already) does not
    /// contain, following the module's rules. `wanted` may be in any order.
    ///
    /// # Errors
    /// [`LockFailure`]; whatever was taken before the failure is released.
    pub fn acquire(
        &self,
        tree: TreeId,
        held: &[PathBuf],
        wanted: &[PathBuf],
        deadline: Instant,
        stop: &AtomicBool,
    ) -> Result<Acquired, LockFailure> {
        let mut wanted: Vec<&PathBuf> = wanted.iter().filter(|s| !held.contains(s)).collect();
        wanted.sort();
        wanted.dedup();
        let mut acquired =
            Acquired { guards: Vec::with_capacity(wanted.len()), taken: Vec::new(), waited: Duration::ZERO };
        for store in wanted {
            let may_wait = held.iter().all(|h| h < store);
            let store_lock = Arc::clone(lock(&self.locks).entry(store.clone()).or_default());
            let waited = take(&store_lock, tree, may_wait, deadline, stop).map_err(|failure| match failure {
                Taken::Busy => LockFailure::Busy(store.clone()),
                Taken::Timeout => LockFailure::Timeout(store.clone()),
                Taken::Stopped => LockFailure::ShuttingDown,
            })?;
            acquired.waited += waited;
            acquired.guards.push(StoreGuard(store_lock));
            acquired.taken.push(store.clone());
        }
        Ok(acquired)
    }

    /// Wakes every waiter, so it notices a shutdown without waiting for its poll.
    pub fn wake_all(&self) {
        for store_lock in lock(&self.locks).values() {
            store_lock.freed.notify_all();
        }
    }
}

enum Taken {
    Busy,
    Timeout,
    Stopped,
}

/// Takes one lock for `tree`; returns how long it waited (zero when the store was free).
fn take(
    store: &StoreLock,
    tree: TreeId,
    may_wait: bool,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<Duration, Taken> {
    let mut waiting_since: Option<Instant> = None;
    let mut holder = lock(&store.holder);
    loop {
        if stop.load(Ordering::Acquire) {
            return Err(Taken::Stopped);
        }
        match *holder {
            None => {
                *holder = Some(tree);
                return Ok(waiting_since.map_or(Duration::ZERO, |since| since.elapsed()));
            }
            // A tree passes what it holds down to its nested calls, which never ask for it
            // again; asking twice would be a runtime defect, refused rather than waited on.
            Some(owner) if owner == tree || !may_wait => return Err(Taken::Busy),
            Some(_) => {
                let now = Instant::now();
                waiting_since.get_or_insert(now);
                if now >= deadline {
                    return Err(Taken::Timeout);
                }
                let slice = (deadline - now).min(SHUTDOWN_POLL);
                holder = store.freed.wait_timeout(holder, slice).unwrap_or_else(std::sync::PoisonError::into_inner).0;
            }
        }
    }
}

/// `path` shown relative to `root` when it is inside it.
#[must_use]
pub fn display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(PathBuf::from).collect()
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(200)
    }

    #[test]
    fn a_tree_takes_in_order_and_releases_on_drop() {
        let locks = StoreLocks::default();
        let stop = AtomicBool::new(false);
        let first = locks.acquire(1, &[], &paths(&["/b", "/a"]), soon(), &stop).expect("free");
        assert_eq!(first.taken, paths(&["/a", "/b"]));
        let busy = locks.acquire(2, &[], &paths(&["/a"]), Instant::now() + Duration::from_millis(30), &stop);
        assert_eq!(busy.err(), Some(LockFailure::Timeout(PathBuf::from("/a"))), "a free-handed waiter times out");
        drop(first);
        assert!(locks.acquire(2, &[], &paths(&["/a", "/b"]), soon(), &stop).is_ok(), "released on drop");
    }

    #[test]
    fn a_nested_call_never_waits_for_its_own_tree() {
        let locks = StoreLocks::default();
        let stop = AtomicBool::new(false);
        let _outer = locks.acquire(7, &[], &paths(&["/a", "/b"]), soon(), &stop).expect("free");
        let inner = locks.acquire(7, &paths(&["/a", "/b"]), &paths(&["/b", "/c"]), soon(), &stop).expect("own");
        assert_eq!(inner.taken, paths(&["/c"]));
    }

    #[test]
    fn waiting_backwards_fails_fast_instead_of_deadlocking() {
        // Tree 1 holds /b and wants /a (behind its holding): it must not wait for tree 2,
        // which holds /a and waits for /b.
        let locks = Arc::new(StoreLocks::default());
        let stop = Arc::new(AtomicBool::new(false));
        let one = locks.acquire(1, &[], &paths(&["/b"]), soon(), &stop).expect("free");
        let two = locks.acquire(2, &[], &paths(&["/a"]), soon(), &stop).expect("free");
        let (l2, s2) = (Arc::clone(&locks), Arc::clone(&stop));
        let waiter = std::thread::spawn(move || {
            let _two = two;
            l2.acquire(2, &paths(&["/a"]), &paths(&["/b"]), Instant::now() + Duration::from_secs(5), &s2).is_ok()
        });
        let started = Instant::now();
        let backwards =
            locks.acquire(1, &paths(&["/b"]), &paths(&["/a"]), Instant::now() + Duration::from_secs(5), &stop);
        assert_eq!(backwards.err(), Some(LockFailure::Busy(PathBuf::from("/a"))));
        assert!(started.elapsed() < Duration::from_secs(1), "failed at once, not at the deadline");
        drop(one);
        assert!(waiter.join().expect("joined"), "the forward waiter gets /b once tree 1 lets go");
    }

    #[test]
    fn shutdown_ends_every_wait() {
        let locks = Arc::new(StoreLocks::default());
        let stop = Arc::new(AtomicBool::new(false));
        let _held = locks.acquire(1, &[], &paths(&["/a"]), soon(), &stop).expect("free");
        let (l2, s2) = (Arc::clone(&locks), Arc::clone(&stop));
        let waiter = std::thread::spawn(move || {
            l2.acquire(2, &[], &paths(&["/a"]), Instant::now() + Duration::from_secs(60), &s2).err()
        });
        std::thread::sleep(Duration::from_millis(20));
        stop.store(true, Ordering::Release);
        locks.wake_all();
        assert_eq!(waiter.join().expect("joined"), Some(LockFailure::ShuttingDown));
    }

    #[test]
    fn a_failure_releases_what_was_taken() {
        let locks = StoreLocks::default();
        let stop = AtomicBool::new(false);
        let _b = locks.acquire(1, &[], &paths(&["/b"]), soon(), &stop).expect("free");
        let failed = locks.acquire(2, &[], &paths(&["/a", "/b"]), Instant::now() + Duration::from_millis(20), &stop);
        assert!(failed.is_err());
        assert!(locks.acquire(3, &[], &paths(&["/a"]), soon(), &stop).is_ok(), "/a was given back");
    }
}
