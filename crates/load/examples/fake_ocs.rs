//! A minimal credit-control server (the one the tests use) to measure the
//! load generator against: CER -> CEA, every CCR answered at once with 2001.
//!
//! ```text
//! taskset -c 0 cargo run --release -p gyro-load --example fake_ocs -- 127.0.0.1:3869 60
//! taskset -c 1 cargo run --release -p gyro-load --example load -- \
//!     --target 127.0.0.1:3869 --threads 1 --connections 50 --count 3000000
//! ```
//!
//! Arguments: listen address (default 127.0.0.1:3869) and how many seconds
//! to serve (default 60).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Duration;

fn main() {
    let mut argv = std::env::args().skip(1);
    let listen = argv.next().unwrap_or_else(|| "127.0.0.1:3869".to_string());
    let secs: u64 = argv.next().and_then(|s| s.parse().ok()).unwrap_or(60);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let cfg = common::FakeConfig {
            log: false,
            send_dwr: false,
            ..common::FakeConfig::default()
        };
        let (addr, obs) = common::start_on(&listen, cfg).await;
        eprintln!("fake OCS listening on {addr} for {secs} s");
        tokio::time::sleep(Duration::from_secs(secs)).await;
        eprintln!(
            "fake OCS: {} CCRs answered",
            obs.ccrs.load(std::sync::atomic::Ordering::Relaxed)
        );
    });
}
