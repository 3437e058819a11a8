//! Wall-clock time as the API and log files show it.

use std::time::{SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Milliseconds since the Unix epoch.
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `2026-11-30T07:08:50.123Z` for `ms` since the epoch.
#[must_use]
pub fn rfc3339(ms: u64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ms.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc_with_milliseconds() {
        assert_eq!(super::rfc3339(1_796_014_188_999), "2026-11-30T04:49:48.999Z");
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
    }
}
