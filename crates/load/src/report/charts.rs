//! The report's charts as SVG strings (plotters' SVG backend: text is
//! written as SVG text elements, so no font files are needed).

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::stats::{PercentilePoint, Series};

const SIZE: (u32, u32) = (960, 340);
const SENT: RGBColor = RGBColor(31, 119, 180);
const ANSWERED: RGBColor = RGBColor(44, 160, 44);
const ERRORS: RGBColor = RGBColor(214, 39, 40);
const P50: RGBColor = RGBColor(31, 119, 180);
const P99: RGBColor = RGBColor(255, 127, 14);
const P999: RGBColor = RGBColor(214, 39, 40);
const MAX: RGBColor = RGBColor(110, 110, 110);

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Draws with `f` on a fresh SVG canvas and returns the SVG text.
fn svg(f: impl FnOnce(&Area<'_>) -> Result<(), String>) -> Result<String, String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        f(&root)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(buf)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn legend_line(c: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
}

/// The x of second `i`: its middle.
fn x_of(i: usize) -> f64 {
    i as f64 + 0.5
}

/// Sent, answered and errors per second: one line each, one point per
/// second of the run.
pub(super) fn throughput(s: &Series) -> Result<String, String> {
    let n = s.len();
    let top = s
        .sent
        .iter()
        .chain(&s.answered)
        .chain(&s.errors)
        .copied()
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.1;
    svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..(n.max(1) as f64), 0f64..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("seconds from the start")
            .y_desc("per second")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(err)?;
        for (name, v, c) in [
            ("sent", &s.sent, SENT),
            ("answered", &s.answered, ANSWERED),
            ("errors", &s.errors, ERRORS),
        ] {
            chart
                .draw_series(LineSeries::new(
                    v.iter().enumerate().map(|(i, &y)| (x_of(i), y as f64)),
                    c.stroke_width(2),
                ))
                .map_err(err)?
                .label(name)
                .legend(legend_line(c));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)
    })
}

/// p50, p99, p99.9 and max latency per second, log scale; a second without
/// answers breaks the lines.
pub(super) fn latency(s: &Series) -> Result<String, String> {
    let n = s.len();
    let top = s.max_us.iter().copied().max().unwrap_or(0).max(10) * 2;
    svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..(n.max(1) as f64), (1u64..top).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("seconds from the start")
            .y_desc("latency (us, log)")
            .draw()
            .map_err(err)?;
        for (name, v, c) in [
            ("p50", &s.p50_us, P50),
            ("p99", &s.p99_us, P99),
            ("p99.9", &s.p999_us, P999),
            ("max", &s.max_us, MAX),
        ] {
            let mut runs: Vec<Vec<(f64, u64)>> = Vec::new();
            let mut cur = Vec::new();
            for (i, &y) in v.iter().enumerate() {
                if s.answered.get(i).copied().unwrap_or(0) == 0 {
                    if !cur.is_empty() {
                        runs.push(std::mem::take(&mut cur));
                    }
                } else {
                    cur.push((x_of(i), y.max(1)));
                }
            }
            if !cur.is_empty() {
                runs.push(cur);
            }
            let mut first = true;
            for run in runs {
                let a = chart
                    .draw_series(LineSeries::new(run, c.stroke_width(2)))
                    .map_err(err)?;
                if std::mem::take(&mut first) {
                    a.label(name).legend(legend_line(c));
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)
    })
}

/// Highest percentile plotted: 99.9999 % (the maximum is drawn there).
const TOP_NINES: f64 = 6.0;

/// The x of a percentile on the HDR scale: the number of nines,
/// -log10(1 - p).
fn nines(percentile: f64) -> f64 {
    let rest = (1.0 - percentile / 100.0).max(10f64.powf(-TOP_NINES));
    -rest.log10()
}

/// The HDR percentile curve: latency (log) against the percentile on a
/// scale of nines (50 %, 90 %, 99 %, 99.9 %, ...).
pub(super) fn distribution(points: &[PercentilePoint]) -> Result<String, String> {
    let top = points
        .iter()
        .map(|p| p.latency_us)
        .max()
        .unwrap_or(0)
        .max(10)
        * 2;
    let right = points
        .iter()
        .map(|p| nines(p.percentile))
        .fold(1.0f64, f64::max)
        .ceil();
    svg(|root| {
        let mut chart = ChartBuilder::on(root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..right, (1u64..top).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("latency (us, log)")
            .x_labels(right as usize + 1)
            .x_label_formatter(&|x| {
                let p = 100.0 * (1.0 - 10f64.powf(-x));
                let s = format!("{p:.4}");
                let s = s.trim_end_matches('0').trim_end_matches('.');
                format!("{s} %")
            })
            .draw()
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                points
                    .iter()
                    .map(|p| (nines(p.percentile), p.latency_us.max(1))),
                P50.stroke_width(2),
            ))
            .map_err(err)?
            .label("all answers")
            .legend(legend_line(P50));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)
    })
}
