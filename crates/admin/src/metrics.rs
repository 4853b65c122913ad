//! `/metrics`: metrics from the prometheus-client crate, as OpenMetrics
//! text to a client that asks for it (Prometheus does) and as the
//! classic Prometheus text format (0.0.4) otherwise (`promtool check
//! metrics`, curl). The runtime and the shards keep plain per-worker atomic
//! counters on their own cache lines; they are read here, at scrape time,
//! so scraping costs the request path nothing.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::problem::Problem;
use crate::state::{AppState, Inner};

/// Reads the counters at each scrape.
struct Counters(Arc<Inner>);

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counters")
    }
}

/// One family: a counter or gauge per label value.
fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: impl IntoIterator<Item = M>,
) -> Result<(), std::fmt::Error> {
    let values: Vec<M> = values.into_iter().collect();
    let Some(first) = values.first() else {
        return Ok(());
    };
    let mut m = encoder.encode_descriptor(name, help, None, first.metric_type())?;
    for (i, v) in values.iter().enumerate() {
        let labels = [(label, i.to_string())];
        v.encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for Counters {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let ready = ConstGauge::new(i64::from(self.0.backend.get().is_some()));
        ready.encode(e.encode_descriptor(
            "gyro_ready",
            "1 once every shard has recovered and the Diameter listeners are open",
            None,
            ready.metric_type(),
        )?)?;
        let Some(b) = self.0.backend.get() else {
            return Ok(());
        };
        let w = b.control.worker_stats();
        let counter = |f: fn(&gyro_server::WorkerStats) -> u64| {
            w.iter()
                .map(move |s| ConstCounter::new(f(s)))
                .collect::<Vec<_>>()
        };
        family(
            &mut e,
            "gyro_requests",
            "Application requests handled by the worker's shard",
            "worker",
            counter(|s| s.requests.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_requests_from_other_workers",
            "Requests handed to the worker's shard by another worker's connection",
            "worker",
            counter(|s| s.from_other_workers.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_requests_forwarded",
            "Requests the worker's connections handed to another worker",
            "worker",
            counter(|s| s.forwarded.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_requests_rejected",
            "Requests answered with a protocol error by validation",
            "worker",
            counter(|s| s.rejected.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_connections_accepted",
            "Diameter connections accepted",
            "worker",
            counter(|s| s.connections.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_connections_aborted",
            "Connections closed for a framing error, a size limit or a timeout",
            "worker",
            counter(|s| s.aborted_connections.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_too_busy_queue_full",
            "Requests answered DIAMETER_TOO_BUSY (3004) because their shard's queue was full",
            "worker",
            counter(|s| s.too_busy_queue_full.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_too_busy_peer_share",
            "Requests answered 3004 because their peer was beyond its fair share",
            "worker",
            counter(|s| s.too_busy_peer_share.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_too_busy_waited",
            "Requests answered 3004 because they waited too long for their shard",
            "worker",
            counter(|s| s.too_busy_waited.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_connections_refused",
            "Connections refused: at accept (connection limit, no file descriptor left) or at CER (per-peer limit, 5012)",
            "worker",
            counter(|s| s.refused_connections.load(Relaxed) + s.refused_peers.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_connections_open",
            "Diameter connections open now",
            "worker",
            w.iter()
                .map(|s| ConstGauge::new(s.open_connections.load(Relaxed) as i64)),
        )?;
        let t = &b.totals;
        let shard = |f: fn(&gyro_ocs::ShardTotals) -> u64| {
            t.iter()
                .map(move |s| ConstCounter::new(f(s)))
                .collect::<Vec<_>>()
        };
        family(
            &mut e,
            "gyro_group_commits",
            "Group commits made durable",
            "shard",
            shard(|s| s.commits.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_fsyncs",
            "fsync/fdatasync calls of the shard's journal",
            "shard",
            shard(|s| s.syncs.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_commit_records",
            "Effects and CDRs made durable (divide by gyro_group_commits_total for records per commit)",
            "shard",
            shard(|s| s.records.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_commit_failures",
            "Group commits that failed (their answers became 3004)",
            "shard",
            shard(|s| s.failed_commits.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_cdrs",
            "Charging data records produced",
            "shard",
            shard(|s| s.cdrs.load(Relaxed)),
        )?;
        family(
            &mut e,
            "gyro_charged_minor_units",
            "Money debited minus refunded since start, minor units",
            "shard",
            t.iter().map(|s| ConstGauge::new(s.amount.load(Relaxed))),
        )?;
        Ok(())
    }
}

/// The registry of the admin API's metrics.
pub(crate) fn registry(inner: Arc<Inner>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(Counters(inner)));
    r
}

/// OpenMetrics text as the classic Prometheus text format: a counter's
/// family is named with its `_total` suffix, and there is no `# EOF`.
fn classic(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 64);
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let rest = line
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        match rest {
            Some((prefix, r)) => {
                let (name, tail) = r.split_once(' ').unwrap_or((r, ""));
                let suffix = if counters.contains(name) {
                    "_total"
                } else {
                    ""
                };
                out.push_str(&format!("{prefix}{name}{suffix} {tail}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "OpenMetrics text when asked for (Accept: application/openmetrics-text), else Prometheus text 0.0.4", content_type = "text/plain")))]
pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry(state.clone()))
        .map_err(|e| Problem::unavailable(format!("encoding metrics: {e}")))?;
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let (content_type, text) = if openmetrics {
        (
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            text,
        )
    } else {
        ("text/plain; version=0.0.4; charset=utf-8", classic(&text))
    };
    Ok(([(header::CONTENT_TYPE, content_type)], text).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_named_with_their_suffix_in_the_classic_format() {
        let om = "# HELP a_b Things.\n# TYPE a_b counter\na_b_total{w=\"0\"} 1\n\
                  # HELP g Now.\n# TYPE g gauge\ng 2\n# EOF\n";
        assert_eq!(
            classic(om),
            "# HELP a_b_total Things.\n# TYPE a_b_total counter\na_b_total{w=\"0\"} 1\n\
             # HELP g Now.\n# TYPE g gauge\ng 2\n"
        );
    }
}
