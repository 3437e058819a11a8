//! The owner's review of what the quarantine holds ([`crate::quarantine`]): which of the
//! providers' items — tools, prompts, resources, resource templates, skills — are held on
//! an endpoint, the report `GET /mcp/quarantine` gives, the errors a held item is refused
//! with, and the approvals that release them.

use std::collections::BTreeMap;
use std::sync::Arc;

use butler_catalog::names;
use serde_json::{Value, json};

use crate::provider::Provider;
use crate::quarantine::{self, Kind};
use crate::{ApprovalError, Changed, Hub, RpcError, View, offers, offers_prompt, offers_tool};

/// A provider's item held out of the lists until the owner approves it.
pub struct HeldItem {
    /// The provider's id.
    pub provider: String,
    /// What it is.
    pub kind: Kind,
    /// Its own key ([`Kind::key_of`]): a tool's or prompt's name as the provider gives it,
    /// a resource's URI, a template's `uriTemplate`, the URI of a skill's `SKILL.md`.
    pub name: String,
    /// What clients would know it by on the endpoint asked about: the public name of a
    /// tool or prompt; a resource's URI; a template's `uriTemplate`; a skill's public URI.
    pub public: String,
    /// Its definition as the provider gives it now.
    pub definition: Value,
    /// Why it is held.
    pub held: quarantine::Held,
}

/// What [`Hub::quarantine`] reports; the host shapes it for HTTP.
pub struct QuarantineReport {
    /// Whether the quarantine is on.
    pub enabled: bool,
    /// Every provider's items held now, under their public names on the main endpoint.
    pub held: Vec<HeldItem>,
    /// The providers trusted wholesale.
    pub trusted: Vec<String>,
}

/// An item to approve: its kind, its own key and, when the owner was shown it, its sha256.
pub type Chosen = (Kind, String, Option<String>);

impl Hub {
    /// Whether provider `id`'s item `definition` of `kind` is held.
    pub(crate) fn is_held(&self, id: &str, kind: Kind, definition: &Value) -> bool {
        self.pins().is_some_and(|pins| pins.held(id, kind, &kind.key_of(definition), definition).is_some())
    }

    /// `provider`'s resource templates the quarantine lets through.
    pub(crate) fn approved_templates(&self, provider: &Provider) -> Vec<Value> {
        let mut templates = provider.lists().resource_templates;
        templates.retain(|t| !self.is_held(&provider.spec.id, Kind::ResourceTemplate, t));
        templates
    }

    /// The providers' items held for the owner's review that `view` would offer, under
    /// what it would show them by (`None`: every provider's, under their public names).
    #[must_use]
    pub fn held_items(&self, view: Option<&View>) -> Vec<HeldItem> {
        let Some(pins) = self.pins() else { return Vec::new() };
        let mut held = Vec::new();
        for provider in self.providers() {
            let spec = &provider.spec;
            if view.is_some_and(|view| !offers(view, spec)) {
                continue;
            }
            let lists = provider.lists();
            let kinds = [
                (Kind::Tool, lists.tools),
                (Kind::Prompt, lists.prompts),
                (Kind::Resource, lists.resources),
                (Kind::ResourceTemplate, lists.resource_templates),
                (Kind::Skill, lists.skills),
                (
                    Kind::Instructions,
                    lists.instructions.iter().map(|text| quarantine::instructions_item(text)).collect(),
                ),
            ];
            for (kind, items) in kinds {
                for definition in items {
                    // A skill entry the extension does not define is offered to no one.
                    if kind == Kind::Skill && !crate::skills::valid(&definition) {
                        continue;
                    }
                    let name = kind.key_of(&definition);
                    let Some(why) = pins.held(&spec.id, kind, &name, &definition) else { continue };
                    let public = match kind {
                        Kind::Skill => crate::skills::public_uri(view.unwrap_or(&View::Main), spec, &name),
                        Kind::Tool | Kind::Prompt => {
                            let Ok(public) = names::public(&spec.namespace, &name) else { continue };
                            if let Some(view) = view {
                                let offered = if kind == Kind::Tool {
                                    offers_tool(view, spec, &public) && view.offers_definition(&definition)
                                } else {
                                    offers_prompt(view, spec, &public)
                                };
                                if !offered {
                                    continue;
                                }
                            }
                            view.map_or(public.as_str(), |view| view.name_for(&public, &name)).to_owned()
                        }
                        Kind::Resource | Kind::ResourceTemplate | Kind::Instructions => name.clone(),
                    };
                    held.push(HeldItem { provider: spec.id.clone(), kind, name, public, definition, held: why });
                }
            }
        }
        held
    }

    /// The error a request for the held item `view` shows as `public` (of `kind`) is
    /// refused with; `None` when no such item is held there.
    pub(crate) fn held_error(&self, view: &View, kind: Kind, public: &str) -> Option<RpcError> {
        self.pins()?;
        let found = self.held_items(Some(view)).into_iter().find(|h| {
            h.kind == kind
                && match kind {
                    Kind::ResourceTemplate => crate::templates::matches(&h.public, public),
                    _ => h.public == public,
                }
        })?;
        let what = match kind {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
            Kind::ResourceTemplate => "resource template that describes",
            Kind::Skill => "skill",
            Kind::Instructions => "instructions",
        };
        let code = if matches!(kind, Kind::Resource | Kind::ResourceTemplate) { -32002 } else { -32602 };
        Some(RpcError {
            code,
            message: format!(
                "the {what} {public} is held for the owner's review — it is new, or its definition changed since the owner approved it — and reaches no client until they approve it (in the console's review queue, or `butler mcp approve`)"
            ),
            data: Some(json!({"held": true, "kind": kind.as_str(), "provider": found.provider, "name": public})),
        })
    }

    /// What the quarantine holds, for the owner's review queue (`GET /mcp/quarantine`,
    /// `butler mcp held`, the console): whether it is on, the providers trusted wholesale,
    /// and every held item of the providers' lists known now (listed since they started, or
    /// cached). A read starts nothing: a provider that never listed holds nothing yet.
    #[must_use]
    pub fn quarantine(&self) -> QuarantineReport {
        let pins = self.pins();
        let trusted: Vec<String> = match &pins {
            Some(pins) => self.providers().iter().map(|p| p.spec.id.clone()).filter(|id| pins.trusted(id)).collect(),
            None => Vec::new(),
        };
        QuarantineReport { enabled: pins.is_some(), held: self.held_items(None), trusted }
    }

    /// The owner approves provider `id`'s held items — `items` (each by its kind and own
    /// key, with the sha256 the owner was shown, if any), or, with no `items`, every item
    /// it offers that is held (none when only `trust` is asked) — and, with `trust`, sets
    /// whether the provider is trusted wholesale. Clients are told the lists changed.
    ///
    /// # Errors
    /// [`ApprovalError`]; nothing is approved then.
    pub async fn approve(
        &self,
        id: &str,
        items: Option<&[Chosen]>,
        trust: Option<bool>,
    ) -> Result<Value, ApprovalError> {
        self.approve_some(id, items, trust, false).await
    }

    /// [`Self::approve`] of every held item of provider `id`, with `trust` set as asked.
    ///
    /// # Errors
    /// [`ApprovalError`]; nothing is approved then.
    pub async fn approve_all(&self, id: &str, trust: Option<bool>) -> Result<Value, ApprovalError> {
        self.approve_some(id, None, trust, true).await
    }

    async fn approve_some(
        &self,
        id: &str,
        items: Option<&[Chosen]>,
        trust: Option<bool>,
        all: bool,
    ) -> Result<Value, ApprovalError> {
        let pins = self.pins().ok_or(ApprovalError::Off)?;
        if !self.providers().iter().any(|p| p.spec.id == id) {
            return Err(ApprovalError::Unknown(id.to_owned()));
        }
        self.start_unlisted(None).await;
        let held: Vec<HeldItem> = self.held_items(None).into_iter().filter(|h| h.provider == id).collect();
        let chosen: Vec<(Kind, String, Value)> = match items {
            None if trust.is_some() && !all => Vec::new(),
            None => held.into_iter().map(|h| (h.kind, h.name, h.definition)).collect(),
            Some(named) => {
                let mut chosen = Vec::new();
                for (kind, name, seen) in named {
                    let found = held
                        .iter()
                        .find(|h| h.kind == *kind && &h.name == name)
                        .ok_or_else(|| ApprovalError::NotHeld(name.clone()))?;
                    if seen.as_ref().is_some_and(|sha| *sha != quarantine::fingerprint(&found.definition)) {
                        return Err(ApprovalError::Stale(name.clone()));
                    }
                    chosen.push((found.kind, found.name.clone(), found.definition.clone()));
                }
                chosen
            }
        };
        pins.approve(id, &chosen, trust).map_err(|e| ApprovalError::Failed(e.to_string()))?;
        self.registry.bump();
        let _ = self.changed.send(Changed::ALL);
        let approved: Vec<&str> = chosen.iter().map(|(_, name, _)| name.as_str()).collect();
        let by_kind: Vec<Value> =
            chosen.iter().map(|(kind, name, _)| json!({"kind": kind.as_str(), "name": name})).collect();
        Ok(json!({"provider": id, "approved": approved, "items": by_kind, "trusted": pins.trusted(id)}))
    }

    /// Says in the host's log, once per change, which providers have items held for the
    /// owner's review and how to release them — so that an owner who just added a server
    /// learns in the terminal why its tools do not show (from now on, while the hub lives).
    pub fn report_held(self: &Arc<Self>) {
        let mut changes = self.changes();
        let watcher = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut told: BTreeMap<String, String> = BTreeMap::new();
            loop {
                let Some(hub) = watcher.upgrade() else { break };
                for (provider, summary) in held_summaries(&hub.held_items(None)) {
                    if told.get(&provider) != Some(&summary) {
                        tracing::warn!(
                            "MCP provider `{provider}`: {summary} held for your review, offered to no client until approved — see them with `butler mcp held`, approve them with `butler mcp approve {provider} --all` (or in the console's review)"
                        );
                        told.insert(provider, summary);
                    }
                }
                drop(hub);
                match changes.recv().await {
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        });
    }
}

/// Per provider with items held, how many of each kind (`2 tools, 1 prompt`).
fn held_summaries(held: &[HeldItem]) -> BTreeMap<String, String> {
    let mut counts: BTreeMap<&str, BTreeMap<Kind, usize>> = BTreeMap::new();
    for item in held {
        *counts.entry(&item.provider).or_default().entry(item.kind).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(provider, kinds)| {
            let parts: Vec<String> = kinds
                .into_iter()
                .map(|(kind, n)| {
                    let noun = match kind {
                        Kind::Tool => "tool",
                        Kind::Prompt => "prompt",
                        Kind::Resource => "resource",
                        Kind::ResourceTemplate => "resource template",
                        Kind::Skill => "skill",
                        Kind::Instructions => return "its instructions".to_owned(),
                    };
                    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
                })
                .collect();
            (provider.to_owned(), parts.join(", "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_items_are_summed_up_per_provider_and_kind() {
        let item = |provider: &str, kind: Kind, name: &str| HeldItem {
            provider: provider.to_owned(),
            kind,
            name: name.to_owned(),
            public: name.to_owned(),
            definition: json!({"name": name}),
            held: quarantine::Held::New,
        };
        let held = [
            item("fs", Kind::Tool, "read"),
            item("fs", Kind::Tool, "write"),
            item("fs", Kind::Prompt, "greet"),
            item("web", Kind::ResourceTemplate, "web://{page}"),
            item("fs", Kind::Instructions, quarantine::INSTRUCTIONS),
        ];
        let summaries = held_summaries(&held);
        assert_eq!(summaries["fs"], "2 tools, 1 prompt, its instructions");
        assert_eq!(summaries["web"], "1 resource template");
        assert_eq!(summaries.len(), 2);
    }
}
