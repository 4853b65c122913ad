//! The peer state machine of RFC 6733 section 5 and the watchdog of RFC 3539,
//! sans-IO: capabilities exchange (CER/CEA), device watchdog (DWR/DWA) and
//! disconnection (DPR/DPA), for the responder (server) and the initiator
//! (client) side of one transport connection.
//!
//! The caller feeds whole received messages to [`Peer::handle`], calls
//! [`Peer::handle_timeout`] when [`Peer::poll_timeout`] says so, and sends
//! whatever the peer wrote into the output buffer. Time is passed in as
//! milliseconds on any monotonic clock; randomness (the watchdog jitter, the
//! first Hop-by-Hop Identifier) comes from a seed, so tests are deterministic.
//!
//! On a TLS/TCP connection (RFC 6733 section 13) the runtime hands the
//! identity of the verified client certificate to the responder
//! ([`Peer::set_certificate`]) before the CER arrives: the CER's
//! Origin-Host must then be one of the certificate's DNS names, or match
//! what [`PeerConfig::peer_identities`] expects of that peer, else the CER
//! is refused with DIAMETER_UNKNOWN_PEER (3010) and an Error-Message
//! saying why.
//!
//! What is not here: election between two connections of one peer (gyro
//! never opens connections to the clients it serves) and the three DWR
//! exchanges a reconnecting peer needs (the connection layer treats every
//! connection as new).

use std::net::IpAddr;

use bytes::BytesMut;

use crate::avp::Avp;
use crate::codes::{app, avp, cmd, result, VENDOR_3GPP};
use crate::encode::Encoder;
use crate::error::Result;
use crate::header::flags;
use crate::message::Message;
use crate::types::{identity_eq, Address};
use crate::validate::{encode_error_answer_with, Problem};

/// Disconnect-Cause values (RFC 6733 section 5.4.3).
pub mod disconnect_cause {
    /// The peer will restart; reconnecting is allowed.
    pub const REBOOTING: i32 = 0;
    /// The peer is busy; it should not reconnect.
    pub const BUSY: i32 = 1;
    /// The peer does not want to talk to us.
    pub const DO_NOT_WANT_TO_TALK_TO_YOU: i32 = 2;
}

/// Which end of the connection this peer state machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Accepted the connection; waits for a CER.
    Responder,
    /// Opened the connection; sends the CER.
    Initiator,
}

/// Local identity and policy for capabilities exchange and the watchdog.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// Our Origin-Host.
    pub origin_host: String,
    /// Our Origin-Realm.
    pub origin_realm: String,
    /// Our addresses for Host-IP-Address (one AVP each).
    pub host_ip_addresses: Vec<IpAddr>,
    /// Vendor-Id we announce (0 when none is assigned).
    pub vendor_id: u32,
    /// Product-Name.
    pub product_name: String,
    /// Firmware-Revision.
    pub firmware_revision: u32,
    /// Origin-State-Id: must grow on every restart that loses state.
    pub origin_state_id: u32,
    /// Auth applications we support (credit control: 4).
    pub auth_applications: Vec<u32>,
    /// Origin-Host values allowed past CER (case-insensitive); empty allows
    /// every peer.
    pub allowed_peers: Vec<String>,
    /// The certificate each named peer must present (TLS): a peer listed
    /// here is admitted only over a connection whose verified client
    /// certificate matches its entry. Empty by default.
    pub peer_identities: Vec<ExpectedIdentity>,
    /// Twinit: the watchdog interval in milliseconds before jitter
    /// (RFC 3539: default 30 s, at least 6 s).
    pub watchdog_ms: u64,
    /// Jitter applied to every watchdog interval, +/- this many milliseconds
    /// (RFC 3539: 2 s).
    pub watchdog_jitter_ms: u64,
    /// How long a responder waits for the CER, and anyone waits for a CEA
    /// or a DPA, before closing, in milliseconds.
    pub handshake_timeout_ms: u64,
}

impl PeerConfig {
    /// A configuration for a credit-control node with gyro's defaults.
    pub fn new(origin_host: &str, origin_realm: &str) -> Self {
        PeerConfig {
            origin_host: origin_host.to_string(),
            origin_realm: origin_realm.to_string(),
            host_ip_addresses: vec![IpAddr::from([127, 0, 0, 1])],
            vendor_id: 0,
            product_name: "gyro".to_string(),
            firmware_revision: 1,
            origin_state_id: 1,
            auth_applications: vec![app::CREDIT_CONTROL],
            allowed_peers: Vec::new(),
            peer_identities: Vec::new(),
            watchdog_ms: 30_000,
            watchdog_jitter_ms: 2_000,
            handshake_timeout_ms: 10_000,
        }
    }
}

/// What a verified TLS client certificate proves about the peer: the DNS
/// names of its subject alternative name extension and its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateIdentity {
    /// The DNS names (`dNSName` entries) of its subject alternative name
    /// extension, as written in the certificate.
    pub dns_names: Vec<String>,
    /// SHA-256 of the DER-encoded certificate.
    pub sha256: [u8; 32],
}

/// The certificate one peer must present, by Origin-Host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedIdentity {
    /// The peer's Origin-Host (case-insensitive).
    pub origin_host: String,
    /// A DNS name the certificate must carry among its subject alternative
    /// names (compared literally, case-insensitively: `*.example.net`
    /// names a wildcard certificate), instead of the Origin-Host itself.
    pub san: Option<String>,
    /// The SHA-256 of the DER certificate the peer must present.
    pub sha256: Option<[u8; 32]>,
}

/// Why the Origin-Host of a CER is not the identity its connection's
/// certificate proves, or `None` when it is. `cert` is the verified client
/// certificate of the connection, if any. Without an entry in
/// `config.peer_identities` for the host, a certificate must name the host
/// among its DNS names (exactly, or by a wildcard `*.` in place of the
/// host's first label), and a connection without one passes; with an
/// entry, a certificate is required and must match every part of it.
pub fn identity_refusal(
    config: &PeerConfig,
    cert: Option<&CertificateIdentity>,
    host: &str,
) -> Option<String> {
    let expected = config
        .peer_identities
        .iter()
        .find(|e| identity_eq(&e.origin_host, host));
    match (expected, cert) {
        (None, None) => None,
        (Some(_), None) => Some(format!(
            "{host} must present a client certificate (TLS): a certificate identity is \
             configured for it"
        )),
        (None, Some(c)) => {
            if c.dns_names.iter().any(|n| dns_name_matches(n, host)) {
                None
            } else {
                Some(format!(
                    "Origin-Host {host} is not a DNS name of the client certificate ({})",
                    name_list(&c.dns_names)
                ))
            }
        }
        (Some(e), Some(c)) => {
            if e.sha256.is_some_and(|fp| fp != c.sha256) {
                return Some(format!(
                    "the client certificate's SHA-256 fingerprint is not the one configured \
                     for {host}"
                ));
            }
            match &e.san {
                Some(san) if !c.dns_names.iter().any(|n| same_dns_name(n, san)) => Some(format!(
                    "the client certificate does not carry the DNS name {san} configured \
                         for {host} ({})",
                    name_list(&c.dns_names)
                )),
                _ => None,
            }
        }
    }
}

/// Case-insensitive equality of two DNS names, a trailing dot ignored.
fn same_dns_name(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// Whether the certificate's DNS name `name` covers `host`: the same name,
/// or `*.rest` for a host that is one more label before `rest`.
fn dns_name_matches(name: &str, host: &str) -> bool {
    if same_dns_name(name, host) {
        return true;
    }
    let Some(rest) = name.strip_prefix("*.") else {
        return false;
    };
    match host.split_once('.') {
        Some((first, tail)) => !first.is_empty() && rest.contains('.') && same_dns_name(rest, tail),
        None => false,
    }
}

/// The first few names, for an Error-Message.
fn name_list(names: &[String]) -> String {
    if names.is_empty() {
        return "it has none".to_string();
    }
    let mut s = names.iter().take(4).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 4 {
        s.push_str(", ...");
    }
    s
}

/// Connection state (RFC 6733 section 5.6, reduced to one connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Responder waiting for CER, or initiator waiting for CEA.
    Handshake,
    /// Capabilities exchanged: application messages may flow.
    Open,
    /// DPR sent or received: waiting for the DPA or for the close.
    Closing,
    /// Done: the caller closes the transport once the output is flushed.
    Closed,
}

/// What the caller must do after [`Peer::handle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The message was for the peer layer and is dealt with (any answer is
    /// in the output buffer).
    Handled,
    /// An application message for an open connection: process it.
    Application,
    /// Capabilities were exchanged; the connection is open (the CEA, if we
    /// are the responder, is in the output buffer).
    Opened,
    /// An answer that matches nothing we sent: drop it.
    Unexpected,
    /// Close the transport once the output buffer is flushed.
    Close(CloseReason),
}

/// Why a connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The first message was not a CER (or not a CEA for an initiator).
    NoCapabilitiesExchange,
    /// The CER was rejected with this Result-Code (CEA sent).
    Rejected(u32),
    /// The CEA we received carried this non-success Result-Code.
    RefusedByPeer(u32),
    /// A DPR/DPA exchange finished.
    Disconnected,
    /// The watchdog found the peer silent.
    WatchdogExpired,
    /// The handshake or the disconnection took too long.
    Timeout,
}

/// The peer state machine of one connection.
#[derive(Debug)]
pub struct Peer {
    role: Role,
    state: State,
    remote_host: Option<String>,
    remote_realm: Option<String>,
    /// The Origin-State-Id of the peer's CER, when it sent a non-zero one.
    remote_state: Option<u32>,
    /// Next Hop-by-Hop Identifier for requests we send.
    next_hbh: u32,
    /// Next End-to-End Identifier for requests we send.
    next_e2e: u32,
    /// Hop-by-Hop of our outstanding CER, DWR or DPR.
    pending: Option<(u32, u32)>,
    /// When the next timer fires (ms).
    deadline: u64,
    /// Watchdog expiries since the last message received.
    expiries: u8,
    /// The verified client certificate of the connection (TLS).
    certificate: Option<CertificateIdentity>,
    rng: fastrand::Rng,
}

impl Peer {
    /// A new connection's state machine. `now` is the current time in ms,
    /// `seed` any random value (it picks the first identifiers and the
    /// watchdog jitter).
    pub fn new(role: Role, config: &PeerConfig, now: u64, seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let first = rng.u64(..);
        // RFC 6733 section 3: End-to-End high 12 bits from the clock, low
        // 20 bits random.
        let e2e = (((now / 1000) as u32) << 20) | (first as u32 & 0x000F_FFFF);
        Peer {
            role,
            state: State::Handshake,
            remote_host: None,
            remote_realm: None,
            remote_state: None,
            next_hbh: (first >> 32) as u32,
            next_e2e: e2e,
            pending: None,
            deadline: now + config.handshake_timeout_ms,
            expiries: 0,
            certificate: None,
            rng,
        }
    }

    /// The identity of the connection's verified client certificate (TLS):
    /// a responder checks the CER's Origin-Host against it (see
    /// [`identity_refusal`]).
    pub fn set_certificate(&mut self, cert: CertificateIdentity) {
        self.certificate = Some(cert);
    }

    /// The verified client certificate's identity, if any.
    pub fn certificate(&self) -> Option<&CertificateIdentity> {
        self.certificate.as_ref()
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The peer's Origin-Host, once known.
    pub fn remote_host(&self) -> Option<&str> {
        self.remote_host.as_deref()
    }

    /// The peer's Origin-Realm, once known.
    pub fn remote_realm(&self) -> Option<&str> {
        self.remote_realm.as_deref()
    }

    /// The Origin-State-Id of the peer's CER: `None` when it sent none or
    /// 0, which means no inference about its sessions may be drawn from it
    /// (RFC 6733 section 8.16).
    pub fn remote_origin_state_id(&self) -> Option<u32> {
        self.remote_state
    }

    /// True while application requests may be sent to this peer: the
    /// connection is open and the watchdog has not marked it suspect.
    pub fn is_usable(&self) -> bool {
        self.state == State::Open && self.expiries < 2
    }

    /// A fresh (Hop-by-Hop, End-to-End) pair for a request we send.
    pub fn next_ids(&mut self) -> (u32, u32) {
        let ids = (self.next_hbh, self.next_e2e);
        self.next_hbh = self.next_hbh.wrapping_add(1);
        self.next_e2e = self.next_e2e.wrapping_add(1);
        ids
    }

    /// When [`Peer::handle_timeout`] must next be called (ms).
    pub fn poll_timeout(&self) -> Option<u64> {
        (self.state != State::Closed).then_some(self.deadline)
    }

    fn arm_watchdog(&mut self, config: &PeerConfig, now: u64) {
        let j = config.watchdog_jitter_ms;
        let jitter = if j == 0 { 0 } else { self.rng.u64(..=2 * j) };
        self.deadline = now + config.watchdog_ms.saturating_sub(j) + jitter;
    }

    /// Starts the connection as initiator: writes the CER.
    pub fn connect(&mut self, config: &PeerConfig, out: &mut BytesMut) -> Result<()> {
        let (hbh, e2e) = self.next_ids();
        let mut e = Encoder::request(
            out,
            cmd::CAPABILITIES_EXCHANGE,
            app::COMMON,
            false,
            hbh,
            e2e,
        );
        write_capabilities(&mut e, config);
        e.finish()?;
        self.pending = Some((cmd::CAPABILITIES_EXCHANGE, hbh));
        Ok(())
    }

    /// Starts a disconnection: writes a DPR with this Disconnect-Cause.
    pub fn disconnect(
        &mut self,
        config: &PeerConfig,
        cause: i32,
        now: u64,
        out: &mut BytesMut,
    ) -> Result<()> {
        if self.state != State::Open {
            self.state = State::Closed;
            return Ok(());
        }
        let (hbh, e2e) = self.next_ids();
        let mut e = Encoder::request(out, cmd::DISCONNECT_PEER, app::COMMON, false, hbh, e2e);
        e.str(avp::ORIGIN_HOST, &config.origin_host)
            .str(avp::ORIGIN_REALM, &config.origin_realm)
            .i32(avp::DISCONNECT_CAUSE, cause);
        e.finish()?;
        self.pending = Some((cmd::DISCONNECT_PEER, hbh));
        self.state = State::Closing;
        self.deadline = now + config.handshake_timeout_ms;
        Ok(())
    }

    /// Handles one received message (already framed and header-checked).
    pub fn handle(
        &mut self,
        config: &PeerConfig,
        msg: &Message<'_>,
        now: u64,
        out: &mut BytesMut,
    ) -> Result<Event> {
        self.heard(config, now);
        let code = msg.command_code();
        let is_request = msg.is_request();
        match (self.state, code, is_request) {
            (State::Closed, _, _) => Ok(Event::Close(CloseReason::Disconnected)),
            (State::Handshake, cmd::CAPABILITIES_EXCHANGE, true)
                if self.role == Role::Responder =>
            {
                self.on_cer(config, msg, now, out)
            }
            (State::Handshake, cmd::CAPABILITIES_EXCHANGE, false)
                if self.role == Role::Initiator =>
            {
                self.on_cea(config, msg, now)
            }
            (State::Handshake, _, _) => {
                self.state = State::Closed;
                Ok(Event::Close(CloseReason::NoCapabilitiesExchange))
            }
            (_, cmd::DEVICE_WATCHDOG, true) => {
                let mut e = Encoder::answer(out, msg, false);
                e.u32(avp::RESULT_CODE, result::SUCCESS);
                write_identity(&mut e, config);
                e.u32(avp::ORIGIN_STATE_ID, config.origin_state_id);
                e.finish()?;
                Ok(Event::Handled)
            }
            (_, cmd::DEVICE_WATCHDOG, false) => Ok(self.take_pending(cmd::DEVICE_WATCHDOG, msg)),
            (_, cmd::DISCONNECT_PEER, true) => {
                let mut e = Encoder::answer(out, msg, false);
                e.u32(avp::RESULT_CODE, result::SUCCESS);
                write_identity(&mut e, config);
                e.finish()?;
                // The DPR's sender closes the transport on our DPA; close
                // ourselves if it does not within the handshake timeout.
                self.state = State::Closing;
                self.deadline = now + config.handshake_timeout_ms;
                Ok(Event::Handled)
            }
            (_, cmd::DISCONNECT_PEER, false) => {
                if self.take_pending(cmd::DISCONNECT_PEER, msg) == Event::Handled {
                    self.state = State::Closed;
                    Ok(Event::Close(CloseReason::Disconnected))
                } else {
                    Ok(Event::Unexpected)
                }
            }
            (_, cmd::CAPABILITIES_EXCHANGE, true) => {
                // CER on an open connection is not allowed (RFC 6733 5.6.4
                // deprecates re-negotiation): refuse it in a whole CEA,
                // keep the connection.
                let mut e = Encoder::answer(out, msg, false);
                e.u32(avp::RESULT_CODE, result::UNABLE_TO_COMPLY);
                write_capabilities(&mut e, config);
                e.str(
                    avp::ERROR_MESSAGE,
                    "capabilities already exchanged on this connection",
                );
                e.finish()?;
                Ok(Event::Handled)
            }
            (_, cmd::CAPABILITIES_EXCHANGE, false) => Ok(Event::Unexpected),
            (State::Open | State::Closing, _, _) => Ok(Event::Application),
        }
    }

    /// A message arrived from the peer: on an open connection the
    /// watchdog starts over (RFC 3539 section 3.4.1: any traffic resets
    /// Tw). [`Peer::handle`] does this itself; the caller does it for a
    /// message it answers without handing it here (one that failed
    /// validation).
    pub fn heard(&mut self, config: &PeerConfig, now: u64) {
        if self.state == State::Open {
            self.expiries = 0;
            self.arm_watchdog(config, now);
        }
    }

    /// Refuses the CER `request` that failed validation with `problem`
    /// (RFC 6733 section 7): a 3xxx in the generic error answer (E bit
    /// set), any other code in a CEA that carries this node's
    /// capabilities as the CEA grammar requires, with the problem's
    /// Error-Message and Failed-AVP. Either way the connection closes: no
    /// capabilities were exchanged.
    pub fn refuse_cer(
        &mut self,
        config: &PeerConfig,
        request: &[u8],
        problem: &Problem<'_>,
        out: &mut BytesMut,
    ) -> Result<Event> {
        let (host, realm) = (&config.origin_host, &config.origin_realm);
        if problem.is_protocol_error() {
            encode_error_answer_with(out, request, problem, host, realm, |_| {})?;
        } else {
            encode_error_answer_with(out, request, problem, host, realm, |e| {
                write_capabilities_after_identity(e, config)
            })?;
        }
        self.state = State::Closed;
        Ok(Event::Close(CloseReason::Rejected(problem.result_code)))
    }

    fn take_pending(&mut self, code: u32, msg: &Message<'_>) -> Event {
        match self.pending {
            Some((c, hbh)) if c == code && hbh == msg.header().hop_by_hop => {
                self.pending = None;
                Event::Handled
            }
            _ => Event::Unexpected,
        }
    }

    fn on_cer(
        &mut self,
        config: &PeerConfig,
        msg: &Message<'_>,
        now: u64,
        out: &mut BytesMut,
    ) -> Result<Event> {
        let host = msg.find(avp::ORIGIN_HOST).and_then(|a| a.identity().ok());
        let realm = msg.find(avp::ORIGIN_REALM).and_then(|a| a.identity().ok());
        self.remote_host = host.map(str::to_string);
        self.remote_realm = realm.map(str::to_string);
        self.remote_state = msg
            .find(avp::ORIGIN_STATE_ID)
            .and_then(|a| a.u32().ok())
            .filter(|&s| s != 0);
        let (code, why) = cer_result(config, self.certificate.as_ref(), msg);
        let error_bit = (3000..4000).contains(&code);
        let mut e = Encoder::answer(out, msg, error_bit);
        e.u32(avp::RESULT_CODE, code);
        write_capabilities(&mut e, config);
        if let Some(text) = &why {
            e.str(avp::ERROR_MESSAGE, text);
        } else if code != result::SUCCESS {
            let text = match code {
                result::UNKNOWN_PEER => "peer not in the allowed list",
                result::NO_COMMON_APPLICATION => {
                    "no common application: gyro serves Credit-Control (4)"
                }
                result::NO_COMMON_SECURITY => "no common security: only NO_INBAND_SECURITY (0)",
                _ => "CER is missing a required AVP",
            };
            e.str(avp::ERROR_MESSAGE, text);
            if code == result::MISSING_AVP {
                write_missing_cer_avp(&mut e, msg);
            }
        }
        e.finish()?;
        if code == result::SUCCESS {
            self.state = State::Open;
            self.arm_watchdog(config, now);
            Ok(Event::Opened)
        } else {
            self.state = State::Closed;
            Ok(Event::Close(CloseReason::Rejected(code)))
        }
    }

    /// Refuses a capabilities exchange this responder has just accepted
    /// ([`Event::Opened`]) before its CEA left, for a reason of the
    /// runtime's (a connection limit): writes a CEA with `code` and `text`
    /// answering the CER whose identifiers were `hop_by_hop` and
    /// `end_to_end`, and closes. The caller discards the first CEA.
    pub fn refuse_opened(
        &mut self,
        config: &PeerConfig,
        (hop_by_hop, end_to_end): (u32, u32),
        code: u32,
        text: &str,
        out: &mut BytesMut,
    ) -> Result<Event> {
        let error_bit = if (3000..4000).contains(&code) {
            flags::ERROR
        } else {
            0
        };
        let mut e = Encoder::new(
            out,
            error_bit,
            cmd::CAPABILITIES_EXCHANGE,
            0,
            hop_by_hop,
            end_to_end,
        );
        e.u32(avp::RESULT_CODE, code);
        write_capabilities(&mut e, config);
        e.str(avp::ERROR_MESSAGE, text);
        e.finish()?;
        self.state = State::Closed;
        Ok(Event::Close(CloseReason::Rejected(code)))
    }

    fn on_cea(&mut self, config: &PeerConfig, msg: &Message<'_>, now: u64) -> Result<Event> {
        if self.take_pending(cmd::CAPABILITIES_EXCHANGE, msg) != Event::Handled {
            return Ok(Event::Unexpected);
        }
        self.remote_host = msg
            .find(avp::ORIGIN_HOST)
            .and_then(|a| a.identity().ok())
            .map(str::to_string);
        self.remote_realm = msg
            .find(avp::ORIGIN_REALM)
            .and_then(|a| a.identity().ok())
            .map(str::to_string);
        let code = msg
            .find(avp::RESULT_CODE)
            .and_then(|a| a.u32().ok())
            .unwrap_or(result::MISSING_AVP);
        if code == result::SUCCESS {
            self.state = State::Open;
            self.arm_watchdog(config, now);
            Ok(Event::Opened)
        } else {
            self.state = State::Closed;
            Ok(Event::Close(CloseReason::RefusedByPeer(code)))
        }
    }

    /// Handles the timer: sends a DWR, marks the peer suspect, or closes.
    pub fn handle_timeout(
        &mut self,
        config: &PeerConfig,
        now: u64,
        out: &mut BytesMut,
    ) -> Result<Option<Event>> {
        if now < self.deadline {
            return Ok(None);
        }
        match self.state {
            State::Handshake | State::Closing => {
                self.state = State::Closed;
                Ok(Some(Event::Close(CloseReason::Timeout)))
            }
            State::Closed => Ok(None),
            State::Open => {
                self.expiries += 1;
                let dwr_pending = matches!(self.pending, Some((cmd::DEVICE_WATCHDOG, _)));
                if !dwr_pending {
                    let (hbh, e2e) = self.next_ids();
                    let mut e =
                        Encoder::request(out, cmd::DEVICE_WATCHDOG, app::COMMON, false, hbh, e2e);
                    write_identity(&mut e, config);
                    e.u32(avp::ORIGIN_STATE_ID, config.origin_state_id);
                    e.finish()?;
                    self.pending = Some((cmd::DEVICE_WATCHDOG, hbh));
                    self.expiries = 1;
                    self.arm_watchdog(config, now);
                    Ok(Some(Event::Handled))
                } else if self.expiries >= 3 {
                    // The DWR went unanswered for two watchdog intervals.
                    self.state = State::Closed;
                    Ok(Some(Event::Close(CloseReason::WatchdogExpired)))
                } else {
                    // Suspect: no new requests (see is_usable), wait once more.
                    self.arm_watchdog(config, now);
                    Ok(Some(Event::Handled))
                }
            }
        }
    }
}

fn write_identity(e: &mut Encoder<'_>, config: &PeerConfig) {
    e.str(avp::ORIGIN_HOST, &config.origin_host)
        .str(avp::ORIGIN_REALM, &config.origin_realm);
}

/// Origin-Host, Origin-Realm, Host-IP-Address, Vendor-Id, Product-Name,
/// Origin-State-Id, Supported-Vendor-Id, the applications and
/// Firmware-Revision: the body of a CER and of a CEA after its Result-Code.
fn write_capabilities(e: &mut Encoder<'_>, config: &PeerConfig) {
    write_identity(e, config);
    write_capabilities_after_identity(e, config);
}

/// [`write_capabilities`] after Origin-Host and Origin-Realm.
fn write_capabilities_after_identity(e: &mut Encoder<'_>, config: &PeerConfig) {
    for ip in &config.host_ip_addresses {
        e.address(avp::HOST_IP_ADDRESS, &Address::from(*ip));
    }
    e.u32(avp::VENDOR_ID, config.vendor_id)
        .str(avp::PRODUCT_NAME, &config.product_name)
        .u32(avp::ORIGIN_STATE_ID, config.origin_state_id)
        .u32(avp::SUPPORTED_VENDOR_ID, VENDOR_3GPP);
    for &app_id in &config.auth_applications {
        e.u32(avp::AUTH_APPLICATION_ID, app_id);
    }
    for &app_id in &config.auth_applications {
        let g = e.begin_group(avp::VENDOR_SPECIFIC_APPLICATION_ID);
        e.u32(avp::VENDOR_ID, VENDOR_3GPP)
            .u32(avp::AUTH_APPLICATION_ID, app_id);
        e.end_group(g);
    }
    e.u32(avp::FIRMWARE_REVISION, config.firmware_revision);
}

/// The Result-Code for a CER: 5005 when a required AVP is missing, 3010 for
/// a peer not allowed or whose certificate does not prove its Origin-Host
/// (with the reason), 5010 without a common application, 5017 without a
/// common security mechanism, 2001 otherwise.
fn cer_result(
    config: &PeerConfig,
    cert: Option<&CertificateIdentity>,
    msg: &Message<'_>,
) -> (u32, Option<String>) {
    if first_missing_cer_avp(msg).is_some() {
        return (result::MISSING_AVP, None);
    }
    let host = msg
        .find(avp::ORIGIN_HOST)
        .and_then(|a| a.identity().ok())
        .unwrap_or("");
    if !config.allowed_peers.is_empty()
        && !config.allowed_peers.iter().any(|p| identity_eq(p, host))
    {
        return (result::UNKNOWN_PEER, None);
    }
    if let Some(why) = identity_refusal(config, cert, host) {
        return (result::UNKNOWN_PEER, Some(why));
    }
    let mut common = false;
    let mut offers_security = false;
    let mut no_inband = false;
    let mut check = |a: &Avp<'_>| {
        if let Ok(id) = a.u32() {
            common |= id == app::RELAY || config.auth_applications.contains(&id);
        }
    };
    for a in msg.avps().flatten() {
        match (a.code(), a.vendor_id()) {
            (258, 0) | (259, 0) => check(&a),
            (260, 0) => {
                for c in a.grouped().flatten() {
                    if matches!((c.code(), c.vendor_id()), (258, 0) | (259, 0)) {
                        check(&c);
                    }
                }
            }
            (299, 0) => {
                offers_security = true;
                no_inband |= a.u32().ok() == Some(0);
            }
            _ => {}
        }
    }
    let code = if !common {
        result::NO_COMMON_APPLICATION
    } else if offers_security && !no_inband {
        result::NO_COMMON_SECURITY
    } else {
        result::SUCCESS
    };
    (code, None)
}

const CER_REQUIRED: [crate::codes::AvpId; 5] = [
    avp::ORIGIN_HOST,
    avp::ORIGIN_REALM,
    avp::HOST_IP_ADDRESS,
    avp::VENDOR_ID,
    avp::PRODUCT_NAME,
];

fn first_missing_cer_avp(msg: &Message<'_>) -> Option<crate::codes::AvpId> {
    CER_REQUIRED.into_iter().find(|id| msg.find(*id).is_none())
}

fn write_missing_cer_avp(e: &mut Encoder<'_>, msg: &Message<'_>) {
    if let Some(id) = first_missing_cer_avp(msg) {
        let g = e.begin_group(avp::FAILED_AVP);
        // RFC 6733 section 7.5: the missing AVP with a zero-filled minimum
        // payload.
        let zeros = [0u8; 6];
        let n = if id == avp::HOST_IP_ADDRESS {
            6
        } else if id == avp::VENDOR_ID {
            4
        } else {
            0
        };
        e.octets(id, &zeros[..n]);
        e.end_group(g);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(host: &str) -> PeerConfig {
        let mut c = PeerConfig::new(host, "example.net");
        c.watchdog_ms = 6_000;
        c.watchdog_jitter_ms = 0;
        c
    }

    fn parse(buf: &[u8]) -> Message<'_> {
        Message::parse(buf).expect("valid message")
    }

    fn result_code(buf: &[u8]) -> u32 {
        parse(buf).find(avp::RESULT_CODE).unwrap().u32().unwrap()
    }

    /// Runs CER/CEA between a client and a server; returns both peers open.
    fn open_pair(server_cfg: &PeerConfig, client_cfg: &PeerConfig) -> (Peer, Peer) {
        let mut client = Peer::new(Role::Initiator, client_cfg, 0, 7);
        let mut server = Peer::new(Role::Responder, server_cfg, 0, 9);
        let mut cer = BytesMut::new();
        client.connect(client_cfg, &mut cer).unwrap();
        let mut cea = BytesMut::new();
        assert_eq!(
            server
                .handle(server_cfg, &parse(&cer), 0, &mut cea)
                .unwrap(),
            Event::Opened
        );
        assert_eq!(result_code(&cea), 2001);
        let mut none = BytesMut::new();
        assert_eq!(
            client
                .handle(client_cfg, &parse(&cea), 0, &mut none)
                .unwrap(),
            Event::Opened
        );
        assert_eq!(server.remote_host(), Some("client.example.net"));
        assert_eq!(client.remote_host(), Some("server.example.net"));
        (server, client)
    }

    #[test]
    fn capabilities_exchange_opens_both_ends() {
        let (s, c) = open_pair(&cfg("server.example.net"), &cfg("client.example.net"));
        assert_eq!((s.state(), c.state()), (State::Open, State::Open));
    }

    #[test]
    fn cea_advertises_credit_control_and_3gpp() {
        let server_cfg = cfg("server.example.net");
        let client_cfg = cfg("client.example.net");
        let mut client = Peer::new(Role::Initiator, &client_cfg, 0, 7);
        let mut server = Peer::new(Role::Responder, &server_cfg, 0, 9);
        let mut cer = BytesMut::new();
        client.connect(&client_cfg, &mut cer).unwrap();
        let mut cea = BytesMut::new();
        server
            .handle(&server_cfg, &parse(&cer), 0, &mut cea)
            .unwrap();
        let m = parse(&cea);
        assert_eq!(m.find(avp::AUTH_APPLICATION_ID).unwrap().u32().unwrap(), 4);
        assert_eq!(
            m.find(avp::SUPPORTED_VENDOR_ID).unwrap().u32().unwrap(),
            10415
        );
        let vsai = m.find(avp::VENDOR_SPECIFIC_APPLICATION_ID).unwrap();
        assert_eq!(
            vsai.child(avp::AUTH_APPLICATION_ID).unwrap().u32().unwrap(),
            4
        );
        assert!(!m.find(avp::PRODUCT_NAME).unwrap().is_mandatory());
        assert!(!m.find(avp::FIRMWARE_REVISION).unwrap().is_mandatory());
        assert_eq!(m.header().flags, 0);
    }

    #[test]
    fn unknown_peer_gets_3010_with_e_bit_and_close() {
        let mut server_cfg = cfg("server.example.net");
        server_cfg.allowed_peers = vec!["PGW.example.net".into()];
        let client_cfg = cfg("client.example.net");
        let mut client = Peer::new(Role::Initiator, &client_cfg, 0, 7);
        let mut server = Peer::new(Role::Responder, &server_cfg, 0, 9);
        let mut cer = BytesMut::new();
        client.connect(&client_cfg, &mut cer).unwrap();
        let mut cea = BytesMut::new();
        let ev = server
            .handle(&server_cfg, &parse(&cer), 0, &mut cea)
            .unwrap();
        assert_eq!(ev, Event::Close(CloseReason::Rejected(3010)));
        assert_eq!(result_code(&cea), 3010);
        assert!(parse(&cea).header().is_error());
    }

    /// Sends a CER from `host` to a responder whose connection carries
    /// `cert`; returns the CEA's Result-Code, its Error-Message and the
    /// event.
    fn cer_with_certificate(
        server_cfg: &PeerConfig,
        cert: Option<CertificateIdentity>,
        host: &str,
    ) -> (u32, Option<String>, Event) {
        let client_cfg = cfg(host);
        let mut client = Peer::new(Role::Initiator, &client_cfg, 0, 7);
        let mut server = Peer::new(Role::Responder, server_cfg, 0, 9);
        if let Some(c) = cert {
            server.set_certificate(c);
        }
        let mut cer = BytesMut::new();
        client.connect(&client_cfg, &mut cer).unwrap();
        let mut cea = BytesMut::new();
        let ev = server
            .handle(server_cfg, &parse(&cer), 0, &mut cea)
            .unwrap();
        let m = parse(&cea);
        let text = m
            .find(avp::ERROR_MESSAGE)
            .map(|a| String::from_utf8_lossy(a.data()).into_owned());
        assert_eq!(m.header().is_error(), result_code(&cea) == 3010);
        (result_code(&cea), text, ev)
    }

    fn cert(names: &[&str], fp: u8) -> CertificateIdentity {
        CertificateIdentity {
            dns_names: names.iter().map(|n| n.to_string()).collect(),
            sha256: [fp; 32],
        }
    }

    #[test]
    fn certificate_must_name_the_origin_host() {
        let s = cfg("server.example.net");
        let c = cert(&["PGW1.example.net"], 1);
        let (code, text, ev) = cer_with_certificate(&s, Some(c.clone()), "pgw1.example.net");
        assert_eq!((code, text, ev), (2001, None, Event::Opened));
        let (code, text, ev) = cer_with_certificate(&s, Some(c), "pgw2.example.net");
        assert_eq!(code, 3010);
        assert_eq!(ev, Event::Close(CloseReason::Rejected(3010)));
        let text = text.unwrap();
        assert!(
            text.contains("pgw2.example.net") && text.contains("PGW1.example.net"),
            "{text}"
        );
        // No certificate (plain TCP, or TLS without client authentication):
        // nothing to check.
        assert_eq!(cer_with_certificate(&s, None, "pgw2.example.net").0, 2001);
    }

    #[test]
    fn wildcard_certificate_names_cover_one_label() {
        let s = cfg("server.example.net");
        let c = cert(&["*.example.net"], 1);
        assert_eq!(
            cer_with_certificate(&s, Some(c.clone()), "pgw1.example.net").0,
            2001
        );
        assert_eq!(
            cer_with_certificate(&s, Some(c.clone()), "a.pgw1.example.net").0,
            3010
        );
        assert_eq!(cer_with_certificate(&s, Some(c), "example.net").0, 3010);
        let tld = cert(&["*.net"], 1);
        assert_eq!(cer_with_certificate(&s, Some(tld), "example.net").0, 3010);
    }

    #[test]
    fn configured_fingerprint_and_san_replace_the_name_check() {
        let mut s = cfg("server.example.net");
        s.peer_identities = vec![
            ExpectedIdentity {
                origin_host: "pgw1.example.net".into(),
                san: None,
                sha256: Some([7; 32]),
            },
            ExpectedIdentity {
                origin_host: "pgw2.example.net".into(),
                san: Some("gateways.example.net".into()),
                sha256: None,
            },
        ];
        // The fingerprint admits whatever names the certificate has.
        let (code, _, _) = cer_with_certificate(&s, Some(cert(&["other"], 7)), "PGW1.example.net");
        assert_eq!(code, 2001);
        let (code, text, _) =
            cer_with_certificate(&s, Some(cert(&["pgw1.example.net"], 8)), "pgw1.example.net");
        assert_eq!(code, 3010);
        assert!(text.unwrap().contains("fingerprint"));
        // The configured SAN, not the Origin-Host.
        let gw = cert(&["gateways.example.net"], 1);
        assert_eq!(
            cer_with_certificate(&s, Some(gw), "pgw2.example.net").0,
            2001
        );
        let own = cert(&["pgw2.example.net"], 1);
        let (code, text, _) = cer_with_certificate(&s, Some(own), "pgw2.example.net");
        assert_eq!(code, 3010);
        assert!(text.unwrap().contains("gateways.example.net"));
        // A peer with an entry needs a certificate at all.
        let (code, text, _) = cer_with_certificate(&s, None, "pgw1.example.net");
        assert_eq!(code, 3010);
        assert!(text.unwrap().contains("must present a client certificate"));
        // Others are checked by name as before.
        let c = cert(&["pgw3.example.net"], 1);
        assert_eq!(
            cer_with_certificate(&s, Some(c), "pgw3.example.net").0,
            2001
        );
    }

    #[test]
    fn allowed_list_is_checked_before_the_certificate() {
        let mut s = cfg("server.example.net");
        s.allowed_peers = vec!["pgw1.example.net".into()];
        let (code, text, _) =
            cer_with_certificate(&s, Some(cert(&["pgw9.example.net"], 1)), "pgw9.example.net");
        assert_eq!(
            (code, text.as_deref()),
            (3010, Some("peer not in the allowed list"))
        );
    }

    #[test]
    fn allowed_peers_compare_case_insensitively() {
        let mut server_cfg = cfg("server.example.net");
        server_cfg.allowed_peers = vec!["CLIENT.example.NET".into()];
        open_pair(&server_cfg, &cfg("client.example.net"));
    }

    #[test]
    fn no_common_application_gets_5010_without_e_bit() {
        let server_cfg = cfg("server.example.net");
        let mut client_cfg = cfg("client.example.net");
        client_cfg.auth_applications = vec![16777238];
        let mut client = Peer::new(Role::Initiator, &client_cfg, 0, 7);
        let mut server = Peer::new(Role::Responder, &server_cfg, 0, 9);
        let mut cer = BytesMut::new();
        client.connect(&client_cfg, &mut cer).unwrap();
        let mut cea = BytesMut::new();
        let ev = server
            .handle(&server_cfg, &parse(&cer), 0, &mut cea)
            .unwrap();
        assert_eq!(ev, Event::Close(CloseReason::Rejected(5010)));
        assert_eq!(result_code(&cea), 5010);
        assert!(!parse(&cea).header().is_error());
        // And the client sees the refusal.
        let mut none = BytesMut::new();
        assert_eq!(
            client
                .handle(&client_cfg, &parse(&cea), 0, &mut none)
                .unwrap(),
            Event::Close(CloseReason::RefusedByPeer(5010))
        );
    }

    #[test]
    fn cer_without_product_name_gets_5005_with_failed_avp() {
        let server_cfg = cfg("server.example.net");
        let mut cer = BytesMut::new();
        let mut e = Encoder::request(&mut cer, 257, 0, false, 1, 1);
        e.str(avp::ORIGIN_HOST, "c.example.net")
            .str(avp::ORIGIN_REALM, "example.net")
            .address(
                avp::HOST_IP_ADDRESS,
                &Address::from(IpAddr::from([127, 0, 0, 1])),
            )
            .u32(avp::VENDOR_ID, 0)
            .u32(avp::AUTH_APPLICATION_ID, 4);
        e.finish().unwrap();
        let mut server = Peer::new(Role::Responder, &server_cfg, 0, 9);
        let mut cea = BytesMut::new();
        let ev = server
            .handle(&server_cfg, &parse(&cer), 0, &mut cea)
            .unwrap();
        assert_eq!(ev, Event::Close(CloseReason::Rejected(5005)));
        let failed = parse(&cea).find(avp::FAILED_AVP).unwrap();
        assert_eq!(failed.child(avp::PRODUCT_NAME).unwrap().data(), b"");
    }

    #[test]
    fn first_message_other_than_cer_closes() {
        let server_cfg = cfg("server.example.net");
        let mut dwr = BytesMut::new();
        let mut e = Encoder::request(&mut dwr, 280, 0, false, 1, 1);
        write_identity(&mut e, &cfg("c.example.net"));
        e.finish().unwrap();
        let mut server = Peer::new(Role::Responder, &server_cfg, 0, 9);
        let mut out = BytesMut::new();
        assert_eq!(
            server
                .handle(&server_cfg, &parse(&dwr), 0, &mut out)
                .unwrap(),
            Event::Close(CloseReason::NoCapabilitiesExchange)
        );
        assert!(out.is_empty());
    }

    #[test]
    fn no_cer_in_time_closes() {
        let server_cfg = cfg("server.example.net");
        let mut server = Peer::new(Role::Responder, &server_cfg, 0, 9);
        let mut out = BytesMut::new();
        let t = server.poll_timeout().unwrap();
        assert_eq!(
            server.handle_timeout(&server_cfg, t - 1, &mut out).unwrap(),
            None
        );
        assert_eq!(
            server.handle_timeout(&server_cfg, t, &mut out).unwrap(),
            Some(Event::Close(CloseReason::Timeout))
        );
    }

    #[test]
    fn watchdog_answers_sends_and_drops_silent_peer() {
        let scfg = cfg("server.example.net");
        let ccfg = cfg("client.example.net");
        let (mut server, mut client) = open_pair(&scfg, &ccfg);
        // Idle for Tw: the server sends a DWR, the client answers it.
        let t = server.poll_timeout().unwrap();
        assert_eq!(t, 6_000);
        let mut dwr = BytesMut::new();
        server.handle_timeout(&scfg, t, &mut dwr).unwrap();
        assert_eq!(parse(&dwr).command_code(), 280);
        assert!(parse(&dwr).is_request());
        let mut dwa = BytesMut::new();
        assert_eq!(
            client.handle(&ccfg, &parse(&dwr), t, &mut dwa).unwrap(),
            Event::Handled
        );
        assert_eq!(result_code(&dwa), 2001);
        let mut none = BytesMut::new();
        assert_eq!(
            server
                .handle(&scfg, &parse(&dwa), t + 10, &mut none)
                .unwrap(),
            Event::Handled
        );
        assert!(server.is_usable());
        // Now the client goes silent: DWR, suspect, then close after 2 Tw.
        let mut out = BytesMut::new();
        let t1 = server.poll_timeout().unwrap();
        server.handle_timeout(&scfg, t1, &mut out).unwrap();
        assert!(!out.is_empty());
        let t2 = server.poll_timeout().unwrap();
        assert_eq!(
            server.handle_timeout(&scfg, t2, &mut out).unwrap(),
            Some(Event::Handled)
        );
        assert!(!server.is_usable());
        let t3 = server.poll_timeout().unwrap();
        assert_eq!(
            server.handle_timeout(&scfg, t3, &mut out).unwrap(),
            Some(Event::Close(CloseReason::WatchdogExpired))
        );
        assert_eq!(t3 - t1, 12_000);
    }

    #[test]
    fn watchdog_jitter_stays_within_two_seconds() {
        let mut c = cfg("s.example.net");
        c.watchdog_ms = 30_000;
        c.watchdog_jitter_ms = 2_000;
        for seed in 0..200 {
            let mut p = Peer::new(Role::Responder, &c, 0, seed);
            p.state = State::Open;
            p.arm_watchdog(&c, 1_000);
            let d = p.poll_timeout().unwrap() - 1_000;
            assert!((28_000..=32_000).contains(&d), "{d}");
        }
    }

    #[test]
    fn dpr_both_ways() {
        let scfg = cfg("server.example.net");
        let ccfg = cfg("client.example.net");
        // Client disconnects.
        let (mut server, mut client) = open_pair(&scfg, &ccfg);
        let mut dpr = BytesMut::new();
        client
            .disconnect(&ccfg, disconnect_cause::REBOOTING, 5, &mut dpr)
            .unwrap();
        let m = parse(&dpr);
        assert_eq!(m.find(avp::DISCONNECT_CAUSE).unwrap().i32().unwrap(), 0);
        let mut dpa = BytesMut::new();
        assert_eq!(
            server.handle(&scfg, &m, 5, &mut dpa).unwrap(),
            Event::Handled
        );
        assert_eq!(server.state(), State::Closing);
        assert_eq!(result_code(&dpa), 2001);
        let mut none = BytesMut::new();
        assert_eq!(
            client.handle(&ccfg, &parse(&dpa), 6, &mut none).unwrap(),
            Event::Close(CloseReason::Disconnected)
        );
        // Server disconnects.
        let (mut server, mut client) = open_pair(&scfg, &ccfg);
        let mut dpr = BytesMut::new();
        server
            .disconnect(&scfg, disconnect_cause::BUSY, 5, &mut dpr)
            .unwrap();
        let mut dpa = BytesMut::new();
        client.handle(&ccfg, &parse(&dpr), 5, &mut dpa).unwrap();
        assert_eq!(
            server.handle(&scfg, &parse(&dpa), 6, &mut none).unwrap(),
            Event::Close(CloseReason::Disconnected)
        );
    }

    #[test]
    fn application_messages_pass_only_when_open() {
        let scfg = cfg("server.example.net");
        let ccfg = cfg("client.example.net");
        let (mut server, _) = open_pair(&scfg, &ccfg);
        let mut ccr = BytesMut::new();
        Encoder::request(&mut ccr, 272, 4, true, 5, 5)
            .finish()
            .unwrap();
        let mut out = BytesMut::new();
        assert_eq!(
            server.handle(&scfg, &parse(&ccr), 1, &mut out).unwrap(),
            Event::Application
        );
        assert!(out.is_empty());
    }

    #[test]
    fn unmatched_answers_are_unexpected() {
        let scfg = cfg("server.example.net");
        let ccfg = cfg("client.example.net");
        let (mut server, _) = open_pair(&scfg, &ccfg);
        let mut dwa = BytesMut::new();
        Encoder::new(&mut dwa, 0, 280, 0, 12345, 1)
            .finish()
            .unwrap();
        let mut out = BytesMut::new();
        assert_eq!(
            server.handle(&scfg, &parse(&dwa), 1, &mut out).unwrap(),
            Event::Unexpected
        );
    }

    #[test]
    fn hop_by_hop_increments() {
        let c = cfg("s.example.net");
        let mut p = Peer::new(Role::Initiator, &c, 0, 42);
        let (a, x) = p.next_ids();
        let (b, y) = p.next_ids();
        assert_eq!((b, y), (a.wrapping_add(1), x.wrapping_add(1)));
    }
}
