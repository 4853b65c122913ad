//! `gyro serve` with `[storage] backend = "redis-cluster"`: the balances
//! live in a Redis Cluster shared by several gyro nodes
//! ([`gyro_ocs::RedisCreditControl`]); this node also releases the
//! reservations of sessions past their Tcc deadline and exports the CDR
//! streams it holds the lease of into `<data_dir>/cdr/`, in the background.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use gyro_charging::Timestamp;
use gyro_ocs::{RedisCreditControl, RedisServing, RedisTelemetry};
use gyro_server::Config;
use gyro_store::redis::RedisLedger;
use gyro_store::DataDirLock;
use tracing::{info, warn};

use crate::serve::{load_charging, Running};

/// The Redis ledger's client and this node's background work.
pub struct RedisRunning {
    runtime: Arc<tokio::runtime::Runtime>,
    stop: Arc<AtomicBool>,
    background: Option<std::thread::JoinHandle<()>>,
    /// The counters `/metrics` shows.
    pub telemetry: Arc<RedisTelemetry>,
    _lock: DataDirLock,
}

impl RedisRunning {
    /// Stops the background work (after the server has stopped).
    pub fn stop(mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.background.take() {
            let _ = t.join();
        }
        let s = self.telemetry.ledger_stats();
        info!(
            steps = s.steps,
            pipelines = s.pipelines,
            alone = s.alone,
            redirected = s.redirected,
            failed = s.failed,
            "Redis ledger totals"
        );
        // The client's runtime goes last (the application, dropped with
        // the server, holds it too).
        drop(self.runtime);
    }
}

/// Starts `gyro serve` on the Redis Cluster ledger.
pub fn start(config: Config) -> anyhow::Result<Running> {
    if config.nchf.enabled() {
        anyhow::bail!(
            "[nchf] is not served with storage.backend = \"redis-cluster\" yet; \
             remove [nchf] or use backend = \"embedded\""
        );
    }
    let (charging, source) = load_charging(&config)?;
    let workers = config.worker_count();
    let data_dir = config.server.data_dir.clone();
    let lock = DataDirLock::acquire(&data_dir)
        .with_context(|| format!("taking data directory {}", data_dir.display()))?;
    let section = &config.storage.redis;
    let mut options = crate::ledger::redis_options(section)?;
    options.node_id = section
        .node_id
        .clone()
        .unwrap_or_else(|| config.server.origin_host.clone());
    options.response_timeout = Duration::from_millis(section.response_timeout_ms);
    let node_id = options.node_id.clone();
    let namespace = options.namespace.clone();
    let tcc = Duration::from_secs(charging.engine.supervision_secs.max(1));
    let serving = RedisServing {
        tcc,
        ..RedisServing::default()
    };
    let started = Instant::now();
    let admin = gyro_admin::AdminServer::start_configured(&config.admin)?;
    let app = RedisCreditControl::connect(
        charging.clone(),
        &config.server.origin_host,
        &config.server.origin_realm,
        options,
        serving,
        workers,
    )?;
    info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        node_id = %node_id,
        namespace = %namespace,
        replicas_ack = section.replicas_ack,
        tcc_secs = tcc.as_secs(),
        "Redis Cluster ledger connected"
    );
    let ledger = app.ledger();
    let runtime = app.runtime();
    let telemetry = app.telemetry();
    let totals = app.totals();
    let accounts = app.accounts();
    let cdr_dir = data_dir.join("cdr");
    let (handle, _control) = gyro_server::start_controlled(config.clone(), app)?;
    if let Some(a) = &admin {
        a.ready_redis(telemetry.clone(), totals.clone(), accounts);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let background = Background {
        ledger,
        rt: runtime.handle().clone(),
        telemetry: telemetry.clone(),
        cdr_dir: cdr_dir.clone(),
        expire_every: Duration::from_millis(section.expire_interval_ms),
        export_every: Duration::from_millis(section.export_interval_ms),
        export_max: section.export_max_records,
        lease: Duration::from_millis(section.export_lease_ms),
        stop: stop.clone(),
    };
    let background = std::thread::Builder::new()
        .name("gyro-redis-bg".into())
        .spawn(move || background.run())?;
    let addrs: Vec<String> = handle.local_addrs().iter().map(|a| a.to_string()).collect();
    info!(
        listen = %addrs.join(", "),
        workers,
        origin_host = %config.server.origin_host,
        origin_realm = %config.server.origin_realm,
        data_dir = %data_dir.display(),
        charging = %source,
        "gyro serving Diameter credit control (application 4) on the Redis Cluster ledger"
    );
    info!(
        dir = %cdr_dir.display(),
        expire_interval_ms = section.expire_interval_ms,
        export_interval_ms = section.export_interval_ms,
        "CDRs of the slot streams this node holds are exported as JSON Lines \
         (cdr-r<slot>-<first>-<last>.jsonl, renamed into place once fsynced)"
    );
    Ok(Running {
        handle,
        totals,
        cdr_dir: Some(cdr_dir),
        admin,
        nchf: None,
        nchf_tls: None,
        redis: Some(RedisRunning {
            runtime,
            stop,
            background: Some(background),
            telemetry,
            _lock: lock,
        }),
    })
}

/// Periodic expiry and export.
struct Background {
    ledger: Arc<RedisLedger>,
    rt: tokio::runtime::Handle,
    telemetry: Arc<RedisTelemetry>,
    cdr_dir: PathBuf,
    expire_every: Duration,
    export_every: Duration,
    export_max: usize,
    lease: Duration,
    stop: Arc<AtomicBool>,
}

impl Background {
    fn run(self) {
        let mut next_expire = Instant::now() + self.expire_every;
        let mut next_export = Instant::now() + self.export_every;
        // Errors are logged when they start and when they stop, not at
        // every round.
        let mut failing = false;
        while !self.stop.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            let now = Instant::now();
            let mut errors = Vec::new();
            let mut ran = false;
            if !self.expire_every.is_zero() && now >= next_expire {
                ran = true;
                next_expire = now + self.expire_every;
                let at = Timestamp(unix_ms());
                match self.rt.block_on(self.ledger.expire_due(at, None, 1000)) {
                    Ok(r) => {
                        if r.sessions > 0 {
                            info!(
                                sessions = r.sessions,
                                reservations = r.reservations,
                                money = r.money,
                                "released the reservations of sessions past their Tcc deadline"
                            );
                        }
                        self.telemetry
                            .expired_sessions
                            .fetch_add(r.sessions, Relaxed);
                        errors.extend(r.errors.into_iter().map(|e| e.to_string()));
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if !self.export_every.is_zero() && now >= next_export {
                ran = true;
                next_export = now + self.export_every;
                let r = self.rt.block_on(self.ledger.export_all(
                    &self.cdr_dir,
                    self.export_max,
                    self.lease,
                ));
                let records: usize = r.files.iter().map(|f| f.records).sum();
                self.telemetry
                    .exported_cdrs
                    .fetch_add(records as u64, Relaxed);
                errors.extend(r.errors.into_iter().map(|e| e.to_string()));
            }
            if !errors.is_empty() {
                self.telemetry
                    .background_errors
                    .fetch_add(errors.len() as u64, Relaxed);
                if !failing {
                    warn!(
                        error = %errors[0],
                        errors = errors.len(),
                        "Redis expiry/export failed; retrying every round"
                    );
                }
                failing = true;
            } else if failing && ran {
                info!("Redis expiry/export works again");
                failing = false;
            }
        }
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
