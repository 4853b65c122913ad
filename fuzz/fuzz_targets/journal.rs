//! Decodes bytes as a journal file: magic, frames, checksums, frame
//! headers and every effect and CDR record. Nothing may panic; what
//! decodes must encode back to the same bytes.
#![no_main]

use gyro_store::journal::decode_journal;
use gyro_store::record::{encode_cdr, encode_effect, Decoder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_journal(data);
    // The record decoder on its own, without the checksum in the way.
    let mut d = Decoder::new(data);
    let start = d.position();
    if let Ok(e) = d.effect() {
        let mut back = Vec::new();
        encode_effect(&mut back, &e);
        let mut again = Decoder::new(&back);
        assert_eq!(again.effect().ok(), Some(e));
    }
    let mut d = Decoder::new(&data[start..]);
    if let Ok(c) = d.cdr() {
        let mut back = Vec::new();
        encode_cdr(&mut back, &c);
        assert_eq!(Decoder::new(&back).cdr().ok(), Some(c));
    }
});
