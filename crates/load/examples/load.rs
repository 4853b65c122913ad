//! `gyro load` before the binary exists: the same options, the same report.
//!
//! ```text
//! cargo run --release -p gyro-load --example load -- --target 127.0.0.1:3869 --count 100000
//! ```

use clap::Parser;

/// Diameter credit-control load generator.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: gyro_load::LoadArgs,
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    gyro_load::run_cli(Cli::parse().args)
}
