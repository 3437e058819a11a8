//! What one endpoint offers of the hub: the main endpoint (every provider, and the
//! faculties' tools offered there), the restricted one (only the faculties' tools offered
//! there), or a **profile** — the providers and tools the root config names for it, under
//! their public names or, for a profile over one provider, under the provider's own names.

use std::collections::BTreeSet;
use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::Value;

/// The failure-budget key every caller that proves nothing shares (see
/// [`View::budget_key`]); the faculty runtime counts the HTTP routes' anonymous callers
/// under the same key (the binary's `hub_tools` tests hold the two equal).
pub const ANONYMOUS: &str = "anonymous";

/// A profile as the root config declares it (`mcp.profiles.<name>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileSpec {
    /// The providers (extension ids) it offers; `None`: all of them.
    pub providers: Option<Vec<String>>,
    /// Globs over public tool names (`<namespace>__<tool>`, or the host's tools' names): a
    /// tool is offered when it matches one (none given: every tool).
    pub include: Vec<String>,
    /// Globs over public tool names: a tool that matches one is not offered.
    pub exclude: Vec<String>,
    /// Tags ([`tool_tags`]): a provider's tool is offered only when it carries one of them
    /// (none given: any tool).
    pub tags: Vec<String>,
    /// Whether names keep their `<namespace>__` prefix (only a profile over exactly one
    /// provider may drop it).
    pub prefixed: bool,
    /// Whether the faculties' tools offered on the main endpoint (and the compiled
    /// context) are offered too.
    pub host_tools: bool,
    /// Whether a client must send a token made for this profile.
    pub require_token: bool,
    /// Which prompts it offers.
    pub prompts: Prompts,
    /// Whose faculties' tools it offers (with `host_tools`): `/mcp`'s, the restricted
    /// endpoint's, or an agent session's.
    pub scope: Scope,
    /// Whether it is an agent session's endpoint (`/mcp/s/<name>`) rather than a root-config
    /// profile's (`/mcp/p/<name>`).
    pub session: bool,
    /// How its tools are listed.
    pub exposure: Exposure,
    /// Whether `butler__find_tools` is listed beside its tools when it lists them all: a
    /// root-config profile's choice (on unless `exclude` names it, or its names are one
    /// provider's own, which it then mirrors exactly); off for the lists that are exact by
    /// design — a package's profile, an agent session's allow-list.
    pub find_tools: bool,
    /// Whether it offers `butler__run_code` (code mode; see [`crate::code_mode`]).
    pub code_mode: bool,
}

/// How an endpoint lists its tools (`exposure` in the root config: `"all"`, `"search"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exposure {
    /// Every tool it offers, and `butler__find_tools` beside them.
    #[default]
    All,
    /// Only the search tools (`butler__find_tools`, `butler__describe_tools`,
    /// `butler__call_tool`): the tools it offers are found, described and called through
    /// them (and may still be called by name).
    Search,
}

/// Which prompts a profile offers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Prompts {
    /// Those of the providers it offers (what the root config's profiles do).
    #[default]
    OfProviders,
    /// Every prompt, whatever its provider.
    All,
    /// Exactly these, by public name, whatever their provider.
    Named(Vec<String>),
}

/// A profile, checked.
#[derive(Debug)]
pub struct Profile {
    /// Its name (the endpoint is `/mcp/p/<name>`).
    pub name: String,
    /// As declared.
    pub spec: ProfileSpec,
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
}

/// A profile the root config declares wrongly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mcp.profiles.{name}: {why}")]
pub struct ProfileError {
    /// The profile's name, its key under `mcp.profiles`.
    pub name: String,
    /// What is wrong.
    pub why: String,
}

impl Profile {
    /// Checks `spec` as profile `name`.
    ///
    /// # Errors
    /// A name that cannot be a path segment, a glob that does not compile, or unprefixed
    /// names over other than exactly one provider.
    pub fn new(name: &str, spec: ProfileSpec) -> Result<Self, ProfileError> {
        let wrong = |why: String| ProfileError { name: name.to_owned(), why };
        let valid = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !valid {
            return Err(wrong("a profile's name is 1 to 64 of a-z, 0-9, `-` and `_`".to_owned()));
        }
        if !spec.prefixed && spec.providers.as_ref().is_none_or(|p| p.len() != 1) {
            return Err(wrong(
                "`prefix: false` needs exactly one provider in `providers` (names of two could collide)".to_owned(),
            ));
        }
        let globs = |patterns: &[String], field: &str| -> Result<Option<GlobSet>, ProfileError> {
            if patterns.is_empty() {
                return Ok(None);
            }
            let mut set = GlobSetBuilder::new();
            for pattern in patterns {
                set.add(Glob::new(pattern).map_err(|e| wrong(format!("`{field}`: {e}")))?);
            }
            set.build().map(Some).map_err(|e| wrong(format!("`{field}`: {e}")))
        };
        let include = globs(&spec.include, "include")?;
        let exclude = globs(&spec.exclude, "exclude")?;
        Ok(Self { name: name.to_owned(), spec, include, exclude })
    }

    /// Whether its `exclude` names `public`.
    pub(crate) fn excludes(&self, public: &str) -> bool {
        self.exclude.as_ref().is_some_and(|set| set.is_match(public))
    }

    fn admits(&self, public: &str) -> bool {
        self.include.as_ref().is_none_or(|set| set.is_match(public))
            && !self.exclude.as_ref().is_some_and(|set| set.is_match(public))
    }
}

/// The tags a tool definition carries: each of its annotations' hints that is `true`, as
/// `readOnly`, `destructive`, `idempotent`, `openWorld`; and the strings of its
/// `_meta.tags` (and `_meta._fastmcp.tags`, where FastMCP servers put theirs).
#[must_use]
pub fn tool_tags(definition: &Value) -> BTreeSet<String> {
    let mut tags = BTreeSet::new();
    if let Some(annotations) = definition.get("annotations").and_then(Value::as_object) {
        for (hint, tag) in
            [("readOnlyHint", "readOnly"), ("destructiveHint", "destructive"), ("idempotentHint", "idempotent")]
                .into_iter()
                .chain([("openWorldHint", "openWorld")])
        {
            if annotations.get(hint) == Some(&Value::Bool(true)) {
                tags.insert(tag.to_owned());
            }
        }
    }
    let meta = definition.get("_meta");
    for listed in [meta.and_then(|m| m.get("tags")), meta.and_then(|m| m.get("_fastmcp")).and_then(|f| f.get("tags"))]
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
    {
        tags.extend(listed.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    tags
}

/// Which endpoint a session came through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    /// `/mcp`: every provider, plus the host's tools offered there.
    #[default]
    Main,
    /// `/mcp/butler`, the restricted endpoint: only the host's tools offered there, no
    /// providers.
    Restricted,
    /// `/mcp/s/<session>`, an agent session the host drives for a delegation: the tools
    /// offered on `/mcp`, and those offered to agents only.
    Agent,
}

impl Scope {
    /// The tool endpoints (as manifests name them) whose tools this scope offers.
    #[must_use]
    pub fn endpoints(self) -> &'static [butler_catalog::manifest::ToolEndpoint] {
        match self {
            Self::Main => &[butler_catalog::manifest::ToolEndpoint::Main],
            Self::Restricted => &[butler_catalog::manifest::ToolEndpoint::Butler],
            Self::Agent => {
                &[butler_catalog::manifest::ToolEndpoint::Main, butler_catalog::manifest::ToolEndpoint::Agents]
            }
        }
    }
}

/// The endpoint a request came through, and so what it may see.
#[derive(Debug, Clone)]
pub enum View {
    /// `/mcp`.
    Main,
    /// `/mcp/butler`.
    Restricted,
    /// `/mcp/p/<name>`.
    Profile(Arc<Profile>),
}

impl View {
    /// Whose faculties' tools it offers.
    #[must_use]
    pub fn scope(&self) -> Scope {
        match self {
            Self::Restricted => Scope::Restricted,
            Self::Main => Scope::Main,
            Self::Profile(profile) => profile.spec.scope,
        }
    }

    /// The key a command's `failureLimit` counts this endpoint's callers under. A caller
    /// that proves who it is has a budget of its own: an agent session the host drives
    /// (`agent:<id>`, its endpoint needs the session's token) and a profile that requires
    /// a token (`profile:<name>`). Every other caller proves nothing — any local process
    /// can open `/mcp`, `/mcp/butler` or an open profile — so they share one budget,
    /// [`ANONYMOUS`], with the HTTP routes' callers that are not the owner: choosing
    /// another door does not buy another budget, and spending it never touches an agent's.
    #[must_use]
    pub fn budget_key(&self) -> String {
        match self {
            Self::Profile(profile) if profile.spec.session => format!("agent:{}", profile.name),
            Self::Profile(profile) if profile.spec.require_token => format!("profile:{}", profile.name),
            _ => ANONYMOUS.to_owned(),
        }
    }

    /// Its name in sessions and the activity log: `main`, `butler` or `p/<name>`.
    #[must_use]
    pub fn endpoint(&self) -> String {
        match self {
            Self::Main => "main".to_owned(),
            Self::Restricted => "butler".to_owned(),
            Self::Profile(profile) if profile.spec.session => format!("s/{}", profile.name),
            Self::Profile(profile) => format!("p/{}", profile.name),
        }
    }

    /// Whether `endpoint` is its [`Self::endpoint`] (compared without making that).
    #[must_use]
    pub fn is_endpoint(&self, endpoint: &str) -> bool {
        match self {
            Self::Main => endpoint == "main",
            Self::Restricted => endpoint == "butler",
            Self::Profile(profile) => {
                let kind = if profile.spec.session { "s/" } else { "p/" };
                endpoint.strip_prefix(kind) == Some(profile.name.as_str())
            }
        }
    }

    /// Whether it offers the faculties' tool `name` (and the compiled context).
    #[must_use]
    pub fn offers_host_tool(&self, name: &str) -> bool {
        match self {
            Self::Main | Self::Restricted => true,
            Self::Profile(profile) => profile.spec.host_tools && profile.admits(name),
        }
    }

    /// Whether it may offer the search tool `name` (which of them it lists is its
    /// exposure's choice): the main endpoint does; the restricted one, with no providers,
    /// does not; a profile in search mode does, and in `all` mode only as
    /// [`ProfileSpec::find_tools`] says — in either mode, not a search tool its `exclude`
    /// names.
    #[must_use]
    pub fn offers_search_tool(&self, name: &str) -> bool {
        match self {
            Self::Main => true,
            Self::Restricted => false,
            Self::Profile(profile) => {
                !profile.excludes(name) && (profile.spec.exposure == Exposure::Search || profile.spec.find_tools)
            }
        }
    }

    /// Whether it offers the host's own prompt and resource (the compiled context).
    #[must_use]
    pub fn offers_context(&self) -> bool {
        match self {
            Self::Main | Self::Restricted => true,
            Self::Profile(profile) => profile.spec.host_tools,
        }
    }

    /// Whether it offers anything of provider `id` (its prompts and resources).
    #[must_use]
    pub fn offers_provider(&self, id: &str) -> bool {
        match self {
            Self::Main => true,
            Self::Restricted => false,
            Self::Profile(profile) => profile.spec.providers.as_ref().is_none_or(|ids| ids.iter().any(|p| p == id)),
        }
    }

    /// Whether it offers provider `id`'s prompt whose public name is `public`.
    #[must_use]
    pub fn offers_prompt(&self, id: &str, public: &str) -> bool {
        match self {
            Self::Profile(profile) => match &profile.spec.prompts {
                Prompts::OfProviders => self.offers_provider(id),
                Prompts::All => true,
                Prompts::Named(names) => names.iter().any(|n| n == public),
            },
            Self::Main | Self::Restricted => self.offers_provider(id),
        }
    }

    /// Whether it offers provider `id`'s tool whose public name is `public`.
    #[must_use]
    pub fn offers_tool(&self, id: &str, public: &str) -> bool {
        self.offers_provider(id)
            && match self {
                Self::Profile(profile) => profile.admits(public),
                Self::Main | Self::Restricted => true,
            }
    }

    /// Whether its tag filter needs the tools' definitions (a profile that names tags).
    #[must_use]
    pub fn filters_by_tags(&self) -> bool {
        matches!(self, Self::Profile(profile) if !profile.spec.tags.is_empty())
    }

    /// Whether a provider's tool `definition` carries a tag it asks for (any does, when it
    /// names none).
    #[must_use]
    pub fn offers_definition(&self, definition: &Value) -> bool {
        match self {
            Self::Profile(profile) if !profile.spec.tags.is_empty() => {
                let carried = tool_tags(definition);
                profile.spec.tags.iter().any(|tag| carried.contains(tag))
            }
            _ => true,
        }
    }

    /// The name it shows a provider's item by: the public one, or the provider's own in a
    /// profile without prefixes.
    #[must_use]
    pub fn name_for<'a>(&self, public: &'a str, original: &'a str) -> &'a str {
        match self {
            Self::Profile(profile) if !profile.spec.prefixed => original,
            _ => public,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(spec: ProfileSpec) -> View {
        View::Profile(Arc::new(Profile::new("p", spec).expect("a valid profile")))
    }

    #[test]
    fn only_a_caller_that_proves_who_it_is_gets_a_failure_budget_of_its_own() {
        let open = profile(ProfileSpec { prefixed: true, ..ProfileSpec::default() });
        let anonymous = [View::Main, View::Restricted, open].map(|view| view.budget_key());
        assert!(anonymous.iter().all(|key| key == ANONYMOUS), "one budget whatever the door: {anonymous:?}");
        let agent = profile(ProfileSpec { session: true, prefixed: true, ..ProfileSpec::default() });
        let tokened = profile(ProfileSpec { require_token: true, prefixed: true, ..ProfileSpec::default() });
        assert_eq!(agent.budget_key(), "agent:p", "the owner's agent is not starved by anonymous callers");
        assert_eq!(tokened.budget_key(), "profile:p");
    }

    #[test]
    fn a_profile_offers_only_what_it_names() {
        let view = profile(ProfileSpec {
            providers: Some(vec!["fs".into()]),
            include: vec!["fs__read_*".into()],
            exclude: vec!["fs__read_secret*".into()],
            prefixed: true,
            ..ProfileSpec::default()
        });
        assert!(view.offers_tool("fs", "fs__read_file"));
        assert!(!view.offers_tool("fs", "fs__write_file"), "not included");
        assert!(!view.offers_tool("fs", "fs__read_secrets"), "excluded");
        assert!(!view.offers_tool("git", "git__read_log"), "another provider");
        assert!(!view.offers_host_tool("butler__search") && !view.offers_context(), "no host tools");
        assert_eq!(view.endpoint(), "p/p");
        assert_eq!(View::Main.endpoint(), "main");
        for (view, other) in [(&view, "main"), (&View::Main, "p/p"), (&View::Restricted, "main")] {
            assert!(view.is_endpoint(&view.endpoint()));
            assert!(!view.is_endpoint(other));
        }
        assert!(View::Main.offers_tool("git", "git__x") && !View::Restricted.offers_provider("git"));
    }

    #[test]
    fn a_profile_with_tags_offers_only_tools_that_carry_one() {
        let view = profile(ProfileSpec {
            tags: vec!["readOnly".into(), "notes".into()],
            prefixed: true,
            ..ProfileSpec::default()
        });
        let reader = serde_json::json!({"name": "read", "annotations": {"readOnlyHint": true, "openWorldHint": false}});
        let writer =
            serde_json::json!({"name": "write", "annotations": {"readOnlyHint": false, "destructiveHint": true}});
        let tagged = serde_json::json!({"name": "jot", "_meta": {"tags": ["notes", 7]}});
        let fast = serde_json::json!({"name": "jot", "_meta": {"_fastmcp": {"tags": ["notes"]}}});
        assert!(view.filters_by_tags());
        assert!(view.offers_definition(&reader) && view.offers_definition(&tagged) && view.offers_definition(&fast));
        assert!(!view.offers_definition(&writer), "{:?}", tool_tags(&writer));
        assert!(!view.offers_definition(&serde_json::json!({"name": "bare"})));
        assert_eq!(tool_tags(&writer).into_iter().collect::<Vec<_>>(), ["destructive"]);
        assert!(View::Main.offers_definition(&writer) && !View::Main.filters_by_tags());
    }

    #[test]
    fn unprefixed_names_need_exactly_one_provider() {
        let one = ProfileSpec { providers: Some(vec!["conf".into()]), prefixed: false, ..ProfileSpec::default() };
        let view = profile(one.clone());
        assert_eq!(view.name_for("conf__test", "test"), "test");
        assert_eq!(View::Main.name_for("conf__test", "test"), "conf__test");
        for providers in [None, Some(vec![]), Some(vec!["a".into(), "b".into()])] {
            assert!(Profile::new("p", ProfileSpec { providers, ..one.clone() }).is_err());
        }
        assert!(Profile::new("Bad Name", ProfileSpec { prefixed: true, ..ProfileSpec::default() }).is_err());
        let glob = ProfileSpec { include: vec!["[".into()], prefixed: true, ..ProfileSpec::default() };
        assert!(Profile::new("p", glob).is_err());
    }
}
