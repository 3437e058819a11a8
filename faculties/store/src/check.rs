//! Validity checks: two deterministic types, resolved against the validity root.

use serde::{Deserialize, Serialize};

use super::Failure;

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Check {
    /// A file relative to the validity root exists.
    Path {
        /// Relative path.
        path: String,
    },
    /// The file still contains the text (whitespace-normalized).
    Quote {
        /// Relative path.
        path: String,
        /// The quoted text.
        text: String,
    },
}

impl Check {
    /// The path the check reads.
    #[must_use]
    pub fn path(&self) -> &str {
        match self {
            Self::Path { path } | Self::Quote { path, .. } => path,
        }
    }

    /// Refuses paths that could leave the root by their spelling: absolute paths, `..`,
    /// empty segments, backslashes, NUL. (Symlinks that leave the root are refused by the
    /// sandbox itself, whatever the spelling.)
    ///
    /// # Errors
    /// `invalid_check` naming the problem.
    pub fn validate(&self) -> Result<(), Failure> {
        let path = self.path();
        let bad = |why: &str| {
            Err(Failure::new("invalid_check", format!("check path `{}`: {why}", butler_faculty_kit::clip(path, 80))))
        };
        if path.is_empty() || path.len() > 1024 {
            return bad("must be 1 to 1024 characters");
        }
        if path.starts_with('/') {
            return bad("must be relative to the validity root");
        }
        if path.contains('\\') || path.contains('\0') {
            return bad("must not contain backslashes or NUL");
        }
        if path.split('/').any(|segment| segment == ".." || segment.is_empty()) {
            return bad("must not contain `..` or empty segments");
        }
        // Hidden files and folders are where tools keep state and secrets (`.butler` with
        // the owner token, `.git`, `.env`, `.ssh`): a quote check on them would be an
        // oracle for their content, so checks never look there.
        if path.split('/').any(|segment| segment.starts_with('.')) {
            return bad("must not name hidden files or folders (segments starting with `.`)");
        }
        if let Self::Quote { text, .. } = self
            && normalize(text).is_empty()
        {
            return Err(Failure::new("invalid_check", "a quote check needs non-blank text"));
        }
        Ok(())
    }
}

/// Whitespace-normalized text: runs of whitespace become one space, ends trimmed.
#[must_use]
pub fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling_escapes_are_refused() {
        for bad in [
            "/etc/passwd",
            "../x",
            "docs/../../x",
            "a//b",
            "",
            "a\\b",
            "docs/..",
            ".butler/owner-token",
            "docs/.env",
            "./x",
        ] {
            assert!(Check::Path { path: bad.into() }.validate().is_err(), "{bad}");
        }
        assert!(Check::Path { path: "docs/x.md".into() }.validate().is_ok());
        assert!(Check::Quote { path: "x".into(), text: "  ".into() }.validate().is_err());
        assert_eq!(normalize(" a \n\t b  "), "a b");
    }
}
