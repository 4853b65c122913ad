//! The wall clock, read only at the edges (recovery, commits): the engine
//! and the store get the time passed in.

use gyro_charging::Timestamp;

/// Unix time now, in milliseconds.
pub(crate) fn unix_now() -> Timestamp {
    Timestamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    )
}
