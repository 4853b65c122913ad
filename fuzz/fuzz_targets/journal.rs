//! Decodes bytes as a journal file: magic, frames, checksums, frame
//! headers and every effect and CDR record. Nothing may panic; what
//! decodes must encode back to the same bytes.
#![no_main]

use gyro_store::journal::decode_journal;
use gyro_charging::Cdr;
use gyro_store::record::{encode_cdr, encode_cdr_after, encode_effect, Decoder, EffectEncoder};
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
    // A run of effects (compact tags refer to the ones before) and a CDR
    // section (each record after the first refers to the one before):
    // what decodes encodes back to the same values.
    let mut d = Decoder::new(data);
    let mut effects = Vec::new();
    while let Ok(e) = d.effect() {
        effects.push(e);
    }
    let mut back = Vec::new();
    let mut enc = EffectEncoder::default();
    for e in &effects {
        enc.encode(&mut back, e);
    }
    let mut again = Decoder::new(&back);
    for e in &effects {
        assert_eq!(again.effect().as_ref(), Ok(e));
    }
    let mut d = Decoder::new(data);
    let mut cdrs: Vec<Cdr> = Vec::new();
    let mut prev = None;
    while let Ok(v) = d.cdr_view_after(prev.as_ref()) {
        let mut c = Cdr::default();
        c.set_from(&v);
        cdrs.push(c);
        prev = Some(v);
    }
    let mut back = Vec::new();
    for (i, c) in cdrs.iter().enumerate() {
        match i {
            0 => encode_cdr(&mut back, c),
            _ => {
                let t = i
                    .checked_sub(2)
                    .map(|k| (cdrs[k].rate.as_str(), cdrs[k].rating_group));
                encode_cdr_after(&mut back, c, &cdrs[i - 1], t)
            }
        }
    }
    let mut again = Decoder::new(&back);
    let mut prev = None;
    for c in &cdrs {
        let v = again.cdr_view_after(prev.as_ref()).expect("re-encoded CDR");
        assert_eq!(v, c.view());
        prev = Some(v);
    }
});
