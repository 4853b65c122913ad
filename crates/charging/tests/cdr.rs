//! CDR files: JSON lines leave out what is absent or zero and still read
//! back whole; CSV lines follow `CSV_HEADER` with proper quoting.

mod common;

use common::*;
use gyro_charging::cdr::{CdrCsvReader, CdrCsvWriter, CsvRecordError, CSV_COLUMNS, CSV_HEADER};
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

#[test]
fn every_cdr_names_the_interface_that_charged_it_and_old_lines_read_as_gy() {
    let mut e = engine();
    let mut out = Output::default();
    let mut nchf = initial("nchf-1-00ff", "111", vec![want(10)]);
    nchf.interface = Interface::Nchf;
    e.handle_request(&nchf, at(0), &mut out);
    e.handle_request(&initial("gy;1", "111", vec![want(10)]), at(0), &mut out);
    out.clear();
    let mut u = update("nchf-1-00ff", 1, vec![report(10, 1000, true)]);
    u.interface = Interface::Nchf;
    e.handle_request(&u, at(10), &mut out);
    e.handle_request(
        &update("gy;1", 1, vec![report(10, 1000, true)]),
        at(10),
        &mut out,
    );
    // Nothing more arrives: supervision (100 s) closes both; the
    // session-end records carry the interface each session opened over.
    e.tick(at(1000), &mut out);
    let mut seen = Vec::new();
    for c in &out.cdrs {
        let want = if c.session_id.starts_with("nchf-") {
            Interface::Nchf
        } else {
            Interface::Gy
        };
        assert_eq!(c.interface, want, "{c:?}");
        seen.push((c.record_type, c.interface));
        let mut line = Vec::new();
        c.write_json_line(&mut line).unwrap();
        let text = String::from_utf8(line).unwrap();
        assert!(
            text.contains(&format!(",\"interface\":\"{}\",", want.as_str())),
            "{text}"
        );
        let mut csv = String::new();
        c.write_csv(&mut csv);
        assert!(csv.ends_with(&format!(",{}\n", want.as_str())), "{csv}");
    }
    assert!(seen.contains(&(RecordType::Usage, Interface::Nchf)));
    assert!(seen.contains(&(RecordType::SessionEnd, Interface::Nchf)));
    assert!(seen.contains(&(RecordType::Usage, Interface::Gy)));
    assert!(seen.contains(&(RecordType::SessionEnd, Interface::Gy)));
    assert!(CSV_HEADER.ends_with(",interface\n"));

    // A line written before CDRs named their interface reads as Gy.
    let c = out.cdrs.as_slice()[0].clone();
    let mut line = Vec::new();
    c.write_json_line(&mut line).unwrap();
    let text = String::from_utf8(line).unwrap();
    let old = text.replace(&format!(",\"interface\":\"{}\"", c.interface.as_str()), "");
    assert!(!old.contains("interface"));
    let back: Cdr = serde_json::from_str(&old).unwrap();
    assert_eq!(back.interface, Interface::Gy);
}

fn any_cdr() -> impl proptest::strategy::Strategy<Value = Cdr> {
    use proptest::prelude::*;
    let text = prop_oneof!["[a-z0-9.;:@-]{0,24}", any::<String>()];
    let ids = (
        any::<u64>(),
        text.clone(),
        prop_oneof![
            Just(RecordType::Usage),
            Just(RecordType::SessionEnd),
            Just(RecordType::Event)
        ],
        text.clone(),
        any::<u64>(),
        text.clone(),
        text,
        any::<Option<u32>>(),
        any::<Option<u32>>(),
        any::<u32>(),
    );
    let enums = (
        prop_oneof![
            Just(None),
            Just(Some(RequestedAction::DirectDebiting)),
            Just(Some(RequestedAction::RefundAccount)),
            Just(Some(RequestedAction::CheckBalance)),
            Just(Some(RequestedAction::PriceEnquiry)),
        ],
        prop_oneof![
            Just(None),
            Just(Some(UnitKind::Octets)),
            Just(Some(UnitKind::Seconds)),
            Just(Some(UnitKind::Events)),
        ],
        prop_oneof![
            Just(None),
            Just(Some(ClosingCause::Terminated)),
            Just(Some(ClosingCause::SupervisionExpired)),
            Just(Some(ClosingCause::Rejected)),
        ],
        any::<Option<u32>>(),
        any::<Option<u32>>(),
    );
    // Counters: zero often, so that leaving them out is exercised.
    let n = || prop_oneof![Just(0u64), any::<u64>()];
    let counters = (n(), n(), n(), n(), n(), n(), n());
    let money = (
        any::<i64>(),
        prop_oneof![Just(0i64), any::<i64>()],
        any::<i64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
    );
    let label = || prop_oneof![Just(String::new()), "[a-z0-9-]{1,12}", any::<String>()];
    let rating = (
        label(),
        label(),
        label(),
        label(),
        prop_oneof![
            Just(None),
            Just(Some(TariffChangeUsage::Before)),
            Just(Some(TariffChangeUsage::After)),
        ],
        prop_oneof![Just(Interface::Gy), Just(Interface::Nchf)],
    );
    (ids, enums, counters, money, rating).prop_map(|(i, e, c, m, r)| Cdr {
        sequence: i.0,
        node_id: i.1,
        record_type: i.2,
        session_id: i.3,
        account: AccountId(i.4),
        subscriber: i.5,
        service_context: i.6,
        rating_group: i.7,
        service_id: i.8,
        request_number: i.9,
        requested_action: e.0,
        unit: e.1,
        closing_cause: e.2,
        termination_cause: e.3,
        reporting_reason: e.4,
        time: c.0,
        input_octets: c.1,
        output_octets: c.2,
        total_octets: c.3,
        service_units: c.4,
        rated_units: c.5,
        bundle_units: c.6,
        amount: m.0,
        unbilled: m.1,
        balance_after: m.2,
        started: Timestamp(m.3),
        ended: Timestamp(m.4),
        result_code: m.5,
        plan: r.0,
        rate: r.1,
        destination: r.2,
        zone: r.3,
        tariff_change: r.4,
        interface: r.5,
    })
}

proptest::proptest! {
    /// The JSON line writer writes exactly what `serde_json` writes for the
    /// record (its documented field names, order and omissions), escaping
    /// included, and it reads back as the same record.
    #[test]
    fn json_lines_are_what_serde_json_writes(c in any_cdr()) {
        let mut line = Vec::new();
        c.write_json_line(&mut line).unwrap();
        let mut want = serde_json::to_vec(&c).unwrap();
        want.push(b'\n');
        proptest::prop_assert_eq!(String::from_utf8(line.clone()).unwrap(), String::from_utf8(want).unwrap());
        let back: Cdr = serde_json::from_slice(&line).unwrap();
        proptest::prop_assert_eq!(&back, &c);
    }

    /// Every CSV line has exactly the columns of the header (empty where a
    /// value is absent), quoted where it must be, and reads back as the
    /// same record.
    #[test]
    fn csv_lines_have_every_column_and_read_back_whole(c in any_cdr()) {
        let mut w = CdrCsvWriter::new(Vec::new());
        w.write(&c).unwrap();
        let line = w.into_inner().unwrap();
        let mut r = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(&line[..]);
        let mut rec = csv::ByteRecord::new();
        proptest::prop_assert!(r.read_byte_record(&mut rec).unwrap());
        proptest::prop_assert_eq!(rec.len(), CSV_COLUMNS);
        let back = CdrCsvReader::new().record(&rec).unwrap();
        proptest::prop_assert_eq!(&back, &c);
        proptest::prop_assert!(!r.read_byte_record(&mut rec).unwrap());
    }

    /// A record borrowing its text writes the same JSON and CSV lines as
    /// the record it borrows from, and copies back into any record
    /// (whatever that one held before) as the same record.
    #[test]
    fn a_view_writes_the_same_lines_and_copies_back(c in any_cdr(), old in any_cdr()) {
        let v = c.view();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        c.write_json_line(&mut a).unwrap();
        v.write_json_line(&mut b).unwrap();
        proptest::prop_assert_eq!(a, b);
        let mut w = CdrCsvWriter::new(Vec::new());
        w.write(&c).unwrap();
        w.write(&v).unwrap();
        let csv = w.into_inner().unwrap();
        let (first, second) = csv.split_at(csv.len() / 2);
        proptest::prop_assert_eq!(first, second);
        let mut back = old;
        back.set_from(&v);
        proptest::prop_assert_eq!(back, c);
    }
}

#[test]
fn csv_records_with_missing_columns_or_bad_values_are_errors_naming_the_problem() {
    assert_eq!(CSV_COLUMNS, CSV_HEADER.split(',').count());
    let r = CdrCsvReader::new();
    let mut s = String::new();
    usage_cdr().write_csv(&mut s);
    let read = |line: &str| {
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(line.as_bytes());
        let mut rec = csv::ByteRecord::new();
        assert!(rdr.read_byte_record(&mut rec).unwrap());
        r.record(&rec)
    };
    assert_eq!(read(&s).unwrap(), usage_cdr());
    // The old server wrote absent columns left out: 16 columns.
    let short: Vec<&str> = s.trim_end().split(',').take(16).collect();
    assert_eq!(
        read(&short.join(",")),
        Err(CsvRecordError::Columns {
            found: 16,
            expected: CSV_COLUMNS
        })
    );
    // A value of the wrong type names its column.
    let bad = s.replacen(",usage,", ",lunch,", 1);
    let e = read(&bad).unwrap_err().to_string();
    assert!(e.contains("unknown variant `lunch`"), "{e}");
    let header = read(CSV_HEADER).unwrap_err().to_string();
    assert!(header.contains("sequence"), "{header}");
}
