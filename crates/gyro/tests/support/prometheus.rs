//! Reading the Prometheus text of `/metrics`: samples by name and labels,
//! and `promtool check metrics` when it is installed.

use std::io::Write;
use std::process::{Command, Stdio};

/// The samples of a metric family: (labels as written, value). A sample
/// whose value is not a number fails the test.
pub fn samples<'a>(text: &'a str, name: &str) -> Vec<(&'a str, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(r) => r.split_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            let value = value
                .parse()
                .unwrap_or_else(|e| panic!("{l:?}: not a number ({e})"));
            Some((labels, value))
        })
        .collect()
}

/// The sum of a metric's samples.
pub fn sum(text: &str, name: &str) -> f64 {
    samples(text, name).iter().map(|(_, v)| v).sum()
}

/// The value of the one sample with exactly these labels.
pub fn value(text: &str, name: &str, labels: &str) -> Option<f64> {
    samples(text, name)
        .into_iter()
        .find(|(l, _)| *l == labels)
        .map(|(_, v)| v)
}

/// `promtool check metrics` on the text; says so and checks nothing when
/// promtool is not installed.
pub fn promtool_check(text: &str) {
    let Ok(mut promtool) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("promtool not installed: the text format is not checked");
        return;
    };
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
