//! `/metrics`: metrics from the prometheus-client crate, as OpenMetrics
//! text to a client that asks for it (Prometheus does) and as the
//! classic Prometheus text format (0.0.4) otherwise (`promtool check
//! metrics`, curl). The runtime and the shards keep plain per-worker atomic
//! counters and histogram buckets on their own cache lines; they are read
//! here, at scrape time ([`crate::metrics_families`]), so the request path
//! pays nothing for a scrape. What no counter holds (open sessions, money
//! reserved) is asked of each shard's event loop once per scrape.

use std::time::Duration;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use gyro_ocs::CreditShard;
use prometheus_client::registry::Registry;
use tokio::sync::oneshot;

use crate::metrics_families::{Families, Holdings};
use crate::problem::Problem;
use crate::state::{AppState, Backend};

/// How long a scrape waits for a shard to say what it holds.
const HOLDINGS_TIMEOUT: Duration = Duration::from_secs(2);

/// Open sessions and reserved money of every shard, counted on each
/// shard's event loop (a shard that does not answer in time is left out).
async fn holdings(backend: &Backend) -> Holdings {
    let mut waiting = Vec::new();
    for shard in 0..backend.control.shards() {
        let (tx, rx) = oneshot::channel();
        let sent = backend.control.send(
            shard,
            Box::new(move |s: &mut CreditShard, _now_ms| {
                let _ = tx.send(s.holdings());
                Box::new(|_durable| {})
            }),
        );
        waiting.push(sent.ok().map(|()| rx));
    }
    let mut out = Vec::with_capacity(waiting.len());
    for rx in waiting {
        let got = match rx {
            Some(rx) => tokio::time::timeout(HOLDINGS_TIMEOUT, rx)
                .await
                .ok()
                .and_then(Result::ok),
            None => None,
        };
        out.push(got);
    }
    out
}

/// The registry of one scrape.
fn registry(families: Families) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(families));
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
    let holdings = match state.backend.get() {
        Some(b) => holdings(b).await,
        None => Vec::new(),
    };
    let families = Families {
        inner: state.clone(),
        holdings,
    };
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry(families))
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
