//! `gyro`: the one binary of the gyro online charging server.
//!
//! `main` parses the command line and hands over to one module per
//! subcommand; each returns the process exit status.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod decode;

/// gyro: a Diameter credit-control server (OCS), load generator and tools.
#[derive(Debug, Parser)]
#[command(name = "gyro", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Print Diameter messages (hex, raw files, pcap/pcapng captures) as
    /// readable trees, and say what is wrong with invalid ones.
    Decode(decode::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Decode(args) => decode::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gyro: {e:#}");
            ExitCode::from(2)
        }
    }
}
