//! The Rust guest kit (`faculties/kit`) keeps two of the runtime's conventions on the
//! guest side, where it cannot use the host's code: the kind a failure code's spelling
//! suggests, and how echoed text is clipped. Both sides must say the same.

use butler_catalog::text::clip;
use butler_faculty::guest_failure::FailureKind;

/// Codes of every shape the convention knows, and some it does not.
const CODES: &[&str] = &[
    "not_found",
    "unknown_command",
    "unknown_report",
    "unknown_action",
    "unknown_faculty",
    "forbidden",
    "busy",
    "timeout",
    "shutting_down",
    "internal",
    "trap",
    "invalid_args",
    "invalid_json",
    "invalid_observation",
    "card_not_found",
    "stale_revision",
    "lease_expired",
    "id_conflict",
    "candidate_not_active",
    "token_invalid",
    "owner_required",
    "operator_only",
    "validity_unavailable",
    "body_too_large",
    "io_error",
    "store_corrupt",
    "weird",
    "",
];

#[test]
fn the_kit_reads_a_codes_kind_as_the_runtime_does() {
    for code in CODES {
        let host = format!("{:?}", FailureKind::of_code(code));
        // The kit's kind is the WIT enum, printed `FailureKind::NotFound`.
        let kit = format!("{:?}", butler_faculty_kit::kind_of(code));
        let kit = kit.trim_start_matches("FailureKind::");
        assert_eq!(kit, host.as_str(), "the kind of `{code}`");
    }
}

#[test]
fn the_kit_clips_text_as_the_host_does() {
    for (text, max) in [("short", 10), ("exactly10!", 10), ("ééééé", 3), ("", 0), ("a", 0), ("日本語のテキスト", 4)]
    {
        assert_eq!(butler_faculty_kit::clip(text, max), clip(text, max), "clip({text:?}, {max})");
    }
}
