//! CDR files: JSON lines leave out what is absent or zero and still read
//! back whole; CSV lines follow `CSV_HEADER` with proper quoting.

mod common;

use common::*;
use gyro_charging::cdr::{CdrCsvWriter, CSV_HEADER};
use gyro_charging::*;

/// A usage CDR as a CCR-Update with one rating group writes it.
fn usage_cdr() -> Cdr {
    let mut e = engine();
    let mut out = Output::default();
    e.handle_request(
        &initial("pgw.example;1767312000;42", "111", vec![want(10)]),
        at(0),
        &mut out,
    );
    out.clear();
    e.handle_request(
        &update(
            "pgw.example;1767312000;42",
            1,
            vec![report(10, 5_000_000, true)],
        ),
        at(60),
        &mut out,
    );
    out.cdrs.as_slice()[0].clone()
}

#[test]
fn json_lines_leave_out_absent_fields_and_read_back_whole() {
    let c = usage_cdr();
    let mut line = Vec::new();
    c.write_json_line(&mut line).unwrap();
    println!("usage CDR JSON line: {} bytes", line.len());
    let text = std::str::from_utf8(&line).unwrap();
    for absent in [
        "closing_cause",
        "requested_action",
        "service_id",
        "unbilled",
        "time",
    ] {
        assert!(!text.contains(absent), "{absent} in {text}");
    }
    let back: Cdr = serde_json::from_slice(&line).unwrap();
    assert_eq!(back, c);
}

#[test]
fn csv_lines_follow_the_header_and_quote_what_needs_it() {
    let mut c = usage_cdr();
    c.subscriber = "sip:\"a\",b@example".into();
    c.service_context = "line\nbreak".into();
    let mut w = CdrCsvWriter::new(Vec::new());
    w.write(&c).unwrap();
    let bytes = w.into_inner().unwrap();
    let mut s = String::new();
    c.write_csv(&mut s);
    assert_eq!(s.as_bytes(), bytes.as_slice());
    let file = format!("{CSV_HEADER}{s}");
    let mut r = csv::ReaderBuilder::new().from_reader(file.as_bytes());
    let header: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
    assert_eq!(header.join(",") + "\n", CSV_HEADER);
    let row = r.records().next().unwrap().unwrap();
    let field = |name: &str| &row[header.iter().position(|h| h == name).unwrap()];
    assert_eq!(field("subscriber"), c.subscriber);
    assert_eq!(field("service_context"), c.service_context);
    assert_eq!(field("record_type"), "usage");
    assert_eq!(field("unit"), "octets");
    assert_eq!(field("rating_group"), "10");
    assert_eq!(field("closing_cause"), "");
    assert_eq!(field("amount"), c.amount.to_string());
    assert_eq!(field("started"), c.started.as_millis().to_string());
}
