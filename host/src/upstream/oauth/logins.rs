//! What the host keeps of each remote server's OAuth login: the client it is known as to
//! the authorization server, and the tokens it was given — one file per server,
//! `stateDir/mcp/oauth/<server>.json`, 0600 in a 0700 folder. Nothing here is ever shown:
//! `Debug` names no secret, and errors name the file, not what is in it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ClientAuth;

/// The folder under the state directory.
pub const DIR: &str = "mcp/oauth";

/// How long before its expiry an access token is refreshed.
pub const REFRESH_AHEAD_MS: u64 = 60_000;

/// A server's login.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Login {
    /// The authorization server's issuer.
    pub issuer: String,
    /// The token endpoint.
    pub token_endpoint: String,
    /// Where tokens are revoked (RFC 7009), when the server has such an endpoint.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
    /// The client the host is there: pre-registered, or registered by the host.
    pub client: Client,
    /// The protected resource, as its metadata names it (sent as `resource`).
    pub resource: String,
    /// The scopes granted (space-separated), when the server said.
    pub scope: Option<String>,
    /// The access token.
    pub access_token: String,
    /// The refresh token, when one was given.
    pub refresh_token: Option<String>,
    /// When the access token expires, in ms since the epoch (unknown: `None`).
    pub expires_at_ms: Option<u64>,
    /// When the access token was given, in ms since the epoch (for how long it lives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_at_ms: Option<u64>,
}

/// What the owner set for a server's logins (`butler mcp add … [--client-id ID
/// [--client-secret SECRET]] [--scope S]…`): the client registered with its authorization
/// server beforehand, used instead of registering one, and the scopes to ask for.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preregistered {
    /// Its id (none: the host registers a client itself).
    #[serde(default)]
    pub client_id: Option<String>,
    /// Its secret, for a confidential client.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// The scopes to ask for (none: those the server names).
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for Preregistered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preregistered")
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// The client the host is to an authorization server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Client {
    /// Its id.
    pub id: String,
    /// Its secret, for a confidential client.
    pub secret: Option<String>,
    /// How it authenticates at the token endpoint.
    pub auth: ClientAuth,
}

impl Login {
    /// Whether the access token should be refreshed before it is used at `now_ms`: it
    /// expires within [`REFRESH_AHEAD_MS`] — or within half its life, for a token that
    /// lives less than twice that (else one that lives 60 s would be refreshed at every
    /// request) — and a refresh token is there to do it.
    #[must_use]
    pub fn due_for_refresh(&self, now_ms: u64) -> bool {
        let ahead = match (self.issued_at_ms, self.expires_at_ms) {
            (Some(from), Some(to)) => (to.saturating_sub(from) / 2).min(REFRESH_AHEAD_MS),
            _ => REFRESH_AHEAD_MS,
        };
        self.refresh_token.is_some() && self.expires_at_ms.is_some_and(|at| at <= now_ms.saturating_add(ahead))
    }
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("issuer", &self.issuer)
            .field("client", &self.client)
            .field("resource", &self.resource)
            .field("scope", &self.scope)
            .field("refreshable", &self.refresh_token.is_some())
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("id", &self.id).field("auth", &self.auth).finish_non_exhaustive()
    }
}

/// Why a login could not be read, kept or forgotten.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// The file or folder could not be read or written.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file does not read as a login (its content is not shown: it holds tokens).
    #[error("{} is not a login the host wrote; `butler mcp logout` forgets it", .0.display())]
    Unreadable(PathBuf),
}

/// The logins of one instance.
#[derive(Debug, Clone)]
pub struct Logins {
    dir: PathBuf,
}

impl Logins {
    /// The logins kept under `state_dir`.
    #[must_use]
    pub fn new(state_dir: &Path) -> Self {
        Self { dir: state_dir.join(DIR) }
    }

    fn file(&self, server: &str) -> PathBuf {
        let name = percent_encoding::utf8_percent_encode(server, percent_encoding::NON_ALPHANUMERIC);
        self.dir.join(format!("{name}.json"))
    }

    fn client_file(&self, server: &str) -> PathBuf {
        let name = percent_encoding::utf8_percent_encode(server, percent_encoding::NON_ALPHANUMERIC);
        self.dir.join(format!("{name}.client.json"))
    }

    /// Server `server`'s pre-registered client, if the owner gave one.
    ///
    /// # Errors
    /// [`LoginError`] when the file is there but cannot be read as one.
    pub fn load_client(&self, server: &str) -> Result<Option<Preregistered>, LoginError> {
        read_json(self.client_file(server))
    }

    /// Keeps `client` as server `server`'s pre-registered client (0600).
    ///
    /// # Errors
    /// [`LoginError::Io`].
    pub fn save_client(&self, server: &str, client: &Preregistered) -> Result<(), LoginError> {
        self.write_json(self.client_file(server), client)
    }

    /// Forgets server `server`'s pre-registered client; whether it had one.
    ///
    /// # Errors
    /// [`LoginError::Io`].
    pub fn forget_client(&self, server: &str) -> Result<bool, LoginError> {
        remove(self.client_file(server))
    }

    /// Forgets everything kept of server `server`: its login and its pre-registered client.
    ///
    /// # Errors
    /// [`LoginError::Io`].
    pub fn forget_all(&self, server: &str) -> Result<(), LoginError> {
        self.forget(server)?;
        self.forget_client(server).map(|_| ())
    }

    fn write_json(&self, path: PathBuf, value: &impl Serialize) -> Result<(), LoginError> {
        butler_catalog::files::create_private_dir(&self.dir)
            .map_err(|source| LoginError::Io { path: self.dir.clone(), source })?;
        let bytes = serde_json::to_vec_pretty(value)
            .map_err(|e| LoginError::Io { path: path.clone(), source: std::io::Error::other(e) })?;
        butler_catalog::files::write_private(&path, &bytes).map_err(|source| LoginError::Io { path, source })
    }

    /// Server `server`'s login, if it has one.
    ///
    /// # Errors
    /// [`LoginError`] when the file is there but cannot be read as one.
    pub fn load(&self, server: &str) -> Result<Option<Login>, LoginError> {
        read_json(self.file(server))
    }

    /// Keeps `login` as server `server`'s, replacing the one before (atomically, 0600).
    ///
    /// # Errors
    /// [`LoginError::Io`].
    pub fn save(&self, server: &str, login: &Login) -> Result<(), LoginError> {
        self.write_json(self.file(server), login)
    }

    /// Forgets server `server`'s login; whether it had one.
    ///
    /// # Errors
    /// [`LoginError::Io`].
    pub fn forget(&self, server: &str) -> Result<bool, LoginError> {
        remove(self.file(server))
    }
}

/// The JSON in `path`, `None` when there is no such file.
fn read_json<T: serde::de::DeserializeOwned>(path: PathBuf) -> Result<Option<T>, LoginError> {
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|_| LoginError::Unreadable(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LoginError::Io { path, source }),
    }
}

/// Removes `path`; whether it was there.
fn remove(path: PathBuf) -> Result<bool, LoginError> {
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(LoginError::Io { path, source }),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn login(expires_at_ms: Option<u64>, refresh: bool) -> Login {
        Login {
            issuer: "https://as.example".into(),
            token_endpoint: "https://as.example/token".into(),
            revocation_endpoint: None,
            client: Client { id: "c1".into(), secret: Some("client-secret-9".into()), auth: ClientAuth::Basic },
            resource: "https://mcp.example/mcp".into(),
            scope: Some("mcp:read".into()),
            access_token: "access-token-7".into(),
            refresh_token: refresh.then(|| "refresh-token-8".into()),
            expires_at_ms,
            issued_at_ms: None,
        }
    }

    #[test]
    fn a_login_is_kept_private_read_back_and_forgotten() {
        let state = tempfile::tempdir().expect("temp");
        let logins = Logins::new(state.path());
        assert!(logins.load("linear").expect("nothing yet").is_none());
        let kept = login(Some(1_000), true);
        logins.save("linear", &kept).expect("saved");
        logins.save("suzu:pkg/x", &kept).expect("an id with a colon and a slash stays one file");
        assert_eq!(logins.load("linear").expect("read"), Some(kept.clone()));
        let file = state.path().join(DIR).join("linear.json");
        let mode = |p: &Path| std::fs::metadata(p).expect("there").permissions().mode() & 0o777;
        assert_eq!((mode(&file), mode(&state.path().join(DIR))), (0o600, 0o700));
        assert_eq!(std::fs::read_dir(state.path().join(DIR)).expect("dir").count(), 2);
        assert!(logins.forget("linear").expect("forgotten"));
        assert!(!logins.forget("linear").expect("nothing left"));
        assert!(logins.load("linear").expect("gone").is_none());
    }

    #[test]
    fn neither_debug_nor_errors_show_a_secret() {
        let shown = format!("{:?}", login(None, true));
        for secret in ["client-secret-9", "access-token-7", "refresh-token-8"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        let state = tempfile::tempdir().expect("temp");
        let logins = Logins::new(state.path());
        std::fs::create_dir_all(state.path().join(DIR)).expect("dir");
        std::fs::write(state.path().join(DIR).join("broken.json"), "{\"accessToken\": \"leaky-token\"").expect("write");
        let error = logins.load("broken").expect_err("not a login").to_string();
        assert!(!error.contains("leaky-token") && error.contains("broken.json"), "{error}");
    }

    #[test]
    fn a_token_is_refreshed_ahead_of_its_expiry_when_it_can_be() {
        let now = 10_000_000;
        assert!(login(Some(now + REFRESH_AHEAD_MS - 1), true).due_for_refresh(now));
        assert!(!login(Some(now + REFRESH_AHEAD_MS + 1), true).due_for_refresh(now));
        assert!(!login(Some(now - 1), false).due_for_refresh(now), "nothing to refresh with");
        assert!(!login(None, true).due_for_refresh(now), "no known expiry: used until refused");
        // A token that lives 30 s is refreshed in the second half of its life, not at once.
        let short = Login { issued_at_ms: Some(now), ..login(Some(now + 30_000), true) };
        assert!(!short.due_for_refresh(now + 14_000));
        assert!(short.due_for_refresh(now + 15_000));
    }
}
