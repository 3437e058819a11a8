//! The local owner token: a random secret in `<stateDir>/owner-token`, readable
//! only by the owner (mode 0600). The CLI presents it as `Authorization: Bearer …`; a
//! process that cannot read the owner's files cannot act as the owner.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// File name under the state directory.
pub const OWNER_TOKEN_FILE: &str = "owner-token";
/// Random bytes in a token (hex-encoded in the file).
const TOKEN_BYTES: usize = 32;

/// Returns the instance's owner token, creating it (mode 0600) on first use and tightening
/// the mode of an existing file that is readable by others.
///
/// # Errors
/// I/O errors reading randomness or writing the file.
pub fn ensure(state_dir: &Path) -> std::io::Result<String> {
    let path = state_dir.join(OWNER_TOKEN_FILE);
    if let Ok(token) = read(state_dir) {
        let mode = std::fs::metadata(&path)?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        }
        return Ok(token);
    }
    let token = random_secret()?;
    let tmp = state_dir.join(format!(".{OWNER_TOKEN_FILE}.tmp-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    file.write_all(token.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(token)
}

/// A new random secret: 32 bytes from the kernel, hex-encoded.
///
/// # Errors
/// When the kernel's randomness cannot be read (never a weaker secret instead).
pub fn random_secret() -> std::io::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(data_encoding::HEXLOWER.encode(&bytes))
}

/// Reads the owner token.
///
/// # Errors
/// When the file is missing, unreadable or not a token.
pub fn read(state_dir: &Path) -> std::io::Result<String> {
    let text = std::fs::read_to_string(state_dir.join(OWNER_TOKEN_FILE))?;
    let token = text.trim();
    if token.len() == TOKEN_BYTES * 2 && token.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(token.to_owned())
    } else {
        Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "the owner token file is malformed"))
    }
}

/// Compares two secrets in time independent of where they differ.
#[must_use]
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_private_and_stable() {
        let dir = std::env::temp_dir().join(format!("butler-owner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let token = ensure(&dir).expect("create");
        let mode = std::fs::metadata(dir.join(OWNER_TOKEN_FILE)).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::set_permissions(dir.join(OWNER_TOKEN_FILE), std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(ensure(&dir).expect("again"), token);
        let mode = std::fs::metadata(dir.join(OWNER_TOKEN_FILE)).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "tightened");
        assert!(same_secret(&token, &token) && !same_secret(&token, "x"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
