//! Interop with Wireshark: messages built by gyro's encoder are written to
//! a pcap (several messages in one TCP segment, one message split across
//! two) and dissected by `tshark`, which must name every message and AVP
//! with the expected values and report nothing malformed; and `gyro
//! decode` must read captures written by Wireshark's `text2pcap`.
//!
//! These tests need `tshark` and `text2pcap` (Debian packages tshark and
//! wireshark-common) and fail when they are missing.

mod support;

use std::net::Ipv4Addr;

use bytes::BytesMut;
use gyro_diameter::codes::{avp, cmd, AvpId, VENDOR_3GPP};
use gyro_diameter::header::flags;
use gyro_diameter::types::{Address, DiameterTime};
use gyro_diameter::{Encoder, Message};
use serde_json::Value;
use support::{gyro, require, run, scratch, tcp_pcap, testdata_hex, text2pcap};

const SID: &str = "pgw.example.net;1700000000;42";

// AVPs without a constant in the codec.
const USER_EQUIPMENT_INFO: AvpId = avp::USER_EQUIPMENT_INFO;
const TGPP_IMSI: AvpId = AvpId::m(1, VENDOR_3GPP);
const PDP_ADDRESS: AvpId = AvpId::plain(1227, VENDOR_3GPP);
const SGSN_ADDRESS: AvpId = AvpId::plain(1228, VENDOR_3GPP);

fn common(e: &mut Encoder<'_>, host: &str, realm: &str) {
    e.str(avp::ORIGIN_HOST, host);
    e.str(avp::ORIGIN_REALM, realm);
}

fn finish(e: Encoder<'_>) {
    e.finish().expect("message fits");
}

fn cer(buf: &mut BytesMut) {
    let mut e = Encoder::request(buf, cmd::CAPABILITIES_EXCHANGE, 0, false, 1, 1001);
    common(&mut e, "pgw.example.net", "example.net");
    e.address(
        avp::HOST_IP_ADDRESS,
        &Address::Ipv4(Ipv4Addr::new(10, 0, 0, 1)),
    );
    e.u32(avp::VENDOR_ID, 10415);
    e.str(avp::PRODUCT_NAME, "interop-client");
    e.u32(avp::ORIGIN_STATE_ID, 7);
    e.u32(avp::SUPPORTED_VENDOR_ID, 10415);
    e.u32(avp::AUTH_APPLICATION_ID, 4);
    let g = e.begin_group(avp::VENDOR_SPECIFIC_APPLICATION_ID);
    e.u32(avp::VENDOR_ID, 10415);
    e.u32(avp::AUTH_APPLICATION_ID, 4);
    e.end_group(g);
    e.u32(avp::FIRMWARE_REVISION, 3);
    finish(e);
}

fn answer_base(buf: &mut BytesMut, req: &[u8], rc: u32) -> Vec<u8> {
    let m = Message::parse(req).unwrap();
    let mut e = Encoder::answer(buf, &m, false);
    e.u32(avp::RESULT_CODE, rc);
    common(&mut e, "ocs.example.org", "example.org");
    finish(e);
    buf.split().to_vec()
}

/// Moves the message just built into `out`.
fn take(out: &mut Vec<(bool, Vec<u8>)>, b: &mut BytesMut, to_server: bool) -> Vec<u8> {
    let m = b.split().to_vec();
    out.push((to_server, m.clone()));
    m
}

/// Builds every message of the interop capture, in order, with its
/// direction (true: client to server).
fn messages() -> Vec<(bool, Vec<u8>)> {
    let mut b = BytesMut::new();
    let mut out = Vec::new();

    cer(&mut b);
    let req = take(&mut out, &mut b, true);
    {
        let m = Message::parse(&req).unwrap();
        let mut e = Encoder::answer(&mut b, &m, false);
        e.u32(avp::RESULT_CODE, 2001);
        common(&mut e, "ocs.example.org", "example.org");
        e.address(
            avp::HOST_IP_ADDRESS,
            &Address::Ipv4(Ipv4Addr::new(10, 0, 0, 2)),
        );
        e.u32(avp::VENDOR_ID, 99999);
        e.str(avp::PRODUCT_NAME, "gyro");
        e.u32(avp::AUTH_APPLICATION_ID, 4);
        finish(e);
    }
    take(&mut out, &mut b, false);

    let mut e = Encoder::request(&mut b, cmd::DEVICE_WATCHDOG, 0, false, 2, 1002);
    common(&mut e, "pgw.example.net", "example.net");
    finish(e);
    let req = take(&mut out, &mut b, true);
    let ans = answer_base(&mut b, &req, 2001);
    out.push((false, ans));

    // CCR-Initial, CCR-Update, CCR-Termination, CCR-Event.
    let ccr = |b: &mut BytesMut, kind: i32, n: u32, hbh: u32| {
        let mut e = Encoder::request(b, cmd::CREDIT_CONTROL, 4, true, hbh, 2000 + hbh);
        e.str(avp::SESSION_ID, SID);
        common(&mut e, "pgw.example.net", "example.net");
        e.str(avp::DESTINATION_REALM, "example.org");
        e.u32(avp::AUTH_APPLICATION_ID, 4);
        e.str(avp::SERVICE_CONTEXT_ID, "32251@3gpp.org");
        e.i32(avp::CC_REQUEST_TYPE, kind);
        e.u32(avp::CC_REQUEST_NUMBER, n);
        e.time(
            avp::EVENT_TIMESTAMP,
            DiameterTime::from_unix(1_700_000_000).unwrap(),
        );
        for (t, d) in [(0, "491700000001"), (1, "262011234567890")] {
            let g = e.begin_group(avp::SUBSCRIPTION_ID);
            e.i32(avp::SUBSCRIPTION_ID_TYPE, t);
            e.str(avp::SUBSCRIPTION_ID_DATA, d);
            e.end_group(g);
        }
        match kind {
            1 => {
                e.i32(avp::MULTIPLE_SERVICES_INDICATOR, 1);
                for rg in [10u32, 20] {
                    let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
                    let rsu = e.begin_group(avp::REQUESTED_SERVICE_UNIT);
                    e.u64(avp::CC_TOTAL_OCTETS, 1_000_000);
                    e.end_group(rsu);
                    e.u32(avp::RATING_GROUP, rg);
                    e.end_group(g);
                }
                let g = e.begin_group(USER_EQUIPMENT_INFO);
                e.i32(avp::USER_EQUIPMENT_INFO_TYPE, 0);
                e.octets(avp::USER_EQUIPMENT_INFO_VALUE, b"3569870412345601");
                e.end_group(g);
                let si = e.begin_group(avp::SERVICE_INFORMATION);
                let ps = e.begin_group(avp::PS_INFORMATION);
                e.octets(avp::TGPP_CHARGING_ID, &[0x12, 0x34, 0x56, 0x78]);
                e.i32(avp::TGPP_PDP_TYPE, 0);
                e.address(PDP_ADDRESS, &Address::Ipv4(Ipv4Addr::new(10, 45, 0, 7)));
                e.address(SGSN_ADDRESS, &Address::Ipv4(Ipv4Addr::new(192, 0, 2, 10)));
                e.str(avp::TGPP_IMSI_MCC_MNC, "26201");
                e.str(avp::TGPP_SGSN_MCC_MNC, "26201");
                e.octets(avp::TGPP_RAT_TYPE, &[6]);
                e.octets(avp::TGPP_MS_TIMEZONE, &[0x40, 0x00]);
                e.str(avp::CALLED_STATION_ID, "internet");
                e.end_group(ps);
                e.end_group(si);
            }
            2 | 3 => {
                for (rg, used) in [(10u32, 400_000u64), (20, 250_000)] {
                    let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
                    if kind == 2 {
                        let rsu = e.begin_group(avp::REQUESTED_SERVICE_UNIT);
                        e.end_group(rsu);
                    }
                    let usu = e.begin_group(avp::USED_SERVICE_UNIT);
                    e.u32(avp::CC_TIME, 60);
                    e.u64(avp::CC_TOTAL_OCTETS, used);
                    e.u64(avp::CC_INPUT_OCTETS, used / 4);
                    e.u64(avp::CC_OUTPUT_OCTETS, used - used / 4);
                    e.end_group(usu);
                    e.u32(avp::RATING_GROUP, rg);
                    e.i32(avp::REPORTING_REASON, if kind == 2 { 3 } else { 2 });
                    e.end_group(g);
                }
                if kind == 3 {
                    e.i32(avp::TERMINATION_CAUSE, 1);
                }
            }
            _ => {
                e.i32(avp::REQUESTED_ACTION, 0);
                e.u32(avp::SERVICE_IDENTIFIER, 400);
                let rsu = e.begin_group(avp::REQUESTED_SERVICE_UNIT);
                e.u64(avp::CC_SERVICE_SPECIFIC_UNITS, 1);
                e.end_group(rsu);
                e.octets(TGPP_IMSI, b"262011234567890");
            }
        }
        finish(e);
    };
    let cca = |b: &mut BytesMut, req: &[u8]| {
        let m = Message::parse(req).unwrap();
        let mut e = Encoder::answer(b, &m, false);
        e.u32(avp::RESULT_CODE, 2001);
        common(&mut e, "ocs.example.org", "example.org");
        e.u32(avp::AUTH_APPLICATION_ID, 4);
        let t = m.find(avp::CC_REQUEST_TYPE).unwrap();
        e.raw_avp(&t);
        let n = m.find(avp::CC_REQUEST_NUMBER).unwrap();
        e.raw_avp(&n);
        if t.i32().unwrap() != 3 {
            let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
            let gsu = e.begin_group(avp::GRANTED_SERVICE_UNIT);
            e.u64(avp::CC_TOTAL_OCTETS, 1_000_000);
            e.end_group(gsu);
            e.u32(avp::RATING_GROUP, 10);
            e.u32(avp::VALIDITY_TIME, 3600);
            e.u32(avp::RESULT_CODE, 2001);
            e.u32(avp::VOLUME_QUOTA_THRESHOLD, 100_000);
            e.u32(avp::QUOTA_HOLDING_TIME, 300);
            let fui = e.begin_group(avp::FINAL_UNIT_INDICATION);
            e.i32(avp::FINAL_UNIT_ACTION, 0);
            e.end_group(fui);
            e.end_group(g);
        }
        finish(e);
    };

    ccr(&mut b, 1, 0, 11);
    let i = take(&mut out, &mut b, true);
    ccr(&mut b, 2, 1, 12);
    let u = take(&mut out, &mut b, true);
    cca(&mut b, &i);
    take(&mut out, &mut b, false);
    cca(&mut b, &u);
    take(&mut out, &mut b, false);
    ccr(&mut b, 3, 2, 13);
    let t = take(&mut out, &mut b, true);
    cca(&mut b, &t);
    take(&mut out, &mut b, false);
    ccr(&mut b, 4, 0, 14);
    let ev = take(&mut out, &mut b, true);
    {
        // An error answer: Result-Code 5005 with the missing AVP in Failed-AVP.
        let m = Message::parse(&ev).unwrap();
        let mut e = Encoder::answer(&mut b, &m, false);
        e.u32(avp::RESULT_CODE, 5005);
        common(&mut e, "ocs.example.org", "example.org");
        e.u32(avp::AUTH_APPLICATION_ID, 4);
        e.raw_avp(&m.find(avp::CC_REQUEST_TYPE).unwrap());
        e.raw_avp(&m.find(avp::CC_REQUEST_NUMBER).unwrap());
        e.str(avp::ERROR_MESSAGE, "missing Service-Identifier");
        let g = e.begin_group(avp::FAILED_AVP);
        e.u32(avp::RATING_GROUP, 0);
        e.end_group(g);
        finish(e);
    }
    take(&mut out, &mut b, false);

    // Server-initiated RAR and ASR, answered by the client.
    let mut e = Encoder::request(&mut b, cmd::RE_AUTH, 4, true, 21, 3001);
    e.str(avp::SESSION_ID, SID);
    common(&mut e, "ocs.example.org", "example.org");
    e.str(avp::DESTINATION_REALM, "example.net");
    e.str(avp::DESTINATION_HOST, "pgw.example.net");
    e.u32(avp::AUTH_APPLICATION_ID, 4);
    e.i32(avp::RE_AUTH_REQUEST_TYPE, 0);
    e.u32(avp::RATING_GROUP, 10);
    finish(e);
    let rar = take(&mut out, &mut b, false);
    out.push((true, answer_base(&mut b, &rar, 2002)));

    let mut e = Encoder::request(&mut b, cmd::ABORT_SESSION, 4, true, 22, 3002);
    e.str(avp::SESSION_ID, SID);
    common(&mut e, "ocs.example.org", "example.org");
    e.str(avp::DESTINATION_REALM, "example.net");
    e.str(avp::DESTINATION_HOST, "pgw.example.net");
    e.u32(avp::AUTH_APPLICATION_ID, 4);
    finish(e);
    let asr = take(&mut out, &mut b, false);
    out.push((true, answer_base(&mut b, &asr, 2001)));

    let mut e = Encoder::request(&mut b, cmd::DISCONNECT_PEER, 0, false, 3, 1003);
    common(&mut e, "pgw.example.net", "example.net");
    e.i32(avp::DISCONNECT_CAUSE, 0);
    finish(e);
    let dpr = take(&mut out, &mut b, true);
    out.push((false, answer_base(&mut b, &dpr, 2001)));
    out
}

/// Writes the messages into a pcap: consecutive messages in the same
/// direction share a segment (the CCR-I and CCR-U, the two CCAs), and the
/// CCR-T is split across two segments.
fn write_pcap(msgs: &[(bool, Vec<u8>)]) -> (Vec<u8>, usize) {
    let mut segments: Vec<(bool, Vec<u8>)> = Vec::new();
    for (i, (to_server, m)) in msgs.iter().enumerate() {
        let is_ccr_t = Message::parse(m).is_ok_and(|p| {
            p.header().flags & flags::REQUEST != 0
                && p.find(avp::CC_REQUEST_TYPE).and_then(|a| a.i32().ok()) == Some(3)
        });
        let pack = i > 0
            && matches!(segments.last(), Some((d, _)) if d == to_server)
            && !is_ccr_t
            && Message::parse(m).is_ok_and(|p| p.command_code() == cmd::CREDIT_CONTROL);
        if is_ccr_t {
            let cut = m.len() / 2 + 1;
            segments.push((*to_server, m[..cut].to_vec()));
            segments.push((*to_server, m[cut..].to_vec()));
        } else if pack {
            segments.last_mut().unwrap().1.extend_from_slice(m);
        } else {
            segments.push((*to_server, m.clone()));
        }
    }
    (tcp_pcap(&segments), segments.len())
}

fn capture() -> (std::path::PathBuf, Vec<(bool, Vec<u8>)>, usize) {
    let msgs = messages();
    let (pcap, frames) = write_pcap(&msgs);
    let dir = scratch("interop");
    let path = dir.join("gyro.pcap");
    std::fs::write(&path, pcap).unwrap();
    (path, msgs, frames)
}

/// AVPs in a message, counting the children of Grouped AVPs.
fn count_avps(m: &[u8]) -> usize {
    fn run(iter: gyro_diameter::AvpIter<'_>) -> usize {
        let mut n = 0;
        for a in iter {
            let a = a.expect("well-formed AVP");
            n += 1;
            let grouped = [
                avp::VENDOR_SPECIFIC_APPLICATION_ID,
                avp::SUBSCRIPTION_ID,
                avp::MULTIPLE_SERVICES_CREDIT_CONTROL,
                avp::REQUESTED_SERVICE_UNIT,
                avp::USED_SERVICE_UNIT,
                avp::GRANTED_SERVICE_UNIT,
                avp::FINAL_UNIT_INDICATION,
                avp::USER_EQUIPMENT_INFO,
                avp::SERVICE_INFORMATION,
                avp::PS_INFORMATION,
                avp::FAILED_AVP,
            ];
            if grouped
                .iter()
                .any(|g| g.code == a.code() && g.vendor == a.vendor_id())
            {
                n += run(a.grouped());
            }
        }
        n
    }
    run(Message::parse(m).unwrap().avps())
}

#[test]
fn tshark_dissects_every_gyro_message_and_avp() {
    require("tshark");
    let (path, msgs, frames) = capture();
    let p = path.to_str().unwrap();
    let v = run("tshark", &["-r", p, "-V"]);
    for bad in ["Malformed", "Expert Info (Error", "Unknown AVP", "[Unknown"] {
        assert!(!v.contains(bad), "tshark reports {bad:?}:\n{v}");
    }
    // Every AVP was dissected.
    let ours: usize = msgs.iter().map(|(_, m)| count_avps(m)).sum();
    let theirs = v
        .lines()
        .filter(|l| l.trim_start().starts_with("AVP: "))
        .count();
    assert_eq!(theirs, ours, "AVP count differs:\n{v}");
    // Names and values.
    for want in [
        "Command Code: Capabilities-Exchange (257)",
        "Command Code: Device-Watchdog (280)",
        "Command Code: Disconnect-Peer (282)",
        "Command Code: Credit-Control (272)",
        "Command Code: Re-Auth (258)",
        "Command Code: Abort-Session (274)",
        "ApplicationId: Diameter Credit Control Application (4)",
        "Session-Id: pgw.example.net;1700000000;42",
        "Origin-Host: pgw.example.net",
        "Origin-Realm: example.org",
        "Host-IP-Address Address: 10.0.0.1",
        "Product-Name: interop-client",
        "Firmware-Revision: 3",
        "Service-Context-Id: 32251@3gpp.org",
        "CC-Request-Type: INITIAL_REQUEST (1)",
        "CC-Request-Type: UPDATE_REQUEST (2)",
        "CC-Request-Type: TERMINATION_REQUEST (3)",
        "CC-Request-Type: EVENT_REQUEST (4)",
        "CC-Request-Number: 2",
        "Event-Timestamp: Nov 14, 2023 22:13:20.000000000 UTC",
        "Subscription-Id-Type: END_USER_E164 (0)",
        "Subscription-Id-Type: END_USER_IMSI (1)",
        "Subscription-Id-Data: 491700000001",
        "Subscription-Id-Data: 262011234567890",
        "Multiple-Services-Indicator: MULTIPLE_SERVICES_SUPPORTED (1)",
        "Rating-Group: 10",
        "Rating-Group: 20",
        "CC-Total-Octets: 1000000",
        "CC-Total-Octets: 250000",
        "CC-Input-Octets: 62500",
        "CC-Output-Octets: 187500",
        "CC-Time: 60",
        "3GPP-Reporting-Reason: QUOTA_EXHAUSTED (3)",
        "3GPP-Reporting-Reason: FINAL (2)",
        "Termination-Cause: DIAMETER_LOGOUT (1)",
        "Requested-Action: DIRECT_DEBITING (0)",
        "Service-Identifier: 400",
        "CC-Service-Specific-Units: 1",
        "3GPP-IMSI: 262011234567890",
        "User-Equipment-Info-Type: IMEISV (0)",
        "User-Equipment-Info-Value: 33353639383730343132333435363031",
        "3GPP-Charging-Id: 12345678",
        "3GPP-PDP-Type: IPv4 (0)",
        "PDP-Address: 00010a2d0007",
        "SGSN-Address: 0001c000020a",
        "3GPP-IMSI-MCC-MNC: 26201",
        "3GPP-RAT-Type: 06",
        "Called-Station-Id: internet",
        "Result-Code: DIAMETER_SUCCESS (2001)",
        "Result-Code: DIAMETER_LIMITED_SUCCESS (2002)",
        "Result-Code: DIAMETER_MISSING_AVP (5005)",
        "Error-Message: missing Service-Identifier",
        "Failed-AVP: 000001b04000000c00000000",
        "Validity-Time: 3600",
        "Volume-Quota-Threshold: 100000",
        "Quota-Holding-Time: 300",
        "Final-Unit-Action: TERMINATE (0)",
        "Re-Auth-Request-Type: AUTHORIZE_ONLY (0)",
        "Disconnect-Cause: REBOOTING (0)",
    ] {
        assert!(v.contains(want), "tshark output lacks {want:?}:\n{v}");
    }
    // Every message, in order, once, with its command code and R bit: the
    // packed segments were split and the split one joined.
    let fields = run(
        "tshark",
        &[
            "-r",
            p,
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-E",
            "aggregator=,",
            "-e",
            "diameter.cmd.code",
            "-e",
            "diameter.flags.request",
        ],
    );
    let mut got = Vec::new();
    for line in fields.lines().filter(|l| !l.trim().is_empty()) {
        let (codes, reqs) = line.split_once('\t').expect("two fields");
        for (c, r) in codes.split(',').zip(reqs.split(',')) {
            got.push((c.parse::<u32>().unwrap(), r == "1" || r == "True"));
        }
    }
    let want: Vec<_> = msgs
        .iter()
        .map(|(_, m)| {
            let p = Message::parse(m).unwrap();
            (p.command_code(), p.is_request())
        })
        .collect();
    assert_eq!(got, want, "{fields}");
    assert!(frames < msgs.len() + 1, "some messages share a segment");
}

#[test]
fn gyro_decode_reads_the_same_capture() {
    let (path, msgs, _) = capture();
    let (code, out, err) = gyro(&["decode", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v: Value = support::json(&out);
    let items = v.as_array().unwrap();
    assert_eq!(items.len(), msgs.len(), "{out}");
    for (item, (to_server, m)) in items.iter().zip(&msgs) {
        assert_eq!(item["valid"], true, "{item:#}");
        assert_eq!(item["length"], m.len());
        let dst = if *to_server {
            "10.0.0.2:3868"
        } else {
            "10.0.0.1:40000"
        };
        assert_eq!(item["dst"], dst);
        assert!(item["header"]["short"].is_string(), "{item:#}");
    }
    let shorts: Vec<_> = items
        .iter()
        .map(|i| i["header"]["short"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        shorts,
        [
            "CER", "CEA", "DWR", "DWA", "CCR", "CCR", "CCA", "CCA", "CCR", "CCA", "CCR", "CCA",
            "RAR", "RAA", "ASR", "ASA", "DPR", "DPA"
        ]
    );
    // The CCR-T was split across two segments: reported at the second.
    let t = &items[8];
    assert_eq!(
        support::find(&t["avps"], "CC-Request-Type").unwrap()["enum"],
        "TERMINATION_REQUEST"
    );
    assert_eq!(t["frame"], items[7]["frame"].as_u64().unwrap() + 2);
    let (code, text, _) = gyro(&["decode", path.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(text.contains(
        " 10.0.0.1:40000 -> 10.0.0.2:3868\nCapabilities-Exchange-Request (CER) 257 app 0"
    ));
}

/// Every testdata message, put in a capture by Wireshark's text2pcap (pcap
/// and pcapng, one packet per message), is read back by `gyro decode`
/// byte for byte; tshark finds nothing wrong with them either.
#[test]
fn gyro_decode_reads_captures_written_by_text2pcap() {
    require("text2pcap");
    require("tshark");
    let dir = scratch("text2pcap");
    let names = [
        "gy-ccr-initial.hex",
        "gy-ccr-update.hex",
        "cer-mensonen.hex",
        "cer-go-diameter.hex",
        "cea-mensonen.hex",
    ];
    let packets: Vec<Vec<u8>> = names.iter().map(|n| testdata_hex(n)).collect();
    for ng in [false, true] {
        let cap = text2pcap(&dir, "testdata", &packets, ng);
        let c = cap.to_str().unwrap();
        if !ng {
            let v = run("tshark", &["-r", c, "-V"]);
            assert_eq!(v.matches("Diameter Protocol").count(), names.len(), "{v}");
            for bad in ["Malformed", "Expert Info (Error", "Unknown AVP"] {
                assert!(!v.contains(bad), "tshark reports {bad:?}:\n{v}");
            }
        }
        let (code, out, err) = gyro(&["decode", "--json", c]);
        assert_eq!(code, 0, "{out}\n{err}");
        let j = support::json(&out);
        assert_eq!(j.as_array().unwrap().len(), names.len(), "{out}");
        for (n, (m, bytes)) in j.as_array().unwrap().iter().zip(&packets).enumerate() {
            assert_eq!(m["valid"], true, "{}: {m:#}", names[n]);
            assert_eq!(m["length"], bytes.len());
            assert_eq!(m["frame"], n + 1);
            assert_eq!(m["dst"], "10.2.2.2:3868");
            let hbh = u32::from_be_bytes(bytes[12..16].try_into().unwrap());
            assert_eq!(m["header"]["hop_by_hop"], hbh);
        }
        let (code, text, _) = gyro(&["decode", c]);
        assert_eq!(code, 0);
        assert!(text.starts_with("Frame 1 "), "{text}");
        assert!(text.contains("\nCapabilities-Exchange-Answer (CEA) 257 app 0"));
    }
}
