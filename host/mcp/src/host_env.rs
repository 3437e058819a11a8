//! Which of the host's environment variables a provider's `${VAR}` may read. A manifest's
//! `headers` and `env` (and a capability package's) may name the host's variables so that
//! a token need not be written in a file; but a manifest can be dropped into the instance
//! by anyone who can write a file there (a cloned repository, a package), and the host's
//! environment holds the owner's secrets. So a variable is read only for a server the
//! owner allows it to by name in the root config (`mcp.allowEnv`: server id → variables);
//! any other reads as unset (empty, or its `:-default`), and the host's log names it. The
//! allowance is per server: a token given to one server is not given to a manifest
//! dropped in beside it.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use butler_catalog::suzu::imports::expand;

/// The variables the owner allows each provider to read (`mcp.allowEnv`), by provider id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedEnv(BTreeMap<String, BTreeSet<String>>);

impl AllowedEnv {
    /// The allowances of `by_provider`.
    #[must_use]
    pub fn new(by_provider: BTreeMap<String, BTreeSet<String>>) -> Self {
        Self(by_provider)
    }

    /// Each value of `values` of provider `id` with `${VAR}` / `${VAR:-default}` expanded
    /// from the host's environment where VAR is allowed to it (as unset where it is not);
    /// the names refused are added to `refused`.
    #[must_use]
    pub fn expand_all<'a>(
        &self,
        id: &str,
        values: impl IntoIterator<Item = (&'a String, &'a String)>,
        refused: &mut BTreeSet<String>,
    ) -> BTreeMap<String, String> {
        let allowed = self.0.get(id);
        let not_allowed = RefCell::new(BTreeSet::new());
        let read = |name: &str| {
            if allowed.is_some_and(|names| names.contains(name)) {
                std::env::var(name).ok()
            } else {
                not_allowed.borrow_mut().insert(name.to_owned());
                None
            }
        };
        let expanded = values.into_iter().map(|(key, value)| (key.clone(), expand(value, read))).collect();
        refused.extend(not_allowed.into_inner());
        expanded
    }
}

impl AllowedEnv {
    /// `mcp` (a stdio server's block) with its `env` expanded for provider `id`.
    #[must_use]
    pub fn expand_env(
        &self,
        id: &str,
        mcp: &butler_catalog::manifest::Mcp,
        refused: &mut BTreeSet<String>,
    ) -> butler_catalog::manifest::Mcp {
        butler_catalog::manifest::Mcp { env: self.expand_all(id, &mcp.env, refused), ..mcp.clone() }
    }

    /// `headers` (a remote server's) expanded for provider `id`, in name order.
    #[must_use]
    pub fn expand_headers<'a>(
        &self,
        id: &str,
        headers: impl IntoIterator<Item = (&'a String, &'a String)>,
        refused: &mut BTreeSet<String>,
    ) -> Vec<(String, String)> {
        self.expand_all(id, headers, refused).into_iter().collect()
    }
}

/// `names` as a person reads them: `${A}, ${B}`.
#[must_use]
pub fn listed<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> String {
    names.into_iter().map(|name| format!("${{{}}}", name.as_ref())).collect::<Vec<_>>().join(", ")
}

/// The host variables `text` names (`${VAR}`, `${VAR:-default}`), in order of first use.
#[must_use]
pub fn names_in(text: &str) -> Vec<String> {
    let names = RefCell::new(Vec::new());
    let _ = expand(text, |name| {
        let mut names = names.borrow_mut();
        if !names.iter().any(|known| known == name) {
            names.push(name.to_owned());
        }
        None
    });
    names.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_variables_allowed_to_the_server_are_read_and_the_others_are_named() {
        // Two variables every test process has: PATH stands for a token allowed to server
        // `docs`, HOME for a secret of the owner's.
        let (path, home) = (std::env::var("PATH").expect("PATH"), std::env::var("HOME").expect("HOME"));
        assert!(!home.is_empty());
        let allowed = AllowedEnv::new(BTreeMap::from([("docs".to_owned(), BTreeSet::from(["PATH".to_owned()]))]));
        let values = BTreeMap::from([
            ("Authorization".to_owned(), "Bearer ${PATH}".to_owned()),
            ("X-Leak".to_owned(), "${HOME}".to_owned()),
            ("X-Default".to_owned(), "${HOME:-none}".to_owned()),
            ("X-Plain".to_owned(), "as written".to_owned()),
        ]);
        let mut refused = BTreeSet::new();
        let expanded = allowed.expand_all("docs", &values, &mut refused);
        assert_eq!(expanded["Authorization"], format!("Bearer {path}"));
        assert_eq!(expanded["X-Leak"], "", "a variable not allowed reads as unset");
        assert_eq!(expanded["X-Default"], "none", "…so its default is taken");
        assert_eq!(expanded["X-Plain"], "as written");
        assert_eq!(refused, BTreeSet::from(["HOME".to_owned()]));

        // Another server — one dropped in beside `docs` — is not given `docs`'s token.
        let mut refused = BTreeSet::new();
        let beside = allowed.expand_all("steal", &values, &mut refused);
        assert_eq!(beside["Authorization"], "Bearer ", "nothing is read unless allowed to this server");
        assert_eq!(refused, BTreeSet::from(["HOME".to_owned(), "PATH".to_owned()]));
    }

    #[test]
    fn the_names_a_value_reads_are_listed_once_each() {
        assert_eq!(names_in("${A} and ${B:-x} and ${A}, ${not a name}, ${C"), ["A", "B"]);
        assert!(names_in("no variables").is_empty());
    }
}
