//! Two connections, an initiator and a responder, driven against each other
//! in memory with a simulated clock.

use super::*;
use crate::codes::{app, avp, cmd, result, AvpId};
use crate::peer::disconnect_cause;
use crate::Encoder;

fn config(host: &str) -> Arc<Config> {
    let mut p = PeerConfig::new(host, "example.net");
    p.watchdog_ms = 6_000;
    p.watchdog_jitter_ms = 0;
    p.handshake_timeout_ms = 5_000;
    let mut c = Config::new(p);
    c.max_message_size = 4096;
    c.message_timeout_ms = 1_000;
    Arc::new(c)
}

/// A client and a server connection joined by a perfect network; the
/// server's application answers every request with 2001.
struct Pair {
    client: Connection,
    server: Connection,
    now: u64,
    client_events: Vec<Event>,
    server_events: Vec<Event>,
    /// Whether the server's application answers requests.
    echo: bool,
}

impl Pair {
    fn new() -> Pair {
        let client = Connection::connect(config("client.example.net"), 0, 7).unwrap();
        let server = Connection::accept(config("server.example.net"), 0, 9);
        Pair {
            client,
            server,
            now: 0,
            client_events: Vec::new(),
            server_events: Vec::new(),
            echo: true,
        }
    }

    /// A pair that has exchanged capabilities.
    fn open() -> Pair {
        let mut p = Pair::new();
        p.drive();
        assert!(matches!(p.client_events[..], [Event::Opened { .. }]));
        assert!(matches!(p.server_events[..], [Event::Opened { .. }]));
        p.client_events.clear();
        p.server_events.clear();
        p
    }

    /// Moves bytes both ways and collects events until nothing moves.
    fn drive(&mut self) {
        loop {
            let mut moved = false;
            while let Some(ev) = self.server.poll_event() {
                if let (true, Event::Request(frame)) = (self.echo, &ev) {
                    let msg = Message::parse(frame).unwrap();
                    self.server.send_with(|out| answer_ok(out, &msg));
                }
                self.server_events.push(ev);
                moved = true;
            }
            while let Some(ev) = self.client.poll_event() {
                self.client_events.push(ev);
                moved = true;
            }
            if let Some(b) = self.client.poll_transmit() {
                self.server.handle_data(&b, self.now);
                moved = true;
            }
            if let Some(b) = self.server.poll_transmit() {
                self.client.handle_data(&b, self.now);
                moved = true;
            }
            if !moved {
                return;
            }
        }
    }

    /// Lets time pass up to `until`, firing each timer when it is due.
    fn advance_to(&mut self, until: u64) {
        loop {
            let next = [self.client.poll_timeout(), self.server.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    self.client.handle_timeout(self.now);
                    self.server.handle_timeout(self.now);
                    self.drive();
                }
                _ => break,
            }
        }
        self.now = until;
    }
}

fn answer_ok(out: &mut BytesMut, req: &Message<'_>) {
    let mut e = Encoder::answer(out, req, false);
    e.u32(avp::RESULT_CODE, result::SUCCESS)
        .str(avp::ORIGIN_HOST, "server.example.net")
        .str(avp::ORIGIN_REALM, "example.net");
    e.finish().unwrap();
}

fn ccr(hbh: u32, with_number: bool) -> Vec<u8> {
    ccr_to(hbh, with_number, None, "example.net")
}

/// A CCR-Initial addressed to `host` (when given) in `realm`, with its
/// CC-Request-Number when `with_number`.
fn ccr_to(hbh: u32, with_number: bool, host: Option<&str>, realm: &str) -> Vec<u8> {
    let mut b = BytesMut::new();
    let mut e = Encoder::request(
        &mut b,
        cmd::CREDIT_CONTROL,
        app::CREDIT_CONTROL,
        true,
        hbh,
        hbh,
    );
    e.str(avp::SESSION_ID, "client.example.net;1;1")
        .str(avp::ORIGIN_HOST, "client.example.net")
        .str(avp::ORIGIN_REALM, "example.net")
        .str(avp::DESTINATION_REALM, realm);
    if let Some(host) = host {
        e.str(avp::DESTINATION_HOST, host);
    }
    e.u32(avp::AUTH_APPLICATION_ID, 4)
        .str(avp::SERVICE_CONTEXT_ID, "32251@3gpp.org")
        .i32(avp::CC_REQUEST_TYPE, 1);
    if with_number {
        e.u32(avp::CC_REQUEST_NUMBER, 0);
    }
    e.finish().unwrap();
    b.to_vec()
}

fn result_code(frame: &[u8]) -> Option<u32> {
    Message::parse(frame)
        .ok()?
        .find(avp::RESULT_CODE)?
        .u32()
        .ok()
}

/// Every message in a transmitted byte stream.
fn messages(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    while let Ok(Some(n)) = frame_length(bytes, usize::MAX) {
        v.push(bytes[..n].to_vec());
        bytes = &bytes[n..];
    }
    v
}

fn answers(events: &[Event]) -> Vec<Bytes> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Answer(b) => Some(b.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn capabilities_exchange_opens_both_ends_with_the_peer_identity() {
    let mut p = Pair::new();
    p.drive();
    assert_eq!(
        p.client_events,
        [Event::Opened {
            origin_host: "server.example.net".into(),
            origin_realm: "example.net".into()
        }]
    );
    assert_eq!(
        p.server_events,
        [Event::Opened {
            origin_host: "client.example.net".into(),
            origin_realm: "example.net".into()
        }]
    );
    assert_eq!(p.client.state(), State::Open);
    assert_eq!(p.server.state(), State::Open);
}

#[test]
fn an_open_refused_by_the_runtime_answers_the_cer_with_its_code_and_closes() {
    let mut client = Connection::connect(config("client.example.net"), 0, 7).unwrap();
    let mut server = Connection::accept(config("server.example.net"), 0, 9);
    let cer = client.poll_transmit().unwrap();
    let cer_hbh = Message::parse(&cer).unwrap().header().hop_by_hop;
    server.handle_data(&cer, 0);
    assert!(matches!(server.poll_event(), Some(Event::Opened { .. })));
    assert!(server.refuse_opened(result::UNABLE_TO_COMPLY, "too many connections"));
    // Only once, and only right after the open.
    assert!(!server.refuse_opened(result::UNABLE_TO_COMPLY, "again"));
    assert_eq!(
        server.poll_event(),
        Some(Event::Closed(Close::Peer(CloseReason::Rejected(5012))))
    );
    let out = messages(&server.poll_transmit().unwrap());
    assert_eq!(out.len(), 1, "one CEA, the refusal");
    let cea = Message::parse(&out[0]).unwrap();
    assert_eq!(cea.command_code(), cmd::CAPABILITIES_EXCHANGE);
    assert!(!cea.is_request());
    assert_eq!(cea.header().hop_by_hop, cer_hbh);
    assert_eq!(cea.header().flags & crate::header::flags::ERROR, 0);
    assert_eq!(result_code(&out[0]), Some(5012));
    let text = cea.find(avp::ERROR_MESSAGE).unwrap();
    assert_eq!(text.data(), b"too many connections");
    client.handle_data(&out[0], 0);
    assert_eq!(
        client.poll_event(),
        Some(Event::Closed(Close::Peer(CloseReason::RefusedByPeer(5012))))
    );
}

#[test]
fn an_open_cannot_be_refused_once_its_cea_was_transmitted() {
    let mut p = Pair::open();
    assert!(!p.server.refuse_opened(result::UNABLE_TO_COMPLY, "late"));
    assert_eq!(p.server.state(), State::Open);
}

#[test]
fn requests_are_handed_over_validated_and_answers_come_back() {
    let mut p = Pair::open();
    p.client.send(&ccr(100, true));
    p.drive();
    assert!(matches!(&p.server_events[..], [Event::Request(f)] if f.len() > HEADER_LEN));
    let a = answers(&p.client_events);
    assert_eq!(a.len(), 1);
    assert_eq!(result_code(&a[0]), Some(2001));
    assert_eq!(Message::parse(&a[0]).unwrap().header().hop_by_hop, 100);
}

#[test]
fn a_message_split_across_reads_is_framed_once_whole() {
    let mut p = Pair::open();
    let m = ccr(1, true);
    for chunk in m.chunks(7) {
        assert!(p.server_events.is_empty());
        p.server.handle_data(chunk, p.now);
        while let Some(ev) = p.server.poll_event() {
            p.server_events.push(ev);
        }
    }
    assert!(matches!(&p.server_events[..], [Event::Request(f)] if f[..] == m[..]));
}

#[test]
fn several_messages_in_one_read_are_all_handled_in_order() {
    let mut p = Pair::open();
    p.echo = false;
    let mut many = Vec::new();
    for i in 0..10 {
        many.extend(ccr(i, true));
    }
    p.server.handle_data(&many, p.now);
    let mut seen = Vec::new();
    while let Some(ev) = p.server.poll_event() {
        let Event::Request(f) = ev else {
            panic!("{ev:?}")
        };
        seen.push(Message::parse(&f).unwrap().header().hop_by_hop);
    }
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
}

#[test]
fn answers_keep_request_order_and_a_dpa_never_overtakes_them() {
    let mut p = Pair::open();
    p.echo = false;
    let mut bytes = ccr(1, true);
    bytes.extend(ccr(2, true));
    let mut dpr = BytesMut::new();
    let mut e = Encoder::request(&mut dpr, cmd::DISCONNECT_PEER, 0, false, 3, 3);
    e.str(avp::ORIGIN_HOST, "client.example.net")
        .str(avp::ORIGIN_REALM, "example.net")
        .i32(avp::DISCONNECT_CAUSE, 0);
    e.finish().unwrap();
    bytes.extend_from_slice(&dpr);
    p.server.handle_data(&bytes, 0);
    while let Some(ev) = p.server.poll_event() {
        if let Event::Request(f) = ev {
            let msg = Message::parse(&f).unwrap();
            p.server.send_with(|out| answer_ok(out, &msg));
        }
    }
    let out = p.server.poll_transmit().unwrap();
    let codes: Vec<u32> = messages(&out)
        .iter()
        .map(|m| Message::parse(m).unwrap().command_code())
        .collect();
    assert_eq!(codes, [272, 272, 282]);
    assert_eq!(p.server.state(), State::Closing);
}

#[test]
fn validation_failure_is_answered_with_failed_avp_inside_the_connection() {
    let mut p = Pair::open();
    p.client.send(&ccr(5, false));
    p.drive();
    assert_eq!(p.server_events, [Event::Rejected { result_code: 5005 }]);
    let a = answers(&p.client_events);
    assert_eq!(result_code(&a[0]), Some(5005));
    let failed = Message::parse(&a[0])
        .unwrap()
        .find(avp::FAILED_AVP)
        .expect("Failed-AVP");
    assert!(failed.child(avp::CC_REQUEST_NUMBER).is_some());
    // The connection goes on.
    p.client.send(&ccr(6, true));
    p.drive();
    assert_eq!(result_code(&answers(&p.client_events)[1]), Some(2001));
}

#[test]
fn watchdog_requests_are_answered_on_both_timers() {
    let mut p = Pair::open();
    p.advance_to(6_000);
    // Both sides sent a DWR at Tw and got the DWA: still open and usable.
    assert!(p.client.is_usable() && p.server.is_usable());
    assert!(p.client_events.is_empty() && p.server_events.is_empty());
    p.advance_to(60_000);
    assert!(p.client.is_usable() && p.server.is_usable());
}

#[test]
fn a_silent_peer_is_dropped_by_the_watchdog() {
    let mut p = Pair::open();
    // The client never hears from the server again.
    let mut t = 0;
    while !p.client.is_closed() && t < 60_000 {
        t = p.client.poll_timeout().unwrap();
        p.client.handle_timeout(t);
        let _ = p.client.poll_transmit();
    }
    assert_eq!(
        p.client.poll_event(),
        Some(Event::Closed(Close::Peer(CloseReason::WatchdogExpired)))
    );
    assert_eq!(p.client.poll_event(), None);
}

#[test]
fn client_disconnect_is_answered_and_closes_the_client() {
    let mut p = Pair::open();
    p.client
        .close(disconnect_cause::DO_NOT_WANT_TO_TALK_TO_YOU, 10);
    assert_eq!(p.client.state(), State::Closing);
    p.drive();
    assert_eq!(
        p.client_events,
        [Event::Closed(Close::Peer(CloseReason::Disconnected))]
    );
    assert_eq!(p.server.state(), State::Closing);
    // The server closes by itself if the client keeps the transport open.
    p.advance_to(20_000);
    assert_eq!(
        p.server_events,
        [Event::Closed(Close::Peer(CloseReason::Timeout))]
    );
}

#[test]
fn server_disconnect_is_answered_and_closes_the_server() {
    let mut p = Pair::open();
    p.server.close(disconnect_cause::REBOOTING, 10);
    p.drive();
    assert_eq!(
        p.server_events,
        [Event::Closed(Close::Peer(CloseReason::Disconnected))]
    );
    assert_eq!(p.client.state(), State::Closing);
}

#[test]
fn close_before_the_handshake_closes_at_once() {
    let mut c = Connection::accept(config("server.example.net"), 0, 1);
    c.close(disconnect_cause::REBOOTING, 0);
    assert_eq!(c.poll_event(), Some(Event::Closed(Close::Local)));
    assert_eq!(c.poll_transmit(), None);
}

#[test]
fn refused_capabilities_are_sent_before_the_close_is_reported() {
    let mut p = Pair::new();
    let mut strict = (*config("server.example.net")).clone();
    strict.peer.allowed_peers = vec!["pgw.example.net".into()];
    p.server = Connection::accept(Arc::new(strict), 0, 9);
    p.drive();
    assert_eq!(
        p.server_events,
        [Event::Closed(Close::Peer(CloseReason::Rejected(3010)))]
    );
    assert_eq!(
        p.client_events,
        [Event::Closed(Close::Peer(CloseReason::RefusedByPeer(3010)))]
    );
}

#[test]
fn an_oversized_length_closes_without_reading_further() {
    let mut p = Pair::open();
    let mut big = ccr(1, true);
    big[1..4].copy_from_slice(&[0, 0x20, 0]); // 8192 > 4096
    p.server.handle_data(&big, 0);
    assert_eq!(
        p.server.poll_event(),
        Some(Event::Closed(Close::InvalidLength(8192)))
    );
    assert!(p.server.is_closed());
    assert_eq!(p.server.poll_timeout(), None);
    // Later input is ignored.
    p.server.handle_data(&ccr(2, true), 1);
    assert_eq!(p.server.poll_event(), None);
    assert_eq!(p.server.poll_transmit(), None);
}

#[test]
fn an_unsupported_version_is_answered_5011_then_closed() {
    let mut p = Pair::open();
    let mut bad = ccr(77, true);
    bad[0] = 2;
    // Half of it: the connection waits for the whole message.
    p.server.handle_data(&bad[..30], 0);
    assert_eq!(p.server.poll_event(), None);
    p.server.handle_data(&bad[30..], 1);
    assert_eq!(
        p.server.poll_event(),
        Some(Event::Closed(Close::UnsupportedVersion(2)))
    );
    let out = p.server.poll_transmit().expect("the 5011 answer is queued");
    assert_eq!(result_code(&out), Some(5011));
    assert_eq!(Message::parse(&out).unwrap().header().hop_by_hop, 77);
}

#[test]
fn an_incomplete_message_times_out_from_its_first_byte() {
    let mut p = Pair::open();
    let m = ccr(1, true);
    // A whole message and the start of the next one at t = 100.
    let mut bytes = m.clone();
    bytes.extend_from_slice(&m[..10]);
    p.server.handle_data(&bytes, 100);
    assert!(matches!(p.server.poll_event(), Some(Event::Request(_))));
    assert_eq!(p.server.poll_event(), None);
    assert_eq!(p.server.poll_timeout(), Some(1_100));
    // More bytes of the same message do not restart the clock.
    p.server.handle_data(&m[10..20], 900);
    assert_eq!(p.server.poll_event(), None);
    assert_eq!(p.server.poll_timeout(), Some(1_100));
    p.server.handle_timeout(1_099);
    assert!(!p.server.is_closed());
    p.server.handle_timeout(1_100);
    assert_eq!(
        p.server.poll_event(),
        Some(Event::Closed(Close::IncompleteMessage))
    );
}

#[test]
fn a_completed_message_stops_the_clock_for_the_next() {
    let mut p = Pair::open();
    p.echo = false;
    let m = ccr(1, true);
    p.server.handle_data(&m[..10], 0);
    assert_eq!(p.server.poll_event(), None);
    // At 900 the first completes and a second starts: its clock starts now.
    let mut rest = m[10..].to_vec();
    rest.extend_from_slice(&m[..10]);
    p.server.handle_data(&rest, 900);
    assert!(matches!(p.server.poll_event(), Some(Event::Request(_))));
    assert_eq!(p.server.poll_event(), None);
    assert_eq!(p.server.poll_timeout(), Some(1_900));
}

#[test]
fn an_incomplete_message_times_out_only_while_reading() {
    let mut p = Pair::open();
    let m = ccr(1, true);
    p.server.handle_data(&m[..10], 0);
    assert_eq!(p.server.poll_event(), None);
    // Backpressure from 400 to 5,400: the clock stops.
    p.server.set_reading(false, 400);
    assert_eq!(p.server.poll_timeout(), Some(6_000)); // the watchdog only
    p.server.handle_timeout(5_000);
    assert!(!p.server.is_closed());
    p.server.set_reading(true, 5_400);
    assert_eq!(p.server.poll_timeout(), Some(6_000));
    p.server.handle_timeout(5_999);
    assert!(!p.server.is_closed());
    p.server.handle_timeout(6_000);
    assert_eq!(
        p.server.poll_event(),
        Some(Event::Closed(Close::IncompleteMessage))
    );
}

#[test]
fn a_request_before_capabilities_exchange_closes() {
    let mut s = Connection::accept(config("server.example.net"), 0, 1);
    s.handle_data(&ccr(1, true), 0);
    assert_eq!(
        s.poll_event(),
        Some(Event::Closed(Close::Peer(
            CloseReason::NoCapabilitiesExchange
        )))
    );
    assert_eq!(s.poll_transmit(), None);
}

#[test]
fn requests_from_the_server_reach_the_client_application() {
    let mut p = Pair::open();
    // A server-initiated request (here a CCR shape, for the dictionary).
    p.server.send(&ccr(9, true));
    p.drive();
    assert!(matches!(&p.client_events[..], [Event::Request(_)]));
}

/// A Re-Auth-Request from the server, with Hop-by-Hop `hbh`.
fn rar(hbh: u32) -> Vec<u8> {
    let mut b = BytesMut::new();
    let mut e = Encoder::request(&mut b, cmd::RE_AUTH, app::CREDIT_CONTROL, true, hbh, 77);
    e.str(avp::SESSION_ID, "client.example.net;1;1")
        .str(avp::ORIGIN_HOST, "server.example.net")
        .str(avp::ORIGIN_REALM, "example.net")
        .str(avp::DESTINATION_REALM, "example.net")
        .str(avp::DESTINATION_HOST, "client.example.net")
        .u32(avp::AUTH_APPLICATION_ID, 4)
        .i32(avp::RE_AUTH_REQUEST_TYPE, 0);
    e.finish().unwrap();
    b.to_vec()
}

/// The client answers every request it got with 2001.
fn client_answers(p: &mut Pair) {
    for ev in std::mem::take(&mut p.client_events) {
        if let Event::Request(frame) = ev {
            let msg = Message::parse(&frame).unwrap();
            p.client.send_with(|out| answer_ok(out, &msg));
        }
    }
    p.drive();
}

#[test]
fn an_answer_to_a_request_the_server_sent_is_matched_by_hop_by_hop() {
    let mut p = Pair::open();
    let hbh = p.server.send_request(&rar(0), false, 0, 5_000).unwrap();
    assert_eq!(p.server.outstanding(), 1);
    p.drive();
    let [Event::Request(got)] = &p.client_events[..] else {
        panic!("client got {:?}", p.client_events);
    };
    let got = Message::parse(got).unwrap();
    assert_eq!(got.header().hop_by_hop, hbh);
    assert_eq!(got.header().end_to_end, 77, "End-to-End kept");
    assert!(!got.header().is_retransmit());
    client_answers(&mut p);
    let answers = answers(&p.server_events);
    assert_eq!(answers.len(), 1);
    let a = Message::parse(&answers[0]).unwrap();
    assert_eq!(a.header().hop_by_hop, hbh);
    assert_eq!(result_code(&answers[0]), Some(result::SUCCESS));
    assert_eq!(p.server.outstanding(), 0);
}

#[test]
fn hop_by_hop_ids_of_sent_requests_are_unique_per_connection() {
    let mut p = Pair::open();
    let ids: std::collections::HashSet<u32> = (0..100)
        .map(|_| p.server.send_request(&rar(5), false, 0, 5_000).unwrap())
        .collect();
    assert_eq!(ids.len(), 100);
    assert_eq!(p.server.outstanding(), 100);
}

#[test]
fn an_answer_matching_no_outstanding_request_is_reported_and_dropped() {
    let mut p = Pair::open();
    let hbh = p.server.send_request(&rar(0), false, 0, 5_000).unwrap();
    p.drive();
    // An answer with another Hop-by-Hop: unexpected.
    let mut forged = BytesMut::new();
    let req = rar(hbh.wrapping_add(1000));
    answer_ok(&mut forged, &Message::parse(&req).unwrap());
    p.client.send(&forged);
    p.drive();
    assert_eq!(
        p.server_events,
        [Event::UnexpectedAnswer {
            hop_by_hop: hbh.wrapping_add(1000),
            command_code: cmd::RE_AUTH
        }]
    );
    assert_eq!(p.server.outstanding(), 1, "the real request still waits");
    // The real answer, twice: the second is unexpected.
    client_answers(&mut p);
    assert_eq!(answers(&p.server_events).len(), 1);
    let mut again = BytesMut::new();
    answer_ok(&mut again, &Message::parse(&rar(hbh)).unwrap());
    p.client.send(&again);
    p.server_events.clear();
    p.drive();
    assert!(matches!(
        p.server_events[..],
        [Event::UnexpectedAnswer { hop_by_hop, .. }] if hop_by_hop == hbh
    ));
}

#[test]
fn a_request_without_an_answer_times_out_once() {
    let mut p = Pair::open();
    let now = p.now;
    let hbh = p.server.send_request(&rar(0), false, now, 2_000).unwrap();
    p.drive();
    assert_eq!(p.server.poll_timeout(), Some(now + 2_000));
    p.server.handle_timeout(now + 1_999);
    assert_eq!(p.server.poll_event(), None);
    p.server.handle_timeout(now + 2_000);
    assert_eq!(
        p.server.poll_event(),
        Some(Event::AnswerTimeout { hop_by_hop: hbh })
    );
    assert_eq!(p.server.poll_event(), None);
    assert_eq!(p.server.outstanding(), 0);
    // A late answer is unexpected.
    client_answers(&mut p);
    assert!(matches!(
        p.server_events[..],
        [Event::UnexpectedAnswer { hop_by_hop, .. }] if hop_by_hop == hbh
    ));
}

#[test]
fn a_retransmission_carries_the_t_flag() {
    let mut p = Pair::open();
    p.server.send_request(&rar(0), true, 0, 5_000).unwrap();
    p.drive();
    let [Event::Request(got)] = &p.client_events[..] else {
        panic!("client got {:?}", p.client_events);
    };
    assert!(Message::parse(got).unwrap().header().is_retransmit());
}

#[test]
fn no_request_is_sent_before_the_connection_is_open() {
    let mut s = Connection::accept(config("server.example.net"), 0, 1);
    assert_eq!(s.send_request(&rar(0), false, 0, 1_000), None);
    assert!(!s.has_transmit());
}

/// Sheds the server's requests up to `offset` and hands it `bytes`:
/// returns the events, the shed answers, and how many were shed.
fn shed(p: &mut Pair, offset: u64, bytes: &[u8]) -> (Vec<Event>, Vec<Vec<u8>>, usize) {
    p.server.shed_until(offset);
    p.server.handle_data(bytes, p.now);
    let mut events = Vec::new();
    while let Some(ev) = p.server.poll_event() {
        events.push(ev);
    }
    let pending = p.server.shed_pending();
    let (out, n) = p.server.poll_shed().unwrap_or_default();
    assert_eq!(n, pending);
    assert!(p.server.poll_shed().is_none(), "handed out once");
    (events, messages(&out), n)
}

#[test]
fn requests_up_to_the_shed_offset_get_3004_from_the_connection_and_the_rest_are_handed_out() {
    let mut p = Pair::open();
    p.echo = false;
    let start = p.server.received();
    assert_eq!(p.server.consumed(), start);
    let one = ccr(0, true).len() as u64;
    let mut many = Vec::new();
    for i in 0..10 {
        many.extend(ccr(i, true));
    }
    // The first three end at or before the offset; the fourth ends one
    // byte past it.
    let (events, shed_answers, n) = shed(&mut p, start + 3 * one + one - 1, &many);
    assert_eq!(n, 3);
    let handed: Vec<u32> = events
        .iter()
        .map(|e| match e {
            Event::Request(f) => Message::parse(f).unwrap().header().hop_by_hop,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(handed, (3..10).collect::<Vec<_>>());
    for (i, a) in shed_answers.iter().enumerate() {
        let m = Message::parse(a).unwrap();
        assert_eq!(m.header().hop_by_hop, i as u32);
        assert!(m.header().is_error() && !m.is_request());
        assert_eq!(result_code(a), Some(result::TOO_BUSY));
        assert_eq!(
            m.find(avp::ORIGIN_HOST).unwrap().data(),
            b"server.example.net"
        );
        assert_eq!(m.find(avp::CC_REQUEST_TYPE).unwrap().i32().unwrap(), 1);
        assert_eq!(m.find(avp::CC_REQUEST_NUMBER).unwrap().u32().unwrap(), 0);
    }
    assert_eq!(p.server.consumed(), start + 10 * one);
    assert_eq!(p.server.received(), p.server.consumed());
    // Nothing went to the ordinary output.
    assert!(!p.server.has_transmit());
    // Shedding off again: handed out.
    let (events, _, n) = shed(&mut p, 0, &ccr(42, true));
    assert_eq!((events.len(), n), (1, 0));
}

#[test]
fn shedding_everything_spares_base_protocol_messages_and_answers() {
    let mut p = Pair::open();
    p.echo = false;
    // A DWR from the client: answered by the peer layer, not shed.
    let mut b = BytesMut::new();
    let mut e = Encoder::request(&mut b, cmd::DEVICE_WATCHDOG, app::COMMON, false, 5, 5);
    e.str(avp::ORIGIN_HOST, "client.example.net")
        .str(avp::ORIGIN_REALM, "example.net");
    e.finish().unwrap();
    let mut input = b.to_vec();
    input.extend(ccr(6, true));
    let (events, shed_answers, n) = shed(&mut p, u64::MAX, &input);
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(n, 1);
    assert_eq!(
        Message::parse(&shed_answers[0])
            .unwrap()
            .header()
            .hop_by_hop,
        6
    );
    let dwa = messages(&p.server.poll_transmit().unwrap());
    assert_eq!(dwa.len(), 1);
    assert_eq!(
        Message::parse(&dwa[0]).unwrap().command_code(),
        cmd::DEVICE_WATCHDOG
    );
    assert_eq!(result_code(&dwa[0]), Some(2001));
}

#[test]
fn a_shed_request_resets_the_watchdog_like_any_other() {
    let mut p = Pair::open();
    p.echo = false;
    let before = p.server.poll_timeout().unwrap();
    p.now = 5_000;
    shed(&mut p, u64::MAX, &ccr(1, true));
    assert!(p.server.poll_timeout().unwrap() > before);
}

#[test]
fn a_request_that_cannot_be_walked_is_not_shed_but_validated() {
    let mut p = Pair::open();
    p.echo = false;
    let mut bad = ccr(9, true);
    // The last AVP claims more bytes than the message has.
    let last = bad.len() - 12;
    bad[last + 7] = 0xF0;
    let (events, _, n) = shed(&mut p, u64::MAX, &bad);
    assert_eq!(n, 0);
    assert!(
        matches!(events[..], [Event::Rejected { result_code }] if result_code != result::TOO_BUSY),
        "{events:?}"
    );
}

#[test]
fn nothing_is_shed_before_the_capabilities_exchange() {
    let mut p = Pair::new();
    p.server.shed_until(u64::MAX);
    p.drive();
    assert_eq!(p.server.state(), State::Open);
    assert_eq!(p.server.shed_pending(), 0);
}

#[test]
fn strict_mode_refuses_requests_for_another_host_or_realm_and_lenient_mode_takes_them() {
    let mut strict = (*config("server.example.net")).clone();
    strict.validation = Options::strict();
    let mut p = Pair::new();
    p.server = Connection::accept(Arc::new(strict), 0, 9);
    p.drive();
    p.client_events.clear();
    p.server_events.clear();
    // Ours, whatever the case: handed to the application.
    p.client
        .send(&ccr_to(1, true, Some("Server.Example.NET"), "EXAMPLE.net"));
    p.client.send(&ccr_to(2, true, None, "example.net"));
    // Another realm, another host.
    p.client.send(&ccr_to(3, true, None, "other.example.org"));
    p.client
        .send(&ccr_to(4, true, Some("ocs2.example.net"), "example.net"));
    p.drive();
    let requests = p
        .server_events
        .iter()
        .filter(|e| matches!(e, Event::Request(_)))
        .count();
    assert_eq!(requests, 2, "{:?}", p.server_events);
    assert!(p
        .server_events
        .contains(&Event::Rejected { result_code: 3003 }));
    assert!(p
        .server_events
        .contains(&Event::Rejected { result_code: 3002 }));
    let a = answers(&p.client_events);
    assert_eq!(a.len(), 4);
    for (hbh, code, failed) in [
        (3, 3003, (avp::DESTINATION_REALM, &b"other.example.org"[..])),
        (4, 3002, (avp::DESTINATION_HOST, &b"ocs2.example.net"[..])),
    ] {
        let f = a
            .iter()
            .find(|f| Message::parse(f).unwrap().header().hop_by_hop == hbh)
            .unwrap();
        let m = Message::parse(f).unwrap();
        assert_eq!(result_code(f), Some(code));
        // 3xxx: the E bit, RFC 6733 section 7.1.3.
        assert_ne!(m.header().flags & crate::header::flags::ERROR, 0);
        let failed_avp = m.find(avp::FAILED_AVP).expect("Failed-AVP");
        assert_eq!(failed_avp.child(failed.0).unwrap().data(), failed.1);
    }

    // Lenient (the default): the same requests reach the application.
    let mut p = Pair::open();
    p.client.send(&ccr_to(3, true, None, "other.example.org"));
    p.client
        .send(&ccr_to(4, true, Some("ocs2.example.net"), "example.net"));
    p.drive();
    let codes: Vec<_> = answers(&p.client_events)
        .iter()
        .map(|f| result_code(f))
        .collect();
    assert_eq!(codes, [Some(2001), Some(2001)]);
}

/// A CER from `client.example.net` with header `flags` (R and whatever
/// else), the AVPs RFC 6733 section 5.3.1 requires, Auth-Application-Id 4
/// and what `more` adds.
fn cer_with(flags: u8, more: impl FnOnce(&mut Encoder<'_>)) -> Vec<u8> {
    let mut b = BytesMut::new();
    let mut e = Encoder::new(&mut b, flags, cmd::CAPABILITIES_EXCHANGE, 0, 1, 1);
    e.str(avp::ORIGIN_HOST, "client.example.net")
        .str(avp::ORIGIN_REALM, "example.net")
        .address(
            avp::HOST_IP_ADDRESS,
            &crate::types::Address::from(std::net::IpAddr::from([127, 0, 0, 1])),
        )
        .u32(avp::VENDOR_ID, 0)
        .str(avp::PRODUCT_NAME, "test")
        .u32(avp::AUTH_APPLICATION_ID, app::CREDIT_CONTROL);
    more(&mut e);
    e.finish().unwrap();
    b.to_vec()
}

/// A base request (`cmd`, header `flags` and `app_id`) from
/// `client.example.net` with what `body` writes after its Origin-Host.
fn base_request(
    command: u32,
    flags: u8,
    app_id: u32,
    body: impl FnOnce(&mut Encoder<'_>),
) -> Vec<u8> {
    let mut b = BytesMut::new();
    let mut e = Encoder::new(&mut b, flags, command, app_id, 9, 9);
    e.str(avp::ORIGIN_HOST, "client.example.net");
    body(&mut e);
    e.finish().unwrap();
    b.to_vec()
}

/// An AVP of code 99999 with the M bit: unknown to every dictionary.
const UNKNOWN_M: AvpId = AvpId {
    code: 99_999,
    vendor: 0,
    flags: crate::avp::flags::MANDATORY,
};

/// What a fresh server transmits after reading `bytes`, and its events.
fn server_reads(server: &mut Connection, bytes: &[u8]) -> (Vec<Vec<u8>>, Vec<Event>) {
    server.handle_data(bytes, 0);
    let mut out = Vec::new();
    let mut events = Vec::new();
    loop {
        let mut moved = false;
        while let Some(ev) = server.poll_event() {
            events.push(ev);
            moved = true;
        }
        while let Some(b) = server.poll_transmit() {
            out.extend(messages(&b));
            moved = true;
        }
        if !moved {
            return (out, events);
        }
    }
}

/// A server that has accepted a valid CER.
fn open_server() -> Connection {
    let mut s = Connection::accept(config("server.example.net"), 0, 9);
    let (out, events) = server_reads(&mut s, &cer_with(flags::REQUEST, |_| {}));
    assert_eq!(result_code(&out[0]), Some(2001));
    assert!(matches!(events[..], [Event::Opened { .. }]));
    s
}

#[test]
fn a_cer_that_breaks_its_definition_is_refused_with_the_prescribed_answer_and_closes() {
    let vsai = |e: &mut Encoder<'_>, vendor: bool, auth: bool, acct: bool| {
        let g = e.begin_group(avp::VENDOR_SPECIFIC_APPLICATION_ID);
        if vendor {
            e.u32(avp::VENDOR_ID, 10415);
        }
        if auth {
            e.u32(avp::AUTH_APPLICATION_ID, 4);
        }
        if acct {
            e.u32(avp::ACCT_APPLICATION_ID, 3);
        }
        e.end_group(g);
    };
    let r = flags::REQUEST;
    let cases: Vec<(&str, Vec<u8>, u32)> = vec![
        (
            "unknown AVP with M",
            cer_with(r, |e| {
                e.u32(UNKNOWN_M, 1);
            }),
            5001,
        ),
        (
            "second Origin-Host",
            cer_with(r, |e| {
                e.str(avp::ORIGIN_HOST, "other.example.net");
            }),
            5009,
        ),
        (
            "VSAI without an application",
            cer_with(r, |e| vsai(e, true, false, false)),
            5005,
        ),
        (
            "VSAI with both applications",
            cer_with(r, |e| vsai(e, true, true, true)),
            5009,
        ),
        (
            "VSAI without Vendor-Id",
            cer_with(r, |e| vsai(e, false, true, false)),
            5005,
        ),
        ("E bit", cer_with(r | flags::ERROR, |_| {}), 3008),
        ("P bit", cer_with(r | flags::PROXIABLE, |_| {}), 3008),
    ];
    for (what, cer, code) in cases {
        let mut s = Connection::accept(config("server.example.net"), 0, 9);
        let (out, events) = server_reads(&mut s, &cer);
        assert_eq!(out.len(), 1, "{what}: one answer");
        let a = Message::parse(&out[0]).unwrap();
        let e_bit = a.header().flags & flags::ERROR != 0;
        assert_eq!(result_code(&out[0]), Some(code), "{what}");
        assert_eq!(
            events,
            [Event::Closed(Close::Peer(CloseReason::Rejected(code)))],
            "{what}"
        );
        assert_eq!(a.command_code(), cmd::CAPABILITIES_EXCHANGE, "{what}");
        assert_eq!((a.header().hop_by_hop, a.header().end_to_end), (1, 1));
        if code < 4000 {
            // The generic error answer, E set.
            assert!(e_bit, "{what}: E bit");
        } else {
            // The CEA grammar: E clear, the capabilities, Failed-AVP.
            assert!(!e_bit, "{what}: E bit");
            for id in [
                avp::ORIGIN_HOST,
                avp::ORIGIN_REALM,
                avp::HOST_IP_ADDRESS,
                avp::VENDOR_ID,
                avp::PRODUCT_NAME,
                avp::FAILED_AVP,
            ] {
                assert!(a.find(id).is_some(), "{what}: {id:?} missing");
            }
        }
    }
}

#[test]
fn a_bad_dwr_or_dpr_is_answered_with_its_error_and_the_connection_goes_on() {
    let r = flags::REQUEST;
    let realm = |e: &mut Encoder<'_>| {
        e.str(avp::ORIGIN_REALM, "example.net");
    };
    let cases: Vec<(&str, Vec<u8>, u32)> = vec![
        (
            "DWR with the P bit",
            base_request(cmd::DEVICE_WATCHDOG, r | flags::PROXIABLE, 0, realm),
            3008,
        ),
        (
            "DWR with the E bit",
            base_request(cmd::DEVICE_WATCHDOG, r | flags::ERROR, 0, realm),
            3008,
        ),
        (
            "DWR under Application-Id 4",
            base_request(cmd::DEVICE_WATCHDOG, r, app::CREDIT_CONTROL, realm),
            3007,
        ),
        (
            "DWR without Origin-Realm",
            base_request(cmd::DEVICE_WATCHDOG, r, 0, |_| {}),
            5005,
        ),
        (
            "DWR with an unknown AVP with M",
            base_request(cmd::DEVICE_WATCHDOG, r, 0, |e| {
                realm(e);
                e.u32(UNKNOWN_M, 1);
            }),
            5001,
        ),
        (
            "DWR with two Origin-Realm",
            base_request(cmd::DEVICE_WATCHDOG, r, 0, |e| {
                realm(e);
                realm(e);
            }),
            5009,
        ),
        (
            "DPR without Disconnect-Cause",
            base_request(cmd::DISCONNECT_PEER, r, 0, realm),
            5005,
        ),
        (
            "DPR with Disconnect-Cause 9",
            base_request(cmd::DISCONNECT_PEER, r, 0, |e| {
                realm(e);
                e.i32(avp::DISCONNECT_CAUSE, 9);
            }),
            5004,
        ),
    ];
    let dwr = base_request(cmd::DEVICE_WATCHDOG, r, 0, realm);
    for (what, request, code) in cases {
        let mut s = open_server();
        let (out, events) = server_reads(&mut s, &request);
        assert_eq!(out.len(), 1, "{what}: one answer");
        assert_eq!(result_code(&out[0]), Some(code), "{what}");
        let a = Message::parse(&out[0]).unwrap();
        assert_eq!(a.header().flags & flags::ERROR != 0, code < 4000, "{what}");
        assert!(events.is_empty(), "{what}: {events:?}");
        assert_eq!(s.state(), State::Open, "{what}");
        // The connection goes on: a valid DWR is answered 2001.
        let (out, _) = server_reads(&mut s, &dwr);
        assert_eq!(result_code(&out[0]), Some(2001), "{what}: then a DWR");
    }
}

#[test]
fn a_cer_on_an_open_connection_gets_a_whole_cea_with_5012() {
    let mut s = open_server();
    let (out, events) = server_reads(&mut s, &cer_with(flags::REQUEST, |_| {}));
    assert!(events.is_empty());
    assert_eq!(result_code(&out[0]), Some(5012));
    let a = Message::parse(&out[0]).unwrap();
    for id in [
        avp::HOST_IP_ADDRESS,
        avp::VENDOR_ID,
        avp::PRODUCT_NAME,
        avp::AUTH_APPLICATION_ID,
    ] {
        assert!(a.find(id).is_some(), "{id:?} missing");
    }
    assert_eq!(s.state(), State::Open);
}

#[test]
fn a_request_of_an_application_not_served_is_3007_before_its_avps_are_checked() {
    let mut s = open_server();
    // An Accounting-Request (271, application 3) missing every AVP its
    // grammar requires: the application comes first.
    let acr = base_request(
        cmd::ACCOUNTING,
        flags::REQUEST | flags::PROXIABLE,
        3,
        |_| {},
    );
    let (out, events) = server_reads(&mut s, &acr);
    assert_eq!(result_code(&out[0]), Some(3007));
    assert_eq!(events, [Event::Rejected { result_code: 3007 }]);
    let a = Message::parse(&out[0]).unwrap();
    assert_ne!(a.header().flags & flags::ERROR, 0);
}
