//! The host's OAuth logins to remote MCP servers, while it runs: which servers need the
//! owner to log in (and why: no login yet, a refused refresh, more scope asked), the logins
//! under way (the owner's browser is on its way to the authorization server and back to
//! the host's loopback callback), and the bearer token each request to a logged-in server
//! carries — refreshed ahead of its expiry, and again when the server refuses it.
//!
//! A login under way is known by its `state` (a 256-bit secret only the host and the
//! authorization server see), lives [`PENDING_FOR`] at most, and at most [`MAX_PENDING`]
//! are under way at once; the callback accepts nothing else. Tokens are read and written
//! through [`Logins`] (0600) and cached; nothing here shows one.
//!
//! Locks: `inner` and `cache` are plain mutexes held for map updates only, never across a
//! request; a refresh holds its server's async `refreshing` lock across its request (so
//! two requests that find the token expired refresh it once), and takes nothing else.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use butler_catalog::lock;
use reqwest::Url;
use serde_json::{Value, json};

use super::logins::{Client, Login, LoginError, Logins, Preregistered};
use super::requests::{ClientCredentials, Discovered, FlowError, Grant, Requests, Tokens};
use super::{AuthorizationRequest, Challenge, ClientAuth, MAX_AUTHORIZATIONS, Pkce};

/// How long a login may wait for the owner's browser to come back.
pub const PENDING_FOR: Duration = Duration::from_secs(600);
/// The most logins under way at once.
pub const MAX_PENDING: usize = 16;
/// How long the outcome of a login is kept for `butler mcp login` to read.
const OUTCOME_FOR: Duration = Duration::from_secs(600);
/// The most outcomes kept.
const MAX_OUTCOMES: usize = 64;
/// How long after a failed refresh the next is tried before a request (a refusal still
/// tries at once).
pub const REFRESH_PAUSE: Duration = Duration::from_secs(30);
/// How a failed refresh's reason begins.
const REFRESH_FAILED: &str = "refreshing its token failed";
/// The callback's path under the API prefixes.
pub const CALLBACK_PATH: &str = "/oauth/callback";

/// Why a login could not begin or finish.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// A step of the flow failed.
    #[error("{0}")]
    Flow(#[from] FlowError),
    /// The login store failed.
    #[error("{0}")]
    Store(#[from] LoginError),
    /// Too many logins are under way.
    #[error("{MAX_PENDING} logins are already under way: finish one, cancel one with `butler mcp logout NAME`, or wait (each expires after {} min)", PENDING_FOR.as_secs() / 60)]
    Busy,
    /// The server kept asking for more scope.
    #[error(
        "{server} was authorized {MAX_AUTHORIZATIONS} times in a row and still asks for more scope ({scope}): not asking again; check what the account may do, then `butler mcp logout {server}` to start over"
    )]
    TooManyAuthorizations {
        /// The server.
        server: String,
        /// What it asks for.
        scope: String,
    },
    /// The callback named no login under way (unknown, used, or expired).
    #[error("this login link is unknown, already used or expired: start the login again")]
    UnknownState,
    /// The authorization server sent the owner back with an error.
    #[error("the authorization server refused: {0}")]
    Denied(String),
    /// The randomness a login needs could not be read.
    #[error("cannot make a login secret: {0}")]
    Random(String),
    /// The server's URL is not one.
    #[error("{0}")]
    NotAUrl(#[from] super::NotAUrl),
    /// The HTTP client could not be set up.
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
}

/// A login begun: where to send the owner's browser.
#[derive(Debug, Clone)]
pub struct Begun {
    /// The login's id (to ask for its outcome).
    pub id: String,
    /// The authorization URL.
    pub url: String,
}

/// How a login ended, or that it has not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The browser has not come back yet.
    Waiting,
    /// Tokens are stored.
    Done,
    /// It failed, and why.
    Failed(String),
}

/// What the dialer does after a server refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Send it again with this token (refreshed, or refreshed meanwhile).
    Retry(String),
    /// The owner must log in (again): the request fails with this text.
    LoginNeeded(String),
    /// Not a matter for OAuth (no `Bearer` challenge): the answer stands.
    NotOAuth,
}

/// Why a server needs the owner to log in.
#[derive(Debug, Clone)]
struct Need {
    /// The server's URL then (a server removed and added again under its name with
    /// another URL starts afresh).
    url: String,
    why: String,
    challenge: Option<Challenge>,
    /// When it was found.
    since: Instant,
}

/// A login under way.
struct Pending {
    id: String,
    server: String,
    verifier: String,
    redirect_uri: String,
    discovered: Discovered,
    client: Client,
    scope: Option<String>,
    until: Instant,
}

#[derive(Default)]
struct Inner {
    pending: HashMap<String, Pending>,
    needs: HashMap<String, Need>,
    outcomes: HashMap<String, (Outcome, Instant)>,
    /// Authorizations since a request last succeeded, per server (and its URL).
    authorizations: HashMap<String, (String, usize)>,
}

/// Where the owner is told a server needs a login again (the host's notifications).
pub type Tell = Box<dyn Fn(Value) + Send + Sync>;

/// The logins of one running host.
pub struct Broker {
    logins: Logins,
    requests: OnceLock<Result<Requests, String>>,
    inner: Mutex<Inner>,
    /// Each server's login as last read or written (`None`: it has none). Every login is
    /// written here (`keep`, `logout`), so the file is read once per server, not per request.
    cache: Mutex<HashMap<String, Option<Arc<Login>>>>,
    refreshing: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    notifier: OnceLock<Tell>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker").field("logins", &self.logins).finish_non_exhaustive()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The text a request to `server` fails with while it needs a login.
#[must_use]
pub fn login_needed(server: &str, why: &str) -> String {
    format!(
        "{server} needs the owner to log in ({why}): `butler mcp login {server}`, or Connect in the console's MCP view"
    )
}

impl Broker {
    /// The logins of the instance whose state folder is `state_dir`.
    #[must_use]
    pub fn new(state_dir: &std::path::Path) -> Self {
        Self {
            logins: Logins::new(state_dir),
            requests: OnceLock::new(),
            inner: Mutex::new(Inner::default()),
            cache: Mutex::new(HashMap::new()),
            refreshing: Mutex::new(HashMap::new()),
            notifier: OnceLock::new(),
        }
    }

    /// Where a failed refresh is told to the owner (set once, when notifications start).
    pub fn notify_with(&self, tell: Tell) {
        let _ = self.notifier.set(tell);
    }

    fn requests(&self) -> Result<&Requests, BrokerError> {
        self.requests
            .get_or_init(|| super::super::http_client().map(Requests::new))
            .as_ref()
            .map_err(|e| BrokerError::Client(e.clone()))
    }

    /// Server `server`'s login, from the cache or (the first time) its file.
    fn login(&self, server: &str) -> Option<Arc<Login>> {
        if let Some(cached) = lock(&self.cache).get(server) {
            return cached.clone();
        }
        let loaded = match self.logins.load(server) {
            Ok(login) => login.map(Arc::new),
            Err(e) => {
                tracing::warn!(server, "{e}");
                None
            }
        };
        lock(&self.cache).insert(server.to_owned(), loaded.clone());
        loaded
    }

    /// Server `server`'s login, if it was issued for the server at `url`: a token never
    /// goes to another (a server removed and added again under its name elsewhere).
    fn login_at(&self, (server, url): (&str, &str)) -> Option<Arc<Login>> {
        let login = self.login(server)?;
        Url::parse(url).is_ok_and(|at| super::resource_holds(&login.resource, &at)).then_some(login)
    }

    fn keep(&self, server: &str, login: Login) -> Result<Arc<Login>, LoginError> {
        self.logins.save(server, &login)?;
        let login = Arc::new(login);
        lock(&self.cache).insert(server.to_owned(), Some(Arc::clone(&login)));
        Ok(login)
    }

    /// The bearer token a request to `server` (at `url`) carries: its login's, refreshed
    /// first when it is about to expire; `None` without a login.
    pub async fn bearer(&self, (server, url): (&str, &str)) -> Option<String> {
        let login = self.login_at((server, url))?;
        if login.due_for_refresh(now_ms()) && self.refresh_failure(server).is_none() {
            return match self.refresh((server, url), &login.access_token).await {
                Ok(fresh) => Some(fresh.access_token.clone()),
                // Used until refused: the server may still take it.
                Err(_) => Some(login.access_token.clone()),
            };
        }
        Some(login.access_token.clone())
    }

    /// A request to `server` with a token succeeded, and it was real work (not the
    /// handshake, which some servers take without one): the authorizations asked in a row
    /// start again from none.
    pub fn succeeded(&self, server: &str) {
        lock(&self.inner).authorizations.remove(server);
    }

    /// `server` (at `url`) refused a request (`status` 401 or 403) that carried `sent` (or
    /// no token), with `challenge`: what the dialer does next.
    pub async fn refused(
        &self,
        (server, url): (&str, &str),
        status: u16,
        challenge: Option<Challenge>,
        sent: Option<&str>,
    ) -> Verdict {
        if sent.is_none()
            && let Some(login) = self.login_at((server, url))
        {
            // Sent before the login was stored: sent again with its token.
            return Verdict::Retry(login.access_token.clone());
        }
        let Some(challenge) = challenge else {
            if status == 401 && sent.is_some() {
                // A token refused without saying why: refresh once, as for `invalid_token`.
                return self.after_invalid((server, url), None, sent).await;
            }
            return Verdict::NotOAuth;
        };
        if status == 403 {
            if !challenge.insufficient_scope() {
                return Verdict::NotOAuth;
            }
            let scope = challenge.scope.clone().unwrap_or_default();
            let why = format!("it asks for more scope: {scope}");
            self.need((server, url), why.clone(), Some(challenge));
            return Verdict::LoginNeeded(login_needed(server, &why));
        }
        self.after_invalid((server, url), Some(challenge), sent).await
    }

    /// `server` refused again the request just sent again with a fresh token: the owner
    /// logs in (with more scope, when that is what it asks).
    pub fn refused_again(&self, (server, url): (&str, &str), challenge: Option<Challenge>) -> String {
        let why = match challenge.as_ref().filter(|c| c.insufficient_scope()) {
            Some(c) => format!("it asks for more scope: {}", c.scope.as_deref().unwrap_or_default()),
            None => "it refused its token right after it was refreshed".to_owned(),
        };
        self.need((server, url), why.clone(), challenge);
        login_needed(server, &why)
    }

    /// A 401: a refreshed token to retry with, else a login.
    async fn after_invalid(
        &self,
        (server, url): (&str, &str),
        challenge: Option<Challenge>,
        sent: Option<&str>,
    ) -> Verdict {
        if let (Some(sent), Some(login)) = (sent, self.login_at((server, url))) {
            if login.access_token != sent {
                return Verdict::Retry(login.access_token.clone());
            }
            if let Some(why) = self.refresh_failure(server) {
                return Verdict::LoginNeeded(login_needed(server, &why));
            }
            if login.refresh_token.is_some() {
                match self.refresh((server, url), sent).await {
                    Ok(fresh) => return Verdict::Retry(fresh.access_token.clone()),
                    Err(why) => return Verdict::LoginNeeded(login_needed(server, &why)),
                }
            }
            let why = "its token was refused and cannot be refreshed".to_owned();
            self.need((server, url), why.clone(), challenge);
            return Verdict::LoginNeeded(login_needed(server, &why));
        }
        let why = "it asks for a login".to_owned();
        self.need((server, url), why.clone(), challenge);
        Verdict::LoginNeeded(login_needed(server, &why))
    }

    /// Records that `server` needs a login; whether it did not already.
    fn need(&self, (server, url): (&str, &str), why: String, challenge: Option<Challenge>) -> bool {
        let need = Need { url: url.to_owned(), why, challenge, since: Instant::now() };
        lock(&self.inner).needs.insert(server.to_owned(), need).is_none()
    }

    /// Why a refresh of `server`'s token failed, if it did within [`REFRESH_PAUSE`]: another
    /// is not tried before (an authorization server that is down is not asked at every
    /// request).
    fn refresh_failure(&self, server: &str) -> Option<String> {
        let inner = lock(&self.inner);
        let need = inner.needs.get(server)?;
        (need.why.starts_with(REFRESH_FAILED) && need.since.elapsed() < REFRESH_PAUSE).then(|| need.why.clone())
    }

    /// Refreshes `server`'s token, unless it was refreshed since `stale` was read; the
    /// login after. A refusal forgets the tokens' use: the owner is asked to log in again
    /// (a notification, `mcp status`, the console).
    async fn refresh(&self, (server, url): (&str, &str), stale: &str) -> Result<Arc<Login>, String> {
        let gate = Arc::clone(lock(&self.refreshing).entry(server.to_owned()).or_default());
        let Ok(_held) = tokio::time::timeout(super::requests::REQUEST_TIMEOUT * 2, gate.lock()).await else {
            return Err("a refresh of its token did not finish in time".to_owned());
        };
        let login = self.login_at((server, url)).ok_or_else(|| "it has no login".to_owned())?;
        if login.access_token != stale {
            return Ok(login);
        }
        let Some(refresh_token) = login.refresh_token.as_deref() else {
            return Err("its token expired and cannot be refreshed".to_owned());
        };
        let requests = self.requests().map_err(|e| e.to_string())?;
        let client = credentials(&login.client);
        let answer =
            requests.token(&login.token_endpoint, client, Grant::Refresh(refresh_token), &login.resource).await;
        match answer {
            Ok(tokens) => {
                let mut fresh = Login::clone(&login);
                apply(&mut fresh, tokens, login.scope.clone());
                self.keep(server, fresh).map_err(|e| e.to_string())
            }
            Err(error) => {
                let why = format!("{REFRESH_FAILED}: {error}");
                // Told once, not at every request that finds the token still expired.
                if self.need((server, url), why.clone(), None)
                    && let Some(tell) = self.notifier.get()
                {
                    tell(json!({
                        "kind": "login",
                        "server": server,
                        "summary": login_needed(server, &why),
                    }));
                }
                Err(why)
            }
        }
    }

    /// Begins a login to the MCP server `server` at `url` (`configured`: its
    /// pre-registered client, if the owner gave one), the owner's browser to come back to
    /// `redirect_uri`.
    ///
    /// # Errors
    /// [`BrokerError`]: discovery or registration failed, too many logins are under way,
    /// or the server keeps asking for more scope.
    pub async fn begin(&self, server: &str, url: &str, redirect_uri: &str) -> Result<Begun, BrokerError> {
        let server_url = Url::parse(url).map_err(|_| super::NotAUrl(butler_mcp::upstream::shown_url(url)))?;
        // As the dialer names it.
        let url = server_url.as_str();
        let (challenge, made) = {
            let inner = lock(&self.inner);
            let need = inner.needs.get(server).filter(|n| n.url == url);
            let made = inner.authorizations.get(server).filter(|(at, _)| at == url).map_or(0, |(_, n)| *n);
            (need.and_then(|n| n.challenge.clone()), made)
        };
        let granted = self.login(server).and_then(|l| l.scope.clone());
        let stepping_up = challenge.as_ref().is_some_and(Challenge::insufficient_scope);
        if stepping_up && made >= MAX_AUTHORIZATIONS {
            let scope = challenge.and_then(|c| c.scope).unwrap_or_default();
            return Err(BrokerError::TooManyAuthorizations { server: server.to_owned(), scope });
        }
        let requests = self.requests()?;
        // Not dialled yet (or not refused): what it says to a client without a token.
        let challenge = match challenge {
            Some(challenge) => Some(challenge),
            None => requests.probe(&server_url).await,
        };
        let discovered = requests.discover(&server_url, challenge.as_ref()).await?;
        let preregistered = self.logins.load_client(server)?;
        let configured = preregistered.as_ref().map(|p| p.scopes.join(" ")).filter(|s| !s.is_empty());
        let scope = match (&challenge, stepping_up) {
            (Some(c), true) => {
                Some(super::stepped_up(granted.as_deref().unwrap_or_default(), c.scope.as_deref().unwrap_or_default()))
            }
            _ => configured.or_else(|| {
                super::scope_to_request(
                    challenge.as_ref().and_then(|c| c.scope.as_deref()),
                    discovered.scopes_supported.as_deref(),
                )
            }),
        };
        let supported = discovered.server.token_endpoint_auth_methods_supported.as_deref();
        let client = match preregistered {
            Some(Preregistered { client_id: Some(client_id), client_secret, .. }) => {
                let auth = ClientAuth::choose(None, supported, client_secret.is_some());
                Client { id: client_id, secret: client_secret, auth }
            }
            _ => {
                let registered = requests.register(&discovered.server, redirect_uri, scope.as_deref()).await?;
                let auth =
                    ClientAuth::choose(registered.method.as_deref(), supported, registered.client_secret.is_some());
                Client { id: registered.client_id, secret: registered.client_secret, auth }
            }
        };
        let pkce = Pkce::new().map_err(|e| BrokerError::Random(e.to_string()))?;
        let state = crate::instance::owner::random_secret().map_err(|e| BrokerError::Random(e.to_string()))?;
        let id = crate::instance::owner::random_secret().map_err(|e| BrokerError::Random(e.to_string()))?;
        let id = id[..16].to_owned();
        let authorization = super::authorization_url(
            &discovered.server.authorization_endpoint,
            &AuthorizationRequest {
                client_id: &client.id,
                redirect_uri,
                state: &state,
                code_challenge: &pkce.challenge,
                resource: &discovered.resource,
                scope: scope.as_deref(),
            },
        )?;
        let mut inner = lock(&self.inner);
        let now = Instant::now();
        inner.pending.retain(|_, p| p.until > now);
        if inner.pending.len() >= MAX_PENDING {
            return Err(BrokerError::Busy);
        }
        // One login per server at a time: a new one replaces the one before.
        inner.pending.retain(|_, p| p.server != server);
        // A step-up counts on from the authorizations before it; any other login starts
        // the count again.
        let count = if stepping_up { made + 1 } else { 1 };
        inner.authorizations.insert(server.to_owned(), (url.to_owned(), count));
        inner.pending.insert(
            state,
            Pending {
                id: id.clone(),
                server: server.to_owned(),
                verifier: pkce.verifier,
                redirect_uri: redirect_uri.to_owned(),
                discovered,
                client,
                scope,
                until: now + PENDING_FOR,
            },
        );
        record(&mut inner.outcomes, &id, Outcome::Waiting);
        Ok(Begun { id, url: authorization })
    }

    /// Finishes the login whose `state` the callback names: exchanges `code` for tokens
    /// and keeps them (or records the authorization server's `error`). The server logged
    /// in.
    ///
    /// # Errors
    /// [`BrokerError::UnknownState`] for a state no login under way has; else why it
    /// failed (recorded as the login's outcome too).
    pub async fn complete(&self, state: &str, code: Option<&str>, error: Option<&str>) -> Result<String, BrokerError> {
        let pending = {
            let mut inner = lock(&self.inner);
            let now = Instant::now();
            inner.pending.retain(|_, p| p.until > now);
            inner.pending.remove(state).ok_or(BrokerError::UnknownState)?
        };
        let result = self.exchange(&pending, code, error).await;
        let mut inner = lock(&self.inner);
        match &result {
            Ok(()) => {
                inner.needs.remove(&pending.server);
                record(&mut inner.outcomes, &pending.id, Outcome::Done);
            }
            Err(e) => record(&mut inner.outcomes, &pending.id, Outcome::Failed(e.to_string())),
        }
        result.map(|()| pending.server)
    }

    async fn exchange(&self, pending: &Pending, code: Option<&str>, error: Option<&str>) -> Result<(), BrokerError> {
        if let Some(error) = error {
            return Err(BrokerError::Denied(butler_catalog::text::clip(error, 200).to_string()));
        }
        let code = code.ok_or_else(|| BrokerError::Denied("no code came back".to_owned()))?;
        let requests = self.requests()?;
        let grant = Grant::Code { code, verifier: &pending.verifier, redirect_uri: &pending.redirect_uri };
        let endpoint = &pending.discovered.server.token_endpoint;
        let tokens =
            requests.token(endpoint, credentials(&pending.client), grant, &pending.discovered.resource).await?;
        let mut login = Login {
            issuer: pending.discovered.server.issuer.clone(),
            token_endpoint: endpoint.clone(),
            revocation_endpoint: pending.discovered.server.revocation_endpoint.clone(),
            client: pending.client.clone(),
            resource: pending.discovered.resource.clone(),
            scope: None,
            access_token: String::new(),
            refresh_token: None,
            expires_at_ms: None,
            issued_at_ms: None,
        };
        apply(&mut login, tokens, pending.scope.clone());
        self.keep(&pending.server, login)?;
        Ok(())
    }

    /// How login `id` went (`None`: no such login, or too long ago).
    #[must_use]
    pub fn outcome(&self, id: &str) -> Option<Outcome> {
        lock(&self.inner).outcomes.get(id).map(|(o, _)| o.clone())
    }

    /// Forgets `server`'s tokens (revoking them, best effort) and whatever was under way;
    /// whether it had a login.
    ///
    /// # Errors
    /// [`LoginError`] when the file cannot be removed.
    pub async fn logout(&self, server: &str) -> Result<bool, LoginError> {
        let login = self.login(server);
        {
            let mut inner = lock(&self.inner);
            inner.pending.retain(|_, p| p.server != server);
            inner.needs.remove(server);
            inner.authorizations.remove(server);
        }
        let had = self.logins.forget(server)?;
        lock(&self.cache).insert(server.to_owned(), None);
        if let (Some(login), Ok(requests)) = (login, self.requests())
            && let Some(endpoint) = &login.revocation_endpoint
        {
            let client = credentials(&login.client);
            if let Some(refresh) = &login.refresh_token {
                requests.revoke(endpoint, client, refresh, "refresh_token").await;
            }
            requests.revoke(endpoint, client, &login.access_token, "access_token").await;
        }
        Ok(had)
    }

    /// What `mcp status` and the console show of `server`'s login: `null` when it has none
    /// and needs none; never a token.
    #[must_use]
    pub fn status(&self, server: &str) -> Value {
        let need = lock(&self.inner).needs.get(server).cloned();
        let login = self.login(server);
        match (need, login) {
            (Some(need), _) => json!({"state": "needed", "reason": need.why}),
            (None, Some(login)) => json!({
                "state": "signed-in",
                "issuer": login.issuer,
                "scope": login.scope,
                "expiresAt": login.expires_at_ms,
                "refreshable": login.refresh_token.is_some(),
            }),
            (None, None) => Value::Null,
        }
    }

    /// The servers that need the owner to log in, and why.
    #[must_use]
    pub fn needed(&self) -> Vec<(String, String)> {
        let mut needed: Vec<_> = lock(&self.inner).needs.iter().map(|(s, n)| (s.clone(), n.why.clone())).collect();
        needed.sort();
        needed
    }
}

/// Keeps `outcome` for login `id`, dropping the expired and (past [`MAX_OUTCOMES`]) the
/// oldest.
fn record(outcomes: &mut HashMap<String, (Outcome, Instant)>, id: &str, outcome: Outcome) {
    let now = Instant::now();
    outcomes.retain(|_, (_, at)| now.duration_since(*at) < OUTCOME_FOR);
    if outcomes.len() >= MAX_OUTCOMES
        && !outcomes.contains_key(id)
        && let Some(oldest) = outcomes.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| k.clone())
    {
        outcomes.remove(&oldest);
    }
    outcomes.insert(id.to_owned(), (outcome, now));
}

fn credentials(client: &Client) -> ClientCredentials<'_> {
    ClientCredentials { id: &client.id, secret: client.secret.as_deref(), auth: client.auth }
}

/// `login` with what the token endpoint gave (a refresh that gives no new refresh token
/// keeps the old one; no `scope` keeps `asked`).
fn apply(login: &mut Login, tokens: Tokens, asked: Option<String>) {
    login.access_token = tokens.access_token;
    if tokens.refresh_token.is_some() {
        login.refresh_token = tokens.refresh_token;
    }
    login.scope = tokens.scope.or(asked);
    let now = now_ms();
    login.expires_at_ms = tokens.expires_in.map(|secs| now.saturating_add(secs.saturating_mul(1000)));
    login.issued_at_ms = Some(now);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn challenge(header: &str) -> Option<Challenge> {
        super::super::parse_challenge(header)
    }

    fn login(access: &str, refresh: Option<&str>) -> Login {
        Login {
            issuer: "http://127.0.0.1:9/".into(),
            token_endpoint: "http://127.0.0.1:9/token".into(),
            revocation_endpoint: None,
            client: Client { id: "c".into(), secret: None, auth: ClientAuth::None },
            resource: "http://127.0.0.1:9/mcp".into(),
            scope: Some("read".into()),
            access_token: access.into(),
            refresh_token: refresh.map(Into::into),
            expires_at_ms: None,
            issued_at_ms: None,
        }
    }

    const AT: (&str, &str) = ("srv", "http://127.0.0.1:9/mcp");

    #[tokio::test]
    async fn a_refusal_asks_the_owner_to_log_in_and_says_why_without_a_token() {
        let state = tempfile::tempdir().expect("temp");
        let broker = Broker::new(state.path());
        assert_eq!(broker.status("srv"), Value::Null);
        // No challenge: not a matter for OAuth.
        assert_eq!(broker.refused(AT, 401, None, None).await, Verdict::NotOAuth);
        assert_eq!(
            broker.refused(AT, 403, challenge(r#"Bearer error="invalid_token""#), None).await,
            Verdict::NotOAuth
        );
        let Verdict::LoginNeeded(why) = broker.refused(AT, 401, challenge(r#"Bearer scope="a b""#), None).await else {
            panic!("a login is needed");
        };
        assert!(why.contains("butler mcp login srv"), "{why}");
        assert_eq!(broker.status("srv")["state"], "needed");
        assert_eq!(broker.needed(), vec![("srv".to_owned(), "it asks for a login".to_owned())]);

        // With a login (a host started with it on disk): a request sent before it was
        // stored goes again with its token; a token refused that cannot be refreshed needs
        // a login; more scope is a step-up.
        Logins::new(state.path()).save("srv", &login("tok-1", None)).expect("saved");
        let broker = Broker::new(state.path());
        assert_eq!(broker.refused(AT, 401, challenge("Bearer"), None).await, Verdict::Retry("tok-1".into()));
        assert_eq!(broker.refused(AT, 401, challenge("Bearer"), Some("tok-0")).await, Verdict::Retry("tok-1".into()));
        let Verdict::LoginNeeded(why) = broker.refused(AT, 401, challenge("Bearer"), Some("tok-1")).await else {
            panic!("no refresh token");
        };
        assert!(why.contains("cannot be refreshed") && !why.contains("tok-1"), "{why}");
        let insufficient = challenge(r#"Bearer error="insufficient_scope", scope="read write""#);
        let Verdict::LoginNeeded(why) = broker.refused(AT, 403, insufficient, Some("tok-1")).await else {
            panic!("a step-up");
        };
        assert!(why.contains("more scope: read write"), "{why}");
        assert!(!broker.status("srv").to_string().contains("tok-1"));
    }

    #[tokio::test]
    async fn a_refused_refresh_token_asks_for_a_login_and_the_token_is_kept_until_then() {
        // The token endpoint is a closed port: the refresh fails, and the owner is asked.
        let state = tempfile::tempdir().expect("temp");
        let broker = Broker::new(state.path());
        let told = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&told);
        broker.notify_with(Box::new(move |message| lock(&into).push(message)));
        Logins::new(state.path()).save("srv", &login("tok-1", Some("ref-1"))).expect("saved");
        let Verdict::LoginNeeded(why) = broker.refused(AT, 401, challenge("Bearer"), Some("tok-1")).await else {
            panic!("the refresh failed");
        };
        assert!(why.contains("refreshing its token failed") && !why.contains("ref-1"), "{why}");
        assert_eq!(broker.status("srv")["state"], "needed");
        assert_eq!(broker.bearer(AT).await.as_deref(), Some("tok-1"), "used until replaced");
        // Refused again at once: no second refresh and no second message.
        assert!(matches!(broker.refused(AT, 401, challenge("Bearer"), Some("tok-1")).await, Verdict::LoginNeeded(_)));
        let told = lock(&told).clone();
        assert_eq!(told.len(), 1, "{told:?}");
        assert_eq!((&told[0]["kind"], &told[0]["server"]), (&json!("login"), &json!("srv")));
        assert!(!told[0].to_string().contains("ref-1") && !told[0].to_string().contains("tok-1"));
    }

    #[tokio::test]
    async fn the_callback_takes_only_a_login_under_way_and_logout_forgets() {
        let state = tempfile::tempdir().expect("temp");
        let broker = Broker::new(state.path());
        for (code, error) in [(Some("c"), None), (None, Some("access_denied"))] {
            assert!(matches!(broker.complete("nope", code, error).await, Err(BrokerError::UnknownState)));
        }
        Logins::new(state.path()).save("srv", &login("tok-1", None)).expect("saved");
        assert_eq!(broker.bearer(AT).await.as_deref(), Some("tok-1"));
        // Never to a server elsewhere under the same name.
        assert_eq!(broker.bearer(("srv", "http://127.0.0.1:10/mcp")).await, None);
        assert_eq!(broker.bearer(("srv", "http://127.0.0.1:9/other")).await, None);
        assert_eq!(broker.status("srv")["state"], "signed-in");
        assert!(broker.logout("srv").await.expect("forgotten"));
        assert_eq!(broker.bearer(AT).await, None);
        assert!(!broker.logout("srv").await.expect("nothing left"));
    }
}
