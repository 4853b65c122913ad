//! Command-line options of `gyro load`.

use std::time::Duration;

use clap::{Args, Parser, ValueEnum};

/// What the simulated clients do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scenario {
    /// Data sessions: CCR-I, `--updates` CCR-U with usage reports over the
    /// rating groups, then CCR-T.
    Data,
    /// SMS events: one-shot CCR-Event with Requested-Action DIRECT_DEBITING.
    Sms,
    /// Both: each new session is an SMS event with probability
    /// `--sms-ratio`, a data session otherwise.
    Mix,
    /// Data sessions that wait for credit: a session whose answer says its
    /// quota runs out (DIAMETER_CREDIT_LIMIT_REACHED, 4012, on a service,
    /// or a Final-Unit-Indication) stays open, as a PGW applying a
    /// redirect or restrict-access final unit action does, until the
    /// server's Re-Auth-Request; it answers RAA 2001, sends its CCR-Update
    /// at once and goes on to its normal end. Sessions still waiting when
    /// the run stops are ended with a CCR-Terminate. Each session place
    /// keeps one subscriber (place `n`, counted over all connections, uses
    /// `--subscriber-start` + `n` modulo `--subscribers`), so with
    /// `--subscribers` at least connections x window no two sessions share
    /// an account; a CCR-Initial refused with 4012 is tried again after a
    /// second. Meant for accounts with small balances topped up while the
    /// run goes on (`gyro account top-up`).
    Topup,
}

/// Which interface the load is sent over.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Diameter Gy (RFC 8506), the default.
    #[default]
    Diameter,
    /// 5G converged charging, Nchf_ConvergedCharging (TS 32.291) over
    /// HTTP/2 (h2c): the data scenario as an SMF sends it (`--target`
    /// defaults to 127.0.0.1:8585 then).
    Nchf,
}

impl Scenario {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Data => "data",
            Scenario::Sms => "sms",
            Scenario::Mix => "mix",
            Scenario::Topup => "topup",
        }
    }
}

/// In open loop each connection keeps at least this many seconds of its
/// share of the rate as session places.
const OPEN_LOOP_WINDOW_SECS: f64 = 0.02;

/// Options of the load generator.
///
/// Without `--rate` it runs closed loop: every connection keeps `--window`
/// requests in flight and sends the next one as soon as an answer frees a
/// place. With `--rate` it runs open loop: requests are scheduled at fixed
/// intended send times and latency is measured from the intended time, so a
/// slow server shows up as latency instead of quietly lowering the rate.
///
/// The run stops after `--duration` or `--count` requests, whichever comes
/// first (10 s when neither is given). With `--count` every session runs
/// to its planned end. When `--duration` ends the run (or Ctrl-C stops
/// it), no session starts any more and every session the server still
/// holds (its CCR-Initial was answered with success) is ended at once
/// with a CCR-Terminate, without pacing, within the window, for at most
/// twice `--timeout` (the drain). A CCR-Terminate refused with a protocol
/// error (3xxx, e.g. DIAMETER_TOO_BUSY) is sent again after a back-off as
/// a new request (the next CC-Request-Number: each number names one
/// request and one outcome); one unanswered is sent again with its
/// number. Drain requests are not part of the measured figures
/// (counts, rates, latency): the report counts them apart, with the
/// sessions finished in the drain, so the server is left with no open
/// sessions. Sessions that could not be finished (drain time spent,
/// connection lost, a second Ctrl-C) are reported as left open and make
/// the run fail (exit status 1). Sessions whose CCR-Initial was refused
/// or timed out need no CCR-Terminate; a session whose CCR-Update got a
/// protocol error (3xxx, not processed by the server) or no answer is
/// ended with a CCR-Terminate too.
///
/// Runtime threads default to the number of CPUs. On a small machine that
/// also runs the server, give each its own cores, for example
/// `taskset -c 0 gyro serve` and `taskset -c 1 gyro load --threads 1`.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct LoadArgs {
    /// Address of the credit-control server (host:port).
    #[arg(long, default_value = "127.0.0.1:3868")]
    pub target: String,

    /// Our Origin-Host (also the first part of every Session-Id). Each
    /// connection announces its own identity made from it: connection `n`
    /// (counted from 1) gets `-n` appended to the first label, so
    /// `load.gyro.test` becomes `load-1.gyro.test`, `load-2.gyro.test`, ...
    /// A server that follows RFC 6733's election (freeDiameter, for one)
    /// answers a second connection from an Origin-Host it already has with
    /// DIAMETER_ELECTION_LOST (5012), so one identity per connection is what
    /// lets `-c N` open N links there. See `--same-origin-host`.
    #[arg(long, default_value = "load.gyro.test")]
    pub origin_host: String,

    /// Announce `--origin-host` unchanged on every connection (for a server
    /// that admits only configured peers by name). Each run announces its
    /// start time as Origin-State-Id, so to gyro a later run with the same
    /// identity is the same gateway restarted: the sessions an earlier run
    /// left open (their Session-Ids begin with `--origin-host`) are
    /// released, and two such runs at once release each other's.
    #[arg(long)]
    pub same_origin_host: bool,

    /// Our Origin-Realm.
    #[arg(long, default_value = "gyro.test")]
    pub origin_realm: String,

    /// Destination-Realm of every CCR.
    #[arg(long, default_value = "gyro.test")]
    pub destination_realm: String,

    /// Destination-Host to put in every CCR (none by default).
    #[arg(long)]
    pub destination_host: Option<String>,

    /// Number of TCP connections (each is one Diameter peer connection).
    #[arg(long, short = 'c', default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub connections: u32,

    /// Requests in flight per connection at most (also the number of
    /// concurrent sessions per connection). In open loop (`--rate`) at
    /// least 20 ms worth of each connection's share of the rate, so that
    /// the window does not quietly lower the offered rate.
    #[arg(long, short = 'w', default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub window: u32,

    /// Target rate in requests per second over all connections (open loop).
    /// Without it, requests go as fast as the window allows (closed loop).
    #[arg(long, short = 'r', value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// How long to send (e.g. 10s, 500ms, 2m).
    #[arg(long, short = 'd', value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Leave the requests intended in the first DURATION of the run out of
    /// the latency figures (connections opening and starting their
    /// sessions); counts and the per-second series keep them. Default 0.
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    #[serde(default)]
    pub warmup: Duration,

    /// Total number of requests to send over all connections (at least
    /// 1). With data sessions (`data`, `topup`) it is rounded down to whole
    /// sessions (`--updates` + 2 requests each), dealt out to the
    /// connections, so it must cover one session at least.
    #[arg(long, short = 'n', value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,

    /// An unanswered request counts as a timeout after this long (above
    /// 0). The drain at the end of the run lasts twice this at most.
    #[arg(long, default_value = "5s", value_parser = parse_timeout)]
    pub timeout: Duration,

    /// Load threads, each driving its share of the connections (0 = one
    /// per CPU).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,

    /// First subscriber's E.164 number (MSISDN).
    #[arg(long, default_value_t = 46_700_000_000)]
    pub subscriber_start: u64,

    /// Number of subscribers: MSISDNs subscriber-start .. subscriber-start +
    /// subscribers - 1, picked at random for each new session.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub subscribers: u64,

    /// Also send an IMSI Subscription-Id (imsi-start + the subscriber's
    /// offset, 15 digits).
    #[arg(long)]
    pub imsi: bool,

    /// First IMSI when `--imsi` is given.
    #[arg(long, default_value_t = 1_010_000_000_000)]
    pub imsi_start: u64,

    /// Send Subscription-Id in every CCR, not only in CCR-I and CCR-Event.
    #[arg(long)]
    pub subscription_id_always: bool,

    /// What the clients do.
    #[arg(long, value_enum, default_value_t = Scenario::Data)]
    pub scenario: Scenario,

    /// Share of new sessions that are SMS events in the mix scenario (0..1).
    #[arg(long, default_value_t = 0.5, value_parser = parse_ratio)]
    pub sms_ratio: f64,

    /// CCR-U per data session (between CCR-I and CCR-T).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub updates: u32,

    /// Rating groups of a data session: one MSCC each.
    #[arg(long, value_delimiter = ',', default_value = "10,20", num_args = 1..)]
    pub rating_groups: Vec<u32>,

    /// Service-Context-Id of data sessions.
    #[arg(long, default_value = "32251@3gpp.org")]
    pub data_context: String,

    /// Service-Context-Id of SMS events.
    #[arg(long, default_value = "32274@3gpp.org")]
    pub sms_context: String,

    /// Service-Identifier to put in SMS events (none by default).
    #[arg(long)]
    pub sms_service_id: Option<u32>,

    /// CC-Total-Octets asked for in each Requested-Service-Unit.
    #[arg(long, default_value_t = 1_000_000)]
    pub requested_octets: u64,

    /// CC-Total-Octets reported in each Used-Service-Unit (a quarter as
    /// input, the rest as output).
    #[arg(long, default_value_t = 500_000)]
    pub used_octets: u64,

    /// CC-Time (seconds) reported in each Used-Service-Unit.
    #[arg(long, default_value_t = 10)]
    pub used_time: u32,

    /// Device-Watchdog interval Tw: a DWR is sent after this long without
    /// traffic (at least 6 s, RFC 3539's minimum).
    #[arg(long, default_value = "30s", value_parser = parse_watchdog)]
    pub watchdog: Duration,

    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,

    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Exit non-zero (1) when errors (non-2xxx results, timeouts, lost
    /// requests, protocol errors) exceed this share of the requests sent.
    /// A run that sent no request, or that left sessions open on the
    /// server (see the drain above), exits 1 whatever this is.
    #[arg(long, default_value_t = 0.01, value_parser = parse_ratio)]
    pub max_error_ratio: f64,
    /// Write every answer received to this file, one JSON object per line:
    /// {"session_id", "type" (CCR-I/U/T/E), "number", "result_code"} (and
    /// "request", "answer" with `--record-messages`), for checking a
    /// server's books against what its clients were told.
    #[arg(long, value_name = "FILE")]
    pub record: Option<std::path::PathBuf>,
    /// With `--record`: also write each request and its answer whole, as
    /// hex ("request", "answer"), so that a request can be sent again (a
    /// retransmission) and its answer compared byte for byte. Off by
    /// default: it copies every request.
    #[arg(long, requires = "record")]
    pub record_messages: bool,
    /// Also write the report as one self-contained HTML page to this file:
    /// throughput and latency percentiles per second, the latency
    /// distribution, Result-Codes, per request type tables, the command
    /// line, gyro's version, the machine and the server settings.
    #[arg(long, value_name = "FILE.html")]
    #[serde(default)]
    pub report: Option<std::path::PathBuf>,
    /// A server setting to show in the report, as KEY=VALUE (repeatable;
    /// e.g. `--server-setting durability=sync`).
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_setting)]
    #[serde(default)]
    pub server_setting: Vec<(String, String)>,
    /// Diameter over TLS (`--tls`, `--ca`, `--cert`, `--key`,
    /// `--server-name`).
    #[command(flatten)]
    #[serde(default)]
    pub tls: TlsOptions,
    /// The interface: `diameter` (Gy) or `nchf` (5G converged charging
    /// over HTTP/2, the data scenario only).
    #[arg(long, value_enum, default_value_t = Protocol::Diameter)]
    #[serde(default)]
    pub protocol: Protocol,
}

/// Diameter over TLS/TCP (RFC 6733 section 13): TLS starts at connect,
/// before the CER.
#[derive(Debug, Clone, Default, Args, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TlsOptions {
    /// Connect over TLS (the server's TLS port, 5658 by convention). The
    /// report counts the TLS handshakes and their time.
    #[arg(long = "tls", requires = "ca")]
    pub enabled: bool,
    /// CA certificates (PEM) that verify the server's certificate.
    #[arg(long, value_name = "FILE", requires = "enabled")]
    pub ca: Option<std::path::PathBuf>,
    /// Client certificate chain (PEM) to present; its DNS names must cover
    /// the Origin-Host of each connection (see `gyro certs`).
    #[arg(long, value_name = "FILE", requires_all = ["enabled", "key"])]
    pub cert: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["enabled", "cert"])]
    pub key: Option<std::path::PathBuf>,
    /// The DNS name the server's certificate must carry. Default: the host
    /// of `--target`.
    #[arg(long, value_name = "HOST", requires = "enabled")]
    pub server_name: Option<String>,
}

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    args: LoadArgs,
}

/// `KEY=VALUE` for `--server-setting`.
fn parse_setting(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

impl Default for LoadArgs {
    /// The command-line defaults.
    fn default() -> Self {
        Wrapper::parse_from(["load"]).args
    }
}

impl LoadArgs {
    /// The defaults, aimed at `target`, for a run of `duration`.
    pub fn for_target(target: impl Into<String>, duration: Duration) -> Self {
        LoadArgs {
            target: target.into(),
            duration: Some(duration),
            quiet: true,
            ..LoadArgs::default()
        }
    }

    /// The Origin-Host connection `idx` (counted from 0) announces: see
    /// `--origin-host` and `--same-origin-host`.
    pub fn connection_origin_host(&self, idx: u32) -> String {
        if self.same_origin_host {
            return self.origin_host.clone();
        }
        let n = u64::from(idx) + 1;
        match self.origin_host.split_once('.') {
            Some((first, rest)) => format!("{first}-{n}.{rest}"),
            None => format!("{}-{n}", self.origin_host),
        }
    }

    /// Session places (and requests in flight at most) per connection:
    /// `--window`, raised in open loop to 20 ms worth of the connection's
    /// share of `--rate` (at most 65,536).
    pub fn effective_window(&self) -> u32 {
        let w = self.window.max(1);
        match self.rate {
            Some(r) => {
                let per_conn = r / f64::from(self.connections.max(1));
                let need = (per_conn * OPEN_LOOP_WINDOW_SECS).ceil().min(65_536.0) as u32;
                w.max(need)
            }
            None => w,
        }
    }

    /// Requests a data session takes: CCR-I, the updates, CCR-T.
    pub fn data_session_len(&self) -> u64 {
        u64::from(self.updates) + 2
    }

    /// How long the drain at the end of the run may last: twice
    /// `--timeout` (an answer to a request in flight at the stop, then the
    /// session's CCR-Terminate).
    pub fn drain_time(&self) -> Duration {
        self.timeout.saturating_mul(2)
    }

    /// True when every session is a data session that takes
    /// [`LoadArgs::data_session_len`] requests (`--count` is dealt out in
    /// whole sessions then).
    pub fn whole_sessions(&self) -> bool {
        matches!(self.scenario, Scenario::Data | Scenario::Topup)
    }

    /// Checks the options that clap cannot check one by one (and those of
    /// a `LoadArgs` built in code): a run that could measure nothing, or
    /// not what was asked, is refused before any request is sent.
    pub fn validate(&self) -> Result<(), String> {
        check_timeout(self.timeout)?;
        check_watchdog(self.watchdog)?;
        if let (Some(d), w) = (self.duration, self.warmup) {
            if !w.is_zero() && w >= d {
                return Err(format!(
                    "--warmup {} is not shorter than --duration {}: no latency would be measured",
                    humantime::format_duration(w),
                    humantime::format_duration(d)
                ));
            }
        }
        if let Some(n) = self.count {
            if n == 0 {
                return Err("--count must be at least 1".to_string());
            }
            let len = self.data_session_len();
            if self.whole_sessions() && n < len {
                return Err(format!(
                    "--count {n} is less than one data session ({len} requests: CCR-I, {} CCR-U, CCR-T); \
                     ask for {len} or more, or use fewer --updates",
                    self.updates
                ));
            }
        }
        if self.protocol == Protocol::Nchf && !NCHF_SCENARIOS.contains(&self.scenario) {
            let names: Vec<&str> = NCHF_SCENARIOS.iter().map(|s| s.name()).collect();
            return Err(format!(
                "--protocol nchf does not run the {} scenario: it runs {} only",
                self.scenario.name(),
                names.join(", ")
            ));
        }
        Ok(())
    }
}

/// RFC 3539's smallest Device-Watchdog interval Tw.
pub const MIN_WATCHDOG: Duration = Duration::from_secs(6);

/// The scenarios `--protocol nchf` runs.
const NCHF_SCENARIOS: [Scenario; 1] = [Scenario::Data];

/// Parses a duration: a plain number of seconds (`10`, `1.5`) or
/// humantime's syntax (`10s`, `250ms`, `2m`, `1h 30m`, `1s 500ms`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("invalid duration {s:?}: out of range"));
    }
    humantime::parse_duration(s)
        .map_err(|e| format!("invalid duration {s:?} ({e}): expected e.g. 10s, 500ms, 2m"))
}

/// `--timeout`: a duration above 0.
fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    check_timeout(d)?;
    Ok(d)
}

fn check_timeout(d: Duration) -> Result<(), String> {
    if d.is_zero() {
        Err("--timeout must be above 0: every request would time out at once".to_string())
    } else {
        Ok(())
    }
}

/// `--watchdog`: at least [`MIN_WATCHDOG`].
fn parse_watchdog(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    check_watchdog(d)?;
    Ok(d)
}

fn check_watchdog(d: Duration) -> Result<(), String> {
    if d < MIN_WATCHDOG {
        Err(format!(
            "--watchdog {} is below RFC 3539's minimum Tw of 6 s",
            humantime::format_duration(d)
        ))
    } else {
        Ok(())
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("invalid rate {s:?}"))?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("rate must be above 0, got {s:?}"))
    }
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("invalid ratio {s:?}"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("ratio must be between 0 and 1, got {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_server_defaults() {
        let a = LoadArgs::default();
        assert_eq!(a.target, "127.0.0.1:3868");
        assert_eq!(a.origin_host, "load.gyro.test");
        assert_eq!(a.origin_realm, "gyro.test");
        assert_eq!(a.destination_realm, "gyro.test");
        assert_eq!((a.subscriber_start, a.subscribers), (46_700_000_000, 1000));
        assert_eq!(a.rating_groups, vec![10, 20]);
        assert_eq!(a.updates, 3);
        assert_eq!(a.timeout, Duration::from_secs(5));
        assert_eq!(a.scenario, Scenario::Data);
        assert_eq!(a.max_error_ratio, 0.01);
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(
            parse_duration("1s 500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("50us").unwrap(), Duration::from_micros(50));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn thesis_benchmark_command_parses() {
        let w = Wrapper::parse_from(["load", "--connections", "50", "--count", "3000000"]);
        assert_eq!(w.args.connections, 50);
        assert_eq!(w.args.count, Some(3_000_000));
        let w = Wrapper::parse_from(["load", "--rating-groups", "1,2,3", "--scenario", "mix"]);
        assert_eq!(w.args.rating_groups, vec![1, 2, 3]);
        assert_eq!(w.args.scenario, Scenario::Mix);
        let w = Wrapper::parse_from(["load", "--scenario", "topup"]);
        assert_eq!(w.args.scenario, Scenario::Topup);
        assert_eq!(w.args.scenario.name(), "topup");
    }

    #[test]
    fn each_connection_gets_its_own_origin_host_unless_asked_not_to() {
        let mut a = LoadArgs::default();
        assert_eq!(a.connection_origin_host(0), "load-1.gyro.test");
        assert_eq!(a.connection_origin_host(49), "load-50.gyro.test");
        a.origin_host = "client".into();
        assert_eq!(a.connection_origin_host(1), "client-2");
        a.same_origin_host = true;
        assert_eq!(a.connection_origin_host(7), "client");
    }

    #[test]
    fn open_loop_window_holds_20ms_of_the_rate() {
        let mut a = LoadArgs::default();
        assert_eq!(a.effective_window(), 128);
        a.rate = Some(200_000.0);
        a.connections = 1;
        assert_eq!(a.effective_window(), 4000);
        a.connections = 50;
        assert_eq!(a.effective_window(), 128);
        a.rate = Some(1.0e12);
        assert_eq!(a.effective_window(), 65_536);
    }
}
