//! Counters and latency histograms kept by each connection, and the final
//! report they are merged into.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency the histograms hold, in microseconds (larger values are
/// recorded as this).
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// A load thread busy this share of its wall time or more may have set the
/// pace instead of the server (the same threshold as bench/server.py's
/// LOAD-BOUND).
pub const LOAD_BOUND: f64 = 0.9;

/// The four kinds of CCR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReqType {
    Initial = 0,
    Update = 1,
    Terminate = 2,
    Event = 3,
}

impl ReqType {
    pub(crate) const ALL: [ReqType; 4] = [
        ReqType::Initial,
        ReqType::Update,
        ReqType::Terminate,
        ReqType::Event,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            ReqType::Initial => "CCR-I",
            ReqType::Update => "CCR-U",
            ReqType::Terminate => "CCR-T",
            ReqType::Event => "CCR-E",
        }
    }

    /// CC-Request-Type value (RFC 8506 section 8.3).
    pub(crate) fn cc_request_type(self) -> i32 {
        self as i32 + 1
    }
}

/// Counts per code, for the handful of distinct codes a run sees: a linear
/// scan of a short vector beats hashing.
#[derive(Debug, Default, Clone)]
pub(crate) struct Counts(pub(crate) Vec<(u32, u64)>);

impl Counts {
    #[inline]
    pub(crate) fn add(&mut self, code: u32) {
        for e in &mut self.0 {
            if e.0 == code {
                e.1 += 1;
                return;
            }
        }
        self.0.push((code, 1));
    }

    fn merge_into(&self, m: &mut BTreeMap<u32, u64>) {
        for &(c, n) in &self.0 {
            *m.entry(c).or_default() += n;
        }
    }
}

pub(crate) fn new_histogram() -> Histogram<u64> {
    // Three significant digits from 1 us to an hour; the bounds are valid,
    // so this cannot fail, but fall back to an auto-resizing one anyway.
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
        .or_else(|_| Histogram::new(3))
        .unwrap_or_else(|_| unreachable_histogram())
}

#[cold]
fn unreachable_histogram() -> Histogram<u64> {
    // Histogram::new(3) only fails for more than 5 significant digits.
    match Histogram::new(2) {
        Ok(h) => h,
        Err(e) => panic!("hdrhistogram refused 2 significant digits: {e}"),
    }
}

/// Significant digits of the per-second histograms: two (1 %) keep them
/// small (they start small and grow to the largest latency seen).
const SECOND_SIGFIGS: u8 = 2;

/// What one connection saw in one second of the run.
#[derive(Debug)]
pub(crate) struct Second {
    pub sent: u64,
    pub answered: u64,
    /// Non-2xxx or unreadable answers, timeouts and lost requests.
    pub errors: u64,
    pub timeouts: u64,
    pub hist: Option<Histogram<u32>>,
}

impl Second {
    fn new() -> Self {
        Second {
            sent: 0,
            answered: 0,
            errors: 0,
            timeouts: 0,
            hist: None,
        }
    }
}

/// One connection's counters per second of the run, from the common
/// start: recorded by the connection itself (no locks), merged over the
/// connections at the end. A connection whose start is not set (the
/// default) keeps none.
#[derive(Debug, Default)]
pub(crate) struct PerSecond {
    pub start: Option<Instant>,
    pub secs: Vec<Second>,
}

impl PerSecond {
    /// The bucket of `now`, created (with those before it) on first use.
    #[inline]
    fn at(&mut self, now: Instant) -> Option<&mut Second> {
        let start = self.start?;
        let i = now.saturating_duration_since(start).as_secs() as usize;
        if i >= self.secs.len() {
            self.secs.resize_with(i + 1, Second::new);
        }
        self.secs.get_mut(i)
    }

    #[inline]
    pub(crate) fn sent(&mut self, now: Instant) {
        if let Some(s) = self.at(now) {
            s.sent += 1;
        }
    }

    #[inline]
    pub(crate) fn answered(&mut self, now: Instant, us: u64, ok: bool) {
        if let Some(s) = self.at(now) {
            s.answered += 1;
            s.errors += u64::from(!ok);
            let h = s.hist.get_or_insert_with(|| {
                Histogram::new(SECOND_SIGFIGS).unwrap_or_else(|_| unreachable_histogram_u32())
            });
            // Auto-resizing: record grows it (saturating_record would
            // clamp to its current top instead).
            let v = us.clamp(1, MAX_LATENCY_US);
            if h.record(v).is_err() {
                h.saturating_record(v);
            }
        }
    }

    #[inline]
    pub(crate) fn timeout(&mut self, now: Instant) {
        if let Some(s) = self.at(now) {
            s.errors += 1;
            s.timeouts += 1;
        }
    }

    #[inline]
    pub(crate) fn lost(&mut self, now: Instant, n: u64) {
        if n > 0 {
            if let Some(s) = self.at(now) {
                s.errors += n;
            }
        }
    }
}

#[cold]
fn unreachable_histogram_u32() -> Histogram<u32> {
    match Histogram::new(1) {
        Ok(h) => h,
        Err(e) => panic!("hdrhistogram refused 1 significant digit: {e}"),
    }
}

/// The run second by second: element `i` of each array is second `i` from
/// the start of sending (the last one may be partial). Latencies in
/// microseconds (0 in a second without answers), to 1 % (two significant
/// digits).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Series {
    /// Length of each interval, in seconds (1).
    pub interval_secs: f64,
    /// Requests sent.
    pub sent: Vec<u64>,
    /// Answers received.
    pub answered: Vec<u64>,
    /// Non-2xxx or unreadable answers, timeouts and lost requests (they
    /// add up to the report's `errors`).
    pub errors: Vec<u64>,
    /// Requests that timed out.
    pub timeouts: Vec<u64>,
    /// Median latency of the answers received in that second.
    pub p50_us: Vec<u64>,
    /// 99th percentile.
    pub p99_us: Vec<u64>,
    /// 99.9th percentile.
    pub p999_us: Vec<u64>,
    /// Largest.
    pub max_us: Vec<u64>,
}

impl Series {
    /// Number of seconds.
    pub fn len(&self) -> usize {
        self.sent.len()
    }

    /// True when the run had no second.
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    fn build(conns: &[ConnStats], secs: usize) -> Series {
        let secs = conns
            .iter()
            .map(|c| c.per_second.secs.len())
            .max()
            .unwrap_or(0)
            .max(secs);
        let mut s = Series {
            interval_secs: 1.0,
            sent: vec![0; secs],
            answered: vec![0; secs],
            errors: vec![0; secs],
            timeouts: vec![0; secs],
            ..Series::default()
        };
        let mut hists: Vec<Option<Histogram<u32>>> = (0..secs).map(|_| None).collect();
        for c in conns {
            for (i, x) in c.per_second.secs.iter().enumerate() {
                s.sent[i] += x.sent;
                s.answered[i] += x.answered;
                s.errors[i] += x.errors;
                s.timeouts[i] += x.timeouts;
                if let Some(h) = &x.hist {
                    match &mut hists[i] {
                        // Auto-resizing, so adding cannot fail.
                        Some(m) => {
                            let _ = m.add(h);
                        }
                        m @ None => *m = Some(h.clone()),
                    }
                }
            }
        }
        for h in &hists {
            let q = |q: f64| h.as_ref().map_or(0, |h| h.value_at_quantile(q));
            s.p50_us.push(q(0.5));
            s.p99_us.push(q(0.99));
            s.p999_us.push(q(0.999));
            s.max_us.push(h.as_ref().map_or(0, |h| h.max()));
        }
        s
    }
}

/// One point of the latency distribution: `percentile` (0 to 100) of the
/// answers took at most `latency_us`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PercentilePoint {
    /// 0 to 100.
    pub percentile: f64,
    /// Microseconds.
    pub latency_us: u64,
}

/// The HDR percentile curve of `h`: points at 0, 50, 75, 87.5, ... %
/// (halving the distance to 100 % each step, 5 ticks per halving), to the
/// maximum.
fn percentile_curve(h: &Histogram<u64>) -> Vec<PercentilePoint> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut v: Vec<PercentilePoint> = h
        .iter_quantiles(5)
        .map(|it| PercentilePoint {
            percentile: it.percentile(),
            latency_us: h.highest_equivalent(it.value_iterated_to()),
        })
        .collect();
    v.dedup_by(|b, a| a.percentile == b.percentile);
    v
}

/// Per request type, per connection.
#[derive(Debug)]
pub(crate) struct TypeStats {
    pub sent: u64,
    pub answered: u64,
    pub timeouts: u64,
    pub errors: u64,
    pub hist: Histogram<u64>,
    pub result_codes: Counts,
}

impl TypeStats {
    fn new() -> Self {
        TypeStats {
            sent: 0,
            answered: 0,
            timeouts: 0,
            errors: 0,
            hist: new_histogram(),
            result_codes: Counts::default(),
        }
    }

    #[inline]
    pub(crate) fn record_latency(&mut self, us: u64) {
        self.hist.saturating_record(us.clamp(1, MAX_LATENCY_US));
    }
}

/// Everything one connection counts; merged into a [`Report`] at the end.
#[derive(Debug)]
pub(crate) struct ConnStats {
    pub types: [TypeStats; 4],
    pub mscc_result_codes: Counts,
    pub experimental_result_codes: Counts,
    pub protocol_errors: u64,
    pub unmatched_answers: u64,
    pub lost: u64,
    pub abandoned: u64,
    pub connection_errors: u64,
    pub opened: bool,
    pub server_requests: u64,
    pub re_auth_requests: u64,
    pub abort_requests: u64,
    pub sessions_started: u64,
    pub sessions_completed: u64,
    pub sessions_failed: u64,
    /// Topup scenario: times a session began to wait for credit.
    pub sessions_waited: u64,
    /// Topup scenario: times a Re-Auth-Request ended a wait.
    pub sessions_continued: u64,
    /// Topup scenario: sessions ended while waiting, at the end of the run.
    pub sessions_waiting_at_end: u64,
    /// RAR and ASR answered DIAMETER_UNKNOWN_SESSION_ID (5002).
    pub unknown_session_requests: u64,
    /// CCR-Terminates sent in the drain (retries included).
    pub drain_sent: u64,
    /// Answers to them.
    pub drain_answered: u64,
    /// Sessions ended in the drain.
    pub drain_finished: u64,
    /// Sessions the server may still hold: they could not be ended.
    pub left_open: u64,
    /// Why the first of them could not be ended.
    pub left_open_reason: Option<String>,
    /// When the last measured request was settled: answered, timed out
    /// or lost with its connection (the end of the measured run).
    pub last_settled: Option<Instant>,
    pub first_error: Option<String>,
    /// Open loop: how late each request left after its intended time.
    pub send_lag: Histogram<u64>,
    /// `--tls`: how long this connection's TLS handshake took.
    pub tls_handshake_us: Option<u64>,
    /// Open loop: requests that left before the deadline (all of them
    /// without one).
    pub offered: u64,
    /// Open loop: when the last request left.
    pub last_send: Option<Instant>,
    /// Counters and latencies per second of the run.
    pub per_second: PerSecond,
}

impl ConnStats {
    pub(crate) fn new() -> Self {
        ConnStats {
            types: ReqType::ALL.map(|_| TypeStats::new()),
            mscc_result_codes: Counts::default(),
            experimental_result_codes: Counts::default(),
            protocol_errors: 0,
            unmatched_answers: 0,
            lost: 0,
            abandoned: 0,
            connection_errors: 0,
            opened: false,
            server_requests: 0,
            re_auth_requests: 0,
            abort_requests: 0,
            sessions_started: 0,
            sessions_completed: 0,
            sessions_failed: 0,
            sessions_waited: 0,
            sessions_continued: 0,
            sessions_waiting_at_end: 0,
            unknown_session_requests: 0,
            drain_sent: 0,
            drain_answered: 0,
            drain_finished: 0,
            left_open: 0,
            left_open_reason: None,
            last_settled: None,
            first_error: None,
            send_lag: new_histogram(),
            tls_handshake_us: None,
            offered: 0,
            last_send: None,
            per_second: PerSecond::default(),
        }
    }

    /// Stats that also count per second from `start`, the common start.
    pub(crate) fn starting_at(start: Instant) -> Self {
        let mut s = ConnStats::new();
        s.per_second.start = Some(start);
        s
    }

    /// Open loop: a request intended at `intended` left at `now`; the run
    /// offers requests until `deadline`.
    #[inline]
    pub(crate) fn record_send(
        &mut self,
        intended: Instant,
        now: Instant,
        deadline: Option<Instant>,
    ) {
        let us = now.saturating_duration_since(intended).as_micros() as u64;
        self.send_lag.saturating_record(us.clamp(1, MAX_LATENCY_US));
        if deadline.is_none_or(|d| now < d) {
            self.offered += 1;
        }
        self.last_send = Some(now);
    }

    pub(crate) fn connection_error(&mut self, what: String) {
        self.connection_errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Number of latencies recorded.
    pub count: u64,
    /// Smallest.
    pub min: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// Figures for one request type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TypeReport {
    /// "CCR-I", "CCR-U", "CCR-T" or "CCR-E".
    pub name: String,
    /// Requests sent.
    pub sent: u64,
    /// Answers received (within the timeout).
    pub answered: u64,
    /// Requests not answered within the timeout.
    pub timeouts: u64,
    /// Answers whose result was not 2xxx, or that could not be read.
    pub errors: u64,
    /// Latency from the intended send time to the answer, in microseconds.
    pub latency_us: Latency,
    /// Answers per command-level Result-Code (or Experimental-Result-Code
    /// when there is no Result-Code).
    pub result_codes: BTreeMap<u32, u64>,
}

/// What the load generator itself cost, when it ran on threads of its own
/// (`gyro load`, not [`crate::run_async`] on a caller's runtime).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Generator {
    /// Load threads, each a runtime driving its share of the connections.
    pub threads: u32,
    /// CPU time of the load threads (user + system), in seconds.
    pub cpu_secs: f64,
    /// CPU time of the load threads per request sent, in microseconds.
    pub cpu_us_per_request: f64,
    /// The busiest load thread's CPU time over its wall time (1.0: it was
    /// never idle).
    pub busiest_thread: f64,
    /// True when the busiest thread was busy [`LOAD_BOUND`] (90 %) of its
    /// time or more: the generator, not the server, may have set the pace
    /// (or, in open loop, fallen behind its schedule).
    pub load_bound: bool,
}

/// Session outcomes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sessions {
    /// Sessions (and events) started.
    pub started: u64,
    /// Finished with a successful CCA-T (or CCA-Event).
    pub completed: u64,
    /// Ended by a failed answer or a timeout.
    pub failed: u64,
    /// Topup scenario: times a session began to wait for credit (an answer
    /// with 4012 on a service or a Final-Unit-Indication). Each wait ends
    /// in one of `continued_after_re_auth`, `waiting_at_end`, an ASR or a
    /// broken connection.
    #[serde(default)]
    pub waited_for_credit: u64,
    /// Topup scenario: waits ended by a Re-Auth-Request (the session sent
    /// its CCR-Update at once and went on). Includes an RAR that arrived
    /// while the request whose answer began the wait was in flight.
    #[serde(default)]
    pub continued_after_re_auth: u64,
    /// Topup scenario: sessions still waiting when the run stopped, ended
    /// then with a CCR-Terminate.
    #[serde(default)]
    pub waiting_at_end: u64,
}

/// The drain: what was done after the run stopped to end the sessions
/// the server still held (see [`crate::LoadArgs`]). None of it is counted
/// in the measured figures of the [`Report`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Drain {
    /// CCR-Terminates sent after the run stopped (retries included).
    pub requests: u64,
    /// Answers to them.
    pub answered: u64,
    /// Sessions ended in the drain (also counted in
    /// `sessions.completed` when their CCR-Terminate succeeded).
    pub sessions_finished: u64,
    /// Sessions the server may still hold, with credit reserved until its
    /// Tcc supervision ends them: their CCR-Terminate could not be sent or
    /// was never accepted (drain time spent, connection lost, a second
    /// Ctrl-C, refused every time). Any makes `gyro load` exit 1.
    pub sessions_left_open: u64,
    /// Why the first of them could not be ended.
    pub left_open_reason: Option<String>,
}

/// The result of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Server address.
    pub target: String,
    /// Scenario name.
    pub scenario: String,
    /// Connections asked for.
    pub connections: u32,
    /// Connections that completed the capabilities exchange.
    pub connections_opened: u32,
    /// Requests in flight per connection at most.
    pub window: u32,
    /// Target rate (requests/s), when open loop.
    pub target_rate: Option<f64>,
    /// Seconds from the start of sending to the last answer.
    pub elapsed_secs: f64,
    /// Requests sent.
    pub sent: u64,
    /// Answers received in time.
    pub answered: u64,
    /// Answers per second.
    pub rate: f64,
    /// Requests not answered within the timeout.
    pub timeouts: u64,
    /// Requests in flight when their connection closed.
    pub lost: u64,
    /// Requests in flight when the run was stopped (not counted as errors).
    pub abandoned: u64,
    /// Answers that could not be read (malformed AVPs, a Session-Id that
    /// does not match the request, no result code) and streams that could
    /// not be framed.
    pub protocol_errors: u64,
    /// Answers that match no request in flight (e.g. after a timeout).
    pub unmatched_answers: u64,
    /// Connections that failed to open or broke during the run.
    pub connection_errors: u64,
    /// Requests from the server other than DWR/DPR, RAR and ASR (answered
    /// with 3001).
    pub server_requests: u64,
    /// Re-Auth-Requests received (answered 2001, followed at once by the
    /// session's CCR-Update).
    #[serde(default)]
    pub re_auth_requests: u64,
    /// Abort-Session-Requests received (answered 2001, followed by the
    /// session's CCR-Terminate).
    #[serde(default)]
    pub abort_requests: u64,
    /// Re-Auth- and Abort-Session-Requests for a session the generator
    /// does not hold (answered 5002, DIAMETER_UNKNOWN_SESSION_ID).
    #[serde(default)]
    pub unknown_session_requests: u64,
    /// The first connection error, if any.
    pub first_connection_error: Option<String>,
    /// Latency over all request types, in microseconds.
    pub latency_us: Latency,
    /// Open loop only: how late requests left after their intended send
    /// time, in microseconds (at least 1). A large p99 or max here means the
    /// generator, or its window of sessions, fell behind the schedule: the
    /// rate offered was lower than `target_rate` at times (the latency
    /// figures still count from the intended times).
    #[serde(default)]
    pub send_lag_us: Option<Latency>,
    /// `--tls` only: the TLS handshakes completed (`count`) and their time
    /// in microseconds, from the TCP connection to the handshake's end.
    #[serde(default)]
    pub tls_handshakes_us: Option<Latency>,
    /// Open loop only: the rate the generator actually offered, requests
    /// per second: those that left before the end of `--duration` over
    /// it (with `--count`, all of them over the time to the last one).
    /// Below `target_rate` when sessions were not ready in time (a full
    /// window) or the generator fell behind.
    #[serde(default)]
    pub offered_rate: Option<f64>,
    /// The generator's own CPU use, when it ran on threads of its own.
    #[serde(default)]
    pub generator: Option<Generator>,
    /// Figures per request type (only types that were sent).
    pub per_type: Vec<TypeReport>,
    /// Answers per command-level Result-Code (or Experimental-Result-Code
    /// when there is no Result-Code).
    pub result_codes: BTreeMap<u32, u64>,
    /// Result-Codes found inside MSCC AVPs.
    pub mscc_result_codes: BTreeMap<u32, u64>,
    /// Experimental-Result-Codes, wherever present.
    pub experimental_result_codes: BTreeMap<u32, u64>,
    /// Session outcomes.
    pub sessions: Sessions,
    /// The sessions ended after the run stopped, and those left open.
    #[serde(default)]
    pub drain: Drain,
    /// Non-2xxx answers + timeouts + lost requests + protocol errors.
    pub errors: u64,
    /// `errors / sent`; 1.0 when nothing was sent (no connection opened,
    /// or none sent a request), so such a run fails.
    pub error_ratio: f64,
    /// The run second by second (sent, answered, errors, latency
    /// percentiles): one entry per second in each array.
    #[serde(default)]
    pub series: Series,
    /// The latency distribution over all answers (HDR percentile curve).
    #[serde(default)]
    pub latency_distribution: Vec<PercentilePoint>,
}

/// Static facts of a run, for the report header.
pub(crate) struct RunInfo {
    pub target: String,
    pub scenario: &'static str,
    pub connections: u32,
    pub window: u32,
    pub target_rate: Option<f64>,
    /// How long requests were offered (none with `--count`).
    pub duration: Option<Duration>,
    pub start: Instant,
    pub end: Instant,
    /// CPU and wall time of each load thread, when the generator ran on
    /// threads of its own.
    pub threads: Option<Vec<ThreadTime>>,
}

/// CPU and wall time of one load thread.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ThreadTime {
    pub cpu: Duration,
    pub wall: Duration,
}

impl Report {
    /// Answers that were errors (not 2xxx, or unreadable), over every
    /// request type: [`Report::errors`] without timeouts and lost requests.
    pub fn answer_errors(&self) -> u64 {
        self.per_type.iter().map(|t| t.errors).sum()
    }

    pub(crate) fn build(info: RunInfo, conns: &[ConnStats]) -> Report {
        let mut r = Report {
            target: info.target,
            scenario: info.scenario.to_string(),
            connections: info.connections,
            window: info.window,
            target_rate: info.target_rate,
            ..Report::default()
        };
        let mut all = new_histogram();
        let mut last = None::<Instant>;
        for (i, t) in ReqType::ALL.into_iter().enumerate() {
            let mut tr = TypeReport {
                name: t.name().to_string(),
                ..TypeReport::default()
            };
            let mut h = new_histogram();
            for c in conns {
                let s = &c.types[i];
                tr.sent += s.sent;
                tr.answered += s.answered;
                tr.timeouts += s.timeouts;
                tr.errors += s.errors;
                // Same bounds everywhere, so adding cannot fail.
                let _ = h.add(&s.hist);
                s.result_codes.merge_into(&mut tr.result_codes);
            }
            let _ = all.add(&h);
            tr.latency_us = Latency::of(&h);
            for (c, n) in &tr.result_codes {
                *r.result_codes.entry(*c).or_default() += n;
            }
            r.sent += tr.sent;
            r.answered += tr.answered;
            r.timeouts += tr.timeouts;
            r.errors += tr.errors;
            if tr.sent > 0 {
                r.per_type.push(tr);
            }
        }
        for c in conns {
            c.mscc_result_codes.merge_into(&mut r.mscc_result_codes);
            c.experimental_result_codes
                .merge_into(&mut r.experimental_result_codes);
            r.protocol_errors += c.protocol_errors;
            r.unmatched_answers += c.unmatched_answers;
            r.lost += c.lost;
            r.abandoned += c.abandoned;
            r.connection_errors += c.connection_errors;
            r.server_requests += c.server_requests;
            r.re_auth_requests += c.re_auth_requests;
            r.abort_requests += c.abort_requests;
            r.connections_opened += u32::from(c.opened);
            r.sessions.started += c.sessions_started;
            r.sessions.completed += c.sessions_completed;
            r.sessions.failed += c.sessions_failed;
            r.sessions.waited_for_credit += c.sessions_waited;
            r.sessions.continued_after_re_auth += c.sessions_continued;
            r.sessions.waiting_at_end += c.sessions_waiting_at_end;
            r.unknown_session_requests += c.unknown_session_requests;
            r.drain.requests += c.drain_sent;
            r.drain.answered += c.drain_answered;
            r.drain.sessions_finished += c.drain_finished;
            r.drain.sessions_left_open += c.left_open;
            if r.drain.left_open_reason.is_none() {
                r.drain.left_open_reason.clone_from(&c.left_open_reason);
            }
            if r.first_connection_error.is_none() {
                r.first_connection_error.clone_from(&c.first_error);
            }
            if let Some(t) = c.last_settled {
                last = Some(last.map_or(t, |l| l.max(t)));
            }
        }
        r.latency_us = Latency::of(&all);
        r.latency_distribution = percentile_curve(&all);
        if r.target_rate.is_some() {
            let mut lag = new_histogram();
            for c in conns {
                let _ = lag.add(&c.send_lag);
            }
            r.send_lag_us = Some(Latency::of(&lag));
            let offered: u64 = conns.iter().map(|c| c.offered).sum();
            let span = match info.duration {
                Some(d) => d.min(info.end.saturating_duration_since(info.start)),
                None => conns
                    .iter()
                    .filter_map(|c| c.last_send)
                    .max()
                    .map_or(Duration::ZERO, |l| l.saturating_duration_since(info.start)),
            };
            r.offered_rate = Some(if span.is_zero() {
                0.0
            } else {
                offered as f64 / span.as_secs_f64()
            });
        }
        if let Some(threads) = &info.threads {
            let cpu: Duration = threads.iter().map(|t| t.cpu).sum();
            let busiest = threads
                .iter()
                .filter(|t| !t.wall.is_zero())
                .map(|t| t.cpu.as_secs_f64() / t.wall.as_secs_f64())
                .fold(0.0, f64::max);
            r.generator = Some(Generator {
                threads: threads.len() as u32,
                cpu_secs: cpu.as_secs_f64(),
                cpu_us_per_request: if r.sent > 0 {
                    cpu.as_secs_f64() * 1e6 / r.sent as f64
                } else {
                    0.0
                },
                busiest_thread: busiest,
                // A run that sent nothing was bound by nothing.
                load_bound: r.sent > 0 && busiest >= LOAD_BOUND,
            });
        }
        let tls: Vec<u64> = conns.iter().filter_map(|c| c.tls_handshake_us).collect();
        if !tls.is_empty() {
            let mut h = new_histogram();
            for us in tls {
                h.saturating_record(us.clamp(1, MAX_LATENCY_US));
            }
            r.tls_handshakes_us = Some(Latency::of(&h));
        }
        // The measured run ends when its last request was settled
        // (answered, timed out or lost), not when the drain that follows
        // ends; a server that stops answering keeps the run going until
        // its requests time out.
        let end = last.unwrap_or(info.end).max(info.start);
        r.elapsed_secs = end.duration_since(info.start).as_secs_f64();
        r.series = Series::build(conns, r.elapsed_secs.ceil() as usize);
        r.rate = if r.elapsed_secs > 0.0 {
            r.answered as f64 / r.elapsed_secs
        } else {
            0.0
        };
        // Per-type errors count non-2xxx and unreadable answers; add what
        // never got an answer (a broken stream loses its requests).
        r.errors += r.timeouts + r.lost;
        // A run that sent nothing measured nothing: it fails, whether no
        // connection opened or the connections sent no request.
        r.error_ratio = if r.sent > 0 {
            r.errors as f64 / r.sent as f64
        } else {
            1.0
        };
        r
    }

    /// Errors (non-2xxx answers, timeouts, lost requests, protocol errors)
    /// divided by requests sent; 1.0 when nothing was sent (no connection
    /// could be opened, or no request went out).
    pub fn error_ratio(&self) -> f64 {
        self.error_ratio
    }

    /// True when the error ratio is above `max_error_ratio`, which is when
    /// `gyro load` exits non-zero.
    pub fn exceeds_error_ratio(&self, max_error_ratio: f64) -> bool {
        self.error_ratio() > max_error_ratio
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// The report as text for people.
    pub fn human(&self) -> String {
        let mut s = String::new();
        let rate = match self.target_rate {
            Some(r) => format!("open loop at {r:.0} req/s"),
            None => "closed loop".to_string(),
        };
        let _ = writeln!(
            s,
            "gyro load: {} scenario against {}, {}/{} connections, window {}, {}",
            self.scenario,
            self.target,
            self.connections_opened,
            self.connections,
            self.window,
            rate
        );
        let _ = writeln!(
            s,
            "  sent {}  answered {}  in {:.3} s  = {:.0} answers/s",
            self.sent, self.answered, self.elapsed_secs, self.rate
        );
        let ratio = if self.sent == 0 {
            let _ = writeln!(
                s,
                "  no request was sent: the run measured nothing (a failure)"
            );
            String::new()
        } else {
            format!(" ({:.4}%)", self.error_ratio * 100.0)
        };
        let _ = writeln!(
            s,
            "  errors {}{ratio}: timeouts {}, lost {}, protocol errors {}, connection errors {}",
            self.errors, self.timeouts, self.lost, self.protocol_errors, self.connection_errors
        );
        if self.unmatched_answers + self.abandoned + self.server_requests > 0 {
            let _ = writeln!(
                s,
                "  unmatched answers {}, abandoned at stop {}, server requests {}",
                self.unmatched_answers, self.abandoned, self.server_requests
            );
        }
        if self.re_auth_requests + self.abort_requests > 0 {
            let _ = writeln!(
                s,
                "  server-initiated: RAR received {} (each followed by a CCR-Update), ASR received {} (each followed by a CCR-Terminate)",
                self.re_auth_requests, self.abort_requests
            );
        }
        if self.unknown_session_requests > 0 {
            let _ = writeln!(
                s,
                "  server requests for unknown sessions (answered 5002): {}",
                self.unknown_session_requests
            );
        }
        if let (Some(target), Some(offered)) = (self.target_rate, self.offered_rate) {
            let _ = writeln!(
                s,
                "  open loop: offered {offered:.0} req/s of the {target:.0} asked ({:.1}%)",
                offered * 100.0 / target
            );
        }
        if let Some(l) = &self.send_lag_us {
            let _ = writeln!(
                s,
                "  open loop: requests left on average {:.0} us (p50 {} us, p99 {} us, max {} us) after their intended time",
                l.mean, l.p50, l.p99, l.max
            );
        }
        if let Some(l) = &self.tls_handshakes_us {
            let _ = writeln!(
                s,
                "  TLS handshakes {}: mean {:.0} us, p99 {} us, max {} us",
                l.count, l.mean, l.p99, l.max
            );
        }
        if let Some(g) = self.generator.as_ref().filter(|_| self.sent > 0) {
            let _ = writeln!(
                s,
                "  generator: {} thread{}, {:.2} s CPU, {:.2} us per request, busiest thread {:.0}% busy",
                g.threads,
                if g.threads == 1 { "" } else { "s" },
                g.cpu_secs,
                g.cpu_us_per_request,
                g.busiest_thread * 100.0
            );
            if g.load_bound {
                let _ = writeln!(
                    s,
                    "  LOAD-BOUND: a load thread was busy {:.0}% of the run: the generator, not the server, may have set the pace",
                    g.busiest_thread * 100.0
                );
            }
        }
        if let Some(e) = &self.first_connection_error {
            let _ = writeln!(s, "  first connection error: {e}");
        }
        let _ = writeln!(
            s,
            "  sessions: started {}, completed {}, failed {}",
            self.sessions.started, self.sessions.completed, self.sessions.failed
        );
        let d = &self.drain;
        if d.requests > 0 {
            let _ = writeln!(
                s,
                "  drain: {} session{} ended with a CCR-T after the run stopped ({} requests, {} answered; not in the figures above)",
                d.sessions_finished,
                if d.sessions_finished == 1 { "" } else { "s" },
                d.requests,
                d.answered
            );
        }
        if d.sessions_left_open > 0 {
            let _ = writeln!(
                s,
                "  LEFT OPEN: {} session{} could not be ended ({}): the server keeps their credit reserved until its Tcc ends them",
                d.sessions_left_open,
                if d.sessions_left_open == 1 { "" } else { "s" },
                d.left_open_reason.as_deref().unwrap_or("no reason recorded")
            );
        }
        let w = &self.sessions;
        if w.waited_for_credit + w.continued_after_re_auth + w.waiting_at_end > 0 {
            let _ = writeln!(
                s,
                "  waiting for credit: {} waits, {} continued after an RAR, {} still waiting at the end",
                w.waited_for_credit, w.continued_after_re_auth, w.waiting_at_end
            );
        }
        let _ = writeln!(
            s,
            "\n  {:<7} {:>10} {:>10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "latency",
            "sent",
            "answered",
            "timeout",
            "errors",
            "p50 us",
            "p90 us",
            "p99 us",
            "p99.9 us",
            "max us"
        );
        let row = |s: &mut String, name: &str, sent, ans, to, err, l: &Latency| {
            // No latency recorded shows as "-", never as a measured 0 us.
            let p = |v: u64| {
                if l.count == 0 {
                    "-".to_string()
                } else {
                    v.to_string()
                }
            };
            let _ = writeln!(
                s,
                "  {:<7} {:>10} {:>10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}",
                name,
                sent,
                ans,
                to,
                err,
                p(l.p50),
                p(l.p90),
                p(l.p99),
                p(l.p999),
                p(l.max)
            );
        };
        for t in &self.per_type {
            row(
                &mut s,
                &t.name,
                t.sent,
                t.answered,
                t.timeouts,
                t.errors,
                &t.latency_us,
            );
        }
        // The columns add up: errors here are answers, as in each row
        // (timeouts have their column; all of them are in the summary).
        row(
            &mut s,
            "all",
            self.sent,
            self.answered,
            self.timeouts,
            self.answer_errors(),
            &self.latency_us,
        );
        if self.answered > 0 && self.latency_us.count == 0 {
            let _ = writeln!(
                s,
                "  no latency measured: every answer was to a request of the --warmup"
            );
        }
        let codes = |s: &mut String, title: &str, m: &BTreeMap<u32, u64>| {
            if m.is_empty() {
                return;
            }
            let list: Vec<String> = m.iter().map(|(c, n)| format!("{c}: {n}")).collect();
            let _ = writeln!(s, "  {title}: {}", list.join(", "));
        };
        s.push('\n');
        codes(&mut s, "Result-Code", &self.result_codes);
        for t in &self.per_type {
            codes(&mut s, &format!("  {}", t.name), &t.result_codes);
        }
        codes(&mut s, "MSCC Result-Code", &self.mscc_result_codes);
        codes(
            &mut s,
            "Experimental-Result-Code",
            &self.experimental_result_codes,
        );
        s
    }

    /// Prints [`Report::human`] on stdout.
    pub fn print_human(&self) {
        print!("{}", self.human());
    }
}
