//! Which of the lists a client sees changed: what the hub tells its listeners, so each
//! `list_changed` notification goes out of its own kind.

use serde_json::Value;

/// Which lists changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Changed {
    /// `tools/list`.
    pub tools: bool,
    /// `prompts/list`.
    pub prompts: bool,
    /// `resources/list` and `resources/templates/list` (and `skills/list`: the Skills
    /// extension has no notification of its own).
    pub resources: bool,
}

impl Changed {
    /// Every list (providers came or went).
    pub const ALL: Self = Self { tools: true, prompts: true, resources: true };
    /// Only the tools.
    pub const TOOLS: Self = Self { tools: true, prompts: false, resources: false };

    /// Whether anything changed.
    #[must_use]
    pub fn any(self) -> bool {
        self.tools || self.prompts || self.resources
    }

    /// What of this change `wanted` asks for.
    #[must_use]
    pub fn within(self, wanted: Self) -> Self {
        Self {
            tools: self.tools && wanted.tools,
            prompts: self.prompts && wanted.prompts,
            resources: self.resources && wanted.resources,
        }
    }

    /// The `list_changed` notification methods this change makes, in a fixed order.
    #[must_use]
    pub fn methods(self) -> Vec<&'static str> {
        [
            (self.tools, crate::methods::TOOLS_LIST_CHANGED),
            (self.prompts, crate::methods::PROMPTS_LIST_CHANGED),
            (self.resources, crate::methods::RESOURCES_LIST_CHANGED),
        ]
        .into_iter()
        .filter_map(|(changed, method)| changed.then_some(method))
        .collect()
    }

    /// What differs between a provider's lists before and after.
    #[must_use]
    pub fn between(before: &crate::provider::Lists, after: &crate::provider::Lists) -> Self {
        let differs = |a: &[Value], b: &[Value]| a != b;
        Self {
            tools: differs(&before.tools, &after.tools),
            prompts: differs(&before.prompts, &after.prompts),
            resources: differs(&before.resources, &after.resources)
                || differs(&before.resource_templates, &after.resource_templates)
                // A skill's `SKILL.md` is among the resources the hub lists.
                || differs(&before.skills, &after.skills),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Lists;
    use serde_json::json;

    #[test]
    fn each_kind_changes_on_its_own() {
        let before = Lists { tools: vec![json!({"name": "a"})], ..Lists::default() };
        let mut after = before.clone();
        assert!(!Changed::between(&before, &after).any());
        after.prompts.push(json!({"name": "p"}));
        let changed = Changed::between(&before, &after);
        assert_eq!(changed, Changed { prompts: true, ..Changed::default() });
        assert_eq!(changed.methods(), ["notifications/prompts/list_changed"]);
        after.resource_templates.push(json!({"uriTemplate": "x://{id}"}));
        assert_eq!(Changed::between(&before, &after).methods().len(), 2);
        assert_eq!(Changed::ALL.methods().len(), 3);
        assert_eq!(Changed::ALL.within(Changed::TOOLS), Changed::TOOLS);
        assert!(!changed.within(Changed::TOOLS).any());
    }
}
