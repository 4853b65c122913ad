//! A gateway's side of Gy against a real `gyro serve`: its connection
//! (the CER answered 2001), its data CCRs and their answers.

use std::net::SocketAddr;

use bytes::BytesMut;
use gyro_charging::{CcRequest, RequestType};
use gyro_ocs::gy::encode_ccr;

use super::common::{result_code, Client};

/// A gateway of the tests: its Origin-Host and Origin-Realm, and the base
/// of its Hop-by-Hop and End-to-End Identifiers (`ids | request number`).
pub struct Gateway {
    pub host: &'static str,
    pub realm: &'static str,
    pub ids: u32,
}

impl Gateway {
    /// Connects to `addr` and exchanges CER/CEA for application 4.
    pub fn connect(&self, addr: SocketAddr) -> Client {
        connect(addr, self.host)
    }

    /// A data CCR on rating group 10 for `msisdn` (see
    /// [`super::data_ccr`]).
    pub fn data_ccr(
        &self,
        session: &str,
        msisdn: &str,
        kind: RequestType,
        number: u32,
        used: u64,
    ) -> CcRequest {
        super::data_ccr(self.host, self.ids, session, msisdn, kind, number, used)
    }

    /// `req` encoded, its Hop-by-Hop Identifier `ids | number`.
    pub fn encode(&self, req: &CcRequest, number: u32) -> Vec<u8> {
        encode(req, self.ids | number, self.realm)
    }
}

/// Connects to `addr` as `origin_host` and exchanges CER/CEA for
/// application 4.
pub fn connect(addr: SocketAddr, origin_host: &str) -> Client {
    let mut c = Client::connect(addr);
    let cea = c.cer(origin_host, &[4]);
    assert_eq!(result_code(&cea), Some(2001), "CER of {origin_host}");
    c
}

/// `req` encoded from `origin_realm` to the realm gyro.test with the
/// Hop-by-Hop Identifier `hop`.
pub fn encode(req: &CcRequest, hop: u32, origin_realm: &str) -> Vec<u8> {
    let mut b = BytesMut::new();
    encode_ccr(&mut b, req, hop, origin_realm, "gyro.test").expect("encode");
    b.to_vec()
}

/// Sends a request and returns its answer.
pub fn exchange(c: &mut Client, request: &[u8]) -> Vec<u8> {
    c.send(request);
    c.recv().expect("an answer")
}

/// Sends a request and returns the Result-Code of its answer.
pub fn answer(c: &mut Client, request: &[u8]) -> u32 {
    result_code(&exchange(c, request)).expect("Result-Code")
}
