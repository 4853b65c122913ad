//! The runtime's WARN lines that can repeat (per request, per connection,
//! per accept): each kind is logged at most once per [`INTERVAL_MS`], the
//! first occurrence at once, the others counted into the next line.

use tracing::warn;

use crate::rate_limit::RateLimit;

/// At most one line per kind in this many milliseconds.
pub(crate) const INTERVAL_MS: u64 = 10_000;

/// Every rate-limited kind of WARN line, shared by all event loops.
#[derive(Debug)]
pub(crate) struct Warnings {
    /// Requests answered DIAMETER_TOO_BUSY by overload control.
    pub too_busy: RateLimit,
    /// Connections closed at accept: `limits.max_connections` reached.
    pub connection_limit: RateLimit,
    /// CERs refused: `limits.max_connections_per_peer` reached.
    pub peer_limit: RateLimit,
    /// Accepts failed for want of file descriptors.
    pub out_of_fds: RateLimit,
    /// Accepts failed for another reason.
    pub accept_failed: RateLimit,
    /// Connections closed for a broken stream (framing, version, stall).
    pub broken_stream: RateLimit,
    /// Connections whose peer stopped reading its answers.
    pub stopped_reading: RateLimit,
    /// TLS handshakes that failed or took too long.
    pub tls_handshake_failed: RateLimit,
}

impl Warnings {
    pub(crate) fn new() -> Self {
        let limit = |what| RateLimit::new(what, INTERVAL_MS);
        Warnings {
            too_busy: limit("overload: requests answered DIAMETER_TOO_BUSY (3004)"),
            connection_limit: limit("connection limit reached: accepted connections closed"),
            peer_limit: limit("per-peer connection limit reached: CER refused (5012)"),
            out_of_fds: limit("out of file descriptors: waiting connections refused"),
            accept_failed: limit("accept failed"),
            broken_stream: limit("broken stream; closing"),
            stopped_reading: limit("peer stopped reading its answers; closing"),
            tls_handshake_failed: limit("TLS handshake failed; connection closed"),
        }
    }

    /// Logs the counts held back whose interval has passed (call it
    /// periodically).
    pub(crate) fn flush(&self, now_ms: u64) {
        for r in [
            &self.too_busy,
            &self.connection_limit,
            &self.peer_limit,
            &self.out_of_fds,
            &self.accept_failed,
            &self.broken_stream,
            &self.stopped_reading,
            &self.tls_handshake_failed,
        ] {
            if let Some(count) = r.flush(now_ms) {
                warn!(count, "{} (since the last report)", r.what());
            }
        }
    }
}
