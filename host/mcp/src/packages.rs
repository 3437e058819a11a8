//! What the hub offers beside the catalog's providers: packages (a Suzu capability
//! package, a ChatOS app), each with an MCP server, a skill and prompts of its own, by the
//! source that hands them over; and the profiles the packages bring. [`Packages`] keeps
//! them and says whether a change changed anything, so the hub tells clients only then.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_catalog::lock;
use serde_json::Value;

use crate::upstream;
use crate::view::Profile;

/// An enabled capability package, as the hub offers it: its MCP server runs like an
/// extension's provider, and its skill is a prompt and read-only resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// Its provider id — what profiles name and the status shows (no extension's id can
    /// be it).
    pub id: String,
    /// Its namespace: its server's tools are `<namespace>__<tool>`, its skill's prompt
    /// `<namespace>__skill`.
    pub namespace: String,
    /// Its MCP server.
    pub server: Option<Server>,
    /// Its skill.
    pub skill: Option<butler_catalog::suzu::imports::Skill>,
    /// Prompts it offers under their own names, whichever endpoint offers its server.
    pub prompts: Vec<butler_catalog::chatos::AppPrompt>,
    /// What every `tools/call` to its server carries in `_meta`, merged over the caller's.
    pub call_meta: Option<Value>,
    /// Whether its server is on the main endpoint (else only on profiles).
    pub on_main: bool,
}

impl Package {
    /// A package with its id, namespace and server, and nothing else yet.
    #[must_use]
    pub fn new(id: String, namespace: String, server: Option<Server>) -> Self {
        Self { id, namespace, server, skill: None, prompts: Vec::new(), call_meta: None, on_main: true }
    }
}

/// A package's MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Server {
    /// A process spoken to over stdio: what to run, as an extension's `mcp` block says
    /// it, and the folder it runs in (relative paths start there).
    Stdio(butler_catalog::manifest::Mcp, PathBuf),
    /// A remote server spoken to over HTTP, with its per-call limit.
    Remote(upstream::Remote, Duration),
}

/// The prompt name a package's skill is offered under (after its namespace).
pub const SKILL_PROMPT: &str = "skill";

/// The packages by where they come from, all of them in one list, and the profiles they
/// bring.
#[derive(Default)]
pub(crate) struct Packages {
    by_source: Mutex<BySource>,
    profiles: Mutex<Arc<BTreeMap<String, Arc<Profile>>>>,
}

#[derive(Default)]
struct BySource {
    lists: BTreeMap<&'static str, Vec<Package>>,
    all: Arc<Vec<Package>>,
}

impl Packages {
    /// Replaces the packages from `source`; whether they differ from those it had.
    pub(crate) fn set(&self, source: &'static str, packages: Vec<Package>) -> bool {
        let mut current = lock(&self.by_source);
        let changed = current.lists.get(source).map_or(!packages.is_empty(), |had| *had != packages);
        current.lists.insert(source, packages);
        current.all = Arc::new(current.lists.values().flatten().cloned().collect());
        changed
    }

    /// Every package, from every source (sources in name order, each in its own order).
    pub(crate) fn all(&self) -> Arc<Vec<Package>> {
        Arc::clone(&lock(&self.by_source).all)
    }

    /// Replaces the profiles the packages bring; whether any came, went or changed.
    pub(crate) fn set_profiles(&self, profiles: BTreeMap<String, Arc<Profile>>) -> bool {
        let mut current = lock(&self.profiles);
        let changed = current.keys().ne(profiles.keys())
            || current.values().zip(profiles.values()).any(|(a, b)| a.spec != b.spec);
        *current = Arc::new(profiles);
        changed
    }

    /// The profile a package brings under `name`.
    pub(crate) fn profile(&self, name: &str) -> Option<Arc<Profile>> {
        lock(&self.profiles).get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(id: &str) -> Package {
        Package::new(id.to_owned(), id.replace(':', "_"), None)
    }

    /// A source's packages replace only that source's; `all` lists every source's, and
    /// a change is reported only when the source's list differs from what it was.
    #[test]
    fn each_source_replaces_its_own_and_a_change_is_only_a_difference() {
        let packages = Packages::default();
        assert!(!packages.set("chatos", Vec::new()), "nothing to nothing is no change");
        assert!(packages.set("suzu", vec![package("suzu:a"), package("suzu:b")]));
        assert!(packages.set("chatos", vec![package("uiapp:p.x")]));
        let ids = |packages: &Packages| packages.all().iter().map(|p| p.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&packages), ["uiapp:p.x", "suzu:a", "suzu:b"]);
        assert!(!packages.set("suzu", vec![package("suzu:a"), package("suzu:b")]), "the same list");
        let mut changed = package("suzu:b");
        changed.on_main = false;
        assert!(packages.set("suzu", vec![package("suzu:a"), changed]), "one field differs");
        assert!(packages.set("suzu", Vec::new()), "emptied");
        assert_eq!(ids(&packages), ["uiapp:p.x"], "the other source's stay");
    }
}
