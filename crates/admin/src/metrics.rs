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

/// The media type of OpenMetrics text.
const OPENMETRICS: &str = "application/openmetrics-text";
/// The media type of the classic Prometheus text format.
const PROMETHEUS: &str = "text/plain";

/// One media range of an Accept header (RFC 9110 section 12.5.1): the
/// range, lowercased, and its weight (section 12.4.2; 1 when not given).
/// `None` for an element that is not a range or has a weight that does
/// not parse.
fn media_range(element: &str) -> Option<(String, f32)> {
    let mut parts = element.split(';');
    let range = parts.next()?.trim().to_ascii_lowercase();
    if !range.contains('/') {
        return None;
    }
    let mut q = 1.0;
    for param in parts {
        let Some((name, value)) = param.split_once('=') else {
            continue;
        };
        if name.trim().eq_ignore_ascii_case("q") {
            q = value
                .trim()
                .parse::<f32>()
                .ok()
                .filter(|q| (0.0..=1.0).contains(q))?;
        }
    }
    Some((range, q))
}

/// The weight `ranges` give `media` (`type/subtype`), from the most
/// specific range that matches it, and how specific that range is (3
/// `type/subtype`, 2 `type/*`, 1 `*/*`); (0, 0) when none matches. Among
/// ranges of one specificity (the same type with other parameters) the
/// highest weight counts.
fn weight(ranges: &[(String, f32)], media: &str) -> (f32, u8) {
    let kind = media.split('/').next().unwrap_or("");
    let mut best = (0.0, 0);
    for (range, q) in ranges {
        let specific = if range == media {
            3
        } else if range.strip_suffix("/*") == Some(kind) {
            2
        } else if range == "*/*" {
            1
        } else {
            continue;
        };
        if specific > best.1 || (specific == best.1 && *q > best.0) {
            best = (*q, specific);
        }
    }
    best
}

/// Whether the Accept header asks for OpenMetrics rather than the classic
/// text: OpenMetrics when it weighs more, or as much (not 0) and is named
/// itself; the classic text otherwise, and when neither is acceptable.
fn wants_openmetrics(headers: &HeaderMap) -> bool {
    let ranges: Vec<(String, f32)> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(media_range)
        .collect();
    let (openmetrics, named) = weight(&ranges, OPENMETRICS);
    let (text, _) = weight(&ranges, PROMETHEUS);
    openmetrics > text || (openmetrics == text && openmetrics > 0.0 && named == 3)
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200,
        description = "OpenMetrics text when the Accept header weighs it more (or as much and names it), else Prometheus text 0.0.4",
        content(
            (String = "text/plain; version=0.0.4; charset=utf-8"),
            (String = "application/openmetrics-text; version=1.0.0; charset=utf-8"),
        ))))]
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
    let (content_type, text) = if wants_openmetrics(&headers) {
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

    fn accepts_openmetrics(accept: &[&str]) -> bool {
        let mut headers = HeaderMap::new();
        for a in accept {
            headers.append(header::ACCEPT, a.parse().unwrap());
        }
        wants_openmetrics(&headers)
    }

    #[test]
    fn the_accept_header_is_weighed_by_q_values() {
        // What Prometheus sends.
        assert!(accepts_openmetrics(&[
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
             version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ]));
        assert!(accepts_openmetrics(&["application/openmetrics-text"]));
        assert!(accepts_openmetrics(&[
            "text/plain",
            "application/openmetrics-text"
        ]));
        assert!(accepts_openmetrics(&[
            "text/plain;q=0.2, application/openmetrics-text;q=0.3"
        ]));
        assert!(accepts_openmetrics(&[
            "application/*;q=0.9, text/plain;q=0.5"
        ]));
        // q=0 is "not acceptable"; the higher weight wins.
        assert!(!accepts_openmetrics(&[
            "application/openmetrics-text;q=0, text/plain;version=0.0.4"
        ]));
        assert!(!accepts_openmetrics(&[
            "application/openmetrics-text;q=0.4, text/plain;q=0.5"
        ]));
        assert!(!accepts_openmetrics(&[
            "application/openmetrics-text;q=0",
            "*/*"
        ]));
        // The most specific range counts, not the highest weight.
        assert!(!accepts_openmetrics(&[
            "*/*, application/openmetrics-text;q=0"
        ]));
        // Without a preference, the classic text.
        assert!(!accepts_openmetrics(&[]));
        assert!(!accepts_openmetrics(&["*/*"]));
        assert!(!accepts_openmetrics(&["text/*"]));
        assert!(!accepts_openmetrics(&[
            "application/openmetrics-text;q=abc"
        ]));
    }

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
