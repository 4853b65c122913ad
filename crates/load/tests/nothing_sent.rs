//! A run that sends no request fails: its connections opened and nothing
//! went wrong, but it measured nothing.

mod common;

use std::process::ExitCode;
use std::time::Duration;

use common::{start, FakeConfig};
use gyro_load::{exit_code, run_async, LoadArgs};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_sends_nothing_fails_whatever_the_max_error_ratio() {
    let (addr, _obs) = start(FakeConfig::default()).await;
    let a = LoadArgs {
        target: addr.to_string(),
        connections: 1,
        window: 8,
        quiet: true,
        // Over before it starts: the connections open, nothing is sent.
        duration: Some(Duration::ZERO),
        timeout: Duration::from_secs(2),
        ..LoadArgs::default()
    };
    let r = run_async(a).await.unwrap();
    assert_eq!(
        (r.sent, r.connections_opened, r.errors),
        (0, 1, 0),
        "{}",
        r.human()
    );
    assert_eq!(r.error_ratio(), 1.0);
    assert!(r.human().contains("no request was sent"), "{}", r.human());
    assert_eq!(exit_code(&r, 0.01), ExitCode::FAILURE);
    assert_eq!(exit_code(&r, 1.0), ExitCode::FAILURE);
}
