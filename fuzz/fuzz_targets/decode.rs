//! Frames a byte stream, parses each message and decodes every AVP,
//! recursively, with every typed accessor. Nothing may panic.
#![no_main]

use gyro_diameter::header::{frame_length, MAX_MESSAGE_LEN};
use gyro_diameter::types::{decode_value, Value};
use gyro_diameter::{Avp, Dictionary, Message};
use libfuzzer_sys::fuzz_target;

/// Deepest nesting walked; deeper groups are still iterated by the parser.
const MAX_DEPTH: u32 = 16;

fn walk(a: &Avp<'_>, depth: u32) {
    // The accessor the dictionary names for this AVP, as a receiver uses it.
    if let Some(def) = Dictionary::builtin().avp(a.code(), a.vendor_id()) {
        if let Ok(Value::Address(addr)) = decode_value(def.ty, a.data()) {
            assert_eq!(addr.wire_len(), a.data().len());
        }
    }
    // And every other accessor: wrong formats give errors, not panics.
    let _ = (a.code(), a.vendor_id(), a.flags(), a.offset(), a.raw());
    let _ = (a.i32(), a.i64(), a.u32(), a.u64(), a.f32(), a.f64());
    let _ = (a.utf8(), a.identity(), a.uri(), a.address(), a.time());
    if let Ok(t) = a.time() {
        let _ = gyro_diameter::DiameterTime::from_unix(t.to_unix());
    }
    if let Ok(u) = a.uri() {
        // Display of a parsed URI parses again to the same URI.
        let s = u.to_string();
        let again = gyro_diameter::types::decode_uri(s.as_bytes()).expect("displayed URI parses");
        assert_eq!(again.port, u.port);
        assert_eq!(again.fqdn, u.fqdn);
    }
    if depth < MAX_DEPTH {
        for child in a.grouped() {
            match child {
                Ok(c) => {
                    // Children lie inside their parent.
                    assert!(
                        c.offset() >= a.offset()
                            && c.offset() + c.length() <= a.offset() + a.length()
                    );
                    walk(&c, depth + 1);
                }
                Err(_) => break,
            }
        }
    }
}

fn message(buf: &[u8]) {
    let Ok(m) = Message::parse(buf) else { return };
    assert_eq!(m.header().length as usize, buf.len());
    let _ = m.session_id();
    for a in m.avps() {
        match a {
            Ok(a) => {
                assert_eq!(&buf[a.offset()..a.offset() + a.length()], a.raw());
                walk(&a, 0);
            }
            Err(_) => break,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // The input as one message.
    message(data);
    // The input as a stream of messages, as a connection would frame it.
    let mut rest = data;
    while let Ok(Some(n)) = frame_length(rest, MAX_MESSAGE_LEN) {
        let Some(frame) = rest.get(..n) else { break };
        // What frames, parses.
        assert!(Message::parse(frame).is_ok());
        message(frame);
        rest = &rest[n..];
    }
});
