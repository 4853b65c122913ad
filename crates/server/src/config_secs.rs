//! Durations written in the configuration file as (fractional) seconds,
//! such as `peers.watchdog_secs = 30` or `= 0.5`.
//!
//! They are checked and turned into a [`Duration`] once, when the file is
//! read, so the runtime never converts a float: a value that is not a
//! finite number of seconds from 0 to [`MAX_SECS`] (`nan`, `inf`, `1e300`,
//! `-5`) is refused with an error that names its key (and the TOML parser
//! adds the line).

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// The longest duration any seconds key accepts: one day.
pub const MAX_SECS: u64 = 86_400;

/// The longest duration any seconds key accepts, as a [`Duration`].
pub const MAX: Duration = Duration::from_secs(MAX_SECS);

/// `value` seconds as a [`Duration`], or why `key` cannot take it.
pub fn parse(key: &str, value: f64) -> Result<Duration, String> {
    if !value.is_finite() || value < 0.0 || value > MAX_SECS as f64 {
        return Err(format!(
            "{key} = {value}: expected a number of seconds from 0 to {MAX_SECS} (one day)"
        ));
    }
    // Finite and within range, so the conversion cannot fail.
    Duration::try_from_secs_f64(value).map_err(|e| format!("{key} = {value}: {e}"))
}

/// Reads a seconds value (integer or float) for `key`.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D, key: &str) -> Result<Duration, D::Error> {
    let value = f64::deserialize(d)?;
    parse(key, value).map_err(serde::de::Error::custom)
}

/// Writes a duration as seconds (a float, as the file has it).
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Declares `fn $name` reading the seconds key `$key` for
/// `#[serde(deserialize_with = ...)]`.
macro_rules! seconds_key {
    ($name:ident, $key:literal) => {
        #[doc = concat!("Reads `", $key, "` (seconds).")]
        pub fn $name<'de, D: serde::Deserializer<'de>>(
            d: D,
        ) -> Result<std::time::Duration, D::Error> {
            $crate::config_secs::deserialize(d, $key)
        }
    };
}

seconds_key!(watchdog, "peers.watchdog_secs");
seconds_key!(watchdog_jitter, "peers.watchdog_jitter_secs");
seconds_key!(handshake_timeout, "peers.handshake_timeout_secs");
seconds_key!(answer_timeout, "peers.answer_timeout_secs");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finite_seconds_in_range_become_durations() {
        assert_eq!(parse("k", 0.0).unwrap(), Duration::ZERO);
        assert_eq!(parse("k", 0.25).unwrap(), Duration::from_millis(250));
        assert_eq!(parse("k", 86_400.0).unwrap(), MAX);
    }

    #[test]
    fn nan_infinite_huge_and_negative_seconds_are_refused_naming_the_key() {
        for v in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e300,
            -5.0,
            86_400.5,
        ] {
            let e = parse("peers.watchdog_secs", v).unwrap_err();
            assert!(
                e.contains("peers.watchdog_secs") && e.contains("0 to 86400"),
                "{v}: {e}"
            );
        }
    }
}
