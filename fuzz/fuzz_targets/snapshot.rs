//! Decodes bytes as a snapshot file (header, checksum, CBOR body).
//! Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = gyro_store::snapshot::decode(data);
});
