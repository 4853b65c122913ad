//! The runtime over real loopback sockets: capabilities exchange, watchdog,
//! disconnection, validation errors, limits, shutdown and shard routing.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::*;
use gyro_diameter::codes::{app, avp, cmd};
use gyro_diameter::Encoder;

#[test]
fn capabilities_exchange_then_credit_control() {
    let server = gyro_server::start(test_config(1), Echo::default()).unwrap();
    let addr = server.local_addrs()[0];
    let mut c = Client::connect(addr);
    let cea = c.cer("client.test", &[4]);
    let m = parse(&cea);
    assert_eq!(m.command_code(), 257);
    assert_eq!(result_code(&cea), Some(2001));
    assert_eq!(avp_u32(&cea, avp::AUTH_APPLICATION_ID), Some(4));
    assert!(m.find(avp::HOST_IP_ADDRESS).is_some());
    assert!(m.find(avp::FIRMWARE_REVISION).is_some());
    let ccr = c.ccr("client.test;1;1", "46700000001", 1, 0);
    c.send(&ccr);
    let cca = c.recv().unwrap();
    assert_eq!(result_code(&cca), Some(2001));
    assert_eq!(
        parse(&cca).header().hop_by_hop,
        parse(&ccr).header().hop_by_hop
    );
    assert_eq!(avp_u32(&cca, avp::CC_REQUEST_NUMBER), Some(0));
    server.shutdown();
    server.join();
}

#[test]
fn no_common_application_gets_5010_and_close() {
    let server = gyro_server::start(test_config(1), Echo::default()).unwrap();
    let mut c = Client::connect(server.local_addrs()[0]);
    let cea = c.cer("client.test", &[16777238]);
    assert_eq!(result_code(&cea), Some(5010));
    assert!(!parse(&cea).header().is_error());
    assert!(c.recv().is_none(), "connection must be closed after 5010");
    server.shutdown();
    server.join();
}

#[test]
fn unknown_peer_gets_3010_and_close() {
    let mut cfg = test_config(1);
    cfg.peers.allowed = vec!["pgw.test".into()];
    let server = gyro_server::start(cfg, Echo::default()).unwrap();
    let mut c = Client::connect(server.local_addrs()[0]);
    let cea = c.cer("client.test", &[4]);
    assert_eq!(result_code(&cea), Some(3010));
    assert!(parse(&cea).header().is_error());
    assert!(c.recv().is_none());
    // An allowed peer gets in.
    let mut ok = Client::connect(server.local_addrs()[0]);
    assert_eq!(result_code(&ok.cer("PGW.test", &[4])), Some(2001));
    server.shutdown();
    server.join();
}

#[test]
fn first_message_must_be_cer() {
    let server = gyro_server::start(test_config(1), Echo::default()).unwrap();
    let mut c = Client::connect(server.local_addrs()[0]);
    let ccr = c.ccr("client.test;1;1", "1", 1, 0);
    c.send(&ccr);
    assert!(c.recv().is_none());
    server.shutdown();
    server.join();
}

#[test]
fn watchdog_both_ways_and_silent_peer_dropped() {
    let server = gyro_server::start(test_config(1), Echo::default()).unwrap();
    let mut c = Client::open(server.local_addrs()[0]);
    // Our DWR is answered.
    c.send_peer_request(None);
    let dwa = c.recv().unwrap();
    assert_eq!(
        (parse(&dwa).command_code(), result_code(&dwa)),
        (280, Some(2001))
    );
    // Idle for Tw (1 s): the server sends a DWR; answer it.
    let t = Instant::now();
    let dwr = c.recv().unwrap();
    let m = parse(&dwr);
    assert!(m.is_request() && m.command_code() == 280);
    assert!(t.elapsed() >= Duration::from_millis(800));
    c.answer_ok(&m);
    // Now stay silent: DWRs keep coming, then the server closes.
    let t = Instant::now();
    let mut dwrs = 0;
    while let Some(msg) = c.recv() {
        assert_eq!(parse(&msg).command_code(), 280);
        dwrs += 1;
    }
    assert!(dwrs >= 1);
    assert!(
        t.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    server.shutdown();
    server.join();
}

#[test]
fn client_dpr_is_answered() {
    let server = gyro_server::start(test_config(1), Echo::default()).unwrap();
    let mut c = Client::open(server.local_addrs()[0]);
    c.send_peer_request(Some(0));
    let dpa = c.recv().unwrap();
    assert_eq!(
        (parse(&dpa).command_code(), result_code(&dpa)),
        (282, Some(2001))
    );
    // We close; the server notices.
    drop(c);
    let t = Instant::now();
    while server.stats().open_connections > 0 && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.stats().open_connections, 0);
    server.shutdown();
    server.join();
}

#[test]
fn malformed_request_gets_error_answer_and_connection_stays() {
    let server = gyro_server::start(test_config(1), Echo::default()).unwrap();
    let mut c = Client::open(server.local_addrs()[0]);
    // A CCR without CC-Request-Number: 5005 with Failed-AVP.
    let (h, e2e) = c.ids();
    let mut b = BytesMut::new();
    let mut e = Encoder::request(
        &mut b,
        cmd::CREDIT_CONTROL,
        app::CREDIT_CONTROL,
        true,
        h,
        e2e,
    );
    e.str(avp::SESSION_ID, "client.test;9;9")
        .str(avp::ORIGIN_HOST, "client.test")
        .str(avp::ORIGIN_REALM, "test")
        .str(avp::DESTINATION_REALM, "gyro.test")
        .u32(avp::AUTH_APPLICATION_ID, 4)
        .str(avp::SERVICE_CONTEXT_ID, "32251@3gpp.org")
        .i32(avp::CC_REQUEST_TYPE, 1);
    e.finish().unwrap();
    c.send(&b);
    let ans = c.recv().unwrap();
    assert_eq!(result_code(&ans), Some(5005));
    let failed = parse(&ans).find(avp::FAILED_AVP).expect("Failed-AVP");
    assert!(failed.child(avp::CC_REQUEST_NUMBER).is_some());
    // An unknown command: 3001 with the E bit.
    let (h, e2e) = c.ids();
    let mut b = BytesMut::new();
    let mut e = Encoder::request(&mut b, 999, app::CREDIT_CONTROL, true, h, e2e);
    e.str(avp::SESSION_ID, "client.test;9;10")
        .str(avp::ORIGIN_HOST, "client.test")
        .str(avp::ORIGIN_REALM, "test");
    e.finish().unwrap();
    c.send(&b);
    let ans = c.recv().unwrap();
    assert_eq!(result_code(&ans), Some(3001));
    assert!(parse(&ans).header().is_error());
    // The connection still works.
    let ccr = c.ccr("client.test;1;1", "46700000001", 1, 0);
    c.send(&ccr);
    assert_eq!(result_code(&c.recv().unwrap()), Some(2001));
    server.shutdown();
    server.join();
}

#[test]
fn oversized_message_closes_only_that_connection() {
    let mut cfg = test_config(1);
    cfg.limits.max_message_size = 4096;
    cfg.limits.read_buffer_size = 8192;
    let server = gyro_server::start(cfg, Echo::default()).unwrap();
    let addr = server.local_addrs()[0];
    let mut bad = Client::open(addr);
    let mut good = Client::open(addr);
    // A header declaring 1 MiB.
    bad.send(&[
        1, 0x10, 0, 0, 0x80, 0, 1, 0x10, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1,
    ]);
    assert!(
        bad.recv().is_none(),
        "oversized message must close the connection"
    );
    let ccr = good.ccr("client.test;1;1", "46700000001", 1, 0);
    good.send(&ccr);
    assert_eq!(result_code(&good.recv().unwrap()), Some(2001));
    assert!(server.stats().aborted_connections >= 1);
    server.shutdown();
    server.join();
}

#[test]
fn a_stream_that_cannot_be_framed_is_reset() {
    let server = gyro_server::start(test_config(1), Echo::default()).unwrap();
    let mut c = Client::open(server.local_addrs()[0]);
    // A header whose Message Length (22) is not a multiple of 4: RFC 6733
    // section 2.1 closes such a stream with a TCP reset, not a FIN.
    c.send(&[
        1, 0, 0, 22, 0x80, 0, 1, 0x10, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0,
    ]);
    let mut byte = [0u8; 1];
    let r = std::io::Read::read(&mut c.stream, &mut byte);
    assert_eq!(
        r.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionReset),
        "the close must be a reset"
    );
    server.shutdown();
    server.join();
}

#[test]
fn incomplete_message_times_out() {
    let mut cfg = test_config(1);
    cfg.limits.message_timeout_ms = 300;
    cfg.peers.watchdog_secs = std::time::Duration::from_secs(30);
    let server = gyro_server::start(cfg, Echo::default()).unwrap();
    let mut c = Client::open(server.local_addrs()[0]);
    let ccr = c.ccr("client.test;1;1", "46700000001", 1, 0);
    c.send(&ccr[..30]);
    let t = Instant::now();
    assert!(c.recv().is_none());
    assert!(t.elapsed() < Duration::from_secs(3));
    server.shutdown();
    server.join();
}

#[test]
fn a_peer_that_stops_reading_is_disconnected_and_freed() {
    let mut cfg = test_config(1);
    cfg.limits.max_inflight_per_connection = 64;
    let server = gyro_server::start(cfg, Echo::default()).unwrap();
    let c = Client::open(server.local_addrs()[0]);
    let mut stream = c.stream.try_clone().unwrap();
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    // Requests, and never a byte read back: answers and watchdog requests
    // pile up in a zero window.
    let one = ccr_bytes(1, 1, "client.test;1;1", "46700000001", 1, 0);
    let chunk: Vec<u8> = one.iter().copied().cycle().take(one.len() * 256).collect();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) && stream.write(&chunk).is_ok() {}
    assert_eq!(server.stats().open_connections, 1);
    // The watchdog gives up on the peer (no DWA), and the close does not
    // wait forever on the blocked writes: the connection is freed.
    let t = Instant::now();
    while server.stats().open_connections > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "a peer that stopped reading still holds its connection"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(c);
    server.shutdown();
    server.join();
}

#[test]
fn peer_that_stops_reading_is_held_back() {
    let mut cfg = test_config(1);
    cfg.limits.max_inflight_per_connection = 64;
    cfg.peers.watchdog_secs = std::time::Duration::from_secs(30);
    let server = gyro_server::start(cfg, Echo::default()).unwrap();
    let addr = server.local_addrs()[0];
    let c = Client::open(addr);
    let mut stream = c.stream.try_clone().unwrap();
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    // Write requests and never read an answer. Once the server's in-flight
    // limit is reached it stops reading, the socket buffers fill and our
    // writes block: the total the server accepted stays bounded.
    let one = ccr_bytes(1, 1, "client.test;1;1", "46700000001", 1, 0);
    let chunk: Vec<u8> = one.iter().copied().cycle().take(one.len() * 256).collect();
    let mut written = 0usize;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        match stream.write(&chunk) {
            Ok(n) => written += n,
            Err(_) => break,
        }
    }
    let requests_written = written / one.len();
    assert!(
        written < 64 << 20,
        "the server kept reading: {written} bytes accepted"
    );
    let handled = server.stats().requests;
    assert!(
        handled < requests_written as u64,
        "server handled {handled} of {requests_written}"
    );
    // Other connections are unaffected.
    let mut other = Client::open(addr);
    let ccr = other.ccr("client.test;2;2", "46700000002", 1, 0);
    other.send(&ccr);
    assert_eq!(result_code(&other.recv().unwrap()), Some(2001));
    drop(c);
    drop(stream);
    server.shutdown();
    server.join();
}

#[test]
fn one_busy_connection_keeps_both_workers_busy() {
    let server = gyro_server::start(test_config(2), Echo::default()).unwrap();
    let mut c = Client::open(server.local_addrs()[0]);
    let n = 2000u32;
    let mut batch = Vec::new();
    for i in 0..n {
        let (h, e2e) = c.ids();
        let sub = format!("4670000{:04}", i);
        batch.extend(ccr_bytes(h, e2e, &format!("client.test;{i};0"), &sub, 1, 0));
    }
    c.send(&batch);
    let mut by_worker = [0u32; 2];
    for _ in 0..n {
        let a = c.recv().expect("answer");
        assert_eq!(result_code(&a), Some(2001));
        by_worker[avp_u32(&a, avp::ORIGIN_STATE_ID).unwrap() as usize] += 1;
    }
    let stats = server.worker_stats();
    println!(
        "per-worker requests: {:?}",
        stats.iter().map(|s| s.requests).collect::<Vec<_>>()
    );
    assert_eq!(by_worker[0] + by_worker[1], n);
    assert!(
        by_worker[0] >= n / 4 && by_worker[1] >= n / 4,
        "{by_worker:?}"
    );
    assert!(stats[0].requests > 0 && stats[1].requests > 0);
    assert_eq!(stats[0].requests + stats[1].requests, n as u64);
    assert!(stats.iter().any(|s| s.from_other_workers > 0));
    server.shutdown();
    server.join();
}

#[test]
fn updates_without_subscription_id_follow_their_session() {
    let server = gyro_server::start(test_config(2), Echo::default()).unwrap();
    let mut c = Client::open(server.local_addrs()[0]);
    for i in 0..20u32 {
        let sid = format!("client.test;{i};7");
        let sub = format!("4670000000{}", i % 10);
        let ccr = c.ccr(&sid, &sub, 1, 0);
        c.send(&ccr);
        let first = avp_u32(&c.recv().unwrap(), avp::ORIGIN_STATE_ID);
        let ccr = c.ccr(&sid, "", 2, 1);
        c.send(&ccr);
        let second = avp_u32(&c.recv().unwrap(), avp::ORIGIN_STATE_ID);
        assert_eq!(first, second, "session {sid} changed shard");
    }
    server.shutdown();
    server.join();
}

#[test]
fn sessions_are_followed_from_any_connection_and_after_they_end() {
    let server = gyro_server::start(test_config(2), Echo::default()).unwrap();
    let addr = server.local_addrs()[0];
    let mut opener = Client::open(addr);
    let mut updater = Client::open(addr);
    let mut late = Client::open(addr);
    for i in 0..40u32 {
        let sid = format!("client.test;{i};8");
        let sub = format!("4670000000{}", i % 10);
        let ccr = opener.ccr(&sid, &sub, 1, 0);
        opener.send(&ccr);
        let home = avp_u32(&opener.recv().unwrap(), avp::ORIGIN_STATE_ID);
        for (n, kind) in [(1, 2), (2, 3)] {
            let ccr = updater.ccr(&sid, "", kind, n);
            updater.send(&ccr);
            let shard = avp_u32(&updater.recv().unwrap(), avp::ORIGIN_STATE_ID);
            assert_eq!(shard, home, "request {n} of {sid} on another connection");
        }
        // A retransmitted CCR-Terminate on a third connection still
        // reaches the shard that remembers the session.
        let ccr = late.ccr(&sid, "", 3, 2);
        late.send(&ccr);
        let shard = avp_u32(&late.recv().unwrap(), avp::ORIGIN_STATE_ID);
        assert_eq!(shard, home, "retransmitted CCR-T of {sid}");
    }
    server.shutdown();
    server.join();
}

#[test]
fn shutdown_answers_everything_in_flight_and_sends_dpr() {
    let server = gyro_server::start(test_config(2), Echo::default()).unwrap();
    let mut c = Client::open(server.local_addrs()[0]);
    let n = 500u32;
    let mut batch = Vec::new();
    for i in 0..n {
        let (h, e2e) = c.ids();
        batch.extend(ccr_bytes(
            h,
            e2e,
            &format!("c;{i};0"),
            &format!("467{i:08}"),
            1,
            0,
        ));
    }
    c.send(&batch);
    server.shutdown();
    let mut answers = 0;
    let mut dpr = None;
    while let Some(m) = c.recv() {
        let msg = parse(&m);
        if msg.command_code() == 282 && msg.is_request() {
            dpr = Some(m.clone());
            c.answer_ok(&msg);
        } else if msg.command_code() == 272 {
            answers += 1;
        }
        if dpr.is_some() && answers == n {
            break;
        }
    }
    assert_eq!(answers, n, "every accepted request is answered");
    assert!(dpr.is_some(), "the server sends DPR on shutdown");
    server.join();
}

#[test]
fn a_port_in_use_is_an_error_not_a_shared_port() {
    let first = gyro_server::start(test_config(2), Echo::default()).unwrap();
    let mut cfg = test_config(1);
    cfg.server.listen = first.local_addrs().to_vec();
    let err = gyro_server::start(cfg, Echo::default())
        .err()
        .expect("second server must not start");
    assert!(err.to_string().contains("cannot listen"), "{err}");
    first.shutdown();
    first.join();
}

#[test]
fn answers_leave_only_after_their_batch_is_durable() {
    let synced = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let app = Echo(Durability::Slow(synced.clone()));
    let server = gyro_server::start(test_config(2), app).unwrap();
    let mut c = Client::open(server.local_addrs()[0]);
    for i in 0..20u32 {
        let before = synced.load(std::sync::atomic::Ordering::SeqCst);
        let ccr = c.ccr(&format!("c;{i};1"), &format!("4670000000{}", i % 10), 1, 0);
        c.send(&ccr);
        assert_eq!(result_code(&c.recv().unwrap()), Some(2001));
        assert!(
            synced.load(std::sync::atomic::Ordering::SeqCst) > before,
            "answer {i} left before its batch was synced"
        );
    }
    server.shutdown();
    server.join();
}

#[test]
fn a_batch_that_cannot_be_made_durable_is_answered_too_busy() {
    let server = gyro_server::start(test_config(1), Echo(Durability::Failing)).unwrap();
    let mut c = Client::open(server.local_addrs()[0]);
    let ccr = c.ccr("c;1;1", "46700000001", 1, 0);
    c.send(&ccr);
    let a = c.recv().unwrap();
    assert_eq!(result_code(&a), Some(3004));
    let m = parse(&a);
    assert!(m.header().is_error());
    assert_eq!(m.header().hop_by_hop, parse(&ccr).header().hop_by_hop);
    assert_eq!(m.session_id(), Some("c;1;1"));
    // Peer messages still pass: the watchdog is answered.
    c.send_peer_request(None);
    assert_eq!(result_code(&c.recv().unwrap()), Some(2001));
    server.shutdown();
    server.join();
}

#[test]
fn base_protocol_answers_on_an_idle_connection_do_not_wait_for_a_slow_sync() {
    // One worker whose every group commit takes 1.5 s (a stalled disk).
    let stall = Duration::from_millis(1500);
    let server = gyro_server::start(test_config(1), Echo(Durability::Stalled(stall))).unwrap();
    let addr = server.local_addrs()[0];
    let mut busy = Client::open(addr);
    let ccr = busy.ccr("c;1;1", "46700000001", 1, 0);
    let sent = Instant::now();
    busy.send(&ccr);
    std::thread::sleep(Duration::from_millis(100));
    // Meanwhile another peer connects and exchanges watchdogs: its CEA and
    // DWA do not wait for the sync of the other connection's answer.
    let t = Instant::now();
    let mut idle = Client::open(addr);
    idle.send_peer_request(None);
    assert_eq!(result_code(&idle.recv().unwrap()), Some(2001), "DWA");
    let waited = t.elapsed();
    assert!(
        waited < Duration::from_millis(1000),
        "CEA and DWA took {waited:?} behind a {stall:?} sync"
    );
    // The CCA still leaves only once its batch is durable.
    assert_eq!(result_code(&busy.recv().unwrap()), Some(2001));
    assert!(sent.elapsed() >= stall, "CCA before its sync");
    server.shutdown();
    server.join();
}
