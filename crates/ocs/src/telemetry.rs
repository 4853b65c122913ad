//! What a shard counts for an operator's metrics: answers by command,
//! CC-Request-Type and Result-Code, money debited, refunded and topped
//! up, records per group commit, journal `fdatasync` latency and
//! snapshot durations.
//!
//! Each shard writes only its own [`ShardTelemetry`] (relaxed atomics on
//! its own cache lines, inside [`ShardTotals`](crate::ShardTotals)); a
//! reader sums the shards when asked. Per request this is one counter
//! found by a binary search of a small constant table: no lock, no
//! allocation, no formatting.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use gyro_charging::{Effect, RequestType};
use gyro_diameter::codes::{avp, cmd};
use gyro_diameter::connection::ShedKind;
use gyro_diameter::message::Message;

/// The kinds of request counted: (command, request type) label values.
/// Credit-Control requests by CC-Request-Type (`UNKNOWN` when it is
/// missing or invalid), then any other command.
pub const REQUEST_KINDS: [(&str, &str); 6] = [
    ("CCR", "INITIAL"),
    ("CCR", "UPDATE"),
    ("CCR", "TERMINATION"),
    ("CCR", "EVENT"),
    ("CCR", "UNKNOWN"),
    ("other", "NONE"),
];

/// Index in [`REQUEST_KINDS`] of a command that is not Credit-Control.
pub const OTHER_COMMAND: usize = 5;

/// Index in [`REQUEST_KINDS`] of a CCR without a valid CC-Request-Type.
pub const UNKNOWN_TYPE: usize = 4;

/// The Result-Codes counted one by one (RFC 6733 and RFC 8506); any other
/// is counted as `other`.
pub const RESULT_CODES: [u32; 38] = [
    1001, 2001, 2002, 3001, 3002, 3003, 3004, 3005, 3006, 3007, 3008, 3009, 3010, 4001, 4002, 4003,
    4010, 4011, 4012, 5001, 5002, 5003, 5004, 5005, 5006, 5007, 5008, 5009, 5010, 5011, 5012, 5013,
    5014, 5015, 5016, 5017, 5030, 5031,
];

/// Upper bounds of the records-per-commit buckets (the last is `+Inf`).
pub const RECORDS_BOUNDS: [u64; 12] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, u64::MAX];

/// Upper bounds of the latency buckets of what one commit waits for (an
/// `fdatasync` of the journal, a Redis round trip), nanoseconds.
pub const LATENCY_BOUNDS_NS: [u64; 14] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    u64::MAX,
];

/// Upper bounds of the snapshot-duration buckets, nanoseconds.
pub const SNAPSHOT_BOUNDS_NS: [u64; 11] = [
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
    u64::MAX,
];

/// The index of a CC-Request-Type in [`REQUEST_KINDS`].
pub fn kind_of(request_type: RequestType) -> usize {
    match request_type {
        RequestType::Initial => 0,
        RequestType::Update => 1,
        RequestType::Termination => 2,
        RequestType::Event => 3,
    }
}

/// The index of a CC-Request-Type value (as on the wire) in
/// [`REQUEST_KINDS`].
pub fn kind_of_code(code: Option<u32>) -> usize {
    code.and_then(RequestType::from_code)
        .map_or(UNKNOWN_TYPE, kind_of)
}

/// The index in [`REQUEST_KINDS`] of a request of this Command Code and
/// CC-Request-Type value.
pub fn kind_of_request(command_code: u32, request_type: Option<u32>) -> usize {
    if command_code == cmd::CREDIT_CONTROL {
        kind_of_code(request_type)
    } else {
        OTHER_COMMAND
    }
}

/// The index in [`REQUEST_KINDS`] of a message (a request, or the answer
/// to one): its Command Code and CC-Request-Type.
pub fn kind_of_message(msg: &Message<'_>) -> usize {
    let request_type = msg.find(avp::CC_REQUEST_TYPE).and_then(|a| a.u32().ok());
    kind_of_request(msg.command_code(), request_type)
}

/// The index in [`REQUEST_KINDS`] of a request its connection refused
/// under overload.
pub fn kind_of_shed(kind: ShedKind) -> usize {
    kind_of_request(kind.command_code, kind.request_type)
}

pub use gyro_telemetry::Histogram;

/// One shard's counters for metrics.
#[derive(Debug)]
pub struct ShardTelemetry {
    /// Answers by [`REQUEST_KINDS`] and [`RESULT_CODES`] (the last
    /// column: any other code).
    answers: [[AtomicU64; RESULT_CODES.len() + 1]; REQUEST_KINDS.len()],
    /// Money charged (from reservations and from balances), minor units.
    pub debited: AtomicU64,
    /// Money given back by refunds, minor units.
    pub refunded: AtomicU64,
    /// Money added by top-ups, minor units.
    pub topped_up: AtomicU64,
    /// Effects and CDRs per group commit.
    pub records_per_commit: Histogram<12>,
    /// The journal `fdatasync` of each group commit, nanoseconds.
    pub journal_sync: Histogram<14>,
    /// Building each snapshot, nanoseconds.
    pub snapshot: Histogram<11>,
}

impl Default for ShardTelemetry {
    fn default() -> Self {
        ShardTelemetry {
            answers: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            debited: AtomicU64::new(0),
            refunded: AtomicU64::new(0),
            topped_up: AtomicU64::new(0),
            records_per_commit: Histogram::new(&RECORDS_BOUNDS),
            journal_sync: Histogram::new(&LATENCY_BOUNDS_NS),
            snapshot: Histogram::new(&SNAPSHOT_BOUNDS_NS),
        }
    }
}

fn code_index(code: u32) -> usize {
    RESULT_CODES
        .binary_search(&code)
        .unwrap_or(RESULT_CODES.len())
}

impl ShardTelemetry {
    /// Counts an answer of kind `kind` ([`REQUEST_KINDS`]) with `code`.
    #[inline]
    pub fn answered(&self, kind: usize, code: u32) {
        self.answered_n(kind, code, 1);
    }

    /// `n` answers of `kind` with Result-Code `code`.
    pub fn answered_n(&self, kind: usize, code: u32, n: u64) {
        self.answers[kind.min(OTHER_COMMAND)][code_index(code)].fetch_add(n, Relaxed);
    }

    /// An answer counted with `was` became a `now` answer (a batch that
    /// could not be made durable is answered 3004).
    pub fn answer_changed(&self, kind: usize, was: u32, now: u32) {
        let row = &self.answers[kind.min(OTHER_COMMAND)];
        row[code_index(was)].fetch_sub(1, Relaxed);
        row[code_index(now)].fetch_add(1, Relaxed);
    }

    /// Answers counted, as (kind, Result-Code or `None` for any other
    /// code, count), the zero counts left out.
    pub fn answers(&self) -> Vec<(usize, Option<u32>, u64)> {
        let mut out = Vec::new();
        for (kind, row) in self.answers.iter().enumerate() {
            for (i, c) in row.iter().enumerate() {
                let n = c.load(Relaxed);
                if n > 0 {
                    out.push((kind, RESULT_CODES.get(i).copied(), n));
                }
            }
        }
        out
    }

    /// Counts the money that `effects` moved.
    pub fn effects(&self, effects: &[Effect]) {
        for e in effects {
            match e {
                Effect::Charged {
                    from_reserved,
                    from_balance,
                    ..
                } => {
                    let n = from_reserved.saturating_add(*from_balance).max(0);
                    self.debited.fetch_add(n as u64, Relaxed);
                }
                Effect::Refunded { amount, .. } => {
                    self.refunded.fetch_add((*amount).max(0) as u64, Relaxed);
                }
                Effect::ToppedUp { amount, .. } | Effect::ToppedUpWithKey { amount, .. } => {
                    self.topped_up.fetch_add((*amount).max(0) as u64, Relaxed);
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_codes_are_sorted_for_the_binary_search() {
        assert!(RESULT_CODES.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn answers_are_counted_by_kind_and_code_with_unlisted_codes_as_other() {
        let t = ShardTelemetry::default();
        t.answered(kind_of(RequestType::Initial), 2001);
        t.answered(kind_of(RequestType::Initial), 2001);
        t.answered(kind_of(RequestType::Event), 4012);
        t.answered(OTHER_COMMAND, 3001);
        t.answered(kind_of_code(Some(9)), 5999);
        t.answer_changed(kind_of(RequestType::Initial), 2001, 3004);
        let mut got = t.answers();
        got.sort();
        assert_eq!(
            got,
            vec![
                (0, Some(2001), 1),
                (0, Some(3004), 1),
                (3, Some(4012), 1),
                (UNKNOWN_TYPE, None, 1),
                (OTHER_COMMAND, Some(3001), 1),
            ]
        );
    }
}
