//! The MCP method names the hub and the host speak, in one place: requests a client sends
//! the hub (and the hub sends its providers), requests a provider sends back for the client
//! (sampling, elicitation, roots), and notifications either way. Code names a method by
//! these constants — in `match` arms as well — so a misspelt method is a compile error, not
//! a request nobody answers.

/// The handshake request.
pub const INITIALIZE: &str = "initialize";
/// A liveness check either way.
pub const PING: &str = "ping";
/// The tools' list.
pub const TOOLS_LIST: &str = "tools/list";
/// A tool's call.
pub const TOOLS_CALL: &str = "tools/call";
/// The prompts' list.
pub const PROMPTS_LIST: &str = "prompts/list";
/// A prompt, filled in.
pub const PROMPTS_GET: &str = "prompts/get";
/// The resources' list.
pub const RESOURCES_LIST: &str = "resources/list";
/// The resource templates' list.
pub const RESOURCES_TEMPLATES_LIST: &str = "resources/templates/list";
/// A resource's contents.
pub const RESOURCES_READ: &str = "resources/read";
/// A subscription to a resource's updates.
pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
/// The end of a subscription.
pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
/// Completions of a prompt's or template's argument.
pub const COMPLETION_COMPLETE: &str = "completion/complete";
/// The level of the log messages a session is sent.
pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
/// The Skills extension's read of a skill's folder.
pub const RESOURCES_DIRECTORY_READ: &str = "resources/directory/read";
/// 2026-07-28: what a server offers, asked instead of `initialize`.
pub const SERVER_DISCOVER: &str = "server/discover";
/// 2026-07-28: a stream of the notifications a client subscribes to.
pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
/// The Skills extension's list.
pub const SKILLS_LIST: &str = "skills/list";
/// The Skills extension's read of one skill.
pub const SKILLS_GET: &str = "skills/get";
/// A provider asks the client's model for a message (during a call).
pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
/// A provider asks the client's user for input (during a call).
pub const ELICITATION_CREATE: &str = "elicitation/create";
/// A provider asks the client for its roots.
pub const ROOTS_LIST: &str = "roots/list";

/// The client is ready, after `initialize`.
pub const INITIALIZED: &str = "notifications/initialized";
/// A request is cancelled.
pub const CANCELLED: &str = "notifications/cancelled";
/// A call's progress.
pub const PROGRESS: &str = "notifications/progress";
/// A log message.
pub const MESSAGE: &str = "notifications/message";
/// The tools' list changed.
pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
/// The prompts' list changed.
pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
/// The resources' list changed.
pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
/// A subscribed resource changed.
pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";
/// A 2026-07-28 listen's subscriptions are in place.
pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// Every method above, for tests and checks that go over them all.
pub const ALL: [&str; 30] = [
    INITIALIZE,
    PING,
    TOOLS_LIST,
    TOOLS_CALL,
    PROMPTS_LIST,
    PROMPTS_GET,
    RESOURCES_LIST,
    RESOURCES_TEMPLATES_LIST,
    RESOURCES_READ,
    RESOURCES_SUBSCRIBE,
    RESOURCES_UNSUBSCRIBE,
    COMPLETION_COMPLETE,
    LOGGING_SET_LEVEL,
    SKILLS_LIST,
    SKILLS_GET,
    RESOURCES_DIRECTORY_READ,
    SERVER_DISCOVER,
    SUBSCRIPTIONS_LISTEN,
    SAMPLING_CREATE_MESSAGE,
    ELICITATION_CREATE,
    ROOTS_LIST,
    INITIALIZED,
    CANCELLED,
    PROGRESS,
    MESSAGE,
    TOOLS_LIST_CHANGED,
    PROMPTS_LIST_CHANGED,
    RESOURCES_LIST_CHANGED,
    RESOURCES_UPDATED,
    SUBSCRIPTIONS_ACKNOWLEDGED,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// No two names are alike, and each is a method as MCP spells them: lowercase-led path
    /// segments, notifications under `notifications/`.
    #[test]
    fn every_method_is_named_once_and_spelt_as_mcp_spells_it() {
        let mut seen = std::collections::BTreeSet::new();
        for method in ALL {
            assert!(seen.insert(method), "{method} is named twice");
            assert!(
                method.split('/').all(|part| part.starts_with(|c: char| c.is_ascii_lowercase())
                    && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')),
                "{method}"
            );
        }
        let notifications = ALL.iter().filter(|m| m.starts_with("notifications/")).count();
        assert_eq!(notifications, 9);
    }
}
