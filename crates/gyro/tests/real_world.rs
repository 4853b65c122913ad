//! `gyro decode` on messages written by other Diameter implementations
//! (see testdata/README.md for where each one comes from): every AVP must
//! decode to the right name and value, and validation must accept them.

mod support;

use serde_json::{json, Value};
use support::{find, find_all, gyro, testdata};

/// Decodes a testdata file with `--json`; asserts one valid message.
fn decode(name: &str) -> Value {
    let path = testdata().join(name);
    let (code, out, err) = gyro(&["decode", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{name}: exit {code}\n{out}\n{err}");
    let v = support::json(&out);
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{name}: {out}");
    let m = v[0].clone();
    assert_eq!(m["valid"], true, "{name}: {m:#}");
    assert!(m.get("error").is_none());
    m
}

fn value<'a>(m: &'a Value, avp: &str) -> &'a Value {
    let a = find(&m["avps"], avp).unwrap_or_else(|| panic!("no {avp} in {m:#}"));
    &a["value"]
}

fn values(m: &Value, avp: &str) -> Vec<Value> {
    let mut all = Vec::new();
    find_all(&m["avps"], avp, &mut all);
    all.iter().map(|a| a["value"].clone()).collect()
}

fn no_unknown_avps(avps: &Value) {
    for a in avps.as_array().unwrap() {
        assert_ne!(a["name"], "Unknown-AVP", "{a:#}");
        assert!(a.get("error").is_none(), "{a:#}");
        if a.get("avps").is_some() {
            no_unknown_avps(&a["avps"]);
        }
    }
}

#[test]
fn gy_ccr_initial_from_a_third_party_client_decodes_and_validates() {
    let m = decode("gy-ccr-initial.hex");
    let h = &m["header"];
    assert_eq!(h["command"], "Credit-Control-Request");
    assert_eq!(h["short"], "CCR");
    assert_eq!(h["application_id"], 4);
    assert_eq!(h["flags"], json!(["R", "P"]));
    assert_eq!(h["hop_by_hop"], 0x69ca0541u32);
    assert_eq!(m["length"], 1044);
    no_unknown_avps(&m["avps"]);

    assert_eq!(
        *value(&m, "Session-Id"),
        "d0-nlepg1.mtn.co.za;e2e-data-roaming;1774847286;1"
    );
    assert_eq!(*value(&m, "Service-Context-Id"), "8.32251@3gpp.org");
    let crt = find(&m["avps"], "CC-Request-Type").unwrap();
    assert_eq!(
        (&crt["value"], &crt["enum"]),
        (&json!(1), &json!("INITIAL_REQUEST"))
    );
    assert_eq!(*value(&m, "CC-Request-Number"), 0);
    assert_eq!(*value(&m, "Event-Timestamp"), "2026-03-30T05:08:17Z");
    assert_eq!(
        values(&m, "Subscription-Id-Data"),
        vec![
            json!("279603002227198"),
            json!("655103704646780"),
            json!("655103704646780nai.epc.mnc655.mcc10.3gppnetwork.org")
        ]
    );
    let mut types = Vec::new();
    find_all(&m["avps"], "Subscription-Id-Type", &mut types);
    let names: Vec<_> = types.iter().map(|t| t["enum"].clone()).collect();
    assert_eq!(
        names,
        vec![
            json!("END_USER_E164"),
            json!("END_USER_IMSI"),
            json!("END_USER_NAI")
        ]
    );
    // MSCC: RSU of 512000 octets for rating group 1004.
    let mscc = find(&m["avps"], "Multiple-Services-Credit-Control").unwrap();
    assert_eq!(*value(mscc, "Rating-Group"), 1004);
    let rsu = find(&mscc["avps"], "Requested-Service-Unit").unwrap();
    assert_eq!(*value(rsu, "CC-Total-Octets"), 512000);
    assert_eq!(
        find(&m["avps"], "Multiple-Services-Indicator").unwrap()["enum"],
        "MULTIPLE_SERVICES_SUPPORTED"
    );
    // User-Equipment-Info: IMEISV.
    assert_eq!(
        find(&m["avps"], "User-Equipment-Info-Type").unwrap()["enum"],
        "IMEISV"
    );
    assert_eq!(
        find(&m["avps"], "User-Equipment-Info-Value").unwrap()["text"],
        "3564871075436638"
    );
    // Service-Information / PS-Information, 3GPP vendor AVPs.
    let ps = find(&m["avps"], "PS-Information").unwrap();
    assert_eq!(
        (&ps["vendor"], &ps["vendor_name"]),
        (&json!(10415), &json!("3GPP"))
    );
    assert_eq!(ps["flags"], json!(["V", "M"]));
    assert_eq!(*value(ps, "3GPP-Charging-Id"), 1865244739u32);
    assert_eq!(*value(ps, "PDP-Address"), "10.144.18.3");
    assert_eq!(*value(ps, "SGSN-Address"), "41.208.22.222");
    assert_eq!(*value(ps, "GGSN-Address"), "196.13.128.128");
    assert_eq!(*value(ps, "3GPP-IMSI-MCC-MNC"), "65510");
    assert_eq!(
        *value(ps, "3GPP-User-Location-Info"),
        "8232f402000132f40200000001"
    );
    assert_eq!(*value(ps, "Called-Station-Id"), "zsmarttest11");
}

#[test]
fn gy_ccr_update_reports_used_units_and_reason() {
    let m = decode("gy-ccr-update.hex");
    no_unknown_avps(&m["avps"]);
    assert_eq!(
        find(&m["avps"], "CC-Request-Type").unwrap()["enum"],
        "UPDATE_REQUEST"
    );
    assert_eq!(*value(&m, "CC-Request-Number"), 1);
    let mscc = find(&m["avps"], "Multiple-Services-Credit-Control").unwrap();
    let usu = find(&mscc["avps"], "Used-Service-Unit").unwrap();
    assert_eq!(*value(usu, "CC-Total-Octets"), 128000);
    let rr = find(&mscc["avps"], "Reporting-Reason").unwrap();
    assert_eq!(
        (&rr["value"], &rr["enum"]),
        (&json!(3), &json!("QUOTA_EXHAUSTED"))
    );
}

#[test]
fn cer_from_python_diameter_decodes_and_validates() {
    let m = decode("cer-mensonen.hex");
    no_unknown_avps(&m["avps"]);
    assert_eq!(m["header"]["command"], "Capabilities-Exchange-Request");
    assert_eq!(m["header"]["short"], "CER");
    assert_eq!(*value(&m, "Origin-Host"), "dra.swlab.roam.server.net");
    assert_eq!(*value(&m, "Origin-Realm"), "swlab.roam.server.net");
    assert_eq!(*value(&m, "Host-IP-Address"), "172.20.39.7");
    assert_eq!(*value(&m, "Vendor-Id"), 99999);
    assert_eq!(*value(&m, "Product-Name"), "gy_relay");
    assert_eq!(*value(&m, "Auth-Application-Id"), 4);
    assert_eq!(*value(&m, "Acct-Application-Id"), 4);
}

#[test]
fn cer_from_go_diameter_decodes_and_validates() {
    let m = decode("cer-go-diameter.hex");
    no_unknown_avps(&m["avps"]);
    assert_eq!(m["header"]["hop_by_hop"], 0xa8cc407du32);
    assert_eq!(*value(&m, "Origin-Host"), "test");
    assert_eq!(*value(&m, "Host-IP-Address"), "10.1.0.1");
    assert_eq!(*value(&m, "Product-Name"), "go-diameter");
    assert_eq!(*value(&m, "Origin-State-Id"), 1397760650u32);
    assert_eq!(
        values(&m, "Supported-Vendor-Id"),
        vec![json!(10415), json!(13)]
    );
    let vsai = find(&m["avps"], "Vendor-Specific-Application-Id").unwrap();
    assert_eq!(*value(vsai, "Vendor-Id"), 10415);
    assert_eq!(*value(vsai, "Auth-Application-Id"), 4);
    assert_eq!(find(&m["avps"], "Inband-Security-Id").unwrap()["value"], 0);
}

#[test]
fn cea_with_error_message_decodes() {
    let m = decode("cea-mensonen.hex");
    no_unknown_avps(&m["avps"]);
    assert_eq!(m["header"]["short"], "CEA");
    let rc = find(&m["avps"], "Result-Code").unwrap();
    assert_eq!(
        (&rc["value"], &rc["label"]),
        (&json!(5012), &json!("DIAMETER_UNABLE_TO_COMPLY"))
    );
    assert_eq!(
        *value(&m, "Error-Message"),
        "Invalid state to receive a new connection attempt."
    );
    assert_eq!(values(&m, "Supported-Vendor-Id").len(), 8);
}

#[test]
fn text_view_of_a_real_ccr_shows_names_values_and_nesting() {
    let path = testdata().join("gy-ccr-initial.hex");
    let (code, out, _) = gyro(&["decode", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    let first = out.lines().next().unwrap();
    assert_eq!(
        first,
        "Credit-Control-Request (CCR) 272 app 4 (Diameter Credit Control) flags R,P \
         hbh 0x69ca0541 e2e 0x3d24870d len 1044"
    );
    for line in [
        "  CC-Request-Type code 416 flags M = INITIAL_REQUEST (1)",
        "  Event-Timestamp code 55 flags M = 2026-03-30T05:08:17Z",
        "  Multiple-Services-Credit-Control code 456 flags M",
        "    Requested-Service-Unit code 437 flags M",
        "      CC-Total-Octets code 421 flags M = 512000",
        "  Service-Information code 873 vendor 10415 (3GPP) flags V,M",
        "      PDP-Address code 1227 vendor 10415 (3GPP) flags V = 10.144.18.3",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
    }
    assert!(!out.contains("Result-Code:"));
}
