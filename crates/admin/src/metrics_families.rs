//! The metric families of `/metrics`, read from the runtime's and the
//! shards' counters at scrape time (see [`crate::metrics`]).
//!
//! Names follow the Prometheus conventions: a `gyro_` prefix, base units
//! in the name (`_seconds`; money in the currency's minor units), and a
//! counter's samples end in `_total`. Per-worker and per-shard families
//! carry a `worker` or `shard` label; the rest are summed over workers.

use std::sync::atomic::Ordering::Relaxed;

use gyro_ocs::telemetry::REQUEST_KINDS;
use gyro_ocs::ShardTotals;
use gyro_server::{HistogramSnapshot, WorkerStats};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use crate::state::{Backend, Inner};

/// What the shards hold now, asked of their event loops at scrape time:
/// open sessions and reserved money (minor units), per shard.
pub(crate) type Holdings = Vec<Option<(u64, i64)>>;

/// Everything `/metrics` shows, for one scrape.
pub(crate) struct Families {
    pub inner: std::sync::Arc<Inner>,
    pub holdings: Holdings,
}

impl std::fmt::Debug for Families {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Families")
    }
}

type Result = std::result::Result<(), std::fmt::Error>;

/// Reads one of a worker's counters.
type StatFn = fn(&WorkerStats) -> u64;

/// One family of counters or gauges, a sample per label set.
fn family<M: EncodeMetric, const L: usize>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = ([(&'static str, String); L], M)>,
) -> Result {
    let samples: Vec<_> = samples.into_iter().collect();
    let Some((_, first)) = samples.first() else {
        return Ok(());
    };
    let mut m = e.encode_descriptor(name, help, None, first.metric_type())?;
    for (labels, v) in &samples {
        v.encode(m.encode_family(labels)?)?;
    }
    Ok(())
}

/// One family of a single unlabelled sample.
fn single<M: EncodeMetric>(e: &mut DescriptorEncoder, name: &str, help: &str, v: M) -> Result {
    v.encode(e.encode_descriptor(name, help, None, v.metric_type())?)
}

/// One per-worker counter family.
fn per_worker(
    e: &mut DescriptorEncoder,
    workers: &[WorkerStats],
    name: &str,
    help: &str,
    f: StatFn,
) -> Result {
    family(
        e,
        name,
        help,
        workers
            .iter()
            .enumerate()
            .map(|(i, s)| ([("worker", i.to_string())], ConstCounter::new(f(s)))),
    )
}

/// One per-shard counter family.
fn per_shard(
    e: &mut DescriptorEncoder,
    shards: &[ShardTotals],
    name: &str,
    help: &str,
    f: fn(&ShardTotals) -> u64,
) -> Result {
    family(
        e,
        name,
        help,
        shards
            .iter()
            .enumerate()
            .map(|(i, s)| ([("shard", i.to_string())], ConstCounter::new(f(s)))),
    )
}

/// A histogram kept in integer units (`scale` of them per base unit).
fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &HistogramSnapshot,
    scale: f64,
) -> Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    m.encode_histogram::<NoLabelSet>(h.sum as f64 / scale, h.count(), &buckets(h, scale), None)
}

/// A histogram's buckets as (upper bound in base units, count).
fn buckets(h: &HistogramSnapshot, scale: f64) -> Vec<(f64, u64)> {
    h.bounds
        .iter()
        .zip(&h.counts)
        .map(|(&b, &n)| {
            let le = if b == u64::MAX {
                f64::MAX
            } else {
                b as f64 / scale
            };
            (le, n)
        })
        .collect()
}

/// The shards' histograms of one kind, summed.
fn shard_histogram<const N: usize>(
    shards: &[ShardTotals],
    f: fn(&ShardTotals) -> &gyro_ocs::telemetry::Histogram<N>,
) -> HistogramSnapshot {
    let bounds = shards.first().map_or(&[][..], |s| f(s).bounds());
    let mut all = HistogramSnapshot::empty(bounds);
    for s in shards {
        all.merge(&f(s).snapshot());
    }
    all
}

const NS: f64 = 1e9;

/// Nchf_ConvergedCharging requests by operation and HTTP status, their
/// latency by operation, and connections.
fn nchf(e: &mut DescriptorEncoder, n: &gyro_nchf::server::Stats) -> Result {
    family(
        e,
        "gyro_nchf_requests",
        "Nchf_ConvergedCharging requests answered, by operation (create, update, release; \
         other: the path names none) and HTTP status",
        n.metrics.answers().into_iter().map(|(op, status, count)| {
            (
                [("operation", op.to_string()), ("status", status)],
                ConstCounter::new(count),
            )
        }),
    )?;
    let latency = n.metrics.latency();
    if !latency.is_empty() {
        let mut m = e.encode_descriptor(
            "gyro_nchf_answer_latency_seconds",
            "From an Nchf request's headers being received to its answer being ready, after \
             its group commit, by operation",
            None,
            MetricType::Histogram,
        )?;
        for (op, h) in &latency {
            let labels = [("operation", op.to_string())];
            m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                h.sum as f64 / NS,
                h.count(),
                &buckets(h, NS),
                None,
            )?;
        }
    }
    single(
        e,
        "gyro_nchf_connections_accepted",
        "HTTP/2 connections accepted by the Nchf listeners",
        ConstCounter::new(n.connections.load(Relaxed)),
    )?;
    single(
        e,
        "gyro_nchf_connections_refused",
        "Nchf connections closed at once, over [nchf] max_connections",
        ConstCounter::new(n.refused_connections.load(Relaxed)),
    )
}

impl Collector for Families {
    fn encode(&self, mut e: DescriptorEncoder) -> Result {
        let backend = self.inner.backend.get();
        let redis = self.inner.redis.get();
        single(
            &mut e,
            "gyro_ready",
            "1 once every shard has recovered and the Diameter listeners are open",
            ConstGauge::new(i64::from(backend.is_some() || redis.is_some())),
        )?;
        if let Some(crate::state::Redis {
            telemetry: r,
            totals,
            ..
        }) = redis
        {
            requests_by_code(&mut e, totals)?;
            redis_families(&mut e, r)?;
        }
        let Some(b) = backend else {
            return Ok(());
        };
        self.diameter(&mut e, b)?;
        if let Some(n) = &b.nchf {
            nchf(&mut e, n)?;
        }
        self.runtime(&mut e, b)?;
        self.durability(&mut e, b)?;
        self.money(&mut e, b)
    }
}

impl Families {
    /// Requests by command, request type and Result-Code; answer latency;
    /// in flight; refusals.
    fn diameter(&self, e: &mut DescriptorEncoder, b: &Backend) -> Result {
        requests_by_code(e, &b.totals)?;
        let t = b.control.telemetry();
        histogram(
            e,
            "gyro_answer_latency_seconds",
            "From a request being read (or taken from another worker's queue) to its answer \
             being queued for writing, after its group commit",
            &t.answer_latency(),
            NS,
        )?;
        single(
            e,
            "gyro_requests_in_flight",
            "Requests read and not yet answered: queued for a shard or waiting for a group commit",
            ConstGauge::new(t.in_flight() as i64),
        )?;
        let w = b.control.worker_stats();
        let reasons: [(&str, StatFn); 3] = [
            ("queue_full", |s| s.too_busy_queue_full.load(Relaxed)),
            ("peer_share", |s| s.too_busy_peer_share.load(Relaxed)),
            ("waited", |s| s.too_busy_waited.load(Relaxed)),
        ];
        family(
            e,
            "gyro_too_busy_answers",
            "Requests refused by overload control with DIAMETER_TOO_BUSY (3004), by reason: \
             their shard's queue was full, their peer was beyond its fair share, or they \
             waited too long for their shard",
            reasons.iter().map(|(reason, f)| {
                (
                    [("reason", reason.to_string())],
                    ConstCounter::new(w.iter().map(f).sum::<u64>()),
                )
            }),
        )
    }

    /// Per-worker request and connection counters; peers by state.
    fn runtime(&self, e: &mut DescriptorEncoder, b: &Backend) -> Result {
        let w = b.control.worker_stats();
        per_worker(
            e,
            w,
            "gyro_requests",
            "Application requests handled by the worker's shard",
            |s| s.requests.load(Relaxed),
        )?;
        per_worker(
            e,
            w,
            "gyro_requests_from_other_workers",
            "Requests handed to the worker's shard by another worker's connection",
            |s| s.from_other_workers.load(Relaxed),
        )?;
        per_worker(
            e,
            w,
            "gyro_requests_forwarded",
            "Requests the worker's connections handed to another worker",
            |s| s.forwarded.load(Relaxed),
        )?;
        per_worker(
            e,
            w,
            "gyro_requests_rejected",
            "Requests answered with a protocol error by validation",
            |s| s.rejected.load(Relaxed),
        )?;
        per_worker(
            e,
            w,
            "gyro_connections_accepted",
            "Diameter connections accepted",
            |s| s.connections.load(Relaxed),
        )?;
        per_worker(
            e,
            w,
            "gyro_connections_aborted",
            "Connections closed for a framing error, a size limit or a timeout",
            |s| s.aborted_connections.load(Relaxed),
        )?;
        per_worker(
            e,
            w,
            "gyro_connections_refused",
            "Connections refused: at accept (connection limit, no file descriptor left) or at \
             CER (per-peer limit, 5012)",
            |s| s.refused_connections.load(Relaxed) + s.refused_peers.load(Relaxed),
        )?;
        family(
            e,
            "gyro_connections_open",
            "Diameter connections open now",
            w.iter().enumerate().map(|(i, s)| {
                (
                    [("worker", i.to_string())],
                    ConstGauge::new(s.open_connections.load(Relaxed) as i64),
                )
            }),
        )?;
        family(
            e,
            "gyro_peers",
            "Diameter connections by peer state (handshake: waiting for the CER)",
            b.control
                .telemetry()
                .peers_by_state()
                .into_iter()
                .map(|(state, n)| ([("state", state.to_string())], ConstGauge::new(n as i64))),
        )
    }

    /// Group commits, records per commit, fsync latency, snapshots.
    fn durability(&self, e: &mut DescriptorEncoder, b: &Backend) -> Result {
        let t = &b.totals;
        per_shard(
            e,
            t,
            "gyro_group_commits",
            "Group commits made durable",
            |s| s.commits.load(Relaxed),
        )?;
        per_shard(
            e,
            t,
            "gyro_fsyncs",
            "fsync/fdatasync calls of the shard's journal and CDR files",
            |s| s.syncs.load(Relaxed),
        )?;
        per_shard(
            e,
            t,
            "gyro_commit_records",
            "Effects and CDRs made durable",
            |s| s.records.load(Relaxed),
        )?;
        per_shard(
            e,
            t,
            "gyro_commit_failures",
            "Group commits that failed (their answers became 3004)",
            |s| s.failed_commits.load(Relaxed),
        )?;
        per_shard(e, t, "gyro_cdrs", "Charging data records produced", |s| {
            s.cdrs.load(Relaxed)
        })?;
        histogram(
            e,
            "gyro_records_per_commit",
            "Effects and CDRs made durable by each group commit",
            &shard_histogram(t, |s| &s.telemetry.records_per_commit),
            1.0,
        )?;
        histogram(
            e,
            "gyro_fsync_duration_seconds",
            "The journal fdatasync of each group commit, timed on the thread that ran it",
            &shard_histogram(t, |s| &s.telemetry.journal_sync),
            NS,
        )?;
        histogram(
            e,
            "gyro_snapshot_duration_seconds",
            "Building each ledger snapshot, off the event loop",
            &shard_histogram(t, |s| &s.telemetry.snapshot),
            NS,
        )
    }

    /// Open sessions and money.
    fn money(&self, e: &mut DescriptorEncoder, b: &Backend) -> Result {
        let held = || {
            self.holdings
                .iter()
                .enumerate()
                .filter_map(|(i, h)| h.map(|h| (i, h)))
        };
        family(
            e,
            "gyro_open_sessions",
            "Credit-control sessions open now",
            held().map(|(i, (n, _))| ([("shard", i.to_string())], ConstGauge::new(n as i64))),
        )?;
        family(
            e,
            "gyro_money_reserved_minor_units",
            "Money held by the reservations of open sessions now, minor units",
            held().map(|(i, (_, r))| ([("shard", i.to_string())], ConstGauge::new(r))),
        )?;
        let t = &b.totals;
        per_shard(
            e,
            t,
            "gyro_money_debited_minor_units",
            "Money charged (from reservations and balances), minor units",
            |s| s.telemetry.debited.load(Relaxed),
        )?;
        per_shard(
            e,
            t,
            "gyro_money_refunded_minor_units",
            "Money given back by refunds, minor units",
            |s| s.telemetry.refunded.load(Relaxed),
        )?;
        per_shard(
            e,
            t,
            "gyro_money_topped_up_minor_units",
            "Money added by top-ups, minor units",
            |s| s.telemetry.topped_up.load(Relaxed),
        )
    }
}

/// The Redis Cluster ledger's families: round-trip latency and size of
/// each batch's pipelines, steps and errors by kind, background work.
fn redis_families(e: &mut DescriptorEncoder, r: &gyro_ocs::RedisTelemetry) -> Result {
    histogram(
        e,
        "gyro_redis_round_trip_seconds",
        "Wall time of one group commit's pipelines to the Redis Cluster (one per master, \
         sent concurrently; with replicas_ack = 1 including WAIT)",
        &r.round_trip.snapshot(),
        NS,
    )?;
    histogram(
        e,
        "gyro_redis_batch_steps",
        "Money steps (Redis Function calls) per group commit",
        &r.batch_steps.snapshot(),
        1.0,
    )?;
    let s = r.ledger_stats();
    single(
        e,
        "gyro_redis_steps",
        "Money steps sent to the Redis Cluster",
        ConstCounter::new(s.steps),
    )?;
    single(
        e,
        "gyro_redis_pipelines",
        "Pipelines sent (one per master per group commit)",
        ConstCounter::new(s.pipelines),
    )?;
    single(
        e,
        "gyro_redis_redirected_steps",
        "Steps sent again on their own after a redirection (a slot moved, a failover)",
        ConstCounter::new(s.redirected),
    )?;
    single(
        e,
        "gyro_redis_replayed_steps",
        "Steps answered from a remembered answer (retransmissions, retries)",
        ConstCounter::new(r.replayed.load(Relaxed)),
    )?;
    family(
        e,
        "gyro_redis_errors",
        "Steps that failed, by kind (each makes its request's answer 3004): unavailable \
         (unreachable, timed out), not_replicated (replicas_ack = 1 and no replica in time), \
         refused (the cluster refused the call)",
        [
            ("unavailable", &r.errors_unavailable),
            ("not_replicated", &r.errors_not_replicated),
            ("refused", &r.errors_refused),
        ]
        .map(|(kind, n)| {
            (
                [("kind", kind.to_string())],
                ConstCounter::new(n.load(Relaxed)),
            )
        }),
    )?;
    single(
        e,
        "gyro_redis_expired_sessions",
        "Sessions past their Tcc deadline whose reservations this node released",
        ConstCounter::new(r.expired_sessions.load(Relaxed)),
    )?;
    single(
        e,
        "gyro_redis_exported_cdrs",
        "CDRs this node exported from the slot streams into files",
        ConstCounter::new(r.exported_cdrs.load(Relaxed)),
    )?;
    single(
        e,
        "gyro_redis_session_lookups",
        "CCR-Update/-Terminate sessions this node did not know and looked up in the cluster",
        ConstCounter::new(r.session_lookups.load(Relaxed)),
    )?;
    single(
        e,
        "gyro_redis_subscriber_lookups",
        "Subscription-Ids not in the charging configuration this node looked up in the cluster's subscriber directory (accounts created through the operator API)",
        ConstCounter::new(r.subscriber_lookups.load(Relaxed)),
    )?;
    single(
        e,
        "gyro_redis_unknown_sessions",
        "Requests answered 5002 DIAMETER_UNKNOWN_SESSION_ID (a session neither this node nor the cluster knows)",
        ConstCounter::new(r.unknown_sessions.load(Relaxed)),
    )?;
    single(
        e,
        "gyro_redis_background_errors",
        "Failed rounds of expiry or export (retried at the next round)",
        ConstCounter::new(r.background_errors.load(Relaxed)),
    )
}

/// `gyro_diameter_requests`: the shards' answers by command, request type
/// and Result-Code.
fn requests_by_code(e: &mut DescriptorEncoder, totals: &[ShardTotals]) -> Result {
    let mut by_code: Vec<((usize, Option<u32>), u64)> = Vec::new();
    for shard in totals.iter() {
        for (kind, code, n) in shard.telemetry.answers() {
            match by_code.iter_mut().find(|(k, _)| *k == (kind, code)) {
                Some((_, total)) => *total += n,
                None => by_code.push(((kind, code), n)),
            }
        }
    }
    by_code.sort_unstable_by_key(|((kind, code), _)| (*kind, code.unwrap_or(u32::MAX)));
    family(
        e,
        "gyro_diameter_requests",
        "Application requests answered, by command, CC-Request-Type and the Result-Code of \
         the answer, including the DIAMETER_TOO_BUSY answers of overload control (requests \
         refused by validation are in gyro_requests_rejected_total)",
        by_code.into_iter().map(|((kind, code), n)| {
            let (command, request_type) = REQUEST_KINDS[kind];
            let code = code.map_or_else(|| "other".to_string(), |c| c.to_string());
            (
                [
                    ("command", command.to_string()),
                    ("request_type", request_type.to_string()),
                    ("result_code", code),
                ],
                ConstCounter::new(n),
            )
        }),
    )?;
    Ok(())
}
