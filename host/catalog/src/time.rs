//! Wall-clock time as the API and log files show it.

use std::time::{SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Milliseconds since the Unix epoch.
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `2026-11-30T07:08:50.120Z` for `ms` since the epoch: always three fraction digits, so
/// that times line up in columns.
#[must_use]
pub fn rfc3339(ms: u64) -> String {
    match OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            t.millisecond()
        ),
        Err(_) => ms.to_string(),
    }
}

/// The milliseconds since the epoch an RFC 3339 time names (`None` for another text or a
/// time before the epoch).
#[must_use]
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let t = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc_with_milliseconds() {
        assert_eq!(super::rfc3339(1_796_014_188_999), "2026-11-30T04:49:48.999Z");
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::rfc3339(1_796_014_188_120), "2026-11-30T04:49:48.120Z", "fixed width");
        assert_eq!(super::parse_rfc3339("2026-11-30T04:49:48.12Z"), Some(1_796_014_188_120));
        assert_eq!(super::parse_rfc3339("yesterday"), None);
    }
}
