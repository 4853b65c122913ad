//! The text view: one header line per message, then one line per AVP,
//! indented two spaces per level of Grouped nesting.

use std::fmt::Write;

use super::dictionary::result_name;
use super::model::{capture_time, AvpNode, Decoded, HeaderInfo, NodeValue};
use super::tcp::Seen;

/// Appends the text view of one message.
pub fn message(out: &mut String, d: &Decoded) {
    if let Some(seen) = &d.seen {
        origin(out, seen);
    } else if let Some(off) = d.offset {
        let _ = writeln!(out, "Message at offset {off}");
    }
    if let Some(h) = &d.header {
        header(out, h);
    }
    for a in &d.avps {
        avp(out, a, 1);
    }
    if let Some(p) = &d.problem {
        let _ = writeln!(out, "error: {}", p.message);
        if let Some(rc) = p.result_code {
            let name = result_name(rc).map_or(String::new(), |n| format!(" ({n})"));
            if d.is_answer() {
                // RFC 6733 section 7: an answer is never answered.
                let _ = writeln!(
                    out,
                    "Result-Code of the error: {rc}{name} (not sent: an answer gets no answer)"
                );
            } else {
                let _ = writeln!(out, "Result-Code: {rc}{name}");
            }
        }
        if p.failed_avps.is_empty() {
            if p.result_code.is_some() {
                out.push_str("Failed-AVP: none\n");
            }
        } else {
            out.push_str("Failed-AVP:\n");
            for a in &p.failed_avps {
                avp(out, a, 1);
            }
        }
    }
}

/// Appends a problem that belongs to a flow rather than to one message.
pub fn flow_error(out: &mut String, seen: &Seen, message: &str) {
    origin(out, seen);
    let _ = writeln!(out, "error: {message}");
}

fn origin(out: &mut String, seen: &Seen) {
    let _ = write!(out, "Frame {}", seen.frame);
    if let Some(t) = seen.time {
        let _ = write!(out, " {}", capture_time(t));
    }
    let _ = writeln!(out, " {} -> {}", seen.flow.src, seen.flow.dst);
}

fn header(out: &mut String, h: &HeaderInfo) {
    let r = &h.raw;
    match (&h.command, &h.short) {
        (Some(name), Some(short)) => {
            let _ = write!(out, "{name} ({short}) {}", r.command_code);
        }
        _ => {
            let kind = if r.is_request() { "Request" } else { "Answer" };
            let _ = write!(out, "Unknown-Command {kind} {}", r.command_code);
        }
    }
    let _ = write!(out, " app {}", r.application_id);
    if let Some(a) = h.application {
        let _ = write!(out, " ({a})");
    }
    let flags = h.flag_names();
    let _ = write!(
        out,
        " flags {} hbh {:#010x} e2e {:#010x} len {}",
        if flags.is_empty() {
            "-".to_string()
        } else {
            flags.join(",")
        },
        r.hop_by_hop,
        r.end_to_end,
        r.length
    );
    if r.version != 1 {
        let _ = write!(out, " version {}", r.version);
    }
    out.push('\n');
}

fn avp(out: &mut String, a: &AvpNode, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
    let _ = write!(out, "{} code {}", a.display_name(), a.code);
    if a.vendor != 0 {
        let _ = write!(out, " vendor {}", a.vendor);
        if let Some(v) = a.vendor_name {
            let _ = write!(out, " ({v})");
        }
    }
    let flags = a.flag_names();
    let _ = write!(
        out,
        " flags {}",
        if flags.is_empty() {
            "-".to_string()
        } else {
            flags.join(",")
        }
    );
    if a.value != NodeValue::Grouped {
        out.push_str(" = ");
        value(out, &a.value);
    }
    if let Some(e) = &a.error {
        let _ = write!(out, " (invalid: {e})");
    }
    out.push('\n');
    for c in &a.children {
        avp(out, c, depth + 1);
    }
}

/// Appends a value as text.
pub fn value(out: &mut String, v: &NodeValue) {
    let _ = match v {
        NodeValue::Grouped => Ok(()),
        NodeValue::Unsigned { value, label: None } => write!(out, "{value}"),
        NodeValue::Unsigned {
            value,
            label: Some(l),
        } => write!(out, "{value} ({l})"),
        NodeValue::Signed(i) => write!(out, "{i}"),
        NodeValue::Float(f) => write!(out, "{f}"),
        NodeValue::Enum {
            value,
            name: Some(n),
        } => write!(out, "{n} ({value})"),
        NodeValue::Enum { value, name: None } => write!(out, "{value}"),
        NodeValue::Text(s) => write!(out, "{s:?}"),
        NodeValue::Address(a) => write!(out, "{a}"),
        NodeValue::Time { iso, .. } => write!(out, "{iso}"),
        NodeValue::Octets(b) => {
            let _ = write!(out, "0x{}", hex::encode(b));
            match printable(b) {
                Some(s) => write!(out, " ({s:?})"),
                None => Ok(()),
            }
        }
    };
}

/// The bytes as text when they are all printable ASCII.
pub fn printable(b: &[u8]) -> Option<&str> {
    if !b.is_empty() && b.iter().all(|c| (0x20..0x7f).contains(c)) {
        std::str::from_utf8(b).ok()
    } else {
        None
    }
}
