//! Codec benchmarks: decode, validate and encode of a typical Gy CCR-Update
//! and its CCA, and the eleven-AVP message of the thesis's codec benchmark
//! (build, encode, decode).
//!
//!     cargo bench -p gyro-diameter --bench codec
//!
//! Before measuring time, the run prints the heap allocations each operation
//! makes in steady state (a counting global allocator wraps the system one).

#[path = "../tests/common/mod.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gyro_diameter::validate::{validate_answer, validate_request, Options};
use gyro_diameter::{Dictionary, Message};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations per call of `op`, after one warm-up call.
fn allocs_per_op(mut op: impl FnMut()) -> f64 {
    const N: usize = 1000;
    op();
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..N {
        op();
    }
    (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / N as f64
}

/// Parses a message and decodes every AVP with the typed accessor the
/// dictionary names for it.
fn decode_walk(bytes: &[u8]) -> common::Walk {
    let m = Message::parse(bytes).unwrap();
    common::walk(&m, &common::dict_type).unwrap()
}

/// The thesis's operation: add eleven AVPs to a message, encode it, decode
/// it again (here the AVPs are written straight into the output buffer).
fn thesis_round(buf: &mut BytesMut) -> common::Walk {
    buf.clear();
    common::thesis_ccr(buf);
    decode_walk(buf)
}

struct Samples {
    ccr_u: BytesMut,
    cca: BytesMut,
}

fn samples() -> Samples {
    let mut ccr_u = BytesMut::new();
    common::ccr_update(&mut ccr_u);
    let mut cca = BytesMut::new();
    common::cca(&mut cca, &Message::parse(&ccr_u).unwrap());
    Samples { ccr_u, cca }
}

fn report_allocations(s: &Samples) {
    let req = Message::parse(&s.ccr_u).unwrap();
    let mut out = BytesMut::with_capacity(4096);
    let dict = Dictionary::builtin();
    let rows: [(&str, f64); 8] = [
        (
            "validate CCR-U lenient",
            allocs_per_op(|| {
                black_box(validate_request(dict, black_box(&s.ccr_u), &Options::lenient()).is_ok());
            }),
        ),
        (
            "validate CCR-U strict",
            allocs_per_op(|| {
                black_box(validate_request(dict, black_box(&s.ccr_u), &Options::strict()).is_ok());
            }),
        ),
        (
            "validate CCA strict",
            allocs_per_op(|| {
                black_box(validate_answer(dict, black_box(&s.cca), &Options::strict()).is_ok());
            }),
        ),
        (
            "decode+walk CCR-U",
            allocs_per_op(|| {
                black_box(decode_walk(black_box(&s.ccr_u)));
            }),
        ),
        (
            "decode+walk CCA",
            allocs_per_op(|| {
                black_box(decode_walk(black_box(&s.cca)));
            }),
        ),
        (
            "encode CCR-U",
            allocs_per_op(|| {
                out.clear();
                black_box(common::ccr_update(&mut out));
            }),
        ),
        (
            "encode CCA",
            allocs_per_op(|| {
                out.clear();
                black_box(common::cca(&mut out, &req));
            }),
        ),
        (
            "thesis 11 AVPs build+encode+decode",
            allocs_per_op(|| {
                black_box(thesis_round(&mut out));
            }),
        ),
    ];
    println!(
        "message sizes: CCR-U {} bytes, CCA {} bytes",
        s.ccr_u.len(),
        s.cca.len()
    );
    println!("allocations per operation (steady state, reused output buffer):");
    for (name, n) in rows {
        println!("  {name:<40} {n:.2}");
    }
}

fn bench_codec(c: &mut Criterion) {
    let s = samples();
    report_allocations(&s);

    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Bytes(s.ccr_u.len() as u64));
    g.bench_function("ccr_u_walk", |b| {
        b.iter(|| decode_walk(black_box(&s.ccr_u)))
    });
    g.throughput(Throughput::Bytes(s.cca.len() as u64));
    g.bench_function("cca_walk", |b| b.iter(|| decode_walk(black_box(&s.cca))));
    g.bench_function("ccr_u_parse_only", |b| {
        b.iter(|| Message::parse(black_box(&s.ccr_u)).unwrap().command_code())
    });
    g.finish();

    let dict = Dictionary::builtin();
    let mut g = c.benchmark_group("validate");
    for (name, opts) in [
        ("lenient", Options::lenient()),
        ("strict", Options::strict()),
    ] {
        g.bench_function(format!("ccr_u_{name}"), |b| {
            b.iter(|| validate_request(dict, black_box(&s.ccr_u), &opts).is_ok())
        });
    }
    g.bench_function("cca_strict", |b| {
        b.iter(|| validate_answer(dict, black_box(&s.cca), &Options::strict()).is_ok())
    });
    g.finish();

    let mut g = c.benchmark_group("encode");
    let req = Message::parse(&s.ccr_u).unwrap();
    let mut out = BytesMut::with_capacity(4096);
    g.bench_function("ccr_u", |b| {
        b.iter(|| {
            out.clear();
            common::ccr_update(&mut out)
        })
    });
    g.bench_function("cca_from_request", |b| {
        b.iter(|| {
            out.clear();
            common::cca(&mut out, black_box(&req))
        })
    });
    g.finish();

    let mut g = c.benchmark_group("thesis_11_avps");
    g.bench_function("build_encode", |b| {
        b.iter(|| {
            out.clear();
            common::thesis_ccr(&mut out)
        })
    });
    let mut t = BytesMut::new();
    common::thesis_ccr(&mut t);
    g.bench_function("decode_walk", |b| b.iter(|| decode_walk(black_box(&t))));
    g.bench_function("build_encode_decode", |b| b.iter(|| thesis_round(&mut out)));
    g.finish();
}

criterion_group!(benches, bench_codec);
criterion_main!(benches);
