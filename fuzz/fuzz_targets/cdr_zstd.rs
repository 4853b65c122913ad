//! Scans bytes as a compressed CDR file (`cdr_zstd::scan`: the complete
//! zstd frames from the start, stopping at an incomplete or damaged one).
//! Nothing may panic; what it keeps lies inside the input, in order, and
//! decodes with the standard zstd decoder to the same content.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = gyro_store::cdr_zstd::scan(data);
    let mut end = 0;
    let mut content = 0;
    for f in &s.frames {
        assert!(f.end > end && f.end <= data.len() as u64);
        assert!(f.content_end >= content);
        end = f.end;
        content = f.content_end;
    }
    assert_eq!(s.frames_len(), end);
    assert_eq!(s.content.len() as u64, content);
    assert_eq!(s.tail, data.len() as u64 - end);
    if end > 0 {
        // (The standard decoder calls no input at all incomplete.)
        let whole = zstd::stream::decode_all(&data[..end as usize]).expect("kept frames decode");
        assert_eq!(whole, s.content);
    }
});
