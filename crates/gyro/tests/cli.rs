//! `gyro decode` on the command line: hex input, raw files, invalid
//! messages (what is wrong, the Result-Code, the Failed-AVP, exit status 1
//! after every message is printed) and unreadable input (status 2);
//! `gyro load` refusing options that would measure nothing, or not what
//! was asked, before it sends anything (status 2, the problem named).

mod support;

use support::{free_port, gyro, scratch, testdata_hex};

/// A DWR with Origin-Host `a.b` and Origin-Realm `b`.
const DWR: &str = "0100002c80000118000000000000000100000002\
                   000001084000000b612e6200000001284000000962000000";

#[test]
fn hex_argument_prints_the_tree_and_exits_zero() {
    let (code, out, _) = gyro(&["decode", "--hex", DWR]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        "Device-Watchdog-Request (DWR) 280 app 0 (Diameter Common Messages) flags R \
         hbh 0x00000001 e2e 0x00000002 len 44\n  \
         Origin-Host code 264 flags M = \"a.b\"\n  \
         Origin-Realm code 296 flags M = \"b\"\n"
    );
    // Separators and a 0x prefix are fine.
    let spaced = format!(
        "0x{}",
        DWR.as_bytes()
            .chunks(8)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert_eq!(gyro(&["decode", "--hex", &spaced]).1, out);
}

#[test]
fn raw_and_hex_files_decode_like_hex_arguments() {
    let dir = scratch("cli-files");
    let raw = dir.join("ccr.bin");
    std::fs::write(&raw, testdata_hex("gy-ccr-update.hex")).unwrap();
    let (code, out, _) = gyro(&["decode", raw.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("Credit-Control-Request (CCR) 272"));
    assert!(out.contains("      CC-Total-Octets code 421 flags M = 128000\n"));
    let hexfile = support::testdata().join("gy-ccr-update.hex");
    assert_eq!(gyro(&["decode", hexfile.to_str().unwrap()]).1, out);
}

#[test]
fn missing_avp_gives_5005_with_failed_avp_and_status_1_after_all_messages() {
    // The real CCR-U without its Session-Id, followed by a valid DWR.
    let ccr = testdata_hex("gy-ccr-update.hex");
    let sid_len = 60; // 57 bytes + 3 of padding
    let mut bad = ccr[..20].to_vec();
    bad.extend_from_slice(&ccr[20 + sid_len..]);
    let n = bad.len() as u32;
    bad[1..4].copy_from_slice(&n.to_be_bytes()[1..]);
    let input = format!("{}{DWR}", hex::encode(&bad));
    let (code, out, _) = gyro(&["decode", "--hex", &input]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("Message at offset 0\nCredit-Control-Request (CCR) 272"),
        "{out}"
    );
    assert!(
        out.contains("error: required AVP missing: Session-Id (code 263)"),
        "{out}"
    );
    assert!(
        out.contains("\nResult-Code: 5005 (DIAMETER_MISSING_AVP)\n"),
        "{out}"
    );
    assert!(
        out.contains("\nFailed-AVP:\n  Session-Id code 263 flags M = "),
        "{out}"
    );
    // The DWR after it is still decoded.
    assert!(out.contains("\nDevice-Watchdog-Request (DWR) 280"), "{out}");

    let (code, json, _) = gyro(&["decode", "--json", "--hex", &input]);
    assert_eq!(code, 1);
    let v = support::json(&json);
    assert_eq!(v[0]["valid"], false);
    assert_eq!(v[0]["error"]["result_code"], 5005);
    assert_eq!(v[0]["error"]["result_name"], "DIAMETER_MISSING_AVP");
    assert_eq!(v[0]["error"]["failed_avps"][0]["name"], "Session-Id");
    assert_eq!(v[1]["valid"], true);
}

#[test]
fn broken_lengths_give_5014_and_5015() {
    // Origin-Host claims 200 bytes inside a 44-byte message.
    let bad_avp = DWR.replacen("4000000b", "400000c8", 1);
    let (code, out, _) = gyro(&["decode", "--hex", &bad_avp]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("\nResult-Code: 5014 (DIAMETER_INVALID_AVP_LENGTH)\n"),
        "{out}"
    );
    // The header claims more bytes than were given.
    let short = &DWR[..DWR.len() - 8];
    let (code, out, _) = gyro(&["decode", "--hex", short]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("\nResult-Code: 5015 (DIAMETER_INVALID_MESSAGE_LENGTH)\n"),
        "{out}"
    );
}

#[test]
fn unreadable_input_exits_2() {
    assert_eq!(gyro(&["decode", "--hex", "abc"]).0, 2);
    assert_eq!(gyro(&["decode", "/nonexistent/capture.pcap"]).0, 2);
}

#[test]
fn strict_mode_rejects_what_lenient_mode_accepts() {
    // The third-party CCR sends Origin-Host with the M bit clear.
    let path = support::testdata().join("gy-ccr-initial.hex");
    let p = path.to_str().unwrap();
    assert_eq!(gyro(&["decode", p]).0, 0);
    let (code, out, _) = gyro(&["decode", "--strict", p]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("\nResult-Code: 3009 (DIAMETER_INVALID_AVP_BITS)\n"),
        "{out}"
    );
    assert!(
        out.contains("\nFailed-AVP:\n  Origin-Host code 264 flags - = \"d0-nlepg1.mtn.co.za\"\n"),
        "{out}"
    );
}

/// `gyro load` with `args` against a port nobody listens on: refused
/// before any connection, with exit status 2 and a message containing
/// each of `says`.
fn load_refuses(args: &[&str], says: &[&str]) {
    let target = format!("127.0.0.1:{}", free_port());
    let mut all = vec!["load", "--quiet", "--target", target.as_str()];
    all.extend_from_slice(args);
    let (code, out, err) = gyro(&all);
    assert_eq!(code, 2, "{args:?}: {out}{err}");
    assert!(out.is_empty(), "{args:?}: no report expected: {out}");
    for s in says {
        assert!(err.contains(s), "{args:?}: {s:?} not in {err}");
    }
    assert!(
        !err.contains("connect"),
        "{args:?}: refused too late: {err}"
    );
}

#[test]
fn load_refuses_options_that_would_measure_nothing_before_sending() {
    load_refuses(
        &["--duration", "1s", "--warmup", "5s"],
        &["--warmup", "not shorter than --duration", "no latency"],
    );
    load_refuses(&["--timeout", "0s"], &["--timeout must be above 0"]);
    load_refuses(&["--watchdog", "1s"], &["RFC 3539", "6 s"]);
    load_refuses(
        &["--count", "3"],
        &["--count 3 is less than one data session", "5 requests"],
    );
    load_refuses(&["--count", "0"], &["--count"]);
    load_refuses(
        &["--protocol", "nchf", "--scenario", "sms"],
        &["nchf does not run the sms scenario", "data"],
    );
    let dir = scratch("cli-load-report");
    let page = dir.join("no-such-dir").join("rep.html");
    load_refuses(
        &["--report", page.to_str().unwrap()],
        &["--report file", "rep.html"],
    );
}

#[test]
fn load_against_a_closed_port_reports_no_per_request_figures() {
    let target = format!("127.0.0.1:{}", free_port());
    let (code, out, err) = gyro(&[
        "load",
        "--quiet",
        "--target",
        &target,
        "--duration",
        "1s",
        "--connections",
        "1",
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("no request was sent"), "{out}");
    assert!(!out.contains("LOAD-BOUND"), "{out}");
    assert!(!out.contains("per request"), "{out}");
    assert!(err.contains("no request was sent"), "{err}");
}
