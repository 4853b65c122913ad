//! The credit-control application over real loopback sockets: the embedded
//! demo charging configuration answering data sessions, SMS events and the
//! error cases a gateway acts on, with CDRs written to files.

#[path = "../../server/tests/common.rs"]
mod common;

use bytes::BytesMut;
use common::*;
use gyro_charging::{CcRequest, Mscc, RequestType, RequestedAction, ServiceUnits, SubscriptionId};
use gyro_diameter::codes::avp;
use gyro_ocs::gy::encode_ccr;
use gyro_ocs::{demo_charging, CreditControl, Storage};

struct Fixture {
    server: gyro_server::ServerHandle,
    client: Client,
    dir: std::path::PathBuf,
}

fn start(workers: usize, name: &str) -> Fixture {
    let dir = std::env::temp_dir().join(format!("gyro-credit-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = test_config(workers);
    let mut storage = Storage::in_memory();
    storage.data_dir = Some(dir.clone());
    let app = CreditControl::new(demo_charging(), "ocs.test", "test", storage, workers).unwrap();
    let server = gyro_server::start(cfg, app).unwrap();
    let client = Client::open(server.local_addrs()[0]);
    Fixture {
        server,
        client,
        dir,
    }
}

fn units(octets: u64) -> ServiceUnits {
    ServiceUnits {
        total_octets: Some(octets),
        ..ServiceUnits::default()
    }
}

fn data_request(session: &str, number: u32, rtype: RequestType, msisdn: &str) -> CcRequest {
    CcRequest {
        session_id: session.into(),
        origin_host: "client.test".into(),
        end_to_end: 1000 + number,
        request_type: rtype,
        request_number: number,
        service_context: "32251@3gpp.org".into(),
        subscription_ids: vec![SubscriptionId::e164(msisdn)],
        multiple_services: Some(true),
        ..CcRequest::default()
    }
}

impl Fixture {
    fn exchange(&mut self, req: &CcRequest) -> Vec<u8> {
        let mut b = BytesMut::new();
        let (h, _) = self.client.ids();
        encode_ccr(&mut b, req, h, "test", "gyro.test").unwrap();
        self.client.send(&b);
        let a = self.client.recv().expect("answer");
        assert_eq!(parse(&a).header().hop_by_hop, h);
        a
    }

    fn finish(self) -> Vec<serde_json::Value> {
        let dir = self.dir.clone();
        let cdrs = self.finish_keep();
        let _ = std::fs::remove_dir_all(&dir);
        cdrs
    }

    /// Stops the server and reads every CDR it wrote.
    fn finish_keep(self) -> Vec<serde_json::Value> {
        self.server.shutdown();
        self.server.join();
        let mut cdrs = Vec::new();
        for shard in std::fs::read_dir(self.dir.join("cdr")).unwrap() {
            for file in std::fs::read_dir(shard.unwrap().path()).unwrap() {
                let path = file.unwrap().path();
                let text = std::fs::read_to_string(&path).unwrap();
                if !path.to_string_lossy().ends_with(".jsonl") {
                    assert!(
                        text.is_empty(),
                        "after shutdown every CDR is in a closed file: {}",
                        path.display()
                    );
                }
                for line in text.lines() {
                    cdrs.push(serde_json::from_str(line).expect("CDR is one JSON object per line"));
                }
            }
        }
        cdrs
    }
}

/// (rating group, CC-Total-Octets granted, per-MSCC Result-Code) of a CCA.
fn grants(cca: &[u8]) -> Vec<(u32, u64, u32)> {
    let m = parse(cca);
    m.avps()
        .flatten()
        .filter(|a| a.code() == avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code)
        .map(|g| {
            let rg = g
                .child(avp::RATING_GROUP)
                .and_then(|a| a.u32().ok())
                .unwrap_or(0);
            let octets = g
                .child(avp::GRANTED_SERVICE_UNIT)
                .and_then(|u| u.child(avp::CC_TOTAL_OCTETS))
                .and_then(|a| a.u64().ok())
                .unwrap_or(0);
            let rc = g
                .child(avp::RESULT_CODE)
                .and_then(|a| a.u32().ok())
                .unwrap_or(0);
            (rg, octets, rc)
        })
        .collect()
}

#[test]
fn data_session_initial_update_terminate_with_mscc() {
    let mut f = start(2, "session");
    let sid = "client.test;1;42";
    let mut req = data_request(sid, 0, RequestType::Initial, "46700000001");
    req.mscc = [10, 20]
        .into_iter()
        .map(|rg| Mscc {
            rating_group: Some(rg),
            requested: Some(units(1_000_000)),
            ..Mscc::default()
        })
        .collect();
    let cca = f.exchange(&req);
    assert_eq!(result_code(&cca), Some(2001));
    assert_eq!(avp_u32(&cca, avp::CC_REQUEST_NUMBER), Some(0));
    assert_eq!(avp_u32(&cca, avp::CC_REQUEST_TYPE), Some(1));
    let g = grants(&cca);
    assert_eq!(g.len(), 2);
    assert!(
        g.iter().all(|(_, octets, rc)| *octets > 0 && *rc == 2001),
        "{g:?}"
    );

    // Update: usage in both rating groups, more quota asked. No
    // Subscription-Id: the session's route is remembered.
    let mut upd = data_request(sid, 1, RequestType::Update, "");
    upd.subscription_ids.clear();
    upd.mscc = [10, 20]
        .into_iter()
        .map(|rg| Mscc {
            rating_group: Some(rg),
            requested: Some(units(1_000_000)),
            used: Some(units(400_000)),
            reporting_reason: Some(3),
            ..Mscc::default()
        })
        .collect();
    let cca = f.exchange(&upd);
    assert_eq!(result_code(&cca), Some(2001));
    assert_eq!(grants(&cca).len(), 2);

    let mut term = data_request(sid, 2, RequestType::Termination, "");
    term.subscription_ids.clear();
    term.termination_cause = Some(1);
    term.mscc = vec![Mscc {
        rating_group: Some(10),
        used: Some(units(100_000)),
        reporting_reason: Some(2),
        ..Mscc::default()
    }];
    let cca = f.exchange(&term);
    assert_eq!(result_code(&cca), Some(2001));

    // After termination the session is gone: 5002.
    let mut late = data_request(sid, 3, RequestType::Update, "46700000001");
    late.mscc = upd.mscc.clone();
    assert_eq!(result_code(&f.exchange(&late)), Some(5002));

    let cdrs = f.finish();
    let usage: Vec<_> = cdrs
        .iter()
        .filter(|c| c["record_type"] == "usage")
        .collect();
    assert_eq!(
        usage.len(),
        3,
        "two usage reports in the update, one in the termination"
    );
    let octets: u64 = usage
        .iter()
        .map(|c| c["total_octets"].as_u64().unwrap())
        .sum();
    assert_eq!(octets, 900_000);
    assert!(cdrs
        .iter()
        .any(|c| c["record_type"] == "session-end" && c["session_id"] == sid));
}

#[test]
fn sms_event_direct_debit() {
    let mut f = start(1, "sms");
    let mut ev = data_request("client.test;2;1", 0, RequestType::Event, "46700000002");
    ev.service_context = "32274@3gpp.org".into();
    ev.requested_action = Some(RequestedAction::DirectDebiting);
    ev.multiple_services = None;
    ev.requested = Some(ServiceUnits {
        service_specific: Some(1),
        ..ServiceUnits::default()
    });
    let cca = f.exchange(&ev);
    assert_eq!(result_code(&cca), Some(2001));
    assert_eq!(avp_u32(&cca, avp::CC_REQUEST_TYPE), Some(4));
    let gsu = parse(&cca)
        .find(avp::GRANTED_SERVICE_UNIT)
        .expect("GSU for a direct debit");
    assert_eq!(
        gsu.child(avp::CC_SERVICE_SPECIFIC_UNITS)
            .unwrap()
            .u64()
            .unwrap(),
        1
    );
    // The same request again (a retransmission) is answered the same and
    // charged once.
    ev.retransmit = true;
    let again = f.exchange(&ev);
    assert_eq!(result_code(&again), Some(2001));
    let cdrs = f.finish();
    let events: Vec<_> = cdrs
        .iter()
        .filter(|c| c["record_type"] == "event")
        .collect();
    assert_eq!(events.len(), 1, "{cdrs:?}");
    assert!(events[0]["amount"].as_i64().unwrap() > 0);
}

#[test]
fn unknown_subscriber_context_and_session_get_their_codes() {
    let mut f = start(2, "errors");
    let mut req = data_request("client.test;3;1", 0, RequestType::Initial, "46799999999");
    req.mscc = vec![Mscc {
        rating_group: Some(10),
        requested: Some(units(1000)),
        ..Mscc::default()
    }];
    assert_eq!(result_code(&f.exchange(&req)), Some(5030));
    let mut req = data_request("client.test;3;2", 0, RequestType::Initial, "46700000003");
    req.service_context = "99999@3gpp.org".into();
    req.mscc = vec![Mscc {
        rating_group: Some(10),
        requested: Some(units(1000)),
        ..Mscc::default()
    }];
    let cca = f.exchange(&req);
    assert_eq!(result_code(&cca), Some(5031));
    assert!(parse(&cca).find(avp::FAILED_AVP).is_some());
    let upd = data_request("client.test;3;3", 1, RequestType::Update, "46700000003");
    assert_eq!(result_code(&f.exchange(&upd)), Some(5002));
    f.finish();
}

/// A small tmpfs for one test (mounting needs root; CI runs as root).
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(name: &str, size: &str) -> Option<Tmpfs> {
        let dir = std::env::temp_dir().join(format!("gyro-tmpfs-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must be able to mount a tmpfs for the full-disk test"
            );
            eprintln!("cannot mount a tmpfs here: full-disk test skipped");
            return None;
        }
        Some(Tmpfs(dir))
    }

    fn resize(&self, size: &str) {
        let ok = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remount size={size}");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn full_disk_answers_too_busy_then_recovers_without_losing_anything() {
    let Some(fs) = Tmpfs::mount("full", "1m") else {
        return;
    };
    let data = fs.0.join("data");
    let mut storage = Storage::in_memory();
    storage.data_dir = Some(data.clone());
    let app = CreditControl::new(demo_charging(), "ocs.test", "test", storage, 1).unwrap();
    let server = gyro_server::start(test_config(1), app).unwrap();
    let client = Client::open(server.local_addrs()[0]);
    let mut f = Fixture {
        server,
        client,
        dir: data.clone(),
    };
    let event = |n: u32| {
        let mut ev = data_request(
            &format!("client.test;9;{n}"),
            0,
            RequestType::Event,
            "46700000007",
        );
        ev.service_context = "32274@3gpp.org".into();
        ev.requested_action = Some(RequestedAction::DirectDebiting);
        ev.multiple_services = None;
        ev.requested = Some(ServiceUnits {
            service_specific: Some(1),
            ..ServiceUnits::default()
        });
        ev
    };
    // Fill the disk: answers turn from 2001 into 3004.
    let mut ok = 0u32;
    let mut n = 0u32;
    let mut busy = false;
    while n < 20_000 {
        n += 1;
        match result_code(&f.exchange(&event(n))) {
            Some(2001) => ok += 1,
            Some(3004) => {
                busy = true;
                break;
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert!(busy, "a full disk must be answered 3004");
    assert!(ok > 0);
    // Still full: still 3004, nothing is charged.
    n += 1;
    assert_eq!(result_code(&f.exchange(&event(n))), Some(3004));
    // Space again: the shard reloads from disk and serves.
    fs.resize("64m");
    let t = std::time::Instant::now();
    loop {
        n += 1;
        match result_code(&f.exchange(&event(n))) {
            Some(2001) => {
                ok += 1;
                break;
            }
            Some(3004) => {
                assert!(
                    t.elapsed() < std::time::Duration::from_secs(20),
                    "no recovery"
                );
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }
    // Every 2001 has exactly one CDR; no 3004 left one behind.
    let cdrs = f.finish_keep();
    let events = cdrs.iter().filter(|c| c["record_type"] == "event").count();
    assert_eq!(
        events as u32, ok,
        "one CDR per acknowledged event, none for 3004"
    );
    drop(fs);
}
