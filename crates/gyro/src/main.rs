//! `gyro`: the one binary of the gyro online charging server.
//!
//! `main` parses the command line and hands over to one module per
//! subcommand; each returns the process exit status.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[cfg(feature = "count-allocations")]
mod alloc_count;
#[cfg(not(feature = "count-allocations"))]
mod alloc {
    //! The heap allocator, chosen at build time: the system's by default,
    //! mimalloc or jemalloc with the feature of that name (mimalloc wins
    //! when both are given). With `count-allocations` the counting
    //! allocator in `alloc_count` wraps the same choice.
    #[cfg(feature = "mimalloc")]
    #[global_allocator]
    static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    #[global_allocator]
    static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

    /// With the system allocator on glibc: a thread that hands the heap's
    /// free pages back to the kernel every `every` (`malloc_trim`).
    ///
    /// glibc returns freed memory only from the top of each heap; pages
    /// freed in the middle (buffers that grew and were replaced, tables
    /// that doubled) stay resident. Measured under `gyro load` over 1,000
    /// subscribers: after a million requests about 12 MB of a 73 MB
    /// resident set was such pages. The call takes each arena's lock
    /// briefly; the event loops allocate (close to) nothing per request,
    /// so they do not wait on it. The other allocators return memory by
    /// themselves: nothing to do.
    pub fn start_trimmer(every: std::time::Duration) {
        #[cfg(all(
            target_env = "gnu",
            not(feature = "mimalloc"),
            not(feature = "jemalloc")
        ))]
        {
            let spawned =
                std::thread::Builder::new()
                    .name("gyro-trim".into())
                    .spawn(move || loop {
                        std::thread::sleep(every);
                        // SAFETY: malloc_trim only walks the allocator's own
                        // free lists under its locks; any thread may call it.
                        unsafe { libc::malloc_trim(0) };
                    });
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start the heap trimming thread");
            }
        }
        #[cfg(not(all(
            target_env = "gnu",
            not(feature = "mimalloc"),
            not(feature = "jemalloc")
        )))]
        let _ = every;
    }
}
#[cfg(feature = "count-allocations")]
mod alloc {
    //! The counting allocator returns memory as the allocator it wraps.

    /// Nothing to do (see the default build's `start_trimmer`).
    pub fn start_trimmer(_every: std::time::Duration) {}
}
mod account;
mod cdr;
mod certs;
mod decode;
mod demo;
mod ledger;
mod output;
mod rate;
mod serve;
mod serve_redis;

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
    /// Run the credit-control server (embedded default without options).
    Serve(serve::Args),
    /// Generate Diameter credit-control load against a server.
    ///
    /// When `--duration` ends the run (or at the first Ctrl-C), every
    /// session the server still holds is ended with a CCR-Terminate (the
    /// drain: unpaced, within the window, at most twice `--timeout`; a
    /// second Ctrl-C gives it up). Drain requests are reported apart and
    /// are not in the measured counts, rates and latencies.
    ///
    /// Exit status: 0 on success; 1 when no request was sent, a connection
    /// could not be opened (its share of the run was not sent), sessions
    /// were left open on the server (the report says how many and why), or
    /// the error ratio is above `--max-error-ratio`; 2 when the run could
    /// not be made (invalid options, unreachable files).
    Load(Box<gyro_load::LoadArgs>),
    /// Start the server on its embedded default, load it for a few seconds
    /// and show what happened.
    Demo(demo::Args),
    /// List, print, follow or convert the CDR files of a data directory.
    Cdr(cdr::Args),
    /// Check the books of a data directory (read only: also beside a
    /// running server, as a snapshot), or repair a damaged journal.
    Ledger(ledger::Args),
    /// Create, show, top up, list and delete accounts of a running server.
    Account(account::AccountArgs),
    /// List the open sessions of a running server.
    Session(account::SessionArgs),
    /// Make a throwaway CA, a server and a client certificate for
    /// Diameter over TLS (tests and first use).
    Certs(certs::Args),
    /// Price some usage under a charging file's plans and say which rate
    /// matched, without charging (as POST /v1/rate does on a server).
    Rate(rate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let tool = matches!(
        cli.command,
        Command::Decode(_)
            | Command::Cdr(_)
            | Command::Ledger(_)
            | Command::Account(_)
            | Command::Session(_)
            | Command::Certs(_)
            | Command::Rate(_)
    );
    if tool {
        // `gyro ledger | head -1` ends quietly instead of panicking.
        output::quiet_on_closed_pipe();
    } else {
        let mut filter = tracing_subscriber::EnvFilter::try_from_env("GYRO_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        // The Redis client logs every reconnection attempt while a cluster
        // is down (many a second); gyro says when the ledger fails and when
        // it works again. GYRO_LOG naming `redis` shows them.
        if !std::env::var("GYRO_LOG").is_ok_and(|v| v.contains("redis")) {
            if let Ok(d) = "redis=off".parse() {
                filter = filter.add_directive(d);
            }
        }
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
    let result = match cli.command {
        Command::Decode(args) => decode::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Load(args) => gyro_load::run_cli(*args),
        Command::Demo(args) => demo::run(&args),
        Command::Cdr(args) => cdr::run(&args),
        Command::Ledger(args) => ledger::run(&args),
        Command::Account(args) => account::run_account(&args),
        Command::Session(args) => account::run_session(&args),
        Command::Certs(args) => certs::run(&args),
        Command::Rate(args) => rate::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gyro: {}", report(&e));
            ExitCode::from(2)
        }
    }
}

/// An error and its causes, outermost first, joined by ": ", leaving out
/// a cause whose text the message already holds (an error that names its
/// cause in its own message, as most do, and also returns it as its
/// source would otherwise print it twice).
fn report(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn an_error_naming_its_cause_prints_the_cause_once() {
        /// Names its cause in its message and returns it as its source.
        #[derive(Debug)]
        struct Listen {
            source: std::io::Error,
        }
        impl std::fmt::Display for Listen {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "cannot listen on 127.0.0.1:3868: {}", self.source)
            }
        }
        impl std::error::Error for Listen {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.source)
            }
        }
        let io = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let text = io.to_string();
        let e = anyhow::Error::new(Listen { source: io }).context("starting");
        let r = super::report(&e);
        assert_eq!(
            r,
            format!("starting: cannot listen on 127.0.0.1:3868: {text}")
        );
        // A cause the message does not name is still printed.
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(super::report(&e), "outer: inner");
    }

    /// clap's own consistency checks over every subcommand (unique names
    /// and groups, valid requirements): a mistake would otherwise panic
    /// only when that subcommand's options are parsed in a debug build.
    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
