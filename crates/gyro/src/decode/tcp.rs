//! TCP stream reassembly and Diameter framing for captures.
//!
//! Segments are grouped per direction of a connection (source and
//! destination address and port), ordered by sequence number, cleared of
//! retransmitted and overlapping bytes, and the resulting byte stream is cut
//! into messages with [`frame_length`]. A stream that cannot be framed is
//! reported and re-synchronised at the next segment that starts with a
//! plausible Diameter header, so one broken message does not hide the rest
//! of the capture. Memory stays bounded: a message is at most
//! [`MAX_MESSAGE_LEN`] bytes, and out-of-order data waiting for a lost
//! segment is given up past [`MAX_PENDING_BYTES`].

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use gyro_diameter::header::{frame_length, HEADER_LEN, MAX_MESSAGE_LEN, VERSION};

/// Well-known Diameter ports: plain TCP and TLS.
pub const DIAMETER_PORTS: [u16; 2] = [3868, 5658];

/// Out-of-order bytes held per direction while waiting for a missing segment.
pub const MAX_PENDING_BYTES: usize = 32 << 20;

/// Out-of-order segments held per direction while waiting for a missing one.
pub const MAX_PENDING_SEGMENTS: usize = 4096;

/// One direction of a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
}

impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -> {}", self.src, self.dst)
    }
}

/// Where and when something was seen in a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Frame number, counted from 1 like Wireshark does.
    pub frame: u64,
    /// Capture time since the Unix epoch, when the format records one.
    pub time: Option<Duration>,
    /// The direction of the connection.
    pub flow: FlowKey,
}

/// A TCP segment as read from a capture.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// Frame and flow.
    pub seen: Seen,
    /// Sequence number of the first payload byte (or of the SYN).
    pub seq: u32,
    /// SYN flag.
    pub syn: bool,
    /// The TCP payload.
    pub payload: &'a [u8],
}

/// What reassembly produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A whole message, seen complete in `seen.frame`.
    Message {
        /// The frame that completed the message.
        seen: Seen,
        /// The frame that carried its first byte.
        first_frame: u64,
        /// The message bytes (exactly one message, as framed).
        bytes: Vec<u8>,
    },
    /// Bytes of a Diameter flow that could not be turned into messages.
    Error {
        /// Where the problem was noticed.
        seen: Seen,
        /// What is wrong.
        message: String,
    },
    /// Something worth knowing that is not an error of any message.
    Note {
        /// Where it was noticed.
        seen: Seen,
        /// The note.
        message: String,
    },
}

/// True when `b` starts like a Diameter message header: version 1, a sane
/// length, reserved flag bits clear and, once visible, a non-zero command.
pub fn looks_like_header(b: &[u8]) -> bool {
    let Some(h) = b.get(..8) else {
        return false;
    };
    let len = u32::from_be_bytes([0, h[1], h[2], h[3]]) as usize;
    h[0] == VERSION
        && len >= HEADER_LEN
        && len % 4 == 0
        && len <= MAX_MESSAGE_LEN
        && h[4] & 0x0F == 0
        && (h[5], h[6], h[7]) != (0, 0, 0)
}

#[derive(Debug)]
struct Pending {
    seen: Seen,
    data: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No payload seen yet.
    Unknown,
    /// Treated as Diameter.
    Diameter,
    /// First payload did not look like Diameter on a non-Diameter port.
    Other,
}

#[derive(Debug)]
struct Flow {
    kind: Kind,
    /// Next expected sequence number, once known.
    next_seq: Option<u32>,
    /// Stream offset of `next_seq`.
    next_abs: u64,
    pending: BTreeMap<u64, Pending>,
    pending_bytes: usize,
    /// Bytes of the message being assembled (starts at a message boundary).
    buf: Vec<u8>,
    /// Frame of the first byte in `buf`.
    buf_frame: u64,
    /// Whether `buf` is aligned on a message boundary.
    synced: bool,
    /// Bytes dropped while looking for a message boundary.
    skipped: u64,
    /// Whether the connection's SYN was captured (the stream starts on a
    /// message boundary).
    saw_syn: bool,
    last: Option<Seen>,
}

impl Flow {
    fn new() -> Self {
        Flow {
            kind: Kind::Unknown,
            next_seq: None,
            next_abs: 0,
            pending: BTreeMap::new(),
            pending_bytes: 0,
            buf: Vec::new(),
            buf_frame: 0,
            synced: true,
            skipped: 0,
            saw_syn: false,
            last: None,
        }
    }
}

/// Reassembles every TCP flow of a capture.
#[derive(Debug, Default)]
pub struct Reassembler {
    flows: HashMap<FlowKey, Flow>,
    /// Flows in the order they were first seen, for a stable report.
    order: Vec<FlowKey>,
}

impl Reassembler {
    /// Feeds one segment; complete messages and problems go to `out`.
    pub fn push(&mut self, seg: Segment<'_>, out: &mut Vec<Event>) {
        let key = seg.seen.flow;
        if !self.flows.contains_key(&key) {
            self.order.push(key);
        }
        let restart = match self.flows.get(&key) {
            // A new SYN with another sequence number: the port was reused.
            Some(f) => seg.syn && f.next_seq.is_some_and(|n| n != seg.seq.wrapping_add(1)),
            None => false,
        };
        if restart {
            if let Some(old) = self.flows.remove(&key) {
                finish_flow(old, key, out);
            }
        }
        let flow = self.flows.entry(key).or_insert_with(Flow::new);
        flow.last = Some(seg.seen);
        if flow.next_seq.is_none() {
            if seg.syn {
                flow.saw_syn = true;
                flow.next_seq = Some(seg.seq.wrapping_add(1));
            } else if !seg.payload.is_empty() {
                flow.next_seq = Some(seg.seq);
            }
        }
        if seg.payload.is_empty() {
            return;
        }
        let data_seq = if seg.syn {
            seg.seq.wrapping_add(1)
        } else {
            seg.seq
        };
        if flow.kind == Kind::Unknown {
            let port = |a: SocketAddr| DIAMETER_PORTS.contains(&a.port());
            flow.kind = if port(key.src) || port(key.dst) || looks_like_header(seg.payload) {
                Kind::Diameter
            } else {
                Kind::Other
            };
            // Without the SYN, data before the first segment seen was not
            // captured: look for a message boundary unless this segment
            // starts with one.
            flow.synced = flow.saw_syn || looks_like_header(seg.payload);
        }
        if flow.kind != Kind::Diameter {
            return;
        }
        let Some(next_seq) = flow.next_seq else {
            return;
        };
        // Signed distance from the next expected byte (wrap-safe).
        let d = data_seq.wrapping_sub(next_seq) as i32 as i64;
        let start = flow.next_abs as i64 + d;
        let end = start + seg.payload.len() as i64;
        let next = flow.next_abs as i64;
        if end <= next {
            return; // retransmission of bytes already taken
        }
        if start > next {
            let at = start as u64;
            let keep = match flow.pending.get(&at) {
                Some(p) => p.data.len() < seg.payload.len(),
                None => true,
            };
            if keep {
                if let Some(old) = flow.pending.insert(
                    at,
                    Pending {
                        seen: seg.seen,
                        data: seg.payload.to_vec(),
                    },
                ) {
                    flow.pending_bytes -= old.data.len();
                }
                flow.pending_bytes += seg.payload.len();
            }
            if flow.pending_bytes > MAX_PENDING_BYTES || flow.pending.len() > MAX_PENDING_SEGMENTS {
                skip_gap(flow, key, seg.seen, out);
                drain_pending(flow, key, Some(seg.seen), out);
            }
            return;
        }
        let fresh = &seg.payload[(next - start) as usize..];
        take(flow, key, seg.seen, seg.seen.frame, fresh, out);
        drain_pending(flow, key, Some(seg.seen), out);
    }

    /// Ends the capture: gives up on missing segments, then reports what is
    /// left of each flow.
    pub fn finish(mut self, out: &mut Vec<Event>) {
        for key in std::mem::take(&mut self.order) {
            if let Some(flow) = self.flows.remove(&key) {
                finish_flow(flow, key, out);
            }
        }
    }
}

fn finish_flow(mut flow: Flow, key: FlowKey, out: &mut Vec<Event>) {
    if flow.kind != Kind::Diameter {
        return;
    }
    while !flow.pending.is_empty() {
        let seen = flow.last.unwrap_or(Seen {
            frame: 0,
            time: None,
            flow: key,
        });
        skip_gap(&mut flow, key, seen, out);
        drain_pending(&mut flow, key, None, out);
    }
    let Some(seen) = flow.last else {
        return;
    };
    if flow.synced && !flow.buf.is_empty() {
        let need = match frame_length(&flow.buf, MAX_MESSAGE_LEN) {
            Ok(Some(n)) => format!(" of {n}"),
            _ => String::new(),
        };
        out.push(Event::Error {
            seen,
            message: format!(
                "flow {key}: the capture ends inside a message that starts in frame {} \
                 ({} bytes{need})",
                flow.buf_frame,
                flow.buf.len()
            ),
        });
    }
    if flow.skipped > 0 {
        out.push(Event::Note {
            seen,
            message: format!(
                "flow {key}: {} bytes skipped that do not start at a Diameter message boundary",
                flow.skipped
            ),
        });
    }
}

/// Gives up on the bytes missing before the first pending segment.
fn skip_gap(flow: &mut Flow, key: FlowKey, seen: Seen, out: &mut Vec<Event>) {
    let Some((&at, _)) = flow.pending.iter().next() else {
        return;
    };
    let missing = at.saturating_sub(flow.next_abs);
    if flow.synced && !flow.buf.is_empty() {
        out.push(Event::Error {
            seen,
            message: format!(
                "flow {key}: {missing} bytes missing from the capture inside the message \
                 that starts in frame {}; {} bytes of it dropped",
                flow.buf_frame,
                flow.buf.len()
            ),
        });
    } else if flow.synced {
        out.push(Event::Note {
            seen,
            message: format!("flow {key}: {missing} bytes missing from the capture"),
        });
    }
    flow.buf.clear();
    flow.synced = false;
    if let Some(n) = flow.next_seq {
        flow.next_seq = Some(n.wrapping_add(missing as u32));
    }
    flow.next_abs = at;
}

/// Moves pending segments that have become contiguous into the stream.
/// Messages they complete are reported at `now` (the segment that filled
/// the gap) or, when draining at the end, at the pending segment's frame.
fn drain_pending(flow: &mut Flow, key: FlowKey, now: Option<Seen>, out: &mut Vec<Event>) {
    while let Some(entry) = flow.pending.first_entry() {
        let at = *entry.key();
        if at > flow.next_abs {
            break;
        }
        let p = entry.remove();
        flow.pending_bytes -= p.data.len();
        let end = at + p.data.len() as u64;
        if end <= flow.next_abs {
            continue;
        }
        let fresh = &p.data[(flow.next_abs - at) as usize..];
        take(flow, key, now.unwrap_or(p.seen), p.seen.frame, fresh, out);
    }
}

/// Appends in-order bytes that arrived in frame `from` to the stream and
/// frames what it can; messages completed are reported at `seen`.
fn take(flow: &mut Flow, key: FlowKey, seen: Seen, from: u64, data: &[u8], out: &mut Vec<Event>) {
    flow.next_abs += data.len() as u64;
    if let Some(n) = flow.next_seq {
        flow.next_seq = Some(n.wrapping_add(data.len() as u32));
    }
    if !flow.synced {
        if looks_like_header(data) {
            flow.synced = true;
            flow.buf.clear();
        } else {
            flow.skipped += data.len() as u64;
            return;
        }
    }
    if flow.buf.is_empty() {
        flow.buf_frame = from;
    }
    flow.buf.extend_from_slice(data);
    loop {
        match frame_length(&flow.buf, MAX_MESSAGE_LEN) {
            Ok(Some(n)) if flow.buf.len() >= n => {
                let rest = flow.buf.split_off(n);
                let bytes = std::mem::replace(&mut flow.buf, rest);
                out.push(Event::Message {
                    seen,
                    first_frame: flow.buf_frame,
                    bytes,
                });
                flow.buf_frame = from;
            }
            Ok(_) => break,
            Err(e) => {
                out.push(Event::Error {
                    seen,
                    message: format!(
                        "flow {key}: the stream cannot be framed at the message starting in \
                         frame {}: {e}; {} bytes dropped until the next message boundary",
                        flow.buf_frame,
                        flow.buf.len()
                    ),
                });
                flow.buf.clear();
                flow.synced = false;
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> FlowKey {
        FlowKey {
            src: "10.0.0.1:40000".parse().unwrap(),
            dst: "10.0.0.2:3868".parse().unwrap(),
        }
    }

    fn msg(cmd: u8, body: usize) -> Vec<u8> {
        let len = 20 + body;
        let mut m = vec![1, 0, 0, len as u8, 0x80, 0, 1, cmd];
        m.resize(len, 0);
        m
    }

    fn seg(frame: u64, seq: u32, payload: &[u8]) -> Segment<'_> {
        Segment {
            seen: Seen {
                frame,
                time: None,
                flow: key(),
            },
            seq,
            syn: false,
            payload,
        }
    }

    fn messages(events: &[Event]) -> Vec<(u64, Vec<u8>)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Message { seen, bytes, .. } => Some((seen.frame, bytes.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn splits_packed_segments_and_joins_split_ones() {
        let (a, b, c) = (msg(1, 8), msg(2, 4), msg(3, 12));
        let mut stream = a.clone();
        stream.extend_from_slice(&b);
        stream.extend_from_slice(&c);
        let mut r = Reassembler::default();
        let mut out = Vec::new();
        // a and b and the first 10 bytes of c in one segment, the rest later.
        let cut = a.len() + b.len() + 10;
        r.push(seg(1, 1000, &stream[..cut]), &mut out);
        r.push(seg(2, 1000 + cut as u32, &stream[cut..]), &mut out);
        r.finish(&mut out);
        assert_eq!(messages(&out), vec![(1, a), (1, b), (2, c)]);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn orders_by_sequence_and_drops_retransmissions_and_overlaps() {
        let (a, b) = (msg(1, 40), msg(2, 40));
        let mut stream = a.clone();
        stream.extend_from_slice(&b);
        let mut r = Reassembler::default();
        let mut out = Vec::new();
        let s = 7u32.wrapping_sub(30); // wraps around zero mid-stream
        r.push(seg(1, s, &stream[..30]), &mut out);
        r.push(seg(2, s.wrapping_add(50), &stream[50..]), &mut out); // out of order
        r.push(seg(3, s, &stream[..30]), &mut out); // retransmission
        r.push(seg(4, s.wrapping_add(20), &stream[20..60]), &mut out); // overlaps both
        r.finish(&mut out);
        assert_eq!(messages(&out), vec![(4, a), (4, b)]);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn reports_unframable_stream_and_resyncs() {
        let a = msg(1, 4);
        let mut bad = msg(2, 4);
        bad[3] = 22; // length not a multiple of 4
        let mut r = Reassembler::default();
        let mut out = Vec::new();
        let mut syn = seg(1, 99, &[]);
        syn.syn = true;
        r.push(syn, &mut out);
        r.push(seg(2, 100, &bad), &mut out);
        r.push(seg(3, 100 + bad.len() as u32, &[9; 5]), &mut out);
        r.push(seg(4, 105 + bad.len() as u32, &a), &mut out);
        r.finish(&mut out);
        assert!(
            matches!(&out[0], Event::Error { message, .. } if message.contains("cannot be framed"))
        );
        assert_eq!(messages(&out), vec![(4, a)]);
        assert!(
            matches!(&out[2], Event::Note { message, .. } if message.contains("5 bytes skipped"))
        );
    }

    #[test]
    fn reports_lost_segment_and_truncated_end() {
        let (a, b) = (msg(1, 40), msg(2, 40));
        let mut r = Reassembler::default();
        let mut out = Vec::new();
        r.push(seg(1, 0, &a[..20]), &mut out);
        // bytes 20..60 never captured; b starts at 60.
        r.push(seg(2, 60, &b), &mut out);
        r.push(seg(3, 120, &a[..30]), &mut out);
        r.finish(&mut out);
        assert!(out
            .iter()
            .any(|e| matches!(e, Event::Error { message, .. } if message.contains("missing"))));
        assert!(out.iter().any(
            |e| matches!(e, Event::Error { message, .. } if message.contains("capture ends"))
        ));
        assert_eq!(messages(&out), vec![(2, b)]);
    }

    #[test]
    fn ignores_other_protocols_on_other_ports() {
        let mut r = Reassembler::default();
        let mut out = Vec::new();
        let mut s = seg(1, 0, b"GET / HTTP/1.1\r\n\r\n");
        s.seen.flow.dst = "10.0.0.2:80".parse().unwrap();
        r.push(s, &mut out);
        let m = msg(1, 0);
        let mut s = seg(2, 0, &m);
        s.seen.flow.dst = "10.0.0.2:9999".parse().unwrap();
        r.push(s, &mut out);
        r.finish(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(messages(&out).len(), 1);
    }
}
