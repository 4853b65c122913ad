//! Decodes bytes as a section of the engine's answer records (the bytes a
//! journal's answer section holds): splits it with `records`, reads each
//! record's key and answer with `decode_record`, and on its own as one
//! record. Nothing may panic; a record that decodes encodes to a record
//! that decodes to the same key and answer.
#![no_main]

use gyro_charging::answer_log::{decode_record, encode_record, records, RecordKey};
use gyro_charging::{CcAnswer, CcRequest};
use libfuzzer_sys::fuzz_target;

fn check(record: &[u8], answer: &mut CcAnswer) {
    let Ok(key) = decode_record(record, answer) else {
        return;
    };
    assert_eq!(RecordKey::parse(record).ok(), Some(key));
    assert!(!answer.duplicate);
    let req = CcRequest {
        session_id: key.session_id.into(),
        origin_host: key.origin_host.into(),
        request_number: key.request_number,
        end_to_end: key.end_to_end,
        ..CcRequest::default()
    };
    let mut back = Vec::new();
    encode_record(&mut back, &req, answer, key.at);
    let mut again = CcAnswer::default();
    let key_again = decode_record(&back, &mut again).expect("a re-encoded record decodes");
    assert_eq!(key_again, key);
    assert_eq!(&again, answer);
}

fuzz_target!(|data: &[u8]| {
    let mut answer = CcAnswer::default();
    let mut total = 0usize;
    for r in records(data) {
        match r {
            Ok(record) => {
                total += record.len();
                check(record, &mut answer);
            }
            Err(_) => break,
        }
    }
    assert!(total <= data.len());
    // The whole input as one record, without a valid split in the way.
    check(data, &mut answer);
});
