//! Validates the input as a request in both modes; when it fails, builds
//! the error answer and checks that it parses and follows RFC 6733 section
//! 6.2 (identifiers copied, R clear, E set exactly for 3xxx).
#![no_main]

use bytes::BytesMut;
use gyro_diameter::header::HEADER_LEN;
use gyro_diameter::validate::{encode_error_answer, validate_answer, validate_request, Options};
use gyro_diameter::{Dictionary, Header, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dict = Dictionary::builtin();
    let mut out = BytesMut::new();
    for opts in [Options::lenient(), Options::strict()] {
        let _ = validate_answer(dict, data, &opts);
        let problem = match validate_request(dict, data, &opts) {
            Ok(m) => {
                assert_eq!(m.as_bytes().len(), data.len());
                continue;
            }
            Err(p) => p,
        };
        let _ = problem.to_string();
        out.clear();
        let answered =
            encode_error_answer(&mut out, data, &problem, "ocs.example.net", "example.net");
        if data.len() < HEADER_LEN {
            assert!(answered.is_err());
            continue;
        }
        let n = answered.expect("an error answer for any input with a header");
        assert_eq!(n, out.len());
        let answer = Message::parse(&out).expect("the error answer parses");
        let req = Header::parse(data).unwrap();
        let h = answer.header();
        assert!(!h.is_request() && !h.is_retransmit());
        assert_eq!(h.is_error(), problem.is_protocol_error());
        assert_eq!(
            (h.command_code, h.application_id, h.hop_by_hop, h.end_to_end),
            (
                req.command_code,
                req.application_id,
                req.hop_by_hop,
                req.end_to_end
            )
        );
        let result = answer
            .find(gyro_diameter::codes::avp::RESULT_CODE)
            .and_then(|a| a.u32().ok());
        assert_eq!(result, Some(problem.result_code));
        for a in answer.avps() {
            assert!(a.is_ok(), "the error answer's AVPs are well formed");
        }
    }
});
