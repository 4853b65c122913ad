//! A raw Diameter test client and a trivial credit-control shard for the
//! runtime's integration tests.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::BytesMut;
use gyro_diameter::codes::{app, avp, cmd, result};
use gyro_diameter::header::frame_length;
use gyro_diameter::{Address, Encoder, Message};
use gyro_server::{Application, Config, Route, SessionStep, Shard};

/// Answers every CCR with 2001, echoing the CC-Request-Type/Number, and
/// records which shard handled it (in Origin-State-Id, for the tests).
pub struct EchoShard {
    pub index: usize,
    durability: Durability,
    dirty: bool,
}

/// How an [`EchoShard`] group-commits.
#[derive(Clone, Default)]
pub enum Durability {
    /// Nothing to make durable.
    #[default]
    None,
    /// Every batch needs a sync job that takes 20 ms and counts itself.
    Slow(std::sync::Arc<std::sync::atomic::AtomicU64>),
    /// Every batch fails to become durable.
    Failing,
    /// Every batch needs a sync job that takes this long (a slow disk).
    Stalled(std::time::Duration),
}

impl Shard for EchoShard {
    fn handle(&mut self, req: &Message<'_>, _now_ms: u64, out: &mut BytesMut) {
        let mut e = Encoder::answer(out, req, false);
        e.u32(avp::RESULT_CODE, result::SUCCESS)
            .str(avp::ORIGIN_HOST, "ocs.test")
            .str(avp::ORIGIN_REALM, "test")
            .u32(avp::AUTH_APPLICATION_ID, 4);
        for id in [avp::CC_REQUEST_TYPE, avp::CC_REQUEST_NUMBER] {
            if let Some(a) = req.find(id) {
                e.raw_avp(&a);
            }
        }
        e.u32(avp::ORIGIN_STATE_ID, self.index as u32);
        e.finish().expect("answer fits");
        self.dirty = true;
    }

    fn too_busy(&mut self, answer: &Message<'_>, out: &mut BytesMut) {
        let h = answer.header();
        let mut e = Encoder::new(
            out,
            gyro_diameter::header::flags::ERROR,
            h.command_code,
            h.application_id,
            h.hop_by_hop,
            h.end_to_end,
        );
        if let Some(sid) = answer.find(avp::SESSION_ID) {
            e.raw_avp(&sid);
        }
        e.u32(avp::RESULT_CODE, result::TOO_BUSY)
            .str(avp::ORIGIN_HOST, "ocs.test")
            .str(avp::ORIGIN_REALM, "test");
        e.finish().expect("answer fits");
    }

    fn flush(&mut self) -> gyro_server::Flush {
        if !std::mem::take(&mut self.dirty) {
            return gyro_server::Flush::Done;
        }
        match &self.durability {
            Durability::None => gyro_server::Flush::Done,
            Durability::Failing => gyro_server::Flush::Failed,
            Durability::Stalled(d) => {
                let d = *d;
                gyro_server::Flush::Sync(Box::new(move || {
                    std::thread::sleep(d);
                    Ok(())
                }))
            }
            Durability::Slow(n) => {
                let n = n.clone();
                gyro_server::Flush::Sync(Box::new(move || {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(())
                }))
            }
        }
    }
}

/// Routes by the last digit of the Subscription-Id-Data.
#[derive(Default)]
pub struct Echo(pub Durability);

impl Application for Echo {
    type Shard = EchoShard;
    fn shard(&self, index: usize, _count: usize) -> EchoShard {
        EchoShard {
            index,
            durability: self.0.clone(),
            dirty: false,
        }
    }
    fn route(&self, req: &Message<'_>, count: usize) -> Route {
        let shard = req
            .find(avp::SUBSCRIPTION_ID)
            .and_then(|s| s.child(avp::SUBSCRIPTION_ID_DATA))
            .and_then(|d| d.data().last().map(|b| *b as usize % count));
        let session = match req.find(avp::CC_REQUEST_TYPE).and_then(|t| t.u32().ok()) {
            Some(1) => SessionStep::Open,
            Some(2) => SessionStep::Continue,
            Some(3) => SessionStep::End,
            _ => SessionStep::None,
        };
        Route { shard, session }
    }
}

/// A configuration for tests: port 0 on loopback, short timers.
pub fn test_config(workers: usize) -> Config {
    let mut c = Config::default();
    c.server.listen = vec![SocketAddr::from(([127, 0, 0, 1], 0))];
    c.server.workers = workers;
    c.peers.watchdog_secs = std::time::Duration::from_secs(1);
    c.peers.watchdog_jitter_secs = std::time::Duration::ZERO;
    c.peers.handshake_timeout_secs = std::time::Duration::from_secs(1);
    c
}

/// A blocking Diameter client over a real socket.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
    next: u32,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        Client {
            stream,
            buf: Vec::new(),
            next: 1,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    pub fn ids(&mut self) -> (u32, u32) {
        self.next += 1;
        (self.next, self.next + 0x1000)
    }

    /// Reads one whole message; None when the server closed the connection.
    pub fn recv(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Ok(Some(n)) = frame_length(&self.buf, 1 << 20) {
                if self.buf.len() >= n {
                    return Some(self.buf.drain(..n).collect());
                }
            }
            let mut tmp = [0u8; 65536];
            match self.stream.read(&mut tmp) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
            }
        }
    }

    pub fn cer(&mut self, host: &str, apps: &[u32]) -> Vec<u8> {
        self.cer_with_state(host, apps, None)
    }

    /// [`Client::cer`] announcing Origin-State-Id `state`, when given.
    pub fn cer_with_state(&mut self, host: &str, apps: &[u32], state: Option<u32>) -> Vec<u8> {
        let (h, e2e) = self.ids();
        let mut b = BytesMut::new();
        let mut e = Encoder::request(
            &mut b,
            cmd::CAPABILITIES_EXCHANGE,
            app::COMMON,
            false,
            h,
            e2e,
        );
        e.str(avp::ORIGIN_HOST, host)
            .str(avp::ORIGIN_REALM, "test")
            .address(
                avp::HOST_IP_ADDRESS,
                &Address::from(std::net::IpAddr::from([127, 0, 0, 1])),
            )
            .u32(avp::VENDOR_ID, 0)
            .str(avp::PRODUCT_NAME, "test client");
        if let Some(state) = state {
            e.u32(avp::ORIGIN_STATE_ID, state);
        }
        for &a in apps {
            e.u32(avp::AUTH_APPLICATION_ID, a);
        }
        e.finish().unwrap();
        self.send(&b);
        self.recv().expect("CEA")
    }

    /// Sends a CER for application 4 and checks the CEA says 2001.
    pub fn open(addr: SocketAddr) -> Client {
        let mut c = Client::connect(addr);
        let cea = c.cer("client.test", &[4]);
        assert_eq!(result_code(&cea), Some(2001));
        c
    }

    /// Sends a DWR (or, with `cause`, a DPR with that Disconnect-Cause).
    pub fn send_peer_request(&mut self, cause: Option<i32>) {
        let (h, e2e) = self.ids();
        let code = if cause.is_some() {
            cmd::DISCONNECT_PEER
        } else {
            cmd::DEVICE_WATCHDOG
        };
        let mut b = BytesMut::new();
        let mut e = Encoder::request(&mut b, code, app::COMMON, false, h, e2e);
        e.str(avp::ORIGIN_HOST, "client.test")
            .str(avp::ORIGIN_REALM, "test");
        if let Some(c) = cause {
            e.i32(avp::DISCONNECT_CAUSE, c);
        }
        e.finish().unwrap();
        self.send(&b);
    }

    /// Answers a request from the server (DWR, DPR) with 2001.
    pub fn answer_ok(&mut self, request: &Message<'_>) {
        let mut b = BytesMut::new();
        let mut e = Encoder::answer(&mut b, request, false);
        e.u32(avp::RESULT_CODE, 2001)
            .str(avp::ORIGIN_HOST, "client.test")
            .str(avp::ORIGIN_REALM, "test");
        e.finish().unwrap();
        self.send(&b);
    }

    pub fn ccr(&mut self, session: &str, subscriber: &str, rtype: i32, number: u32) -> Vec<u8> {
        let (h, e2e) = self.ids();
        ccr_bytes(h, e2e, session, subscriber, rtype, number)
    }
}

pub fn ccr_bytes(
    h: u32,
    e2e: u32,
    session: &str,
    subscriber: &str,
    rtype: i32,
    number: u32,
) -> Vec<u8> {
    let mut b = BytesMut::new();
    let mut e = Encoder::request(
        &mut b,
        cmd::CREDIT_CONTROL,
        app::CREDIT_CONTROL,
        true,
        h,
        e2e,
    );
    e.str(avp::SESSION_ID, session)
        .str(avp::ORIGIN_HOST, "client.test")
        .str(avp::ORIGIN_REALM, "test")
        .str(avp::DESTINATION_REALM, "gyro.test")
        .u32(avp::AUTH_APPLICATION_ID, 4)
        .str(avp::SERVICE_CONTEXT_ID, "32251@3gpp.org")
        .i32(avp::CC_REQUEST_TYPE, rtype)
        .u32(avp::CC_REQUEST_NUMBER, number);
    if !subscriber.is_empty() {
        let g = e.begin_group(avp::SUBSCRIPTION_ID);
        e.i32(avp::SUBSCRIPTION_ID_TYPE, 0)
            .str(avp::SUBSCRIPTION_ID_DATA, subscriber);
        e.end_group(g);
    }
    if rtype == 4 {
        e.i32(avp::REQUESTED_ACTION, 0);
    }
    e.finish().unwrap();
    b.to_vec()
}

pub fn parse(b: &[u8]) -> Message<'_> {
    Message::parse(b).expect("valid message")
}

pub fn result_code(b: &[u8]) -> Option<u32> {
    parse(b).find(avp::RESULT_CODE)?.u32().ok()
}

pub fn avp_u32(b: &[u8], id: gyro_diameter::AvpId) -> Option<u32> {
    parse(b).find(id)?.u32().ok()
}
