//! `gyro serve`: the credit-control server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use gyro_charging::ChargingConfig;
use gyro_ocs::{CreditControl, ShardTotals, Storage};
use gyro_server::config::{
    CdrCompressionMode, CdrFileFormat, DurabilityMode, SnapshotSourceMode, StorageSection,
};
use gyro_server::{Config, ServerHandle};
use gyro_store::{CdrCompression, CdrFormat, Durability, SnapshotSource, StoreOptions};
use tracing::{info, warn};

/// Options of `gyro serve`.
#[derive(Debug, Clone, Default, clap::Args)]
#[group(id = "serve_options")]
pub struct Args {
    /// Configuration file (TOML; see config/gyro.toml for every key and its
    /// default). Without it gyro runs on its embedded default.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on (repeatable); replaces server.listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Vec<SocketAddr>,
    /// Data directory; replaces server.data_dir.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Worker threads (0 = one per CPU); replaces server.workers.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Charging configuration (tariffs, accounts); replaces server.charging.
    #[arg(long, value_name = "FILE")]
    pub charging: Option<PathBuf>,
}

/// The server configuration from the file and the command line.
pub fn load_config(args: &Args) -> anyhow::Result<Config> {
    let mut config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Config::from_toml_str(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => Config::default(),
    };
    if !args.listen.is_empty() {
        config.server.listen = args.listen.clone();
    }
    if let Some(d) = &args.data_dir {
        config.server.data_dir = d.clone();
    }
    if let Some(w) = args.workers {
        config.server.workers = w;
    }
    if let Some(c) = &args.charging {
        config.server.charging = Some(c.clone());
    }
    config.check()?;
    Ok(config)
}

/// The charging configuration named by `config`, or the embedded demo.
pub fn load_charging(config: &Config) -> anyhow::Result<(ChargingConfig, String)> {
    match &config.server.charging {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let c = ChargingConfig::from_toml_str(&text)
                .with_context(|| format!("in {}", path.display()))?;
            warn_if_empty(&c, path);
            Ok((c, path.display().to_string()))
        }
        None => Ok((
            ChargingConfig::from_toml_str(gyro_ocs::DEMO_CHARGING)?,
            "embedded demo".to_string(),
        )),
    }
}

/// Warns when a charging file can charge nothing: without rates every
/// CCR is refused, and without accounts every CCR is refused until the
/// admin API creates some. (Both are legal: accounts may come from the
/// admin API, a file may be a work in progress.)
fn warn_if_empty(c: &ChargingConfig, path: &Path) {
    let file = path.display().to_string();
    if c.tariffs.is_empty() && c.plans.values().all(|p| p.rates.is_empty()) {
        warn!(
            file,
            "the charging file has no [[tariff]] and no [plans.*] rate: every CCR will be refused"
        );
    }
    if c.accounts.is_empty() && c.account_ranges.iter().all(|r| r.count == 0) {
        warn!(
            file,
            "the charging file has no [[account]] and no [[account_range]]: every CCR will be \
             refused until accounts are created through the admin API"
        );
    }
}

/// A started server and what it was started with.
pub struct Running {
    /// The server.
    pub handle: ServerHandle,
    /// Per-shard charging totals.
    pub totals: std::sync::Arc<[ShardTotals]>,
    /// Where CDRs go.
    pub cdr_dir: Option<PathBuf>,
    /// The operator API, when it runs.
    pub admin: Option<gyro_admin::AdminServer>,
    /// The Nchf_ConvergedCharging listener(s), when `[nchf]` names one.
    pub nchf: Option<gyro_nchf::NchfServer>,
    /// The TLS settings Nchf over TLS uses when Diameter has no TLS
    /// listener (SIGHUP reloads them too).
    pub nchf_tls: Option<std::sync::Arc<gyro_server::tls::TlsContext>>,
    /// With the Redis Cluster ledger: its client and background work.
    pub redis: Option<crate::serve_redis::RedisRunning>,
}

/// Storage as the configuration's `[storage]` section says, under
/// `data_dir` (`durability = "none"` writes nothing).
fn storage(section: &StorageSection, data_dir: &Path) -> Storage {
    let durability = match section.durability {
        DurabilityMode::Async => Durability::Async {
            interval: std::time::Duration::from_millis(section.async_interval_ms),
        },
        DurabilityMode::Sync | DurabilityMode::None => Durability::Sync,
    };
    let options = StoreOptions {
        durability,
        snapshot_every_records: section.snapshot_every_records,
        cdr_max_bytes: section.cdr_max_bytes,
        cdr_max_age: std::time::Duration::from_secs(section.cdr_max_age_secs),
        cdr_format: match section.cdr_format {
            CdrFileFormat::Jsonl => CdrFormat::JsonLines,
            CdrFileFormat::Csv => CdrFormat::Csv,
        },
        cdr_compression: match section.cdr_compression {
            CdrCompressionMode::None => CdrCompression::None,
            CdrCompressionMode::Zstd => CdrCompression::Zstd {
                level: section.cdr_zstd_level,
            },
        },
        snapshot_source: match section.snapshot_source {
            SnapshotSourceMode::Memory => SnapshotSource::Memory,
            SnapshotSourceMode::Journal => SnapshotSource::Journal,
        },
        ..StoreOptions::default()
    };
    match section.durability {
        DurabilityMode::None => Storage::in_memory(),
        _ => Storage::on_disk(data_dir, options),
    }
}

/// Starts the server and logs what it runs with.
pub fn start(config: Config) -> anyhow::Result<Running> {
    // Before anything is created on disk: a bad configuration (too many
    // workers, a TLS file that cannot be read) leaves no trace.
    config.check()?;
    if !config.tls.listen.is_empty() || config.nchf.tls_listen.is_some() {
        gyro_server::tls::TlsContext::load(&config.tls)?;
    }
    raise_fd_limit(&config);
    if config.storage.backend == gyro_server::config::StorageBackend::RedisCluster {
        return crate::serve_redis::start(config);
    }
    let (charging, source) = load_charging(&config)?;
    let workers = config.worker_count();
    let data_dir: &Path = &config.server.data_dir;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating data directory {}", data_dir.display()))?;
    let storage = storage(&config.storage, data_dir);
    match config.storage.durability {
        DurabilityMode::Async => warn!(
            interval_ms = config.storage.async_interval_ms,
            "durability = \"async\": answers leave before their charging is on disk; \
             a machine crash loses up to this interval of charging"
        ),
        DurabilityMode::None => warn!(
            "durability = \"none\": NOTHING IS WRITTEN; balances live in memory and \
             are lost at exit (for measurements only)"
        ),
        DurabilityMode::Sync => {}
    }
    let started = std::time::Instant::now();
    let admin = gyro_admin::AdminServer::start_configured(&config.admin)?;
    let app = CreditControl::new(
        charging.clone(),
        &config.server.origin_host,
        &config.server.origin_realm,
        storage,
        workers,
    )?;
    for (shard, report) in app.recovery_reports().iter().enumerate() {
        if let Some(r) = report {
            info!(
                shard,
                snapshot = ?r.snapshot_generation,
                journal_frames = r.journal_frames,
                journal_effects = r.journal_effects,
                torn_journal_bytes = r.torn_journal_bytes,
                "ledger recovered"
            );
        }
    }
    info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "ledgers opened"
    );
    let totals = app.totals();
    let cdr_dir = app.cdr_dir();
    let subscribers = app.subscribers();
    let (handle, control) = gyro_server::start_controlled(config.clone(), app)?;
    let (nchf, nchf_tls) = start_nchf(&config, &handle, &control, &subscribers, workers)?;
    if let Some(a) = &admin {
        a.ready(gyro_admin::Backend {
            control,
            subscribers,
            totals: totals.clone(),
            tls: handle.tls(),
            nchf: nchf.as_ref().map(gyro_nchf::NchfServer::shared_stats),
        });
    }
    let addrs: Vec<String> = handle.local_addrs().iter().map(|a| a.to_string()).collect();
    if let Some(tls) = handle.tls() {
        let c = tls.certificate();
        let addrs: Vec<String> = handle.tls_addrs().iter().map(|a| a.to_string()).collect();
        info!(
            listen = %addrs.join(", "),
            dns_names = %c.dns_names.join(", "),
            fingerprint_sha256 = %c.fingerprint_sha256,
            client_auth = ?config.tls.client_auth,
            "Diameter over TLS (RFC 6733 section 13; SIGHUP or POST /v1/tls/reload reloads the certificate)"
        );
    }
    info!(
        listen = %addrs.join(", "),
        workers,
        origin_host = %config.server.origin_host,
        origin_realm = %config.server.origin_realm,
        data_dir = %data_dir.display(),
        validation = %config.validation.mode,
        "gyro serving Diameter credit control (application 4)"
    );
    let accounts: u64 = charging.accounts.len() as u64
        + charging.account_ranges.iter().map(|r| r.count).sum::<u64>();
    info!(
        charging = %source,
        tariffs = charging.tariffs.len(),
        accounts,
        "charging configuration"
    );
    for t in &charging.tariffs {
        info!(
            tariff = %t.name,
            service_context = %t.service_context,
            rating_group = ?t.rating_group,
            "tariff"
        );
    }
    for r in &charging.account_ranges {
        info!(
            first_e164 = r.e164_first.as_deref().unwrap_or("-"),
            count = r.count,
            balance = r.balance,
            "accounts"
        );
    }
    if let Some(d) = &cdr_dir {
        let (format, suffix) = match config.storage.cdr_format {
            CdrFileFormat::Jsonl => ("JSON Lines", "jsonl"),
            CdrFileFormat::Csv => ("CSV", "csv"),
        };
        let (format, suffix) = match config.storage.cdr_compression {
            CdrCompressionMode::None => (format.to_owned(), suffix.to_owned()),
            CdrCompressionMode::Zstd => (format!("{format} (zstd)"), format!("{suffix}.zst")),
        };
        info!(
            dir = %d.display(),
            durability = %config.storage.durability,
            "CDRs are written as {format} under shard-<i>/; closed files (*.{suffix}) may be picked up"
        );
    }
    Ok(Running {
        handle,
        totals,
        cdr_dir,
        admin,
        nchf,
        nchf_tls,
        redis: None,
    })
}

/// Starts the Nchf_ConvergedCharging listener(s) `[nchf]` names, on the
/// running server's shards. Nchf over TLS uses the Diameter TLS settings
/// in use, or loads `[tls]` itself when Diameter has no TLS listener
/// (returned, so SIGHUP can reload it).
#[allow(clippy::type_complexity)]
fn start_nchf(
    config: &Config,
    handle: &ServerHandle,
    control: &gyro_server::Control<gyro_ocs::CreditShard>,
    subscribers: &std::sync::Arc<gyro_ocs::Subscribers>,
    workers: usize,
) -> anyhow::Result<(
    Option<gyro_nchf::NchfServer>,
    Option<std::sync::Arc<gyro_server::tls::TlsContext>>,
)> {
    if !config.nchf.enabled() {
        return Ok((None, None));
    }
    let (tls, own) = match (config.nchf.tls_listen, handle.tls()) {
        (None, _) => (None, None),
        (Some(_), Some(t)) => (Some(t), None),
        (Some(_), None) => {
            let t = std::sync::Arc::new(gyro_server::tls::TlsContext::load(&config.tls)?);
            (Some(t.clone()), Some(t))
        }
    };
    let server = gyro_nchf::NchfServer::start(
        &config.nchf,
        workers,
        tls,
        gyro_nchf::Backend {
            control: control.clone(),
            subscribers: subscribers.clone(),
        },
        config.limits.max_queue_wait_ms,
    )?;
    info!(
        service_context = %config.nchf.service_context,
        "Nchf sessions are rated under this Service-Context-Id ([nchf] service_context)"
    );
    Ok((Some(server), own))
}

/// Raises the soft limit on open files to the hard one and says so; warns
/// when `limits.max_connections` cannot fit in it.
pub(crate) fn raise_fd_limit(config: &Config) {
    match gyro_server::raise_fd_limit() {
        Ok(l) => {
            if l.before < l.soft {
                info!(
                    soft = l.soft,
                    hard = l.hard,
                    was = l.before,
                    "open files limit (RLIMIT_NOFILE): soft limit raised to the hard limit"
                );
            } else {
                info!(
                    soft = l.soft,
                    hard = l.hard,
                    "open files limit (RLIMIT_NOFILE): soft limit already at the hard limit"
                );
            }
            // Every connection is one descriptor; the shards' files, the
            // listeners and the runtime need some more.
            let spare = 64 + 16 * config.worker_count() as u64;
            let max = config.limits.max_connections as u64;
            if max + spare > l.soft {
                warn!(
                    max_connections = max,
                    open_files_limit = l.soft,
                    "limits.max_connections does not fit in the open files limit: \
                     connections beyond about {} will be refused for want of descriptors",
                    l.soft.saturating_sub(spare)
                );
            }
        }
        Err(e) => warn!(error = %e, "cannot raise the open files limit (RLIMIT_NOFILE)"),
    }
}

/// SIGINT and SIGTERM (stop) and SIGHUP (reload the TLS certificate),
/// caught from the moment this is created (so a signal that arrives while
/// the server starts is not lost).
pub struct Signals {
    rt: tokio::runtime::Runtime,
    #[cfg(unix)]
    streams: (
        tokio::signal::unix::Signal,
        tokio::signal::unix::Signal,
        tokio::signal::unix::Signal,
    ),
}

impl Signals {
    /// Starts catching SIGINT, SIGTERM and SIGHUP.
    pub fn catch() -> anyhow::Result<Signals> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let streams = rt.block_on(async {
                Ok::<_, std::io::Error>((
                    signal(SignalKind::interrupt())?,
                    signal(SignalKind::terminate())?,
                    signal(SignalKind::hangup())?,
                ))
            })?;
            Ok(Signals { rt, streams })
        }
        #[cfg(not(unix))]
        Ok(Signals { rt })
    }

    /// Waits for SIGINT or SIGTERM, calling `on_hangup` at every SIGHUP
    /// meanwhile.
    pub fn wait(mut self, mut on_hangup: impl FnMut()) {
        #[cfg(unix)]
        {
            let (int, term, hup) = &mut self.streams;
            self.rt.block_on(async {
                loop {
                    tokio::select! {
                        _ = int.recv() => break,
                        _ = term.recv() => break,
                        _ = hup.recv() => on_hangup(),
                    }
                }
            });
        }
        #[cfg(not(unix))]
        {
            let _ = &mut on_hangup;
            let _ = self.rt.block_on(tokio::signal::ctrl_c());
        }
    }
}

/// SIGHUP: reads the TLS certificate, key and CA bundle again (new
/// connections use them; open ones keep theirs). A reload that fails
/// keeps the certificate in use.
fn reload_tls(tls: Option<&gyro_server::tls::TlsContext>) {
    match tls.map(|t| t.reload()) {
        None => info!("SIGHUP: no [tls] listener, nothing to reload"),
        Some(Ok(c)) => info!(
            dns_names = %c.dns_names.join(", "),
            fingerprint_sha256 = %c.fingerprint_sha256,
            "SIGHUP: TLS certificate reloaded; new connections use it"
        ),
        Some(Err(e)) => warn!(
            error = %e,
            "SIGHUP: TLS certificate NOT reloaded; the one in use stays"
        ),
    }
}

/// Runs `gyro serve` until SIGINT/SIGTERM, then shuts down gracefully.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let config = load_config(args)?;
    let signals = Signals::catch()?;
    let mut running = start(config)?;
    crate::alloc::start_trimmer(std::time::Duration::from_secs(10));
    let tls = running.handle.tls();
    let nchf_tls = running.nchf_tls.clone();
    signals.wait(|| {
        reload_tls(tls.as_deref());
        if nchf_tls.is_some() {
            reload_tls(nchf_tls.as_deref());
        }
    });
    if let Some(mut nchf) = running.nchf.take() {
        info!("shutting down Nchf: GOAWAY on every connection, answering what is in flight");
        nchf.shutdown();
        let s = nchf.stats();
        let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        info!(
            answered_2xx = load(&s.charged),
            answered_4xx = load(&s.refused),
            answered_5xx = load(&s.failed),
            connections = load(&s.connections),
            refused_connections = load(&s.refused_connections),
            "Nchf totals"
        );
    }
    info!("shutting down: DPR to every peer, answering what is in flight");
    running.handle.shutdown();
    // Counted once the workers are done: requests answered while they
    // drained count too.
    let workers = running.handle.join();
    if let Some(redis) = running.redis.take() {
        redis.stop();
    }
    drop(running.admin);
    for (i, w) in workers.iter().enumerate() {
        info!(
            worker = i,
            requests = w.requests,
            from_other_workers = w.from_other_workers,
            too_busy = w.too_busy(),
            connections = w.connections,
            refused_connections = w.refused_connections + w.refused_peers,
            "worker totals"
        );
    }
    let requests: u64 = workers.iter().map(|w| w.requests).sum();
    let sum = |f: fn(&ShardTotals) -> u64| running.totals.iter().map(f).sum::<u64>();
    let commits = sum(|t| t.commits.load(std::sync::atomic::Ordering::Relaxed));
    let syncs = sum(|t| t.syncs.load(std::sync::atomic::Ordering::Relaxed));
    let records = sum(|t| t.records.load(std::sync::atomic::Ordering::Relaxed));
    let failed = sum(|t| t.failed_commits.load(std::sync::atomic::Ordering::Relaxed));
    info!(
        commits,
        syncs,
        records,
        failed_commits = failed,
        records_per_commit = records as f64 / commits.max(1) as f64,
        "durability totals"
    );
    #[cfg(feature = "count-allocations")]
    {
        let n = crate::alloc_count::ALLOCATIONS.load(std::sync::atomic::Ordering::Relaxed);
        info!(
            allocations = n,
            per_request = n as f64 / requests.max(1) as f64,
            "heap allocations since start"
        );
    }
    info!(requests, "stopped");
    Ok(ExitCode::SUCCESS)
}
