//! The tokens the owner made for MCP profiles (`butler mcp token add NAME --profile P`):
//! kept in `stateDir/mcp-tokens.json` as SHA-256 hashes only, so the file gives no token
//! away — a token is shown once, when it is made. The host reads the file again whenever
//! it changed, so `add` and `revoke` take effect on the next request.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::owner::{random_secret, same_secret};

/// The file, in the state directory.
pub const TOKENS_FILE: &str = "mcp-tokens.json";

/// One token, as kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// Its name (what the owner calls the client it is for).
    pub name: String,
    /// The profile it opens.
    pub profile: String,
    /// SHA-256 of the token, hex.
    pub sha256: String,
    /// When it was made (RFC 3339).
    pub created: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TokenFile {
    tokens: Vec<TokenRecord>,
}

/// What went wrong with the tokens.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs, reason = "its fields are the parts of each variant's #[error] message")]
pub enum TokenError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// The file is not what this host writes.
    #[error("{path} is not a token file ({why}); move it aside to start afresh")]
    Malformed { path: PathBuf, why: String },
    /// A token of this name exists.
    #[error("a token named `{0}` exists already (revoke it first, or choose another name)")]
    Exists(String),
    /// No token has this name.
    #[error("no token is named `{0}` (see `butler mcp token list`)")]
    Unknown(String),
    /// The name cannot be a token's.
    #[error("a token's name is 1 to 64 of letters, digits, `-`, `_` and `.`, not {0:?}")]
    BadName(String),
}

fn path_of(state_dir: &Path) -> PathBuf {
    state_dir.join(TOKENS_FILE)
}

fn read(path: &Path) -> Result<TokenFile, TokenError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| TokenError::Malformed { path: path.to_owned(), why: e.to_string() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TokenFile::default()),
        Err(source) => Err(TokenError::Io { path: path.to_owned(), source }),
    }
}

fn write(path: &Path, file: &TokenFile) -> Result<(), TokenError> {
    let io = |source| TokenError::Io { path: path.to_owned(), source };
    let mut bytes = serde_json::to_vec_pretty(file).map_err(|e| io(std::io::Error::other(e)))?;
    bytes.push(b'\n');
    if let Some(dir) = path.parent() {
        butler_catalog::files::create_private_dir(dir).map_err(io)?;
    }
    butler_catalog::files::write_private(path, &bytes).map_err(io)
}

fn hash(token: &str) -> String {
    data_encoding::HEXLOWER.encode(&Sha256::digest(token.as_bytes()))
}

/// Makes token `name` for `profile`; the token itself, which is not kept.
///
/// # Errors
/// [`TokenError`].
pub fn add(state_dir: &Path, name: &str, profile: &str) -> Result<String, TokenError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !valid {
        return Err(TokenError::BadName(name.to_owned()));
    }
    let path = path_of(state_dir);
    let mut file = read(&path)?;
    if file.tokens.iter().any(|t| t.name == name) {
        return Err(TokenError::Exists(name.to_owned()));
    }
    let secret = random_secret().map_err(|source| TokenError::Io { path: "/dev/urandom".into(), source })?;
    let token = format!("bmt_{secret}");
    let created = butler_catalog::time::rfc3339(butler_catalog::time::now_ms());
    file.tokens.push(TokenRecord { name: name.to_owned(), profile: profile.to_owned(), sha256: hash(&token), created });
    write(&path, &file)?;
    Ok(token)
}

/// Every token, as kept (hashes, never tokens).
///
/// # Errors
/// [`TokenError`].
pub fn list(state_dir: &Path) -> Result<Vec<TokenRecord>, TokenError> {
    Ok(read(&path_of(state_dir))?.tokens)
}

/// Revokes token `name`: it opens nothing from the next request on.
///
/// # Errors
/// [`TokenError`].
pub fn revoke(state_dir: &Path, name: &str) -> Result<TokenRecord, TokenError> {
    let path = path_of(state_dir);
    let mut file = read(&path)?;
    let at = file.tokens.iter().position(|t| t.name == name).ok_or_else(|| TokenError::Unknown(name.to_owned()))?;
    let gone = file.tokens.remove(at);
    write(&path, &file)?;
    Ok(gone)
}

/// A file's (modified, length, inode): every write replaces the file, so a new inode says
/// it changed even within one tick of the clock.
type Stamp = (SystemTime, u64, u64);

/// The tokens as the host checks them: read again whenever the file changed.
pub struct Tokens {
    path: PathBuf,
    /// The file's stamp when it was read, and what it held.
    seen: Mutex<(Option<Stamp>, Vec<TokenRecord>)>,
}

impl Tokens {
    /// The tokens of the instance whose state directory is `state_dir`.
    #[must_use]
    pub fn new(state_dir: &Path) -> Self {
        Self { path: path_of(state_dir), seen: Mutex::new((None, Vec::new())) }
    }

    /// The token `bearer` is, if it is one (compared in time independent of where a
    /// hash differs). A file that cannot be read opens nothing.
    pub fn check(&self, bearer: &str) -> Option<TokenRecord> {
        use std::os::unix::fs::MetadataExt;
        let stamp = std::fs::metadata(&self.path).ok().and_then(|m| Some((m.modified().ok()?, m.len(), m.ino())));
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.0 != stamp || stamp.is_none() {
            let tokens =
                if stamp.is_some() { read(&self.path).map(|f| f.tokens).unwrap_or_default() } else { Vec::new() };
            *seen = (stamp, tokens);
        }
        let hashed = hash(bearer);
        seen.1.iter().find(|t| same_secret(&t.sha256, &hashed)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_kept_hashed_checked_and_revoked() {
        let dir = tempfile::tempdir().expect("temp");
        let token = add(dir.path(), "laptop", "fs").expect("made");
        let kept = std::fs::read_to_string(dir.path().join(TOKENS_FILE)).expect("kept");
        assert!(!kept.contains(&token), "the file holds no token");
        let tokens = Tokens::new(dir.path());
        assert_eq!(tokens.check(&token).map(|t| (t.name, t.profile)), Some(("laptop".into(), "fs".into())));
        assert!(tokens.check("bmt_wrong").is_none());
        assert!(matches!(add(dir.path(), "laptop", "fs"), Err(TokenError::Exists(_))));
        assert!(matches!(add(dir.path(), "no spaces", "fs"), Err(TokenError::BadName(_))));
        assert_eq!(list(dir.path()).expect("listed").len(), 1);
        revoke(dir.path(), "laptop").expect("revoked");
        assert!(tokens.check(&token).is_none(), "revoked from the next check on");
        assert!(matches!(revoke(dir.path(), "laptop"), Err(TokenError::Unknown(_))));
    }
}
