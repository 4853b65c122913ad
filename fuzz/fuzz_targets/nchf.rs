//! Feeds the input to the Nchf_ConvergedCharging request decoder (the
//! body of a Create, Update or Release, TS 32.291) and maps what it takes
//! to the engine request and back into JSON. Nothing may panic: a bad body
//! is a ProblemDetails naming the problem.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match gyro_nchf::decode_request(data) {
        Ok(request) => {
            let mut cc = gyro_charging::CcRequest::default();
            for op in [
                gyro_nchf::Operation::Create,
                gyro_nchf::Operation::Update,
                gyro_nchf::Operation::Release,
            ] {
                gyro_nchf::mapping::to_cc_request(&request, op, "nchf-1-0", "32251@3gpp.org", &mut cc);
                assert_eq!(cc.mscc.len(), request.multiple_unit_usage.len());
            }
            let again = serde_json::to_vec(&request).expect("a request taken serializes");
            gyro_nchf::decode_request(&again).expect("what was taken is taken again");
        }
        Err(p) => {
            assert!((400..600).contains(&p.status));
            let _ = p.body();
        }
    }
});
