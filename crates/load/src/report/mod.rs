//! `gyro load --report FILE.html`: the report as one self-contained HTML
//! page (inline CSS, inline SVG charts drawn with plotters, no script, no
//! network): throughput and latency percentiles per second, the latency
//! distribution, Result-Codes, per request type tables, and how the run
//! was made (command line, gyro version, machine, server settings).

mod charts;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::args::LoadArgs;
use crate::stats::{Latency, Report};

/// What the page says about how the run was made, besides the report.
#[derive(Debug, Clone, Default)]
pub struct PageInfo {
    /// The command line, as given.
    pub command_line: String,
    /// gyro's version (and build commit, when known).
    pub version: String,
    /// CPU model, cores and kernel.
    pub machine: Machine,
    /// Server settings known to the caller (`--server-setting`), and the
    /// generator's own (target, connections, window, rate, scenario).
    pub settings: Vec<(String, String)>,
}

/// The machine the generator ran on.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    /// CPU model name (/proc/cpuinfo).
    pub cpu: String,
    /// Logical CPUs the process may use.
    pub cores: usize,
    /// Kernel name and release.
    pub kernel: String,
}

impl Machine {
    /// Reads /proc/cpuinfo and /proc/sys/kernel (empty where absent).
    pub fn this() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(String::new, |(_, v)| v.trim().to_string());
        let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string());
        let kernel = match (
            read("/proc/sys/kernel/ostype"),
            read("/proc/sys/kernel/osrelease"),
        ) {
            (Ok(t), Ok(r)) => format!("{t} {r}"),
            _ => std::env::consts::OS.to_string(),
        };
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel,
        }
    }
}

/// gyro's version, with the build's git commit when it was known.
pub fn version() -> String {
    match option_env!("GYRO_GIT_COMMIT") {
        Some(c) if !c.is_empty() => format!("{} ({c})", env!("CARGO_PKG_VERSION")),
        _ => env!("CARGO_PKG_VERSION").to_string(),
    }
}

impl PageInfo {
    /// This process's command line, version and machine, and the settings
    /// of `args`.
    pub fn gather(args: &LoadArgs) -> PageInfo {
        let command_line = std::env::args()
            .map(|a| shell_quote(&a))
            .collect::<Vec<_>>()
            .join(" ");
        PageInfo {
            command_line,
            version: version(),
            machine: Machine::this(),
            settings: settings(args),
        }
    }
}

/// The generator's settings, then the caller's `--server-setting`s.
pub fn settings(a: &LoadArgs) -> Vec<(String, String)> {
    let mut v = vec![
        ("target".to_string(), a.target.clone()),
        (
            "protocol".to_string(),
            match a.protocol {
                crate::args::Protocol::Diameter => "diameter",
                crate::args::Protocol::Nchf => "nchf",
            }
            .to_string(),
        ),
        ("scenario".to_string(), a.scenario.name().to_string()),
        ("connections".to_string(), a.connections.to_string()),
        ("window".to_string(), a.effective_window().to_string()),
        (
            "rate".to_string(),
            a.rate
                .map_or("closed loop".to_string(), |r| format!("{r} requests/s")),
        ),
    ];
    if let Some(d) = a.duration {
        v.push((
            "duration".to_string(),
            humantime::format_duration(d).to_string(),
        ));
    }
    if let Some(n) = a.count {
        v.push(("count".to_string(), n.to_string()));
    }
    v.push(("threads".to_string(), a.threads.to_string()));
    v.push(("tls".to_string(), a.tls.enabled.to_string()));
    for (k, val) in &a.server_setting {
        v.push((format!("server {k}"), val.clone()));
    }
    v
}

fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `s` with HTML's special characters escaped (for text and attributes).
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222}\
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
th{background:#f3f3f3}td.l,th.l{text-align:left}code,pre{background:#f6f6f6;padding:2px 4px}\
pre{white-space:pre-wrap;word-break:break-all}.warn{background:#fff1c2;border:1px solid #e0b000;padding:8px}\
figure{margin:8px 0}svg{max-width:100%;height:auto}";

/// The whole page.
pub fn html(r: &Report, info: &PageInfo) -> String {
    let mut h = String::new();
    let title = format!(
        "gyro load: {} against {}",
        r.scenario,
        if r.target.is_empty() { "?" } else { &r.target }
    );
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let mode = match r.target_rate {
        Some(t) => format!("open loop at {t:.0} requests/s"),
        None => "closed loop".to_string(),
    };
    let _ = writeln!(
        h,
        "<p id=\"summary\">{} answered of {} sent in {:.3} s: <b>{:.0} answers/s</b>, {mode}; errors {} ({:.4} %); latency p50 {} us, p99 {} us, p99.9 {} us, max {} us.</p>",
        r.answered,
        r.sent,
        r.elapsed_secs,
        r.rate,
        r.errors,
        r.error_ratio * 100.0,
        r.latency_us.p50,
        r.latency_us.p99,
        r.latency_us.p999,
        r.latency_us.max
    );
    if let Some(g) = r.generator.as_ref().filter(|g| g.load_bound) {
        let _ = writeln!(
            h,
            "<p class=\"warn\" id=\"load-bound\">LOAD-BOUND: a load thread was busy {:.0} % of the run: the load generator, not the server, may have set the pace.</p>",
            g.busiest_thread * 100.0
        );
    }
    h.push_str("<h2>Throughput per second</h2>\n");
    figure(&mut h, "throughput", charts::throughput(&r.series));
    h.push_str("<h2>Latency per second</h2>\n");
    figure(&mut h, "latency", charts::latency(&r.series));
    h.push_str("<h2>Latency distribution</h2>\n");
    figure(
        &mut h,
        "distribution",
        charts::distribution(&r.latency_distribution),
    );
    h.push_str("<h2>Per request type</h2>\n<table id=\"per-type\"><tr><th class=\"l\">type</th><th>sent</th><th>answered</th><th>timeouts</th><th>errors</th><th>mean us</th><th>p50 us</th><th>p90 us</th><th>p99 us</th><th>p99.9 us</th><th>max us</th></tr>\n");
    for t in &r.per_type {
        type_row(
            &mut h,
            &t.name,
            [t.sent, t.answered, t.timeouts, t.errors],
            &t.latency_us,
        );
    }
    type_row(
        &mut h,
        "all",
        [r.sent, r.answered, r.timeouts, r.answer_errors()],
        &r.latency_us,
    );
    h.push_str("</table>\n<h2>Answers per Result-Code</h2>\n");
    codes(&mut h, "result-codes", "Result-Code", &r.result_codes, r);
    if !r.mscc_result_codes.is_empty() {
        codes(
            &mut h,
            "mscc-result-codes",
            "MSCC Result-Code",
            &r.mscc_result_codes,
            r,
        );
    }
    if !r.experimental_result_codes.is_empty() {
        codes(
            &mut h,
            "experimental-result-codes",
            "Experimental-Result-Code",
            &r.experimental_result_codes,
            r,
        );
    }
    h.push_str("<h2>Run</h2>\n<table id=\"run\">\n");
    let mut kv = |k: &str, v: String| {
        let _ = writeln!(
            h,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>",
            escape(k),
            escape(&v)
        );
    };
    kv(
        "connections opened",
        format!("{} of {}", r.connections_opened, r.connections),
    );
    if let Some(o) = r.offered_rate {
        kv("offered rate", format!("{o:.0} requests/s"));
    }
    if let Some(l) = &r.send_lag_us {
        kv(
            "send lag",
            format!("p50 {} us, p99 {} us, max {} us", l.p50, l.p99, l.max),
        );
    }
    kv(
        "timeouts / lost / protocol errors / connection errors",
        format!(
            "{} / {} / {} / {}",
            r.timeouts, r.lost, r.protocol_errors, r.connection_errors
        ),
    );
    kv(
        "sessions started / completed / failed",
        format!(
            "{} / {} / {}",
            r.sessions.started, r.sessions.completed, r.sessions.failed
        ),
    );
    if let Some(g) = &r.generator {
        kv(
            "generator",
            format!(
                "{} thread(s), {:.2} s CPU, {:.2} us per request, busiest thread {:.0} % busy{}",
                g.threads,
                g.cpu_secs,
                g.cpu_us_per_request,
                g.busiest_thread * 100.0,
                if g.load_bound { " (LOAD-BOUND)" } else { "" }
            ),
        );
    }
    if let Some(e) = &r.first_connection_error {
        kv("first connection error", e.clone());
    }
    h.push_str("</table>\n<h2>Settings</h2>\n<table id=\"settings\">\n");
    for (k, v) in &info.settings {
        let _ = writeln!(
            h,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>",
            escape(k),
            escape(v)
        );
    }
    let m = &info.machine;
    let _ = write!(
        h,
        "</table>\n<h2>Machine and build</h2>\n<table id=\"machine\">\n\
         <tr><th class=\"l\">CPU</th><td class=\"l\">{}</td></tr>\n\
         <tr><th class=\"l\">cores</th><td class=\"l\">{}</td></tr>\n\
         <tr><th class=\"l\">kernel</th><td class=\"l\">{}</td></tr>\n\
         <tr><th class=\"l\">gyro</th><td class=\"l\">{}</td></tr>\n</table>\n\
         <h2>Command</h2>\n<pre id=\"command\">{}</pre>\n</body></html>\n",
        escape(&m.cpu),
        m.cores,
        escape(&m.kernel),
        escape(&info.version),
        escape(&info.command_line)
    );
    h
}

fn figure(h: &mut String, id: &str, svg: Result<String, String>) {
    match svg {
        Ok(svg) => {
            let _ = writeln!(h, "<figure id=\"{id}\">{svg}</figure>");
        }
        Err(e) => {
            let _ = writeln!(
                h,
                "<p class=\"warn\" id=\"{id}\">chart not drawn: {}</p>",
                escape(&e)
            );
        }
    }
}

fn type_row(h: &mut String, name: &str, n: [u64; 4], l: &Latency) {
    let _ = writeln!(
        h,
        "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        escape(name),
        n[0],
        n[1],
        n[2],
        n[3],
        l.mean,
        l.p50,
        l.p90,
        l.p99,
        l.p999,
        l.max
    );
}

fn codes(h: &mut String, id: &str, title: &str, m: &BTreeMap<u32, u64>, r: &Report) {
    let total: u64 = m.values().sum();
    let _ = write!(
        h,
        "<table id=\"{id}\"><tr><th class=\"l\">{}</th><th>answers</th><th>share</th>",
        escape(title)
    );
    let per_type = id == "result-codes";
    if per_type {
        for t in &r.per_type {
            let _ = write!(h, "<th>{}</th>", escape(&t.name));
        }
    }
    h.push_str("</tr>\n");
    for (c, n) in m {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{c}</td><td>{n}</td><td>{:.2} %</td>",
            *n as f64 * 100.0 / total.max(1) as f64
        );
        if per_type {
            for t in &r.per_type {
                let _ = write!(
                    h,
                    "<td>{}</td>",
                    t.result_codes.get(c).copied().unwrap_or(0)
                );
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn quotes_arguments_only_when_needed() {
        assert_eq!(shell_quote("--rate=5"), "--rate=5");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn an_empty_report_still_makes_a_page() {
        let page = html(&Report::default(), &PageInfo::default());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.ends_with("</html>\n"));
    }
}
