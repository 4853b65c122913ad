//! One Diameter transport connection, sans-IO: framing of the byte stream,
//! the peer state machine ([`crate::peer`]), validation of every received
//! request (once), and the queue of bytes to send.
//!
//! The runtime that owns the socket drives a [`Connection`] like this:
//!
//! * received bytes go into [`Connection::read_buffer`] (a socket can read
//!   straight into it) followed by [`Connection::handle_read`], or are
//!   copied in by [`Connection::handle_data`];
//! * [`Connection::poll_event`] is called until it returns `None`: it frames
//!   one message at a time, lets the peer layer answer CER, DWR and DPR,
//!   validates application requests and hands out what the application must
//!   see ([`Event`]). Processing is lazy, one message per call, so the
//!   application's answers are queued in the order the requests arrived and
//!   a DPA never overtakes the answers to the requests before its DPR;
//! * the application queues its answers (and, as a client, its requests)
//!   with [`Connection::send_with`] or [`Connection::send`];
//! * [`Connection::poll_transmit`] hands out everything queued for the
//!   socket, as one refcounted buffer;
//! * [`Connection::poll_timeout`] says when [`Connection::handle_timeout`]
//!   must run next (the watchdog, the handshake and disconnection limits,
//!   the incomplete-message limit);
//! * [`Connection::send_request`] queues a request this endpoint starts
//!   (a server's RAR or ASR): it gets a fresh Hop-by-Hop Identifier, and
//!   its answer comes back as [`Event::Answer`], or
//!   [`Event::AnswerTimeout`] when none arrives in time;
//! * [`Connection::close`] starts a disconnection (DPR);
//! * [`Connection::set_reading`] tells the connection whether the runtime
//!   reads at all (it stops for backpressure): the time a partial message
//!   may take to complete only runs while it does;
//! * [`Connection::shed_until`] sheds load: application requests up to a
//!   point of the received stream (those that waited too long, as the
//!   runtime judges from [`Connection::received`] and its clock) are
//!   answered DIAMETER_TOO_BUSY (3004) by the connection itself, cheaply:
//!   no validation, no application; [`Connection::poll_shed`] hands out
//!   those answers.
//!
//! Time is passed in as milliseconds on any monotonic clock. After
//! [`Event::Closed`] the connection takes no more input; the runtime writes
//! what [`Connection::poll_transmit`] still returns (a CEA with its refusal,
//! a 5011 answer) and then closes the transport.
//!
//! Frames are slices of the read buffer ([`Bytes`], refcounted): a request
//! handed to the application is never copied.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use rustc_hash::FxHashMap;

use crate::codes::{self, cmd};
use crate::dict::Dictionary;
use crate::error::Error;
use crate::header::{flags, frame_length, HEADER_LEN};
use crate::message::Message;
use crate::peer::{self, CloseReason, Peer, PeerConfig, Role, State};
use crate::validate::{
    check_application, check_destination, encode_error_answer, validate_request, Options, Problem,
};

mod busy;
#[cfg(test)]
mod tests;

pub use busy::Kind as ShedKind;

/// Room made at a time for the 3004 answers of shedding, in bytes.
const SHED_BUFFER: usize = 32 * 1024;

/// What every connection of one endpoint shares.
#[derive(Debug, Clone)]
pub struct Config {
    /// Identity and timers of the peer layer.
    pub peer: PeerConfig,
    /// The dictionary requests are validated against.
    pub dictionary: &'static Dictionary,
    /// Validation strictness.
    pub validation: Options,
    /// Largest message accepted, in bytes; a larger declared Message Length
    /// closes the connection.
    pub max_message_size: usize,
    /// How long a partial message may take to complete, in milliseconds,
    /// counted from its first byte and only while the runtime reads.
    pub message_timeout_ms: u64,
}

impl Config {
    /// A configuration with the built-in dictionary, lenient validation,
    /// messages up to 1 MiB and a 10 s incomplete-message limit.
    pub fn new(peer: PeerConfig) -> Self {
        Config {
            peer,
            dictionary: Dictionary::builtin(),
            validation: Options::default(),
            max_message_size: 1 << 20,
            message_timeout_ms: 10_000,
        }
    }
}

/// Why a connection closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// The peer layer closed it (refused capabilities, DPR/DPA done,
    /// watchdog, handshake or disconnection timeout).
    Peer(CloseReason),
    /// A message with this version arrived (answered 5011 when its header
    /// could be read).
    UnsupportedVersion(u8),
    /// A Message Length below 20, not a multiple of 4, or above the
    /// configured maximum: the stream cannot be framed any more.
    InvalidLength(u32),
    /// A partial message did not complete in time.
    IncompleteMessage,
    /// [`Connection::close`] before the capabilities were exchanged.
    Local,
    /// A message of ours could not be encoded.
    Encoding,
}

impl Close {
    /// True when the peer broke the protocol (framing, version, a stalled
    /// message) rather than the connection ending the ordinary way.
    pub fn is_abort(&self) -> bool {
        matches!(
            self,
            Close::UnsupportedVersion(_) | Close::InvalidLength(_) | Close::IncompleteMessage
        )
    }
}

/// What the application must see, from [`Connection::poll_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Capabilities were exchanged: application messages may flow.
    Opened {
        /// The peer's Origin-Host.
        origin_host: String,
        /// The peer's Origin-Realm.
        origin_realm: String,
    },
    /// An application request, whole and already validated against the
    /// dictionary: parse it with [`Message::parse`] (a header check) and
    /// answer it with [`Connection::send_with`].
    Request(Bytes),
    /// A request that failed validation: its error answer (Result-Code,
    /// Error-Message, Failed-AVP) is already queued for transmission.
    Rejected {
        /// The Result-Code it was answered with.
        result_code: u32,
    },
    /// An application answer (not validated). On a connection we accepted
    /// it answers a request sent with [`Connection::send_request`] (its
    /// Hop-by-Hop Identifier matched); on one we opened, any answer, which
    /// the client matches to its requests by Hop-by-Hop Identifier.
    Answer(Bytes),
    /// No answer came in time for the request sent with
    /// [`Connection::send_request`] under this Hop-by-Hop Identifier; a
    /// late answer is dropped as unexpected.
    AnswerTimeout {
        /// The request's Hop-by-Hop Identifier.
        hop_by_hop: u32,
    },
    /// An answer whose Hop-by-Hop Identifier matches no outstanding
    /// request (on a connection we accepted): dropped, as RFC 6733
    /// section 6.2.1 says; reported so the runtime can log it.
    UnexpectedAnswer {
        /// Its Hop-by-Hop Identifier.
        hop_by_hop: u32,
        /// Its Command Code.
        command_code: u32,
    },
    /// The connection is closed: write what [`Connection::poll_transmit`]
    /// still returns, then close the transport. Reported once.
    Closed(Close),
}

/// The time a partial message has been waiting, paused while the runtime
/// does not read.
#[derive(Debug, Clone, Copy)]
struct Partial {
    /// Milliseconds counted before the last pause.
    banked: u64,
    /// Since when it counts (None: paused).
    since: Option<u64>,
}

/// One Diameter connection (see the module documentation).
#[derive(Debug)]
pub struct Connection {
    config: Arc<Config>,
    peer: Peer,
    rx: BytesMut,
    tx: BytesMut,
    /// Time of the last input (read, timeout, close).
    now: u64,
    reading: bool,
    partial: Option<Partial>,
    /// Set once closed; `reported` once the event was handed out.
    closed: Option<Close>,
    reported: bool,
    /// Where the CEA of an open just reported starts in `tx`, until the
    /// next message is handled (see [`Connection::refuse_opened`]).
    cea_at: Option<usize>,
    /// Requests sent with [`Connection::send_request`] and not yet
    /// answered: Hop-by-Hop Identifier -> when to give up (ms).
    outstanding: FxHashMap<u32, u64>,
    /// Outstanding requests given up on, to report.
    timed_out: VecDeque<u32>,
    /// Bytes of the received stream consumed: framed, or dropped at close.
    consumed: u64,
    /// Application requests ending at or before this stream offset are
    /// shed (answered 3004 here).
    shed_until: u64,
    /// The 3004 answers of shedding not yet handed out, and how many.
    shed: BytesMut,
    shed_count: usize,
    /// The refusals of `shed` by request kind (a few kinds at most).
    shed_kinds: Vec<(ShedKind, u64)>,
    /// The constant AVPs of those answers, once the first is built.
    busy_template: Vec<u8>,
    /// Whether a request shed in this [`Connection::poll_event`] call has
    /// started the watchdog again (once per call is enough: the time is
    /// the same).
    shed_fed_watchdog: bool,
}

impl Connection {
    /// A connection we accepted (the responder): it waits for the CER.
    /// `seed` is any random value (first identifiers, watchdog jitter).
    pub fn accept(config: Arc<Config>, now: u64, seed: u64) -> Self {
        let peer = Peer::new(Role::Responder, &config.peer, now, seed);
        Self::with_peer(config, peer, now)
    }

    /// A connection we opened (the initiator): the CER is queued.
    pub fn connect(config: Arc<Config>, now: u64, seed: u64) -> crate::Result<Self> {
        let peer = Peer::new(Role::Initiator, &config.peer, now, seed);
        let mut c = Self::with_peer(config, peer, now);
        c.peer.connect(&c.config.peer, &mut c.tx)?;
        Ok(c)
    }

    fn with_peer(config: Arc<Config>, peer: Peer, now: u64) -> Self {
        Connection {
            config,
            peer,
            rx: BytesMut::with_capacity(16 * 1024),
            tx: BytesMut::with_capacity(16 * 1024),
            now,
            reading: true,
            partial: None,
            closed: None,
            reported: false,
            cea_at: None,
            outstanding: FxHashMap::default(),
            timed_out: VecDeque::new(),
            consumed: 0,
            shed_until: 0,
            shed: BytesMut::new(),
            shed_count: 0,
            shed_kinds: Vec::new(),
            busy_template: Vec::new(),
            shed_fed_watchdog: false,
        }
    }

    /// The shared configuration.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// The peer state machine (state, role, the peer's identity).
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// The identity of the connection's verified TLS client certificate:
    /// the CER's Origin-Host is checked against it
    /// ([`peer::identity_refusal`]). Call it before the CER is handled.
    pub fn set_peer_certificate(&mut self, cert: peer::CertificateIdentity) {
        self.peer.set_certificate(cert);
    }

    /// The peer state.
    pub fn state(&self) -> State {
        if self.closed.is_some() {
            State::Closed
        } else {
            self.peer.state()
        }
    }

    /// True once closed (the event may still be waiting in
    /// [`Connection::poll_event`]).
    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// True while application requests may be sent: open, and the watchdog
    /// has not marked the peer suspect.
    pub fn is_usable(&self) -> bool {
        self.closed.is_none() && self.peer.is_usable()
    }

    /// A fresh (Hop-by-Hop, End-to-End) pair for a request we send.
    pub fn next_ids(&mut self) -> (u32, u32) {
        self.peer.next_ids()
    }

    /// Where received bytes go; call [`Connection::handle_read`] after
    /// appending. Its length is what is buffered and not yet handled.
    pub fn read_buffer(&mut self) -> &mut BytesMut {
        &mut self.rx
    }

    /// Bytes received so far: the stream offset just past the last byte
    /// appended to [`Connection::read_buffer`] (consumed or still there).
    /// The offsets [`Connection::shed_until`] takes count from here.
    pub fn received(&self) -> u64 {
        self.consumed + self.rx.len() as u64
    }

    /// Bytes of the received stream consumed so far: the stream offset
    /// just past the last message handled (or shed). Right after
    /// [`Connection::poll_event`] hands out a request, the offset of its
    /// last byte plus one.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Sheds load: until called again, every application request (not CER, DWR
    /// or DPR, nor an answer) whose last byte is at or before `offset` in
    /// the received stream (see [`Connection::received`]) is answered
    /// DIAMETER_TOO_BUSY (3004) by the connection itself and never handed
    /// out. The answer is the generic error answer (RFC 6733 section 7.2,
    /// E bit set) with the request's Session-Id, this endpoint's identity,
    /// the request's Auth-Application-Id, CC-Request-Type and
    /// CC-Request-Number (what a CCA must carry, RFC 8506 section 3.2) and
    /// its Proxy-Info AVPs; building it walks the request's top-level AVP
    /// headers once, no more: no validation, no dictionary. A request
    /// whose AVPs cannot be walked is handled as usual (validation answers
    /// it). Only while the connection is open. 0 sheds nothing,
    /// `u64::MAX` every request. [`Connection::poll_shed`] hands the
    /// answers out.
    pub fn shed_until(&mut self, offset: u64) {
        self.shed_until = offset;
    }

    /// The 3004 answers of shedding built and not yet handed out by
    /// [`Connection::poll_shed`].
    pub fn shed_pending(&self) -> usize {
        self.shed_count
    }

    /// The 3004 answers of shedding ([`Connection::shed_until`]) built
    /// since the last call, and how many there are; they answer requests
    /// that changed nothing, so they may leave at once, ahead of answers
    /// queued before them.
    pub fn poll_shed(&mut self) -> Option<(Bytes, usize)> {
        if self.shed_count == 0 {
            return None;
        }
        let n = std::mem::take(&mut self.shed_count);
        Some((self.shed.split().freeze(), n))
    }

    /// The refusals of shedding built since the last call, by request
    /// kind: `count(kind, n)` once per kind (for metrics that count
    /// answers by request type; the requests reached no application).
    pub fn take_shed_kinds(&mut self, mut count: impl FnMut(ShedKind, u64)) {
        for (kind, n) in self.shed_kinds.drain(..) {
            count(kind, n);
        }
    }

    /// Bytes were appended to [`Connection::read_buffer`] at `now`.
    pub fn handle_read(&mut self, now: u64) {
        self.now = now;
        if self.closed.is_some() {
            self.rx.clear();
        }
    }

    /// Copies received bytes in and handles them (see
    /// [`Connection::handle_read`]).
    pub fn handle_data(&mut self, data: &[u8], now: u64) {
        if self.closed.is_none() {
            self.rx.extend_from_slice(data);
        }
        self.handle_read(now);
    }

    /// Whether the runtime reads from the transport (it stops for
    /// backpressure). The incomplete-message time only counts while it does.
    pub fn set_reading(&mut self, reading: bool, now: u64) {
        if reading == self.reading {
            return;
        }
        self.reading = reading;
        if let Some(p) = &mut self.partial {
            match (reading, p.since) {
                (false, Some(s)) => {
                    p.banked += now.saturating_sub(s);
                    p.since = None;
                }
                (true, None) => p.since = Some(now),
                _ => {}
            }
        }
    }

    /// When [`Connection::handle_timeout`] must next be called (ms).
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.closed.is_some() {
            return None;
        }
        let peer = self.peer.poll_timeout();
        let partial = self.partial_deadline();
        let answers = self.outstanding.values().min().copied();
        [peer, partial, answers].into_iter().flatten().min()
    }

    fn partial_deadline(&self) -> Option<u64> {
        let p = self.partial?;
        let left = self.config.message_timeout_ms.saturating_sub(p.banked);
        p.since.map(|s| s + left)
    }

    /// Handles the timers due at `now`: a stalled partial message closes the
    /// connection; the peer layer sends a DWR, or closes on its limits.
    pub fn handle_timeout(&mut self, now: u64) {
        self.now = now;
        if self.closed.is_some() {
            return;
        }
        if self.partial_deadline().is_some_and(|d| now >= d) {
            self.shut(Close::IncompleteMessage);
            return;
        }
        if self.outstanding.values().any(|&d| now >= d) {
            let expired = &mut self.timed_out;
            self.outstanding.retain(|&hbh, &mut d| {
                if now >= d {
                    expired.push_back(hbh);
                }
                d > now
            });
        }
        match self
            .peer
            .handle_timeout(&self.config.peer, now, &mut self.tx)
        {
            Ok(Some(peer::Event::Close(r))) => self.shut(Close::Peer(r)),
            Ok(_) => {}
            Err(_) => self.shut(Close::Encoding),
        }
    }

    /// Starts closing: sends a DPR with this Disconnect-Cause (see
    /// [`peer::disconnect_cause`]) when the connection is open; closes at
    /// once before the capabilities are exchanged; does nothing while a
    /// disconnection is already under way.
    pub fn close(&mut self, cause: i32, now: u64) {
        self.now = now;
        if self.closed.is_some() {
            return;
        }
        match self.peer.state() {
            State::Open => {
                if self
                    .peer
                    .disconnect(&self.config.peer, cause, now, &mut self.tx)
                    .is_err()
                {
                    self.shut(Close::Encoding);
                }
            }
            State::Handshake => self.shut(Close::Local),
            State::Closing | State::Closed => {}
        }
    }

    /// Refuses the capabilities exchange just reported by
    /// [`Event::Opened`], for a reason of the runtime's (a connection
    /// limit): the CEA accepting it has not left yet and is replaced by one
    /// with `code` (RFC 6733: DIAMETER_UNABLE_TO_COMPLY, 5012, for a
    /// refusal by local policy) and `text` as Error-Message, then the
    /// connection closes ([`Event::Closed`] with
    /// [`CloseReason::Rejected`]). Returns false, doing nothing, unless
    /// called right after that event, before [`Connection::poll_transmit`].
    pub fn refuse_opened(&mut self, code: u32, text: &str) -> bool {
        let Some(at) = self.cea_at.take() else {
            return false;
        };
        if self.closed.is_some() || self.peer.state() != State::Open {
            return false;
        }
        let ids = match Message::parse(&self.tx[at..]) {
            Ok(cea) => (cea.header().hop_by_hop, cea.header().end_to_end),
            Err(_) => return false,
        };
        self.tx.truncate(at);
        match self
            .peer
            .refuse_opened(&self.config.peer, ids, code, text, &mut self.tx)
        {
            Ok(peer::Event::Close(r)) => self.shut(Close::Peer(r)),
            _ => self.shut(Close::Encoding),
        }
        true
    }

    /// Queues a request this endpoint starts (a copy of `request`, a whole
    /// encoded request) with a fresh Hop-by-Hop Identifier, unique among
    /// this connection's requests, and the T flag when it is a
    /// `retransmission` (RFC 6733 section 5.5.4: sent again after a
    /// failover; its End-to-End Identifier stays the one it has). Its
    /// answer is handed out as [`Event::Answer`]; after `timeout_ms`
    /// without one, [`Event::AnswerTimeout`]. Returns the Hop-by-Hop
    /// Identifier, or `None` (nothing queued) when the connection is not
    /// usable ([`Connection::is_usable`]) or `request` is no request.
    pub fn send_request(
        &mut self,
        request: &[u8],
        retransmission: bool,
        now: u64,
        timeout_ms: u64,
    ) -> Option<u32> {
        let is_request = request.len() >= HEADER_LEN && request[4] & flags::REQUEST != 0;
        if !self.is_usable() || !is_request {
            return None;
        }
        let (mut hbh, _) = self.peer.next_ids();
        while self.outstanding.contains_key(&hbh) {
            hbh = self.peer.next_ids().0;
        }
        let at = self.tx.len();
        self.tx.extend_from_slice(request);
        let header = &mut self.tx[at..at + HEADER_LEN];
        header[12..16].copy_from_slice(&hbh.to_be_bytes());
        if retransmission {
            header[4] |= flags::RETRANSMIT;
        } else {
            header[4] &= !flags::RETRANSMIT;
        }
        self.outstanding.insert(hbh, now.saturating_add(timeout_ms));
        Some(hbh)
    }

    /// How many requests sent with [`Connection::send_request`] wait for
    /// their answers.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Queues a whole encoded message for transmission (a copy).
    pub fn send(&mut self, message: &[u8]) {
        self.tx.extend_from_slice(message);
    }

    /// Lets `f` encode messages straight into the transmit queue (no copy).
    /// It must append whole messages only.
    pub fn send_with<R>(&mut self, f: impl FnOnce(&mut BytesMut) -> R) -> R {
        f(&mut self.tx)
    }

    /// Everything queued for the transport, in order, or `None`.
    pub fn poll_transmit(&mut self) -> Option<Bytes> {
        self.cea_at = None;
        (!self.tx.is_empty()).then(|| self.tx.split().freeze())
    }

    /// True when [`Connection::poll_transmit`] has something.
    pub fn has_transmit(&self) -> bool {
        !self.tx.is_empty()
    }

    /// The next thing the application must see, handling the buffered
    /// input one message at a time; `None` when nothing whole is left.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.shed_fed_watchdog = false;
        loop {
            if let Some(hop_by_hop) = self.timed_out.pop_front() {
                return Some(Event::AnswerTimeout { hop_by_hop });
            }
            if let Some(reason) = self.closed {
                if self.reported {
                    return None;
                }
                self.reported = true;
                return Some(Event::Closed(reason));
            }
            let n = match frame_length(&self.rx, self.config.max_message_size) {
                Ok(Some(n)) if self.rx.len() >= n => n,
                Ok(_) => {
                    self.note_partial();
                    return None;
                }
                Err(Error::UnsupportedVersion(v)) => {
                    if !self.unsupported_version(v) {
                        return None;
                    }
                    continue;
                }
                Err(Error::InvalidMessageLength { declared, .. }) => {
                    self.shut(Close::InvalidLength(declared));
                    continue;
                }
                Err(_) => {
                    self.shut(Close::InvalidLength(0));
                    continue;
                }
            };
            self.partial = None;
            let end = self.consumed + n as u64;
            if end <= self.shed_until && self.shed_one(n) {
                continue;
            }
            self.consumed = end;
            let frame = self.rx.split_to(n).freeze();
            if let Some(ev) = self.process(frame) {
                return Some(ev);
            }
        }
    }

    /// Answers the whole message of `n` bytes at the head of the read
    /// buffer 3004 and drops it, if it is an application request on an
    /// open connection whose AVPs can be walked (see
    /// [`Connection::shed_until`]); otherwise leaves it and returns false.
    fn shed_one(&mut self, n: usize) -> bool {
        let frame = &self.rx[..n];
        let Ok(msg) = Message::parse(frame) else {
            return false;
        };
        let base = matches!(
            msg.command_code(),
            codes::cmd::CAPABILITIES_EXCHANGE
                | codes::cmd::DEVICE_WATCHDOG
                | codes::cmd::DISCONNECT_PEER
        );
        if !msg.is_request() || base || self.peer.state() != State::Open {
            return false;
        }
        if self.busy_template.is_empty() {
            self.busy_template = busy::template(&self.config.peer);
        }
        // The answer is never larger than the request and the constant
        // part; room for many at once, so that building them seldom
        // allocates.
        let most = n + self.busy_template.len();
        if self.shed.capacity() - self.shed.len() < most {
            self.shed.reserve(most.max(SHED_BUFFER));
        }
        let Some(kind) = busy::answer(&mut self.shed, frame, &self.busy_template) else {
            return false;
        };
        match self.shed_kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => self.shed_kinds.push((kind, 1)),
        }
        // Received traffic all the same: the watchdog starts again.
        if !self.shed_fed_watchdog {
            self.shed_fed_watchdog = true;
            let _ = self
                .peer
                .handle(&self.config.peer, &msg, self.now, &mut self.tx);
        }
        self.cea_at = None;
        self.shed_count += 1;
        self.consumed += n as u64;
        bytes::Buf::advance(&mut self.rx, n);
        true
    }

    /// Starts the incomplete-message clock when a partial message is left.
    fn note_partial(&mut self) {
        if self.rx.is_empty() {
            self.partial = None;
        } else if self.partial.is_none() {
            self.partial = Some(Partial {
                banked: 0,
                since: self.reading.then_some(self.now),
            });
        }
    }

    /// A message with another version: answer 5011 once its header is
    /// readable (waiting for the whole message when its length is sane),
    /// then close. Returns false while waiting for more bytes.
    fn unsupported_version(&mut self, v: u8) -> bool {
        let b = &self.rx[..4];
        let n = u32::from_be_bytes([0, b[1], b[2], b[3]]) as usize;
        let sane = n >= HEADER_LEN && n % 4 == 0 && n <= self.config.max_message_size;
        let end = if sane { n } else { HEADER_LEN };
        if self.rx.len() < end {
            if sane {
                self.note_partial();
                return false;
            }
            self.shut(Close::UnsupportedVersion(v));
            return true;
        }
        let frame = self.rx.split_to(end);
        self.consumed += end as u64;
        if let Err(problem) =
            validate_request(self.config.dictionary, &frame, &self.config.validation)
        {
            self.reject(&frame, &problem);
        }
        self.shut(Close::UnsupportedVersion(v));
        true
    }

    /// One whole message: the peer layer first, then validation.
    fn process(&mut self, frame: Bytes) -> Option<Event> {
        let Ok(msg) = Message::parse(&frame) else {
            // Framing already checked what parsing checks.
            self.shut(Close::InvalidLength(frame.len() as u32));
            return None;
        };
        let at = self.tx.len();
        self.cea_at = None;
        if let Some(problem) = self.base_problem(&frame, &msg) {
            self.refuse_base(&frame, &msg, &problem);
            return None;
        }
        match self
            .peer
            .handle(&self.config.peer, &msg, self.now, &mut self.tx)
        {
            Ok(peer::Event::Application) => {}
            Ok(peer::Event::Opened) => {
                self.cea_at = Some(at);
                return Some(Event::Opened {
                    origin_host: self.peer.remote_host().unwrap_or("").to_string(),
                    origin_realm: self.peer.remote_realm().unwrap_or("").to_string(),
                });
            }
            Ok(peer::Event::Close(r)) => {
                self.shut(Close::Peer(r));
                return None;
            }
            Ok(peer::Event::Handled | peer::Event::Unexpected) => return None,
            Err(_) => {
                self.shut(Close::Encoding);
                return None;
            }
        }
        if !msg.is_request() {
            let (hop_by_hop, command_code) = (msg.header().hop_by_hop, msg.command_code());
            return self.answer(frame, hop_by_hop, command_code);
        }
        let p = &self.config.peer;
        let opts = &self.config.validation;
        // Header (the application), then the message, then where it goes.
        let checked = match check_application(&frame, &p.auth_applications) {
            Ok(()) => match validate_request(self.config.dictionary, &frame, opts) {
                Ok(msg) => check_destination(&msg, &p.origin_host, &p.origin_realm, opts),
                Err(problem) => Err(problem),
            },
            Err(problem) => Err(problem),
        };
        match checked {
            Ok(()) => Some(Event::Request(frame)),
            Err(problem) => {
                let result_code = problem.result_code;
                self.reject(&frame, &problem);
                Some(Event::Rejected { result_code })
            }
        }
    }

    /// What is wrong with a base protocol request (CER, DWR, DPR) by its
    /// definition in the dictionary: its header bits and Application-Id,
    /// its AVPs' flags, lengths and values, its grammar (RFC 6733 sections
    /// 5.3.1, 5.4.1, 5.5.1 and 7). `None` for a valid one and for any
    /// other message, and for a first message other than a CER (which
    /// closes the connection unanswered).
    fn base_problem<'a>(&self, frame: &'a [u8], msg: &Message<'_>) -> Option<Problem<'a>> {
        let code = msg.command_code();
        let base = matches!(
            code,
            cmd::CAPABILITIES_EXCHANGE | cmd::DEVICE_WATCHDOG | cmd::DISCONNECT_PEER
        );
        if !msg.is_request() || !base {
            return None;
        }
        if self.peer.state() == State::Handshake && code != cmd::CAPABILITIES_EXCHANGE {
            return None;
        }
        validate_request(self.config.dictionary, frame, &self.config.validation).err()
    }

    /// Answers a base protocol request that failed validation: a CER
    /// during the handshake is refused and the connection closes; a DWR,
    /// DPR or later CER gets the error answer and changes nothing (a DPR
    /// refused does not start the disconnection).
    fn refuse_base(&mut self, frame: &[u8], msg: &Message<'_>, problem: &Problem<'_>) {
        let p = &self.config.peer;
        if self.peer.state() == State::Handshake {
            let mark = self.tx.len();
            match self.peer.refuse_cer(p, frame, problem, &mut self.tx) {
                Ok(peer::Event::Close(reason)) => self.shut(Close::Peer(reason)),
                _ => {
                    self.tx.truncate(mark);
                    self.shut(Close::Encoding);
                }
            }
            return;
        }
        debug_assert!(msg.is_request());
        self.peer.heard(p, self.now);
        self.reject(frame, problem);
    }

    /// An application answer: handed out when it matches an outstanding
    /// request (or, on a connection we opened, always: the client matches
    /// its own); otherwise reported as unexpected and dropped.
    fn answer(&mut self, frame: Bytes, hop_by_hop: u32, command_code: u32) -> Option<Event> {
        if self.outstanding.remove(&hop_by_hop).is_some()
            || self.peer.role() == peer::Role::Initiator
        {
            return Some(Event::Answer(frame));
        }
        Some(Event::UnexpectedAnswer {
            hop_by_hop,
            command_code,
        })
    }

    /// Queues the prescribed error answer for a request that failed
    /// validation (never for an answer).
    fn reject(&mut self, frame: &[u8], problem: &Problem<'_>) {
        let is_request = frame.get(4).is_some_and(|f| f & 0x80 != 0);
        if is_request {
            let p = &self.config.peer;
            let mark = self.tx.len();
            if encode_error_answer(
                &mut self.tx,
                frame,
                problem,
                &p.origin_host,
                &p.origin_realm,
            )
            .is_err()
            {
                self.tx.truncate(mark);
            }
        }
    }

    /// Closes: drops buffered input; the event is reported next.
    fn shut(&mut self, reason: Close) {
        if self.closed.is_none() {
            self.closed = Some(reason);
            self.consumed += self.rx.len() as u64;
            self.rx.clear();
            self.partial = None;
        }
    }
}
