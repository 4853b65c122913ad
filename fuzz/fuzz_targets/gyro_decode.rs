//! The parsers of `gyro decode` (the capture reader, TCP reassembly, hex
//! input, the message model and its text and JSON renderings), compiled
//! from their sources in `crates/gyro/src/decode/` (the `gyro` crate is a
//! binary, and its server dependencies are not needed here). Shared by the
//! `capture` and `hex_input` targets.

#![allow(dead_code)]

#[path = "../../crates/gyro/src/decode/capture.rs"]
pub mod capture;
#[path = "../../crates/gyro/src/decode/dictionary.rs"]
pub mod dictionary;
#[path = "../../crates/gyro/src/decode/hex_input.rs"]
pub mod hex_input;
#[path = "../../crates/gyro/src/decode/json.rs"]
pub mod json;
#[path = "../../crates/gyro/src/decode/model.rs"]
pub mod model;
#[path = "../../crates/gyro/src/decode/render.rs"]
pub mod render;
#[path = "../../crates/gyro/src/decode/tcp.rs"]
pub mod tcp;

/// Decodes one message and renders it as text and as JSON, as `gyro
/// decode` prints it.
pub fn show(bytes: &[u8], seen: Option<tcp::Seen>) {
    for strict in [false, true] {
        let mut d = model::decode(bytes, strict);
        d.seen = seen;
        let mut text = String::new();
        render::message(&mut text, &d);
        let _ = json::message(&d).to_string();
    }
}
