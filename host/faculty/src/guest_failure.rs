//! A faculty's failure in the host's terms, whatever WIT version it came from: its kind
//! (said by a 0.2.0 faculty, read off the code's spelling otherwise), code, message and
//! details.

/// What kind of failure a faculty reports (0.2.0 says so; for 0.1.0 failures and the
/// host's own errors it is read off the code's spelling, see [`FailureKind::of_code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The input is wrong.
    InvalidInput,
    /// Something the input names does not exist.
    NotFound,
    /// The state moved on (stale, expired, taken).
    Conflict,
    /// The caller may not do this.
    Forbidden,
    /// Something needed is unavailable right now.
    Unavailable,
    /// Too large.
    TooLarge,
    /// The faculty could not do it, for a reason of its own.
    Failed,
    /// A defect in the faculty.
    Internal,
}

impl FailureKind {
    /// The kind a code's spelling suggests — the convention for failures that carry no
    /// kind (`invalid_*` → invalid input, `*_not_found` → not found, `stale_*`,
    /// `*_expired`, `*_conflict`, `*_not_active` → conflict, `*_required`, `*_invalid`, `*_only` →
    /// forbidden, `*_unavailable`, `busy` → unavailable, `*_too_large` → too large). The
    /// Rust guest kit keeps the same table (`tests/kit.rs` compares them).
    #[must_use]
    pub fn of_code(code: &str) -> Self {
        match code {
            "not_found" | "unknown_command" | "unknown_report" | "unknown_action" | "unknown_faculty" => Self::NotFound,
            "forbidden" => Self::Forbidden,
            "busy" | "timeout" | "shutting_down" => Self::Unavailable,
            "internal" | "trap" => Self::Internal,
            c if c.starts_with("invalid_") => Self::InvalidInput,
            c if c.ends_with("_not_found") => Self::NotFound,
            c if c.starts_with("stale_")
                || c.ends_with("_expired")
                || c.ends_with("_conflict")
                || c.ends_with("_not_active") =>
            {
                Self::Conflict
            }
            c if c.ends_with("_invalid") || c.ends_with("_required") || c.ends_with("_only") => Self::Forbidden,
            c if c.ends_with("_unavailable") => Self::Unavailable,
            c if c.ends_with("_too_large") => Self::TooLarge,
            _ => Self::Failed,
        }
    }
}

/// A faculty's failure, whatever its WIT version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestFailure {
    /// Its kind: as a 0.2.0 faculty said it, else [`FailureKind::of_code`] of `code`.
    pub kind: FailureKind,
    /// Its stable code (`snake_case`, such as `unknown_command`), for programs to match on.
    pub code: String,
    /// What went wrong, for people (programs match on `code`).
    pub message: String,
    /// More, for programs (0.2.0; boxed, so that errors stay small).
    pub details: Option<Box<serde_json::Value>>,
    /// Whether the faculty said the kind (0.2.0) rather than the host reading it off the
    /// code (0.1.0).
    pub typed: bool,
}

impl GuestFailure {
    /// A failure without a declared kind (0.1.0, the host's own errors).
    #[must_use]
    pub fn untyped(code: String, message: String) -> Self {
        Self { kind: FailureKind::of_code(&code), code, message, details: None, typed: false }
    }
}
