//! What a provider lists to each kind of client: a server may offer some tools (prompts,
//! resources) only to clients that declare a capability — the reference server
//! `server-everything` lists `trigger-sampling-request` only to a client that declared
//! `sampling`, `get-roots-list` only with `roots`, its elicitation tools only with
//! `elicitation` (the URL one only with `elicitation.url`). The hub declares to providers
//! every capability it can route ([`crate::upcall::routed_capabilities`]), so a provider's
//! own lists are those of the most capable client; a less capable client must not be
//! shown what the provider would not list to it.
//!
//! A client's capabilities are reduced to the [`CapabilitySet`] that can change a list
//! (sampling, elicitation in form and URL mode, roots: 16 sets at most). For each set a
//! client of it lists with, the hub learns once what the provider lists to that set and
//! keeps only the difference, [`Withheld`]: the items of the provider's own lists it
//! withholds from such a client (nothing, for most providers). The hub's lists for that
//! client leave those out. Names, routes and the quarantine stay those of the provider's own
//! lists: only what is shown narrows.
//!
//! How a set is learned depends on the provider's era:
//! - 2026-07-28: every request carries its client's capabilities, so the provider's own
//!   connection is asked its lists with the set's capabilities in the envelope.
//! - The 2025 revisions: a provider learns its client's capabilities once, at `initialize`,
//!   and its session keeps them. The hub keeps its one session (declaring everything: any
//!   call of any client can go through it) and *probes*: a second connection of the same
//!   server (another process, or another session of a remote one), initialized with the
//!   set's capabilities, lists, and is closed. One session per set kept open would do the
//!   same at the cost of a process per set for as long as the provider runs, and every
//!   call, subscription and upcall would have to follow its client's set; a probe costs
//!   one short start per set seen, and changes nothing on the call path.
//!
//! What is learned is kept with the provider's lists (and their cache), and forgotten when
//! those change. Until a set is learned, a client of it is shown what the nearest learned
//! set it covers is shown (a client with more capabilities is listed at least as much), or
//! nothing of that provider when none is: the hub never shows a client an item the
//! provider lists only to more capable clients. A set that cannot be learned (the probe
//! fails) is shown the provider's lists whole, and the provider's log says why.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Changed;

/// The client capabilities that may change what a provider lists (of those the hub can
/// route): which of them a client declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CapabilitySet(u8);

/// The capabilities a [`CapabilitySet`] tells apart, by bit, with their names.
const NAMED: [(u8, &str); 4] = [(1, "sampling"), (2, "elicitation.form"), (4, "elicitation.url"), (8, "roots")];

impl CapabilitySet {
    /// Every capability the hub declares to providers: their own lists are this set's.
    pub const FULL: Self = Self(15);
    /// None of them.
    pub const NONE: Self = Self(0);

    /// The set of a client that declared `capabilities` (`elicitation: {}` is form mode
    /// alone, as the specification has it).
    #[must_use]
    pub fn of(capabilities: &Value) -> Self {
        let declared = |name: &str| capabilities.get(name).filter(|c| c.is_object());
        let mut bits = 0;
        if declared("sampling").is_some() {
            bits |= 1;
        }
        if let Some(elicitation) = declared("elicitation") {
            let (form, url) = (elicitation.get("form").is_some(), elicitation.get("url").is_some());
            if form || !url {
                bits |= 2;
            }
            if url {
                bits |= 4;
            }
        }
        if declared("roots").is_some() {
            bits |= 8;
        }
        Self(bits)
    }

    /// The capabilities a provider is told a client of this set declared.
    #[must_use]
    pub fn declared(self) -> Value {
        let mut capabilities = serde_json::Map::new();
        if self.has(1) {
            capabilities.insert("sampling".into(), json!({}));
        }
        if self.has(2) || self.has(4) {
            let mut modes = serde_json::Map::new();
            if self.has(2) {
                modes.insert("form".into(), json!({}));
            }
            if self.has(4) {
                modes.insert("url".into(), json!({}));
            }
            capabilities.insert("elicitation".into(), Value::Object(modes));
        }
        if self.has(8) {
            capabilities.insert("roots".into(), json!({}));
        }
        Value::Object(capabilities)
    }

    fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// Whether a client of this set has every capability of `other`.
    #[must_use]
    pub fn covers(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// How many capabilities it holds.
    #[must_use]
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// Its name in the list cache and the logs: the capabilities joined by `+`, or `none`.
    #[must_use]
    pub fn key(self) -> String {
        let names: Vec<&str> = NAMED.iter().filter(|(bit, _)| self.has(*bit)).map(|(_, name)| *name).collect();
        if names.is_empty() { "none".to_owned() } else { names.join("+") }
    }

    /// The set [`Self::key`] names.
    #[must_use]
    pub fn from_key(key: &str) -> Option<Self> {
        if key == "none" {
            return Some(Self::NONE);
        }
        key.split('+').try_fold(Self::NONE, |set, name| {
            NAMED.iter().find(|(_, known)| *known == name).map(|(bit, _)| Self(set.0 | bit))
        })
    }
}

/// The kinds of list item a provider may withhold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// `tools/list`, by name.
    Tool,
    /// `prompts/list`, by name.
    Prompt,
    /// `resources/list`, by URI.
    Resource,
    /// `resources/templates/list`, by URI template.
    Template,
}

impl Listed {
    /// What an item of this kind is known by.
    fn key(self) -> &'static str {
        match self {
            Self::Tool | Self::Prompt => "name",
            Self::Resource => "uri",
            Self::Template => "uriTemplate",
        }
    }
}

/// What a provider lists to its most capable clients and not to those of one set: each
/// item by what it is known by (names, URIs, URI templates).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Withheld {
    /// Tool names.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub tools: BTreeSet<String>,
    /// Prompt names.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub prompts: BTreeSet<String>,
    /// Resource URIs.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub resources: BTreeSet<String>,
    /// Resource URI templates.
    #[serde(default, rename = "resourceTemplates", skip_serializing_if = "BTreeSet::is_empty")]
    pub resource_templates: BTreeSet<String>,
}

/// A provider's four lists, borrowed (the provider's `Lists::listing`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Listing<'a> {
    /// Its `tools/list` entries, as the provider sent them.
    pub tools: &'a [Value],
    /// Its `prompts/list` entries, as the provider sent them.
    pub prompts: &'a [Value],
    /// Its `resources/list` entries, as the provider sent them.
    pub resources: &'a [Value],
    /// Its `resources/templates/list` entries, as the provider sent them.
    pub resource_templates: &'a [Value],
}

impl Withheld {
    /// What `full` (the provider's own lists) holds and `narrower` (its lists for one set)
    /// does not.
    #[must_use]
    pub fn between(full: Listing<'_>, narrower: Listing<'_>) -> Self {
        let missing = |kind: Listed, full: &[Value], narrower: &[Value]| -> BTreeSet<String> {
            let known: BTreeSet<&str> = narrower.iter().filter_map(|i| i.get(kind.key())?.as_str()).collect();
            full.iter()
                .filter_map(|i| i.get(kind.key())?.as_str())
                .filter(|k| !known.contains(k))
                .map(str::to_owned)
                .collect()
        };
        Self {
            tools: missing(Listed::Tool, full.tools, narrower.tools),
            prompts: missing(Listed::Prompt, full.prompts, narrower.prompts),
            resources: missing(Listed::Resource, full.resources, narrower.resources),
            resource_templates: missing(Listed::Template, full.resource_templates, narrower.resource_templates),
        }
    }

    /// Whether `item`, of `kind`, is withheld.
    #[must_use]
    pub fn withholds(&self, kind: Listed, item: &Value) -> bool {
        let Some(key) = item.get(kind.key()).and_then(Value::as_str) else { return false };
        match kind {
            Listed::Tool => self.tools.contains(key),
            Listed::Prompt => self.prompts.contains(key),
            Listed::Resource => self.resources.contains(key),
            Listed::Template => self.resource_templates.contains(key),
        }
    }

    /// The lists it narrows.
    #[must_use]
    pub fn narrows(&self) -> Changed {
        Changed {
            tools: !self.tools.is_empty(),
            prompts: !self.prompts.is_empty(),
            resources: !self.resources.is_empty() || !self.resource_templates.is_empty(),
        }
    }
}

/// What a client of one set is shown of one provider's lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// Its lists, less what it withholds.
    AllBut(Withheld),
    /// Nothing yet: what it lists to such a client is not known.
    Nothing,
}

impl Shown {
    /// What a client of `set` is shown, `learned` being what is withheld from each set
    /// learned so far (by [`CapabilitySet::key`]): all but what is withheld from `set` —
    /// or, `set` not learned yet, from the most capable learned set it covers (a client
    /// with more capabilities is listed at least as much) — and nothing when `set` covers
    /// none of them. The full set is shown everything.
    #[must_use]
    pub fn to(set: CapabilitySet, learned: &std::collections::BTreeMap<String, Withheld>) -> Self {
        if set == CapabilitySet::FULL {
            return Self::AllBut(Withheld::default());
        }
        learned
            .iter()
            .filter_map(|(key, withheld)| Some((CapabilitySet::from_key(key)?, withheld)))
            .filter(|(known, _)| set.covers(*known))
            .max_by_key(|(known, _)| known.count())
            .map_or(Self::Nothing, |(_, withheld)| Self::AllBut(withheld.clone()))
    }

    /// Whether `item`, of `kind`, is shown.
    #[must_use]
    pub fn shows(&self, kind: Listed, item: &Value) -> bool {
        match self {
            Self::AllBut(withheld) => !withheld.withholds(kind, item),
            Self::Nothing => false,
        }
    }
}

/// What a client of one set is shown of each provider's lists, by provider id (a provider
/// not named is shown whole).
#[derive(Debug, Default)]
pub struct Narrowing(pub std::collections::HashMap<String, Shown>);

impl Narrowing {
    /// Whether `item`, of `kind`, of provider `provider` is shown.
    #[must_use]
    pub fn shows(&self, provider: &str, kind: Listed, item: &Value) -> bool {
        self.0.get(provider).is_none_or(|shown| shown.shows(kind, item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clients_capabilities_reduce_to_the_set_that_can_change_a_list() {
        assert_eq!(CapabilitySet::of(&json!({})), CapabilitySet::NONE);
        assert_eq!(CapabilitySet::of(&Value::Null), CapabilitySet::NONE);
        // Only objects count, as when a request is routed to the client.
        assert_eq!(CapabilitySet::of(&json!({"sampling": true, "roots": null})), CapabilitySet::NONE);
        assert_eq!(CapabilitySet::of(&json!({"elicitation": {}})).key(), "elicitation.form");
        assert_eq!(CapabilitySet::of(&json!({"elicitation": {"url": {}}})).key(), "elicitation.url");
        let all = json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true},
                         "experimental": {}});
        assert_eq!(CapabilitySet::of(&all), CapabilitySet::FULL);
        // The full set is exactly what the hub declares to providers.
        assert_eq!(CapabilitySet::FULL.declared(), crate::upcall::routed_capabilities());
        for bits in 0..16 {
            let set = CapabilitySet(bits);
            assert_eq!(CapabilitySet::of(&set.declared()), set);
            assert_eq!(CapabilitySet::from_key(&set.key()), Some(set));
            assert!(CapabilitySet::FULL.covers(set) && set.covers(CapabilitySet::NONE));
        }
        assert_eq!(CapabilitySet::from_key("sampling+telepathy"), None);
        assert!(!CapabilitySet::of(&json!({"sampling": {}})).covers(CapabilitySet::of(&json!({"roots": {}}))));
    }

    #[test]
    fn what_is_withheld_is_what_the_full_lists_hold_and_the_narrower_do_not() {
        let (full_tools, resources) =
            ([json!({"name": "echo"}), json!({"name": "sample"})], [json!({"uri": "a://1"}), json!({"uri": "a://2"})]);
        let narrower_tools = [json!({"name": "echo"}), json!({"name": "only-here"})];
        let full = Listing { tools: &full_tools, resources: &resources, ..Listing::default() };
        let narrower = Listing { tools: &narrower_tools, resources: &resources, ..Listing::default() };
        let withheld = Withheld::between(full, narrower);
        assert_eq!(withheld.tools, BTreeSet::from(["sample".to_owned()]));
        assert!(withheld.resources.is_empty() && withheld.prompts.is_empty());
        assert_eq!(withheld.narrows(), Changed::TOOLS);
        assert!(withheld.withholds(Listed::Tool, &json!({"name": "sample"})));
        assert!(!withheld.withholds(Listed::Prompt, &json!({"name": "sample"})));
        assert!(Shown::AllBut(withheld).shows(Listed::Tool, &json!({"name": "echo"})));
        assert!(!Shown::Nothing.shows(Listed::Tool, &json!({"name": "echo"})));
    }

    #[test]
    fn a_set_not_learned_yet_is_shown_what_a_less_capable_learned_set_is_or_nothing() {
        let withholding =
            |tools: &[&str]| Withheld { tools: tools.iter().map(|t| (*t).to_owned()).collect(), ..Withheld::default() };
        let sampling = CapabilitySet::of(&json!({"sampling": {}}));
        let roots = CapabilitySet::of(&json!({"roots": {}}));
        let both = CapabilitySet::of(&json!({"sampling": {}, "roots": {}}));
        let mut learned = std::collections::BTreeMap::new();
        // Nothing learned: nothing shown, but to the full set, which is the provider's own.
        assert_eq!(Shown::to(sampling, &learned), Shown::Nothing);
        assert_eq!(Shown::to(CapabilitySet::FULL, &learned), Shown::AllBut(Withheld::default()));
        learned.insert(CapabilitySet::NONE.key(), withholding(&["sample", "roots"]));
        learned.insert(roots.key(), withholding(&["sample"]));
        // Its own when learned; else the most capable learned set it covers.
        assert_eq!(Shown::to(roots, &learned), Shown::AllBut(withholding(&["sample"])));
        assert_eq!(Shown::to(sampling, &learned), Shown::AllBut(withholding(&["sample", "roots"])));
        assert_eq!(Shown::to(both, &learned), Shown::AllBut(withholding(&["sample"])));
        // A set it does not cover never lends its lists to a less capable client.
        learned.remove(&CapabilitySet::NONE.key());
        assert_eq!(Shown::to(sampling, &learned), Shown::Nothing);
        learned.insert("telepathy".to_owned(), Withheld::default());
        assert_eq!(Shown::to(sampling, &learned), Shown::Nothing);
    }
}
