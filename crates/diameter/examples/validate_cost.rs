//! Instructions to validate a typical Gy CCR-Update (two MSCCs with usage,
//! two Subscription-Ids, 3GPP PS-Information: the codec benchmark's
//! sample), counted by valgrind, which a shared machine does not disturb
//! the way it disturbs timings:
//!
//! ```sh
//! cargo build --release -p gyro-diameter --example validate_cost
//! valgrind --tool=callgrind --toggle-collect='*measured*' --callgrind-out-file=/dev/null \
//!     target/release/examples/validate_cost 20000
//! ```
//!
//! Collected instructions ("Collected :" in valgrind's summary) divided by
//! the count is the cost of validating one request.

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;

use bytes::BytesMut;
use gyro_diameter::validate::{validate_request, Options};
use gyro_diameter::Dictionary;

/// The `n` validations valgrind counts.
#[inline(never)]
fn measured(dict: &Dictionary, request: &[u8], n: u64) -> u64 {
    let mut ok = 0;
    for _ in 0..n {
        ok += u64::from(validate_request(dict, black_box(request), &Options::lenient()).is_ok());
    }
    ok
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let mut ccr_u = BytesMut::new();
    common::ccr_update(&mut ccr_u);
    let dict = Dictionary::builtin();
    let ok = measured(dict, &ccr_u, n);
    assert_eq!(ok, n, "the sample must validate");
    println!("{n} CCR-U validations ({} bytes each)", ccr_u.len());
}
