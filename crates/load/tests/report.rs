//! `--report`: the HTML page and the JSON time series of a short run
//! against the fake credit-control server.

mod common;

use std::time::Duration;

use common::{start, FakeConfig};
use gyro_load::report::{html, PageInfo};
use gyro_load::{run_async, LoadArgs, Report};

/// The `<svg>...</svg>` elements of a page, parsed as XML, by the id of the
/// figure that holds them.
fn svgs(page: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(f) = rest.find("<figure id=\"") {
        let after = &rest[f + 12..];
        let id = after[..after.find('"').unwrap()].to_string();
        let s = after.find("<svg").unwrap();
        let e = after.find("</svg>").unwrap() + 6;
        out.push((id, after[s..e].to_string()));
        rest = &after[e..];
    }
    out
}

/// The points of each polyline drawn in `color` (e.g. "#1F77B4"), in
/// document order.
fn polylines(svg: &str, color: &str) -> Vec<usize> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG parses as XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter(|n| {
            n.attribute("stroke")
                .is_some_and(|c| c.eq_ignore_ascii_case(color))
        })
        .map(|n| {
            n.attribute("points")
                .unwrap_or("")
                .split_whitespace()
                .count()
        })
        .collect()
}

async fn short_run(rate: Option<f64>) -> (LoadArgs, Report) {
    let (addr, _obs) = start(FakeConfig::default()).await;
    let a = LoadArgs {
        target: addr.to_string(),
        connections: 2,
        window: 4,
        quiet: true,
        rate,
        duration: Some(Duration::from_millis(2500)),
        timeout: Duration::from_secs(2),
        server_setting: vec![("durability".to_string(), "none <fake>".to_string())],
        ..LoadArgs::default()
    };
    let r = run_async(a.clone()).await.unwrap();
    (a, r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_page_is_html_with_one_point_per_second() {
    let (a, r) = short_run(None).await;
    let secs = r.series.len();
    assert_eq!(secs, r.elapsed_secs.ceil() as usize, "{}", r.human());
    assert!(secs >= 3, "{secs} seconds");
    let page = html(&r, &PageInfo::gather(&a));
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.trim_end().ends_with("</html>"));
    // Self-contained: no script, nothing fetched.
    for bad in ["<script", "src=\"http", "href=\"http", "<link"] {
        assert!(!page.contains(bad), "{bad}");
    }
    // Escaped text, and the settings, version and machine are there.
    assert!(page.contains("none &lt;fake&gt;"));
    assert!(page.contains(env!("CARGO_PKG_VERSION")));
    assert!(page.contains("id=\"machine\"") && page.contains("kernel"));
    assert!(page.contains("id=\"command\""));
    assert!(page.contains("<td class=\"l\">2001</td>"));

    let figs = svgs(&page);
    let ids: Vec<&str> = figs.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["throughput", "latency", "distribution"]);
    // Throughput: sent, answered, errors, a point per second each (then
    // the legend's two-point line).
    for color in ["#1F77B4", "#2CA02C", "#D62728"] {
        let lines = polylines(&figs[0].1, color);
        assert_eq!(lines, [secs, 2], "{color}");
    }
    // Latency: every second had answers, so one unbroken line per
    // percentile.
    assert!(r.series.answered.iter().all(|&n| n > 0));
    for color in ["#1F77B4", "#FF7F0E", "#D62728", "#6E6E6E"] {
        assert_eq!(polylines(&figs[1].1, color), [secs, 2], "{color}");
    }
    // Distribution: the percentile curve.
    let curve = polylines(&figs[2].1, "#1F77B4");
    assert_eq!(curve, [r.latency_distribution.len(), 2]);
    assert!(r.latency_distribution.len() > 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_series_add_up_to_the_totals() {
    let (_, r) = short_run(Some(400.0)).await;
    let back: Report = serde_json::from_str(&r.to_json()).unwrap();
    let s = &back.series;
    assert_eq!(s.interval_secs, 1.0);
    for v in [
        &s.answered,
        &s.errors,
        &s.timeouts,
        &s.p50_us,
        &s.p99_us,
        &s.p999_us,
        &s.max_us,
    ] {
        assert_eq!(v.len(), s.sent.len());
    }
    assert_eq!(s.sent.iter().sum::<u64>(), back.sent);
    assert_eq!(s.answered.iter().sum::<u64>(), back.answered);
    assert_eq!(s.errors.iter().sum::<u64>(), back.errors);
    assert_eq!(s.timeouts.iter().sum::<u64>(), back.timeouts);
    // Open loop at 400/s: each whole second sent about 400.
    for &n in &s.sent[..2] {
        assert!((300..=500).contains(&n), "{:?}", s.sent);
    }
    for i in 0..s.len() {
        if s.answered[i] > 0 {
            assert!(s.p50_us[i] <= s.p99_us[i] && s.p99_us[i] <= s.p999_us[i]);
            assert!(s.p999_us[i] <= s.max_us[i]);
            assert!(s.max_us[i] <= back.latency_us.max + back.latency_us.max / 50 + 1);
        }
    }
    // The per-second histograms hold the real latencies: their largest
    // maximum is the run's (to their 1 % precision).
    let top = s.max_us.iter().copied().max().unwrap();
    let max = back.latency_us.max;
    assert!(top.abs_diff(max) <= max / 50 + 1, "{top} vs {max}");
    let d = &back.latency_distribution;
    assert!(d.windows(2).all(|w| w[0].percentile < w[1].percentile));
    assert!(d.windows(2).all(|w| w[0].latency_us <= w[1].latency_us));
}
