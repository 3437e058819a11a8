//! The hub's registry: the providers it has now, the providers left out because their
//! namespace was taken, the routing epoch, and the table public tool names route by.
//!
//! [`Registry::settle`] moves the registry to a new set of [`ProviderSpec`]s (the hub
//! derives them from each catalog snapshot and its packages): a provider whose source is
//! the same is kept as it is, running or not; a changed one is replaced, and its old
//! process stops once its calls are done; a removed one stops at once. Namespaces are
//! settled by [`names::settle`]: providers already registered keep theirs.
//!
//! The epoch counts every change to the providers or to what they list (a provider bumps
//! it too, when its lists change); [`Registry::routes`] rebuilds the routing table only when
//! it moved.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use butler_catalog::{lock, names};
use serde_json::Value;

use crate::FastMap;
use crate::provider::{Provider, ProviderSpec};

/// Public tool name → (provider, the tool's own name).
pub(crate) type Routes = FastMap<String, (Arc<Provider>, Value)>;

/// How often a replaced provider is checked for calls still in flight before it stops.
const IDLE_CHECK: Duration = Duration::from_millis(100);

/// The providers, in the order they claimed their names, and the routing table.
#[derive(Default)]
pub(crate) struct Registry {
    entries: RwLock<Entries>,
    /// Bumped by every change to the providers or their lists.
    epoch: Arc<AtomicU64>,
    /// The routing table, for the epoch it was built at.
    routes: Mutex<Option<(u64, Arc<Routes>)>>,
}

#[derive(Default)]
struct Entries {
    providers: Vec<Arc<Provider>>,
    conflicts: Vec<names::Conflict>,
}

impl Registry {
    /// The epoch counter, shared with each provider (which bumps it when its lists change).
    pub(crate) fn epoch_counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.epoch)
    }

    /// The epoch now.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Something the lists depend on changed (packages, profiles, approvals, the host's
    /// own tools): the routing table is rebuilt on its next use.
    pub(crate) fn bump(&self) {
        self.epoch.fetch_add(1, Ordering::Release);
    }

    /// Every provider, in registry order.
    pub(crate) fn providers(&self) -> Vec<Arc<Provider>> {
        self.entries.read().unwrap_or_else(std::sync::PoisonError::into_inner).providers.clone()
    }

    /// Provider `id`.
    pub(crate) fn find(&self, id: &str) -> Option<Arc<Provider>> {
        let entries = self.entries.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.providers.iter().find(|p| p.spec.id == id).cloned()
    }

    /// The providers left out by the last settle because their namespace was taken.
    pub(crate) fn conflicts(&self) -> Vec<names::Conflict> {
        self.entries.read().unwrap_or_else(std::sync::PoisonError::into_inner).conflicts.clone()
    }

    /// Moves the registry to `specs` (in the order they claim their namespaces): a
    /// provider whose source is the same is kept; `make` builds the others. A replaced
    /// provider stops once no call is in flight on it (within its call limit); a removed
    /// one stops at once. Bumps the epoch; whether any provider came, went or was replaced.
    pub(crate) fn settle(&self, specs: Vec<ProviderSpec>, mut make: impl FnMut(ProviderSpec) -> Arc<Provider>) -> bool {
        let current = self.providers();
        let registered: BTreeMap<String, String> =
            current.iter().map(|p| (p.spec.namespace.clone(), p.spec.id.clone())).collect();
        let wanted: Vec<(String, String)> = specs.iter().map(|s| (s.id.clone(), s.namespace.clone())).collect();
        let (accepted, conflicts) = names::settle(&wanted, &registered);

        let mut next = Vec::new();
        let mut retired = Vec::new();
        let mut changed = false;
        for spec in specs.into_iter().filter(|s| accepted.contains(&s.id)) {
            match current.iter().find(|p| p.spec.id == spec.id) {
                Some(existing) if existing.spec.same_source(&spec) => next.push(Arc::clone(existing)),
                existing => {
                    retired.extend(existing.cloned());
                    next.push(make(spec));
                    changed = true;
                }
            }
        }
        for old in &current {
            if !next.iter().any(|p| Arc::ptr_eq(p, old)) && !retired.iter().any(|r| Arc::ptr_eq(r, old)) {
                let old = Arc::clone(old);
                changed = true;
                tokio::spawn(async move { old.shutdown().await });
            }
        }
        for old in retired {
            // Restart when idle: calls in flight finish on the old process.
            tokio::spawn(async move {
                let _ = tokio::time::timeout(old.spec.timeout, async {
                    while !old.idle() {
                        tokio::time::sleep(IDLE_CHECK).await;
                    }
                })
                .await;
                old.shutdown().await;
            });
        }
        {
            let mut entries = self.entries.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            entries.providers = next;
            entries.conflicts = conflicts;
        }
        self.bump();
        changed
    }

    /// Takes every provider out, for the hub to stop them (it is shutting down).
    pub(crate) fn take_all(&self) -> Vec<Arc<Provider>> {
        let mut entries = self.entries.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::take(&mut entries.providers)
    }

    /// The routing table for the epoch now: the one built last if the epoch has not moved
    /// since, else the one `build` makes (kept for the next call).
    pub(crate) fn routes(&self, build: impl FnOnce() -> Routes) -> Arc<Routes> {
        let epoch = self.epoch();
        if let Some((built, routes)) = lock(&self.routes).as_ref()
            && *built == epoch
        {
            return Arc::clone(routes);
        }
        let routes = Arc::new(build());
        *lock(&self.routes) = Some((epoch, Arc::clone(&routes)));
        routes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Io;
    use crate::upstream::{InProcess, Serve};
    use std::sync::atomic::AtomicUsize;
    use tokio::sync::broadcast;

    /// A provider served in-process by `server` (providers with the same server name have
    /// the same source), under `namespace`. Nothing runs until it is called.
    fn spec(id: &str, namespace: &str, server: &str) -> ProviderSpec {
        let serve: Serve = Arc::new(|pipe| {
            drop(pipe);
            Box::pin(async {})
        });
        let transport = InProcess { name: server.to_owned(), serve };
        ProviderSpec::with_transport(id, namespace, Arc::new(transport), Duration::from_secs(5))
    }

    /// A registry and the `make` that builds its providers, counting how many it built.
    struct Bench {
        registry: Registry,
        dir: tempfile::TempDir,
        built: AtomicUsize,
    }

    impl Bench {
        fn new() -> Self {
            Self {
                registry: Registry::default(),
                dir: tempfile::tempdir().expect("temp dir"),
                built: AtomicUsize::new(0),
            }
        }

        fn settle(&self, specs: Vec<ProviderSpec>) -> bool {
            self.registry.settle(specs, |spec| {
                self.built.fetch_add(1, Ordering::SeqCst);
                let channels = (broadcast::channel(4).0, broadcast::channel(4).0, broadcast::channel(4).0);
                let io = Io { runtime: tokio::runtime::Handle::current(), dialer: None };
                Provider::new(
                    Arc::new(spec),
                    self.dir.path(),
                    self.dir.path(),
                    channels,
                    self.registry.epoch_counter(),
                    io,
                )
            })
        }

        fn ids(&self) -> Vec<String> {
            self.registry.providers().iter().map(|p| p.spec.id.clone()).collect()
        }
    }

    /// A provider whose source did not change is the same provider after a settle (its
    /// process, lists and counters go on); one whose source changed is a new provider; one
    /// no spec names is gone. Only those count as a change.
    #[tokio::test]
    async fn a_settle_keeps_what_did_not_change_and_replaces_what_did() {
        let bench = Bench::new();
        assert!(bench.settle(vec![spec("a", "a", "one"), spec("b", "b", "one")]), "two providers came");
        let kept = bench.registry.find("a").expect("a is there");
        let epoch = bench.registry.epoch();

        assert!(!bench.settle(vec![spec("a", "a", "one"), spec("b", "b", "one")]), "nothing changed");
        assert!(Arc::ptr_eq(&kept, &bench.registry.find("a").expect("a")), "the same provider");
        assert_eq!(bench.built.load(Ordering::SeqCst), 2, "none built again");
        assert!(bench.registry.epoch() > epoch, "every settle moves the epoch");

        assert!(bench.settle(vec![spec("a", "a", "two")]), "a changed and b went");
        assert!(!Arc::ptr_eq(&kept, &bench.registry.find("a").expect("a")), "a new provider for a new source");
        assert_eq!(bench.ids(), ["a"]);
        assert!(bench.registry.find("b").is_none());
        for provider in bench.registry.take_all() {
            provider.shutdown().await;
        }
        assert!(bench.registry.providers().is_empty(), "taken out");
    }

    /// Namespaces are settled as `names::settle` settles them: a provider already
    /// registered keeps its namespace against a newcomer earlier in scan order, and the
    /// newcomer is a conflict naming who holds it; once the holder goes, the next settle
    /// lets it in.
    #[tokio::test]
    async fn a_taken_namespace_is_a_conflict_and_the_incumbent_keeps_it() {
        let bench = Bench::new();
        bench.settle(vec![spec("second", "shared", "s")]);
        bench.settle(vec![spec("first", "shared", "f"), spec("second", "shared", "s")]);
        assert_eq!(bench.ids(), ["second"], "the incumbent keeps its namespace");
        let conflict = names::Conflict { id: "first".into(), namespace: "shared".into(), held_by: "second".into() };
        assert_eq!(bench.registry.conflicts(), [conflict]);

        bench.settle(vec![spec("first", "shared", "f")]);
        assert_eq!(bench.ids(), ["first"], "free again, it is taken");
        assert!(bench.registry.conflicts().is_empty());
        for provider in bench.registry.take_all() {
            provider.shutdown().await;
        }
    }

    /// The routing table is built once per epoch: calls in between share it, and a bump
    /// (or a settle) makes the next call build a new one.
    #[tokio::test]
    async fn the_routing_table_is_rebuilt_only_when_the_epoch_moves() {
        let registry = Registry::default();
        let builds = AtomicUsize::new(0);
        let build = || {
            builds.fetch_add(1, Ordering::SeqCst);
            Routes::default()
        };
        let first = registry.routes(build);
        let again = registry.routes(build);
        assert!(Arc::ptr_eq(&first, &again), "one table for one epoch");
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        registry.bump();
        let after = registry.routes(build);
        assert!(!Arc::ptr_eq(&first, &after), "a new table after the epoch moved");
        assert_eq!(builds.load(Ordering::SeqCst), 2);
        registry.settle(Vec::new(), |_| unreachable!("no spec, nothing to build"));
        registry.routes(build);
        assert_eq!(builds.load(Ordering::SeqCst), 3, "a settle moves the epoch too");
    }
}
