//! Resource subscriptions: a 2025-11-25 session's (`resources/subscribe`, kept in its
//! [`Session`](crate::Session)) and a 2026-07-28 `subscriptions/listen` stream's (a
//! [`Listening`] guard per resource, counted in [`Listeners`]). A provider is asked to
//! subscribe when a client subscribes, and told to unsubscribe only once no session and no
//! stream wants the resource any more (another endpoint may know it by another URI).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use butler_catalog::lock;

use crate::upcall::Asker;
use crate::{CONTEXT_URI, Hub, RpcError, Updated, View, forward, not_a_resource};

/// The most resources one session (or one `subscriptions/listen` stream) subscribes to.
pub const MAX_SUBSCRIPTIONS: usize = 256;

/// How many `subscriptions/listen` streams want each provider's resource.
#[derive(Default)]
pub(crate) struct Listeners(Arc<Mutex<HashMap<Updated, usize>>>);

impl Listeners {
    /// A stream listens to `resource` (known to it as `uri`) while the guard lives.
    pub(crate) fn listen(&self, uri: &str, resource: Updated) -> Listening {
        *lock(&self.0).entry(resource.clone()).or_default() += 1;
        Listening { uri: uri.to_owned(), resource, listening: Arc::clone(&self.0) }
    }

    /// Whether a stream still listens to `resource`.
    pub(crate) fn wants(&self, resource: &Updated) -> bool {
        lock(&self.0).get(resource).is_some_and(|n| *n > 0)
    }
}

/// A `subscriptions/listen` stream's subscription to one resource, while it lives.
pub struct Listening {
    uri: String,
    resource: Updated,
    listening: Arc<Mutex<HashMap<Updated, usize>>>,
}

impl Listening {
    /// The URI subscribed to.
    #[must_use]
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The URI it was subscribed by, when `updated` is the resource it subscribed to.
    #[must_use]
    pub fn uri_of(&self, updated: &Updated) -> Option<&str> {
        (self.resource == *updated).then_some(self.uri.as_str())
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let mut listening = lock(&self.listening);
        if let Some(count) = listening.get_mut(&self.resource) {
            *count -= 1;
            if *count == 0 {
                listening.remove(&self.resource);
            }
        }
    }
}

impl Hub {
    /// `resources/subscribe` (and the resources a `subscriptions/listen` names): asked of
    /// the provider that offers `uri`; a 2025-11-25 `session` then gets its
    /// `notifications/resources/updated`.
    ///
    /// # Errors
    /// An unknown resource (`-32002`), too many subscriptions, or the provider's error.
    pub async fn subscribe(&self, view: &View, session: Option<&str>, uri: &str) -> Result<Value, RpcError> {
        if let Some(session) = session
            && self.session(session).is_some_and(|s| s.subscriptions.len() >= MAX_SUBSCRIPTIONS)
        {
            return Err(RpcError::invalid_params(format!(
                "a session subscribes to {MAX_SUBSCRIPTIONS} resources at most; unsubscribe from one first"
            )));
        }
        self.subscribe_to(view, session, uri).await.map(|_| json!({}))
    }

    /// [`Self::subscribe`]: which provider's resource `uri` is on `view`.
    async fn subscribe_to(&self, view: &View, session: Option<&str>, uri: &str) -> Result<Updated, RpcError> {
        let resource = if uri == CONTEXT_URI && view.offers_context() {
            Updated { provider: "host".to_owned(), uri: uri.to_owned() }
        } else {
            let (provider, original) = self.resource_owner(view, uri).ok_or_else(|| not_a_resource(uri))?;
            forward(&provider, crate::methods::RESOURCES_SUBSCRIBE, json!({"uri": original}), &Asker::hub()).await?;
            Updated { provider: provider.spec.id.clone(), uri: original }
        };
        if let Some(session) = session {
            self.sessions.update(session, |open| {
                open.subscriptions.insert(uri.to_owned(), resource.clone());
            });
        }
        Ok(resource)
    }

    /// Subscribes a `subscriptions/listen` stream to `uri` for as long as the returned
    /// [`Listening`] lives.
    ///
    /// # Errors
    /// As [`Self::subscribe`].
    pub async fn listen_to(&self, view: &View, uri: &str) -> Result<Listening, RpcError> {
        let resource = self.subscribe_to(view, None, uri).await?;
        Ok(self.listening.listen(uri, resource))
    }

    /// `resources/unsubscribe`: the session no longer gets `uri`'s updates; the provider is
    /// told once no session or stream subscribes to it.
    ///
    /// # Errors
    /// The provider's error.
    pub async fn unsubscribe(&self, view: &View, session: &str, uri: &str) -> Result<Value, RpcError> {
        let mut removed = None;
        self.sessions.update(session, |open| removed = open.subscriptions.remove(uri));
        let resource = removed.or_else(|| {
            self.resource_owner(view, uri)
                .map(|(provider, original)| Updated { provider: provider.spec.id.clone(), uri: original })
        });
        let Some(resource) = resource.filter(|r| r.provider != "host") else { return Ok(json!({})) };
        // Another endpoint may know the same resource by another URI.
        let still_wanted = self.sessions.any_subscribes_to(&resource) || self.listening.wants(&resource);
        let provider = self.providers().into_iter().find(|p| p.spec.id == resource.provider);
        if !still_wanted && let Some(provider) = provider {
            forward(&provider, crate::methods::RESOURCES_UNSUBSCRIBE, json!({"uri": resource.uri}), &Asker::hub())
                .await?;
        }
        Ok(json!({}))
    }

    /// The URI session `id` subscribed to the `updated` resource by, if it did.
    #[must_use]
    pub fn subscribed(&self, id: &str, updated: &Updated) -> Option<String> {
        self.sessions
            .read(id, |session| session.subscriptions.iter().find(|(_, r)| *r == updated).map(|(uri, _)| uri.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resource is wanted while any stream listening to it lives — by whatever URI —
    /// and no longer once the last one is gone.
    #[test]
    fn a_resource_is_wanted_until_its_last_listener_goes() {
        let listeners = Listeners::default();
        let resource = Updated { provider: "fs".to_owned(), uri: "file:///a".to_owned() };
        let other = Updated { provider: "fs".to_owned(), uri: "file:///b".to_owned() };
        assert!(!listeners.wants(&resource));
        let first = listeners.listen("file:///a", resource.clone());
        let second = listeners.listen("p/work:file:///a", resource.clone());
        assert_eq!(second.uri_of(&resource), Some("p/work:file:///a"));
        assert_eq!(second.uri_of(&other), None, "a stream is told only of what it subscribed to");
        drop(first);
        assert!(listeners.wants(&resource), "the second stream still listens");
        assert!(!listeners.wants(&other));
        drop(second);
        assert!(!listeners.wants(&resource), "nobody listens any more");
    }
}
