//! The decoded form of a message: header, AVP tree with names and values,
//! and what is wrong with it. Both the text and the JSON output are views
//! of this model.

use std::time::Duration;

use gyro_diameter::avp::AvpIter;
use gyro_diameter::header::{flags as cmd_flags, Header, HEADER_LEN};
use gyro_diameter::types::{decode_value, AvpType, Value};
use gyro_diameter::Avp;

use super::dictionary as dict;
use super::tcp::Seen;

/// Grouped AVPs nested deeper than this are shown as hex: enough for any
/// real grammar, and it bounds the recursion on hostile input.
pub const MAX_DEPTH: usize = 16;

/// One decoded message (or what could be decoded of it).
#[derive(Debug, Clone)]
pub struct Decoded {
    /// Where it was found in a capture.
    pub seen: Option<Seen>,
    /// Byte offset in the input, for hex and raw input.
    pub offset: Option<usize>,
    /// Bytes the message occupies in the input.
    pub length: usize,
    /// The header, when there were at least 20 bytes.
    pub header: Option<HeaderInfo>,
    /// Top-level AVPs, as far as they decode.
    pub avps: Vec<AvpNode>,
    /// Set when the message is invalid.
    pub problem: Option<ProblemInfo>,
}

/// The header with names looked up.
#[derive(Debug, Clone)]
pub struct HeaderInfo {
    /// The raw header fields.
    pub raw: Header,
    /// "Credit-Control-Request", when the command is known.
    pub command: Option<String>,
    /// "CCR", when the command is known.
    pub short: Option<String>,
    /// Application name, when known.
    pub application: Option<&'static str>,
}

impl HeaderInfo {
    /// The command flags as letters: R, P, E, T.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let f = self.raw.flags;
        [
            (cmd_flags::REQUEST, "R"),
            (cmd_flags::PROXIABLE, "P"),
            (cmd_flags::ERROR, "E"),
            (cmd_flags::RETRANSMIT, "T"),
        ]
        .into_iter()
        .filter(|(b, _)| f & b != 0)
        .map(|(_, n)| n)
        .collect()
    }
}

/// One AVP.
#[derive(Debug, Clone)]
pub struct AvpNode {
    /// Offset of the AVP header from the start of the message.
    pub offset: usize,
    /// AVP Code.
    pub code: u32,
    /// Vendor-ID (0 when V is clear).
    pub vendor: u32,
    /// Vendor name, when known.
    pub vendor_name: Option<&'static str>,
    /// The flags octet.
    pub flags: u8,
    /// The AVP Length field.
    pub length: usize,
    /// Dictionary name.
    pub name: Option<&'static str>,
    /// Dictionary data format.
    pub ty: Option<AvpType>,
    /// The decoded value.
    pub value: NodeValue,
    /// Children of a Grouped AVP.
    pub children: Vec<AvpNode>,
    /// Why the value (or a child) does not decode.
    pub error: Option<String>,
}

impl AvpNode {
    /// The AVP flags as letters: V, M, P.
    pub fn flag_names(&self) -> Vec<&'static str> {
        use gyro_diameter::avp::flags;
        [
            (flags::VENDOR, "V"),
            (flags::MANDATORY, "M"),
            (flags::PROTECTED, "P"),
        ]
        .into_iter()
        .filter(|(b, _)| self.flags & b != 0)
        .map(|(_, n)| n)
        .collect()
    }

    /// The dictionary name, or `Unknown-AVP` for an AVP it does not know.
    pub fn display_name(&self) -> &str {
        self.name.unwrap_or("Unknown-AVP")
    }
}

/// A decoded AVP value.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    /// Grouped: see the children.
    Grouped,
    /// Unsigned32, Unsigned64; `label` names well-known numbers
    /// (applications, vendors, result codes).
    Unsigned {
        /// The number.
        value: u64,
        /// Its name, if it has one.
        label: Option<String>,
    },
    /// Integer32, Integer64.
    Signed(i64),
    /// Float32, Float64.
    Float(f64),
    /// Enumerated, with the dictionary's name for the value.
    Enum {
        /// The number.
        value: i32,
        /// Its name, if the dictionary has one.
        name: Option<&'static str>,
    },
    /// UTF8String, DiameterIdentity, DiameterURI, IPFilterRule.
    Text(String),
    /// Address, printed.
    Address(String),
    /// Time.
    Time {
        /// NTP seconds as on the wire.
        ntp: u32,
        /// ISO-8601 UTC.
        iso: String,
    },
    /// OctetString, unknown AVPs and values that do not decode.
    Octets(Vec<u8>),
}

/// Why a message is invalid, and what gyro would answer.
#[derive(Debug, Clone)]
pub struct ProblemInfo {
    /// What is wrong.
    pub message: String,
    /// The Result-Code gyro would answer with, if it would answer.
    pub result_code: Option<u32>,
    /// The Failed-AVP contents, decoded.
    pub failed_avps: Vec<AvpNode>,
}

impl Decoded {
    /// Whether the message decoded and validated cleanly.
    pub fn is_valid(&self) -> bool {
        self.problem.is_none()
    }

    /// Whether the message is an answer (R bit clear): its problem is
    /// reported, never answered.
    pub fn is_answer(&self) -> bool {
        self.header.as_ref().is_some_and(|h| !h.raw.is_request())
    }
}

/// Decodes one message (`buf` holds exactly the bytes framed for it) and
/// validates requests. Never panics, whatever the bytes.
pub fn decode(buf: &[u8], strict: bool) -> Decoded {
    let mut d = Decoded {
        seen: None,
        offset: None,
        length: buf.len(),
        header: None,
        avps: Vec::new(),
        problem: None,
    };
    let Ok(raw) = Header::parse(buf) else {
        d.problem = Some(ProblemInfo {
            message: format!(
                "only {} bytes: shorter than a {HEADER_LEN}-byte header",
                buf.len()
            ),
            result_code: Some(gyro_diameter::codes::result::INVALID_MESSAGE_LENGTH),
            failed_avps: Vec::new(),
        });
        return d;
    };
    let request = raw.is_request();
    let names = dict::command(raw.command_code, raw.application_id, request);
    d.header = Some(HeaderInfo {
        raw,
        command: names.as_ref().map(|n| n.name.clone()),
        short: names.map(|n| n.short),
        application: dict::application_name(raw.application_id),
    });
    // AVPs as far as they go, even when the header is wrong.
    let body = buf.get(HEADER_LEN..).unwrap_or(&[]);
    let declared = (raw.length as usize).clamp(HEADER_LEN, buf.len().max(HEADER_LEN));
    let body = &body[..(declared - HEADER_LEN).min(body.len())];
    let (avps, structural) = decode_run(AvpIter::new(body, HEADER_LEN), 0);
    d.avps = avps;
    d.problem = dict::validate(buf, strict).err().map(|p| ProblemInfo {
        message: p.message,
        result_code: Some(p.result_code),
        failed_avps: p
            .failed_avps
            .iter()
            .flat_map(|raw| decode_run(AvpIter::new(raw, 0), 0).0)
            .map(example)
            .collect(),
    });
    if d.problem.is_none() {
        // The validator accepted it; report what the decoder could not read.
        d.problem = structural.map(|(message, failed)| ProblemInfo {
            message,
            result_code: None,
            failed_avps: failed.into_iter().collect(),
        });
    }
    d
}

/// A structural problem found while decoding: its description and the
/// offending AVP.
type Structural = Option<(String, Option<AvpNode>)>;

/// Decodes a run of AVPs; returns the nodes and the first problem found.
fn decode_run(iter: AvpIter<'_>, depth: usize) -> (Vec<AvpNode>, Structural) {
    let mut nodes = Vec::new();
    let mut problem: Structural = None;
    for item in iter {
        match item {
            Ok(avp) => {
                let (node, p) = decode_avp(&avp, depth);
                if problem.is_none() {
                    problem = p;
                }
                nodes.push(node);
            }
            Err(e) => {
                if problem.is_none() {
                    problem = Some((e.to_string(), None));
                }
            }
        }
    }
    (nodes, problem)
}

fn decode_avp(avp: &Avp<'_>, depth: usize) -> (AvpNode, Structural) {
    let info = dict::avp(avp.code(), avp.vendor_id());
    let mut node = AvpNode {
        offset: avp.offset(),
        code: avp.code(),
        vendor: avp.vendor_id(),
        vendor_name: (avp.vendor_id() != 0)
            .then(|| dict::vendor_name(avp.vendor_id()))
            .flatten(),
        flags: avp.flags(),
        length: avp.length(),
        name: info.map(|i| i.name),
        ty: info.map(|i| i.ty),
        value: NodeValue::Octets(avp.data().to_vec()),
        children: Vec::new(),
        error: None,
    };
    let Some(info) = info else {
        return (node, None);
    };
    let mut problem = None;
    if info.ty == AvpType::Grouped {
        if depth >= MAX_DEPTH {
            node.error = Some(format!(
                "nested deeper than {MAX_DEPTH} levels; shown as hex"
            ));
            return (node, None);
        }
        let (children, p) = decode_run(avp.grouped(), depth + 1);
        node.value = NodeValue::Grouped;
        node.children = children;
        if let Some((msg, _)) = &p {
            node.error = Some(msg.clone());
        }
        problem = p;
        if let Some((_, failed @ None)) = &mut problem {
            *failed = Some(leaf(&node));
        }
        return (node, problem);
    }
    match decode_value(info.ty, avp.data()) {
        Ok(v) => node.value = value(avp, v),
        Err(e) => {
            node.error = Some(e.to_string());
            problem = Some((
                format!("{} ({}): {e}", info.name, avp.code()),
                Some(leaf(&node)),
            ));
        }
    }
    (node, problem)
}

/// Failed-AVP may carry a built example of a missing AVP (zero-filled
/// data): show its bytes rather than complain that they do not decode.
fn example(mut n: AvpNode) -> AvpNode {
    if n.error.take().is_some() && n.children.is_empty() {
        n.value = NodeValue::Octets(Vec::new());
    }
    n.children = n.children.into_iter().map(example).collect();
    n
}

/// A copy of a node without its children, for Failed-AVP reports.
fn leaf(n: &AvpNode) -> AvpNode {
    AvpNode {
        children: Vec::new(),
        ..n.clone()
    }
}

fn value(avp: &Avp<'_>, v: Value<'_>) -> NodeValue {
    let unsigned = |value: u64| NodeValue::Unsigned {
        value,
        label: dict::number_label(avp.code(), avp.vendor_id(), value),
    };
    match v {
        Value::OctetString(b) => NodeValue::Octets(b.to_vec()),
        Value::Integer32(i) => NodeValue::Signed(i64::from(i)),
        Value::Integer64(i) => NodeValue::Signed(i),
        Value::Unsigned32(u) => unsigned(u64::from(u)),
        Value::Unsigned64(u) => unsigned(u),
        Value::Float32(f) => NodeValue::Float(f64::from(f)),
        Value::Float64(f) => NodeValue::Float(f),
        Value::Grouped => NodeValue::Grouped,
        Value::Address(a) => NodeValue::Address(a.to_string()),
        Value::Time(t) => NodeValue::Time {
            ntp: t.0,
            iso: iso8601(t.to_unix(), 0),
        },
        Value::UTF8String(s) | Value::DiameterIdentity(s) | Value::IPFilterRule(s) => {
            NodeValue::Text(s.to_string())
        }
        Value::DiameterURI(u) => NodeValue::Text(u.to_string()),
        Value::Enumerated(i) => NodeValue::Enum {
            value: i,
            name: dict::enum_name(avp.code(), avp.vendor_id(), i),
        },
    }
}

/// Formats Unix seconds (plus microseconds) as ISO-8601 UTC, e.g.
/// `2026-03-30T05:08:17Z` or `2026-03-30T05:08:17.123456Z`.
pub fn iso8601(unix: i64, micros: u32) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    if micros == 0 {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
    } else {
        format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{micros:06}Z")
    }
}

/// Formats a capture timestamp.
pub fn capture_time(t: Duration) -> String {
    let secs = i64::try_from(t.as_secs()).unwrap_or(i64::MAX / 2);
    iso8601(secs, t.subsec_micros())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_matches_known_dates() {
        assert_eq!(iso8601(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_774_847_297, 0), "2026-03-30T05:08:17Z");
        assert_eq!(iso8601(951_782_400, 5), "2000-02-29T00:00:00.000005Z");
        assert_eq!(iso8601(-2_208_988_800, 0), "1900-01-01T00:00:00Z");
        assert_eq!(iso8601(4_294_967_295, 0), "2106-02-07T06:28:15Z");
    }

    #[test]
    fn short_and_broken_input_is_reported_not_panicked_on() {
        assert_eq!(
            decode(&[1, 0, 0], false).problem.unwrap().result_code,
            Some(5015)
        );
        let mut m = vec![
            1, 0, 0, 28, 0x80, 0, 1, 0x18, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2,
        ];
        m.extend_from_slice(&[0, 0, 1, 8, 0x40, 0, 0, 99]);
        let d = decode(&m, false);
        assert_eq!(d.problem.unwrap().result_code, Some(5014));
        for n in 0..m.len() {
            decode(&m[..n], true);
        }
    }
}
