//! Public names: `<namespace>__<tool>`, the 64-character rule, the reserved
//! `butler` namespace, and how namespace conflicts are settled.
//!
//! Routing never splits a name on `__` (a namespace made from the id `a--b` is `a__b`, and
//! a tool may be called `x__y`): every public name is looked up in an exact map.

use std::collections::BTreeMap;

/// The host's own namespace.
pub const RESERVED: &str = "butler";

/// Between namespace and tool.
pub const SEPARATOR: &str = "__";

/// The longest public name.
pub const MAX_NAME: usize = 64;

/// `<namespace>__<name>`, if it is a valid public name (`^[A-Za-z0-9_-]{1,64}$`).
///
/// # Errors
/// Why the name cannot be exposed.
pub fn public(namespace: &str, name: &str) -> Result<String, NameError> {
    let full = format!("{namespace}{SEPARATOR}{name}");
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if full.len() > MAX_NAME {
        return Err(NameError::TooLong(crate::validation::one_line(&full)));
    }
    if let Some(bad) = full.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-')) {
        return Err(NameError::Character { name: crate::validation::one_line(&full), bad });
    }
    Ok(full)
}

/// Why a tool cannot be exposed under a public name (see [`public`]); the name is shown
/// on one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum NameError {
    /// The tool's own name is empty.
    #[error("the tool has an empty name")]
    Empty,
    /// The public name is longer than [`MAX_NAME`].
    #[error("`{0}` is longer than {MAX_NAME} characters")]
    TooLong(String),
    /// The public name has a character outside `[A-Za-z0-9_-]`.
    #[error("`{name}` contains {bad:?}; public names are letters, digits, `_` and `-`")]
    Character {
        name: String,
        /// The first character not allowed.
        bad: char,
    },
}

/// A provider that was not registered because its namespace is taken.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    /// The provider left out.
    pub id: String,
    /// The namespace it asked for.
    pub namespace: String,
    /// Who has it (`butler` for the reserved namespace).
    pub held_by: String,
}

/// Settles namespaces: providers already registered keep theirs; newcomers are taken in
/// scan order, and one whose namespace is reserved or taken is left out.
/// `wanted` is `(id, namespace)` in scan order; `registered` maps namespace → id.
#[must_use]
pub fn settle(wanted: &[(String, String)], registered: &BTreeMap<String, String>) -> (Vec<String>, Vec<Conflict>) {
    let mut holders: BTreeMap<String, String> = BTreeMap::new();
    // Incumbents first: a registered provider still wanted keeps its namespace.
    for (id, namespace) in wanted {
        if registered.get(namespace) == Some(id) {
            holders.insert(namespace.clone(), id.clone());
        }
    }
    let mut accepted = Vec::new();
    let mut conflicts = Vec::new();
    for (id, namespace) in wanted {
        if namespace == RESERVED {
            conflicts.push(Conflict { id: id.clone(), namespace: namespace.clone(), held_by: RESERVED.to_owned() });
            continue;
        }
        match holders.get(namespace) {
            Some(holder) if holder != id => {
                conflicts.push(Conflict { id: id.clone(), namespace: namespace.clone(), held_by: holder.clone() });
            }
            _ => {
                holders.insert(namespace.clone(), id.clone());
                accepted.push(id.clone());
            }
        }
    }
    (accepted, conflicts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_names_follow_the_rule() {
        assert_eq!(public("weather", "get_forecast"), Ok("weather__get_forecast".to_owned()));
        assert_eq!(public("a__b", "c"), Ok("a__b__c".to_owned()));
        assert!(public("w", "bad name").is_err());
        assert!(public("w", "dot.ted").is_err());
        assert!(public("w", "").is_err());
        assert!(public("w", &"x".repeat(61)).is_ok());
        assert!(public("w", &"x".repeat(62)).is_err());
    }

    #[test]
    fn incumbents_keep_their_namespace_and_scan_order_settles_newcomers() {
        let wanted: Vec<(String, String)> = [("a", "x"), ("b", "x"), ("c", "butler"), ("d", "y")]
            .iter()
            .map(|(i, n)| ((*i).into(), (*n).into()))
            .collect();
        let (accepted, conflicts) = settle(&wanted, &BTreeMap::new());
        assert_eq!(accepted, ["a", "d"]);
        assert_eq!(conflicts[0], Conflict { id: "b".into(), namespace: "x".into(), held_by: "a".into() });
        assert_eq!(conflicts[1].held_by, "butler");
        // `b` registered first (a rescan found `a` later): `b` keeps `x`.
        let registered = BTreeMap::from([("x".to_owned(), "b".to_owned())]);
        let (accepted, conflicts) = settle(&wanted, &registered);
        assert_eq!(accepted, ["b", "d"]);
        assert_eq!(conflicts[0].id, "a");
    }
}
