//! A small credit-control server for the load generator's tests: CER ->
//! CEA 2001, every CCR answered with a CCA (Result-Code, echoed
//! CC-Request-Type/Number, MSCC with GSU), a DWR right after the CEA,
//! DPR -> DPA. It can hold answers for a while and send them in reverse
//! order, never answer CCRs, or never answer at all, and it records what it
//! saw.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use gyro_diameter::codes::{app, avp, cmd};
use gyro_diameter::header::frame_length;
use gyro_diameter::types::Address;
use gyro_diameter::{Encoder, Message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the fake server behaves.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// Answer CCRs at all.
    pub answer_ccr: bool,
    /// Answer the CER at all.
    pub answer_cer: bool,
    /// Hold answers this long, then send them newest first.
    pub hold: Option<Duration>,
    /// Send a DWR right after the CEA.
    pub send_dwr: bool,
    /// Result-Code for CCR-I (2001 by default).
    pub initial_result: u32,
    /// Keep a log of every CCR (session, type, number).
    pub log: bool,
    /// Answer the first CCR with bytes that cannot be framed.
    pub garbage: bool,
    /// Send a Re-Auth-Request for each session right after its CCA-I.
    pub send_rar: bool,
    /// Answer only this many CCRs (over all connections), then none.
    pub answer_first: Option<u64>,
    /// Answer the CER of only this many connections (the others get none).
    pub cer_connections: Option<usize>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            answer_ccr: true,
            answer_cer: true,
            hold: None,
            send_dwr: true,
            initial_result: 2001,
            log: true,
            garbage: false,
            send_rar: false,
            answer_first: None,
            cer_connections: None,
        }
    }
}

/// One CCR as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub session_id: String,
    pub request_type: i32,
    pub number: u32,
    pub has_subscription_id: bool,
    pub mscc: usize,
    pub requested_action: Option<i32>,
}

/// What the fake server saw, over all connections.
#[derive(Default)]
pub struct Observed {
    pub connections: AtomicUsize,
    pub ccrs: AtomicU64,
    pub dwa: AtomicU64,
    pub dpr: AtomicU64,
    /// Origin-Host of every CER, in arrival order.
    pub cer_hosts: Mutex<Vec<String>>,
    /// Disconnect-Cause of every DPR (-1 when absent).
    pub dpr_causes: Mutex<Vec<i32>>,
    /// Largest number of CCRs received but not yet answered, per connection.
    pub max_outstanding: Mutex<Vec<usize>>,
    /// Every CCR, per connection, in arrival order.
    pub log: Mutex<Vec<Vec<Seen>>>,
    /// Every Re-Auth-Answer, as received.
    pub raas: Mutex<Vec<Vec<u8>>>,
}

impl Observed {
    /// All CCRs grouped by Session-Id, each in arrival order.
    pub fn sessions(&self) -> HashMap<String, Vec<Seen>> {
        let mut m: HashMap<String, Vec<Seen>> = HashMap::new();
        for conn in self.log.lock().unwrap().iter() {
            for s in conn {
                m.entry(s.session_id.clone()).or_default().push(s.clone());
            }
        }
        m
    }
}

/// Starts the server on an ephemeral loopback port.
pub async fn start(cfg: FakeConfig) -> (SocketAddr, Arc<Observed>) {
    start_on("127.0.0.1:0", cfg).await
}

/// Starts the server on `listen`.
pub async fn start_on(listen: &str, cfg: FakeConfig) -> (SocketAddr, Arc<Observed>) {
    let listener = TcpListener::bind(listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let obs = Arc::new(Observed::default());
    let o = obs.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let idx = o.connections.fetch_add(1, Ordering::SeqCst);
            o.max_outstanding.lock().unwrap().push(0);
            o.log.lock().unwrap().push(Vec::new());
            tokio::spawn(serve(sock, idx, cfg.clone(), o.clone()));
        }
    });
    (addr, obs)
}

async fn serve(mut sock: TcpStream, idx: usize, cfg: FakeConfig, obs: Arc<Observed>) {
    let _ = sock.set_nodelay(true);
    let mut inbuf = BytesMut::with_capacity(1 << 16);
    let mut out = BytesMut::with_capacity(1 << 16);
    // Answers held back: (bytes) newest last.
    let mut held: Vec<BytesMut> = Vec::new();
    let mut flush_at: Option<tokio::time::Instant> = None;
    let mut outstanding = 0usize;
    let mut max_out = 0usize;
    let mut closing = false;
    loop {
        let sleep = async move {
            match flush_at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = sock.read_buf(&mut inbuf) => {
                match r {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                while let Ok(Some(len)) = frame_length(&inbuf, 1 << 20) {
                    if inbuf.len() < len {
                        break;
                    }
                    let frame = inbuf.split_to(len);
                    let Ok(m) = Message::parse(&frame) else { return };
                    match (m.command_code(), m.is_request()) {
                        (cmd::CAPABILITIES_EXCHANGE, true) if cfg.answer_cer && cfg.cer_connections.is_none_or(|n| idx < n) => {
                            let host = m.find(avp::ORIGIN_HOST).and_then(|a| a.utf8().ok()).unwrap_or("");
                            obs.cer_hosts.lock().unwrap().push(host.to_string());
                            cea(&m, &mut out);
                            if cfg.send_dwr {
                                let mut e = Encoder::request(&mut out, cmd::DEVICE_WATCHDOG, app::COMMON, false, 0xD00D, 0xD00D);
                                e.str(avp::ORIGIN_HOST, "fake.ocs.test").str(avp::ORIGIN_REALM, "ocs.test");
                                e.finish().unwrap();
                            }
                        }
                        (cmd::DEVICE_WATCHDOG, false) if m.header().hop_by_hop == 0xD00D => {
                            obs.dwa.fetch_add(1, Ordering::SeqCst);
                        }
                        (cmd::RE_AUTH, false) => {
                            obs.raas.lock().unwrap().push(frame.to_vec());
                        }
                        (cmd::DEVICE_WATCHDOG, true) => {
                            let mut e = Encoder::answer(&mut out, &m, false);
                            e.u32(avp::RESULT_CODE, 2001).str(avp::ORIGIN_HOST, "fake.ocs.test").str(avp::ORIGIN_REALM, "ocs.test");
                            e.finish().unwrap();
                        }
                        (cmd::DISCONNECT_PEER, true) => {
                            obs.dpr.fetch_add(1, Ordering::SeqCst);
                            let cause = m.find(avp::DISCONNECT_CAUSE).and_then(|a| a.i32().ok()).unwrap_or(-1);
                            obs.dpr_causes.lock().unwrap().push(cause);
                            let mut e = Encoder::answer(&mut out, &m, false);
                            e.u32(avp::RESULT_CODE, 2001).str(avp::ORIGIN_HOST, "fake.ocs.test").str(avp::ORIGIN_REALM, "ocs.test");
                            e.finish().unwrap();
                            closing = true;
                        }
                        (cmd::CREDIT_CONTROL, true) => {
                            obs.ccrs.fetch_add(1, Ordering::Relaxed);
                            if cfg.log {
                                obs.log.lock().unwrap()[idx].push(seen(&m));
                            }
                            let n = obs.ccrs.load(Ordering::Relaxed);
                            if !cfg.answer_ccr || cfg.answer_first.is_some_and(|first| n > first) {
                                continue;
                            }
                            if cfg.garbage {
                                out.extend_from_slice(&[7, 0, 0, 3, 0xff, 0xff, 0xff, 0xff]);
                                continue;
                            }
                            outstanding += 1;
                            if outstanding > max_out {
                                max_out = outstanding;
                                obs.max_outstanding.lock().unwrap()[idx] = max_out;
                            }
                            if cfg.hold.is_some() {
                                let mut b = BytesMut::new();
                                cca(&m, &cfg, &mut b);
                                held.push(b);
                            } else {
                                cca(&m, &cfg, &mut out);
                                outstanding -= 1;
                            }
                            let initial = m.find(avp::CC_REQUEST_TYPE).and_then(|a| a.i32().ok()) == Some(1);
                            if cfg.send_rar && initial {
                                rar(&m, &mut out);
                            }
                        }
                        _ => {}
                    }
                }
                if let (Some(h), None, false) = (cfg.hold, flush_at, held.is_empty()) {
                    flush_at = Some(tokio::time::Instant::now() + h);
                }
            }
            () = sleep => {
                // Newest first: answers leave out of order.
                while let Some(b) = held.pop() {
                    out.extend_from_slice(&b);
                    outstanding -= 1;
                }
                flush_at = None;
            }
        }
        if !out.is_empty() {
            if sock.write_all(&out).await.is_err() {
                break;
            }
            out.clear();
        }
        if closing {
            break;
        }
    }
}

fn seen(m: &Message<'_>) -> Seen {
    Seen {
        session_id: m.session_id().unwrap_or("").to_string(),
        request_type: m
            .find(avp::CC_REQUEST_TYPE)
            .and_then(|a| a.i32().ok())
            .unwrap_or(-1),
        number: m
            .find(avp::CC_REQUEST_NUMBER)
            .and_then(|a| a.u32().ok())
            .unwrap_or(u32::MAX),
        has_subscription_id: m.find(avp::SUBSCRIPTION_ID).is_some(),
        mscc: m.avps().flatten().filter(|a| a.code() == 456).count(),
        requested_action: m.find(avp::REQUESTED_ACTION).and_then(|a| a.i32().ok()),
    }
}

/// A Re-Auth-Request for the session of the CCR `m`.
fn rar(m: &Message<'_>, out: &mut BytesMut) {
    let sid = m.session_id().unwrap_or("");
    let mut e = Encoder::request(out, cmd::RE_AUTH, app::CREDIT_CONTROL, true, 0x7AA7, 0x7AA7);
    e.str(avp::SESSION_ID, sid)
        .str(avp::ORIGIN_HOST, "fake.ocs.test")
        .str(avp::ORIGIN_REALM, "ocs.test")
        .str(avp::DESTINATION_REALM, "gyro.test")
        .str(
            avp::DESTINATION_HOST,
            m.find(avp::ORIGIN_HOST)
                .and_then(|a| a.utf8().ok())
                .unwrap_or(""),
        )
        .u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL)
        .u32(avp::RE_AUTH_REQUEST_TYPE, 0);
    e.finish().unwrap();
}

fn cea(m: &Message<'_>, out: &mut BytesMut) {
    let mut e = Encoder::answer(out, m, false);
    e.u32(avp::RESULT_CODE, 2001)
        .str(avp::ORIGIN_HOST, "fake.ocs.test")
        .str(avp::ORIGIN_REALM, "ocs.test")
        .address(
            avp::HOST_IP_ADDRESS,
            &Address::from(std::net::IpAddr::from([127, 0, 0, 1])),
        )
        .u32(avp::VENDOR_ID, 0)
        .str(avp::PRODUCT_NAME, "fake-ocs")
        .u32(avp::AUTH_APPLICATION_ID, 4);
    e.finish().unwrap();
}

fn cca(m: &Message<'_>, cfg: &FakeConfig, out: &mut BytesMut) {
    let rt = m
        .find(avp::CC_REQUEST_TYPE)
        .and_then(|a| a.i32().ok())
        .unwrap_or(0);
    let rn = m
        .find(avp::CC_REQUEST_NUMBER)
        .and_then(|a| a.u32().ok())
        .unwrap_or(0);
    let code = if rt == 1 { cfg.initial_result } else { 2001 };
    let mut e = Encoder::answer(out, m, false);
    e.u32(avp::RESULT_CODE, code)
        .str(avp::ORIGIN_HOST, "fake.ocs.test")
        .str(avp::ORIGIN_REALM, "ocs.test")
        .u32(avp::AUTH_APPLICATION_ID, 4)
        .i32(avp::CC_REQUEST_TYPE, rt)
        .u32(avp::CC_REQUEST_NUMBER, rn);
    if code == 2001 && rt != 3 {
        for a in m.avps().flatten().filter(|a| a.code() == 456) {
            let rg = a.child(avp::RATING_GROUP).and_then(|x| x.u32().ok());
            let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
            let gsu = e.begin_group(avp::GRANTED_SERVICE_UNIT);
            e.u64(avp::CC_TOTAL_OCTETS, 1_000_000);
            e.end_group(gsu);
            if let Some(rg) = rg {
                e.u32(avp::RATING_GROUP, rg);
            }
            e.u32(avp::RESULT_CODE, 2001);
            e.end_group(g);
        }
        if rt == 4 {
            let gsu = e.begin_group(avp::GRANTED_SERVICE_UNIT);
            e.u64(avp::CC_SERVICE_SPECIFIC_UNITS, 1);
            e.end_group(gsu);
        }
    }
    e.finish().unwrap();
}
