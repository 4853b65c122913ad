//! Decoding a valid message performs no heap allocation.
//!
//! A counting global allocator counts every allocation made on the current
//! thread while a closure runs; the tests parse realistic messages and
//! decode every AVP, recursively, with its typed accessor, and assert that
//! the count is zero.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::BytesMut;
use gyro_diameter::codes::avp;
use gyro_diameter::validate::{encode_error_answer, validate_answer, validate_request, Options};
use gyro_diameter::{Dictionary, Encoder, Message};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn bump() {
    // `try_with`: the thread-local may already be gone while a thread exits.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result with the number of allocations (and
/// reallocations) it made on this thread.
fn count<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATIONS.with(Cell::get);
    let out = std::hint::black_box(f());
    let after = ALLOCATIONS.with(Cell::get);
    (out, after - before)
}

#[test]
fn the_counter_sees_allocations() {
    let (v, n) = count(|| vec![1u8; 100]);
    assert_eq!(v.len(), 100);
    assert_eq!(n, 1);
    let (s, n) = count(|| {
        let mut s = String::new();
        for _ in 0..100 {
            s.push_str("grow");
        }
        s
    });
    assert_eq!(s.len(), 400);
    assert!(n >= 2, "growth reallocates: {n}");
}

/// The built-in dictionary, loaded before anything is counted (loading it
/// allocates, once per process).
fn dict() -> &'static Dictionary {
    Dictionary::builtin()
}

#[test]
fn decoding_a_ccr_update_allocates_nothing() {
    dict();
    let mut buf = BytesMut::new();
    common::ccr_update(&mut buf);
    let bytes = &buf[..];
    let (walk, n) = count(|| {
        let m = Message::parse(bytes).unwrap();
        let w = common::walk(&m, &common::dict_type).unwrap();
        (m.session_id().unwrap().len(), w)
    });
    assert_eq!(n, 0, "decoding a CCR-U allocated {n} times");
    let (sid_len, w) = walk;
    assert_eq!(sid_len, common::SESSION_ID.len());
    assert_eq!(w.unknown, 0);
    assert_eq!(w.groups, 11, "{w:?}");
    assert!(w.avps > 50);
}

#[test]
fn decoding_answers_and_base_messages_allocates_nothing() {
    dict();
    let mut req = BytesMut::new();
    common::ccr_update(&mut req);
    let m = Message::parse(&req).unwrap();
    let mut ans = BytesMut::new();
    common::cca(&mut ans, &m);
    let mut cer = BytesMut::new();
    common::cer(&mut cer);
    let mut ccri = BytesMut::new();
    common::ccr_initial(&mut ccri);
    let mut thesis = BytesMut::new();
    common::thesis_ccr(&mut thesis);
    for bytes in [&ans[..], &cer[..], &ccri[..], &thesis[..]] {
        let (w, n) = count(|| {
            let m = Message::parse(bytes).unwrap();
            common::walk(&m, &common::dict_type).unwrap()
        });
        assert_eq!(
            n,
            0,
            "command {}",
            Message::parse(bytes).unwrap().command_code()
        );
        assert!(w.avps >= 10);
    }
}

#[test]
fn decoding_uris_with_parameters_allocates_nothing() {
    let mut buf = BytesMut::new();
    let mut e = Encoder::request(&mut buf, 258, 4, true, 1, 1);
    e.str(
        avp::REDIRECT_HOST,
        "aaa://ocs2.example.net:3869;transport=SCTP;protocol=Diameter",
    )
    .str(
        avp::REDIRECT_HOST,
        "aaas://ocs3.example.net;protocol=radius;transport=udp",
    );
    e.finish().unwrap();
    let bytes = &buf[..];
    let (ports, n) = count(|| {
        let m = Message::parse(bytes).unwrap();
        let mut ports = [0u16; 2];
        for (p, a) in ports.iter_mut().zip(m.avps()) {
            *p = a.unwrap().uri().unwrap().port;
        }
        ports
    });
    assert_eq!(n, 0);
    assert_eq!(ports, [3869, 5658]);
}

#[test]
fn decoding_malformed_input_allocates_nothing_either() {
    dict();
    let mut buf = BytesMut::new();
    common::ccr_update(&mut buf);
    let mut bad = buf.to_vec();
    // Break the length of the first MSCC's first child.
    let m = Message::parse(&buf).unwrap();
    let mscc = m.find(avp::MULTIPLE_SERVICES_CREDIT_CONTROL).unwrap();
    let child = mscc.offset() + 8;
    bad[child + 7] = 0xff;
    let bytes = &bad[..];
    let (res, n) = count(|| {
        let m = Message::parse(bytes).unwrap();
        common::walk(&m, &common::dict_type).is_err()
    });
    assert!(res, "the broken child is reported");
    assert_eq!(n, 0);
    let (res, n) = count(|| Message::parse(&bytes[..bytes.len() - 4]).is_err());
    assert!(res);
    assert_eq!(n, 0);
}

#[test]
fn encoding_into_a_reserved_buffer_allocates_nothing() {
    let mut req = BytesMut::new();
    common::ccr_update(&mut req);
    let m = Message::parse(&req).unwrap();
    let mut out = BytesMut::with_capacity(4096);
    let (len, n) = count(|| {
        let a = common::cca(&mut out, &m);
        let r = common::ccr_update(&mut out);
        a + r
    });
    assert_eq!(n, 0, "building a CCA and a CCR-U into a reserved buffer");
    assert_eq!(len, out.len());
}

#[test]
fn validating_valid_requests_allocates_nothing_in_either_mode() {
    let dict = dict();
    type Build = fn(&mut BytesMut) -> usize;
    let builds: [(&str, Build); 4] = [
        ("CCR-U", common::ccr_update),
        ("CCR-I", common::ccr_initial),
        ("CER", common::cer),
        ("11-AVP CCR", common::thesis_ccr),
    ];
    for (name, build) in builds {
        let mut buf = BytesMut::new();
        build(&mut buf);
        let bytes = &buf[..];
        for opts in [Options::lenient(), Options::strict()] {
            let (ok, n) = count(|| validate_request(dict, bytes, &opts).is_ok());
            assert!(ok, "{name} is valid ({:?})", opts.mode);
            assert_eq!(
                n, 0,
                "validating a {name} ({:?}) allocated {n} times",
                opts.mode
            );
        }
    }
}

#[test]
fn validating_a_valid_answer_allocates_nothing() {
    let dict = dict();
    let mut req = BytesMut::new();
    common::ccr_update(&mut req);
    let mut ans = BytesMut::new();
    common::cca(&mut ans, &Message::parse(&req).unwrap());
    let bytes = &ans[..];
    let (ok, n) = count(|| validate_answer(dict, bytes, &Options::strict()).is_ok());
    assert!(ok);
    assert_eq!(n, 0);
}

#[test]
fn rejecting_a_request_and_building_its_error_answer_allocates_nothing() {
    let dict = dict();
    let mut req = BytesMut::new();
    common::ccr_update(&mut req);
    // Make the Rating-Group of the second MSCC 3 bytes long: a 5014 deep
    // inside a group, whose Failed-AVP nests copies of the group headers.
    let m = Message::parse(&req).unwrap();
    let mscc = m
        .avps()
        .map(Result::unwrap)
        .filter(|a| a.code() == avp::MULTIPLE_SERVICES_CREDIT_CONTROL.code)
        .nth(1)
        .unwrap();
    let rg = mscc.child(avp::RATING_GROUP).unwrap().offset();
    let mut bad = req.to_vec();
    bad[rg + 7] = 11;
    let bytes = &bad[..];
    let mut out = BytesMut::with_capacity(4096);
    let (code, n) = count(|| {
        let problem = validate_request(dict, bytes, &Options::lenient()).unwrap_err();
        encode_error_answer(
            &mut out,
            bytes,
            &problem,
            common::SERVER_HOST,
            common::SERVER_REALM,
        )
        .unwrap();
        problem.result_code
    });
    assert_eq!(code, 5014);
    assert_eq!(n, 0, "rejecting allocated {n} times");
    let answer = Message::parse(&out).unwrap();
    assert!(answer.find(avp::FAILED_AVP).is_some());
}
