//! Reads the input as `gyro decode`'s hex input (digits, whitespace,
//! colons, `0x` prefixes), frames the bytes into messages as `gyro
//! decode` does and renders each. Nothing may panic; what parses as hex
//! is checked against the hex crate.
#![no_main]

#[path = "gyro_decode.rs"]
mod decode;

use decode::hex_input::{looks_like_hex, parse_hex};
use gyro_diameter::header::{frame_length, MAX_MESSAGE_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = looks_like_hex(data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(bytes) = parse_hex(text) else {
        return;
    };
    let digits: String = text
        .split(|c: char| c.is_ascii_whitespace() || c == ':')
        .map(|w| {
            w.strip_prefix("0x")
                .or_else(|| w.strip_prefix("0X"))
                .unwrap_or(w)
        })
        .collect();
    assert_eq!(hex::decode(digits).ok(), Some(bytes.clone()));
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let n = match frame_length(rest, MAX_MESSAGE_LEN) {
            Ok(Some(n)) if n <= rest.len() && n > 0 => n,
            _ => rest.len(),
        };
        decode::show(&rest[..n], None);
        at += n;
    }
});
