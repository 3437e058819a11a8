//! Identifiers and hashes.

use sha2::{Digest, Sha256};

/// Hex SHA-256 of `bytes`.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh id: `<prefix>-<time base36>-<8 hex>`, the hex part hashed from the time, the
/// `seed` (what is being created) and the wall clock's nanoseconds, so two ids made in the
/// same millisecond for different things differ.
#[must_use]
pub fn new_id(prefix: &str, seed: &str) -> String {
    let ms = super::time::now_ms();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let hash = sha256_hex(format!("{ms}:{nanos}:{seed}").as_bytes());
    format!("{prefix}-{}-{}", base36(ms), &hash[..8])
}

/// A secret token (64 hex characters) from the WASI random source.
#[must_use]
pub fn token(seed: &str) -> String {
    // std's hash maps seed themselves from the WASI random source; two RandomStates give
    // 128 unpredictable bits, hashed together with the seed and the time.
    use std::hash::{BuildHasher, Hasher};
    let mut a = std::collections::hash_map::RandomState::new().build_hasher();
    a.write(seed.as_bytes());
    let mut b = std::collections::hash_map::RandomState::new().build_hasher();
    b.write_u64(super::time::now_ms());
    sha256_hex(format!("{}:{}:{seed}", a.finish(), b.finish()).as_bytes())
}

/// A file-name-safe slug of `text` (ASCII letters and digits, `-`), at most 48 characters.
#[must_use]
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 48 {
            break;
        }
    }
    let trimmed = out.trim_end_matches('-');
    if trimmed.is_empty() { "card".to_owned() } else { trimmed.to_owned() }
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[usize::try_from(n % 36).unwrap_or(0)]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slug("Use cargo-nextest for tests!"), "use-cargo-nextest-for-tests");
        assert_eq!(slug("日本語"), "card");
        assert_eq!(slug("  --A--b  "), "a-b");
    }
}
