//! Validating a valid message allocates nothing (after the dictionary has
//! been loaded once).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use gyro_diameter::codes::{app, avp, cmd};
use gyro_diameter::dict::Dictionary;
use gyro_diameter::validate::{validate_request, Options};
use gyro_diameter::Encoder;

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn validating_a_ccr_update_allocates_nothing() {
    let mut buf = BytesMut::new();
    let mut e = Encoder::request(
        &mut buf,
        cmd::CREDIT_CONTROL,
        app::CREDIT_CONTROL,
        true,
        1,
        2,
    );
    e.str(avp::SESSION_ID, "pgw.example;1;2")
        .str(avp::ORIGIN_HOST, "pgw.example")
        .str(avp::ORIGIN_REALM, "example")
        .str(avp::DESTINATION_REALM, "ocs.example")
        .u32(avp::AUTH_APPLICATION_ID, 4)
        .str(avp::SERVICE_CONTEXT_ID, "32251@3gpp.org")
        .i32(avp::CC_REQUEST_TYPE, 2)
        .u32(avp::CC_REQUEST_NUMBER, 1);
    let g = e.begin_group(avp::MULTIPLE_SERVICES_CREDIT_CONTROL);
    let u = e.begin_group(avp::USED_SERVICE_UNIT);
    e.u32(avp::CC_TIME, 60).u64(avp::CC_TOTAL_OCTETS, 1 << 20);
    e.i32(avp::REPORTING_REASON, 3);
    e.end_group(u);
    let r = e.begin_group(avp::REQUESTED_SERVICE_UNIT);
    e.end_group(r);
    e.u32(avp::RATING_GROUP, 10);
    e.end_group(g);
    e.finish().unwrap();
    let dict = Dictionary::builtin();
    for opts in [Options::default(), Options::strict()] {
        validate_request(dict, &buf, &opts).unwrap();
        let before = ALLOCS.load(Ordering::Relaxed);
        for _ in 0..100 {
            validate_request(dict, &buf, &opts).unwrap();
        }
        assert_eq!(ALLOCS.load(Ordering::Relaxed) - before, 0);
    }
}
