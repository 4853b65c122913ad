//! The JSON view: `gyro decode --json` prints one JSON array (not JSON
//! Lines), one item per message or flow error, in input order.
//!
//! A message item has `frame`, `time`, `src`, `dst` (captures only),
//! `offset` (input with several messages), `length`, `header` (`version`,
//! `length`, `flags` as letters, `request`, `command_code`, `command`,
//! `short`, `application_id`, `application`, `hop_by_hop`, `end_to_end`),
//! `avps`, `valid`, and `error` when invalid (`message`, `result_code`,
//! `result_name`, `answered`: whether gyro would send that answer, never
//! for an answer, `failed_avps`). Each AVP has `name`, `code`, `vendor`,
//! `vendor_name`, `flags`, `length`, `offset`, `type`, and `value`
//! (numbers as numbers, text, addresses and ISO-8601 times as strings,
//! OctetString as hex with `text` when printable), `enum` for enumerated
//! names, `label` for named numbers (applications, vendors, result codes),
//! `avps` for Grouped children and `error` when the value does not decode.
//! A flow error item has the capture fields, `valid: false` and
//! `error.message`.

use serde_json::{json, Map, Value};

use super::dictionary::result_name;
use super::model::{capture_time, AvpNode, Decoded, NodeValue};
use super::render::printable;
use super::tcp::Seen;

/// The JSON object for one message.
pub fn message(d: &Decoded) -> Value {
    let mut o = Map::new();
    if let Some(seen) = &d.seen {
        origin(&mut o, seen);
    }
    if let Some(off) = d.offset {
        o.insert("offset".into(), json!(off));
    }
    o.insert("length".into(), json!(d.length));
    if let Some(h) = &d.header {
        let r = &h.raw;
        o.insert(
            "header".into(),
            json!({
                "version": r.version,
                "length": r.length,
                "flags": h.flag_names(),
                "request": r.is_request(),
                "command_code": r.command_code,
                "command": h.command,
                "short": h.short,
                "application_id": r.application_id,
                "application": h.application,
                "hop_by_hop": r.hop_by_hop,
                "end_to_end": r.end_to_end,
            }),
        );
    }
    o.insert(
        "avps".into(),
        Value::Array(d.avps.iter().map(avp).collect()),
    );
    o.insert("valid".into(), json!(d.is_valid()));
    if let Some(p) = &d.problem {
        o.insert(
            "error".into(),
            json!({
                "message": p.message,
                "result_code": p.result_code,
                "result_name": p.result_code.and_then(result_name),
                "answered": p.result_code.is_some() && !d.is_answer(),
                "failed_avps": p.failed_avps.iter().map(avp).collect::<Vec<_>>(),
            }),
        );
    }
    Value::Object(o)
}

/// The JSON object for a flow error.
pub fn flow_error(seen: &Seen, message: &str) -> Value {
    let mut o = Map::new();
    origin(&mut o, seen);
    o.insert("valid".into(), json!(false));
    o.insert("error".into(), json!({ "message": message }));
    Value::Object(o)
}

fn origin(o: &mut Map<String, Value>, seen: &Seen) {
    o.insert("frame".into(), json!(seen.frame));
    if let Some(t) = seen.time {
        o.insert("time".into(), json!(capture_time(t)));
    }
    o.insert("src".into(), json!(seen.flow.src.to_string()));
    o.insert("dst".into(), json!(seen.flow.dst.to_string()));
}

/// The JSON object for one AVP.
pub fn avp(a: &AvpNode) -> Value {
    let mut o = Map::new();
    o.insert("name".into(), json!(a.display_name()));
    o.insert("code".into(), json!(a.code));
    o.insert("vendor".into(), json!(a.vendor));
    if let Some(v) = a.vendor_name {
        o.insert("vendor_name".into(), json!(v));
    }
    o.insert("flags".into(), json!(a.flag_names()));
    o.insert("length".into(), json!(a.length));
    o.insert("offset".into(), json!(a.offset));
    if let Some(t) = a.ty {
        o.insert("type".into(), json!(t.name()));
    }
    match &a.value {
        NodeValue::Grouped => {
            o.insert(
                "avps".into(),
                Value::Array(a.children.iter().map(avp).collect()),
            );
        }
        NodeValue::Unsigned { value, label } => {
            o.insert("value".into(), json!(value));
            if let Some(l) = label {
                o.insert("label".into(), json!(l));
            }
        }
        NodeValue::Signed(i) => {
            o.insert("value".into(), json!(i));
        }
        NodeValue::Float(f) => {
            o.insert("value".into(), json!(f));
        }
        NodeValue::Enum { value, name } => {
            o.insert("value".into(), json!(value));
            if let Some(n) = name {
                o.insert("enum".into(), json!(n));
            }
        }
        NodeValue::Text(s) | NodeValue::Address(s) => {
            o.insert("value".into(), json!(s));
        }
        NodeValue::Time { ntp, iso } => {
            o.insert("value".into(), json!(iso));
            o.insert("ntp".into(), json!(ntp));
        }
        NodeValue::Octets(b) => {
            o.insert("value".into(), json!(hex::encode(b)));
            if let Some(s) = printable(b) {
                o.insert("text".into(), json!(s));
            }
        }
    }
    if let Some(e) = &a.error {
        o.insert("error".into(), json!(e));
    }
    Value::Object(o)
}
