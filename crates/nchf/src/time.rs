//! RFC 3339 date-times (the `DateTime` type of TS 29.571).

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Unix milliseconds of an RFC 3339 date-time, if it is one.
pub fn parse_rfc3339(s: &str) -> Option<i128> {
    OffsetDateTime::parse(s, &Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos() / 1_000_000)
}

/// Unix milliseconds as an RFC 3339 date-time in UTC.
pub fn format_rfc3339(unix_ms: u64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(unix_ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_times_round_trip() {
        let s = format_rfc3339(1_700_000_000_123);
        assert_eq!(s, "2023-11-14T22:13:20.123Z");
        assert_eq!(parse_rfc3339(&s), Some(1_700_000_000_123));
        assert_eq!(
            parse_rfc3339("2023-11-14T23:13:20+01:00"),
            Some(1_700_000_000_000)
        );
        assert_eq!(parse_rfc3339("2023-11-14"), None);
    }
}
