//! `gyro load`: a Diameter credit-control client and load generator.
//!
//! It works against any credit-control server (RFC 8506, 3GPP Gy/Ro): it
//! opens `--connections` connections, exchanges capabilities (CER/CEA),
//! answers the server's DWR, and runs many concurrent sessions per
//! connection, at most `--window` requests in flight each:
//!
//! * data sessions: CCR-I, `--updates` CCR-U reporting usage per rating
//!   group (MSCC with USU and a new RSU), CCR-T; a session sends its next
//!   request only when the previous answer has arrived;
//! * SMS events: CCR-Event with Requested-Action DIRECT_DEBITING;
//! * a mix of both;
//! * `topup`: data sessions that wait for credit. A session whose answer
//!   says its quota runs out (4012 on a service, or a
//!   Final-Unit-Indication) stays open until the server's Re-Auth-Request,
//!   then sends its CCR-Update and goes on; the report counts the waits,
//!   the sessions that continued after an RAR and those still waiting at
//!   the end (ended then with a CCR-Terminate).
//!
//! The server's Re-Auth-Request is answered with RAA 2001 and followed at
//! once by the session's CCR-Update, its Abort-Session-Request with ASA
//! 2001 and the session's CCR-Terminate (5002 for a session not held).
//!
//! Each connection announces its own Origin-Host (`load-1.gyro.test`,
//! `load-2.gyro.test`, ... from `--origin-host`; `--same-origin-host` keeps
//! one), so servers that apply RFC 6733's election accept every link, and
//! each ends the run with a DPR (Disconnect-Cause
//! DO_NOT_WANT_TO_TALK_TO_YOU) and waits, bounded, for the DPA.
//!
//! When `--duration` (or Ctrl-C) stops the run, no new session starts and
//! every session the server still holds is ended at once with its
//! CCR-Terminate (the drain, bounded by twice `--timeout`), so the server
//! is left with nothing open or reserved; the drain is reported apart
//! ([`Drain`]) and sessions it could not end fail the run (see
//! [`LoadArgs`]).
//!
//! The connections are shared out among `--threads` load threads, each a
//! single-threaded runtime of its own that drives its connections.
//!
//! Closed loop (as fast as the window allows) or open loop (`--rate`, with
//! latency measured from the intended send time so a slow server cannot
//! hide behind a lower rate). Open loop has no 1 ms timer floor: each load
//! thread has one sub-millisecond timer, woken at most every 50 us, that
//! releases the requests due by then to their connections, those of one
//! 50 us quantum to one connection (see the `pacing` module); the report says what rate was actually offered
//! (`offered_rate`) and how late requests left after their intended time
//! (`send_lag_us`). The [`Report`] has counts, rates, latency percentiles
//! per request type (hdrhistogram, microseconds), counts per Result-Code,
//! and what the generator's own threads cost (`generator`, with a
//! `load_bound` flag when one was busy 90 % of the run or more).
//!
//! The benchmark of the thesis is one command,
//! `gyro load --connections 50 --count 3000000`. Until the binary is wired,
//! the `load` example takes the same options, and the `fake_ocs` example is
//! a trivial server to measure the generator itself (on a 2-core machine,
//! pin each to its own core):
//!
//! ```text
//! cargo build --release -p gyro-load --examples
//! taskset -c 0 target/release/examples/fake_ocs 127.0.0.1:3869 60 &
//! taskset -c 1 target/release/examples/load --target 127.0.0.1:3869 \
//!     --threads 1 --connections 50 --count 3000000
//! ```
//!
//! Steady state allocates nothing per request: requests are encoded into a
//! reused buffer per connection, answers are read in place, and session
//! state lives in a fixed vector of slots indexed by the low bits of the
//! Hop-by-Hop Identifier.
//!
//! Programmatic use:
//!
//! ```no_run
//! use std::time::Duration;
//! let args = gyro_load::LoadArgs::for_target("127.0.0.1:3868", Duration::from_secs(5));
//! let report = gyro_load::run(args).expect("load run");
//! report.print_human();
//! ```

mod args;
mod ccr;
mod conn;
mod nchf;
mod pacing;
pub mod report;
mod stats;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::Barrier;

pub use args::{parse_duration, LoadArgs, Protocol, Scenario};
pub use stats::{
    Drain, Generator, Latency, PercentilePoint, Report, Series, Sessions, TypeReport, LOAD_BOUND,
};

use conn::{Live, Plan};
use pacing::Pace;
use stats::{ConnStats, RunInfo, ThreadTime};

/// How long a run lasts when neither `--duration` nor `--count` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// Runs a load test on threads of its own (`--threads` load threads, each
/// a single-threaded runtime) and returns the report, with the CPU time
/// the load threads used. Ctrl-C stops the run early; the report covers
/// what was done. Must not be called from inside a tokio runtime: use
/// [`run_async`] there.
pub fn run(args: LoadArgs) -> anyhow::Result<Report> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(run_inner(args, true, true))
}

/// Runs a load test on the current tokio runtime and returns the report
/// (for tests). The `--threads` groups of connections run as tasks of
/// that runtime, and the report has no CPU figures. Ctrl-C is left to the
/// caller.
pub async fn run_async(args: LoadArgs) -> anyhow::Result<Report> {
    run_inner(args, false, false).await
}

/// `gyro load`: runs, prints the report (JSON on stdout with `--json`,
/// text otherwise) and returns the exit status of [`exit_code`]. The
/// options are checked, and the `--report` file created, before any
/// request is sent.
pub fn run_cli(args: LoadArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    args.validate().map_err(anyhow::Error::msg)?;
    let json = args.json;
    let max = args.max_error_ratio;
    let page = match &args.report {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("creating the --report file {}", path.display()))?;
            Some((path.clone(), file, report::PageInfo::gather(&args)))
        }
        None => None,
    };
    let report = run(args)?;
    if let Some((path, mut file, info)) = page {
        file.write_all(report::html(&report, &info).as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if json {
        println!("{}", report.to_json());
    } else {
        report.print_human();
    }
    let d = &report.drain;
    if d.sessions_left_open > 0 {
        eprintln!(
            "gyro load: {} session(s) left open on the server ({}): their credit stays reserved until the server's Tcc ends them",
            d.sessions_left_open,
            d.left_open_reason.as_deref().unwrap_or("no reason recorded")
        );
    }
    if report.connections_opened < report.connections {
        eprintln!(
            "gyro load: {} of {} connection(s) could not be opened ({}): their share of the run was not sent",
            report.connections - report.connections_opened,
            report.connections,
            report
                .first_connection_error
                .as_deref()
                .unwrap_or("no reason recorded")
        );
    }
    if report.sent == 0 {
        eprintln!("gyro load: no request was sent");
    } else if report.exceeds_error_ratio(max) {
        eprintln!(
            "gyro load: error ratio {:.4} is above --max-error-ratio {max}",
            report.error_ratio()
        );
    }
    Ok(exit_code(&report, max))
}

/// Failure (1) when the run sent no request, could not open one of its
/// connections (the run asked for was not made), left sessions open on
/// the server (see [`Drain`]) or the report's error ratio is above
/// `max_error_ratio`, success otherwise.
pub fn exit_code(report: &Report, max_error_ratio: f64) -> ExitCode {
    if report.sent == 0
        || report.connections_opened < report.connections
        || report.drain.sessions_left_open > 0
        || report.exceeds_error_ratio(max_error_ratio)
    {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

async fn run_inner(
    args: LoadArgs,
    handle_signals: bool,
    own_threads: bool,
) -> anyhow::Result<Report> {
    args.validate().map_err(anyhow::Error::msg)?;
    if args.protocol == Protocol::Nchf {
        return nchf::run(args, handle_signals).await;
    }
    anyhow::ensure!(args.connections > 0, "--connections must be at least 1");
    anyhow::ensure!(args.window > 0, "--window must be at least 1");
    anyhow::ensure!(args.subscribers > 0, "--subscribers must be at least 1");
    anyhow::ensure!(
        args.rate.is_none_or(|r| r.is_finite() && r > 0.0),
        "--rate must be above 0"
    );
    anyhow::ensure!(
        args.updates <= 1_000_000,
        "--updates must be at most 1000000"
    );
    let addr = tokio::net::lookup_host(&args.target)
        .await
        .with_context(|| format!("resolving {}", args.target))?
        .next()
        .with_context(|| format!("{} has no address", args.target))?;
    let duration = match (args.duration, args.count) {
        (None, None) => Some(DEFAULT_DURATION),
        (d, _) => d,
    };
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let seed = (wall.as_nanos() as u64) ^ (u64::from(std::process::id()) << 40) | 1;
    let record = match &args.record {
        Some(path) => Some(std::sync::Mutex::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    let tls = conn::tls_client(&args)?;
    let plan = Arc::new(Plan {
        tls,
        builder: ccr::Builder::new(&args),
        addr,
        base: Instant::now(),
        duration,
        session_high: wall.as_secs() as u32,
        session_low: (seed >> 16) as u32 & 0xFFFF_F000,
        seed,
        start: std::sync::OnceLock::new(),
        record,
        args,
    });
    let a = &plan.args;
    let live = Arc::new(Live::default());
    let n = a.connections as usize;
    let threads = match a.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        t => t,
    }
    .min(n);
    // Every connection, this task and each thread's pacer start together.
    let pacers = if a.rate.is_some() { threads } else { 0 };
    let barrier = Arc::new(Barrier::new(n + 1 + pacers));
    let groups: Vec<Group> = (0..threads)
        .map(|g| Group::new(g, threads, &plan, &live, &barrier))
        .collect();
    let runtimes = if own_threads {
        let mut rts = Vec::with_capacity(threads);
        for _ in 0..threads {
            rts.push(
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("starting a load thread's runtime")?,
            );
        }
        rts
    } else {
        Vec::new()
    };
    let mut runtimes = runtimes.into_iter();
    let pending: Vec<_> = groups
        .into_iter()
        .map(|g| {
            let members = g.members.clone();
            (members, g.start(runtimes.next()))
        })
        .collect();
    barrier.wait().await;
    let start = *plan.start.get_or_init(Instant::now);
    let signals = handle_signals.then(|| {
        let live = live.clone();
        tokio::spawn(async move {
            // The first Ctrl-C stops the run and drains its sessions, the
            // second gives up the drain.
            if tokio::signal::ctrl_c().await.is_ok() {
                live.stop.store(true, Ordering::Relaxed);
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                live.abort.store(true, Ordering::Relaxed);
            }
        })
    });
    let progress = (!a.quiet && std::io::stderr().is_terminal())
        .then(|| spawn_progress(a, duration, live.clone(), start));
    let mut conns = Vec::with_capacity(n);
    let mut times = Vec::with_capacity(threads);
    for (members, done) in pending {
        match done.await {
            Ok(done) => {
                conns.extend(done.conns);
                times.push(done.time);
            }
            Err(_) => {
                for _ in members {
                    let mut s = ConnStats::new();
                    s.connection_error("load thread failed".to_string());
                    conns.push(s);
                }
                times.push(None);
            }
        }
    }
    let end = Instant::now();
    if let Some((pb, task)) = progress {
        task.abort();
        pb.finish_and_clear();
    }
    if let Some(s) = signals {
        s.abort();
    }
    Ok(Report::build(
        RunInfo {
            target: a.target.clone(),
            scenario: a.scenario.name(),
            connections: a.connections,
            window: a.effective_window(),
            target_rate: a.rate,
            duration,
            start,
            end,
            threads: times.into_iter().collect(),
        },
        &conns,
    ))
}

/// One load thread's share of the connections: connections `g`, `g +
/// threads`, `g + 2 * threads`, ... and, in open loop, the same share of
/// the rate with one pacer.
#[derive(Clone)]
struct Group {
    members: Vec<u32>,
    pace: Option<Arc<Pace>>,
    plan: Arc<Plan>,
    live: Arc<Live>,
    barrier: Arc<Barrier>,
}

/// What a load thread hands back: its connections' counters and, when it
/// ran on a thread of its own, its CPU and wall time.
struct GroupDone {
    conns: Vec<ConnStats>,
    time: Option<ThreadTime>,
}

impl Group {
    fn new(
        g: usize,
        threads: usize,
        plan: &Arc<Plan>,
        live: &Arc<Live>,
        barrier: &Arc<Barrier>,
    ) -> Self {
        let n = plan.args.connections;
        let members: Vec<u32> = (g as u32..n).step_by(threads).collect();
        let pace = plan.args.rate.map(|r| {
            let rate = r * members.len() as f64 / f64::from(n);
            // Threads start a fraction of a slot apart, so that their
            // slots interleave instead of coinciding.
            let phase = (g as f64 / threads as f64 / rate).min(1.0e6);
            Arc::new(Pace::new(
                rate,
                Duration::from_secs_f64(phase),
                members.len(),
            ))
        });
        Group {
            members,
            pace,
            plan: plan.clone(),
            live: live.clone(),
            barrier: barrier.clone(),
        }
    }

    /// Starts the group on `rt` in a thread of its own, or as a task of
    /// the current runtime without one (or when no thread can be started).
    fn start(
        self,
        rt: Option<tokio::runtime::Runtime>,
    ) -> tokio::sync::oneshot::Receiver<GroupDone> {
        if let Some(rt) = rt {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let group = self.clone();
            let spawned = std::thread::Builder::new()
                .name("gyro-load".to_string())
                .spawn(move || {
                    let _ = tx.send(rt.block_on(group.run(true)));
                });
            if spawned.is_ok() {
                return rx;
            }
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let _ = tx.send(self.run(false).await);
        });
        rx
    }

    /// Runs the group's connections and pacer to the end. With `timed`,
    /// measures the CPU time of the thread it runs on (all of it its own).
    async fn run(self, timed: bool) -> GroupDone {
        let cpu0 = timed.then(thread_cpu).flatten();
        let t0 = Instant::now();
        let tasks: Vec<_> = self
            .members
            .iter()
            .enumerate()
            .map(|(i, &idx)| {
                tokio::spawn(conn::run_connection(
                    idx,
                    self.plan.clone(),
                    self.live.clone(),
                    self.barrier.clone(),
                    self.pace.clone().map(|p| (p, i)),
                ))
            })
            .collect();
        let pacer = self.pace.clone().map(|pace| {
            let (plan, barrier) = (self.plan.clone(), self.barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let start = *plan.start.get_or_init(Instant::now);
                pacing::run_pacer(pace, start).await;
            })
        });
        let mut conns = Vec::with_capacity(tasks.len());
        for t in tasks {
            match t.await {
                Ok(s) => conns.push(s),
                Err(e) => {
                    let mut s = ConnStats::new();
                    s.connection_error(format!("connection task failed: {e}"));
                    conns.push(s);
                }
            }
        }
        if let Some(p) = pacer {
            p.abort();
        }
        let time = cpu0.zip(thread_cpu()).map(|(c0, c1)| ThreadTime {
            cpu: c1.saturating_sub(c0),
            wall: t0.elapsed(),
        });
        GroupDone { conns, time }
    }
}

/// CPU time of the calling thread, user + system.
fn thread_cpu() -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        use rustix::time::{clock_gettime, ClockId};
        let t = clock_gettime(ClockId::ThreadCPUTime);
        Some(Duration::new(
            u64::try_from(t.tv_sec).ok()?,
            u32::try_from(t.tv_nsec).ok()?,
        ))
    }
    #[cfg(not(target_os = "linux"))]
    None
}

fn spawn_progress(
    a: &LoadArgs,
    duration: Option<Duration>,
    live: Arc<Live>,
    start: Instant,
) -> (ProgressBar, tokio::task::JoinHandle<()>) {
    let by_count = a.count.is_some();
    let len = match (a.count, duration) {
        (Some(n), _) => n,
        (None, Some(d)) => d.as_millis() as u64,
        (None, None) => 0,
    };
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let template = if by_count {
        "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}"
    } else {
        "{spinner} [{elapsed_precise}] {wide_bar} {msg}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        pb.set_style(style);
    }
    let bar = pb.clone();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut last = (Instant::now(), 0u64);
        loop {
            tick.tick().await;
            let now = Instant::now();
            let sent = live.sent.load(Ordering::Relaxed);
            let answered = live.answered.load(Ordering::Relaxed);
            let errors = live.errors.load(Ordering::Relaxed);
            let dt = now.duration_since(last.0).as_secs_f64();
            let rate = if dt > 0.0 {
                answered.saturating_sub(last.1) as f64 / dt
            } else {
                0.0
            };
            last = (now, answered);
            if by_count {
                bar.set_position(sent.min(len));
            } else {
                bar.set_position((now.duration_since(start).as_millis() as u64).min(len));
            }
            bar.set_message(format!(
                "sent {sent}  answered {answered}  {rate:.0} answers/s  errors {errors}"
            ));
        }
    });
    (pb, task)
}
