//! Bad configuration on the command line: `gyro serve` refuses it before
//! anything is written, naming the file, the key or entries and the
//! problem; `gyro rate` prices usage across every price change it spans.

mod support;

use std::path::Path;

use support::{gyro, scratch};

/// The repository's `config/` folder.
fn config_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_charging_file_defining_an_account_twice_is_refused_before_anything_is_written() {
    let dir = scratch("charging-clash");
    let example = std::fs::read_to_string(config_dir().join("example-charging.toml")).unwrap();
    assert!(example.contains("first_id = 1000"));
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, example.replace("first_id = 1000", "first_id = 1")).unwrap();
    let data = dir.join("dd");
    let (code, _, err) = gyro(&[
        "serve",
        "--listen",
        "127.0.0.1:39510",
        "--workers",
        "2",
        "--data-dir",
        data.to_str().unwrap(),
        "--charging",
        bad.to_str().unwrap(),
    ]);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("bad.toml")
            && err.contains("account 1 is defined twice")
            && err.contains("[[account]] #1 (id = 1)")
            && err.contains("[[account_range]] #1 (first_id = 1, count = 1000)"),
        "{err}"
    );
    let written = files_under(&data);
    assert!(written.is_empty(), "written: {written:?}");
}

#[test]
fn float_seconds_that_are_not_a_duration_are_refused_naming_file_and_key() {
    let dir = scratch("float-seconds");
    for (key, value) in [
        ("watchdog_secs", "nan"),
        ("watchdog_secs", "inf"),
        ("watchdog_secs", "1e300"),
        ("handshake_timeout_secs", "nan"),
        ("watchdog_jitter_secs", "nan"),
        ("answer_timeout_secs", "-inf"),
    ] {
        let file = dir.join("gyro.toml");
        std::fs::write(&file, format!("[peers]\n{key} = {value}\n")).unwrap();
        let data = dir.join("dd");
        let (code, _, err) = gyro(&[
            "serve",
            "--listen",
            "127.0.0.1:39511",
            "--data-dir",
            data.to_str().unwrap(),
            "--config",
            file.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{key} = {value}: {err}");
        assert!(
            err.contains("gyro.toml") && err.contains(&format!("peers.{key}")),
            "{key} = {value}: {err}"
        );
        assert!(
            !data.exists(),
            "{key} = {value}: the data directory was created"
        );
    }
}

#[test]
fn rate_prices_a_usage_in_every_window_it_spans() {
    let plans = config_dir().join("example-plans.toml");
    let (code, out, err) = gyro(&[
        "rate",
        "--charging",
        plans.to_str().unwrap(),
        "--subscriber",
        "46701000001",
        "--service",
        "voice",
        "--units",
        "30h",
        "--called",
        "46701234567",
        "--at",
        "2026-01-15T17:00",
    ]);
    assert_eq!(code, 0, "{err}");
    let rates: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("  from "))
        .filter_map(|l| l.split(" rate ").nth(1))
        .filter_map(|r| r.split(':').next())
        .collect();
    assert_eq!(
        rates,
        [
            "voice-mobile",
            "voice-evening",
            "voice-mobile",
            "voice-evening"
        ],
        "{out}"
    );
    assert!(out.contains("total 1044.00 SEK"), "{out}");
}
